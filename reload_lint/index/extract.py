"""One parse per file: CPython's `ast` tree -> a small, picklable module record (the per-file
index).

The record holds imports, classes, functions and, for each function, its statements lowered
to a tiny expression language of tuples. Everything later (summaries, analysis) reads only
these records, so they are what the content-hash cache stores. Nothing here imports or
executes the audited code: `ast.parse` only parses.

Expression forms (tuples):
  ("n", name)                       name load (`None`, `True`, `False` included)
  ("a", base, attr)                 attribute
  ("c", func, args, kwargs, line, star)   call; kwargs is a tuple of (name, expr)
  ("b", op, left, right, line)      binary op        ("u", op, operand) unary op
  ("s", base, index)                subscript; index is ("slice",) for basic slicing
  ("k", kind, value)                constant: none/int/float/str/bool/other; an int's value is
                                    its source text ("0x10", "1_000")
  ("t", kind, items)                tuple/list/set display; `*x` items are ("star", x)
  ("d", items)                      dict display; items: tuple of (key, value)
  ("l", params, body, free)         lambda; free = names it reads from the enclosing scope
  ("if", body, orelse)              conditional expression
  ("f", parts)                      f-string; parts are ("k", "str", text) or expressions
  ("?",)                            anything else
Statement forms: ("assign"|"aug"|"expr"|"ret"|"def"|"del"|"for", line, col, end_line, ...);
pseudo-statements: ("narrow"/"unnarrow", ...) around an isinstance block, and state flags read
by an `if`: ("flagon", .., base, attr, sense, block) / ("flagoff", .., base, attr) around a
block that runs when the flag's truth is `sense`, ("flagexit", .., base, attr, sense, block)
after an
`if <flag>: ... return` (the rest of the function runs when it is not).

Positions: `line` is the node's first line, `col` its first column (1-based, in characters),
`end_line` a simple statement's last line; for a compound statement (def, class, if, for,
with, ...) it is the line after its last line, where that last line also counts the comment
and blank lines after the body that are indented at least as deep as its last block (they
belong to the block, not to the next statement). These are the conventions of the libcst
lowering this one replaced (commit 876de75); `scripts/diff_extract.py` checks the two give
identical records on every file of the audited trees.

The lowering keeps that concrete-syntax view elsewhere too: the body of a one-line suite
(`if x: return`, `def f(): ...`) is not lowered (its block still gets an id); `None`, `True`
and `False` are names; f-string text parts are their source text (`{{` and escapes as
written); an implicit concatenation joins the values of its literals (so one of bytes fails,
as it always did: the file is RL906); `a[1, 2]` has two subscript elements, `a[(1, 2)]` one.
Identifiers are as Python reads them, NFKC-normalized (PEP 3131), where libcst kept them as
written: `µ` is `μ`.
"""

from __future__ import annotations

import ast
import gc
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


