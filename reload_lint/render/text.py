"""`path:line:col: CODE message`, the trace indented under it (ruff's shape), then the
triage lines: `guard:` / `masked:` when known, `also:` for each folded finding, `fix:` and `see: reload-lint rule RLxxx`."""

from __future__ import annotations

from reload_lint.findings import FileError, Finding, fails_gate

WARNING_TAG = " [warning: no apply-time reader found]"


def render_text(
    findings: list[Finding],
    errors: list[FileError],
    *,
    show_trace: bool = True,
    strict: bool = False,
) -> str:
    lines: list[str] = []
    for f in findings:
        tag = f" [suppressed: {f.suppressed}]" if f.suppressed else ""
        if not f.suppressed and not fails_gate(f, strict):
            tag += WARNING_TAG
        lines.append(
            f"{f.path}:{f.line}:{f.column}: {f.rule} {f.message} [{f.confidence} confidence]{tag}"
        )
        lines += _via_lines(f, show_trace)
        if show_trace:
            for step in f.trace:
                lines.append(f"    {step.path}:{step.line}: {step.note}")
        for label, value in (("guard", f.guard), ("masked", f.masked)):
            if value:
                lines.append(f"    {label}: {value}")
        for a in f.also:  # the same storage, folded (reload_lint/fold.py)
            lines.append(f"    also: {a['path']}:{a['line']}: {a['rule']} `{a['target']}`")
        if f.fix:
            from reload_lint.fix.render import fix_text  # difflib: only a report with fixes

            lines.append(f"    fix: {fix_text(f)}")
        lines.append(f"    see: reload-lint rule {f.rule}")
    for e in errors:
        loc = f"{e.path}:{e.line}:" if e.line else f"{e.path}:"
        lines.append(f"{loc} {e.rule} {e.message}")
    return "\n".join(lines) + ("\n" if lines else "")


def _via_lines(f: Finding, show_trace: bool) -> list[str]:
    """Why a finding located elsewhere is reported for a named or changed file: the steps of
    it that lie there (through.py). Under a shown trace, one line per file with the steps'
    lines (the trace below has their notes); without it, each step with its note."""
    if not show_trace:
        return [f"    via {s.path}:{s.line}: {s.note}" for s in f.via]
    by_path: dict[str, list[str]] = {}
    for s in f.via:
        by_path.setdefault(s.path, []).append(str(s.line))
    return [
        f"    via {path}:{','.join(dict.fromkeys(ls))} (trace step{'s' if len(ls) > 1 else ''} in"
        " a named or changed file)"
        for path, ls in by_path.items()
    ]


def summary_line(findings: list[Finding], errors: list[FileError], *, strict: bool = False) -> str:
    n = len(findings)
    parts = [f"{n} finding{'s' if n != 1 else ''}"]
    warn = sum(1 for f in findings if not fails_gate(f, strict))
    if warn:
        parts[0] += f" ({warn} warning{'s' if warn != 1 else ''}: no apply-time reader found)"
    if errors:
        parts.append(f"{len(errors)} file error{'s' if len(errors) != 1 else ''}")
    return "Found " + ", ".join(parts) + "."
