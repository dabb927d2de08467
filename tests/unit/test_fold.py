"""One storage, one finding (reload_lint/fold.py): the shapes folded into a host's `also`, the
ones never folded, the JSON field, and `check --baseline` with a baseline written before the
fold (folded entries are named once, neither new nor stale). The counts on the real releases
are in the closing notes of issue 17; tests/integration/test_vllm_seeds.py keeps its sites."""

from __future__ import annotations

import json

from reload_lint.findings import Finding, TraceStep, compute_fingerprints
from reload_lint.fold import fold_shared_storage
from reload_lint.gate import BaselineEntry, match_baseline

Q = "pkg/quant.py"
E = "pkg/experts.py"
ROOT = "Fp8Method.process_weights_after_loading"


def _f(rule, path, line, target, steps, symbol=ROOT, confidence="medium", reader=None):
    trace = [TraceStep(p, ln, n) for p, ln, n in steps]
    trace.append(TraceStep(path, line, f"stored on `{target}` (...)"))
    trace.append(TraceStep(Q, 10, f"post-load root {ROOT}"))
    return Finding(
        rule,
        path,
        line,
        1,
        line,
        symbol,
        target,
        "m",
        confidence=confidence,
        trace=trace,
        reader=reader,
    )


CFG_ALLOC = [
    ("pkg/oracle.py", 50, "`/` allocates a new tensor"),
    ("pkg/config.py", 20, "QuantDesc keeps a new tensor on self.scale (dataclass field)"),
]
EXPERTS = [
    (E, 30, "`torch.full` allocates a new tensor"),
    (E, 31, "TrtExperts keeps a new tensor on self.gemm1_alpha"),
    ("pkg/oracle.py", 70, "the oracle may choose TrtExperts"),
]


def _case():
    config = _f("RL105", Q, 20, "self.moe_quant_config", CFG_ALLOC, confidence="high", reader="r")
    kernel = _f("RL105", Q, 22, "self.moe_kernel", [*EXPERTS, *CFG_ALLOC])
    alpha = _f("RL102", E, 31, "self.gemm1_alpha", EXPERTS[:1], symbol="TrtExperts.__init__")
    # read out of the quant config the experts hold, in the experts' own post-load
    held = _f(
        "RL102",
        E,
        40,
        "self._fc2_scale",
        [
            CFG_ALLOC[0],
            ("pkg/config.py", 33, "`self.quant_config._a2.scale` holds it: a tensor allocated"),
        ],
        symbol="TrtExperts.process_weights_after_loading",
    )
    # the same helper called for two weights: identical traces, two storages
    w13 = _f("RL101", Q, 25, "layer.w13", [("pkg/h.py", 5, "`torch.empty` allocates a new tensor")])
    w2 = _f("RL101", Q, 26, "layer.w2", [("pkg/h.py", 5, "`torch.empty` allocates a new tensor")])
    fs = [config, kernel, alpha, held, w13, w2]
    compute_fingerprints(fs)
    return fs


def test_folds_config_experts_field_and_held_read_into_the_kernel():
    fs = _case()
    config, kernel, alpha, held, w13, w2 = fs
    out = fold_shared_storage(list(fs))
    assert out == [kernel, w13, w2]
    assert [a["target"] for a in kernel.also] == [
        "self.gemm1_alpha",
        "self._fc2_scale",
        "self.moe_quant_config",
    ]
    assert {a["fingerprint"] for a in kernel.also} == {
        config.fingerprint,
        alpha.fingerprint,
        held.fingerprint,
    }
    # the host carries the strongest evidence of what it absorbed
    assert kernel.confidence == "high" and kernel.reader == "r"
    # the fingerprints of what is still reported do not change
    before = {f.target: f.fingerprint for f in _case()}
    assert all(before[f.target] == f.fingerprint for f in out)
    # folding again (a second gate over the same result) adds nothing
    fold_shared_storage(fs)
    assert len(kernel.also) == 3


def test_not_folded_into_a_suppressed_host_or_another_methods_kernel():
    fs = _case()
    fs[1].suppressed = "accepted"  # the kernel
    assert fold_shared_storage(list(fs)) == fs and not fs[1].also
    # a kernel of another method never hosts this method's config
    fs = _case()
    fs[1].symbol = "OtherMethod.process_weights_after_loading"
    assert fs[0] in fold_shared_storage(list(fs))
    # an experts class the kernel's trace never names is not read out of it
    fs = _case()
    fs[3].symbol = "OtherExperts.process_weights_after_loading"
    assert fs[3] in fold_shared_storage(list(fs))


