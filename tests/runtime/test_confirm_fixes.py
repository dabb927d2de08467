"""The fix shapes and preconditions on plain torch (CPU): objects that hold tensors, state a
rebuilt object allocates lazily, the masking precondition against a stand-in of vLLM's restore,
the loader-call order of synthetic checkpoints, and the masked-reload verdicts."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

torch = pytest.importorskip("torch")

from reload_lint.confirm import fixes as fx  # noqa: E402
from reload_lint.findings import Finding  # noqa: E402


@dataclass
class Storage:
    data: torch.Tensor


@dataclass
class Wrapped:  # the shape of a triton_kernels Tensor: no torch.Tensor, a storage inside
    storage: Storage
    shape: tuple


@dataclass
class Scratch:
    idx: torch.Tensor


class Experts:
    def __init__(self, scale):
        self.scale = scale
        self.alias = scale  # two attributes, one storage
        self._scratch = None

    def scratch(self):  # allocated on first use, as CutlassExpertsFp8Base._get_permute_scratch
        if self._scratch is None:
            self._scratch = Scratch(torch.arange(4))
        return self._scratch


def _f(target, rule="RL101"):
    f = Finding(
        rule=rule,
        path="vllm/x.py",
        line=3,
        column=1,
        end_line=3,
        symbol="M.process_weights_after_loading",
        target=target,
        message="m",
    )
    f.fingerprint = "fp-" + target
    return f


def test_merge_keeps_captured_storages_aliases_and_lazily_built_state():
    old = Experts(torch.zeros(3))
    old_scratch = old.scratch()
    captured = old.scale
    new = Experts(torch.full((3,), 2.0))
    fx.merge_into(old, new, "self.moe_kernel")
    assert new.scale is captured and new.alias is captured and bool((captured == 2).all())
    assert new._scratch is old_scratch and new.scratch() is old_scratch
    with pytest.raises(fx.FixError):
        fx.merge_into(Experts(torch.zeros(3)), Experts(torch.zeros(5)), "self.moe_kernel")


def test_reuse_rebuilt_carries_a_lazily_allocated_scratch_over_the_rebuild():
    class Method:
        def process_weights_after_loading(self, layer):
            self.moe_kernel = Experts(layer.w.detach().clone())

    undo = fx.reuse_rebuilt(Method, "self.moe_kernel", lambda m, layer: m.moe_kernel)
    try:
        layer = torch.nn.Module()
        layer.w = torch.nn.Parameter(torch.ones(3), requires_grad=False)
        m = Method()
        m.process_weights_after_loading(layer)
        first, scratch = m.moe_kernel.scale, m.moe_kernel.scratch()
        layer.w.data.fill_(5.0)
        m.process_weights_after_loading(layer)
        assert m.moe_kernel.scale is first and bool((first == 5).all())
        assert m.moe_kernel._scratch is scratch
    finally:
        undo()


def test_reuse_storage_keeps_an_object_that_holds_tensors():
    class Method:
        def process_weights_after_loading(self, layer):
            layer.w13 = Wrapped(Storage(layer.raw.detach().clone() * 2), (3,))
            self.cfg = Scratch(layer.raw.detach().clone())

    undo = [fx.reuse_storage(Method, "layer.w13"), fx.reuse_storage(Method, "self.cfg")]
    try:
        layer = torch.nn.Module()
        layer.raw = torch.nn.Parameter(torch.ones(3), requires_grad=False)
        m = Method()
        m.process_weights_after_loading(layer)
        w, cfg = layer.w13.storage.data, m.cfg.idx
        layer.raw.data.fill_(4.0)
        m.process_weights_after_loading(layer)
        assert layer.w13.storage.data is w and bool((w == 8).all())
        assert m.cfg.idx is cfg and bool((cfg == 4).all())
        # taken off the layer by the unshadow precondition: the held-aside value is reused
        held = layer.__dict__.pop("w13")
        fx.HELD_ASIDE[(id(layer), "w13")] = held
        layer.raw.data.fill_(1.0)
        m.process_weights_after_loading(layer)
        assert layer.w13.storage.data is w and bool((w == 2).all())
        assert not fx.HELD_ASIDE
    finally:
        for u in undo:
            u()
        fx.KEEP_ASIDE.discard("w13")


@pytest.fixture
def fake_layerwise(monkeypatch):
    """vLLM's restore_layer_on_meta, reduced to what raises: re-register recorded Parameters."""

    def restore_layer_on_meta(layer, info):
        for name in [n for n, p in layer._parameters.items() if p is not None]:
            delattr(layer, name)
        for name, meta in info.restore_metadata[0].items():
            layer.register_parameter(name, torch.nn.Parameter(meta, requires_grad=False))

    infos = {}

    def get_layerwise_info(layer):
        return infos.setdefault(id(layer), types.SimpleNamespace(restore_metadata=({}, {})))

    def _copy_and_restore_kernel_tensors(layer, info):
        for name, param in info.kernel_tensors[0].items():
            param.data.copy_(getattr(layer, name))
        mod._place_kernel_tensors(layer, info)

    def _place_kernel_tensors(layer, info):
        for name, param in info.kernel_tensors[0].items():
            delattr(layer, name)
            layer.register_parameter(name, param)

    mod = types.ModuleType("vllm.model_executor.model_loader.reload.layerwise")
    mod.restore_layer_on_meta = restore_layer_on_meta
    mod._copy_and_restore_kernel_tensors = _copy_and_restore_kernel_tensors
    mod._place_kernel_tensors = _place_kernel_tensors
    mod.get_layerwise_info = get_layerwise_info
    for name in (
        "vllm",
        "vllm.model_executor",
        "vllm.model_executor.model_loader",
        "vllm.model_executor.model_loader.reload",
    ):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setattr(
        sys.modules["vllm.model_executor.model_loader.reload"], "layerwise", mod, raising=False
    )
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return mod


