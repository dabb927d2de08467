"""Fixes for the red/green pairs, applied as monkeypatches inside the runner's child process.

Four shapes, the ones the seeds converged on:

* ``reuse_storage``: after the post-load hook, copy the freshly computed tensor into the storage
  captured before and keep that one (the upstream ``marlin_make_workspace_new(existing=...)``).
  Incompatible shape/dtype/device fails loudly instead of silently rebinding.
* ``register``: make a plain layer attribute a registered parameter, so the production
  copy-back protects it (``replace_parameter(..., prefer_copy=True)`` for ``g_idx_sort_indices``).
* ``late_bind``: register a tensor hidden in a partial's keywords and replace the partial with a
  callable that reads the registered parameter at call time (the Machete ``act_perm`` fix).
* ``reuse_rebuilt``: for an object the hook rebuilds (MoE experts), copy every tensor of the new
  object into the old object's storage and rebind, preserving aliasing.

Each returns an undo callable (tests restore the classes they patch).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch


class FixError(RuntimeError):
    """A fix could not be applied safely (shape/dtype/device mismatch, unexpected layout)."""


def _compatible(old: torch.Tensor, new: torch.Tensor) -> bool:
    return old.shape == new.shape and old.dtype == new.dtype and old.device == new.device


def _split(target: str) -> tuple[str, str]:
    base, _, attr = target.partition(".")
    if not attr or "." in attr:
        raise FixError(f"fix target must be 'self.X' or 'layer.X', got {target!r}")
    return base, attr


def wrap_method(cls: type, method: str, after: Callable, before: Callable | None = None):
    """Wrap ``cls.method(self, layer, ...)``; ``before`` returns state handed to ``after``."""
    orig = cls.__dict__.get(method)
    if orig is None:
        orig = getattr(cls, method)

    @functools.wraps(orig)
    def wrapped(self, layer=None, *args, **kwargs):
        state = before(self, layer) if before is not None else None
        out = orig(self, layer, *args, **kwargs) if layer is not None else orig(self)
        after(self, layer, state)
        return out

    setattr(cls, method, wrapped)
    had = method in cls.__dict__

    def undo():
        if had:
            setattr(cls, method, orig)
        else:
            delattr(cls, method)

    return undo


def _owner(self, layer, base: str):
    return self if base == "self" else layer


def reuse_storage(cls: type, target: str, method: str = "process_weights_after_loading"):
    base, attr = _split(target)

    def before(self, layer):
        owner = _owner(self, layer, base)
        # a plain attribute only: registered parameters are the copy-back's business, and
        # during a reload they are the freshly materialized ones, not the captured storage
        prev = vars(owner).get(attr) if hasattr(owner, "__dict__") else None
        return prev if isinstance(prev, torch.Tensor) and not prev.is_meta else None

    def after(self, layer, prev):
        owner = _owner(self, layer, base)
        new = getattr(owner, attr, None)
        if prev is None or not isinstance(new, torch.Tensor) or new is prev:
            return
        if not _compatible(prev, new):
            raise FixError(
                f"{target}: cannot reuse storage {tuple(prev.shape)}/{prev.dtype} for "
                f"{tuple(new.shape)}/{new.dtype}"
            )
        with torch.no_grad():
            prev.copy_(new)
        setattr(owner, attr, prev)

    return wrap_method(cls, method, after, before)


def register(cls: type, target: str, method: str = "process_weights_after_loading"):
    base, attr = _split(target)
    if base == "self":
        raise FixError("registration applies to layer attributes (the copy-back walks the layer)")

    def after(self, layer, _state):
        value = getattr(layer, attr, None)
        if not isinstance(value, torch.Tensor) or attr in layer._parameters:
            return
        if attr in layer.__dict__:
            del layer.__dict__[attr]
        if attr in layer._buffers:
            del layer._buffers[attr]
        layer.register_parameter(attr, torch.nn.Parameter(value.data, requires_grad=False))

    return wrap_method(cls, method, after)


class LateBound:
    """Calls ``func`` with keyword tensors read from the layer at call time."""

    def __init__(self, func: Callable, layer: torch.nn.Module, kw_params: dict[str, str], args=()):
        self.func = func
        self.layer = layer
        self.kw_params = kw_params
        self.args = args

    def __call__(self, *args, **kwargs):
        bound = {k: getattr(self.layer, p) for k, p in self.kw_params.items()}
        return self.func(*self.args, *args, **bound, **kwargs)


def late_bound_name(attr: str) -> str:
    """The layer parameter a late-bound callable's (first) tensor is registered as."""
    return f"_reload_lint_{attr}"


