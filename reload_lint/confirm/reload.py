"""Reload drivers: vLLM's own layerwise path when importable, a faithful simulation otherwise.

Both follow the production contract (vllm/model_executor/model_loader/reload/layerwise.py):

1. at construction, record each module's parameters/buffers in checkpoint format;
2. at reload, keep the current ("kernel") tensors aside, restore checkpoint-format tensors,
   load the new weights through each parameter's weight loader, run the module's post-load
   processing, then copy the processed values back into the kept kernel tensors and re-register
   those, so registered storage keeps its address.

Anything a kernel keeps outside ``_parameters``/``_buffers`` gets no such protection; that gap
is what the census measures. The simulation is used only when vLLM's reload package cannot be
imported, and the evidence records which path ran (``reload_path``).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import torch

VLLM_PATH = "vllm-layerwise"
SIMULATED_PATH = "simulated-copy-back"


def load_weights(model: torch.nn.Module, weights) -> None:
    """Load checkpoint tensors through each parameter's own ``weight_loader`` (vLLM's contract).

    ``weights`` is ``{name: tensor}`` (loader called as ``loader(param, tensor)``) or a list of
    ``(name, tensor, extra_args)`` for loaders that take more (FusedMoE's ``weight_name,
    shard_id, expert_id``).

    The parameters are looked up once, before the first load, as vLLM's model ``load_weights``
    does (``params_dict = dict(self.named_parameters())``): during a layerwise reload a layer
    processes as soon as its counted elements are in, and a later load must still reach the
    restored checkpoint parameter (whose wrapped loader drops it as excess), not whatever the
    processing registered under that name since."""
    items = list(weights.items() if isinstance(weights, dict) else weights)
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    for item in items:
        name, w = item[0], item[1]
        extra = tuple(item[2]) if len(item) > 2 else ()
        param = params.get(name)
        if param is None:
            param = buffers.get(name)
        if param is None:
            raise AttributeError(f"`{name}` is neither a parameter nor a buffer of the model")
        loader = getattr(param, "weight_loader", None)
        with torch.no_grad():
            if loader is not None:
                loader(param, w, *extra)
            else:
                param.data.copy_(w)


def default_post_load(module: torch.nn.Module) -> bool:
    """Run the module's post-load hook the way vLLM's loader does; True if one ran."""
    qm = getattr(module, "quant_method", None)
    if qm is not None and hasattr(qm, "process_weights_after_loading"):
        qm.process_weights_after_loading(module)
        return True
    if _is_quant_method(module):
        return False  # a quant method that is also a module: its layer runs it
    own = getattr(type(module), "process_weights_after_loading", None)
    if own is not None and callable(own):
        module.process_weights_after_loading()
        return True
    return False


HOOK = "process_weights_after_loading"


def _is_quant_method(obj) -> bool:
    return any(c.__name__ == "QuantizeMethodBase" for c in type(obj).__mro__)


def _positional(fn) -> int | None:
    """How many positional arguments a bound ``fn`` takes (None: any number, or unknown)."""
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    n = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            n += 1
    return n


def _method_objects(module: torch.nn.Module) -> list[tuple[str, object]]:
    """The objects a layer holds (by attribute, or one level inside a list, tuple or dict
    attribute) that have a ``process_weights_after_loading``: its quant method, scheme or
    kernel, under whatever name. Modules (post-loaded as modules of their own), tensors and
    classes are not method objects."""
    out: list[tuple[str, object]] = []
    seen: set[int] = set()

    def add(where: str, v) -> None:
        if id(v) in seen or isinstance(v, (torch.nn.Module, torch.Tensor, type)):
            return
        if callable(getattr(type(v), HOOK, None)):
            seen.add(id(v))
            out.append((where, v))

    for name, v in vars(module).items():
        if name in ("_parameters", "_buffers", "_modules"):
            continue
        if isinstance(v, (list, tuple)):
            for i, item in enumerate(v):
                add(f"{name}[{i}]", item)
        elif isinstance(v, dict):
            for k, item in v.items():
                add(f"{name}[{k!r}]", item)
        else:
            add(name, v)
    return out


def find_post_load(module: torch.nn.Module) -> list[tuple[str, Callable[[], object]]]:
    """Where a harness layer holds its post-load, as (where, call) pairs:

    * its quant method at ``layer.quant_method`` (vLLM's loader), called with the layer;
    * else the layer's own ``process_weights_after_loading`` (a layer that processes itself:
      called with no argument, or with the default dtype when it takes one, as vLLM's reload
      calls an attention layer's ``process_weights_after_loading(model_config.dtype)``);
    * else every method object the layer holds under any other attribute (``layer.scheme``,
      ``layer.kernel``, an element of ``layer.methods``), each called with the layer (or with
      nothing when its hook takes no argument), in attribute order.

    A module that is itself a quant method has none (its layer runs it)."""
    qm = getattr(module, "quant_method", None)
    if qm is not None and hasattr(qm, HOOK):
        return [("quant_method", lambda: qm.process_weights_after_loading(module))]
    if _is_quant_method(module):
        return []
    own = getattr(type(module), HOOK, None)
    if own is not None and callable(own):
        hook = getattr(module, HOOK)
        if _positional(hook) == 1:
            return [("self", lambda: hook(torch.get_default_dtype()))]
        return [("self", hook)]
    calls = []
    for where, obj in _method_objects(module):
        hook = getattr(obj, HOOK)
        if _positional(hook) == 0:
            calls.append((where, hook))
        else:
            calls.append((where, lambda hook=hook: hook(module)))
    return calls


def harness_post_load(module: torch.nn.Module) -> bool:
    """A recipe's default post-load: every hook ``find_post_load`` finds; True if one ran."""
    calls = find_post_load(module)
    for _, call in calls:
        call()
    return bool(calls)


def post_load_component(layer) -> object | None:
    """The method object whose post-load the harness ran on ``layer`` (None when the layer
    processes itself, or has none)."""
    qm = getattr(layer, "quant_method", None)
    if qm is not None:
        return qm
    if not isinstance(layer, torch.nn.Module) or callable(getattr(type(layer), HOOK, None)):
        return None
    found = _method_objects(layer)
    return found[0][1] if found else None


def post_load_model(model: torch.nn.Module, post_load: Callable = default_post_load) -> int:
    n = 0
    with torch.no_grad():
        for m in model.modules():
            n += bool(post_load(m))
    return n


class VllmLayerwiseReload:
    """vLLM's production reload: record_metadata_for_reloading / initialize_layerwise_reload /
    the parameters' weight loaders / finalize_layerwise_reload."""

    name = VLLM_PATH

    def __init__(self, model_dtype: torch.dtype | None = None):
        from vllm.model_executor.model_loader import reload as r

        self._r = r
        self._model_config = SimpleNamespace(dtype=model_dtype or torch.get_default_dtype())

    @staticmethod
    def importable() -> str | None:
        try:
            from vllm.model_executor.model_loader.reload import (  # noqa: F401
                finalize_layerwise_reload,
                initialize_layerwise_reload,
                record_metadata_for_reloading,
            )
        except Exception as exc:  # any import failure means "not available"
            return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return None

    def record(self, model: torch.nn.Module) -> None:
        self._r.record_metadata_for_reloading(model)

    def reload(self, model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
        self._r.initialize_layerwise_reload(model)
        load_weights(model, weights)
        self._r.finalize_layerwise_reload(model, self._model_config)


class SimulatedLayerwiseReload:
    """The same algorithm in plain torch, for CPU CI and for trees without vLLM's reload API."""

    name = SIMULATED_PATH

    def __init__(self, post_load: Callable = default_post_load):
        self.post_load = post_load
        self._meta: dict[int, tuple[dict, dict]] = {}
        self._device: dict[int, torch.device] = {}

    def record(self, model: torch.nn.Module) -> None:
        for m in model.modules():
            params = {n: _meta_of(p) for n, p in m._parameters.items() if p is not None}
            buffers = {n: _meta_of(b) for n, b in m._buffers.items() if b is not None}
            self._meta[id(m)] = (params, buffers)
            self._device[id(m)] = torch.get_default_device()

    @torch.no_grad()
    def reload(self, model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
        kernel: dict[int, tuple[dict, dict]] = {}
        modules = list(model.modules())
        for m in modules:
            kernel[id(m)] = (
                {n: p for n, p in m._parameters.items() if p is not None},
                {n: b for n, b in m._buffers.items() if b is not None},
            )
            params, buffers = self._meta.get(id(m), ({}, {}))
            for n in list(kernel[id(m)][0]) + list(kernel[id(m)][1]):
                delattr(m, n)
            dev = self._device.get(id(m), torch.device("cpu"))
            for n, meta in params.items():
                m.register_parameter(n, _materialize(meta, dev))
            for n, meta in buffers.items():
                m.register_buffer(n, _materialize(meta, dev))
        load_weights(model, weights)
        for m in modules:
            self.post_load(m)
            params, buffers = kernel[id(m)]
            for n, p in params.items():
                p.data.copy_(getattr(m, n))
            for n, b in buffers.items():
                if n in m._buffers:
                    b.data.copy_(getattr(m, n))
            for n in list(m._parameters) + list(m._buffers):
                delattr(m, n)
            for n, p in params.items():
                m.register_parameter(n, p)
            for n, b in buffers.items():
                m.register_buffer(n, b)


def _meta_of(t: torch.Tensor) -> dict:
    return {
        "size": tuple(t.size()),
        "stride": tuple(t.stride()),
        "dtype": t.dtype,
        "cls": t.__class__,
        "dict": dict(t.__dict__),
        "requires_grad": t.requires_grad,
    }


def _materialize(meta: dict, device: torch.device) -> torch.Tensor:
    t = torch.empty_strided(meta["size"], meta["stride"], dtype=meta["dtype"], device=device)
    if issubclass(meta["cls"], torch.nn.Parameter):
        t = torch.nn.Parameter(t, requires_grad=False)
        if meta["cls"] is not torch.nn.Parameter:
            t.__class__ = meta["cls"]
    t.__dict__.update(meta["dict"])
    return t


def choose_driver(prefer_vllm: bool, post_load: Callable = default_post_load, dtype=None):
    """vLLM's path when requested and importable, else the simulation; plus why."""
    if prefer_vllm:
        why = VllmLayerwiseReload.importable()
        if why is None:
            return VllmLayerwiseReload(dtype), None
        return SimulatedLayerwiseReload(post_load), f"vLLM reload API not importable ({why})"
    return SimulatedLayerwiseReload(post_load), "recipe runs outside vLLM (plain torch kernel)"