def _masking_layer(get_info):
    layer = torch.nn.Module()
    layer.w13_weight = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
    get_info(layer).restore_metadata = ({"w13_weight": torch.empty(2, device="meta")}, {})
    # post-load: delete the Parameter, leave a plain object under its name
    del layer.w13_weight
    layer.w13_weight = Wrapped(Storage(torch.ones(2)), (2,))
    return layer


def test_unshadow_lets_the_restore_past_a_masking_post_load(fake_layerwise):
    from reload_lint.confirm.pipeline import shadowing

    layer = _masking_layer(fake_layerwise.get_layerwise_info)
    info = fake_layerwise.get_layerwise_info(layer)
    assert shadowing(layer) == ["w13_weight"]
    with pytest.raises(KeyError, match="already exists"):
        fake_layerwise.restore_layer_on_meta(layer, info)
    layer = _masking_layer(fake_layerwise.get_layerwise_info)
    undo = fx.unshadow()
    try:
        fake_layerwise.restore_layer_on_meta(layer, fake_layerwise.get_layerwise_info(layer))
        assert "w13_weight" in layer._parameters and not fx.HELD_ASIDE  # dropped: not wanted
        fx.KEEP_ASIDE.add("w13_weight")
        layer = _masking_layer(fake_layerwise.get_layerwise_info)
        held = layer.w13_weight
        fake_layerwise.restore_layer_on_meta(layer, fake_layerwise.get_layerwise_info(layer))
        assert fx.HELD_ASIDE.pop((id(layer), "w13_weight")) is held
    finally:
        undo()
        fx.KEEP_ASIDE.discard("w13_weight")
    assert fake_layerwise.restore_layer_on_meta is not None


