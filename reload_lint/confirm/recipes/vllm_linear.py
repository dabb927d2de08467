"""Recipes for vLLM's linear kernels: real layers, real quant methods, real weight loaders.

* Marlin and Machete (mixed-precision W4A16, act-order GPTQ): a ``ReplicatedLinear`` with an
  ``AutoGPTQConfig(desc_act=True)``, so ``AutoGPTQLinearMethod.create_weights`` registers
  ``qweight/g_idx/scales/qzeros`` with vLLM's parameter classes and loaders. vLLM's own kernel
  choice is recorded; when it differs from the family under test the recipe instantiates the
  family's kernel class with the same ``MPLinearLayerConfig`` (on Hopper vLLM prefers Machete).
* Dense FP8 Marlin fallback: a ``ReplicatedLinear`` with ``Fp8Config`` and
  ``VLLM_TEST_FORCE_FP8_MARLIN=1``, so ``Fp8LinearMethod`` selects
  ``MarlinFP8ScaledMMLinearKernel`` and its post-load calls ``prepare_fp8_layer_for_marlin``.
"""

from __future__ import annotations

import os

from reload_lint.confirm import fixes as fx
from reload_lint.confirm.recipes.base import Built, Fix, Recipe, register
from reload_lint.confirm.recipes.vllm_common import (
    gen,
    install_import_shims,
    layer_forward,
    patch_model_config_dtype,
    setup_vllm,
    shim_notes,
    vllm_unavailable,
)

MP_DIR = "vllm/model_executor/kernels/linear/mixed_precision/"


class _VllmRecipe(Recipe):
    uses_vllm = True
    needs_cuda = True

    def unavailable(self, device: str) -> str | None:
        return vllm_unavailable(device)

    def preimport(self) -> None:
        """Parent side: import the heavy modules once, before children fork (no CUDA init)."""
        install_import_shims()
        import vllm.model_executor.layers.linear  # noqa: F401
        import vllm.model_executor.model_loader.reload  # noqa: F401

    def setup(self, device: str) -> None:
        setup_vllm(device)


