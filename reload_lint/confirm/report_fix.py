"""The fixed side on the evidence page: which fix each green or red proves, and its diff.

``render`` (report.py) asks for three pieces: the headline's figures by ``fix_source``, the
fixed-side cell of a site's row, and a section with the diff each fixed-side record proved
(the codemod's patch from the findings file, matched by its sha256, or the checkout's changes).
"""

from __future__ import annotations

from collections import Counter

from reload_lint.confirm.evidence import GRADES
from reload_lint.confirm.patched import finding_patch, sha256_text
from reload_lint.confirm.verdicts import grade_from, precondition_names


def fixed_cell(fixed: dict | None) -> str:
    """``green (codemod 3582de01)``, ``red (monkeypatch)``, or ``-``."""
    if not fixed:
        return "-"
    how = fixed.get("fix_source") or "monkeypatch"
    sha = fixed.get("fix_patch_sha256")
    return f"{fixed['verdict']} ({how}{' ' + sha[:8] if sha else ''})"


def headline(evidence: list[dict], sites: dict) -> list[str]:
    """Figures by fix source, and the stock-reload reds the codemod's patch turns green."""
    by_source: dict[str, Counter] = {}
    for r in evidence:
        if r.get("fixed"):
            how = r.get("fix_source") or "monkeypatch"
            if r.get("preconditions"):
                how += " under a precondition"
            grade = r.get("grade") or grade_from(
                r["verdict"], r.get("failure"), r.get("reason", "")
            )
            by_source.setdefault(how, Counter())[grade] += 1
    out = []
    if by_source:
        # by grade, in GRADES order: a fixed side that is not-applicable is not counted green
        out.append(
            "- fixed-side records by fix source: "
            + "; ".join(
                f"{how}: " + ", ".join(f"{c[g]} {g}" for g in GRADES if c[g])
                for how, c in sorted(by_source.items())
            )
        )
    stock = [
        (head, fixed)
        for head, fixed, _ in sites.values()
        if head["verdict"] == "red"
        and head.get("tier") == "replay"
        and not head.get("preconditions")
        and head.get("failure") != "masked"
    ]
    if stock:
        green = [
            1
            for _, fixed in stock
            if fixed
            and fixed["verdict"] == "green"
            and fixed.get("fix_source") == "codemod"
            and fixed.get("tier") == "replay"
        ]
        out.append(
            f"- red at replay tier under vLLM's stock reload (no precondition): {len(stock)} "
            f"sites; green with the codemod's patch, each in an isolated run: {len(green)}"
        )
    return out


def _patches(findings: list[dict]) -> dict[str, str]:
    out = {}
    for f in findings:
        got = finding_patch(f)
        if got is not None:
            out[sha256_text(got[0])] = got[0]
    return out


def diff_section(findings: list[dict], evidence: list[dict]) -> list[str]:
    """One entry per site and fixed-side record from source: its verdict and the diff."""
    patches = _patches(findings)
    rows = [r for r in evidence if r.get("fixed") and r.get("fix_patch_sha256")]
    if not rows:
        return []
    lines = [
        "",
        "## The patches the fixed side proved",
        "",
        "Each fixed-side record below ran the diff shown (the finding's codemod, `fix_source` "
        "codemod, or the `--source` checkout's changes) on a copy of the sources on the import "
        "path, one site per run, with the build's other targets held fixed by their runtime "
        'fixes (listed). See docs/runner.md, "The fixed side".',
    ]
    groups: dict[tuple, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r["path"], r["line"], r["target"], r.get("recipe") or "")):
        groups.setdefault((r["path"], r["line"], r["target"], r["fix_patch_sha256"]), []).append(r)
    for (path, line, target, sha), recs in groups.items():
        site = f"{path.removeprefix('vllm/model_executor/')}:{line}"
        verdicts = ", ".join(
            f"{(r.get('recipe') or '-').removeprefix('family:')}: {r.get('grade') or r['verdict']}"
            + (f" ({r['failure']})" if r.get("failure") else "")
            + (f" under {'+'.join(precondition_names(r))}" if r.get("preconditions") else "")
            + (f", {r.get('tier') or 'no'} tier" if r.get("tier") != "replay" else "")
            for r in recs
        )
        r = recs[0]
        lines += [
            "",
            f"### `{site}` `{target}`: {verdicts}",
            "",
            f"- {r.get('fix_source')} patch sha256 `{sha}`, tier {r.get('tier') or '-'}: "
            f"{' '.join(str(r['reason']).split())[:300]}",
        ]
        if r.get("isolation"):
            lines.append("- held fixed in the same run: " + "; ".join(r["isolation"])[:600])
        text = patches.get(sha)
        if text is None:
            lines.append("- (the diff is not in the findings file: the checkout's changes)")
            continue
        lines += ["", "```diff", text.rstrip("\n"), "```"]
    return lines
