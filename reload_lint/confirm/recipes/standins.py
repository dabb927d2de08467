"""Stand-ins for kernels this device cannot run (census tier, docs/runner.md "Tiers").

A stand-in reads the same inputs as the kernel it replaces (so the dispatch recorder sees the
same graph-visible storages) and returns tensors of the shapes the caller's code relies on: the
views vLLM applies to the result (``quark_quantize_weight_to_mxfp4``: packed ``[*, d/2]`` and
scales ``[*, d/32]``) or the output buffer it passes (``YQ``/``Y``). Where the math is plain
(a dequantize-and-bmm), the stand-in does it, so the eager comparisons stay meaningful; the
values of an MXFP4 quantization are not reproduced (zeros of the right shape and dtype).

Two more kinds serve the FlashInfer NVFP4 MoE rows: a capability check (an experts class's
``_supports_current_device``, the one check by which vLLM refuses the backend on SM90, reduced
to ``is_cuda()``) and ``flashinfer`` stand-in modules holding only the names vLLM's Python
imports; any other name raises with its name (the exact missing piece).

Each installed stand-in is named in the run's ``standins`` and makes the run census tier.
"""

from __future__ import annotations

import enum
import importlib
import sys
import types

#: the stand-ins installed in this process (``STANDINS`` at the end of the module lists them all)
INSTALLED: set[str] = set()


def _fp8_bmm(
    X,
    WQ,
    w_scale,
    group_size=128,
    bias=None,
    dtype=None,
    splitK=None,
    YQ=None,
    transpose_bm=False,
    config=None,
):
    """``rocm_aiter_ops.triton_fp8_bmm``: (N, B, K) x (N, M, K)^T, per-tensor dequantized."""
    import torch

    w = WQ.to(torch.float32) * w_scale.to(torch.float32)
    y = torch.bmm(X.to(torch.float32), w.transpose(1, 2))
    if bias is not None:
        y = y + bias.to(torch.float32)
    if transpose_bm:
        y = y.transpose(0, 1)
    y = y.to(dtype or torch.bfloat16)
    if YQ is not None:
        YQ.copy_(y.reshape(YQ.shape))
        return YQ
    return y


def _a16wfp4_bmm(X, W, w_scale, Y=None, transpose_bm=False, prequant=False, y_scale=None):
    """``rocm_aiter_ops.batched_gemm_a16wfp4``: reads X, the packed MXFP4 weight and its
    scales; the result has the output's shape (values are not the MXFP4 product)."""
    import torch

    n, b, _ = X.shape
    m = W.shape[1]
    touch = (W.to(torch.float32).mean() + w_scale.to(torch.float32).mean()) * 0.0
    y = torch.zeros(n, b, m, dtype=torch.float32, device=X.device) + touch + X.float().mean() * 0
    if transpose_bm:
        y = y.transpose(0, 1)
    if Y is not None:
        Y.copy_(y.reshape(Y.shape).to(Y.dtype))
        return Y
    return y.to(torch.bfloat16)


