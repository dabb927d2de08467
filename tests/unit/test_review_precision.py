"""scripts/review_precision.py: joins findings with reviewer labels and measures precision."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "review_precision.py"
_spec = importlib.util.spec_from_file_location("review_precision", SCRIPT)
rp = importlib.util.module_from_spec(_spec)
sys.modules["review_precision"] = rp  # dataclasses look their module up
_spec.loader.exec_module(rp)

K = "pkg/kernels/k.py"
H = "pkg/utils/helper.py"


def _finding(fp, rule, path, line, target, conf="high", symbol="K.pwal", trace=()):
    return {
        "rule": rule,
        "path": path,
        "line": line,
        "symbol": symbol,
        "target": target,
        "confidence": conf,
        "fingerprint": fp,
        "trace": [{"path": p, "line": ln, "note": "step"} for p, ln in trace],
    }


def _label(fp, rule, path, line, target, label, symbol="K.pwal", cites=(K + ":1",)):
    cite_list = ", ".join(json.dumps(c) for c in cites)
    return (
        f"[[finding]]\nfingerprint = {json.dumps(fp)}\nrule = {json.dumps(rule)}\n"
        f"path = {json.dumps(path)}\nsymbol = {json.dumps(symbol)}\n"
        f'target = {json.dumps(target)}\nline = {line}\nconfidence = "high"\n'
        f'label = {json.dumps(label)}\nreason = "because"\ncites = [{cite_list}]\n\n'
    )


@pytest.fixture
def pair(tmp_path):
    """Seven findings; six labels. The engine has since re-fingerprinted `f4` and moved the
    helper store `f5` into its caller; `f7` was never labelled; `gone` is no longer reported."""
    findings = [
        _finding("f1", "RL101", K, 10, "layer.a"),  # real, high
        _finding("f2", "RL101", K, 11, "layer.b"),  # masked, high
        _finding("f3", "RL102", K, 12, "self.c", conf="low"),  # safe, low
        _finding("f4new", "RL105", K, 13, "self.k", conf="medium"),  # safe, by site key
        # reported at the caller now; the helper line it was labelled at is in the trace
        _finding("f5new", "RL101", K, 40, "layer.ws", symbol="K.pwal", trace=[(H, 7), (K, 40)]),
        # the helper called its module `mod`; the caller calls it `layer`
        _finding("f6", "RL101", K, 14, "layer.d"),  # safe, high
        _finding("f7", "RL106", K, 15, "layer.e.data"),  # unlabelled
    ]
    labels = (
        '[review]\ntitle = "T"\n\n'
        + _label("f1", "RL101", K, 10, "layer.a", "real")
        + _label("f2", "RL101", K, 11, "layer.b", "masked")
        + _label("f3", "RL102", K, 12, "self.c", "safe")
        + _label("f4old", "RL105", K, 9, "self.k", "safe")
        + _label("f5old", "RL101", H, 7, "mod.ws", "real", symbol="helper")
        + _label("f6", "RL101", K, 14, "layer.d", "safe").replace(
            'label = "safe"', 'label = "safe"\ncause = "run-once guard"'
        )
        + _label("gone", "RL101", K, 99, "layer.z", "unsure")
    )
    fpath = tmp_path / "findings.json"
    fpath.write_text(json.dumps({"findings": findings}))
    lpath = tmp_path / "labels.toml"
    lpath.write_text(labels)
    return fpath, lpath


def test_counting_and_precision(pair):
    fpath, lpath = pair
    matches = rp.join(rp.load_findings(str(fpath)), rp.load_review(str(lpath)).labels)
    got = {m.finding["fingerprint"]: (m.label.label if m.label else None) for m in matches}
    assert got == {
        "f1": "real",
        "f2": "masked",
        "f3": "safe",
        "f4new": "safe",
        "f5new": "real",
        "f6": "safe",
        "f7": None,
    }
    p = rp.precision(matches)
    # real 2 (f1, f5new), masked 1, safe 3: masked counts as real in the headline
    assert p["overall"] == "3/6 = 50.0%"
    assert p["masked_excluded"] == "2/5 = 40.0%"
    # high confidence (current finding's confidence): f1 real, f2 masked, f5new real, f6 safe
    assert p["high"] == "3/4 = 75.0%"
    assert p["high_masked_excluded"] == "2/3 = 66.7%"


def test_fallback_keys_are_reported(pair):
    fpath, lpath = pair
    matches = rp.join(rp.load_findings(str(fpath)), rp.load_review(str(lpath)).labels)
    how = {m.finding["fingerprint"]: m.how for m in matches}
    assert how["f1"] == "fingerprint"
    assert how["f4new"] == "site"  # same rule, path, symbol, target; new fingerprint and line
    assert how["f5new"] == "trace"  # labelled helper line is now a trace step of the caller


def test_site_key_prefers_the_nearest_labelled_line(tmp_path):
    findings = [_finding("new", "RL101", K, 21, "self.w")]
    labels = _label("a", "RL101", K, 10, "self.w", "safe") + _label(
        "b", "RL101", K, 20, "self.w", "real"
    )
    (tmp_path / "f.json").write_text(json.dumps({"findings": findings}))
    (tmp_path / "l.toml").write_text(labels)
    [m] = rp.join(
        rp.load_findings(str(tmp_path / "f.json")),
        rp.load_review(str(tmp_path / "l.toml")).labels,
    )
    assert (m.label.label, m.how) == ("real", "site")


def test_unlabelled_listing_and_check_exit(pair, capsys):
    fpath, lpath = pair
    assert rp.main([str(fpath), str(lpath)]) == 0
    out = capsys.readouterr().out
    assert "unlabelled (1):" in out
    assert "f7 RL106 pkg/kernels/k.py:15 layer.e.data" in out
    assert "labels that match no current finding (1; by cause: unsure 1):" in out and "gone" in out
    assert "f4new RL105" in out and "(site:" in out
    assert "causes: run-once guard 1" in out
    assert rp.main([str(fpath), str(lpath), "--check"]) == 1
    capsys.readouterr()
    assert rp.main([str(fpath), str(lpath), "--skeleton"]) == 0
    skel = capsys.readouterr().out
    assert skel.count("[[finding]]") == 1 and 'fingerprint = "f7"' in skel


def test_markdown_has_numbers_and_rows(pair, tmp_path, capsys):
    fpath, lpath = pair
    out = tmp_path / "review.md"
    rp.main([str(fpath), str(lpath), "--markdown", str(out)])
    capsys.readouterr()
    text = out.read_text()
    assert "masked counted as real: 3/6 = 50.0%" in text
    assert "| real (by moved location) |" in text and "| safe (by site key) |" in text
    assert "**unlabelled**" in text
    assert "Labels whose finding is no longer reported" in text


def test_sample_rank_is_per_finding(tmp_path):
    base = [_finding(f"f{i}", "RL109", K, i, f"layer.x{i}") for i in range(1, 30)]
    sample = {"seed": 7, "size": 5, "exclude": [f"{K}:3"]}
    first = [f["fingerprint"] for f in rp.draw_sample(base, sample)]
    assert len(first) == 5 and "f3" not in first
    # dropping one sampled finding keeps the other four and adds the next rank
    dropped = first[0]
    second = [
        f["fingerprint"]
        for f in rp.draw_sample([f for f in base if f["fingerprint"] != dropped], sample)
    ]
    assert second[:4] == first[1:] and dropped not in second
    # the order of the input does not matter
    assert [f["fingerprint"] for f in rp.draw_sample(base[::-1], sample)] == first


def test_bad_input_and_bad_cites(tmp_path, capsys):
    (tmp_path / "f.json").write_text("{not json")
    (tmp_path / "l.toml").write_text(_label("a", "RL101", K, 1, "x", "real"))
    assert rp.main([str(tmp_path / "f.json"), str(tmp_path / "l.toml")]) == 2
    assert "cannot read findings JSON" in capsys.readouterr().err
    (tmp_path / "f.json").write_text(json.dumps({"findings": []}))
    (tmp_path / "l.toml").write_text(_label("a", "RL101", K, 1, "x", "maybe"))
    assert rp.main([str(tmp_path / "f.json"), str(tmp_path / "l.toml")]) == 2
    assert "label 'maybe' is not one of" in capsys.readouterr().err
    src = tmp_path / "src"
    (src / "pkg" / "kernels").mkdir(parents=True)
    (src / K).write_text("a\nb\n")
    (tmp_path / "l.toml").write_text(
        _label("a", "RL101", K, 1, "x", "real", cites=(K + ":2", K + ":3", "pkg/none.py:1"))
    )
    args = [str(tmp_path / "f.json"), str(tmp_path / "l.toml"), "--sources", str(src)]
    assert rp.main(args) == 0
    out = capsys.readouterr().out
    assert "bad cites (2):" in out and f"{K}:3 is past the end (2 lines)" in out
    assert rp.main([*args, "--check"]) == 1


def test_triage_fields_compared_with_labels(pair):
    fpath, lpath = pair
    findings = rp.load_findings(str(fpath))
    labels = rp.load_review(str(lpath)).labels
    assert rp.triage_line(rp.join(findings, labels)) == ""  # schema 1.0: no triage fields
    for f in findings:
        f.update(masked=None, guard=None, reader="k.py:1 in K.apply")
    by_fp = {f["fingerprint"]: f for f in findings}
    by_fp["f2"]["masked"] = "the next load fails"  # agrees (labelled masked)
    by_fp["f1"]["masked"] = "the next load fails"  # labelled real
    by_fp["f3"]["guard"] = "if self.done: return"  # agrees (labelled safe)
    by_fp["f5new"]["reader"] = None  # real without a reader
    line = rp.triage_line(rp.join(findings, labels))
    assert line == (
        "triage fields vs labels: masked said on 1 of 1 masked, and on 1 others; "
        "guard said on 1 of 3 safe, and on 0 real/masked; "
        "no reader on 1 real/masked, a reader on 3 safe"
    )


def test_a_shifted_occurrence_does_not_steal_a_label(tmp_path):
    """The engine starts reporting a store at :5 of the same target; the occurrence index
    moves fingerprint `old` from the :9 store to the :5 one."""
    findings = [
        _finding("old", "RL102", K, 5, "self.s"),  # new store, inherits the old fingerprint
        _finding("shifted", "RL102", K, 9, "self.s"),  # the labelled store, new fingerprint
    ]
    labels = _label("old", "RL102", K, 9, "self.s", "safe")
    (tmp_path / "f.json").write_text(json.dumps({"findings": findings}))
    (tmp_path / "l.toml").write_text(labels)
    m5, m9 = rp.join(
        rp.load_findings(str(tmp_path / "f.json")),
        rp.load_review(str(tmp_path / "l.toml")).labels,
    )
    assert (m9.label.label, m9.how) == ("safe", "site")  # matched on its own line
    assert m5.label is None  # another store of the target: it needs its own label


def test_site_key_fallback_stays_near(tmp_path):
    labels = _label("gone", "RL101", K, 9, "self.w", "safe")
    (tmp_path / "l.toml").write_text(labels)
    for line, expect in ((12, "safe"), (30, None)):
        (tmp_path / "f.json").write_text(
            json.dumps({"findings": [_finding("new", "RL101", K, line, "self.w")]})
        )
        [m] = rp.join(
            rp.load_findings(str(tmp_path / "f.json")),
            rp.load_review(str(tmp_path / "l.toml")).labels,
        )
        assert (m.label.label if m.label else None) == expect


def test_class_duplicate_and_gate_precision(pair, tmp_path, capsys):
    """`class` and `duplicate_of` are carried to the summary and the table; gate-failing
    precision counts only findings whose `reader` names an apply-time read."""
    fpath, lpath = pair
    findings = json.loads(fpath.read_text())["findings"]
    for f in findings:
        f["reader"] = "k.py:1 in K.apply" if f["fingerprint"] in ("f1", "f3", "f6") else None
    fpath.write_text(json.dumps({"findings": findings}))
    text = lpath.read_text()
    text = text.replace(
        'fingerprint = "f3"', 'fingerprint = "f3"\nclass = "5 host CPU scalar"', 1
    ).replace('fingerprint = "f2"', 'fingerprint = "f2"\nduplicate_of = "f1"', 1)
    lpath.write_text(text)
    review = rp.load_review(str(lpath))
    by_fp = {lb.fingerprint: lb for lb in review.labels}
    assert by_fp["f3"].klass == "5 host CPU scalar" and by_fp["f2"].duplicate_of == "f1"
    matches = rp.join(rp.load_findings(str(fpath)), review.labels)
    p = rp.precision(matches)
    # reader on f1 (real), f3 (safe), f6 (safe)
    assert p["gate"] == "1/3 = 33.3%"
    out = tmp_path / "r.md"
    assert rp.main([str(fpath), str(lpath), "--markdown", str(out)]) == 0
    summary = capsys.readouterr().out
    assert "precision, gate-failing (a reader found, 3 findings): 1/3 = 33.3%" in summary
    assert "safe by class: 5 host CPU scalar 1" in summary
    assert "duplicates (same storage as another finding): 1, 1 of them next to a" in summary
    assert "high: real 2 masked 1 safe 1 unsure 0 (3/4 = 75.0%)" in summary
    md = out.read_text()
    assert "| safe (class 5) |" in md and "| masked, duplicate of f1 |" in md


def test_a_label_folded_into_another_finding_is_named(pair, tmp_path, capsys):
    """A labelled finding the engine folded into another (`also`) is listed as folded, with
    its host, not as a finding the engine stopped reporting."""
    fpath, lpath = pair
    findings = json.loads(fpath.read_text())["findings"]
    findings[0]["also"] = [
        {"rule": "RL101", "path": K, "line": 99, "target": "layer.z", "fingerprint": "gone"}
    ]
    fpath.write_text(json.dumps({"findings": findings}))
    out = tmp_path / "r.md"
    assert rp.main([str(fpath), str(lpath), "--markdown", str(out)]) == 0
    text = capsys.readouterr().out
    assert "gone RL101 pkg/kernels/k.py:99 layer.z (unsure) folded into f1" in text
    md = out.read_text()
    assert "1 of them are folded into a reported finding" in md
    assert "| unsure, folded into f1 |" in md
