"""Recall of the SGLang 0.5.23 audit's classes on the real release sources
(docs/reviews/recall-sglang-0.5.23.md), under `inplace-only`.

- (weight, scale) pairs handed to a kernel library in tuples: the MegaMoE builders give each
  pair to `deep_gemm.transform_weights_for_mega_moe` and point the checkpoint Parameters'
  `.data` at what it returns, on every post-load; before, the tuple arguments hid the tensors
  from the unknown-callee rule and the stores were judged "not new device storage".
- A tensor hung on a Parameter object: the FP8 linear method's dense mxscale copy
  (`layer.weight._mxscale_w_scale = e8m0`) is replaced on every update (RL102).
- Parameter attributes restored under names only a loop knows stay quiet.
- RL202 only where the deletion of the source runs whenever the store does.

Uses the release sources the seed tests download (skipped when they are unavailable).
"""

from __future__ import annotations

import functools

import pytest

from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.sources import SourceError, release_sources

pytestmark = pytest.mark.integration

Q = "sglang/srt/layers/quantization"

# (path, target, rule): stores of a library's re-laid-out pairs, rebuilt on every post-load
MEGA_PAIRS = [
    (f"{Q}/mxfp4.py", "layer.w13_weight.data", "RL106"),
    (f"{Q}/mxfp4.py", "layer.w2_weight_scale.data", "RL106"),
    (f"{Q}/modelopt_quant.py", "layer.w2_weight.data", "RL106"),
    (f"{Q}/modelopt_quant.py", "layer.mega_l1_weights", "RL101"),
    (f"{Q}/minimax_m3_nvfp4.py", "layer.w13_weight_packed.data", "RL106"),
]


@functools.cache
def _run():
    try:
        root = release_sources("sglang", "0.5.23")
    except SourceError as exc:
        pytest.skip(f"SGLang 0.5.23 sources unavailable: {exc}")
    result = run_check([root / "sglang"], Config(), base_dir=root, use_cache=False)
    return root, result


@pytest.mark.parametrize("path,target,rule", MEGA_PAIRS, ids=[f"{p}:{t}" for p, t, _ in MEGA_PAIRS])
def test_library_relayout_of_pairs_is_reported(path, target, rule):
    root, result = _run()
    hits = [f for f in result.findings if f.path == path and f.target == target]
    assert hits, f"{path}: no finding on {target}"
    assert rule in {f.rule for f in hits} and all(f.contract == "inplace-only" for f in hits)
    steps = [s for f in hits for s in f.trace if "transform_weights_for_mega_moe" in s.note]
    assert steps, [s.note for f in hits for s in f.trace]


def test_tensor_on_the_weight_parameter_is_reported():
    root, result = _run()
    path = f"{Q}/fp8.py"
    (hit,) = [
        f for f in result.findings if f.path == path and f.target == "layer.weight._mxscale_w_scale"
    ]
    line = (root / path).read_text().splitlines()[hit.line - 1]
    assert "layer.weight._mxscale_w_scale = e8m0" in line
    # the Marlin fallback's `del layer.weight_scale_inv` is on another branch: not RL202
    assert hit.rule == "RL102"


def test_rl202_needs_the_deletion_on_the_store_path():
    root, result = _run()
    rules = {
        (f.path, f.target): f.rule
        for f in result.findings
        if f.target in ("layer.mega_l1_weights", "layer.sm120_fp8_alpha")
    }
    assert rules[(f"{Q}/mxfp4.py", "layer.mega_l1_weights")] == "RL101"
    # the previous review's N 6: `del layer.input_scale` is in the Marlin branch only
    assert rules[(f"{Q}/modelopt_quant.py", "layer.sm120_fp8_alpha")] == "RL101"
