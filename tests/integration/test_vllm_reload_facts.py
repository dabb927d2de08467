"""The reload contract follows the audited tree's reload code: the facts read from vLLM 0.25.1
and 0.33.0 (analysis/reloadfacts.py) and the findings that depend on them, on the real sources.

Each fact is checked against the file:line it was read from, and each finding against the
release where the fact makes it an escape (or masks it) and the one where it does not. The
runs are the seed tests' (one analysis per release, shared through `_run`).
"""

from __future__ import annotations

import pytest
from test_vllm_seeds import _run

from reload_lint.analysis import reloadfacts
from reload_lint.discover import SourceFile

pytestmark = pytest.mark.integration

RELOAD = "vllm/model_executor/model_loader/reload"
Q = "vllm/model_executor/layers/quantization"
B12X_EXPERTS = "vllm/model_executor/layers/fused_moe/experts/flashinfer_b12x_moe.py"


def _facts(version: str) -> reloadfacts.ReloadFacts:
    root, _ = _run(version)
    files = []
    for sub in (RELOAD, "vllm/model_executor/layers/attention"):
        for p in sorted((root / sub).glob("*.py")):
            rel = p.relative_to(root).as_posix()
            mod = rel[:-3].replace("/", ".").removesuffix(".__init__")
            files.append(SourceFile(path=p, rel=rel, module=mod))
    return reloadfacts.detect(files)


def _line_of(version: str, at: str) -> str:
    root, _ = _run(version)
    path, _, line = at.split(" ")[0].rpartition(":")
    return (root / path).read_text().splitlines()[int(line) - 1]


@pytest.mark.parametrize(
    "version, copied, deferred, deletes_plain",
    [
        ("0.25.1", True, ("Attention", "MLAAttention"), False),
        ("0.33.0", False, ("AttentionLayerBase", "MMEncoderAttention"), True),
    ],
)
def test_facts_read_from_the_release(version, copied, deferred, deletes_plain):
    f = _facts(version)
    assert f.origin == f"tree: {RELOAD}"
    assert f.nonpersistent_copied is copied
    assert f.deferred_bases == deferred
    assert f.restore_deletes_plain is deletes_plain
    assert f.none_buffer_breaks is True  # both releases (tests/fixtures/minireload*)
    # post-load hooks are called with an argument only (a model-level hook is not re-run)
    assert f.hooks_take_args is True
    assert "process_weights_after_loading(" in _line_of(version, f.hooks_at.split(",")[0])
    # each citation is the statement the fact was read from
    if copied:
        assert "for name, buffer in buffers.items()" in _line_of(version, f.nonpersistent_at)
    else:
        assert "non_persistent" in _line_of(version, f.nonpersistent_at)
    assert "isinstance" in _line_of(version, f.deferred_at) or "def is_deferred" in _line_of(
        version, f.deferred_at
    )
    assert "for name in" in _line_of(version, f.restore_at)
    assert f.restore_at.startswith(f"{RELOAD}/meta.py:")
    # the newest release's facts are the default for trees without a reload module
    if version == "0.33.0":
        keep = (
            "nonpersistent_copied",
            "deferred_bases",
            "restore_deletes_plain",
            "hooks_take_args",
        )
        assert all(getattr(f, k) == getattr(reloadfacts.NEWEST, k) for k in keep)


def _by(version: str, path: str, target: str):
    _, result = _run(version)
    return [f for f in result.findings if f.path == path and f.target == target]


def test_plain_tensor_over_deleted_parameter_masked_on_0251_only():
    # 0.25.1: the restore's register_parameter refuses the plain tensor (KeyError); 0.33.0
    # deletes it first, the reload finishes and the graph reads freed memory
    for version, masked in (("0.25.1", True), ("0.33.0", False)):
        hits = _by(version, f"{Q}/mxfp4.py", "layer.w13_weight")
        assert hits, version
        assert all(bool(f.masked) is masked for f in hits), [(f.line, f.masked) for f in hits]
        if masked:
            assert all(f"{RELOAD}/meta.py:" in f.masked for f in hits)


@pytest.mark.parametrize(
    "target", ["layer._nvfp4_weight_for_gather", "layer._nvfp4_weight_scale_for_gather"]
)
def test_nonpersistent_weight_copy_is_stale_on_0330(target):
    hits = _by("0.33.0", f"{Q}/modelopt.py", target)
    assert [f.rule for f in hits] == ["RL201"]
    assert "non-persistent" in hits[0].message


def test_buffer_in_a_deferred_attention_post_load_moves_on_0330():
    # a KimiK3-style MLA layer (an AttentionLayerBase, not Attention/MLAAttention) registers
    # reciprocal scales in its own post-load: deferred on 0.33.0, so nothing copies them back
    hits = _by("0.33.0", "vllm/models/kimi_k3/nvidia/mla.py", "self._q_scale_inv")
    assert [f.rule for f in hits] == ["RL109"]
    assert "deferred" in hits[0].message


def test_none_buffer_filled_by_assignment_breaks_the_reload():
    hits = _by(
        "0.33.0",
        "vllm/model_executor/layers/fused_moe/router/gate_linear.py",
        "layer._bf16x3_weight",
    )
    assert [f.rule for f in hits] == ["RL101"]
    assert "registered as a None buffer" in hits[0].masked


