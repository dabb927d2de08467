"""Recall of issue 17's classes on real vLLM release sources.

- Reciprocal scales in a quant-config constructor (0.33.0): every FP8 per-tensor MoE method
  whose oracle can pick FlashInfer-CUTLASS keeps `1.0 / a1_scale` in its quant config
  (`make_fp8_moe_quant_config`'s per-tensor FLASHINFER_CUTLASS/HPC branch).
- A stale derived copy (0.25.1): FlashInferImpl's `self.sinks = self.sinks.to(torch.float32)`
  is RL201 (0.33.0 copies into the existing copy on updates: no RL201 there).
- Packed weights from an external library (0.33.0): b12x's `pack_weight` reached through a
  module a helper imports at run time, stored as a plain layer attribute and read in apply;
  the kernels that pass the result through `reuse_packed_weight_storage` are not reported.
- A library module held on the quant method (0.33.0): the ARK WNA16 MoE method keeps the
  module get_ark_state() imports at run time on `self.ark`; the objects its
  `MoeSymmetricGemm.prepare(layer.w*_weight, ...)` returns on every post-load are reported
  (low confidence: the library is not in the tree), with apply's read as the reader.
- A first-use cache of rebuilt experts (0.33.0): MuseSparkAiterExperts fills
  `self._unit_weights_bufs[width]` in apply under a test of a local; the Quark OCP-MX
  post-load rebuilds the experts with the kernel, so it is RL108. B12xExperts' `_unit_scales`
  cache, which only its post-load fills (a reused preparation's input), is not.
- A run-once flag another method sets back (0.33.0, one method added to a copy of the tree):
  HummingMoEMethod's `processed` guard stops being run-once, and its rebuilt kernel is reported
  with a `guard` naming the reset.

Uses the release sources the seed tests download (skipped when they are unavailable).
"""

from __future__ import annotations

import functools
import shutil

import pytest

from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.sources import SourceError, release_sources

pytestmark = pytest.mark.integration

Q = "vllm/model_executor/layers/quantization"
CT = f"{Q}/compressed_tensors/compressed_tensors_moe"

# FP8 per-tensor MoE methods of 0.33.0: (path, target)
RECIPROCAL_CONFIGS = [
    (f"{Q}/fp8.py", "self.moe_quant_config"),
    (f"{Q}/modelopt.py", "self.moe_quant_config"),
    (f"{Q}/online/fp8.py", "self.moe_quant_config"),
    (f"{CT}/compressed_tensors_moe_w8a8_fp8.py", "self.moe_quant_config"),
    (f"{Q}/quark/quark_moe.py", "self.moe_quant_config"),
]


@functools.cache
def _root(version: str):
    try:
        return release_sources("vllm", version)
    except SourceError as exc:
        pytest.skip(f"vLLM {version} sources unavailable: {exc}")


@functools.cache
def _run(version: str):
    root = _root(version)
    return root, run_check([root / "vllm"], Config(), base_dir=root, use_cache=False)


@pytest.mark.parametrize("path,target", RECIPROCAL_CONFIGS, ids=[p for p, _ in RECIPROCAL_CONFIGS])
def test_reciprocal_scale_in_fp8_quant_config(path, target):
    root, result = _run("0.33.0")
    hits = [f for f in result.findings if f.path == path and f.target == target]
    assert hits, f"{path}: no finding on {target}"
    steps = [
        s
        for f in hits
        for s in f.trace
        if s.path.endswith("fused_moe/oracle/fp8.py") and "`/` allocates" in s.note
    ]
    assert steps, [s.note for f in hits for s in f.trace]
    text = (root / steps[0].path).read_text().splitlines()[steps[0].line - 1]
    assert "1.0 / a" in text, text
    assert any(f.rule == "RL105" and f.reader for f in hits)


# (path, target): library packers' results kept on the layer, rebuilt on every post-load
EXTERNAL_PACKED = [
    ("vllm/model_executor/kernels/linear/nvfp4/b12x.py", "layer.b12x_nvfp4_packed_weight"),
    (f"{Q}/modelopt_block_quant.py", "layer.b12x_block_weight"),
]
# the same packers through the storage-reuse helper: written in place on an update
REUSED = [
    ("vllm/model_executor/kernels/linear/mxfp8/b12x.py", "layer.b12x_mxfp8_packed_weight"),
    ("vllm/model_executor/kernels/linear/scaled_mm/b12x.py", "layer.b12x_tensor_fp8_packed_weight"),
    ("vllm/model_executor/layers/fused_moe/b12x.py", "layer._b12x_prepared_experts"),
    ("vllm/model_executor/layers/fused_moe/b12x.py", "self._prepared_experts"),
]


