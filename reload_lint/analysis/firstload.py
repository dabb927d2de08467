"""Branches a reload never takes: a test of a context flag only a first load sets (issue 17,
class 3 "allocation only on the first load").

The shape, read from the audited tree:

    _already_packed: ContextVar[bool] = ContextVar("already_packed", default=False)

    @contextmanager
    def already_packed():                 # the only code that sets the flag, to a constant
        token = _already_packed.set(True)
        try:
            yield
        finally:
            _already_packed.reset(token)

    def is_already_packed() -> bool:      # the predicate post-load tests
        return _already_packed.get()

    def process_weights_after_loading(self, layer):
        if is_already_packed():           # the block runs only inside `with already_packed():`
            self.kernel = build(...)
            return
        ...

The flag is private to its module (a leading `_`), its default is falsy, and every `.set(...)`
of it sits in a `@contextmanager` function. When the tree's own reload package
(analysis/reloadfacts.py, `ReloadFacts.entered_contexts`) enters none of those context
managers, the reload runs post-load with the flag at its default: a block that runs only while
the predicate holds never runs on an update. A store reached only through such blocks is not
an escape (no-update scope, docs/contracts.md). Applied only where the reload facts were read
from the audited tree: elsewhere the code that enters the context is not in view.

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

from reload_lint.analysis.pathfacts import Scope

_FALSY = (("n", "False"), ("n", "None"), ("k", "int", "0"))


class FirstLoadMixin:
    """Blocks under a first-load-only context flag; uses Analyzer state."""

    def with_first_load_blocks(self, fr, body):
        """`body` with a guard put around the block of each exiting `if <predicate>():` whose
        predicate is a first-load context flag (the lowering marks only the code after such
        a block, `flagexit`; scope_of then sees the block's own guard)."""
        memo = self.__dict__.setdefault("_fl_bodies", {})
        key = (fr.module, id(body))
        got = memo.get(key)
        if got is not None and got[0] is body:
            return got[1]
        out = body
        for j, st in enumerate(body):
            if st[0] != "flagexit" or st[6] is not True or not st[5].endswith("()"):
                continue  # `if <predicate>(): ... return`: the rest runs while it does not hold
            if self.first_load_predicate(fr.module, st[4], st[5]) is None:
                continue
            i = j
            while i > 0 and body[i - 1][0] != "flagexit" and st[1] <= body[i - 1][1] < st[3]:
                i -= 1
            inner = [b for b in map(_block, body[i:j]) if b is not None]
            if not inner or any(b[: len(inner[0])] != inner[0] for b in inner):
                continue  # an `else:` block beside it (it runs while the predicate fails)
            if i == j:
                continue
            on = ("flagon", st[1], st[2], st[3], st[4], st[5], True, st[7])
            off = ("flagoff", st[1], st[2], st[3], st[4], st[5])
            out = (*out[: i + len(out) - len(body)], on, *body[i:j], off, *body[j:])
        memo[key] = (body, tuple(out))
        return memo[key][1]

    def first_load_scope(self, fr) -> Scope | None:
        """The no-update scope of a frame whose guards include a first-load context flag."""
        for g in fr.guards:
            if g[2] is not True or not isinstance(g[1], str) or not g[1].endswith("()"):
                continue
            why = self.first_load_predicate(fr.module, g[0], g[1], fr.path)
            if why:
                return Scope(
                    f"{g[3]}:{g[4]}", "no-update", f"behind `{g[1]}` ({g[3]}:{g[4]}): {why}"
                )
        return None

    def first_load_predicate(self, module: str, base: str, attr: str, path: str = "") -> str | None:
        """Why predicate `base.attr` (seen from `module`) holds only on a first load, or None."""
        memo = self.__dict__.setdefault("_fl_preds", {})
        key = (module, base, attr)
        if key in memo:
            return memo[key]
        memo[key] = None
        name = f"{base}.{attr[:-2]}" if base else attr[:-2]
        q = self.index.qualify(module, name)
        r = self.index.resolve(q) if q else None
        if not r or r[0] != "func":
            return None
        pmod, pqn = r[1], r[2]
        f = self.index.function(pmod, pqn)
        contract = self.contract_for(self.index.path_of(module))
        facts = contract.facts
        if f is None or not contract.layerwise or not facts.origin.startswith("tree:"):
            return None
        flag = _returned_flag(f)
        if flag is None or not flag.startswith("_"):
            return None
        rec = self.index.record(pmod)
        init = (rec or {}).get("globals", {}).get(flag)
        if not _falsy_contextvar(init):
            return None
        cms = []
        for qn in self.index.view(pmod, "callers", "set") or ():
            g = self.index.function(pmod, qn)
            sets = _sets_of(g, flag) if g else []
            if not sets:
                continue
            if not any(d.rsplit(".", 1)[-1] == "contextmanager" for d in g["decos"]):
                return None  # set outside a context manager: not scoped to one load
            if any(v not in (("n", "True"),) and v[0] != "k" for v in sets):
                return None
            cms.append(g["name"])
        if not cms or set(cms) & set(facts.entered_contexts):
            return None
        where = self.index.path_of(pmod)
        memo[key] = (
            f"`{pqn}()` reads `{flag}`, set only inside `{'`, `'.join(sorted(cms))}` "
            f"({where}), a context the reload ({facts.origin[len('tree: ') :]}) never enters: "
            "on an update the block never runs, so the store is made on the first load only "
            "and never re-runs"
        )
        return memo[key]


def _block(st) -> tuple | None:
    """The block path a lowered statement carries, if any."""
    if st[0] == "assign" and len(st) > 7:
        return tuple(st[7] or ())
    if st[0] in ("expr", "del") and len(st) > 5:
        return tuple(st[5] or ())
    if st[0] == "flagon":
        return tuple(st[7])
    return None


def _returned_flag(f: dict) -> str | None:
    """`G` when the function's only return is `G.get()` (docstrings aside)."""
    rets = [st for st in f["body"] if st[0] == "ret"]
    others = [st for st in f["body"] if st[0] not in ("ret", "expr")]
    if len(rets) != 1 or others or rets[0][4] is None:
        return None
    e = rets[0][4]
    if e[0] == "c" and e[1][0] == "a" and e[1][2] == "get" and e[1][1][0] == "n" and not e[2]:
        return e[1][1][1]
    return None


def _falsy_contextvar(init) -> bool:
    """`ContextVar(name, default=<False/None/0>)`."""
    if (
        not init
        or init[0] != "c"
        or init[1] not in (("n", "ContextVar"), ("a", ("n", "contextvars"), "ContextVar"))
    ):
        return False
    kw = dict(init[3]) if len(init) > 3 else {}
    return kw.get("default") in _FALSY


def _sets_of(f: dict, flag: str) -> list:
    """The values `flag.set(v)` gives in `f`."""
    out = []
    for st in f["body"]:
        value = st[5] if st[0] == "assign" else st[4] if st[0] == "expr" else None
        if value and value[0] == "c" and value[1] == ("a", ("n", flag), "set") and value[2]:
            out.append(value[2][0])
    return out