class _Extractor:
    def __init__(self, module_name: str, is_package: bool, source: str):
        self.module_name = module_name
        self.is_package = is_package
        self.lines = source.split("\n")
        self._bytes: dict[int, bytes] = {}  # line -> its UTF-8 bytes (non-ASCII lines only)
        # path of suite ids from the function body down to the current block: a later
        # assignment overwrites an earlier one only when its block encloses the earlier one's
        self.local_flags: dict[str, list] = {}  # local name -> the flag test it holds
        self.block_path: list[int] = []
        self.block_ids = 0
        self.imports: dict[str, str] = {}
        self.functions: dict[str, dict] = {}
        self.classes: dict[str, dict] = {}
        self.buffers: set[str] = set()
        self.globals: dict[str, tuple] = {}
        self._suite: dict[int, bool] = {}

    # ---- source text and positions ---------------------------------------------------
    def col(self, lineno: int, offset: int) -> int:
        """Character column of a UTF-8 byte offset (what ast gives) on line `lineno`."""
        line = self.lines[lineno - 1]
        if line.isascii():
            return offset
        b = self._bytes.get(lineno)
        if b is None:
            b = self._bytes[lineno] = line.encode("utf-8")
        return len(b[:offset].decode("utf-8", "replace"))

    def segment(self, node) -> str:
        return self.text(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)

    def text(self, l0: int, b0: int, l1: int, b1: int) -> str:
        """The source between two ast positions (lines, UTF-8 byte offsets)."""
        c0, c1 = self.col(l0, b0), self.col(l1, b1)
        lines = self.lines
        if l0 == l1:
            return lines[l0 - 1][c0:c1]
        return "\n".join([lines[l0 - 1][c0:], *lines[l0 : l1 - 1], lines[l1 - 1][:c1]])

    def span(self, node) -> tuple[int, int, int]:
        ln = node.lineno
        col = self.col(ln, node.col_offset) + 1
        if type(node) in _COMPOUND:
            return (ln, col, self._end(node))
        return (ln, col, node.end_lineno)

    def _end(self, node) -> int:
        """The line after a compound statement, its blocks' trailing comments included: each
        last block owns the comment/blank lines after it up to the last one indented at least
        as deep as the block (innermost block first)."""
        blocks = []
        s = node
        while type(s) in _COMPOUND:
            if type(s) is ast.If and self.is_elif(s):
                s = s.orelse[0]  # an elif is part of its `if`, not a block of it
                continue
            b = _last_block(s)
            if self.is_suite(b):
                break
            blocks.append(b)
            s = b[-1]
        pos = node.end_lineno
        if not blocks:
            return pos + 1
        lines = self.lines
        run = pos
        while run < len(lines) and _is_blank(lines[run]):
            run += 1
        for b in reversed(blocks):
            first = b[0]
            indent = lines[first.lineno - 1][: self.col(first.lineno, first.col_offset)]
            for ln in range(run, pos, -1):
                if lines[ln - 1].startswith(indent):
                    pos = ln
                    break
        return pos + 1

    def is_suite(self, stmts: list) -> bool:
        """The block is a one-line suite on its header's line (`if x: return`), not an
        indented block."""
        first = stmts[0]
        got = self._suite.get(id(first))
        if got is None:
            ln = first.lineno
            line = self.lines[ln - 1]
            got = bool(line[: self.col(ln, first.col_offset)].strip(" \t\f"))
            if not got and ln >= 2:  # `if x: \` + newline: still the header's logical line
                prev = self.lines[ln - 2]
                got = prev.endswith("\\") and not _ends_in_comment(prev)
            self._suite[id(first)] = got
        return got

    def _int_text(self, node) -> str:
        ln = node.lineno
        line = self.lines[ln - 1]
        if line.isascii():
            return line[node.col_offset : node.end_col_offset]
        return line[self.col(ln, node.col_offset) : self.col(ln, node.end_col_offset)]

    def _one_token(self, node) -> bool:
        """A string constant written as one literal (not an implicit concatenation)."""
        seg = self.segment(node)
        j = 0
        while seg[j] in _PREFIX:
            j += 1
        q = seg[j]
        quote = q * 3 if seg.startswith(q * 3, j) else q
        if quote not in seg[j + len(quote) : len(seg) - len(quote)]:
            return True
        return len(_string_tokens(seg)) == 1

    def simple_string(self, node) -> bool:
        """A one-literal str/bytes constant (libcst's SimpleString)."""
        return (
            type(node) is ast.Constant
            and type(node.value) in (str, bytes)
            and self._one_token(node)
        )

    # ---- imports ---------------------------------------------------------------------
    def _resolve_relative(self, level: int, module: str | None) -> str:
        parts = self.module_name.split(".") if self.module_name else []
        if not self.is_package:
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
        base = ".".join(parts)
        if module:
            return f"{base}.{module}" if base else module
        return base

    def add_import(self, node) -> None:
        if type(node) is ast.Import:
            for alias in node.names:
                full = alias.name
                if alias.asname is not None:
                    self.imports[alias.asname] = full
                else:
                    top = full.split(".")[0]
                    self.imports.setdefault(top, top)
        else:
            mod = node.module
            level = node.level or 0
            base = self._resolve_relative(level, mod) if level else (mod or "")
            if node.names and node.names[0].name == "*":
                self.imports.setdefault("*", "")
                self.imports["*"] = (self.imports["*"] + " " + base).strip()
                return
            for alias in node.names:
                name = alias.name
                local = alias.asname if alias.asname is not None else name
                self.imports[local] = f"{base}.{name}" if base else name

    # ---- expressions -----------------------------------------------------------------
    def string(self, node) -> tuple:
        """A str/bytes constant: its value, or, for an implicit concatenation, the values of
        its literals joined (bytes fail to join, as they always did)."""
        if self._one_token(node):
            return ("k", "str", node.value)
        return self.fstring(node)

    def fstring(self, node) -> tuple:
        """`f"{prefix}_scale"` -> ("f", (("n", "prefix"), ("k", "str", "_scale"))); a plain
        concatenation of literals folds to one ("k", "str", ...); a conversion or format spec
        (`{x!r}`, `{x:>4}`) is not a name anyone builds attributes from: unknown."""
        fields = (
            [v.value for v in node.values if type(v) is ast.FormattedValue]
            if type(node) is ast.JoinedStr
            else []
        )
        parts: list = []
        nxt = 0
        for tok in _string_tokens(self.segment(node)):
            if tok[0] == "plain":
                try:
                    parts.append(("k", "str", ast.literal_eval(tok[1])))
                except Exception:
                    return ("k", "str", None)
                continue
            for kind, what in tok[1]:
                if kind == "t":
                    parts.append(("k", "str", what))
                elif what:
                    return ("k", "str", None)
                else:
                    parts.append(self.expr(fields[nxt]))
                    nxt += 1
        if nxt != len(fields):
            raise ValueError("f-string fields do not match the parsed expressions")
        if all(p[0] == "k" and p[2] is not None for p in parts):
            return ("k", "str", "".join(p[2] for p in parts))
        return ("f", tuple(parts))

    def expr(self, node) -> tuple:
        fn = _EXPR.get(type(node))
        return fn(self, node) if fn is not None else OTHER

    def _x_name(self, node):
        return ("n", node.id)

    def _x_attribute(self, node):
        return ("a", self.expr(node.value), node.attr)

    def _x_call(self, node):
        args = []
        kwargs = []
        star = False
        for a in node.args:
            if type(a) is ast.Starred:
                star = True
            else:
                args.append(self.expr(a))
        for k in node.keywords:
            if k.arg is None:
                star = True
            else:
                kwargs.append((k.arg, self.expr(k.value)))
        return ("c", self.expr(node.func), tuple(args), tuple(kwargs), node.lineno, star)

    def _x_binop(self, node):
        op = _BINOPS.get(type(node.op), "?")
        return ("b", op, self.expr(node.left), self.expr(node.right), node.lineno)

    def _x_unaryop(self, node):
        return ("u", _UNARY[type(node.op)], self.expr(node.operand))

    def _x_subscript(self, node):
        elems = self.subscript_elements(node)
        basic = True
        for v in elems:
            tp = type(v)
            if tp is ast.Slice:
                continue
            if tp is ast.Constant and (_is_int(v.value) or v.value is ... or v.value is None):
                continue
            if tp is ast.UnaryOp and type(v.operand) is ast.Constant and _is_int(v.operand.value):
                continue
            basic = False
        if basic:
            index = ("slice",)
        elif len(elems) == 1 and type(elems[0]) is not ast.Slice:
            index = self.expr(elems[0])
        else:
            index = OTHER
        return ("s", self.expr(node.value), index)

    def subscript_elements(self, node) -> list:
        """The subscript's elements as libcst lists them: `a[1, 2]` has two, `a[(1, 2)]` one;
        a starred element stands for its value."""
        sl = node.slice
        if type(sl) is ast.Tuple and not self.parenthesized(sl):
            return [e.value if type(e) is ast.Starred else e for e in sl.elts]
        return [sl]

    def parenthesized(self, tup) -> bool:
        """A tuple written in its own parentheses (`(1, 2)`, not `(1), 2`)."""
        if not tup.elts:
            return True
        first = tup.elts[0]
        if (first.lineno, first.col_offset) == (tup.lineno, tup.col_offset):
            return False
        seg = self.segment(tup)
        if not seg.startswith("("):
            return False
        return _closing_paren(seg) == len(seg) - 1

    def _x_constant(self, node):
        v = node.value
        tp = type(v)
        if v is None or tp is bool:
            return ("n", str(v))
        if tp is int:
            return ("k", "int", self._int_text(node))
        if tp is float or tp is complex:
            return ("k", "float", None)
        if tp is str or tp is bytes:
            return self.string(node)
        return OTHER

    def _x_joinedstr(self, node):
        return self.fstring(node)

    def _x_display(self, node):
        kind = _DISPLAY[type(node)]
        items = tuple(
            ("star", self.expr(e.value)) if type(e) is ast.Starred else self.expr(e)
            for e in node.elts
        )
        return ("t", kind, items)

    def _x_dict(self, node):
        items = []
        for k, v in zip(node.keys, node.values, strict=True):
            if k is not None:
                items.append((self.expr(k), self.expr(v)))
        return ("d", tuple(items))

    def _x_comp(self, node):
        return ("t", "list", (self.expr(node.elt),))

    def _x_dictcomp(self, node):
        return ("d", ((self.expr(node.key), self.expr(node.value)),))

    def _x_lambda(self, node):
        ps = _all_params(node.args)
        params = tuple(p.arg for p in ps)
        body = self.expr(node.body)
        free_names = _body_names([node.body], None)[0] - set(params)
        defaults = _param_defaults(node.args)
        for p in ps:
            d = defaults.get(id(p))
            if d is not None:  # defaults bind at creation: a capture too
                free_names |= _body_names([d], None)[0]
        return ("l", params, body, tuple(sorted(free_names)))

    def _x_ifexp(self, node):
        return ("if", self.expr(node.body), self.expr(node.orelse))

    def _x_compare(self, node):
        return ("k", "bool", None)

    def _x_boolop(self, node):
        if type(node.op) is ast.And:
            return ("k", "bool", None)
        # `a or b` yields one of them: keep both possibilities (`a or b or c` nests leftwards)
        values = node.values
        out = self.expr(values[0])
        for v in values[1:]:
            out = ("if", out, self.expr(v))
        return out

    def _x_value(self, node):  # await x, (y := x)
        return self.expr(node.value)

    def target(self, node) -> tuple:
        tp = type(node)
        if tp is ast.Name:
            return ("n", node.id)
        if tp is ast.Attribute:
            return ("a", self.expr(node.value), node.attr)
        if tp is ast.Subscript:
            return self.expr(node)
        if tp is ast.Tuple or tp is ast.List:
            items = []
            for e in node.elts:
                if type(e) is ast.Starred:
                    items.append(("star", self.target(e.value)))
                else:
                    items.append(self.target(e))
            return ("t", "tuple", tuple(items))
        return OTHER

    # ---- statements ------------------------------------------------------------------
    def lazy_guard(self, test) -> tuple | None:
        """`if self._x is None`, `if not hasattr(self, "_x")`, `getattr(self, "_x", None) is None`."""
        tp = type(test)
        if tp is ast.BoolOp:
            for v in test.values:
                g = self.lazy_guard(v)
                if g:
                    return g
            return None
        if tp is ast.Compare and len(test.ops) == 1:
            if type(test.ops[0]) in (ast.Is, ast.Eq) and _is_const(test.comparators[0], None):
                left = test.left
                if type(left) is ast.Attribute:
                    base = _ast_dotted(left.value)
                    if base:
                        return (base, left.attr)
                if type(left) is ast.Call and _ast_dotted(left.func) == "getattr":
                    return self._getattr_guard(left)
        if tp is ast.UnaryOp and type(test.op) is ast.Not:
            inner = test.operand
            if type(inner) is ast.Call and _ast_dotted(inner.func) == "hasattr":
                return self._getattr_guard(inner)
            if type(inner) is ast.Attribute:
                base = _ast_dotted(inner.value)
                if base:
                    return (base, inner.attr)
        return None

    def _getattr_guard(self, call) -> tuple | None:
        args = _call_args(call)
        if len(args) >= 2 and self.simple_string(args[1][0]):
            base = _ast_dotted(args[0][0])
            name = args[1][0].value
            if base and isinstance(name, str):
                return (base, name)
        return None

    def block(self, stmts: list, out: list, guard, func_qn: str, cls_qn: str | None) -> None:
        self.block_ids += 1
        self.block_path.append(self.block_ids)
        try:
            if self.is_suite(stmts):
                return  # a one-line suite's statements were never lowered (libcst's view)
            for stmt in stmts:
                self.stmt(stmt, out, guard, func_qn, cls_qn)
                # `if self._x is not None: return` guards the rest of the block like
                # `if self._x is None:` guards its body
                guard = guard or self.early_exit_guard(stmt)
        finally:
            self.block_path.pop()

    def early_exit_guard(self, node) -> tuple | None:
        """`if self._x is not None: return` / `if hasattr(self, "_x"): return` (no else)."""
        if type(node) is not ast.If or node.orelse:
            return None
        body = node.body
        if self.is_suite(body) or type(body[-1]) is not ast.Return:
            return None
        for a, b in zip(
            body, body[1:], strict=False
        ):  # one line of simple statements (`x = 1; return`)
            if type(a) in _COMPOUND or a.end_lineno != b.lineno:
                return None
        test = node.test
        if type(test) is ast.Compare and len(test.ops) == 1:
            if type(test.ops[0]) in (ast.IsNot, ast.NotEq) and _is_const(test.comparators[0], None):
                left = test.left
                if type(left) is ast.Attribute:
                    base = _ast_dotted(left.value)
                    return (base, left.attr) if base else None
                if type(left) is ast.Call and _ast_dotted(left.func) == "getattr":
                    return self._getattr_guard(left)
        if type(test) is ast.Call and _ast_dotted(test.func) == "hasattr":
            return self._getattr_guard(test)
        return None

    def ends_in_return(self, stmts: list) -> bool:
        """The block's last line of statements holds a `return` (an early exit)."""
        if self.is_suite(stmts):
            return False
        i = len(stmts) - 1
        if type(stmts[i]) in _COMPOUND:
            return False
        while True:
            if type(stmts[i]) is ast.Return:
                return True
            if i == 0 or type(stmts[i - 1]) in _COMPOUND:
                return False
            if stmts[i - 1].end_lineno != stmts[i].lineno:
                return False
            i -= 1

    def is_elif(self, node) -> bool:
        """`node.orelse` is an `elif` (not an `else:` block holding one `if`)."""
        o = node.orelse
        if len(o) != 1 or type(o[0]) is not ast.If:
            return False
        e = o[0]
        return self.lines[e.lineno - 1].startswith("elif", self.col(e.lineno, e.col_offset))

    def stmt(self, node, out: list, guard, func_qn: str, cls_qn: str | None) -> None:
        if type(node) in _COMPOUND:
            self._compound(node, out, guard, func_qn, cls_qn)
        else:
            self.small(node, out, guard)

    def _compound(self, node, out: list, guard, func_qn: str, cls_qn: str | None) -> None:
        tp = type(node)
        if tp is ast.If:
            g = self.lazy_guard(node.test)
            narrowed = _isinstance_test(node.test)
            ln, col, end = self.span(node)
            if narrowed:
                out.append(("narrow", ln, col, end, *narrowed))
            exits = self.ends_in_return(node.body)
            # a state flag tested here: `if self.done: return` guards the rest of the
            # function, `if not self.done: ...` its own body (see analysis/pathfacts.py)
            flags = _local_flag_terms(self.flag_terms(node.test, exits), self.local_flags)
            # `if old.shape == new.shape and ...: copy_ else: rebind` (copy-or-rebind): the
            # rebind branch runs only while the compared tensors differ
            compat = _compat_test(node.test)
            has_else = bool(node.orelse) and not self.is_elif(node)
            rebind = None
            if compat is not None:
                a, b, feats, positive = compat
                rebind = ("flagon", ln, col, end, f"{a}|{b}", "<compat:" + ",".join(feats) + ">")
                rebind = (*rebind, False, ())
                if positive and not has_else:
                    rebind = None
            if not exits:
                for base, attr, sense in flags:
                    # the block path the body gets (block() numbers it next)
                    body = (*self.block_path, self.block_ids + 1)
                    out.append(("flagon", ln, col, end, base, attr, sense, body))
            if rebind is not None and not compat[3]:
                out.append(rebind)
            # `if backend in [E.A, E.B] and ...:` -- a body that runs only for those members
            # (the analysis skips it when the value's possible members exclude them)
            members = _member_terms(node.test)
            if members:
                out.append(("condon", ln, col, end, members))
            self.block(node.body, out, g or guard, func_qn, cls_qn)
            if members:
                out.append(("condoff", ln, col, end))
            if rebind is not None and not compat[3]:
                out.append(("flagoff", ln, col, end, rebind[4], rebind[5]))
            if not exits:
                for base, attr, _sense in reversed(flags):
                    out.append(("flagoff", ln, col, end, base, attr))
            if narrowed:
                out.append(("unnarrow", ln, col, end, narrowed[0]))
            cur = node
            while cur.orelse:
                if self.is_elif(cur):
                    orelse = cur.orelse[0]
                    members = _member_terms(orelse.test)
                    if members:
                        out.append(("condon", *self.span(orelse), members))
                    # an `elif` body runs only when its own test holds: its flag terms
                    # guard it as an `if`'s do (no exit form: the chain goes on after it)
                    el_flags = []
                    if EXTENSIONS and not self.ends_in_return(orelse.body):
                        el_flags = _local_flag_terms(
                            self.flag_terms(orelse.test, False), self.local_flags
                        )
                    el_span = self.span(orelse)
                    for base, attr, sense in el_flags:
                        body = (*self.block_path, self.block_ids + 1)
                        out.append(("flagon", *el_span, base, attr, sense, body))
                    self.block(orelse.body, out, guard, func_qn, cls_qn)
                    for base, attr, _sense in reversed(el_flags):
                        out.append(("flagoff", *el_span, base, attr))
                    if members:
                        out.append(("condoff", *self.span(orelse)))
                    cur = orelse
                else:
                    if rebind is not None and compat[3]:
                        out.append(rebind)
                    self.block(cur.orelse, out, guard, func_qn, cls_qn)
                    if rebind is not None and compat[3]:
                        out.append(("flagoff", ln, col, end, rebind[4], rebind[5]))
                    break
            if exits:
                for base, attr, sense in flags:
                    here = tuple(self.block_path)
                    out.append(("flagexit", ln, col, end, base, attr, sense, here))
            return
        if tp is ast.For or tp is ast.AsyncFor:
            ln, col, end = self.span(node)
            out.append(("for", ln, col, end, self.target(node.target), self.expr(node.iter)))
            self.block(node.body, out, guard, func_qn, cls_qn)
            if node.orelse:
                self.block(node.orelse, out, guard, func_qn, cls_qn)
            return
        if tp is ast.While:
            self.block(node.body, out, guard, func_qn, cls_qn)
            if node.orelse:
                self.block(node.orelse, out, guard, func_qn, cls_qn)
            return
        if tp is ast.With or tp is ast.AsyncWith:
            for item in node.items:
                if item.optional_vars is not None:
                    ln, col, end = self.span(node)
                    out.append(
                        (
                            "assign",
                            ln,
                            col,
                            end,
                            (self.target(item.optional_vars),),
                            self.expr(item.context_expr),
                            guard,
                        )
                    )
            self.block(node.body, out, guard, func_qn, cls_qn)
            return
        if tp in _TRIES:
            self.block(node.body, out, guard, func_qn, cls_qn)
            for h in node.handlers:
                self.block(h.body, out, guard, func_qn, cls_qn)
            if node.orelse:
                self.block(node.orelse, out, guard, func_qn, cls_qn)
            if node.finalbody:
                self.block(node.finalbody, out, guard, func_qn, cls_qn)
            return
        if tp in _FUNCS:
            qn = f"{func_qn}.<locals>.{node.name}" if func_qn else node.name
            self.function(node, qn, cls_qn=None, parent=func_qn)
            ln, col, end = self.span(node)
            out.append(("def", ln, col, end, node.name, qn))
            return
        if tp is ast.Match:
            for case in node.cases:
                self.block(case.body, out, guard, func_qn, cls_qn)
            return

    def small(self, node, out: list, guard) -> None:
        tp = type(node)
        if tp is ast.Assign:
            ln, col, end = self.span(node)
            targets = tuple(self.target(t) for t in node.targets)
            if len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                name = node.targets[0].id
                test = node.value
                if type(test) in (ast.Compare, ast.UnaryOp, ast.BoolOp):
                    self.local_flags[name] = self.flag_terms(test, False)
                else:
                    self.local_flags.pop(name, None)
            out.append(
                (
                    "assign",
                    ln,
                    col,
                    end,
                    targets,
                    self.expr(node.value),
                    guard,
                    tuple(self.block_path),
                )
            )
        elif tp is ast.AnnAssign:
            if node.value is not None:
                ln, col, end = self.span(node)
                out.append(
                    (
                        "assign",
                        ln,
                        col,
                        end,
                        (self.target(node.target),),
                        self.expr(node.value),
                        guard,
                        tuple(self.block_path),
                    )
                )
        elif tp is ast.AugAssign:
            ln, col, end = self.span(node)
            op = _BINOPS.get(type(node.op), "?")
            out.append(("aug", ln, col, end, self.target(node.target), op, self.expr(node.value)))
        elif tp is ast.Expr:
            ln, col, end = self.span(node)
            out.append(("expr", ln, col, end, self.expr(node.value), tuple(self.block_path)))
        elif tp is ast.Return:
            ln, col, end = self.span(node)
            out.append(("ret", ln, col, end, self.expr(node.value) if node.value else None))
        elif tp is ast.Delete:
            ln, col, end = self.span(node)
            out.append(("del", ln, col, end, self.del_target(node), tuple(self.block_path)))
        elif tp is ast.Import or tp is ast.ImportFrom:
            self.add_import(node)

    def del_target(self, node) -> tuple:
        """`del a, b` (and `del a,`) deletes a tuple; `del a` one target."""
        targets = node.targets
        if len(targets) == 1:
            t = targets[0]
            tail = self.text(t.end_lineno, t.end_col_offset, node.end_lineno, node.end_col_offset)
            if "," not in tail:
                return self.target(t)
        return ("t", "tuple", tuple(self.target(t) for t in targets))

    # ---- definitions -----------------------------------------------------------------
    def function(self, node, qn: str, cls_qn: str | None, parent: str | None):
        params = _all_params(node.args)
        decos = tuple(_ast_dotted(d) or "" for d in node.decorator_list)
        pdefaults = _param_defaults(node.args)
        defaults = tuple((p.arg, self.expr(pdefaults[id(p)])) for p in params if id(p) in pdefaults)
        annotations = tuple(
            (p.arg, self.annotation_text(p.annotation)) for p in params if p.annotation is not None
        )
        body: list = []
        saved, self.block_path = self.block_path, []
        saved_flags, self.local_flags = self.local_flags, {}
        try:
            self.block(node.body, body, None, qn, cls_qn)
        finally:
            self.block_path = saved
            self.local_flags = saved_flags
        ln, col, end = self.span(node)
        loads, stores, attrs = _body_names(node.body, self)
        reads = sorted(attrs.items())
        free = ()
        if parent:
            names_here = {p.arg for p in params} | stores
            free = tuple(sorted(loads - names_here))
        self.functions[qn] = {
            "qn": qn,
            "name": node.name,
            "cls": cls_qn,
            "params": tuple(p.arg for p in params),
            "defaults": defaults,
            "annotations": annotations,
            "decos": decos,
            "line": ln,
            "col": col,
            "end_line": end,
            "body": tuple(body),
            "reads": tuple(reads),
            "parent": parent,
            "free": free,
            "guarded": any(s[0] == "assign" and s[6] for s in body),
        }

    def klass(self, node: ast.ClassDef, qn: str) -> None:
        bases = tuple(self.expr(b.value if type(b) is ast.Starred else b) for b in node.bases)
        methods: dict[str, str] = {}
        fields: list[tuple[str, bool]] = []
        consts: list[tuple[str, str]] = []
        ln, col, end = self.span(node)
        body = node.body if not self.is_suite(node.body) else []
        for stmt in body:
            tp = type(stmt)
            if tp in _FUNCS:
                mqn = f"{qn}.{stmt.name}"
                self.function(stmt, mqn, cls_qn=qn, parent=None)
                methods[stmt.name] = mqn
            elif tp is ast.ClassDef:
                self.klass(stmt, f"{qn}.{stmt.name}")
            elif tp is ast.If:
                # methods defined under a module-level condition inside the class body
                if not self.is_suite(stmt.body):
                    for sub in stmt.body:
                        if type(sub) in _FUNCS:
                            mqn = f"{qn}.{sub.name}"
                            self.function(sub, mqn, cls_qn=qn, parent=None)
                            methods.setdefault(sub.name, mqn)
            elif tp not in _COMPOUND:
                field = self.dataclass_field(stmt)
                if field is not None:
                    fields.append(field)
                const = _class_const(stmt) if EXTENSIONS else None
                if const is not None:
                    consts.append(const)
        self.classes[qn] = {
            "qn": qn,
            "bases": bases,
            "line": ln,
            "end_line": end,
            "methods": methods,
            # class decorators as written (`dataclass`, `dataclasses.dataclass`) and annotated
            # class attributes in order: (name, passed to the generated __init__)
            "decos": tuple(
                _ast_dotted(d.func if type(d) is ast.Call else d) or "" for d in node.decorator_list
            ),
            "fields": tuple(fields),
        }
        if consts:
            # `NAME = "text"` in the class body (an enum's members naming backend classes)
            self.classes[qn]["consts"] = tuple(consts)

    def module(self, mod: ast.Module) -> None:
        for stmt in mod.body:
            self.top(stmt)

    def top(self, stmt) -> None:
        tp = type(stmt)
        if tp in _FUNCS:
            self.function(stmt, stmt.name, cls_qn=None, parent=None)
        elif tp is ast.ClassDef:
            self.klass(stmt, stmt.name)
        elif tp is ast.Import or tp is ast.ImportFrom:
            self.add_import(stmt)
        elif tp is ast.Assign:
            if len(stmt.targets) == 1 and type(stmt.targets[0]) is ast.Name:
                self.globals[stmt.targets[0].id] = self.expr(stmt.value)
        elif tp is ast.AnnAssign:
            if stmt.value is not None and type(stmt.target) is ast.Name:
                # `_TABLE: dict[str, Backend] = {...}`
                self.globals[stmt.target.id] = self.expr(stmt.value)
        elif tp is ast.If or tp in _TRIES:
            blocks = [stmt.body]
            if tp is ast.If:
                cur = stmt
                while cur.orelse:
                    if self.is_elif(cur):
                        cur = cur.orelse[0]
                        blocks.append(cur.body)
                    else:
                        blocks.append(cur.orelse)
                        break
            else:
                blocks += [h.body for h in stmt.handlers]
                if stmt.orelse:
                    blocks.append(stmt.orelse)
            for b in blocks:
                if not self.is_suite(b):
                    for s in b:
                        self.top(s)

    def dataclass_field(self, node) -> tuple[str, bool] | None:
        """`name: T` / `name: T = default` in a class body -> (name, init); None for ClassVar
        and anything else. `field(init=False)` is not an __init__ parameter."""
        if type(node) is not ast.AnnAssign or type(node.target) is not ast.Name:
            return None
        ann = _ast_dotted(node.annotation) or ""
        if type(node.annotation) is ast.Subscript:
            ann = _ast_dotted(node.annotation.value) or ""
        if ann.rsplit(".", 1)[-1] == "ClassVar":
            return None
        init = True
        v = node.value
        if type(v) is ast.Call and (_ast_dotted(v.func) or "").rsplit(".", 1)[-1] == "field":
            for _value, kw, _star in _call_args(v):
                if kw == "init":
                    init = not _is_const(_value, False)
        return (node.target.id, init)

    # ---- annotations -------------------------------------------------------------------
    def annotation_text(self, node) -> str:
        """'pkg.Cls' for Cls-typed params, 'type:pkg.Cls' for `type[Cls]`, '' otherwise."""
        if self.simple_string(node):
            text = node.value
            return text.split("|")[0].strip() if isinstance(text, str) else ""
        inner = self.strip_annotation(node)
        if inner is not node and self.simple_string(inner):
            text = inner.value
            name = text.split("|")[0].strip() if isinstance(text, str) else ""
            if type(node) is ast.Subscript and _ast_dotted(node.value) in ("type", "Type"):
                return "type:" + name
            return name
        if (
            type(node) is ast.Subscript
            and _ast_dotted(node.value) in ("type", "Type", "typing.Type")
            and inner is not node
        ):
            return "type:" + (_ast_dotted(inner) or "")
        if type(inner) is ast.Subscript and _ast_dotted(inner.value) in ("type", "Type"):
            sub = self.strip_annotation(inner)
            return "type:" + (_ast_dotted(sub) or "")
        return _ast_dotted(inner) or ""

    def strip_annotation(self, node):
        # `X | None`, `Optional[X]`, "X" -> X (best effort)
        if type(node) is ast.BinOp:
            return node.left
        if type(node) is ast.Subscript:
            first = self.subscript_elements(node)[0]
            if type(first) is not ast.Slice:
                return first
        return node

    # ---- flag tests --------------------------------------------------------------------
    def flag_terms(self, test, exit_form: bool) -> list[tuple[str, str, object]]:
        """State flags a test reads: (base, attr, sense), the test holding when the flag's
        truth is `sense` (True / False) or, for `hasattr`, its presence (`"has"` /
        `"absent"`).

        Only terms that must hold for the test to hold (body form: the `and` operands) or
        whose holding is enough (exit form, `if a or b: return`: the `or` operands) are
        returned, so "the guarded code runs only when <term> does not hold / holds" stays
        true.
        """
        tp = type(test)
        if tp is ast.BoolOp:
            keep = type(test.op) is (ast.Or if exit_form else ast.And)
            if not keep:
                if exit_form or not EXTENSIONS:
                    return []
                # body form `if a or b:` runs when some term holds: one compound term
                # ("", "<or>", terms), kept only when every operand is one flag term
                terms = []
                for v in test.values:
                    got = self.flag_terms(v, exit_form)
                    if len(got) != 1 or got[0][1] == "<or>":
                        return []
                    terms.append(got[0])
                return [("", "<or>", tuple(terms))]
            out: list = []
            for v in test.values:
                out += self.flag_terms(v, exit_form)
            return out
        if tp is ast.UnaryOp and type(test.op) is ast.Not:
            inner = self.flag_terms(test.operand, not exit_form)
            return [(b, a, _INVERT[s]) for b, a, s in inner if a != "<or>"]
        if tp is ast.Attribute:
            base = _ast_dotted(test.value)
            return [(base, test.attr, True)] if base else []
        if tp is ast.Name:
            return [("", test.id, True)]  # a module-level switch (`if _is_cpu:`)
        if tp is ast.Call and not _has_args(test):
            # a predicate call (`current_platform.is_cpu()`): named with `()`, never a state flag
            fn = _ast_dotted(test.func)
            if fn:
                base, _, name = fn.rpartition(".")
                return [(base, name + "()", True)]
            return []
        if tp is ast.Call:
            args = _call_args(test)
            if len(args) < 2:
                return []
            fn = _ast_dotted(test.func)
            if fn not in ("getattr", "hasattr") or not self.simple_string(args[1][0]):
                return []
            if fn == "getattr" and len(args) > 2:
                d = args[2][0]
                if not (_is_const(d, False) or _is_const(d, None)) and not (
                    type(d) is ast.Constant and _is_int(d.value) and self._int_text(d) == "0"
                ):
                    return []
            base = _ast_dotted(args[0][0])
            name = args[1][0].value
            if not base or not isinstance(name, str):
                return []
            return [(base, name, True if fn == "getattr" else "has")]
        if tp is ast.Compare and len(test.ops) == 1:
            op = type(test.ops[0])
            rhs = test.comparators[0]
            dtype = _dtype_term(test.left, op, rhs) if EXTENSIONS else None
            if dtype is not None:
                return [dtype]
            if _is_const(rhs, True) or _is_const(rhs, False):
                pos = op in (ast.Is, ast.Eq)
                neg = op in (ast.IsNot, ast.NotEq)
                if pos or neg:
                    terms = self.flag_terms(test.left, exit_form)[:1]
                    want = (rhs.value is True) == pos
                    return [(b, a, s if want else not s) for b, a, s in terms if s in (True, False)]
            if _is_const(rhs, None):
                pos = op in (ast.Is, ast.Eq)
                neg = op in (ast.IsNot, ast.NotEq)
                left = test.left
                if (pos or neg) and type(left) in (ast.Attribute, ast.Call):
                    terms = [t for t in self.flag_terms(left, exit_form) if t[2] is True][:1]
                    return [(b, a, "none" if pos else "notnone") for b, a, _s in terms]
        return []


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


