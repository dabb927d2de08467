"""The layer's own forward, followed through the objects it builds and the methods it dispatches
to: a runner built by a factory method (`self.runner = self._init_runner()`, `return
Runner(self)`), and a forward bound at construction (`self._forward_method =
self.dispatch_forward()`, returning `self.forward_cuda` or a wrapped `self.forward_native`).
With both followed, a workspace the quant method stores on the layer that nothing on those
paths reads is decided unread (a dead store), and one the dispatched method reads is kept."""

from __future__ import annotations

from _engine_util import check_files

LAYER = """
import torch


def on_cuda():
    return torch.cuda.is_available()


class Runner:
    def __init__(self, layer):
        self.layer = layer

    def forward(self, x):
        return self.layer.quant_method.apply(self.layer, x)


class CustomOp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._forward_method = self.dispatch_forward()

    def forward(self, *args):
        return self._forward_method(*args)

    def maybe_compile(self, fn):
        return torch.compile(fn)

    def dispatch_forward(self):
        if on_cuda():
            return self.{cuda}
        return self.maybe_compile(self.forward_native)


class PluginMoE(CustomOp):
    def __init__(self, quant_method):
        super().__init__()
        self.quant_method = quant_method
        self.runner = self._init_runner()

    def _init_runner(self):
        return Runner(self)

    def forward_native(self, x):
        return self.runner.forward(x)

    def forward_cuda(self, x):
        return self.runner.forward(x)

    def _fast_path(self, x):
        return torch.ops.plugin.fast_moe(x, self.w13, {fast})
"""

QUANT = """
import torch
from torch.nn import Parameter

from pkg.layer import PluginMoE


class PluginMoEMethod:
    def create_weights(self, layer: PluginMoE, e, n, k):
        layer.register_parameter("w13", Parameter(torch.empty(e, n, k), requires_grad=False))

    def process_weights_after_loading(self, layer: PluginMoE):
        layer.workspace = torch.zeros(1024, dtype=torch.int32, device=layer.w13.device)

    def apply(self, layer: PluginMoE, x):
        return torch.ops.plugin.moe(x, layer.w13)
"""


DENSE = """
import torch


class PluginDenseMethod:
    def apply(self, layer, x):
        return torch.ops.plugin.gemm(x, layer.weight, layer.workspace)
"""


def _run(tmp_path, cuda):
    files = {
        "pkg/__init__.py": "",
        "pkg/layer.py": LAYER.replace("{cuda}", cuda).replace(
            "{fast}", "self.workspace" if cuda == "_fast_path" else "None"
        ),
        "pkg/quant.py": QUANT,
        # a dense method of another class reads a `workspace` of its own layers: the name is
        # read in the tree, so only the reader search can decide the MoE store
        "pkg/dense.py": DENSE,
    }
    return check_files(tmp_path, files)


def test_a_workspace_no_dispatched_forward_reads_is_not_reported(tmp_path):
    res = _run(tmp_path, "forward_cuda")
    assert not [f for f in res.findings if f.target == "layer.workspace"]


def test_a_workspace_the_dispatched_forward_reads_is_reported(tmp_path):
    res = _run(tmp_path, "_fast_path")
    got = [f for f in res.findings if f.target == "layer.workspace"]
    assert got and got[0].rule == "RL101"
