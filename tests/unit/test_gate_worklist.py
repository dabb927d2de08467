"""The worklist: RFC-table rows grouped by contract and area, evidence merged by fingerprint,
stored target or trace."""

from __future__ import annotations

import json

import pytest
from _gate_util import FakeEngine, finding, fingerprinted

from reload_lint.cli import main
from reload_lint.errors import ReloadLintError
from reload_lint.findings import TraceStep
from reload_lint.render.worklist import (
    area_of,
    component_of,
    likely_failure,
    load_evidence,
    merge_evidence,
    render_worklist,
)

MARLIN = "vllm/model_executor/kernels/linear/mixed_precision/marlin.py"
MACHETE = "vllm/model_executor/kernels/linear/mixed_precision/machete.py"
UTILS = "vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py"


def _findings():
    return fingerprinted(
        [
            finding(MARLIN, 120, target="layer.workspace", symbol="MarlinLinearKernel.pwal"),
            finding(
                MARLIN, 131, target="layer.g_idx_sort_indices", symbol="MarlinLinearKernel.pwal"
            ),
            finding(
                MACHETE,
                83,
                rule="RL103",
                target="self.act_perm",
                symbol="MacheteLinearKernel.process_weights_after_loading",
                trace=[
                    TraceStep(MACHETE, 75, "allocated by torch.argsort"),
                    TraceStep(MACHETE, 83, "captured by functools.partial"),
                    TraceStep(MACHETE, 120, "read at apply_weights"),
                ],
            ),
            finding(UTILS, 135, target="layer.workspace", symbol="prepare_fp8_layer_for_marlin"),
            finding("sglang/srt/x.py", 5, contract="inplace-only", rule="RL109", symbol="A.f"),
        ]
    )


def _evidence(tmp_path, records):
    p = tmp_path / "ev.json"
    p.write_text(json.dumps({"schema_version": "1.0", "evidence": records}))
    return p


def test_helpers():
    assert component_of(finding(MARLIN, 1, symbol="MarlinLinearKernel.pwal")) == (
        "MarlinLinearKernel"
    )
    assert component_of(finding(UTILS, 1, symbol="prepare_fp8_layer_for_marlin")) == (
        "marlin_utils_fp8"
    )
    assert area_of(MARLIN) == "kernels/linear/mixed_precision"
    assert area_of(UTILS) == "quantization/utils"
    assert area_of("pkg/k.py") == "pkg"
    assert likely_failure(finding(target="layer.workspace")) == "livelock"
    assert likely_failure(finding(target="self.act_perm", rule="RL103")) == "stale read"
    assert likely_failure(finding(target="layer.g_idx_sort_indices")) == "illegal access"


def test_static_only_table():
    md = render_worklist(_findings(), title="W", source="vllm 0.25.1 release sources")
    assert md.startswith("# W\n")
    assert "## Reload contract: `vllm-layerwise`" in md
    assert "## Reload contract: `inplace-only`" in md
    assert "### kernels/linear/mixed_precision" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| MarlinLinearKernel"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "MarlinLinearKernel"
    assert cells[1] == "`layer.workspace`, `layer.g_idx_sort_indices`"
    assert cells[2] == f"`{MARLIN}:120,131`"
    assert cells[3] == "RL101 unregistered-module-tensor"
    assert cells[4] == "livelock, illegal access"
    assert cells[6] == "static only"
    machete = next(ln for ln in md.splitlines() if ln.startswith("| MacheteLinearKernel"))
    assert "read at machete.py:120" in machete and "stale read" in machete
    # Every table row has the header's 7 cells.
    for ln in md.splitlines():
        if ln.startswith("| ") and "Component" not in ln and "Site" not in ln:
            assert ln.count(" | ") == 6, ln


