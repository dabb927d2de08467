"""The worklist: RFC-table rows grouped by contract and area; runtime evidence attached only to
the site it ran on (fingerprint, stored target, or a trace step the record shows this component
built); header counts per status and tier; the likely failure from rule, tensor kind and family."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _gate_util import FakeEngine, finding, fingerprinted

from reload_lint.cli import main
from reload_lint.errors import ReloadLintError
from reload_lint.findings import TraceStep
from reload_lint.render.likely_failure import family_of, likely_failure
from reload_lint.render.worklist import (
    STATUS_ORDER,
    area_of,
    component_of,
    load_evidence,
    merge_evidence,
    render_worklist,
)

ROOT = Path(__file__).resolve().parents[2]
MARLIN = "vllm/model_executor/kernels/linear/mixed_precision/marlin.py"
MACHETE = "vllm/model_executor/kernels/linear/mixed_precision/machete.py"
UTILS = "vllm/model_executor/layers/quantization/utils/marlin_utils_fp8.py"
MARLIN_UTILS = "vllm/model_executor/layers/quantization/utils/marlin_utils.py"


def _zeros_workspace(path, line, target):
    """The engine's trace of a Marlin workspace: `torch.zeros` in marlin_utils, stored here."""
    return [
        TraceStep(MARLIN_UTILS, 405, "`torch.zeros` allocates a new tensor"),
        TraceStep(MARLIN_UTILS, 399, "returned by marlin_make_workspace_new"),
        TraceStep(path, line, f"stored on `{target}` (plain tensor attribute, not registered)"),
        TraceStep(path, line + 100, "read at apply time in X.apply_weights"),
    ]


def _findings():
    return fingerprinted(
        [
            finding(
                MARLIN,
                120,
                target="layer.workspace",
                symbol="MarlinLinearKernel.pwal",
                trace=_zeros_workspace(MARLIN, 120, "layer.workspace"),
            ),
            finding(
                MARLIN,
                131,
                target="layer.g_idx_sort_indices",
                symbol="MarlinLinearKernel.pwal",
                trace=[
                    TraceStep(MARLIN_UTILS, 430, "`torch.argsort` allocates a new tensor"),
                    TraceStep(MARLIN, 131, "stored on `layer.g_idx_sort_indices`"),
                ],
            ),
            finding(
                MACHETE,
                83,
                rule="RL103",
                target="self.act_perm",
                symbol="MacheteLinearKernel.process_weights_after_loading",
                trace=[
                    TraceStep(MACHETE, 75, "`torch.argsort` allocates a new tensor"),
                    TraceStep(MACHETE, 83, "captured by functools.partial"),
                    TraceStep(MACHETE, 120, "read at apply_weights"),
                ],
                reader=f"{MACHETE}:120 in MacheteLinearKernel.apply_weights",
            ),
            finding(
                UTILS,
                135,
                target="layer.workspace",
                symbol="prepare_fp8_layer_for_marlin",
                trace=_zeros_workspace(UTILS, 135, "layer.workspace"),
            ),
            finding("sglang/srt/x.py", 5, contract="inplace-only", rule="RL109", symbol="A.f"),
        ]
    )


def _evidence(tmp_path, records, name="ev.json"):
    p = tmp_path / name
    p.write_text(json.dumps({"schema_version": "1.1", "evidence": records}))
    return p


def _row(md, component):
    return next(ln for ln in md.splitlines() if ln.startswith(f"| {component} "))


def _cells(row):
    return [c.strip() for c in row.strip().strip("|").split(" | ")]


def _counts(md):
    """The header's status x tier table: {status: (replay, census, none, all)}."""
    out = {}
    for ln in md.split("| Status | replay", 1)[1].split("\n\n", 1)[0].splitlines()[2:]:
        cells = _cells(ln)
        out[cells[0].strip("*")] = tuple(int(c) for c in cells[1:])
    return out


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
    assert family_of(UTILS) == "marlin"
    assert family_of("vllm/x/flashinfer_cutlass_moe.py") == "flashinfer"
    assert family_of("vllm/x/cutlass_moe.py") == "cutlass"
    assert family_of("vllm/x/fp8.py") == ""


# --- likely failure: rule, tensor kind, kernel family, dtype; never the attribute's name ------


