"""The dense NVFP4 / MXFP8 Marlin recipes' construction logic on CPU, against a stand-in vLLM.

vLLM cannot be imported here (its kernels are CUDA-only), so the modules the recipes import are
replaced by small fakes whose ``create_weights`` register the parameters vLLM 0.25.1 registers
(names, shapes and dtypes copied from ``modelopt.py``: ``ModelOptNvFp4W4A16LinearMethod`` and
``ModelOptMxFp8LinearMethod``) and whose loader is ``ReplicatedLinear.weight_loader``'s shape
check. What this covers: the recipe's config arguments, its quant-method and kernel checks, the
kernel replacement when vLLM picks another, that every checkpoint tensor loads through a weight
loader into a parameter of the right shape and dtype, and that the ``layer.workspace`` fix
wraps the right kernel class. What it cannot cover (the H200 sweep does): the real Marlin
repack and GEMM, and vLLM's layerwise reload.
"""

from __future__ import annotations

import sys
import types

import pytest

torch = pytest.importorskip("torch")

from reload_lint.confirm.recipes import find_recipe, get_recipe  # noqa: E402
from reload_lint.confirm.reload import SimulatedLayerwiseReload, load_weights  # noqa: E402
from reload_lint.findings import Finding, compute_fingerprints  # noqa: E402

FP4 = "vllm/model_executor/layers/quantization/utils/marlin_utils_fp4.py"
FP8 = "vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py"


def _finding(path: str, symbol: str, target: str = "layer.workspace") -> Finding:
    f = Finding(
        rule="RL101",
        path=path,
        line=1,
        column=1,
        end_line=1,
        symbol=symbol,
        target=target,
        message="t",
    )
    compute_fingerprints([f])
    return f


# -- a stand-in vLLM ---------------------------------------------------------------------------