def test_evidence_statuses(tmp_path):
    fs = _findings()
    by_target = {(f.path, f.target): f for f in fs}
    ws = by_target[(MARLIN, "layer.workspace")]
    gidx = by_target[(MARLIN, "layer.g_idx_sort_indices")]
    perm = by_target[(MACHETE, "self.act_perm")]
    utils = by_target[(UTILS, "layer.workspace")]
    p = _evidence(
        tmp_path,
        [
            {
                "fingerprint": ws.fingerprint,
                "verdict": "red",
                "failure": "livelock",
                "reason": "88/88 pointers moved; replay hung",
                "fixed": False,
            },
            {
                "fingerprint": ws.fingerprint,
                "verdict": "green",
                "reason": "pointers stable",
                "fixed": True,
            },
            {
                "fingerprint": gidx.fingerprint,
                "verdict": "red",
                "failure": "stale read",
                "reason": "88/88 moved",
                "fixed": False,
            },
            {
                "fingerprint": perm.fingerprint,
                "verdict": "inconclusive",
                "reason": "needs SM90",
                "fixed": False,
            },
            {"fingerprint": "f" * 20, "verdict": "red", "reason": "gone"},
        ],
    )
    ev = load_evidence(p)
    attached, unmatched = merge_evidence(fs, ev)
    by_fp = dict(zip((f.fingerprint for f in fs), attached, strict=True))
    assert by_fp[ws.fingerprint].status == "fixed green"
    assert by_fp[gidx.fingerprint].status == "confirmed red"
    assert by_fp[perm.fingerprint].status == "inconclusive"
    assert by_fp[utils.fingerprint] is None
    assert {m.via for f in (ws, gidx, perm) for m in by_fp[f.fingerprint].matches} == {
        "fingerprint"
    }
    assert [r.fingerprint for r in unmatched] == ["f" * 20]
    md = render_worklist(fs, evidence=ev)
    marlin = next(ln for ln in md.splitlines() if ln.startswith("| MarlinLinearKernel"))
    assert "confirmed red (1/2), fixed green (1/2)" in marlin
    # Bug side: the most decisive record, the row's others counted; fixed side apart.
    assert (
        "red: 88/88 pointers moved; replay hung (+1 more red: "
        f"`{gidx.fingerprint}`); fixed side green: pointers stable" in marlin
    )
    assert "via" not in marlin
    assert "stale read" in marlin  # runtime failure overrides the static guess
    assert "Runtime evidence: 5 records; 4 matched directly" in md
    assert "0 via trace" in md and "1 without a static finding" in md
    assert "Findings with evidence: 3 directly, 0 only via trace." in md
    u = next(ln for ln in md.splitlines() if ln.startswith("| marlin_utils_fp8"))
    assert u.rstrip().endswith("| static only |")
    # The unmatched record is listed, not dropped.
    tail = md.split("## Evidence without a static finding", 1)[1]
    assert f"| `{'f' * 20}` |  |  | bug | red | gone |" in tail


@pytest.mark.parametrize(
    "content, needle",
    [
        ("{", "corrupt evidence JSON"),
        ('{"x": 1}', "corrupt evidence"),
        ('[{"verdict": "red"}]', "record 1 has no `fingerprint`"),
        ('[{"fingerprint": "a", "verdict": "maybe"}]', "`verdict` must be one of"),
        ('[{"fingerprint": "a", "verdict": "red", "reason": 3}]', "must be strings"),
        ("[3]", "record 1 is not an object"),
    ],
)
def test_bad_evidence(tmp_path, content, needle):
    p = tmp_path / "e.json"
    p.write_text(content)
    with pytest.raises(ReloadLintError) as exc:
        load_evidence(p)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_accepted_section_and_pipes_escaped():
    fs = _findings()
    acc = fingerprinted([finding("pkg/a.py", 3, target="layer.x")])
    acc[0].suppressed = "allowlisted (allowlists/vllm.toml#1): read | only at load"
    md = render_worklist(fs, accepted=acc)
    assert "## Accepted by allowlist" in md
    assert "read \\| only at load" in md