def _made_by(op, path="pkg/kern.py", *, target="layer.t", rule="RL101", more=()):
    steps = [TraceStep(path, 3, f"`{op}` allocates a new tensor")]
    steps += [TraceStep(path, 4, f"`{m}` returns a new tensor") for m in more]
    steps.append(TraceStep(path, 10, f"stored on `{target}`"))
    return finding(path, 10, rule=rule, target=target, trace=steps)


@pytest.mark.parametrize(
    "f, dtype, expected",
    [
        # The name says nothing: a "buffer" made by argsort is an index, a "perm" from zeros in
        # a non-Marlin file has no known failure.
        (_made_by("torch.argsort", target="layer.scratch_buf"), "", "illegal access"),
        (_made_by("torch.zeros", target="layer.perm_workspace_lock"), "", ""),
        # Zero-initialised storage read by a Marlin kernel: its lock counters -> livelock,
        # unless the census says the storage is floating point.
        (_made_by("torch.zeros", "vllm/q/marlin_utils.py"), "", "livelock"),
        (_made_by("torch.zeros", "vllm/q/marlin_utils.py"), "int32", "livelock"),
        (_made_by("torch.zeros", "vllm/q/marlin_utils.py"), "float16", "stale read"),
        # Constants: integer (CUTLASS strides) -> illegal access, else values -> stale read.
        (_made_by("torch.full", "vllm/e/cutlass_moe.py"), "", "illegal access"),
        (_made_by("torch.full", "vllm/e/flashinfer_cutlass_moe.py"), "", "stale read"),
        (_made_by("torch.full", "pkg/kern.py"), "torch.int64", "illegal access"),
        (_made_by("torch.ones", "pkg/kern.py"), "", "stale read"),
        # Arithmetic through kind-keeping ops -> a value; kind-keeping ops alone -> unknown.
        (_made_by("*", more=(".clamp()", ".to()")), "", "stale read"),
        (_made_by("torch.argsort", more=(".to()", ".contiguous()")), "", "illegal access"),
        (_made_by(".to()"), "", ""),
        (_made_by(".to()"), "bfloat16", "stale read"),
        # The rule decides when the old storage stays alive.
        (_made_by("torch.argsort", rule="RL103"), "", "stale read"),
        (_made_by("torch.zeros", rule="RL202"), "", "stale read"),
    ],
)
def test_likely_failure_from_rule_kind_family_and_dtype(f, dtype, expected):
    assert likely_failure(f, dtype) == expected


def test_likely_failure_unknown_callee_and_rebuilt_objects():
    unknown = finding(
        "vllm/q/marlin_utils.py",
        9,
        trace=[
            TraceStep("pkg/k.py", 2, "`torch.zeros` allocates a new tensor"),
            TraceStep("pkg/k.py", 5, "unknown callee `ext.shuffle` assumed to return a new tensor"),
            TraceStep("vllm/q/marlin_utils.py", 9, "stored on `layer.w`"),
        ],
    )
    assert likely_failure(unknown) == ""
    cutlass = "vllm/e/cutlass_moe.py"
    strides = [
        TraceStep(cutlass, 289, "`torch.full` allocates a new tensor"),
        TraceStep(cutlass, 294, "CutlassBatchedExpertsFp8 keeps a new tensor on self.ab_strides1"),
    ]
    store = [TraceStep("vllm/q/fp8.py", 711, "stored on `self.moe_kernel` (rebuilt ...)")]
    rebuilt = finding("vllm/q/fp8.py", 711, rule="RL105", target="self.moe_kernel")
    rebuilt.trace = strides + store
    assert likely_failure(rebuilt) == "illegal access"
    consts = [TraceStep("vllm/e/flashinfer_cutlass_moe.py", 107, "`torch.tensor` allocates")]
    rebuilt.trace = strides + consts + store  # strides and float constants disagree
    assert likely_failure(rebuilt) == ""


