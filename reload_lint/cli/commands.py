"""Subcommand implementations: one `cmd_<name>(args) -> exit code` per subcommand.

Input: the parsed arguments (parser.py). Output: the report or listing on stdout (or `-o`),
notes on stderr, the exit code. They call into the library: plan.py (what a run audits, the
engine run) and the gate (reload_lint/gate/: what it reports, the exit code)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.cli.plan import (
    base_notes,
    effective_config,
    nothing_analysed,
    plan_targets,
    run_engine,
)
from reload_lint.errors import ReloadLintError
from reload_lint.exitcodes import EXIT_CLEAN, EXIT_FINDINGS, EXIT_INCOMPLETE
from reload_lint.findings import FileError
from reload_lint.gate import apply_gate, config_dir, exit_code, gate_notes, render_report


def write_output(text: str, output: str | None) -> None:
    if output:
        from reload_lint.fsutil import atomic_write_text

        atomic_write_text(Path(output), text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def cmd_check(args) -> int:
    cfg = effective_config(args)
    plan = plan_targets(args, cfg)
    if getattr(args, "print_source", False):
        print(plan.base)  # the release's unpacked root (resolve_targets checked the flags)
        return EXIT_CLEAN
    from reload_lint.fix import FIX_DIFF

    changed = None
    fix_diff = getattr(args, "diff", None) == FIX_DIFF
    if getattr(args, "diff", None) and not fix_diff:
        from reload_lint.gate import changed_lines

        changed = changed_lines(args.diff, plan.base)  # fail fast on a bad REV
    # the fix layer is imported only by a run that computes fixes (a fix flag) or reports a
    # finding carrying a remedy (none does without one): a plain check does not load it
    fixing = fix_diff or any(getattr(args, a, False) for a in ("fix", "unsafe_fixes", "show_fixes"))
    fixcmd = None
    if fixing:
        from reload_lint.fix import command as fixcmd

        fixcmd.check_writable(args, plan)
    if plan.only_paths is not None and not plan.only_paths:
        result = _EmptyResult()  # every file passed by name is excluded by config
    else:
        result = run_engine(args, cfg, plan)
    out = apply_gate(result, cfg, plan, args, changed=changed)
    fx = None
    if fixcmd is not None and fixcmd.wanted(args, plan):
        fx = fixcmd.attach(args, cfg, plan, out.reported)
    if fixcmd is None and any(f.remedy is not None for f in out.reported):
        from reload_lint.fix import command as fixcmd
    unsafe = getattr(args, "unsafe_fixes", False)
    oc = None
    if fix_diff:
        if fx is not None:
            from reload_lint.fix.outcome import tally

            texts = {p: after for p, (_, after) in fx.files(unsafe).items()}
            again = fixcmd.reaudit_patched(args, cfg, plan, texts, changed) if texts else out
            oc = tally(out.reported, again.reported, fixcmd.edited_spans(fx, unsafe))
        patch, code = fixcmd.diff_report(fx, out.reported, unsafe, oc)
        write_output(patch, args.output)
        return code
    total = len(out.reported)
    if getattr(args, "fix", False) and fx is not None:
        from reload_lint.fix.outcome import tally

        fixcmd.write_fixes(fx, plan, unsafe)
        # what is fixed is what a plain, fresh audit of the written tree says
        result, again = fixcmd.reaudit_written(args, cfg, plan, changed)
        oc = tally(out.reported, again.reported, fixcmd.edited_spans(fx, unsafe))
        fixcmd.mark(out.reported, again.reported, oc, unsafe)
        for line in fixcmd.new_lines(oc):
            print(line, file=sys.stderr)
        out = again
    text = render_report(args, out, result.files_scanned, cfg.strict)
    if args.fmt == "text" and not args.output and not getattr(args, "statistics", False):
        if getattr(args, "fix", False):
            summary = oc.summary(total) if oc is not None else fixcmd.fixed_line(0, 0)
            text = text.rsplit("Found ", 1)[0] + summary + "\n"
        hint = fixcmd.hint_line(out.reported, unsafe) if fixcmd is not None else None
        if hint:
            text += hint + "\n"
        elif fx is None and out.reported:
            # fixes are opt-in (their validation re-audits a patched copy): say how to see them
            text += (
                "Codemods: `--diff` prints the patch `--fix` would write "
                "(`--show-fixes` puts each finding's fix in the report).\n"
            )
    write_output(text, args.output)
    for note in [
        *nothing_analysed(plan, cfg, result),
        *base_notes(plan, result),
        *gate_notes(out, args.strict_baseline, args.show_suppressed),
    ]:
        print(note, file=sys.stderr)
    if args.exit_zero:
        return EXIT_CLEAN
    if oc is not None and oc.new:
        return EXIT_FINDINGS  # a fix made a finding the first run did not have
    if args.strict_baseline and out.stale:
        return EXIT_FINDINGS
    return exit_code(out.reported, out.errors, False, cfg.strict)


@dataclass
class _EmptyResult:
    findings: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    files_scanned: int = 0
    suppressions: dict = field(default_factory=dict)


def cmd_baseline(args) -> int:
    """Record today's unsuppressed findings; atomic, sorted, readable."""
    from reload_lint.gate import write_baseline

    cfg = effective_config(args)
    plan = plan_targets(args, cfg)
    args.show_suppressed = False
    result = run_engine(args, cfg, plan)
    for note in nothing_analysed(plan, cfg, result):
        print(note, file=sys.stderr)
    out = apply_gate(result, cfg, plan, args, use_baseline=False)
    n = write_baseline(
        Path(args.output), out.reported, _carried_over(Path(args.output), out.errors)
    )
    print(
        f"reload-lint: wrote {n} baseline entr{'ies' if n != 1 else 'y'} to {args.output}",
        file=sys.stderr,
    )
    if out.errors:
        from reload_lint.render.text import render_text

        sys.stderr.write(render_text([], out.errors))
        return EXIT_INCOMPLETE
    return EXIT_CLEAN


