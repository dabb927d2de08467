"""Flag resets in the audited code: a run-once guard whose flag other code sets back.

A guard is run-once when the post-load path sets its flag to the value that skips the guarded
code (analysis/pathfacts.py). If some other function sets the flag back to the value that runs
it (`self._prepared = False`, `layer._done = False`), or deletes it (`del self._packed`,
`delattr(layer, "_converted")`, `vars(self).pop("_fused", None)`), the next post-load after
that runs in full: the guard is not
run-once, and a store behind it is reported with a `guard` text naming the reset.

Where the writes are looked for: the module of the guard and the modules of the guard's class
family (its bases and subclasses). A write on a method's own `self` counts in that family (or,
for a flag tested on the layer, in an nn.Module class: the layer resetting its own flag); a
write on any other object (`layer._done = False`, `method.processed = False`) counts wherever it
is. Writes in the functions that create the object or its weights (`__init__`,
`create_weights`: the flag's initial value), in the guarded function itself, and in another
serving engine's pre-update hook (which the audited engine never calls) do not count.

A run-once guard that tests the derived copy itself (`if self._w32 is None: self._w32 =
self.weight.float()`), with no in-place refresh of that copy in the guarded function, makes the
copy once: on an update it keeps its address and the first load's values. Such a store is not
dropped as run-once but reported as RL201 (stale derived copy). An in-place refresh is a
`.copy_` into the copy, or a call that hands the copy to a function of the audited code whose
body copies another of its parameters into that one (`keep(self._w32, w32)` with
`def keep(dst, src): dst.copy_(src)`, in any module: the keep-and-copy codemod's
`_copy_into_kept`): judged from the callee's body, not its name.

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

from reload_lint.analysis import values as V
from reload_lint.analysis.contracts import RESET_HOOKS, copies_into_params, refreshes_in_place
from reload_lint.index.lower_util import dotted
from reload_lint.rules import RULES

# pre-update hooks of every serving engine: one that the audited contract's engine does not
# call (SGLang's `restore_weights_before_loading` under vLLM's reload) resets nothing there
_ALL_HOOKS = frozenset(h for hooks in RESET_HOOKS.values() for h in hooks)

# the values a write must give the flag for the guarded code to run again ("del": deleted)
_RUN_AGAIN = {
    True: {True, "obj"},
    False: {False, "nonelit", "del"},
    "absent": {"del"},
    "none": {"nonelit", "del"},
    "notnone": {True, False, "obj"},
}


class FlagResetMixin:
    """Uses Analyzer state: index, once_names, _code_resets (memo)."""

    def code_reset(self, g, contract) -> str | None:
        """Where code outside the guarded function sets guard `g`'s flag back, as a text for
        the finding's `guard`, or None."""
        base, attr, run_when, path, _line, (qn, _block) = g
        if attr.startswith("<") or run_when not in _RUN_AGAIN:
            return None
        memo = self._code_resets
        key = (base, attr, run_when, path, qn, contract.name)
        if key in memo:
            return memo[key]
        memo[key] = None
        mod = self._module_at(path)
        f = self.index.function(mod, qn) if mod else None
        if f is None:
            return None
        me = f["params"][0] if f["cls"] and f["params"] else None
        family: set[str] = set()
        if f["cls"]:
            ck = f"{mod}:{f['cls']}"
            family = {ck, *self.index.mro(ck), *self.index.subclasses(ck)}
        on_layer = base != me
        modules = [mod, *sorted({k.partition(":")[0] for k in family} - {mod})]
        want = _RUN_AGAIN[run_when]
        skip = {*self.once_names, *(_ALL_HOOKS - set(contract.reset_hooks))}
        for m in modules:
            for wqn, name, cls, on_self, line, value in (
                self.index.view(m, "flag_writes", attr) or ()
            ):
                if value not in want or name in skip or (m, wqn) == (mod, qn):
                    continue
                if on_self:
                    wk = f"{m}:{cls}"
                    if on_layer and not self.index.is_module_class(wk):
                        continue
                    if not on_layer and wk not in family:
                        continue
                what = "deletes it" if value == "del" else "sets it back"
                memo[key] = f"{wqn} {what} ({self.index.path_of(m)}:{line})"
                return memo[key]
        return None

    def _copies_into(self, mod: str, call) -> frozenset[int]:
        """The argument positions a call made in module `mod` hands to a function of the
        audited code that copies another of its arguments into them in place
        (`contracts.copies_into_params`); empty when the callee is not a function of the
        index (an external, a method, a starred call)."""
        if len(call) > 5 and call[5]:
            return frozenset()
        name = dotted(call[1])
        q = self.index.qualify(mod, name) if name else None
        r = self.index.resolve(q) if q else None
        if r is None or r[0] != "func":
            return frozenset()
        g = self.index.function(r[1], r[2])
        if g is None or g.get("cls"):
            return frozenset()
        return copies_into_params(g)

    def _module_at(self, path: str) -> str | None:
        rev = self._path_modules
        if rev is None:
            rev = self._path_modules = {p: m for m, p in self.index.module_paths.items()}
        return rev.get(path)

    def stale_copy(self, key: tuple, fd, g) -> bool:
        """Report a run-once store as a stale derived copy (RL201) when its value derives from
        another attribute and the guard tests the stored attribute itself; True if it did."""
        src = self._derived_src.get(key)
        attr = fd.target.split("[", 1)[0].rsplit(".", 1)[-1]
        if not src or src == attr or g[1] != attr:
            return False
        mod = self._module_at(g[3])
        f = self.index.function(mod, g[5][0]) if mod else None
        if f is None or refreshes_in_place(f, attr, lambda c: self._copies_into(mod, c)):
            return False
        why = f"derived from `{src}` once, behind a test of the copy itself ({g[3]}:{g[4]})"
        contract = self.contract_for(fd.path)
        v = V.AV(V.FRESH, src=src)
        fd.rule = "RL201"
        fd.severity = RULES["RL201"].severity
        fd.message = contract.message("RL201", fd.target, v, why)
        fd.fix = contract.fix("RL201", fd.target, v, why)
        return True
