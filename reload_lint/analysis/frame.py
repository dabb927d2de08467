"""Interpreter state shared by the analysis rooms: frames, per-root state, constants, and
the small value/trace helpers the rooms share."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from reload_lint.analysis import values as V
from reload_lint.analysis.values import AV
from reload_lint.findings import TraceStep

MAX_DEPTH = 24
RECURSION_LIMIT = 2  # nested activations of one function along a call path
MODULE_PARAM_NAMES = {"layer", "module", "mod", "m", "model", "linear", "moe", "attn", "self_attn"}
MODULE_ANNOT_HINTS = ("Module", "Layer", "FusedMoE", "Linear", "Attention", "MoE", "Embedding")
CONTAINER_MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add"}
REGISTER = {"register_parameter", "register_buffer"}


@dataclass
class RootState:
    root: str
    deleted: set[str] = field(default_factory=set)
    derived_findings: list[tuple[str, str]] = field(default_factory=list)  # (finding key, src)
    cls_key: str | None = None  # the root's class (the reader search starts there)
    entry: tuple = ()  # (module, qualname) of a post-load root (empty for lazy/apply runs)
    # path facts (analysis/pathfacts.py): findings this root reported, checkpoint Parameters
    # it re-binds as a plain nn.Parameter / reshapes through `.data`, names given a loader
    keys: dict = field(default_factory=dict)  # finding key -> its block in the root
    rebound: dict = field(default_factory=dict)
    reshaped: dict = field(default_factory=dict)
    loaders: set = field(default_factory=set)
    plain: dict = field(default_factory=dict)  # checkpoint names given a plain tensor
    deleted_at: dict = field(default_factory=dict)  # deleted name -> block in the root
    # in order: ("rebind", name) for every store, registration or deletion of a layer
    # attribute, ("alias", finding key, names) for every RL107 alias of registered tensors
    events: list = field(default_factory=list)


@dataclass
class Frame:
    module: str
    path: str
    func: dict
    env: dict
    cls_key: str | None
    constructing: int
    mode: str  # "post" | "lazy" | "apply"
    chain: tuple
    root: RootState
    heap: dict = field(default_factory=dict)
    blocks: dict = field(default_factory=dict)  # local name -> block path of its last binding
    narrowed: list = field(default_factory=list)  # (name, value before an isinstance narrowing)
    types: tuple = ()  # (name, class as written) of the `isinstance` tests around the code
    returns: list = field(default_factory=list)
    line: int = 0  # the statement being executed (trace steps of call-less expressions)
    # state-flag guards in force: (base, attr, runs when, path, line); see pathfacts.py
    guards: tuple = ()
    # (path, module, qualname) of every function from the root down to this one
    stack: tuple = ()
    line_hint: int = 0  # line of the statement being executed
    block_hint: tuple | None = None  # its block path (assignments and expressions)
    # (qualname, block path) of the calling statement in each caller, root first
    positions: tuple = ()
    # > 0 inside an `if` body whose member test cannot hold (see Analyzer.exec_cond)
    dead: int = 0
    # ((attr, value), ...): flags of `self` known on this path (analysis/flagpaths.py)
    truths: tuple = ()
    # this activation's number: a fixed local's shape symbol holds in it only (shapes.py)
    serial: int = field(default_factory=itertools.count(1).__next__)
    # local name -> attributes read to compute its value (post-load; analysis/feeds.py)
    local_reads: dict = field(default_factory=dict)
    # the if-chains open at the statement being run, and the ones entered (branches.py)
    branches: list = field(default_factory=list)
    branches_opened: set = field(default_factory=set)
    unreached: bool = False  # after an if-chain whose every branch returns or raises


def to_host(name: str, args, kwargs) -> bool:
    """`.cpu()`, `.to("cpu")`, `.to(device="cpu")`: a tensor in host memory."""
    if name == "cpu":
        return True
    if name != "to":
        return False
    dev = dict(kwargs).get("device") or (args[0] if args else ())
    return bool(dev) and all(v.kind == V.STR and v.value == "cpu" for v in dev)


def _has_zero_dim(args) -> bool:
    """A literal 0 in the shape: `torch.empty(0)`, `torch.zeros((e, 0))`."""
    first = args[0] if args else ()
    for v in first:
        if v.kind == V.SCALAR and v.value == "0":
            return True
        if v.kind == V.TUPLE and any(
            x.kind == V.SCALAR and x.value == "0" for group in v.items for x in group
        ):
            return True
    return False


def _super_start(selfv, cls_key):
    for v in selfv:
        if v.cls:
            return v.cls
    return cls_key


def _with_step(v: AV, path: str, f: dict) -> AV:
    if v.kind in (V.FRESH, V.PARAM) and v.trace:
        step = TraceStep(path, f["line"], f"returned by {f['qn']}")
        if step not in v.trace:
            return replace(v, trace=v.trace + (step,))
    return v


def _derived_src(vals) -> str:
    for v in vals:
        if v.kind in (V.REG, V.VIEW) and v.src:
            return v.src
        if v.kind == V.FRESH and v.src:
            return v.src
    return ""


def _conf_of(*groups) -> str:
    conf = "high"
    for g in groups:
        for v in g:
            if v.kind in V.TENSORISH:
                conf = V.min_conf(conf, v.conf)
    return conf


def _line_of(e, fr: Frame) -> int:
    # the nearest call line inside e, else the statement's line, else the function's line
    stack = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, tuple) and x:
            if x[0] == "c" and len(x) > 4 and isinstance(x[4], int):
                return x[4]
            stack.extend(y for y in x[1:] if isinstance(y, tuple))
    return fr.line or fr.func["line"]


def _kept(v: AV) -> AV | None:
    """The part of a value that, stored on an object, is graph-visible tensor state."""
    if V.no_device_storage(v):
        return None  # no device address for a graph to hold
    if v.kind in (V.FRESH, V.PARAM, V.VIEW, V.REG):
        return v
    if v.kind == V.CALLABLE and any(V.tensorish(c) for _, c in v.items):
        return v
    if v.kind == V.CONTAINER and (
        V.tensorish(v.items)
        or any(_kept(c) is not None for c in v.items if c.kind in (V.CALLABLE, V.OBJ, V.MODULE))
    ):
        return v
    if v.kind in (V.OBJ, V.MODULE) and v.value == "rebuilt" and v.items:
        return v
    return None


def _new_storage(c: AV) -> bool:
    return c.kind in (V.FRESH, V.PARAM) and not V.no_device_storage(c)


def _allocates(v: AV) -> bool:
    """Whether kept state holds new storage: a fresh tensor or Parameter, a callable or
    container holding one, or a rebuilt object whose own kept state does (an object that
    only binds registered tensors does not allocate)."""
    if v.kind == V.FRESH:
        return not V.no_device_storage(v)
    if v.kind == V.PARAM:
        return v.value != "alias"  # `Parameter(x.data)` wraps storage that exists
    if v.kind == V.CALLABLE:
        return any(_new_storage(c) for _, cap in v.items for c in cap)
    if v.kind == V.CONTAINER:
        return any(
            _new_storage(c) or (c.kind in (V.CALLABLE, V.OBJ, V.MODULE) and _allocates(c))
            for c in v.items
        )
    if v.kind in (V.OBJ, V.MODULE) and v.value == "rebuilt":
        return any(_allocates(a) for a in v.items if isinstance(a, AV))
    return False


def _describe(v: AV) -> str:
    return {
        V.FRESH: "a new tensor",
        V.PARAM: "an nn.Parameter",
        V.VIEW: "a view of a registered tensor",
        V.REG: "a registered tensor",
        V.CALLABLE: "a callable capturing tensors",
        V.CONTAINER: "a container of tensors",
        V.OBJ: f"a rebuilt {v.cls.split(':')[-1] or v.src} holding tensors",
        V.MODULE: f"a rebuilt {v.cls.split(':')[-1] or v.src} holding tensors",
    }.get(v.kind, "a value")


def class_of(e):
    """`type(x)` as a store's receiver: x (a class attribute is shared state kept with the
    objects of the class, read back through them); any other expression as it is."""
    if e[0] == "c" and e[1] == ("n", "type") and len(e[2]) == 1 and not e[3]:
        return e[2][0]
    return e


def bound_names(*targets) -> list:
    """The local names assignment targets bind (`k = ...`, `w, (k, *r) = ...`, a `for` or
    comprehension target); attribute and item targets bind none."""
    out: list = []
    stack = list(targets)
    while stack:
        t = stack.pop()
        if t[0] == "n":
            out.append(t[1])
        elif t[0] == "t":
            stack.extend(t[2])
        elif t[0] == "star":
            stack.append(t[1])
    return out
