"""One fix text in every format: text `fix:`, JSON `fix` / `remedy`, SARIF `fixes` (whose
replacements rebuild exactly the file `--fix` writes) and `properties.fix`, GitHub's `fix:`."""

from __future__ import annotations

import json

import pytest
from _fix_util import CASES, project, run


def _apply_sarif(text: str, change: dict) -> str:
    lines = text.splitlines(keepends=True)
    # replacements are given against the original lines: apply bottom-up
    for rep in sorted(change["replacements"], key=lambda r: -r["deletedRegion"]["startLine"]):
        reg = rep["deletedRegion"]
        a, b = reg["startLine"] - 1, reg["endLine"] - 1
        lines[a:b] = rep["insertedContent"]["text"].splitlines(keepends=True)
    return "".join(lines)


def test_sarif_fixes_rebuild_the_fixed_file(tmp_path, monkeypatch, capsys):
    for name in ("rl102_keep", "rl105_keep_object", "rl101_tuple"):
        proj = project(tmp_path / name, name)
        monkeypatch.chdir(proj)
        code, out, _ = run(
            capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "sarif"
        )
        sarif_run = json.loads(out)["runs"][0]
        assert all(
            r["helpUri"] == f"docs/rules/{r['id']}.md" for r in sarif_run["tool"]["driver"]["rules"]
        )
        res = sarif_run["results"][0]
        (fix,) = res["fixes"]
        (change,) = fix["artifactChanges"]
        assert change["artifactLocation"] == {"uri": "pkg/m.py", "uriBaseId": "%SRCROOT%"}
        before = (CASES / name / "before.py").read_text()
        assert _apply_sarif(before, change) == (CASES / name / "after.py").read_text()
        assert fix["description"]["text"] == res["properties"]["fix"]


def test_one_fix_text_everywhere(tmp_path, monkeypatch, capsys):
    proj = project(tmp_path, "rl102_keep")
    monkeypatch.chdir(proj)
    _, out, _ = run(capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "json")
    (f,) = json.loads(out)["findings"]
    desc = f["remedy"]["description"]
    assert f["fix"] == desc and f["remedy"]["applicability"] == "safe"
    shown = f"[safe: --fix] {desc}"
    _, text, _ = run(capsys, "check", "pkg", "--no-cache", "--show-fixes")
    assert f"    fix: {shown}\n" in text
    _, gh, _ = run(capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "github")
    assert f"%0Afix: {shown}%0Asee: docs/rules/RL102.md" in gh.replace("%3A", ":")
    _, sarif, _ = run(capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "sarif")
    assert json.loads(sarif)["runs"][0]["results"][0]["properties"]["fix"] == shown


@pytest.mark.parametrize("flags", [(), ("--no-fixes",), ("--show-fixes", "--no-fixes")])
def test_a_plain_check_computes_no_fixes(tmp_path, monkeypatch, capsys, flags):
    """Fixes are opt-in (their validation re-audits a patched copy): a plain `check`, and
    `--no-fixes` over `--show-fixes`, leave the report as before fixes existed."""
    proj = project(tmp_path, "rl102_keep")
    monkeypatch.chdir(proj)
    _, out, _ = run(capsys, "check", "pkg", "--no-cache", "--format", "json", *flags)
    (f,) = json.loads(out)["findings"]
    assert "remedy" not in f and "fix_patch" not in f
    assert f["fix"].startswith("reuse the existing allocation: keep the first `self.workspace`")
    assert "existing=" not in f["fix"]
