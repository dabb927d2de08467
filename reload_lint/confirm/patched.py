"""The fixed side from source: a patch applied to a copy of the audited sources on the import path.

A fixed-side run that proves a patch (the codemod's ``remedy.patch`` of a finding, or a user's
checkout given with ``confirm --source DIR``) does not monkeypatch anything for its own site.
The parent writes an *overlay*: a directory that mirrors the importable package through
symbolic links, except along the patched files' paths, where the directories are real and the
patched files are plain files holding the patched text. The child that runs the fixed side is
started fresh (spawn) with the overlay first on ``sys.path``, so ``import vllm`` loads the
patched modules and, through the links, every other module and the compiled ops unchanged.

Nothing here imports the audited code: the patch is applied as text, and the overlay is built
from the directory listing. The child checks that each patched module resolves to the overlay.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """A patch that cannot be parsed or does not apply to the sources it names."""


@dataclass
class Hunk:
    old_start: int  # 1-based line of the first old line (0 for a pure insertion at the top)
    old_len: int
    new_start: int
    new_len: int
    lines: list[str] = field(default_factory=list)  # " ctx", "-old", "+new" (no newline)

    def old_lines(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "-")]

    def new_lines(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "+")]


@dataclass
class FilePatch:
    path: str  # relative to the import root, "/"-separated (a finding's ``path``)
    hunks: list[Hunk] = field(default_factory=list)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _strip_prefix(name: str) -> str:
    name = name.split("\t", 1)[0].strip()
    if name.startswith(("a/", "b/")):
        name = name[2:]
    return name


def parse_patch(text: str) -> list[FilePatch]:
    """The files and hunks of a unified diff (``--- a/P`` / ``+++ b/P`` / ``@@`` hunks)."""
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    hunk: Hunk | None = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _strip_prefix(ln[4:]), _strip_prefix(lines[i + 1][4:])
            path = new if new != "/dev/null" else old
            if path == "/dev/null" or not path:
                raise PatchError("a patch that creates or deletes a file is not supported")
            cur = FilePatch(path)
            files.append(cur)
            hunk = None
            i += 2
            continue
        m = _HUNK.match(ln)
        if m:
            if cur is None:
                raise PatchError(f"hunk before any file header: {ln!r}")
            hunk = Hunk(
                int(m.group(1)),
                int(m.group(2) if m.group(2) is not None else 1),
                int(m.group(3)),
                int(m.group(4) if m.group(4) is not None else 1),
            )
            cur.hunks.append(hunk)
        elif hunk is not None and ln[:1] in (" ", "-", "+"):
            hunk.lines.append(ln)
        elif hunk is not None and ln == "":
            hunk.lines.append(" ")  # a blank context line whose leading space was trimmed
        elif ln.startswith("\\"):
            pass  # "\ No newline at end of file"
        elif ln.startswith(("diff ", "index ", "new file", "deleted file", "similarity")):
            hunk = None
        elif hunk is not None:
            raise PatchError(f"unexpected line in a hunk: {ln[:60]!r}")
        i += 1
    for fp in files:
        for h in fp.hunks:
            if len(h.old_lines()) != h.old_len or len(h.new_lines()) != h.new_len:
                raise PatchError(f"{fp.path}: hunk @@ -{h.old_start} has the wrong line counts")
    if not files:
        raise PatchError("no file in the patch")
    return files


@dataclass
class Applied:
    """A file patched: its new text and, for each hunk, where it landed (old and new 0-based
    starts), for mapping the finding's line into the patched file."""

    path: str
    text: str
    placed: list[tuple[Hunk, int, int]]


def _find(src: list[str], want: list[str], guess: int) -> int | None:
    """Index where ``want`` occurs in ``src``, the nearest to ``guess`` first."""
    n = len(want)
    if n == 0:
        return max(0, min(guess, len(src)))
    for d in range(len(src) + 1):
        for at in (guess - d, guess + d) if d else (guess,):
            if 0 <= at <= len(src) - n and src[at : at + n] == want:
                return at
    return None


def apply_file(text: str, fp: FilePatch) -> Applied:
    """Apply ``fp``'s hunks to ``text`` (exact context; a hunk may have moved, not changed)."""
    src = text.splitlines()
    out: list[str] = []
    placed = []
    pos = 0
    for h in fp.hunks:
        guess = max(0, h.old_start - 1 if h.old_len else h.old_start)
        at = _find(src, h.old_lines(), max(guess, pos))
        if at is None or at < pos:
            raise PatchError(f"{fp.path}: hunk @@ -{h.old_start},{h.old_len} does not apply")
        out.extend(src[pos:at])
        placed.append((h, at, len(out)))
        out.extend(h.new_lines())
        pos = at + h.old_len
    out.extend(src[pos:])
    new = "\n".join(out) + ("\n" if text.endswith("\n") or not text else "")
    return Applied(fp.path, new, placed)


