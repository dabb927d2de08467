"""The evidence page says what every record stands on (issue 19, "Preconditions and tiers in
plain sight"): rendered from the committed H200 findings and evidence, each record has a line
that names its side, build, tier and stand-ins, its precondition (or `stock`), the platform
path and flags it forces, its harness reads and its grade; the headline's fixed-side figures
keep records made under a precondition apart and count grades, not coarse verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path

from reload_lint.confirm.report import render
from reload_lint.confirm.verdicts import precondition_names

EV = Path(__file__).resolve().parents[2] / "docs/evidence"


def _page() -> tuple[dict, str]:
    findings = json.loads((EV / "h200-vllm-0.25.1.findings.json").read_text())
    doc = json.loads((EV / "h200-vllm-0.25.1.json").read_text())
    return doc, render(findings, doc)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def test_every_record_has_a_line_saying_what_it_stands_on():
    doc, page = _page()
    section = page.split("\n## Every record\n", 1)[1].split("\n## ", 1)[0]
    rows = [_cells(ln) for ln in section.splitlines() if ln.startswith("| `")]
    records = doc["evidence"]
    assert len(rows) == len(records)
    unmatched = list(rows)
    for r in records:
        site = f"`{r['path'].removeprefix('vllm/model_executor/')}:{r['line']}`"
        pre = "+".join(precondition_names(r)) or "stock"
        want_tier = r.get("tier") or "none"
        hit = None
        for row in unmatched:
            site_c, target, side, build, tier, precondition, forces, harness, grade, _ = row
            if (
                site_c == site
                and target == f"`{r['target']}`"
                and side.startswith("fixed" if r["fixed"] else "bug")
                and build == (r.get("recipe") or "-").removeprefix("family:")
                and tier.split(" ", 1)[0] == want_tier
                and precondition == pre
                and grade.split(" ", 1)[0] == r["grade"]
            ):
                hit = row
                break
        assert hit is not None, (site, r["target"], r["fixed"], r.get("recipe"), pre)
        unmatched.remove(hit)
        tier, forces, harness = hit[4], hit[6], hit[7]
        for name in r.get("standins") or []:  # a census row names its stand-ins
            assert name in tier, (site, name)
        forced = r.get("forced")
        if forced:  # the platform and every flag it sets
            assert forced["platform"] in forces
            for flag in forced["flags"] + forced["env"]:
                assert flag in forces, (site, flag)
        else:
            assert forces == "-"
        if r.get("harness_reads"):  # every storage a harness read or a stand-in holds
            for read in r["harness_reads"]:
                assert read.split(" ", 1)[0] in harness, (site, read)
        else:
            assert harness == "-"
    # the committed sweep has records of each kind the section must mark (vLLM 0.25.1 has
    # masking sites, so a sweep of it has census-tier and precondition records)
    assert any(r["tier"] == "census" for r in records)
    assert any(r.get("preconditions") for r in records)


def test_fixed_side_headline_keeps_precondition_records_apart_by_grade():
    doc, page = _page()
    line = next(ln for ln in page.splitlines() if ln.startswith("- fixed-side records by"))
    counts: dict[str, dict[str, int]] = {}
    for r in doc["evidence"]:
        if r["fixed"]:
            how = (r.get("fix_source") or "monkeypatch") + (
                " under a precondition" if r.get("preconditions") else ""
            )
            counts.setdefault(how, {})
            counts[how][r["grade"]] = counts[how].get(r["grade"], 0) + 1
    assert counts
    for how, by_grade in counts.items():
        part = line.split(f" {how}: ", 1)[1].split(";", 1)[0]
        assert {g: int(n) for n, g in (x.split(" ", 1) for x in part.split(", "))} == by_grade
