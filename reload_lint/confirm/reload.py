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
    if any(c.__name__ == "QuantizeMethodBase" for c in type(module).__mro__):
        return False  # a quant method that is also a module: its layer runs it
    own = getattr(type(module), "process_weights_after_loading", None)
    if own is not None and callable(own):
        module.process_weights_after_loading()
        return True
    return False


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
