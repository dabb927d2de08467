"""`--debug` prints the traceback of an RL906 internal error (docs/cli.md), not only its line."""

import os

from reload_lint.cli import parser as cli
from reload_lint.incremental import cache
from reload_lint.index import extract


def _boom(*args, **kwargs):
    raise TypeError("lowering failed on purpose")


def test_rl906_traceback_only_under_debug(monkeypatch, capsys):
    monkeypatch.setattr(extract, "extract_module", _boom)
    monkeypatch.delenv("RELOAD_LINT_DEBUG", raising=False)
    kind, rule, _, msg = cache._extract_job(("x = 1\n", "pkg.mod", False))
    assert (kind, rule) == ("err", "RL906") and "TypeError: lowering failed" in msg
    assert "Traceback" not in capsys.readouterr().err
    monkeypatch.setenv("RELOAD_LINT_DEBUG", "1")
    assert cache._extract_job(("x = 1\n", "pkg.mod", False))[1] == "RL906"
    err = capsys.readouterr().err
    assert "RL906 in module pkg.mod" in err and "Traceback" in err and "_boom" in err


def test_debug_flag_reaches_the_extraction(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("RELOAD_LINT_DEBUG", raising=False)
    (tmp_path / "m.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    try:
        cli.main(["check", "--no-cache", "--debug", "m.py"])
        assert os.environ.get("RELOAD_LINT_DEBUG") == "1"
    finally:  # cli.main sets it for the whole process: take it back for the tests after this
        os.environ.pop("RELOAD_LINT_DEBUG", None)
