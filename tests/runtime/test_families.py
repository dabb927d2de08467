"""The family table and the pieces around it that run without vLLM or a GPU.

* every finding of the vLLM 0.25.1 main job (computed live, integration) maps to a table row;
* mapping is generic: symbol class first, else the post-load root the trace names;
* the checkpoint synthesizer probes a weight loader for the shapes it accepts;
* the line tracer and the guard text behind "this configuration does not reach the line";
* the verdict rules of issue 10 item 7 (unread, CUDA-only illegal access, still-held aliases);
* allocation pressure on CPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reload_lint.confirm import families
from reload_lint.confirm.families import BY_ID, ROWS, map_finding, rows_for_finding
from reload_lint.findings import Finding

ROOT = Path(__file__).resolve().parents[2]


def _f(symbol, target="layer.workspace", path="vllm/x.py", trace=(), rule="RL101", line=10):
    return Finding(
        rule=rule,
        path=path,
        line=line,
        column=1,
        end_line=line,
        symbol=symbol,
        target=target,
        message="m",
        trace=[{"path": path, "line": 1, "note": n} for n in trace],
    )


# -- the table ----------------------------------------------------------------------------------


def test_row_ids_are_unique_and_recipe_rows_name_builtin_recipes():
    from reload_lint.confirm.recipes import get_recipe

    assert len({r.id for r in ROWS}) == len(ROWS)
    for r in ROWS:
        if r.layer == "recipe":
            assert get_recipe(r.recipe).name == r.recipe
        else:
            assert r.layer in ("moe", "linear", "mla", "attention"), r.id
            # no attention harness: such a row says why it cannot run, or what is missing
            assert r.unsupported or r.missing or r.layer != "attention", r.id


def test_family_recipe_names_round_trip():
    from reload_lint.confirm.recipes import get_recipe

    for r in ROWS:
        if r.layer in ("moe", "linear", "mla"):
            for b in r.backends:
                rec = get_recipe(f"family:{r.id}:{b}")
                assert (rec.row, rec.backend) == (r, b)


def test_mapping_by_symbol_class():
    m = map_finding(_f("Fp8MoEMethod._setup_kernel", "self.moe_kernel", rule="RL105"))
    assert m.row.id == "moe-fp8" and m.how == "symbol class Fp8MoEMethod"
    # rows driving the same component reach it with other configurations too
    ids = [r.id for r in rows_for_finding(_f("Fp8MoEMethod._setup_kernel", "self.moe_kernel"))]
    assert ids[0] == "moe-fp8" and "moe-fp8-block" in ids


def test_helper_maps_through_its_trace_root():
    f = _f(
        "prepare_fp8_moe_layer_for_marlin",
        trace=[
            "reached from prepare_fp8_moe_layer_for_marlin",
            "reached from convert_to_fp8_moe_kernel_format",
            "post-load root CompressedTensorsW8A8Fp8MoEMethod.process_weights_after_loading",
        ],
    )
    m = map_finding(f)
    assert m.row.id == "moe-ct-w8a8-fp8"
    assert m.how == "trace root CompressedTensorsW8A8Fp8MoEMethod"


def test_built_kernel_class_maps_to_the_row_that_builds_it():
    f = _f("TrtLlmNvFp4ExpertsBase.process_weights_after_loading", "self.g1_scale_c")
    assert map_finding(f).row.id == "moe-modelopt-nvfp4-trtllm"
    assert "moe-modelopt-nvfp4" in [r.id for r in rows_for_finding(f)]


def test_unknown_component_has_no_row_and_says_why():
    m = map_finding(_f("BrandNewMoEMethod.process_weights_after_loading"))
    assert m.row is None and "BrandNewMoEMethod" in m.how


def test_unsupported_rows_give_the_exact_missing_piece():
    for r in ROWS:
        for why in (r.unsupported, r.missing):
            if why:
                assert "generic" not in why.lower()
                assert any(c in why for c in r.components) or "harness" in why, r.id


@pytest.mark.integration
def test_every_finding_of_the_vllm_0_25_1_main_job_maps_to_a_row(tmp_path):
    """The main job's own findings, computed now: a new finding with no row fails here."""
    out = subprocess.run(
        [sys.executable, "-m", "reload_lint", "check", "--vllm", "0.25.1", "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode not in (0, 1):
        pytest.skip(f"vLLM 0.25.1 sources unavailable: {out.stderr.strip()[-300:]}")
    findings = [Finding.from_json(d) for d in json.loads(out.stdout)["findings"]]
    assert findings
    unmapped = [
        f"{f.path}:{f.line} {f.symbol} {f.target}: {map_finding(f).how}"
        for f in findings
        if map_finding(f).row is None
    ]
    assert not unmapped, "\n".join(unmapped)
    for f in findings:
        row = map_finding(f).row
        names = set(row.classes())
        cls = f.symbol.split(".")[0]
        assert cls in names or names & set(families.trace_roots(f)), (f.symbol, row.id)


# -- checkpoint synthesis -----------------------------------------------------------------------


def _fake_moe(torch, E=4, N=8, K=16, per_tensor=True):
    """A module whose loader follows FusedMoE's contract for weights and per-tensor scales."""
    m = torch.nn.Module()

    def loader(param, w, weight_name, shard_id, expert_id):
        if "scale" in weight_name:
            idx = 0 if shard_id in ("w1", "w2") else 1
            if param.dim() == 2:
                param.data[expert_id][idx] = w.reshape(())
            else:
                param.data[expert_id] = w.reshape(())
            return
        dst = param.data[expert_id]
        if shard_id in ("w1", "w3"):
            half = dst.shape[0] // 2
            dst = dst[:half] if shard_id == "w1" else dst[half:]
        dst.copy_(w)

    for name, shape in {
        "w13_weight": (E, 2 * N, K),
        "w2_weight": (E, K, N),
        "w13_weight_scale": (E, 2),
        "w2_weight_scale": (E,),
    }.items():
        p = torch.nn.Parameter(torch.zeros(shape), requires_grad=False)
        p.weight_loader = loader
        m.register_parameter(name, p)
    return m


def test_moe_plan_probes_the_loader_for_each_parameter_and_shard():
    torch = pytest.importorskip("torch")
    from reload_lint.confirm.recipes.checkpoint import materialize, moe_plan
    from reload_lint.confirm.reload import load_weights

    m = _fake_moe(torch)
    plan = moe_plan(m, 4, 16, 8)
    shapes = {(c.param, c.extra[1]): c.shape for c in plan}
    assert shapes[("w13_weight", "w1")] == (8, 16) and shapes[("w2_weight", "w2")] == (16, 8)
    assert shapes[("w13_weight_scale", "w3")] in ((), (1,))
    assert len(plan) == 4 * (2 + 1 + 2 + 1)
    a = _fake_moe(torch)
    load_weights(a, materialize(plan, 1, "cpu"))
    b = _fake_moe(torch)
    load_weights(b, materialize(plan, 2, "cpu"))
    for name, p in a.named_parameters():
        assert bool((p != 0).all()), f"{name} not fully written"
        assert not torch.equal(p, b.get_parameter(name)), f"{name}: seeds give equal values"


def test_value_roles():
    torch = pytest.importorskip("torch")
    from reload_lint.confirm.recipes.checkpoint import value_for

    g = torch.Generator().manual_seed(0)
    s = value_for("w13_weight_scale", (4,), torch.float32, g)
    assert bool((s > 0).all()) and float(s.max()) < 0.1
    e8 = value_for("w2_weight_scale", (4, 2), torch.uint8, g)
    assert int(e8.min()) >= 120 and int(e8.max()) <= 124
    gi = value_for("w13_weight_g_idx", (256,), torch.int32, g)
    assert sorted(gi.tolist()) == sorted((torch.arange(256) * 2 // 256).tolist())
    ws = value_for("w13_weight_shape", (2,), torch.int64, g, logical=(512, 1024))
    assert ws.tolist() == [512, 1024]


# -- reach: did the flagged line run? -----------------------------------------------------------


def test_line_tracer_and_guard(tmp_path, monkeypatch):
    from reload_lint.confirm.decide import guard_of, reach
    from reload_lint.confirm.pipeline import LineTracer

    pkg = tmp_path / "rlpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(
        textwrap.dedent(
            """\
            def post_load(obj, rocm):
                if rocm:
                    obj.w_k = 1
                else:
                    obj.w_uv = 2
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    mod = importlib.import_module("rlpkg.mod")

    class Obj:
        pass

    with LineTracer(["rlpkg/mod.py"]) as t:
        mod.post_load(Obj(), rocm=False)
    executed = t.result()
    assert 5 in executed["rlpkg/mod.py"] and 3 not in executed["rlpkg/mod.py"]
    msgs = [{"stage": "cold_b", "ok": True, "executed": executed}]
    assert reach(_f("post_load", "obj.w_uv", path="rlpkg/mod.py", line=5), msgs) == (True, "")
    ok, why = reach(_f("post_load", "obj.w_k", path="rlpkg/mod.py", line=3), msgs)
    assert not ok and "guarded by `if rocm`" in why
    assert "in the else of `if rocm`" in guard_of("rlpkg/mod.py", 5)
    # a run that failed before loading cannot tell: its failure is the answer
    assert reach(_f("post_load", path="rlpkg/mod.py", line=3), [{"stage": "setup"}])[0]


# -- the verdict rules --------------------------------------------------------------------------


def _row(path, *, moved=False, freed=False, visible=True, storage=1):
    return {
        "path": path,
        "graph_visible": visible,
        "moved": moved,
        "freed": freed,
        "old_ptr": "0x10",
        "new_ptr": "0x20" if moved else "0x10",
        "storage": storage,
    }


def _msgs(fp, rows, linked, replay=None, err=None, tier="replay"):
    msgs = [
        {"stage": "load_a", "ok": True, "tier": tier, "backend": "x.Experts", "standins": []},
        {"stage": "census", "ok": True, "rows": rows, "linked": {fp: linked}},
    ]
    if replay is not None:
        msgs.append({"stage": "replay", "ok": True, **replay})
    if err is not None:
        msgs.append({"stage": "replay", "ok": False, **err})
    return msgs


def test_moved_but_never_read_is_unread():
    from reload_lint.confirm.decide import decide

    f = _f("K.process_weights_after_loading", "self.buf")
    f.fingerprint = "fp"
    msgs = _msgs("fp", [_row("layer.k.buf", moved=True, visible=False)], ["layer.k.buf"])
    msgs.append({"stage": "replay", "ok": True, "match": True})
    verdict, failure, reason = decide(f, msgs, {"status": "ok"}, False)
    assert (verdict, failure) == ("unread", None) and "never read" in reason


def test_replay_exception_is_illegal_access_only_for_cuda_errors():
    from reload_lint.confirm.decide import decide

    f = _f("K.process_weights_after_loading", "self.buf")
    f.fingerprint = "fp"
    rows = [_row("layer.k.buf", moved=True)]
    cuda = {"error": "AcceleratorError: CUDA error: an illegal memory access was encountered"}
    v = decide(f, _msgs("fp", rows, ["layer.k.buf"], err=cuda), {"status": "ok"}, False)
    assert v[:2] == ("red", "illegal access")
    other = {"error": "TypeError: apply() missing 1 required positional argument"}
    v = decide(f, _msgs("fp", rows, ["layer.k.buf"], err=other), {"status": "ok"}, False)
    assert v[0] == "inconclusive" and "harness failure" in v[2] and "TypeError" in v[2]


def test_alias_of_a_still_registered_storage_did_not_escape():
    """A rebuilt object's reference moved, but the storage the graph read is still the live
    registered parameter (updated in place by the copy-back): not an escape."""
    from reload_lint.confirm.decide import decide

    f = _f("M._setup_kernel", "self.moe_kernel", rule="RL105")
    f.fingerprint = "fp"
    rows = [
        _row("layer.quant_method.moe_kernel.quant_config.w1_scale", moved=True, storage=7),
        _row("layer.w13_weight_scale", storage=7),
    ]
    msgs = _msgs("fp", rows, [rows[0]["path"]], replay={"match": True})
    verdict, _, reason = decide(f, msgs, {"status": "ok"}, False)
    assert verdict == "green", reason


def test_freed_and_replay_still_matched_stays_red_freed():
    from reload_lint.confirm.decide import decide

    f = _f("K.process_weights_after_loading", "layer.workspace")
    f.fingerprint = "fp"
    rows = [_row("layer.workspace", moved=True, freed=True)]
    verdict, failure, reason = decide(
        f, _msgs("fp", rows, ["layer.workspace"], replay={"match": True}), {"status": "ok"}, False
    )
    assert (verdict, failure) == ("red", "freed") and "value-identical" in reason


def test_census_tier_decides_on_the_census_alone():
    from reload_lint.confirm.decide import decide

    f = _f("E.process_weights_after_loading", "self.w1_sf_mma", rule="RL102")
    f.fingerprint = "fp"
    rows = [_row("layer.e.w1_sf_mma", moved=True)]
    msgs = _msgs("fp", rows, ["layer.e.w1_sf_mma"], tier="census")
    msgs[0]["standins"] = ["flashinfer.b12x_moe"]
    verdict, failure, reason = decide(f, msgs, {"status": "ok"}, False)
    assert (verdict, failure) == ("red", "moved") and "flashinfer.b12x_moe" in reason


def test_rebuilt_object_without_tensors_is_green_when_replay_matches():
    from reload_lint.confirm.decide import decide

    f = _f("M._setup_kernel", "self.moe_kernel", rule="RL105")
    f.fingerprint = "fp"
    msgs = _msgs("fp", [_row("layer.w13_weight")], [], replay={"match": True})
    verdict, _, reason = decide(f, msgs, {"status": "ok"}, False)
    assert verdict == "green" and "x.Experts" in reason


# -- pressure -----------------------------------------------------------------------------------


def test_pressure_allocates_poisoned_blocks_for_freed_graph_visible_storages():
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from reload_lint.confirm.pressure import POISON_BYTE, apply_pressure

    t = torch.zeros(64, dtype=torch.uint8)
    ptr = t.data_ptr()
    del t
    rows = [
        SimpleNamespace(freed=True, graph_visible=True, old_ptr=ptr, nbytes=64),
        SimpleNamespace(freed=True, graph_visible=False, old_ptr=ptr + 4096, nbytes=32),
        SimpleNamespace(freed=False, graph_visible=True, old_ptr=ptr + 8192, nbytes=16),
    ]
    out = apply_pressure(rows, "cpu", copies=4)
    hold = out.pop("_hold")
    assert out["freed_graph_visible"] == 1 and out["blocks"] == 4 and out["bytes"] == 256
    assert all(bool((h == POISON_BYTE).all()) for h in hold)
    assert 0 <= out["reused_old_addresses"] <= 1
    capped = apply_pressure(rows, "cpu", copies=4, max_bytes=100)
    assert capped["blocks"] == 1


def test_pressure_chases_a_freed_address_the_allocator_hands_out_late():
    """The caching allocator may hand out other free blocks of the size first: pressure keeps
    allocating until the old address comes back (or the chase or the byte budget runs out)."""
    from types import SimpleNamespace

    from reload_lint.confirm.pressure import apply_pressure

    class Block:
        def __init__(self, ptr, n):
            self.ptr, self.n, self.filled = ptr, n, None

        def data_ptr(self):
            return self.ptr

        def numel(self):
            return self.n

        def fill_(self, v):
            self.filled = v

    def allocator(order):
        it = iter(order)
        return lambda nbytes: Block(next(it), nbytes)

    old = 0x7000
    rows = [SimpleNamespace(freed=True, graph_visible=True, old_ptr=old, nbytes=512)]
    # the old block comes back as the 40th block of its size
    order = [0x100000 + 512 * i for i in range(39)] + [old] + [0x900000] * 100
    out = apply_pressure(rows, "cpu", copies=16, chase=4096, alloc=allocator(order))
    assert out["reused_old_addresses"] == 1 and out["blocks"] == 40
    assert out["chased_blocks"] == 24 and all(b.filled == 0x7F for b in out["_hold"])
    # without the chase (the sweep before), 16 copies never reach it
    out = apply_pressure(rows, "cpu", copies=16, chase=0, alloc=allocator(order))
    assert out["reused_old_addresses"] == 0 and out["blocks"] == 16
    # the byte budget stops the chase
    out = apply_pressure(
        rows, "cpu", copies=16, chase=4096, alloc=allocator(order), max_bytes=512 * 20
    )
    assert out["blocks"] == 20 and out["reused_old_addresses"] == 0


def test_evidence_verdicts_are_defined_once():
    from reload_lint.confirm import evidence

    assert evidence.VERDICTS == ("red", "green", "unread", "inconclusive")
    assert evidence.FAILURES == (
        "livelock",
        "illegal access",
        "stale read",
        "moved",
        "freed",
        "masked",
    )
    hits = subprocess.run(
        ["grep", "-rn", "^VERDICTS = \\|^FAILURES = ", str(ROOT / "reload_lint" / "confirm")],
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert len(hits) == 2, hits
    assert BY_ID  # the table is importable without torch or vLLM


def test_rebuilt_object_without_tensors_is_not_blamed_for_other_escapes():
    from reload_lint.confirm.decide import decide

    f = _f("M._setup_kernel", "self.moe_kernel", rule="RL105")
    f.fingerprint = "fp"
    rows = [_row("layer.w13_weight"), _row("layer.quant_method.cfg.scale", freed=True, moved=True)]
    msgs = _msgs("fp", rows, [], replay={"match": False, "rel": 0.9})
    verdict, _, reason = decide(f, msgs, {"status": "ok"}, False)
    assert verdict == "green" and "not this target's" in reason and "1 other" in reason


def test_a_reload_that_raises_is_inconclusive_with_vllms_error():
    from reload_lint.confirm.decide import decide

    f = _f("M._setup_kernel", "layer.w13_weight")
    f.fingerprint = "fp"
    msgs = [{"stage": "reload", "ok": False, "error": "KeyError: \"attribute 'w13_weight'\""}]
    verdict, _, reason = decide(f, msgs, {"status": "ok"}, False)
    assert verdict == "inconclusive" and reason.startswith("vLLM's layerwise reload itself")


def test_standins_keep_the_shapes_vllm_relies_on():
    torch = pytest.importorskip("torch")
    from reload_lint.confirm.recipes import standins

    n, b, p, l_ = 4, 3, 8, 16
    w = torch.randn(l_, n, p)
    wq, scale = w.to(torch.float8_e4m3fn), torch.tensor(1.0)
    x = torch.randn(n, b, p, dtype=torch.bfloat16)
    y = standins._fp8_bmm(x, wq.transpose(0, 1), scale, transpose_bm=True)
    ref = torch.bmm(x.float(), wq.transpose(0, 1).float().transpose(1, 2)).transpose(0, 1)
    assert y.shape == (b, n, l_) and torch.allclose(y.float(), ref, rtol=1e-2, atol=1e-2)
    out = torch.empty(b, n, l_, dtype=torch.bfloat16)
    assert standins._fp8_bmm(x, wq.transpose(0, 1), scale, YQ=out, transpose_bm=True) is out
    packed, scales = standins._dynamic_mxfp4_quant(torch.randn(6, 64, dtype=torch.bfloat16))
    assert packed.shape == (6, 32) and scales.shape == (6, 2) and packed.dtype == torch.uint8
    yv = torch.empty(b, n, 5)
    standins._a16wfp4_bmm(x, torch.zeros(n, 5, p // 2, dtype=torch.uint8), scales, yv, True)
    assert bool((yv == 0).all())
    with pytest.raises(KeyError):
        standins.install(["no.such.op"])
    assert {r.id for r in ROWS if r.standins} >= {
        "mla-rocm-aiter-fp8-bmm",
        "mla-rocm-aiter-fp4-bmm",
    }


def test_probe_rejects_broadcast_and_tries_the_transposed_orientation():
    torch = pytest.importorskip("torch")
    from reload_lint.confirm.recipes.checkpoint import _candidates, moe_plan

    assert (16, 4) in _candidates((2, 4, 32), "w1", transposed=True)
    m = torch.nn.Module()

    def loader(param, w, weight_name, shard_id, expert_id):
        # a transposed store, as compressed-tensors packed weights are: [N, K] on disk
        dst = param.data[expert_id]
        half = dst.shape[1] // 2
        dst = dst[:, :half] if shard_id == "w1" else dst[:, half:]
        if shard_id == "w2":
            dst = param.data[expert_id]
        dst.copy_(w.t())  # a (1, x) tensor would broadcast here without the probe's check

    for name, shape in {"w13_weight_packed": (2, 4, 32), "w2_weight_packed": (2, 8, 4)}.items():
        p = torch.nn.Parameter(torch.zeros(shape, dtype=torch.int32), requires_grad=False)
        p.weight_loader, p.is_transposed = loader, True
        m.register_parameter(name, p)
    shapes = {(c.param, c.extra[1]): c.shape for c in moe_plan(m, 2, 4, 16)}
    assert shapes[("w13_weight_packed", "w1")] == (16, 4)
    assert shapes[("w2_weight_packed", "w2")] == (4, 8)
