"""Issue 27: a fix is fixed when a plain re-audit of the written tree says so. `--fix` and
`--diff` report `N fixed, M remaining, K new` from a fresh audit of the tree the fixes make;
`fix_status` says what happened to each finding; a folded store left over is `partial`."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from _fix_util import NAMES, project, run

from reload_lint.findings import Finding
from reload_lint.fix.outcome import tally

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
            assert f["fix_status"].split(":")[0] in ("partial", "refused", "none"), f


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