def test_static_only_table():
    md = render_worklist(_findings(), title="W", source="vllm 0.25.1 release sources")
    assert md.startswith("# W\n")
    assert "## Reload contract: `vllm-layerwise`" in md
    assert "## Reload contract: `inplace-only`" in md
    assert "### kernels/linear/mixed_precision" in md
    assert "Status of findings: static only 5." in md and "| Status | replay" not in md
    cells = _cells(_row(md, "MarlinLinearKernel"))
    assert cells[0] == "MarlinLinearKernel"
    assert cells[1] == "`layer.workspace`, `layer.g_idx_sort_indices`"
    assert cells[2] == f"`{MARLIN}:120,131`"
    assert cells[3] == "RL101 unregistered-module-tensor"
    assert cells[4] == "livelock, illegal access"
    assert cells[6] == "static only"
    machete = _row(md, "MacheteLinearKernel")
    assert "read at machete.py:120" in machete and "stale read" in machete
    assert _cells(_row(md, "A"))[4] == ""  # nothing in its trace settles the failure
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
                "tier": "replay",
            },
            {
                "fingerprint": ws.fingerprint,
                "verdict": "green",
                "reason": "pointers stable",
                "fixed": True,
                "tier": "replay",
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
    assert by_fp[ws.fingerprint].tier == "replay"
    assert by_fp[gidx.fingerprint].status == "confirmed red"
    assert by_fp[perm.fingerprint].status == "inconclusive"
    assert by_fp[utils.fingerprint] is None
    assert {m.via for f in (ws, gidx, perm) for m in by_fp[f.fingerprint].matches} == {
        "fingerprint"
    }
    assert [r.fingerprint for r in unmatched] == ["f" * 20]
    md = render_worklist(fs, evidence=ev)
    marlin = _row(md, "MarlinLinearKernel")
    assert "confirmed red (1/2), fixed green (1/2)" in marlin
    # Bug side: the most decisive record, the row's others counted; fixed side apart.
    assert (
        "red-observed (replay): 88/88 pointers moved; replay hung (+1 red-observed (no tier): "
        f"`{gidx.fingerprint}`); fixed side green (replay): pointers stable" in marlin
    )
    assert "via" not in marlin
    # The runtime failure replaces the static guess (argsort: illegal access).
    assert _cells(marlin)[4] == "livelock, stale read"
    assert "Runtime evidence: 5 records; 4 matched directly" in md
    assert "0 via trace with proof" in md and "0 reach findings only via trace" in md
    assert "1 without a static finding" in md
    assert "Findings with evidence: 3 directly, 0 only via a proven trace, 0 unconfirmed." in md
    counts = _counts(md)
    assert list(counts) == [*STATUS_ORDER, "all"]
    assert counts["fixed green"] == (1, 0, 0, 1)
    assert counts["confirmed red"] == (0, 0, 1, 1)
    assert counts["inconclusive"] == (0, 0, 1, 1)
    assert counts["static only"] == (0, 0, 2, 2)
    assert counts["all"] == (1, 0, 4, 5)
    u = _row(md, "marlin_utils_fp8")
    assert u.rstrip().endswith("| static only |")
    # The unmatched record is listed, not dropped.
    tail = md.split("## Evidence without a static finding", 1)[1]
    assert f"| `{'f' * 20}` |  |  | bug | red-unobserved | gone |" in tail


def test_unread_census_tier_and_dtype(tmp_path):
    """`unread` is its own status; a census record shows its stand-ins; the census's dtype of
    the linked storage refines the static guess when no red record names a failure."""
    fs = _findings()
    ws = next(f for f in fs if f.path == UTILS)
    gidx = next(f for f in fs if f.target == "layer.g_idx_sort_indices")
    census = {
        "linked": ["layer.workspace"],
        "rows": [
            {"path": "layer.weight", "dtype": "float8_e4m3fn"},
            {"path": "layer.workspace", "dtype": "float32"},
        ],
    }
    recs = [
        {
            "fingerprint": ws.fingerprint,
            "verdict": "unread",
            "reason": "workspace freed; the capture never read it",
            "tier": "census",
            "standins": ["_C.marlin_gemm"],
            "census": census,
        },
        {"fingerprint": ws.fingerprint, "verdict": "green", "fixed": True, "tier": "census"},
        {"fingerprint": gidx.fingerprint, "verdict": "green", "tier": "replay"},
    ]
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs)))
    cells = _cells(_row(md, "marlin_utils_fp8"))
    assert cells[6] == "unread"  # a green fixed side does not make an unread site "fixed"
    assert cells[5].startswith(
        "unread (census, stand-ins: `_C.marlin_gemm`): workspace freed; the capture never read it"
    )
    assert cells[4] == "stale read"  # zeroed + float32 from the census, not the Marlin lock
    counts = _counts(md)
    assert counts["unread"] == (0, 1, 0, 1)
    assert counts["not reproduced"] == (1, 0, 0, 1)
    assert _cells(_row(md, "MarlinLinearKernel"))[6] == "static only (1/2), not reproduced (1/2)"


