"""vLLM forks repackaged under another distribution name, audited as the `vllm` tree they ship
(issue 26; docs/plugins.md, "A repackaged fork").

- vllm_npu 0.4.2.post2: a wheel whose import folder is `vllm/` (upstream 0.4.2 plus an
  `import vllm_npu`), audited `check vllm --base vllm==0.4.2`. Labels: the end of
  docs/reviews/plugins-round4.md.
- vllm-hust 0.17.2.post1: an sdist only (`vllm_hust-0.17.2.post1/vllm/...`), a vLLM 0.17 fork,
  audited `check vllm` from its root with no base. Labels: docs/reviews/plugins-round5.md,
  "Held-out: vllm-hust". Only the contract and a few labelled real sites are asserted, not the
  total nor the safe findings: the engine's precision work is not frozen here.

Both are downloaded once and cached like the releases (sources.release_sources with `dist=`);
a test skips when the download is unavailable. One audit per package serves every assertion.
"""

from __future__ import annotations

import contextlib
import io
import json
import os

import pytest

from reload_lint.sources import SourceError, release_sources
from tests.unit import _cli_util

pytestmark = pytest.mark.integration


def _sources(package, version, dist=None):
    try:
        return release_sources(package, version, dist=dist)
    except SourceError as exc:  # no network and no cached copy
        pytest.skip(f"{dist or package} {version} unavailable: {exc}")


def _audit(root, *argv):
    """(exit code, findings, stderr) of `reload-lint check ARGV --format json` run in `root`."""
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(root)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = _cli_util.main(["check", *argv, "--format", "json"])
            except SystemExit as exc:
                code = exc.code
    finally:
        os.chdir(cwd)
    return code, json.loads(out.getvalue())["findings"], err.getvalue()


@pytest.fixture(scope="module")
def npu():
    root = _sources("vllm", "0.4.2.post2", dist="vllm_npu")
    _sources("vllm", "0.4.2")
    return root, *_audit(root, "vllm", "--base", "vllm==0.4.2")


@pytest.fixture(scope="module")
def hust():
    root = _sources("vllm", "0.17.2.post1", dist="vllm-hust")
    return root, *_audit(root, "vllm")


def test_npu_wheel_unpacks_its_vllm_tree_and_metadata(npu):
    root = npu[0]
    assert (root / "vllm/model_executor/layers/quantization/fp8.py").is_file()
    assert (root / "vllm_npu-0.4.2.post2.dist-info/METADATA").is_file()
    assert not (root / "vllm_npu").exists()


def test_npu_is_judged_by_load_weights_of_its_own_tree(npu):
    # 0.4.2 has no model_loader/reload/: an update is `model.load_weights`, from this tree's
    # own facts, whatever folder the run starts in (plugins-round4.md, "After the held-out read")
    _, code, found, err = npu
    assert code == 1, err
    assert "contract vllm-load-weights: the audited tree is vLLM's" in err
    assert {f["contract"] for f in found} == {"vllm-load-weights"}
    # nothing moves under this contract
    assert not {f["rule"] for f in found} & {"RL101", "RL102", "RL105"}


def test_npu_reports_the_labelled_sites(npu):
    got = {(f["path"], f["line"]) for f in npu[2]}
    q = "vllm/model_executor/layers/quantization/"
    mixtral = "vllm/model_executor/models/mixtral.py"
    # masked: Parameters bound again without their `weight_loader` (fp8.py:183, :204, :221,
    # mixtral.py:199, :217), and the fp8-serialized in-place shard requantisation (fp8.py:201)
    labelled = {
        (q + "fp8.py", 183),
        (q + "fp8.py", 201),
        (q + "fp8.py", 204),
        (q + "fp8.py", 221),
        (mixtral, 199),
        (mixtral, 217),
    }
    # real: GPTQ's exllama `g_idx` swap on the first forward behind `exllama_state` (gptq.py:211)
    labelled.add((q + "gptq.py", 211))
    assert labelled <= got, sorted(labelled - got)


def test_hust_sdist_unpacks_its_vllm_tree_and_pkg_info(hust):
    root = hust[0]
    assert (root / "vllm/model_executor/model_loader/reload").is_dir()
    meta = (root / "vllm_hust-0.17.2.post1.dist-info/METADATA").read_text()
    assert "Name: vllm-hust" in meta and "Version: 0.17.2.post1" in meta
    assert len(list((root / "vllm").rglob("*.py"))) > 1000


def test_hust_is_its_own_base_under_its_layerwise_reload(hust):
    _, code, found, err = hust
    assert code == 1, err
    assert "contract vllm-layerwise: the audited tree is vLLM's" in err
    assert "note:" not in err  # a vLLM tree is its own base: no base to suggest
    assert {f["contract"] for f in found} == {"vllm-layerwise"}


def test_hust_reports_labelled_real_sites(hust):
    got = {(f["path"], f["line"], f["target"]) for f in hust[2]}
    me = "vllm/model_executor/"
    real = {
        # a new Marlin workspace on the kernel object every post-load (#4)
        (me + "kernels/linear/mixed_precision/marlin.py", 87, "self.workspace"),
        # act-order `g_idx_sort_indices` argsorted afresh, a plain attribute (#5)
        (me + "kernels/linear/mixed_precision/marlin.py", 140, "layer.g_idx_sort_indices"),
        # the ROCm AITER FP4 BMM scale of the deferred MLA layer (#0)
        (me + "layers/attention/mla_attention.py", 744, "self.W_K_scale"),
        # the NVFP4 MoE modular kernel rebuilt every post-load (#7)
        (
            me + "layers/quantization/compressed_tensors/compressed_tensors_moe.py",
            572,
            "self.moe_kernel",
        ),
        # dense FP8 Marlin workspace (#9)
        (me + "layers/quantization/utils/marlin_utils_fp8.py", 118, "layer.workspace"),
    }
    assert real <= got, sorted(real - got)
