"""The seeds' sites on real vLLM release sources: every confirmed/high-risk storage site that
exists in a release is reported, and none of the negatives the seeds name is.

Two releases: 0.25.1 (the main job) and 0.33.0 (the current release, where the gate lives).
A site is reported at its own line, or as a trace step of a finding whose location a reviewer
would change (the rebuild in the quant method's post-load path). Sites that a release no longer
has (fixed upstream or removed: Marlin/Machete workspaces, MLA's W_UV, RDNA3 scratch) are only
in the older table.

Downloads the release wheels once with pip (no deps) into the user cache; skipped when PyPI is
unreachable and the sources are not cached.
"""

from __future__ import annotations

import functools

import pytest

from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.sources import SourceError, release_sources

pytestmark = pytest.mark.integration

KM = "vllm/model_executor/kernels/linear/mixed_precision"
Q = "vllm/model_executor/layers/quantization"
CT = f"{Q}/compressed_tensors/compressed_tensors_moe"
FM = "vllm/model_executor/layers/fused_moe"
MLA = "vllm/model_executor/layers/attention/mla_attention.py"
B12X = f"{FM}/experts/flashinfer_b12x_moe.py"

# (path, target, rules accepted) -- the seeds' confirmed and high-risk rows
POSITIVES = {
    "0.25.1": [
        (f"{KM}/marlin.py", "self.workspace", {"RL102"}),
        (f"{KM}/marlin.py", "layer.g_idx_sort_indices", {"RL101"}),
        (f"{KM}/machete.py", "self.act_perm", {"RL103"}),
        (f"{Q}/utils/marlin_utils_fp8.py", "layer.workspace", {"RL101"}),  # dense FP8 fallback
        (f"{Q}/utils/marlin_utils_fp4.py", "layer.workspace", {"RL101"}),  # dense NVFP4 fallback
        (f"{CT}/compressed_tensors_moe_wna16_rdna3.py", "layer.rdna3_w1_buf", {"RL101"}),
        (f"{CT}/compressed_tensors_moe_wna16_rdna3.py", "layer.rdna3_act_buf", {"RL101"}),
        (f"{CT}/compressed_tensors_moe_w4a8_fp8.py", "self.b_strides1", {"RL102"}),
        (f"{CT}/compressed_tensors_moe_w4a8_fp8.py", "self.moe_kernel", {"RL105"}),
        (f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py", "self.moe_kernel", {"RL105"}),
        # the NVFP4 quant config keeps 1 / a13_scale, 1 / a2_scale (a1/a2_gscale)
        (f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py", "self.moe_quant_config", {"RL105"}),
        (
            f"{Q}/compressed_tensors/schemes/compressed_tensors_wNa8o8.py",
            "self._input_scale",
            {"RL202"},
        ),
        (f"{Q}/fp8.py", "self.moe_kernel", {"RL105"}),  # CUTLASS FP8 MoE strides (#41670)
        (B12X, "self._fc2_input_scale", {"RL102"}),
        (B12X, "self.w1_sf_mma", {"RL102"}),
        (B12X, "self.w2_sf_mma", {"RL102"}),
        (B12X, "self._wrapper", {"RL108"}),  # B12xMoEWrapper built on first use (#50538)
        (f"{FM}/experts/cutlass_moe.py", "self._permute_scratch", {"RL108"}),
        (MLA, "self.W_UV", {"RL101"}),
        (MLA, "self.W_UK_T", {"RL101"}),
        (MLA, "self.W_K", {"RL101"}),
        (MLA, "self.W_V_scale", {"RL101"}),
    ],
    "0.33.0": [
        (f"{CT}/compressed_tensors_moe_w4a8_fp8.py", "self.b_strides1", {"RL102"}),
        (f"{CT}/compressed_tensors_moe_w4a8_fp8.py", "self.moe_kernel", {"RL105"}),
        (f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py", "self.moe_kernel", {"RL105"}),
        (f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py", "self.moe_quant_config", {"RL105"}),
        (
            f"{Q}/compressed_tensors/schemes/compressed_tensors_wNa8o8.py",
            "self._input_scale",
            {"RL202"},
        ),
        (f"{Q}/fp8.py", "self.moe_kernel", {"RL105"}),
        (B12X, "self._fc2_input_scale", {"RL102"}),
        (B12X, "self.w1_sf_mma", {"RL102"}),
        (B12X, "self.w2_sf_mma", {"RL102"}),
        (B12X, "self._wrapper", {"RL108"}),
        (f"{FM}/experts/trtllm_mxfp4_moe.py", "self.gemm1_alpha", {"RL102"}),
    ],
}

# (finding path, finding target, site file, attributes): the finding's trace shows a step in
# the site file, on a line that stores each attribute (the rebuilt object's allocations)
# -- rows both releases share
_REBUILT_BOTH = [
    (f"{Q}/fp8.py", "self.moe_kernel", "cutlass_moe.py", ["ab_strides1", "c_strides1"]),
    (
        f"{Q}/fp8.py",
        "self.moe_kernel",
        "flashinfer_cutlass_moe.py",
        ["gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit"],
    ),
    (
        f"{CT}/compressed_tensors_moe_w4a8_fp8.py",
        "self.moe_kernel",
        "cutlass_moe.py",
        ["a_strides1", "s_strides1"],
    ),
    (
        f"{Q}/fp8.py",
        "self.moe_kernel",
        "trtllm_fp8_moe.py",
        ["gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit", "_g1_alphas", "_g1_scale_c"],
    ),
]
REBUILT_TRACES = {
    "0.25.1": [
        *_REBUILT_BOTH,
        (
            f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py",
            "self.moe_kernel",
            "trtllm_nvfp4_moe.py",
            ["g1_scale_c"],
        ),
        (f"{Q}/mxfp4.py", "self.moe_kernel", "trtllm_mxfp4_moe.py", ["gemm1_alpha", "gemm1_beta"]),
    ],
    "0.33.0": [
        *_REBUILT_BOTH,
        (
            f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py",
            "self.moe_kernel",
            "trtllm_nvfp4_moe.py",
            ["g1_scale_c", "gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit"],
        ),
        (
            f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py",
            "self.moe_kernel",
            "flashinfer_cutlass_moe.py",
            ["gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit"],
        ),
    ],
}

# (finding path, finding target, file of the allocating call): the NVFP4 oracle's
# `1.0 / a13_scale` / `1.0 / a2_scale` (a1/a2_gscale), built inside the quant config call
CONFIG_ALLOCATIONS = {
    "0.25.1": [
        (f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py", "self.moe_quant_config", "oracle/nvfp4.py")
    ],
    "0.33.0": [
        (f"{CT}/compressed_tensors_moe_w4a4_nvfp4.py", "self.moe_quant_config", "oracle/nvfp4.py")
    ],
}

# Seed-named sites that a release decides are no graph hazard, read against its code (labels in
# docs/reviews/): not reported there, and pinned so that a regression reports them again. The
# site's hazard, where it has one, stays reported elsewhere (the TRT-LLM NVFP4 experts'
# g1_scale_c allocation is a step of the rebuilt kernel's trace, REBUILT_TRACES).
# (path, target, why)
DECIDED = {
    "0.25.1": [
        # `torch.empty(0)`: a zero-element tensor has no storage to move or free
        (f"{CT}/compressed_tensors_moe_wna16_rdna3.py", "layer.rdna3_empty_tw", "zero-element"),
        # `self.g1_scale_c = layer.g1_scale_c` right after registering it on the layer
        # (trtllm_nvfp4_moe.py:122-126): an alias of the final registered Parameter, which
        # graphs captured and copy-back refreshes in place
        (f"{FM}/experts/trtllm_nvfp4_moe.py", "self.g1_scale_c", "registered alias"),
        # `F.pad(w, (0, n))[..., :-n]` with `n = 256 // w.element_size()` (the ROCm MoE
        # padding, unquantized_fused_moe_method.py:150): the pad is sliced back off, the swap
        # keeps the shape and copy-back refreshes the registered storage (green on the H200)
        (f"{FM}/unquantized_fused_moe_method.py", "layer.w13_weight.data", "same shape"),
        (f"{FM}/unquantized_fused_moe_method.py", "layer.w2_weight.data", "same shape"),
        # the MoE Marlin workspace (:490): the quant method's apply names the layer
        # (RoutedExperts) and no apply path of the method or the layer reads `workspace` (the
        # H200 run: freed, never read by the capture)
        (f"{CT}/compressed_tensors_moe_wna16_marlin.py", "layer.workspace", "unread"),
        # RDNA3's output scratch: allocated on every post-load, read by no apply path
        (f"{CT}/compressed_tensors_moe_wna16_rdna3.py", "layer.rdna3_out_buf", "unread"),
    ],
    "0.33.0": [
        # the alias at :164 after registering at :160-163, as in 0.25.1
        (f"{FM}/experts/trtllm_nvfp4_moe.py", "self.g1_scale_c", "registered alias"),
    ],
}

# (path, line text fragment) -- the seeds' named negatives
NEGATIVES = {
    "0.25.1": [
        (f"{Q}/auto_awq.py", "workspace"),  # assigned in create_weights: runs once
        (f"{Q}/auto_gptq.py", "workspace"),
        (f"{KM}/marlin.py", "marlin_make_empty_g_idx"),  # zero-numel Parameters register
        (f"{KM}/marlin.py", "input_global_scale"),  # registered, covered by copy-back
    ],
    "0.33.0": [
        (f"{KM}/marlin.py", "input_global_scale"),
    ],
}


@functools.cache
def _run(version: str):
    try:
        root = release_sources("vllm", version)
    except SourceError as exc:
        pytest.skip(f"vLLM {version} sources unavailable: {exc}")
    result = run_check([root / "vllm"], Config(), base_dir=root, use_cache=False)
    return root, result


def _cases(table: dict) -> list:
    return [
        pytest.param(v, *row, id=f"{v}-{str(row[0])[-30:]}-{row[1]}")
        for v in table
        for row in table[v]
    ]


@pytest.mark.parametrize("version,path,target,rules", _cases(POSITIVES))
def test_seed_site_reported(version, path, target, rules):
    root, result = _run(version)
    assert (root / path).is_file(), f"{path} is not in vLLM {version}: fix the table"
    hits = [f for f in result.findings if f.path == path and f.target == target]
    assert hits, f"{path}: no finding on {target}"
    assert {f.rule for f in hits} & rules, [f.rule for f in hits]
    lines = (root / path).read_text().splitlines()
    for f in hits:
        assert f.trace and f.trace[-1].line > 0
        assert len(f.fingerprint) == 20
        # reported at the storing statement itself
        stmt = "\n".join(lines[f.line - 1 : max(f.end_line, f.line)])
        assert target.split(".")[1] in stmt, (f.line, stmt)


@pytest.mark.parametrize("version,path,target,site,names", _cases(REBUILT_TRACES))
def test_rebuilt_object_trace_lists_allocations(version, path, target, site, names):
    root, result = _run(version)
    hits = [f for f in result.findings if f.path == path and f.target == target]
    assert hits, f"{path}: no finding on {target}"
    steps = [s for f in hits for s in f.trace if s.path.endswith(site)]
    for n in names:
        # the step names the attribute and sits on a line of the site file that stores it
        at = [s for s in steps if f"self.{n}" in s.note]
        assert at, f"{n}: no trace step in {site}"
        text = (root / at[0].path).read_text().splitlines()[at[0].line - 1]
        assert f"self.{n}" in text, (n, at[0].line, text)


@pytest.mark.parametrize("version,path,target,site", _cases(CONFIG_ALLOCATIONS))
def test_config_allocation_in_call_arguments_is_traced(version, path, target, site):
    root, result = _run(version)
    hits = [f for f in result.findings if f.path == path and f.target == target]
    assert hits, f"{path}: no finding on {target}"
    steps = [s for f in hits for s in f.trace if s.path.endswith(site) and "allocates" in s.note]
    assert steps, f"no allocation step in {site}"
    text = (root / steps[0].path).read_text().splitlines()
    # the step's statement divides by the activation scale
    window = "\n".join(text[steps[0].line - 1 : steps[0].line + 25])
    assert "1.0 / a" in window or "1 / a" in window, window


@pytest.mark.parametrize("version,path,fragment", _cases(NEGATIVES))
def test_seed_negative_not_reported(version, path, fragment):
    root, result = _run(version)
    lines = (root / path).read_text().splitlines()
    bad = [
        f
        for f in result.findings
        if f.path == path and fragment in lines[f.line - 1] and "create_weights" not in f.symbol
    ]
    bad += [f for f in result.findings if f.path == path and "create_weights" in f.symbol]
    assert not bad, [(f.line, f.rule, f.target) for f in bad]


@pytest.mark.parametrize("version", sorted(POSITIVES))
def test_no_file_errors_on_release(version):
    _, result = _run(version)
    assert result.errors == []


@pytest.mark.parametrize("version,path,target,why", _cases(DECIDED))
def test_seed_site_decided_safe_is_not_reported(version, path, target, why):
    root, result = _run(version)
    assert (root / path).is_file(), f"{path} is not in vLLM {version}: fix the table"
    hits = [(f.line, f.rule) for f in result.findings if f.path == path and f.target == target]
    assert not hits, (why, hits)
