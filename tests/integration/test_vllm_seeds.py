"""The seeds' sites on real vLLM 0.25.1 sources: every confirmed/high-risk storage site is
reported, and none of the negatives the seeds name is.

Downloads the release wheel once with pip (no deps) into the user cache; skipped when PyPI is
unreachable and the sources are not cached.
"""

from __future__ import annotations

import pytest

from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.sources import SourceError, release_sources

pytestmark = pytest.mark.integration

KM = "vllm/model_executor/kernels/linear/mixed_precision"
Q = "vllm/model_executor/layers/quantization"
CT = f"{Q}/compressed_tensors/compressed_tensors_moe"
FM = "vllm/model_executor/layers/fused_moe"

# (path, target, rules accepted) -- the seeds' confirmed and high-risk rows
POSITIVES = [
    (f"{KM}/marlin.py", "self.workspace", {"RL102"}),
    (f"{KM}/marlin.py", "layer.g_idx_sort_indices", {"RL101"}),
    (f"{KM}/machete.py", "self.act_perm", {"RL103"}),
    (f"{Q}/utils/marlin_utils_fp8.py", "layer.workspace", {"RL101"}),  # dense FP8 fallback
    (f"{Q}/utils/marlin_utils_fp4.py", "layer.workspace", {"RL101"}),  # dense NVFP4 fallback
    (f"{CT}/compressed_tensors_moe_wna16_marlin.py", "layer.workspace", {"RL101"}),
    (f"{CT}/compressed_tensors_moe_wna16_rdna3.py", "layer.rdna3_w1_buf", {"RL101"}),
    (f"{CT}/compressed_tensors_moe_wna16_rdna3.py", "layer.rdna3_act_buf", {"RL101"}),
    (f"{CT}/compressed_tensors_moe_wna16_rdna3.py", "layer.rdna3_empty_tw", {"RL101"}),
    (f"{CT}/compressed_tensors_moe_w4a8_fp8.py", "self.b_strides1", {"RL102"}),
    (f"{CT}/compressed_tensors_moe_w4a8_fp8.py", "self.moe_kernel", {"RL105"}),
    (f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py", "self.moe_kernel", {"RL105"}),
    (
        f"{Q}/compressed_tensors/schemes/compressed_tensors_wNa8o8.py",
        "self._input_scale",
        {"RL202"},
    ),
    (f"{Q}/fp8.py", "self.moe_kernel", {"RL105"}),  # CUTLASS FP8 MoE strides (#41670)
    (f"{FM}/experts/flashinfer_b12x_moe.py", "self._fc2_input_scale", {"RL102"}),
    (f"{FM}/experts/flashinfer_b12x_moe.py", "self.w1_sf_mma", {"RL102"}),
    (f"{FM}/experts/flashinfer_b12x_moe.py", "self.w2_sf_mma", {"RL102"}),
    (f"{FM}/experts/trtllm_nvfp4_moe.py", "self.g1_scale_c", {"RL107"}),
    (f"{FM}/unquantized_fused_moe_method.py", "layer.w13_weight.data", {"RL106"}),
    ("vllm/model_executor/layers/attention/mla_attention.py", "self.W_UV", {"RL101"}),
    ("vllm/model_executor/layers/attention/mla_attention.py", "self.W_UK_T", {"RL101"}),
    ("vllm/model_executor/layers/attention/mla_attention.py", "self.W_K", {"RL101"}),
    ("vllm/model_executor/layers/attention/mla_attention.py", "self.W_V_scale", {"RL101"}),
]

# (path, rebuilt-object trace must show these allocations)
REBUILT_TRACES = [
    (f"{Q}/fp8.py", "self.moe_kernel", ["ab_strides1", "c_strides1"]),
    (f"{Q}/fp8.py", "self.moe_kernel", ["gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit"]),
    (f"{CT}/compressed_tensors_moe_w4a8_fp8.py", "self.moe_kernel", ["a_strides1", "s_strides1"]),
    (f"{Q}/fp8.py", "self.moe_kernel", ["gemm1_alpha"]),  # TRT-LLM FP8 experts constants
]

# (path, line text fragment) -- the seeds' named negatives
NEGATIVES = [
    (f"{Q}/auto_awq.py", "workspace"),  # assigned in create_weights: runs once
    (f"{Q}/auto_gptq.py", "workspace"),
    (f"{KM}/marlin.py", "marlin_make_empty_g_idx"),  # zero-numel Parameters register
    (f"{KM}/marlin.py", "input_global_scale"),  # registered, covered by copy-back
]


@pytest.fixture(scope="module")
def vllm_run():
    try:
        root = release_sources("vllm", "0.25.1")
    except SourceError as exc:
        pytest.skip(f"vLLM 0.25.1 sources unavailable: {exc}")
    result = run_check([root / "vllm"], Config(), base_dir=root, use_cache=False)
    return root, result


@pytest.mark.parametrize("path,target,rules", POSITIVES, ids=lambda x: str(x)[-40:])
def test_seed_site_reported(vllm_run, path, target, rules):
    _, result = vllm_run
    hits = [f for f in result.findings if f.path == path and f.target == target]
    assert hits, f"{path}: no finding on {target}"
    assert {f.rule for f in hits} & rules, [f.rule for f in hits]
    for f in hits:
        assert f.trace and f.trace[-1].line > 0
        assert len(f.fingerprint) == 20


@pytest.mark.parametrize("path,target,names", REBUILT_TRACES)
def test_rebuilt_object_trace_lists_allocations(vllm_run, path, target, names):
    _, result = vllm_run
    hits = [f for f in result.findings if f.path == path and f.target == target]
    assert hits
    notes = " ".join(s.note for f in hits for s in f.trace)
    for n in names:
        assert f"self.{n}" in notes, n


@pytest.mark.parametrize("path,fragment", NEGATIVES)
def test_seed_negative_not_reported(vllm_run, path, fragment):
    root, result = vllm_run
    lines = (root / path).read_text().splitlines()
    bad = [
        f
        for f in result.findings
        if f.path == path and fragment in lines[f.line - 1] and "create_weights" not in f.symbol
    ]
    bad += [f for f in result.findings if f.path == path and "create_weights" in f.symbol]
    assert not bad, [(f.line, f.rule, f.target) for f in bad]


def test_no_file_errors_on_release(vllm_run):
    _, result = vllm_run
    assert result.errors == []
