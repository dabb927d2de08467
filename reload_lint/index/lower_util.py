"""Shared pieces of the lowering (index/extract.py): the parser call, operator tables, small
readers of `ast` nodes, the string-literal tokenizer and the EXTENSIONS switch. Imports nothing
of reload_lint."""

from __future__ import annotations

import ast
import warnings

_BINOPS = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
}
_UNARY = {ast.USub: "Minus", ast.UAdd: "Plus", ast.Invert: "BitInvert", ast.Not: "Not"}

_TRY_STAR = getattr(ast, "TryStar", None)  # Python 3.11+
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPOUND = frozenset(
    t
    for t in (
        ast.If,
        ast.For,
        ast.AsyncFor,
        ast.While,
        ast.With,
        ast.AsyncWith,
        ast.Try,
        _TRY_STAR,
        ast.FunctionDef,
        ast.AsyncFunctionDef,
        ast.ClassDef,
        ast.Match,
    )
    if t is not None
)
_TRIES = (ast.Try, _TRY_STAR) if _TRY_STAR is not None else (ast.Try,)
OTHER = ("?",)


class TooNested(Exception):
    """CPython's parser gave up on the file's nesting (a depth limit, its stack, recursion)."""


def parse_source(source: str) -> ast.Module:
    """`ast.parse`, quietly (no SyntaxWarning for odd escapes on stderr). Raises SyntaxError
    for invalid code and TooNested where the parser refuses the nesting."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except SyntaxError as exc:
        msg = str(exc.msg or "")
        if "too many nested" in msg or "too complex" in msg or "nested too deeply" in msg:
            raise TooNested(f"nested too deeply for Python's own parser ({msg})") from None
        raise
    except RecursionError:
        raise TooNested("nested too deeply for Python's own parser") from None
    except MemoryError:
        raise TooNested(
            "nested too deeply for Python's own parser (parser stack overflow)"
        ) from None
    except ValueError as exc:  # NUL bytes (screened before, when read from a file)
        raise SyntaxError(str(exc)) from None


def dotted(expr) -> str | None:
    """'a.b.c' for ("a", ("a", ("n","a"),"b"),"c"), else None."""
    parts = []
    while expr[0] == "a":
        parts.append(expr[2])
        expr = expr[1]
    if expr[0] != "n":
        return None
    parts.append(expr[1])
    return ".".join(reversed(parts))


def _name_of(node) -> str | None:
    """A plain name's text: `x`, and the keywords `None`, `True`, `False`."""
    tp = type(node)
    if tp is ast.Name:
        return node.id
    if tp is ast.Constant and _is_singleton(node.value):
        return str(node.value)
    return None


def _is_singleton(v) -> bool:
    return v is None or v is True or v is False


def _ast_dotted(node) -> str | None:
    tp = type(node)
    if tp is ast.Attribute:
        base = _ast_dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return _name_of(node)


def _is_const(node, value) -> bool:
    """`node` is the literal `None` / `True` / `False` given."""
    return type(node) is ast.Constant and node.value is value


def _call_args(call) -> list:
    """(value, keyword, star) for each argument, in source order (keywords may come first)."""
    out = []
    for a in call.args:
        if type(a) is ast.Starred:
            out.append(((a.lineno, a.col_offset), a.value, None, "*"))
        else:
            out.append(((a.lineno, a.col_offset), a, None, ""))
    if call.keywords:
        for k in call.keywords:
            star = "**" if k.arg is None else ""
            out.append(((k.lineno, k.col_offset), k.value, k.arg, star))
        if call.args:
            out.sort(key=lambda t: t[0])
    return [t[1:] for t in out]


def _has_args(call) -> bool:
    return bool(call.args or call.keywords)


def _all_params(a: ast.arguments) -> list:
    out = [*a.posonlyargs, *a.args]
    if a.vararg is not None:
        out.append(a.vararg)
    out += a.kwonlyargs
    if a.kwarg is not None:
        out.append(a.kwarg)
    return out


def _param_defaults(a: ast.arguments) -> dict:
    """id(param) -> its default expression."""
    out = {}
    pos = [*a.posonlyargs, *a.args]
    if a.defaults:
        for p, d in zip(pos[len(pos) - len(a.defaults) :], a.defaults, strict=True):
            out[id(p)] = d
    for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if d is not None:
            out[id(p)] = d
    return out


def _last_block(node) -> list:
    """The statements of a compound statement's last clause (an elif: its own last clause)."""
    tp = type(node)
    if tp is ast.If:
        return node.orelse or node.body
    if tp in (ast.For, ast.AsyncFor, ast.While):
        return node.orelse or node.body
    if tp in _TRIES:
        return (
            node.finalbody
            or node.orelse
            or (node.handlers[-1].body if node.handlers else node.body)
        )
    if tp is ast.Match:
        return node.cases[-1].body
    return node.body


def _is_blank(line: str) -> bool:
    """An empty line for the tokenizer: only whitespace and maybe a comment."""
    s = line.lstrip(" \t\f")
    return not s or s[0] == "#"


# ---- string literals ---------------------------------------------------------------------
# The record keeps what libcst kept: a plain string's value per token (so a concatenation of
# bytes fails as it did), an f-string's text parts as written, and an f-string with a conversion
# or a format spec as an unknown string. CPython 3.10/3.11 merge the pieces of a concatenation
# and give f-string text parts no positions, so the tokens are read from the source segment.

_PREFIX = frozenset("rRbBuUfF")


