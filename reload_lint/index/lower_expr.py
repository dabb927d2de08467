"""Expression lowering (index/extract.py): `ast` expressions, string and f-string literals and
assignment targets -> the record's expression tuples."""

from __future__ import annotations

import ast

from reload_lint.index import lower_util
from reload_lint.index.lower_names import _body_names
from reload_lint.index.lower_sizes import note_sizes, size_term
from reload_lint.index.lower_util import (
    _BINOPS,
    _UNARY,
    OTHER,
    _all_params,
    _closing_paren,
    _is_int,
    _param_defaults,
    _string_tokens,
)


class ExprLowering:
    """Mixin of the extractor; needs its SourceText methods."""

    # ---- expressions -----------------------------------------------------------------
    def string(self, node) -> tuple:
        """A str/bytes constant: its value, or, for an implicit concatenation, the values of
        its literals joined; bytes (`b"GGUF" b"\x00"`) are already joined by the parser (a
        bytes literal cannot meet a str or an f-string), so their value is the node's."""
        if type(node.value) is bytes or self._one_token(node):
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
        if all(p[0] == "k" and type(p[2]) is str for p in parts):
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
        if lower_util.EXTENSIONS and _pad_callee(node.func):
            # a pad's amounts are sizes (analysis/shapes.py)
            for a in (*node.args, *(k.value for k in node.keywords)):
                if type(a) in (ast.Tuple, ast.List):
                    note_sizes([size_term(x) for x in a.elts], self.size_names)
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
            # with the extensions on, what each element does to its dimension (shape
            # arithmetic, analysis/shapes.py): ("slice", ((kind, ...), ...))
            if lower_util.EXTENSIONS:
                index = ("slice", _slice_elems(elems))
                for el in index[1]:
                    note_sizes(el[1:], self.size_names)
            else:
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
        gens = self._comp_gens(node)
        if gens:
            return ("t", "list", (self.expr(node.elt),), gens)
        return ("t", "list", (self.expr(node.elt),))

    def _x_dictcomp(self, node):
        gens = self._comp_gens(node)
        if gens:
            return ("d", ((self.expr(node.key), self.expr(node.value)),), gens)
        return ("d", ((self.expr(node.key), self.expr(node.value)),))

    def _comp_gens(self, node) -> tuple:
        """A comprehension's generators as ((target, iterable), ...), when every target binds
        names only (`for s in xs`, `for k, (a, b) in ...`); () otherwise, and with the
        extensions off (the libcst view lowered only the element)."""
        if not lower_util.EXTENSIONS:
            return ()
        out = []
        for g in node.generators:
            if not _names_only(g.target):
                return ()
            out.append((self.target(g.target), self.expr(g.iter)))
        return tuple(out)

    def _x_lambda(self, node):
        ps = _all_params(node.args)
        params = tuple(p.arg for p in ps)
        body = self.expr(node.body)
        # a keyword argument's name (`f(x, perm=...)`) is the callee's parameter, not a read
        # of a local `perm`: the lambda captures only what it reads (a partial turned into a
        # lambda keeps its keywords)
        free_names = _body_names([node.body], None)[0] - set(params) - _keyword_only(node.body)
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


_DISPLAY = {ast.Tuple: "tuple", ast.List: "list", ast.Set: "set"}
_EXPR = {
    ast.Name: ExprLowering._x_name,
    ast.Attribute: ExprLowering._x_attribute,
    ast.Call: ExprLowering._x_call,
    ast.BinOp: ExprLowering._x_binop,
    ast.UnaryOp: ExprLowering._x_unaryop,
    ast.Subscript: ExprLowering._x_subscript,
    ast.Constant: ExprLowering._x_constant,
    ast.JoinedStr: ExprLowering._x_joinedstr,
    ast.Tuple: ExprLowering._x_display,
    ast.List: ExprLowering._x_display,
    ast.Set: ExprLowering._x_display,
    ast.Dict: ExprLowering._x_dict,
    ast.ListComp: ExprLowering._x_comp,
    ast.SetComp: ExprLowering._x_comp,
    ast.GeneratorExp: ExprLowering._x_comp,
    ast.DictComp: ExprLowering._x_dictcomp,
    ast.Lambda: ExprLowering._x_lambda,
    ast.IfExp: ExprLowering._x_ifexp,
    ast.Compare: ExprLowering._x_compare,
    ast.BoolOp: ExprLowering._x_boolop,
    ast.Await: ExprLowering._x_value,
    ast.NamedExpr: ExprLowering._x_value,
}


def _keyword_only(body: ast.AST) -> set[str]:
    """Keyword-argument names under `body` that no Name node there reads."""
    kws, read = set(), set()
    for n in ast.walk(body):
        if isinstance(n, ast.keyword) and n.arg is not None:
            kws.add(n.arg)
        elif isinstance(n, ast.Name):
            read.add(n.id)
    return kws - read


def _slice_elems(elems) -> tuple:
    """A basic subscript's elements, each as a tuple of strings: ("..",) an Ellipsis,
    ("none",) a new axis, ("i",) an integer index, ("sl", start, stop, step) a slice whose
    bounds are size terms (index/lower_util.size_term: "" when absent)."""
    out = []
    for v in elems:
        tp = type(v)
        if tp is ast.Slice:
            out.append(("sl", size_term(v.lower), size_term(v.upper), size_term(v.step)))
        elif tp is ast.Constant and v.value is ...:
            out.append(("..",))
        elif tp is ast.Constant and v.value is None:
            out.append(("none",))
        else:
            out.append(("i",))
    return tuple(out)


def _pad_callee(func) -> bool:
    """A call named `pad` (`F.pad`, `torch.nn.functional.pad`, an imported `pad`)."""
    tp = type(func)
    return (tp is ast.Attribute and func.attr == "pad") or (tp is ast.Name and func.id == "pad")


def _names_only(t) -> bool:
    """An assignment target made of names (a name, a tuple/list of them, starred)."""
    if type(t) is ast.Name:
        return True
    if type(t) in (ast.Tuple, ast.List):
        return all(_names_only(e.value if type(e) is ast.Starred else e) for e in t.elts)
    return False


def named_exprs(node) -> list:
    """The `:=` expressions a statement part evaluates, innermost first and in evaluation
    order; a lambda's body is its own scope (not entered), a comprehension's is not (PEP 572:
    its `:=` binds in the enclosing function)."""
    out: list = []

    def visit(n) -> None:
        if type(n) is ast.Lambda:
            return
        for child in ast.iter_child_nodes(n):
            visit(child)
        if type(n) is ast.NamedExpr and type(n.target) is ast.Name:
            out.append(n)

    visit(node)
    return out
