"""Paths + excludes -> the Python files to read (also for files passed by name, e.g. pre-commit)."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

from reload_lint.config import Config
from reload_lint.findings import FileError

DEFAULT_EXCLUDES = (
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    "node_modules",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "build",
    "dist",
    "*.egg-info",
)


@dataclass
class SourceFile:
    path: Path  # as found on disk
    rel: str  # relative to the base directory, '/'-separated
    module: str = ""
    is_package: bool = False


def _rel(path: Path, base: Path) -> str:
    try:
        rel = os.path.relpath(path, base)
    except ValueError:  # other drive (Windows)
        rel = str(path)
    return rel.replace(os.sep, "/")


def _excluded(rel: str, patterns: list[str]) -> bool:
    parts = rel.split("/")
    for pat in patterns:
        pat = pat.rstrip("/")
        if fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(rel, pat + "/*"):
            return True
        if "/" not in pat and any(fnmatch.fnmatch(p, pat) for p in parts):
            return True
    return False


def discover(
    paths: list[Path], base: Path, cfg: Config
) -> tuple[list[SourceFile], list[FileError]]:
    excludes = list(DEFAULT_EXCLUDES) + list(cfg.exclude)
    includes = list(cfg.include)
    seen: set[str] = set()
    out: list[SourceFile] = []
    errors: list[FileError] = []

    def add(p: Path) -> None:
        rel = _rel(p, base)
        if rel in seen:
            return
        if _excluded(rel, excludes):
            return
        if includes and not any(fnmatch.fnmatch(rel, pat) for pat in includes):
            return
        seen.add(rel)
        out.append(SourceFile(path=p, rel=rel))

    for root in paths:
        if root.is_file() or (root.is_symlink() and not root.is_dir()):
            if root.suffix in (".py", ".pyi") or root.is_symlink():
                if root.suffix == ".py":
                    add(root)
            continue
        if not root.is_dir():
            if not os.path.lexists(root):
                errors.append(FileError("RL903", _rel(root, base), "no such file or directory"))
            elif root.suffix == ".py":
                add(root)  # a FIFO or device named *.py: reading reports it (RL903)
            continue
        visited: set[tuple[int, int]] = set()

        def walk_error(exc: OSError, root: Path = root) -> None:
            # a directory os.walk could not list: say so instead of silently skipping it
            where = Path(exc.filename) if exc.filename else root
            rel = _rel(where, base)
            if _excluded(rel, excludes):
                return
            if isinstance(exc, FileNotFoundError):
                why = "directory vanished during the run"
            else:
                why = f"cannot read directory: {exc.strerror or exc}"
            errors.append(FileError("RL903", rel, why))

        for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=walk_error):
            d = Path(dirpath)
            try:
                st = d.stat()
                ident = (st.st_dev, st.st_ino)
            except OSError:
                continue
            if ident in visited:
                dirnames[:] = []
                continue
            visited.add(ident)
            keep = []
            for name in sorted(dirnames):
                sub_rel = _rel(d / name, base)
                if _excluded(sub_rel, excludes):
                    continue
                if (d / name).is_symlink():
                    continue  # never follow directory links (loops, escapes)
                keep.append(name)
            dirnames[:] = keep
            for name in sorted(filenames):
                if name.endswith(".py"):
                    add(d / name)
    out.sort(key=lambda s: s.rel)
    return out, errors
