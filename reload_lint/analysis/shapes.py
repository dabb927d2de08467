"""Shape arithmetic: whether a tensor made on a post-load path provably has the shape of a
registered one, so that a `.data =` swap to it is not shape-changing (RL106).

A value's `shape` (values.AV.shape) is () when nothing is known, else `(base, deltas)`: the
shape of the registered tensor named `base` (its `src`) with, per dimension, a size added.
`deltas` is a sorted tuple of (dim, form); dim counts from the end (-1 the last dimension,
as `F.pad` does); a form is a sorted tuple of (symbol, coefficient), symbol "" the constant
1. An empty `deltas` is the base's own shape.

Where it comes from: a registered tensor has its own shape; `.data`, `.detach()`,
`.requires_grad_()` keep it, and so do value ops that keep shape on a tensor of known shape
(`.contiguous()`, `.clone()`, dtype and device casts, elementwise ops with scalar operands);
`.view_as(t)`/`.reshape_as(t)` and `.view(t.shape)`/`.reshape(t.size())` take t's.
`F.pad(x, (l0, r0, l1, r1, ...))` adds l0 + r0 to the last dimension, l1 + r1 to the one
before, ...; a basic slice after an Ellipsis (`x[..., a:-b]`, step 1) takes a + b off the
dimension it names, exactly when the result is provably not clipped: a >= 0 and b >= 1 proven
and the dimension's added size minus a + b a known constant >= 0 (then the size is the old
one plus that). Anything else (an index, a new axis, a slice before the Ellipsis that is not
`:`, a stop from the start, an unknown term) forgets the shape.

Symbols are a function's fixed integer locals (index/lower_sizes.py), one value per
activation: the symbol is the name with the frame's serial, so the same name in another
activation (another call, a recursion) is another symbol. A value leaving its function keeps
a shape only when no symbol is left in it.
"""

from __future__ import annotations

from dataclasses import replace

from reload_lint.analysis import values as V
from reload_lint.index.lower_util import dotted
from reload_lint.summaries import torchapi as T
from reload_lint.summaries.torchapi import SHAPE_CHANGING

# tensor methods that return a tensor of the receiver's shape (given no tensor argument that
# could broadcast it larger)
SHAPE_KEEPING = frozenset(
    {
        "contiguous",
        "clone",
        "to",
        "type",
        "float",
        "half",
        "bfloat16",
        "double",
        "int",
        "long",
        "short",
        "char",
        "byte",
        "bool",
        "cuda",
        "abs",
        "neg",
        "exp",
        "log",
        "sqrt",
        "rsqrt",
        "reciprocal",
        "sign",
        "sigmoid",
        "tanh",
        "relu",
        "square",
        "clamp",
        "clip",
        "clamp_min",
        "clamp_max",
        "round",
        "floor",
        "ceil",
        "trunc",
        "nan_to_num",
        "mul",
        "div",
        "add",
        "sub",
        "pow",
    }
)
# the pad functions (`F.pad(x, pad)`)
PADS = frozenset({"torch.nn.functional.pad"})
# views of the receiver with its shape
SAME_SHAPE_VIEWS = frozenset({"data", "detach", "requires_grad_"})
# reshapes to the shape of another tensor, given as the tensor / as its `.shape`/`.size()`
RESHAPE_AS = frozenset({"view_as", "reshape_as"})
RESHAPE_TO = frozenset({"view", "reshape", "torch.reshape"})


def shape_of(v) -> tuple:
    """The value's shape, or () when unknown."""
    if v.kind == V.REG and v.src and v.src.rpartition(".")[2] not in ("<dynamic>", ""):
        return (v.src, ())
    if v.kind in (V.VIEW, V.FRESH):
        return v.shape
    return ()


def common(vals) -> tuple:
    """The one shape every tensor value of `vals` has, or ()."""
    out = None
    for v in vals:
        if v.kind not in V.TENSORISH:
            if v.kind in (V.SCALAR, V.NONE, V.STR):
                continue
            return ()
        s = shape_of(v)
        if not s or (out is not None and s != out):
            return ()
        out = s
    return out or ()


