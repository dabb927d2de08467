"""The findings JSON contract (docs/findings.md, docs/findings.schema.json)."""

from __future__ import annotations

import json
from collections import Counter

from reload_lint import __version__
from reload_lint.findings import SCHEMA_VERSION, TOOL_NAME, FileError, Finding


def build_report(findings: list[Finding], errors: list[FileError], *, files: int = 0) -> dict:
    by_rule = Counter(f.rule for f in findings)
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": TOOL_NAME, "version": __version__},
        "findings": [f.to_json() for f in findings],
        "errors": [e.to_json() for e in errors],
        "summary": {
            "findings": len(findings),
            "errors": len(errors),
            "files": files,
            "by_rule": dict(sorted(by_rule.items())),
        },
    }


def render_json(findings: list[Finding], errors: list[FileError], *, files: int = 0) -> str:
    return json.dumps(build_report(findings, errors, files=files), indent=2, sort_keys=False) + "\n"


def load_report(text: str) -> tuple[list[Finding], list[FileError]]:
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise ValueError("no `findings` list")  # valid JSON, but not a report
    findings = [Finding.from_json(f) for f in data.get("findings", [])]
    errors = [
        FileError(e["rule"], e["path"], e.get("message", ""), int(e.get("line", 0)))
        for e in data.get("errors", [])
    ]
    return findings, errors
