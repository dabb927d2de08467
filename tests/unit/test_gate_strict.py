"""The gate fails what the design promises: a finding whose apply-time reader was found fails
(exit 1, SARIF `error`, `::error`); one with no reader found is a warning (exit 0, SARIF
`warning`, `::warning`) unless `--strict` or `[tool.reload-lint] strict = true`."""

from __future__ import annotations

import json

import pytest
from _gate_util import FakeEngine, finding, fingerprinted

from reload_lint.cli import main


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n" * 50)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _read():
    return finding("pkg/a.py", 10, target="layer.perm")


def _unread():
    return finding("pkg/a.py", 20, target="layer.workspace", reader=None)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_finding_without_a_reader_is_a_warning(proj, capsys, monkeypatch):
    FakeEngine(fingerprinted([_unread()])).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg")
    assert code == 0
    assert "layer.workspace" in out and "[warning: no apply-time reader found]" in out
    assert "Found 1 finding (1 warning: no apply-time reader found)." in out


def test_a_finding_with_a_reader_fails(proj, capsys, monkeypatch):
    FakeEngine(fingerprinted([_read(), _unread()])).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg")
    assert code == 1
    first = next(ln for ln in out.splitlines() if "layer.perm" in ln)
    assert "[warning" not in first
    assert "Found 2 findings (1 warning: no apply-time reader found)." in out


def test_strict_flag_and_config_fail_on_warnings(proj, capsys, monkeypatch):
    FakeEngine(fingerprinted([_unread()])).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg", "--strict")
    assert code == 1 and "[warning" not in out
    (proj / "pyproject.toml").write_text("[tool.reload-lint]\nstrict = true\n")
    code, out, _ = run(capsys, "check", "pkg")
    assert code == 1 and "[warning" not in out
    (proj / "pyproject.toml").write_text("[tool.reload-lint]\nstrict = false\n")
    assert run(capsys, "check", "pkg")[0] == 0


def test_strict_must_be_a_boolean(proj, capsys, monkeypatch):
    FakeEngine(fingerprinted([_unread()])).install(monkeypatch)
    (proj / "pyproject.toml").write_text('[tool.reload-lint]\nstrict = "yes"\n')
    code, _, err = run(capsys, "check", "pkg")
    assert code == 2
    assert "`strict` must be true or false" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("strict", [False, True])
def test_sarif_level_and_github_annotation_follow_the_gate(proj, capsys, monkeypatch, strict):
    FakeEngine(fingerprinted([_read(), _unread()])).install(monkeypatch)
    extra = ["--strict"] if strict else []
    _, out, _ = run(capsys, "check", "pkg", "--format", "sarif", *extra)
    levels = {r["properties"]["target"]: r["level"] for r in json.loads(out)["runs"][0]["results"]}
    assert levels == {"layer.perm": "error", "layer.workspace": "error" if strict else "warning"}
    _, out, _ = run(capsys, "check", "pkg", "--format", "github", *extra)
    cmds = {ln.split("::", 2)[1].split(" ", 1)[0] for ln in out.splitlines() if "workspace" in ln}
    assert cmds == {"error" if strict else "warning"}
    assert any(ln.startswith("::error ") and "layer.perm" in ln for ln in out.splitlines())
