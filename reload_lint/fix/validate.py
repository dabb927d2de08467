"""Re-audit a patched tree: a copy of the audited paths in a temporary folder with the patched
files written over it (the user's files are not touched until every check passed)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from reload_lint.discover import DEFAULT_EXCLUDES


def shadow_audit(base: Path, roots: list[Path], patched: dict[str, str], run) -> list:
    """`run(paths, base_dir)` -> findings of the copy; paths in the copy mirror `roots`."""
    base = Path(base).resolve()
    skip = shutil.ignore_patterns(*DEFAULT_EXCLUDES)

    def ignore(folder, names):
        # only regular .py files and folders: the analysis reads nothing else, and opening a
        # FIFO or a device to copy it would block or fail
        out = set(skip(folder, names))
        for n in names:
            p = os.path.join(folder, n)
            if os.path.isdir(p) and not os.path.islink(p):
                continue
            if not (n.endswith(".py") and os.path.isfile(p)):
                out.add(n)
        return out

    with tempfile.TemporaryDirectory(prefix="reload-lint-fix-") as tmp:
        top = Path(tmp) / "tree"
        paths = []
        for root in roots:
            root = Path(root).resolve()
            rel = root.relative_to(base) if root != base else Path(".")
            dest = top / rel
            if root.is_dir():
                shutil.copytree(root, dest, ignore=ignore, dirs_exist_ok=True)
            elif root.is_file():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root, dest)
            paths.append(dest)
        for rel, text in patched.items():
            dest = top / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
        return run(paths, top)
