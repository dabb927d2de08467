"""Attribute walk: every tensor reachable from a set of root objects, with a readable path.

Unlike a getattr-per-segment resolver, the walk looks through dicts, lists, tuples, sets,
``functools.partial`` (func, args, keywords), closure cells, default arguments, bound methods
and the ``__dict__``/``__slots__`` of arbitrary nested objects, so a tensor captured inside a
partial's keywords (Machete's ``act_perm``) is found and named
``layer.quant_method.kernel.act_perm.kw[perm]``.

Each hit keeps the chain of (owner classes, attribute) steps so a finding's target
(``self.act_perm`` in ``MacheteLinearKernel``) can be linked to it without string guessing.
"""

from __future__ import annotations

import enum
import functools
import types
from dataclasses import dataclass, field

try:  # torch is optional for the package; the walk is only used where torch exists
    import torch
except ImportError:  # pragma: no cover - exercised only without the runtime extra
    torch = None  # type: ignore[assignment]

MAX_DEPTH = 12
MAX_NODES = 50_000

_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None), range, slice, enum.Enum)


@dataclass(frozen=True)
class Step:
    owner: tuple[str, ...]  # class names in the owner's MRO
    label: str  # "workspace", "kw[perm]", "[0]", "<closure:perm>", ...
    attr: bool  # True when label is a plain attribute name
    qual: str = ""  # the owner's qualified class name (module.Class)
    # how to take this step again on the owner (watch/_replay.py): (kind, key); not compared
    get: tuple | None = field(default=None, compare=False, repr=False)


@dataclass
class TensorHit:
    path: str
    steps: tuple[Step, ...]
    tensor: object = field(repr=False)


@functools.lru_cache(maxsize=4096)
def _type_names(t: type) -> tuple[tuple[str, ...], str]:
    return tuple(c.__name__ for c in t.__mro__), f"{t.__module__}.{t.__qualname__}"


def _mro_names(obj: object) -> tuple[str, ...]:
    return _type_names(type(obj))[0]


def qualified_class(obj: object) -> str:
    return _type_names(type(obj))[1]


def _skip(obj: object) -> bool:
    if isinstance(obj, _ATOMS):
        return True
    if isinstance(obj, (type, types.ModuleType, types.BuiltinFunctionType, types.CodeType)):
        return True
    if torch is not None and isinstance(obj, (torch.dtype, torch.device, torch.Size)):
        return True
    mod = type(obj).__module__ or ""
    return mod.startswith(("logging", "threading", "_thread", "weakref", "inspect"))


def walk_tensors(roots: dict[str, object]) -> list[TensorHit]:
    """Every (path, tensor) reachable from ``roots``; objects are expanded once (first path)."""
    if torch is None:  # pragma: no cover
        return []
    hits: list[TensorHit] = []
    seen: set[int] = set()
    budget = [MAX_NODES]
    queue: list[tuple[object, str, tuple[Step, ...], int]] = [
        (obj, name, (), 0) for name, obj in roots.items()
    ]
    # breadth-first so the shortest path names each tensor
    while queue:
        nxt: list[tuple[object, str, tuple[Step, ...], int]] = []
        for obj, path, steps, depth in queue:
            if obj is None or budget[0] <= 0:
                continue
            if isinstance(obj, torch.Tensor):
                # every path to a tensor is kept: a registered parameter that is also bound
                # into a partial is two slots, and only one of them is protected by copy-back
                if not obj.is_meta:
                    hits.append(TensorHit(path, steps, obj))
                continue
            if id(obj) in seen:
                continue
            if _skip(obj) or depth >= MAX_DEPTH:
                continue
            seen.add(id(obj))
            budget[0] -= 1
            mro, qual = _type_names(type(obj))
            for child, label, is_attr, get in _children(obj):
                step = Step(mro, label, is_attr, qual, get)
                sep = "" if label.startswith("[") else "."
                nxt.append((child, f"{path}{sep}{label}", (*steps, step), depth + 1))
        queue = nxt
    return hits