_DISPLAY = {ast.Tuple: "tuple", ast.List: "list", ast.Set: "set"}
_EXPR = {
    ast.Name: _Extractor._x_name,
    ast.Attribute: _Extractor._x_attribute,
    ast.Call: _Extractor._x_call,
    ast.BinOp: _Extractor._x_binop,
    ast.UnaryOp: _Extractor._x_unaryop,
    ast.Subscript: _Extractor._x_subscript,
    ast.Constant: _Extractor._x_constant,
    ast.JoinedStr: _Extractor._x_joinedstr,
    ast.Tuple: _Extractor._x_display,
    ast.List: _Extractor._x_display,
    ast.Set: _Extractor._x_display,
    ast.Dict: _Extractor._x_dict,
    ast.ListComp: _Extractor._x_comp,
    ast.SetComp: _Extractor._x_comp,
    ast.GeneratorExp: _Extractor._x_comp,
    ast.DictComp: _Extractor._x_dictcomp,
    ast.Lambda: _Extractor._x_lambda,
    ast.IfExp: _Extractor._x_ifexp,
    ast.Compare: _Extractor._x_compare,
    ast.BoolOp: _Extractor._x_boolop,
    ast.Await: _Extractor._x_value,
    ast.NamedExpr: _Extractor._x_value,
}


