"""Shared set-up for recipes that build real vLLM layers (vLLM imported lazily, in the child)."""

from __future__ import annotations

import importlib
import os
import socket
import sys
import types
from types import SimpleNamespace

_STATE: dict = {}


def vllm_unavailable(device: str) -> str | None:
    if not device.startswith("cuda"):
        return "needs --device cuda: vLLM's kernels (Marlin, Machete, CUTLASS) are CUDA-only"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device is visible"
    try:
        import vllm  # noqa: F401
    except Exception as exc:
        return f"vLLM is not importable ({type(exc).__name__}: {exc})"
    return None


class _StubModule(types.ModuleType):
    """Stands in for an op library absent from the device bundle; any use raises."""

    def __init__(self, name: str, reason: str):
        super().__init__(name)
        self.__path__ = []  # a package: submodule imports fail with ImportError
        self._reason = reason

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name.endswith("_AVAILABLE"):
            return False

        def unavailable(*args, **kwargs):
            raise RuntimeError(f"{self.__name__}.{name} is not in the bundle ({self._reason})")

        return unavailable


def install_import_shims() -> list[str]:
    """Let vLLM's linear/MoE modules import where FlashAttention's extension is missing.

    ``vllm.vllm_flash_attn`` raises at import without ``_vllm_fa2_C``/``_vllm_fa3_C``, and the
    quantization modules import the attention package. The stub makes the import succeed; any
    attention kernel call would raise (none of the recipes runs attention)."""
    if "notes" in _STATE:
        return _STATE["notes"]
    notes: list[str] = []
    try:
        importlib.import_module("vllm.vllm_flash_attn")
    except ImportError as exc:
        sys.modules["vllm.vllm_flash_attn"] = _StubModule("vllm.vllm_flash_attn", str(exc))
        notes.append(
            "harness shim: vllm.vllm_flash_attn stubbed (FlashAttention extension not in the "
            "bundle); no attention kernel is exercised"
        )
    _STATE["notes"] = notes
    return notes


def shim_notes() -> list[str]:
    return list(_STATE.get("notes", []))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_vllm(device: str) -> None:
    """One process: a current VllmConfig and a world-size-1 TP group (vLLM parameters need it)."""
    if _STATE.get("ready"):
        return
    import torch

    install_import_shims()
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed.parallel_state import (
        init_distributed_environment,
        initialize_model_parallel,
    )

    torch.cuda.set_device(torch.device(device).index or 0)
    cfg = VllmConfig()
    ctx = set_current_vllm_config(cfg)
    ctx.__enter__()
    _STATE["config_ctx"] = ctx
    _STATE["config"] = cfg
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    init_distributed_environment(
        world_size=1,
        rank=0,
        distributed_init_method=f"tcp://127.0.0.1:{_free_port()}",
        local_rank=0,
        backend="nccl",
    )
    initialize_model_parallel(1, 1)
    _STATE["ready"] = True


class HarnessModelConfig:
    """A stand-in ``VllmConfig.model_config`` (no Hugging Face model exists here): the dtype,
    no ``--quantization-config`` override, and an ``hf_config`` carrying the checkpoint's
    quantization dict. Anything else vLLM asks of it raises with the attribute's name."""

    def __init__(self, dtype, quant_dict=None, **hf_attrs):
        self.dtype = dtype
        self.quantization_config = None
        self.hf_config = SimpleNamespace(
            model_type="reload_lint_harness", quantization_config=dict(quant_dict or {}), **hf_attrs
        )
        self.hf_text_config = self.hf_config
        # what layer constructors ask of a text model's config
        self.is_diffusion = False
        self.is_multimodal_model = False
        self.is_encoder_decoder = False
        self.use_mla = "qk_nope_head_dim" in hf_attrs
        self.max_model_len = 4096
        self.enforce_eager = False

    def __getattr__(self, name):
        raise AttributeError(f"harness model_config has no {name!r} (no HF model is loaded)")


def install_model_config(dtype, quant_dict=None, **hf_attrs) -> str | None:
    """Give the current VllmConfig a HarnessModelConfig when it has none; a note if so."""
    cfg = _STATE.get("config")
    if cfg is None or getattr(cfg, "model_config", None) is not None:
        return None
    object.__setattr__(cfg, "model_config", HarnessModelConfig(dtype, quant_dict, **hf_attrs))
    return (
        "harness shim: VllmConfig.model_config is a stand-in (dtype "
        f"{str(dtype).replace('torch.', '')}, hf_config.quantization_config = the row's dict)"
    )


class ConfigView:
    """The current VllmConfig with a stand-in ``model_config`` (no HF model exists here)."""

    def __init__(self, cfg, dtype):
        self._cfg = cfg
        self.model_config = SimpleNamespace(dtype=dtype)

    def __getattr__(self, name):
        return getattr(self._cfg, name)


def patch_model_config_dtype(module, dtype) -> str | None:
    """Give ``module.get_current_vllm_config()`` a model_config.dtype if it has none."""
    real = module.get_current_vllm_config
    cfg = real()
    if getattr(cfg, "model_config", None) is not None:
        return None
    module.get_current_vllm_config = lambda: ConfigView(real(), dtype)
    return (
        f"harness shim: {module.__name__}.get_current_vllm_config() has no model_config "
        f"(no HF model); model_config.dtype={str(dtype).replace('torch.', '')} supplied"
    )


def layer_forward(layer):
    def fwd(x):
        out = layer(x)
        return out[0] if isinstance(out, tuple) else out

    return fwd


def gen(seed: int):
    import torch

    return torch.Generator().manual_seed(seed)
