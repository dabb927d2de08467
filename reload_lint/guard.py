"""Screen source text before libcst sees it.

libcst's native (Rust) parser has no nesting limit: a few thousand nested brackets, unary
operators, lambdas or conditional expressions overflow the C stack and the process dies with
SIGSEGV, which no `except` can catch (and which hangs a multiprocessing pool). CPython's own
parser stops far earlier and cleanly (200 nested brackets; a parser stack limit; an AST depth
limit), so a file CPython rejects for nesting is reported as RL906 instead of being parsed.

Measured on CPython 3.11 / libcst 1.9 with an 8 MiB stack: libcst dies from about 1,230
nested brackets, 3,490 nested lambdas, 4,620 chained subscripts (`a[0][0]...`), 5,630 chained
conditional expressions, 5,940 attribute steps (`a.b.b...`), 6,180 chained calls, 7,000
chained `**` and 8,200 unary operators; CPython rejects each below 3,000 (brackets at 200).

`ast.parse` only parses: nothing is compiled to bytecode, imported or executed. When CPython
reports an ordinary syntax error (a real error, or syntax newer than the running interpreter
that libcst may still accept), a conservative token scan stands in for it.
"""

from __future__ import annotations

import ast
import re
import warnings

# Below this many nesting-capable tokens in the whole file no parser can get deep enough to
# matter, so the (cheap, but not free) CPython parse is skipped.
_CHEAP_LIMIT = 1000
# The fallback scan's limits: well below the smallest libcst crash depths measured above.
_MAX_BRACKETS = 200
_MAX_CHAIN = 1000
_MAX_TRAILERS = 2000  # `.x`, `(...)`, `[...]` per statement (libcst: ~4,600)

_NEST_CHARS = "([{-+~*."  # "." too: `a.b.b.b...` nests as deep as brackets
_NEST_WORDS = ("not ", "lambda", " if ", "await ")

# strings and comments first, so brackets inside them do not count
_TOKEN = re.compile(
    r"""(?P<str>(?:[rRbBuUfF]{0,2})(?P<q>'''|\"\"\")[\s\S]*?(?P=q)"""
    r"""|(?:[rRbBuUfF]{0,2})'(?:\\.|[^'\\\n])*'|(?:[rRbBuUfF]{0,2})"(?:\\.|[^"\\\n])*")"""
    r"""|(?P<com>\#[^\n]*)"""
    r"""|(?P<open>[(\[{])|(?P<close>[)\]}])"""
    r"""|(?P<nl>\n)"""
    r"""|(?P<chain>\*\*|\blambda\b|\bif\b)"""
    r"""|(?P<prefix>(?<![\w)\]}])[-+~]|\bnot\b|\bawait\b)"""
    r"""|(?P<number>\d[\w]*(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)"""
    r"""|(?P<dot>\.)"""
    r"""|(?P<operand>\w+)"""
)


def _nesting_tokens(text: str) -> int:
    return sum(text.count(c) for c in _NEST_CHARS) + sum(text.count(w) for w in _NEST_WORDS)


def _scan(text: str) -> str | None:
    """Conservative stand-in for CPython's limits: bracket depth, and chain operators per
    logical line (a statement cannot nest deeper than it has nesting tokens)."""
    depth = 0
    chain = 0  # right-recursive chains in this statement: `**`, lambda, conditional
    prefix = 0  # unary operators in a row, with no operand between them
    trailers = 0  # `.name`, calls and subscripts in this statement (left-recursive chains)
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "open" or kind == "dot":
            trailers += 1
            if trailers > _MAX_TRAILERS:
                return f"a statement with more than {_MAX_TRAILERS} attribute/call/subscript steps"
            if kind == "dot":
                continue
            depth += 1
            if depth > _MAX_BRACKETS:
                return f"more than {_MAX_BRACKETS} nested brackets"
        elif kind == "close":
            depth = max(0, depth - 1)
        elif kind == "nl":
            if depth == 0:
                chain = trailers = 0
        elif kind == "operand" or kind == "number":
            prefix = 0
        elif kind == "chain":
            chain += 1
            if chain > _MAX_CHAIN:
                return f"a statement with more than {_MAX_CHAIN} chained operators"
        elif kind == "prefix":
            prefix += 1
            if prefix > _MAX_CHAIN:
                return f"more than {_MAX_CHAIN} unary operators in a row"
    return None


def too_complex(text: str) -> str | None:
    """None when libcst can safely parse `text`; else why not (one line, for RL906)."""
    if _nesting_tokens(text) < _CHEAP_LIMIT:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarning for invalid escapes etc.
            ast.parse(text)
    except RecursionError:
        return "nested too deeply for Python's own parser"
    except MemoryError:
        return "nested too deeply for Python's own parser (parser stack overflow)"
    except SyntaxError as exc:
        msg = str(exc.msg or "")
        if "too many nested" in msg or "too complex" in msg or "nested too deeply" in msg:
            return f"nested too deeply for Python's own parser ({msg})"
        return _scan(text)  # a real error, or newer syntax: libcst decides, if it is safe
    except ValueError:  # source code string cannot contain null bytes (screened earlier)
        return None
    return None
