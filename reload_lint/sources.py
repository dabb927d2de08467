"""Release sources to audit: `--vllm VERSION` / `--sglang VERSION`, and a distribution's own
sources (a vLLM plugin, a fork repackaged under another name: `release_sources`).

Downloads the release wheel with pip (no dependencies, nothing imported or executed), or, for
a release published as an sdist only, the sdist file through pip's index finder (pip's own
`download` would build the sdist's metadata, running its build backend); unpacks only the
`.py` files of the requested top-level package into the user cache once, and returns the
unpacked root.
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


def _spellings(dist: str) -> list[str]:
    # a wheel's file name spells the distribution with `_` (PEP 427): `vllm_kunlun-0.11.1-...`;
    # an sdist's with `_` and lower case (PEP 625), or as the project spells it (older ones)
    under = dist.replace("-", "_").replace(".", "_")
    return list(dict.fromkeys((dist, under, under.lower())))


def _find_wheel(wheels: Path, dist: str, version: str) -> Path | None:
    for name in _spellings(dist):
        for p in sorted(wheels.glob(f"{name}-{version}-*.whl")):
            return p
    return None


SDIST_SUFFIXES = (".tar.gz", ".zip")


def _find_sdist(wheels: Path, dist: str, version: str) -> Path | None:
    for name in _spellings(dist):
        for suffix in SDIST_SUFFIXES:
            p = wheels / f"{name}-{version}{suffix}"
            if p.is_file():
                return p
    return None


def _find_archive(wheels: Path, dist: str, version: str) -> Path | None:
    return _find_wheel(wheels, dist, version) or _find_sdist(wheels, dist, version)


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
    try:
        returncode, tail = _run_download(pip_download_command(dist, version, wheels, tty), log)
    except OSError as exc:
        raise SourceError(f"cannot run pip to download {dist}=={version}: {exc}") from None
    found = _find_wheel(wheels, dist, version)
    if returncode != 0 or found is None:
        raise SourceError(f"pip could not download {dist}=={version}: {_last_line(tail)}")
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


# Run as `python -c` by download_sdist: pip's own finder (the user's index, extra indexes,
# find-links, certificates and proxy apply) picks the release's sdist; the file is fetched
# through pip's session and checked against the index's hash. Nothing is built or run.
_SDIST_FETCH = r"""
import hashlib, sys
from pathlib import Path
from pip._internal.commands import create_command
from pip._vendor.packaging.specifiers import SpecifierSet

dist, version, dest = sys.argv[1:4]
cmd = create_command("download")
options, _ = cmd.parse_args(["--no-deps", "--no-binary", ":all:", f"{dist}=={version}", "-d", dest])
with cmd.main_context():
    session = cmd.get_default_session(options)
    finder = cmd._build_package_finder(options=options, session=session)
    best = finder.find_best_candidate(dist, SpecifierSet(f"=={version}")).best_candidate
    if best is None or not best.link.filename.endswith((".tar.gz", ".zip")):
        print(f"ERROR: no sdist (.tar.gz / .zip) found for {dist}=={version}")
        sys.exit(1)
    link = best.link
    resp = session.get(link.url_without_fragment, stream=True)
    resp.raise_for_status()
    size = str(resp.headers.get("content-length") or "")
    shown = f" ({int(size) / 1e6:.1f} MB)" if size and size.isdigit() else ""
    print(f"  Downloading {link.filename}{shown}", flush=True)
    part = Path(dest) / (link.filename + ".part")
    digest = hashlib.new(link.hash_name) if link.hash_name else None
    with open(part, "wb") as f:
        for chunk in resp.iter_content(1 << 20):
            f.write(chunk)
            if digest is not None:
                digest.update(chunk)
    if digest is not None and digest.hexdigest() != link.hash:
        part.unlink()
        print(f"ERROR: {link.filename}: {link.hash_name} does not match the index's")
        sys.exit(1)
    part.rename(Path(dest) / link.filename)
