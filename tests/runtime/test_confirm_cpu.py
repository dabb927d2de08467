"""The runner on CPU fixture kernels: red/green pairs, watchdog paths, recorder coverage, CLI.

Every red here comes from a real storage census (post-load run twice with the production-like
copy-back) and a replay of the captured op sequence; nothing is asserted that the runner could
produce without running the kernels.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reload_lint.confirm.evidence import EVIDENCE_SCHEMA_VERSION  # noqa: E402
from reload_lint.confirm.recorder import DispatchRecorder, Manifest, take_census  # noqa: E402
from reload_lint.confirm.reload import SimulatedLayerwiseReload, load_weights  # noqa: E402
from reload_lint.confirm.runner import Options, confirm  # noqa: E402
from reload_lint.confirm.selection import load_findings  # noqa: E402
from reload_lint.confirm.walk import walk_tensors  # noqa: E402
from reload_lint.findings import Finding, compute_fingerprints  # noqa: E402

from . import fixture_kernels as fk  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MOD = "tests.runtime.fixture_kernels"


def store_line(symbol: str, target: str) -> int:
    """The line of ``target = ...`` inside the symbol's class in the fixture source (the runner
    checks that the flagged line actually ran)."""
    lines = Path(fk.__file__).read_text().splitlines()
    cls = symbol.split(".")[0]
    start = next((i for i, t in enumerate(lines) if t.startswith(f"class {cls}")), 0)
    attr = target.rsplit(".", 1)[-1]
    store = re.compile(rf"\b{re.escape(target)}\s*=|\"{re.escape(attr)}\"")
    for i in range(start, len(lines)):
        if store.search(lines[i]):
            return i + 1
    return 1


def finding(symbol: str, target: str, rule: str = "RL102", line: int | None = None) -> Finding:
    line = store_line(symbol, target) if line is None else line
    f = Finding(
        rule=rule,
        path=fk.PATH,
        line=line,
        column=1,
        end_line=line,
        symbol=symbol,
        target=target,
        message="fixture",
    )
    compute_fingerprints([f])
    return f


def run(f: Finding, **kw) -> dict:
    opts = Options(
        device="cpu", replay_timeout=kw.pop("replay_timeout", 4.0), recipe_modules=(MOD,)
    )
    for k, v in kw.items():
        setattr(opts, k, v)
    recs = confirm([f], opts)
    return {("fixed" if r.fixed else "bug"): r for r in recs}


def linked_rows(rec) -> list[dict]:
    return [r for r in rec.census["rows"] if r["path"] in rec.census["linked"]]


def test_workspace_red_livelock_then_green_with_storage_reuse():
    out = run(finding("ScratchKernel.process_weights_after_loading", "self.workspace"))
    bug, fixed = out["bug"], out["fixed"]
    assert bug.verdict == "red" and bug.failure == "livelock", bug.reason
    assert bug.replay["outcome"]["status"] == "hang"
    [row] = linked_rows(bug)
    assert row["path"] == "layer.quant_method.kernel.workspace"
    assert row["freed"] and row["graph_visible"]
    # isolation: the sibling site (sort_idx) was fixed on the bug side
    assert any("layer.sort_idx" in i for i in bug.isolation)
    assert fixed.verdict == "green", fixed.reason
    assert not any(r["moved"] or r["freed"] for r in fixed.census["rows"])
    assert fixed.replay["match"] and fixed.replay["bitwise"]
    assert bug.reload_path == "simulated-copy-back"


def test_unregistered_permutation_red_illegal_access_then_green_with_registration():
    out = run(finding("ScratchKernel.process_weights_after_loading", "layer.sort_idx", "RL101"))
    bug, fixed = out["bug"], out["fixed"]
    assert bug.verdict == "red" and bug.failure == "illegal access", bug.reason
    assert "out of" in bug.reason.lower() or "bounds" in bug.reason.lower()
    assert [r["path"] for r in linked_rows(bug)] == ["layer.sort_idx"]
    assert fixed.verdict == "green", fixed.reason


def test_partial_keyword_permutation_stale_read_then_green_with_late_binding():
    out = run(finding("PartialPermKernel.process_weights_after_loading", "self.act_perm", "RL103"))
    bug, fixed = out["bug"], out["fixed"]
    [row] = linked_rows(bug)
    assert row["path"] == "layer.quant_method.kernel.act_perm.kw[index]"
    # the old permutation is retained (like compile artifacts): moved, not freed -> stale read
    assert row["moved"] and not row["freed"]
    assert bug.verdict == "red" and bug.failure == "stale read", bug.reason
    assert fixed.verdict == "green", fixed.reason
    assert [r["path"] for r in linked_rows(fixed)] == ["layer._reload_lint_act_perm"]


def test_rebuilt_object_constants_red_then_green_with_reuse():
    out = run(finding("Experts.__init__", "self.alpha", "RL105"))
    bug, fixed = out["bug"], out["fixed"]
    assert bug.verdict == "red" and bug.failure in ("stale read", "freed"), bug.reason
    assert linked_rows(bug)[0]["freed"]
    assert fixed.verdict == "green", fixed.reason


def test_first_forward_wrapper_is_reached_red_then_green_when_the_rebuilt_object_reuses_it():
    """The wrapper is stored at the first forward (not in post-load): the line tracer covers the
    first forward, and the rebuilt-object fix carries the captured wrapper over to the rebuilt
    experts (B12x's _ensure_wrapper shape)."""
    src = Path(fk.__file__).read_text().splitlines()
    line = next(i + 1 for i, t in enumerate(src) if "self._wrapper = OutputWrapper(" in t)
    out = run(finding("LazyExperts._ensure_wrapper", "self._wrapper", "RL108", line=line))
    bug, fixed = out["bug"], out["fixed"]
    assert bug.verdict == "red", bug.reason
    assert any(r["path"].endswith("_wrapper.buf") for r in linked_rows(bug)), bug.census
    assert fixed.verdict == "green", fixed.reason


def test_correct_kernel_is_green_on_the_bug_side():
    out = run(finding("RegisteredKernel.process_weights_after_loading", "layer.sort_idx", "RL101"))
    assert set(out) == {"bug"}  # no fix to apply: no fixed side
    assert out["bug"].verdict == "green", out["bug"].reason


def test_generic_fallback_and_no_recipe():
    out = run(finding("SelfContained.process_weights_after_loading", "self.row_scale", "RL101"))
    assert out["bug"].recipe.startswith("generic:")
    assert out["bug"].verdict == "red", out["bug"].reason
    out = run(finding("NeedsArgs.process_weights_after_loading", "self.x"))
    assert out["bug"].verdict == "inconclusive"
    assert "cannot be constructed without arguments" in out["bug"].reason


def test_watchdog_keeps_other_sites():
    sites = [
        finding("ScratchKernel.process_weights_after_loading", "self.workspace"),
        finding("PartialPermKernel.process_weights_after_loading", "self.act_perm", "RL103"),
    ]
    recs = confirm(sites, Options(device="cpu", replay_timeout=3.0, recipe_modules=(MOD,)))
    verdicts = [(r.target, r.fixed, r.verdict, r.failure) for r in recs]
    assert ("self.workspace", False, "red", "livelock") in verdicts
    assert ("self.act_perm", False, "red", "stale read") in verdicts
    assert ("self.act_perm", True, "green", None) in verdicts


def test_dispatch_recorder_finds_a_tensor_no_walk_reaches():
    layer = fk.FixtureLinear(fk.HiddenGlobalKernel)
    driver = SimulatedLayerwiseReload()
    driver.record(layer)
    load_weights(layer, fk.checkpoint(1))
    with torch.no_grad():
        layer.quant_method.process_weights_after_loading(layer)
        x = torch.randn(2, fk.IN)
        assert not any(h.tensor is fk.HIDDEN["bias"] for h in walk_tensors({"layer": layer}))
        rec = DispatchRecorder()
        with rec:
            layer(x)
        manifest = Manifest.record({"layer": layer}, rec, inputs=[x])
        driver.reload(layer, fk.checkpoint(2))
    rows = take_census(manifest)
    hidden = [r for r in rows if r.sources == ["dispatch"]]
    assert len(hidden) == 1 and hidden[0].freed and hidden[0].graph_visible
    # registered weight: protected by the copy-back
    weight = [r for r in rows if r.path == "layer.weight"]
    assert weight and not weight[0].moved and not weight[0].freed


def test_walk_unwraps_partials_closures_defaults_and_containers():
    t1, t2, t3, t4, t5 = (torch.zeros(1) for _ in range(5))

    def make():
        captured = t2

        def inner(x, scale=t3):
            return x * captured * scale

        return inner

    class Holder:
        pass

    h = Holder()
    h.p = functools.partial(torch.add, other=t1)
    h.f = make()
    h.items = {"a": [t4]}
    h.nested = Holder()
    h.nested.slot = t5
    paths = {hit.path for hit in walk_tensors({"h": h})}
    assert {
        "h.p.kw[other]",
        "h.f.<closure:captured>",
        "h.f.<default:scale>",
        "h.items[a][0]",
        "h.nested.slot",
    } <= paths


def test_simulated_reload_keeps_registered_storage_and_loads_new_values():
    layer = fk.FixtureLinear(fk.RegisteredKernel)
    driver = SimulatedLayerwiseReload()
    driver.record(layer)
    load_weights(layer, fk.checkpoint(1))
    with torch.no_grad():
        layer.quant_method.process_weights_after_loading(layer)
        ptr = layer.weight.data_ptr()
        driver.reload(layer, fk.checkpoint(2))
    assert layer.weight.data_ptr() == ptr
    cold = fk.FixtureLinear(fk.RegisteredKernel)
    load_weights(cold, fk.checkpoint(2))
    with torch.no_grad():
        cold.quant_method.process_weights_after_loading(cold)
    assert torch.equal(layer.weight, cold.weight)


def _cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "reload_lint", "confirm", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _findings_file(tmp_path, findings) -> Path:
    p = tmp_path / "findings.json"
    p.write_text(json.dumps({"schema_version": "1.0", "findings": [f.to_json() for f in findings]}))
    return p


def test_cli_writes_evidence_and_exit_codes(tmp_path):
    f_red = finding("PartialPermKernel.process_weights_after_loading", "self.act_perm", "RL103")
    f_green = finding("RegisteredKernel.process_weights_after_loading", "layer.sort_idx", "RL101")
    fp = _findings_file(tmp_path, [f_red, f_green])
    out = tmp_path / "evidence.json"
    r = _cli(
        "--findings", str(fp), "--recipes", MOD, "--site", f_green.fingerprint[:8], "-o", str(out)
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == EVIDENCE_SCHEMA_VERSION
    [ev] = doc["evidence"]
    assert ev["fingerprint"] == f_green.fingerprint and ev["verdict"] == "green"
    for key in ("fingerprint", "verdict", "failure", "reason", "fixed"):
        assert key in ev
    log = tmp_path / "sweep.log"
    r = _cli(
        "--findings",
        str(fp),
        "--recipes",
        MOD,
        "--site",
        f"{fk.PATH}:{f_red.line}",
        "-o",
        str(out),
        "--log",
        str(log),
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(out.read_text())
    assert {(e["fixed"], e["verdict"]) for e in doc["evidence"]} == {
        (False, "red"),
        (True, "green"),
    }
    # the end-of-run summary counts each of the seven grades on its own, with the tiers
    bug = next(e for e in doc["evidence"] if not e["fixed"])
    assert bug["grade"] == "red-observed" and bug["tier"] == "replay"
    summary = r.stderr.splitlines()
    stock = next(ln for ln in summary if "bug-side records, stock reload:" in ln)
    assert stock.split(": ", 1)[1] == (
        "1 red-observed, 0 red-unobserved, 0 masked, 0 green, 0 not-applicable, 0 unread, "
        "0 inconclusive (tier: 1 replay, 0 census, 0 none)"
    )
    assert not any("under a precondition" in ln for ln in summary)
    fixed = next(ln for ln in summary if "fixed side from monkeypatch:" in ln)
    assert fixed.endswith(
        "0 red-observed, 0 red-unobserved, 0 masked, 1 green, 0 not-applicable, 0 unread, "
        "0 inconclusive"
    )
    assert any(
        ln.strip().startswith("storage clusters: 1 (0 with a shared build)") for ln in summary
    )
    assert (
        "  red bug-side records forcing a platform-only path: 0; resting on harness reads or "
        "stand-in storage: 0" in summary
    )
    # the sweep log ends with the same summary
    start = next(i for i, ln in enumerate(summary) if ln.startswith("confirmed 1 site(s)"))
    assert log.read_text().splitlines()[-len(summary[start:]) :] == summary[start:]


def test_summary_counts_precondition_records_apart_and_every_fixed_grade():
    """Records made under a precondition get their own line; a fixed side's not-applicable is
    not folded into green (the coarse verdicts would)."""
    from reload_lint.confirm.command import summary_lines
    from reload_lint.confirm.evidence import evidence_document

    def rec(grade, verdict, *, fixed=False, pre=(), tier="replay", cluster=None, shared=False):
        return {
            "fingerprint": "f" * 16,
            "verdict": verdict,
            "grade": grade,
            "fixed": fixed,
            "preconditions": list(pre),
            "tier": tier,
            "cluster": cluster,
            "shared_build": shared,
            "fix_source": "codemod" if fixed else None,
        }

    doc = evidence_document(
        [
            {
                **rec("masked", "red", tier="census", cluster="S1"),
                "forced": {"platform": "ROCm", "flags": ["x=True"], "env": []},
                "harness_reads": ["layer.w (harness:h.py:1)"],
            },
            rec("red-observed", "red", pre=["unshadow: x"], cluster="S2", shared=True),
            rec("inconclusive", "inconclusive", pre=["unshadow: x"], tier=None),
            rec("not-applicable", "green", fixed=True),
            rec("green", "green", fixed=True, pre=["unshadow: x"]),
        ],
        device="cpu",
    )
    lines = summary_lines(doc, 3, "e.json")
    assert (
        lines[0]
        == "confirmed 3 site(s), 5 record(s): 2 red, 2 green, 0 unread, 1 inconclusive -> e.json"
    )
    by = {ln.split(": ", 1)[0].strip(): ln.split(": ", 1)[1] for ln in lines[1:]}
    assert by["bug-side records, stock reload"].startswith(
        "0 red-observed, 0 red-unobserved, 1 masked, 0 green"
    )
    assert by["bug-side records, stock reload"].endswith("(tier: 0 replay, 1 census, 0 none)")
    assert by["bug-side records, under a precondition"] == (
        "1 red-observed, 0 red-unobserved, 0 masked, 0 green, 0 not-applicable, 0 unread, "
        "1 inconclusive (tier: 1 replay, 0 census, 1 none)"
    )
    assert by["fixed side from codemod"].startswith(
        "0 red-observed, 0 red-unobserved, 0 masked, 0 green, 1 not-applicable"
    )
    assert by["fixed side from codemod under a precondition"].startswith(
        "0 red-observed, 0 red-unobserved, 0 masked, 1 green, 0 not-applicable"
    )
    assert by["storage clusters"] == "2 (1 with a shared build)"
    assert lines[-1] == (
        "  red bug-side records forcing a platform-only path: 1 (1 ROCm); resting on harness "
        "reads or stand-in storage: 1"
    )


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such findings file"),
        ("{not json", "not valid JSON"),
        ('{"findings": 3}', "not a findings document"),
        ('{"findings": [{"rule": "RL101"}]}', "lacks path, line"),
    ],
)
def test_cli_one_line_errors(tmp_path, content, message):
    fp = tmp_path / "f.json"
    if content is not None:
        fp.write_text(content)
    out = tmp_path / "e.json"
    r = _cli("--findings", str(fp), "-o", str(out))
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_unknown_selector(tmp_path):
    fp = _findings_file(tmp_path, [finding("ScratchKernel.process_weights_after_loading", "x")])
    r = _cli("--findings", str(fp), "--site", "RL999", "-o", str(tmp_path / "e.json"))
    assert r.returncode == 2 and "matches no finding" in r.stderr


def test_curated_vllm_sites_map_to_family_rows():
    """The hand-curated CPU site list (kept for CPU tests; the H200 sweep uses the main job's
    findings) maps through the family table like any finding."""
    from reload_lint.confirm.families import map_finding

    fs = load_findings(ROOT / "tests/runtime/data/vllm-0.25.1-sites.json")
    rows = {(f.symbol.split(".")[0], f.target): map_finding(f) for f in fs}
    assert rows[("MarlinLinearKernel", "self.workspace")].row.id == "linear-marlin-gptq"
    assert rows[("MacheteLinearKernel", "self.act_perm")].row.id == "linear-machete-gptq"
    # a helper maps through the post-load root its trace names; the curated entries carry no
    # trace, so they have no row (and say so) rather than a guessed one
    helper = rows[("prepare_fp8_layer_for_marlin", "layer.workspace")]
    assert helper.row is None and "prepare_fp8_layer_for_marlin" in helper.how
    assert rows[("CutlassExpertsFp8Base", "self.ab_strides1")].row.id == "moe-ct-w8a8-fp8"
    nothing = rows[("FlashInferExperts", "self.gemm1_alpha")]
    assert nothing.row is None and "FlashInferExperts" in nothing.how


def test_vllm_sites_without_cuda_are_inconclusive_with_reason(tmp_path):
    out = tmp_path / "e.json"
    r = _cli("--findings", "tests/runtime/data/vllm-0.25.1-sites.json", "-o", str(out))
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["evidence"] and all(e["verdict"] == "inconclusive" for e in doc["evidence"])
    assert all(e["reason"] for e in doc["evidence"])
