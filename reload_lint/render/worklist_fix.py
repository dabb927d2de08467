"""The worklist's Fix column: the patch of the row's area (``docs/patches/vllm-<version>/<area>.diff``,
written by ``scripts/gen_patches.py``, one diff per worklist area) and what the runner's fixed
side said of the row's sites.

Each site's codemod is proved in its own run (docs/runner.md, "The fixed side"); the area's
diff is the codemods of its sites together. The cell links the diff when ``--patches DIR``
holds one for the area, and counts the row's fixed-side verdicts by where the fix came from::

    [kernels.linear.mixed_precision.diff](patches/vllm-0.25.1/kernels.linear.mixed_precision.diff): codemod green 2/2

A site whose fixed side is red or inconclusive is named with its line.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

_RANK = {"green": 0, "red": 1, "unread": 2, "inconclusive": 3}


def load_fixed(path: Path | None) -> dict[str, list[dict]]:
    """fingerprint -> the evidence's fixed-side records (raw JSON), or {} without evidence.
    The evidence file was validated by ``load_evidence`` already."""
    if path is None:
        return {}
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    recs = doc.get("evidence", []) if isinstance(doc, dict) else doc
    out: dict[str, list[dict]] = {}
    for r in recs:
        if isinstance(r, dict) and r.get("fixed"):
            out.setdefault(r.get("fingerprint", ""), []).append(r)
    return out


def _site_fix(recs: list[dict]) -> dict | None:
    """The record that speaks for a site's fix: from source first, then the best verdict."""
    if not recs:
        return None
    return min(
        recs,
        key=lambda r: (
            (r.get("fix_source") or "monkeypatch") == "monkeypatch",
            _RANK.get(r.get("verdict"), 9),
        ),
    )


def patch_file(area: str) -> str:
    """The diff of a worklist area (``fused_moe/experts`` -> ``fused_moe.experts.diff``), as
    ``scripts/gen_patches.py`` names it."""
    return area.replace("/", ".") + ".diff"


def fix_cell(area: str, findings, fixed: dict, patches: Path | None, out: Path | None) -> str:
    """The Fix cell of one worklist row (``findings``: the row's findings, ``area`` its
    section)."""
    link = ""
    if patches is not None:
        from reload_lint.render.worklist import area_of

        # the areas the row's codemods edit (an RL108 fix edits the rebuild site, elsewhere)
        areas = sorted(
            {
                area_of(p)
                for f in findings
                for p in ((f.remedy or {}).get("paths") or [] if isinstance(f.remedy, dict) else [])
            }
        ) or [area]
        base = Path(out).resolve().parent if out is not None else Path.cwd()
        links = []
        for a in areas:
            diff = Path(patches) / patch_file(a)
            if diff.is_file():
                rel = os.path.relpath(diff.resolve(), base)
                links.append(f"[{diff.name}]({Path(rel).as_posix()})")
        link = ", ".join(links)
    counts: dict[str, Counter] = {}
    odd: list[str] = []
    sites = 0
    for f in findings:
        r = _site_fix(fixed.get(f.fingerprint, []))
        if r is None:
            continue
        sites += 1
        how = r.get("fix_source") or "monkeypatch"
        counts.setdefault(how, Counter())[r["verdict"]] += 1
        if r["verdict"] != "green":
            fail = f" {r['failure']}" if r.get("failure") else ""
            odd.append(f"{f.line} {r['verdict']}{fail}")
    parts = [
        f"{how} " + ", ".join(f"{v} {n}/{sites}" for v, n in sorted(c.items()))
        for how, c in sorted(counts.items())
    ]
    text = "; ".join(parts)
    if odd:
        text += f" (line {', '.join(odd)})"
    if link:
        return f"{link}: {text}" if text else link
    return text or "-"
