"""Expressions: names, attributes (with held-object types and properties), builtins and
tensor methods, evaluated to abstract values."""

from __future__ import annotations

from dataclasses import replace

from reload_lint.analysis import shapes as S
from reload_lint.analysis import values as V
from reload_lint.analysis.comprehensions import eval_comprehension
from reload_lint.analysis.frame import (
    Frame,
    _conf_of,
    _derived_src,
    _line_of,
    class_of,
    to_host,
)
from reload_lint.analysis.values import AV
from reload_lint.findings import TraceStep
from reload_lint.index.extract import dotted
from reload_lint.summaries import torchapi as T


class ExprMixin:
    """Mixed into Analyzer (analysis/interp.py); uses its state and the other rooms' methods."""

    # ------------------------------------------------------------------ expressions
    def render(self, e) -> str:
        k = e[0]
        if k == "n":
            return e[1]
        if k == "a":
            return f"{self.render(e[1])}.{e[2]}"
        if k == "s":
            idx = e[2]
            inner = self.render(idx) if idx[0] not in ("slice", "?") else "..."
            return f"{self.render(e[1])}[{inner}]"
        if k == "c":
            return f"{self.render(e[1])}(...)"
        if k == "k":
            return repr(e[2]) if e[2] is not None else "<const>"
        if k == "f":
            body = "".join(p[2] if p[0] == "k" else "{" + self.render(p) + "}" for p in e[1])
            return f'f"{body}"'
        return "<expr>"

    def _fresh(
        self, fr: Frame, st_or_line, note: str, conf: str = "high", src: str = "", value=None
    ) -> tuple:
        """A new tensor; `value="derived"`: computed from tensors of unknown provenance (not
        allocated), which only the `vllm-load-weights` contract tells apart (a derived copy)."""
        line = st_or_line if isinstance(st_or_line, int) else st_or_line[1]
        tr = (TraceStep(fr.path, line, note),)
        return (AV(V.FRESH, conf=conf, trace=tr, src=src, value=value),)

    def eval(self, fr: Frame, e, stmt=None) -> tuple:
        k = e[0]
        if k == "n":
            return self.eval_name(fr, e[1])
        if k == "a":
            return self.eval_attr(fr, self.eval(fr, e[1]), e[2], e)
        if k == "c":
            return self.eval_call(fr, e)
        if k == "f":
            return self.eval_fstring(fr, e)
        if k == "k":
            if e[1] == "str":
                # text only: a bytes constant is a plain scalar (it names no attribute)
                return (AV(V.STR, value=e[2]),) if isinstance(e[2], str) else (V.SCAL,)
            if e[1] == "none":
                return (V.NON,)
            if e[2] == "None" or (e[1] == "other"):
                return (V.NON,)
            if e[1] == "int" and e[2] == "0":
                return (AV(V.SCALAR, value="0"),)
            return (V.SCAL,)
        if k == "b":
            left = self.eval(fr, e[2])
            right = self.eval(fr, e[3])
            if V.tensorish(left) or V.tensorish(right):
                src = _derived_src(left) or _derived_src(right)
                conf = _conf_of(left, right)
                line = e[4] if len(e) > 4 and e[4] else _line_of(e, fr)
                out = self._fresh(fr, line, f"`{e[1]}` allocates a new tensor", conf, src)
                out = S.carry_shape_ops(out, left, right)
                # elementwise with a scalar operand: the tensor operand's shape
                if S.plain(right):
                    return S.with_shape(out, S.common(left))
                if S.plain(left):
                    return S.with_shape(out, S.common(right))
                return out
            if e[1] == "+":
                return _concat(left, right)
            return (V.SCAL,)
        if k == "u":
            inner = self.eval(fr, e[2])
            if V.tensorish(inner):
                out = self._fresh(
                    fr, _line_of(e, fr), "unary op allocates", src=_derived_src(inner)
                )
                out = S.carry_shape_ops(out, inner)
                return S.with_shape(out, S.common(inner))
            return (V.SCAL,)
        if k == "s":
            base = self.eval(fr, e[1])
            out: tuple = ()
            for b in base:
                if b.kind in (V.REG, V.VIEW, V.PARAM):
                    if e[2][0] == "slice":
                        shape = S.sliced(fr, S.shape_of(b), e[2])
                        view = AV(
                            V.VIEW,
                            conf=b.conf,
                            trace=b.trace,
                            src=b.src,
                            value="slice",
                            shape=shape,
                        )
                        out = V.union(out, (view,))
                    else:
                        out = V.union(
                            out,
                            self._fresh(fr, _line_of(e, fr), "advanced indexing copies", src=b.src),
                        )
                elif b.kind == V.FRESH:
                    if e[2][0] == "slice":
                        if b.shape:  # a slice of a tensor of known shape (analysis/shapes.py)
                            b = replace(b, shape=S.sliced(fr, b.shape, e[2]))
                        out = V.union(out, (b,))
                    else:
                        out = V.union(
                            out, self._fresh(fr, _line_of(e, fr), "advanced indexing copies")
                        )
                elif b.kind == V.TUPLE:
                    idx = e[2]
                    if idx[0] == "k" and idx[1] == "int":
                        try:
                            i = int(idx[2])
                            out = V.union(
                                out, b.items[i] if -len(b.items) <= i < len(b.items) else ()
                            )
                        except ValueError:
                            pass
                    else:
                        for g in b.items:
                            out = V.union(out, g)
                elif b.kind == V.CONTAINER:
                    out = V.union(out, b.items)
                elif b.kind == V.MODULE:
                    out = V.union(out, (AV(V.MODULE, src=b.src + "[]"),))
            return out or (V.UNK,)
        if k == "t":
            if len(e) > 3:  # a comprehension with its generators
                return eval_comprehension(self, fr, e[:3], e[3])
            if any(it[0] == "star" for it in e[2]):
                # `[a, *rest]`: the items of rest are spliced in (positions are unknown)
                flat = ()
                for it in e[2]:
                    for v in self.eval(fr, it[1] if it[0] == "star" else it):
                        if it[0] == "star" and v.kind == V.CONTAINER:
                            flat = V.union(flat, v.items)
                        elif it[0] == "star" and v.kind == V.TUPLE:
                            for g in v.items:
                                flat = V.union(flat, g)
                        else:
                            flat = V.union(flat, (v,))
                return (AV(V.CONTAINER, items=flat, value=e[1]),)
            groups = tuple(self.eval(fr, it) for it in e[2])
            if e[1] == "tuple":
                return (AV(V.TUPLE, items=groups),)
            flat: tuple = ()
            for g in groups:
                flat = V.union(flat, g)
            return (AV(V.CONTAINER, items=flat, value=e[1]),)
        if k == "d":
            if len(e) > 2:
                return eval_comprehension(self, fr, e[:2], e[2])
            flat = ()
            for _, val in e[1]:
                flat = V.union(flat, self.eval(fr, val))
            return (AV(V.CONTAINER, items=flat, value="dict"),)
        if k == "l":
            captures = tuple((n, fr.env[n]) for n in e[3] if n in fr.env)
            return (
                AV(
                    V.CALLABLE,
                    items=captures,
                    fn=("lambda", fr.module, e[1], e[2]),
                    value="lambda",
                    trace=(TraceStep(fr.path, _line_of(e, fr), "lambda"),),
                ),
            )
        if k == "if":
            return V.union(self.eval(fr, e[1]), self.eval(fr, e[2]))
        return (V.UNK,)

    def eval_name(self, fr: Frame, name: str) -> tuple:
        if name in fr.env:
            return fr.env[name]
        if name in ("True", "False"):
            return (V.SCAL,)
        if name == "None":
            return (V.NON,)
        bound = self.index.module_name(fr.module, name)
        if bound is not None:
            kind, what = bound
            if kind == "func":
                return (AV(V.FUNC, value=f"{fr.module}:{name}"),)
            if kind == "class":
                return (AV(V.CLS, cls=f"{fr.module}:{name}"),)
            if kind == "import":
                return (AV(V.REF, value=what),)
            if kind == "global" and what is not None and what[0] in ("n", "a"):
                d = dotted(what)
                if d and d != name:
                    return (AV(V.REF, value=self.index.qualify_external(fr.module, d)),)
        if fr.func.get("parent"):
            return (V.UNK,)
        return (AV(V.REF, value=name),)

    def _resolve_ref(self, q: str) -> tuple:
        r = self.index.resolve(q)
        if r is None:
            return (AV(V.REF, value=q),)
        kind, mod, qn = r
        if kind == "func":
            f = self.index.function(mod, qn)
            if f is not None and f["cls"] and "classmethod" in f["decos"]:
                # Class.make(...): bind `cls` to the class named in the call, not the base
                owner = self.index.resolve(q.rsplit(".", 1)[0])
                if owner is not None and owner[0] == "class":
                    cls_av = AV(V.CLS, cls=f"{owner[1]}:{owner[2]}")
                    return (AV(V.BOUND, value=f"{mod}:{qn}", items=((cls_av,),)),)
            return (AV(V.FUNC, value=f"{mod}:{qn}"),)
        if kind == "class":
            return (AV(V.CLS, cls=f"{mod}:{qn}"),)
        return (AV(V.REF, value=mod),)

    def attr_type(self, cls_key: str, attr: str) -> str | None:
        """Class key of `self.<attr>` when the class's methods set it to `SomeClass(...)`.

        Lets the analysis follow calls on objects a quant method or kernel holds
        (`self.backend.prepare(layer)`) when the object was built once in __init__. Only the
        callees of stores to this attribute are resolved (resolving is what parses modules).
        """
        key = (cls_key, attr)
        if key not in self._attr_types:
            self._attr_types[key] = None
            self._attr_types[key] = self._stored_class(cls_key, attr, on_self=True)
        return self._attr_types[key]

    def layer_attr_type(self, root_cls: str | None, attr: str) -> str | None:
        """Class key of `layer.<attr>` on the post-load path of `root_cls`'s methods, for a
        layer of unknown class: the object the root's class (a quant method) stores on the
        layer it is handed in any of its methods (`layer.kernel = Kernel(...)` in
        create_weights), else what the module classes that build the root's class store on
        themselves (the layer's constructor)."""
        if not root_cls:
            return None
        key = (f"layer-of:{root_cls}", attr)
        if key not in self._attr_types:
            self._attr_types[key] = None
            found = self._stored_class(root_cls, attr, on_self=False)
            if found is None:
                self._handed_registrations()
                for builder, _ in self._builders_of(root_cls):
                    found = self.attr_type(builder, attr)
                    if found is not None:
                        break
            self._attr_types[key] = found
        return self._attr_types[key]

    def _stored_class(self, cls_key: str, attr: str, on_self: bool) -> str | None:
        """The class `Class(...)` stored on `<me>.<attr>` in the methods of cls_key's MRO, `me`
        being the method's `self` (on_self) or another of its parameters (the layer)."""
        for mod, _name, mqn in self.index.mro_methods(cls_key):
            f = self.index.function(mod, mqn)
            if f is None or not f["params"]:
                continue
            owners = {f["params"][0]} if on_self else set(f["params"][1:])
            for st, bases in _call_stores(self, f).get(attr, ()):
                if bases.isdisjoint(owners):
                    continue
                func = st[5][1]
                if on_self and func[0] == "a" and func[1] == ("n", f["params"][0]):
                    # `self.runner = self._init_runner()`: a factory method of the same class
                    # whose every return builds one class (`return DefaultMoERunner(...)`)
                    built = self._factory_class(cls_key, func[2])
                    if built:
                        return built
                    continue
                d = dotted(func) if func[0] in ("n", "a") else None
                if not d or not d.rsplit(".", 1)[-1].lstrip("_")[:1].isupper():
                    continue  # classes are CamelCase: plain calls are not resolved
                q = self.index.qualify(mod, d)
                r = self.index.resolve(q) if q else None
                if r is not None and r[0] == "class":
                    return f"{r[1]}:{r[2]}"
        return None

    def _factory_class(self, cls_key: str, meth: str) -> str | None:
        """The class a method of `cls_key`'s MRO builds on every return (`return Cls(...)`),
        or None (no return, a return of anything else, returns of two classes)."""
        found = self.index.lookup_method(cls_key, meth)
        g = self.index.function(*found) if found else None
        if g is None:
            return None
        rets = [st[4] for st in g["body"] if st[0] == "ret"]
        got: set[str] = set()
        for e in rets:
            if e is None or e[0] != "c" or e[1][0] not in ("n", "a"):
                return None
            d = dotted(e[1]) or ""
            if not d.rsplit(".", 1)[-1].lstrip("_")[:1].isupper():
                return None
            q = self.index.qualify(found[0], d)
            r = self.index.resolve(q) if q else None
            if r is None or r[0] != "class":
                return None
            got.add(f"{r[1]}:{r[2]}")
        return next(iter(got)) if len(got) == 1 else None

    def choice_value(self, choices: tuple, owner: AV, attr: str) -> AV:
        """`self.<attr>` holding one of the classes an oracle returns (analysis/oracles.py)."""
        return AV(
            V.CLSSET,
            items=tuple(
                AV(
                    V.CLS,
                    cls=k,
                    trace=(TraceStep(path, line, f"the oracle may choose {k.split(':')[-1]}"),),
                )
                for k, path, line in choices
            ),
            src=f"{owner.src}.{attr}",
            value="oracle",
        )

    def eval_attr(self, fr: Frame, base: tuple, attr: str, e) -> tuple:
        out: tuple = ()
        stored = fr.heap.get(self.render(e)) if fr.heap else None  # render only to look up
        self.note_attr_read(fr, base, attr)
        for b in base:
            k = b.kind
            if k == V.REF:
                q = f"{b.value}.{attr}"
                if self.index.split_qualified(q) is not None:
                    out = V.union(out, self._resolve_ref(q))
                else:
                    out = V.union(out, (AV(V.REF, value=q),))
            elif k in (V.MODULE, V.OBJ) and attr in self.building.get(b.oid or -1, {}):
                # the object under construction: what an earlier frame of its constructor
                # chain stored (a base __init__'s `self.quant_config = quant_config`)
                out = V.union(out, self.building[b.oid][attr])
            elif k in (V.MODULE, V.OBJ):
                regs = self.registered_on(fr, b)[0] if k == V.MODULE else ()
                m = self.index.lookup_method(b.cls, attr) if b.cls else None
                mf = self.index.function(*m) if m is not None else None
                if mf is not None and any(d.endswith("property") for d in mf["decos"]):
                    got = self.call_function(fr, m[0], m[1], (), (), _line_of(e, fr), (b,))
                    out = V.union(out, got)
                elif m is not None:
                    out = V.union(out, (AV(V.BOUND, value=f"{m[0]}:{m[1]}", items=((b,),)),))
                elif (
                    b.cls
                    and not b.oid
                    and fr.mode == "post"
                    and attr not in regs
                    and (held_vals := self.read_field(fr, b, attr, _line_of(e, fr)))
                ):
                    out = V.union(out, held_vals)
                elif (
                    b.cls and attr not in regs and (held := self.attr_type(b.cls, attr)) is not None
                ):
                    kind = V.MODULE if self.index.is_module_class(held) else V.OBJ
                    out = V.union(out, (AV(kind, cls=held, src=f"{b.src}.{attr}"),))
                elif b.cls and attr not in regs and (choices := self.choices_on_path(fr, b, attr)):
                    out = V.union(out, (self.choice_value(choices, b, attr),))
                elif (
                    b.cls
                    and attr not in regs
                    and (members := self.oracles.attr_members(b.cls, attr))
                ):
                    # an enum member the oracle chose (`self.fp8_backend`): which ones
                    out = V.union(out, (AV(V.UNKNOWN, value=("members", members)),))
                elif (
                    k == V.MODULE
                    and not b.cls
                    and attr not in regs
                    and (held := self.layer_attr_type(fr.root.cls_key, attr)) is not None
                ):
                    kind = V.MODULE if self.index.is_module_class(held) else V.OBJ
                    out = V.union(out, (AV(kind, cls=held, src=f"{b.src}.{attr}"),))
                elif k == V.MODULE:
                    if attr in regs:
                        out = V.union(out, (AV(V.REG, src=f"{b.src}.{attr}", value=attr),))
                    else:
                        out = V.union(out, (AV(V.MATTR, src=f"{b.src}.{attr}", value=attr),))
                else:
                    out = V.union(out, (V.UNK,))
            elif k == V.CLS:
                m = self.index.lookup_method(b.cls, attr)
                if m is not None:
                    out = V.union(out, (AV(V.BOUND, value=f"{m[0]}:{m[1]}", items=((b,),)),))
                else:
                    out = V.union(out, (V.UNK,))
            elif k == V.SUPER:
                m = self.index.lookup_method(b.cls, attr, after=b.value)
                if m is not None:
                    out = V.union(out, (AV(V.BOUND, value=f"{m[0]}:{m[1]}", items=(b.items[0],)),))
            elif k in V.TENSORISH or k == V.MATTR:
                if attr in ("values", "indices") and k == V.FRESH:
                    out = V.union(out, (b,))  # torch.max(x, dim).values: still new storage
                elif attr in T.VIEW_ATTRS:
                    if k == V.FRESH:
                        out = V.union(out, (b,))
                    elif k == V.MATTR:
                        out = V.union(out, (AV(V.VIEW, src=b.src, value=b.value),))
                    else:
                        out = V.union(out, self.view_of(fr, b, attr, _line_of(e, fr)))
                elif attr in T.SCALAR_ATTRS:
                    out = V.union(out, (V.SCAL,))
                elif k == V.MATTR:
                    # `layer.quant_method.x`: an attribute of an object the layer holds
                    out = V.union(out, (AV(V.MATTR, src=f"{b.src}.{attr}", value=attr),))
                else:
                    out = V.union(out, (AV(V.TMETHOD, value=attr, items=((b,),)),))
        if stored is not None:
            # a store earlier in this function (possibly in another branch): either may hold
            return V.union(stored, out) if out else stored
        return out or (V.UNK,)

    def eval_fstring(self, fr: Frame, e) -> tuple:
        """The strings an f-string can be, from the values its names hold (the prefixes
        callers pass, the items a loop runs over); a few at most, else an unknown scalar."""
        combos = [""]
        for p in e[1]:
            if p[0] == "k":
                combos = [c + (p[2] or "") for c in combos]
                continue
            if p[0] not in ("n", "a"):
                return (V.SCAL,)  # names are built from names; calls are not evaluated here
            combos = _joined(combos, self.eval(fr, p))
            if combos is None:
                return (V.SCAL,)
        return tuple(AV(V.STR, value=c) for c in combos)

    def builtin_attr(self, fr: Frame, name: str, args_e, e) -> tuple:
        if len(args_e) < 2:
            return (V.UNK,)
        recv_e, name_e = class_of(args_e[0]), args_e[1]
        names = self.eval(fr, name_e)
        literal = next((n.value for n in names if n.kind == V.STR and n.value), None)
        recv = self.eval(fr, recv_e)
        built = sorted({n.value for n in names if n.kind == V.STR and n.value})
        helper = name_e[0] == "n" and not fr.func.get("cls") and not fr.func.get("parent")
        # a name this function binds itself (a loop over literal names), not one it is given
        local = name_e[0] == "n" and name_e[1] not in fr.func.get("params", ())
        if (name_e[0] in ("f", "b") or helper or local) and built and len(built) == len(names):
            # an f-string or `+` name resolved from what the callers pass or a loop runs over,
            # or the name a module-level helper is given (reported at its caller,
            # analysis/readers.py relocate): one store (or read) per name it can be, each
            # under its own target
            if name == "setattr" and len(args_e) >= 3:
                vals = self.eval(fr, args_e[2])
                st = ("assign", e[4], 1, e[4], (), None, None)
                for attr in built:
                    target = f"{self.render(recv_e)}.{attr}"
                    self.store_attr(fr, recv_e, attr, vals, st, target, recv=recv)
                return (V.NON,)
            if name in ("getattr",):
                out: tuple = ()
                for attr in built:
                    out = V.union(out, self.eval_attr(fr, recv, attr, ("a", recv_e, attr)))
                return out
        if name == "setattr" and len(args_e) >= 3:
            vals = self.eval(fr, args_e[2])
            attr = literal or "<dynamic>"
            st = ("assign", e[4], 1, e[4], (), None, None)
            if name_e[0] == "k":
                target = f"{self.render(recv_e)}.{attr}"
            else:
                # as written: one finding per store site, whatever name each caller passes
                target = f"{self.render(recv_e)}.<{self.render(name_e)}>"
            self.store_attr(fr, recv_e, attr, vals, st, target, recv=recv)
            return (V.NON,)
        if name == "delattr":
            if literal and any(b.kind == V.MODULE for b in recv):
                self.note_rebind(fr, literal)
                fr.root.deleted.add(literal)
                fr.root.deleted_at.setdefault(literal, self.root_block(fr))
            return (V.NON,)
        if name == "hasattr":
            return (V.SCAL,)
        # getattr
        if literal:
            return self.eval_attr(fr, recv, literal, ("a", recv_e, literal))
        if any(b.kind == V.MODULE for b in recv):
            return (AV(V.REG, src=f"{self.render(recv_e)}.<dynamic>", value="<dynamic>"),)
        return (V.UNK,)

    def view_of(self, fr: Frame, b: AV, op: str, line: int) -> tuple:
        """`b.<op>(...)` for a view op on a registered tensor or a view of one (not a fresh
        tensor: a view of that is still new storage). Tracks the layout (values.layout):
        `reshape`/`flatten` view a contiguous input and copy a non-contiguous one into new
        storage (a FRESH value the judge reports)."""
        strided = V.layout(b) == V.STRIDED
        if op in T.VIEW_OR_COPY and strided:
            note = f"`{op}` copies into new storage (its input is not contiguous)"
            return (
                AV(
                    V.FRESH,
                    conf=b.conf,
                    src=b.src,
                    trace=b.trace + (TraceStep(fr.path, line, note),),
                ),
            )
        if strided and b.value == "slice":
            value = "slice"  # still a sliced view (the `.data =` judge tells those apart)
        elif strided or op in T.STRIDING_VIEWS:
            value = "strided"
        elif b.kind == V.VIEW:
            value = b.value
        else:
            value = None
        shape = S.shape_of(b) if op in S.SAME_SHAPE_VIEWS else ()
        return (AV(V.VIEW, conf=b.conf, trace=b.trace, src=b.src, value=value, shape=shape),)

    # ------------------------------------------------------------------ member tests
    def cond_cannot_hold(self, fr: Frame, terms) -> bool:
        """Whether one conjunct `x in [E.A, ...]` / `x == E.A` (or negated) of an `if` test is
        false for every member x can be: x's values all carry the members an oracle chose
        (`self.fp8_backend` from the select function; analysis/oracles.py)."""
        for name, positive, written in terms:
            vals = fr.env.get(name)
            if not vals or not all(v.kind == V.UNKNOWN and _members(v) for v in vals):
                continue
            can = frozenset(m for v in vals for m in _members(v))
            tested = set()
            for d in written:
                head, _, member = d.rpartition(".")
                q = self.index.qualify(fr.module, head)
                r = self.index.resolve(q) if q else None
                if r is None or r[0] != "class":
                    tested = None
                    break
                tested.add(f"{r[1]}:{r[2]}.{member}")
            if tested is None:
                continue
            if positive and not (can & tested):
                return True
            if not positive and can <= tested:
                return True
        return False

    def tensor_method(self, fr: Frame, recv: tuple, name: str, args, line, kwargs=()) -> tuple:
        out: tuple = ()
        if to_host(name, args, kwargs):
            note = f"`.{name}()` copies to host (CPU) memory"
            return (AV(V.FRESH, value="host", trace=(TraceStep(fr.path, line, note),)),)
        for b in recv:
            if name in T.SCALAR_METHODS:
                out = V.union(out, (V.SCAL,))
            elif name in T.VIEW_METHODS:
                if b.kind == V.FRESH:
                    if b.shape and name not in S.SAME_SHAPE_VIEWS:
                        b = replace(b, shape=())  # (`.view(t.shape)`: shapes.after_method)
                    out = V.union(out, (b,))
                else:
                    out = V.union(out, self.view_of(fr, b, name, line))
            elif name in T.VIEW_TUPLE_METHODS:
                part = (replace(b, shape=()),) if b.kind == V.FRESH else (AV(V.VIEW, src=b.src),)
                out = V.union(out, (AV(V.CONTAINER, items=part, value="list"),))
            elif name == "set_" and args:
                S.forget(fr, (b,))
                # `t.set_(src, ...)`: t now uses src's storage (a zero-element `torch.empty(0)`
                # receiver included): a view of src, or src's new storage
                for a in args[0]:
                    if a.kind in (V.REG, V.VIEW):
                        out = V.union(out, self.view_of(fr, a, name, line))
                    elif a.kind == V.FRESH:
                        out = V.union(out, (replace(a, value=None),))
                    else:
                        note = f"`.{name}()` binds storage of unknown provenance"
                        tr = (TraceStep(fr.path, line, note),)
                        out = V.union(out, (AV(V.FRESH, conf="low", src=b.src, trace=tr),))
            elif name.endswith("_") and not name.startswith("_"):
                if b.shape and not S.keeps_shape_inplace(name):
                    b = S.forget(fr, (b,))[0]
                out = V.union(out, (b,))
            else:
                src = b.src
                conf = b.conf
                tr = b.trace if b.kind == V.FRESH else ()
                # a dtype cast of a registered tensor: a no-op once the tensor already has
                # that dtype (after the first post-load), see Contract.judge_store
                cast = name in T.CAST_METHODS and b.kind in (V.REG, V.VIEW)
                out = V.union(
                    out,
                    (
                        AV(
                            V.FRESH,
                            conf=conf,
                            src=src,
                            # of a tensor of unknown provenance (a helper the index cannot
                            # read returned it): still computed from an input, not allocated
                            value="cast"
                            if cast
                            else (
                                "derived" if b.kind == V.UNKNOWN or b.value == "derived" else None
                            ),
                            trace=tr
                            + (TraceStep(fr.path, line, f"`.{name}()` returns a new tensor"),),
                        ),
                    ),
                )
        return out or (V.UNK,)