@pytest.mark.parametrize(
    "content, needle",
    [
        ("{", "corrupt evidence JSON"),
        ('{"x": 1}', "corrupt evidence"),
        ('[{"verdict": "red"}]', "record 1 has no `fingerprint`"),
        ('[{"fingerprint": "a", "verdict": "maybe"}]', "`verdict` must be one of"),
        ('[{"fingerprint": "a", "verdict": "red", "reason": 3}]', "must be strings"),
        ('[{"fingerprint": "a", "verdict": "red", "tier": "gpu"}]', "`tier` must be one of"),
        ('[{"fingerprint": "a", "verdict": "red", "built": "X"}]', "`built` must be a list"),
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


# --- evidence for another site: via trace only with proof the component built the object ------

CUTLASS = "vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py"
FP8 = "vllm/model_executor/layers/quantization/fp8.py"
AWQ = "vllm/model_executor/layers/quantization/auto_awq.py"
GPTQ = "vllm/model_executor/layers/quantization/auto_gptq.py"
W4A8 = "vllm/model_executor/layers/quantization/compressed_tensors/w4a8_fp8.py"
CUTLASS_MOD = "vllm.model_executor.layers.fused_moe.experts.cutlass_moe"


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


def _moe_rows():
    return fingerprinted(
        [
            _rebuild(FP8, 711, "Fp8MoEMethod._setup_kernel", FP8_STEPS),
            _rebuild(AWQ, 741, "AutoAWQMoEMethod._setup_kernel", FP8_STEPS),
            _rebuild(GPTQ, 753, "AutoGPTQMoEMethod._setup_kernel", FP8_STEPS),
        ]
    )


def _cutlass_records(failure="illegal access", **kw):
    """Red/green CUTLASS FP8 stride records, as the harness writes them."""
    return [
        _record("self.ab_strides1", 294, "red", failure=failure, fp="a" * 20, **kw),
        _record("self.ab_strides1", 294, "green", fixed=True, fp="a" * 20, **kw),
        _record("self.c_strides1", 296, "red", failure=failure, fp="c" * 20, **kw),
        _record("self.c_strides1", 296, "green", fixed=True, fp="c" * 20, **kw),
    ]


def test_cutlass_evidence_without_proof_lends_no_verdict(tmp_path):
    """The old worklist made every `moe_kernel` row whose trace reaches the CUTLASS strides
    `fixed green`. Records that name no component (or another one) prove nothing for them."""
    fs = _moe_rows()
    for extra in ({}, {"component": "Fp8MoEMethod"}, {"built": [f"{CUTLASS_MOD}.Other"]}):
        recs = load_evidence(_evidence(tmp_path, _cutlass_records("livelock", **extra)))
        attached, unmatched = merge_evidence(fs, recs)
        assert not unmatched
        assert [ev.status for ev in attached] == ["unconfirmed"] * 3, extra
        assert all(ev.bug is None and ev.fix is None and ev.failure == "" for ev in attached)
        md = render_worklist(fs, evidence=recs)
        for comp in ("AutoAWQMoEMethod", "AutoGPTQMoEMethod", "Fp8MoEMethod"):
            cells = _cells(_row(md, comp))
            assert cells[6] == "unconfirmed", (extra, comp)
            # The records' failure is not lent either: the static guess (integer constants
            # read by the CUTLASS grouped GEMM) stays.
            assert cells[4] == "illegal access" and "livelock" not in cells[5]
            assert "red" not in cells[5] and "green" not in cells[5]
            assert cells[5].startswith(
                "unconfirmed: the trace reaches `CutlassExpertsFp8Base.__init__` "
                "`self.ab_strides1`, `CutlassExpertsFp8Base.__init__` `self.c_strides1`; "
                "4 runtime record(s) there"
            )
            assert f"none showing `{comp}` built that object" in cells[5]
        assert "0 via trace with proof" in md and "4 reach findings only via trace" in md
        assert "Findings with evidence: 0 directly, 0 only via a proven trace, 3 unconfirmed." in md
        assert _counts(md)["unconfirmed"] == (0, 0, 3, 3)
        assert "Evidence without a static finding" not in md


def test_cutlass_evidence_with_built_proof_merges_for_that_component_only(tmp_path):
    fs = _moe_rows()
    proof = {
        "component": "vllm.model_executor.layers.quantization.fp8.Fp8MoEMethod",
        "built": [f"{CUTLASS_MOD}.CutlassBatchedExpertsFp8", "vllm.x.FusedMoEKernel"],
        "tier": "replay",
    }
    recs = load_evidence(_evidence(tmp_path, _cutlass_records(**proof)))
    attached, _ = merge_evidence(fs, recs)
    by = {f.symbol.split(".")[0]: ev for f, ev in zip(fs, attached, strict=True)}
    fp8 = by["Fp8MoEMethod"]
    assert {(m.via, m.proof) for m in fp8.matches} == {("trace", "CutlassBatchedExpertsFp8")}
    assert fp8.status == "fixed green" and fp8.failure == "illegal access"
    assert by["AutoAWQMoEMethod"].status == by["AutoGPTQMoEMethod"].status == "unconfirmed"
    md = render_worklist(fs, evidence=recs)
    cells = _cells(_row(md, "Fp8MoEMethod"))
    assert cells[5] == (
        "red-observed (replay) via trace (`Fp8MoEMethod` built `CutlassBatchedExpertsFp8`) from "
        "`CutlassExpertsFp8Base.__init__` `self.ab_strides1`: self.ab_strides1 red "
        "(+1 more red-observed: `self.c_strides1`); fixed side green (replay) via trace "
        "(`Fp8MoEMethod` built `CutlassBatchedExpertsFp8`): self.ab_strides1 green "
        "(+1 more green: `self.c_strides1`)"
    )
    assert cells[4] == "illegal access" and cells[6] == "fixed green"
    awq = _cells(_row(md, "AutoAWQMoEMethod"))
    assert awq[6] == "unconfirmed" and "run for `Fp8MoEMethod`" in awq[5]
    assert "4 via trace with proof" in md
    assert "Findings with evidence: 0 directly, 1 only via a proven trace, 2 unconfirmed." in md
    counts = _counts(md)
    assert counts["fixed green"] == (1, 0, 0, 1) and counts["unconfirmed"] == (0, 0, 2, 2)


@pytest.mark.parametrize(
    "proof, ok",
    [
        # The backend vLLM chose counts like a built class; short names are compared.
        ({"component": "Fp8MoEMethod", "backend": "CutlassBatchedExpertsFp8"}, True),
        # The class whose constructor the step is in (the record's symbol), e.g. a base class
        # the harness lists among the built object's classes.
        ({"component": "Fp8MoEMethod", "built": [f"{CUTLASS_MOD}.CutlassExpertsFp8Base"]}, True),
        # A sibling that shares the base but is not named by the step or the symbol.
        ({"component": "Fp8MoEMethod", "built": [f"{CUTLASS_MOD}.CutlassExpertsW4A8Fp8"]}, False),
        # Built, but by a component of the same name defined in another file.
        (
            {"component": "vllm.other.Fp8MoEMethod", "built": ["CutlassBatchedExpertsFp8"]},
            False,
        ),
        # No component: who built it is unknown.
        ({"built": ["CutlassBatchedExpertsFp8"]}, False),
    ],
)
def test_trace_proof_needs_this_component_and_the_steps_class(tmp_path, proof, ok):
    fs = fingerprinted([_rebuild(FP8, 711, "Fp8MoEMethod._setup_kernel", FP8_STEPS)])
    rec = _record("self.ab_strides1", 294, "red", **proof)
    attached, _ = merge_evidence(fs, load_evidence(_evidence(tmp_path, [rec])))
    assert attached[0].status == ("confirmed red" if ok else "unconfirmed")


def test_trace_same_line_does_not_spread_by_name(tmp_path):
    fs = fingerprinted(
        [
            _rebuild(FP8, 711, "Fp8MoEMethod._setup_kernel", FP8_STEPS),
            _rebuild(W4A8, 197, "W4A8MoEMethod.process_weights_after_loading", W4A8_STEPS),
        ]
    )
    recs = load_evidence(_evidence(tmp_path, _cutlass_records()))
    attached, unmatched = merge_evidence(fs, recs)
    by_path = {f.path: ev for f, ev in zip(fs, attached, strict=True)}
    assert not unmatched and len(by_path[FP8].matches) == 4
    # Line 296 matched the FP8 trace, so the by-name fallback is not tried: the W4A8 experts'
    # own `self.c_strides1` (another class, another line) is not reached at all.
    assert by_path[W4A8] is None
    md = render_worklist(fs, evidence=recs)
    assert _row(md, "W4A8MoEMethod").rstrip().endswith("| static only |")


def test_trace_note_naming_the_attribute_when_lines_moved(tmp_path):
    fs = fingerprinted([_rebuild(W4A8, 197, "W4A8MoEMethod.pwal", W4A8_STEPS)])
    rec = _record(
        "self.c_strides1",
        1266,
        "red",
        symbol="CutlassExpertsW4A8Fp8.__init__",
        component="W4A8MoEMethod",
        built=["CutlassExpertsW4A8Fp8"],
    )
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
    # a red without a failure class: the storage escaped, no failure was observed
    assert "red-unobserved via target from `prepare_fp8_layer_for_marlin` `layer.workspace`" in u
    assert u.rstrip().endswith("| confirmed red (1/2), static only (1/2) |")


def test_row_verdicts_red_beats_unread_beats_green_beats_inconclusive(tmp_path):
    fs = fingerprinted([_rebuild(FP8, 711, "Fp8MoEMethod._setup_kernel", FP8_STEPS)])
    proof = {"component": "Fp8MoEMethod", "built": ["CutlassBatchedExpertsFp8"]}
    recs = [
        _record("self.c_strides1", 296, "inconclusive", reason="no recipe", **proof),
        _record("self.c_strides1", 296, "green", reason="stable", **proof),
        _record("self.ab_strides1", 294, "unread", reason="moved, unread", **proof),
        _record("self.ab_strides1", 294, "red", reason="freed", failure="livelock", **proof),
        _record("self.ab_strides1", 294, "red", fixed=True, reason="fix leaks", **proof),
        _record("self.c_strides1", 296, "green", fixed=True, reason="fix holds", **proof),
    ]
    attached, _ = merge_evidence(fs, load_evidence(_evidence(tmp_path, recs)))
    ev = attached[0]
    assert ev.bug.reason == "freed" and ev.fix.reason == "fix leaks"
    assert ev.status == "confirmed red" and ev.failure == "livelock"
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs[:2])))
    row = _row(md, "Fp8MoEMethod")
    assert "green via trace (`Fp8MoEMethod` built `CutlassBatchedExpertsFp8`) from " in row
    assert "`CutlassExpertsFp8Base.__init__` `self.c_strides1`: stable" in row
    assert "(+1 inconclusive (no tier): `self.c_strides1`)" in row
    assert row.rstrip().endswith("| not reproduced |")
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs[:3])))
    assert _row(md, "Fp8MoEMethod").rstrip().endswith("| unread |")
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs[3:])))
    row = _row(md, "Fp8MoEMethod")
    assert "red-observed via trace" in row and "fix leaks" in row
    assert "; fixed side red-unobserved via trace" in row
    assert "(+1 green (no tier): `self.c_strides1`)" in row and "livelock" in row


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


