"""Triage fields of a finding (schema 1.1): reader, guard, masked, backends, fix; the text
output's `fix:` / `see:` lines; messages that do not repeat themselves or the rule page."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reload_lint.analysis import triage
from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.findings import Finding, compute_fingerprints
from reload_lint.render.json_ import build_report
from reload_lint.render.text import render_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def minivllm():
    base = FIXTURES / "minivllm"
    return run_check([base], Config(), base_dir=base, use_cache=False).findings


def test_every_finding_carries_a_fix_and_the_text_ends_with_fix_and_see(minivllm):
    assert minivllm
    text = render_text(minivllm, [])
    blocks = re.split(r"\n(?=\S)", text.strip())
    assert len(blocks) == len(minivllm)
    for f, block in zip(minivllm, blocks, strict=True):
        lines = block.splitlines()
        assert f.fix and lines[-2] == f"    fix: {f.fix}", block
        assert lines[-1] == f"    see: reload-lint rule {f.rule}", block


def test_messages_drop_the_repeated_sentence_and_the_headline_parenthetical(minivllm):
    for f in minivllm:
        assert "copies back only" not in f.message
        assert "nothing is copied back" not in f.message
        # the old shape: "<headline> (<why restating it>); <tail>"
        assert not re.search(r"\) ?;", f.message), f.message
        assert len(f.message) < 200 or f.rule == "RL202", f.message


def test_fix_is_chosen_per_store_not_per_rule(minivllm):
    by_rule: dict[str, set[str]] = {}
    for f in minivllm:
        by_rule.setdefault(f.rule, set()).add(f.fix)
        assert f.fix.split(":", 1)[0] in (
            triage.REGISTER,
            triage.COPY,
            triage.LATE,
            triage.REUSE,
            triage.ALLOC_ONCE,
        ), f.fix
    # several RL101 / RL103 stores, each fix names its own attribute
    assert len(by_rule["RL101"]) > 1
    assert len(by_rule["RL103"]) > 1


@pytest.mark.parametrize(
    ("rule", "target", "value", "inplace", "lead", "needle"),
    [
        ("RL101", "layer.perm", triage.AV("fresh"), False, triage.REGISTER, '"perm"'),
        ("RL101", "layer.perm", triage.AV("fresh"), True, triage.COPY, "`layer.perm.copy_"),
        ("RL102", "self.workspace", triage.AV("fresh"), False, triage.ALLOC_ONCE, "existing="),
        (
            "RL102",
            "self.w_s",
            triage.AV("fresh", src="layer.weight_scale"),
            False,
            triage.LATE,
            "`layer.w_s`",
        ),
        ("RL105", "self.kernel", triage.AV("obj", cls="m:Experts"), False, triage.REUSE, "Experts"),
        ("RL106", "layer.w.data", triage.AV("fresh"), True, triage.COPY, "`layer.w.data.copy_"),
        (
            "RL107",
            "self.perm",
            triage.AV("view", src="layer.perm"),
            False,
            triage.LATE,
            "`layer.perm`",
        ),
    ],
)
def test_fix_depends_on_store_kind_target_and_contract(rule, target, value, inplace, lead, needle):
    fix = triage.fix_for(rule, target, value, "", inplace)
    assert fix.startswith(lead + ":"), fix
    assert needle in fix, fix


def test_triage_fields_in_json_and_back(minivllm):
    report = build_report(minivllm, [])
    assert report["schema_version"] == "1.1"
    for row in report["findings"]:
        for key in ("reader", "guard", "masked", "backends", "fix"):
            assert key in row
        assert row["reader"] is None or re.fullmatch(r"\S+\.py:\d+ in \S+", row["reader"])
    back = [Finding.from_json(json.loads(json.dumps(r))) for r in report["findings"]]
    assert [b.to_json() for b in back] == report["findings"]


def test_a_1_0_finding_reads_with_empty_triage_and_the_same_fingerprint():
    old = {
        "rule": "RL101",
        "path": "a.py",
        "line": 3,
        "symbol": "M.process_weights_after_loading",
        "target": "layer.x",
        "message": "m",
        "fingerprint": "",
    }
    f = Finding.from_json(old)
    assert (f.reader, f.guard, f.masked, f.backends, f.fix) == (None, None, None, [], "")
    g = Finding.from_json({**old, "fix": "x", "reader": "a.py:9 in M.apply", "backends": ["B"]})
    compute_fingerprints([f])
    compute_fingerprints([g])
    assert f.fingerprint == g.fingerprint
