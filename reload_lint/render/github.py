"""GitHub Actions workflow commands: one annotation per finding on the PR diff.

`::error file=PATH,line=N,col=C,endLine=M,title=RL101 name::message%0A  trace...%0Afix: ...%0Asee: ...`
(the fix line is the same text as the text report's, JSON `fix` and SARIF `properties.fix`).
Severity maps to `error` / `warning` / `notice`; suppressed findings (with
`--show-suppressed`) are notices. Values are escaped as the runner expects (`%`, CR, LF, and
additionally `:` and `,` inside properties).
"""

from __future__ import annotations

from reload_lint.findings import FileError, Finding, fails_gate
from reload_lint.fix.model import rule_url
from reload_lint.fix.render import fix_text
from reload_lint.rules import RULES

_COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: str) -> str:
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def _props(**kw) -> str:
    return ",".join(f"{k}={escape_property(str(v))}" for k, v in kw.items() if v not in (None, ""))


def annotation(f: Finding, strict: bool = False) -> str:
    cmd = "notice" if f.suppressed is not None else _COMMAND.get(f.severity, "warning")
    if cmd == "error" and not fails_gate(f, strict):
        cmd = "warning"  # no apply-time reader found: does not fail the gate
    name = RULES[f.rule].name if f.rule in RULES else ""
    title = f"{f.rule} {name}".strip()
    body = f.message
    if f.suppressed is not None:
        body += f" [suppressed: {f.suppressed}]"
    if f.via:
        body += "\n" + "\n".join(f"  via {s.path}:{s.line}: {s.note}" for s in f.via)
    if f.trace:
        body += "\n" + "\n".join(f"  {s.path}:{s.line}: {s.note}" for s in f.trace)
    if f.fix:
        body += f"\nfix: {fix_text(f)}"
    body += f"\nsee: {rule_url(f.rule)} (reload-lint rule {f.rule})"
    props = _props(
        file=f.path,
        line=f.line,
        col=f.column if f.column > 0 else None,
        endLine=f.end_line if f.end_line > f.line else None,
        title=title,
    )
    return f"::{cmd} {props}::{escape_data(body)}"


def error_annotation(e: FileError) -> str:
    props = _props(file=e.path, line=e.line or None, title=e.rule)
    return f"::error {props}::{escape_data(f'{e.rule} {e.message}')}"


def render_github(findings: list[Finding], errors: list[FileError], strict: bool = False) -> str:
    lines = [annotation(f, strict) for f in findings] + [error_annotation(e) for e in errors]
    return "\n".join(lines) + ("\n" if lines else "")