def _dynamic_mxfp4_quant(x):
    """``aiter.ops.triton.quant.dynamic_mxfp4_quant``: packed e2m1 [M, d/2] and e8m0 scales
    [M, d/32], fresh tensors (what vLLM views and stores)."""
    import torch

    m, d = x.shape
    packed = torch.zeros(m, d // 2, dtype=torch.uint8, device=x.device)
    scales = torch.full((m, d // 32), 127, dtype=torch.uint8, device=x.device)
    return packed, scales


# -- FlashInfer NVFP4 MoE (TRT-LLM gen, SM100 family; B12x, SM120 family) ----------------------
#
# vLLM's Python for these backends runs unchanged; what the H200 lacks is (a) the capability
# check that admits the backend (``_supports_current_device``: SM100/SM120 family and flashinfer)
# and (b) the flashinfer pieces the post-load and the forward import or call. Each stand-in below
# takes the call signature vLLM uses (trtllm_nvfp4_moe.py, flashinfer_b12x_moe.py,
# flashinfer_fp4_moe.prepare_static_weights_for_trtllm_fp4_moe) and returns what vLLM's code then
# views or reshapes. Kernel outputs are a digest of every tensor the kernel reads (so the eager
# forward after the reload still tells whether it reads the reloaded values), not the product.


def _digest(*tensors):
    """A scalar that depends on every tensor argument (1-byte dtypes read as raw bytes: packed
    FP4 and FP8 bit patterns include NaN encodings)."""
    import torch

    total = None
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            continue
        v = t.view(torch.uint8) if t.element_size() == 1 else t
        m = v.float().mean()
        total = m if total is None else total + m
    return total


def _cuda_only() -> bool:
    """Stand-in for an experts class's ``_supports_current_device``: the capability family and
    flashinfer checks dropped, ``is_cuda()`` kept."""
    from vllm.platforms import current_platform

    return current_platform.is_cuda()


def _block_scale_interleave(unswizzled_sf):
    """``flashinfer.nvfp4_block_scale_interleave``: a [rows, cols] uint8 scale matrix in the
    128x4 interleaved (swizzled) layout, padded to (round_up(rows, 128), round_up(cols, 4)),
    returned flat (vLLM views and reshapes it)."""
    import torch

    rows, cols = unswizzled_sf.shape[-2], unswizzled_sf.shape[-1]
    rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
    sf = unswizzled_sf.reshape(rows, cols)
    if (rp, cp) != (rows, cols):
        pad = torch.zeros(rp, cp, dtype=sf.dtype, device=sf.device)
        pad[:rows, :cols] = sf
        sf = pad
    out = sf.reshape(rp // 128, 4, 32, cp // 4, 4).permute(0, 3, 2, 1, 4)
    return out.contiguous().reshape(-1)


def _w3_w1_permute_indices(
    cache, dst_w3_w1_weight, epilogue_tile_m, num_elts_per_sf=None, is_gated_act_gemm=True
):
    """``flashinfer.fused_moe.core._maybe_get_cached_w3_w1_permute_indices``: a row
    permutation of the [2N, K] w3/w1 weight (gated: the halves interleaved in 8-row blocks, as
    ``reorder_rows_for_gated_act_gemm`` does), cached by shape like flashinfer's."""
    import torch

    key = ("w3_w1", tuple(dst_w3_w1_weight.shape), num_elts_per_sf, is_gated_act_gemm)
    if key not in cache:
        m = dst_w3_w1_weight.shape[0]
        idx = torch.arange(m)
        if is_gated_act_gemm and m % 16 == 0:
            half = m // 2
            idx = torch.stack([idx[:half].view(-1, 8), idx[half:].view(-1, 8)], 1).reshape(-1)
        cache[key] = idx
    return cache[key]


def _w2_permute_indices(cache, dst_w2_weight, epilogue_tile_m, num_elts_per_sf=None):
    """``flashinfer.fused_moe.core.get_w2_permute_indices_with_cache``: a row permutation of
    the w2 weight (identity here: the epilogue-tile shuffle is a kernel detail), cached."""
    import torch

    key = ("w2", tuple(dst_w2_weight.shape), num_elts_per_sf)
    if key not in cache:
        cache[key] = torch.arange(dst_w2_weight.shape[0])
    return cache[key]


class ActivationType(enum.IntEnum):
    """``flashinfer.fused_moe.core.ActivationType`` (vLLM maps its activations onto it)."""

    Gelu = 0
    Relu = 1
    Silu = 2
    Swiglu = 3
    Geglu = 4
    SwigluBias = 5
    Relu2 = 6
    Identity = 7
    InvalidType = 8


def _trtllm_fp4_block_scale_moe(*, routing_logits, hidden_states, **kw):
    """``flashinfer.fused_moe.trtllm_fp4_block_scale_moe`` (monolithic: routing + experts):
    reads the packed FP4 activations, their scales, every weight/scale/bias argument, and
    returns ``[output]`` with output [tokens, 2 * packed hidden] bf16."""
    import torch

    tensors = [routing_logits, *(v for v in kw.values() if isinstance(v, torch.Tensor))]
    d = _digest(*tensors)
    hs = hidden_states.view(torch.uint8).float().repeat_interleave(2, dim=-1) / 255.0
    return [(hs + d).to(torch.bfloat16)]


def _trtllm_fp4_block_scale_routed_moe(*, topk_ids, hidden_states, output, **kw):
    """``flashinfer.fused_moe.trtllm_fp4_block_scale_routed_moe`` (modular: packed top-k in,
    ``output`` written in place)."""
    import torch

    tensors = [topk_ids, *(v for v in kw.values() if isinstance(v, torch.Tensor))]
    d = _digest(*tensors)
    hs = hidden_states.view(torch.uint8).float().repeat_interleave(2, dim=-1) / 255.0
    output.copy_((hs[..., : output.shape[-1]] + d).to(output.dtype))
    return [output]


def _convert_sf_to_mma_layout(sf, m, k, num_groups=1, sf_vec_size=16):
    """``flashinfer.cute_dsl.utils.convert_sf_to_mma_layout``: flashinfer's own definition, a
    6-D *view* of the swizzled scales (no copy: the result aliases ``sf``'s storage)."""
    sf_k = (k + sf_vec_size - 1) // sf_vec_size
    m_tiles = (m + 127) // 128
    k_tiles = (sf_k + 3) // 4
    expected = num_groups * m_tiles * k_tiles * 32 * 4 * 4
    if sf.numel() != expected:
        raise ValueError(f"scale factor tensor has {sf.numel()} elements, expected {expected}")
    return sf.view(num_groups, m_tiles, k_tiles, 32, 4, 4).permute(3, 4, 1, 5, 2, 0)


#: flashinfer's module-level workspace pool (``_get_cached_workspace``): wrappers of one
#: geometry share scratch
_B12X_WORKSPACES: dict = {}


class B12xMoEWrapper:
    """``flashinfer.fused_moe.B12xMoEWrapper``: with ``use_cuda_graph=True`` it pre-allocates,
    as flashinfer's does, a workspace from a module-level pool shared by wrappers of one geometry
    and a private ``_moe_output`` [max_num_tokens, hidden] bf16 that ``run`` writes and returns
    a slice of (vLLM copies it out)."""

    def __init__(
        self,
        num_experts,
        top_k,
        hidden_size,
        intermediate_size,
        *,
        use_cuda_graph=False,
        max_num_tokens=4096,
        num_local_experts=None,
        local_expert_offset=0,
        output_dtype=None,
        device="cuda",
        activation="silu",
        **kw,
    ):
        import torch

        self.num_experts, self.top_k = num_experts, top_k
        self.hidden_size, self.intermediate_size = hidden_size, intermediate_size
        self.use_cuda_graph, self.max_num_tokens = use_cuda_graph, max_num_tokens
        self.num_local_experts = num_local_experts or num_experts
        self.output_dtype = output_dtype or torch.bfloat16
        self.device = device
        self.activation = activation
        self._static_workspace = None
        self._moe_output = None
        if use_cuda_graph:
            key = (self.num_local_experts, max_num_tokens * top_k, hidden_size, intermediate_size)
            if key not in _B12X_WORKSPACES:
                _B12X_WORKSPACES[key] = torch.zeros(
                    max_num_tokens * top_k, intermediate_size, dtype=torch.float32, device=device
                )
            self._static_workspace = _B12X_WORKSPACES[key]
            self._moe_output = torch.empty(
                max_num_tokens, hidden_size, dtype=self.output_dtype, device=device
            )

    def run(
        self,
        x,
        w1_weight,
        w1_weight_sf,
        w2_weight,
        w2_weight_sf,
        token_selected_experts,
        token_final_scales,
        *,
        w1_alpha,
        w2_alpha,
        fc2_input_scale=None,
    ):
        import torch

        n = token_selected_experts.size(0)
        if self.use_cuda_graph:
            out = self._moe_output[:n]
        else:
            out = torch.empty(n, self.hidden_size, dtype=self.output_dtype, device=x.device)
        d = _digest(
            w1_weight,
            w1_weight_sf,
            w2_weight,
            w2_weight_sf,
            token_final_scales,
            w1_alpha,
            w2_alpha,
            fc2_input_scale,
            token_selected_experts,
        )
        if self._static_workspace is not None:
            self._static_workspace.zero_()
            d = d + self._static_workspace[0, 0]
        out.copy_((x.float() + d).to(out.dtype))
        return out


def _create_fp4_output_tensors(m, n, device, is_sf_swizzled_layout, padded_n=None):
    """vLLM's ``_custom_ops.create_fp4_output_tensors`` (the shapes of its fake registration
    for ``_C::scaled_fp4_quant``); vLLM's own when importable."""
    try:
        from vllm._custom_ops import create_fp4_output_tensors

        return create_fp4_output_tensors(m, n, device, is_sf_swizzled_layout, padded_n=padded_n)
    except ImportError:
        pass
    import torch

    pn = padded_n if padded_n is not None else n
    out = torch.empty(m, pn // 2, dtype=torch.uint8, device=device)
    if is_sf_swizzled_layout:
        rm, rn = -(-m // 128) * 128, -(-(pn // 16) // 4) * 4
        scale = torch.zeros(rm, rn // 4, dtype=torch.int32, device=device)
    else:
        scale = torch.empty(m, pn // 16, dtype=torch.uint8, device=device)
    return out, scale


def _scaled_fp4_quant(
    input, input_global_scale, is_sf_swizzled_layout=True, backend="none", padded_n=None
):
    """``vllm._custom_ops.scaled_fp4_quant`` (its CUDA kernel is built for SM100/SM120 only):
    packed 4-bit codes of ``input * global_scale`` (clamped, rounded, offset by 8) in the
    [m, n/2] uint8 output and unit (0x38 = 1.0 in e4m3) block scales of the fake registration's
    shape, viewed as float8_e4m3fn as vLLM returns them."""
    import torch

    x = input.reshape(-1, input.shape[-1])
    m, n = x.shape
    out, scale = _create_fp4_output_tensors(m, n, x.device, is_sf_swizzled_layout, padded_n)
    g = input_global_scale.float().reshape(-1)[0]
    codes = ((x.float() * g).clamp(-7, 7).round() + 8).to(torch.uint8)
    out[:, : n // 2].copy_(codes[:, 0::2] | (codes[:, 1::2] << 4))
    scale.view(torch.uint8).fill_(0x38)
    return out, scale.view(torch.float8_e4m3fn)


class _StandinModule(types.ModuleType):
    """A ``flashinfer`` (sub)module holding only stand-ins; any other name is missing, and the
    error names it."""

    def __init__(self, name: str):
        import importlib.machinery

        super().__init__(name)
        self.__path__ = []
        self.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AttributeError(
            f"{self.__name__}.{attr} has no census stand-in (flashinfer is not installed; only "
            f"{', '.join(sorted(n for n in STANDINS if n.startswith('flashinfer.')))} are stood in)"
        )


def _module(name: str):
    """The (stand-in) module ``name``, its parents created and linked as attributes."""
    mod = sys.modules.get(name)
    if mod is None:
        mod = _StandinModule(name)
        sys.modules[name] = mod
    parent, _, leaf = name.rpartition(".")
    if parent:
        setattr(_module(parent), leaf, mod)
    return mod


def _set_flashinfer(name: str, value) -> None:
    mod, _, attr = name.rpartition(".")
    setattr(_module(mod), attr, value)


def _patch_device_check(module: str, cls: str):
    def install():
        mod = importlib.import_module(module)
        getattr(mod, cls)._supports_current_device = staticmethod(_cuda_only)

    return install


def _patch_convert_sf():
    # vLLM binds its lazy wrapper by name at import: patch the name where it is called
    for mod in ("vllm.utils.flashinfer", _B12X):
        importlib.import_module(mod).flashinfer_convert_sf_to_mma_layout = _convert_sf_to_mma_layout
    _set_flashinfer("flashinfer.cute_dsl.utils.convert_sf_to_mma_layout", _convert_sf_to_mma_layout)


def _patch_scaled_fp4_quant():
    importlib.import_module("vllm._custom_ops").scaled_fp4_quant = _scaled_fp4_quant


def _patch_aiter(attr, fn):
    def install():
        from vllm._aiter_ops import rocm_aiter_ops

        setattr(rocm_aiter_ops, attr, staticmethod(fn))

    return install


def _aiter_quant():
    for mod in ("aiter", "aiter.ops", "aiter.ops.triton"):
        sys.modules.setdefault(mod, types.ModuleType(mod))
    quant = types.ModuleType("aiter.ops.triton.quant")
    quant.dynamic_mxfp4_quant = _dynamic_mxfp4_quant
    sys.modules["aiter.ops.triton.quant"] = quant


def _flashinfer(name: str, value):
    return lambda: _set_flashinfer(name, value)


_TRTLLM = "vllm.model_executor.layers.fused_moe.experts.trtllm_nvfp4_moe"
_B12X = "vllm.model_executor.layers.fused_moe.experts.flashinfer_b12x_moe"

#: every stand-in by the name a record lists: name -> installer (run in the child process)
STANDINS = {
    "rocm_aiter_ops.triton_fp8_bmm": _patch_aiter("triton_fp8_bmm", _fp8_bmm),
    "rocm_aiter_ops.batched_gemm_a16wfp4": _patch_aiter("batched_gemm_a16wfp4", _a16wfp4_bmm),
    "aiter.ops.triton.quant.dynamic_mxfp4_quant": _aiter_quant,
    # capability checks: the one check that refuses SM90, nothing else of the oracle
    "TrtLlmNvFp4ExpertsBase._supports_current_device": _patch_device_check(
        _TRTLLM, "TrtLlmNvFp4ExpertsBase"
    ),
    "FlashInferB12xExperts._supports_current_device": _patch_device_check(
        _B12X, "FlashInferB12xExperts"
    ),
    "vllm._custom_ops.scaled_fp4_quant": _patch_scaled_fp4_quant,
    "flashinfer.nvfp4_block_scale_interleave": _flashinfer(
        "flashinfer.nvfp4_block_scale_interleave", _block_scale_interleave
    ),
    "flashinfer.fused_moe.core._maybe_get_cached_w3_w1_permute_indices": _flashinfer(
        "flashinfer.fused_moe.core._maybe_get_cached_w3_w1_permute_indices",
        _w3_w1_permute_indices,
    ),
    "flashinfer.fused_moe.core.get_w2_permute_indices_with_cache": _flashinfer(
        "flashinfer.fused_moe.core.get_w2_permute_indices_with_cache", _w2_permute_indices
    ),
    "flashinfer.fused_moe.core.ActivationType": _flashinfer(
        "flashinfer.fused_moe.core.ActivationType", ActivationType
    ),
    "flashinfer.fused_moe.trtllm_fp4_block_scale_moe": _flashinfer(
        "flashinfer.fused_moe.trtllm_fp4_block_scale_moe", _trtllm_fp4_block_scale_moe
    ),
    "flashinfer.fused_moe.trtllm_fp4_block_scale_routed_moe": _flashinfer(
        "flashinfer.fused_moe.trtllm_fp4_block_scale_routed_moe",
        _trtllm_fp4_block_scale_routed_moe,
    ),
    "flashinfer.cute_dsl.utils.convert_sf_to_mma_layout": _patch_convert_sf,
    "flashinfer.fused_moe.B12xMoEWrapper": _flashinfer(
        "flashinfer.fused_moe.B12xMoEWrapper", B12xMoEWrapper
    ),
}


def install(names) -> list[str]:
    """Install the named stand-ins in this (child) process; returns what was installed."""
    unknown = [n for n in names if n not in STANDINS]
    if unknown:
        raise KeyError(f"no stand-in named {unknown[0]!r}")
    done = []
    for name in names:
        STANDINS[name]()
        INSTALLED.add(name)
        done.append(name)
    return done
