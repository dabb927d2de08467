"""Graph visibility: the apply-time read that makes a stored tensor matter to captured graphs.

A read counts only where the store's own object can reach it at apply time:

- the *owner classes*: the class whose method made the store, the class of the post-load root
  that reached it, their bases and their subclasses (the object may be either);
- from each owner class, its apply/forward entry methods (configured `apply-names`,
  `apply*`/`forward*`, not private `_apply_*` helpers on their own), then what they call, a few
  calls deep: `self.m(...)` in the same MRO, `self.held.m(...)` on objects the class holds (types
  from `self.x = Class(...)` or from what the analysis saw stored there), and project functions
  (the module-level helpers that build info objects and wrappers from the layer);
- a read on a path named for one backend (`_apply_aiter`, `..._for_marlin`) never counts for a
  store on a path named for another one.

A store on the layer that none of those reads is looked up once more from the layer's own
classes (the module classes that build the root's class, the root's annotated `layer` type):
the layer's forward reads what its quant method stored on it.

An attribute of the same name read by an unrelated class is not evidence. The reader found is
written to the finding's `reader` and as the last trace step.

When none is found, the search is checked for completeness (`no_reader`): the store's family
and, for a store on the layer, the layer's own class (from the root's annotation or the module
classes that build the root's class; unknown, the search is incomplete) are walked as deep as
calls go, following where the holder (the layer, or the object itself) is handed. Complete
means nothing was left unfollowed where the holder could escape (a method of an object of
unknown class on it, the holder handed to code not followed), no reached function reads the
attribute, and nothing in the family, the layer's classes or the store's module reads it
outside a store (a post-load helper that hands it into a quant config). A complete, empty
search means no captured forward reads the store: no finding (the reason is kept with the
dropped findings). Otherwise the finding stays, one confidence step lower.
"""

from __future__ import annotations

import re
from collections import deque

from reload_lint.analysis import values as V
from reload_lint.analysis.callgraph import CallGraphMixin, module_param
from reload_lint.analysis.frame import MODULE_PARAM_NAMES
from reload_lint.findings import TraceStep
from reload_lint.index.deps import is_entry_name
from reload_lint.index.deps import reads_attr as _reads
from reload_lint.index.extract import dotted

# Backend names used in vLLM / SGLang function, method and module names. A name token from this
# set ties a code path to that backend.
BACKEND_TOKENS = frozenset(
    {
        "aiter",
        "allspark",
        "b12x",
        "bitblas",
        "conch",
        "cpu",
        "cutlass",
        "deepep",
        "deepgemm",
        "dynamic4bit",
        "exllama",
        "fbgemm",
        "flashinfer",
        "hpu",
        "humming",
        "ipex",
        "machete",
        "marlin",
        "npu",
        "onednn",
        "rdna3",
        "rocm",
        "sm100",
        "sm120",
        "sm90",
        "tpu",
        "triton",
        "trtllm",
        "xpu",
        "zentorch",
    }
)
_SPLIT = re.compile(r"[^a-z0-9]+")
MAX_CALL_DEPTH = 3
# nn.Module methods a forward calls on itself or its layer that read no attribute by name
MODULE_API = frozenset(
    {
        "register_buffer",
        "register_parameter",
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "state_dict",
        "train",
        "eval",
        "to",
        "cuda",
        "cpu",
        "half",
        "float",
        "extra_repr",
    }
)
FULL_NODES = 3000


def backend_tokens(*names: str) -> frozenset:
    """Backend names among the `_`/`.`-separated words of function, class and module names."""
    out: set[str] = set()
    for name in names:
        low = name.lower().replace("deep_gemm", "deepgemm").replace("trt_llm", "trtllm")
        for word in _SPLIT.split(low):
            if word in BACKEND_TOKENS:
                out.add(word)
    return frozenset(out)


_module_param = module_param


def _handed(c, g: dict, bound: bool, has: frozenset, me: str | None) -> frozenset:
    """The callee's parameters that receive the holder at call `c`."""
    params = list(g["params"])
    out = set()
    if bound and params:
        recv = c[1][1]
        if recv[0] == "n" and recv[1] in has and recv[1] == me:
            out.add(params[0])  # self.m(...) on the holder itself
        params = params[1:]
    for i, a in enumerate(c[2]):
        if _names_obj(a, has) and i < len(params):
            out.add(params[i])
    for k, v in c[3]:
        if _names_obj(v, has) and k in g["params"]:
            out.add(k)
    return frozenset(out)


