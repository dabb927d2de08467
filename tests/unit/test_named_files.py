"""Issue 11, defect 4: a file named on the command line (pre-commit's staged files) is never
reported clean without being analysed. Whatever keeps it from the analysis (another file with
the same module name, a folder skipped by default, not a .py file), the run says so with an
RL906 row for that file and exits 3 (incomplete) instead of 0."""

from __future__ import annotations

import json

import pytest
from _cli_util import KERNEL, run_cli


@pytest.fixture
def twins(tmp_path, monkeypatch):
    """a/pkg and b/pkg: two copies of one package, same module names."""
    for top in ("a", "b"):
        (tmp_path / top / "pkg").mkdir(parents=True)
        (tmp_path / top / "pkg" / "__init__.py").write_text("")
        (tmp_path / top / "pkg" / "x.py").write_text(KERNEL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def shadow(twins):
    """a/pkg/x/__init__.py: a package with the module name of a/pkg/x.py in the same folder
    (two copies in different folders, a/pkg and b/pkg, are each analysed: see
    tests/unit/test_engine_duplicates.py)."""
    (twins / "a" / "pkg" / "x").mkdir()
    (twins / "a" / "pkg" / "x" / "__init__.py").write_text(KERNEL)
    return twins


def _run(capsys, *argv):
    return run_cli(capsys, "check", "--no-cache", *argv)


def test_a_named_file_shadowed_by_a_same_named_module_is_not_reported_clean(shadow, capsys):
    code, out, _ = _run(capsys, "a/pkg/x/__init__.py")
    assert code == 3, out
    assert (
        "a/pkg/x/__init__.py: RL906 named file was not analysed: `a/pkg/x.py` has the same" in out
    )
    assert "Found 0 findings" in out and "1 file error" in out


def test_the_row_is_in_every_format(shadow, capsys):
    code, out, _ = _run(capsys, "--format", "json", "a/pkg/x/__init__.py")
    report = json.loads(out)
    assert code == 3
    assert [(e["rule"], e["path"]) for e in report["errors"]] == [("RL906", "a/pkg/x/__init__.py")]


def test_the_analysed_twin_still_reports_its_findings(shadow, capsys):
    code, out, _ = _run(capsys, "a/pkg/x.py", "a/pkg/x/__init__.py")
    assert code == 1
    assert "a/pkg/x.py:6:" in out and "a/pkg/x/__init__.py: RL906" in out


def test_a_second_copy_in_another_folder_is_analysed(twins, capsys):
    code, out, _ = _run(capsys, "b/pkg/x.py")
    assert code == 1, out
    assert "b/pkg/x.py:6:" in out and "RL906" not in out


def test_a_named_file_in_a_default_skipped_folder(twins, capsys):
    (twins / "build").mkdir()
    (twins / "build" / "gen.py").write_text(KERNEL)
    code, out, _ = _run(capsys, "build/gen.py")
    assert code == 3 and "build/gen.py: RL906 named file was not analysed" in out


def test_a_named_stub_file(twins, capsys):
    (twins / "a" / "pkg" / "x.pyi").write_text("def f() -> int: ...\n")
    code, out, _ = _run(capsys, "a/pkg/x.pyi")
    assert code == 3 and "only .py files are analysed" in out


def test_ignoring_rl906_is_the_users_explicit_choice(shadow, capsys):
    code, _, _ = _run(capsys, "--ignore", "RL906", "a/pkg/x/__init__.py")
    assert code == 0


def test_nothing_analysed_names_the_real_reason(tmp_path, monkeypatch, capsys):
    """A project with no .py file at all and a named stub: the stderr note must not blame an
    `exclude` the user never wrote; the RL906 row says why."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.pyi").write_text("def f() -> int: ...\n")
    code, out, err = _run(capsys, "x.pyi")
    assert code == 3 and "x.pyi: RL906 named file was not analysed" in out
    assert "exclude" not in err
    assert (
        err
        == "reload-lint: nothing analysed: no file named could be analysed (the RL906 rows say why)\n"
    )