def _members(v: AV) -> frozenset:
    """The enum members a value can be (an oracle's choice set), or empty."""
    if isinstance(v.value, tuple) and len(v.value) == 2 and v.value[0] == "members":
        return v.value[1]
    return frozenset()


def _call_stores(an, f: dict) -> dict:
    """attr -> [(statement, names of the bases it stores `attr` on)] for the assignments of a
    call (`x.attr = C(...)`) at the top of `f`'s body, in body order (memoised per function
    entry; the entry is kept with its index, so its id is not reused during the run)."""
    memo = an.__dict__.setdefault("_call_stores_memo", {})
    got = memo.get(id(f))
    if got is not None and got[0] is f:
        return got[1]
    idx: dict[str, list] = {}
    for st in f["body"]:
        if st[0] != "assign" or st[5][0] != "c":
            continue
        per: dict[str, set] = {}
        for t in st[4]:
            if t[0] == "a" and t[1][0] == "n":
                per.setdefault(t[2], set()).add(t[1][1])
        for a, bases in per.items():
            idx.setdefault(a, []).append((st, bases))
    memo[id(f)] = (f, idx)
    return idx


def _concat(left: tuple, right: tuple) -> tuple:
    """`a + b` of names: the strings it can be, as the f-string `f"{a}{b}"`'s, else an unknown
    scalar."""
    combos = _joined([""], left)
    combos = _joined(combos, right) if combos is not None else None
    if combos is None:
        return (V.SCAL,)
    return tuple(AV(V.STR, value=c) for c in combos)


def _joined(combos: list, vals: tuple) -> list | None:
    """Each string of `combos` followed by each string `vals` can be (8 at most), or None when
    `vals` holds anything but known strings or more would result."""
    # only text joins: a bytes constant (`b"\0" + name.encode()`) is an unknown scalar here
    strs = sorted({v.value for v in vals if v.kind == V.STR and isinstance(v.value, str)})
    if not strs or len(strs) != len(vals) or len(strs) * len(combos) > 8:
        return None
    return [c + s for c in combos for s in strs]