def _member_terms(test) -> tuple:
    """(name, positive, members) for each conjunct of an `if` test that compares a local name
    with enum-like members: `x in [E.A, E.B]`, `x not in (...)`, `x == E.A`, `x != E.A`.
    One false conjunct makes the test false; a test with `or` gives none."""
    tp = type(test)
    if tp is ast.BoolOp:
        if type(test.op) is not ast.And:
            return ()
        out: tuple = ()
        for v in test.values:
            out += _member_terms(v)
        return out
    if tp is not ast.Compare or len(test.ops) != 1:
        return ()
    left = _name_of(test.left)
    if left is None:
        return ()
    op, right = type(test.ops[0]), test.comparators[0]
    if op in (ast.In, ast.NotIn) and type(right) in (ast.List, ast.Tuple, ast.Set):
        names = [_ast_dotted(e.value if type(e) is ast.Starred else e) for e in right.elts]
        positive = op is ast.In
    elif op in (ast.Eq, ast.NotEq) and type(right) is ast.Attribute:
        names = [_ast_dotted(right)]
        positive = op is ast.Eq
    else:
        return ()
    if not names or any(n is None or "." not in n for n in names):
        return ()
    return ((left, positive, tuple(names)),)


# Lowerings added after the libcst extractor (876de75): an `elif` test's flag terms, a
# body-form `or` of flag terms as one compound term, `x.dtype != D` terms, a class's string
# constants (`consts`). scripts/diff_extract.py turns them off to compare every other part of
# a record with that extractor.
EXTENSIONS = True


