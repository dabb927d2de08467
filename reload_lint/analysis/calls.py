"""Calls: dispatch to torch summaries, project functions (interpreted in the caller's
context), closures and partials, and constructors with `self` under construction."""

from __future__ import annotations

from reload_lint.analysis import containers as C
from reload_lint.analysis import shapes as S
from reload_lint.analysis import values as V
from reload_lint.analysis.contracts import STALE_WHY, reuse_helper
from reload_lint.analysis.frame import (
    CONTAINER_MUTATORS,
    MAX_DEPTH,
    RECURSION_LIMIT,
    REGISTER,
    Frame,
    _allocates,
    _derived_src,
    _describe,
    _has_zero_dim,
    _kept,
    _super_start,
    _with_step,
    to_host,
)
from reload_lint.analysis.values import AV
from reload_lint.findings import TraceStep
from reload_lint.index.extract import dotted
from reload_lint.index.project import TORCH_PARAMETER
from reload_lint.summaries import torchapi as T


class CallMixin:
    """Mixed into Analyzer (analysis/interp.py); uses its state and the other rooms' methods."""

    # ------------------------------------------------------------------ calls

    def replay_effects(self, fr: Frame, key: tuple) -> None:
        """A memoised call's effects on its root (see _root_effects), applied to this root."""
        prefix = (*fr.positions, (fr.func.get("qn"), fr.block_hint))
        root = fr.root
        for kind, a, val in self.memo_effects.get(key, ()):
            if kind == "deleted":
                root.deleted.add(a)
            elif kind == "loaders":
                root.loaders.add(a)
            elif kind == "derived":
                root.derived_findings.append((a, val))
            elif kind == "event":
                root.events.append(a)
            elif kind == "deleted_at":
                root.deleted_at.setdefault(a, (*prefix, *val) if val is not None else None)
            else:
                path, line, pos = val
                where = (*prefix, *pos) if pos is not None else None
                getattr(root, kind).setdefault(a, (path, line, where))

    def _later_memo(self, key) -> bool:
        """Whether the summary kept at `key` was made by a root later in the sequential order
        than the one being analysed (first pass only): it is made again, so that what the
        summary reports and returns is the lower rank's, as in the sequential run."""
        return self.ranked and self.memo_rank.get(key, -1) > self.rank

    def _retract(self, key) -> None:
        """Before a lower rank makes the summary at `key` again (_later_memo): what the later
        root reported while making it is taken back. In the sequential order that root found
        the summary made and reported nothing in it (a store in a shared helper is reported
        at the first caller's call site, not at each caller's)."""
        rank, (start, end) = self.memo_rank[key], self.memo_span.get(key, (0, 0))
        for fkey in [k for k, n in self._made.items() if start < n <= end]:
            if self._rank_of.get(fkey) == rank and fkey in self.findings:
                del self.findings[fkey]
                del self._made[fkey]
        for fkey, ranks in self._guard_ranks.items():
            gone = [i for i, (r, n) in enumerate(ranks) if r == rank and start < n <= end]
            for i in reversed(gone):
                del ranks[i]
                del self._guard_ctx[fkey][i]

    def eval_call(self, fr: Frame, e) -> tuple:
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
        if func[0] == "a" and func[1] == ("n", "object") and func[2] == "__setattr__":
            # `object.__setattr__(x, "name", v)` stores as `setattr` does (bypassing any
            # `__setattr__` of x's class)
            return self.builtin_attr(fr, "setattr", args_e, e)
        if func[0] == "a":
            recv = self.eval(fr, func[1])
            meth = func[2]
            special = self.method_special(fr, recv, meth, func, args_e, kwargs_e, e)
            if special is not None:
                return special
            if meth in T.TENSOR_ONLY_METHODS and all(r.kind in (V.UNKNOWN, V.MATTR) for r in recv):
                same = self.identity_cast(fr, recv, meth, args_e, kwargs_e, line)
                if same is not None:  # analysis/identity.py
                    return same
                args = tuple(self.eval(fr, a) for a in args_e)
                kwargs = tuple((k, self.eval(fr, v)) for k, v in kwargs_e)
                if to_host(meth, args, kwargs):
                    return self.tensor_method(fr, recv, meth, args, line, kwargs)
                held = [r for r in recv if r.kind == V.MATTR]
                if held and meth in T.VIEW_METHODS:
                    out = ()
                    for r in held:  # a view of a module attribute (contiguous)
                        base = AV(V.VIEW, conf="medium", src=r.src, value=r.value or "?")
                        out = V.union(out, self.view_of(fr, base, meth, line))
                    return out
                if not held and meth in T.VIEW_METHODS:
                    # a view allocates nothing: its storage is its receiver's, and of a
                    # receiver nothing here knows nothing can be said (a tensor it allocated is
                    # reported where it is made, a registered one is not new storage)
                    base = AV(V.VIEW, conf="low", src=self.render(func[1]), value="?")
                    return self.view_of(fr, base, meth, line)
                out = self._fresh(
                    fr,
                    line,
                    f"`.{meth}()` on `{self.render(func[1])}` (assumed a tensor)",
                    "medium" if held else "low",
                    src=held[0].src if held else "",
                    value=None if held else "derived",
                )
                if meth in T.CAST_METHODS and (held or func[1][0] == "a"):
                    # a dtype cast of an attribute: stored back under the same name it is
                    # idempotent from the second pass (pathfacts / contracts.idempotent_cast)
                    src = held[0].src if held else self.render(func[1])
                    out = tuple(
                        AV(V.FRESH, conf=v.conf, trace=v.trace, src=src, value="cast") for v in out
                    )
                return out
            callee = self.eval_attr(fr, recv, meth, func)
        else:
            callee = self.eval(fr, func)
        args = tuple(self.eval(fr, a) for a in args_e)
        kwargs = tuple((k, self.eval(fr, v)) for k, v in kwargs_e)
        hook = func[2] if func[0] == "a" else func[1] if func[0] == "n" else None
        if hook in self.root_names:  # analysis/hooks.py
            given = bool(args_e or kwargs_e)
            self.note_hook_call(fr, func, recv if func[0] == "a" else (), callee, given)
        out: tuple = ()
        for c in callee:
            out = V.union(out, self.call_value(fr, c, args, kwargs, line, e))
        if func[0] == "a" and any(c.kind == V.TMETHOD for c in callee):
            out = S.after_method(self, fr, recv, func[2], args_e, args, kwargs, out)
        if func[0] == "a" and all(v.kind == V.UNKNOWN for v in out) and recv:
            typed = self.typed_layer_call(fr, recv, func[2], line)  # analysis/identity.py
            if typed is not None:
                return typed
        if (
            func[0] == "a"
            and func[1][0] in ("n", "a")
            and all(v.kind == V.UNKNOWN for v in out)
            and all(r.kind == V.UNKNOWN for r in recv)
            and C.fed_tensors(args, kwargs)
        ):
            # a function of a local or attribute chain nothing here knows (a library module a
            # helper imports at run time: `api = get_lib(); api.pack_weight(layer.weight)`, or
            # the constructor keeps: `self.lib.Gemm.prepare(layer.w)`) fed tensors: a new
            # tensor, as for any unknown callee fed tensors
            src = next((s for s in map(_derived_src, map(C.spread, args)) if s), "")
            what = f"unknown callee `{self.render(func)}` assumed to return a new tensor"
            return self._fresh(fr, line, what, "low", src, value=None if src else "derived")
        return out or (V.UNK,)

    def method_special(self, fr: Frame, recv, meth, func, args_e, kwargs_e, e):
        line = e[4]
        if meth in REGISTER and any(b.kind == V.MODULE for b in recv) and len(args_e) >= 2:
            names = self.eval(fr, args_e[0])
            name = next((n.value for n in names if n.kind == V.STR and n.value), "<dynamic>")
            vals = self.eval(fr, args_e[1])
            target = f"{self.render(func[1])}.{name}"
            self.note_rebind(fr, name)
            if name != "<dynamic>":
                # `B.register_buffer("x", t)` sets `B.x` as `B.x = t` does: a guard
                # `if getattr(B, "x", None) is None:` around it is off on the next pass when
                # nothing deletes it (a deferred layer's reload puts its buffers back first)
                self.note_flag_set(fr, name, args_e[1], fr.block_hint or ())
            fr.heap[target] = tuple(
                AV(V.REG, src=target, value=name) if v.kind in V.TENSORISH else v for v in vals
            )
            contract = self.contract_for(fr.path)
            deferred = self.deferred_root(fr)
            persistent = _persistent(args_e, kwargs_e) if meth == "register_buffer" else True
            for v in vals:
                dfr = deferred and _deferred_kind(fr, v)
                rule = contract.judge_register(v, name, deferred=dfr, persistent=persistent)
                self.note_judged(
                    fr, line, target, v, (rule, meth) if rule else None, meth, "module"
                )
                if meth == "register_parameter":
                    self.note_masking_store(fr, name, v, "module", rule)
                if rule:
                    why = meth
                    if rule == "RL201":
                        why = STALE_WHY.format(src=v.src)
                    elif dfr:
                        why = f"{meth} on a deferred layer's post-load (no copy-back)"
                    key = self.report(fr, rule, ("expr", line, 1, line), target, v, why)
                    src_attr = v.src.rsplit(".", 1)[-1] if v.src else ""
                    if key and v.kind == V.FRESH and src_attr:
                        # derived from another attribute: made once behind a test of the
                        # buffer itself, it is a stale copy (pathfacts.resolve_guards)
                        fr.root.derived_findings.append((key, src_attr))
                    break
            return (V.NON,)
        if meth in CONTAINER_MUTATORS:
            vals: tuple = ()
            for a in args_e:
                got = self.eval(fr, a)
                if meth in C.SPREADING_MUTATORS:
                    got = C.spread(got)  # `xs.extend([t])`, `d.update({"k": t})`
                vals = V.union(vals, got)
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
            and meth != "set_"  # takes its argument's storage (ExprMixin.tensor_method)
            and any(b.kind in V.TENSORISH or b.kind == V.MATTR for b in recv)
        ):
            for a in args_e:
                self.eval(fr, a)
            if not S.keeps_shape_inplace(meth):
                return S.forget(fr, recv)  # in-place: same storage, maybe another shape
            return recv  # in-place: same storage
        return None

    def call_value(self, fr: Frame, c: AV, args, kwargs, line, e) -> tuple:
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
            if c.value == "oracle":
                return self.construct_choices(fr, c, args, kwargs, line)
            return self.construct_any(fr, c.cls, args, kwargs, line)
        if k == V.TMETHOD:
            return self.tensor_method(fr, c.items[0], c.value, args, line, kwargs)
        if k == V.CALLABLE:
            return self.call_closure(fr, c, args, kwargs, line)
        if k == V.MATTR:
            if any(V.tensorish(a) for a in args):
                return self._fresh(fr, line, f"unknown callee `{c.src}` assumed to allocate", "low")
            return (V.UNK,)
        return (V.UNK,)

    def call_external(self, fr: Frame, q: str, args, kwargs, line, e) -> tuple:
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
            inner = args[0] if args else dict(kwargs).get("data", ())
            inner_e = e[2][0] if e[2] else dict(e[3]).get("data")
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
            elif inner_e is not None and inner_e[0] == "a" and inner_e[2] == "data":
                # `Parameter(x.data)`: wraps the storage x already has, whatever x is (a
                # tensor another path allocated, an item of a container of parameters)
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
            if (q in T.TORCH_VIEW_FUNCS or q in T.VIEW_OR_COPY) and any(
                v.kind in (V.REG, V.VIEW) for v in first
            ):
                out: tuple = ()
                for v in first:
                    if v.kind in (V.REG, V.VIEW):
                        out = V.union(out, self.view_of(fr, v, q, line))
                return out
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
            if _on_host(q, args, kwargs):
                note = f"`{q}` makes a host (CPU) tensor: no device given"
                return (AV(V.FRESH, value="host", trace=(TraceStep(fr.path, line, note),)),)
            out = self._fresh(fr, line, f"`{q}` allocates a new tensor", src=src)
            if q in S.PADS and args:
                pad_e = e[2][1] if len(e[2]) > 1 else dict(e[3]).get("pad")
                out = S.with_shape(out, S.padded(fr, S.common(args[0]), pad_e))
            return out
        if q in T.TORCH_NON_TENSOR:
            # `torch.Size(...)`, `torch.compile(fn)`, `torch.device(...)`: host metadata or a
            # callable, never a tensor (summaries/torchapi.py)
            return (V.UNK,)
        last = q.rsplit(".", 1)[-1]
        if q in C.CONTAINER_BUILTINS:
            # `dict(w=t)`, `list(ts)`, `tuple(t for ...)`, `sorted(ts)`: analysis/containers.py
            return C.builtin_container(q, args, kwargs)
        if q in T.BUILTIN_SCALAR or last in T.BUILTIN_SCALAR:
            return (V.SCAL,)
        if fr.mode == "lazy" and last[:1].isupper() and "." in q and not q.startswith("torch."):
            # a third-party class built on first use (`flashinfer...Wrapper(...)`): what its
            # constructor allocates is not visible here, it may own device buffers
            return (
                AV(
                    V.OBJ,
                    conf="low",
                    src=f"{last}(...)",
                    value="external",
                    trace=(TraceStep(fr.path, line, f"third-party `{q}` built here"),),
                ),
            )
        view = self.external_view(fr, q, args, line)  # analysis/externals.py
        if view is not None:
            return view
        if C.fed_tensors(args, kwargs):
            src = ""
            for a in args:
                src = src or _derived_src(C.spread(a))
            return self._fresh(
                fr,
                line,
                f"unknown callee `{q}` assumed to return a new tensor",
                "low",
                src,
                value=None if src else "derived",
            )
        return (V.UNK,)

    def reuse_shape(self, mod: str, qn: str, f: dict) -> tuple[str, str] | None:
        """(current, replacement) parameters of a storage-reuse helper (memoised)."""
        key = ("reuse-shape", mod, qn)
        if key not in self._reuse_shapes:

            def callee(fn):
                d = dotted(fn) if fn[0] in ("n", "a") else None
                q = self.index.qualify(mod, d) if d else None
                r = self.index.resolve(q) if q else None
                return self.index.function(r[1], r[2]) if r and r[0] == "func" else None

            self._reuse_shapes[key] = reuse_helper(f, callee)
        return self._reuse_shapes[key]

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
                guards=fr.guards,
                stack=fr.stack,
                positions=fr.positions,
                block_hint=fr.block_hint,
            )
            return self.eval(sub, body)
        return (V.UNK,)

    def call_function(
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
        reuse = self.reuse_shape(mod, qn, f)
        if reuse is not None and fr.mode == "post":
            old = tuple(v for v in env.get(reuse[0], ()) if v.kind != V.NONE)
            if old and all(v.kind in (V.MATTR, V.REG, V.VIEW) for v in old):
                # a reuse helper handed what the attribute already holds: on an update that is
                # the storage it returns, written in place (contracts.reuse_helper)
                return old
        truths = self.call_truths(fr, selfv, line)  # analysis/flagpaths.py
        key = (
            mod,
            qn,
            fr.mode,
            constructing,
            tuple([(n, V.vals_key(env[n])) for n in sorted(env)]),  # names are unique
            fr.guards,
            truths,
            # where the guarded code calls this (a flag set counts for what it encloses)
            (*fr.positions, (fr.func.get("qn"), fr.block_hint)) if fr.guards else (),
        )
        if key in self.memo:
            if not self._later_memo(key):
                self.replay_effects(fr, key)
                return self.memo[key]
            self._retract(key)
        if key in self.active:
            return (V.UNK,)
        # recursion whose argument values differ at every level (a name re-bound by a
        # function-local import, a self-recursive helper fed fresh values) is cut like the
        # exact-context recursion above, not run down to the depth limit
        if sum(1 for s in fr.stack if s[1:] == (mod, qn)) >= RECURSION_LIMIT:
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
            guards=fr.guards,
            stack=fr.stack + ((path, mod, qn),),
            positions=(*fr.positions, (fr.func.get("qn"), fr.block_hint)),
            truths=truths,
        )
        # the parameters are bound at the function's top level: a re-binding in a branch
        # (`if cond: w = F.pad(w)`) keeps the argument as the other path's value
        top = _top_block(f["body"])
        if top is not None:
            sub.blocks.update((p, top) for p in env)
        before = _root_effects(fr.root)
        start = self.report_seq
        try:
            self.exec_body(sub, f["body"])
        finally:
            self.active.discard(key)
        self.memo_span[key] = (start, self.report_seq)
        self.memo_effects[key] = _effects_since(before, fr.root, len(sub.positions))
        ret: tuple = ()
        for r in sub.returns:
            ret = V.union(ret, tuple(_with_step(v, path, f) for v in r))
        ret = ret or (V.NON,)
        self.memo[key] = ret
        self.memo_rank[key] = self.rank
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
            if not self._later_memo(memo_key):
                for ev in self.memo.get(("ctor-notes", memo_key), ()):  # analysis/identity.py
                    self.note_model(fr, ev[1])
                got = self.memo[memo_key]
                # arguments equal to the first call's may carry other built classes
                more = _built(cls_key, (*args, *(v for _, v in kwargs)), ())
                if got and not set(more) <= set(got[0].built):
                    got = (V.with_built(got[0], more), *got[1:])
                return got
            self._retract(memo_key)
        n_events = len(fr.root.events)
        start = self.report_seq
        oid = next(self.oids)
        self.allocs[oid] = []
        cname = cls_key.split(":", 1)[1]
        if cls_key not in self.constructed or self._later_memo(("built", cls_key)):
            self.constructed[cls_key] = TraceStep(fr.path, line, f"{cname} built here")
            self.memo_rank[("built", cls_key)] = self.rank
        obj = AV(V.MODULE if is_module else V.OBJ, cls=cls_key, oid=oid, src="self")
        self.ctor_args[oid] = {id(v) for a in (*args, *(v for _, v in kwargs)) for v in a}
        self.building[oid] = {}
        init = self.index.lookup_method(cls_key, "__init__")
        fields = self.dataclass_fields(cls_key)
        if init is None and fields is None and fr.mode == "post":
            # a dataclass-like class without a readable __init__: its keyword arguments are
            # its fields
            for name, vals in kwargs:
                self.note_field(cls_key, name, vals)
        if memo_key not in self.active and (init is not None or fields is not None):
            self.active.add(memo_key)
            try:
                if fields is not None:
                    self.dataclass_init(fr, obj, fields, args, kwargs, line)
                else:
                    self.call_function(
                        fr, init[0], init[1], args, kwargs, line, (obj,), constructing=oid
                    )
            finally:
                self.active.discard(memo_key)
        allocs = tuple(self.allocs.pop(oid, []))
        self.ctor_args.pop(oid, None)
        self.building.pop(oid, None)
        # each step once: a long chain of kept objects must not push later allocations out
        trace = _unique_steps(s for a in allocs for s in a.trace)
        # an object built from a chosen backend (the experts a kernel wraps) is that backend's
        # choice too, whether or not the backend's allocations are kept on it
        handed = [v for a in (*args, *(v for _, v in kwargs)) for v in a if v.chosen]
        backends = tuple(dict.fromkeys(b for v in (*allocs, *handed) for b in v.backends))
        result = (
            AV(
                V.MODULE if is_module else V.OBJ,
                cls=cls_key,
                items=allocs,
                trace=trace[:120],
                src=f"{cname}(...)",
                value="rebuilt",
                # the object is as certain as its best-established allocation
                conf=max((a.conf for a in allocs), key=lambda c: V.CONF_ORDER[c], default="high"),
                backends=backends,
                chosen=bool(handed) or any(a.chosen for a in allocs),
                built=_built(cls_key, (*args, *(v for _, v in kwargs)), allocs),
            ),
        )
        self.memo[memo_key] = result
        self.memo_rank[memo_key] = self.rank
        self.memo_span[memo_key] = (start, self.report_seq)
        if self.ranked:  # made again for a lower rank (_later_memo): its notes replace
            self.memo.pop(("ctor-notes", memo_key), None)
        notes = tuple(ev for ev in fr.root.events[n_events:] if ev[0] == "modelnote")
        if notes:
            self.memo[("ctor-notes", memo_key)] = notes
        return result

    def dataclass_fields(self, cls_key: str) -> list[tuple[str, bool]] | None:
        """The generated `__init__`'s fields when the class's constructor comes from
        `@dataclass` (the first class in the MRO that defines __init__ or is a dataclass is a
        dataclass without its own __init__), else None."""
        chain = self.index.mro(cls_key)
        for i, k in enumerate(chain):
            crec = self.index.class_record(k)
            if crec is None:
                continue
            if "__init__" in crec["methods"]:
                return None
            if any(d.rsplit(".", 1)[-1] == "dataclass" for d in crec.get("decos", ())):
                out: dict[str, bool] = {}
                for b in reversed(chain[i:]):
                    brec = self.index.class_record(b)
                    if brec and any(
                        d.rsplit(".", 1)[-1] == "dataclass" for d in brec.get("decos", ())
                    ):
                        for name, init in brec.get("fields", ()):
                            out[name] = init
                return list(out.items())
        return None

    def dataclass_init(self, fr: Frame, obj: AV, fields, args, kwargs, line) -> None:
        """A dataclass's generated __init__: each field keeps the argument passed for it,
        then `__post_init__` runs with the object under construction."""
        names = [n for n, init in fields if init]
        bound: dict[str, tuple] = dict(zip(names, args, strict=False))
        for k, v in kwargs:
            if k in names:
                bound[k] = v
        cname = obj.cls.split(":", 1)[1]
        for name, vals in bound.items():
            if fr.mode == "post":
                self.note_field(obj.cls, name, vals)
            for v in vals:
                kept = _kept(v)
                # new storage only: a config that binds registered tensors is not modelled as
                # an alias holder here (see docs/design.md, known limits)
                if kept is not None and _allocates(kept):
                    note = f"{cname} keeps {_describe(kept)} on self.{name} (dataclass field)"
                    self.allocs[obj.oid].append(
                        AV(
                            kept.kind,
                            conf=kept.conf,
                            trace=kept.trace + (TraceStep(fr.path, line, note),),
                            src=kept.src,
                            items=kept.items if kept.kind in (V.OBJ, V.MODULE) else (),
                            value=kept.value if kept.kind in (V.OBJ, V.MODULE) else None,
                            backends=kept.backends,
                            chosen=kept.chosen,
                            handed=True,  # a dataclass field is always what the caller passed
                        )
                    )
        post = self.index.lookup_method(obj.cls, "__post_init__")
        if post is not None:
            self.call_function(fr, post[0], post[1], (), (), line, (obj,), constructing=obj.oid)

    def construct_choices(self, fr: Frame, c: AV, args, kwargs, line) -> tuple:
        """`experts_cls(...)` where experts_cls holds one of the classes an oracle returns:
        each choice may be built; the allocating ones are the backends the finding names."""
        allocs: tuple = ()
        trace: list = []
        handed_steps: list = []
        backends: list = []
        names = []
        built: dict = {}
        for ch in c.items:
            name = ch.cls.split(":", 1)[1]
            names.append(name)
            built[ch.cls] = None
            if self.no_graphs_class(ch.cls) is not None:
                # a backend that runs only where no graphs are captured (a CPU backend):
                # whatever it allocates, no captured graph holds it
                continue
            for v in self.construct(fr, ch.cls, args, kwargs, line):
                built.update(dict.fromkeys(v.built))
                allocs = allocs + tuple(v.items)
                # a backend allocates in its own constructor chain; what it was handed (the
                # quant config the caller built) is the caller's allocation
                own = [a for a in v.items if not a.handed]
                if any(_allocates(a) for a in own):
                    where = ch.trace[0] if ch.trace else TraceStep(fr.path, line, "")
                    backends.append(f"{name} ({where.path}:{where.line})")
                    trace.extend(ch.trace)
                    trace.extend(s for a in own for s in a.trace)
                # what it was handed is traced once, after the choices
                handed_steps.extend(s for a in v.items if a.handed for s in a.trace)
                backends.extend(v.backends)
        trace = _unique_steps([*trace, *handed_steps])
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        note = TraceStep(fr.path, line, f"`{c.src}` is built here: the oracle may choose {shown}")
        all_alloc = len(backends) >= len(names) and names
        return (
            AV(
                V.OBJ,
                cls=c.items[0].cls if len(c.items) == 1 else "",
                items=allocs[:300],
                trace=(note, *trace[:300]),
                src=f"{c.src}(...)",
                value="rebuilt",
                # which choice runs is decided at run time: certain only if every choice allocates
                conf=max((a.conf for a in allocs), key=lambda x: V.CONF_ORDER[x], default="high")
                if all_alloc
                else "medium",
                backends=tuple(dict.fromkeys(backends)),
                chosen=True,
                # the choice set is part of the value's identity (memo keys hold no traces)
                fn=("oracle", *(ch.cls for ch in c.items)),
                built=tuple(built),
            ),
        )

    def construct_any(self, fr: Frame, base_key: str, args, kwargs, line) -> tuple:
        """`experts_cls(...)` with `experts_cls: type[Base]`: any known subclass may be built."""
        memo_key = ("ctor-any", base_key, fr.mode)
        if memo_key not in self.memo:
            self.memo[memo_key] = ((), [], (), (base_key,))
            allocs: tuple = ()
            trace: list = []
            backends: list = []
            built: dict = dict.fromkeys((base_key,))
            for sub in [base_key, *self.index.subclasses(base_key)][:200]:
                for v in self.construct(fr, sub, args, kwargs, line):
                    built.update(dict.fromkeys(v.built or (sub,)))
                    if v.items:
                        allocs = allocs + tuple(v.items)
                        trace.extend(v.trace)
                    if any(_allocates(a) for a in v.items if not a.handed):
                        crec = self.index.class_record(sub) or {"line": 0}
                        path = self.index.path_of(sub.split(":", 1)[0])
                        backends.append(
                            f"{sub.split(':', 1)[1]} ({path}:{crec['line']}, any subclass: "
                            "no oracle read)"
                        )
            self.memo[memo_key] = (allocs, trace, tuple(backends), tuple(built))
        allocs, trace, backends, built = self.memo[memo_key]
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
                trace=(note, *trace[:300]),
                src=f"{base}(...)",
                value="rebuilt",
                conf="medium",
                backends=backends,
                chosen=True,
                built=built,
            ),
        )


