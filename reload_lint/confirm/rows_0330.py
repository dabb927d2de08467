"""Family rows for classes vLLM 0.33.0 added (docs/runner.md, "vLLM 0.33.0 on paper").

vLLM 0.33.0 pins ``torch==2.14.0``, ``flashinfer-python==0.7.2.post1`` and
``humming-kernels[cu13]==0.1.19`` (hard dependencies of its wheel); the lent H200 image has
torch 2.11, so these rows run on a machine with that stack (``VLLM_0330``). On SM90 vLLM 0.33.0
moves Humming ahead of Marlin in its kernel and MoE backend lists
(``quantization/utils/humming/priority.py``), so an ``auto`` build of the older MoE rows drives
Humming experts there; the Humming linear kernels are forced with ``--linear-backend humming``
(``Row.linear_backend``). Rows whose classes run on no CUDA machine say why (``unsupported``);
rows the runner has no harness for name the missing piece (``missing``).
"""

from __future__ import annotations

from reload_lint.confirm.rows import (
    INT8_TOKEN,
    MODELOPT_NVFP4,
    Row,
    _ct,
    _qk,
    _quark,
    _w,
)

#: the software stack of every 0.33.0 row
VLLM_0330 = (
    "vLLM 0.33.0 with its pinned torch 2.14.0, flashinfer-python 0.7.2.post1 and "
    "humming-kernels[cu13] 0.1.19",
)
_HUMMING = (*VLLM_0330, "the humming kernels (module `humming`, from humming-kernels)")
_NO_ATTENTION = (
    "an attention-layer harness: FamilyRecipe builds `moe`, `linear` and `mla` layers only "
    "(an Attention with a KV cache, its metadata builder and a backend's forward is not built)"
)
_GPTQ4 = (
    "gptq",
    {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True},
)
_MXFP8 = (
    "modelopt_mxfp8",
    {"quantization": {"quant_algo": "MXFP8", "exclude_modules": [], "kv_cache_quant_algo": None}},
)
_W4A16_NVFP4 = (
    "modelopt_fp4",
    {
        "quantization": {
            "quant_algo": "W4A16_NVFP4",
            "group_size": 16,
            "exclude_modules": [],
            "kv_cache_quant_algo": None,
        }
    },
)
#: a b12x block codec as ModelOpt's quant_algo (utils/b12x.B12X_BLOCK_CODECS)
_MODELOPT_IQ2 = ("modelopt", {"quantization": {"quant_algo": "IQ2_XS", "exclude_modules": []}})
_MXFP4_CT = _ct(
    _w(4, "float", "group", group_size=32, scale_dtype="torch.uint8", zp_dtype=None),
    None,
    "mxfp4-pack-quantized",
)


def _humming_linear(id_: str, kernel: str, quant) -> Row:
    return Row(
        id_,
        "linear",
        components=(kernel,),
        quant=quant,
        linear_backend="humming",
        needs=_HUMMING,
        modules=("humming",),
    )