def test_gate_note_names_the_folded_entries():
    from reload_lint.gate import GateOutcome, gate_notes

    fs = _case()
    entries = [BaselineEntry(f.fingerprint, f.rule, f.path, f.symbol, f.target, "") for f in fs]
    res = match_baseline(fold_shared_storage(list(fs)), entries)
    out = GateOutcome(reported=res.new, shown=[], suppressed=[], errors=[])
    out.baseline_active, out.baselined, out.stale, out.folded = True, 3, res.stale, res.folded
    notes = gate_notes(out, strict=True, show_suppressed=False)
    assert notes[0] == "baseline: 3 known findings matched, 0 stale entries"
    assert "3 entries now folded into another finding's `also`" in notes[1]
    assert any("`self.moe_quant_config`" in n and "-> pkg/quant.py:22 RL105" in n for n in notes)


def test_also_in_json_only_when_set_and_read_back():
    fs = _case()
    out = fold_shared_storage(list(fs))
    kernel = out[0]
    data = json.loads(json.dumps(kernel.to_json()))
    assert [a["target"] for a in data["also"]][-1] == "self.moe_quant_config"
    assert Finding.from_json(data).also == kernel.also
    assert "also" not in out[1].to_json()


def test_baseline_written_before_the_fold_says_what_changed():
    fs = _case()
    entries = [BaselineEntry(f.fingerprint, f.rule, f.path, f.symbol, f.target, "") for f in fs]
    res = match_baseline(fold_shared_storage(list(fs)), entries)
    assert res.new == [] and res.stale == []
    assert sorted(e.target for e, _ in res.folded) == [
        "self._fc2_scale",
        "self.gemm1_alpha",
        "self.moe_quant_config",
    ]
    assert all(host.target == "self.moe_kernel" for _, host in res.folded)
    # a folded finding that is really gone (its host fixed too) is stale as before
    res = match_baseline([fs[4], fs[5]], entries)
    assert {e.target for e in res.stale} == {
        "self.moe_kernel",
        "self.moe_quant_config",
        "self.gemm1_alpha",
        "self._fc2_scale",
    }


def test_text_output_lists_what_was_folded():
    from reload_lint.render.text import render_text

    kernel = fold_shared_storage(_case())[0]
    text = render_text([kernel], [])
    assert "    also: pkg/quant.py:20: RL105 `self.moe_quant_config`" in text
    assert "    also: pkg/experts.py:31: RL102 `self.gemm1_alpha`" in text


def _experts_post_load(note="`torch.ones` allocates a new tensor", reader_cls="TrtExperts"):
    """A tensor the experts' own post-load allocates and keeps, read by the experts' apply."""
    return _f(
        "RL102",
        E,
        60,
        "self._unit_scale",
        [(E, 60, note)],
        symbol="TrtExperts.process_weights_after_loading",
        reader=f"{E}:80 in {reader_cls}.apply",
    )


def test_allocated_by_a_later_method_of_an_oracle_pick_folds_into_the_kernel():
    fs = _case()
    unit = _experts_post_load()
    compute_fingerprints([unit])
    out = fold_shared_storage([*fs, unit])
    assert unit not in out
    assert unit.fingerprint in {a["fingerprint"] for a in fs[1].also}


def test_allocated_by_a_later_method_not_folded_when_not_shown_as_its_own():
    # a callee assumed to return a new tensor may return a view: not known to be its storage
    unit = _experts_post_load(note="unknown callee `ext.swizzle` assumed to return a new tensor")
    assert unit in fold_shared_storage([*_case(), unit])
    # read by another class's apply: not read out of the rebuilt object
    unit = _experts_post_load(reader_cls="OtherRunner")
    assert unit in fold_shared_storage([*_case(), unit])
    # the kernel only keeps an object of that class, handed in by its caller (not an oracle's
    # pick it builds): that object may be reused across loads, with its own storage
    fs = _case()
    fs[1].trace = [s for s in fs[1].trace if "the oracle may choose" not in s.note]
    fs[1].trace.append(TraceStep(Q, 21, "Kernel keeps a rebuilt TrtExperts holding tensors"))
    unit = _experts_post_load()
    assert unit in fold_shared_storage([*fs, unit])