def _on_host(q: str, args, kwargs) -> bool:
    """A torch factory that makes a host tensor: no `device=` (or `device="cpu"`), and no
    tensor among its arguments (`torch.tensor(t)` keeps t's device)."""
    if not q.startswith("torch.") or q.count(".") != 1 or q[6:] not in T.HOST_FACTORIES:
        return False
    if any(V.tensorish(a) or any(v.kind == V.MATTR for v in a) for a in args):
        return False
    device = dict(kwargs).get("device")
    return device is None or all(v.kind == V.STR and v.value == "cpu" for v in device)


def _unique_steps(steps) -> tuple:
    """Trace steps in order, each (path, line) once."""
    seen: set = set()
    out = []
    for st in steps:
        if (st.path, st.line) not in seen:
            seen.add((st.path, st.line))
            out.append(st)
    return tuple(out)


# ---------------------------------------------------------------------- root effects of a call
# What a callee does to its root's state (a `del layer.w`, a plain tensor left under a
# checkpoint name, a weight_loader given...) is part of its summary: a memoised call replays it
# into the calling root, with the block positions re-based on the caller's (the masked fact of
# a second root that reaches the same helper must see the same deletion).
_ROOT_DICTS = ("deleted_at", "plain", "rebound", "reshaped")


def _root_effects(root) -> tuple:
    return (
        set(root.deleted),
        {n: set(getattr(root, n)) for n in _ROOT_DICTS},
        set(root.loaders),
        len(root.derived_findings),
        len(root.events),
    )