def _block_map(h: Hunk, at: int, new_at: int) -> dict[int, list[int]]:
    """0-based old line -> 0-based new lines, for the old lines of one placed hunk. A removed
    line maps to the lines added in its change block (a run of ``-``/``+`` lines), or to the
    next kept line when the block only removes."""
    out: dict[int, list[int]] = {}
    oi, ni = at, new_at
    removed: list[int] = []
    added: list[int] = []

    def close(next_new: int) -> None:
        for o in removed:
            out[o] = list(added) if added else [next_new]
        removed.clear()
        added.clear()

    for ln in h.lines:
        tag = ln[:1]
        if tag == "-":
            removed.append(oi)
            oi += 1
        elif tag == "+":
            added.append(ni)
            ni += 1
        else:
            close(ni)
            out[oi] = [ni]
            oi += 1
            ni += 1
    close(ni)
    return out


def map_lines(applied: Applied, first: int, last: int) -> list[int]:
    """1-based lines of the patched file that stand for old lines ``first..last``: unchanged
    lines move by the offset of the hunks above them; a changed line maps to the lines its
    hunk added in its place (or the next line kept, when the hunk only removed)."""
    out: set[int] = set()
    for old in range(first, max(first, last) + 1):
        o = old - 1
        delta = 0
        mapped = None
        for h, at, new_at in applied.placed:
            if o < at:
                break
            if o < at + h.old_len:
                mapped = _block_map(h, at, new_at).get(o, [])
                break
            delta += len(h.new_lines()) - h.old_len
        if mapped is None:
            out.add(old + delta)
        else:
            out.update(n + 1 for n in mapped)
    return sorted(out)


def import_root(relpath: str, path: list[str] | None = None) -> Path | None:
    """The ``sys.path`` entry an import of ``relpath`` (``vllm/x/y.py``) resolves from: the
    first that holds the file (no import, only the directory listing)."""
    for entry in path if path is not None else sys.path:
        base = Path(entry or os.getcwd())
        if (base / relpath).is_file():
            return base
    return None


