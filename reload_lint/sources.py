"""Release sources to audit: `--vllm VERSION` / `--sglang VERSION`.

Downloads the release wheel with pip (no dependencies, nothing imported or executed),
unpacks only its `.py` files into the user cache once, and returns the unpacked root.
"""

from __future__ import annotations

import os
import sys
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
    # a wheel's file name spells the distribution with `_` (PEP 427): `vllm_kunlun-0.11.1-...`
    for name in dict.fromkeys((dist, dist.replace("-", "_").replace(".", "_"))):
        for p in sorted(wheels.glob(f"{name}-{version}-*.whl")):
            return p
    return None


def pip_download_command(dist: str, version: str, dest: Path, tty: bool) -> list[str]:
    """pip download of one release wheel, no dependencies. pip prints the wheel's size and,
    on a terminal, a progress bar with the total."""
    return [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--progress-bar",
        "on" if tty else "off",
        "--disable-pip-version-check",
        f"{dist}=={version}",
        "-d",
        str(dest),
    ]


def download_wheel(dist: str, version: str, log=None) -> Path:
    """The cached release wheel, downloaded once. pip's own output (the wheel's size, and a
    progress bar on a terminal) is passed through to `log` (default: stderr), since a slow
    link means minutes of download."""
    wheels = cache_root() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = _find_wheel(wheels, dist, version)
    if found:
        return found
    log = sys.stderr if log is None else log
    tty = _isatty(log)
    print(
        f"reload-lint: downloading {dist}=={version} with pip (once; cached in {wheels})",
        file=log,
        flush=True,
    )
    import subprocess  # here: a run over cached sources (every pre-commit run) needs none

    cmd = pip_download_command(dist, version, wheels, tty)
    tail = b""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        while chunk := os.read(proc.stdout.fileno(), 65536):
            tail = (tail + chunk)[-4096:]
            _passthrough(log, chunk)
        returncode = proc.wait()
    except OSError as exc:
        raise SourceError(f"cannot run pip to download {dist}=={version}: {exc}") from None
    found = _find_wheel(wheels, dist, version)
    if returncode != 0 or found is None:
        lines = [ln for ln in tail.decode("utf-8", "replace").splitlines() if ln.strip()]
        last = lines[-1].strip() if lines else "no output"
        raise SourceError(f"pip could not download {dist}=={version}: {last}")
    return found


def _passthrough(log, chunk: bytes) -> None:
    try:
        buf = getattr(log, "buffer", None)
        if buf is not None:
            log.flush()
            buf.write(chunk)
            buf.flush()
        else:
            log.write(chunk.decode("utf-8", "replace"))
            log.flush()
    except (OSError, ValueError):
        pass


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def release_sources(package: str, version: str, dist: str | None = None) -> Path:
    """Return the directory that holds `<package>/` for the given release, fetching once.
    `dist`: the PyPI distribution of another package (a vLLM plugin: `vllm-kunlun` for
    `vllm_kunlun`); its wheel's METADATA is kept beside the sources (bases.suggest reads the
    vLLM it requires)."""
    if dist is None and package not in PACKAGES:
        raise SourceError(f"unknown package {package!r}")
    dest = cache_root() / "sources" / f"{package}-{version}"
    marker = dest / ".complete"
    if marker.is_file():
        return dest
    import shutil
    import tempfile
    import zipfile

    wheel = download_wheel(dist or PACKAGES[package], version)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{package}-{version}-", dir=dest.parent))
    from reload_lint.progress import Progress

    progress = Progress()
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if n.startswith(f"{package}/") and n.endswith(".py")]
            if dist is not None:
                names += [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            progress.start(f"unpacking {wheel.name}:", len(names))
            for name in names:
                zf.extract(name, tmp)
                progress.advance()
        (tmp / ".complete").write_text(f"{wheel.name}\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except (OSError, zipfile.BadZipFile) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SourceError(f"cannot unpack {wheel.name}: {exc}") from None
    finally:
        progress.close()
    return dest