def _skip_literal(s: str, k: int) -> int:
    """The index after the string literal whose quote starts at s[k] (prefix already read)."""
    q = s[k]
    quote = q * 3 if s.startswith(q * 3, k) else q
    k += len(quote)
    n = len(s)
    while k < n:
        c = s[k]
        if c == "\\":
            k += 2
            continue
        if c == q and s.startswith(quote, k):
            return k + len(quote)
        k += 1
    return n


def _fstring_field(s: str, k: int) -> tuple[int, bool]:
    """Scan a replacement field from just after its `{`: (index after its `}`, whether it has a
    conversion or a format spec)."""
    n = len(s)
    depth = 0
    special = False
    while k < n:
        c = s[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                return k + 1, special
            depth -= 1
        elif c == "'" or c == '"':
            k = _skip_literal(s, k)
            continue
        elif depth == 0 and c == "!":
            if s.startswith("!=", k):
                k += 2
                continue
            special = True
        elif depth == 0 and c == ":":
            k += 1
            while k < n:  # the format spec, with its own nested fields
                c = s[k]
                if c == "{":
                    k = _fstring_field(s, k + 1)[0]
                    continue
                if c == "}":
                    return k + 1, True
                k += 2 if c == "\\" else 1
            return n, True
        k += 1
    return n, special


def _string_tokens(seg: str) -> list:
    """The string tokens of a string expression's source: ("plain", token text) or
    ("f", parts), parts being ("t", text as written) and ("e", conversion-or-spec)."""
    toks: list = []
    i, n = 0, len(seg)
    while i < n:
        c = seg[i]
        if c in " \t\f\n\\":
            i += 1
            continue
        if c == "#":
            j = seg.find("\n", i)
            i = n if j < 0 else j
            continue
        j = i
        while j < n and seg[j] in _PREFIX:
            j += 1
        prefix = seg[i:j].lower()
        if j >= n or seg[j] not in "'\"":
            raise ValueError(f"unexpected text in a string expression: {seg[i : i + 20]!r}")
        if "f" not in prefix:
            end = _skip_literal(seg, j)
            toks.append(("plain", seg[i:end]))
            i = end
            continue
        q = seg[j]
        quote = q * 3 if seg.startswith(q * 3, j) else q
        raw = "r" in prefix
        k = j + len(quote)
        parts: list = []
        start = k
        while k < n:
            c = seg[k]
            if c == q and seg.startswith(quote, k):
                break
            if c == "\\":
                if not raw and seg.startswith("N{", k + 1):
                    e = seg.find("}", k)
                    k = n if e < 0 else e + 1
                    continue
                k += 1 if seg[k + 1 : k + 2] in ("{", "}") else 2
                continue
            if c == "{":
                if seg.startswith("{", k + 1):
                    k += 2
                    continue
                if k > start:
                    parts.append(("t", seg[start:k]))
                k, special = _fstring_field(seg, k + 1)
                parts.append(("e", special))
                start = k
                continue
            if c == "}":
                k += 2 if seg.startswith("}", k + 1) else 1
                continue
            k += 1
        if k > start:
            parts.append(("t", seg[start:k]))
        toks.append(("f", parts))
        i = k + len(quote)
    return toks


def _ends_in_comment(line: str) -> bool:
    """A line ending in a backslash that sits in a comment (no continuation)."""
    if "#" not in line:
        return False
    import io
    import tokenize

    try:
        for tok in tokenize.generate_tokens(io.StringIO(line + "\n").readline):
            if tok.type == tokenize.COMMENT:
                return True
    except (tokenize.TokenError, SyntaxError):
        return False
    return False


def _closing_paren(seg: str) -> int:
    """Index of the bracket closing seg[0], skipping strings and comments; -1 if none."""
    depth = 0
    k, n = 0, len(seg)
    while k < n:
        c = seg[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return k
        elif c == "'" or c == '"':
            k = _skip_literal(seg, k)
            continue
        elif c == "#":
            e = seg.find("\n", k)
            k = n if e < 0 else e
            continue
        k += 1
    return -1


def _is_int(v) -> bool:
    return type(v) is int


def storage_pairs(test) -> list[tuple]:
    """The (a, b) node pairs an `assert` test states share storage: `a.data_ptr() ==
    b.data_ptr()` (or through `.untyped_storage()` / `.storage()`), each conjunct of an `and`."""
    out: list[tuple] = []
    tests = test.values if type(test) is ast.BoolOp and type(test.op) is ast.And else [test]
    for t in tests:
        if type(t) is ast.Compare and len(t.ops) == 1 and type(t.ops[0]) is ast.Eq:
            a, b = _storage_of(t.left), _storage_of(t.comparators[0])
            if a is not None and b is not None:
                out.append((a, b))
    return out


def _storage_of(node):
    """`x` of `x.data_ptr()`, `x.untyped_storage().data_ptr()` or `x.storage().data_ptr()`."""
    base = _bare_method(node, ("data_ptr",))
    if base is None:
        return None
    inner = _bare_method(base, ("untyped_storage", "storage"))
    return base if inner is None else inner


def _bare_method(node, names: tuple):
    """`x` of `x.<name>()` (no arguments) for a name in `names`, else None."""
    if type(node) is not ast.Call or node.args or node.keywords:
        return None
    f = node.func
    return f.value if type(f) is ast.Attribute and f.attr in names else None


# Lowerings added after the libcst extractor (876de75): an `elif` test's flag terms, a
# body-form `or` of flag terms as one compound term, `x.dtype != D` terms, a class's string
# constants (`consts`), the record's none_buffers / nonpersistent_buffers and storage_asserts,
# a function's if-chain `branches`. scripts/diff_extract.py turns them off to compare every other part of a record with that
# extractor.
EXTENSIONS = True