class _Invert(dict):
    """Flag senses and their negations; `dtype==D` / `dtype!=D` invert into each other."""

    def __missing__(self, key):
        if isinstance(key, str) and key.startswith("dtype=="):
            return "dtype!=" + key[7:]
        if isinstance(key, str) and key.startswith("dtype!="):
            return "dtype==" + key[7:]
        raise KeyError(key)


_INVERT = _Invert({True: False, False: True, "has": "absent", "absent": "has", "none": "notnone"})
_INVERT["notnone"] = "none"
# dtype spellings torch aliases to one dtype
DTYPE_ALIASES = {
    "torch.float": "torch.float32",
    "torch.half": "torch.float16",
    "torch.double": "torch.float64",
    "torch.int": "torch.int32",
    "torch.long": "torch.int64",
}


def _class_const(stmt) -> tuple[str, str] | None:
    """`NAME = "text"` (one name, a string constant) -> (NAME, text)."""
    if type(stmt) is not ast.Assign or len(stmt.targets) != 1:
        return None
    t, v = stmt.targets[0], stmt.value
    if type(t) is ast.Name and type(v) is ast.Constant and isinstance(v.value, str):
        return (t.id, v.value)
    return None


def _dtype_term(left, op, rhs):
    """`self.x.dtype != torch.float32` -> ("self", "x", "dtype!=torch.float32") (`==` and
    `is`/`is not` alike), or None."""
    if type(left) is not ast.Attribute or left.attr != "dtype":
        return None
    holder = left.value
    if type(holder) is not ast.Attribute:
        return None
    base = _ast_dotted(holder.value)
    want = _ast_dotted(rhs)
    if not base or not want or not want.startswith("torch."):
        return None
    want = DTYPE_ALIASES.get(want, want)
    if op in (ast.Eq, ast.Is):
        return (base, holder.attr, "dtype==" + want)
    if op in (ast.NotEq, ast.IsNot):
        return (base, holder.attr, "dtype!=" + want)
    return None