def late_bind(cls: type, target: str, method: str = "process_weights_after_loading"):
    base, attr = _split(target)
    if base != "self":
        raise FixError("late binding applies to callables stored on the kernel object")

    def after(self, layer, _state):
        fn = getattr(self, attr, None)
        if fn is None:
            return
        if not isinstance(fn, functools.partial):
            raise FixError(f"{target}: expected a functools.partial, got {type(fn).__name__}")
        kw_params = {}
        for k, v in (fn.keywords or {}).items():
            if isinstance(v, torch.Tensor):
                pname = late_bound_name(attr) if not kw_params else f"{late_bound_name(attr)}_{k}"
                value = v
                if pname in layer.__dict__:
                    del layer.__dict__[pname]
                layer.register_parameter(pname, torch.nn.Parameter(value, requires_grad=False))
                kw_params[k] = pname
        rest = {k: v for k, v in (fn.keywords or {}).items() if k not in kw_params}
        func = functools.partial(fn.func, **rest) if rest else fn.func
        setattr(self, attr, LateBound(func, layer, kw_params, fn.args))

    return wrap_method(cls, method, after)


def reuse_rebuilt(
    cls: type,
    target: str,
    getter: Callable[[object, torch.nn.Module], object],
    method: str = "process_weights_after_loading",
):
    """``getter(self, layer)`` returns the rebuilt object; its tensor attributes keep storage.

    A helper object the old one created lazily after post-load (at its first forward, e.g. a
    kernel wrapper with pre-allocated CUDA-graph buffers) and the rebuilt one has not created
    yet (``None``) is carried over: the rebuilt object reuses the captured helper."""

    def before(self, layer):
        try:
            old = getter(self, layer)
        except Exception:  # first load: nothing to reuse yet
            return None
        return (_tensor_attrs(old), _helper_attrs(old)) if old is not None else None

    def after(self, layer, state):
        if not state or not state[0] and not state[1]:
            return
        old_attrs, old_helpers = state
        new = getter(self, layer)
        if new is None:
            return
        by_new_id: dict[int, torch.Tensor] = {}
        for name, (holder, new_t) in _tensor_attrs(new).items():
            old = old_attrs.get(name)
            if old is None:
                continue
            old_t = old[1]
            if new_t is old_t:
                continue
            if not _compatible(old_t, new_t):
                raise FixError(f"{target}.{name}: rebuilt tensor is incompatible with captured one")
            if id(new_t) not in by_new_id:
                with torch.no_grad():
                    old_t.copy_(new_t)
                by_new_id[id(new_t)] = old_t
            object.__setattr__(holder, name.rsplit(".", 1)[-1], by_new_id[id(new_t)])
        for name, helper in old_helpers.items():
            path, _, leaf = name.rpartition(".")
            holder = new
            for step in path.split(".") if path else ():
                holder = getattr(holder, step, None)
            if holder is not None and getattr(holder, leaf, 0) is None:
                object.__setattr__(holder, leaf, helper)

    return wrap_method(cls, method, after, before)


def _helper_attrs(obj, prefix: str = "", depth: int = 0, seen=None) -> dict:
    """name -> object for plain objects below ``obj`` that hold tensors (helpers a rebuilt
    object may create lazily)."""
    seen = seen if seen is not None else set()
    out: dict = {}
    if obj is None or id(obj) in seen or depth > 4 or not hasattr(obj, "__dict__"):
        return out
    seen.add(id(obj))
    for name, v in list(vars(obj).items()):
        if isinstance(v, (torch.Tensor, torch.nn.Module, type)) or not hasattr(v, "__dict__"):
            continue
        if _tensor_attrs(v):
            out[f"{prefix}{name}"] = v
        out.update(_helper_attrs(v, f"{prefix}{name}.", depth + 1, seen))
    return out


def _tensor_attrs(obj, prefix: str = "", depth: int = 0, seen=None) -> dict:
    """name -> (holder, tensor) for plain tensor attributes of obj and nested plain objects."""
    seen = seen if seen is not None else set()
    out: dict = {}
    if obj is None or id(obj) in seen or depth > 4 or not hasattr(obj, "__dict__"):
        return out
    seen.add(id(obj))
    for name, v in list(vars(obj).items()):
        key = f"{prefix}{name}"
        if isinstance(v, torch.Tensor):
            # parameters too: a rebuilt config can hold a staged parameter that the copy-back
            # detached from the layer (the CUTLASS MoE quant config's scales)
            out[key] = (obj, v)
        elif hasattr(v, "__dict__") and not isinstance(v, (torch.nn.Module, type)):
            out.update(_tensor_attrs(v, f"{key}.", depth + 1, seen))
    return out
