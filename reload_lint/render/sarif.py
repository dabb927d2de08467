"""SARIF 2.1.0 for code-scanning uploads (GitHub, Azure DevOps, VS Code SARIF viewer).

Every rule of the registry is listed under `tool.driver.rules` (stable `ruleIndex`), with its
help taken from the rule catalog (rules/) when it has a page. Every result carries
`partialFingerprints` (the line-free fingerprint), the trace as a `codeFlow`, and, when it was
suppressed inline or by an allowlist and `--show-suppressed` asked for it, a `suppressions`
entry, and its fix: `fixes` (artifactChanges with whole-line replacements) when a codemod
applies, the fix text in `properties.fix` always; every rule has a `helpUri` (its page,
docs/rules/<code>.md). Per-file errors become tool execution notifications. Paths are relative to
`%SRCROOT%`, so the output carries no machine-specific absolute path.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from reload_lint import __version__
from reload_lint.findings import TOOL_NAME, FileError, Finding, fails_gate
from reload_lint.fix.render import fix_text, help_uri, sarif_fixes
from reload_lint.rules import RULES, catalog_dir

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT_KEY = "reloadLint/v1"

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> str:
    from urllib.parse import quote

    return quote(path.replace("\\", "/"), safe="/-._~")


def _strip_front_matter(text: str) -> str:
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            return text[end + 4 :].lstrip("\n")
    return text


def _section(md: str, heading: str) -> str:
    """The first paragraph under `## <heading>` (case-insensitive), or ''."""
    pat = re.compile(rf"^#+\s*{re.escape(heading)}\s*$", re.IGNORECASE | re.MULTILINE)
    m = pat.search(md)
    if not m:
        return ""
    rest = md[m.end() :]
    nxt = re.search(r"^#+\s", rest, re.MULTILINE)
    body = rest[: nxt.start()] if nxt else rest
    paras = [p.strip() for p in body.strip().split("\n\n") if p.strip()]
    return " ".join(paras[0].split()) if paras else ""


@cache
def rule_page(code: str, catalog: str | None = None) -> str:
    """The Markdown page for `code` from the rule catalog, or '' when there is none."""
    root = Path(catalog) if catalog else catalog_dir()
    if not root.is_dir():
        return ""
    for p in sorted(root.glob(f"{code}*.md")):
        try:
            return _strip_front_matter(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return ""
    return ""


def _tags(code: str) -> list[str]:
    if code.startswith("RL9"):
        return ["reload-lint", "diagnostic"]
    return ["reload-lint", "weight-reload", "cuda-graphs"]


def rule_descriptor(code: str, catalog: str | None = None) -> dict:
    rule = RULES[code]
    page = rule_page(code, catalog)
    full = _section(page, "What it does") or rule.summary
    desc: dict = {
        "id": code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": full},
        "defaultConfiguration": {"level": _LEVEL.get(rule.severity, "warning")},
        "properties": {"tags": _tags(code)},
    }
    desc["helpUri"] = help_uri(code)
    if page:
        desc["help"] = {"text": page, "markdown": page}
    else:
        desc["help"] = {"text": f"{code} {rule.name}: {rule.summary}"}
    return desc


def _location(path: str, line: int, column: int = 1, end_line: int | None = None) -> dict:
    region: dict = {"startLine": max(1, line), "startColumn": max(1, column)}
    if end_line is not None and end_line >= line:
        region["endLine"] = max(1, end_line)
    return {
        "physicalLocation": {
            "artifactLocation": {"uri": _uri(path), "uriBaseId": "%SRCROOT%"},
            "region": region,
        }
    }


def _result(f: Finding, index: dict[str, int], baseline_active: bool, strict: bool) -> dict:
    level = _LEVEL.get(f.severity, "warning")
    if level == "error" and not fails_gate(f, strict):
        level = "warning"  # no apply-time reader found: reported, does not fail the gate
    res: dict = {
        "ruleId": f.rule,
        "level": level,
        "message": {"text": f.message},
        "locations": [_location(f.path, f.line, f.column, f.end_line)],
        "partialFingerprints": {FINGERPRINT_KEY: f.fingerprint},
        "properties": {
            "confidence": f.confidence,
            "contract": f.contract,
            "symbol": f.symbol,
            "target": f.target,
        },
    }
    if f.rule in index:
        res["ruleIndex"] = index[f.rule]
    if f.symbol:
        res["locations"][0]["logicalLocations"] = [
            {"fullyQualifiedName": f.symbol, "kind": "function"}
        ]
    if f.trace:
        res["codeFlows"] = [
            {
                "threadFlows": [
                    {
                        "locations": [
                            {
                                "location": {
                                    **_location(s.path, s.line),
                                    "message": {"text": s.note},
                                }
                            }
                            for s in f.trace
                        ]
                    }
                ]
            }
        ]
    if f.via:  # the named/changed files it was reported for (through.py)
        res["relatedLocations"] = [
            {"id": i, **_location(s.path, s.line), "message": {"text": f"via: {s.note}"}}
            for i, s in enumerate(f.via)
        ]
    fixes = sarif_fixes(f, _uri)
    if fixes:
        res["fixes"] = fixes
    if f.fix:
        res["properties"]["fix"] = fix_text(f)
    if f.suppressed is not None:
        kind = "external" if f.suppressed.startswith("allowlisted") else "inSource"
        res["suppressions"] = [{"kind": kind, "status": "accepted", "justification": f.suppressed}]
    if baseline_active:
        res["baselineState"] = "new"
    return res


# `%SRCROOT%`, the base of every result path: declared, without a `uri`. SARIF 2.1.0 (3.14.14)
# lets a producer leave the absolute location out; the report then stays byte-identical across
# checkouts and machines (docs/bad-input.md), and code scanning resolves the paths against the
# repository root, which is where `check` runs in CI.
SRCROOT = {
    "description": {
        "text": "The directory reload-lint ran in (the repository root in CI), or for "
        "--vllm/--sglang the folder `check --print-source` prints."
    }
}


def build_sarif(
    findings: list[Finding],
    errors: list[FileError],
    *,
    baseline_active: bool = False,
    catalog: str | None = None,
    strict: bool = False,
) -> dict:
    codes = sorted(RULES)
    index = {c: i for i, c in enumerate(codes)}
    notifications = [
        {
            "level": "error",
            "message": {"text": f"{e.rule} {e.message}"},
            "descriptor": {"id": e.rule},
            "locations": [_location(e.path, e.line or 1)],
        }
        for e in errors
    ]
    run: dict = {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [rule_descriptor(c, catalog) for c in codes],
            }
        },
        "invocations": [
            {
                "executionSuccessful": True,
                "toolExecutionNotifications": notifications,
            }
        ],
        "columnKind": "unicodeCodePoints",
        "originalUriBaseIds": {"%SRCROOT%": SRCROOT},
        "results": [_result(f, index, baseline_active, strict) for f in findings],
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render_sarif(
    findings: list[Finding],
    errors: list[FileError],
    *,
    baseline_active: bool = False,
    strict: bool = False,
) -> str:
    doc = build_sarif(findings, errors, baseline_active=baseline_active, strict=strict)
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
