"""vLLM 0.33.0 on paper: every finding maps to a family row, or its row names the missing piece.

vLLM 0.33.0 needs torch 2.14 (the lent H200 has 2.11), so the runner cannot run it here. These
tests pin what it would do on a machine that can: the findings of ``check --vllm 0.33.0``,
computed now (integration: it needs the release tree), each map to a row; a row either runs
there (a layer kind the harness builds, a quantization config, the stack it needs named and,
for Humming, the ``humming`` module checked) or says why not (``unsupported``: no CUDA machine
runs it; ``missing``: the runner lacks that piece). docs/runner.md lists each such row and what
it needs. The CPU tests check that ``FamilyRecipe.unavailable`` reports exactly those reasons.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from reload_lint.confirm.families import BY_ID, map_finding
from reload_lint.confirm.rows_0330 import ROWS_0330, VLLM_0330
from reload_lint.findings import Finding

ROOT = Path(__file__).resolve().parents[2]
HARNESS_KINDS = ("moe", "linear", "mla")


def _runs_somewhere(row) -> bool:
    return row.unsupported is None and row.missing is None


def _findings_0330() -> list[Finding]:
    out = subprocess.run(
        [sys.executable, "-m", "reload_lint", "check", "--vllm", "0.33.0", "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if out.returncode not in (0, 1):
        pytest.skip(f"vLLM 0.33.0 sources unavailable: {out.stderr.strip()[-300:]}")
    return [Finding.from_json(d) for d in json.loads(out.stdout)["findings"]]


@pytest.mark.integration
def test_every_vllm_0_33_0_finding_maps_to_a_row_or_names_the_missing_piece():
    findings = [f for f in _findings_0330() if f.suppressed is None]
    assert findings
    unmapped = [
        f"{f.path}:{f.line} {f.symbol}: {map_finding(f).how}"
        for f in findings
        if map_finding(f).row is None
    ]
    assert not unmapped, "\n".join(unmapped)
    new = {r.id for r in ROWS_0330}
    doc = (ROOT / "docs/runner.md").read_text(encoding="utf-8")
    section = doc.split("## vLLM 0.33.0 on paper", 1)[1].split("\n## ", 1)[0]
    # the table's findings column is today's count per row; a row no finding maps to is listed
    # only when it was added for 0.33.0
    listed = {k: int(n) for k, n in re.findall(r"^\| `([\w-]+)` \| (\d+) \|", section, re.M)}
    live = Counter(map_finding(f).row.id for f in findings)
    assert {k: n for k, n in listed.items() if n} == dict(live), "docs/runner.md 0.33.0 table"
    assert {k for k, n in listed.items() if not n} <= new
    for f in findings:
        row = map_finding(f).row
        where = f"{f.path}:{f.line} {f.symbol} -> {row.id}"
        # docs/runner.md names the row and what it needs
        assert f"`{row.id}`" in section, where
        if not _runs_somewhere(row):
            assert (row.unsupported or row.missing).strip(), where
            continue
        assert row.layer in HARNESS_KINDS or row.layer == "recipe", where
        if row.id in new:
            # a 0.33.0 class: the stack is named, and a quantized row has its config
            assert row.needs[: len(VLLM_0330)] == VLLM_0330, where
        if f.symbol.split(".")[0].startswith("Humming"):
            # humming-kernels is a hard dependency of 0.33.0 and the row checks it imports
            assert "humming" in row.modules or row.id == "moe-humming", where
            if row.layer == "linear":
                assert row.linear_backend == "humming", where


def test_rows_added_for_0_33_0_say_what_they_need_or_why_not():
    for row in ROWS_0330:
        assert BY_ID[row.id] is row
        if _runs_somewhere(row):
            assert row.needs and row.layer in HARNESS_KINDS, row.id
            assert row.quant is not None, row.id
        else:
            assert (row.unsupported or row.missing) and not (row.unsupported and row.missing)


def test_unavailable_names_the_missing_piece_the_platform_or_the_module(monkeypatch):
    from reload_lint.confirm.recipes import vllm_layers
    from reload_lint.confirm.recipes.vllm_layers import FamilyRecipe

    # as on a machine where vLLM 0.33.0 imports and CUDA is there
    monkeypatch.setattr(vllm_layers, "vllm_unavailable", lambda device: None)
    r = FamilyRecipe(BY_ID["attn-kv-cache-scales"])
    assert r.unavailable("cuda:0").startswith("the runner lacks an attention-layer harness")
    assert "Intel AMX" in FamilyRecipe(BY_ID["attn-amx-mla"]).unavailable("cuda:0")
    monkeypatch.setattr(
        "importlib.util.find_spec", lambda name, *a: None if name == "humming" else object()
    )
    why = FamilyRecipe(BY_ID["linear-gptq-humming"]).unavailable("cuda:0")
    assert why.startswith("module humming is not importable") and "humming-kernels" in why
    assert FamilyRecipe(BY_ID["moe-wna16"]).unavailable("cuda:0") is None