def _escapes(c, has: frozenset) -> str | None:
    """How a call not followed may reach the holder: a method of something the holder holds,
    or the holder handed to it."""
    fn = c[1]
    base = fn
    while base[0] == "a":
        base = base[1]
    shown = dotted(fn) if fn[0] in ("n", "a") else "?"
    if base[0] == "n" and base[1] in has and fn[0] == "a":
        return f"calls `{shown}(...)` on the holder or what it holds, not followed"
    if any(_names_obj(a, has) for a in (*c[2], *(v for _k, v in c[3]))):
        return f"hands `{'/'.join(sorted(has))}` to `{shown}(...)`, not followed"
    return None


def _chain(e) -> list:
    """`a.b.c` as [c, b, a] (attribute names outermost first)."""
    out = []
    while e[0] == "a":
        out.append(e[2])
        e = e[1]
    out.append(e[1] if e[0] == "n" else "?")
    return out


def _names_obj(e, objs: set) -> bool:
    """Whether an argument expression is one of `objs` itself (not an attribute of it)."""
    return isinstance(e, tuple) and len(e) >= 2 and e[0] == "n" and e[1] in objs


class ReaderMixin(CallGraphMixin):
    """Mixed into Analyzer (analysis/interp.py)."""

    def is_entry(self, name: str) -> bool:
        """Apply/forward entry points: configured names and public `apply*`/`forward*`."""
        return is_entry_name(name, self.apply_names)

    def note_held(self, owner_cls: str, attr: str, held_cls: str) -> None:
        """The analysis saw an object of class `held_cls` stored on `owner.<attr>`."""
        if owner_cls and held_cls:
            self._held_types.setdefault((owner_cls, attr), set()).add(held_cls)

    def note_stored_class(self, key: tuple, v) -> None:
        """The class of the object a finding stores (a rebuilt config, kernel, wrapper)."""
        if v.kind in (V.OBJ, V.MODULE) and v.cls:
            self._stored_cls[key] = v.cls

    def note_store_site(self, key: tuple, fr, st) -> None:
        """Remember what the reader search needs about a finding's store."""
        names = [fr.func.get("qn", ""), fr.path.rsplit("/", 1)[-1]]
        names += [s.note.removeprefix("calls ") for s in fr.chain[1:]]
        self._store_site[key] = (fr.cls_key, getattr(fr.root, "cls_key", None), tuple(names))
        self._store_site_module[key] = fr.module
        if st[0] == "assign" and len(st) > 6 and st[6]:
            self._conditional.add(key)  # under `if self._x is None:` and the like

    # ------------------------------------------------------------------ location
    def callers_of(self, name: str) -> set:
        """Functions (module, qualname) of the parsed modules that call something named
        `name` (`f(...)`, `mod.f(...)`); updated as the analysis parses more modules."""
        return {(mod, qn) for mod, qns in self.index.each_view("callers", name) for qn in qns}

    def relocate(self, fr, target: str) -> tuple | None:
        """(path, line, symbol, target) of the call site when the store sits in a shared helper
        that stores under a name its caller passes (`replace_parameter(layer, "g_idx", t)`,
        `setattr(layer, f"{prefix}_scale", ...)`): the caller decides what is stored where, so
        the caller is what must change; the helper stays in the trace. The target is spelled
        as the caller's object (`mod.g_idx` in the helper is `layer.g_idx` at the call)."""
        f = fr.func
        if fr.mode != "post" or f.get("cls") or f.get("parent") or len(fr.chain) < 2:
            return None
        base, _, rest = target.partition(".")
        attr = rest.split(".", 1)[0].split("[", 1)[0]
        if not attr.isidentifier():
            return None
        passed = {
            v.value
            for p in f["params"]
            for v in fr.env.get(p, ())
            if v.kind == V.STR and v.value and len(v.value) >= 2
        }
        if not any(s == attr or s in attr for s in passed):
            return None
        if len(self.callers_of(f["name"])) < 2:
            return None  # used once: the helper is as good a place to change as its caller
        call, caller = fr.chain[-1], fr.chain[-2].note.rsplit(" ", 1)[-1]
        srcs = {v.src for v in fr.env.get(base, ()) if v.src}
        if len(srcs) == 1:
            src = next(iter(srcs))
            if all(part.isidentifier() for part in src.split(".")):
                base = src
        return call.path, call.line, caller, f"{base}.{rest}"

    # ------------------------------------------------------------------ owner classes
    def _owner_classes(self, keys) -> list[str]:
        out: list[str] = []
        for k in keys:
            if not k or self.index.class_record(k) is None:
                continue
            for c in (*self.index.mro(k), *self.index.subclasses(k)):
                if c not in out and self.index.class_record(c) is not None:
                    out.append(c)
        return out

    def _reachable(self, cls_key: str) -> list[tuple]:
        """(module, qn, function, path of qualnames) reachable from the class's entries; for
        `module:` (no class), from the module's own top-level apply/forward functions."""
        if cls_key in self._reach:
            return self._reach[cls_key]
        self._reach[cls_key] = []
        out: list[tuple] = []
        seen: set = set()
        queue = deque(self._entries(cls_key))
        while queue:
            mod, qn, f, ck, path = queue.popleft()
            if (mod, qn, ck) in seen:
                continue
            seen.add((mod, qn, ck))
            out.append((mod, qn, f, path))
            if len(path) > MAX_CALL_DEPTH:
                continue
            for m2, qn2, g, ck2 in self._callees(mod, f, ck):
                queue.append((m2, qn2, g, ck2, (*path, qn2)))
        self._reach[cls_key] = out
        return out

    def _entries(self, cls_key: str) -> list[tuple]:
        mod0, _, cqn = cls_key.partition(":")
        entries: list[tuple] = []
        done: set[str] = set()
        for qn, f in (self.index.view(mod0, "entries", self._apply_t) if not cqn else None) or ():
            entries.append((mod0, qn, f, None, (qn,)))
        for mod, name, qn in self.index.mro_methods(cls_key) if cqn else ():
            if name in done or not self.is_entry(name):
                continue
            done.add(name)
            f = self.index.function(mod, qn)
            if f is not None:
                entries.append((mod, qn, f, cls_key, (qn,)))
        return entries

    def _holder_walk(
        self, cls_key: str, on_self: bool, via: str | None = None, layers: tuple = ()
    ) -> tuple[list, list]:
        """Everything the class's entries reach, as deep as calls go (up to FULL_NODES
        functions), following where the store's holder goes: the layer the entries are
        handed (module-typed parameters), or with `on_self` the object itself. Returns
        (reached (module, qn, function, entry path), gaps): a gap is a call not followed in a
        function that has the holder and could hand it on (`layer.kernel.run(...)`,
        `self.impl.apply(...)` on an object of unknown class, `op(layer, ...)`)."""
        key = (cls_key, on_self, via, layers)
        if key in self._holder_walks:
            return self._holder_walks[key]
        self._holder_walks[key] = ([], [])
        holders: dict[tuple, frozenset] = {}
        out: list[tuple] = []
        gaps: list[str] = []
        queue: deque = deque()
        for mod, qn, f, ck, path in self._entries(cls_key):
            me = f["params"][0] if f["cls"] and f["params"] else None
            names = {p for p in f["params"] if p != me and _module_param(f, p)}
            if on_self and me:
                names.add(me)
            queue.append((mod, qn, f, ck, path, frozenset(names)))
        while queue:
            mod, qn, f, ck, path, has = queue.popleft()
            node = (mod, qn, ck)
            old = holders.get(node)
            if old is not None and has <= old:
                continue
            first = old is None
            holders[node] = has | (old or frozenset())
            if first:
                out.append((mod, qn, f, path))
                if len(out) >= FULL_NODES:
                    gaps.append(f"more than {FULL_NODES} functions reachable")
                    break
            missed: list = []
            me = f["params"][0] if f["cls"] and f["params"] else None
            for m2, qn2, g, ck2, c, bound in self._call_targets(mod, f, ck, missed):
                queue.append((m2, qn2, g, ck2, (*path, qn2), _handed(c, g, bound, has, me)))
            for c in missed if has else ():
                fn = c[1]
                if via and me and fn[0] == "a" and fn[1][0] == "a" and fn[1][1] == ("n", me):
                    # the layer calling the object it holds whose post-load stored (`self.
                    # quant_method.apply(layer=self, ...)`): that object's class
                    found = self.index.lookup_method(via, fn[2])
                    g = self.index.function(*found) if found else None
                    if g is not None:
                        h = _handed(c, g, True, has, me)
                        queue.append((found[0], found[1], g, via, (*path, found[1]), h))
                        continue
                if (
                    ck
                    and me
                    and fn[0] == "a"
                    and fn[2] == "__call__"
                    and fn[1][0] == "a"
                    and fn[1][1] == ("n", me)
                ):
                    # `self._forward_method(x)`, `_forward_method = self.dispatch_forward()`
                    # returning bound methods of self (`self.forward_cuda`, or one wrapped:
                    # `maybe_compile(self.forward_native)`): those methods
                    names = self._dispatched_methods(ck, fn[1][2])
                    if names is not None:
                        for name in names:
                            found = self.index.lookup_method(ck, name)
                            g = self.index.function(*found) if found else None
                            if g is not None:
                                h = _handed(c, g, True, has, me)
                                queue.append((found[0], found[1], g, ck, (*path, found[1]), h))
                        continue
                if fn[0] == "a" and fn[1][0] == "n" and fn[1][1] in has:
                    # a method of the holder itself: the layer's class when it is known
                    found = next(
                        (m for m in (self.index.lookup_method(lk, fn[2]) for lk in layers) if m),
                        None,
                    )
                    g = self.index.function(*found) if found else None
                    if g is not None and g["params"]:
                        h = _handed(c, g, False, has, me) | {g["params"][0]}
                        queue.append((found[0], found[1], g, None, (*path, found[1]), h))
                        continue
                    if fn[2] in MODULE_API:
                        continue
                why = _escapes(c, has)
                if why:
                    gaps.append(f"{qn} {why}")
        self._holder_walks[key] = (out, gaps)
        return out, gaps

    def _dispatched_methods(self, cls_key: str, attr: str) -> tuple | None:
        """Names of the methods `self.<attr>` can be bound to, when every store of it in the
        class's MRO is `self.<attr> = self.<dispatcher>(...)` and every return of the
        dispatcher is a bound method of self (`return self.forward_cuda`) or a call handed
        one (`return self.maybe_compile(self.forward_native)`); None otherwise."""
        from reload_lint.analysis.exprs import _call_stores

        names: list[str] = []
        stores = 0
        for mod, _name, mqn in self.index.mro_methods(cls_key):
            f = self.index.function(mod, mqn)
            if f is None or not f["params"]:
                continue
            me = f["params"][0]
            for st, bases in _call_stores(self, f).get(attr, ()):
                if me not in bases:
                    continue
                stores += 1
                func = st[5][1]
                if not (func[0] == "a" and func[1] == ("n", me)):
                    return None
                found = self.index.lookup_method(cls_key, func[2])
                g = self.index.function(*found) if found else None
                if g is None or not g["params"]:
                    return None
                gme = ("n", g["params"][0])
                rets = [st2[4] for st2 in g["body"] if st2[0] == "ret"]
                if not rets:
                    return None
                for e in rets:
                    if e is not None and e[0] == "a" and e[1] == gme:
                        names.append(e[2])
                        continue
                    bound = (
                        [a[2] for a in e[2] if a[0] == "a" and a[1] == gme]
                        if e is not None and e[0] == "c"
                        else []
                    )
                    if not bound:
                        return None
                    names += bound
        return tuple(dict.fromkeys(names)) if stores else None

    def find_reader(self, attr: str, owners: list[str], store_names: tuple) -> tuple | None:
        """(path, line, qn, via) of the first read of `attr` reachable from an owner's entries."""
        if not attr:
            return None
        mine = backend_tokens(*store_names)
        best, best_score = None, -1
        for ck in owners:
            for mod, qn, f, path in self._reachable(ck):
                line = next((ln for a, ln in f["reads"] if a == attr), None)
                if line is None:
                    continue
                theirs = backend_tokens(*path, mod)
                if (theirs - mine) and (mine - theirs):
                    continue  # a read on another backend's path (`sm90` for an `sm120` store)
                score = len(mine & theirs)
                if score > best_score:
                    best, best_score = (self.index.path_of(mod), line, qn, path), score
                    if score == len(mine):
                        return best
        return best

    # ------------------------------------------------------------------ per finding
    def add_graph_visibility(self) -> None:
        for key, fd in list(self.findings.items()):
            what = f"the apply-time reader search for {fd.target}"
            self._contained("", what, self._graph_visibility, {key: fd}, line=fd.line, path=fd.path)

    def _graph_visibility(self, findings: dict) -> None:
        for key, fd in findings.items():
            if fd.rule.startswith("RL9"):
                continue
            parts = fd.target.split("[", 1)[0].split(".")
            while len(parts) > 1 and parts[-1] in ("data", "<dynamic>"):
                parts.pop()
            attr = self._read_attr.get(key) or parts[-1]
            if attr.startswith("<") or not attr.isidentifier():
                attr = ""
            store_cls, root_cls, names = self._store_site.get(key, (None, None, ()))
            owners = self._owner_classes([store_cls, root_cls])
            # top-level apply/forward functions of the store's own module (`forward_x(layer,
            # ...)` next to the `prepare_x(layer)` that stores)
            owners.append(f"{self._store_site_module.get(key, '')}:")
            hit = self.find_reader(attr, owners, names)
            if hit is None and not fd.target.startswith("self."):
                # a store on the layer: the layer's own forward reads it too (`self.scale_inv`,
                # `self.kernel(x)`), when the layer's class is known (the module classes that
                # build the root's class, the root's annotated `layer`)
                layers = self._layer_classes(key, root_cls)
                if layers:
                    hit = self.find_reader(attr, self._owner_classes(layers), names)
            alias = ""
            cls = self._stored_cls.get(key)
            if hit is None and cls:
                # the object is handed on (a quant config given to the experts the kernel
                # holds): a read of an attribute that holds an object of the same class,
                # on the apply path of what the owner holds, is the graph-visible read
                for a in sorted(
                    a for (_k, a), held in self._held_types.items() if cls in held and a != attr
                ):
                    hit = self.find_reader(a, owners, names)
                    if hit is not None:
                        alias = f" (as `{a}`, which holds the {cls.split(':')[-1]})"
                        break
            if hit is not None:
                path, line, qn, via = hit
                note = f"read at apply time in {qn}{alias}"
                if len(via) > 1:
                    note += " (via " + " -> ".join(via[:-1]) + ")"
                fd.trace.append(TraceStep(path, line, note))
                fd.reader = f"{path}:{line} in {qn}"
            elif fd.rule not in ("RL108", "RL201"):
                why = self.no_reader(attr, owners, key)
                if why:
                    self.dropped[key] = why
                    del self.findings[key]
                    continue
                fd.confidence = V.lower(fd.confidence)
                fd.apply_paths_searched = any(self._entries(ck) for ck in owners)
                fd.trace.append(
                    TraceStep(fd.path, fd.line, "no apply-time read of this attribute found")
                )
                # what reads it is the construction of a rebuilt object (analysis/feeds.py)
                fd.trace.extend(self.feeds_steps(key))

    def no_reader(self, attr: str, owners: list[str], key: tuple) -> str | None:
        """Why nothing reads the store at apply time, when the reader search that found
        nothing was complete; None when it was not (the finding stays, one step less sure).

        Complete means: the store's class family has apply/forward entries; everything they
        call on the way was followed (no method of an object of unknown class, no call
        deeper than the search, no `self`/layer handed to code not followed); and nothing
        outside those entries reads the attribute where it could hand it on: no other
        method of the family (a post-load helper that puts it in a quant config), no function
        of the store's module, no method of the layer classes that hold the root's class."""
        if not attr:
            return None
        entries: list[str] = []
        reached: set[tuple] = set()
        on_self = self.findings[key].target.startswith("self.")
        store_cls, root_cls, _names = self._store_site.get(key, (None, None, ()))
        layers = tuple(self._layer_classes(key, root_cls))
        if not on_self and not layers:
            # a store on the layer: the layer's own class is a reader too (its forward, and
            # what it hands itself to); unknown, the search cannot be complete
            return None
        for ck in owners:
            reached_ck, gaps = self._holder_walk(ck, on_self, layers=layers)
            for mod, qn, f, path in reached_ck:
                reached.add((mod, qn))
                if len(path) == 1:
                    entries.append(qn)
                if _reads(f, attr):
                    return None  # read deeper than the reader search goes
            if gaps:
                return None
        if not entries:
            return None
        classes = [c for c in owners if not c.endswith(":")]
        if not on_self:
            for lk in layers:
                walked, gaps = self._holder_walk(lk, True, via=root_cls, layers=layers)
                if gaps or any(_reads(f, attr) for _m, _q, f, _p in walked):
                    return None
                classes += [c for c in (*self.index.mro(lk), *self.index.subclasses(lk))]
        for ck in classes:
            for mod, _name, qn in self.index.mro_methods(ck):
                f = self.index.function(mod, qn)
                if f is not None and (mod, qn) not in reached and _reads(f, attr):
                    return None
        if on_self:
            # what holds the object (the layer's `quant_method`, a kernel's owner) may read
            # it by name: any read outside the walk of the parsed code keeps the finding
            for mod, hits in self.index.each_view("reads", attr):
                for qn, _cls in hits:
                    if (mod, qn) not in reached:
                        return None
        mod0 = self._store_site_module.get(key, "")
        for qn, cls in (self.index.view(mod0, "reads", attr) if mod0 else None) or ():
            if not cls and (mod0, qn) not in reached:
                return None
        family = sorted({e.split(".")[0] for e in entries})
        held = sorted({lk.split(":")[-1] for lk in layers}) if not on_self else []
        return (
            f"no apply-time read: the apply/forward paths of {', '.join(family[:3])}"
            f"{' and others' if len(family) > 3 else ''} never read `{attr}`"
            + (
                f", nor does the layer that holds it ({', '.join(held[:3])}"
                f"{' and others' if len(held) > 3 else ''})"
                if held
                else ""
            )
            + ", and nothing else in that family or in the store's module does"
        )

    def _layer_classes(self, key: tuple, root_cls: str | None) -> list[str]:
        """Module classes the post-load root's layer can be: the classes that build the
        root's class and keep it, the class its layer parameter is annotated with, and the
        one the layer parameter of the root class's own apply/forward entries is annotated
        with (one object's post-load and apply are handed the layer that holds it: a root
        typed `torch.nn.Module` whose `apply(layer: SomeMoELayer)` names the layer)."""
        out = [b for b, _built in self._builders_of(root_cls)] if root_cls else []
        rpath, rqn = self._root_of.get(key, ("", ""))
        mod = root_cls.partition(":")[0] if root_cls else ""
        f = self.index.function(mod, rqn) if mod else None
        self._annotated_layers(mod, f, out)
        if root_cls:
            for emod, name, eqn in self.index.mro_methods(root_cls):
                if self.is_entry(name):
                    self._annotated_layers(emod, self.index.function(emod, eqn), out)
        return out

    def _annotated_layers(self, mod: str, f: dict | None, out: list[str]) -> None:
        """Add to `out` the module classes `f`'s layer parameters are annotated with."""
        for p, ann in (f or {}).get("annotations", ()):
            if p not in MODULE_PARAM_NAMES or not ann or ann.startswith("type:"):
                continue
            q = self.index.qualify(mod, ann.strip("'\""))
            r = self.index.resolve(q) if q else None
            if r is not None and r[0] == "class":
                ck = f"{r[1]}:{r[2]}"
                if self.index.is_module_class(ck) and ck not in out:
                    out.append(ck)

    def drop_unresolved_names(self) -> None:
        """A store site reached both with names resolved (`layer.w13_scale`, from callers that
        pass the prefix) and unresolved (`layer.<f"{prefix}_scale">`, a root that takes the
        prefix as a parameter) is reported under the resolved names only."""
        resolved = {(k[0], k[1], k[2]) for k in self.findings if "<" not in self.findings[k].target}
        for key in [k for k, fd in self.findings.items() if "<" in fd.target]:
            if (key[0], key[1], key[2]) in resolved:
                del self.findings[key]

    def finalize_confidence(self) -> None:
        """Confidence sorts: `high` only for an unconditional store (no guard, no lazy `if`)
        with a reader found; anything else is at most `medium`. Runs after every fact is in."""
        for key, fd in self.findings.items():
            if fd.rule.startswith("RL9") or fd.confidence != "high":
                continue
            if fd.reader is None or fd.guard or key in self._conditional:
                fd.confidence = "medium"
