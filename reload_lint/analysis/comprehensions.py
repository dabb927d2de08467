"""Comprehensions: `[1.0 / s for s in scales]`, `{k: w.t() for k, w in items}`.

The record keeps a comprehension's generators (index/lower_expr.py, `_comp_gens`) when their
targets bind names only. The element is evaluated with each target bound to the elements of
its iterable, as a `for` statement binds them (a container's items, a tuple's positions, a
tensor itself), in generator order so that a later iterable sees the earlier targets. The
targets are the comprehension's own: what the function had under those names is put back
afterwards (PEP 289/709 scoping), so nothing leaks into later statements.
"""

from __future__ import annotations

from reload_lint.analysis import values as V
from reload_lint.analysis.containers import spread
from reload_lint.analysis.frame import bound_names

_MISSING = object()


def elements(vals: tuple) -> tuple:
    """What iterating over `vals` yields, as the `for` statement reads it: a container's
    items, a tuple's positions, a tensor itself (containers.spread)."""
    return spread(vals, others=False)


def eval_comprehension(an, fr, e, gens) -> tuple:
    """The value of comprehension `e` (its tuple without the generators) over `gens`."""
    saved: dict = {}
    try:
        for tgt, it_e in gens:
            elems = elements(an.eval(fr, it_e)) or (V.UNK,)
            for name in bound_names(tgt):
                if name not in saved:
                    saved[name] = fr.env.get(name, _MISSING)
            an.bind(fr, tgt, elems, None)
        return an.eval(fr, e)
    finally:
        for name, old in saved.items():
            if old is _MISSING:
                fr.env.pop(name, None)
            else:
                fr.env[name] = old