def module_name(relpath: str) -> str:
    mod = relpath[:-3] if relpath.endswith(".py") else relpath
    mod = mod.replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def build_overlay(dest: Path, root: Path, files: dict[str, str]) -> Path:
    """Mirror ``root``'s top-level packages of ``files`` under ``dest`` by symbolic links, with
    each of ``files`` (relative path -> text) a plain file; returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel, text in sorted(files.items()):
        parts = rel.split("/")
        cur_dest, cur_src = dest, root
        for part in parts[:-1]:
            cur_dest, cur_src = cur_dest / part, cur_src / part
            if cur_dest.is_symlink():
                cur_dest.unlink()
            if not cur_dest.exists():
                cur_dest.mkdir()
                for child in sorted(os.listdir(cur_src)):
                    if child == "__pycache__":
                        continue
                    os.symlink(cur_src / child, cur_dest / child)
        target = cur_dest / parts[-1]
        if target.is_symlink() or target.exists():
            target.unlink()
        target.write_text(text, encoding="utf-8")
    return dest


@dataclass
class SourceFix:
    """One fixed side from source: the files it replaces, and where it came from."""

    kind: str  # "codemod" (a finding's remedy.patch) | "source" (confirm --source DIR)
    patch: str  # the unified diff (importable sources -> patched)
    sha256: str
    files: dict[str, str] = field(default_factory=dict)  # relpath -> patched text
    applied: dict[str, Applied] = field(default_factory=dict)
    root: Path | None = None  # the import root the patch applies to
    label: str = ""  # the codemod's shape and applicability ("keep, safe")

    def lines_for(self, path: str, first: int, last: int) -> list[int] | None:
        a = self.applied.get(path)
        return map_lines(a, first, last) if a is not None else None

    def overlay(self, parent: Path) -> Path:
        assert self.root is not None
        return build_overlay(Path(tempfile.mkdtemp(dir=parent)), self.root, self.files)


def from_patch(patch: str, kind: str = "codemod", sha256: str | None = None) -> SourceFix:
    """Apply ``patch`` to the importable sources (text only); PatchError when it cannot."""
    digest = sha256_text(patch)
    if sha256 and sha256 != digest:
        raise PatchError(f"patch_sha256 {sha256[:12]} does not match the patch ({digest[:12]})")
    fix = SourceFix(kind, patch, digest)
    for fp in parse_patch(patch):
        root = import_root(fp.path)
        if root is None:
            raise PatchError(f"{fp.path} is not on the import path")
        if fix.root is None:
            fix.root = root
        elif root != fix.root:
            raise PatchError(f"{fp.path} is under {root}, not {fix.root}")
        base = fix.files.get(fp.path)
        if base is None:
            base = (root / fp.path).read_text(encoding="utf-8")
        a = apply_file(base, fp)
        fix.files[fp.path] = a.text
        fix.applied[fp.path] = a
    return fix


def _blocks(applied: Applied) -> list[tuple[int, int, tuple[str, ...]]]:
    """The change blocks of one placed patch, context dropped: (first old line, end, the
    lines put in their place), 0-based on the text the patch was applied to."""
    out = []
    for h, at, _ in applied.placed:
        oi = at
        start, removed, added = None, 0, []
        for ln in [*h.lines, " "]:
            tag = ln[:1]
            if tag in ("-", "+"):
                if start is None:
                    start = oi
                if tag == "-":
                    removed += 1
                    oi += 1
                else:
                    added.append(ln[1:])
                continue
            if start is not None:
                out.append((start, start + removed, tuple(added)))
                start, removed, added = None, 0, []
            oi += 1
    return out


def _slide_up(block, src: list[str]):
    """A pure insertion moved as high as the text allows (the same lines inserted one line
    lower or higher read the same: diffs of two patches may place one helper differently)."""
    start, end, added = block
    if start != end or not added:
        return block
    lines = list(added)
    while start > 0 and lines[-1] == src[start - 1]:
        lines = [src[start - 1], *lines[:-1]]
        start -= 1
    return start, start, tuple(lines)


def _place(block: tuple[int, int, tuple[str, ...]]) -> tuple[int, bool]:
    return block[0], block[1] > block[0]


def merge_fixes(fixes: list[SourceFix], kind: str = "codemod") -> SourceFix:
    """One fix from several codemod patches of the same sources (a layer with several
    findings: every codemod applied at once). Each patch is placed on the original text by
    itself; their change blocks (context dropped) are laid together: a block two patches both
    make (an import, a helper) once, insertions at one place in patch order, and blocks that
    change the same lines differently are a PatchError. The merged file must compile."""
    if len(fixes) == 1:
        return fixes[0]
    from reload_lint.fix.udiff import unified  # no libcst: the GPU machine has none

    root = fixes[0].root
    paths = sorted({p for fx in fixes for p in fx.files})
    diff = []
    for path in paths:
        assert root is not None
        base = (root / path).read_text(encoding="utf-8")
        src = base.splitlines()
        blocks: list[tuple[int, int, tuple[str, ...]]] = []
        for fx in fixes:
            if fx.root != root:
                raise PatchError(f"{path}: the patches apply under {fx.root} and {root}")
            if path in fx.applied:
                for b in _blocks(fx.applied[path]):
                    b = _slide_up(b, src)
                    if b not in blocks:
                        blocks.append(b)
        # by place; an insertion before a replacement that starts where it is; else in order
        order = sorted(range(len(blocks)), key=lambda i: (*_place(blocks[i]), i))
        blocks = [blocks[i] for i in order]
        for (_, e1, _), (s2, _, _) in zip(blocks, blocks[1:], strict=False):
            if s2 < e1:
                raise PatchError(f"{path}: two codemods change line {s2 + 1} differently")
        out: list[str] = []
        pos = 0
        for start, end, added in blocks:
            out.extend(src[pos:start])
            out.extend(added)
            pos = max(pos, end)
        out.extend(src[pos:])
        text = "\n".join(out) + ("\n" if base.endswith("\n") or not base else "")
        try:
            compile(text, path, "exec")
        except SyntaxError as exc:
            raise PatchError(f"{path}: the codemods together do not compile: {exc}") from exc
        diff.append(unified(path, base, text))
    return from_patch("".join(diff), kind)


def finding_patch(raw: dict) -> tuple[str, str | None, str] | None:
    """(patch, sha256, "shape, applicability") of a findings-JSON finding's codemod
    (``remedy.patch`` / ``remedy.patch_sha256``, or their flat mirrors ``fix_patch`` /
    ``fix_patch_sha256``; docs/findings.md), if it has one."""
    remedy = raw.get("remedy") if isinstance(raw.get("remedy"), dict) else {}
    if not remedy and isinstance(raw.get("fix"), dict):
        remedy = raw["fix"]
    label = ", ".join(str(remedy[k]) for k in ("shape", "applicability") if remedy.get(k))
    patch = remedy.get("patch")
    if isinstance(patch, str) and patch.strip():
        return patch, remedy.get("patch_sha256"), label
    patch = raw.get("fix_patch")
    if isinstance(patch, str) and patch.strip():
        return patch, raw.get("fix_patch_sha256"), label
    return None


def cleanup(parent: Path) -> None:
    shutil.rmtree(parent, ignore_errors=True)