def test_cli_worklist_from_run_and_from_json(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vllm").mkdir()
    FakeEngine(_findings()).install(monkeypatch)
    assert main(["worklist", "vllm", "-o", "w.md", "--title", "T"]) == 0
    md = (tmp_path / "w.md").read_text()
    assert md.startswith("# T") and "MarlinLinearKernel" in md
    assert main(["check", "vllm", "--format", "json", "-o", "f.json"]) == 1
    assert main(["worklist", "--findings", "f.json", "-o", "w2.md", "--title", "T"]) == 0
    assert (tmp_path / "w2.md").read_text() == md
    (tmp_path / "bad.json").write_text("[]")
    assert main(["worklist", "--findings", "f.json", "--evidence", "bad.json"]) == 0
    assert main(["worklist", "--findings", "f.json", "--evidence", "missing.json"]) == 2
    err = capsys.readouterr().err
    assert "evidence file not found" in err


def test_empty_worklist():
    md = render_worklist([])
    assert "No findings." in md and "0 components, 0 findings" in md


# --- evidence that drifted from the engine's fingerprints ------------------------------------

CUTLASS = "vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py"
FP8 = "vllm/model_executor/layers/quantization/fp8.py"
W4A8 = "vllm/model_executor/layers/quantization/compressed_tensors/w4a8_fp8.py"


def _rebuild(path, line, symbol, steps):
    """An RL105 finding on `self.moe_kernel = ...` whose trace lists constructor stores."""
    trace = [TraceStep(CUTLASS, ln, note) for ln, note in steps]
    trace += [
        TraceStep(path, line, "stored on `self.moe_kernel` (rebuilt FusedMoEKernel ...)"),
        TraceStep(path, line + 50, f"read at apply time in {symbol.split('.')[0]}.apply"),
    ]
    return finding(path, line, rule="RL105", symbol=symbol, target="self.moe_kernel", trace=trace)


FP8_STEPS = [
    (289, "`torch.full` allocates a new tensor"),
    (294, "CutlassBatchedExpertsFp8 keeps a new tensor on self.ab_strides1"),
    (296, "CutlassBatchedExpertsFp8 keeps a new tensor on self.c_strides1"),
]
W4A8_STEPS = [
    (
        1271,
        "`torch.full` allocates a new tensor; CutlassExpertsW4A8Fp8 keeps a new tensor on "
        "self.c_strides1",
    ),
]


def _record(target, line, verdict, *, fixed=False, fp="0" * 20, path=CUTLASS, **kw):
    return {
        "fingerprint": fp,
        "rule": "RL105",
        "path": path,
        "line": line,
        "symbol": kw.pop("symbol", "CutlassExpertsFp8Base.__init__"),
        "target": target,
        "verdict": verdict,
        "fixed": fixed,
        "reason": kw.pop("reason", f"{target} {verdict}"),
        **kw,
    }


def _row(md, component):
    return next(ln for ln in md.splitlines() if ln.startswith(f"| {component} "))


def test_trace_same_line_attaches_constructor_evidence(tmp_path):
    fs = fingerprinted(
        [
            _rebuild(FP8, 711, "Fp8MoEMethod._setup_kernel", FP8_STEPS),
            _rebuild(W4A8, 197, "W4A8MoEMethod.process_weights_after_loading", W4A8_STEPS),
        ]
    )
    p = _evidence(
        tmp_path,
        [
            _record("self.ab_strides1", 294, "red", failure="illegal access", fp="a" * 20),
            _record("self.ab_strides1", 294, "green", fixed=True, fp="a" * 20),
            _record("self.c_strides1", 296, "red", failure="illegal access", fp="c" * 20),
            _record("self.c_strides1", 296, "green", fixed=True, fp="c" * 20),
        ],
    )
    attached, unmatched = merge_evidence(fs, load_evidence(p))
    by_path = {f.path: ev for f, ev in zip(fs, attached, strict=True)}
    fp8, w4a8 = by_path[FP8], by_path[W4A8]
    assert not unmatched
    assert {m.via for m in fp8.matches} == {"trace"} and len(fp8.matches) == 4
    assert fp8.status == "fixed green" and fp8.failure == "illegal access"
    # Line 296 matched the FP8 trace, so the by-name fallback is not tried: the W4A8 experts'
    # own `self.c_strides1` (another class, another line) gets no evidence it did not earn.
    assert w4a8 is None
    md = render_worklist(fs, evidence=load_evidence(p))
    row = _row(md, "Fp8MoEMethod")
    assert (
        "red via trace from `CutlassExpertsFp8Base.__init__` `self.ab_strides1`: "
        "self.ab_strides1 red (+1 more red: `self.c_strides1`); "
        "fixed side green via trace: self.ab_strides1 green (+1 more green: `self.c_strides1`)"
    ) in row
    cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
    assert cells[4] == "illegal access" and cells[6] == "fixed green"
    assert _row(md, "W4A8MoEMethod").rstrip().endswith("| static only |")
    assert "0 matched directly" in md and "4 via trace" in md
    assert "Findings with evidence: 0 directly, 1 only via trace." in md
    assert "Evidence without a static finding" not in md


def test_trace_note_naming_the_attribute_when_lines_moved(tmp_path):
    fs = fingerprinted([_rebuild(W4A8, 197, "W4A8MoEMethod.pwal", W4A8_STEPS)])
    rec = _record("self.c_strides1", 1266, "red", symbol="CutlassExpertsW4A8Fp8.__init__")
    attached, unmatched = merge_evidence(fs, load_evidence(_evidence(tmp_path, [rec])))
    assert not unmatched and [m.via for m in attached[0].matches] == ["trace"]
    assert attached[0].status == "confirmed red"
    # The name must be the whole attribute, in the record's file, on an allocation step.
    for other in (
        _record("self.c_strides", 1266, "red"),
        _record("self.c_strides1", 1266, "red", path=FP8),
    ):
        _, unmatched = merge_evidence(fs, load_evidence(_evidence(tmp_path, [other])))
        assert len(unmatched) == 1, other


def test_read_step_on_the_line_is_not_an_allocation(tmp_path):
    fs = fingerprinted([_rebuild(FP8, 711, "Fp8MoEMethod._setup_kernel", FP8_STEPS)])
    rec = _record("self.x", 761, "red", path=FP8, symbol="Fp8MoEMethod.apply")
    _, unmatched = merge_evidence(fs, load_evidence(_evidence(tmp_path, [rec])))
    assert len(unmatched) == 1


def test_target_match_when_the_fingerprint_drifted(tmp_path):
    sym = "MacheteLinearKernel.process_weights_after_loading"
    fs = fingerprinted(
        [
            finding(MACHETE, 77, rule="RL103", symbol=sym, target="self.act_perm"),
            finding(MACHETE, 83, rule="RL103", symbol=sym, target="self.act_perm"),
            finding(UTILS, 135, target="layer.workspace", symbol="prepare_fp8_layer_for_marlin"),
            finding(UTILS, 283, target="layer.workspace", symbol="prepare_fp8_moe_layer"),
        ]
    )
    l77, l83, u135, u283 = fs
    recs = [
        # The sweep's fingerprint now belongs to the line-77 finding; the record ran on line 83.
        _record("self.act_perm", 83, "red", path=MACHETE, symbol=sym, fp=l77.fingerprint),
        _record(
            "self.act_perm", 83, "green", fixed=True, path=MACHETE, symbol=sym, fp=l77.fingerprint
        ),
        # A stale fingerprint; the target is stored in two functions of the file: the record's
        # function decides.
        _record("layer.workspace", 130, "red", path=UTILS, symbol="prepare_fp8_layer_for_marlin"),
    ]
    attached, unmatched = merge_evidence(fs, load_evidence(_evidence(tmp_path, recs)))
    assert not unmatched
    ev = dict(zip((f.line for f in fs), attached, strict=True))
    assert [m.via for m in ev[77].matches] == ["fingerprint", "fingerprint"]
    assert [m.via for m in ev[83].matches] == ["target", "target"]  # both sides
    assert ev[77].status == ev[83].status == "fixed green"
    assert [m.via for m in ev[135].matches] == ["target"] and ev[283] is None
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs)))
    assert "| MacheteLinearKernel |" in md and "via" not in _row(md, "MacheteLinearKernel")
    u = _row(md, "marlin_utils_fp8")
    assert "red via target from `prepare_fp8_layer_for_marlin` `layer.workspace`" in u
    assert u.rstrip().endswith("| confirmed red (1/2), static only (1/2) |")
    assert " 1 only via trace" not in md


