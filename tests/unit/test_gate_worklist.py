"""The worklist: RFC-table rows grouped by contract and area, evidence merged by fingerprint."""

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
    assert ev[ws.fingerprint].status == "fixed green"
    assert ev[gidx.fingerprint].status == "confirmed red"
    assert ev[perm.fingerprint].status == "inconclusive"
    md = render_worklist(fs, evidence=ev)
    marlin = next(ln for ln in md.splitlines() if ln.startswith("| MarlinLinearKernel"))
    assert "confirmed red (1/2), fixed green (1/2)" in marlin
    assert "red: 88/88 pointers moved; replay hung; fixed side green: pointers stable" in marlin
    assert "stale read" in marlin  # runtime failure overrides the static guess
    assert "Runtime evidence: 4 records, 3 matched" in md
    assert "unmatched fingerprints: `" + "f" * 20 + "`" in md
    u = next(ln for ln in md.splitlines() if ln.startswith("| marlin_utils_fp8"))
    assert u.rstrip().endswith("| static only |")
    assert utils.fingerprint not in ev


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