def _fake_vllm(mxfp8_choice: str = "MarlinMxfp8LinearKernel") -> dict[str, types.ModuleType]:
    P = torch.nn.Parameter

    def param(data, loader):
        p = P(data, requires_grad=False)
        p.weight_loader = loader
        return p

    class _MarlinKernel:
        """Post-load like prepare_*_layer_for_marlin: a fresh workspace, a repacked weight."""

        def __init__(self, config=None):
            self.config = config

        @classmethod
        def is_supported(cls, compute_capability=None):
            return True, None

        def process_weights_after_loading(self, layer):
            layer.workspace = torch.zeros(64, dtype=torch.int32)
            layer.weight = P(layer.weight.data.view(torch.uint8).clone(), requires_grad=False)

        def apply_weights(self, layer, x, bias=None):
            w = layer.weight.float()
            k = min(w.shape[1], x.shape[-1])
            return (x.float()[:, :k] @ w[:, :k].T + layer.workspace.float().sum()).to(x.dtype)

    class MarlinNvFp4LinearKernel(_MarlinKernel):
        pass

    class MarlinMxfp8LinearKernel(_MarlinKernel):
        pass

    class FlashInferCutlassMxfp8LinearKernel(_MarlinKernel):
        pass

    class Mxfp8LinearLayerConfig:
        pass

    class ModelOptNvFp4W4A16LinearMethod:
        def __init__(self, qc):
            self.quant_config = qc
            self.kernel = MarlinNvFp4LinearKernel(object())

        def create_weights(self, layer, k, parts, input_size, output_size, dtype, weight_loader):
            n, g = sum(parts), self.quant_config.group_size
            layer.input_size_per_partition, layer.output_size_per_partition = k, n
            reg = layer.register_parameter
            reg("weight", param(torch.empty(n, k // 2, dtype=torch.uint8), weight_loader))
            reg("weight_scale_2", param(torch.empty(len(parts)), weight_loader))
            fp8 = torch.float8_e4m3fn
            reg("weight_scale", param(torch.empty(n, k // g, dtype=fp8), weight_loader))
            reg("input_scale", param(torch.empty(len(parts)), weight_loader))

        def process_weights_after_loading(self, layer):
            del layer.input_scale
            layer.weight_global_scale = P(layer.weight_scale_2.max(), requires_grad=False)
            del layer.weight_scale_2
            self.kernel.process_weights_after_loading(layer)

        def apply(self, layer, x, bias=None):
            return self.kernel.apply_weights(layer, x, bias)

    class ModelOptMxFp8LinearMethod(ModelOptNvFp4W4A16LinearMethod):
        def __init__(self, qc):
            self.quant_config = qc
            kernels = {
                "MarlinMxfp8LinearKernel": MarlinMxfp8LinearKernel,
                "FlashInferCutlassMxfp8LinearKernel": FlashInferCutlassMxfp8LinearKernel,
            }
            self.kernel = kernels[mxfp8_choice](Mxfp8LinearLayerConfig())

        def create_weights(self, layer, k, parts, input_size, output_size, dtype, weight_loader):
            n = sum(parts)
            layer.input_size_per_partition, layer.output_size_per_partition = k, n
            w = torch.empty(n, k, dtype=torch.float8_e4m3fn)
            layer.register_parameter("weight", param(w, weight_loader))
            s = torch.empty(n, k // 32, dtype=torch.uint8)
            layer.register_parameter("weight_scale", param(s, weight_loader))

        def process_weights_after_loading(self, layer):
            self.kernel.process_weights_after_loading(layer)

    class ModelOptNvFp4Config:
        def __init__(
            self,
            quant_method="NVFP4",
            is_checkpoint_nvfp4_serialized=False,
            kv_cache_quant_algo=None,
            exclude_modules=None,
            group_size=16,
        ):
            assert quant_method in ("NVFP4", "W4A16_NVFP4")
            self.quant_method, self.group_size = quant_method, group_size
            self.serialized = is_checkpoint_nvfp4_serialized

        def get_quant_method(self, layer, prefix):
            assert self.serialized and self.quant_method == "W4A16_NVFP4"
            return ModelOptNvFp4W4A16LinearMethod(self)

    class ModelOptMxFp8Config:
        def __init__(self, is_checkpoint_mxfp8_serialized, kv_cache_quant_algo, exclude_modules):
            assert is_checkpoint_mxfp8_serialized

        def get_quant_method(self, layer, prefix):
            return ModelOptMxFp8LinearMethod(self)

    class ReplicatedLinear(torch.nn.Module):
        def __init__(self, k, n, bias, params_dtype, quant_config, prefix):
            super().__init__()
            self.params_dtype = params_dtype
            self.quant_method = quant_config.get_quant_method(self, prefix=prefix)
            self.quant_method.create_weights(
                self, k, [n], k, n, params_dtype, weight_loader=self.weight_loader
            )

        def weight_loader(self, param, loaded_weight):
            if len(loaded_weight.shape) == 0:
                loaded_weight = loaded_weight.reshape(1)
            assert param.size() == loaded_weight.size(), (param.size(), loaded_weight.size())
            assert param.dtype == loaded_weight.dtype, (param.dtype, loaded_weight.dtype)
            param.data.copy_(loaded_weight)

        def forward(self, x):
            return self.quant_method.apply(self, x)

    mods: dict[str, types.ModuleType] = {}

    def mod(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        mods[name] = m
        return m

    for pkg in (
        "vllm",
        "vllm.model_executor",
        "vllm.model_executor.layers",
        "vllm.model_executor.layers.quantization",
        "vllm.model_executor.kernels",
        "vllm.model_executor.kernels.linear",
        "vllm.model_executor.kernels.linear.nvfp4",
        "vllm.model_executor.kernels.linear.mxfp8",
    ):
        mod(pkg).__path__ = []
    mod("vllm.model_executor.layers.linear", ReplicatedLinear=ReplicatedLinear)
    mod(
        "vllm.model_executor.layers.quantization.modelopt",
        ModelOptNvFp4Config=ModelOptNvFp4Config,
        ModelOptMxFp8Config=ModelOptMxFp8Config,
    )
    mod(
        "vllm.model_executor.kernels.linear.nvfp4.marlin",
        MarlinNvFp4LinearKernel=MarlinNvFp4LinearKernel,
    )
    mod(
        "vllm.model_executor.kernels.linear.mxfp8.marlin",
        MarlinMxfp8LinearKernel=MarlinMxfp8LinearKernel,
    )
    mod(
        "vllm.model_executor.kernels.linear.mxfp8.Mxfp8LinearKernel",
        Mxfp8LinearLayerConfig=Mxfp8LinearLayerConfig,
    )
    return mods


@pytest.fixture
def fake_vllm(monkeypatch):
    def install(**kw):
        for name, m in _fake_vllm(**kw).items():
            monkeypatch.setitem(sys.modules, name, m)

    install()
    return install


# -- matching ----------------------------------------------------------------------------------


def test_dense_fp4_and_mxfp8_sites_map_to_their_recipes_and_moe_siblings_do_not():
    r, _ = find_recipe(_finding(FP4, "prepare_fp4_layer_for_marlin"))
    assert r.name == "vllm-nvfp4-marlin-w4a16"
    r, _ = find_recipe(_finding(FP8, "prepare_mxfp8_layer_for_marlin"))
    assert r.name == "vllm-mxfp8-marlin"
    r, _ = find_recipe(_finding(FP8, "prepare_fp8_layer_for_marlin"))
    assert r.name == "vllm-fp8-marlin-fallback"
    # the MoE siblings need _moe_C (not in the bundle): no dense recipe claims them
    for path, sym in (
        (FP4, "prepare_nvfp4_moe_layer_for_marlin"),
        (FP4, "prepare_moe_fp4_layer_for_marlin"),
        (FP8, "prepare_fp8_moe_layer_for_marlin"),
        (FP8, "prepare_mxfp8_moe_layer_for_marlin"),
    ):
        r, why = find_recipe(_finding(path, sym))
        assert r is None or not r.name.startswith("vllm-"), (sym, r and r.name)


def _cpu_verdict(r, fixed: bool) -> tuple[str, str | None, str, str]:
    """The recipe's layer through the pipeline's CPU path, stage by stage as pipeline.py runs
    them: load A, capture under the dispatch recorder (the CPU stand-in graph), the simulated
    layerwise reload with B, the census, the replay against a cold load of B, the verdict."""
    from reload_lint.confirm.cpugraph import CpuGraph, IllegalAccess
    from reload_lint.confirm.decide import judge
    from reload_lint.confirm.pipeline import compare
    from reload_lint.confirm.recorder import DispatchRecorder, Manifest, take_census
    from reload_lint.confirm.targets import link_rows

    undo = r.fixes()["layer.workspace"].apply() if fixed else None
    try:
        cold = r.construct("cpu")
        load_weights(cold.model, r.checkpoint(2, "cpu"))
        r.post_load(cold.model)
        x = r.example_input("cpu")
        ref = cold.forward(x)
        built = r.construct("cpu")
        driver = SimulatedLayerwiseReload(r.post_load)
        driver.record(built.model)
        load_weights(built.model, r.checkpoint(1, "cpu"))
        r.post_load(built.model)
        rec = DispatchRecorder(keep_log=True)
        with rec:
            out = built.forward(x)
        manifest = Manifest.record({"layer": built.model}, rec, [x])
        graph = CpuGraph(rec, out)
        driver.reload(built.model, r.checkpoint(2, "cpu"))
        rows = take_census(manifest)
        f = _finding(FP4 if "nvfp4" in r.name else FP8, "prepare")
        linked = [row.path for row in link_rows(f.to_json(), manifest, rows)]
        census = {"rows": [row.to_json() for row in rows], "linked": {f.fingerprint: linked}}
        msgs = [{"stage": "load_a", "tier": "replay"}, {"stage": "census", **census}]
        try:
            msgs.append({"stage": "replay", **compare(graph.replay(), ref)})
        except IllegalAccess as exc:
            msgs.append(
                {
                    "stage": "replay",
                    "ok": False,
                    "error": str(exc)[:200],
                    "error_type": "IllegalAccess",
                }
            )
        return judge(f, msgs, {"status": "ok"}, fixed)
    finally:
        if undo is not None:
            undo()


@pytest.mark.parametrize("name", ["vllm-nvfp4-marlin-w4a16", "vllm-mxfp8-marlin"])
def test_recipe_is_red_on_the_cpu_path_and_green_with_its_workspace_fix(fake_vllm, name):
    r = get_recipe(name)
    assert "needs --device cuda" in r.unavailable("cpu")  # confirm() runs it on CUDA only
    verdict, failure, reason, grade = _cpu_verdict(r, fixed=False)
    # the freed workspace reads back as the poison pattern: the replay's output is wrong
    assert verdict == "red" and grade == "red-observed", reason
    assert failure in ("stale read", "illegal access") and "layer.workspace freed" in reason
    verdict, _, reason, grade = _cpu_verdict(r, fixed=True)
    assert verdict == "green" and grade == "green", reason


# -- construction against the stand-in ---------------------------------------------------------


@pytest.mark.parametrize("name", ["vllm-nvfp4-marlin-w4a16", "vllm-mxfp8-marlin"])
def test_construct_and_checkpoints_load_through_the_weight_loaders(fake_vllm, name):
    r = get_recipe(name)
    built = r.construct("cpu")
    assert built.layer is built.model and "vLLM chose Marlin" in built.notes[0]
    a, b = r.checkpoint(1, "cpu"), r.checkpoint(2, "cpu")
    assert set(a) == {n for n, _ in built.model.named_parameters()}
    load_weights(built.model, a)  # the loader asserts shape and dtype
    for k in a:
        assert not torch.equal(a[k].view(torch.uint8), b[k].view(torch.uint8)) or k == "input_scale"
    if name == "vllm-nvfp4-marlin-w4a16":
        s = a["weight_scale"].float()
        # ModelOpt normalizes block scales to <= 448; all survive Marlin's S0E5M3 cut (< 2^-6)
        assert bool(torch.isfinite(s).all()) and s.min() >= 64 and s.max() <= 448
        assert a["weight"].shape == (r.N, r.K // 2) and a["weight_scale_2"].item() > 0
    else:
        e = a["weight_scale"].view(torch.float8_e8m0fnu).float()
        assert e.min() >= 2.0**-7 and e.max() <= 2.0**-3
    x = r.example_input("cpu")
    assert x.dtype == torch.bfloat16 and x.shape == (r.M, r.K)


def test_mxfp8_kernel_replaced_when_vllm_picks_another(fake_vllm):
    fake_vllm(mxfp8_choice="FlashInferCutlassMxfp8LinearKernel")
    built = get_recipe("vllm-mxfp8-marlin").construct("cpu")
    assert type(built.layer.quant_method.kernel).__name__ == "MarlinMxfp8LinearKernel"
    assert "vLLM chose FlashInferCutlassMxfp8LinearKernel" in built.notes[0]
    assert any("recipe instantiated MarlinMxfp8LinearKernel" in n for n in built.notes)


@pytest.mark.parametrize("name", ["vllm-nvfp4-marlin-w4a16", "vllm-mxfp8-marlin"])
@pytest.mark.parametrize("fixed", [False, True])
def test_workspace_moves_on_reload_unless_the_fix_wraps_the_kernel(fake_vllm, name, fixed):
    r = get_recipe(name)
    undo = r.fixes()["layer.workspace"].apply() if fixed else None
    try:
        built = r.construct("cpu")
        driver = SimulatedLayerwiseReload(r.post_load)
        driver.record(built.model)
        load_weights(built.model, r.checkpoint(1, "cpu"))
        r.post_load(built.model)
        ws = built.layer.workspace
        weight_ptr = built.layer.weight.data_ptr()
        driver.reload(built.model, r.checkpoint(2, "cpu"))
        assert built.layer.weight.data_ptr() == weight_ptr  # registered: copied back
        assert (built.layer.workspace is ws) == fixed
    finally:
        if undo is not None:
            undo()
