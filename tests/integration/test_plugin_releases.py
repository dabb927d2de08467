"""Out-of-tree packages from PyPI audited against the vLLM they run on (issue 26).

The wheels are downloaded once and cached like the releases (sources.py). Figures and
labels: docs/reviews/plugins-baseline.md and the per-package pages; docs/plugins.md.
"""

from __future__ import annotations

import json

import pytest

from reload_lint.sources import SourceError, release_sources
from tests.unit._cli_util import run_cli

pytestmark = pytest.mark.integration


def _sources(package, version, dist=None):
    try:
        return release_sources(package, version, dist=dist)
    except SourceError as exc:  # no network and no cached copy
        pytest.skip(f"{dist or package} {version} unavailable: {exc}")


def test_kunlun_on_vllm_0_11_is_judged_by_load_weights(monkeypatch, capsys):
    # vLLM 0.11.1 has no model_loader/reload/: an update is `model.load_weights`, which never
    # re-runs post-load. The MLA impl's absorbed copies are derived once: stale, not moved.
    root = _sources("vllm_kunlun", "0.11.1", dist="vllm-kunlun")
    _sources("vllm", "0.11.1")
    monkeypatch.chdir(root)
    code, out, err = run_cli(
        capsys, "check", "vllm_kunlun", "--base", "vllm==0.11.1", "--format", "json"
    )
    assert code == 1, err
    found = json.loads(out)["findings"]
    assert found and {f["contract"] for f in found} == {"vllm-load-weights"}
    # nothing moves there: stale copies (RL201) and undone transforms (RL203) only
    assert {f["rule"] for f in found} == {"RL201", "RL203"}
    mla = "vllm_kunlun/v1/attention/backends/mla/common.py"
    got = {(f["path"], f["target"]) for f in found}
    # the int8 path's transposed / contiguous copies (common.py:1406, :1410-1411)
    assert {(mla, "self.W_UK_T"), (mla, "self.W_UV"), (mla, "self.W_UV_SCALE")} <= got
    # the in-place `mul_(127.0)` of the int8 MoE scales, undone by the next load
    moe = "vllm_kunlun/ops/quantization/compressed_tensors/compressed_tensors_moe.py"
    assert (moe, "layer.w13_weight_scale") in got
    assert "contract vllm-load-weights" in err
    # without the base the package is audited under the newest layerwise facts, and says so
    code, out, err = run_cli(capsys, "check", "vllm_kunlun", "--format", "json")
    assert "note:" in err and "--base" in err


def test_ascend_follows_its_worker_layerwise_reload(monkeypatch, capsys):
    # the package patches vLLM's first-load driver (a loop re-running post-load, once) and its
    # worker runs vLLM's layerwise reload: the contract is layerwise, not inplace-only
    root = _sources("vllm_ascend", "0.23.0", dist="vllm-ascend")
    _sources("vllm", "0.23.0")
    monkeypatch.chdir(root)
    code, out, err = run_cli(
        capsys, "check", "vllm_ascend", "--base", "vllm==0.23.0", "--format", "json"
    )
    assert code == 1, err
    found = json.loads(out)["findings"]
    assert {f["contract"] for f in found} == {"vllm-layerwise"}
    assert "vllm_ascend/worker/worker.py:" in err
    # registered-Parameter rebinds are copied back under layerwise: no RL109 there
    assert not [f for f in found if f["rule"] == "RL109"]
    got = {(f["path"], f["target"]) for f in found}
    sfa, mla = "vllm_ascend/attention/sfa_v1.py", "vllm_ascend/attention/mla_v1.py"
    # `self.o_proj.weight.detach()` is a view of the projection's registered weight, whatever
    # class the impl was handed (sfa_v1.py:1112): no new storage
    assert (sfa, "self.o_proj_tp_weight") not in got
    # a reshape of a transposed view copies (mla_v1.py:1095-1096) and the W8A8SC scales are
    # new plain attributes every pass (w8a8sc.py:96-98): still reported
    assert (mla, "self.weight_uq_qr_scale") in got
    assert ("vllm_ascend/_310p/quantization/methods/w8a8sc.py", "layer.aclnn_input_offset") in got
    # `.data =` swaps to shapes made from the checkpoint's (a reshape to groups, a TP slice):
    # copy-back writes each pass's result into the first pass's storage (fp8.py:70,
    # w4a4_mxfp4_flatquant.py:168)
    assert not [f for f in found if f["rule"] == "RL106"]
