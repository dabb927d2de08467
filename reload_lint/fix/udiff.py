"""Unified diffs of whole files, with no libcst: `confirm`'s fixed side lays several codemod
patches together on a machine that has only the standard library and torch."""

from __future__ import annotations

import difflib


def unified(path: str, before: str, after: str, new_file: bool = False) -> str:
    """`git apply`-able unified diff of one file (a/ and b/ prefixes, 3 lines of context; a
    file the fixes create comes from /dev/null)."""
    if before == after:
        return ""
    a, b = _lines(before), _lines(after)
    src = "/dev/null" if new_file else f"a/{path}"
    out = list(difflib.unified_diff(a, b, fromfile=src, tofile=f"b/{path}"))
    return "".join(out)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines
