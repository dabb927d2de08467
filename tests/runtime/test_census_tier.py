"""The census tier for the FlashInfer NVFP4 MoE backends the H200 cannot run (TRT-LLM gen, B12x).

vLLM is not importable here, so these tests check what runs without it: the table rows and the
finding -> row mapping for the committed 0.25.1 findings, the stand-ins' shapes, dtypes and
aliasing against the call signatures vLLM uses, and their installation (fake vLLM modules stand
where vLLM's would be patched).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from reload_lint.confirm.families import BY_ID, map_finding, rows_for_finding
from reload_lint.findings import Finding

torch = pytest.importorskip("torch")

from reload_lint.confirm.recipes import standins  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FINDINGS = ROOT / "docs/evidence/h200-vllm-0.25.1.findings.json"
CENSUS_ROWS = ("moe-modelopt-nvfp4-trtllm", "moe-modelopt-nvfp4-b12x")


def _findings() -> list[Finding]:
    return [Finding.from_json(d) for d in json.loads(FINDINGS.read_text())["findings"]]


# -- the rows and the mapping -----------------------------------------------------------------


def test_every_flashinfer_moe_finding_of_0_25_1_maps_to_its_census_row():
    by_file = {
        "flashinfer_b12x_moe.py": "moe-modelopt-nvfp4-b12x",
        "trtllm_nvfp4_moe.py": "moe-modelopt-nvfp4-trtllm",
    }
    seen = set()
    for f in _findings():
        want = next((r for k, r in by_file.items() if f.path.endswith(k)), None)
        if want is None:
            continue
        seen.add(want)
        assert map_finding(f).row.id == want, (f.symbol, map_finding(f).how)
        assert want in [r.id for r in rows_for_finding(f)]
    # findings come and go with the engine (the TRT-LLM RL107 aliases left the 05:48 main job);
    # those present map to their census row, and some do
    assert seen and seen <= set(CENSUS_ROWS)
    # the quant method's own rebuilt-kernel findings get a census record per forced backend
    mo = [f for f in _findings() if f.symbol.startswith("ModelOptNvFp4FusedMoE.")]
    assert mo
    for f in mo:
        assert set(CENSUS_ROWS) <= {r.id for r in rows_for_finding(f)}


def test_every_finding_of_the_committed_0_25_1_main_job_maps_to_a_row():
    unmapped = [f"{f.path}:{f.line} {f.symbol}" for f in _findings() if map_finding(f).row is None]
    assert not unmapped, unmapped


def test_a_built_class_whose_own_post_load_is_the_trace_root_is_fixed_on_the_component():
    from reload_lint.confirm.runner import Options, plan_site

    f = next(f for f in _findings() if f.symbol.startswith("FlashInferB12xExperts.process"))
    assert any("post-load root FlashInferB12xExperts" in (s.note or "") for s in f.trace)
    site = plan_site(f, Options(device="cpu"))
    assert site.row == "moe-modelopt-nvfp4-b12x"
    assert site.canonical == "self.moe_kernel" and site.owner == "ModelOptNvFp4FusedMoE"
    assert site.early and "cuda" in site.early  # no vLLM/CUDA here: said, not guessed


# -- the stand-ins ------------------------------------------------------------------------------


def test_block_scale_interleave_is_the_128x4_swizzle_of_the_same_bytes():
    sf = torch.randint(0, 255, (256, 64), dtype=torch.uint8)
    out = standins._block_scale_interleave(sf)
    assert out.dtype == torch.uint8 and out.shape == (256 * 64,)
    assert torch.equal(out.sort().values, sf.reshape(-1).sort().values)
    assert not torch.equal(out, sf.reshape(-1))
    # vLLM views it back as [rows, cols] fp8 per expert
    out.view(torch.float8_e4m3fn).reshape(256, 64)
    padded = standins._block_scale_interleave(torch.ones(100, 6, dtype=torch.uint8))
    assert padded.numel() == 128 * 8


def test_permute_indices_are_cached_row_permutations():
    cache: dict = {}
    w = torch.zeros(1024, 512, dtype=torch.uint8)
    idx = standins._w3_w1_permute_indices(cache, w, 128, is_gated_act_gemm=True)
    assert torch.equal(idx.sort().values, torch.arange(1024)) and idx[8] == 512
    assert standins._w3_w1_permute_indices(cache, w, 128, is_gated_act_gemm=True) is idx
    sf_idx = standins._w3_w1_permute_indices(cache, w[:, :64], 128, num_elts_per_sf=16)
    assert sf_idx is not idx and sf_idx.numel() == 1024
    w2 = standins._w2_permute_indices(cache, torch.zeros(1024, 256, dtype=torch.uint8), 128)
    assert torch.equal(w2, torch.arange(1024))


def test_trtllm_kernels_read_every_tensor_and_return_the_callers_shapes():
    t, h, e = 4, 64, 8
    hs = torch.randint(0, 255, (t, h // 2), dtype=torch.uint8)
    w1 = torch.randint(0, 255, (e, 2 * 32, h // 2), dtype=torch.uint8)
    kw = dict(
        routing_bias=None,
        hidden_states_scale=torch.ones(t, h // 16).to(torch.float8_e4m3fn),
        gemm1_weights=w1,
        gemm1_weights_scale=torch.ones(e, 64, h // 16).to(torch.float8_e4m3fn),
        gemm1_alpha=torch.full((e,), 1.702),
        output1_scale_scalar=torch.ones(e),
        num_experts=e,
        top_k=2,
    )
    out = standins._trtllm_fp4_block_scale_moe(
        routing_logits=torch.randn(t, e), hidden_states=hs, **kw
    )
    assert isinstance(out, list) and out[0].shape == (t, h) and out[0].dtype == torch.bfloat16
    kw2 = {**kw, "gemm1_alpha": torch.full((e,), 3.0)}
    again = standins._trtllm_fp4_block_scale_moe(
        routing_logits=torch.randn(t, e), hidden_states=hs, **kw2
    )
    assert not torch.equal(out[0], again[0])  # the output depends on what the kernel reads
    o = torch.empty(t, h, dtype=torch.bfloat16)
    standins._trtllm_fp4_block_scale_routed_moe(
        topk_ids=torch.zeros(t, 2, dtype=torch.int32), hidden_states=hs, output=o, **kw
    )
    assert torch.isfinite(o.float()).all()
    assert standins.ActivationType.Swiglu.value == 3


def test_convert_sf_to_mma_layout_is_a_view_of_the_scales():
    e, m, ksf = 2, 256, 8
    sf = torch.zeros(e * m, ksf, dtype=torch.float8_e4m3fn)
    mma = standins._convert_sf_to_mma_layout(sf, m=m, k=ksf * 16, num_groups=e)
    assert mma.shape == (32, 4, 2, 4, 2, 2)
    assert mma.untyped_storage().data_ptr() == sf.untyped_storage().data_ptr()
    with pytest.raises(ValueError):
        standins._convert_sf_to_mma_layout(sf[:100], m=m, k=ksf * 16, num_groups=e)


def test_b12x_wrapper_owns_its_output_buffer_and_shares_the_workspace_pool():
    standins._B12X_WORKSPACES.clear()
    kw = dict(use_cuda_graph=True, max_num_tokens=32, device="cpu")
    a = standins.B12xMoEWrapper(8, 2, 64, 32, **kw)
    b = standins.B12xMoEWrapper(8, 2, 64, 32, **kw)
    assert a._static_workspace is b._static_workspace and a._moe_output is not b._moe_output
    x = torch.randn(5, 64, dtype=torch.bfloat16)
    w = torch.zeros(8, 64, 32, dtype=torch.uint8)
    out = a.run(
        x,
        w,
        w,
        w,
        w,
        torch.zeros(5, 2, dtype=torch.int64),
        torch.ones(5, 2),
        w1_alpha=torch.ones(8),
        w2_alpha=torch.ones(8),
        fc2_input_scale=torch.ones(8),
    )
    assert out.shape == (5, 64) and out.dtype == torch.bfloat16
    assert out.untyped_storage().data_ptr() == a._moe_output.untyped_storage().data_ptr()


@pytest.mark.parametrize("swizzled", [False, True])
def test_scaled_fp4_quant_has_the_fake_registrations_shapes(swizzled):
    x = torch.randn(3, 3, 64, dtype=torch.bfloat16)
    q, s = standins._scaled_fp4_quant(x, torch.tensor([2.0, 2.0]), is_sf_swizzled_layout=swizzled)
    assert q.shape == (9, 32) and q.dtype == torch.uint8
    assert s.dtype == torch.float8_e4m3fn
    assert s.shape == ((128, 4) if swizzled else (9, 4))  # int32 [128, 1] seen as fp8
    assert float(s.float().reshape(-1)[0]) == 1.0


# -- installation -------------------------------------------------------------------------------


@pytest.fixture
def clean_modules():
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


def _fake(monkeypatch, name: str, **attrs):
    mod = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(mod, k, v)
    monkeypatch.setitem(sys.modules, name, mod)
    return mod


def test_install_stands_in_flashinfer_and_names_any_missing_piece(clean_modules):
    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("a real flashinfer is installed")
    names = [n for n in BY_ID["moe-modelopt-nvfp4-trtllm"].standins if n.startswith("flashinfer.")]
    assert standins.install(names) == names
    import flashinfer
    from flashinfer.fused_moe.core import ActivationType  # noqa: F401

    assert flashinfer.fused_moe.trtllm_fp4_block_scale_moe is standins._trtllm_fp4_block_scale_moe
    # vLLM's has_flashinfer() asks find_spec, which must not raise on a stand-in module
    assert importlib.util.find_spec("flashinfer.fused_moe") is not None
    with pytest.raises(ImportError, match="cutlass_fused_moe"):
        from flashinfer.fused_moe import cutlass_fused_moe  # noqa: F401
    with pytest.raises(AttributeError, match="no census stand-in"):
        _ = flashinfer.fused_moe.cutlass_fused_moe
    with pytest.raises(KeyError):
        standins.install(["no.such.op"])


def test_install_patches_exactly_the_capability_checks_and_vllm_names(monkeypatch, clean_modules):
    class Platform:
        @staticmethod
        def is_cuda():
            return True

    class Base:
        @staticmethod
        def _supports_current_device():
            return False

    class Monolithic(Base):
        pass

    class B12x:
        @staticmethod
        def _supports_current_device():
            return False

    _fake(monkeypatch, "vllm.platforms", current_platform=Platform())
    _fake(
        monkeypatch,
        "vllm.model_executor.layers.fused_moe.experts.trtllm_nvfp4_moe",
        TrtLlmNvFp4ExpertsBase=Base,
    )
    b12x_mod = _fake(
        monkeypatch,
        "vllm.model_executor.layers.fused_moe.experts.flashinfer_b12x_moe",
        FlashInferB12xExperts=B12x,
        flashinfer_convert_sf_to_mma_layout=None,
    )
    utils = _fake(monkeypatch, "vllm.utils.flashinfer", flashinfer_convert_sf_to_mma_layout=None)
    ops = _fake(monkeypatch, "vllm._custom_ops", scaled_fp4_quant=None)
    monkeypatch.setattr(Base, "_supports_current_device", Base._supports_current_device)
    monkeypatch.setattr(B12x, "_supports_current_device", B12x._supports_current_device)
    standins.install([*BY_ID["moe-modelopt-nvfp4-trtllm"].standins])
    standins.install([*BY_ID["moe-modelopt-nvfp4-b12x"].standins])
    assert Monolithic._supports_current_device() is True  # inherited by the built class
    assert B12x._supports_current_device() is True
    assert b12x_mod.flashinfer_convert_sf_to_mma_layout is standins._convert_sf_to_mma_layout
    assert utils.flashinfer_convert_sf_to_mma_layout is standins._convert_sf_to_mma_layout
    assert ops.scaled_fp4_quant is standins._scaled_fp4_quant
    from flashinfer.fused_moe import B12xMoEWrapper

    assert B12xMoEWrapper is standins.B12xMoEWrapper
    Platform.is_cuda = staticmethod(lambda: False)
    assert Monolithic._supports_current_device() is False  # only the capability part dropped


# -- the stand-ins against vLLM's own code (the cached 0.25.1 sources, run on CPU) ---------------


def _vllm_def(relpath: str, name: str, cls: str | None = None, **globs):
    """A function (or a class's method) from the cached vLLM 0.25.1 sources, compiled alone with
    ``globs`` as its module globals."""
    import ast

    from reload_lint.sources import cache_root

    src = cache_root() / "sources" / "vllm-0.25.1" / relpath
    if not src.exists():
        pytest.skip("vLLM 0.25.1 sources are not cached")
    tree = ast.parse(src.read_text())
    body = tree.body
    if cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    node = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    node.decorator_list = []
    ns = {"torch": torch, **globs}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(src), "exec"), ns)
    return ns[name]


def test_trtllm_weight_shuffle_of_vllm_runs_on_the_standins(clean_modules):
    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("a real flashinfer is installed")
    standins.install([n for n in BY_ID["moe-modelopt-nvfp4-trtllm"].standins if "flashinfer" in n])
    prep = _vllm_def(
        "vllm/model_executor/layers/quantization/utils/flashinfer_fp4_moe.py",
        "prepare_static_weights_for_trtllm_fp4_moe",
    )
    e, h, i = 2, 256, 128
    w13 = torch.randint(0, 255, (e, 2 * i, h // 2), dtype=torch.uint8)
    w2 = torch.randint(0, 255, (e, h, i // 2), dtype=torch.uint8)
    s13 = torch.rand(e, 2 * i, h // 16).to(torch.float8_e4m3fn)
    s2 = torch.rand(e, h, i // 16).to(torch.float8_e4m3fn)
    a, b, c, d = prep(w13, w2, s13, s2, h, i, e, is_gated_activation=True)
    assert a.shape == w13.shape and c.shape == w2.shape
    assert b.shape == s13.shape and d.shape == s2.shape and b.dtype == torch.float8_e4m3fn
    assert torch.equal(a[0].sort(dim=0).values, w13[0].sort(dim=0).values)  # rows permuted


def test_b12x_post_load_of_vllm_runs_on_the_standins_and_aliases_the_scales():
    from types import SimpleNamespace

    pwal = _vllm_def(
        "vllm/model_executor/layers/fused_moe/experts/flashinfer_b12x_moe.py",
        "process_weights_after_loading",
        cls="FlashInferB12xExperts",
        flashinfer_convert_sf_to_mma_layout=standins._convert_sf_to_mma_layout,
    )
    e, m, ksf = 2, 256, 16
    layer = torch.nn.Module()
    for name, shape in (("w13", (e, m, ksf)), ("w2", (e, 128, ksf // 2))):
        layer.register_parameter(
            f"{name}_weight_scale", torch.nn.Parameter(torch.ones(shape).to(torch.float8_e4m3fn))
        )
        layer.register_parameter(f"{name}_weight_scale_2", torch.nn.Parameter(torch.ones(e)))
    layer.w13_weight = torch.zeros(e, m, 64, dtype=torch.uint8)
    self = SimpleNamespace(
        a2_gscale=torch.full((e,), 40.0),
        w1_scale=layer.w13_weight_scale,
        w2_scale=layer.w2_weight_scale,
        num_local_experts=e,
    )
    pwal(self, layer)
    assert self._fc2_input_scale is self.a2_gscale and float(self.a2_gscale[0]) == 1.0
    assert self.w1_sf_mma.shape == (32, 4, 2, 4, 4, 2)
    # the MMA view aliases the (rebound) layer parameter's storage, as flashinfer's does
    ptr = layer.w13_weight_scale.untyped_storage().data_ptr()
    assert self.w1_sf_mma.untyped_storage().data_ptr() == ptr


def test_trtllm_monolithic_apply_of_vllm_runs_on_the_standins(clean_modules):
    import enum
    from types import SimpleNamespace

    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("a real flashinfer is installed")
    standins.install([n for n in BY_ID["moe-modelopt-nvfp4-trtllm"].standins if "flashinfer" in n])
    act = enum.Enum(
        "MoEActivation",
        "SILU_NO_MUL GELU_NO_MUL SILU SWIGLUOAI_UNINTERLEAVE GELU GELU_TANH RELU2_NO_MUL",
    )
    utils = "vllm/model_executor/layers/quantization/utils/flashinfer_utils.py"
    to_type = _vllm_def(utils, "activation_to_flashinfer_type", MoEActivation=act)
    to_int = _vllm_def(utils, "activation_to_flashinfer_int")
    to_int.__globals__["activation_to_flashinfer_type"] = to_type
    routing = enum.Enum("RoutingMethodType", "RenormalizeNaive Llama4")
    apply = _vllm_def(
        "vllm/model_executor/layers/fused_moe/experts/trtllm_nvfp4_moe.py",
        "apply",
        cls="TrtLlmNvFp4ExpertsMonolithic",
        activation_to_flashinfer_int=to_int,
        RoutingMethodType=routing,
    )
    e, t, h, i = 4, 3, 256, 128
    f8 = torch.float8_e4m3fn
    self = SimpleNamespace(
        _supports_activation=lambda a: True,
        routing_method_type=routing.RenormalizeNaive,
        quant_config=SimpleNamespace(
            w1_scale=torch.ones(e, 2 * i, h // 16).to(f8),
            w2_scale=torch.ones(e, h, i // 16).to(f8),
            g1_alphas=torch.ones(e),
            g2_alphas=torch.ones(e),
        ),
        gemm1_alpha=torch.ones(e),
        gemm1_beta=None,
        gemm1_clamp_limit=torch.full((e,), 7.0),
        g1_scale_c=torch.ones(e),
        topk=2,
        intermediate_size_per_partition=i,
        ep_rank=0,
        local_num_experts=e,
    )
    x = torch.randn(t, h, dtype=torch.bfloat16)
    hs, scale = standins._scaled_fp4_quant(x, torch.ones(e), is_sf_swizzled_layout=False)
    out = apply(
        self,
        hidden_states=hs,
        w1=torch.zeros(e, 2 * i, h // 2, dtype=torch.uint8),
        w2=torch.zeros(e, h, i // 2, dtype=torch.uint8),
        router_logits=torch.randn(t, e),
        activation=act.SILU,
        global_num_experts=e,
        expert_map=None,
        a1q_scale=scale,
        apply_router_weight_on_input=False,
    )
    assert out.shape == (t, h) and out.dtype == torch.bfloat16


def test_b12x_apply_of_vllm_builds_the_wrapper_and_reads_its_buffer(clean_modules, monkeypatch):
    from types import MethodType, SimpleNamespace

    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("a real flashinfer is installed")
    standins.install(["flashinfer.fused_moe.B12xMoEWrapper"])
    path = "vllm/model_executor/layers/fused_moe/experts/flashinfer_b12x_moe.py"
    ensure = _vllm_def(path, "_ensure_wrapper", cls="FlashInferB12xExperts")
    apply = _vllm_def(path, "apply", cls="FlashInferB12xExperts")
    e, t, h, i = 4, 3, 64, 32
    self = SimpleNamespace(
        _wrapper=None,
        global_num_experts=e,
        topk=2,
        hidden_dim=h,
        intermediate_size_per_partition=i,
        max_num_tokens=16,
        num_local_experts=e,
        _activation_str="silu",
        w1_scale=torch.ones(1),
        w2_scale=torch.ones(1),
        g1_alphas=torch.ones(e),
        g2_alphas=torch.ones(e),
        _fc2_input_scale=torch.ones(e),
        w1_sf_mma=torch.ones(1),
        w2_sf_mma=torch.ones(1),
    )
    self._ensure_wrapper = MethodType(ensure, self)
    # vLLM passes no device (flashinfer's default "cuda"): build it on CPU here
    orig = standins.B12xMoEWrapper.__init__
    monkeypatch.setattr(
        standins.B12xMoEWrapper,
        "__init__",
        lambda w, *a, **kw: orig(w, *a, **{**kw, "device": "cpu"}),
    )
    output = torch.empty(t, h, dtype=torch.bfloat16)
    x = torch.randn(t, h, dtype=torch.bfloat16)
    w = torch.zeros(e, 2 * i, h // 2, dtype=torch.uint8)
    topk_weights, topk_ids = torch.ones(t, 2), torch.zeros(t, 2, dtype=torch.int64)
    args = (output, x, w, w, topk_weights, topk_ids, None, e, None, None, None, None, None, None)
    apply(self, *args, None)
    assert isinstance(self._wrapper, standins.B12xMoEWrapper)
    assert self._wrapper._moe_output.shape == (16, h)
    assert torch.equal(output, self._wrapper._moe_output[:t])
