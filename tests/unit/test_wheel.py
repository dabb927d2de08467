"""Issue 11, defect 2: the built wheel carries the rule catalog and the bundled allowlists.

Builds the wheel from a copy of the project, installs it into a fresh virtualenv (which sees
this environment's jinja2, so no network is needed), and runs the installed console script
from outside the source tree: `rule RL101`, and a check of a vLLM checkout whose accepted site
the bundled allowlist must suppress. pre-commit installs the hook repository the same way.
Takes ~20 s; it is part of the default pytest run (.ci/run) and of `-m "not integration"`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from _vllm_checkout import write_checkout

from reload_lint.rules import RULES

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INDEX"] = "1"  # everything it needs is local
    return env


def _run(cmd, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The venv's bin directory, with the freshly built wheel installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("rules", "allowlists"):  # top-level data folders, copied into the wheel
        shutil.copytree(REPO / name, src / name)
    shutil.copytree(
        REPO / "reload_lint", src / "reload_lint", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            dist,
            src,
        ],
        cwd=tmp,
    )
    (wheel,) = dist.glob("reload_lint-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for code in RULES:
        assert f"reload_lint/_data/rules/{code}.md" in names, f"{code} page not in the wheel"
    assert "reload_lint/_data/allowlists/vllm.toml" in names
    venv = tmp / "venv"
    # No pip inside the venv (no ensurepip needed): this pip installs into it with --python.
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / ("python.exe" if os.name == "nt" else "python")
    # The dependency (jinja2) comes from the environment running the tests, which may
    # itself be a virtualenv (--system-site-packages would see only the base interpreter's):
    # its site-packages folders go after the venv's own, as plain path lines, so .pth files
    # there (an editable install of this repository) are not run.
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp)
    outer = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    (Path(purelib.stdout.strip()) / "_outer_env.pth").write_text("\n".join(outer) + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", wheel], tmp)
    where = _run([python, "-c", "import reload_lint; print(reload_lint.__file__)"], tmp)
    assert Path(where.stdout.strip()).resolve().is_relative_to(venv.resolve()), where.stdout
    return bindir


def test_installed_wheel_prints_a_rule_page(installed, tmp_path):
    proc = _run([installed / "reload-lint", "rule", "RL101"], cwd=tmp_path)
    assert proc.stdout.startswith("# RL101: unregistered-module-tensor"), proc.stdout[:200]
    listing = _run([installed / "reload-lint", "rule"], cwd=tmp_path).stdout
    assert len(listing.splitlines()) == len(RULES)


def test_installed_wheel_applies_the_bundled_vllm_allowlist(installed, tmp_path):
    rel = write_checkout(tmp_path)
    proc = _run([installed / "reload-lint", "check", "--no-cache", rel], cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 suppressed finding" in proc.stderr
    shown = _run(
        [installed / "reload-lint", "check", "--no-cache", "--show-suppressed", rel],
        cwd=tmp_path,
    )
    assert "allowlisted (allowlists/vllm.toml#" in shown.stdout


@pytest.mark.integration
def test_installed_wheel_audits_a_release_like_the_source_tree(installed, tmp_path):
    """`check --vllm 0.25.1` from the wheel equals the source tree's report: the same findings
    and the same allowlisted sites (the broken wheel reported 92 findings instead of 79)."""
    from reload_lint.sources import SourceError, release_sources

    try:
        release_sources("vllm", "0.25.1")
    except SourceError as exc:
        pytest.skip(f"vLLM sources unavailable: {exc}")
    argv = ["check", "--vllm", "0.25.1", "--format", "json", "--show-suppressed", "-j", "2"]
    ours = subprocess.run(
        [sys.executable, "-m", "reload_lint", *argv],
        cwd=tmp_path,
        env={**_env(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    theirs = _run([installed / "reload-lint", *argv], cwd=tmp_path, check=False)
    assert (ours.returncode, theirs.returncode) == (1, 1), ours.stderr + theirs.stderr
    a, b = json.loads(ours.stdout), json.loads(theirs.stdout)
    assert a["summary"]["suppressed"] > 0
    assert a == b