"""


def sdist_download_command(dist: str, version: str, dest: Path) -> list[str]:
    """The sdist of one release, found by pip's index finder and fetched through pip's session
    (never built: `pip download` of an sdist would install its build dependencies and run its
    build backend to read the metadata)."""
    return [sys.executable, "-c", _SDIST_FETCH, dist, version, str(dest)]


def _run_download(cmd: list[str], log) -> tuple[int, bytes]:
    import subprocess  # here: a run over cached sources (every pre-commit run) needs none

    tail = b""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    while chunk := os.read(proc.stdout.fileno(), 65536):
        tail = (tail + chunk)[-4096:]
        _passthrough(log, chunk)
    return proc.wait(), tail


def _last_line(tail: bytes) -> str:
    lines = [ln for ln in tail.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "no output"


def download_sdist(dist: str, version: str, log=None) -> Path:
    """The cached release sdist (`.tar.gz` / `.zip`), downloaded once (for a release that
    publishes no wheel)."""
    wheels = cache_root() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = _find_sdist(wheels, dist, version)
    if found:
        return found
    log = sys.stderr if log is None else log
    print(
        f"reload-lint: downloading the sdist of {dist}=={version} (once; cached in {wheels})",
        file=log,
        flush=True,
    )
    try:
        returncode, tail = _run_download(sdist_download_command(dist, version, wheels), log)
    except OSError as exc:
        raise SourceError(f"cannot run pip to download {dist}=={version}: {exc}") from None
    found = _find_sdist(wheels, dist, version)
    if returncode != 0 or found is None:
        raise SourceError(
            f"pip could not download the sdist of {dist}=={version}: {_last_line(tail)}"
        )
    return found


def download_release(dist: str, version: str, log=None) -> Path:
    """The release's wheel, or its sdist when no wheel can be had (cached either way)."""
    wheels = cache_root() / "wheels"
    found = _find_archive(wheels, dist, version) if wheels.is_dir() else None
    if found:
        return found
    try:
        return download_wheel(dist, version, log=log)
    except SourceError as wheel_error:
        try:
            return download_sdist(dist, version, log=log)
        except SourceError as sdist_error:
            raise SourceError(f"{wheel_error}; {sdist_error}") from None


def _normal(name: str) -> str:
    return name.replace("-", "_").replace(".", "_").lower()


def _unsafe(name: str) -> bool:
    """An archive member name that could land outside the folder it is unpacked into."""
    if not name or name.startswith(("/", "\\")) or "\\" in name:
        return True
    if len(name) > 1 and name[1] == ":":  # a drive: `C:...`
        return True
    return any(part == ".." for part in name.split("/"))


class _Archive:
    """Member names and bytes of a wheel, a `.zip` sdist or a `.tar.gz` sdist; for an sdist,
    names are taken below its one top folder (`vllm_hust-0.17.2.post1/`)."""

    def __init__(self, path: Path):
        self.path = path
        self.sdist = not path.name.endswith(".whl")
        if path.name.endswith(".tar.gz"):
            import tarfile

            self._tar = tarfile.open(path, "r:gz")
            self._members = {m.name: m for m in self._tar.getmembers()}
            raw = list(self._members)
            self._files = {m.name for m in self._members.values() if m.isfile()}
        else:
            import zipfile

            self._tar = None
            self._zip = zipfile.ZipFile(path)
            raw = self._zip.namelist()
            self._files = {n for n in raw if not n.endswith("/")}
        for name in raw:
            if _unsafe(name):
                self.close()
                raise SourceError(
                    f"refusing to unpack {path.name}: member {name!r} is an absolute path "
                    "or climbs out of the folder (`..`)"
                )
        names = [(n[2:] if n.startswith("./") else n, n) for n in raw]  # `./pkg-1.0/...`
        root = ""
        if self.sdist:
            tops = {k.split("/", 1)[0] for k, _ in names if k.strip("/")}
            if len(tops) == 1 and any("/" in k.strip("/") for k, _ in names):
                root = tops.pop() + "/"
        # name below the root -> archive name, regular files only, in archive order (a gzip
        # stream read backwards is decompressed again from its start)
        self.files = {
            k[len(root) :]: n
            for k, n in names
            if n in self._files and k.startswith(root) and k[len(root) :]
        }

    def top_level(self) -> list[str]:
        tops = set()
        for rel in self.files:
            head, sep, _ = rel.partition("/")
            tops.add(head + "/" if sep else head)
        return sorted(tops)

    def read(self, name: str) -> bytes:
        if self._tar is not None:
            f = self._tar.extractfile(self._members[name])
            assert f is not None
            return f.read()
        return self._zip.read(name)

    def close(self) -> None:
        (self._tar if self._tar is not None else self._zip).close()


