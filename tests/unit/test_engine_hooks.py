"""Post-load hooks that take no argument (analysis/hooks.py): dropped where the tree's reload
calls post-load only with an argument and nothing it runs calls the hook; kept where the
reload calls one with none, where a call the engine cannot resolve may reach it, and where a
root's analysis broke off. The fixtures minireload025/033 (layers/hooks.py) pin the shapes
under both reload shapes; tests/integration/test_vllm_reload_facts.py pins the releases."""

from __future__ import annotations

import shutil
from pathlib import Path

from _engine_util import check_files

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
LAYERWISE = "vllm/model_executor/model_loader/reload/layerwise.py"

MODEL = """
import torch
from torch import nn

class Decoder(nn.Module):
    pass

class DraftForCausalLM(nn.Module):
    def process_weights_after_loading(self):
        self.scales = torch.ones(2)
"""

RERUN = """
class Method:
    def process_weights_after_loading(self, layer):
        for sub in layer.children():
            sub.process_weights_after_loading()
"""


def _targets(result) -> set[str]:
    return {f.target for f in result.findings}


def _tree(tmp_path: Path, reload_call: str, extra: dict[str, str]):
    root = tmp_path / "tree"
    shutil.copytree(FIXTURES / "minireload033", root)
    lw = root / LAYERWISE
    lw.write_text(
        lw.read_text(encoding="utf-8").replace(
            "layer.process_weights_after_loading(None)", reload_call
        ),
        encoding="utf-8",
    )
    return root, {"vllm/model_executor/layers/model.py": MODEL, **extra}


def _check(tmp_path, reload_call, extra=None):
    root, files = _tree(tmp_path, reload_call, extra or {})
    return check_files(root, files, contract="vllm-layerwise")


def test_model_level_hook_is_first_load_only_where_the_reload_passes_arguments(tmp_path):
    got = _targets(_check(tmp_path, "layer.process_weights_after_loading(None)"))
    assert "self.scales" not in got
    assert "self.k_inv" in got  # the deferred layer's own post-load still re-runs


def test_a_reload_calling_a_hook_with_no_argument_re_runs_them_all(tmp_path):
    got = _targets(_check(tmp_path, "layer.process_weights_after_loading()"))
    assert "self.scales" in got


def test_an_unresolved_call_from_post_load_the_reload_runs_keeps_them(tmp_path):
    got = _targets(
        _check(
            tmp_path,
            "layer.process_weights_after_loading(None)",
            {"vllm/model_executor/layers/method.py": RERUN},
        )
    )
    assert "self.scales" in got
