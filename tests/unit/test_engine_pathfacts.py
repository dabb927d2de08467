"""Path facts (reload_lint/analysis/pathfacts.py): the `guard` text of a store behind a flag
the reload resets, configured and built-in scopes, the `masked` text of a root that breaks
the next load. The drop/keep decisions themselves are pinned by tests/fixtures/minifacts."""

from __future__ import annotations

from pathlib import Path

import pytest
from _engine_util import check_files

from reload_lint.config import Config, ConfigError, PerPath, parse_table


def _run(tmp_path: Path, files: dict[str, str], cfg: Config):
    return check_files(tmp_path, files, config=cfg)


def _by_target(result) -> dict[str, object]:
    return {f.target: f for f in result.findings}


RESET = """
import torch

class M:
    def process_weights_after_loading(self, layer):
        if getattr(layer, "_already_called_process_weights_after_loading", False):
            return
        layer.ws = torch.zeros(8)
        layer._already_called_process_weights_after_loading = True
"""


def test_guard_the_reload_resets_is_named_in_the_finding(tmp_path):
    result = _run(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/m.py": RESET},
        Config(contract="vllm-layerwise"),
    )
    fd = _by_target(result)["layer.ws"]
    assert "_already_called_process_weights_after_loading" in fd.guard
    assert "layerwise reload deletes" in fd.guard
    assert "pkg/m.py:6" in fd.guard  # where the guard is tested
    # SGLang resets nothing of the kind: the store runs once, no finding
    result = _run(tmp_path, {}, Config(contract="inplace-only"))
    assert "layer.ws" not in _by_target(result)


CPU = """
import torch

class CpuKernel:
    def process_weights_after_loading(self, layer):
        layer.packed = torch.zeros(4)

def helper(layer):
    layer.scratch = torch.zeros(4)

class GpuKernel:
    def process_weights_after_loading(self, layer):
        helper(layer)
"""


