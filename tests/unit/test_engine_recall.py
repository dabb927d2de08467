"""Recall facts (issue 17) beyond the `(path, line, rule)` markers of tests/fixtures/minirecall:
which apply-time reader each finding names (the gate fails only findings with one), the
`guard` text of a run-once flag that other code sets back, and the fix of a stale cast copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from reload_lint.config import Config

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "minirecall"
PKG = "minirecall/model_executor/layers/quantization"


@pytest.fixture(scope="module")
def findings():
    from reload_lint.engine import run_check

    result = run_check([ROOT], Config(contract="vllm-layerwise"), base_dir=ROOT, use_cache=False)
    assert not result.errors
    # (file, target) and (file, line): one target may be stored in several classes of a file
    out = {(f.path.rsplit("/", 1)[-1], f.target): f for f in result.findings}
    out.update({(f.path.rsplit("/", 1)[-1], f.line): f for f in result.findings})
    return out


@pytest.mark.parametrize(
    "site,reader",
    [
        # `self.kernel(x, w)` -> GemmKernel.__call__ -> self._run reads the workspace
        (("held_call.py", "self.kernel.workspace"), f"{PKG}/held_call.py:21 in GemmKernel._run"),
        # `self.experts(y)` on an nn.Module runs its forward
        (
            ("held_call.py", "self.experts.inv_scale"),
            f"{PKG}/held_call.py:33 in ScaledExperts.forward",
        ),
        # `layer.gemm(x, w)`: the class stored on the layer in create_weights
        (("held_call.py", "layer.gemm.workspace"), f"{PKG}/held_call.py:21 in GemmKernel._run"),
        # `CudaOps.matmul(x, layer)`: a static method of a dispatcher class
        (("dispatch.py", "layer.scale_inv"), f"{PKG}/dispatch.py:14 in CudaOps.dequant"),
        # the layer's own forward (the module class that builds the quant method)
        (
            ("layer_forward.py", "layer.weight_t"),
            f"{PKG}/layer_forward.py:33 in RouterLayer.forward",
        ),
        (
            ("layer_forward.py", "layer.kernel.scratch"),
            f"{PKG}/layer_forward.py:15 in RouterKernel.__call__",
        ),
    ],
)
def test_reader_found_through_call_and_dispatcher(findings, site, reader):
    fd = findings[site]
    assert fd.reader == reader
    assert fd.confidence == "high"


@pytest.mark.parametrize("line", [51, 70])
def test_reader_through_a_dispatcher_picked_per_device(findings, line):
    # a module global naming classes (`_OPS = CudaOps if ... else CpuOps`), a local bound to a
    # function returning the class (`ops = pick_ops(...)`)
    fd = findings[("dispatch.py", line)]
    assert fd.reader == f"{PKG}/dispatch.py:10 in CudaOps.matmul"


def test_reader_through_a_local_bound_to_the_held_object(findings):
    fd = findings[("held_call.py", "self.gemm.workspace")]
    assert fd.reader == f"{PKG}/held_call.py:21 in GemmKernel._run"


@pytest.mark.parametrize(
    "target,reset",
    [
        ("layer.ws", "InvalidatedMethod.invalidate sets it back"),
        ("layer.packed", "DeletedFlagMethod.drop_cache deletes it"),
        ("layer.converted", "mark_for_reconversion deletes it"),
        ("layer.swz", "Reloader.before_update sets it back"),
    ],
)
def test_flag_set_back_by_other_code_is_named(findings, target, reset):
    fd = findings[("resets.py", target)]
    assert reset in fd.guard
    assert "runs again on every update" in fd.guard
    assert fd.confidence != "high"  # behind a guard: at most medium


def test_stale_cast_copy(findings):
    fd = findings[("sinks.py", "self.sinks")]
    assert fd.rule == "RL201"
    assert "cast from `self.sinks`" in fd.message
    assert "self.sinks.copy_(source)" in fd.fix
    assert fd.reader == "minirecall/v1/attention/backends/sinks.py:18 in SinksImpl.forward"


def test_copy_made_once_behind_a_test_of_itself_is_stale(findings):
    fd = findings[("sinks.py", "self._scale_f32")]
    assert fd.rule == "RL201" and fd.severity == "warning"
    assert "derived from `scale` once, behind a test of the copy itself" in fd.message
    assert "self._scale_f32.copy_(...)" in fd.fix
    # refreshed in place on every later pass: nothing to report
    assert ("sinks.py", 45) not in findings