def test_masked_reload_is_red_masked_for_the_masking_site_only():
    from reload_lint.confirm.decide import decide

    row = {
        "path": "layer.routed_experts.w13_weight.storage.data",
        "graph_visible": True,
        "moved": False,
        "freed": False,
        "old_ptr": "0x1",
        "new_ptr": "0x1",
        "storage": 1,
    }
    masking, other = _f("layer.w13_weight"), _f("self.w13_precision_config", "RL102")
    msgs = [
        {"stage": "cold_b", "ok": True, "executed": {}},
        {"stage": "load_a", "ok": True, "tier": "replay", "backend": "x.E", "standins": []},
        {
            "stage": "reload",
            "ok": False,
            "error": "KeyError: \"attribute 'w13_weight' already exists\"",
            "masked": ["routed_experts.w13_weight"],
            "continues": True,
        },
        {
            "stage": "census",
            "ok": True,
            "rows": [row],
            "linked": {masking.fingerprint: [row["path"]], other.fingerprint: []},
        },
    ]
    verdict, failure, reason = decide(masking, msgs, {"status": "ok"}, False)
    assert (verdict, failure) == ("red", "masked") and "graph-visible" in reason
    verdict, failure, reason = decide(other, msgs, {"status": "ok"}, False)
    assert verdict == "inconclusive" and "precondition" in reason
    w2 = _f("layer.w2_weight")
    msgs[2]["masked"].append("routed_experts.w2_weight")
    msgs[3]["linked"][w2.fingerprint] = [row["path"]]
    verdict, failure, reason = decide(w2, msgs, {"status": "ok"}, False)
    assert (verdict, failure) == ("red", "masked") and "`w2_weight` shadows" in reason
    unread = [dict(msgs[3], rows=[dict(row, graph_visible=False)])]
    assert decide(masking, msgs[:3] + unread, {"status": "ok"}, False)[0] == "unread"


def test_loads_resolve_parameters_before_the_first_load():
    from reload_lint.confirm.reload import load_weights

    m = torch.nn.Module()
    m.a = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
    m.b = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
    original_b = m.b
    seen = []

    def loader_a(param, w):  # loading `a` completes the layer: processing re-registers `b`
        param.data.copy_(w)
        m.b = torch.nn.Parameter(torch.zeros(()), requires_grad=False)

    def loader_b(param, w):
        seen.append(param)

    m.a.weight_loader, original_b.weight_loader = loader_a, loader_b
    load_weights(m, {"a": torch.ones(2), "b": torch.ones(2)})
    assert seen == [original_b]


def test_repeated_destinations_load_last():
    from reload_lint.confirm.recipes.checkpoint import materialize, moe_plan

    m = torch.nn.Module()

    def loader(param, w, weight_name, shard_id, expert_id):
        param.data[expert_id].copy_(w)  # w1 and w3 share one per-expert input scale

    p = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
    p.weight_loader = loader
    m.register_parameter("w13_input_scale", p)
    plan = moe_plan(m, 2, 4, 8)
    assert [(c.extra[1], c.repeat) for c in plan] == [
        ("w1", False),
        ("w1", False),
        ("w3", True),
        ("w3", True),
    ]
    calls = materialize(plan, 1, "cpu")
    assert [c[2][1] for c in calls][-2:] == ["w3", "w3"]


def test_expanded_copy_back_writes_each_distinct_element_once(fake_layerwise):
    def layer_and_info():
        layer = torch.nn.Module()
        kept = torch.nn.Parameter(torch.tensor(3.0).expand(4), requires_grad=False)
        layer.scale = torch.nn.Parameter(torch.full((4,), 7.0), requires_grad=False)
        return layer, types.SimpleNamespace(kernel_tensors=({"scale": kept}, {})), kept

    layer, info, kept = layer_and_info()
    with pytest.raises(RuntimeError, match="more than one element"):
        fake_layerwise._copy_and_restore_kernel_tensors(layer, info)
    undo = fx.PRECONDITIONS["expanded_copy_back"][0]()
    try:
        layer, info, kept = layer_and_info()
        ptr = kept.data_ptr()
        fake_layerwise._copy_and_restore_kernel_tensors(layer, info)
        assert layer.scale is kept and kept.data_ptr() == ptr and bool((kept == 7).all())
    finally:
        undo()


def test_a_refused_reload_names_the_precondition_that_gets_past_it():
    from reload_lint.confirm.decide import decide

    err = {
        "stage": "reload",
        "ok": False,
        "error": "RuntimeError: unsupported operation: more than one element ...",
        "precondition": "expanded_copy_back",
    }
    verdict, _, reason = decide(_f("self.g1_scale_c"), [err], {"status": "ok"}, False)
    assert verdict == "inconclusive" and "expanded_copy_back precondition" in reason


