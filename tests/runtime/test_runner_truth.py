"""Tests that fail when the runner lies (docs/runner.md, "Mutation check").

Each builds through the CPU path (fixture kernels, the recorder, the census, the CPU stand-in
graph, ``confirm``) or through the MoE harness against stand-in vLLM modules, and asserts a
verdict a broken runner would get wrong:

* a store whose line did not run gets no verdict from its target's storage (the reach check);
* a storage the capture never read is unread, not red (the dispatch recorder decides reads);
* a lambda replaced at once by a partial is not lent the partial's red (its own store);
* a rebuilt object is not lent a storage that is another finding's store (ownership);
* a store folded into a finding (its ``also``) is the finding's own: its red is the finding's;
* a census-tier MoE row builds at census tier with its stand-ins (never replay);
* the committed H200 records re-derive from their stored stage data to their stored verdicts.

``scripts/mutate_runner.py`` applies each mutant of the runner and shows one of these fails.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import types
from collections import defaultdict
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reload_lint.confirm.decide import judge  # noqa: E402
from reload_lint.confirm.evidence import EVIDENCE_SCHEMA_VERSION  # noqa: E402
from reload_lint.confirm.runner import Options, confirm  # noqa: E402
from reload_lint.confirm.verdicts import finalize, legacy_messages  # noqa: E402
from reload_lint.findings import Finding, compute_fingerprints  # noqa: E402

from . import fixture_kernels as fk  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MOD = "tests.runtime.fixture_kernels"
SOURCE = Path(fk.__file__).read_text().splitlines()


def line_of(cls: str, text: str) -> int:
    """The line of ``text`` inside ``class cls`` of the fixture source."""
    start = next(i for i, t in enumerate(SOURCE) if t.startswith(f"class {cls}"))
    return next(i + 1 for i in range(start, len(SOURCE)) if text in SOURCE[i])


def finding(cls: str, text: str, target: str, rule: str, message: str = "fixture") -> Finding:
    line = line_of(cls, text)
    f = Finding(
        rule=rule,
        path=fk.PATH,
        line=line,
        column=1,
        end_line=line,
        symbol=f"{cls}.process_weights_after_loading",
        target=target,
        message=message,
    )
    compute_fingerprints([f])
    return f


def together(*fs: Finding) -> tuple[Finding, ...]:
    """Fingerprints as one findings file gives them (an occurrence index per same store)."""
    compute_fingerprints(list(fs))
    return fs


def run(*findings: Finding, **kw) -> tuple[dict[str, dict[str, dict]], list[dict]]:
    """confirm() on CPU, finalized as the evidence file is: {fingerprint: {side: record}} (the
    bug side of a shared build; an isolated rerun's record under "isolated")."""
    opts = Options(device="cpu", replay_timeout=4.0, recipe_modules=(MOD,), **kw)
    rows = finalize([r.to_json() for r in confirm(list(findings), opts)])
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        side = "fixed" if r["fixed"] else "isolated" if r["isolation"] else "bug"
        out[r["fingerprint"]][side] = r
    return out, rows


def callable_message(kind: str) -> str:
    return f"`self.act_perm` holds a {kind} that captures a tensor created after loading"


def test_a_lambda_replaced_at_once_by_a_partial_is_not_lent_the_partials_red():
    k = "OverwrittenLambdaKernel"
    lam = finding(k, "self.act_perm = lambda", "self.act_perm", "RL103", callable_message("lambda"))
    par = finding(k, "index=perm)", "self.act_perm", "RL103", callable_message("partial"))
    lam, par = together(lam, par)
    out, _ = run(lam, par)
    bug = out[par.fingerprint]["bug"]
    # the partial's permutation is freed by the reload; the replay indexes with poisoned bytes
    assert bug["verdict"] == "red" and bug["grade"] == "red-observed", bug["reason"]
    assert bug["failure"] == "illegal access" and bug["cluster"]
    assert out[par.fingerprint]["fixed"]["grade"] == "green"
    own = out[lam.fingerprint]["bug"]
    # the lambda's line ran, but the capture holds the partial: nothing it read is the lambda's
    assert own["grade"] == "not-applicable" and own["verdict"] == "green", own["reason"]
    assert "a partial, not the closure this line stores" in own["reason"]
    assert own["census"]["linked"] == [] and own["census"]["lent"]
    assert own["cluster"] is None


def test_a_store_in_a_branch_not_taken_gets_no_verdict_from_its_targets_storage():
    k = "OverwrittenLambdaKernel"
    other = finding(k, "index=perm.flip(0)", "self.act_perm", "RL103", callable_message("partial"))
    log = io.StringIO()
    out, rows = run(other, log=log)
    # the target's storage did move (the taken branch's partial), but this line never ran
    [rec] = rows
    assert rec["verdict"] == "inconclusive" and rec["grade"] == "inconclusive"
    assert f"line {other.line} did not run" in rec["reason"]
    assert "in the else of `if layer.in_features % 8 == 0`" in rec["reason"]
    # the build that did not reach the line leaves no record, but the sweep log says why
    [said] = [ln for ln in log.getvalue().splitlines() if "NOT REACHED" in ln]
    assert said.startswith(f"[{other.fingerprint[:10]}] RL103") and "(bug, " in said
    assert f"line {other.line} did not run" in said


def test_a_post_load_tensor_the_capture_never_reads_is_unread():
    f = finding("UnreadStatsKernel", "self.stats =", "self.stats", "RL102")
    out, _ = run(f)
    bug = out[f.fingerprint]["bug"]
    [row] = [r for r in bug["census"]["rows"] if r["path"] in bug["census"]["linked"]]
    assert row["freed"] or row["moved"]
    assert not row["graph_visible"] and "walk" in row["sources"]
    assert bug["verdict"] == "unread" and bug["grade"] == "unread", bug["reason"]
    assert "fixed" not in out[f.fingerprint]  # nothing red: no fixed side runs


def test_a_rebuilt_object_is_not_lent_a_storage_that_is_another_findings_store():
    k = "AliasingExpertsKernel"
    sort_idx = finding(k, "layer.sort_idx =", "layer.sort_idx", "RL101")
    experts = finding(k, "self.experts =", "self.experts", "RL105")
    sort_idx, experts = together(sort_idx, experts)
    out, _ = run(sort_idx, experts, isolate=True)
    a, b = out[sort_idx.fingerprint]["bug"], out[experts.fingerprint]["bug"]
    assert a["census"]["linked"] == ["layer.sort_idx"] and a["verdict"] == "red", a["reason"]
    # the experts object reaches the permutation one step down; layer.sort_idx names it: it
    # is sort_idx's store, lent to the rebuilt object, never counted as the object's own
    assert list(b["census"]["lent"]) == ["layer.quant_method.kernel.experts.perm"]
    assert b["census"]["linked"] == ["layer.quant_method.kernel.experts.scale"]
    assert b["verdict"] == "red" and "experts.scale" in b["reason"]
    assert "experts.perm" not in b["reason"].split(";")[0]
    # two clusters, one build: each red says the build was shared
    assert a["cluster"] != b["cluster"] and a["shared_build"] and b["shared_build"]
    # the record alone is enough to judge it again: the other finding's link is kept with it
    assert b["census"]["shared_with"] == {
        sort_idx.fingerprint: {"target": "layer.sort_idx", "paths": ["layer.sort_idx"]}
    }
    msgs, outcome = legacy_messages(b, [b])
    f = types.SimpleNamespace(**{k: b[k] for k in ("fingerprint", "rule", "path", "line")})
    f.end_line, f.target, f.message = b["line"], b["target"], "fixture"
    assert judge(f, msgs, outcome, False)[::3] == (b["verdict"], b["grade"])
    # --isolate: one rerun per cluster with the other target fixed. The scale's red stands
    # alone; the permutation's does not: with the rebuilt object's fix the graph's read of it
    # (through experts.perm) stays on the captured storage, refreshed, and the replay matches
    alone = out[experts.fingerprint]["isolated"]
    assert alone["verdict"] == "red" and not alone["shared_build"], alone["reason"]
    assert alone["cluster"] == b["cluster"] and alone["failure"] == "illegal access"
    assert len(alone["isolation"]) == 1 and alone["isolation"][0].startswith("registration")
    alone = out[sort_idx.fingerprint]["isolated"]
    assert alone["grade"] == "green" and alone["isolation"][0].startswith("reuse rebuilt")


def test_a_store_folded_into_a_finding_is_its_own_store():
    k = "FoldedScaleKernel"
    scale = finding(k, "layer.gscale =", "layer.gscale", "RL101")
    host = finding(k, "self.runner =", "self.runner", "RL105")
    host.also = [
        {
            "rule": scale.rule,
            "path": scale.path,
            "line": scale.line,
            "target": scale.target,
            "fingerprint": scale.fingerprint,
        }
    ]
    out, _ = run(host)
    bug = out[host.fingerprint]["bug"]
    # the object holds no tensor; the scale folded into its finding moved, and apply read it
    assert bug["census"]["linked"] == ["layer.gscale"], bug["reason"]
    assert bug["grade"] == "red-observed" and bug["failure"] == "stale read", bug["reason"]
    [folded] = bug["census"]["also"].values()
    assert folded["linked"] == ["layer.gscale"] and folded["ran"] is True
    assert folded["line"] == scale.line and bug["cluster"]
    # the host's patch keeps the folded store: green
    assert out[host.fingerprint]["fixed"]["grade"] == "green"
    # without the fold the object alone holds nothing the graph reads
    host.also = []
    out, _ = run(host)
    assert out[host.fingerprint]["bug"]["grade"] == "not-applicable"


# -- the MoE harness at census tier, against stand-in vLLM modules ------------------------------


@pytest.fixture
def fake_moe_vllm(monkeypatch):
    class Method:
        pass

    class RoutedExperts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.quant_method = Method()

    class FusedMoE(torch.nn.Module):
        def __init__(self, **kw):
            super().__init__()
            self.kw = kw
            self.routed_experts = RoutedExperts()
            self._shared_experts = object()  # no moe_runner entry swap

        def forward(self, x, logits):
            return x

    class QuantConfig:
        @classmethod
        def from_config(cls, cfg):
            return cls()

    def mod(name, **attrs):
        m = types.ModuleType(name)
        for k, v in attrs.items():
            setattr(m, k, v)
        monkeypatch.setitem(sys.modules, name, m)

    mod("vllm")
    mod("vllm.config", get_current_vllm_config=lambda: None)
    mod("vllm.forward_context", set_forward_context=lambda *a, **k: contextlib.nullcontext())
    mod("vllm.model_executor")
    mod("vllm.model_executor.layers")
    mod("vllm.model_executor.layers.fused_moe", FusedMoE=FusedMoE)
    mod("vllm.model_executor.layers.quantization", get_quantization_config=lambda n: QuantConfig)
    return FusedMoE


@pytest.mark.parametrize("row_id", ["moe-modelopt-nvfp4-trtllm", "moe-modelopt-nvfp4-b12x"])
def test_a_census_row_builds_its_moe_layer_at_census_tier_with_its_standins(fake_moe_vllm, row_id):
    from reload_lint.confirm.families import BY_ID
    from reload_lint.confirm.recipes import standins
    from reload_lint.confirm.recipes.vllm_layers import FamilyRecipe

    row = BY_ID[row_id]
    # the row forces a FlashInfer backend vLLM refuses on SM90 through one capability check,
    # the backend's own, and names the platform it forces on every record
    assert all(b.startswith("flashinfer_") for b in row.backends)
    checks = [n for n in row.standins if n.endswith("._supports_current_device")]
    assert len(checks) == 1 and checks[0].split(".")[0] in row.kernels
    assert all(n in standins.STANDINS for n in row.standins)
    assert row.forced()["platform"].startswith("SM1") and checks[0] + " stood in" in str(
        row.forced()["flags"]
    )
    recipe = FamilyRecipe.from_name(f"family:{row_id}:{row.backends[0]}")
    assert recipe.row is row
    built = recipe.construct("cpu")
    assert isinstance(built.model, fake_moe_vllm)
    assert built.standins == set(row.standins) and built.tier == "census"
    # the row's SwiGLU arguments reach FusedMoE (the TRT-LLM clamp exists only then)
    assert dict(row.moe_kwargs).items() <= built.model.kw.items()
    replay_row = BY_ID["moe-modelopt-nvfp4"]
    assert not {"flashinfer_trtllm", "flashinfer_b12x"} & set(replay_row.backends)
    assert FamilyRecipe(replay_row, "auto").construct("cpu").tier == "replay"
    assert replay_row.forced() is None


def test_every_layer_kind_of_a_row_with_standins_builds_at_census_tier(monkeypatch):
    """The tier comes from the row, not from each layer kind's builder: a linear row with
    stand-ins (the linear builder never named them before) is census tier, one without is
    replay."""
    from reload_lint.confirm.recipes.vllm_layers import FamilyRecipe
    from reload_lint.confirm.rows import Row

    class Method:
        pass

    class ReplicatedLinear(torch.nn.Module):
        def __init__(self, *a, **kw):
            super().__init__()
            self.quant_method = Method()

        def forward(self, x):
            return x, None

    for name in ("vllm", "vllm.model_executor", "vllm.model_executor.layers"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    linear = types.ModuleType("vllm.model_executor.layers.linear")
    linear.ReplicatedLinear = ReplicatedLinear
    monkeypatch.setitem(sys.modules, linear.__name__, linear)
    stood_in = ("rocm_aiter_ops.triton_fp8_bmm",)
    census = FamilyRecipe(Row("our-linear-census", "linear", standins=stood_in), "auto")
    built = census.construct("cpu")
    assert isinstance(built.model, ReplicatedLinear)
    assert built.standins == set(stood_in) and built.tier == "census"
    plain = FamilyRecipe(Row("our-linear", "linear"), "auto").construct("cpu")
    assert plain.standins == set() and plain.tier == "replay"


# -- the committed H200 records -----------------------------------------------------------------


def test_committed_h200_records_rederive_from_their_stored_stage_data():
    """Every committed record judged again from its stored census, replay and stage data (the
    links of its whole run) gives its stored verdict, failure and grade; records the
    precondition rule changed (verdicts.finalize) keep the judged ones in ``regraded_from``.
    The evidence page is generated from these records."""
    from reload_lint.confirm.decide import judge
    from reload_lint.confirm.report import render
    from reload_lint.confirm.verdicts import legacy_messages, run_key

    ev = ROOT / "docs/evidence"
    findings = json.loads((ev / "h200-vllm-0.25.1.findings.json").read_text())
    doc = json.loads((ev / "h200-vllm-0.25.1.json").read_text())
    # fields are only ever added within a major version (docs/runner.md): an evidence file of
    # an earlier minor version still reads, one of a later version than this code does not
    major, minor = (int(x) for x in doc["schema_version"].split("."))
    cur_major, cur_minor = (int(x) for x in EVIDENCE_SCHEMA_VERSION.split("."))
    assert major == cur_major and minor <= cur_minor
    messages = {f["fingerprint"]: f["message"] for f in findings["findings"]}
    runs = defaultdict(list)
    for r in doc["evidence"]:
        runs[run_key(r)].append(r)
    judged = 0
    for r in doc["evidence"]:
        if not r["stages"]:
            continue
        f = types.SimpleNamespace(
            fingerprint=r["fingerprint"],
            rule=r["rule"],
            path=r["path"],
            line=r["line"],
            end_line=r["line"],
            target=r["target"],
            message=messages.get(r["fingerprint"], ""),
        )
        msgs, outcome = legacy_messages(r, runs[run_key(r)])
        verdict, failure, _, grade = judge(f, msgs, outcome, r["fixed"])
        want = (r["verdict"], r["failure"], r["grade"])
        if r["reason"].startswith("the unshadow precondition itself"):
            old = r["regraded_from"]
            want = (old["verdict"], old["failure"], grade)
        assert (verdict, failure, grade) == want, (r["path"], r["line"], r["target"], r["recipe"])
        judged += 1
    assert judged >= 183  # the 19:04 sweep: 187 of its 191 records ran stages
    have = {e["fingerprint"] for e in doc["evidence"]}
    assert {f["fingerprint"] for f in findings["findings"] if not f.get("suppressed")} <= have
    assert (ev / "h200-vllm-0.25.1.md").read_text() == render(findings, doc)


# -- who read a storage at capture ---------------------------------------------------------------


def test_the_recorder_says_whether_vllm_or_the_harness_read_a_storage(tmp_path):
    """A read from vLLM's code is ``vllm:``, one from the runner's own code ``harness:``; a
    census stand-in reads for its caller. The rows' ``read_by`` marks harness reads on every
    record (``harness_reads``)."""
    from reload_lint.confirm import pipeline
    from reload_lint.confirm.recorder import DispatchRecorder, Manifest, take_census

    src = tmp_path / "site-packages" / "vllm" / "model_executor" / "k.py"
    src.parent.mkdir(parents=True)
    src.write_text("def apply(w, x):\n    return x @ w\n")
    ns: dict = {}
    exec(compile(src.read_text(), str(src), "exec"), ns)
    layer = torch.nn.Module()
    layer.w = torch.randn(4, 4)
    layer.ref = torch.randn(2, 4)
    x = torch.randn(2, 4)
    rec = DispatchRecorder()
    with rec:
        out = ns["apply"](layer.w, x)  # vLLM's code reads w
        pipeline.compare(out, layer.ref)  # the runner's own code reads ref
    rows = {r.path: r for r in take_census(Manifest.record({"layer": layer}, rec, [x]))}
    assert rows["layer.w"].read_by == "vllm:vllm/model_executor/k.py:2"
    assert rows["layer.ref"].read_by.startswith("harness:reload_lint/confirm/pipeline.py:")
    record = {
        "census": {
            "linked": ["layer.ref", "layer.w"],
            "rows": [r.to_json() for r in rows.values()],
        }
    }
    from reload_lint.confirm.verdicts import _harness_reads

    assert _harness_reads(record, None) == [f"layer.ref ({rows['layer.ref'].read_by})"]
