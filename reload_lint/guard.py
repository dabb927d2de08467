"""Screen source text before CPython 3.10's parser builds its tree.

Files are parsed with `ast.parse`, which refuses deep nesting cleanly: 200 nested brackets
("too many nested parentheses"), a parser stack limit (MemoryError: thousands of unary
operators, lambdas, conditional expressions, `**`), and, from Python 3.11 on, a depth limit
while it builds the tree (RecursionError: thousands of chained attribute, call, subscript or
binary-operator steps). The extractor turns each of those into RL906 (index/extract.py,
cache._extract_job).

Python 3.10 lacks the last limit: a statement with a very long left-recursive chain
(`a.b.b.b...`, `f()()()...`, `x[0][0]...`, `1 + 1 + ...`) parses, and converting its tree to
Python objects recurses in C until the stack overflows: the process dies with SIGSEGV, which
no `except` can catch (and which hangs a worker pool). Measured on CPython 3.10.13 with an
8 MiB stack: 100,000 steps pass, 150,000 crash. So on 3.10, and only there, a file that may
hold a statement with more than `_MAX_STEPS` such steps is scanned, and refused when one does.
"""

from __future__ import annotations

import re
import sys

_MAX_STEPS = 20_000  # well below the 3.10 crash depth measured above

# a step: `.name`, `(`, `[`, or a binary operator (a run of operator characters)
_STEP_CHARS = ".([+-*/%@&|^<>"

# strings and comments first, so what is inside them does not count
_TOKEN = re.compile(
    r"""(?P<str>(?:[rRbBuUfF]{0,2})(?P<q>'''|\"\"\")[\s\S]*?(?P=q)"""
    r"""|(?:[rRbBuUfF]{0,2})'(?:\\.|[^'\\\n])*'|(?:[rRbBuUfF]{0,2})"(?:\\.|[^"\\\n])*")"""
    r"""|(?P<com>\#[^\n]*)"""
    r"""|(?P<open>[(\[{])|(?P<close>[)\]}])"""
    r"""|(?P<nl>\n)"""
    r"""|(?P<number>\d[\w]*(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)"""
    r"""|(?P<op>[-+*/%@&|^<>]+|\.)"""
)


def _scan(text: str) -> str | None:
    """Why a statement of `text` is too long a chain for Python 3.10's parser, or None: counts
    the steps of each logical line (a statement cannot nest deeper than it has steps)."""
    depth = 0
    steps = 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "open" or kind == "op":
            steps += 1
            if steps > _MAX_STEPS:
                return (
                    f"a statement with more than {_MAX_STEPS} attribute/call/subscript/operator "
                    "steps (Python 3.10's parser could crash on it)"
                )
            if kind == "open":
                depth += 1
        elif kind == "close":
            depth = max(0, depth - 1)
        elif kind == "nl" and depth == 0:
            steps = 0
    return None


def too_complex(text: str) -> str | None:
    """None when `ast.parse` can safely parse `text` on this Python; else why not (one line,
    for RL906). Always None from Python 3.11 on."""
    if sys.version_info >= (3, 11):
        return None
    if sum(text.count(c) for c in _STEP_CHARS) <= _MAX_STEPS:
        return None  # no statement can hold more steps than the whole file
    return _scan(text)