def test_row_verdicts_red_beats_green_beats_inconclusive(tmp_path):
    fs = fingerprinted([_rebuild(FP8, 711, "Fp8MoEMethod._setup_kernel", FP8_STEPS)])
    recs = [
        _record("self.c_strides1", 296, "inconclusive", reason="no recipe"),
        _record("self.c_strides1", 296, "green", reason="stable"),
        _record("self.ab_strides1", 294, "red", reason="freed", failure="livelock"),
        _record("self.ab_strides1", 294, "red", fixed=True, reason="fix leaks"),
        _record("self.c_strides1", 296, "green", fixed=True, reason="fix holds"),
    ]
    attached, _ = merge_evidence(fs, load_evidence(_evidence(tmp_path, recs)))
    ev = attached[0]
    assert ev.bug.reason == "freed" and ev.fix.reason == "fix leaks"
    assert ev.status == "confirmed red" and ev.failure == "livelock"
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs[:2])))
    row = _row(md, "Fp8MoEMethod")
    assert "green via trace from `CutlassExpertsFp8Base.__init__` `self.c_strides1`: stable" in row
    assert "(+1 inconclusive: `self.c_strides1`)" in row
    assert row.rstrip().endswith("| not reproduced |")
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs[2:])))
    row = _row(md, "Fp8MoEMethod")
    assert "red via trace" in row and "; fixed side red via trace: fix leaks" in row
    assert "(+1 green: `self.c_strides1`)" in row and "livelock" in row