def plain(vals) -> bool:
    """Whether every value is a Python scalar, string or None (not possibly a tensor)."""
    return all(v.kind in (V.SCALAR, V.NONE, V.STR) for v in vals)


def same_as(v, src: str) -> bool:
    """Whether `v` provably has the shape of the registered tensor `src`."""
    return bool(src) and v.shape == (src, ())


def shape_ops(v) -> bool:
    """Whether `v`'s trace went through a shape-changing op (`F.pad`, `torch.cat`, a copying
    reshape, ...)."""
    notes = " ".join(s.note for s in v.trace)
    return any(f"`{op}`" in notes for op in SHAPE_CHANGING)


def carry_shape_ops(out: tuple, *operands) -> tuple:
    """The result of an operator on tensors (`F.pad(w, (0, 8)) * 2`, `w + F.pad(b, (0, 8))`)
    is new storage with a trace of its own; an operand that went through a shape-changing op
    passes its trace on, so that the result is still known to have been through it (its
    shape, where known, is given by the caller)."""
    steps: tuple = ()
    for vals in operands:
        for v in vals:
            if v.kind == V.FRESH and (shape_ops(v) or data_shaped(v)):
                steps += tuple(s for s in v.trace if s not in steps)
    if not steps:
        return out
    return tuple(
        replace(v, trace=steps + tuple(s for s in v.trace if s not in steps))
        if v.kind == V.FRESH
        else v
        for v in out
    )


def data_shaped(v) -> bool:
    """Whether `v`'s trace went through an op whose result's shape depends on the values of
    its input (`nonzero`, `unique`, `masked_select`, ...), not only on the input's shape."""
    notes = " ".join(s.note for s in v.trace)
    return any(f"`{op}`" in notes or f"`.{op}()`" in notes for op in T.DATA_SHAPED)


def shape_changing(v, holder_src: str = "") -> bool:
    """Whether new storage `v` swapped in through `.data` may have another shape than the
    tensor `holder_src`: it went through a shape-changing op and its shape is not provably
    the holder's."""
    return shape_ops(v) and not same_as(v, holder_src)


def with_shape(vals: tuple, shape: tuple) -> tuple:
    if not shape:
        return vals
    return tuple(replace(v, shape=shape) if v.kind in (V.FRESH, V.VIEW) else v for v in vals)


def _term(fr, t: str):
    """A size term (index/lower_sizes.py) as (form, low): the form, and a proven lower bound
    (None: unknown); None for a term that is not known."""
    if t == "":
        return None
    neg = t.startswith("-")
    body = t[1:] if neg else t
    if body.isdigit():
        n = -int(body) if neg else int(body)
        return ((("", n),) if n else (), n)
    if not body.isidentifier():
        return None
    low = dict(fr.func.get("sizes", ())).get(body)
    if low is None:
        return None
    sym = f"{fr.serial}:{body}"
    return (((sym, -1 if neg else 1),), None if neg else low)


def _add(a: tuple, b: tuple, sign: int = 1) -> tuple:
    d = dict(a)
    for s, c in b:
        d[s] = d.get(s, 0) + sign * c
    return tuple(sorted((s, c) for s, c in d.items() if c))


