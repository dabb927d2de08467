"""One parse per file: libcst tree -> a small, picklable module record (the per-file index).

The record holds imports, classes, functions and, for each function, its statements lowered
to a tiny expression language of tuples. Everything later (summaries, analysis) reads only
these records, so they are what the content-hash cache stores. Nothing here imports or
executes the audited code.

Expression forms (tuples):
  ("n", name)                       name load
  ("a", base, attr)                 attribute
  ("c", func, args, kwargs, line, star)   call; kwargs is a tuple of (name, expr)
  ("b", op, left, right, line)      binary op        ("u", op, operand) unary op
  ("s", base, index)                subscript; index is ("slice",) for basic slicing
  ("k", kind, value)                constant: none/int/float/str/bool/other
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
"""

from __future__ import annotations

import libcst as cst

from reload_lint.index.positions import compute_positions

_BINOPS = {
    cst.Add: "+",
    cst.Subtract: "-",
    cst.Multiply: "*",
    cst.Divide: "/",
    cst.FloorDivide: "//",
    cst.Modulo: "%",
    cst.Power: "**",
    cst.MatrixMultiply: "@",
    cst.BitAnd: "&",
    cst.BitOr: "|",
    cst.BitXor: "^",
    cst.LeftShift: "<<",
    cst.RightShift: ">>",
}
_AUGOPS = {
    cst.AddAssign: "+",
    cst.SubtractAssign: "-",
    cst.MultiplyAssign: "*",
    cst.DivideAssign: "/",
    cst.FloorDivideAssign: "//",
    cst.ModuloAssign: "%",
    cst.PowerAssign: "**",
    cst.MatrixMultiplyAssign: "@",
    cst.BitAndAssign: "&",
    cst.BitOrAssign: "|",
    cst.BitXorAssign: "^",
    cst.LeftShiftAssign: "<<",
    cst.RightShiftAssign: ">>",
}

OTHER = ("?",)


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