def _local_flag_terms(flags, local_flags: dict):
    """Replace a local name standing for a flag test (`done = self.x is not None`, then
    `if not done:`) by that test's own term."""
    out = []
    for base, attr, sense in flags:
        derived = local_flags.get(attr) if not base else None
        if derived and len(derived) == 1 and sense in (True, False) and derived[0][1] != "<or>":
            b, a, s = derived[0]
            out.append((b, a, s if sense else _INVERT[s]))
        else:
            out.append((base, attr, sense))
    return out


_FEATURE_ATTRS = {"shape", "dtype", "device", "layout"}
_FEATURE_CALLS = {"size", "stride", "dim", "numel", "nbytes", "data_ptr"}


def _feature(node) -> tuple[str, str] | None:
    """(feature, tensor name) for `x.shape`, `x.stride()`, `x.untyped_storage().nbytes()`,
    `type(x)`; the tensor as a dotted name."""
    tp = type(node)
    if tp is ast.Attribute and node.attr in _FEATURE_ATTRS:
        base = _ast_dotted(node.value)
        return (node.attr, base) if base else None
    if tp is ast.Call:
        fn = node.func
        if _ast_dotted(fn) == "type":
            args = _call_args(node)
            if len(args) == 1:
                base = _ast_dotted(args[0][0])
                return ("type", base) if base else None
        if type(fn) is ast.Attribute and fn.attr in _FEATURE_CALLS and not _has_args(node):
            inner = fn.value
            if (
                type(inner) is ast.Call
                and type(inner.func) is ast.Attribute
                and inner.func.attr in ("untyped_storage", "storage")
            ):
                inner = inner.func.value
            base = _ast_dotted(inner)
            return (fn.attr, base) if base else None
    return None


