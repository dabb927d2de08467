"""Recipes for vLLM's linear kernels: real layers, real quant methods, real weight loaders.

* Marlin and Machete (mixed-precision W4A16, act-order GPTQ): a ``ReplicatedLinear`` with an
  ``AutoGPTQConfig(desc_act=True)``, so ``AutoGPTQLinearMethod.create_weights`` registers
  ``qweight/g_idx/scales/qzeros`` with vLLM's parameter classes and loaders. vLLM's own kernel
  choice is recorded; when it differs from the family under test the recipe instantiates the
  family's kernel class with the same ``MPLinearLayerConfig`` (on Hopper vLLM prefers Machete).
* Dense FP8 Marlin fallback: a ``ReplicatedLinear`` with ``Fp8Config`` and
  ``VLLM_TEST_FORCE_FP8_MARLIN=1``, so ``Fp8LinearMethod`` selects
  ``MarlinFP8ScaledMMLinearKernel`` and its post-load calls ``prepare_fp8_layer_for_marlin``.
* Dense NVFP4 W4A16 Marlin: a ``ReplicatedLinear`` with ``ModelOptNvFp4Config`` (quant algo
  ``W4A16_NVFP4``), so ``ModelOptNvFp4W4A16LinearMethod.create_weights`` registers
  ``weight/weight_scale/weight_scale_2/input_scale`` and its post-load renames the global scale
  and calls ``MarlinNvFp4LinearKernel`` -> ``prepare_fp4_layer_for_marlin`` (the method pins
  that kernel; no FlashInfer or ``_moe_C`` op is involved).
* Dense MXFP8 Marlin: a ``ReplicatedLinear`` with ``ModelOptMxFp8Config``, so
  ``ModelOptMxFp8LinearMethod`` registers ``weight/weight_scale`` and its kernel's post-load
  calls ``prepare_mxfp8_layer_for_marlin``. vLLM's own choice (``init_mxfp8_linear_kernel``;
  the FlashInfer kernels need Blackwell) is recorded; ``MarlinMxfp8LinearKernel`` is
  instantiated when it picked another.
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
        import vllm.model_executor.layers.linear
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
                "(keep the tensor marlin_make_workspace_new(device) returned on the first "
                "load and zero it in place on a reload)",
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
        import vllm.model_executor.kernels.linear.scaled_mm.marlin
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


class _ModelOptMarlinRecipe(_VllmRecipe):
    """A ModelOpt-quantized dense ``ReplicatedLinear`` whose kernel is a Marlin fallback that
    stores ``layer.workspace`` (a plain attribute) in its post-load."""

    K, N, M = 1024, 512, 16
    kernel_name = ""
    kernel_module = ""
    method_name = ""

    @property
    def dtype(self):
        import torch

        return torch.bfloat16

    def preimport(self) -> None:
        super().preimport()
        import vllm.model_executor.layers.quantization.modelopt  # noqa: F401

        __import__(self.kernel_module)

    def _kernel_cls(self):
        import importlib

        return getattr(importlib.import_module(self.kernel_module), self.kernel_name)

    def quant_config(self):
        raise NotImplementedError

    def replacement_kernel(self, qm):
        """A ``kernel_name`` instance for ``qm`` when vLLM chose another (None: cannot)."""
        return None

    def construct(self, device: str) -> Built:
        import torch
        from vllm.model_executor.layers.linear import ReplicatedLinear

        layer = ReplicatedLinear(
            self.K,
            self.N,
            bias=False,
            params_dtype=torch.bfloat16,
            quant_config=self.quant_config(),
            prefix="model.layers.0.mlp.down_proj",
        )
        qm = layer.quant_method
        if type(qm).__name__ != self.method_name:
            raise RuntimeError(f"the config gave {type(qm).__name__}, not {self.method_name}")
        chosen = type(getattr(qm, "kernel", None)).__name__
        notes = [f"quant method {type(qm).__name__}; vLLM chose {chosen}", *shim_notes()]
        if chosen != self.kernel_name:
            kernel = self.replacement_kernel(qm)
            if kernel is None:
                raise RuntimeError(f"{type(qm).__name__} selected {chosen}, not {self.kernel_name}")
            qm.kernel = kernel
            notes.append(f"recipe instantiated {self.kernel_name} with the same layer config")
        return Built(
            model=layer,
            layer=layer,
            forward=layer_forward(layer),
            roots={"layer": layer},
            notes=notes,
        )

    def example_input(self, device: str):
        import torch

        x = torch.randn(self.M, self.K, generator=gen(97)) * 0.5
        return x.to(torch.bfloat16).to(device)

    def fixes(self):
        def reuse():
            return fx.reuse_storage(self._kernel_cls(), "layer.workspace")

        return {
            "layer.workspace": Fix(
                "layer.workspace",
                "reuse storage",
                reuse,
                f"{self.kernel_name} post-load ({', '.join(self.functions)}): zero and reuse "
                "the captured layer.workspace",
            )
        }


@register
class NvFp4MarlinRecipe(_ModelOptMarlinRecipe):
    name = "vllm-nvfp4-marlin-w4a16"
    family = (
        "dense NVFP4 W4A16 Marlin (ModelOptNvFp4W4A16LinearMethod -> MarlinNvFp4LinearKernel "
        "-> prepare_fp4_layer_for_marlin)"
    )
    paths = ("quantization/utils/marlin_utils_fp4.py", "kernels/linear/nvfp4/marlin.py")
    classes = ("MarlinNvFp4LinearKernel",)
    functions = ("prepare_fp4_layer_for_marlin",)
    kernel_name = "MarlinNvFp4LinearKernel"
    kernel_module = "vllm.model_executor.kernels.linear.nvfp4.marlin"
    method_name = "ModelOptNvFp4W4A16LinearMethod"
    GROUP = 16

    def quant_config(self):
        from vllm.model_executor.layers.quantization.modelopt import ModelOptNvFp4Config

        return ModelOptNvFp4Config(
            quant_method="W4A16_NVFP4",
            is_checkpoint_nvfp4_serialized=True,
            kv_cache_quant_algo=None,
            exclude_modules=[],
            group_size=self.GROUP,
        )

    def checkpoint(self, seed: int, device: str) -> dict:
        """ModelOpt NVFP4 on disk: packed e2m1 nibbles (uint8 [N, K/2]), e4m3 block scales
        ([N, K/16], normalized to at most 448 as ModelOpt writes them, so Marlin's S0E5M3
        rescale factor is 1), the fp32 global scale amax/2688, and a W4A4-style input_scale
        (the method's placeholder parameter, discarded by its post-load)."""
        import torch

        g = gen(seed)
        K, N = self.K, self.N
        weight = torch.randint(0, 256, (N, K // 2), generator=g, dtype=torch.uint8)
        scale = (torch.rand(N, K // self.GROUP, generator=g) * 384 + 64).to(torch.float8_e4m3fn)
        amax = 1.5 + 0.5 * seed
        return {
            "weight": weight.to(device),
            "weight_scale": scale.to(device),
            "weight_scale_2": torch.tensor([amax / 2688.0], dtype=torch.float32).to(device),
            "input_scale": torch.tensor([1.0 / 448.0], dtype=torch.float32).to(device),
        }


@register
class Mxfp8MarlinRecipe(_ModelOptMarlinRecipe):
    name = "vllm-mxfp8-marlin"
    family = (
        "dense MXFP8 Marlin (ModelOptMxFp8LinearMethod -> MarlinMxfp8LinearKernel "
        "-> prepare_mxfp8_layer_for_marlin)"
    )
    paths = ("quantization/utils/marlin_utils_fp8.py", "kernels/linear/mxfp8/marlin.py")
    classes = ("MarlinMxfp8LinearKernel",)
    functions = ("prepare_mxfp8_layer_for_marlin",)
    kernel_name = "MarlinMxfp8LinearKernel"
    kernel_module = "vllm.model_executor.kernels.linear.mxfp8.marlin"
    method_name = "ModelOptMxFp8LinearMethod"
    BLOCK = 32

    def quant_config(self):
        from vllm.model_executor.layers.quantization.modelopt import ModelOptMxFp8Config

        return ModelOptMxFp8Config(
            is_checkpoint_mxfp8_serialized=True, kv_cache_quant_algo=None, exclude_modules=[]
        )

    def replacement_kernel(self, qm):
        from vllm.model_executor.kernels.linear.mxfp8.Mxfp8LinearKernel import (
            Mxfp8LinearLayerConfig,
        )

        cls = self._kernel_cls()
        ok, why = cls.is_supported()
        if not ok:
            raise RuntimeError(f"{self.kernel_name} is not supported here: {why}")
        return cls(getattr(qm.kernel, "config", None) or Mxfp8LinearLayerConfig())

    def checkpoint(self, seed: int, device: str) -> dict:
        """ModelOpt MXFP8 on disk: e4m3 weights [N, K] and e8m0 block scales as uint8
        [N, K/32] (2^-7 .. 2^-3: powers of two, exact in any float dtype the post-load uses)."""
        import torch

        g = gen(seed)
        K, N = self.K, self.N
        weight = (torch.randn(N, K, generator=g) * 0.5).to(torch.float8_e4m3fn)
        scale = torch.randint(120, 125, (N, K // self.BLOCK), generator=g, dtype=torch.uint8)
        return {"weight": weight.to(device), "weight_scale": scale.to(device)}
