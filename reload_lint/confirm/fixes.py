"""Fixes for the red/green pairs, applied as monkeypatches inside the runner's child process.

Four shapes, the ones the seeds converged on:

* ``reuse_storage``: after the post-load hook, copy the freshly computed tensor into the storage
  captured before and keep that one (what the tree's ``marlin_make_workspace_new(device)``
  would need to do on a reload: it has no parameter for an existing tensor).
  Incompatible shape/dtype/device fails loudly instead of silently rebinding.
* ``register``: make a plain layer attribute a registered parameter, so the production
  copy-back protects it (``replace_parameter(..., prefer_copy=True)`` for ``g_idx_sort_indices``).
* ``late_bind``: register a tensor hidden in a partial's keywords and replace the partial with a
  callable that reads the registered parameter at call time (the Machete ``act_perm`` fix).
* ``reuse_rebuilt``: for an object the hook rebuilds (MoE experts), copy every tensor of the new
  object into the old object's storage and rebind, preserving aliasing; state the old object
  allocated lazily (on first use) is carried over where the new one has none yet.

A *precondition* (``PRECONDITIONS``) is a fix applied on both sides of a build: ``unshadow``
lets vLLM's reload get past a post-load that masks it, so the sites behind it can be judged.

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


#: attributes a ``reuse_storage`` fix wants kept when the ``unshadow`` precondition takes them
#: off a layer (otherwise that precondition drops them, as the post-load's own store would)
KEEP_ASIDE: set[str] = set()
#: (id(layer), attr) -> the value ``unshadow`` took off the layer, for ``reuse_storage``
HELD_ASIDE: dict[tuple[int, str], object] = {}


def _holds_tensor(obj, depth: int = 0) -> bool:
    if isinstance(obj, torch.Tensor):
        return True
    if depth > 4 or not hasattr(obj, "__dict__") or isinstance(obj, (torch.nn.Module, type)):
        return False
    return any(_holds_tensor(v, depth + 1) for v in vars(obj).values())


def reuse_storage(cls: type, target: str, method: str = "process_weights_after_loading"):
    """Keep the captured storage of ``target`` across the post-load: a tensor gets the new
    values copied into it; an object holding tensors (a triton ``Tensor`` wrapper, a
    ``PrecisionConfig``) keeps the new object with its tensors rebound to the captured ones."""
    base, attr = _split(target)
    if base == "layer":
        KEEP_ASIDE.add(attr)

    def before(self, layer):
        owner = _owner(self, layer, base)
        # a plain attribute only: registered parameters are the copy-back's business, and
        # during a reload they are the freshly materialized ones, not the captured storage
        prev = vars(owner).get(attr) if hasattr(owner, "__dict__") else None
        if prev is None:
            prev = HELD_ASIDE.pop((id(owner), attr), None)
        if isinstance(prev, torch.Tensor):
            return prev if not prev.is_meta else None
        return prev if prev is not None and _holds_tensor(prev) else None

    def after(self, layer, prev):
        owner = _owner(self, layer, base)
        new = getattr(owner, attr, None)
        if prev is None or new is None or new is prev:
            return
        if not isinstance(prev, torch.Tensor):
            if isinstance(new, torch.Tensor):
                raise FixError(f"{target}: a tensor replaced a {type(prev).__name__}")
            merge_into(prev, new, target)
            return
        if not isinstance(new, torch.Tensor):
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


def unshadow():
    """Precondition for a layer whose post-load masks the next reload: vLLM's
    ``restore_layer_on_meta`` re-registers each checkpoint Parameter by name, and a plain
    attribute the post-load left under that name (``layer.w13_weight = <triton Tensor>`` after
    deleting the Parameter) makes ``register_parameter`` raise ``KeyError: attribute ... already
    exists``. The fix shape: before the restore, take the plain attribute off the layer (kept
    aside only for a ``reuse_storage`` fix of that attribute; otherwise dropped, as the post-load's
    own store would drop it). Returns an undo."""
    from vllm.model_executor.model_loader.reload import layerwise

    orig = layerwise.restore_layer_on_meta

    def restore_layer_on_meta(layer, info):
        meta = info.restore_metadata or ({}, {})
        for name in [*meta[0], *meta[1]]:
            if name in vars(layer) and name not in layer._parameters and name not in layer._buffers:
                value = vars(layer).pop(name)
                if name in KEEP_ASIDE:
                    HELD_ASIDE[(id(layer), name)] = value
        return orig(layer, info)

    layerwise.restore_layer_on_meta = restore_layer_on_meta

    def undo():
        layerwise.restore_layer_on_meta = orig

    return undo


def expanded_copy_back():
    """Precondition for a layer whose post-load registers an expanded view as a Parameter
    (``replace_parameter(layer, "w13_input_scale", scale.max().expand(E))``, FlashInfer NVFP4
    backends with one input scale for all experts): vLLM's copy-back
    (``_copy_and_restore_kernel_tensors``) writes the processed value into the kept kernel
    tensor with ``copy_``, which torch refuses for a destination whose elements share memory.
    The fix shape: write each distinct element once (the stride-0 dimensions collapsed to their
    first index; the processed values agree along them). Everything else of vLLM's function is
    kept as it is. Returns an undo."""
    from vllm.model_executor.model_loader.reload import layerwise

    orig = layerwise._copy_and_restore_kernel_tensors

    def _copy_and_restore_kernel_tensors(layer, info):
        parameters, buffers = info.kernel_tensors
        for name, param in parameters.items():
            _copy_distinct(param.data, getattr(layer, name))
        for name, buffer in buffers.items():
            if name not in layer._buffers:
                continue
            _copy_distinct(buffer.data, getattr(layer, name))
        layerwise._place_kernel_tensors(layer, info)

    layerwise._copy_and_restore_kernel_tensors = _copy_and_restore_kernel_tensors

    def undo():
        layerwise._copy_and_restore_kernel_tensors = orig

    return undo


def _copy_distinct(dst: torch.Tensor, src: torch.Tensor) -> None:
    """``dst.copy_(src)``, writing each distinct element of an expanded ``dst`` once."""
    sel = tuple(
        slice(0, 1) if (st == 0 and n > 1) else slice(None)
        for st, n in zip(dst.stride(), dst.shape, strict=True)
    )
    if all(s == slice(None) for s in sel):
        dst.copy_(src)
        return
    dst[sel].copy_(src.expand_as(dst)[sel])


#: preconditions by name (``spec["preconditions"]``): fixes applied to both sides of a build
#: so that vLLM's reload gets past a refusal and reaches the sites behind it
PRECONDITIONS = {
    "unshadow": (
        unshadow,
        "unshadow: before vLLM's restore_layer_on_meta, a plain attribute the post-load left "
        "over a deleted checkpoint Parameter is taken off the layer (the masking site's fix), "
        "so the reload proceeds",
    ),
    "expanded_copy_back": (
        expanded_copy_back,
        "expanded_copy_back: vLLM's copy-back writes each distinct element of a kernel "
        "Parameter that post-load registered as an expanded (stride-0) view once, instead of "
        "a copy_ torch refuses",
    ),
}


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
    """``getter(self, layer)`` returns the rebuilt object; its tensors keep the captured
    storages (``merge_into``)."""

    def before(self, layer):
        try:
            return getter(self, layer)
        except Exception:  # first load: nothing to reuse yet
            return None

    def after(self, layer, old):
        if old is None:
            return
        new = getter(self, layer)
        if new is None or new is old:
            return
        merge_into(old, new, target)

    return wrap_method(cls, method, after, before)


def merge_into(old, new, target: str) -> None:
    """Walk the old and the rebuilt object side by side: each tensor of ``new`` is copied into
    the old object's tensor of the same attribute path and rebound to it (aliases stay aliases);
    state the old object built lazily (a permute scratch allocated on first use) where the new
    one still holds None is carried over, so the next forward reuses it instead of allocating."""
    copied: dict[int, torch.Tensor] = {}
    _merge(old, new, target, copied, 0, set())


def _merge(old, new, where: str, copied: dict, depth: int, seen: set) -> None:
    if depth > 5 or id(new) in seen or not hasattr(new, "__dict__") or not hasattr(old, "__dict__"):
        return
    seen.add(id(new))
    new_vars = vars(new)
    for name, old_v in list(vars(old).items()):
        if name not in new_vars:
            continue
        new_v = new_vars[name]
        path = f"{where}.{name}"
        if isinstance(old_v, torch.Tensor):
            if not isinstance(new_v, torch.Tensor) or new_v is old_v:
                continue
            if id(new_v) in copied:
                object.__setattr__(new, name, copied[id(new_v)])
                continue
            if not _compatible(old_v, new_v):
                raise FixError(f"{path}: rebuilt tensor is incompatible with captured one")
            with torch.no_grad():
                old_v.copy_(new_v)
            copied[id(new_v)] = old_v
            object.__setattr__(new, name, old_v)
        elif new_v is None and old_v is not None and _holds_tensor(old_v):
            object.__setattr__(new, name, old_v)  # lazily built on the old object: keep it
        elif (
            new_v is not old_v
            and hasattr(new_v, "__dict__")
            and not isinstance(new_v, (torch.nn.Module, type))
        ):
            _merge(old_v, new_v, path, copied, depth + 1, seen)
