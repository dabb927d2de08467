"""Size facts for the shape arithmetic of the analysis (analysis/shapes.py): the bounds of a
subscript's slices, and the integer locals a function binds once. Imports nothing of
reload_lint.

A *size term* is a string: an int literal ("8", "-8"), a name ("n") or its negation ("-n"),
"" for an absent bound, "?" for anything else.

A function's `sizes` are its *fixed* integer locals with a proven lower bound, as (name, low)
pairs: a name bound exactly once in the function's whole text (its parameters and nested
scopes counted too, so a closure's `nonlocal` rebinding or a parameter reassigned disqualify
it), by a plain `name = expr` outside any loop or comprehension, never declared `global` or
`nonlocal`, whose value has a lower bound by the rules below. Such a name holds one value for
the whole of one activation of the function: two uses of it in that activation are equal.

Bounds (intervals, an upper end may be unbounded): an int literal; `t.element_size()` and
`x.itemsize` are 1..16 (bytes per element: the widest torch dtype, complex128, has 16); `+`,
`-` and unary `-`; `*` and `//` of non-negative operands (`//` by a divisor of at least 1);
a fixed name bound before. Anything else has no bound.
"""

from __future__ import annotations

import ast

ITEMSIZE = (1, 16)
MAX_DEPTH = 20
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def note_sizes(terms, names: set) -> None:
    """Add the names of size terms to `names`."""
    for t in terms:
        n = t[1:] if t.startswith("-") else t
        if n.isidentifier():
            names.add(n)


def size_term(node) -> str:
    """A slice bound or pad amount as a size term."""
    if node is None:
        return ""
    neg = False
    if type(node) is ast.UnaryOp and type(node.op) is ast.USub:
        neg, node = True, node.operand
    if type(node) is ast.Constant and type(node.value) is int:
        return str(-node.value if neg else node.value)
    if type(node) is ast.Name:
        return f"-{node.id}" if neg else node.id
    return "?"


def function_sizes(node, params, wanted) -> tuple:
    """((name, low), ...) of the fixed integer locals of function `node` among the names
    `wanted` (sorted by name)."""
    counts: dict[str, int] = {p: 1 for p in params}
    banned: set[str] = set()
    plain: list[tuple[str, ast.expr]] = []

    def count(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    def visit(n, loop: bool) -> None:
        tp = type(n)
        if tp in _LOOPS or tp in _COMPS:
            loop = True
        elif tp is ast.Global or tp is ast.Nonlocal:
            banned.update(n.names)
            return
        elif tp is ast.Name:
            if type(n.ctx) is not ast.Load:
                count(n.id)
            return
        elif tp in _DEFS:
            count(n.name)
        elif tp is ast.ExceptHandler and n.name:
            count(n.name)
        elif tp is ast.Import or tp is ast.ImportFrom:
            for a in n.names:
                count((a.asname or a.name).split(".")[0])
        elif tp in (ast.MatchAs, ast.MatchStar) and n.name:
            count(n.name)
        elif tp is ast.MatchMapping and n.rest:
            count(n.rest)
        elif not loop and tp is ast.Assign:
            if len(n.targets) == 1 and type(n.targets[0]) is ast.Name:
                plain.append((n.targets[0].id, n.value))
        elif not loop and tp is ast.AnnAssign:
            if n.value is not None and type(n.target) is ast.Name:
                plain.append((n.target.id, n.value))
        for child in ast.iter_child_nodes(n):
            visit(child, loop)

    for stmt in node.body:
        visit(stmt, False)
    known: dict[str, tuple] = {}
    for name, value in plain:
        if counts.get(name) != 1 or name in banned:
            continue
        iv = _interval(value, known, 0)
        if iv is not None:
            known[name] = iv
    return tuple(sorted((n, iv[0]) for n, iv in known.items() if iv[0] is not None and n in wanted))


def _interval(e, known: dict, depth: int):
    """(low, high) of an integer expression (high None: unbounded), or None."""
    if depth > MAX_DEPTH:
        return None
    tp = type(e)
    if tp is ast.Constant:
        return (e.value, e.value) if type(e.value) is int else None
    if tp is ast.Name:
        return known.get(e.id)
    if tp is ast.Call and type(e.func) is ast.Attribute and e.func.attr == "element_size":
        return ITEMSIZE if not e.args and not e.keywords else None
    if tp is ast.Attribute and e.attr == "itemsize":
        return ITEMSIZE
    if tp is ast.UnaryOp and type(e.op) is ast.USub:
        x = _interval(e.operand, known, depth + 1)
        if x is None:
            return None
        return (_neg(x[1]), _neg(x[0]))
    if tp is not ast.BinOp:
        return None
    a = _interval(e.left, known, depth + 1)
    b = _interval(e.right, known, depth + 1)
    if a is None or b is None:
        return None
    op = type(e.op)
    if op is ast.Add:
        return (_add(a[0], b[0]), _add(a[1], b[1]))
    if op is ast.Sub:
        return (_add(a[0], _neg(b[1])), _add(a[1], _neg(b[0])))
    if a[0] is None or b[0] is None or a[0] < 0 or b[0] < 0:
        return None
    if op is ast.Mult:
        return (a[0] * b[0], None if a[1] is None or b[1] is None else a[1] * b[1])
    if op is ast.FloorDiv and b[0] >= 1:
        return (0 if b[1] is None else a[0] // b[1], None if a[1] is None else a[1] // b[0])
    return None


def _add(x, y):
    return None if x is None or y is None else x + y


def _neg(x):
    return None if x is None else -x
