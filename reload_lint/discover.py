"""Paths + excludes -> the Python files to read (also for files passed by name, e.g. pre-commit)."""

from __future__ import annotations

import fnmatch
import os
import re
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
    return shown_path(rel.replace(os.sep, "/"))


def shown_path(rel: str) -> str:
    """A path as reload-lint prints, hashes and matches it. A file name that is not valid UTF-8
    reaches Python with its bad bytes as surrogate escapes, which no output can encode: they
    are shown as `\\xNN` (the file is still read through its real path)."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return rel


class _Excludes:
    """`patterns` compiled once. A path is excluded when a pattern matches the whole relative
    path or a folder above it (`pat` or `pat/*`), or, for a pattern without "/", any one of
    its parts; matching is `fnmatch.fnmatch`'s (case-folded where the OS folds case)."""

    __slots__ = ("whole", "part")

    def __init__(self, patterns: list[str]) -> None:
        whole: list[str] = []
        part: list[str] = []
        for pat in patterns:
            pat = os.path.normcase(pat.rstrip("/"))
            whole += [fnmatch.translate(pat), fnmatch.translate(pat + "/*")]
            if "/" not in pat:
                part.append(fnmatch.translate(pat))
        self.whole = re.compile("|".join(whole)).match if whole else None
        self.part = re.compile("|".join(part)).match if part else None

    def __call__(self, rel: str) -> bool:
        rel = os.path.normcase(rel)
        if self.whole is not None and self.whole(rel):
            return True
        if self.part is not None:
            match = self.part
            return any(match(p) for p in rel.split("/"))
        return False

    def leaf(self, rel: str, name: str) -> bool:
        """`self(rel)` for `rel`, a folder this excluder kept (no part of it matched) plus
        `name`: only the whole path and the last part are left to test."""
        if self.whole is not None and self.whole(os.path.normcase(rel)):
            return True
        return self.part is not None and self.part(os.path.normcase(name)) is not None


def discover(
    paths: list[Path], base: Path, cfg: Config
) -> tuple[list[SourceFile], list[FileError]]:
    patterns = list(DEFAULT_EXCLUDES) + list(cfg.exclude)
    excluded = _Excludes(patterns)
    includes = list(cfg.include)
    included = None
    if includes:
        alts = (fnmatch.translate(os.path.normcase(pat)) for pat in includes)
        included = re.compile("|".join(alts)).match
    seen: set[str] = set()
    out: list[SourceFile] = []
    errors: list[FileError] = []

    def add(p: Path, rel: str | None = None, excluded=excluded, name: str = "") -> None:
        if rel is None:
            rel = _rel(p, base)
        if rel in seen:
            return
        # a file found in a kept folder (`name` given): only its own name is new
        if excluded.leaf(rel, name) if name else excluded(rel):
            return
        if included is not None and not included(os.path.normcase(rel)):
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
        # a folder named on the command line is audited even where `exclude` covers it (as
        # ruff does for paths passed explicitly): patterns that match the folder itself or a
        # folder above it do not apply below it; the rest still do
        root_rel = _rel(root, base)
        if root_rel not in (".", "") and excluded(root_rel):
            excluded = _Excludes([p for p in patterns if not _Excludes([p])(root_rel)])
        else:
            excluded = _Excludes(patterns)

        def walk_error(exc: OSError, root: Path = root) -> None:
            # a directory os.walk could not list: say so instead of silently skipping it
            where = Path(exc.filename) if exc.filename else root
            rel = _rel(where, base)
            if excluded(rel):  # noqa: B023 (the excluder of this root)
                return
            if isinstance(exc, FileNotFoundError):
                why = "directory vanished during the run"
            else:
                why = f"cannot read directory: {exc.strerror or exc}"
            errors.append(FileError("RL903", rel, why))

        # a folder's relative path, put there by its parent (os.walk joins the parent's path
        # and the name, so relpath() would give the same): relpath() only for the root
        rels: dict[str, str] = {}
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=walk_error):
            try:
                st = os.stat(dirpath)
                ident = (st.st_dev, st.st_ino)
            except OSError:
                continue
            if ident in visited:
                dirnames[:] = []
                continue
            visited.add(ident)
            d = Path(dirpath)
            d_rel = rels.pop(dirpath, None) or _rel(d, base)
            prefix = "" if d_rel == "." else d_rel + "/"
            # directory links are never followed (loops, escapes): os.walk(followlinks=False)
            # lists them but does not descend into them, testing each itself
            keep = []
            for name in sorted(dirnames):
                sub_rel = prefix + shown_path(name)
                if not excluded(sub_rel):
                    keep.append(name)
                    rels[os.path.join(dirpath, name)] = sub_rel
            dirnames[:] = keep
            # a child path without re-parsing the folder's (pathlib's own walk does this)
            child = getattr(d, "_make_child_relpath", d.joinpath)
            for name in sorted(filenames):
                if name.endswith(".py"):
                    shown = shown_path(name)
                    add(child(name), prefix + shown, excluded, shown)
    out.sort(key=lambda s: s.rel)
    return out, errors
