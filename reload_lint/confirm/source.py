"""``confirm --source DIR``: the fixed side from a user's vLLM checkout, the bug side from the
importable vLLM (the release the findings came from).

The checkout's Python files that differ from the importable package are laid over it
(``patched.py``), so the fixed side runs the branch's code with the installed compiled ops.
That only means something when both are the same version: before anything runs, DIR's version
is read statically (``vllm/_version.py``, ``PKG-INFO``, else the last git tag) and compared with
the importable package's ``_version.py``, the installed distribution's metadata and the version
of the compiled ops (the distribution that ships them). Nothing of vLLM is imported here.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
import re
import subprocess
from pathlib import Path

from reload_lint.confirm.patched import PatchError, SourceFix, from_patch, import_root, sha256_text
from reload_lint.errors import ReloadLintError

_VERSION_PY = re.compile(r"""^__version__\s*=\s*(?:version\s*=\s*)?["']([^"']+)["']""", re.M)
_PKG_INFO = re.compile(r"^Version:\s*(\S+)", re.M)


def base_version(v: str) -> str:
    """The release part of a version: ``0.25.2.dev5+g1a2b`` -> ``0.25.2``."""
    m = re.match(r"v?(\d+(?:\.\d+)*)", v.strip())
    return m.group(1) if m else v.strip()


def read_version(root: Path, pkg: str = "vllm") -> tuple[str, str] | None:
    """(version, where it was read) for a source tree, without importing it."""
    vp = root / pkg / "_version.py"
    if vp.is_file():
        m = _VERSION_PY.search(vp.read_text(encoding="utf-8", errors="replace"))
        if m:
            return m.group(1), f"{pkg}/_version.py"
    pi = root / "PKG-INFO"
    if pi.is_file():
        m = _PKG_INFO.search(pi.read_text(encoding="utf-8", errors="replace"))
        if m:
            return m.group(1), "PKG-INFO"
    if (root / ".git").exists():
        try:
            out = subprocess.run(
                ["git", "-C", str(root), "describe", "--tags", "--abbrev=0"],
                capture_output=True,
                text=True,
                timeout=20,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        tag = out.stdout.strip()
        if out.returncode == 0 and re.match(r"v?\d", tag):
            return tag.lstrip("v"), f"git tag {tag}"
    return None


def _compiled_ops(pkg_dir: Path) -> list[str]:
    return sorted(p.name for p in pkg_dir.glob("*.so"))


def _dist_version(pkg: str, pkg_dir: Path) -> tuple[str | None, bool]:
    """(installed distribution's version, whether that distribution is the importable one)."""
    try:
        dist = importlib.metadata.distribution(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None, False
    try:
        where = Path(dist.locate_file(pkg)).resolve()
    except Exception:
        return dist.version, False
    return dist.version, where == pkg_dir.resolve()


def check_versions(src_dir: Path, pkg: str = "vllm") -> dict:
    """DIR's version against the importable package and its compiled ops; ReloadLintError (one
    line, exit 2) when they differ. Returns what was compared (for the evidence)."""
    if not (src_dir / pkg / "__init__.py").is_file():
        raise ReloadLintError(f"--source {src_dir}: not a {pkg} checkout (no {pkg}/__init__.py)")
    got = read_version(src_dir, pkg)
    if got is None:
        raise ReloadLintError(
            f"--source {src_dir}: cannot read its {pkg} version "
            f"(no {pkg}/_version.py, PKG-INFO or git tag)"
        )
    src_v, src_where = got
    root = import_root(f"{pkg}/__init__.py")
    if root is None:
        raise ReloadLintError(f"--source {src_dir}: no importable {pkg} to take compiled ops from")
    if root.resolve() == src_dir.resolve():
        raise ReloadLintError(
            f"--source {src_dir}: it is the importable {pkg} itself; the bug side needs the "
            "release it branches from on the import path"
        )
    imp = read_version(root, pkg)
    imp_v = imp[0] if imp else None
    dist_v, dist_is_imp = _dist_version(pkg, root / pkg)
    ops = _compiled_ops(root / pkg)
    ops_v = dist_v if dist_is_imp else imp_v
    if not ops:
        raise ReloadLintError(
            f"--source {src_dir}: the importable {pkg} ({root}) has no compiled ops"
        )
    for what, v in (("the importable", imp_v), ("its compiled ops are", ops_v)):
        if v is None or base_version(v) != base_version(src_v):
            raise ReloadLintError(
                f"--source {src_dir} is {pkg} {src_v} ({src_where}) but {what} {pkg} "
                f"{v or 'of unknown version'} ({root}); install {pkg}=={base_version(src_v)} "
                f"or check out the release the importable {pkg} is"
            )
    if dist_v is not None and base_version(dist_v) != base_version(src_v):
        raise ReloadLintError(
            f"--source {src_dir} is {pkg} {src_v} ({src_where}) but the installed {pkg} "
            f"distribution is {dist_v}; install {pkg}=={base_version(src_v)}"
        )
    return {
        "source": str(src_dir),
        "source_version": src_v,
        "importable": str(root),
        "importable_version": imp_v,
        "distribution_version": dist_v,
        "compiled_ops": ops,
    }


def source_fix(src_dir: Path, pkg: str = "vllm") -> SourceFix:
    """The checkout's changes over the importable package, as one patch (modified files) plus
    the files only the checkout has."""
    root = import_root(f"{pkg}/__init__.py")
    assert root is not None
    chunks: list[str] = []
    added: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(src_dir / pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            path = Path(dirpath, name)
            rel = path.relative_to(src_dir).as_posix()
            new = path.read_text(encoding="utf-8", errors="replace")
            base = root / rel
            if not base.is_file():
                added[rel] = new
                continue
            old = base.read_text(encoding="utf-8", errors="replace")
            if old != new:
                chunks.append(
                    "".join(
                        difflib.unified_diff(
                            old.splitlines(True), new.splitlines(True), f"a/{rel}", f"b/{rel}"
                        )
                    )
                )
    if not chunks and not added:
        raise ReloadLintError(
            f"--source {src_dir}: no Python file differs from the importable {pkg} ({root})"
        )
    patch = "".join(c if c.endswith("\n") else c + "\n" for c in chunks)
    try:
        fix = from_patch(patch, "source") if patch else SourceFix("source", "", "", root=root)
    except PatchError as exc:
        raise ReloadLintError(f"--source {src_dir}: {exc}") from None
    fix.root = root
    fix.files.update(added)
    fix.sha256 = sha256_text(patch + "".join(f"{k}\n{v}" for k, v in sorted(added.items())))
    return fix
