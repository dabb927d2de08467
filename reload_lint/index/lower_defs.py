"""Definitions and imports (index/extract.py): module top level, classes, functions (their
record entries), dataclass fields, annotations, import tables."""

from __future__ import annotations

import ast

from reload_lint.index import lower_util
from reload_lint.index.lower_names import _body_names
from reload_lint.index.lower_sizes import function_sizes
from reload_lint.index.lower_util import (
    _COMPOUND,
    _FUNCS,
    _TRIES,
    _all_params,
    _ast_dotted,
    _call_args,
    _is_const,
    _param_defaults,
)


class DefLowering:
    """Mixin of the extractor; needs its statement, expression and SourceText methods."""

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
        saved_sizes, self.size_names = self.size_names, set()
        saved_branches, self.branches = self.branches, []
        try:
            self.block(node.body, body, None, qn, cls_qn)
            size_names = self.size_names
            branches = self.branches
        finally:
            self.block_path = saved
            self.local_flags = saved_flags
            self.size_names = saved_sizes
            self.branches = saved_branches
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
        if branches:
            # if-chains, as line regions: a sibling branch's stores are not seen in the
            # next one, and a branch that returns adds nothing after the chain
            self.functions[qn]["branches"] = tuple(
                sorted(branches, key=lambda c: (c[0][0][0], -c[0][-1][1]))
            )
        if lower_util.EXTENSIONS:
            # `return current_platform.is_rocm() and envs.X`: a predicate the package's
            # platform may decide (analysis/platforms.py)
            ret = self.ret_test(node)
            if ret is not None:
                self.functions[qn]["ret_test"] = ret
        if any(_cache_fill(s) for s in body):
            # the first-forward analysis runs it too (analysis/interp.py run_lazy)
            self.functions[qn]["fills_cache"] = True
        if cls_qn is None and parent is None:
            patched = _patch_targets(node.decorator_list)
            if patched:
                # `@register_patch(target="pkg.Cls.method")`: the function replaces that
                # method (a plugin's hook patched onto an engine class)
                self.functions[qn]["patches"] = patched
        if lower_util.EXTENSIONS and size_names:
            # fixed integer locals with a lower bound, of the names it uses as sizes (shape
            # arithmetic: index/lower_sizes.py)
            sizes = function_sizes(node, [p.arg for p in params], size_names)
            if sizes:
                self.functions[qn]["sizes"] = sizes

    def klass(self, node: ast.ClassDef, qn: str) -> None:
        bases = tuple(self.expr(b.value if type(b) is ast.Starred else b) for b in node.bases)
        methods: dict[str, str] = {}
        fields: list[tuple[str, bool]] = []
        consts: list[tuple[str, str]] = []
        enum_attr = None
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
                const = _class_const(stmt) if lower_util.EXTENSIONS else None
                if const is not None:
                    consts.append(const)
                enum = _enum_attr(stmt) if lower_util.EXTENSIONS else None
                if enum is not None:
                    enum_attr = enum
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
        if enum_attr is not None:
            # `_enum = PlatformEnum.CUDA` in the class body (a vLLM platform's kind)
            self.classes[qn]["enum_attr"] = enum_attr

    def module(self, mod: ast.Module) -> None:
        for stmt in mod.body:
            self.top(stmt)
        # `Cls.method = fn` / `setattr(Cls, "method", fn)` at the top level: fn replaces the
        # method (written as the code names the owner; the analysis qualifies it)
        for stmt in mod.body:
            got = _assigned_patch(stmt)
            if got is None:
                continue
            fn, target = got
            rec = self.functions.get(fn)
            if rec is not None and rec["cls"] is None and rec["parent"] is None:
                old = rec.get("patches", ())
                if target not in old:
                    rec["patches"] = (*old, target)

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


def _class_const(stmt) -> tuple[str, str] | None:
    """`NAME = "text"` (one name, a string constant) -> (NAME, text)."""
    if type(stmt) is not ast.Assign or len(stmt.targets) != 1:
        return None
    t, v = stmt.targets[0], stmt.value
    if type(t) is ast.Name and type(v) is ast.Constant and isinstance(v.value, str):
        return (t.id, v.value)
    return None


def _enum_attr(stmt) -> str | None:
    """`_enum = PlatformEnum.X` (or `_enum: PlatformEnum = PlatformEnum.X`) -> its dotted
    value as written."""
    if type(stmt) is ast.Assign and len(stmt.targets) == 1:
        t, v = stmt.targets[0], stmt.value
    elif type(stmt) is ast.AnnAssign and stmt.value is not None:
        t, v = stmt.target, stmt.value
    else:
        return None
    if type(t) is not ast.Name or t.id != "_enum" or type(v) is not ast.Attribute:
        return None
    return _ast_dotted(v)


def _cache_fill(st) -> bool:
    """`self._cache[key] = v` inside a block of the function (`if buf is None: buf = ...;
    self._cache[n] = buf`): a cache kept on an object and filled on first use, guarded by a
    test of a local rather than of an attribute."""
    if not lower_util.EXTENSIONS or st[0] != "assign" or len(st) < 8 or len(st[7]) < 2:
        return False
    return any(t[0] == "s" and t[1][0] == "a" for t in st[4])


def _dotted_target(text) -> bool:
    """A dotted path to a method (`pkg.mod.Cls.method`): identifiers, at least one dot."""
    if not isinstance(text, str) or "." not in text or len(text) > 300:
        return False
    return all(part.isidentifier() for part in text.split("."))


def _patch_targets(decorators) -> tuple[str, ...]:
    """The dotted strings a decorator call is given (`@patch("pkg.Cls.m")`, `target=`)."""
    out: list[str] = []
    for d in decorators:
        if type(d) is not ast.Call:
            continue
        for value, _kw, _star in _call_args(d):
            if type(value) is ast.Constant and _dotted_target(value.value):
                out.append(value.value)
            elif type(value) is ast.Tuple or type(value) is ast.JoinedStr:
                continue
            elif type(value) is ast.BinOp:
                continue
    # a parenthesised implicit concatenation is one Constant already
    return tuple(dict.fromkeys(out))


def _assigned_patch(stmt) -> tuple[str, str] | None:
    """(function name, `Owner.attr` as written) for `Owner.attr = fn` or
    `setattr(Owner, "attr", fn)` at a module's top level."""
    tp = type(stmt)
    if tp is ast.Assign and type(stmt.value) is ast.Name and len(stmt.targets) == 1:
        t = stmt.targets[0]
        if type(t) is ast.Attribute:
            owner = _ast_dotted(t.value)
            if owner:
                return stmt.value.id, f"{owner}.{t.attr}"
        return None
    if tp is ast.Expr and type(stmt.value) is ast.Call:
        c = stmt.value
        if (
            type(c.func) is ast.Name
            and c.func.id == "setattr"
            and len(c.args) == 3
            and not c.keywords
            and type(c.args[1]) is ast.Constant
            and isinstance(c.args[1].value, str)
            and type(c.args[2]) is ast.Name
        ):
            owner = _ast_dotted(c.args[0])
            if owner and c.args[1].value.isidentifier():
                return c.args[2].id, f"{owner}.{c.args[1].value}"
    return None
