"""A family table row (``Row``) and the helpers that write rows' quantization configs.

``families.py`` holds the rows of vLLM 0.25.1's classes, ``rows_0330.py`` those added for vLLM
0.33.0; both are read through ``families.ROWS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _ct(weights: dict, inputs: dict | None, fmt: str, outputs: dict | None = None):
    group = {"targets": ["Linear"], "weights": weights, "input_activations": inputs}
    if outputs is not None:
        group["output_activations"] = outputs
    return (
        "compressed-tensors",
        {
            "quant_method": "compressed-tensors",
            "format": fmt,
            "config_groups": {"group_0": group},
            "ignore": [],
        },
    )


def _w(num_bits, type_, strategy, **kw) -> dict:
    d = {
        "num_bits": num_bits,
        "type": type_,
        "strategy": strategy,
        "symmetric": True,
        "dynamic": False,
        "group_size": None,
        "block_structure": None,
        "actorder": None,
        "observer": "minmax",
    }
    d.update(kw)
    return d


def _quark(weight, inp) -> tuple[str, dict]:
    return (
        "quark",
        {
            "quant_method": "quark",
            "export": {"kv_cache_group": [], "pack_method": "reorder"},
            "global_quant_config": {
                "weight": weight,
                "input_tensors": inp,
                "output_tensors": None,
                "bias": None,
            },
            "layer_quant_config": {},
            "layer_type_quant_config": {},
            "exclude": [],
        },
    )


def _qk(dtype, qscheme, dynamic, **kw) -> dict:
    d = {
        "dtype": dtype,
        "qscheme": qscheme,
        "is_dynamic": dynamic,
        "ch_axis": 0 if qscheme == "per_channel" else None,
        "group_size": None,
        "symmetric": True,
        "round_method": "half_even",
        "scale_type": "float",
        "observer_cls": "PerTensorMinMaxObserver",
    }
    d.update(kw)
    return d


FP8_TOKEN = _w(8, "float", "token", dynamic=True)
#: MLA rows: the harness's forward calls vLLM's ``_v_up_proj`` and does the q_nope absorption
#: itself (recipes/vllm_layers.py), as forward_impl would; the attention kernel does not run
_MLA_FORWARD = "the MLA forward is harness code around vLLM's _v_up_proj"
MODELOPT_NVFP4 = (
    "modelopt_fp4",
    {
        "quantization": {
            "quant_algo": "NVFP4",
            "group_size": 16,
            "exclude_modules": [],
            "kv_cache_quant_algo": None,
        }
    },
)
INT8_TOKEN = _w(8, "int", "token", dynamic=True)


@dataclass(frozen=True)
class Row:
    """One family: a layer kind, a config that reaches it, the classes it drives."""

    id: str
    layer: str  # "moe" | "linear" | "mla" | "recipe" (a hand-built recipe, below)
    components: tuple[str, ...] = ()  # quant methods / schemes / kernels this row drives
    kernels: tuple[str, ...] = ()  # experts / kernel classes those build on some backend
    quant: tuple[str, object] | None = None  # (vLLM quantization name, config dict)
    backends: tuple[str, ...] = ("auto",)  # KernelConfig.moe_backend values to force
    activation: str = "silu"  # FusedMoE activation (gpt-oss style MXFP4 uses swigluoai)
    #: further FusedMoE keyword arguments (the SwiGLU clamp/alpha/beta some backends fold)
    moe_kwargs: tuple[tuple[str, object], ...] = ()
    #: environment for the child (vLLM reads these at kernel selection)
    env: tuple[tuple[str, str], ...] = ()
    #: attributes set on the built layer to force a kernel path vLLM selects by platform
    layer_flags: tuple[tuple[str, object], ...] = ()
    recipe: str | None = None  # layer == "recipe": the recipe's name in recipes/
    #: why this row cannot run on a CUDA machine at all (ROCm-only kernels, ...)
    unsupported: str | None = None
    #: ops and checks replaced by stand-ins (recipes/standins.py); any makes the row census tier
    standins: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    #: the platform whose path this row forces on the device it runs on (a ROCm-only or
    #: SM100-only path on an H200): every record of the row names it, with the flags
    platform: str | None = None
    #: where the row's forward is the harness's own code rather than vLLM's forward
    harness_forward: str | None = None
    #: ``KernelConfig.linear_backend`` to force (vLLM 0.33.0's ``--linear-backend``)
    linear_backend: str | None = None
    #: what a machine needs to run the row beyond a CUDA GPU and the vLLM release whose classes
    #: it drives (packages, device family), in words; ``modules`` are checked importable
    needs: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    #: the piece the runner itself lacks to drive this row (a harness kind not built)
    missing: str | None = None

    def classes(self) -> tuple[str, ...]:
        return (*self.components, *self.kernels)

    def forced(self) -> dict | None:
        """{"platform", "flags", "env"} of a row that forces a platform-only path, else None.
        ``flags``: the layer attributes set and the capability checks stood in."""
        if self.platform is None:
            return None
        checks = [s for s in self.standins if s.endswith(("_supports_current_device", "_enabled"))]
        return {
            "platform": self.platform,
            "flags": [f"{k}={v}" for k, v in self.layer_flags] + [f"{c} stood in" for c in checks],
            "env": [f"{k}={v}" for k, v in self.env],
        }
