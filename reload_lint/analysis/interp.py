"""The analysis: abstract interpretation of post-load paths over the per-file records.

Each root (process_weights_after_loading and configured names) is interpreted with typed
arguments (the layer is an nn.Module, `self` is the kernel/quant-method object or the module
itself). Calls into project functions are interpreted in the caller's context (memoised per
argument shape): that is the function summary -- what the helper returns (fresh tensor,
Parameter, view of a registered tensor, object with allocations) and what it stores where.
Constructors of objects built on those paths are interpreted with `self` under construction,
so every tensor they keep becomes part of the object. Stores are judged by the reload
contract of the file that makes them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from reload_lint.analysis import values as V
from reload_lint.analysis.values import AV
from reload_lint.findings import FileError, Finding, TraceStep
from reload_lint.index.extract import dotted
from reload_lint.index.project import TORCH_PARAMETER, ProjectIndex
from reload_lint.rules import RULES
from reload_lint.summaries import torchapi as T

MAX_DEPTH = 24
MODULE_PARAM_NAMES = {"layer", "module", "mod", "m", "model", "linear", "moe", "attn", "self_attn"}
MODULE_ANNOT_HINTS = ("Module", "Layer", "FusedMoE", "Linear", "Attention", "MoE", "Embedding")
CONTAINER_MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add"}
REGISTER = {"register_parameter", "register_buffer"}


@dataclass
class RootState:
    root: str
    deleted: set[str] = field(default_factory=set)
    derived_findings: list[tuple[str, str]] = field(default_factory=list)  # (finding key, src)


@dataclass
class Frame:
    module: str
    path: str
    func: dict
    env: dict
    cls_key: str | None
    constructing: int
    mode: str  # "post" | "lazy" | "apply"
    chain: tuple
    root: RootState
    heap: dict = field(default_factory=dict)
    blocks: dict = field(default_factory=dict)  # local name -> block path of its last binding
    narrowed: list = field(default_factory=list)  # (name, value before an isinstance narrowing)
    returns: list = field(default_factory=list)


class Analyzer:
    def __init__(self, index: ProjectIndex, root_names, apply_names, contract_for):
        self.index = index
        self.root_names = set(root_names)
        self.apply_names = set(apply_names)
        self.contract_for = contract_for  # path -> Contract
        self.findings: dict[tuple, Finding] = {}
        self.memo: dict[tuple, tuple] = {}
        self.active: set[tuple] = set()
        self.oids = itertools.count(1)
        self.constructed: dict[str, TraceStep] = {}
        self.allocs: dict[int, list] = {}
        self._registered: set[str] | None = None
        self._attr_types: dict[tuple[str, str], str | None] = {}
        self._root_of: dict[tuple, tuple[str, str]] = {}  # finding key -> (root path, root qn)
        self._read_attr: dict[tuple, str] = {}  # finding key -> attribute the graph reads
        self.cache_modules: list[str] = []  # modules with first-use caches (RL201 candidates)
        self._buffers: set[str] | None = None
        # RL906 rows for roots whose analysis raised (crash guard; see _guarded)
        self.errors: list[FileError] = []

    def is_apply(self, name: str) -> bool:
        """Apply/forward-path methods: the configured names and their `forward*`/`apply*` kin."""
        return name in self.apply_names or name.lstrip("_").startswith(("forward", "apply"))

    # ------------------------------------------------------------------ registries
    def registered_names(self) -> set[str]:
        if self._registered is None:
            regs: set[str] = set()
            bufs: set[str] = set()
            for rec in self.index.loaded_records():
                regs.update(rec.get("registered", ()))
                bufs.update(rec.get("buffers", ()))
            self._registered, self._buffers = regs, bufs
        return self._registered

    def buffer_names(self) -> set[str]:
        self.registered_names()
        return self._buffers or set()

    # ------------------------------------------------------------------ entry points
    def run(self, modules: list[str]) -> list[Finding]:
        roots = []
        for mod in modules:
            rec = self.index.record(mod)
            if rec is None:
                continue
            for qn, f in sorted(rec["functions"].items()):
                if f["name"] in self.root_names and not f["parent"]:
                    roots.append((mod, qn, f))
        # make the registries see every root file before judging
        self._registered = None
        for mod, qn, f in roots:
            self._guarded(mod, qn, f, self.run_root, mod, qn, f)
        self.run_lazy()
        self.run_apply_caches([*modules, *self.cache_modules])
        self.add_graph_visibility()
        return list(self.findings.values())

    def _self_value(self, mod: str, f: dict, construct: bool = False) -> tuple:
        if not f["cls"]:
            return ()
        key = f"{mod}:{f['cls']}"
        if "classmethod" in f["decos"]:
            return (AV(V.CLS, cls=key),)
        if "staticmethod" in f["decos"]:
            return ()
        if self.index.is_module_class(key):
            return (AV(V.MODULE, cls=key, src="self"),)
        return (AV(V.OBJ, cls=key, src="self"),)

    def _param_value(self, name: str, annotations: dict) -> tuple:
        ann = annotations.get(name, "")
        if ann.startswith("type:"):
            return (V.UNK,)
        if name in MODULE_PARAM_NAMES or (ann and any(h in ann for h in MODULE_ANNOT_HINTS)):
            return (AV(V.MODULE, src=name),)
        return (V.UNK,)

    def _entry_env(self, f: dict, selfv: tuple) -> dict:
        """Environment of an entry point: `self` as given, layer-like parameters typed."""
        params = list(f["params"])
        env: dict = {}
        if selfv and params:
            env[params.pop(0)] = selfv
        ann = dict(f["annotations"])
        for p in params:
            env[p] = self._param_value(p, ann)
        return env

    def run_root(self, mod: str, qn: str, f: dict) -> None:
        path = self.index.path_of(mod)
        state = RootState(root=qn)
        env = self._entry_env(f, self._self_value(mod, f))
        frame = Frame(
            module=mod,
            path=path,
            func=f,
            env=env,
            cls_key=f"{mod}:{f['cls']}" if f["cls"] else None,
            constructing=0,
            mode="post",
            chain=(TraceStep(path, f["line"], f"post-load root {qn}"),),
            root=state,
        )
        self.exec_body(frame, f["body"])
        for fkey, src in state.derived_findings:
            if src in state.deleted and fkey in self.findings:
                fd = self.findings[fkey]
                if fd.rule in ("RL101", "RL102"):
                    fd.rule = "RL202"
                    fd.severity = RULES["RL202"].severity
                    fd.message = (
                        f"`{fd.target}` keeps an unregistered copy derived from `{src}`, and "
                        f"post-load deletes the registered `{src}`: a reload has nowhere to "
                        "write the new value and the copy keeps the old one"
                    )

    # ------------------------------------------------------------------ statements
    def exec_body(self, fr: Frame, body) -> None:
        for st in body:
            try:
                self.exec_stmt(fr, st)
            except RecursionError:
                raise
            except Exception as exc:  # noqa: BLE001 - one odd statement must not end the analysis
                self._incomplete(
                    fr,
                    f"statement at line {st[1]} of {fr.func['qn']} skipped: {type(exc).__name__}",
                    line=st[1],
                )

    def exec_stmt(self, fr: Frame, st) -> None:
        kind = st[0]
        if kind == "assign":
            vals = self.eval(fr, st[5])
            where = st[7] if len(st) > 7 else ()
            for tgt in st[4]:
                if tgt[0] == "n":
                    prev = fr.blocks.get(tgt[1])
                    fr.blocks[tgt[1]] = where
                    if prev is not None and tgt[1] in fr.env and prev[: len(where)] != where:
                        # the earlier binding was made in a block this one does not enclose
                        # (a sibling branch, or an outer block before this conditional): it
                        # may survive, so keep both
                        fr.env[tgt[1]] = V.union(vals, fr.env[tgt[1]])
                        continue
                self.bind(fr, tgt, vals, st)
        elif kind == "expr":
            self.eval(fr, st[4], stmt=st)
        elif kind == "ret":
            fr.returns.append(self.eval(fr, st[4]) if st[4] is not None else (V.NON,))
        elif kind == "aug":
            tgt = st[4]
            if tgt[0] == "n":
                cur = fr.env.get(tgt[1], (V.UNK,))
                rhs = self.eval(fr, st[6])
                if V.tensorish(cur) or V.tensorish(rhs):
                    # `x += y` on a tensor is in place; on a local name it keeps x's storage
                    fr.env[tgt[1]] = cur if V.tensorish(cur) else self._fresh(fr, st, "arithmetic")
        elif kind == "def":
            f = self.index.function(fr.module, st[5])
            if f is not None:
                fr.env[st[4]] = (self._closure(fr, f, st),)
        elif kind == "del":
            self._delete(fr, st[4])
        elif kind == "narrow":
            # `if isinstance(x, torch.nn.Parameter):` -- inside, x is that Parameter object
            name, typ = st[4], st[5]
            cur = fr.env.get(name)
            if cur is not None and typ.rsplit(".", 1)[-1] == "Parameter":
                fr.narrowed.append((name, cur))
                src = next((v.src for v in cur if v.src), name)
                fr.env[name] = (AV(V.REG, src=src, value="narrowed"),)
        elif kind == "unnarrow":
            for i in range(len(fr.narrowed) - 1, -1, -1):
                if fr.narrowed[i][0] == st[4]:
                    _, before = fr.narrowed.pop(i)
                    fr.env[st[4]] = V.union(before, fr.env.get(st[4], ()))
                    break
        elif kind == "for":
            it = self.eval(fr, st[5])
            elems: tuple = ()
            for v in it:
                if v.kind in (V.CONTAINER,):
                    elems = V.union(elems, v.items)
                elif v.kind == V.TUPLE:
                    for group in v.items:
                        elems = V.union(elems, group)
                elif v.kind in V.TENSORISH:
                    elems = V.union(elems, (v,))
            self.bind(fr, st[4], elems or (V.UNK,), st)

    def _delete(self, fr: Frame, tgt) -> None:
        if tgt[0] == "a":
            base = self.eval(fr, tgt[1])
            if any(b.kind == V.MODULE for b in base):
                fr.root.deleted.add(tgt[2])
            fr.heap.pop(self.render(tgt), None)
        elif tgt[0] == "t":
            for t in tgt[2]:
                self._delete(fr, t)

    def bind(self, fr: Frame, tgt, vals: tuple, st) -> None:
        k = tgt[0]
        if k == "n":
            fr.env[tgt[1]] = vals
        elif k == "a":
            self.store_attr(fr, tgt[1], tgt[2], vals, st, self.render(tgt))
        elif k == "s":
            self.store_item(fr, tgt, vals, st)
        elif k == "t":
            items = tgt[2]
            for i, sub in enumerate(items):
                if sub[0] == "star":
                    self.bind(fr, sub[1], (V.UNK,), st)
                    continue
                part: tuple = ()
                for v in vals:
                    if v.kind == V.TUPLE and i < len(v.items):
                        part = V.union(part, v.items[i])
                    elif v.kind == V.CONTAINER:
                        part = V.union(part, v.items)
                    elif v.kind in (V.FRESH, V.VIEW, V.REG):
                        part = V.union(part, (v,))
                self.bind(fr, sub, part or (V.UNK,), st)

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
        return "<expr>"

    def _fresh(self, fr: Frame, st_or_line, note: str, conf: str = "high", src: str = "") -> tuple:
        line = st_or_line if isinstance(st_or_line, int) else st_or_line[1]
        return (AV(V.FRESH, conf=conf, trace=(TraceStep(fr.path, line, note),), src=src),)

    def eval(self, fr: Frame, e, stmt=None) -> tuple:  # noqa: C901
        k = e[0]
        if k == "n":
            return self.eval_name(fr, e[1])
        if k == "a":
            return self.eval_attr(fr, self.eval(fr, e[1]), e[2], e)
        if k == "c":
            return self.eval_call(fr, e)
        if k == "k":
            if e[1] == "str":
                return (AV(V.STR, value=e[2]),) if e[2] is not None else (V.SCAL,)
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
                return self._fresh(
                    fr, _line_of(e, fr), f"`{e[1]}` allocates a new tensor", conf, src
                )
            return (V.SCAL,)
        if k == "u":
            inner = self.eval(fr, e[2])
            if V.tensorish(inner):
                return self._fresh(
                    fr, _line_of(e, fr), "unary op allocates", src=_derived_src(inner)
                )
            return (V.SCAL,)
        if k == "s":
            base = self.eval(fr, e[1])
            out: tuple = ()
            for b in base:
                if b.kind in (V.REG, V.VIEW, V.PARAM):
                    if e[2] == ("slice",):
                        out = V.union(
                            out,
                            (AV(V.VIEW, conf=b.conf, trace=b.trace, src=b.src, value="slice"),),
                        )
                    else:
                        out = V.union(
                            out,
                            self._fresh(fr, _line_of(e, fr), "advanced indexing copies", src=b.src),
                        )
                elif b.kind == V.FRESH:
                    if e[2] == ("slice",):
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
            groups = tuple(self.eval(fr, it) for it in e[2])
            if e[1] == "tuple":
                return (AV(V.TUPLE, items=groups),)
            flat: tuple = ()
            for g in groups:
                flat = V.union(flat, g)
            return (AV(V.CONTAINER, items=flat, value=e[1]),)
        if k == "d":
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
        rec = self.index.record(fr.module)
        if rec is not None:
            if name in rec["functions"]:
                return (AV(V.FUNC, value=f"{fr.module}:{name}"),)
            if name in rec["classes"]:
                return (AV(V.CLS, cls=f"{fr.module}:{name}"),)
            if name in rec["imports"]:
                return (AV(V.REF, value=rec["imports"][name]),)
            g = rec["globals"].get(name)
            if g is not None and g[0] in ("n", "a"):
                d = dotted(g)
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
        if key in self._attr_types:
            return self._attr_types[key]
        self._attr_types[key] = None
        found = None
        for k in self.index.mro(cls_key):
            crec = self.index.class_record(k)
            if crec is None or found:
                continue
            mod = k.partition(":")[0]
            for _name, mqn in sorted(crec["methods"].items()):
                f = self.index.function(mod, mqn)
                if f is None or not f["params"] or found:
                    continue
                me = f["params"][0]
                for st in f["body"]:
                    if st[0] != "assign" or st[5][0] != "c":
                        continue
                    if not any(t[0] == "a" and t[1] == ("n", me) and t[2] == attr for t in st[4]):
                        continue
                    d = dotted(st[5][1]) if st[5][1][0] in ("n", "a") else None
                    if not d or not d.rsplit(".", 1)[-1][:1].isupper():
                        continue  # classes are CamelCase: plain calls are not resolved
                    q = self.index.qualify(mod, d)
                    r = self.index.resolve(q) if q else None
                    if r is not None and r[0] == "class":
                        found = f"{r[1]}:{r[2]}"
                        break
        self._attr_types[key] = found
        return found

    def eval_attr(self, fr: Frame, base: tuple, attr: str, e) -> tuple:  # noqa: C901
        out: tuple = ()
        text = self.render(e)
        stored = fr.heap.get(text)
        for b in base:
            k = b.kind
            if k == V.REF:
                q = f"{b.value}.{attr}"
                if self.index.split_qualified(q) is not None:
                    out = V.union(out, self._resolve_ref(q))
                else:
                    out = V.union(out, (AV(V.REF, value=q),))
            elif k in (V.MODULE, V.OBJ):
                m = self.index.lookup_method(b.cls, attr) if b.cls else None
                mf = self.index.function(*m) if m is not None else None
                if mf is not None and any(d.endswith("property") for d in mf["decos"]):
                    got = self.call_function(fr, m[0], m[1], (), (), _line_of(e, fr), (b,))
                    out = V.union(out, got)
                elif m is not None:
                    out = V.union(out, (AV(V.BOUND, value=f"{m[0]}:{m[1]}", items=((b,),)),))
                elif (
                    b.cls
                    and attr not in self.registered_names()
                    and (held := self.attr_type(b.cls, attr)) is not None
                ):
                    kind = V.MODULE if self.index.is_module_class(held) else V.OBJ
                    out = V.union(out, (AV(kind, cls=held, src=f"{b.src}.{attr}"),))
                elif k == V.MODULE:
                    if attr in self.registered_names() or attr in self.buffer_names():
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
                        out = V.union(out, (AV(V.VIEW, conf=b.conf, trace=b.trace, src=b.src),))
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

    # ------------------------------------------------------------------ calls
    def eval_call(self, fr: Frame, e) -> tuple:  # noqa: C901
        func, args_e, kwargs_e, line = e[1], e[2], e[3], e[4]
        # syntactic specials first
        if func == ("n", "super"):
            selfv = fr.env.get(fr.func["params"][0]) if fr.func["params"] else None
            if fr.cls_key and selfv:
                return (
                    AV(
                        V.SUPER,
                        cls=_super_start(selfv, fr.cls_key),
                        value=fr.cls_key,
                        items=(selfv,),
                    ),
                )
            return (V.UNK,)
        if func[0] == "n" and func[1] in ("setattr", "getattr", "delattr", "hasattr"):
            return self.builtin_attr(fr, func[1], args_e, e)
        if func[0] == "a":
            recv = self.eval(fr, func[1])
            meth = func[2]
            special = self.method_special(fr, recv, meth, func, args_e, kwargs_e, e)
            if special is not None:
                return special
            if meth in T.TENSOR_ONLY_METHODS and all(r.kind in (V.UNKNOWN, V.MATTR) for r in recv):
                for a in args_e:
                    self.eval(fr, a)
                held = [r for r in recv if r.kind == V.MATTR]
                if held and meth in T.VIEW_METHODS:
                    return tuple(AV(V.VIEW, conf="medium", src=r.src) for r in held)
                return self._fresh(
                    fr,
                    line,
                    f"`.{meth}()` on `{self.render(func[1])}` (assumed a tensor)",
                    "medium" if held else "low",
                    src=held[0].src if held else "",
                )
            callee = self.eval_attr(fr, recv, meth, func)
        else:
            callee = self.eval(fr, func)
        args = tuple(self.eval(fr, a) for a in args_e)
        kwargs = tuple((k, self.eval(fr, v)) for k, v in kwargs_e)
        out: tuple = ()
        for c in callee:
            out = V.union(out, self.call_value(fr, c, args, kwargs, line, e))
        return out or (V.UNK,)

    def builtin_attr(self, fr: Frame, name: str, args_e, e) -> tuple:
        if len(args_e) < 2:
            return (V.UNK,)
        recv_e, name_e = args_e[0], args_e[1]
        names = self.eval(fr, name_e)
        literal = next((n.value for n in names if n.kind == V.STR and n.value), None)
        recv = self.eval(fr, recv_e)
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
                fr.root.deleted.add(literal)
            return (V.NON,)
        if name == "hasattr":
            return (V.SCAL,)
        # getattr
        if literal:
            return self.eval_attr(fr, recv, literal, ("a", recv_e, literal))
        if any(b.kind == V.MODULE for b in recv):
            return (AV(V.REG, src=f"{self.render(recv_e)}.<dynamic>", value="<dynamic>"),)
        return (V.UNK,)

    def method_special(self, fr: Frame, recv, meth, func, args_e, kwargs_e, e):  # noqa: C901
        line = e[4]
        if meth in REGISTER and any(b.kind == V.MODULE for b in recv) and len(args_e) >= 2:
            names = self.eval(fr, args_e[0])
            name = next((n.value for n in names if n.kind == V.STR and n.value), "<dynamic>")
            vals = self.eval(fr, args_e[1])
            target = f"{self.render(func[1])}.{name}"
            fr.heap[target] = tuple(
                AV(V.REG, src=target, value=name) if v.kind in V.TENSORISH else v for v in vals
            )
            contract = self.contract_for(fr.path)
            for v in vals:
                rule = contract.judge_register(v)
                if rule:
                    self.report(fr, rule, ("expr", line, 1, line), target, v, meth)
                    break
            return (V.NON,)
        if meth in CONTAINER_MUTATORS:
            vals: tuple = ()
            for a in args_e:
                vals = V.union(vals, self.eval(fr, a))
            for _, v in kwargs_e:
                vals = V.union(vals, self.eval(fr, v))
            if func[1][0] == "n" and func[1][1] in fr.env:
                cur = fr.env[func[1][1]]
                fr.env[func[1][1]] = tuple(
                    AV(V.CONTAINER, items=V.union(c.items, vals), value=c.value)
                    if c.kind == V.CONTAINER
                    else c
                    for c in cur
                )
                return (V.NON,)
            if func[1][0] == "a":
                owner = self.eval(fr, func[1][1])
                if any(o.kind in (V.MODULE, V.OBJ) for o in owner):
                    cont = (AV(V.CONTAINER, items=vals, value="list"),)
                    self.store_attr(
                        fr,
                        func[1][1],
                        func[1][2],
                        cont,
                        ("expr", line, 1, line),
                        f"{self.render(func[1])}",
                        recv=owner,
                        mutate=True,
                    )
                    return (V.NON,)
            return None
        if (
            meth.endswith("_")
            and not meth.startswith("_")
            and any(b.kind in V.TENSORISH or b.kind == V.MATTR for b in recv)
        ):
            for a in args_e:
                self.eval(fr, a)
            return recv  # in-place: same storage
        return None

    def call_value(self, fr: Frame, c: AV, args, kwargs, line, e) -> tuple:  # noqa: C901
        k = c.kind
        if k == V.REF:
            return self.call_external(fr, c.value, args, kwargs, line, e)
        if k == V.FUNC:
            mod, _, qn = c.value.partition(":")
            return self.call_function(fr, mod, qn, args, kwargs, line, None)
        if k == V.BOUND:
            mod, _, qn = c.value.partition(":")
            selfv = c.items[0]
            building = fr.constructing if any(v.oid == fr.constructing for v in selfv) else 0
            return self.call_function(fr, mod, qn, args, kwargs, line, selfv, constructing=building)
        if k == V.CLS:
            return self.construct(fr, c.cls, args, kwargs, line)
        if k == V.CLSSET:
            return self.construct_any(fr, c.cls, args, kwargs, line)
        if k == V.TMETHOD:
            return self.tensor_method(fr, c.items[0], c.value, args, line)
        if k == V.CALLABLE:
            return self.call_closure(fr, c, args, kwargs, line)
        if k == V.MATTR:
            if any(V.tensorish(a) for a in args):
                return self._fresh(fr, line, f"unknown callee `{c.src}` assumed to allocate", "low")
            return (V.UNK,)
        return (V.UNK,)

    def call_external(self, fr: Frame, q: str, args, kwargs, line, e) -> tuple:  # noqa: C901
        if q in T.PARTIAL:
            captures = tuple(("arg", a) for a in args[1:]) + tuple((kk, v) for kk, v in kwargs)
            fn = args[0] if args else ()
            return (
                AV(
                    V.CALLABLE,
                    items=captures,
                    value="partial",
                    fn=("partial",) + tuple(v.key() for v in fn),
                    trace=(TraceStep(fr.path, line, "functools.partial binds its arguments"),),
                ),
            )
        resolved = self.index.resolve(q) if self.index.split_qualified(q) else None
        if resolved is not None:
            kind, mod, qn = resolved
            if kind == "func":
                return self.call_function(fr, mod, qn, args, kwargs, line, None)
            if kind == "class":
                return self.construct(fr, f"{mod}:{qn}", args, kwargs, line)
        if q in TORCH_PARAMETER or q.endswith("nn.Parameter") or q == "Parameter":
            inner = args[0] if args else ()
            src = next((v.src for v in inner if v.kind in (V.REG, V.VIEW)), "")
            fresh = [
                v for v in inner if v.kind == V.FRESH or (v.kind == V.PARAM and v.value == "fresh")
            ]
            casts = [v for v in inner if v.kind == V.FRESH and v.value == "cast"]
            conf = min((v.conf for v in inner), key=lambda c: V.CONF_ORDER[c], default="high")
            tr = tuple(s for v in inner for s in v.trace)[:6]
            if fresh and all(v.value == "empty" for v in fresh) and not src:
                value = "empty"
            elif fresh and len(casts) == len(fresh):
                value = "cast"
                src = casts[0].src
            elif fresh:
                value = "fresh"
            elif src:
                value = "alias"
            else:
                value = "unknown"
                conf = "low"
            return (
                AV(
                    V.PARAM,
                    conf=conf,
                    src=src,
                    value=value,
                    trace=tr + (TraceStep(fr.path, line, "wrapped in nn.Parameter"),),
                ),
            )
        contract = self.contract_for(fr.path)
        if contract.preserves(q):
            return (V.NON,)
        if T.is_custom_op(q):
            return self._fresh(fr, line, f"custom op `{q}` returns a new tensor")
        if T.is_torch_tensor_func(q):
            first = args[0] if args else ()
            if q in T.TORCH_VIEW_FUNCS and any(v.kind in (V.REG, V.VIEW) for v in first):
                return tuple(AV(V.VIEW, src=v.src) for v in first if v.kind in (V.REG, V.VIEW))
            src = ""
            for a in args:
                src = src or _derived_src(a)
            if q.rsplit(".", 1)[-1] in ("empty", "zeros", "ones", "full") and _has_zero_dim(args):
                return (
                    AV(
                        V.FRESH,
                        value="empty",
                        trace=(TraceStep(fr.path, line, f"`{q}` allocates a zero-element tensor"),),
                    ),
                )
            return self._fresh(fr, line, f"`{q}` allocates a new tensor", src=src)
        last = q.rsplit(".", 1)[-1]
        if q in T.BUILTIN_SCALAR or last in T.BUILTIN_SCALAR:
            return (V.SCAL,)
        if any(V.tensorish(a) for a in args) or any(V.tensorish(v) for _, v in kwargs):
            src = ""
            for a in args:
                src = src or _derived_src(a)
            return self._fresh(
                fr, line, f"unknown callee `{q}` assumed to return a new tensor", "low", src
            )
        return (V.UNK,)

    def tensor_method(self, fr: Frame, recv: tuple, name: str, args, line) -> tuple:
        out: tuple = ()
        for b in recv:
            if name in T.SCALAR_METHODS:
                out = V.union(out, (V.SCAL,))
            elif name in T.VIEW_METHODS:
                if b.kind == V.FRESH:
                    out = V.union(out, (b,))
                else:
                    out = V.union(out, (AV(V.VIEW, conf=b.conf, trace=b.trace, src=b.src),))
            elif name in T.VIEW_TUPLE_METHODS:
                part = (b,) if b.kind == V.FRESH else (AV(V.VIEW, src=b.src),)
                out = V.union(out, (AV(V.CONTAINER, items=part, value="list"),))
            elif name.endswith("_") and not name.startswith("_"):
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
                            value="cast" if cast else None,
                            trace=tr
                            + (TraceStep(fr.path, line, f"`.{name}()` returns a new tensor"),),
                        ),
                    ),
                )
        return out or (V.UNK,)

    def _closure(self, fr: Frame, f: dict, st) -> AV:
        captures = tuple((n, fr.env[n]) for n in f["free"] if n in fr.env)
        defaults = tuple((n, self.eval(fr, d)) for n, d in f["defaults"])
        return AV(
            V.CALLABLE,
            items=captures + tuple(("default:" + n, v) for n, v in defaults),
            fn=("def", fr.module, f["qn"]),
            value="closure",
            trace=(TraceStep(fr.path, st[1], f"nested function `{f['name']}`"),),
        )

    def call_closure(self, fr: Frame, c: AV, args, kwargs, line) -> tuple:
        if not c.fn:
            return (V.UNK,)
        if c.fn[0] == "def":
            _, mod, qn = c.fn
            f = self.index.function(mod, qn)
            if f is None:
                return (V.UNK,)
            env = {n: v for n, v in c.items if not n.startswith("default:")}
            return self.call_function(fr, mod, qn, args, kwargs, line, None, closure_env=env)
        if c.fn[0] == "lambda":
            _, mod, params, body = c.fn
            env = dict(c.items)
            for p, a in zip(params, args, strict=False):
                env[p] = a
            sub = Frame(
                module=mod,
                path=fr.path,
                func={**fr.func, "parent": fr.func["qn"]},
                env={**fr.env, **env},
                cls_key=fr.cls_key,
                constructing=fr.constructing,
                mode=fr.mode,
                chain=fr.chain,
                root=fr.root,
            )
            return self.eval(sub, body)
        return (V.UNK,)

    def call_function(  # noqa: C901
        self,
        fr: Frame,
        mod: str,
        qn: str,
        args,
        kwargs,
        line,
        selfv,
        closure_env=None,
        constructing: int = 0,
    ) -> tuple:
        f = self.index.function(mod, qn)
        if f is None:
            return (V.UNK,)
        contract = self.contract_for(self.index.path_of(mod))
        if contract.preserves(f"{mod}.{qn}"):
            return (V.NON,)
        if len(fr.chain) > MAX_DEPTH:
            self._incomplete(
                fr,
                f"call depth limit ({MAX_DEPTH}) reached at {qn}; its body was not analysed "
                "(its result is assumed to be a new tensor when it takes tensors)",
            )
            return (AV(V.FRESH, conf="low") if any(V.tensorish(a) for a in args) else V.UNK,)
        params = list(f["params"])
        env: dict = dict(closure_env or {})
        # an unbound call `Class.method(obj, ...)` has no selfv: obj binds positionally
        if selfv is not None and params and "staticmethod" not in f["decos"]:
            env[params.pop(0)] = selfv
        for p, a in zip(params, args, strict=False):
            env[p] = a
        kw = dict(kwargs)
        for p in params:
            if p in kw:
                env[p] = kw[p]
        for p, d in f["defaults"]:
            if p not in env:
                env[p] = self.eval(fr, d) if d[0] in ("k",) else (V.UNK,)
        ann = dict(f["annotations"])
        for p in params:
            if p not in env:
                env[p] = self._param_value(p, ann) if p in ann else (V.UNK,)
            a = ann.get(p, "")
            if a.startswith("type:") and all(v.kind in (V.UNKNOWN, V.NONE) for v in env[p]):
                q = self.index.qualify(mod, a[5:])
                r = self.index.resolve(q) if q else None
                if r and r[0] == "class":
                    env[p] = (AV(V.CLSSET, cls=f"{r[1]}:{r[2]}"),)
        key = (
            mod,
            qn,
            fr.mode,
            constructing,
            tuple(sorted((n, V.vals_key(v)) for n, v in env.items())),
        )
        if key in self.memo:
            return self.memo[key]
        if key in self.active:
            return (V.UNK,)
        self.active.add(key)
        path = self.index.path_of(mod)
        sub = Frame(
            module=mod,
            path=path,
            func=f,
            env=env,
            cls_key=f"{mod}:{f['cls']}" if f["cls"] else None,
            constructing=constructing,
            mode=fr.mode,
            chain=fr.chain + (TraceStep(fr.path, line, f"calls {qn}"),),
            root=fr.root,
        )
        try:
            self.exec_body(sub, f["body"])
        finally:
            self.active.discard(key)
        ret: tuple = ()
        for r in sub.returns:
            ret = V.union(ret, tuple(_with_step(v, path, f) for v in r))
        ret = ret or (V.NON,)
        self.memo[key] = ret
        return ret

    def construct(self, fr: Frame, cls_key: str, args, kwargs, line) -> tuple:
        if self.index.is_parameter_class(cls_key):
            inner = args[0] if args else ()
            src = next((v.src for v in inner if v.kind in (V.REG, V.VIEW)), "")
            return (
                AV(
                    V.PARAM,
                    src=src,
                    trace=(
                        TraceStep(
                            fr.path, line, f"{cls_key.split(':')[1]}(...) is an nn.Parameter"
                        ),
                    ),
                ),
            )
        is_module = self.index.is_module_class(cls_key)
        memo_key = (
            "ctor",
            cls_key,
            fr.mode,
            tuple(V.vals_key(a) for a in args),
            tuple((k, V.vals_key(v)) for k, v in kwargs),
        )
        if memo_key in self.memo:
            return self.memo[memo_key]
        oid = next(self.oids)
        self.allocs[oid] = []
        cname = cls_key.split(":", 1)[1]
        self.constructed.setdefault(cls_key, TraceStep(fr.path, line, f"{cname} built here"))
        obj = AV(V.MODULE if is_module else V.OBJ, cls=cls_key, oid=oid, src="self")
        init = self.index.lookup_method(cls_key, "__init__")
        if init is not None and memo_key not in self.active:
            self.active.add(memo_key)
            try:
                self.call_function(
                    fr, init[0], init[1], args, kwargs, line, (obj,), constructing=oid
                )
            finally:
                self.active.discard(memo_key)
        allocs = tuple(self.allocs.pop(oid, []))
        trace = tuple(s for a in allocs for s in a.trace)
        result = (
            AV(
                V.MODULE if is_module else V.OBJ,
                cls=cls_key,
                items=allocs,
                trace=trace[:60],
                src=f"{cname}(...)",
                value="rebuilt",
                # the object is as certain as its best-established allocation
                conf=max((a.conf for a in allocs), key=lambda c: V.CONF_ORDER[c], default="high"),
            ),
        )
        self.memo[memo_key] = result
        return result

    def construct_any(self, fr: Frame, base_key: str, args, kwargs, line) -> tuple:
        """`experts_cls(...)` with `experts_cls: type[Base]`: any known subclass may be built."""
        memo_key = ("ctor-any", base_key, fr.mode)
        if memo_key not in self.memo:
            self.memo[memo_key] = ((), [])
            allocs: tuple = ()
            trace: list = []
            for sub in [base_key, *self.index.subclasses(base_key)][:200]:
                for v in self.construct(fr, sub, args, kwargs, line):
                    if v.items:
                        allocs = allocs + tuple(v.items)
                        trace.extend(v.trace)
            self.memo[memo_key] = (allocs, trace)
        allocs, trace = self.memo[memo_key]
        base = base_key.split(":", 1)[1]
        crec = self.index.class_record(base_key) or {"line": 0}
        note = TraceStep(
            self.index.path_of(base_key.split(":", 1)[0]),
            crec["line"],
            f"a `type[{base}]` parameter may build {base} or any subclass",
        )
        return (
            AV(
                V.OBJ,
                cls=base_key,
                items=allocs[:300],
                trace=(note,) + tuple(trace[:300]),
                src=f"{base}(...)",
                value="rebuilt",
                conf="medium",
            ),
        )

    # ------------------------------------------------------------------ stores
    def store_item(self, fr: Frame, tgt, vals, st) -> None:
        base_e = tgt[1]
        if base_e[0] == "n" and base_e[1] in fr.env:
            cur = fr.env[base_e[1]]
            fr.env[base_e[1]] = tuple(
                AV(V.CONTAINER, items=V.union(c.items, vals), value=c.value)
                if c.kind == V.CONTAINER
                else c
                for c in cur
            )
            return
        if base_e[0] == "a":
            held = self.eval(fr, base_e)
            if any(h.kind in V.TENSORISH for h in held):
                return  # `t[i] = v` writes into t's storage: in place
            owner = self.eval(fr, base_e[1])
            if any(o.kind in (V.MODULE, V.OBJ, V.MATTR) for o in owner):
                cont = (AV(V.CONTAINER, items=vals, value="dict"),)
                self.store_attr(
                    fr, base_e[1], base_e[2], cont, st, self.render(tgt), recv=owner, mutate=True
                )

    def store_attr(  # noqa: C901
        self, fr: Frame, base_e, attr: str, vals: tuple, st, target: str, recv=None, mutate=False
    ) -> None:
        if recv is None:
            recv = self.eval(fr, base_e)
        if not mutate:
            fr.heap[target] = vals
        contract = self.contract_for(fr.path)
        for r in recv:
            if r.kind in (V.OBJ, V.MODULE) and fr.constructing and r.oid == fr.constructing:
                for v in vals:
                    kept = _kept(v)
                    if kept is not None:
                        cname = r.cls.split(":", 1)[1]
                        note = f"{cname} keeps {_describe(kept)} on self.{attr}"
                        tr = kept.trace
                        if tr and tr[-1].line == st[1] and tr[-1].path == fr.path:
                            tr = tr[:-1] + (TraceStep(fr.path, st[1], f"{tr[-1].note}; {note}"),)
                        else:
                            tr = tr + (TraceStep(fr.path, st[1], note),)
                        self.allocs[fr.constructing].append(
                            AV(kept.kind, conf=kept.conf, trace=tr, src=kept.src)
                        )
                continue
            if fr.mode == "post":
                owner = {V.MODULE: "module", V.OBJ: "object", V.MATTR: "held"}.get(r.kind)
                if attr == "data" and r.kind in (V.REG, V.VIEW, V.MATTR, V.PARAM, V.FRESH):
                    owner = "data" if r.kind != V.FRESH else None
                if owner is None:
                    continue
                for v in vals:
                    verdict = contract.judge_store(owner, attr, v, self.buffer_names(), st, fr)
                    if verdict:
                        rule, why = verdict
                        conf = v.conf if owner != "held" else V.lower(v.conf)
                        key = self.report(fr, rule, st, target, v, why, conf=conf)
                        if key and owner == "data" and r.src:
                            # `param.data = ...` with `param = getattr(layer, name)`: the
                            # graph reads the attribute param came from, not `param`
                            self._read_attr.setdefault(key, r.src.rsplit(".", 1)[-1])
                        src_attr = v.src.rsplit(".", 1)[-1] if v.src else ""
                        if key and v.kind == V.FRESH and src_attr:
                            fr.root.derived_findings.append((key, src_attr))
                        break
            elif fr.mode in ("lazy", "apply") and st[0] == "assign" and st[6]:
                if r.kind not in (V.OBJ, V.MODULE):
                    continue
                for v in vals:
                    if fr.mode == "lazy" and _kept(v) is not None and v.kind != V.REG:
                        self.report(fr, "RL108", st, target, v, "allocated lazily on first forward")
                        break
                    if fr.mode == "apply" and v.kind == V.FRESH and v.src:
                        self.report(fr, "RL201", st, target, v, f"derived from `{v.src}`")
                        break

    # ------------------------------------------------------------------ findings
    def report(self, fr: Frame, rule: str, st, target: str, v: AV, why: str, conf=None) -> tuple:
        key = (fr.path, st[1], rule, target)
        if key in self.findings:
            return key
        root = fr.chain[0]
        self._root_of[key] = (root.path, root.note.rsplit(" ", 1)[-1])
        contract = self.contract_for(fr.path)
        trace = list(v.trace)
        if v.kind == V.CALLABLE:
            for _name, cap in v.items:
                for c in cap:
                    trace.extend(c.trace)
        elif v.kind == V.CONTAINER:
            for c in v.items:
                trace.extend(c.trace)
        trace.append(TraceStep(fr.path, st[1], f"stored on `{target}` ({why})"))
        for step in reversed(fr.chain[1:]):
            trace.append(
                TraceStep(step.path, step.line, f"reached from {step.note.replace('calls ', '')}")
            )
        trace.append(fr.chain[0])
        dedup: list[TraceStep] = []
        seen_lines: set[tuple[str, int]] = set()
        for s in trace:
            if (s.path, s.line) not in seen_lines:
                seen_lines.add((s.path, s.line))
                dedup.append(s)
        rule_meta = RULES[rule]
        self.findings[key] = Finding(
            rule=rule,
            path=fr.path,
            line=st[1],
            column=st[2] if len(st) > 2 else 1,
            end_line=st[3] if len(st) > 3 else st[1],
            symbol=fr.func["qn"],
            target=target,
            message=contract.message(rule, target, v, why),
            severity=rule_meta.severity,
            confidence=conf or v.conf,
            trace=dedup[:160],
            contract=contract.name,
        )
        return key

    # ------------------------------------------------------------------ other roots
    def run_lazy(self) -> None:
        done = set()
        for cls_key, where in sorted(self.constructed.items()):
            for k in self.index.mro(cls_key):
                crec = self.index.class_record(k)
                if crec is None:
                    continue
                mod = k.partition(":")[0]
                for name, qn in sorted(crec["methods"].items()):
                    if name == "__init__" or (mod, qn) in done:
                        continue
                    f = self.index.function(mod, qn)
                    if f is None or not f["guarded"]:
                        continue
                    done.add((mod, qn))
                    self._guarded(mod, qn, f, self._run_method, mod, f, "lazy", cls_key, where)

    def run_apply_caches(self, modules: list[str]) -> None:
        for mod in sorted(set(modules)):
            rec = self.index.record(mod)
            if rec is None:
                continue
            for _qn, f in sorted(rec["functions"].items()):
                if self.is_apply(f["name"]) and f["guarded"] and f["cls"]:
                    cls_key = f"{mod}:{f['cls']}"
                    self._guarded(mod, _qn, f, self._run_method, mod, f, "apply", cls_key, None)

    def _incomplete(self, fr: Frame, msg: str, line: int = 0) -> None:
        """An RL906 row: part of a post-load path was not analysed (never a silent pass)."""
        err = FileError("RL906", fr.path, msg, line or fr.func.get("line", 0))
        if all(
            (e.path, e.line, e.message) != (err.path, err.line, err.message) for e in self.errors
        ):
            self.errors.append(err)

    def _guarded(self, mod: str, qn: str, f: dict, fn, *args) -> None:
        """Crash guard (issue 6): one function whose analysis raises (deep recursion, an
        engine bug) becomes an RL906 row for its file; the other roots still run."""
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - RecursionError included
            what = "nested too deeply" if isinstance(exc, RecursionError) else "internal error"
            msg = f"analysis of {qn} did not complete ({what}: {type(exc).__name__})"
            self.errors.append(FileError("RL906", self.index.path_of(mod), msg, f.get("line", 0)))

    def _run_method(self, mod: str, f: dict, mode: str, cls_key: str, where) -> None:
        path = self.index.path_of(mod)
        kind = V.MODULE if self.index.is_module_class(cls_key) else V.OBJ
        env = self._entry_env(f, (AV(kind, cls=cls_key, src="self"),))
        chain = (
            TraceStep(
                path,
                f["line"],
                f"{'first-forward' if mode == 'lazy' else 'apply-time'} method {f['qn']}",
            ),
        )
        if where is not None:
            chain = (where,) + chain
        fr = Frame(mod, path, f, env, f"{mod}:{f['cls']}", 0, mode, chain, RootState(f["qn"]))
        self.exec_body(fr, f["body"])

    # ------------------------------------------------------------------ graph visibility
    def add_graph_visibility(self) -> None:
        readers: dict[str, list[tuple[str, str, dict]]] = {}
        for rec in self.index.loaded_records():
            mod = rec["module"]
            for f in rec["functions"].values():
                if self.is_apply(f["name"]):
                    for attr, ln in f["reads"]:
                        readers.setdefault(attr, []).append((mod, f["qn"], f, ln))
        for key, fd in self.findings.items():
            if fd.rule.startswith("RL9"):
                continue
            parts = fd.target.split("[", 1)[0].split(".")
            while len(parts) > 1 and parts[-1] in ("data", "<dynamic>"):
                parts.pop()
            attr = self._read_attr.get(key) or parts[-1]
            if attr.startswith("<"):
                attr = ""
            root_path, root_qn = self._root_of.get(key, ("", ""))
            prefixes = {q.rsplit(".", 1)[0] + "." for q in (fd.symbol, root_qn) if q and "." in q}
            best = None
            for mod, qn, _f, ln in readers.get(attr, []):
                path = self.index.path_of(mod)
                # same class as the store or as its post-load root, then same file
                score = 3 * any(qn.startswith(p) for p in prefixes)
                score += path in (fd.path, root_path)
                cand = (score, path, qn, ln)
                if best is None or cand[0] > best[0] or (cand[0] == best[0] and cand < best):
                    best = cand
            if best is not None and best[0] > 0:
                fd.trace.append(TraceStep(best[1], best[3], f"read at apply time in {best[2]}"))
            elif best is not None:
                # another class reads an attribute of this name on its apply path (often the
                # rebuilt experts/kernel object this one hands the tensor to): weaker evidence
                fd.trace.append(
                    TraceStep(
                        best[1],
                        best[3],
                        f"read at apply time in {best[2]} (matched by attribute name only)",
                    )
                )
            elif fd.rule not in ("RL108", "RL201"):
                fd.confidence = V.lower(fd.confidence)
                fd.trace.append(
                    TraceStep(fd.path, fd.line, "no apply-time read of this attribute found")
                )


def _has_zero_dim(args) -> bool:
    """A literal 0 in the shape: `torch.empty(0)`, `torch.zeros((e, 0))`."""
    first = args[0] if args else ()
    for v in first:
        if v.kind == V.SCALAR and v.value == "0":
            return True
        if v.kind == V.TUPLE and any(
            x.kind == V.SCALAR and x.value == "0" for group in v.items for x in group
        ):
            return True
    return False


def _super_start(selfv, cls_key):
    for v in selfv:
        if v.cls:
            return v.cls
    return cls_key


def _with_step(v: AV, path: str, f: dict) -> AV:
    if v.kind in (V.FRESH, V.PARAM) and v.trace:
        step = TraceStep(path, f["line"], f"returned by {f['qn']}")
        if step not in v.trace:
            return AV(
                v.kind,
                conf=v.conf,
                trace=v.trace + (step,),
                cls=v.cls,
                items=v.items,
                src=v.src,
                value=v.value,
                fn=v.fn,
                oid=v.oid,
            )
    return v


def _derived_src(vals) -> str:
    for v in vals:
        if v.kind in (V.REG, V.VIEW) and v.src:
            return v.src
        if v.kind == V.FRESH and v.src:
            return v.src
    return ""


def _conf_of(*groups) -> str:
    conf = "high"
    for g in groups:
        for v in g:
            if v.kind in V.TENSORISH:
                conf = V.min_conf(conf, v.conf)
    return conf


def _line_of(e, fr: Frame) -> int:
    # the nearest call line inside e, else the function's line
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, tuple) and x:
            if x[0] == "c" and len(x) > 4 and isinstance(x[4], int):
                return x[4]
            stack.extend(y for y in x[1:] if isinstance(y, tuple))
    return fr.func["line"]


def _kept(v: AV) -> AV | None:
    """The part of a value that, stored on an object, is graph-visible tensor state."""
    if v.kind in (V.FRESH, V.PARAM, V.VIEW, V.REG):
        return v
    if v.kind == V.CALLABLE and any(V.tensorish(c) for _, c in v.items):
        return v
    if v.kind == V.CONTAINER and V.tensorish(v.items):
        return v
    if v.kind in (V.OBJ, V.MODULE) and v.value == "rebuilt" and v.items:
        return v
    return None


def _describe(v: AV) -> str:
    return {
        V.FRESH: "a new tensor",
        V.PARAM: "an nn.Parameter",
        V.VIEW: "a view of a registered tensor",
        V.REG: "a registered tensor",
        V.CALLABLE: "a callable capturing tensors",
        V.CONTAINER: "a container of tensors",
        V.OBJ: f"a rebuilt {v.cls.split(':')[-1]} holding tensors",
        V.MODULE: f"a rebuilt {v.cls.split(':')[-1]} holding tensors",
    }.get(v.kind, "a value")
