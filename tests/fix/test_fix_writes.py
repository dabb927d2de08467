"""Writes that cannot lose a file (docs/bad-input.md, "Writing fixes"): a read-only file, a
symlink, a file changed between analysis and write, CRLF / BOM / coding line / tabs, mode bits,
and a `--diff` that `git apply` and `patch -p1` both take."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest
from _fix_util import CASES, project, run

from reload_lint.fix import command as fixcmd

CASE = "rl102_keep"


def _pkg(tmp_path, monkeypatch):
    proj = project(tmp_path, CASE)
    monkeypatch.chdir(proj)
    return proj, proj / "pkg" / "m.py"


def test_read_only_file_is_refused_and_untouched(tmp_path, monkeypatch, capsys):
    proj, m = _pkg(tmp_path, monkeypatch)
    before = m.read_bytes()
    m.chmod(0o444)
    code, out, err = run(capsys, "check", "pkg", "--no-cache", "--fix")
    assert code == 2
    assert err.strip().splitlines()[-1] == "reload-lint: pkg/m.py: read-only; nothing written"
    assert m.read_bytes() == before
    assert sorted(p.name for p in m.parent.iterdir()) == ["__init__.py", "m.py"]  # no temp


def test_crlf_bom_coding_and_tabs_are_kept(tmp_path, monkeypatch, capsys):
    proj, m = _pkg(tmp_path, monkeypatch)
    src = "# -*- coding: utf-8 -*-\n" + m.read_text().replace("    ", "\t")
    m.write_bytes(b"\xef\xbb\xbf" + src.replace("\n", "\r\n").encode())
    code, out, err = run(capsys, "check", "pkg", "--no-cache", "--fix")
    assert "(1 fixed, 0 remaining, 0 new)" in out, out + err
    data = m.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf# -*- coding: utf-8 -*-\r\n")
    assert data.count(b"\n") == data.count(b"\r\n")  # every line end still CRLF
    body = data.decode("utf-8-sig")
    assert "    " not in body and "\t\tself.workspace" in body.replace("\r\n", "\n")


def test_symlinked_file_writes_its_target(tmp_path, monkeypatch, capsys):
    proj, m = _pkg(tmp_path, monkeypatch)
    real = tmp_path / "real_m.py"
    shutil.move(m, real)
    m.symlink_to(real)
    code, out, err = run(capsys, "check", "pkg", "--no-cache", "--fix")
    assert "(1 fixed, 0 remaining, 0 new)" in out, out + err
    assert m.is_symlink() and os.readlink(m) == str(real)
    assert real.read_text() == (CASES / CASE / "after.py").read_text()


def test_mode_bits_are_kept(tmp_path, monkeypatch, capsys):
    proj, m = _pkg(tmp_path, monkeypatch)
    m.chmod(0o751)
    run(capsys, "check", "pkg", "--no-cache", "--fix")
    assert stat.S_IMODE(m.stat().st_mode) == 0o751
    assert m.read_text() == (CASES / CASE / "after.py").read_text()


def test_file_changed_between_analysis_and_write_is_refused(tmp_path, monkeypatch, capsys):
    proj, m = _pkg(tmp_path, monkeypatch)
    real = fixcmd.write_fixes

    def edit_then_write(fx, plan, unsafe):
        m.write_text(m.read_text() + "# edited meanwhile\n")
        return real(fx, plan, unsafe)

    monkeypatch.setattr(fixcmd, "write_fixes", edit_then_write)
    code, out, err = run(capsys, "check", "pkg", "--no-cache", "--fix")
    assert code == 2
    assert "pkg/m.py: changed while reload-lint ran; nothing written" in err
    assert m.read_text().endswith("# edited meanwhile\n")


@pytest.mark.parametrize("tool", [["git", "apply", "-p1", "-"], ["patch", "-p1", "-s"]])
def test_diff_applies_with_git_apply_and_patch(tool, tmp_path, monkeypatch, capsys):
    if shutil.which(tool[0]) is None:
        pytest.skip(f"{tool[0]} not installed")
    proj, m = _pkg(tmp_path, monkeypatch)
    code, patch, err = run(capsys, "check", "pkg", "--no-cache", "--diff")
    assert code == 1 and patch
    subprocess.run(tool, input=patch, text=True, check=True, cwd=proj)
    assert m.read_text() == (CASES / CASE / "after.py").read_text()
