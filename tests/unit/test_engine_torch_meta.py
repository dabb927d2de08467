"""torch callables that return no tensor (summaries/torchapi.py TORCH_NON_TENSOR): a post-load
store of `torch.Size(...)` (host metadata) or `torch.compile(fn)` (a callable that reads the
module's tensors when it runs) is not new storage, under either contract; a derived tensor
next to them still is."""

from __future__ import annotations

import pytest
from _engine_util import check_files

QUANT = """
import torch
from quantlib import QuantLinear


class OnTheFlyMethod:
    def create_weights(self, layer, n, k):
        # the checkpoint stores the original shape as a tensor
        shape = torch.nn.Parameter(torch.empty(2, dtype=torch.int32), requires_grad=False)
        layer.register_parameter("shape", shape)

    def process_weights_after_loading(self, layer):
        layer.orig_shape = torch.Size(layer.shape.tolist())
        layer.orig_shape2 = torch.Size(layer.shape)
        layer.dev = torch.device(layer.weight.device)
        layer.inner = QuantLinear.from_weights(layer.weight)
        layer.inner.forward = torch.compile(layer.inner.forward)
        layer.w_t = layer.weight.t().contiguous()

    def apply(self, layer, x):
        return layer.inner(x) @ layer.w_t + x.new_empty(layer.orig_shape2).to(layer.dev)
"""


@pytest.mark.parametrize("contract", ["vllm-layerwise", "vllm-load-weights"])
def test_host_metadata_and_compiled_callables_are_not_tensors(tmp_path, contract):
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/q.py": QUANT}, contract=contract)
    got = {f.target for f in res.findings}
    assert "layer.w_t" in got
    assert not got & {"layer.orig_shape", "layer.orig_shape2", "layer.dev", "layer.inner.forward"}
