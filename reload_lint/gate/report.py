"""The gate: an engine result -> what the user sees (rule selection, suppressions, allowlists,
baseline, `--diff`), the report in each format, and the exit code (docs/gate.md).

Input: the engine's RunResult, the config, the run's plan and options. Output: a
GateOutcome (reported, shown, suppressed, baselined, stale), the rendered report, the stderr
notes and the exit code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.cli import Plan, under
from reload_lint.config import Config
from reload_lint.errors import ReloadLintError
from reload_lint.exitcodes import EXIT_CLEAN, EXIT_FINDINGS, EXIT_INCOMPLETE
from reload_lint.findings import FileError, Finding


def exit_code(
    findings: list[Finding], errors: list[FileError], exit_zero: bool, strict: bool = False
) -> int:
    from reload_lint.findings import fails_gate

    if exit_zero:
        return EXIT_CLEAN
    if any(fails_gate(f, strict) for f in findings):
        return EXIT_FINDINGS
    if errors:
        return EXIT_INCOMPLETE
    return EXIT_CLEAN


@dataclass
class GateOutcome:
    reported: list[Finding]  # new, unsuppressed findings (what fails the run)
    shown: list[Finding]  # reported, plus suppressed ones with --show-suppressed
    suppressed: list[Finding]  # inline + allowlisted
    errors: list[FileError]
    baselined: int = 0
    stale: list = field(default_factory=list)
    baseline_active: bool = False
    # baseline entries whose finding is now folded into another's `also` (fold.py)
    folded: list = field(default_factory=list)


def config_dir(cfg: Config) -> Path:
    return Path(cfg.source).parent if cfg.source else Path.cwd()


def bundled_allowlist(package: str) -> Path | None:
    """allowlists/<package>.toml (the top-level folder; package data in the wheel)."""
    from reload_lint.rules import data_dir

    p = data_dir("allowlists") / f"{package}.toml"
    return p if p.is_file() else None


def load_allowlists(args, cfg: Config, plan: Plan, codebase: str | None = None) -> list:
    """The bundled allowlist of the audited codebase (a `--vllm` release, or a tree the engine
    detected as vLLM, such as a vLLM checkout under pre-commit), then the configured ones,
    then --allowlist."""
    from reload_lint.gate.suppress import load_allowlist

    entries = []
    if plan.release is not None:
        codebase = plan.release[0]
    if codebase is not None:
        bundled = bundled_allowlist(codebase)
        if bundled is not None:
            entries += load_allowlist(bundled, display=f"allowlists/{bundled.name}")
    for a in cfg.allowlists:
        entries += load_allowlist(config_dir(cfg) / a, display=a)
    for a in getattr(args, "allowlist", None) or []:
        entries += load_allowlist(Path(a), display=a)
    return entries


def baseline_path(args, cfg: Config) -> Path | None:
    if getattr(args, "baseline", None):
        return Path(args.baseline)
    if cfg.baseline and not getattr(args, "no_config_baseline", False):
        return config_dir(cfg) / cfg.baseline
    return None


def apply_gate(
    result, cfg: Config, plan: Plan, args, *, use_baseline: bool = True, changed=None
) -> GateOutcome:
    """Engine result -> what the user sees: rule selection, suppressions, allowlists,
    baseline, diff. Order matters: unused-suppression and stale-baseline are judged on the
    full result, before --diff narrows what is reported."""
    from reload_lint.fold import fold_shared_storage
    from reload_lint.gate.suppress import apply_allowlists, apply_suppressions

    findings = [
        f
        for f in result.findings
        if cfg.rule_enabled(f.path, f.rule) and (plan.narrow is None or under(f.path, plan.narrow))
    ]
    if plan.only_paths is not None:  # located in a named file or passing through one
        from reload_lint.incremental import through_files

        findings = through_files(findings, plan.only_paths)
    errors = [
        e
        for e in result.errors
        if (plan.only_paths is None or e.path in plan.only_paths)
        and (plan.narrow is None or under(e.path, plan.narrow))
    ]
    meta = apply_suppressions(
        findings,
        getattr(result, "suppressions", None) or {},
        enabled=cfg.rule_enabled,
        paths=plan.only_paths,
    )
    findings += [m for m in meta if cfg.rule_enabled(m.path, m.rule)]
    codebase = getattr(result, "codebase", None)
    apply_allowlists(findings, load_allowlists(args, cfg, plan, codebase))
    # one storage, one finding: what another finding already reports goes into its `also`
    findings = fold_shared_storage(findings)
    findings.sort(key=Finding.sort_key)
    suppressed = [f for f in findings if f.suppressed is not None]
    reported = [f for f in findings if f.suppressed is None]
    out = GateOutcome(reported=reported, shown=[], suppressed=suppressed, errors=errors)
    bpath = baseline_path(args, cfg) if use_baseline else None
    if bpath is not None:
        from reload_lint.gate.baseline import load_baseline, match_baseline

        entries = load_baseline(bpath)
        res = match_baseline(
            findings,
            entries,
            in_scope=lambda e: plan.in_scope(e.path) and cfg.rule_enabled(e.path, e.rule),
        )
        out.reported, out.baselined, out.stale = res.new, len(res.baselined), res.stale
        out.folded = res.folded
        out.baseline_active = True
    shown_suppressed = suppressed if getattr(args, "show_suppressed", False) else []
    if changed is not None:
        from reload_lint.gate.diff import filter_to_diff

        out.reported, out.errors = filter_to_diff(out.reported, out.errors, changed)
        shown_suppressed, _ = filter_to_diff(shown_suppressed, [], changed)
    out.shown = sorted([*out.reported, *shown_suppressed], key=Finding.sort_key)
    return out


def gate_notes(out: GateOutcome, strict: bool, show_suppressed: bool) -> list[str]:
    notes = []
    if out.baseline_active:
        notes.append(
            f"baseline: {out.baselined} known finding{'s' if out.baselined != 1 else ''} "
            f"matched, {len(out.stale)} stale entr{'ies' if len(out.stale) != 1 else 'y'}"
            + (" (--strict-baseline: failing)" if strict and out.stale else "")
        )
        if out.folded:
            n = len(out.folded)
            notes.append(
                f"baseline: {n} entr{'ies' if n != 1 else 'y'} now folded into another "
                "finding's `also` (the same storage, reported once; regenerate the baseline to "
                "drop them)"
            )
            for e, host in out.folded:
                notes.append(
                    f"  folded: {e.path}: {e.rule} {e.symbol} `{e.target}` [{e.fingerprint}] "
                    f"-> {host.path}:{host.line} {host.rule} `{host.target}`"
                )
        for e in out.stale:
            notes.append(
                f"  stale: {e.path}: {e.rule} {e.symbol} `{e.target}` [{e.fingerprint}] "
                "(fixed or renamed: regenerate the baseline to drop it)"
            )
    if out.suppressed and not show_suppressed:
        n = len(out.suppressed)
        notes.append(
            f"{n} suppressed finding{'s' if n != 1 else ''} (inline or allowlist); "
            "--show-suppressed lists them"
        )
    return notes


def _statistics(findings: list[Finding], errors: list[FileError]) -> str:
    """Counts by rule, the files that could not be analysed (RL9xx rows) included: an exit 3
    must show why."""
    from collections import Counter

    from reload_lint.rules import RULES

    counts = Counter([*(f.rule for f in findings), *(e.rule for e in errors)])
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return "".join(
        f"{n:>5}  {code}  {RULES[code].name if code in RULES else ''}\n" for code, n in rows
    )


def render_report(args, out: GateOutcome, files: int, strict: bool = False) -> str:
    fmt = args.fmt
    if getattr(args, "statistics", False) and fmt == "text":
        return _statistics(out.shown, out.errors)
    if fmt == "json":
        import json

        from reload_lint.render.json_ import build_report

        report = build_report(out.shown, out.errors, files=files)
        report["summary"]["suppressed"] = len(out.suppressed)
        report["summary"]["baselined"] = out.baselined
        report["summary"]["stale_baseline"] = len(out.stale)
        return json.dumps(report, indent=2, sort_keys=False) + "\n"
    if fmt == "text":
        from reload_lint.render.text import render_text, summary_line

        text = render_text(out.shown, out.errors, strict=strict)
        if not args.output:
            text += summary_line(out.reported, out.errors, strict=strict) + "\n"
        return text
    if fmt == "sarif":
        from reload_lint.render.sarif import render_sarif

        return render_sarif(
            out.shown, out.errors, baseline_active=out.baseline_active, strict=strict
        )
    if fmt == "github":
        from reload_lint.render.github import render_github

        return render_github(out.shown, out.errors, strict=strict)
    raise ReloadLintError(f"unknown --format {fmt}")