# --- the committed vLLM 0.25.1 worklist is regenerated from its committed inputs ---------------

COMMITTED = {
    "worklist": ROOT / "docs/worklist-vllm-0.25.1.md",
    "findings": ROOT / "docs/evidence/h200-vllm-0.25.1.findings.json",
    "evidence": ROOT / "docs/evidence/h200-vllm-0.25.1.json",
}


def regenerate_worklist(out: Path) -> int:
    """The command docs/worklist.md gives for the committed worklist, run in-process. The
    Fix column links the patches relative to the page, so they are copied beside ``out`` as
    they lie beside the committed page."""
    patches = out.parent / "patches" / "vllm-0.25.1"
    if not patches.exists():
        shutil.copytree(ROOT / "docs/patches/vllm-0.25.1", patches)
    return main(
        [
            "worklist",
            "--findings",
            str(COMMITTED["findings"]),
            "--evidence",
            str(COMMITTED["evidence"]),
            "--source",
            "vllm 0.25.1 release sources",
            "--patches",
            str(patches),
            "-o",
            str(out),
        ]
    )


def test_committed_worklist_is_regenerated_from_its_inputs(tmp_path):
    """Fails when the generator, the template, the findings or the evidence changed and
    docs/worklist-vllm-0.25.1.md was not regenerated (docs/worklist.md says how)."""
    out = tmp_path / "worklist.md"
    assert regenerate_worklist(out) == 0
    fresh = out.read_text(encoding="utf-8").splitlines()
    committed = COMMITTED["worklist"].read_text(encoding="utf-8").splitlines()
    stale = [
        f"line {i + 1}:\n  committed: {a}\n  generated: {b}"
        for i, (a, b) in enumerate(zip(committed, fresh, strict=False))
        if a != b
    ]
    assert not stale and len(fresh) == len(committed), (
        "docs/worklist-vllm-0.25.1.md is stale; regenerate it (docs/worklist.md, "
        "'Regenerating the committed worklist'). First difference:\n" + "\n".join(stale[:1])
    )