def test_unmatched_records_are_listed(tmp_path):
    fs = fingerprinted([_rebuild(FP8, 711, "Fp8MoEMethod._setup_kernel", FP8_STEPS)])
    recs = [
        _record("self.ab_strides1", 294, "red", fp="a" * 20),
        _record(
            "self.gemm1_alpha",
            107,
            "inconclusive",
            path="vllm/x/flashinfer_cutlass_moe.py",
            symbol="FlashInferExperts.__init__",
            reason="no recipe | generic fallback",
            fp="b" * 20,
        ),
    ]
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs)))
    assert "1 without a static finding (listed at the end)" in md
    tail = md.split("## Evidence without a static finding", 1)[1]
    assert (
        "| `vllm/x/flashinfer_cutlass_moe.py:107` | `FlashInferExperts.__init__` | "
        "`self.gemm1_alpha` | bug | inconclusive | no recipe \\| generic fallback |"
    ) in tail
    assert "self.ab_strides1" not in tail


def test_committed_worklist_merges_the_h200_evidence():
    """The committed example carries the H200 sweep: every record attached or listed."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    md = (root / "docs/worklist-vllm-0.25.1.md").read_text()
    evidence = json.loads((root / "docs/evidence/h200-vllm-0.25.1.json").read_text())
    records = evidence["evidence"]
    assert f"Runtime evidence: {len(records)} records;" in md
    assert "via trace from `CutlassExpertsFp8Base.__init__` `self.ab_strides1`" in md
    for comp in ("MarlinLinearKernel", "MacheteLinearKernel", "marlin_utils_fp8", "Fp8MoEMethod"):
        assert "fixed green" in _row(md, comp), comp
