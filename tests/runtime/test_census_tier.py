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

from reload_lint.confirm.families import BY_ID, ROWS, map_finding, rows_for_finding
from reload_lint.findings import Finding

torch = pytest.importorskip("torch")

from reload_lint.confirm.recipes import standins  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FINDINGS = ROOT / "docs/evidence/h200-vllm-0.25.1.findings.json"
CENSUS_ROWS = ("moe-modelopt-nvfp4-trtllm", "moe-modelopt-nvfp4-b12x")


def _findings() -> list[Finding]:
    return [Finding.from_json(d) for d in json.loads(FINDINGS.read_text())["findings"]]


# -- the rows and the mapping -----------------------------------------------------------------


def test_census_rows_force_the_refused_backends_and_name_known_standins():
    for rid in CENSUS_ROWS:
        row = BY_ID[rid]
        assert row.standins and all(n in standins.STANDINS for n in row.standins), rid
        assert all(b.startswith("flashinfer_") for b in row.backends), rid
        # exactly one capability check is stood in, the backend's own
        checks = [n for n in row.standins if n.endswith("._supports_current_device")]
        assert len(checks) == 1 and checks[0].split(".")[0] in row.kernels, rid
    # the replay-tier row no longer forces backends vLLM refuses on SM90
    assert not {"flashinfer_trtllm", "flashinfer_b12x"} & set(BY_ID["moe-modelopt-nvfp4"].backends)
    # the TRT-LLM per-expert clamp/alpha/beta exist only with a SwiGLU limit on the MoE config
    kw = dict(BY_ID["moe-modelopt-nvfp4-trtllm"].moe_kwargs)
    assert {"swiglu_limit", "swiglu_alpha", "swiglu_beta"} <= set(kw)


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
    assert seen == set(CENSUS_ROWS)
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


def test_family_recipe_records_the_rows_standins():
    from reload_lint.confirm.recipes.vllm_layers import FamilyRecipe

    r = FamilyRecipe.from_name("family:moe-modelopt-nvfp4-trtllm:flashinfer_trtllm")
    assert r.row is BY_ID["moe-modelopt-nvfp4-trtllm"] and r.backend == "flashinfer_trtllm"
    assert {x.id for x in ROWS if x.standins} >= set(CENSUS_ROWS)


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
