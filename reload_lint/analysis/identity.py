"""Identity casts: a `.to(dtype=D)` of a tensor that already has dtype D is no allocation.

The dtypes come from analysis/dtypes.py (read from where the tensors are made). Two hooks in
the call evaluation (analysis/calls.py) use them:

- `typed_layer_call`: a method called on the layer a root is handed, whose class the
  interpreter does not know (`layer._routing_tables()`), returns what the class its root's
  methods annotate the layer with (`layer: "RoutedExperts"`) returns -- but only the dtypes of
  the tensors in it, as unknown values tagged `("dtype", D)`: nothing else about the layer is
  assumed, so every other judgement stays what it was;
- `identity_cast`: `t.to(dtype=X)` (only a dtype) with every value of `t` tagged with dtype D
  and X read as D returns `t` itself.

Each use is noted on the root (`("modelnote", text)` events, replayed with memoised calls), so
`reload-lint explain` names the fact on the store it kept from being reported.

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

from reload_lint.analysis import values as V
from reload_lint.analysis.dtypes import Dtypes, single_dtype
from reload_lint.analysis.values import AV
from reload_lint.findings import TraceStep

_DTYPE_ONLY_KW = frozenset({"dtype", "non_blocking"})


def dtype_of(v: AV) -> str | None:
    """The dtype an unknown value is tagged with (see typed_layer_call), or None."""
    val = v.value
    if v.kind == V.UNKNOWN and isinstance(val, tuple) and len(val) == 2 and val[0] == "dtype":
        return val[1]
    return None


class IdentityCastMixin:
    """Dtype-tagged layer calls and identity casts; uses Analyzer state."""

    @property
    def dtypes(self) -> Dtypes:
        got = self.__dict__.get("_dtypes")
        if got is None:
            got = self.__dict__["_dtypes"] = Dtypes(self.index)
        return got

    def note_model(self, fr, text: str) -> None:
        ev = ("modelnote", text)
        if ev not in fr.root.events:
            fr.root.events.append(ev)

    def typed_layer_call(self, fr, recv: tuple, meth: str, line: int) -> tuple | None:
        """`layer.<meth>()` on a layer of unknown class: the dtypes of what it returns, from
        the class the root's class annotates that parameter with; None if nothing is read."""
        root_cls = fr.root.cls_key
        names = {r.src for r in recv}
        if (
            not root_cls
            or len(names) != 1
            or not all(r.kind == V.MODULE and not r.cls for r in recv)
        ):
            return None
        layer_cls = self.dtypes.declared_class(root_cls, next(iter(names)))
        if layer_cls is None:
            return None
        vals = self.dtypes.method_returns(layer_cls, meth)
        if not _has_dtype(vals):
            return None
        return _to_values(vals)

    def identity_cast(self, fr, recv: tuple, meth: str, args_e, kwargs_e, line: int):
        """`t.to(dtype=X)` / `t.to(X)` with t of dtype D and X read as D: t itself."""
        if meth != "to" or not recv:
            return None
        kw = dict(kwargs_e)
        if kw.keys() - _DTYPE_ONLY_KW or len(args_e) + ("dtype" in kw) != 1:
            return None
        have = {dtype_of(r) for r in recv}
        if len(have) != 1 or None in have:
            return None
        target = kw.get("dtype") or args_e[0]
        got = self.dtypes.of(fr.module, fr.func, target, fr.cls_key)
        want = single_dtype(got)
        if want is None or want not in have:
            return None
        where = next((s for r in recv for s in r.trace), None)
        made = f" (made at {where.path}:{where.line})" if where else ""
        text = (
            f"{fr.path}:{line}: `.to(dtype={want.split('.')[-1]})` of a {want} tensor{made} "
            "returns the tensor itself: no new storage"
        )
        assumed = self.dtypes.assumed_for(got)
        if assumed:
            text += " (" + "; ".join(assumed) + ")"
        self.note_model(fr, text)
        return tuple(
            AV(V.UNKNOWN, value=r.value, trace=(*r.trace, TraceStep(fr.path, line, text)))
            for r in recv
        )


def _has_dtype(vals: frozenset) -> bool:
    for it in vals:
        if it[0] == "D":
            return True
        if it[0] == "T" and any(_has_dtype(g) for g in it[1]):
            return True
    return False


def order_text(x) -> str:
    """repr(x), with every int written 12 digits wide and a set's items in sorted order: a
    total order on dtype items (("D", dtype, path, line), ("T", groups), ...) in which two
    lines compare as numbers. Plain repr compared `12` before `9`, so a comment line that moved
    line 9 to 10 could change which of two equal dtype items (and so which trace step) came
    first; with numbers compared as numbers the order, and the output, only follow the line
    map (the line-shift cutoff, reload_lint/incremental/shiftcut.py, relies on it)."""
    if isinstance(x, tuple):
        inner = ", ".join(order_text(i) for i in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, frozenset):
        return "frozenset({" + ", ".join(sorted(order_text(i) for i in x)) + "})"
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:012d}"
    return repr(x)


def _to_values(vals: frozenset) -> tuple:
    out: tuple = ()
    for it in sorted(vals, key=order_text):
        if it[0] == "T":
            out = V.union(out, (AV(V.TUPLE, items=tuple(_to_values(g) for g in it[1])),))
        elif it[0] == "D" and single_dtype(vals):
            step = TraceStep(it[2], it[3], f"a {it[1]} tensor")
            out = V.union(out, (AV(V.UNKNOWN, value=("dtype", it[1]), trace=(step,)),))
        elif it[0] == "N":
            out = V.union(out, (V.NON,))
        else:
            out = V.union(out, (V.UNK,))
    return out or (V.UNK,)