def _compat_test(test) -> tuple[str, str, tuple[str, ...], bool] | None:
    """`a.shape == b.shape and a.dtype == b.dtype ...` -> (a, b, features, True); the negation
    (`!=` joined by `or`, or `not (...)`) -> (..., False). Every term compares the same two
    tensors."""
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        inner = _compat_test(test.operand)
        return (*inner[:3], not inner[3]) if inner else None
    terms = []
    positive = None

    def walk(t) -> bool:
        nonlocal positive
        tp = type(t)
        if tp is ast.BoolOp:
            want = type(t.op) is ast.And
            if positive is None:
                positive = want
            return positive == want and all(walk(v) for v in t.values)
        if tp is ast.Compare and len(t.ops) == 1:
            op = type(t.ops[0])
            eq = op in (ast.Eq, ast.Is)
            ne = op in (ast.NotEq, ast.IsNot)
            left, right = _feature(t.left), _feature(t.comparators[0])
            if not (eq or ne) or not left or not right or left[0] != right[0]:
                return False
            if positive is None:
                positive = eq
            if positive != eq:
                return False
            terms.append((left[0], left[1], right[1]))
            return True
        return False

    if not walk(test) or not terms:
        return None
    pairs = {tuple(sorted((a, b))) for _f, a, b in terms}
    if len(pairs) != 1:
        return None
    a, b = next(iter(pairs))
    return (a, b, tuple(sorted({f for f, _a, _b in terms})), bool(positive))


def _isinstance_test(test) -> tuple[str, str] | None:
    """`if isinstance(x, T):` -> ("x", "T") (T dotted as written)."""
    if type(test) is ast.Call and _ast_dotted(test.func) == "isinstance":
        args = _call_args(test)
        if len(args) == 2:
            x = _name_of(args[0][0])
            if x is not None:
                t = _ast_dotted(args[1][0])
                if t:
                    return (x, t)
    return None


# ---- names and attribute reads of a function body ------------------------------------
# One iterative pass over the body's nodes. Identifiers count as names where libcst had a
# Name node: loads, stores and deletes, def/class names, parameters, keyword-argument names,
# imported and `as` names, global/nonlocal names, match captures, and `None`/`True`/`False`.