def test_one_record_per_backend_of_a_rebuilt_kernel(tmp_path):
    """RL105 records carry the finding's own fingerprint (direct), one per backend vLLM let the
    runner force; the row names each backend and red wins."""
    fs = _moe_rows()
    fp8 = next(f for f in fs if f.path == FP8)
    mod = "vllm.model_executor.layers.fused_moe.experts"
    base = {"fingerprint": fp8.fingerprint, "target": "self.moe_kernel", "tier": "replay"}
    recs = [
        {**base, "verdict": "green", "backend": f"{mod}.TritonExperts", "reason": "stable"},
        {
            **base,
            "verdict": "red",
            "failure": "illegal access",
            "backend": f"{mod}.cutlass_moe.CutlassExpertsFp8",
            "reason": "ab_strides1 freed",
        },
        {**base, "verdict": "inconclusive", "tier": None, "reason": "no SM100", "fixed": False},
        {**base, "verdict": "green", "fixed": True, "backend": f"{mod}.cutlass_moe.X"},
        {"fingerprint": "e" * 20, "verdict": "unread", "tier": "census", "reason": "r"},
    ]
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs)))
    cells = _cells(_row(md, "Fp8MoEMethod"))
    assert cells[5] == (
        "red-observed (replay; backend `CutlassExpertsFp8`): ab_strides1 freed (+1 green: "
        "`self.moe_kernel` on `TritonExperts`; 1 inconclusive (no tier): `self.moe_kernel`); "
        "fixed side green (replay; backend `X`)"
    )
    assert cells[4] == "illegal access" and cells[6] == "fixed green"
    assert _counts(md)["fixed green"] == (1, 0, 0, 1)
    tail = md.split("## Evidence without a static finding", 1)[1]
    assert f"| `{'e' * 20}` |  |  | bug | unread, census | r |" in tail