def _rebase(value, depth: int, kind: str):
    """A position recorded in the callee, made relative to it (cut the caller's prefix)."""
    if kind == "deleted_at":
        return tuple(value)[depth:] if value is not None else None
    path, line, pos = value
    return (path, line, tuple(pos)[depth:] if pos is not None else None)


def _effects_since(before: tuple, root, depth: int) -> tuple:
    deleted, dicts, loaders, n_derived, n_events = before
    out = [("deleted", a, None) for a in sorted(root.deleted - deleted)]
    for name in _ROOT_DICTS:
        cur = getattr(root, name)
        for a in sorted(set(cur) - dicts[name]):
            out.append((name, a, _rebase(cur[a], depth, name)))
    out += [("loaders", a, None) for a in sorted(root.loaders - loaders)]
    out += [("derived", k, src) for k, src in root.derived_findings[n_derived:]]
    out += [("event", ev, None) for ev in root.events[n_events:]]
    return tuple(out)


def _top_block(body) -> tuple | None:
    """The block path of a function body's top level (statements carry theirs)."""
    for st in body:
        where = st[7] if st[0] == "assign" and len(st) > 7 else None
        if st[0] in ("expr", "del") and len(st) > 5:
            where = st[5]
        if where:
            return tuple(where)[:1]
    return None