_NO_CHILD_FIELDS = frozenset(
    {"ctx", "op", "ops", "type_comment", "type_ignores", "kind", "conversion", "is_async"}
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(tp: type) -> tuple[str, ...]:
    names = _CHILD_FIELDS.get(tp)
    if names is None:
        names = tuple(f for f in tp._fields if f not in _NO_CHILD_FIELDS)
        _CHILD_FIELDS[tp] = names
    return names


def _body_names(roots: list, ex: _Extractor | None) -> tuple[set, set, dict]:
    """(names loaded, plain names assigned, attribute reads: attr -> first line) of the nodes
    under `roots`, nested definitions included; attribute reads include literal getattr /
    hasattr names (their lines are 0 without `ex`)."""
    loads: set[str] = set()
    stores: set[str] = set()
    attrs: dict[str, int] = {}
    AST, Name, Attribute, Call, Constant = ast.AST, ast.Name, ast.Attribute, ast.Call, ast.Constant

    def note(name: str, line: int) -> None:
        old = attrs.get(name)
        if old is None or (line and (line < old or not old)):
            attrs[name] = line

    stack = list(roots)
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node = pop()
        tp = type(node)
        if tp is Name:
            loads.add(node.id)
            continue
        if tp is Attribute:
            note(node.attr, node.lineno if ex is not None else 0)
            push(node.value)
            continue
        if tp is Constant:
            v = node.value
            if v is None or v is True or v is False:
                loads.add(str(v))
            continue
        if tp is Call:
            if (
                ex is not None
                and type(node.func) is Name
                and node.func.id in ("getattr", "hasattr")
            ):
                args = _call_args(node)
                if len(args) >= 2 and ex is not None and ex.simple_string(args[1][0]):
                    s = args[1][0].value
                    if isinstance(s, str):
                        note(s, node.lineno)
        else:
            name_of = _NAMES.get(tp)
            if name_of is not None:
                name_of(node, loads, stores, note, ex)
        for f in _child_fields(tp):
            v = getattr(node, f)
            if isinstance(v, AST):
                push(v)
            elif type(v) is list:
                extend([c for c in v if isinstance(c, AST)])
    return loads, stores, attrs


def _n_assign(node, loads, stores, note, ex):
    for t in node.targets:
        if type(t) is ast.Name:
            stores.add(t.id)


def _n_named(node, loads, stores, note, ex):  # def/class names, parameters, type parameters
    loads.add(node.name if hasattr(node, "name") else node.arg)


def _n_arg(node, loads, stores, note, ex):
    loads.add(node.arg)


def _n_keyword(node, loads, stores, note, ex):
    if node.arg is not None:
        loads.add(node.arg)


def _n_alias(node, loads, stores, note, ex):
    if node.name != "*":
        first, *rest = node.name.split(".")
        loads.add(first)
        line = getattr(node, "lineno", 0) if ex is not None else 0
        for part in rest:
            note(part, line)
    if node.asname is not None:
        loads.add(node.asname)


def _n_importfrom(node, loads, stores, note, ex):
    if node.module:
        first, *rest = node.module.split(".")
        loads.add(first)
        for part in rest:
            note(part, node.lineno if ex is not None else 0)


def _n_names(node, loads, stores, note, ex):  # global / nonlocal
    loads.update(node.names)


def _n_optional_name(node, loads, stores, note, ex):  # except ... as e, case x, case [*r]
    if node.name is not None:
        loads.add(node.name)


def _n_match_mapping(node, loads, stores, note, ex):
    if node.rest is not None:
        loads.add(node.rest)


def _n_match_class(node, loads, stores, note, ex):
    loads.update(node.kwd_attrs)


def _n_match_singleton(node, loads, stores, note, ex):
    loads.add(str(node.value))


_NAMES = {
    ast.Assign: _n_assign,
    ast.FunctionDef: _n_named,
    ast.AsyncFunctionDef: _n_named,
    ast.ClassDef: _n_named,
    ast.arg: _n_arg,
    ast.keyword: _n_keyword,
    ast.alias: _n_alias,
    ast.ImportFrom: _n_importfrom,
    ast.Global: _n_names,
    ast.Nonlocal: _n_names,
    ast.ExceptHandler: _n_optional_name,
    ast.MatchAs: _n_optional_name,
    ast.MatchStar: _n_optional_name,
    ast.MatchMapping: _n_match_mapping,
    ast.MatchClass: _n_match_class,
    ast.MatchSingleton: _n_match_singleton,
}
for _tp in ("TypeVar", "ParamSpec", "TypeVarTuple"):  # Python 3.12+ type parameters
    if hasattr(ast, _tp):
        _NAMES[getattr(ast, _tp)] = _n_named


def extract_module(source: str, module_name: str, is_package: bool) -> dict:
    """Parse `source` (CPython's ast) and return the module record. Raises SyntaxError for
    invalid code, TooNested where the parser refuses the nesting, RecursionError where the
    lowering does."""
    if "\r" in source:  # universal newlines, as the file reader gives them
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    # The tree is a few hundred thousand small objects without reference cycles, freed by
    # reference counting; building it runs the cyclic collector over and over, each pass also
    # walking the records kept so far (~10% of a cold run). It stays off while one file is
    # parsed and lowered.
    collecting = gc.isenabled()
    gc.disable()
    try:
        tree = parse_source(source)
        ex = _Extractor(module_name, is_package, source)
        ex.module(tree)
        del tree
    finally:
        if collecting:
            gc.enable()
    # names registered by literal: `x.register_buffer("name", ...)`, `x.register_parameter(
    # "name", ...)`, `x.name = Parameter(...)`. A method registering on its own `self` keys the
    # name by its class (self_registered / self_buffers); any other receiver (the layer a
    # create_weights is handed, a local module) is a handed registration, one table per module
    registered: set[str] = set()
    self_regs: dict[str, set[str]] = {}
    self_bufs: dict[str, set[str]] = {}
    # buffer name -> {(registered as None?, persistent=False?)} over the module
    bufvals: dict[str, set[tuple[bool, bool]]] = {}
    for f in ex.functions.values():
        me = _self_param(f)
        if me is None:
            _collect_buffers(f["body"], ex.buffers, registered, bufvals=bufvals)
            continue
        regs = self_regs.setdefault(f["cls"], set())
        bufs = self_bufs.setdefault(f["cls"], set())
        _collect_buffers(f["body"], ex.buffers, registered, me, bufs, regs, bufvals)
    rec = {
        "module": module_name,
        "is_package": is_package,
        "imports": ex.imports,
        "functions": ex.functions,
        "classes": ex.classes,
        "globals": ex.globals,
        "buffers": sorted(ex.buffers),
        "registered": sorted(registered),
        "self_registered": {c: sorted(v) for c, v in sorted(self_regs.items()) if v},
        "self_buffers": {c: sorted(v) for c, v in sorted(self_bufs.items()) if v},
    }
    if EXTENSIONS:  # added since the libcst extractor (readers use .get: absent is empty)
        # buffer names this module only ever registers as None (`register_buffer("x", None)`)
        # / only ever with a literal `persistent=False`
        rec["none_buffers"] = sorted(n for n, ks in bufvals.items() if all(k[0] for k in ks))
        rec["nonpersistent_buffers"] = sorted(
            n for n, ks in bufvals.items() if all(k[1] for k in ks)
        )
    return rec


def _self_param(f: dict) -> str | None:
    """The name a method's instance is bound to (`self`), None for functions, static and
    class methods."""
    if not f["cls"] or not f["params"]:
        return None
    if any(d.rsplit(".", 1)[-1] in ("staticmethod", "classmethod") for d in f["decos"]):
        return None
    return f["params"][0]


def _collect_buffers(
    body,
    out: set[str],
    registered: set[str],
    me: str | None = None,
    self_out: set[str] | None = None,
    self_registered: set[str] | None = None,
    bufvals: dict[str, set[tuple[bool, bool]]] | None = None,
) -> None:
    """Literal names passed to register_buffer (out) and registered as parameters
    (registered); with `me` (a method's self name), registrations on `me` itself go to
    self_out / self_registered instead. `bufvals`: per buffer name, whether each
    registration passes a literal None, and a literal `persistent=False`."""

    def add(recv, name: str, buffer: bool) -> None:
        on_self = me is not None and recv == ("n", me)
        regs = self_registered if on_self else registered
        regs.add(name)
        if buffer:
            (self_out if on_self else out).add(name)

    for s in body:
        if s[0] == "expr":
            e = s[4]
            if e[0] == "c" and e[1][0] == "a" and e[2]:
                meth = e[1][2]
                first = e[2][0]
                if first[0] == "k" and first[1] == "str" and isinstance(first[2], str):
                    if meth == "register_buffer":
                        add(e[1][1], first[2], True)
                        if bufvals is not None:
                            none = len(e[2]) > 1 and e[2][1] == ("n", "None")
                            flag = e[2][2] if len(e[2]) > 2 else None
                            flag = next((v for k, v in e[3] if k == "persistent"), flag)
                            kind = (none, flag == ("n", "False"))
                            bufvals.setdefault(first[2], set()).add(kind)
                    elif meth == "register_parameter":
                        add(e[1][1], first[2], False)
        elif s[0] == "assign":
            v = s[5]
            if v[0] == "c" and v[1][0] in ("n", "a"):
                callee = v[1][1] if v[1][0] == "n" else v[1][2]
                if callee.endswith("Parameter"):
                    for t in s[4]:
                        if t[0] == "a":
                            add(t[1], t[2], False)