def test_static_read_site_from_reader_never_from_a_no_read_note():
    store = TraceStep("pkg/k.py", 9, "stored on `layer.t`")
    unread = finding(
        "pkg/k.py",
        9,
        symbol="K.pwal",
        trace=[store, TraceStep("pkg/k.py", 9, "no apply-time read of this attribute found")],
        reader=None,
    )
    assert _cells(_row(render_worklist([unread]), "K"))[5] == "static, high confidence"
    old = finding(
        "pkg/k.py",
        9,
        symbol="K.pwal",
        trace=[store, TraceStep("pkg/r.py", 40, "read at apply time in K.apply")],
        reader=None,  # a findings file from before schema 1.1
    )
    assert "read at r.py:40" in _row(render_worklist([old]), "K")
    old.reader = "pkg/q.py:77 in K.forward"  # schema 1.1: the engine's vetted reader wins
    assert (
        _cells(_row(render_worklist([old]), "K"))[5] == "static, high confidence; read at q.py:77"
    )


def test_a_site_with_its_own_records_is_not_lent_a_sibling_stores_verdict(tmp_path):
    """Two stores of one target in one function (B12x `self._fc2_input_scale` on two branches):
    the runner ran both; the one whose line never ran stays inconclusive, it does not take the
    red/green of its sibling through the shared target."""
    sym = "FlashInferB12xExperts.process_weights_after_loading"
    b12x = "vllm/model_executor/layers/fused_moe/experts/flashinfer_b12x_moe.py"
    fs = fingerprinted(
        [
            finding(b12x, 124, rule="RL102", symbol=sym, target="self._fc2_input_scale"),
            finding(b12x, 131, rule="RL102", symbol=sym, target="self._fc2_input_scale"),
        ]
    )
    l124, l131 = fs
    recs = [
        _record("self._fc2_input_scale", 124, "red", path=b12x, symbol=sym, fp=l124.fingerprint),
        _record(
            "self._fc2_input_scale",
            124,
            "green",
            fixed=True,
            path=b12x,
            symbol=sym,
            fp=l124.fingerprint,
        ),
        _record(
            "self._fc2_input_scale",
            131,
            "inconclusive",
            path=b12x,
            symbol=sym,
            fp=l131.fingerprint,
            reason="line 131 did not run",
        ),
    ]
    attached, unmatched = merge_evidence(fs, load_evidence(_evidence(tmp_path, recs)))
    assert not unmatched
    ev = dict(zip((f.line for f in fs), attached, strict=True))
    assert [m.via for m in ev[124].matches] == ["fingerprint", "fingerprint"]
    assert [m.via for m in ev[131].matches] == ["fingerprint"]
    assert ev[124].status == "fixed green"
    assert ev[131].status == "inconclusive"


