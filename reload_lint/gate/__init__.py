"""The gate: from the analysis's findings to what a run reports, and its exit code.

Input: the engine's findings and file errors, the suppression comments it collected, the
config (select/ignore, allowlists, strict), and the run's options (a baseline, `--diff REV`,
`--show-suppressed`). Output: a `GateOutcome` (reported, shown, suppressed, baselined,
stale), the rendered report in the chosen format, the stderr notes and the exit code.

- report.py    `apply_gate` (fold, inline suppressions, allowlists, baseline, diff filter,
               named files), `render_report`, `exit_code`, `gate_notes`
- suppress.py  `# reload-lint: ignore[...]` comments (scanned from the text) and allowlists
- baseline.py  `reload-lint baseline` files: write, load, match
- allow.py     `reload-lint allow`: append an allowlist entry
- diff.py      `check --diff REV`: the lines git says changed, and the findings touching them

The rest of the package imports from here (`from reload_lint.gate import apply_gate`); each
name's module is imported the first time it is asked for (a plain check does not load
`diff.py`, which runs git).
"""

from __future__ import annotations

_EXPORTS = {
    "GateOutcome": "report",
    "apply_gate": "report",
    "bundled_allowlist": "report",
    "config_dir": "report",
    "exit_code": "report",
    "gate_notes": "report",
    "render_report": "report",
    "apply_allowlists": "suppress",
    "apply_suppressions": "suppress",
    "load_allowlist": "suppress",
    "scan_suppressions": "suppress",
    "BaselineEntry": "baseline",
    "load_baseline": "baseline",
    "match_baseline": "baseline",
    "render_baseline": "baseline",
    "write_baseline": "baseline",
    "append_entries": "allow",
    "ALL_LINES": "diff",
    "ChangedLines": "diff",
    "changed_lines": "diff",
    "filter_to_diff": "diff",
    "parse_unified_diff": "diff",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """`from reload_lint.gate import NAME`: the module that defines NAME, imported on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
