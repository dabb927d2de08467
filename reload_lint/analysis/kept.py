"""Objects kept across reloads: a first-forward allocation on them runs once (issue 27).

An object a post-load builds is rebuilt on every reload only when something keeps the new one.
The shape the `keep_object` codemod writes (reload_lint/fix/rebuilt.py), and the same idiom
written by hand, stores the built object behind a first-use test of the slot it fills:

    kernel = make_kernel(...)                          # built again on every reload
    if getattr(self, "kernel", None) is not None:
        _copy_into_kept(self.kernel, kernel)           # new values into the kept storage
    if getattr(self, "kernel", None) is None:
        self.kernel = kernel                           # the first load only

On a reload the new object is dropped; the object the first load stored stays, and what its
first forward allocated lazily (a permute scratch, a wrapper) stays with it. The first-forward
pass (RL108, analysis/interp.py `run_lazy`) runs for the classes post-load rebuilds, so a class
every store of which (itself, or an object holding it) runs once is left out.

A class counts as kept only on positive evidence, judged as resolve_guards judges a store
(pathfacts.py): at least one post-load store of an object built for it runs behind a run-once
test the reload does not reset, and no such store runs on every reload. An object carries the
classes built for it (`AV.built`: its own and those of every object its constructor was
handed, analysis/calls.py `construct`); a store on an object built on the same path counts as
one on every reload. A class built but never seen stored is judged as before (rebuilt).

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

from reload_lint.analysis import values as V

_OBJ_KINDS = (V.OBJ, V.MODULE)


class KeptObjectsMixin:
    """Post-load stores of objects, and the classes they keep; uses Analyzer state."""

    def note_obj_store(
        self, fr, vals: tuple, on_rebuilt: bool = False, site: tuple | None = None
    ) -> None:
        """A post-load store of `vals` on a holder (a layer, a method object): each class
        built for an object stored (AV.built), with the guards in force and where the store
        stands. A store on an object built on this same path (`on_rebuilt`) runs whenever
        that object is built: it counts as a store on every reload. `site`: (path, line,
        target) of the statement, for the rebuild sites an RL108 finding names."""
        if fr.mode != "post":
            return
        pos = (*fr.positions, (fr.func.get("qn"), fr.block_hint))
        stores = self.__dict__.setdefault("_obj_stores", {})
        for v in _objects(vals):
            if on_rebuilt:
                ctx = None
            else:
                noted = self._once_vals.get(id(v))
                made = noted[1] if noted is not None and noted[0] is v else ()
                ctx = (tuple(fr.guards), pos, made, fr.path)
            for cls in v.built or (v.cls,):
                stores.setdefault(cls, []).append((ctx, site))

    def _store_runs_once(self, ctx):
        """The run-once test a noted object store runs behind (its own, or the one its value
        was made under) that the reload does not reset, or None: it runs on every reload."""
        if ctx is None:
            return None
        guards, pos, made, path = ctx
        pairs = [(g, pos) for g in guards] + list(made)
        once = [g for g, p in pairs if self._disabled(g, p)]
        if not once:
            return None
        contract = self.contract_for(path)
        resets = self._reset_flags(contract)
        return next(
            (g for g in once if not self._reset_why(g, resets, contract) and not self._cleared(g)),
            None,
        )

    def _cleared(self, g) -> bool:
        """Whether some post-load path sets the tested slot back to None (`self.kernel =
        None`): the test may hold again on a reload, and the object is built anew."""
        return any(
            truth == "nonelit" for truth, _where in self.flag_sets.get(g[1], {}) if g[1][:1] != "<"
        )

    def kept_class(self, cls_key: str) -> str | None:
        """Why objects of `cls_key` are kept across reloads (never rebuilt), or None."""
        memo = self.__dict__.setdefault("_kept_memo", {})
        if cls_key in memo:
            return memo[cls_key]
        memo[cls_key] = None
        once_at = None
        for ctx, _site in self.__dict__.get("_obj_stores", {}).get(cls_key, ()):
            g = self._store_runs_once(ctx)
            if g is None:
                return None  # a store that keeps a new one on every reload
            if once_at is None:
                once_at = g
        if once_at is None:
            return None  # never seen stored: judged as built on every reload
        g = once_at
        memo[cls_key] = (
            f"every post-load store of an object holding it runs behind the first-use test "
            f"of `{g[1]}` ({g[3]}:{g[4]}): a reload drops the object it builds again and "
            "keeps the first load's"
        )
        return memo[cls_key]

    def note_lazy_method(self, cls_key: str, mod: str, qn: str) -> None:
        """The first-forward pass would run method `mod:qn` for objects of `cls_key` (run once
        for the first class that reaches it: what it reports stands for every such class)."""
        runs = self.__dict__.setdefault("_lazy_classes", {})
        runs.setdefault((mod, qn), set()).add(cls_key)

    def note_lazy_report(self, fr, key: tuple) -> None:
        """A first-forward report (RL108) at `key`, made by the method the pass runs now."""
        now = self.__dict__.get("_lazy_now")
        if fr.mode == "lazy" and now is not None:
            self.__dict__.setdefault("_lazy_method_of", {}).setdefault(key, set()).add(now)

    def attach_rebuild_sites(self) -> None:
        """Each RL108 finding's `rebuild_sites`: the post-load stores that keep a new object of
        a class whose first-forward method reported it, on every reload (no run-once test
        holds them). Keeping the object at each of them (the keep_object codemod) makes the
        class kept, and its first forward runs once; a store that is itself reported or not."""
        from reload_lint.bases import is_base_path

        runs = self.__dict__.get("_lazy_classes", {})
        stores = self.__dict__.get("_obj_stores", {})
        for key, fd in self.findings.items():
            if fd.rule != "RL108":
                continue
            methods = self.__dict__.get("_lazy_method_of", {}).get(key)
            if not methods:
                continue
            found = set()
            for cls in {c for m in methods for c in runs.get(m, ())}:
                for ctx, site in stores.get(cls, ()):
                    # a store on an object built on the same path (ctx None) is no site:
                    # editing it would not keep the owner
                    if site is None or ctx is None or is_base_path(site[0]):
                        continue
                    if self._store_runs_once(ctx) is None:
                        found.add(site)
            fd.rebuild_sites = [{"path": p, "line": ln, "target": t} for p, ln, t in sorted(found)]


def _objects(vals: tuple) -> list:
    """Each object among `vals`, containers and tuples looked into."""
    out = []
    todo = list(vals)
    seen = 0
    while todo and seen < 64:
        v = todo.pop()
        seen += 1
        if isinstance(v, tuple):
            todo.extend(v)
        elif not isinstance(v, V.AV):
            continue
        elif v.kind in _OBJ_KINDS and v.cls:
            out.append(v)
        elif v.kind in (V.CONTAINER, V.TUPLE):
            todo.extend(v.items)
    return out
