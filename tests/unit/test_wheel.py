"""Issue 11, defect 2: the built wheel carries the rule catalog and the bundled allowlists.

Builds the wheel from a copy of the project, installs it into a fresh virtualenv (which sees
this environment's jinja2, so no network is needed), and runs the installed console script
from outside the source tree: `rule RL101`; the bundled vllm.toml found inside the install and
parsed; a check of a vLLM checkout that an allowlist the test writes (as --allowlist, and as the
installed bundled vllm.toml) must suppress. pre-commit installs the hook repository the same way.
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
from _vllm_checkout import accepting_allowlist, write_checkout

from reload_lint.gate import load_allowlist
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


def _bundled_in(installed: Path, tmp_path: Path) -> tuple[Path, int]:
    """Where the installed package finds its bundled vllm.toml, and how many entries it parses."""
    code = (
        "from reload_lint.gate.report import bundled_allowlist as b\n"
        "from reload_lint.gate.suppress import load_allowlist as l\n"
        "p = b('vllm'); print(p); print(len(l(p)))\n"
    )
    python = installed / ("python.exe" if os.name == "nt" else "python")
    where, count = _run([python, "-c", code], cwd=tmp_path).stdout.split()
    return Path(where), int(count)


def test_installed_wheel_finds_and_parses_the_bundled_vllm_allowlist(installed, tmp_path):
    path, count = _bundled_in(installed, tmp_path)
    assert path.resolve().is_relative_to(installed.parent.resolve()), path
    assert path.parts[-4:] == ("reload_lint", "_data", "allowlists", "vllm.toml"), path
    shipped = REPO / "allowlists" / "vllm.toml"
    assert path.read_bytes() == shipped.read_bytes()
    assert count == len(load_allowlist(shipped))


def test_installed_wheel_applies_an_allowlist(installed, tmp_path):
    rel = write_checkout(tmp_path)
    bare = _run([installed / "reload-lint", "check", "--no-cache", rel], cwd=tmp_path, check=False)
    assert bare.returncode == 1 and "RL101" in bare.stdout, bare.stdout + bare.stderr
    (tmp_path / "accepted.toml").write_text(accepting_allowlist(), encoding="utf-8")
    argv = [installed / "reload-lint", "check", "--no-cache", "--allowlist", "accepted.toml", rel]
    proc = _run(argv, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 suppressed finding" in proc.stderr
    shown = _run([*argv, "--show-suppressed"], cwd=tmp_path)
    assert "allowlisted (accepted.toml#1)" in shown.stdout


def test_installed_wheel_applies_its_bundled_allowlist_to_a_vllm_checkout(installed, tmp_path):
    """Whatever the installed bundled vllm.toml holds is applied to a vLLM checkout with no
    configuration: here, for this test only, an entry that accepts the checkout's store."""
    rel = write_checkout(tmp_path)
    path, _count = _bundled_in(installed, tmp_path)
    shipped = path.read_bytes()
    try:
        path.write_text(accepting_allowlist(), encoding="utf-8")
        proc = _run([installed / "reload-lint", "check", "--no-cache", rel], tmp_path, check=False)
        shown = _run(
            [installed / "reload-lint", "check", "--no-cache", "--show-suppressed", rel],
            cwd=tmp_path,
        )
    finally:
        path.write_bytes(shipped)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 suppressed finding" in proc.stderr
    assert "allowlisted (allowlists/vllm.toml#1)" in shown.stdout


@pytest.mark.integration
def test_installed_wheel_audits_a_release_like_the_source_tree(installed, tmp_path):
    """`check --vllm 0.25.1` from the wheel equals the source tree's report: the same findings
    and the same allowlisted sites (the broken wheel reported 92 findings instead of 79). The
    bundled vllm.toml accepts no 0.25.1 finding, so both runs also get an allowlist that
    accepts one (the Marlin linear kernel's workspace), which both must suppress."""
    from reload_lint.sources import SourceError, release_sources

    try:
        release_sources("vllm", "0.25.1")
    except SourceError as exc:
        pytest.skip(f"vLLM sources unavailable: {exc}")
    (tmp_path / "accepted.toml").write_text(
        '[[allow]]\nrule = "RL102"\n'
        'path = "vllm/model_executor/kernels/linear/mixed_precision/marlin.py"\n'
        'symbol = "MarlinLinearKernel.process_weights_after_loading"\n'
        'target = "self.workspace"\nreason = "accepted by this test"\n'
        'link = "https://example.invalid/marlin"\n',
        encoding="utf-8",
    )
    argv = ["check", "--vllm", "0.25.1", "--format", "json", "--show-suppressed", "-j", "2"]
    argv += ["--allowlist", "accepted.toml"]
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
    assert a["summary"]["suppressed"] == 1
    (accepted,) = [f for f in a["findings"] if f.get("suppressed")]
    assert accepted["suppressed"].startswith("allowlisted (accepted.toml#1)")
    assert a == b
