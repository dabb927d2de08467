"""Abstract values: what the analysis knows about a Python value on a post-load path."""

from __future__ import annotations

from dataclasses import dataclass, field

from reload_lint.findings import TraceStep

# kinds
FRESH = "fresh"  # plain tensor with new storage
PARAM = "param"  # a new nn.Parameter wrapper
REG = "reg"  # a registered parameter/buffer read off a module
VIEW = "view"  # a plain view of a registered tensor
MATTR = "mattr"  # a module attribute of unknown nature (not a known registered name)
MODULE = "module"  # an nn.Module
OBJ = "obj"  # a non-Module object (kernel, quant method, experts, config)
CLS = "cls"  # a class object
CLSSET = "clsset"  # some subclass of cls (a `type[Base]` parameter)
REF = "ref"  # a qualified name not (yet) resolved: module, external function, ...
FUNC = "func"  # a project function (value = "module:qualname")
BOUND = "bound"  # a bound method (value = "module:qualname", items = (self values,))
TMETHOD = "tmethod"  # a tensor method (value = name, items = (receiver values,))
CALLABLE = "callable"  # partial / lambda / closure with captures
CONTAINER = "container"  # dict/list/set holding items
TUPLE = "tuple"  # positional tuple: items = tuple of value-tuples
STR = "str"
SCALAR = "scalar"
NONE = "none"
UNKNOWN = "unknown"
SUPER = "super"

TENSORISH = frozenset({FRESH, PARAM, REG, VIEW})


@dataclass(frozen=True)
class AV:
    kind: str
    conf: str = "high"
    trace: tuple[TraceStep, ...] = field(default=(), compare=False)
    cls: str = ""
    items: tuple = ()
    src: str = ""
    value: str | None = None
    fn: tuple = ()
    oid: int = 0
    # a rebuilt object: the allocating backend classes it may be, each with where the
    # choice is made ("Cls (path:line)"), and whether a backend choice was resolved at all
    backends: tuple = field(default=(), compare=False)
    chosen: bool = field(default=False, compare=False)
    # kept state an object was handed by its constructor's caller (not its own allocation)
    handed: bool = field(default=False, compare=False)
    # a tensor's shape relative to a registered one, () unknown (analysis/shapes.py)
    shape: tuple = ()
    # an object built on a post-load path: the classes built for it (its own, and those of
    # the objects its constructor was handed), which a store of it keeps (analysis/kept.py)
    built: tuple = field(default=(), compare=False)

    def key(self) -> tuple:
        """Identity for memoisation (no traces); computed once per value."""
        try:
            return self._key
        except AttributeError:
            k = (
                self.kind,
                self.cls,
                self.src,
                self.value,
                self.fn,
                self.oid,
                _items_key(self.items),
                self.shape,
            )
            object.__setattr__(self, "_key", k)
            return k

    def key_text(self) -> str:
        """repr(key()): a total order for canonical memo keys; computed once per value."""
        try:
            return self._key_text
        except AttributeError:
            t = repr(self.key())
            object.__setattr__(self, "_key_text", t)
            return t


def _items_key(items) -> tuple:
    out = []
    for it in items:
        if isinstance(it, AV):
            out.append(it.key())
        elif isinstance(it, tuple):
            out.append(_items_key(it))
        else:
            out.append(it)
    return tuple(out)


def vals_key(vals: tuple) -> tuple:
    if len(vals) == 1:  # most values are one abstract value: nothing to order
        return (vals[0].key(),)
    return tuple(v.key() for v in sorted(vals, key=AV.key_text))


UNK = AV(UNKNOWN)
SCAL = AV(SCALAR)
NON = AV(NONE)


def union(*groups) -> tuple:
    if len(groups) == 2:
        # the common shapes (an empty accumulator, or one new value), without a key set
        a, b = groups
        if not b and len(a) <= 1:
            return tuple(a)
        if not a and len(b) == 1:
            return tuple(b)
        if len(b) == 1 and len(a) < 12:
            kb = b[0].key()
            for v in a:
                if v.key() == kb:
                    if b[0].built and not set(b[0].built) <= set(v.built):
                        break  # the classes it carries are merged below
                    return tuple(a) if _distinct(a) else _union(groups)
            else:
                if len(a) == 1 or _distinct(a):
                    return (*a, b[0])
    return _union(groups)


def _union(groups) -> tuple:
    out: list[AV] = []
    seen: dict = {}
    for g in groups:
        for v in g:
            k = v.key()
            at = seen.get(k)
            if at is None:
                if len(out) >= 12:  # cap: keeps pathological unions bounded
                    return tuple(out)
                seen[k] = len(out)
                out.append(v)
            elif v.built and not set(v.built) <= set(out[at].built):
                # equal values that carry other built classes (analysis/kept.py): the union
                # carries them all
                out[at] = with_built(out[at], v.built)
    return tuple(out)


def with_built(v: AV, more: tuple) -> AV:
    """`v` carrying the classes `more` too (AV.built)."""
    from dataclasses import replace

    return replace(v, built=tuple(dict.fromkeys((*v.built, *more))))


def _distinct(vals) -> bool:
    """Whether no two values share a key (union's result is then `vals` in order)."""
    return len({v.key() for v in vals}) == len(vals)


# Memory layout of a registered tensor or a view of one, for the ops that view a contiguous
# input and copy a non-contiguous one (`reshape`, `flatten`). A registered tensor, a module
# attribute and a Parameter are contiguous (create_weights and post-load allocate them so);
# a VIEW carries its layout in `value`: "strided" after `t()`/`transpose`/`permute`/`expand`/
# ..., "slice" after basic slicing (may skip elements), anything else (None, the attribute
# name of a view of a module attribute) contiguous. A value of unknown nature is not a view:
# a reshape of it is assumed to copy (low confidence, analysis/calls.py).
CONTIGUOUS, STRIDED = "contiguous", "strided"


def layout(v: AV) -> str:
    if v.kind == VIEW and v.value in ("slice", "strided"):
        return STRIDED
    return CONTIGUOUS


# `value` of a FRESH tensor that has no device storage: a zero-element tensor (`"empty"`)
# or a tensor in host memory (`"host"`: a torch factory given no device and no tensor data,
# `.cpu()`, `.to("cpu")`). Neither has a device address a captured graph could hold.
NO_DEVICE_STORAGE = frozenset({"empty", "host"})


def no_device_storage(v: AV) -> bool:
    return v.kind == FRESH and v.value in NO_DEVICE_STORAGE


def tensorish(vals) -> bool:
    return any(v.kind in TENSORISH for v in vals)


CONF_ORDER = {"high": 2, "medium": 1, "low": 0}


def lower(conf: str) -> str:
    return {"high": "medium", "medium": "low"}.get(conf, "low")


def min_conf(a: str, b: str) -> str:
    return a if CONF_ORDER[a] <= CONF_ORDER[b] else b
