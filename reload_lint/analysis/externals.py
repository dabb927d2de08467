"""External callees the tree itself states return a view of their first argument.

A call into a package whose source is not in the tree (`flashinfer...`, a vendor kernel
library) is judged by its result alone, which the analysis cannot see: a tensor argument makes
it "an unknown callee assumed to return a new tensor" (analysis/calls.py `call_external`). Some
trees say otherwise, in code: a function calls the external and asserts that the result shares
its argument's storage,

    mma = convert_layout(scale.reshape(m, k), ...)
    assert mma.data_ptr() == scale.data_ptr()

(also `x.untyped_storage().data_ptr()`, either operand order, the argument given as a view of
the asserted tensor). The assertion holds wherever the callee is called, so every call of it
in the tree returns a view of its first argument: a view of a registered tensor is then judged
as any other view of registered storage (copy-back refreshes it in place), and a fresh
argument stays fresh. Without such an assertion nothing changes.

Where the facts come from, and how the cache sees them: the lowering records each such
assertion (`storage_asserts`, index/extract.py), the `alias_asserts` view (index/deps.py) pairs
it with the call that bound the asserted name, and the engine hands the analysis the modules
whose text asserts a `data_ptr()` (a text fact, engine.py `_text_facts`). Those records are
read through the index like any other, so an edit to an asserting file re-runs the analysis
exactly when what it asserts changes.

Callees are named by their qualified name, so a call through an import and a call through a
lazy-import wrapper (`name = wrap("pkg.mod", "func")` at module level, `wrap` a project
function that `getattr`s its second parameter off an imported module) are the same callee.

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

from reload_lint.analysis import values as V
from reload_lint.findings import TraceStep
from reload_lint.index.extract import dotted

# how the trace step of such a view starts (explainlog names the fact from it)
VIEW_FACT = "returns a view of its first argument"
_MAX_NESTING = 3  # nested functions searched for the wrapper's getattr


def _is_dotted_name(s: object) -> bool:
    return isinstance(s, str) and bool(s) and all(p.isidentifier() for p in s.split("."))


def _str_const(e) -> str | None:
    return e[2] if e and e[0] == "k" and e[1] == "str" and isinstance(e[2], str) else None


def _bound_args(f: dict, e) -> dict:
    """Parameter name -> argument expression of call `e` of function `f` (no `*args`)."""
    if e[5]:
        return {}
    out = dict(zip(f["params"], e[2], strict=False))
    for k, v in e[3]:
        out.setdefault(k, v)
    return out


class ExternalViewsMixin:
    """Lazy-import names and asserted views of external callees; uses Analyzer state."""

    alias_modules: tuple[str, ...] = ()  # set by the engine: modules asserting a data_ptr equality

    def external_name(self, q: str) -> str:
        """The qualified name of the external function `q` names: `q` itself, or for a
        module-level lazy-import wrapper `name = wrap("pkg.mod", "func")`, `pkg.mod.func`."""
        memo = self.__dict__.setdefault("_external_names", {})
        if q not in memo:
            memo[q] = self._lazy_target(q) or q
        return memo[q]

    def _lazy_target(self, q: str) -> str | None:
        split = self.index.split_qualified(q)
        if split is None or not split[1] or "." in split[1]:
            return None
        mod, name = split
        bound = self.index.module_name(mod, name)
        if bound is None or bound[0] != "global" or bound[1] is None:
            return None
        e = bound[1]
        if e[0] != "c" or e[1][0] not in ("n", "a"):
            return None
        d = dotted(e[1])
        fq = self.index.qualify(mod, d) if d else None
        r = self.index.resolve(fq) if fq else None
        if r is None or r[0] != "func":
            return None
        f = self.index.function(r[1], r[2])
        if f is None or f["cls"] or len(f["params"]) < 2:
            return None
        args = _bound_args(f, e)
        module = _str_const(args.get(f["params"][0]))
        attr = _str_const(args.get(f["params"][1]))
        if not _is_dotted_name(module) or not attr or not attr.isidentifier():
            return None
        if not self._getattrs(r[1], f, f["params"][1], _MAX_NESTING):
            return None
        return f"{module}.{attr}"

    def _getattrs(self, mod: str, f: dict, param: str, depth: int) -> bool:
        """Whether `f` or a function nested in it calls `getattr(<x>, param, ...)`."""
        from reload_lint.index.deps import calls_in

        for st in f["body"]:
            if st[0] == "def" and depth > 0:
                g = self.index.function(mod, st[5])
                if g is not None and self._getattrs(mod, g, param, depth - 1):
                    return True
                continue
            calls: list = []
            for part in st[4:]:
                calls_in(part, calls)
            for c in calls:
                if c[1] == ("n", "getattr") and len(c[2]) >= 2 and c[2][1] == ("n", param):
                    return True
        return False

    def asserted_views(self) -> dict[str, tuple[str, int]]:
        """Qualified external callee -> (path, line) of an assertion that its result shares
        its first argument's storage (the first one, by module and line)."""
        got = self.__dict__.get("_asserted_views")
        if got is None:
            got = {}
            for mod in self.alias_modules:
                for spelling, _qn, line in self.index.view(mod, "alias_asserts") or ():
                    q = self._external_callee(mod, spelling)
                    if q is not None:
                        got.setdefault(q, (self.index.path_of(mod), line))
            self.__dict__["_asserted_views"] = got
        return got

    def _external_callee(self, mod: str, spelling: str) -> str | None:
        """Qualified name of the callee `spelling` of `mod`, when it is not the project's own
        (a project function is analysed itself, whatever a caller asserts of it)."""
        head = spelling.partition(".")[0]
        bound = self.index.module_name(mod, head)
        if bound is None:
            return None
        if bound[0] == "import":
            q = self.index.qualify(mod, spelling)
        elif bound[0] == "global" and bound[1] is not None:
            q = f"{mod}.{spelling}"
        else:
            return None  # a function or class of this module, or a name bound nowhere
        if not q:
            return None
        q = self.external_name(q)
        if "." not in q or self.index.resolve(q) is not None:
            return None
        return q

    def external_view(self, fr, q: str, args, line: int) -> tuple | None:
        """`q(x, ...)` for an external `q` the tree asserts returns a view of `x`: `x`'s
        storage, so a view of each registered tensor `x` may be, and every other value of `x`
        as it is (a fresh `x` is still new storage, an unknown one stays unknown); None when
        no assertion names `q` or the call has no positional first argument."""
        first = args[0] if args else ()
        if not first:
            return None
        name = self.external_name(q)
        where = self.asserted_views().get(name)
        if where is None:
            return None
        step = TraceStep(fr.path, line, f"`{name}` {VIEW_FACT} (asserted at {where[0]}:{where[1]})")
        out: tuple = ()
        last = name.rsplit(".", 1)[-1]
        for v in first:
            if v.kind in (V.REG, V.VIEW):
                views = self.view_of(fr, v, last, line)
                out = V.union(out, tuple(_stepped(w, step) for w in views))
            elif v.kind in V.TENSORISH:
                out = V.union(out, (_stepped(v, step),))
            else:
                out = V.union(out, (v,))
        return out


def _stepped(v, step: TraceStep):
    from dataclasses import replace

    return replace(v, trace=v.trace + (step,))