def _cst_dotted(node) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _cst_dotted(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


class _Extractor:
    def __init__(self, module_name: str, is_package: bool, positions: dict):
        self.module_name = module_name
        self.is_package = is_package
        self.pos = positions
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

    # ---- positions -------------------------------------------------------------------
    def line(self, node) -> int:
        p = self.pos.get(id(node))
        return p[0][0] if p else 0

    def span(self, node) -> tuple[int, int, int]:
        p = self.pos.get(id(node))
        if not p:
            return (0, 1, 0)
        return (p[0][0], p[0][1] + 1, p[1][0])

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
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = _cst_dotted(alias.name)
                if not full:
                    continue
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    self.imports[alias.asname.name.value] = full
                else:
                    top = full.split(".")[0]
                    self.imports.setdefault(top, top)
        elif isinstance(node, cst.ImportFrom):
            mod = _cst_dotted(node.module) if node.module is not None else None
            level = len(node.relative)
            base = self._resolve_relative(level, mod) if level else (mod or "")
            if isinstance(node.names, cst.ImportStar):
                self.imports.setdefault("*", "")
                self.imports["*"] = (self.imports["*"] + " " + base).strip()
                return
            for alias in node.names:
                name = _cst_dotted(alias.name)
                if not name:
                    continue
                local = name
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    local = alias.asname.name.value
                self.imports[local] = f"{base}.{name}" if base else name

    # ---- expressions -----------------------------------------------------------------
    def fstring(self, node) -> tuple:
        """`f"{prefix}_scale"` -> ("f", (("n", "prefix"), ("k", "str", "_scale"))); a plain
        concatenation of literals folds to one ("k", "str", ...); a conversion or format spec
        (`{x!r}`, `{x:>4}`) is not a name anyone builds attributes from: unknown."""
        parts: list = []
        stack = [node]
        while stack:
            n = stack.pop(0)
            if isinstance(n, cst.ConcatenatedString):
                stack[:0] = [n.left, n.right]
            elif isinstance(n, cst.SimpleString):
                try:
                    parts.append(("k", "str", n.evaluated_value))
                except Exception:
                    return ("k", "str", None)
            elif isinstance(n, cst.FormattedString):
                for p in n.parts:
                    if isinstance(p, cst.FormattedStringText):
                        parts.append(("k", "str", p.value))
                    elif p.conversion is None and p.format_spec is None:
                        parts.append(self.expr(p.expression))
                    else:
                        return ("k", "str", None)
            else:
                return ("k", "str", None)
        if all(p[0] == "k" and p[2] is not None for p in parts):
            return ("k", "str", "".join(p[2] for p in parts))
        return ("f", tuple(parts))

    def expr(self, node) -> tuple:  # one dispatch table
        if isinstance(node, cst.Name):
            return ("n", node.value)
        if isinstance(node, cst.Attribute):
            return ("a", self.expr(node.value), node.attr.value)
        if isinstance(node, cst.Call):
            args = []
            kwargs = []
            star = False
            for a in node.args:
                if a.star:
                    star = True
                    continue
                if a.keyword is not None:
                    kwargs.append((a.keyword.value, self.expr(a.value)))
                else:
                    args.append(self.expr(a.value))
            return ("c", self.expr(node.func), tuple(args), tuple(kwargs), self.line(node), star)
        if isinstance(node, cst.BinaryOperation):
            op = _BINOPS.get(type(node.operator), "?")
            line = self.span(node)[0]
            return ("b", op, self.expr(node.left), self.expr(node.right), line)
        if isinstance(node, cst.UnaryOperation):
            return ("u", type(node.operator).__name__, self.expr(node.expression))
        if isinstance(node, cst.Subscript):
            basic = True
            for el in node.slice:
                sl = el.slice
                if isinstance(sl, cst.Slice):
                    continue
                if isinstance(sl, cst.Index):
                    v = sl.value
                    if isinstance(v, (cst.Integer, cst.Ellipsis)) or (
                        isinstance(v, cst.Name) and v.value == "None"
                    ):
                        continue
                    if isinstance(v, cst.UnaryOperation) and isinstance(v.expression, cst.Integer):
                        continue
                basic = False
            if basic:
                index = ("slice",)
            elif len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
                index = self.expr(node.slice[0].slice.value)
            else:
                index = OTHER
            return ("s", self.expr(node.value), index)
        if isinstance(node, (cst.Integer,)):
            return ("k", "int", node.value)
        if isinstance(node, (cst.Float, cst.Imaginary)):
            return ("k", "float", None)
        if isinstance(node, cst.SimpleString):
            try:
                return ("k", "str", node.evaluated_value)
            except Exception:  # odd literal: keep going
                return ("k", "str", None)
        if isinstance(node, (cst.ConcatenatedString, cst.FormattedString)):
            return self.fstring(node)
        if isinstance(node, (cst.Tuple, cst.List, cst.Set)):
            kind = {cst.Tuple: "tuple", cst.List: "list", cst.Set: "set"}[type(node)]
            items = tuple(
                ("star", self.expr(e.value))
                if isinstance(e, cst.StarredElement)
                else self.expr(e.value)
                for e in node.elements
            )
            return ("t", kind, items)
        if isinstance(node, cst.Dict):
            items = []
            for e in node.elements:
                if isinstance(e, cst.DictElement):
                    items.append((self.expr(e.key), self.expr(e.value)))
            return ("d", tuple(items))
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return ("t", "list", (self.expr(node.elt),))
        if isinstance(node, cst.DictComp):
            return ("d", ((self.expr(node.key), self.expr(node.value)),))
        if isinstance(node, cst.Lambda):
            params = tuple(p.name.value for p in _all_params(node.params))
            body = self.expr(node.body)
            free_names = _BodyNames(node.body).loads - set(params)
            for p in _all_params(node.params):
                if p.default is not None:  # defaults bind at creation: a capture too
                    free_names |= _BodyNames(p.default).loads
            free = tuple(sorted(free_names))
            return ("l", params, body, free)
        if isinstance(node, cst.IfExp):
            return ("if", self.expr(node.body), self.expr(node.orelse))
        if isinstance(node, cst.Comparison):
            return ("k", "bool", None)
        if isinstance(node, cst.BooleanOperation):
            if isinstance(node.operator, cst.And):
                return ("k", "bool", None)
            # `a or b` yields one of them: keep both possibilities.
            return ("if", self.expr(node.left), self.expr(node.right))
        if isinstance(node, cst.Await):
            return self.expr(node.expression)
        if isinstance(node, cst.NamedExpr):
            return self.expr(node.value)
        return OTHER

    def target(self, node) -> tuple:
        if isinstance(node, cst.Name):
            return ("n", node.value)
        if isinstance(node, cst.Attribute):
            return ("a", self.expr(node.value), node.attr.value)
        if isinstance(node, cst.Subscript):
            return self.expr(node)
        if isinstance(node, (cst.Tuple, cst.List)):
            items = []
            for e in node.elements:
                if isinstance(e, cst.StarredElement):
                    items.append(("star", self.target(e.value)))
                else:
                    items.append(self.target(e.value))
            return ("t", "tuple", tuple(items))
        return OTHER

    # ---- statements ------------------------------------------------------------------
    def lazy_guard(self, test) -> tuple | None:
        """`if self._x is None`, `if not hasattr(self, "_x")`, `getattr(self, "_x", None) is None`."""
        if isinstance(test, cst.BooleanOperation):
            return self.lazy_guard(test.left) or self.lazy_guard(test.right)
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            comp = test.comparisons[0]
            if (
                isinstance(comp.operator, (cst.Is, cst.Equal))
                and isinstance(comp.comparator, cst.Name)
                and comp.comparator.value == "None"
            ):
                left = test.left
                if isinstance(left, cst.Attribute):
                    base = _cst_dotted(left.value)
                    if base:
                        return (base, left.attr.value)
                if isinstance(left, cst.Call) and _cst_dotted(left.func) == "getattr":
                    return self._getattr_guard(left)
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = test.expression
            if isinstance(inner, cst.Call) and _cst_dotted(inner.func) == "hasattr":
                return self._getattr_guard(inner)
            if isinstance(inner, cst.Attribute):
                base = _cst_dotted(inner.value)
                if base:
                    return (base, inner.attr.value)
        return None

    @staticmethod
    def _getattr_guard(call) -> tuple | None:
        if len(call.args) >= 2 and isinstance(call.args[1].value, cst.SimpleString):
            base = _cst_dotted(call.args[0].value)
            try:
                name = call.args[1].value.evaluated_value
            except Exception:
                return None
            if base and isinstance(name, str):
                return (base, name)
        return None

    def block(self, body, out: list, guard, func_qn: str, cls_qn: str | None) -> None:
        stmts = body.body if hasattr(body, "body") else body
        if isinstance(stmts, cst.BaseSuite):  # pragma: no cover
            stmts = stmts.body
        self.block_ids += 1
        self.block_path.append(self.block_ids)
        try:
            for stmt in stmts:
                self.stmt(stmt, out, guard, func_qn, cls_qn)
                # `if self._x is not None: return` guards the rest of the block like
                # `if self._x is None:` guards its body
                guard = guard or self.early_exit_guard(stmt)
        finally:
            self.block_path.pop()

    def early_exit_guard(self, node) -> tuple | None:
        """`if self._x is not None: return` / `if hasattr(self, "_x"): return` (no else)."""
        if not isinstance(node, cst.If) or node.orelse is not None:
            return None
        body = getattr(node.body, "body", ())
        if not (
            len(body) == 1
            and isinstance(body[0], cst.SimpleStatementLine)
            and isinstance(body[0].body[-1], cst.Return)
        ):
            return None
        test = node.test
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            comp = test.comparisons[0]
            if (
                isinstance(comp.operator, (cst.IsNot, cst.NotEqual))
                and isinstance(comp.comparator, cst.Name)
                and comp.comparator.value == "None"
            ):
                left = test.left
                if isinstance(left, cst.Attribute):
                    base = _cst_dotted(left.value)
                    return (base, left.attr.value) if base else None
                if isinstance(left, cst.Call) and _cst_dotted(left.func) == "getattr":
                    return self._getattr_guard(left)
        if isinstance(test, cst.Call) and _cst_dotted(test.func) == "hasattr":
            return self._getattr_guard(test)
        return None

    def stmt(self, node, out: list, guard, func_qn: str, cls_qn: str | None) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self.small(small, out, guard)
            return
        self._compound(node, out, guard, func_qn, cls_qn)

    def _compound(self, node, out: list, guard, func_qn: str, cls_qn: str | None) -> None:
        if isinstance(node, cst.If):
            g = self.lazy_guard(node.test)
            narrowed = _isinstance_test(node.test)
            ln, col, end = self.span(node)
            if narrowed:
                out.append(("narrow", ln, col, end, *narrowed))
            exits = _ends_in_return(node.body)
            # a state flag tested here: `if self.done: return` guards the rest of the
            # function, `if not self.done: ...` its own body (see analysis/pathfacts.py)
            flags = _local_flag_terms(_flag_terms(node.test, exit_form=exits), self.local_flags)
            # `if old.shape == new.shape and ...: copy_ else: rebind` (copy-or-rebind): the
            # rebind branch runs only while the compared tensors differ
            compat = _compat_test(node.test)
            rebind = None
            if compat is not None:
                a, b, feats, positive = compat
                rebind = ("flagon", ln, col, end, f"{a}|{b}", "<compat:" + ",".join(feats) + ">")
                rebind = (*rebind, False, ())
                if positive and not isinstance(node.orelse, cst.Else):
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
            orelse = node.orelse
            while orelse is not None:
                if isinstance(orelse, cst.If):
                    members = _member_terms(orelse.test)
                    if members:
                        out.append(("condon", *self.span(orelse), members))
                    self.block(orelse.body, out, guard, func_qn, cls_qn)
                    if members:
                        out.append(("condoff", *self.span(orelse)))
                    orelse = orelse.orelse
                else:
                    if rebind is not None and compat[3]:
                        out.append(rebind)
                    self.block(orelse.body, out, guard, func_qn, cls_qn)
                    if rebind is not None and compat[3]:
                        out.append(("flagoff", ln, col, end, rebind[4], rebind[5]))
                    orelse = None
            if exits:
                for base, attr, sense in flags:
                    here = tuple(self.block_path)
                    out.append(("flagexit", ln, col, end, base, attr, sense, here))
            return
        if isinstance(node, (cst.For,)):
            ln, col, end = self.span(node)
            out.append(("for", ln, col, end, self.target(node.target), self.expr(node.iter)))
            self.block(node.body, out, guard, func_qn, cls_qn)
            if node.orelse is not None:
                self.block(node.orelse.body, out, guard, func_qn, cls_qn)
            return
        if isinstance(node, cst.While):
            self.block(node.body, out, guard, func_qn, cls_qn)
            if node.orelse is not None:
                self.block(node.orelse.body, out, guard, func_qn, cls_qn)
            return
        if isinstance(node, cst.With):
            for item in node.items:
                if item.asname is not None:
                    ln, col, end = self.span(node)
                    out.append(
                        (
                            "assign",
                            ln,
                            col,
                            end,
                            (self.target(item.asname.name),),
                            self.expr(item.item),
                            guard,
                        )
                    )
            self.block(node.body, out, guard, func_qn, cls_qn)
            return
        if isinstance(node, cst.Try) or type(node).__name__ == "TryStar":
            self.block(node.body, out, guard, func_qn, cls_qn)
            for h in node.handlers:
                self.block(h.body, out, guard, func_qn, cls_qn)
            if node.orelse is not None:
                self.block(node.orelse.body, out, guard, func_qn, cls_qn)
            if node.finalbody is not None:
                self.block(node.finalbody.body, out, guard, func_qn, cls_qn)
            return
        if isinstance(node, cst.FunctionDef):
            qn = f"{func_qn}.<locals>.{node.name.value}" if func_qn else node.name.value
            self.function(node, qn, cls_qn=None, parent=func_qn)
            ln, col, end = self.span(node)
            out.append(("def", ln, col, end, node.name.value, qn))
            return
        if isinstance(node, cst.ClassDef):
            return
        if type(node).__name__ == "Match":
            for case in node.cases:
                self.block(case.body, out, guard, func_qn, cls_qn)
            return

    def small(self, node, out: list, guard) -> None:
        ln, col, end = self.span(node)
        if isinstance(node, cst.Assign):
            targets = tuple(self.target(t.target) for t in node.targets)
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
                name = node.targets[0].target.value
                test = node.value
                if isinstance(test, (cst.Comparison, cst.UnaryOperation, cst.BooleanOperation)):
                    self.local_flags[name] = _flag_terms(test, exit_form=False)
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
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
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
        elif isinstance(node, cst.AugAssign):
            op = _AUGOPS.get(type(node.operator), "?")
            out.append(("aug", ln, col, end, self.target(node.target), op, self.expr(node.value)))
        elif isinstance(node, cst.Expr):
            out.append(("expr", ln, col, end, self.expr(node.value), tuple(self.block_path)))
        elif isinstance(node, cst.Return):
            out.append(("ret", ln, col, end, self.expr(node.value) if node.value else None))
        elif isinstance(node, cst.Del):
            out.append(("del", ln, col, end, self.target(node.target), tuple(self.block_path)))
        elif isinstance(node, (cst.Import, cst.ImportFrom)):
            self.add_import(node)

    # ---- definitions -----------------------------------------------------------------
    def function(self, node: cst.FunctionDef, qn: str, cls_qn: str | None, parent: str | None):
        params = _all_params(node.params)
        decos = tuple(_cst_dotted(d.decorator) or "" for d in node.decorators)
        defaults = tuple(
            (p.name.value, self.expr(p.default)) for p in params if p.default is not None
        )
        annotations = tuple(
            (p.name.value, _annotation_text(p.annotation.annotation))
            for p in params
            if p.annotation is not None
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
        names = _BodyNames(node.body, self.pos)
        reads = sorted(names.attrs.items())
        free = ()
        if parent:
            names_here = {p.name.value for p in params} | names.stores
            free = tuple(sorted(names.loads - names_here))
        self.functions[qn] = {
            "qn": qn,
            "name": node.name.value,
            "cls": cls_qn,
            "params": tuple(p.name.value for p in params),
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

    def klass(self, node: cst.ClassDef, qn: str) -> None:
        bases = tuple(self.expr(a.value) for a in node.bases if a.keyword is None)
        methods: dict[str, str] = {}
        fields: list[tuple[str, bool]] = []
        ln, col, end = self.span(node)
        for stmt in node.body.body:
            if isinstance(stmt, cst.FunctionDef):
                mqn = f"{qn}.{stmt.name.value}"
                self.function(stmt, mqn, cls_qn=qn, parent=None)
                methods[stmt.name.value] = mqn
            elif isinstance(stmt, cst.ClassDef):
                self.klass(stmt, f"{qn}.{stmt.name.value}")
            elif isinstance(stmt, cst.If):
                # methods defined under a module-level condition inside the class body
                for sub in stmt.body.body:
                    if isinstance(sub, cst.FunctionDef):
                        mqn = f"{qn}.{sub.name.value}"
                        self.function(sub, mqn, cls_qn=qn, parent=None)
                        methods.setdefault(sub.name.value, mqn)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    field = _dataclass_field(small)
                    if field is not None:
                        fields.append(field)
        self.classes[qn] = {
            "qn": qn,
            "bases": bases,
            "line": ln,
            "end_line": end,
            "methods": methods,
            # class decorators as written (`dataclass`, `dataclasses.dataclass`) and annotated
            # class attributes in order: (name, passed to the generated __init__)
            "decos": tuple(
                _cst_dotted(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                or ""
                for d in node.decorators
            ),
            "fields": tuple(fields),
        }

    def module(self, mod: cst.Module) -> None:
        for stmt in mod.body:
            self.top(stmt)

    def top(self, stmt) -> None:
        if isinstance(stmt, cst.FunctionDef):
            self.function(stmt, stmt.name.value, cls_qn=None, parent=None)
        elif isinstance(stmt, cst.ClassDef):
            self.klass(stmt, stmt.name.value)
        elif isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    self.add_import(small)
                elif isinstance(small, cst.Assign) and len(small.targets) == 1:
                    t = small.targets[0].target
                    if isinstance(t, cst.Name):
                        self.globals[t.value] = self.expr(small.value)
                elif isinstance(small, cst.AnnAssign) and small.value is not None:
                    # `_TABLE: dict[str, Backend] = {...}`
                    if isinstance(small.target, cst.Name):
                        self.globals[small.target.value] = self.expr(small.value)
        elif isinstance(stmt, (cst.If, cst.Try)) or type(stmt).__name__ == "TryStar":
            blocks = [stmt.body]
            if isinstance(stmt, cst.If):
                o = stmt.orelse
                while o is not None:
                    blocks.append(o.body)
                    o = o.orelse if isinstance(o, cst.If) else None
            else:
                blocks += [h.body for h in stmt.handlers]
                if stmt.orelse is not None:
                    blocks.append(stmt.orelse.body)
            for b in blocks:
                for s in b.body:
                    self.top(s)


def _dataclass_field(node) -> tuple[str, bool] | None:
    """`name: T` / `name: T = default` in a class body -> (name, init); None for ClassVar
    and anything else. `field(init=False)` is not an __init__ parameter."""
    if not isinstance(node, cst.AnnAssign) or not isinstance(node.target, cst.Name):
        return None
    ann = _cst_dotted(node.annotation.annotation) or ""
    if isinstance(node.annotation.annotation, cst.Subscript):
        ann = _cst_dotted(node.annotation.annotation.value) or ""
    if ann.rsplit(".", 1)[-1] == "ClassVar":
        return None
    init = True
    v = node.value
    if isinstance(v, cst.Call) and (_cst_dotted(v.func) or "").rsplit(".", 1)[-1] == "field":
        for a in v.args:
            if a.keyword is not None and a.keyword.value == "init":
                init = not (isinstance(a.value, cst.Name) and a.value.value == "False")
    return (node.target.value, init)


def _ends_in_return(body) -> bool:
    """The block's last statement is a `return` (an early exit of the function)."""
    stmts = getattr(body, "body", ())
    if not stmts:
        return False
    last = stmts[-1]
    return isinstance(last, cst.SimpleStatementLine) and any(
        isinstance(s, cst.Return) for s in last.body
    )


_FALSY = ("False", "None")


def _member_terms(test) -> tuple:
    """(name, positive, members) for each conjunct of an `if` test that compares a local name
    with enum-like members: `x in [E.A, E.B]`, `x not in (...)`, `x == E.A`, `x != E.A`.
    One false conjunct makes the test false; a test with `or` gives none."""
    if isinstance(test, cst.BooleanOperation):
        if not isinstance(test.operator, cst.And):
            return ()
        return _member_terms(test.left) + _member_terms(test.right)
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return ()
    if not isinstance(test.left, cst.Name):
        return ()
    ct = test.comparisons[0]
    op, right = ct.operator, ct.comparator
    if isinstance(op, (cst.In, cst.NotIn)) and isinstance(right, (cst.List, cst.Tuple, cst.Set)):
        names = [_cst_dotted(el.value) for el in right.elements]
        positive = isinstance(op, cst.In)
    elif isinstance(op, (cst.Equal, cst.NotEqual)) and isinstance(right, cst.Attribute):
        names = [_cst_dotted(right)]
        positive = isinstance(op, cst.Equal)
    else:
        return ()
    if not names or any(n is None or "." not in n for n in names):
        return ()
    return ((test.left.value, positive, tuple(names)),)


def _flag_terms(test, exit_form: bool) -> list[tuple[str, str, object]]:
    """State flags a test reads: (base, attr, sense), the test holding when the flag's truth
    is `sense` (True / False) or, for `hasattr`, its presence (`"has"` / `"absent"`).

    Only terms that must hold for the test to hold (body form: the `and` operands) or whose
    holding is enough (exit form, `if a or b: return`: the `or` operands) are returned, so
    "the guarded code runs only when <term> does not hold / holds" stays true.
    """
    if isinstance(test, cst.BooleanOperation):
        keep = (
            isinstance(test.operator, cst.Or) if exit_form else isinstance(test.operator, cst.And)
        )
        if not keep:
            return []
        return _flag_terms(test.left, exit_form) + _flag_terms(test.right, exit_form)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return [(b, a, _INVERT[s]) for b, a, s in _flag_terms(test.expression, not exit_form)]
    if isinstance(test, cst.Attribute):
        base = _cst_dotted(test.value)
        return [(base, test.attr.value, True)] if base else []
    if isinstance(test, cst.Name) and test.value not in ("True", "False", "None"):
        return [("", test.value, True)]  # a module-level switch (`if _is_cpu:`)
    if isinstance(test, cst.Call) and not test.args:
        # a predicate call (`current_platform.is_cpu()`): named with `()`, never a state flag
        fn = _cst_dotted(test.func)
        if fn:
            base, _, name = fn.rpartition(".")
            return [(base, name + "()", True)]
        return []
    if isinstance(test, cst.Call) and len(test.args) >= 2:
        fn = _cst_dotted(test.func)
        if fn not in ("getattr", "hasattr") or not isinstance(test.args[1].value, cst.SimpleString):
            return []
        if fn == "getattr" and len(test.args) > 2:
            d = test.args[2].value
            if not (isinstance(d, cst.Name) and d.value in _FALSY) and not (
                isinstance(d, cst.Integer) and d.value == "0"
            ):
                return []
        base = _cst_dotted(test.args[0].value)
        try:
            name = test.args[1].value.evaluated_value
        except Exception:
            return []
        if not base or not isinstance(name, str):
            return []
        return [(base, name, True if fn == "getattr" else "has")]
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comp = test.comparisons[0]
        rhs = comp.comparator
        if isinstance(rhs, cst.Name) and rhs.value in ("True", "False"):
            pos = isinstance(comp.operator, (cst.Is, cst.Equal))
            neg = isinstance(comp.operator, (cst.IsNot, cst.NotEqual))
            if pos or neg:
                terms = _flag_terms(test.left, exit_form)[:1]
                want = (rhs.value == "True") == pos
                return [(b, a, s if want else not s) for b, a, s in terms if s in (True, False)]
        if isinstance(rhs, cst.Name) and rhs.value == "None":
            pos = isinstance(comp.operator, (cst.Is, cst.Equal))
            neg = isinstance(comp.operator, (cst.IsNot, cst.NotEqual))
            left = test.left
            if (pos or neg) and isinstance(left, (cst.Attribute, cst.Call)):
                terms = [t for t in _flag_terms(left, exit_form) if t[2] is True][:1]
                return [(b, a, "none" if pos else "notnone") for b, a, _s in terms]
    return []


_INVERT = {True: False, False: True, "has": "absent", "absent": "has", "none": "notnone"}
_INVERT["notnone"] = "none"


def _local_flag_terms(flags, local_flags: dict):
    """Replace a local name standing for a flag test (`done = self.x is not None`, then
    `if not done:`) by that test's own term."""
    out = []
    for base, attr, sense in flags:
        derived = local_flags.get(attr) if not base else None
        if derived and len(derived) == 1 and sense in (True, False):
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
    if isinstance(node, cst.Attribute) and node.attr.value in _FEATURE_ATTRS:
        base = _cst_dotted(node.value)
        return (node.attr.value, base) if base else None
    if isinstance(node, cst.Call):
        fn = node.func
        if _cst_dotted(fn) == "type" and len(node.args) == 1:
            base = _cst_dotted(node.args[0].value)
            return ("type", base) if base else None
        if isinstance(fn, cst.Attribute) and fn.attr.value in _FEATURE_CALLS and not node.args:
            inner = fn.value
            if (
                isinstance(inner, cst.Call)
                and isinstance(inner.func, cst.Attribute)
                and inner.func.attr.value in ("untyped_storage", "storage")
            ):
                inner = inner.func.value
            base = _cst_dotted(inner)
            return (fn.attr.value, base) if base else None
    return None


def _compat_test(test) -> tuple[str, str, tuple[str, ...], bool] | None:
    """`a.shape == b.shape and a.dtype == b.dtype ...` -> (a, b, features, True); the negation
    (`!=` joined by `or`, or `not (...)`) -> (..., False). Every term compares the same two
    tensors."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _compat_test(test.expression)
        return (*inner[:3], not inner[3]) if inner else None
    terms = []
    positive = None

    def walk(t) -> bool:
        nonlocal positive
        if isinstance(t, cst.BooleanOperation):
            want = isinstance(t.operator, cst.And)
            if positive is None:
                positive = want
            return positive == want and walk(t.left) and walk(t.right)
        if isinstance(t, cst.Comparison) and len(t.comparisons) == 1:
            op = t.comparisons[0].operator
            eq = isinstance(op, (cst.Equal, cst.Is))
            ne = isinstance(op, (cst.NotEqual, cst.IsNot))
            left, right = _feature(t.left), _feature(t.comparisons[0].comparator)
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
    if (
        isinstance(test, cst.Call)
        and _cst_dotted(test.func) == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0].value, cst.Name)
    ):
        t = _cst_dotted(test.args[1].value)
        if t:
            return (test.args[0].value.value, t)
    return None


def _annotation_text(node) -> str:
    """'pkg.Cls' for Cls-typed params, 'type:pkg.Cls' for `type[Cls]`, '' otherwise."""
    if isinstance(node, cst.SimpleString):
        try:
            text = node.evaluated_value
        except Exception:
            return ""
        return text.split("|")[0].strip() if isinstance(text, str) else ""
    inner = _strip_annotation(node)
    if isinstance(inner, cst.SimpleString) and inner is not node:
        try:
            text = inner.evaluated_value
        except Exception:
            text = ""
        name = text.split("|")[0].strip() if isinstance(text, str) else ""
        if isinstance(node, cst.Subscript) and _cst_dotted(node.value) in ("type", "Type"):
            return "type:" + name
        return name
    if (
        isinstance(node, cst.Subscript)
        and _cst_dotted(node.value) in ("type", "Type", "typing.Type")
        and inner is not node
    ):
        return "type:" + (_cst_dotted(inner) or "")
    if isinstance(inner, cst.Subscript) and _cst_dotted(inner.value) in ("type", "Type"):
        sub = _strip_annotation(inner)
        return "type:" + (_cst_dotted(sub) or "")
    return _cst_dotted(inner) or ""


def _strip_annotation(node):
    # `X | None`, `Optional[X]`, "X" -> X (best effort)
    if isinstance(node, cst.BinaryOperation):
        return node.left
    if isinstance(node, cst.Subscript) and node.slice:
        first = node.slice[0].slice
        if isinstance(first, cst.Index):
            return first.value
    return node


def _all_params(params: cst.Parameters) -> list:
    out = list(params.posonly_params) + list(params.params)
    if isinstance(params.star_arg, cst.Param):
        out.append(params.star_arg)
    out += list(params.kwonly_params)
    if params.star_kwarg is not None:
        out.append(params.star_kwarg)
    return out


# ---- names and attribute reads of a function body ------------------------------------
# One purpose-built pass over the body (no CSTVisitor machinery, which rebuilds every node):
# it walks only the fields that can hold names, skipping tokens and whitespace.

_SKIP_FIELDS = frozenset(
    {
        "lpar",
        "rpar",
        "lbracket",
        "rbracket",
        "lbrace",
        "rbrace",
        "comma",
        "semicolon",
        "dot",
        "colon",
        "equal",
        "operator",
        "asynchronous",
        "leading_lines",
        "lines_after_decorators",
        "header",
        "footer",
        "trailing_whitespace",
        "empty_lines",
    }
)
_FIELDS_BY_TYPE: dict[type, tuple[str, ...]] = {}


def _child_fields(tp: type) -> tuple[str, ...]:
    names = _FIELDS_BY_TYPE.get(tp)
    if names is None:
        import dataclasses

        names = tuple(
            f.name
            for f in dataclasses.fields(tp)
            if f.name not in _SKIP_FIELDS and not f.name.startswith("whitespace")
        )
        _FIELDS_BY_TYPE[tp] = names
    return names


class _BodyNames:
    """Names loaded (every Name, as CSTVisitor would see them, except attribute names),
    plain-name assignment targets, and attribute reads (attr -> first line; includes literal
    getattr/hasattr names) of one function body, nested definitions included."""

    __slots__ = ("pos", "loads", "stores", "attrs")

    def __init__(self, node, pos: dict | None = None):
        self.pos = pos or {}
        self.loads: set[str] = set()
        self.stores: set[str] = set()
        self.attrs: dict[str, int] = {}
        self._walk(node)

    def _note(self, name: str, node) -> None:
        p = self.pos.get(id(node))
        line = p[0][0] if p else 0
        old = self.attrs.get(name)
        if old is None or (line and (line < old or not old)):
            self.attrs[name] = line

    def _walk(self, root) -> None:  # the whole pass
        Name, Attribute, Call, AssignTarget = cst.Name, cst.Attribute, cst.Call, cst.AssignTarget
        CSTNode, SimpleString = cst.CSTNode, cst.SimpleString
        loads, stores = self.loads, self.stores
        stack = [root]
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node = pop()
            tp = type(node)
            if tp is Name:
                loads.add(node.value)
                continue
            if tp is Attribute:
                self._note(node.attr.value, node)
                push(node.value)
                continue
            if tp is Call:
                args = node.args
                if len(args) >= 2 and _cst_dotted(node.func) in ("getattr", "hasattr"):
                    v = args[1].value
                    if type(v) is SimpleString:
                        try:
                            s = v.evaluated_value
                        except Exception:
                            s = None
                        if isinstance(s, str):
                            self._note(s, node)
            elif tp is AssignTarget and type(node.target) is Name:
                stores.add(node.target.value)
            for fname in _child_fields(tp):
                v = getattr(node, fname)
                if isinstance(v, CSTNode):
                    push(v)
                elif type(v) in (tuple, list):
                    extend([c for c in v if isinstance(c, CSTNode)])


def extract_module(source: str, module_name: str, is_package: bool) -> dict:
    """Parse `source` (libcst) and return the module record. Raises libcst.ParserSyntaxError."""
    mod = cst.parse_module(source)
    positions = compute_positions(mod)
    ex = _Extractor(module_name, is_package, positions)
    ex.module(mod)
    # names registered by literal: `x.register_buffer("name", ...)`, `x.register_parameter(
    # "name", ...)`, `x.name = Parameter(...)`. A method registering on its own `self` keys the
    # name by its class (self_registered / self_buffers); any other receiver (the layer a
    # create_weights is handed, a local module) is a handed registration, one table per module
    registered: set[str] = set()
    self_regs: dict[str, set[str]] = {}
    self_bufs: dict[str, set[str]] = {}
    for f in ex.functions.values():
        me = _self_param(f)
        if me is None:
            _collect_buffers(f["body"], ex.buffers, registered)
            continue
        regs = self_regs.setdefault(f["cls"], set())
        bufs = self_bufs.setdefault(f["cls"], set())
        _collect_buffers(f["body"], ex.buffers, registered, me, bufs, regs)
    return {
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
) -> None:
    """Literal names passed to register_buffer (out) and registered as parameters
    (registered); with `me` (a method's self name), registrations on `me` itself go to
    self_out / self_registered instead."""

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
