"""`path:line:col: CODE message`, the trace indented under it (ruff's shape), then the
triage lines: `guard:` / `masked:` when known, `fix:` and `see: reload-lint rule RLxxx`."""

from __future__ import annotations

from reload_lint.findings import FileError, Finding


def render_text(
    findings: list[Finding], errors: list[FileError], *, show_trace: bool = True
) -> str:
    lines: list[str] = []
    for f in findings:
        tag = f" [suppressed: {f.suppressed}]" if f.suppressed else ""
        lines.append(
            f"{f.path}:{f.line}:{f.column}: {f.rule} {f.message} [{f.confidence} confidence]{tag}"
        )
        if show_trace:
            for step in f.trace:
                lines.append(f"    {step.path}:{step.line}: {step.note}")
        for label, value in (("guard", f.guard), ("masked", f.masked)):
            if value:
                lines.append(f"    {label}: {value}")
        if f.fix:
            lines.append(f"    fix: {f.fix}")
        lines.append(f"    see: reload-lint rule {f.rule}")
    for e in errors:
        loc = f"{e.path}:{e.line}:" if e.line else f"{e.path}:"
        lines.append(f"{loc} {e.rule} {e.message}")
    return "\n".join(lines) + ("\n" if lines else "")


def summary_line(findings: list[Finding], errors: list[FileError]) -> str:
    n = len(findings)
    parts = [f"{n} finding{'s' if n != 1 else ''}"]
    if errors:
        parts.append(f"{len(errors)} file error{'s' if len(errors) != 1 else ''}")
    return "Found " + ", ".join(parts) + "."
