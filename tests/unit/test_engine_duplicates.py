"""Two copies of a package with the same module names (`a/pkg`, `b/pkg`): each copy is
analysed against its own modules, whether the run names both folders or one file of the second.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from reload_lint.cli import main
from reload_lint.config import Config
from reload_lint.engine import run_check

METHOD = """
import torch

from pkg.helpers import make


class Method:
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.buf = make(layer)
        layer.{name} = torch.zeros(8)

    def apply(self, layer, x):
        return x + layer.buf + layer.{name}
"""
# a's helper returns a registered tensor (no finding), b's allocates (a finding in b only)
HELPERS = {
    "a": "def make(layer):\n    return layer.weight\n",
    "b": "import torch\n\n\ndef make(layer):\n    return torch.ones(4)\n",
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for copy, attr in (("a", "ws_a"), ("b", "ws_b")):
        pkg = tmp_path / copy / "pkg"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "x.py").write_text(textwrap.dedent(METHOD.format(name=attr)).lstrip())
        (pkg / "helpers.py").write_text(HELPERS[copy])
    return tmp_path


def _found(findings) -> set[tuple[str, str, str]]:
    return {(f.path, f.rule, f.target) for f in findings}


B_FINDINGS = {("b/pkg/x.py", "RL101", "layer.ws_b"), ("b/pkg/x.py", "RL101", "layer.buf")}


def test_both_copies_are_analysed_each_with_its_own_modules(tree: Path):
    result = run_check(
        [tree / "a", tree / "b"], Config(contract="vllm-layerwise"), base_dir=tree, use_cache=False
    )
    assert not result.errors
    assert _found(result.findings) == {("a/pkg/x.py", "RL101", "layer.ws_a"), *B_FINDINGS}


def test_a_file_of_the_second_copy_named_alone(tree: Path, capsys, monkeypatch):
    monkeypatch.chdir(tree)
    code = main(["check", "b/pkg/x.py", "--format", "json", "--no-cache"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert {(f["path"], f["rule"], f["target"]) for f in out["findings"]} == B_FINDINGS
