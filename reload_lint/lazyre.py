"""A regular expression compiled on first use, not at import.

Input: a pattern and flags, as `re.compile` takes them. Output: an object with the compiled
pattern's methods (`match`, `search`, `finditer`, ...), compiled the first time one is
called. Modules that a cached run imports but seldom asks to match (bases.py: only a run
that names or guesses a `--base`) keep their patterns this way, so importing them costs no
regex compilation (docs/performance.md, Session 16).
"""

from __future__ import annotations

import re


class LazyPattern:
    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern | None = None

    def __getattr__(self, name: str):
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)