# ---------------------------------------------------------------- one storage, one finding
def _folded(version: str):
    import copy

    from reload_lint.fold import fold_shared_storage

    _, result = _run(version)
    return fold_shared_storage(copy.deepcopy(result.findings))


@pytest.mark.parametrize(
    "version, method, config_line",
    [
        ("0.25.1", "compressed_tensors_moe_w4a4_nvfp4.py", 233),
        ("0.33.0", "compressed_tensors_moe_w4a4_nvfp4.py", 268),
    ],
)
def test_quant_config_folded_into_the_kernel_that_holds_it(version, method, config_line):
    out = _folded(version)
    path = f"{Q}/compressed_tensors/compressed_tensors_moe/{method}"
    assert not [f for f in out if f.path == path and f.target == "self.moe_quant_config"]
    kernel = [f for f in out if f.path == path and f.target == "self.moe_kernel"]
    assert len(kernel) == 1
    also = {(a["target"], a["line"]) for a in kernel[0].also}
    assert ("self.moe_quant_config", config_line) in also
    # the B12x experts bind the config's 1 / a2_scale under their own name: the same storage
    assert any(a["target"] == "self._fc2_input_scale" for a in kernel[0].also)


@pytest.mark.parametrize(
    "version, method, kernel_line, folded",
    [
        (
            "0.33.0",
            "compressed_tensors_moe_w4a4_nvfp4.py",
            270,
            {("layer.w13_input_scale", 264), ("layer.w2_input_scale", 265)},
        ),
        ("0.33.0", "compressed_tensors_moe_w4a8_fp8.py", 187, {("self.b_strides1", 155)}),
        (
            "0.25.1",
            "compressed_tensors_moe_w4a4_nvfp4.py",
            235,
            {("layer.w13_input_scale", 229), ("layer.w13_weight_scale_2", 227)},
        ),
    ],
)
def test_tensors_built_into_the_kernel_fold_into_it(version, method, kernel_line, folded):
    # kept by the post-load, read by no forward, read again to build the quant config or the
    # experts of the kernel: reported once, under the kernel
    out = _folded(version)
    path = f"{Q}/compressed_tensors/compressed_tensors_moe/{method}"
    assert not [f for f in out if f.path == path and (f.target, f.line) in folded]
    kernel = [f for f in out if f.path == path and f.line == kernel_line]
    assert len(kernel) == 1 and kernel[0].target == "self.moe_kernel"
    assert folded <= {(a["target"], a["line"]) for a in kernel[0].also}


@pytest.mark.parametrize("version, line", [("0.25.1", 131), ("0.33.0", 132)])
def test_experts_post_load_allocation_folds_into_the_kernel_that_picks_them(version, line):
    # FlashInferB12xExperts' own post-load allocates `_fc2_input_scale` (W4A16 branch); the
    # experts are an oracle pick of the NVFP4 kernel, rebuilt with it
    out = _folded(version)
    assert not [f for f in out if f.path == B12X_EXPERTS and f.line == line]
    hosts = [f for f in out if any(a["path"] == B12X_EXPERTS and a["line"] == line for a in f.also)]
    assert len(hosts) == 1 and hosts[0].rule == "RL105"


@pytest.mark.parametrize("version", ["0.25.1", "0.33.0"])
def test_two_weights_through_one_helper_stay_two_findings(version):
    # identical traces, two storages (`layer.w13_weight` and `layer.w2_weight` repacked by
    # the same helper): nothing in a trace tells them from one tensor under two names
    out = _folded(version)
    targets = {f.target for f in out if f.path == f"{Q}/mxfp4.py"}
    assert {"layer.w13_weight", "layer.w2_weight"} <= targets


def test_model_level_hook_stores_are_first_load_only_on_0330():
    # K3DSparkForCausalLM.process_weights_after_loading() (no argument) is the model-level
    # hook the 0.33.0 loader runs after the first load; the reload calls post-load only with
    # an argument, and no post-load it runs calls this hook
    _, result = _run("0.33.0")
    path = "vllm/models/kimi_k3/nvidia/dspark_mla.py"
    assert not [f for f in result.findings if f.path == path]


# ---------------------------------------------------------------- reuse and first-load facts
def test_reload_enters_no_first_load_context():
    for version in ("0.25.1", "0.33.0"):
        f = _facts(version)
        assert "CopyCounter" in f.entered_contexts
        assert "weights_already_processed" not in f.entered_contexts


def test_b12x_prepare_inputs_and_the_pre_processed_kernel_are_not_escapes_on_0_33():
    """Issue 17, classes 2 and 3: B12x's quant-config scales and unit-scale cache only feed
    `_prepare_experts`, whose result `_reuse_prepared_storage` copies into the first load's
    storage; the unquantized MoE kernel is built behind `if not is_weight_update` or inside
    the weight-cache loader's `weights_already_processed()` first load."""
    b12x = "vllm/model_executor/layers/fused_moe/b12x.py"
    for target in (
        "self._unit_scales[device]",
        "self.quant_config._w1.scale",
        "self.quant_config._w2.scale",
        "self.quant_config._a1.alpha_or_gscale",
        "self.quant_config._a2.alpha_or_gscale",
    ):
        assert not _by("0.33.0", b12x, target), target
    moe = "vllm/model_executor/layers/fused_moe/unquantized_fused_moe_method.py"
    assert not [f for f in _by("0.33.0", moe, "self.moe_kernel") if f.line == 205]
