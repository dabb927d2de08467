"""The layer's class for the reader search, read from the post-load root's own apply/forward
entries: a post-load typed only `torch.nn.Module` (or not at all) whose class's `apply(layer:
SomeLayer, ...)` names the layer. The same object's post-load and apply are handed the layer
that holds it, so the entry's annotation is the layer the store lands on: the search over that
layer can be complete. A read on that layer's captured path still keeps the finding."""

from __future__ import annotations

import json

from _engine_util import check_files, write_files

from reload_lint.cli import main

LAYER = """
import torch


class ExpertsLayer(torch.nn.Module):
    def forward(self, x):
        return self.quant_method.apply(self, x)
"""

READING_LAYER = """
import torch


class ScratchLayer(torch.nn.Module):
    def forward(self, x):
        return self.quant_method.apply(self, x) + self.scratch.sum()
"""

METHODS = """
import torch

from pkg.layer import ExpertsLayer
from pkg.reading import ScratchLayer


def new_scratch(device):
    return torch.zeros(128, device=device)


class GenericModuleMethod:
    # post-load typed only as a Module, apply typed with the layer class
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.scratch = new_scratch(layer.w1.device)

    def apply(self, layer: ExpertsLayer, x):
        return grouped_gemm(x, layer.w1)


class ReadByApplyMethod:
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.scratch = new_scratch(layer.w1.device)

    def apply(self, layer: ExpertsLayer, x):
        return grouped_gemm(x, layer.w1, scratch=layer.scratch)


class ReadByLayerMethod:
    # nothing in the method reads it, but the layer's own forward does
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.scratch = new_scratch(layer.w1.device)

    def apply(self, layer: ScratchLayer, x):
        return grouped_gemm(x, layer.w1)


class BaseMethod:
    def apply(self, layer: ExpertsLayer, x):
        return self.run(layer, x)

    def run(self, layer, x):
        return grouped_gemm(x, layer.w1)


class InheritedApplyMethod(BaseMethod):
    # the entry is inherited: its annotation still names the layer
    def process_weights_after_loading(self, layer) -> None:
        layer.scratch = new_scratch(layer.w1.device)


class UnnamedLayerMethod:
    # neither post-load nor apply names the layer's class: the search cannot be complete
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.scratch = new_scratch(layer.w1.device)

    def apply(self, layer: torch.nn.Module, x):
        return grouped_gemm(x, layer.w1)
"""


def _scratch(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/layer.py": LAYER,
        "pkg/reading.py": READING_LAYER,
        "pkg/methods.py": METHODS,
    }
    res = check_files(tmp_path, files)
    return {f.symbol.split(".")[0]: f for f in res.findings if f.target == "layer.scratch"}


def test_the_apply_entrys_layer_type_completes_the_reader_search(tmp_path):
    found = _scratch(tmp_path)
    # typed through apply (own or inherited), read by nothing on the layer's captured path
    assert "GenericModuleMethod" not in found
    assert "InheritedApplyMethod" not in found
    # the same shape with a read stays reported, with the reader
    assert found["ReadByApplyMethod"].rule == "RL101"
    assert "ReadByApplyMethod.apply" in found["ReadByApplyMethod"].reader
    # the layer class named by apply reads it in its forward: reported, with that reader
    assert "ScratchLayer.forward" in found["ReadByLayerMethod"].reader
    # no class named anywhere: the search is incomplete, the finding stays one step less sure
    kept = found["UnnamedLayerMethod"]
    assert kept.reader is None and kept.confidence == "medium"


def test_explain_names_the_layer_the_unread_decision_searched(tmp_path, monkeypatch, capsys):
    """`explain` on a store decided unread says which layer's forward it searched as well."""
    write_files(
        tmp_path,
        {
            "pyproject.toml": '[project]\nname = "pkg"\n',
            "pkg/__init__.py": "",
            "pkg/layer.py": LAYER,
            "pkg/reading.py": READING_LAYER,
            "pkg/methods.py": METHODS,
        },
    )
    monkeypatch.chdir(tmp_path)
    lines = (tmp_path / "pkg/methods.py").read_text().splitlines()
    stores = [i for i, s in enumerate(lines, 1) if "layer.scratch = new_scratch" in s]
    capsys.readouterr()
    # the first store is GenericModuleMethod's (unread), the third ReadByLayerMethod's
    specs = [f"pkg/methods.py:{stores[0]}", f"pkg/methods.py:{stores[2]}"]
    rc = main(["explain", "--no-cache", "--format", "json", *specs])
    out, err = capsys.readouterr()
    assert rc == 0, err
    unread, read = (a["decisions"][0] for a in json.loads(out)["explain"])
    assert unread["status"] == "decided-safe", unread
    assert "never read `scratch`" in unread["why"], unread
    assert "nor does the layer that holds it (ExpertsLayer)" in unread["why"], unread
    assert read["status"] == "reported" and "ScratchLayer.forward" in read["reader"], read
