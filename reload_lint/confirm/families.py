"""The family table: which real vLLM configuration reaches each flagged site.

Start here. A finding names a quant method, scheme, kernel, experts class or helper function.
Each row below is one *family*: a layer kind (``linear``, ``moe``, ``mla``), a quantization
config built from a minimal checkpoint-style dict (vLLM's own ``from_config``), the classes the
row drives (``components``: the quant method / scheme / kernel classes; ``kernels``: experts or
kernel classes those build) and the backends to force where vLLM lets one choose
(``KernelConfig.moe_backend``). The harness (``recipes/``) builds the layer through vLLM's
``create_weights``, loads synthetic checkpoint tensors through the parameters' weight loaders,
runs post-load, captures, reloads through vLLM's layerwise path and replays.

A finding maps to a row generically (``map_finding``), never per site:

1. the class of the finding's symbol (``Fp8MoEMethod._setup_kernel`` -> ``Fp8MoEMethod``) is a
   row's component or kernel;
2. else the finding's trace names the post-load root that reaches it (a helper such as
   ``prepare_fp8_moe_layer_for_marlin`` -> ``post-load root CompressedTensorsW8A8Fp8MoEMethod
   .process_weights_after_loading``), and that class is a row's component or kernel.

Whether the run actually executed the flagged store is measured, not assumed: the pipeline
traces the lines run in the finding's file during post-load, and a site whose line did not run
on any of the row's backends is reported with the guard that skipped it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reload_lint.confirm.rows import (
    _MLA_FORWARD,
    FP8_TOKEN,
    INT8_TOKEN,
    MODELOPT_NVFP4,
    Row,
    _ct,
    _qk,
    _quark,
    _w,
)
from reload_lint.confirm.rows_0330 import ROWS_0330
from reload_lint.confirm.targets import symbol_class_of

_ROOT = re.compile(r"post-load root ([A-Za-z_][\w]*)\.")
_REACHED = re.compile(r"reached from ([A-Za-z_][\w]*)\.")


ROWS_0251: tuple[Row, ...] = (
    # -- dense linear kernels (hand-built recipes in recipes/vllm_linear.py) ------------------
    Row(
        "linear-marlin-gptq",
        "recipe",
        components=("MarlinLinearKernel",),
        recipe="vllm-marlin-gptq-act-order",
    ),
    Row(
        "linear-machete-gptq",
        "recipe",
        components=("MacheteLinearKernel",),
        recipe="vllm-machete-gptq-act-order",
    ),
    Row(
        "linear-fp8-marlin",
        "recipe",
        components=("MarlinFP8ScaledMMLinearKernel", "Fp8LinearMethod"),
        recipe="vllm-fp8-marlin-fallback",
    ),
    Row(
        "linear-fp4-marlin",
        "recipe",
        components=("MarlinNvFp4LinearKernel", "MarlinMxFp4LinearKernel"),
        recipe="vllm-nvfp4-marlin-w4a16",
    ),
    Row(
        "linear-mxfp8-marlin",
        "recipe",
        components=("MarlinMxfp8LinearKernel", "ModelOptMxFp8LinearMethod"),
        recipe="vllm-mxfp8-marlin",
    ),
    Row(
        "linear-ct-wna8o8-int",
        "linear",
        components=("CompressedTensorsWNA8O8Int",),
        quant=_ct(
            _w(4, "int", "channel"),
            _w(8, "int", "tensor"),
            "pack-quantized",
            outputs=_w(8, "int", "tensor"),
        ),
    ),
    # -- fused MoE ----------------------------------------------------------------------------
    Row("moe-unquantized", "moe", components=("UnquantizedFusedMoEMethod",), quant=None),
    Row(
        "moe-fp8",
        "moe",
        components=("Fp8MoEMethod",),
        quant=("fp8", {"quant_method": "fp8", "activation_scheme": "dynamic"}),
        backends=("auto", "cutlass", "marlin"),
    ),
    Row(
        "moe-fp8-block",
        "moe",
        components=("Fp8MoEMethod",),
        quant=(
            "fp8",
            {
                "quant_method": "fp8",
                "activation_scheme": "dynamic",
                "weight_block_size": [128, 128],
            },
        ),
        # DeepGEMM JIT-compiles from headers the device bundle does not carry: not forced
        env=(("VLLM_USE_DEEP_GEMM", "0"),),
    ),
    Row(
        "moe-ct-w8a8-fp8",
        "moe",
        components=("CompressedTensorsW8A8Fp8MoEMethod",),
        kernels=("CutlassExpertsFp8Base", "CutlassExpertsFp8", "TritonOrCutlassExperts"),
        quant=_ct(_w(8, "float", "channel"), FP8_TOKEN, "float-quantized"),
        backends=("auto", "triton", "marlin"),
    ),
    Row(
        "moe-ct-w8a8-int8",
        "moe",
        components=("CompressedTensorsW8A8Int8MoEMethod",),
        quant=_ct(_w(8, "int", "channel"), INT8_TOKEN, "int-quantized"),
    ),
    Row(
        "moe-ct-w4a8-int8",
        "moe",
        components=("CompressedTensorsW4A8Int8MoEMethod",),
        quant=_ct(_w(4, "int", "group", group_size=128), INT8_TOKEN, "int-quantized"),
    ),
    Row(
        "moe-ct-w4a8-fp8",
        "moe",
        components=("CompressedTensorsW4A8Fp8MoEMethod",),
        kernels=("CutlassExpertsW4A8Fp8",),
        quant=_ct(_w(4, "int", "group", group_size=128), FP8_TOKEN, "int-quantized"),
    ),
    Row(
        "moe-ct-wna16-marlin",
        "moe",
        components=("CompressedTensorsWNA16MarlinMoEMethod",),
        quant=_ct(_w(4, "int", "group", group_size=128), None, "pack-quantized"),
    ),
    Row(
        "moe-ct-wna16-rdna3",
        "moe",
        components=("CompressedTensorsWNA16RDNA3MoEMethod",),
        unsupported=(
            "CompressedTensorsWNA16RDNA3MoEMethod is built only when current_platform.is_rocm() "
            "(compressed_tensors_moe.get_moe_method -> rocm_moe_rdna.make_method); its HIP "
            "kernels do not exist for CUDA"
        ),
    ),
    Row(
        "moe-ct-nvfp4",
        "moe",
        components=("CompressedTensorsW4A4Nvfp4MoEMethod",),
        quant=_ct(
            _w(4, "float", "tensor_group", group_size=16),
            _w(4, "float", "tensor_group", group_size=16, dynamic="local"),
            "nvfp4-pack-quantized",
        ),
        backends=("auto", "marlin"),
    ),
    Row(
        "moe-ct-mxfp4",
        "moe",
        components=("CompressedTensorsW4A4Mxfp4MoEMethod",),
        quant=_ct(
            _w(4, "float", "group", group_size=32, scale_dtype="torch.uint8", zp_dtype=None),
            None,
            "mxfp4-pack-quantized",
        ),
        backends=("auto", "marlin"),
    ),
    Row(
        "moe-ct-mxfp8",
        "moe",
        components=("CompressedTensorsW8A8Mxfp8MoEMethod",),
        quant=_ct(
            _w(8, "float", "group", group_size=32, scale_dtype="torch.uint8", zp_dtype=None),
            _w(8, "float", "group", group_size=32, dynamic=True, scale_dtype="torch.uint8"),
            "mxfp8-quantized",
        ),
        backends=("auto", "marlin"),
    ),
    Row(
        "moe-modelopt-fp8",
        "moe",
        components=("ModelOptFp8MoEMethod",),
        quant=("modelopt", {"quantization": {"quant_algo": "FP8", "exclude_modules": []}}),
        backends=("auto", "cutlass"),
    ),
    Row(
        "moe-modelopt-nvfp4",
        "moe",
        components=("ModelOptNvFp4FusedMoE",),
        quant=MODELOPT_NVFP4,
        backends=("auto", "marlin"),
    ),
    # FlashInfer NVFP4 MoE backends the H200 cannot run (census tier, recipes/standins.py):
    # vLLM's oracle refuses them on SM90 only through the experts class's
    # _supports_current_device (SM100/SM120 family and flashinfer); that one check is stood in,
    # and so is every flashinfer piece their post-load and forward import or call
    Row(
        "moe-modelopt-nvfp4-trtllm",
        "moe",
        components=("ModelOptNvFp4FusedMoE",),
        kernels=(
            "TrtLlmNvFp4ExpertsBase",
            "TrtLlmNvFp4ExpertsMonolithic",
            "TrtLlmNvFp4ExpertsModular",
        ),
        quant=MODELOPT_NVFP4,
        backends=("flashinfer_trtllm",),
        # a clamped SwiGLU (gpt-oss style limits on a SiLU MoE, as ModelOpt NVFP4 checkpoints
        # carry them on the MoE config): the per-expert clamp/alpha/beta the TRT-LLM post-load
        # registers exist only then
        moe_kwargs=(("swiglu_limit", 7.0), ("swiglu_alpha", 1.702), ("swiglu_beta", 1.0)),
        standins=(
            "TrtLlmNvFp4ExpertsBase._supports_current_device",
            "flashinfer.nvfp4_block_scale_interleave",
            "flashinfer.fused_moe.core._maybe_get_cached_w3_w1_permute_indices",
            "flashinfer.fused_moe.core.get_w2_permute_indices_with_cache",
            "flashinfer.fused_moe.core.ActivationType",
            "flashinfer.fused_moe.trtllm_fp4_block_scale_moe",
            "flashinfer.fused_moe.trtllm_fp4_block_scale_routed_moe",
            "vllm._custom_ops.scaled_fp4_quant",
        ),
        notes=(
            "TRT-LLM gen NVFP4 MoE: SM100 family only; scaled_fp4_quant's CUDA kernel is built "
            "for SM100/SM120 only",
        ),
        platform="SM100 (Blackwell) with flashinfer",
    ),
    Row(
        "moe-modelopt-nvfp4-b12x",
        "moe",
        components=("ModelOptNvFp4FusedMoE",),
        kernels=("FlashInferB12xExperts",),
        quant=MODELOPT_NVFP4,
        backends=("flashinfer_b12x",),
        standins=(
            "FlashInferB12xExperts._supports_current_device",
            "flashinfer.cute_dsl.utils.convert_sf_to_mma_layout",
            "flashinfer.fused_moe.B12xMoEWrapper",
        ),
        notes=("B12x CuteDSL NVFP4 MoE: SM120 family only, never auto-selected",),
        platform="SM120 with flashinfer",
    ),
    Row(
        "moe-modelopt-mxfp8",
        "moe",
        components=("ModelOptMxFp8FusedMoE",),
        quant=(
            "modelopt_mxfp8",
            {
                "quantization": {
                    "quant_algo": "MXFP8",
                    "exclude_modules": [],
                    "kv_cache_quant_algo": None,
                }
            },
        ),
        backends=("auto", "marlin"),
    ),
    Row(
        "moe-mxfp4",
        "moe",
        components=("Mxfp4MoEMethod",),
        quant=(
            "fp8",
            {"quant_method": "fp8", "activation_scheme": "dynamic", "store_dtype": "mxfp4"},
        ),
        backends=("auto", "marlin", "triton"),
        activation="swigluoai",
    ),
    Row(
        "moe-gpt-oss-mxfp4",
        "moe",
        components=("GptOssMxfp4MoEMethod",),
        quant=("gpt_oss_mxfp4", {"quant_method": "mxfp4"}),
        backends=("auto", "marlin", "triton"),
        activation="swigluoai",
    ),
    Row(
        "moe-quark-fp8",
        "moe",
        components=("QuarkW8A8Fp8MoEMethod",),
        quant=_quark(_qk("fp8_e4m3", "per_tensor", False), _qk("fp8_e4m3", "per_tensor", False)),
        backends=("auto", "cutlass"),
    ),
    Row(
        "moe-quark-ocp-mx",
        "moe",
        components=("QuarkOCP_MX_MoEMethod",),
        quant=_quark(
            _qk("fp4", "per_group", False, group_size=32, scale_format="e8m0", ch_axis=-1),
            None,
        ),
        backends=("auto", "marlin", "triton"),
        activation="swigluoai",
    ),
    Row(
        "moe-quark-nvfp4",
        "moe",
        components=("QuarkNvfp4MoEMethod",),
        quant=_quark(
            [
                _qk("fp4", "per_group", False, group_size=16, scale_format="fp8_e4m3", ch_axis=-1),
                _qk("fp8_e4m3", "per_tensor", False),
            ],
            [
                _qk("fp4", "per_group", True, group_size=16, scale_format="fp8_e4m3", ch_axis=-1),
                _qk("fp8_e4m3", "per_tensor", False),
            ],
        ),
        backends=("auto", "marlin"),
    ),
    Row(
        "moe-awq",
        "moe",
        components=("AutoAWQMoEMethod",),
        quant=("awq", {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}),
    ),
    Row(
        "moe-gptq",
        "moe",
        components=("AutoGPTQMoEMethod",),
        quant=(
            "gptq",
            {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True},
        ),
    ),
    Row(
        "moe-humming",
        "moe",
        components=("HummingMoEMethod",),
        kernels=("HummingExpertsBase",),
        quant=("humming", {"quant_method": "humming", "bits": 4, "group_size": 128}),
    ),
    Row(
        "moe-online-fp8",
        "moe",
        components=("_Fp8OnlineMoEBase", "Fp8PerBlockOnlineMoEMethod"),
        quant=("online", "fp8_per_block"),
        backends=("auto", "cutlass"),
    ),
    Row(
        # `--quantization fp8_per_channel`: per-channel weights, per-token activations; this
        # online method lets the oracle pick vLLM's CUTLASS experts (TritonOrCutlassExperts on
        # SM90), whose constructor allocates the stride tensors a rebuild frees
        "moe-online-fp8-ptpc",
        "moe",
        components=("_Fp8OnlineMoEBase", "Fp8PtpcOnlineMoEMethod"),
        kernels=("CutlassExpertsFp8Base", "CutlassExpertsFp8", "TritonOrCutlassExperts"),
        quant=("online", "fp8_per_channel"),
        backends=("auto", "triton"),
    ),
    Row(
        "moe-online-int8",
        "moe",
        components=("Int8OnlineMoEMethod",),
        quant=("online", "int8_per_channel_weight_only"),
    ),
    Row(
        "moe-online-mxfp8",
        "moe",
        components=("Mxfp8OnlineMoEMethod",),
        quant=("online", "mxfp8"),
        backends=("auto", "marlin"),
    ),
    Row(
        "moe-xpu",
        "moe",
        components=("XPUExperts",),
        unsupported=(
            "XPUExperts is selected only on Intel XPU (Fp8MoeBackend.XPU needs "
            "current_platform.is_xpu()); its fused_moe_impl comes from the XPU kernels package"
        ),
    ),
    # -- attention ----------------------------------------------------------------------------
    Row(
        "mla-fp8-kv-b-proj",
        "mla",
        components=("MLAAttention",),
        quant=(
            "fp8",
            {
                "quant_method": "fp8",
                "activation_scheme": "dynamic",
                "weight_block_size": [128, 128],
            },
        ),
        notes=("DeepSeek-V3/R1 checkpoints: an FP8 block-quantized kv_b_proj",),
        env=(("VLLM_USE_DEEP_GEMM", "0"),),
        harness_forward=_MLA_FORWARD,
    ),
    Row("mla-bf16-kv-b-proj", "mla", components=("MLAAttention",), harness_forward=_MLA_FORWARD),
    # ROCm AITER paths of MLAAttention, forced on CUDA with stand-ins (census tier)
    Row(
        "mla-rocm-aiter-fp8-bmm",
        "mla",
        components=("MLAAttention",),
        quant=(
            "fp8",
            {
                "quant_method": "fp8",
                "activation_scheme": "dynamic",
                "weight_block_size": [128, 128],
            },
        ),
        env=(("VLLM_USE_DEEP_GEMM", "0"),),
        layer_flags=(("is_aiter_triton_fp8_bmm_enabled", True),),
        standins=("rocm_aiter_ops.triton_fp8_bmm",),
        notes=("rocm_aiter_ops.is_fp8bmm_enabled() is ROCm-only; the flag is set on the layer",),
        platform="ROCm (AITER triton FP8 BMM)",
        harness_forward=_MLA_FORWARD,
    ),
    Row(
        "mla-rocm-aiter-fp4-bmm",
        "mla",
        components=("MLAAttention",),
        layer_flags=(("is_aiter_triton_fp4_bmm_enabled", True),),
        standins=(
            "aiter.ops.triton.quant.dynamic_mxfp4_quant",
            "rocm_aiter_ops.batched_gemm_a16wfp4",
        ),
        notes=("rocm_aiter_ops.is_fp4bmm_enabled() needs gfx950; the flag is set on the layer",),
        platform="ROCm gfx950 (AITER triton FP4 BMM)",
        harness_forward=_MLA_FORWARD,
    ),
    Row(
        "attn-flashinfer",
        "attention",
        components=("FlashInferImpl",),
        unsupported=(
            "FlashInferImpl needs the flashinfer package (its attention wrappers are built in "
            "the backend's metadata builder); flashinfer is not installable on the H200 image "
            "and vLLM has no fake registration for its ops"
        ),
    ),
)

#: rows added for vLLM 0.33.0 classes (rows_0330.py) come after those of 0.25.1
ROWS: tuple[Row, ...] = (*ROWS_0251, *ROWS_0330)
BY_ID = {r.id: r for r in ROWS}


@dataclass(frozen=True)
class Mapping:
    row: Row | None
    how: str  # "symbol class X" | "trace root X" | why nothing matched


def _rows_for(cls: str) -> list[Row]:
    return [r for r in ROWS if cls in r.classes()]


def trace_roots(finding) -> list[str]:
    """Classes the finding's trace names as the post-load root reaching it (then the methods it
    is reached from), nearest first."""
    out: list[str] = []
    for step in reversed(getattr(finding, "trace", None) or []):
        note = step.get("note", "") if isinstance(step, dict) else getattr(step, "note", "")
        for rx in (_ROOT, _REACHED):
            m = rx.search(note or "")
            if m and m.group(1)[:1].isupper() and m.group(1) not in out:
                out.append(m.group(1))
    return out


def map_finding(finding) -> Mapping:
    """The family row that reaches this finding (see the module docstring)."""
    cls = symbol_class_of(finding.symbol)
    if cls is not None:
        rows = _rows_for(cls)
        if rows:
            return Mapping(rows[0], f"symbol class {cls}")
    for root in trace_roots(finding):
        rows = _rows_for(root)
        if rows:
            return Mapping(rows[0], f"trace root {root}")
    what = cls or (finding.symbol or finding.path)
    return Mapping(None, f"no family row lists {what} or a post-load root in its trace")


def rows_for_finding(finding) -> list[Row]:
    """Every row that may reach the finding: rows sharing the mapped row's component reach it
    with other configurations (``moe-fp8`` and ``moe-fp8-block`` both drive Fp8MoEMethod)."""
    m = map_finding(finding)
    if m.row is None:
        return []
    comp = set(m.row.components)
    return [m.row, *[r for r in ROWS if r is not m.row and comp & set(r.components)]]
