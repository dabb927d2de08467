"""The golden `after.py` files of the shapes that change what a post-load does, run on CPU
with torch: a weight reload (new values copied into the registered Parameter, post-load run
again) must reach what the kernel reads, at the storage the first load gave it. The code run
is our own fixtures', never audited code."""

from __future__ import annotations

import pytest
from _fix_util import load_case

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("which", ["before.py", "after.py"])
def test_refresh_serves_the_reloaded_values(which):
    mod = load_case("rl201_refresh", which)
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
    mod = load_case("rl103_late_bind_same_keyword", "after.py")

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


def test_keep_register_copies_into_the_buffer_a_deferred_layer_keeps():
    """A deferred layer's post-load runs again on live tensors: the buffer registered on the
    first pass is still there, and the fix copies the new inverse into it."""
    layer = load_case("rl109_keep_register", "after.py").LatentAttention()
    layer.process_weights_after_loading(torch.float32)
    buf = layer._k_scale_inv
    with torch.no_grad():
        layer._k_scale.copy_(torch.full((1,), 4.0))  # the reload writes the new scale
    layer.process_weights_after_loading(torch.float32)
    assert layer._k_scale_inv is buf and torch.equal(buf, torch.full((1,), 0.25))
    assert "_k_scale_inv" in dict(layer.named_buffers())


def test_keep_copies_the_reloaded_scale_into_the_one_the_config_bound():
    mod = load_case("rl107_keep", "after.py")
    experts = mod.GroupedExperts()
    layer = torch.nn.Module()
    experts.create_weights(layer, 3)
    experts.process_weights_after_loading(layer)
    bound = experts.kernel_config.w1.scale
    # the reload puts a freshly loaded Parameter under the checkpoint name and runs post-load
    fresh = torch.tensor([1.0, 5.0, 2.0])
    layer.w13_scale = torch.nn.Parameter(fresh.clone(), requires_grad=False)
    experts.process_weights_after_loading(layer)
    assert experts.kernel_config.w1.scale is bound and torch.equal(bound, fresh)


def test_keep_item_copies_into_the_tensor_the_dict_kept():
    table = load_case("rl104_keep_item", "after.py").GainTable()
    layer = torch.nn.Module()
    layer.w13_input_scale = torch.nn.Parameter(torch.full((2,), 2.0), requires_grad=False)
    table.process_weights_after_loading(layer)
    kept = table._gains["w13"]
    layer.w13_input_scale = torch.nn.Parameter(torch.full((2,), 4.0), requires_grad=False)
    table.process_weights_after_loading(layer)  # the reload runs post-load again
    assert table._gains["w13"] is kept and torch.equal(kept, torch.full((2,), 0.25))
    # the function hands on the kept tensor, not the one it just computed
    assert table._gain("w13", torch.full((2,), 8.0)) is kept
