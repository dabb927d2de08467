"""The golden `after.py` files of the shapes that change what a post-load does, run on CPU
with torch: a weight reload (new values copied into the registered Parameter, post-load run
again) must reach what the kernel reads, at the storage the first load gave it. The code run
is our own fixtures', never audited code."""

from __future__ import annotations

import importlib.util

import pytest
from _fix_util import CASES

torch = pytest.importorskip("torch")


def _load(case: str, which: str):
    spec = importlib.util.spec_from_file_location(f"_{case}_{which}", CASES / case / which)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("which", ["before.py", "after.py"])
def test_refresh_serves_the_reloaded_values(which):
    mod = _load("rl201_refresh", which)
    source = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16), requires_grad=False)
    impl = mod.GateBiasImpl(source)
    impl.process_weights_after_loading(torch.bfloat16)
    copy = impl.gate_bias
    assert copy.dtype == torch.float32 and torch.equal(copy, torch.ones(4))
    with torch.no_grad():
        source.copy_(torch.full((4,), 3.0))  # the reload writes the new checkpoint in place
    impl.process_weights_after_loading(torch.bfloat16)
    assert impl.gate_bias is copy  # the storage a captured graph reads stays put
    fresh = torch.equal(impl.gate_bias, torch.full((4,), 3.0))
    assert fresh == (which == "after.py")  # before the fix the copy keeps the first load's


def test_late_bind_reads_the_registered_buffer():
    mod = _load("rl103_late_bind_same_keyword", "after.py")

    class Cfg:
        reorder = True
        fast_gather = True

    layer = torch.nn.Module()
    layer.g_idx = torch.nn.Parameter(torch.tensor([2, 0, 1]), requires_grad=False)
    layer.weight = torch.nn.Parameter(torch.eye(3), requires_grad=False)
    kernel = mod.ReorderKernel()
    kernel.config = Cfg()
    kernel.process_weights_after_loading(layer)
    x = torch.arange(6.0).reshape(2, 3)
    assert torch.equal(kernel.apply_weights(layer, x), x[:, [1, 2, 0]])
    # the reload copies the recomputed permutation back into the registered buffer
    with torch.no_grad():
        layer.reorder_order.copy_(torch.tensor([0, 1, 2], dtype=torch.int))
    assert torch.equal(kernel.apply_weights(layer, x), x)
