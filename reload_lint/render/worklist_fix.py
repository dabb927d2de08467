"""The worklist's Fix column: the component's patch (``docs/patches/vllm-<version>/<Component>.diff``)
and what the runner's fixed side said of it, per site.

Each site's codemod is proved in its own run (docs/runner.md, "The fixed side"); the component's
diff is those codemods together. The cell links the diff when ``--patches DIR`` holds one for
the component, and counts the sites' fixed-side verdicts by where the fix came from::

    [MarlinLinearKernel.diff](patches/vllm-0.25.1/MarlinLinearKernel.diff): codemod green 2/2

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


def fix_cell(component: str, findings, fixed: dict, patches: Path | None, out: Path | None) -> str:
    """The Fix cell of one worklist row (``findings``: the row's findings)."""
    link = ""
    if patches is not None:
        diff = Path(patches) / f"{component}.diff"
        if diff.is_file():
            base = Path(out).resolve().parent if out is not None else Path.cwd()
            rel = os.path.relpath(diff.resolve(), base)
            link = f"[{component}.diff]({Path(rel).as_posix()})"
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
