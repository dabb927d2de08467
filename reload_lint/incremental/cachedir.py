"""`reload-lint cache` (what the cache holds, and its size) and `reload-lint cache clean`.

Input: the cache root and what to remove. Output: a listing with sizes (`describe`), or
the items removed and the bytes freed (`clean`).

The cache root ($RELOAD_LINT_CACHE, else $XDG_CACHE_HOME/reload-lint, else
~/.cache/reload-lint) holds three kinds of things, each rebuilt on demand:
  wheels/    release wheels pip downloaded (`--vllm`/`--sglang`), ~250 MB per vLLM release
  sources/   their unpacked `.py` files, one folder per release
  index/     the analysis cache (parsed records and kept results)
`clean` removes only these, never anything else a user may have put under the root.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from reload_lint.errors import ReloadLintError

KINDS = ("wheels", "sources", "index")


@dataclass
class Item:
    kind: str  # wheels | sources | index
    name: str  # vllm-0.25.1, the wheel's file name, or "index"
    path: Path
    size: int


def tree_size(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        try:
            return path.lstat().st_size
        except OSError:
            return 0
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def items(root: Path) -> list[Item]:
    out: list[Item] = []
    wheels = root / "wheels"
    if wheels.is_dir():
        for p in sorted(wheels.iterdir()):
            out.append(Item("wheels", p.name, p, tree_size(p)))
    sources = root / "sources"
    if sources.is_dir():
        for p in sorted(sources.iterdir()):
            name = p.name if (p / ".complete").is_file() else f"{p.name} (incomplete)"
            out.append(Item("sources", name, p, tree_size(p)))
    index = root / "index"
    if index.exists():
        out.append(Item("index", "index", index, tree_size(index)))
    return out


def human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def describe(root: Path) -> str:
    found = items(root)
    lines = [f"reload-lint cache: {root}"]
    if not found:
        lines.append("  (empty)")
        return "\n".join(lines) + "\n"
    for it in found:
        lines.append(f"  {it.kind + '/':<9} {it.name:<56} {human(it.size):>10}")
    lines.append(f"  total {human(sum(it.size for it in found))}")
    return "\n".join(lines) + "\n"


def select(root: Path, what: list[str]) -> list[Item]:
    """The items `clean WHAT...` names: a kind (wheels, sources, index), a release
    (vllm-0.25.1: its wheel and its sources), or nothing for everything."""
    found = items(root)
    if not what:
        return found
    chosen: list[Item] = []
    for w in what:
        if w in KINDS:
            hit = [it for it in found if it.kind == w]
        else:
            hit = [
                it
                for it in found
                if it.kind != "index" and (it.path.name == w or it.path.name.startswith(w + "-"))
            ]
            if not hit:
                known = sorted({it.path.name for it in found if it.kind == "sources"})
                raise ReloadLintError(
                    f"nothing in the cache is named {w!r} (kinds: {', '.join(KINDS)}; "
                    f"releases: {', '.join(known) or 'none'})"
                )
        chosen += [it for it in hit if it not in chosen]
    return chosen


def clean(root: Path, what: list[str], dry_run: bool = False) -> tuple[int, int]:
    """Remove the selected items; return (count, bytes). Only the known subfolders of the
    root are touched."""
    chosen = select(root, what)
    freed = 0
    for it in chosen:
        if it.path.parent.parent != root and it.path.parent != root:
            continue  # not ours: never delete outside the known layout
        freed += it.size
        if dry_run:
            continue
        try:
            if it.path.is_dir() and not it.path.is_symlink():
                shutil.rmtree(it.path)
            else:
                it.path.unlink()
        except OSError as exc:
            raise ReloadLintError(f"{it.path}: cannot remove: {exc.strerror or exc}") from None
    return len(chosen), freed
