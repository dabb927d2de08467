"""Containers filled from other containers: the builtins that build one from their argument
(`dict(w=t)`, `list(ts)`, `tuple(...)`, `sorted(...)`) and the methods that add the elements
of their argument (`xs.extend([t])`, `d.update({"k": t})`). Their elements are what is kept,
not the argument as one item."""

from __future__ import annotations

from reload_lint.analysis import values as V
from reload_lint.analysis.frame import _kept
from reload_lint.analysis.values import AV

# builtins that build a container of their argument's elements (or keyword values)
CONTAINER_BUILTINS = frozenset({"dict", "list", "tuple", "set", "frozenset", "sorted", "reversed"})
# container methods that add the elements of their argument, not the argument itself
SPREADING_MUTATORS = frozenset({"extend", "update"})


def spread(vals: tuple, others: bool = True) -> tuple:
    """The elements of an iterable argument: a container's items, every position of a
    tuple; any other value as it is (an iterable the analysis does not see into), or, with
    `others` False, only when it is a tensor (what a `for` over it binds)."""
    out: tuple = ()
    for v in vals:
        if v.kind == V.CONTAINER:
            out = V.union(out, v.items)
        elif v.kind == V.TUPLE:
            for part in v.items:
                out = V.union(out, part)
        elif others or v.kind in V.TENSORISH:
            out = V.union(out, (v,))
    return out


def fed_tensors(args: tuple, kwargs: tuple) -> bool:
    """Whether a call is handed a tensor: as an argument, or inside a tuple, list or dict
    argument (a library transform taking `(weight, scale)` pairs returns new tensors as one
    taking them one by one does)."""
    return any(V.tensorish(spread(a)) for a in args) or any(
        V.tensorish(spread(v)) for _, v in kwargs
    )


def builtin_container(q: str, args: tuple, kwargs: tuple) -> tuple:
    """A container builtin's result: a container of what its first argument and keyword
    values hold, when that is tensor state; else a plain value, as before."""
    held = spread(tuple(v for a in args[:1] for v in a))
    held = V.union(held, tuple(v for _, vs in kwargs for v in vs))
    if V.tensorish(held) or any(_kept(v) is not None for v in held):
        kind = "dict" if q == "dict" else "tuple" if q == "tuple" else "list"
        return (AV(V.CONTAINER, items=held, value=kind),)
    return (V.SCAL,)
