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
import os
import sys
import traceback

from reload_lint.analysis import branches, triage
from reload_lint.analysis import shapes as S
from reload_lint.analysis import values as V
from reload_lint.analysis.addrcache import AddressCacheMixin
from reload_lint.analysis.calls import CallMixin
from reload_lint.analysis.comprehensions import elements
from reload_lint.analysis.explainlog import ExplainMixin
from reload_lint.analysis.exprs import ExprMixin
from reload_lint.analysis.externals import ExternalViewsMixin
from reload_lint.analysis.feeds import FeedsMixin
from reload_lint.analysis.firstload import FirstLoadMixin
from reload_lint.analysis.flagpaths import FlagTruthMixin
from reload_lint.analysis.frame import (
    MODULE_ANNOT_HINTS,
    MODULE_PARAM_NAMES,
    Frame,
    RootState,
    class_of,
)
from reload_lint.analysis.hooks import HookRootsMixin
from reload_lint.analysis.identity import IdentityCastMixin
from reload_lint.analysis.kept import KeptObjectsMixin
from reload_lint.analysis.oracles import Oracles
from reload_lint.analysis.pathfacts import BUILTIN_SCOPES, ONCE_NAMES, PathFactsMixin, _encloses
from reload_lint.analysis.platforms import PlatformBranchMixin, PlatformScopeMixin
from reload_lint.analysis.prepinputs import PrepInputMixin
from reload_lint.analysis.readers import ReaderMixin
from reload_lint.analysis.resets import FlagResetMixin
from reload_lint.analysis.stores import StoreMixin
from reload_lint.analysis.values import AV
from reload_lint.findings import FileError, Finding, TraceStep
from reload_lint.index.deps import is_apply_name
from reload_lint.index.project import ProjectIndex
from reload_lint.rules import RULES

__all__ = ["Analyzer", "Frame", "RootState"]