class _GptqRecipe(_VllmRecipe):
    """Act-order GPTQ 4-bit through AutoGPTQLinearMethod, kernel forced to ``kernel_name``."""

    kernel_name = ""
    kernel_module = ""
    K, N, M, GROUP = 1024, 512, 16, 128

    def preimport(self) -> None:
        super().preimport()
        import vllm.model_executor.layers.quantization.auto_gptq  # noqa: F401

        __import__(self.kernel_module)

    @property
    def dtype(self):
        import torch

        return torch.float16

    def _kernel_cls(self):
        import importlib

        return getattr(importlib.import_module(self.kernel_module), self.kernel_name)

    def construct(self, device: str) -> Built:
        import torch
        from vllm.model_executor.layers.linear import ReplicatedLinear
        from vllm.model_executor.layers.quantization.auto_gptq import AutoGPTQConfig

        qc = AutoGPTQConfig(
            weight_bits=4,
            group_size=self.GROUP,
            desc_act=True,
            is_sym=True,
            lm_head_quantized=False,
            dynamic={},
            full_config={},
            # GPTQ quantizes the modules the checkpoint lists; name this one
            modules_in_block_to_quantize=["down_proj"],
        )
        layer = ReplicatedLinear(
            self.K,
            self.N,
            bias=False,
            params_dtype=torch.float16,
            quant_config=qc,
            prefix="model.layers.0.mlp.down_proj",
        )
        qm = layer.quant_method
        if not hasattr(qm, "kernel"):
            raise RuntimeError(f"AutoGPTQConfig gave {type(qm).__name__}, not a GPTQ method")
        chosen = type(qm.kernel).__name__
        notes = [f"quant method {type(qm).__name__}; vLLM chose {chosen}", *shim_notes()]
        if chosen != self.kernel_name:
            cls = self._kernel_cls()
            ok, why = cls.can_implement(qm.kernel.config)
            if not ok:
                raise RuntimeError(f"{self.kernel_name} cannot implement this layer: {why}")
            qm.kernel = cls(
                qm.kernel.config,
                w_q_param_name="qweight",
                w_s_param_name="scales",
                w_zp_param_name="qzeros",
                w_gidx_param_name="g_idx",
            )
            notes.append(f"recipe instantiated {self.kernel_name} with the same layer config")
        return Built(
            model=layer,
            layer=layer,
            forward=layer_forward(layer),
            roots={"layer": layer},
            notes=notes,
        )

    def checkpoint(self, seed: int, device: str) -> dict:
        import torch

        g = gen(seed)
        K, N, G = self.K, self.N, self.GROUP
        qweight = torch.randint(-(2**31), 2**31 - 1, (K // 8, N), generator=g, dtype=torch.int64)
        g_idx = (torch.arange(K) // G)[torch.randperm(K, generator=g)]
        scales = torch.rand(K // G, N, generator=g) * 0.02 + 0.002
        qzeros = torch.full((K // G, N // 8), 0x77777777, dtype=torch.int64)
        return {
            "qweight": qweight.to(torch.int32).to(device),
            "g_idx": g_idx.to(torch.int32).to(device),
            "scales": scales.to(torch.float16).to(device),
            "qzeros": qzeros.to(torch.int32).to(device),
        }

    def example_input(self, device: str):
        import torch

        return (torch.randn(self.M, self.K, generator=gen(99)) * 0.5).to(torch.float16).to(device)


@register
class MarlinRecipe(_GptqRecipe):
    name = "vllm-marlin-gptq-act-order"
    family = "mixed-precision linear: MarlinLinearKernel (act-order GPTQ via AutoGPTQLinearMethod)"
    paths = (MP_DIR + "marlin.py", "quantization/utils/marlin_utils.py")
    classes = ("MarlinLinearKernel",)
    functions = ("marlin_make_workspace_new", "marlin_sort_g_idx")
    kernel_name = "MarlinLinearKernel"
    kernel_module = "vllm.model_executor.kernels.linear.mixed_precision.marlin"

    def fixes(self):
        def reuse():
            return fx.reuse_storage(self._kernel_cls(), "self.workspace")

        def registration():
            return fx.register(self._kernel_cls(), "layer.g_idx_sort_indices")

        return {
            "self.workspace": Fix(
                "self.workspace",
                "reuse storage",
                reuse,
                "MarlinLinearKernel.workspace: zero and reuse the captured workspace "
                "(as marlin_make_workspace_new(existing=...) in vLLM PR #48438)",
            ),
            "layer.g_idx_sort_indices": Fix(
                "layer.g_idx_sort_indices",
                "registration",
                registration,
                "register layer.g_idx_sort_indices as a parameter so the layerwise copy-back "
                "preserves its storage (replace_parameter(prefer_copy=True) in #48438)",
            ),
        }


@register
class MacheteRecipe(_GptqRecipe):
    name = "vllm-machete-gptq-act-order"
    family = "mixed-precision linear: MacheteLinearKernel (act-order GPTQ via AutoGPTQLinearMethod)"
    paths = (MP_DIR + "machete.py",)
    classes = ("MacheteLinearKernel",)
    kernel_name = "MacheteLinearKernel"
    kernel_module = "vllm.model_executor.kernels.linear.mixed_precision.machete"
    target_aliases = {"self.act_perm": ("perm", "self.act_perm.perm")}

    def fixes(self):
        def late():
            return fx.late_bind(self._kernel_cls(), "self.act_perm")

        return {
            "self.act_perm": Fix(
                "self.act_perm",
                "late binding",
                late,
                "register the act-order permutation on the layer and bind it at call time "
                "(registration alone leaves a detached alias in the partial)",
                links=(f"layer.{fx.late_bound_name('act_perm')}",),
            )
        }


@register
class Fp8MarlinRecipe(_VllmRecipe):
    name = "vllm-fp8-marlin-fallback"
    family = "dense FP8 Marlin fallback (Fp8LinearMethod -> MarlinFP8ScaledMMLinearKernel)"
    paths = (
        "quantization/utils/marlin_utils_fp8.py",
        "kernels/linear/scaled_mm/marlin.py",
    )
    classes = ("MarlinFP8ScaledMMLinearKernel",)
    functions = ("prepare_fp8_layer_for_marlin",)
    K, N, M = 1024, 512, 16
    _shim_note: str | None = None

    @property
    def dtype(self):
        import torch

        return torch.bfloat16

    def preimport(self) -> None:
        super().preimport()
        import vllm.model_executor.kernels.linear.scaled_mm.marlin  # noqa: F401
        import vllm.model_executor.layers.quantization.fp8  # noqa: F401

    def setup(self, device: str) -> None:
        os.environ["VLLM_TEST_FORCE_FP8_MARLIN"] = "1"
        super().setup(device)
        import vllm.model_executor.layers.quantization.fp8 as fp8mod

        self._shim_note = patch_model_config_dtype(fp8mod, self.dtype)

    def _kernel_cls(self):
        from vllm.model_executor.kernels.linear.scaled_mm.marlin import (
            MarlinFP8ScaledMMLinearKernel,
        )

        return MarlinFP8ScaledMMLinearKernel

    def construct(self, device: str) -> Built:
        import torch
        from vllm.model_executor.layers.linear import ReplicatedLinear
        from vllm.model_executor.layers.quantization.fp8 import Fp8Config

        qc = Fp8Config(is_checkpoint_fp8_serialized=True, activation_scheme="dynamic")
        layer = ReplicatedLinear(
            self.K,
            self.N,
            bias=False,
            params_dtype=torch.bfloat16,
            quant_config=qc,
            prefix="model.layers.0.mlp.down_proj",
        )
        qm = layer.quant_method
        kern = type(getattr(qm, "fp8_linear", None)).__name__
        if kern != "MarlinFP8ScaledMMLinearKernel":
            raise RuntimeError(f"Fp8LinearMethod selected {kern}, not the Marlin fallback")
        notes = [
            f"quant method {type(qm).__name__}; kernel {kern} (VLLM_TEST_FORCE_FP8_MARLIN=1)",
            *shim_notes(),
        ]
        if self._shim_note:
            notes.append(self._shim_note)
        return Built(
            model=layer,
            layer=layer,
            forward=layer_forward(layer),
            roots={"layer": layer},
            notes=notes,
        )

    def checkpoint(self, seed: int, device: str) -> dict:
        import torch

        g = gen(seed)
        w = (torch.randn(self.N, self.K, generator=g) * 0.5).to(torch.float8_e4m3fn)
        scale = torch.tensor([0.01 + 0.005 * seed], dtype=torch.float32)
        return {"weight": w.to(device), "weight_scale": scale.to(device)}

    def example_input(self, device: str):
        import torch

        return (torch.randn(self.M, self.K, generator=gen(98)) * 0.5).to(torch.bfloat16).to(device)

    def fixes(self):
        def reuse():
            return fx.reuse_storage(self._kernel_cls(), "layer.workspace")

        return {
            "layer.workspace": Fix(
                "layer.workspace",
                "reuse storage",
                reuse,
                "prepare_fp8_layer_for_marlin: zero and reuse the captured layer.workspace",
            )
        }
