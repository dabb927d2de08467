"""Stand-ins for kernels this device cannot run (census tier, docs/runner.md "Tiers").

A stand-in reads the same inputs as the kernel it replaces (so the dispatch recorder sees the
same graph-visible storages) and returns tensors of the shapes the caller's code relies on: the
views vLLM applies to the result (``quark_quantize_weight_to_mxfp4``: packed ``[*, d/2]`` and
scales ``[*, d/32]``) or the output buffer it passes (``YQ``/``Y``). Where the math is plain
(a dequantize-and-bmm), the stand-in does it, so the eager comparisons stay meaningful; the
values of an MXFP4 quantization are not reproduced (zeros of the right shape and dtype).

Each installed stand-in is named in the run's ``standins`` and makes the run census tier.
"""

from __future__ import annotations

import sys
import types

#: stand-in name -> installer; each installer patches vLLM (or registers a module) and returns
#: the name it records
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


def install(names) -> list[str]:
    """Install the named stand-ins in this (child) process; returns what was installed."""
    done = []
    for name in names:
        if name == "rocm_aiter_ops.triton_fp8_bmm":
            from vllm._aiter_ops import rocm_aiter_ops

            rocm_aiter_ops.triton_fp8_bmm = staticmethod(_fp8_bmm)
        elif name == "rocm_aiter_ops.batched_gemm_a16wfp4":
            from vllm._aiter_ops import rocm_aiter_ops

            rocm_aiter_ops.batched_gemm_a16wfp4 = staticmethod(_a16wfp4_bmm)
        elif name == "aiter.ops.triton.quant.dynamic_mxfp4_quant":
            for mod in ("aiter", "aiter.ops", "aiter.ops.triton"):
                sys.modules.setdefault(mod, types.ModuleType(mod))
            quant = types.ModuleType("aiter.ops.triton.quant")
            quant.dynamic_mxfp4_quant = _dynamic_mxfp4_quant
            sys.modules["aiter.ops.triton.quant"] = quant
        else:
            raise KeyError(f"no stand-in named {name!r}")
        INSTALLED.add(name)
        done.append(name)
    return done