class Analyzer(
    ExprMixin,
    CallMixin,
    StoreMixin,
    ReaderMixin,
    PathFactsMixin,
    PlatformScopeMixin,
    PlatformBranchMixin,
    PrepInputMixin,
    FirstLoadMixin,
    FlagResetMixin,
    HookRootsMixin,
    IdentityCastMixin,
    FlagTruthMixin,
    ExplainMixin,
    FeedsMixin,
    ExternalViewsMixin,
    AddressCacheMixin,
    KeptObjectsMixin,
):
    def __init__(self, index: ProjectIndex, root_names, apply_names, contract_for, scopes=()):
        self.index = index
        self._explain_init()  # `reload-lint explain` (analysis/explainlog.py); off by default
        self.root_names = set(root_names)
        self.apply_names = set(apply_names)
        self._apply_t = tuple(sorted(self.apply_names))  # the parameter of views that use them
        self.contract_for = contract_for  # path -> Contract
        self.findings: dict[tuple, Finding] = {}
        self.memo: dict[tuple, tuple] = {}
        self.memo_effects: dict[tuple, tuple] = {}  # memo key -> effects on the root
        # the rank (sequential place) of the root being analysed, and of the root that made
        # each summary, finding and constructor site; while `ranked` (the first pass over the
        # roots) a lower rank's replaces a higher one's (the order-independence test)
        self.rank = 0
        self.ranked = False
        self.memo_rank: dict[tuple, int] = {}
        self._rank_of: dict[tuple, int] = {}
        # reports numbered in order; the number each finding was made at, and the span of
        # numbers each summary's making covered (calls._retract)
        self.report_seq = 0
        self._made: dict[tuple, int] = {}
        self.memo_span: dict[tuple, tuple[int, int]] = {}
        self.active: set[tuple] = set()
        self.oids = itertools.count(1)
        self.constructed: dict[str, TraceStep] = {}
        self.allocs: dict[int, list] = {}
        self._registered: set[str] | None = None
        self._attr_types: dict[tuple[str, str], str | None] = {}
        self._root_of: dict[tuple, tuple[str, str]] = {}  # finding key -> (root path, root qn)
        self._read_attr: dict[tuple, str] = {}  # finding key -> attribute the graph reads
        # reader search (analysis/readers.py): finding key -> (store class, root class, names
        # on the store's path); (class, attr) -> classes seen stored there; class -> reachable
        self._store_site: dict[tuple, tuple] = {}
        self._store_site_module: dict[tuple, str] = {}
        self._conditional: set[tuple] = set()
        self._stored_cls: dict[tuple, str] = {}  # finding key -> class of the stored object
        self._held_types: dict[tuple[str, str], set[str]] = {}
        self._reach: dict[str, list] = {}
        self._holder_walks: dict[tuple, tuple] = {}  # (class, on self) -> (reached, gaps)
        self.cache_modules: list[str] = []  # modules with first-use caches (RL201 candidates)
        self._buffers: set[str] | None = None
        self._none_buffers: frozenset = frozenset()
        self._np_buffers: frozenset = frozenset()
        self._deferred: dict[tuple, bool] = {}
        self.oracles = Oracles(index)  # class-valued attributes chosen by an oracle
        self._class_regs: dict[str, tuple[frozenset, frozenset]] = {}
        self._builders: list[tuple[str, str]] | None = None  # (module class, class it builds)
        self._layer_regs: dict[str, tuple[frozenset, frozenset]] = {}
        self._regs_union: dict[tuple, tuple] = {}  # registered_on's unions (stores.py)
        self._built_by: dict[str, list[tuple[str, str]]] = {}
        self._builds_of: tuple | None = None  # (builders, class -> its builders): stores.py
        # object fields: (class, attribute) -> what objects of that class built on a post-load
        # path hold there; roots that read a field before it was known are run again
        self.fields: dict[tuple[str, str], tuple] = {}
        self.field_parts: dict[tuple[str, str], list] = {}  # (rank, values) of each write
        self._field_top: dict[tuple[str, str], int] = {}  # the highest rank in each
        self.field_waiters: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self.field_dirty: set[tuple[str, str]] = set()
        self.field_dependent: set[tuple] = set()  # memo keys whose computation read a field
        self.ctor_args: dict[int, set[int]] = {}  # object under construction -> ids of its args
        # object under construction -> what its constructor chain stored so far (read back
        # by later frames of the same construction: `self.quant_config` set by the base init)
        self.building: dict[int, dict[str, tuple]] = {}
        # RL906 rows for roots whose analysis raised (crash guard; see _guarded)
        self.errors: list[FileError] = []
        # path facts (analysis/pathfacts.py)
        self.scopes = (*scopes, *BUILTIN_SCOPES)
        self.once_names = ONCE_NAMES
        # flag attr -> {(truth, (path, function, block)): line}: constant flag stores post-load
        self.flag_sets: dict[str, dict] = {}
        self._guard_ctx: dict[tuple, list] = {}  # finding key -> guards of each reaching path
        self._once_vals: dict[
            int, tuple
        ] = {}  # id(value) -> (value, first-use guards it was bound under)
        self._guard_ranks: dict[tuple, list] = {}  # the rank of each (pathfacts.py)
        self._scope_rank: dict[tuple, int] = {}
        self._resets: dict[str, dict] = {}
        self._code_resets: dict[tuple, str | None] = {}  # guard -> where code sets it back
        self._reuse_shapes: dict[tuple, tuple | None] = {}  # reuse helpers (calls.py)
        self._path_modules: dict[str, str] | None = None
        self._ckpt: set[str] | None = None
        self._ffo: dict[str, str | None] = {}
        self._derived_src: dict[tuple, str] = {}  # finding key -> attribute it derives from
        self._masked: dict[tuple, list] = {}
        self._masked_ranks: dict[tuple, list] = {}  # the rank of each (pathfacts.py)
        self.scoped: dict[tuple, object] = {}  # finding key -> Scope it was reached in
        self.dropped: dict[tuple, str] = {}  # finding key -> why path facts removed it
        self.facts: dict[tuple, dict] = {}  # finding key -> triage fields (guard, masked)
        # post-load hooks the reload does not run (analysis/hooks.py)
        self._hook_roots: dict[tuple, str] = {}  # (module, qualname) -> class key
        self._hook_calls: dict[tuple, set] = {}  # root -> what its unresolved hook calls run
        self._key_roots: dict[tuple, set] = {}  # finding key -> reporting roots (None: other)
        self._alias_stable: dict[tuple, list] = {}  # RL107 key -> per root: (stable, names)
        self._feeds: dict[tuple, set] = {}  # store key -> rebuilt objects built from it

    def is_apply(self, name: str) -> bool:
        """Apply/forward-path methods: the configured names and their `forward*`/`apply*` kin."""
        return is_apply_name(name, self.apply_names)

    # ------------------------------------------------------------------ entry points
    def run(self, modules: list[str]) -> list[Finding]:
        roots = []
        names = tuple(sorted(self.root_names))
        for mod in modules:
            for qn, f in self.index.view(mod, "roots", names) or ():
                roots.append((mod, qn, f))
        heirs = self.inherited_roots(names) + self.patched_roots(modules, names)
        # each root's rank is its place in the sequential order; what two roots both make (a
        # finding at one site, a call summary, a constructor's site) is the lower rank's,
        # whatever order they ran in (RELOAD_LINT_SHUFFLE_ROOTS: the order-independence test)
        rank = {id(r): i for i, r in enumerate(roots)}
        # make the registries see every root file before judging
        self._registered = None
        self.ranked = True
        for r in shuffled_roots(roots):
            mod, qn, f = r
            self.rank = rank[id(r)]
            self._guarded(mod, qn, f, self.run_root, mod, qn, f)
        for i, (mod, qn, f, cls_key) in enumerate(heirs):
            self.rank = len(roots) + i  # after the package's own roots, in a fixed order
            self._guarded(mod, qn, f, self.run_root, mod, qn, f, cls_key)
        self.ranked = False
        # roots that read an object field (what an object built after loading holds) before
        # the root that builds the object ran: run them once more, with fresh summaries
        again = [r for r in roots if (r[0], r[1]) in self.field_dirty]  # in rank order
        if again:
            # forget only the summaries computed while a field was read (and the aggregates
            # over every subclass's constructor, which are not on the active stack)
            for key in [*self.field_dependent, *(k for k in self.memo if k[0] == "ctor-any")]:
                self.memo.pop(key, None)
            self.field_dirty.clear()
            # one verdict per store: a site the second run judges again replaces the first
            # run's finding there (a field that held only a registered scale may now hold a
            # fresh one: RL102, not RL107 as well); sites it does not reach again (summaries
            # it reuses) keep theirs
            rerun = {(self.index.path_of(mod), qn) for mod, qn, _ in again}
            first = {
                k: self.findings.pop(k)
                for k, where in list(self._root_of.items())
                if where in rerun and k in self.findings
            }
            for r in again:
                mod, qn, f = r
                self.rank = rank[id(r)]
                self._guarded(mod, qn, f, self.run_root, mod, qn, f)
            judged = {(k[0], k[1], k[3]) for k in self.findings}
            for k, fd in first.items():
                if (k[0], k[1], k[3]) not in judged:
                    self.findings[k] = fd
        self.rank = len(roots)  # the passes after the roots run in one fixed order
        self.run_lazy()
        self.run_apply_caches([*modules, *self.cache_modules])
        self.run_address_caches(getattr(self, "addr_modules", ()))
        self.drop_unresolved_names()
        self.drop_stable_aliases()
        self.drop_hook_only()
        self.resolve_guards()
        self.add_graph_visibility()
        self.drop_prep_inputs()
        self.apply_facts()
        self.drop_hook_lazy_duplicates()  # after the passes that may change a store's rule
        self.attach_rebuild_sites()
        self.finalize_confidence()
        return list(self.findings.values())

    def inherited_roots(self, names) -> list[tuple]:
        """Post-load roots a class of the audited package inherits from a `--base` tree's
        class without overriding them: (base module, qualname, function, subclass key). The
        base's root runs with `self` the subclass, so the subclass's overrides of the methods
        it calls are what runs (`heir_modules`: the audited modules declaring classes, set by
        the engine only when a base is indexed)."""
        from reload_lint.bases import is_base_path

        out = []
        for mod in getattr(self, "heir_modules", ()):
            rec = self.index.record(mod)
            if rec is None:
                continue
            for cname in sorted(rec["classes"]):
                key = f"{mod}:{cname}"
                crec = self.index.class_record(key)
                if crec is None:
                    continue
                for name in names:
                    if name in crec["methods"]:
                        continue
                    hit = self.index.lookup_method(key, name)
                    if hit is None or not is_base_path(self.index.path_of(hit[0])):
                        continue
                    f = self.index.function(*hit)
                    if f is not None and f["cls"]:
                        out.append((hit[0], hit[1], f, key))
        return out

    def patched_roots(self, modules, names) -> list[tuple]:
        """Module-level functions a plugin patches over an engine class's post-load
        (`@register_patch(target="vllm...MLAAttention.process_weights_after_loading")`,
        `Cls.process_weights_after_loading = fn`): roots, run with `self` an object of that
        class when the index resolves it (a `--base` tree), else of an unknown class.
        (module, qualname, function, class key or "") for each."""
        out = []
        for mod in modules:
            # every method the module patches onto another package's class replaces it there
            # (readers and calls through `self` find the patched one: ProjectIndex.patched)
            for qn, _f, target in self.index.view(mod, "patched", ()) or ():
                owner, _, attr = target.rpartition(".")
                key = self._patched_class(mod, owner)
                if key and key != "?":
                    self.index.patched.setdefault(key, {})[attr] = (mod, qn)
            for qn, f, target in self.index.view(mod, "patched", names) or ():
                key = self._patched_class(mod, target.rpartition(".")[0])
                if key:
                    out.append((mod, qn, f, key))
        return out

    def _patched_class(self, mod: str, owner: str) -> str:
        """The class key a patch target's owner names, "?" when the index cannot resolve it
        (an engine class with no base given), "" when it is the patching package's own class
        (a package patching itself is its own code, not a hook on an engine's class)."""
        q = self.index.qualify(mod, owner) or owner
        r = self.index.resolve(q)
        if not r or r[0] != "class":
            return "?" if q.partition(".")[0] != mod.partition(".")[0] else ""
        if r[1].partition(".")[0] == mod.partition(".")[0]:
            return ""
        return f"{r[1]}:{r[2]}"

    def _self_value(
        self, mod: str, f: dict, construct: bool = False, cls_key: str | None = None
    ) -> tuple:
        if cls_key == "?":  # a patched hook whose class the index cannot resolve
            return (AV(V.OBJ, src="self"),)
        if not f["cls"] and cls_key:  # a patched hook: `self` is the patched class's object
            if self.index.is_module_class(cls_key):
                return (AV(V.MODULE, cls=cls_key, src="self"),)
            return (AV(V.OBJ, cls=cls_key, src="self"),)
        if not f["cls"]:
            return ()
        key = cls_key or f"{mod}:{f['cls']}"
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
        """Environment of an entry point: `self` as given, layer-like parameters typed. A
        post-load root's first parameter after `self` is the layer vLLM passes, whatever it
        is called (`def process_weights_after_loading(self, l)`)."""
        params = list(f["params"])
        env: dict = {}
        if selfv and params:
            env[params.pop(0)] = selfv
        ann = dict(f["annotations"])
        for p in params:
            env[p] = self._param_value(p, ann)
        patched = bool(f.get("patches")) and selfv[0].kind != V.MODULE if selfv else False
        if selfv and params and (f.get("name") in self.root_names or patched):
            if not dict(f["annotations"]).get(params[0], "").startswith("type:"):
                env[params[0]] = (AV(V.MODULE, src=params[0]),)
        return env

    def run_root(self, mod: str, qn: str, f: dict, heir: str | None = None) -> None:
        """One post-load root; `heir`: the class (of the audited package) that inherits it
        from a base, whose object `self` is."""
        path = self.index.path_of(mod)
        cls_key = (None if heir == "?" else heir) or (f"{mod}:{f['cls']}" if f["cls"] else None)
        state = RootState(root=qn, cls_key=cls_key, entry=(mod, qn))
        env = self._entry_env(f, self._self_value(mod, f, cls_key=heir))
        step = f"post-load root {qn}"
        if heir and not f["cls"]:
            where = heir.partition(":")[2] if heir != "?" else "an engine class"
            step += f", patched over {where}'s post-load"
        elif heir:
            step += f", inherited by {heir.partition(':')[2]} ({heir.partition(':')[0]})"
        frame = Frame(
            module=mod,
            path=path,
            func=f,
            env=env,
            cls_key=cls_key,
            constructing=0,
            mode="post",
            chain=(TraceStep(path, f["line"], step),),
            root=state,
            stack=((path, mod, qn),),
        )
        done = False
        try:
            self.exec_body(frame, f["body"])
            done = True
        finally:
            self.finish_hook_root(state, mod, qn, f, done)
        self.finish_masked(state, f, frame.cls_key, path)
        self.finish_aliases(state)
        self.finish_feeds(state)
        for fkey, src in state.derived_findings:
            self._derived_src.setdefault(fkey, src)
            if src in state.deleted and fkey in self.findings and deleted_on_path(state, src, fkey):
                fd = self.findings[fkey]
                if fd.rule in ("RL101", "RL102"):
                    fd.rule = "RL202"
                    fd.severity = RULES["RL202"].severity
                    fd.message = (
                        f"`{fd.target}` keeps an unregistered copy derived from `{src}`, and "
                        f"post-load deletes the registered `{src}`: a reload has nowhere to "
                        "write the new value and the copy keeps the old one"
                    )
                    fd.fix = triage.fix_for("RL202", fd.target, AV(V.FRESH, src=src), "", False)

    def note_inplace_transform(self, fr: Frame, st, e) -> None:
        """`vllm-load-weights` only: a post-load statement transforming a loaded tensor in its
        own storage (`layer.w_scale.mul_(127)`, `layer.w.data.div_(s)`, `layer.w *= 2`). The
        next `load_weights` writes the checkpoint's values there and post-load does not run
        again: RL203. So is a subscript store into it (`layer.w[a:b] = f(layer.w[a:b])`, passed
        here as `__setitem__`). A `copy_` / `fill_` / `zero_` is a write, not a transform of the
        values there; `copy_` or a subscript store of a value derived from the receiver itself
        (directly, or through locals computed from it) is one."""
        if fr.mode != "post" or e[0] != "c" or e[1][0] != "a":
            return
        from reload_lint.analysis.contracts import LOAD_WEIGHTS, UNDONE_WHY

        contract = self.contract_for(fr.path)
        if contract.name != LOAD_WEIGHTS:
            return
        recv_e, meth = e[1][1], e[1][2]
        aug = meth.startswith("__i")
        item = meth == "__setitem__"
        if not aug and not item and not (meth.endswith("_") and not meth.startswith("_")):
            return
        if meth in ("zero_", "fill_", "set_", "requires_grad_", "share_memory_", "record_stream"):
            return
        if meth == "copy_" or item:
            # a write of other values is not a transform of the ones there: the value must
            # read the receiver itself (`p.copy_(f(p))`, `p[a:b] = f(p[a:b])`)
            mine = self.render(recv_e).removesuffix(".data")
            val = e[2] if len(e) > 2 else ()
            if not mine or not (self._mentions(val, mine) or self._local_reads(fr, val, mine)):
                return
        if recv_e[0] == "a" and recv_e[2] == "data":
            recv_e = recv_e[1]
        if recv_e[0] not in ("a", "c"):  # an attribute, or `getattr(layer, name)`
            return
        if recv_e[0] == "a":
            # a buffer no checkpoint holds is not written by the load: nothing undoes it
            for h in self.eval(fr, recv_e[1]):
                if h.kind == V.MODULE and recv_e[2] in self.registered_on(fr, h)[1]:
                    return
        vals = self.eval(fr, recv_e)
        for v in vals:
            if v.kind in (V.REG, V.PARAM) or (v.kind == V.MATTR and v.src):
                target = self.render(recv_e) if recv_e[0] == "a" else (v.src or "the tensor")
                if item:
                    note = f"`{target}[...] = ...`"
                else:
                    note = f"`{self.render(e[1]) if not aug else target + ' ' + meth[3:-2] + '='}`"
                shown = AV(
                    V.REG,
                    src=v.src or target,
                    trace=(TraceStep(fr.path, st[1], f"{note} transforms it in place"),),
                )
                self.report(fr, "RL203", st, target, shown, UNDONE_WHY)
                return

    def _local_reads(self, fr: Frame, e, dotted: str) -> bool:
        """Whether a local name `e` reads was computed from attribute `dotted`'s name
        (`dq = dequant(layer.w[a:b]); layer.w[a:b] = quant(dq)`: analysis/feeds.py)."""
        attr = dotted.rsplit(".", 1)[-1]
        held = fr.local_reads
        if not held:
            return False
        stack = [e]
        while stack:
            x = stack.pop()
            if not isinstance(x, tuple) or not x:
                continue
            if x[0] == "n" and len(x) == 2 and isinstance(x[1], str):
                if attr in held.get(x[1], ()):
                    return True
                continue
            # a tagged node's operands, or every item of a plain tuple (call arguments)
            stack.extend(y for y in (x[1:] if isinstance(x[0], str) else x) if isinstance(y, tuple))
        return False

    def _mentions(self, e, dotted: str, depth: int = 0) -> bool:
        """Whether lowered expression tree `e` reads the attribute chain `dotted`."""
        if depth > 40 or not isinstance(e, tuple):
            return False
        if e and e[0] == "a" and len(e) == 3 and isinstance(e[2], str):
            text = self.render(e)
            if text == dotted or text == dotted + ".data":
                return True
        return any(self._mentions(x, dotted, depth + 1) for x in e if isinstance(x, tuple))

    # ------------------------------------------------------------------ statements
    def exec_body(self, fr: Frame, body) -> None:
        for st in self.with_first_load_blocks(fr, body):
            branches.step(fr, st)
            if fr.dead:
                # inside a branch its member test rules out: only the nesting is followed
                if st[0] == "condon":
                    fr.dead += 1
                elif st[0] == "condoff":
                    fr.dead -= 1
                continue
            if st[0] == "condon":
                if self.cond_cannot_hold(fr, st[4]):
                    fr.dead = 1
                continue
            if st[0] == "condoff":
                continue
            fr.line = st[1]
            fr.line_hint = st[1]
            if st[0] == "assign":
                fr.block_hint = st[7] if len(st) > 7 else None
            elif st[0] in ("expr", "del"):
                fr.block_hint = st[5] if len(st) > 5 else None
            try:
                self.exec_stmt(fr, st)
            except RecursionError:
                raise
            except Exception as exc:  # one odd statement must not end the analysis
                if os.environ.get("RELOAD_LINT_DEBUG"):  # --debug: the internal error's traceback
                    traceback.print_exc(file=sys.stderr)
                if fr.mode == "post":  # it may have run any post-load hook (analysis/hooks.py)
                    fr.root.events.append(("hookcall", ("*",)))
                self._incomplete(
                    fr,
                    f"statement at line {st[1]} of {fr.func['qn']} skipped: {type(exc).__name__}",
                    line=st[1],
                )

    def exec_stmt(self, fr: Frame, st) -> None:
        kind = st[0]
        if kind == "assign":
            start = len(fr.root.events)
            vals = self.eval(fr, st[5])
            mid = len(fr.root.events)
            where = st[7] if len(st) > 7 else ()
            if fr.guards and fr.mode == "post":
                vals = self.bound_once(fr, vals)
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
                if tgt[0] == "a":
                    self.note_flag_set(fr, tgt[2], st[5], where)
                elif tgt[0] == "s" and tgt[1][:1] == ("n",) and tgt[1][1] not in fr.env:
                    # `_POOLS[key] = pool` on a module-level registry: its entry is set
                    self.note_flag_set(fr, tgt[1][1] + "[]", st[5], where)
                if tgt[0] == "s":
                    # `p[a:b] = f(p[a:b])`: a store into the tensor's own storage, read as
                    # `p.__setitem__(...)` (a transform when the value is derived from p),
                    # judged on p as it was before the store
                    self.note_inplace_transform(fr, st, ("c", ("a", tgt[1], "__setitem__"), st[5]))
                self.bind(fr, tgt, vals, st)
            self.note_feeds_assign(fr, start, mid, st)
        elif kind == "expr":
            self.note_loader_call(fr, st[4])
            self.eval(fr, st[4], stmt=st)
            self.note_inplace_transform(fr, st, st[4])
        elif kind in ("flagon", "flagoff", "flagexit"):
            self.exec_flag(fr, st)
        elif kind == "ret":
            vals = self.eval(fr, st[4]) if st[4] is not None else (V.NON,)
            fr.returns.append(tuple(S.at_return(v) for v in vals))
        elif kind == "aug":
            tgt = st[4]
            if tgt[0] == "a":
                self.note_inplace_transform(fr, st, ("c", ("a", tgt, "__i" + str(st[5]) + "__")))
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
            fr.types = (*fr.types, (name, typ))
            cur = fr.env.get(name)
            if cur is not None and typ.rsplit(".", 1)[-1] == "Parameter":
                fr.narrowed.append((name, cur))
                src = next((v.src for v in cur if v.src), name)
                fr.env[name] = (AV(V.REG, src=src, value="narrowed"),)
        elif kind == "unnarrow":
            gone = [i for i, (n, _t) in enumerate(fr.types) if n == st[4]]
            if gone:
                fr.types = fr.types[: gone[-1]] + fr.types[gone[-1] + 1 :]
            for i in range(len(fr.narrowed) - 1, -1, -1):
                if fr.narrowed[i][0] == st[4]:
                    _, before = fr.narrowed.pop(i)
                    fr.env[st[4]] = V.union(before, fr.env.get(st[4], ()))
                    break
        elif kind == "for":
            self.bind(fr, st[4], elements(self.eval(fr, st[5])) or (V.UNK,), st)

    def _delete(self, fr: Frame, tgt) -> None:
        if tgt[0] == "a":
            base = self.eval(fr, tgt[1])
            if any(b.kind == V.MODULE for b in base):
                self.note_rebind(fr, tgt[2])
                fr.root.deleted.add(tgt[2])
                fr.root.deleted_at.setdefault(tgt[2], self.root_block(fr))
            fr.heap.pop(self.render(tgt), None)
        elif tgt[0] == "t":
            for t in tgt[2]:
                self._delete(fr, t)

    def bind(self, fr: Frame, tgt, vals: tuple, st) -> None:
        k = tgt[0]
        if k == "n":
            fr.env[tgt[1]] = vals
        elif k == "a":
            # `type(x).attr = v`: a class attribute, shared state kept like x's own
            base = class_of(tgt[1])
            self.store_attr(fr, base, tgt[2], vals, st, self.render(tgt))
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

    # ------------------------------------------------------------------ other roots
    def run_lazy(self) -> None:
        done: set = set()
        # judged before any first-forward run adds what it stores (analysis/kept.py)
        kept = {c for c in sorted(self.constructed) if self.kept_class(c)}
        for cls_key, where in sorted(self.constructed.items()):
            if cls_key in kept:
                # a reload keeps the object the first load stored: its first-forward state
                # is allocated once, on the first load's first forward
                continue
            mod, _, cls = cls_key.partition(":")
            what = f"first-forward analysis of {cls}"
            self._contained(mod, what, self._run_lazy_class, cls_key, where, done)

    def _run_lazy_class(self, cls_key: str, where, done: set) -> None:
        for mod, name, qn in self.index.mro_methods(cls_key):
            if name == "__init__":
                continue
            f = self.index.function(mod, qn)
            if f is None:
                continue
            if not f["guarded"] and not (f.get("fills_cache") and not self._post_called(mod, qn)):
                # a cache the post-load itself fills (a preparation's input) is judged there
                continue
            self.note_lazy_method(cls_key, mod, qn)
            if (mod, qn) in done:
                continue  # run for an earlier class: what it reports stands for this one too
            done.add((mod, qn))
            self._lazy_now = (mod, qn)
            try:
                self._guarded(mod, qn, f, self._run_method, mod, f, "lazy", cls_key, where)
            finally:
                self._lazy_now = None

    def drop_hook_lazy_duplicates(self) -> None:
        """An RL108 the first-forward pass found by running a post-load hook of an object the
        post-load builds (a per-group method whose post-load the layer's post-load calls),
        where the post-load analysis already reports the same store as moving: that store is
        post-load code, one finding says so, and "first forward" would name the wrong
        mechanism. A stale-copy verdict (RL201) at the same store is not a move: both stay."""
        moving = {
            (k[0], k[1], k[3])
            for k, fd in self.findings.items()
            if fd.rule in ("RL101", "RL102", "RL104", "RL105")  # the rule now, not when found
        }
        for k, fd in list(self.findings.items()):
            if fd.rule != "RL108" or (k[0], k[1], k[3]) not in moving:
                continue
            hooks = [
                s.note.rsplit(".", 1)[-1]
                for s in fd.trace
                if s.note.startswith(
                    ("first-forward method ", "reached from first-forward method ")
                )
            ]
            if hooks and all(h in self.root_names for h in hooks):
                self.dropped[k] = (
                    "the store is in a post-load hook the post-load calls on an object it builds:"
                    " reported as a post-load store at the same line"
                )
                del self.findings[k]

    def _post_called(self, mod: str, qn: str) -> bool:
        """Whether the post-load analysis ran function `mod:qn` (a call summary in post mode)."""
        called = self.__dict__.get("_post_called_set")
        if called is None:
            called = {
                (k[0], k[1])
                for k in self.memo
                if type(k) is tuple and len(k) > 2 and k[2] == "post" and type(k[1]) is str
            }
            self._post_called_set = called
        return (mod, qn) in called

    def run_apply_caches(self, modules: list[str]) -> None:
        for mod in sorted(set(modules)):
            self._contained(mod, "apply-time cache analysis", self._run_apply_module, mod)

    def _run_apply_module(self, mod: str) -> None:
        for _qn, f in self.index.view(mod, "apply_guarded", self._apply_t) or ():
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
        except Exception as exc:  # RecursionError included
            what = "nested too deeply" if isinstance(exc, RecursionError) else "internal error"
            msg = f"analysis of {qn} did not complete ({what}: {type(exc).__name__})"
            self.errors.append(FileError("RL906", self.index.path_of(mod), msg, f.get("line", 0)))

    def _contained(self, mod: str, what: str, fn, *args, line: int = 0, path: str = "") -> None:
        """The crash guard for the passes after the roots (first-forward lazy init, apply-time
        caches, the reader search): a failure becomes an RL906 row for the module (or the
        finding) concerned, and the run goes on."""
        try:
            fn(*args)
        except Exception as exc:  # RecursionError included
            how = "nested too deeply" if isinstance(exc, RecursionError) else "internal error"
            msg = f"{what} did not complete ({how}: {type(exc).__name__})"
            err = FileError("RL906", path or self.index.path_of(mod), msg, line)
            if all(
                (e.path, e.line, e.message) != (err.path, err.line, err.message)
                for e in self.errors
            ):
                self.errors.append(err)

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
        state = RootState(f["qn"], cls_key=cls_key)
        fr = Frame(mod, path, f, env, f"{mod}:{f['cls']}", 0, mode, chain, state)
        fr.stack = ((path, mod, f["qn"]),)
        self.exec_body(fr, f["body"])


SHUFFLE_ENV = "RELOAD_LINT_SHUFFLE_ROOTS"


def shuffled_roots(roots: list) -> list:
    """The roots in the order they are analysed: as found (module, then definition order),
    or, with `RELOAD_LINT_SHUFFLE_ROOTS=SEED` set (a test hook, docs/performance.md), in an
    order shuffled by that seed. The output must not depend on it: a property test runs the
    fixtures under several seeds (tests/unit/test_shuffle_roots.py)."""
    seed = os.environ.get(SHUFFLE_ENV)
    if not seed:
        return roots
    import random

    out = list(roots)
    random.Random(seed).shuffle(out)
    return out


def deleted_on_path(state, attr: str, key) -> bool:
    """Whether the root's deletion of `attr` runs whenever the store of finding `key` does
    (so a copy derived from it is left with nothing to refresh it: RL202). A deletion on
    another branch (a fallback that drops the scale it repacked) says nothing about this
    store. Where either position is unknown, the deletion counts."""
    at, here = state.deleted_at.get(attr), state.keys.get(key)
    return at is None or here is None or _encloses(at, here)
