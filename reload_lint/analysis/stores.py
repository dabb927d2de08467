"""Stores and judging: where a value is stored, which reload contract judges it, the
finding it becomes, and the apply-time reads that make it graph-visible."""

from __future__ import annotations

from dataclasses import replace

from reload_lint.analysis import shapes as S
from reload_lint.analysis import values as V
from reload_lint.analysis.contracts import LOAD_WEIGHTS
from reload_lint.analysis.externals import VIEW_FACT
from reload_lint.analysis.frame import (
    Frame,
    _describe,
    _kept,
)
from reload_lint.analysis.values import AV
from reload_lint.findings import Finding, TraceStep
from reload_lint.rules import RULES


class StoreMixin:
    """Mixed into Analyzer (analysis/interp.py); uses its state and the other rooms' methods."""

    # ------------------------------------------------------------------ registries
    # Registered names are keyed by who registers them on what (index/extract.py):
    # - a method registering on its own `self` (`self.register_buffer("w", ...)`,
    #   `self.w = Parameter(...)`) registers `w` on instances of its class: it counts for a
    #   module of that class, its bases and its subclasses (`self` in a base-class method may
    #   be a subclass instance), and for no other class;
    # - code registering on a module it is handed (a quant method's `create_weights(layer)`,
    #   a helper's `layer.register_parameter("w", ...)`) may register on any layer: those
    #   names count for every module.
    # A module whose class is unknown (the `layer` a post-load root is handed) sees the handed
    # registrations, plus the names registered on itself by a module class that builds the
    # root's class and keeps it (`self.quant_method = _GateMethod()` in `GateLinear.__init__`:
    # GateLinear is the layer _GateMethod's post-load is handed). A name some unrelated class
    # registers on itself does not make `layer.<name>` registered.
    # Both tables are read from the records loaded when first asked (every root file is).
    def _handed_registrations(self) -> tuple[set[str], set[str]]:
        if self._registered is None:
            regs: set[str] = set()
            bufs: set[str] = set()
            builders: list[tuple[str, str]] = []
            for _mod, (registered, buffers, builds) in self.index.each_view("registrations"):
                regs.update(registered)
                bufs.update(buffers)
                builders.extend(builds)
            self._registered, self._buffers = regs, bufs
            self._builders = builders
            kinds = [k for _mod, k in self.index.each_view("buffer_kinds")]
            self._none_buffers = frozenset(n for nones, _np in kinds for n in nones)
            self._np_buffers = frozenset(n for _n, nps in kinds for n in nps)
        return self._registered, self._buffers or set()

    def buffer_kinds(self) -> tuple[frozenset, frozenset]:
        """(buffer names registered only as None, only with `persistent=False`): the first
        are not recorded for a reload, which then deletes them; the second a reload may not
        copy back (analysis/reloadfacts.py)."""
        self._handed_registrations()
        return self._none_buffers, self._np_buffers

    def deferred_root(self, fr: Frame) -> bool:
        """Whether `fr` runs under the post-load of a layer the contract defers: its own
        `process_weights_after_loading`, which the reload calls last on live tensors with no
        copy-back (every module it writes was already processed and copied back)."""
        cls = fr.root.cls_key if fr.mode == "post" else None
        bases = self.contract_for(fr.path).deferred_bases if cls else ()
        if not bases:
            return False
        key = (cls, bases)
        got = self._deferred.get(key)
        if got is None:
            names = {k.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for k in self.index.mro(cls)}
            names |= {b.rsplit(".", 1)[-1] for b in self.index.external_bases(cls)}
            got = self._deferred[key] = bool(names & set(bases))
        return got

    def _layer_registrations(self, root_cls: str) -> tuple[frozenset, frozenset]:
        """Names registered on themselves by module classes that build `root_cls` (or a
        subclass of it) and keep it: the layers that class's post-load is handed."""
        got = self._layer_regs.get(root_cls)
        if got is None:
            self._handed_registrations()
            regs: set[str] = set()
            bufs: set[str] = set()
            for builder, _built in self._builders_of(root_cls):
                cregs, cbufs = self._class_registrations(builder)
                regs |= cregs
                bufs |= cbufs
            got = (frozenset(regs), frozenset(bufs))
            self._layer_regs[root_cls] = got
        return got

    def _class_registrations(self, cls_key: str) -> tuple[frozenset, frozenset]:
        """Names a class, its bases or its subclasses register on `self`."""
        got = self._class_regs.get(cls_key)
        if got is None:
            regs: set[str] = set()
            bufs: set[str] = set()
            self._class_regs[cls_key] = (frozenset(), frozenset())
            for k in [*self.index.mro(cls_key), *self.index.subclasses(cls_key)]:
                mod, _, qn = k.partition(":")
                rec = self.index.record(mod)
                if rec is None:
                    continue
                regs.update(rec.get("self_registered", {}).get(qn, ()))
                bufs.update(rec.get("self_buffers", {}).get(qn, ()))
            got = (frozenset(regs), frozenset(bufs))
            self._class_regs[cls_key] = got
        return got

    def _builders_of(self, root_cls: str) -> list[tuple[str, str]]:
        """(module class, built class) for the module classes that build `root_cls` or a
        subclass of it and keep it on themselves (from the records loaded when first asked)."""
        got = self._built_by.get(root_cls)
        if got is None:
            self._handed_registrations()
            got = list(self._builds().get(root_cls, ()))
            self._built_by[root_cls] = got
        return got

    def _builds(self) -> dict[str, list[tuple[str, str]]]:
        """class -> (module class, built class) for each builder (in builder order) whose
        built class has that class in its MRO: every builder resolved once per registry read,
        not once per root class asked about."""
        if self._builds_of is None or self._builds_of[0] is not self._builders:
            inv: dict[str, list[tuple[str, str]]] = {}
            for builder, dotted_name in self._builders or ():
                if not self.index.is_module_class(builder):
                    continue
                mod = builder.partition(":")[0]
                q = self.index.qualify(mod, dotted_name)
                r = self.index.resolve(q) if q else None
                if r is not None and r[0] == "class":
                    built = f"{r[1]}:{r[2]}"
                    for c in self.index.mro(built):
                        inv.setdefault(c, []).append((builder, built))
            self._builds_of = (self._builders, inv)
        return self._builds_of[1]

    def registered_on(self, fr: Frame, b: AV) -> tuple[set[str], set[str]]:
        """(registered names, buffer names) for attributes of module value `b`."""
        regs, bufs = self._handed_registrations()
        if b.cls:
            cregs, cbufs = self._class_registrations(b.cls)
        elif fr.root.cls_key:
            cregs, cbufs = self._layer_registrations(fr.root.cls_key)
        else:
            return regs, bufs
        # the unions are kept while the four tables are the same objects (callers only read)
        got = self._regs_union.get((b.cls, fr.root.cls_key))
        if got is not None and got[0] is regs and got[1] is bufs:
            if got[2] is cregs and got[3] is cbufs:
                return got[4]
        out = (regs | cregs, bufs | cbufs)
        self._regs_union[(b.cls, fr.root.cls_key)] = (regs, bufs, cregs, cbufs, out)
        return out

    # ------------------------------------------------------------------ stores
    def store_item(self, fr: Frame, tgt, vals, st) -> None:
        base_e = tgt[1]
        inst = _instance_dict(base_e)
        key = _literal_key(tgt[2])
        if inst is not None and key is not None:
            # `x.__dict__["w"] = v`, `vars(x)["w"] = v`: the attribute `x.w`
            self.store_attr(fr, inst, key, vals, st, f"{self.render(inst)}.{key}")
            return
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

    def store_attr(
        self, fr: Frame, base_e, attr: str, vals: tuple, st, target: str, recv=None, mutate=False
    ) -> None:
        if recv is None:
            recv = self.eval(fr, base_e)
        if not mutate:
            fr.heap[target] = vals
        vals = _bound_receivers(vals)
        contract = self.contract_for(fr.path)
        for r in recv:
            if r.kind in (V.OBJ, V.MODULE) and r.cls:
                for v in vals:
                    if v.kind in (V.OBJ, V.MODULE) and v.cls:
                        self.note_held(r.cls, attr, v.cls)  # for the reader search
            if r.kind in (V.OBJ, V.MODULE) and fr.constructing and r.oid == fr.constructing:
                if fr.mode == "post" and not mutate:
                    self.note_field(r.cls, attr, vals)
                if not mutate and r.oid in self.building:
                    self.building[r.oid][attr] = vals
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
                        alias = "alias" if kept.kind == V.PARAM and kept.value == "alias" else None
                        self.allocs[fr.constructing].append(
                            AV(
                                kept.kind,
                                conf=kept.conf,
                                trace=tr,
                                src=kept.src,
                                items=kept.items if kept.kind in (V.OBJ, V.MODULE) else (),
                                value=kept.value if kept.kind in (V.OBJ, V.MODULE) else alias,
                                backends=kept.backends,
                                chosen=kept.chosen,
                                handed=kept.handed
                                or id(v) in self.ctor_args.get(fr.constructing, ()),
                                built=kept.built or ((kept.cls,) if kept.cls else ()),
                            )
                        )
                continue
            if fr.mode == "post":
                if attr == "weight_loader":
                    # `layer.w.weight_loader = ...`: the re-bound Parameter keeps a loader
                    fr.root.loaders.add(self.render(base_e).rsplit(".", 1)[-1])
                    if r.src:
                        fr.root.loaders.add(r.src.rsplit(".", 1)[-1])
                owner = {V.MODULE: "module", V.OBJ: "object", V.MATTR: "held"}.get(r.kind)
                if attr == "data" and r.kind in (V.REG, V.VIEW, V.MATTR, V.PARAM, V.FRESH):
                    owner = "data" if r.kind != V.FRESH else None
                    if r.shape:  # `t.data = ...` may give t another shape (shapes.forget)
                        S.forget(fr, (r,))
                elif r.kind in (V.REG, V.PARAM) and attr != "weight_loader" and attr[:1] != "<":
                    # a Python attribute of the Parameter itself, under a name the code spells
                    # (`layer.weight._w_scale = e8m0`): the Parameter object outlives the
                    # update, what hangs on it is replaced like on any non-Module object, and
                    # nothing registers it. Names only a loop knows copy metadata back
                    # (`setattr(param, key, saved[key])`), not tensors a kernel reads
                    owner = "tensor"
                if owner is None:
                    continue
                if owner in ("module", "object", "held"):
                    # an object kept on a holder (analysis/kept.py)
                    self.note_obj_store(
                        fr, vals, r.value in ("rebuilt", "part"), (fr.path, st[1], target)
                    )
                if owner == "module" and not mutate:
                    self.note_rebind(fr, attr)
                elif owner == "data" and r.src:
                    self.note_rebind(fr, r.src.rsplit(".", 1)[-1])
                if owner == "object" and r.value in ("rebuilt", "part"):
                    # the holder is built on this same path (`quant_config._w1.bias = layer.b`
                    # on the config the root just built): it is rebuilt on every reload, so
                    # an alias of a registered tensor it takes is taken afresh each time
                    vals = tuple(v for v in vals if v.kind not in (V.REG, V.VIEW))
                regs_here = self.registered_on(fr, r) if owner == "module" else (set(), set())
                buffers = regs_here[1]
                # a value that may be new storage or an existing tensor (a field one builder
                # fills with a registered scale and another with `1 / scale`, a reshape that
                # may copy): the new-storage case is the one reported
                m_attr = r.src.rsplit(".", 1)[-1] if owner == "data" and r.src else attr
                deferred = self.deferred_root(fr)
                nones, nps = self.buffer_kinds() if owner == "module" else ((), ())
                for v in sorted(vals, key=_new_storage_first):
                    verdict = contract.judge_store(
                        owner,
                        attr,
                        v,
                        buffers,
                        st,
                        fr,
                        holder=m_attr,
                        deferred=deferred and (v.kind != V.PARAM or len(fr.stack) == 1),
                        none_buffers=nones,
                        nonpersistent=nps,
                        holder_src=r.src if owner == "data" else "",
                        registered=regs_here[0],
                    )
                    self.note_judged(fr, st[1], target, v, verdict, "store", owner)
                    if verdict:
                        rule, why = verdict
                        if deferred and rule in ("RL109", "RL106"):
                            why = f"{why}; a deferred layer's post-load has no copy-back"
                        hsrc = r.src if owner == "data" else ""
                        self.note_masking_store(fr, m_attr, v, owner, rule, hsrc)
                        conf = v.conf if owner != "held" else V.lower(v.conf)
                        key = self.report(fr, rule, st, target, v, why, conf=conf)
                        if key and rule == "RL101" and attr in nones and attr in buffers:
                            self.facts.setdefault(key, {})["masked"] = (
                                f"the next reload fails: `{attr}` is registered as a None "
                                "buffer, which the reload does not record; it deletes the "
                                "filled buffer, this assignment then makes a plain attribute, "
                                'and putting the kernel buffers back raises "attribute '
                                f"'{attr}' already exists\" ({contract.facts.none_buffer_at})"
                            )
                        if key and rule == "RL107":
                            self.note_alias(fr, key, v)
                        if key and v.kind in (V.FRESH, V.PARAM) and _existing_alternative(vals):
                            # new storage on one path only (`F.pad(w)` under a config `if`,
                            # `w` unchanged otherwise): a conditional store, never `high`
                            self._conditional.add(key)
                        if key and owner == "data" and r.src:
                            # `param.data = ...` with `param = getattr(layer, name)`: the
                            # graph reads the attribute param came from, not `param`
                            self._read_attr.setdefault(key, r.src.rsplit(".", 1)[-1])
                        src_attr = v.src.rsplit(".", 1)[-1] if v.src else ""
                        if key and v.kind == V.FRESH and src_attr:
                            fr.root.derived_findings.append((key, src_attr))
                        break
            elif (
                fr.mode in ("lazy", "apply") and st[0] == "assign" and (st[6] or _fills(st, mutate))
            ):
                if r.kind not in (V.OBJ, V.MODULE):
                    if st[6] and attr == "data" and r.kind in (V.REG, V.PARAM, V.MATTR):
                        self._first_use_swap(fr, st, base_e, r, vals, target)
                    continue
                if fr.mode == "lazy" and self.contract_for(fr.path).name == LOAD_WEIGHTS:
                    # nothing is rebuilt or deleted on an update: first-forward state stays
                    continue
                for v in vals:
                    if st[6] and v.kind == V.PARAM and self._first_use_rewrap(fr, st, r, attr, v):
                        break
                    if fr.mode == "lazy" and _kept(v) is not None and v.kind != V.REG:
                        self.report(fr, "RL108", st, target, v, "allocated lazily on first forward")
                        break
                    if fr.mode == "lazy" and v.kind == V.OBJ and v.value == "external":
                        why = (
                            "a third-party object built on first use, which may own device buffers"
                        )
                        self.report(fr, "RL108", st, target, v, why)
                        break
                    if fr.mode == "apply" and v.kind == V.FRESH and v.src:
                        self.report(fr, "RL201", st, target, v, f"derived from `{v.src}`")
                        break
                else:
                    for v in vals:
                        self.note_judged(fr, st[1], target, v, None, fr.mode, "object")

    def _first_use_swap(self, fr: Frame, st, base_e, r: AV, vals: tuple, target: str) -> None:
        """`vllm-load-weights`: `p.data = f(p)` on a loaded Parameter inside a first-use block
        (`if layer.state == INIT: layer.state = READY; ...`, `if self._w is None:`). The block
        runs once; an update writes the checkpoint's values into p again and nothing runs the
        block a second time, so the forward reads untransformed values (RL203)."""
        from reload_lint.analysis.contracts import UNDONE_FIRST_USE_WHY

        if self.contract_for(fr.path).name != LOAD_WEIGHTS:
            return
        if base_e[0] != "a":
            return
        holders = [h for h in self.eval(fr, base_e[1]) if h.kind == V.MODULE]
        regs = [self.registered_on(fr, h) for h in holders]
        if any(base_e[2] in b for _p, b in regs):
            return  # a buffer no checkpoint holds is not written by the load: nothing undoes it
        if r.kind == V.MATTR and not any(base_e[2] in p for p, _b in regs):
            return  # a plain attribute of the module, not a loaded Parameter
        for v in vals:
            if v.kind in (V.FRESH, V.VIEW, V.PARAM):
                step = TraceStep(fr.path, st[1], f"`{target} = ...` in a block that runs once")
                shown = AV(V.REG, src=r.src or target, trace=(*v.trace, step))
                self.report(fr, "RL203", st, target, shown, UNDONE_FIRST_USE_WHY)
                return

    def _first_use_rewrap(self, fr: Frame, st, r: AV, attr: str, v: AV) -> bool:
        """`vllm-load-weights`: a loaded Parameter bound again to a new Parameter inside a
        first-use block (`layer.g_idx = Parameter(torch.empty(0))` behind `if layer.state ==
        REPACK:`). The next `load_weights` writes the checkpoint into the new object, which
        has neither the old shape nor its loader, and the block does not run again (RL203)."""
        from reload_lint.analysis.contracts import FIRST_USE_REBIND_WHY

        if r.kind != V.MODULE or self.contract_for(fr.path).name != LOAD_WEIGHTS:
            return False
        if attr not in self.checkpoint_names() or attr in self.registered_on(fr, r)[1]:
            return False  # not a name the weights are created under: no load writes it
        step = TraceStep(
            fr.path, st[1], f"`{self.render(st[4][0])} = ...` in a block that runs once"
        )
        shown = AV(V.REG, src=f"{r.src}.{attr}" if r.src else attr, trace=(*v.trace, step))
        return bool(self.report(fr, "RL203", st, f"{r.src}.{attr}", shown, FIRST_USE_REBIND_WHY))

    # ------------------------------------------------------------------ stable aliases
    # An alias of a registered tensor taken after loading (RL107) is an escape only when the
    # layer's registered name stops holding that tensor later in the same post-load: the
    # reload's copy-back restores what is registered under each name at the end of the pass
    # (the storage registered when graphs were captured), so an alias of the final registered
    # tensor is, at capture time, an alias of the storage copy-back keeps. An alias taken
    # before the name is re-bound, re-registered, swapped through `.data` or deleted holds an
    # intermediate tensor that copy-back never refreshes.
    def note_rebind(self, fr: Frame, attr: str) -> None:
        if fr.mode == "post" and attr:
            fr.root.events.append(("rebind", attr))

    def note_alias(self, fr: Frame, key: tuple, v: AV) -> None:
        fr.root.events.append(("alias", key, _alias_names(v)))

    def finish_aliases(self, state) -> None:
        """At the end of a root: for each alias it took, whether the names it aliases were
        still registered untouched when the root ended."""
        pending: list[tuple] = []
        for ev in state.events:
            if ev[0] == "alias":
                pending.append([ev[1], ev[2], True])
            elif ev[0] == "rebind":
                for p in pending:
                    if ev[1] in p[1]:
                        p[2] = False
        for key, names, stable in pending:
            self._alias_stable.setdefault(key, []).append((stable and bool(names), names))

    def drop_stable_aliases(self) -> None:
        for key, verdicts in self._alias_stable.items():
            fd = self.findings.get(key)
            if fd is None or fd.rule != "RL107" or not all(ok for ok, _n in verdicts):
                continue
            names = sorted({n for _ok, ns in verdicts for n in ns})
            shown = ", ".join(f"`{n}`" for n in names)
            why = (
                f"aliases {shown}, still registered on the layer when post-load ends: "
                "copy-back restores that storage, which is what graphs captured"
            )
            # a view an external callee returns, as the tree asserts (analysis/externals.py)
            via = dict.fromkeys(s.note for s in fd.trace if VIEW_FACT in s.note)
            self.dropped[key] = "; ".join((why, *via))
            del self.findings[key]

    # ------------------------------------------------------------------ object fields
    def note_field(self, cls_key: str, attr: str, vals: tuple) -> None:
        """An object of class `cls_key` built on a post-load path holds `vals` in `attr`."""
        keep = tuple(v for v in vals if v.kind in _FIELD_KINDS)
        if not keep:
            return
        key = (cls_key, attr)
        old = self.fields.get(key, ())
        # each root's writes kept apart, the field their union in rank order (the union keeps
        # the first value of each key, up to its cap): the sequential order's value whatever
        # order the roots ran in. After the first pass every write ranks last.
        rank = self.rank if self.ranked else 1 << 30
        writes = self.field_parts.get(key)
        if writes is None:
            writes = self.field_parts[key] = []
        writes.append((rank, keep))
        if rank >= self._field_top.get(key, -1):
            self._field_top[key] = rank
            new = V.union(old, keep)  # a write in rank order: the union so far, extended
        else:  # a lower rank after a higher one (a shuffled order): in rank order again
            writes.sort(key=lambda w: w[0])  # stable: a rank's writes stay in their order
            new = V.union(*(w[1] for w in writes))
        if new != old:
            self.fields[key] = new
        if len(new) != len(old):
            self.field_dirty |= self.field_waiters.get(key, set())

    def read_field(self, fr: Frame, b: AV, attr: str, line: int) -> tuple:
        """What an object built after loading holds in `attr` (a tensor it allocated, an object
        it was given), or () when unknown. Each read is noted: when a root builds an object that
        adds to the field later, the reading root runs again at the end."""
        key = (b.cls, attr)
        if fr.root.entry:
            self.field_waiters.setdefault(key, set()).add(fr.root.entry)
        self.field_dependent |= self.active  # the summaries being computed depend on it
        got = self.fields.get(key)
        if got is None:
            return ()
        # a part of an object this path built is rebuilt with it on every reload
        part = "part" if b.value in ("rebuilt", "part") else None
        out = []
        for v in got:
            if v.kind in (V.OBJ, V.MODULE):
                # the object it holds, as a reference (not rebuilt by this read)
                out.append(AV(v.kind, conf=v.conf, cls=v.cls, src=f"{b.src}.{attr}", value=part))
                continue
            if v.kind in (V.FRESH, V.PARAM) and v.trace:
                note = (
                    f"`{b.src}.{attr}` holds it: a tensor allocated after loading, not registered"
                )
                v = replace(v, trace=v.trace + (TraceStep(fr.path, line, note),))
            out.append(v)
        return tuple(out)

    # ------------------------------------------------------------------ findings
    def report(self, fr: Frame, rule: str, st, target: str, v: AV, why: str, conf=None) -> tuple:
        # a store in a shared helper under a name the caller passes is reported at the call
        moved = self.relocate(fr, target)
        if moved is None:
            path, line, symbol, shown = fr.path, st[1], fr.func["qn"], target
            column, end_line = (st[2] if len(st) > 2 else 1), (st[3] if len(st) > 3 else st[1])
        else:
            path, line, symbol, shown = moved
            column, end_line = 1, line
        key = (path, line, rule, shown)
        self.report_seq += 1  # each report numbered: what a summary reported (calls._retract)
        if not self.note_report(fr, key, v):
            return ()  # out of scope (pathfacts.py): no finding
        if rule == "RL108":
            self.note_lazy_report(fr, key)
        self.note_feeds_report(fr, key, rule, shown)
        if key in self.findings:
            if not (self.ranked and self._rank_of.get(key, -1) > self.rank):
                return key
            # made first by a root later in the sequential order: this root's stands
            self._stored_cls.pop(key, None)
            self._conditional.discard(key)
        self._rank_of[key] = self.rank
        self._made[key] = self.report_seq
        root = fr.chain[0]
        self._root_of[key] = (root.path, root.note.rsplit(" ", 1)[-1])
        self.note_store_site(key, fr, st)
        self.note_stored_class(key, v)
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
        fd = self.findings[key] = Finding(
            rule=rule,
            path=path,
            line=line,
            column=column,
            end_line=end_line,
            symbol=symbol,
            target=shown,
            message=contract.message(rule, shown, v, why),
            severity=rule_meta.severity,
            confidence=conf or v.conf,
            trace=dedup[:160],
            contract=contract.name,
            fix=contract.fix(rule, shown, v, why),
            backends=list(v.backends),
        )
        self.note_created(key, fd, (fr.path, st[1]))
        return key