def _cache_dir(package: str, version: str, dist: str | None) -> Path:
    # a fork repackaged under another name (`vllm_npu` shipping `vllm/`) is kept apart from
    # the release of the package it ships, and from that distribution's other packages
    if dist is None or _normal(dist) == _normal(package):
        name = f"{package}-{version}"
    else:
        name = f"{_normal(dist)}-{version}-{package}"
    return cache_root() / "sources" / name


def release_sources(package: str, version: str, dist: str | None = None) -> Path:
    """Return the directory that holds `<package>/` for the given release, fetching once.

    `dist`: the PyPI distribution that ships `package`, when it is not vLLM or SGLang itself:
    a vLLM plugin (`vllm-kunlun` for `vllm_kunlun`), or a fork repackaged under another name
    whose import package differs from the distribution (`vllm_npu` and `vllm-hust` ship
    `vllm/`). The wheel is used, or the sdist (`.tar.gz` / `.zip`) when the release has no
    wheel. Only the `.py` files of `package/` are kept (an sdist's `src/package/` too), with
    the distribution's metadata beside them as `<dist>-<version>.dist-info/METADATA` (a
    wheel's METADATA, an sdist's PKG-INFO), which bases.suggest reads for the vLLM it requires.
    An archive that holds no `.py` file of `package/` is a SourceError naming what it holds.
    """
    if dist is None and package not in PACKAGES:
        raise SourceError(f"unknown package {package!r}")
    dest = _cache_dir(package, version, dist)
    marker = dest / ".complete"
    if marker.is_file() and (dest / package).is_dir():
        return dest
    import shutil
    import tempfile
    import zipfile

    archive_path = download_release(dist or PACKAGES[package], version)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    from reload_lint.progress import Progress

    progress = Progress()
    try:
        try:
            archive = _Archive(archive_path)
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            raise SourceError(f"cannot unpack {archive_path.name}: {exc}") from None
        try:
            _unpack(archive, package, version, dist, tmp, progress)
        finally:
            archive.close()
        (tmp / ".complete").write_text(f"{archive_path.name}\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except SourceError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SourceError(f"cannot unpack {archive_path.name}: {exc}") from None
    finally:
        progress.close()
    return dest


def _unpack(archive: _Archive, package: str, version: str, dist, tmp: Path, progress) -> None:
    files = archive.files
    prefix = f"{package}/"
    if archive.sdist and not any(r.startswith(prefix) and r.endswith(".py") for r in files):
        prefix = f"src/{package}/"  # a src layout
    cut = len(prefix) - len(package) - 1  # `src/vllm/x.py` is unpacked as `vllm/x.py`
    picked = [(r[cut:], n) for r, n in files.items() if r.startswith(prefix) and r.endswith(".py")]
    if not picked:
        tops = archive.top_level()
        shown = ", ".join(tops[:10]) + (", ..." if len(tops) > 10 else "") if tops else "nothing"
        raise SourceError(
            f"{archive.path.name} has no .py file under {package}/; its top level holds: {shown}"
        )
    meta = []
    if dist is not None:
        if archive.sdist:
            if "PKG-INFO" in files:
                meta = [(f"{_normal(dist)}-{version}.dist-info/METADATA", files["PKG-INFO"])]
        else:
            meta = [(r, n) for r, n in files.items() if r.endswith(".dist-info/METADATA")]
            meta = [(r, n) for r, n in meta if r.count("/") == 1]
    order = {n: i for i, n in enumerate(files.values())}  # one forward pass over a .tar.gz
    members = sorted(picked + meta, key=lambda m: order[m[1]])
    progress.start(f"unpacking {archive.path.name}:", len(members))
    root = tmp.resolve()
    for rel, name in members:
        target = tmp / rel
        if root not in target.resolve().parents:  # belt and braces over _unsafe
            raise SourceError(f"refusing to unpack {archive.path.name}: member {name!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(archive.read(name))
        progress.advance()