def test_a_rows_other_records_say_their_grade_tier_precondition_and_forced_path(tmp_path):
    """Beyond the deciding record, each of a row's records is counted by its grade and says
    what it stands on: a census tier, a precondition, the platform path and flags it forces,
    harness reads. A masked stock record is never counted with a red made under `unshadow`."""
    fs = _moe_rows()
    fp8 = next(f for f in fs if f.path == FP8)
    base = {"fingerprint": fp8.fingerprint, "target": "self.moe_kernel", "fixed": False}
    recs = [
        {
            **base,
            "verdict": "red",
            "failure": "livelock",
            "grade": "red-observed",
            "tier": "replay",
            "reason": "top",
        },
        {
            **base,
            "verdict": "red",
            "failure": "masked",
            "grade": "masked",
            "tier": "census",
            "reason": "refused",
        },
        {
            **base,
            "verdict": "red",
            "failure": "stale read",
            "grade": "red-observed",
            "tier": "replay",
            "preconditions": ["unshadow: take it off"],
            "reason": "pre",
        },
        {
            **base,
            "verdict": "red",
            "failure": "freed",
            "grade": "red-unobserved",
            "tier": "census",
            "standins": ["op"],
            "harness_reads": ["layer.x (harness:h.py:1)"],
            "forced": {"platform": "ROCm gfx950", "flags": ["f_enabled=True"], "env": ["E=0"]},
            "cluster": "S2",
            "shared_build": True,
            "reason": "census",
        },
    ]
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, recs)))
    cell = _cells(_row(md, "Fp8MoEMethod"))[5]
    assert cell.startswith("red-observed (replay): top (+")
    others = cell.split(" (+", 1)[1]
    assert "1 red-observed (under `unshadow`): `self.moe_kernel`" in others
    assert (
        "1 red-unobserved (census, forces ROCm gfx950 (f_enabled=True, E=0), harness reads, "
        "shared build): "
        "`self.moe_kernel`" in others
    )
    assert "1 masked (census): `self.moe_kernel`" in others
    assert " red: " not in others  # no coarse verdict lumps grades together
    # a record that matches no finding says the same about itself
    stray = {**recs[2], "fingerprint": "e" * 20, "target": "", "reason": "stray"}
    md = render_worklist(fs, evidence=load_evidence(_evidence(tmp_path, [*recs, stray])))
    tail = md.split("## Evidence without a static finding", 1)[1]
    assert (
        f"| `{'e' * 20}` |  |  | bug | red-observed (stale read), replay, under `unshadow` | "
        "stray |" in tail
    )