def _children(obj: object):
    """(child, label, is_attribute) for one object."""
    if isinstance(obj, functools.partial):
        yield obj.func, "func", False, ("pf", None)
        for i, a in enumerate(obj.args):
            yield a, f"args[{i}]", False, ("pa", i)
        for k, v in (obj.keywords or {}).items():
            yield v, f"kw[{k}]", False, ("pk", k)
        return
    if isinstance(obj, types.MethodType):
        yield obj.__func__, "__func__", False, ("mf", None)
        yield obj.__self__, "__self__", False, ("ms", None)
        return
    if isinstance(obj, types.FunctionType):
        names = obj.__code__.co_freevars
        for i, (name, cell) in enumerate(zip(names, obj.__closure__ or (), strict=False)):
            try:
                val = cell.cell_contents
            except ValueError:  # empty cell
                continue
            yield val, f"<closure:{name}>", False, ("c", (i, name))
        defaults = obj.__defaults__ or ()
        argnames = obj.__code__.co_varnames[: obj.__code__.co_argcount]
        named = zip(argnames[len(argnames) - len(defaults) :], defaults, strict=False)
        for i, (name, val) in enumerate(named):
            yield val, f"<default:{name}>", False, ("d", i)
        for name, val in (obj.__kwdefaults__ or {}).items():
            yield val, f"<default:{name}>", False, ("kd", name)
        wrapped = getattr(obj, "__wrapped__", None)
        if wrapped is not None:
            yield wrapped, "__wrapped__", False, ("a", "__wrapped__")
        return
    if isinstance(obj, dict):
        for k, v in list(obj.items()):
            yield v, f"[{k!r}]" if not isinstance(k, str) else f"[{k}]", False, _item(k)
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield v, f"[{i}]", False, ("i", i)
        return
    if isinstance(obj, (set, frozenset)):
        for i, v in enumerate(sorted(obj, key=id)):
            yield v, f"[#{i}]", False, None  # a set has no stable order
        return
    if torch is not None and isinstance(obj, torch.nn.Module):
        for name, p in obj._parameters.items():
            yield p, name, True, ("mp", name)
        for name, b in obj._buffers.items():
            yield b, name, True, ("mb", name)
        for name, m in obj._modules.items():
            yield m, name, True, ("mm", name)
        skip = {"_parameters", "_buffers", "_modules"}
        for name, v in list(vars(obj).items()):
            if name in skip or name.startswith("_forward") or name.startswith("_backward"):
                continue
            if name.endswith("_hooks") or name.endswith("_hooks_with_kwargs"):
                continue
            yield v, name, True, ("a", name)
        return
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        for name, v in list(d.items()):
            yield v, name, True, ("a", name)
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()) or ():
            if name in ("__dict__", "__weakref__"):
                continue
            try:
                yield getattr(obj, name), name, True, ("s", name)
            except AttributeError:
                continue


_KEYS = (str, int, float, bool, bytes, type(None), enum.Enum, type)
if torch is not None:
    _KEYS = (*_KEYS, torch.dtype, torch.device)


def _plain_key(key: object, depth: int = 0) -> bool:
    """A key the watch may hold: a plain value, a class, a dtype or device (none keeps a
    storage alive), a tuple / frozenset of such keys (a shape, a `(dtype, device)` pair), or a
    frozen dataclass whose fields are such keys (vLLM's `BatchDescriptor`, the key of each
    captured graph's entry)."""
    if isinstance(key, _KEYS):
        return True
    if depth >= 4:
        return False
    if isinstance(key, (tuple, frozenset)):
        return all(_plain_key(k, depth + 1) for k in key)
    params = getattr(type(key), "__dataclass_params__", None)
    if params is not None and params.frozen and not isinstance(key, type):
        fields = getattr(type(key), "__dataclass_fields__", {})
        return all(_plain_key(getattr(key, f, None), depth + 1) for f in fields)
    return False


def _item(key: object) -> tuple | None:
    """The replay step for a dict entry; None for a key the watch must not hold (a tensor, a
    module, a function: holding it would keep it, or what it closes over, alive)."""
    return ("i", key) if _plain_key(key) else None