ROWS_0330: tuple[Row, ...] = (
    # -- Humming linear kernels: one per weight format, forced with --linear-backend humming --
    _humming_linear("linear-gptq-humming", "HummingLinearKernel", _GPTQ4),
    _humming_linear("linear-mxfp4-humming", "HummingMxFp4LinearKernel", _MXFP4_CT),
    _humming_linear(
        "linear-mxfp6-humming",
        "HummingMxFp6LinearKernel",
        _quark(_qk("fp6_e2m3", "per_group", False, group_size=32, scale_format="e8m0"), None),
    ),
    _humming_linear("linear-mxfp8-humming", "HummingMxfp8LinearKernel", _MXFP8),
    _humming_linear("linear-nvfp4-humming", "HummingNvFp4LinearKernel", MODELOPT_NVFP4),
    _humming_linear(
        "linear-fp8-humming",
        "HummingFP8ScaledMMLinearKernel",
        ("fp8", {"quant_method": "fp8", "activation_scheme": "dynamic"}),
    ),
    _humming_linear(
        "linear-int8-humming",
        "HummingInt8ScaledMMLinearKernel",
        _ct(_w(8, "int", "channel"), INT8_TOKEN, "int-quantized"),
    ),
    _humming_linear(
        "linear-humming",
        "HummingLinearMethod",
        ("humming", {"quant_method": "humming", "bits": 4, "group_size": 128}),
    ),
    # -- other linear methods 0.33.0 added ---------------------------------------------------
    Row(
        "linear-modelopt-nvfp4-w4a16-gather",
        "linear",
        components=("ModelOptLinearMethod",),
        quant=_W4A16_NVFP4,
        # qwen3_dspark sets this on its markov_w2 before loading; post-load then keeps copies
        # of the weight and scales for the gathered projection
        layer_flags=(("_retain_weight_for_gather", True),),
        needs=VLLM_0330,
        notes=("the gathered projection of qwen3_dspark's markov_w2 (_retain_weight_for_gather)",),
    ),
    Row(
        "linear-nvfp4-w4a16-b12x",
        "linear",
        components=("B12xNvFp4W4A16LinearKernel",),
        quant=_W4A16_NVFP4,
        linear_backend="b12x",
        needs=(*VLLM_0330, "an SM120 GPU", "b12x"),
        modules=("b12x",),
    ),
    Row(
        "linear-modelopt-block-b12x",
        "linear",
        components=("ModelOptBlockQuantLinearMethod",),
        quant=_MODELOPT_IQ2,
        needs=(*VLLM_0330, "an SM120 GPU", "b12x"),
        modules=("b12x",),
    ),
    Row(
        "router-gate-rocm-bf16x3",
        "linear",
        components=("_GateLinearMethod",),
        unsupported=(
            "_GateLinearMethod keeps layer._bf16x3_weight only when "
            "allow_rocm_bf16x3_router_gemm, which needs bf16x3_router_gemm_rocm."
            "platform_supported() (ROCm) (fused_moe/router/gate_linear.py)"
        ),
    ),
    # -- MoE methods 0.33.0 added -------------------------------------------------------------
    Row(
        "moe-ct-wna16",
        "moe",
        components=("CompressedTensorsWNA16MoEMethod",),
        quant=_ct(_w(4, "int", "group", group_size=128), None, "pack-quantized"),
        needs=VLLM_0330,
    ),
    Row(
        "moe-wna16",
        "moe",
        components=("MoeWNA16Method",),
        quant=(
            "moe_wna16",
            {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "lm_head": False},
        ),
        needs=VLLM_0330,
    ),
    Row(
        "moe-online-mxfp4",
        "moe",
        components=("Mxfp4OnlineMoEMethod",),
        quant=("online", "mxfp4"),
        backends=("auto", "marlin", "triton"),
        needs=VLLM_0330,
    ),
    Row(
        "moe-quark-w4a16-int4",
        "moe",
        components=("QuarkW4A16Int4MoEMethod",),
        quant=_quark(_qk("int4", "per_group", False, group_size=128, ch_axis=-1), None),
        needs=VLLM_0330,
    ),
    Row(
        "moe-quark-w8a8-int8",
        "moe",
        components=("QuarkW8A8Int8MoEMethod",),
        quant=_quark(_qk("int8", "per_channel", False), _qk("int8", "per_channel", True)),
        needs=VLLM_0330,
    ),
    Row(
        "moe-quark-w8a8-mxfp8",
        "moe",
        components=("QuarkW8A8Mxfp8MoEMethod",),
        quant=_quark(
            _qk("fp8_e4m3", "per_group", False, group_size=32, scale_format="e8m0", ch_axis=-1),
            _qk("fp8_e4m3", "per_group", True, group_size=32, scale_format="e8m0", ch_axis=-1),
        ),
        backends=("auto", "marlin"),
        needs=VLLM_0330,
    ),
    Row(
        "moe-inc-mxfp4",
        "moe",
        components=("INCMxfp4MoEMethod",),
        quant=("inc", {"quant_method": "inc", "data_type": "mx_fp", "bits": 4, "group_size": 32}),
        backends=("auto", "marlin"),
        needs=VLLM_0330,
    ),
    Row(
        "moe-inc-mxfp8",
        "moe",
        components=("INCMxfp8MoEMethod",),
        quant=("inc", {"quant_method": "inc", "data_type": "mx_fp", "bits": 8, "group_size": 32}),
        backends=("auto", "marlin"),
        needs=VLLM_0330,
    ),
    Row(
        "moe-inc-wna16-ark",
        "moe",
        components=("INCARKWNA16MoEMethod",),
        unsupported=(
            "INCARKWNA16MoEMethod is built only when current_platform.is_xpu() and Intel's ARK "
            "MoE kernels import (inc_wna16_scheme.get_moe_method)"
        ),
    ),
    # -- b12x (SM120) ---------------------------------------------------------------------------
    Row(
        "moe-modelopt-block-b12x",
        "moe",
        components=("ModelOptBlockQuantMoEMethod",),
        kernels=("B12xExperts",),
        quant=_MODELOPT_IQ2,
        backends=("b12x",),
        needs=(*VLLM_0330, "an SM120 GPU (B12xExperts._supports_current_device)", "b12x"),
        modules=("b12x",),
    ),
    Row(
        "moe-flashinfer-ep",
        "moe",
        kernels=("FlashInferMoeEpExperts",),
        components=("FlashInferMoeEpExperts",),
        needs=(*VLLM_0330, "flashinfer", "two or more GPUs (expert parallelism)"),
        missing=(
            "an expert-parallel harness: FlashInferMoeEpExperts is chosen only with "
            "moe_backend in FLASHINFER_MOE_EP_BACKENDS and expert parallelism "
            "(config/kernel.py); the runner builds a world-size-1 TP group"
        ),
    ),
    Row(
        "moe-rdna3",
        "moe",
        kernels=("Rdna3WNA16Experts",),
        components=("Rdna3WNA16Experts",),
        unsupported="Rdna3WNA16Experts runs on ROCm RDNA3 only (HIP kernels)",
    ),
    # -- models with their own quant methods ----------------------------------------------------
    Row(
        "model-muse-spark-nvfp4",
        "moe",
        components=("MuseSparkModelOptNvFp4FusedMoE",),
        quant=MODELOPT_NVFP4,
        needs=VLLM_0330,
        missing=(
            "a model harness: MuseSparkModelOptNvFp4FusedMoE is the muse_spark model's own MoE "
            "runner (vllm/models/muse_spark/nvidia/muse_moe_runner.py), built by that model, not "
            "by a quant config's get_quant_method"
        ),
    ),
    Row(
        "model-muse-spark-aiter",
        "moe",
        components=("MuseSparkAiterExperts",),
        unsupported=(
            "MuseSparkAiterExperts is the muse_spark model's ROCm MoE runner "
            "(vllm/models/muse_spark/amd/muse_moe_runner.py): AiterMxfp4Experts driving "
            "rocm_aiter_fused_experts, AITER kernels that run on ROCm only"
        ),
    ),
    Row(
        "model-kimi-k3",
        "mla",
        components=("K3DSparkModel", "MultiHeadLatentAttention"),
        needs=VLLM_0330,
        missing=(
            "a model harness: K3DSparkModel (vllm/models/kimi_k3/nvidia/dspark_mla.py) and the "
            "model's own MultiHeadLatentAttention (vllm/models/kimi_k3/nvidia/mla.py) are built "
            "by the kimi_k3 model, not by a quant config; the runner builds single vLLM layers"
        ),
    ),
    # -- attention and KV cache -----------------------------------------------------------------
    Row(
        "attn-kv-cache-scales",
        "attention",
        components=("BaseKVCacheMethod", "Attention"),
        needs=VLLM_0330,
        missing=_NO_ATTENTION,
    ),
    Row(
        "attn-b12x",
        "attention",
        components=("B12xPagedAttentionImpl",),
        needs=(*VLLM_0330, "an SM120 GPU", "b12x"),
        missing=_NO_ATTENTION,
    ),
    Row(
        "attn-amx-mla",
        "attention",
        components=("AMXMLAImpl",),
        unsupported=(
            "AMXMLAImpl is vLLM's CPU MLA backend (Intel AMX, v1/attention/backends/mla/amx_mla.py):"
            " it runs on a CPU build of vLLM, not on CUDA"
        ),
    ),
    # -- XPU ------------------------------------------------------------------------------------
    Row(
        "linear-xpu",
        "linear",
        components=("XPUMxFp8LinearKernel", "XPUFp8BlockScaledMMKernel"),
        unsupported=(
            "XPUMxFp8LinearKernel and XPUFp8BlockScaledMMKernel are chosen only on Intel XPU "
            "(the PlatformEnum.XPU kernel lists of kernels/linear/__init__.py)"
        ),
    ),
)
