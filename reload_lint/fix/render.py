"""The one fix text, and a remedy's edits as SARIF `fixes` (artifactChanges / replacements)."""

from __future__ import annotations

import difflib

from reload_lint.findings import Finding
from reload_lint.fix.model import rule_url


def fix_text(f: Finding) -> str:
    """What every format says about the fix: the remedy's description when it has a patch
    (tagged with how to apply it), its recipe otherwise, else the triage line."""
    rem = f.remedy
    if rem is None:
        return f.fix
    if isinstance(rem, dict):
        appl, desc, patch = rem.get("applicability"), rem.get("description"), rem.get("patch")
        recipe = rem.get("recipe")
    else:
        appl, desc, patch, recipe = rem.applicability, rem.description, rem.has_patch, rem.recipe
    if patch:
        how = "--fix" if appl == "safe" else "--fix --unsafe-fixes"
        return f"[{appl}: {how}] {desc}"
    return f"[manual] {recipe or desc or f.fix}"


def sarif_fixes(f: Finding, uri) -> list[dict]:
    """SARIF 2.1.0 `fixes`: one fix, one artifactChange per file, whole-line replacements
    (regions start at column 1 of their first line and end at column 1 of the line after;
    an insertion is an empty region)."""
    rem = f.remedy
    if rem is None or isinstance(rem, dict) or not rem.has_patch:
        return []
    changes = []
    for e in rem.edits:
        a, b = e.before.splitlines(keepends=True), e.after.splitlines(keepends=True)
        reps = []
        sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        for op, a0, a1, b0, b1 in sm.get_opcodes():
            if op == "equal":
                continue
            reps.append(
                {
                    "deletedRegion": {
                        "startLine": a0 + 1,
                        "startColumn": 1,
                        "endLine": a1 + 1,
                        "endColumn": 1,
                    },
                    "insertedContent": {"text": "".join(b[b0:b1])},
                }
            )
        changes.append(
            {
                "artifactLocation": {"uri": uri(e.path), "uriBaseId": "%SRCROOT%"},
                "replacements": reps,
            }
        )
    return [{"description": {"text": fix_text(f)}, "artifactChanges": changes}]


def help_uri(code: str) -> str:
    return rule_url(code)