def _persistent(args_e, kwargs_e) -> bool | None:
    """`register_buffer(name, t, persistent)`'s flag: True by default, None when not a literal."""
    e = next((v for k, v in kwargs_e if k == "persistent"), None)
    if e is None and len(args_e) >= 3:
        e = args_e[2]
    if e is None:
        return True
    if e == ("n", "False"):
        return False
    if e == ("n", "True"):
        return True
    return None


def _deferred_kind(fr: Frame, v: AV) -> bool:
    """Whether a store of `v` in a deferred layer's post-load is judged without copy-back: a
    new buffer anywhere on its path; a new Parameter only in the post-load's own body (a
    helper such as vLLM 0.33's `replace_parameter` rebinds only when no Parameter is there
    yet, and the reload puts the previous pass's Parameter back before running it)."""
    return v.kind != V.PARAM or len(fr.stack) == 1


def _built(cls_key: str, args, allocs) -> tuple:
    """The classes an object built from `args` may hold (analysis/kept.py): its own, and
    those of every object its constructor was handed or kept, nested ones included."""
    out = dict.fromkeys((cls_key,))
    todo = [*args, *allocs]
    n = 0
    while todo and n < 256:
        v = todo.pop()
        n += 1
        if isinstance(v, tuple):  # a value tuple, a TUPLE's slot, a CALLABLE's (name, captures)
            todo.extend(v)
        elif not isinstance(v, AV):
            continue
        elif v.kind in (V.OBJ, V.MODULE):
            out.update(dict.fromkeys(v.built or ((v.cls,) if v.cls else ())))
        elif v.kind in (V.CONTAINER, V.TUPLE, V.CALLABLE, V.BOUND):
            todo.extend(v.items)
    return tuple(out)