def test_per_path_cuda_graphs_false_scopes_every_store_reached_there(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/cpu_kernel.py": CPU, "pkg/gpu.py": CPU}
    plain = _run(tmp_path, files, Config(contract="vllm-layerwise"))
    assert {(f.path, f.target) for f in plain.findings} >= {
        ("pkg/cpu_kernel.py", "layer.packed"),
        ("pkg/gpu.py", "layer.packed"),
    }
    cfg = Config(
        contract="vllm-layerwise", per_path=[PerPath("pkg/cpu_kernel.py", cuda_graphs=False)]
    )
    scoped = _run(tmp_path, {}, cfg)
    got = {(f.path, f.target) for f in scoped.findings}
    assert ("pkg/cpu_kernel.py", "layer.packed") not in got
    assert ("pkg/cpu_kernel.py", "layer.scratch") not in got
    assert ("pkg/gpu.py", "layer.packed") in got and ("pkg/gpu.py", "layer.scratch") in got


def test_per_path_update_reruns_false(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/offline/convert.py": CPU}
    cfg = Config(contract="inplace-only", per_path=[PerPath("offline", update_reruns=False)])
    assert not _run(tmp_path, files, cfg).findings
    assert _run(tmp_path, {}, Config(contract="inplace-only")).findings


def test_builtin_scope_diffusion_runtime_and_cpu_backend(tmp_path):
    files = {
        "sglang/__init__.py": "",
        "sglang/multimodal_gen/runtime/q.py": CPU,
        "sglang/srt/layers/q.py": CPU,
        "vllm/__init__.py": "",
        "vllm/model_executor/kernels/linear/scaled_mm/cpu.py": CPU,
    }
    result = _run(tmp_path, files, Config(contract="inplace-only"))
    paths = {f.path for f in result.findings}
    assert paths == {"sglang/srt/layers/q.py"}


def test_per_path_keys_parse_and_reject_non_booleans():
    cfg = parse_table({"per-path": {"cpu/*": {"cuda-graphs": False}}}, "t")
    assert cfg.per_path[0].cuda_graphs is False
    with pytest.raises(ConfigError, match="update-reruns"):
        parse_table({"per-path": {"x": {"update-reruns": "no"}}}, "t")


MASKED = """
import torch
from torch.nn import Parameter

class Rebind:
    def create_weights(self, layer):
        layer.register_parameter("w13_weight", Parameter(torch.empty(4, 8)))
        layer.register_parameter("w2_weight", Parameter(torch.empty(4, 8)))
        layer.register_parameter("scale", Parameter(torch.empty(4)))

    def process_weights_after_loading(self, layer):
        layer.w13_weight = Parameter(layer.w13_weight.data.t().contiguous(), requires_grad=False)
        layer.ws = torch.zeros(8)

class Reloads:
    def create_weights(self, layer):
        layer.register_parameter("w2_weight", Parameter(torch.empty(4, 8)))

    def process_weights_after_loading(self, layer):
        layer.w2_weight = Parameter(layer.w2_weight.data.t().contiguous(), requires_grad=False)
        layer.w2_weight.weight_loader = None
        layer.ws2 = torch.zeros(8)

class Deletes:
    def process_weights_after_loading(self, layer):
        layer.ws3 = torch.zeros(8) * layer.scale
        del layer.scale
"""


def test_masked_roots_under_inplace_only(tmp_path):
    files = {"pkg/__init__.py": "", "pkg/m.py": MASKED}
    got = _by_target(_run(tmp_path, files, Config(contract="inplace-only")))
    assert "`w13_weight` is re-bound without a weight_loader" in got["layer.w13_weight"].masked
    assert got["layer.ws"].masked == got["layer.w13_weight"].masked  # the whole root
    assert getattr(got["layer.ws2"], "masked", None) is None  # the new Parameter gets a loader
    assert "deletes the checkpoint Parameter `scale`" in got["layer.ws3"].masked
    # vLLM's layerwise reload re-registers the recorded checkpoint Parameters: never masked
    got = _by_target(_run(tmp_path, {}, Config(contract="vllm-layerwise")))
    assert getattr(got["layer.ws"], "masked", None) is None


PLAIN_OVER_DELETED = """
import torch
from torch.nn import Parameter

def swizzle(layer):
    w = layer.w13_weight.data * 2
    del layer.w13_weight
    return w

class Triton:
    def create_weights(self, layer):
        layer.register_parameter("w13_weight", Parameter(torch.empty(4, 8)))

    def process_weights_after_loading(self, layer):
        if self.use_triton:
            w = swizzle(layer)
            layer.w13_weight = w
            layer.ws = torch.zeros(8)
        self.kernel_ws = torch.zeros(8)

class Keeps:
    def create_weights(self, layer):
        layer.register_parameter("w2_weight", Parameter(torch.empty(4, 8)))

    def process_weights_after_loading(self, layer):
        layer.ws2 = layer.w2_weight * 2
"""


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RELOAD = "vllm/model_executor/model_loader/reload"


def _reload_module(release: str) -> dict[str, str]:
    """The reload files of the fixture shaped like that release's (tests/fixtures/minireload*)."""
    root = FIXTURES / f"minireload{release}"
    return {
        f"{RELOAD}/{name}": (root / RELOAD / name).read_text(encoding="utf-8")
        for name in ("layerwise.py", "meta.py")
    }


def test_masked_under_vllm_when_a_plain_tensor_is_left_over_a_deleted_parameter(tmp_path):
    # a reload shaped like 0.25.1's re-registers the recorded Parameter over the plain tensor:
    # `register_parameter` raises "already exists", the reload fails before any graph replays
    files = {"pkg/__init__.py": "", "pkg/m.py": PLAIN_OVER_DELETED, **_reload_module("025")}
    got = _by_target(_run(tmp_path, files, Config(contract="vllm-layerwise")))
    why = got["layer.ws"].masked
    assert "deletes the checkpoint Parameter `w13_weight`" in why
    assert "register_parameter refuses" in why
    assert f"{RELOAD}/meta.py:" in why  # the restore loop it read
    assert got["layer.w13_weight"].masked == why
    assert got["layer.ws2"].masked is None
    # stored on every path, also where nothing is deleted: the store is what moves there
    assert got["self.kernel_ws"].masked is None


@pytest.mark.parametrize("release", ["033", None])
def test_not_masked_where_the_restore_deletes_plain_attributes_first(tmp_path, release):
    # 0.33.0's restore deletes plain attributes under recorded names before re-registering:
    # the reload finishes and the graph reads freed memory, so nothing is masked. A tree
    # without a reload module (an out-of-tree package) gets the newest release's facts.
    files = {"pkg/__init__.py": "", "pkg/m.py": PLAIN_OVER_DELETED}
    if release:
        files.update(_reload_module(release))
    got = _by_target(_run(tmp_path, files, Config(contract="vllm-layerwise")))
    assert {"layer.ws", "layer.w13_weight", "self.kernel_ws"} <= set(got)
    assert all(fd.masked is None for fd in got.values())


SHARED_DELETING_HELPER = """
import torch
from torch.nn import Parameter

def swizzle(layer, w):
    out = w * 2
    del layer.w13_weight
    return out

class A:
    def create_weights(self, layer):
        layer.register_parameter("w13_weight", Parameter(torch.empty(4, 8)))

    def process_weights_after_loading(self, layer):
        w = swizzle(layer, layer.w13_weight)
        layer.w13_weight = w
        self.a_ws = torch.zeros(8)

class B:
    def process_weights_after_loading(self, layer):
        w = swizzle(layer, layer.w13_weight)
        if self.triton:
            layer.w13_weight = w
            self.b_ws = torch.zeros(8)
        self.b_other = torch.zeros(8)
"""


def test_masked_sees_deletions_in_a_helper_another_root_analysed_first(tmp_path):
    # both roots call swizzle with the same argument shapes: the second one reuses the first
    # one's summary, and the deletion it makes is part of that summary (B leaves the plain
    # tensor in its `if` block: B's store outside the block is not masked)
    files = {"pkg/__init__.py": "", "pkg/m.py": SHARED_DELETING_HELPER, **_reload_module("025")}
    got = _by_target(_run(tmp_path, files, Config(contract="vllm-layerwise")))
    assert "deletes the checkpoint Parameter `w13_weight`" in got["self.a_ws"].masked
    assert "deletes the checkpoint Parameter `w13_weight`" in got["self.b_ws"].masked
    assert got["self.b_other"].masked is None