def _alias_names(v: AV) -> frozenset:
    """The registered names an RL107 value aliases; empty when one of them is unknown (then
    nothing can be said about its stability)."""
    if v.kind in (V.REG, V.VIEW) or (v.kind == V.PARAM and v.value == "alias"):
        parts = [v]
    elif v.kind == V.CALLABLE:
        parts = [c for _n, cap in v.items for c in cap if c.kind in (V.REG, V.VIEW)]
    elif v.kind == V.TUPLE:
        parts = [c for group in v.items for c in group if c.kind in (V.REG, V.VIEW)]
    elif v.kind in (V.CONTAINER, V.OBJ, V.MODULE):
        parts = [c for c in v.items if c.kind in (V.REG, V.VIEW)]
    else:
        parts = []
    names = set()
    for c in parts:
        name = c.src.rsplit(".", 1)[-1] if c.src else ""
        if not name.isidentifier():
            return frozenset()
        names.add(name)
    return frozenset(names)


def _existing_alternative(vals: tuple) -> bool:
    """Whether the stored value may also be a tensor that already exists (a registered one or
    a view of it) rather than new storage."""
    return any(v.kind in (V.REG, V.VIEW) for v in vals)


def _new_storage_first(v: AV) -> int:
    return 0 if v.kind in (V.FRESH, V.PARAM) else 1