def _carried_over(path: Path, errors: list[FileError]) -> list:
    """Entries of the existing baseline for files (or directories) this run could not
    analyse: a transient read error must not silently drop what the user recorded."""
    if not errors or not path.exists():
        return []
    from reload_lint.gate import load_baseline

    try:
        old = load_baseline(path)
    except ReloadLintError:
        return []  # unreadable old baseline: nothing to keep, it is rewritten
    bad = {e.path for e in errors}
    return [e for e in old if e.path in bad or any(e.path.startswith(b + "/") for b in bad)]


def cmd_worklist(args) -> int:
    """Render the Markdown worklist from a run (or a findings JSON) plus runtime evidence."""
    from reload_lint.render.worklist import load_evidence, render_worklist

    evidence = load_evidence(Path(args.evidence)) if args.evidence else {}
    cfg = effective_config(args)
    decided = getattr(args, "include_decided", False)
    if decided and args.findings:
        raise ReloadLintError(
            "--include-decided analyses the tree; it cannot render a --findings report"
        )
    explained = files = None
    if args.findings:
        from reload_lint.render.json_ import load_report

        try:
            text = Path(args.findings).read_text(encoding="utf-8")
            findings, _ = load_report(text)
        except OSError as exc:
            raise ReloadLintError(
                f"{args.findings}: cannot read findings: {exc.strerror or exc}"
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise ReloadLintError(f"{args.findings}: not a findings JSON report: {exc}") from None
        live = [f for f in findings if f.suppressed is None]
        accepted = [f for f in findings if f.suppressed is not None]
        source = args.source or ""
    else:
        plan = plan_targets(args, cfg)
        args.show_suppressed = True
        if decided:
            from reload_lint.analysis.explainlog import EVERYTHING

            args.explain = EVERYTHING
        result = run_engine(args, cfg, plan)
        explained, files = getattr(result, "explain", None), getattr(result, "analysed", None)
        out = apply_gate(result, cfg, plan, args, use_baseline=False)
        live = out.reported
        accepted = [f for f in out.suppressed if f.suppressed.startswith("allowlisted")]
        if plan.release is not None:
            source = f"{plan.release[0]} {plan.release[1]} release sources"
        else:
            source = args.source or ""
    fix_column = None
    if getattr(args, "patches", None):
        from reload_lint.render.worklist_fix import fix_cell, load_fixed

        patches = Path(args.patches)
        if not patches.is_dir():
            raise ReloadLintError(f"--patches {args.patches}: no such directory")
        fixed = load_fixed(Path(args.evidence) if args.evidence else None)
        out = Path(args.output) if args.output else None

        def fix_column(area, fs):
            return fix_cell(area, fs, fixed, patches, out)

    text = render_worklist(
        live,
        evidence=evidence,
        accepted=accepted,
        title=args.title,
        source=source,
        fix_column=fix_column,
    )
    if decided and explained is not None:
        from reload_lint.render.worklist_decided import render_decided

        text += render_decided([*live, *accepted], explained, files)
    write_output(text, args.output)
    return EXIT_CLEAN


def cmd_rule(args) -> int:
    """Print one rule's page (by code or name, from the catalog), or list the catalog."""
    from reload_lint.catalog import get_rule, load_catalog, render_rule_page

    if not args.code:
        for code, doc in load_catalog().items():
            print(f"{code}  {doc.name:<28} {doc.severity:<8} {doc.summary}")
        return EXIT_CLEAN
    write_output(render_rule_page(get_rule(args.code), generated_note=False), None)
    return EXIT_CLEAN


def cmd_gen_docs(args) -> int:
    """Write docs/rules/ from rules/; with --check, exit 1 when the pages are stale."""
    from reload_lint.catalog import default_docs_dir, generate_docs, load_catalog, render_docs

    out_dir = Path(args.output) if args.output else default_docs_dir()
    stale = generate_docs(out_dir, check=args.check)
    pages = len(render_docs(load_catalog()))
    verb = "stale" if args.check else "wrote"
    for path in stale:
        print(f"reload-lint: {verb} {path}", file=sys.stderr)
    if args.check:
        if stale:
            print(
                f"reload-lint: checked {pages} pages in {out_dir}: {len(stale)} stale; "
                "run `reload-lint gen-docs`",
                file=sys.stderr,
            )
            return EXIT_FINDINGS
        print(f"reload-lint: checked {pages} pages in {out_dir}: up to date", file=sys.stderr)
        return EXIT_CLEAN
    if stale:
        done = f"wrote {len(stale)} of {pages} pages to {out_dir}"
    else:
        done = f"all {pages} pages in {out_dir} already up to date; nothing written"
    print(f"reload-lint: {done}", file=sys.stderr)
    return EXIT_CLEAN


def cmd_confirm(args) -> int:
    """Runtime confirmation: findings JSON in, red/green evidence JSON out (docs/runner.md)."""
    from reload_lint.confirm.command import run

    return run(args)


def cmd_allow(args) -> int:
    """Append allowlist entries for findings this run reports, refusing unknown ones."""
    from reload_lint.gate import append_entries

    cfg = effective_config(args)
    if args.to:
        target = Path(args.to)
    elif cfg.allowlists:
        target = config_dir(cfg) / cfg.allowlists[0]
    else:
        raise ReloadLintError(
            "name the allowlist with --to FILE (or set `allowlists` in [tool.reload-lint])"
        )
    plan = plan_targets(args, cfg)
    args.show_suppressed = True
    configured = [config_dir(cfg) / a for a in cfg.allowlists]
    # a configured allowlist that does not exist yet is the one this creates
    cfg.allowlists = [a for a, p in zip(cfg.allowlists, configured, strict=True) if p.exists()]
    if target.exists() and target.resolve() not in {p.resolve() for p in configured}:
        args.allowlist = [*getattr(args, "allowlist", []), str(target)]
    result = run_engine(args, cfg, plan)
    out = apply_gate(result, cfg, plan, args, use_baseline=False)
    everything = [*out.reported, *out.suppressed]
    by_fp = {f.fingerprint: f for f in everything}
    unknown = [fp for fp in args.fingerprints if fp not in by_fp]
    if unknown:
        raise ReloadLintError(
            f"unknown fingerprint {unknown[0]}: no finding of this run has it "
            "(`reload-lint check --format json` lists the fingerprints)"
        )
    chosen = [by_fp[fp] for fp in dict.fromkeys(args.fingerprints)]
    for f in chosen:
        if f.suppressed is not None:
            print(
                f"reload-lint: {f.fingerprint} is already accepted: {f.suppressed}", file=sys.stderr
            )
    todo = [f for f in chosen if f.suppressed is None]
    n = append_entries(target, todo, everything, args.reason, args.link) if todo else 0
    print(f"reload-lint: appended {n} entr{'ies' if n != 1 else 'y'} to {target}", file=sys.stderr)
    return EXIT_CLEAN


def cmd_cache(args) -> int:
    """List the cache with sizes, or clean it (all, a kind, or a release)."""
    from reload_lint.incremental import cachedir
    from reload_lint.sources import cache_root

    root = cache_root()
    if args.action is None:
        sys.stdout.write(cachedir.describe(root))
        return EXIT_CLEAN
    n, freed = cachedir.clean(root, args.what, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    size = cachedir.human(freed)
    print(f"reload-lint: {verb} {n} item{'s' if n != 1 else ''} ({size}) from {root}")
    return EXIT_CLEAN


def cmd_explain(args) -> int:
    """What the engine decided for every store on PATH:LINE (reload_lint/cli/explain.py)."""
    import json

    from reload_lint.cli import explain

    specs = list(args.locations)
    args.paths = []
    cfg = effective_config(args)
    plan = plan_targets(args, cfg)
    package = plan.release[0] if plan.release else None
    queries = [explain.resolve_query(s, plan.base, package) for s in specs]
    args.explain = {(q.rel, n) for q in queries for n in q.stmt_lines}
    result = run_engine(args, cfg, plan)
    args.show_suppressed = True
    out = apply_gate(result, cfg, plan, args, use_baseline=False)
    answers = explain.explain_queries(queries, result, [*out.reported, *out.suppressed])
    shadowed = getattr(result, "shadowed", None) or {}
    for a in answers:
        if a["path"] in shadowed:
            a["note"] = f"not analysed: `{shadowed[a['path']]}` has the same module name"
    contract = getattr(result, "contract", None)
    if args.fmt == "json":
        doc = {"explain": answers}
        if contract and contract[1]:
            doc["contract"] = {"name": contract[0], "decided_by": contract[1]}
        write_output(json.dumps(doc, indent=2) + "\n", None)
    else:
        text = explain.render_text(answers)
        if contract and contract[1]:
            text += f"contract: {contract[0]}, decided by: {contract[1]}\n"
        write_output(text, None)
    return EXIT_CLEAN
