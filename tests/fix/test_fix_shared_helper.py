"""A helper several fixes need is written once per package, in `<package>/_reload_lint_helpers
.py`, which the fixed modules import (not one pasted copy per module)."""

from __future__ import annotations

import shutil
import subprocess

from _fix_util import CASES, project, run


def test_two_modules_share_one_helper_module(tmp_path, monkeypatch, capsys):
    proj = project(tmp_path, "rl105_keep_object")
    shutil.copy2(proj / "pkg" / "m.py", proj / "pkg" / "m2.py")
    monkeypatch.chdir(proj)
    subprocess.run(["git", "init", "-q"], check=True)
    code, patch, err = run(capsys, "check", "pkg", "--no-cache", "--diff", "--unsafe-fixes")
    assert "--- /dev/null\n+++ b/pkg/_reload_lint_helpers.py" in patch
    subprocess.run(["git", "apply", "-p1", "-"], input=patch, text=True, check=True)
    helper = (proj / "pkg" / "_reload_lint_helpers.py").read_text()
    (proj / "pkg" / "_reload_lint_helpers.py").unlink()
    for f in ("m.py", "m2.py"):
        shutil.copy2(CASES / "rl105_keep_object" / "before.py", proj / "pkg" / f)
    code, out, err = run(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    assert "(2 fixed, 0 remaining, 0 new)" in out, out + err
    assert (proj / "pkg" / "_reload_lint_helpers.py").read_text() == helper
    assert helper.count("def _copy_into_kept") == 1
    for f in ("m.py", "m2.py"):
        text = (proj / "pkg" / f).read_text()
        assert "from pkg._reload_lint_helpers import _copy_into_kept" in text
        assert "def _copy_into_kept" not in text
