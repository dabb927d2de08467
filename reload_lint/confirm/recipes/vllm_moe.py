"""CUTLASS FP8 grouped-GEMM MoE experts (``CutlassExpertsFp8Base`` and subclasses).

What is real: vLLM's ``FusedMoEConfig``, ``fp8_w8a8_moe_quant_config``, the
``CutlassBatchedExpertsFp8`` experts class (whose ``__init__`` allocates ``ab_strides1/2`` and
``c_strides1/2``), its ``apply`` and the ``_C`` grouped GEMM ``cutlass_moe_mm``, vLLM's
layerwise reload and ``default_weight_loader``.

What is the harness: the host layer and a small ``QuantizeMethodBase`` whose post-load does
what ``Fp8MoEMethod._setup_kernel`` / the compressed-tensors FP8 MoE method do at their end:
build the quant config from the layer's scales and rebuild the experts object. A full
``FusedMoE`` layer is not built (it needs a model config and the router/dispatch machinery),
and the batched activation format is used because the standard format's permute/unpermute
ops live in ``_moe_C``, which the device bundle lacks; ``moe_permute_unpermute_supported`` is
answered False for the same reason. The evidence notes all of this.
"""

from __future__ import annotations

from reload_lint.confirm import fixes as fx
from reload_lint.confirm.recipes.base import Built, Fix, Recipe, register
from reload_lint.confirm.recipes.vllm_common import (
    gen,
    install_import_shims,
    setup_vllm,
    shim_notes,
    vllm_unavailable,
)

E, N, K, M = 4, 256, 512, 16  # experts, intermediate, hidden, tokens per expert


def _method_cls():
    import torch
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.config import (
        FusedMoEConfig,
        FusedMoEParallelConfig,
        RoutingMethodType,
        fp8_w8a8_moe_quant_config,
    )
    from vllm.model_executor.layers.fused_moe.experts.cutlass_moe import (
        CutlassBatchedExpertsFp8,
    )
    from vllm.model_executor.layers.fused_moe.modular_kernel import ExpertTokensMetadata
    from vllm.model_executor.layers.quantization.base_config import QuantizeMethodBase

    if "cls" in _CACHE:
        return _CACHE["cls"]

    class CutlassFp8MoEHarnessMethod(QuantizeMethodBase):
        """Post-load rebuilds the CUTLASS experts, as the FP8 MoE methods' _setup_kernel does."""

        def __init__(self, device):
            self.moe = FusedMoEConfig(
                num_experts=E,
                experts_per_token=1,
                hidden_dim=K,
                intermediate_size=N,
                num_local_experts=E,
                num_logical_experts=E,
                activation=MoEActivation.SILU,
                device=device,
                routing_method=RoutingMethodType.TopK,
                moe_parallel_config=FusedMoEParallelConfig.make_no_parallel(),
                in_dtype=torch.bfloat16,
                max_num_tokens=M,
            )
            self.experts = None

        def create_weights(self, layer, *args, **kwargs):  # weights are made by the host
            pass

        def process_weights_after_loading(self, layer):
            self.moe_quant_config = fp8_w8a8_moe_quant_config(
                w1_scale=layer.w13_weight_scale,
                w2_scale=layer.w2_weight_scale,
                a1_scale=layer.w13_input_scale,
                a2_scale=None,
                per_act_token_quant=False,
                per_out_ch_quant=False,
            )
            self.experts = CutlassBatchedExpertsFp8(
                self.moe, self.moe_quant_config, max_num_tokens=M, num_dispatchers=1
            )

        def apply(self, layer, x):
            from vllm import _custom_ops as ops

            a1q, a1q_scale = ops.scaled_fp8_quant(x.reshape(-1, K), layer.w13_input_scale)
            a1q = a1q.view(E, M, K)
            a1q_scale = a1q_scale.reshape(1, 1, 1)
            ws13 = torch.empty(E * M * max(2 * N, K), dtype=torch.bfloat16, device=x.device)
            ws2 = torch.empty(E * M * max(N, K), dtype=torch.bfloat16, device=x.device)
            out = torch.empty(E, M, K, dtype=torch.bfloat16, device=x.device)
            meta = ExpertTokensMetadata(
                expert_num_tokens=layer.expert_num_tokens, expert_num_tokens_cpu=None
            )
            self.experts.apply(
                out,
                a1q,
                layer.w13_weight,
                layer.w2_weight,
                layer.topk_weights,
                layer.topk_ids,
                MoEActivation.SILU,
                E,
                None,
                a1q_scale,
                None,
                ws13,
                ws2,
                meta,
                False,
            )
            return out

    _CACHE["cls"] = CutlassFp8MoEHarnessMethod
    return CutlassFp8MoEHarnessMethod


