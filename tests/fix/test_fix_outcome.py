"""Issue 27: a fix is fixed when a plain re-audit of the written tree says so. `--fix` and
`--diff` report `N fixed, M remaining, K new` from a fresh audit of the tree the fixes make;
`fix_status` says what happened to each finding, always `applied` / `refused: <reason>` /
`none: <reason>`; a finding whose folded store is left over is not fixed (`refused: ...`)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from _fix_util import NAMES, project, run

from reload_lint.findings import Finding
from reload_lint.fix.outcome import VOCABULARY, tally

SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "findings.schema.json").read_text()
)


def _f(fp: str, also=(), line=1, path="m.py") -> Finding:
    return Finding(
        rule="RL102",
        path=path,
        line=line,
        column=1,
        end_line=line,
        symbol="A.f",
        target=f"self.{fp}",
        message="",
        fingerprint=fp,
        also=[{"fingerprint": a, "target": f"self.{a}"} for a in also],
    )


def test_tally_counts_a_folded_store_as_partial_never_fixed():
    a, b, c = _f("a", also=["a2"]), _f("b"), _f("c")
    after = [_f("a2"), _f("c"), _f("z", line=9)]
    oc = tally([a, b, c], after, {"m.py": [(8, 9, "self.b")]})
    assert [f.fingerprint for f in oc.fixed] == ["b"]
    assert [f.fingerprint for f in oc.partial] == ["a"]
    assert [g.fingerprint for g in oc.remaining] == ["a2", "c"]
    assert [g.fingerprint for g in oc.new] == ["z"]
    assert "`self.b`" in oc.cause[id(after[2])]
    assert oc.summary(3) == "Found 3 findings (1 fixed, 2 remaining, 1 new)."
    # two folded stores left: three remaining continue the two findings not fixed
    a = _f("a", also=["a2", "a3"])
    oc = tally([a, b, c], [_f("a2"), _f("a3"), _f("c")])
    assert oc.summary(3) == (
        "Found 3 findings (1 fixed, 3 remaining, 0 new). The 3 remaining continue the 2 not "
        "fixed (a store folded into a finding is reported on its own once that finding's own "
        "store is fixed)."
    )


def test_a_partial_fix_and_its_left_stores_are_refused_in_the_vocabulary():
    """H200-free reproduction of vLLM 0.33.0's RL105 `self.moe_kernel` (nvfp4): its own store
    fixed, its folded `_fc2_input_scale` / `w13_input_scale` still reported on their own."""
    from reload_lint.fix.command import mark

    class Patched:
        refused = None
        has_patch = True
        recipe = None

    host = _f("k", also=["s1", "s2"], line=270, path="nvfp4.py")
    host.also[0].update(path="b12x.py", line=125)
    host.also[1].update(line=264)
    host.remedy = Patched()
    after = [_f("s1", line=125, path="b12x.py"), _f("s2", line=264, path="nvfp4.py")]
    oc = tally([host], after)
    mark([host], after, oc, unsafe=True)
    assert host.fix_status == (
        "refused: its own store is fixed, but the re-audit still reports stores folded into it: "
        "`self.s1` (b12x.py:125), `self.s2` (nvfp4.py:264)"
    )
    for g in after:
        assert g.fix_status.startswith("refused: folded into RL102 `self.k` (nvfp4.py:270)")
    for f in [host, *after]:
        assert VOCABULARY.match(f.fix_status), f.fix_status
    assert not VOCABULARY.match("partial: the primary store is fixed")


def test_fix_json_has_fix_status_and_validates(tmp_path, monkeypatch, capsys):
    for name in NAMES:
        proj = project(tmp_path / name, name)
        monkeypatch.chdir(proj)
        code, out, err = run(
            capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes", "--format", "json"
        )
        report = json.loads(out)
        jsonschema.validate(report, SCHEMA)
        # what is reported is the re-audit's: nothing listed is `applied`
        for f in report["findings"]:
            assert VOCABULARY.match(f["fix_status"]), f
            assert not f["fix_status"].startswith("applied"), f


def test_show_fixes_marks_refused_and_manual(tmp_path, monkeypatch, capsys):
    proj = project(tmp_path, "refused_still_reported")
    monkeypatch.chdir(proj)
    code, out, _ = run(capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "json")
    statuses = [f.get("fix_status") for f in json.loads(out)["findings"]]
    assert any(s and s.startswith("refused: ") for s in statuses), statuses


def test_diff_reports_the_reaudit_figures(tmp_path, monkeypatch, capsys):
    proj = project(tmp_path, "rl102_keep")
    monkeypatch.chdir(proj)
    code, patch, err = run(capsys, "check", "pkg", "--no-cache", "--diff")
    assert code == 1 and patch
    assert "Would fix 1 finding (0 remaining, 0 new)." in err


def test_every_fix_status_of_a_fix_run_over_the_corpus_is_in_the_vocabulary(
    tmp_path, monkeypatch, capsys
):
    """The whole fix corpus (tests/fix/corpus/) as one package, fixed in one run: every
    `fix_status` the report carries, and every one `--show-fixes` gives before, is one of the
    three documented forms (docs/findings.md `fix_status`)."""
    import shutil

    corpus = Path(__file__).parent / "corpus"
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for case in sorted(corpus.glob("*.py")):
        shutil.copy2(case, pkg / case.name)
    monkeypatch.chdir(tmp_path)
    argv = ["check", "pkg", "--no-cache", "--format", "json", "--exit-zero"]
    _, out, _ = run(capsys, *argv, "--show-fixes")
    before = json.loads(out)["findings"]
    _, out, err = run(capsys, *argv, "--fix", "--unsafe-fixes")
    after = json.loads(out)
    jsonschema.validate(after, SCHEMA)
    # a fix run gives every finding it reports a status; `--show-fixes` those it already knows
    statuses = [f["fix_status"] for f in after["findings"]]
    statuses += [f["fix_status"] for f in before if "fix_status" in f]
    assert len(before) > 20 and after["findings"], err
    bad = [s for s in statuses if not VOCABULARY.match(s)]
    assert bad == [], bad