def test_a_layer_target_that_is_none_on_this_backend_is_green():
    from reload_lint.confirm.decide import decide
    from reload_lint.confirm.pipeline import layer_target_is_none

    model = torch.nn.Module()
    model.experts = torch.nn.Module()
    model.experts.w13_input_scale = None  # the Marlin backend keeps no activation scale
    assert layer_target_is_none(model, "layer.w13_input_scale")
    assert not layer_target_is_none(model, "layer.nothing_here")
    model.experts.w13_input_scale = torch.ones(1)
    assert not layer_target_is_none(model, "layer.w13_input_scale")
    f = _f("layer.w13_input_scale")
    msgs = [
        {"stage": "load_a", "ok": True, "tier": "replay", "backend": "x.MarlinExperts"},
        {"stage": "census", "ok": True, "rows": [], "linked": {}, "none_targets": [f.fingerprint]},
        {"stage": "replay", "ok": True, "match": True},
    ]
    verdict, _, reason = decide(f, msgs, {"status": "ok"}, False)
    assert verdict == "green" and "None on this backend" in reason
    msgs[1]["none_targets"] = []
    assert decide(f, msgs, {"status": "ok"}, False)[0] == "inconclusive"


def test_a_child_that_dies_is_reported_with_its_stage_and_signal():
    from reload_lint.confirm.decide import decide

    msgs = [{"stage": "setup", "ok": True}, {"stage": "fixes", "ok": True}]
    outcome = {"status": "died", "stage": "before replay", "exitcode": -8, "signal": 8}
    verdict, _, reason = decide(_f("layer.workspace"), msgs, outcome, False)
    assert verdict == "inconclusive" and "stage cold_b (SIGFPE, signal 8)" in reason


class _MaskingKeepMethod:
    """A post-load shaped like GptOssMxfp4MoEMethod._setup_kernel with the RL101 keep-and-copy
    codemod written into it: the checkpoint Parameter is repacked into a wrapper object, deleted,
    and the wrapper kept under its name (the site that masks the next reload)."""

    def process_weights_after_loading(self, layer):
        w13 = Wrapped(Storage(layer.w13_weight.data * 2), (2,))
        del layer.w13_weight
        if getattr(layer, "w13_weight", None) is not None:
            layer.w13_weight.storage.data.copy_(w13.storage.data)  # the codemod's copy
        if getattr(layer, "w13_weight", None) is None:
            layer.w13_weight = w13


def _masked_reload(fake_layerwise, layer, method, values):
    """One layerwise reload, reduced: restore (under whatever wraps it), load, post-load."""
    info = fake_layerwise.get_layerwise_info(layer)
    info.restore_metadata = ({"w13_weight": torch.empty(2, device="meta")}, {})
    fake_layerwise.restore_layer_on_meta(layer, info)
    layer._parameters["w13_weight"] = torch.nn.Parameter(values, requires_grad=False)
    method.process_weights_after_loading(layer)


def test_unshadow_frees_what_a_codemod_keeps_and_the_monkeypatch_keeps_it(fake_layerwise):
    """H200 session 14 (mxfp4.py:354/355 red on the fixed side): under the unshadow
    precondition the masking attribute is taken off the layer before the restore, so the
    keep-and-copy codemod of that attribute finds nothing to keep and binds a new storage; a
    record of another site of that build inherits the escape. The monkeypatch the fixed side
    now holds that target with (`reuse_storage`, set aside by unshadow) keeps the storage and
    gives it the new values."""
    undo = fx.unshadow()
    try:
        for held_by in ("codemod", "monkeypatch"):
            layer = torch.nn.Module()
            layer.register_parameter("w13_weight", torch.nn.Parameter(torch.ones(2)))
            method = _MaskingKeepMethod()
            restore = None
            if held_by == "monkeypatch":
                restore = fx.reuse_storage(_MaskingKeepMethod, "layer.w13_weight")
            try:
                method.process_weights_after_loading(layer)  # the first load
                captured = layer.w13_weight.storage.data
                _masked_reload(fake_layerwise, layer, method, torch.full((2,), 5.0))
            finally:
                if restore is not None:
                    restore()
                    fx.KEEP_ASIDE.discard("w13_weight")
            now = layer.w13_weight.storage.data
            assert torch.equal(now, torch.full((2,), 10.0))
            if held_by == "codemod":
                assert now.data_ptr() != captured.data_ptr()  # the escape the red inherited
            else:
                assert now.data_ptr() == captured.data_ptr()
                assert torch.equal(captured, torch.full((2,), 10.0))
            assert not fx.HELD_ASIDE
    finally:
        undo()