# what an object field keeps for later reads: tensors and the objects it holds
_FIELD_KINDS = frozenset({V.FRESH, V.PARAM, V.REG, V.VIEW, V.OBJ, V.MODULE, V.CONTAINER})


def _bound_receivers(vals: tuple) -> tuple:
    """A bound method of an object built on the path (`self.fn = runner.run`) keeps that
    object alive, and with it what its constructor chain allocated: judged as storing the
    object. Other bound methods are kept as they are (the heap keeps the method itself)."""
    if not any(v.kind == V.BOUND for v in vals):
        return vals
    out: tuple = ()
    for v in vals:
        if v.kind == V.BOUND and v.items:
            held = tuple(
                r
                for r in v.items[0]
                if r.kind in (V.OBJ, V.MODULE) and r.value == "rebuilt" and r.items
            )
            if held:
                out = V.union(out, held)
                continue
        out = V.union(out, (v,))
    return out


def _instance_dict(e):
    """x for `x.__dict__` / `vars(x)`, else None."""
    if e[0] == "a" and e[2] == "__dict__":
        return e[1]
    if e[0] == "c" and e[1] == ("n", "vars") and len(e[2]) == 1 and not e[3]:
        return e[2][0]
    return None


def _literal_key(index):
    """The string of a subscript that is one string literal, else None."""
    if index[0] == "k" and index[1] == "str" and isinstance(index[2], str) and index[2]:
        return index[2]
    return None


def _fills(st, mutate: bool) -> bool:
    """An item store into a container attribute inside a block of the function (`if buf is
    None: buf = torch.ones(n); self._bufs[n] = buf`): a cache filled on first use, which later
    calls read back, as `if self._x is None: self._x = ...` is (index/lower_defs.py
    `fills_cache`)."""
    return mutate and len(st) > 7 and len(st[7]) > 1