def padded(fr, base: tuple, pad_e) -> tuple:
    """The shape of `F.pad(x, pad)` for x of shape `base` and the pad argument's expression."""
    if not base or pad_e is None or pad_e[0] != "t" or pad_e[1] not in ("tuple", "list"):
        return ()
    items = pad_e[2]
    if len(items) % 2 or not items:
        return ()
    deltas = dict(base[1])
    for i in range(0, len(items), 2):
        form: tuple = ()
        for it in items[i : i + 2]:
            got = _term(fr, _expr_term(it))
            if got is None:
                return ()
            form = _add(form, got[0])
        dim = -(i // 2) - 1
        deltas[dim] = _add(deltas.get(dim, ()), form)
    return (base[0], _clean(deltas))


def _expr_term(e) -> str:
    """A pad amount's expression as a size term."""
    if e[0] == "k" and e[1] == "int":
        try:
            return str(int(e[2], 0))
        except ValueError:
            return "?"
    if e[0] == "n":
        return e[1]
    if e[0] == "u" and e[1] == "Minus":
        inner = _expr_term(e[2])
        return f"-{inner}" if inner and inner[0] != "-" and inner != "?" else "?"
    return "?"


def _clean(deltas: dict) -> tuple:
    return tuple(sorted((d, f) for d, f in deltas.items() if f))


def sliced(fr, base: tuple, index) -> tuple:
    """The shape of a basic subscript of a value of shape `base` (index: ("slice", elems))."""
    if not base or len(index) < 2:
        return ()
    elems = index[1]
    if any(el[0] in ("i", "none") for el in elems):
        return ()
    if ("..",) in elems:
        at = elems.index(("..",))
        head, tail = elems[:at], elems[at + 1 :]
        if ("..",) in tail:
            return ()
    else:
        head, tail = elems, ()
    if any(el != ("sl", "", "", "") for el in head):
        return ()  # a dimension counted from the start: not lined up with the pads
    deltas = dict(base[1])
    for k, el in enumerate(tail):
        _sl, start, stop, step = el
        if step not in ("", "1") or (stop and not stop.startswith("-")):
            return ()
        cut: tuple = ()
        if start:
            got = _term(fr, start)
            if got is None or got[1] is None or got[1] < 0:
                return ()
            cut = _add(cut, got[0])
        if stop:
            got = _term(fr, stop[1:])
            if got is None or got[1] is None or got[1] < 1:
                return ()
            cut = _add(cut, got[0])
        if not cut:
            continue
        dim = k - len(tail)
        left = _add(deltas.get(dim, ()), cut, -1)
        if any(s for s, _c in left) or (left and left[0][1] < 0):
            return ()  # not provably unclipped
        deltas[dim] = left
    return (base[0], _clean(deltas))


def at_return(v):
    """A value returned from its function: a shape with the function's symbols is forgotten."""
    if v.shape and any(s for _d, f in v.shape[1] for s, _c in f):
        return replace(v, shape=())
    return v


def after_method(an, fr, recv: tuple, meth: str, args_e, args, kwargs, out: tuple) -> tuple:
    """The shape of a tensor method's result `out` (receiver values `recv`)."""
    if meth in SHAPE_KEEPING:
        if meth not in ("to", "type") and not (
            all(plain(a) for a in args) and all(plain(v) for _, v in kwargs)
        ):
            return out  # an operand that may be a tensor may broadcast the result larger
        return with_shape(out, common(recv))
    if meth in RESHAPE_AS and len(args) == 1:
        return with_shape(out, common(args[0]))
    if meth in RESHAPE_TO and len(args_e) == 1 and not kwargs:
        a = args_e[0]
        if a[0] == "c" and a[1][0] == "a" and a[1][2] == "size" and not a[2]:
            a = ("a", a[1][1], "shape")  # `t.size()` is `t.shape`
        if a[0] == "a" and a[2] == "shape" and dotted(a[1]):
            # (a name or attribute chain: evaluated again, it runs no code)
            return with_shape(out, common(an.eval(fr, a[1])))
    return out


def keeps_shape_inplace(meth: str) -> bool:
    """An in-place tensor method that keeps the receiver's shape."""
    return meth[:-1] in SHAPE_KEEPING or meth in KEEPING_INPLACE


KEEPING_INPLACE = frozenset(
    {"copy_", "fill_", "zero_", "requires_grad_", "masked_fill_", "uniform_", "normal_"}
)


def forget(fr, recv: tuple) -> tuple:
    """An in-place op that may change its receiver's shape (`unsqueeze_`, `resize_`, `t_`,
    `set_`, a `.data =` store): the receiver, and every local holding the same value, no
    longer has a known shape. Returns the receiver values without shapes."""
    keys = {v.key() for v in recv if v.shape}
    if not keys:
        return recv
    for name, vals in list(fr.env.items()):
        if any(v.shape and v.key() in keys for v in vals):
            fr.env[name] = tuple(
                replace(v, shape=()) if v.shape and v.key() in keys else v for v in vals
            )
    return tuple(replace(v, shape=()) if v.shape else v for v in recv)