_CACHE: dict = {}


@register
class CutlassFp8MoERecipe(Recipe):
    name = "vllm-cutlass-fp8-moe"
    family = "fused MoE: CUTLASS FP8 grouped GEMM experts (CutlassBatchedExpertsFp8)"
    paths = (
        "fused_moe/experts/cutlass_moe.py",
        "fused_moe/cutlass_moe.py",
    )
    classes = ("CutlassExpertsFp8Base", "CutlassExpertsFp8", "CutlassBatchedExpertsFp8")
    target_aliases = {
        "self.experts": (
            "self.ab_strides1",
            "self.ab_strides2",
            "self.c_strides1",
            "self.c_strides2",
        )
    }
    uses_vllm = True
    needs_cuda = True

    @property
    def dtype(self):
        import torch

        return torch.bfloat16

    def unavailable(self, device: str) -> str | None:
        return vllm_unavailable(device)

    def preimport(self) -> None:
        install_import_shims()
        import vllm.model_executor.layers.fused_moe.experts.cutlass_moe
        import vllm.model_executor.model_loader.reload  # noqa: F401

    def setup(self, device: str) -> None:
        setup_vllm(device)
        import vllm.model_executor.layers.fused_moe.experts.cutlass_moe as cm

        cm.moe_permute_unpermute_supported = lambda: False  # _moe_C is not in the bundle
        self._notes = [
            "harness quant method rebuilds CutlassBatchedExpertsFp8 in post-load "
            "(as Fp8MoEMethod._setup_kernel does); FusedMoE layer not built",
            "batched activation format; _moe_C (permute/unpermute) absent from the bundle",
            *shim_notes(),
        ]

    def construct(self, device: str) -> Built:
        import torch
        from vllm.model_executor.model_loader.weight_utils import default_weight_loader

        host = torch.nn.Module()
        specs = {
            "w13_weight": ((E, 2 * N, K), torch.float8_e4m3fn),
            "w2_weight": ((E, K, N), torch.float8_e4m3fn),
            "w13_weight_scale": ((E,), torch.float32),
            "w2_weight_scale": ((E,), torch.float32),
            "w13_input_scale": ((1,), torch.float32),
        }
        for name, (shape, dtype) in specs.items():
            p = torch.nn.Parameter(torch.empty(shape, dtype=dtype), requires_grad=False)
            p.weight_loader = default_weight_loader
            host.register_parameter(name, p)
        # routing inputs of the batched format: every expert gets M tokens
        host.expert_num_tokens = torch.full((E,), M, dtype=torch.int32)
        host.topk_ids = torch.zeros(M, 1, dtype=torch.int32)
        host.topk_weights = torch.ones(M, 1, dtype=torch.float32)
        host.quant_method = _method_cls()(torch.device(device))
        return Built(
            model=host,
            layer=host,
            forward=lambda x: host.quant_method.apply(host, x),
            roots={"layer": host},
            notes=list(getattr(self, "_notes", [])),
        )

    def checkpoint(self, seed: int, device: str) -> dict:
        import torch

        g = gen(seed)
        w13 = (torch.randn(E, 2 * N, K, generator=g) * 0.5).to(torch.float8_e4m3fn)
        w2 = (torch.randn(E, K, N, generator=g) * 0.5).to(torch.float8_e4m3fn)
        s13 = torch.rand(E, generator=g) * 0.01 + 0.005
        s2 = torch.rand(E, generator=g) * 0.01 + 0.005
        return {
            "w13_weight": w13.to(device),
            "w2_weight": w2.to(device),
            "w13_weight_scale": s13.to(device),
            "w2_weight_scale": s2.to(device),
            "w13_input_scale": torch.tensor([0.02], device=device),
        }

    def example_input(self, device: str):
        import torch

        return (torch.randn(E, M, K, generator=gen(97)) * 0.5).to(torch.bfloat16).to(device)

    def fixes(self):
        def reuse():
            return fx.reuse_rebuilt(
                _method_cls(), "self.experts", lambda m, layer: getattr(m, "experts", None)
            )

        return {
            "self.experts": Fix(
                "self.experts",
                "reuse rebuilt",
                reuse,
                "after the experts object is rebuilt, copy its stride tensors (and the quant "
                "config's scale references) into the captured storages and rebind them",
            )
        }