@pytest.mark.parametrize("path,target", EXTERNAL_PACKED, ids=[t for _, t in EXTERNAL_PACKED])
def test_external_packer_result_is_reported(path, target):
    root, result = _run("0.33.0")
    hits = [f for f in result.findings if f.path == path and f.target == target]
    assert hits, f"{path}: no finding on {target}"
    assert hits[0].rule == "RL101" and hits[0].reader
    line = (root / path).read_text().splitlines()[hits[0].line - 1]
    assert "pack_weight" in line or target.split(".")[1] in line, line
    assert any("pack_weight" in s.note for s in hits[0].trace)


@pytest.mark.parametrize("path,target", REUSED, ids=[t for _, t in REUSED])
def test_reused_packer_result_is_not_reported(path, target):
    root, result = _run("0.33.0")
    assert (root / path).is_file()
    assert not [f for f in result.findings if f.path == path and f.target == target]


def test_stale_sinks_copy_is_rl201_on_0251_only():
    flashinfer = "vllm/v1/attention/backends/flashinfer.py"
    root, result = _run("0.25.1")
    hits = [f for f in result.findings if f.path == flashinfer and f.rule == "RL201"]
    assert [f.target for f in hits] == ["self.sinks"]
    line = (root / flashinfer).read_text().splitlines()[hits[0].line - 1]
    assert "self.sinks = self.sinks.to(torch.float32)" in line
    assert hits[0].reader  # FlashInferImpl.forward passes sinks= to the kernels
    _, result = _run("0.33.0")
    assert not [f for f in result.findings if f.path == flashinfer and f.rule == "RL201"]


def test_flag_set_back_elsewhere_is_not_run_once(tmp_path):
    humming = f"{Q}/humming.py"
    _, before = _run("0.33.0")
    assert not [f for f in before.findings if f.path == humming and f.target == "self.moe_kernel"]
    root = tmp_path / "vllm-0.33.0"
    shutil.copytree(_root("0.33.0") / "vllm", root / "vllm")
    src = (root / humming).read_text()
    anchor = "class HummingMoEMethod("
    assert src.count(anchor) == 1
    head, tail = src.split(anchor)
    body_start = tail.index("\n    def ")
    reset = "\n    def reset_processed(self):\n        self.processed = False\n"
    (root / humming).write_text(head + anchor + tail[:body_start] + reset + tail[body_start:])
    after = run_check([root / "vllm"], Config(), base_dir=root, use_cache=False)
    hits = [f for f in after.findings if f.path == humming and f.target == "self.moe_kernel"]
    assert hits, "the rebuilt kernel behind the reset flag is not reported"
    assert "HummingMoEMethod.reset_processed sets it back" in hits[0].guard


HELD_LIBRARY = [
    (f"{Q}/inc/schemes/inc_wna16_moe.py", "self.w13_moe"),
    (f"{Q}/inc/schemes/inc_wna16_moe.py", "self.w2_moe"),
]


@pytest.mark.parametrize("path,target", HELD_LIBRARY, ids=[t for _, t in HELD_LIBRARY])
def test_a_library_held_on_the_method_prepares_new_storage(path, target):
    root, result = _run("0.33.0")
    hits = [f for f in result.findings if f.path == path and f.target == target]
    assert hits, f"{path}: no finding on {target}"
    assert hits[0].rule == "RL102" and hits[0].confidence == "low" and hits[0].reader
    line = (root / path).read_text().splitlines()[hits[0].line - 1]
    assert ".prepare(" in line, line


def test_first_use_cache_of_rebuilt_experts_is_rl108():
    root, result = _run("0.33.0")
    muse = "vllm/models/muse_spark/amd/muse_moe_runner.py"
    hits = [f for f in result.findings if f.path == muse and f.rule == "RL108"]
    assert [f.target for f in hits] == ["self._unit_weights_bufs[width]"], hits
    line = (root / muse).read_text().splitlines()[hits[0].line - 1]
    assert "self._unit_weights_bufs[width] = buf" in line, line
    b12x = "vllm/model_executor/layers/fused_moe/b12x.py"
    assert not [f for f in result.findings if f.path == b12x and f.rule == "RL108"]
