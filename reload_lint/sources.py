"""Release sources to audit: `--vllm VERSION` / `--sglang VERSION`.

Downloads the release wheel with pip (no dependencies, nothing imported or executed),
unpacks only its `.py` files into the user cache once, and returns the unpacked root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from reload_lint.errors import ReloadLintError

PACKAGES = {"vllm": "vllm", "sglang": "sglang"}


class SourceError(ReloadLintError):
    """Could not obtain the requested release sources (exit 2)."""


def cache_root() -> Path:
    env = os.environ.get("RELOAD_LINT_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "reload-lint"


def _find_wheel(wheels: Path, dist: str, version: str) -> Path | None:
    for p in sorted(wheels.glob(f"{dist}-{version}-*.whl")):
        return p
    return None


def download_wheel(dist: str, version: str) -> Path:
    wheels = cache_root() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = _find_wheel(wheels, dist, version)
    if found:
        return found
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "-q",
        "--no-deps",
        "--only-binary",
        ":all:",
        f"{dist}=={version}",
        "-d",
        str(wheels),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceError(f"cannot run pip to download {dist}=={version}: {exc}") from None
    found = _find_wheel(wheels, dist, version)
    if proc.returncode != 0 or found is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        last = tail[-1] if tail else "no output"
        raise SourceError(f"pip could not download {dist}=={version}: {last}")
    return found


def release_sources(package: str, version: str) -> Path:
    """Return the directory that holds `<package>/` for the given release, fetching once."""
    if package not in PACKAGES:
        raise SourceError(f"unknown package {package!r}")
    dest = cache_root() / "sources" / f"{package}-{version}"
    marker = dest / ".complete"
    if marker.is_file():
        return dest
    wheel = download_wheel(PACKAGES[package], version)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{package}-{version}-", dir=dest.parent))
    try:
        with zipfile.ZipFile(wheel) as zf:
            for name in zf.namelist():
                if name.startswith(f"{package}/") and name.endswith(".py"):
                    zf.extract(name, tmp)
        (tmp / ".complete").write_text(f"{wheel.name}\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except (OSError, zipfile.BadZipFile) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SourceError(f"cannot unpack {wheel.name}: {exc}") from None
    return dest
