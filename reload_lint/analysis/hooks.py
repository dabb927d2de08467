"""Post-load hooks the reload itself does not run (issue 17, "allocation only on the first
load").

vLLM 0.33.0's loader ends the first load with the model-level hook,
`model.process_weights_after_loading()`, called with no argument (model_loader/utils.py:209-210).
Its reload calls post-load only with an argument: a quant method's `(layer)` and a deferred
attention layer's `(act_dtype)` (`ReloadFacts.hooks_take_args`, read from the tree's reload
module). A post-load root that takes nothing but `self` is therefore not run by the reload
itself; it runs on an update only when post-load code the reload does run calls it. This is
applied only where the fact was read from the audited tree (a vLLM tree: every caller is in
view), not to trees that get the default facts (an out-of-tree package's hook may be called
by vLLM code the run does not read).

The engine follows such calls where it resolves them (the store is then reported from the
calling root, which re-runs). Where a call `x.process_weights_after_loading()` with no argument
is not resolved, it may run any hook that takes none: the classes it may reach are taken from
an `isinstance(x, T)` test around it (T and its kin), from a tensor receiver (Parameter
subclasses), or else every such hook. Candidates reached that way re-run, and so do the calls
they make in turn. A finding is dropped only when every post-load root that reports it is a
hook left over by that closure (and no lazy or apply-time run reports it).

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

from reload_lint.analysis import values as V

ALL = ("*",)  # an unresolved call that may run any hook taking no argument
PARAMS = ("param",)  # one on a tensor: a Parameter subclass's hook
FUNCS = ("fn",)  # one given arguments: a module-level function of a post-load name


class HookRootsMixin:
    """Roots the reload does not run; uses Analyzer state."""

    def hook_only_root(self, mod: str, f: dict) -> bool:
        """A method root taking nothing but `self`, or a module-level function (the loader's
        first-load driver), under a contract whose reload calls post-load only on an
        attribute and with an argument."""
        if f["cls"] and (
            len(f["params"]) != 1 or {"staticmethod", "classmethod"} & set(f["decos"])
        ):
            return self._undeferred_layer_root(mod, f)
        if not f["cls"] and f.get("patches") and len(f["params"]) != 1:
            return False  # a method patched onto a class: `self` and what the reload passes
        contract = self.contract_for(self.index.path_of(mod))
        facts = contract.facts
        # only where the fact was read from the audited tree: there every caller of a hook is
        # in view (an out-of-tree hook may be called by vLLM code the run does not read)
        return contract.layerwise and facts.hooks_take_args and facts.origin.startswith("tree:")

    def _undeferred_layer_root(self, mod: str, f: dict) -> bool:
        """A layer's own post-load (a method of an nn.Module class, given an argument) that
        the reload read from the tree does not run: its layerwise pass runs a layer's own
        `process_weights_after_loading` only for the classes it defers (attention layers,
        `deferred_bases`), and a quant method's for the layer's `quant_method`. Only where
        the facts were read from a tree (a release, or a `--base`), and not for a class whose
        MRO the index cannot resolve to the end (an unknown base may be a deferred one)."""
        if not f["cls"] or {"staticmethod", "classmethod"} & set(f["decos"]):
            return False
        contract = self.contract_for(self.index.path_of(mod))
        facts = contract.facts
        if not (contract.layerwise and facts.origin.startswith("tree:") and facts.deferred_at):
            return False
        key = f"{mod}:{f['cls']}"
        if not self.index.is_module_class(key):
            return False
        bases = set(contract.deferred_bases)
        names = {k.rsplit(":", 1)[-1].rsplit(".", 1)[-1] for k in self.index.mro(key)}
        ext = self.index.external_bases(key)
        names |= {b.rsplit(".", 1)[-1] for b in ext}
        if names & bases:
            return False
        # every base resolved (project classes) or torch's: nothing unknown could defer it
        if any(not b.startswith(("torch.", "nn.")) for b in ext):
            return False
        self.__dict__.setdefault("_undeferred", {})[(mod, f["qn"])] = key
        return True

    def note_hook_call(self, fr, func, recv: tuple, callee: tuple, given: bool) -> None:
        """A call of a post-load name on a post-load path: record what it may run when the
        engine did not resolve it to a project function (events replay with a memoised
        call, so the calling root sees it whichever root ran the helper first). `given`:
        the call passes arguments."""
        if fr.mode != "post" or (callee and all(c.kind in (V.BOUND, V.FUNC) for c in callee)):
            return
        if func[0] != "a" or any(v.kind == V.REF for v in recv):
            # a bare name or a module's attribute: the driver, a module-level function
            fr.root.events.append(("hookcall", FUNCS))
            return
        if given:
            return  # a method given arguments: a root the reload runs in any case
        taint = ALL
        recv_e = func[1]
        typ = next((t for n, t in reversed(fr.types) if recv_e == ("n", n)), None)
        if typ is not None:
            q = self.index.qualify(fr.module, typ)
            r = self.index.resolve(q) if q else None
            if r and r[0] == "class":
                taint = ("cls", f"{r[1]}:{r[2]}")
        elif all(c.kind == V.TMETHOD for c in callee) or (
            recv and all(v.kind in V.TENSORISH for v in recv)
        ):
            taint = PARAMS
        fr.root.events.append(("hookcall", taint))

    def note_hook_key(self, fr, key: tuple) -> None:
        """Which root reports a finding (a post-load root through the events, so a memoised
        helper's findings count for every root that calls it; other runs as re-running)."""
        if fr.mode == "post":
            fr.root.events.append(("hooknote", key))
        else:
            self._key_roots.setdefault(key, set()).add(None)

    def finish_hook_root(self, state, mod: str, qn: str, f: dict, done: bool) -> None:
        """At the end of a post-load root (`done`: its body ran to the end; a root whose
        analysis broke off may call any hook from the code not analysed)."""
        entry = (mod, qn)
        if self.hook_only_root(mod, f):
            self._hook_roots[entry] = f"{mod}:{f['cls']}" if f["cls"] else ""
        calls = self._hook_calls.setdefault(entry, set())
        if not done:
            calls.add(ALL)
        for ev in state.events:
            if ev[0] == "hookcall":
                calls.add(ev[1])
            elif ev[0] == "hooknote":
                self._key_roots.setdefault(ev[1], set()).add(entry)

    def _reaches(self, taint: tuple, cls_key: str) -> bool:
        if taint == ALL:
            return True
        if not cls_key or taint == FUNCS:
            return not cls_key and taint == FUNCS
        if taint == PARAMS:
            return self.index.is_parameter_class(cls_key)
        other = taint[1]
        return (
            cls_key == other
            or cls_key in self.index.mro(other)
            or other in (self.index.mro(cls_key))
        )

    def drop_hook_only(self) -> None:
        """Drop findings reported only from hooks the reload never re-runs."""
        if not self._hook_roots:
            return
        idle = dict(self._hook_roots)  # candidates not (yet) shown to re-run
        work = [t for e, ts in self._hook_calls.items() if e not in idle for t in ts]
        while work and idle:
            taint = work.pop()
            for entry in [e for e, cls in idle.items() if self._reaches(taint, cls)]:
                del idle[entry]
                work.extend(self._hook_calls.get(entry, ()))
        for key, entries in self._key_roots.items():
            fd = self.findings.get(key)
            if fd is None or not entries or not all(e in idle for e in entries):
                continue
            mod, qn = sorted(entries)[0]
            f = self.index.function(mod, qn)
            where = f"{self.index.path_of(mod)}:{f['line']}" if f else mod
            facts = self.contract_for(fd.path).facts
            if (mod, qn) in getattr(self, "_undeferred", {}):
                self.dropped[key] = (
                    f"reached only from {qn} ({where}), the post-load of a layer class the "
                    f"reload does not defer: the layerwise pass runs a layer's own post-load "
                    f"only for {', '.join(facts.deferred_bases)} ({facts.deferred_at}) and no "
                    "post-load it runs calls this one, so an update never re-runs it (first "
                    "load only)"
                )
                del self.findings[key]
                continue
            self.dropped[key] = (
                f"reached only from {qn} ({where}), a post-load hook that takes no argument: "
                f"the reload calls post-load only with one ({facts.hooks_at}) and no post-load "
                "it runs calls this hook, so the reload never re-runs it (first load only)"
            )
            del self.findings[key]
