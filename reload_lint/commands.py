"""Subcommand implementations. cli.py parses; these call into the library."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.config import CONTRACT_CHOICES, Config, load_config
from reload_lint.errors import ReloadLintError
from reload_lint.exitcodes import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, EXIT_INCOMPLETE
from reload_lint.findings import FileError, Finding


def resolve_targets(args) -> tuple[list[Path], Path]:
    """The paths to audit and the directory findings' paths are relative to."""
    from reload_lint.sources import release_sources

    if getattr(args, "vllm", None) or getattr(args, "sglang", None):
        if args.vllm and args.sglang:
            raise ReloadLintError("give one of --vllm and --sglang")
        pkg, version = ("vllm", args.vllm) if args.vllm else ("sglang", args.sglang)
        root = release_sources(pkg, version)
        if not getattr(args, "print_source", False):
            print(
                f"reload-lint: {pkg} {version} release sources in {root} "
                f"(finding paths are relative to it)",
                file=sys.stderr,
            )
        return [root / pkg], root
    if getattr(args, "print_source", False):
        raise ReloadLintError("--print-source needs --vllm VERSION or --sglang VERSION")
    base = Path.cwd()
    paths = [Path(p) for p in (args.paths or ["."])]
    for p in paths:
        if not p.exists() and not p.is_symlink():
            raise ReloadLintError(f"{p}: no such file or directory")
    return paths, base


def effective_config(args) -> Config:
    cfg = load_config(Path(args.config)) if getattr(args, "config", None) else load_config()
    from reload_lint.rules import split_codes, validate_codes

    if getattr(args, "select", None):
        cfg.select = split_codes(args.select)
    if getattr(args, "ignore", None):
        cfg.ignore = [*cfg.ignore, *split_codes(args.ignore)]
    if getattr(args, "contract", None):
        cfg.contract = args.contract

    validate_codes([*cfg.select, *cfg.ignore])
    if getattr(args, "strict", False):
        cfg.strict = True
    if cfg.contract not in CONTRACT_CHOICES:
        where = f"{cfg.source}: " if cfg.source else ""
        raise ReloadLintError(
            f"{where}unknown reload contract `{cfg.contract}` "
            f"(known: {', '.join(CONTRACT_CHOICES)})"
        )
    return cfg


@dataclass
class Plan:
    """What one run audits: paths to index, the base findings are relative to, and (files
    passed by name, as pre-commit does) the only files whose findings are reported."""

    paths: list[Path]
    base: Path
    only_paths: set[str] | None = None
    release: tuple[str, str] | None = None  # ("vllm", "0.25.1") for --vllm/--sglang
    # `--vllm X PATH...`: the whole release is indexed and analysed (helpers and oracles
    # resolve as in a full run); only findings under these base-relative folders or files
    # are reported
    narrow: tuple[str, ...] | None = None

    def in_scope(self, relpath: str) -> bool:
        if self.narrow is not None and not _under(relpath, self.narrow):
            return False
        if self.only_paths is not None:
            return relpath in self.only_paths
        for p in self.paths:
            rel = _relposix(p, self.base)
            if rel is None or rel in (".", "") or relpath == rel or relpath.startswith(rel + "/"):
                return True
        return False


def _under(relpath: str, prefixes) -> bool:
    return any(p in (".", "") or relpath == p or relpath.startswith(p + "/") for p in prefixes)


def _narrow_release(args, root: Path, pkg: str) -> tuple[str, ...] | None:
    """PATHS given with --vllm/--sglang: folders or files of the release, relative to its
    root as finding paths are (`vllm/model_executor/layers/quantization`) or to the package
    (`model_executor/layers/quantization`)."""
    if not args.paths:
        return None
    out = []
    for p in args.paths:
        rel = Path(p).as_posix().strip("/")
        for cand in (rel, f"{pkg}/{rel}"):
            if cand and ".." not in cand.split("/") and (root / cand).exists():
                out.append(cand)
                break
        else:
            raise ReloadLintError(
                f"{p}: no such file or folder in {pkg} {getattr(args, pkg)}'s sources "
                f"(paths are relative to {root} or to its `{pkg}/` package)"
            )
    return tuple(out)


def _relposix(path: Path, base: Path) -> str | None:
    from reload_lint.discover import shown_path

    try:
        rel = Path(os.path.relpath(Path(path).absolute(), Path(base).absolute())).as_posix()
    except ValueError:  # another drive on Windows
        return None
    return shown_path(rel)


def plan_targets(args, cfg: Config) -> Plan:
    """Files passed by name (all of PATHS are files) get pre-commit semantics: the engine
    indexes the whole project (cwd, with the config's include/exclude) so helpers and
    constructors resolve, but reports only those files; config excludes apply to them."""
    paths, base = resolve_targets(args)
    if getattr(args, "vllm", None) or getattr(args, "sglang", None):
        pkg = "vllm" if args.vllm else "sglang"
        narrow = _narrow_release(args, base, pkg)
        return Plan(paths, base, release=(pkg, args.vllm or args.sglang), narrow=narrow)
    if args.paths and all(p.is_file() for p in paths):
        only: set[str] = set()
        for p in paths:
            rel = _relposix(p, base)
            if rel is None or rel.startswith("../"):
                raise ReloadLintError(f"{p}: file is outside the project directory {base}")
            if not cfg.is_excluded(rel):
                only.add(rel)
        return Plan([base], base, only_paths=only)
    return Plan(paths, base)


def run_engine(args, cfg: Config, plan: Plan | None = None):
    from reload_lint.engine import run_check

    if plan is None:
        plan = plan_targets(args, cfg)
    result = run_check(
        plan.paths,
        cfg,
        base_dir=plan.base,
        use_cache=not getattr(args, "no_cache", False),
        cache_dir=Path(args.cache_dir) if getattr(args, "cache_dir", None) else None,
        jobs=getattr(args, "jobs", None),
        only_paths=plan.only_paths,
        explain=getattr(args, "explain", None),
    )
    rows = [e for e in unanalysed_rows(plan, result) if cfg.rule_enabled(e.path, e.rule)]
    if rows:
        result.errors = sorted([*result.errors, *rows], key=lambda e: (e.path, e.line, e.rule))
    return result


def unanalysed_rows(plan: Plan, result) -> list[FileError]:
    """An RL906 row for each file named on the command line (pre-commit's staged files) that
    the analysis never reached, so a named file is never reported clean unread. Files with a
    row already (unreadable, syntax error) keep theirs."""
    analysed = getattr(result, "analysed", None)
    if plan.only_paths is None or analysed is None:
        return []
    has_row = {e.path for e in result.errors}
    shadowed = getattr(result, "shadowed", None) or {}
    rows = []
    for rel in sorted(plan.only_paths - set(analysed) - has_row):
        if rel in shadowed:
            why = (
                f"`{shadowed[rel]}` has the same module name and was analysed instead "
                "(audit the two trees in separate runs, or exclude one)"
            )
        elif not rel.endswith(".py"):
            why = "only .py files are analysed"
        else:
            why = "it is under a folder reload-lint skips (build, dist, venv, .venv, ...) or "
            why += "outside `include` in [tool.reload-lint]"
        rows.append(FileError("RL906", rel, f"named file was not analysed: {why}", 0))
    return rows


def write_output(text: str, output: str | None) -> None:
    if output:
        from reload_lint.fsutil import atomic_write_text

        atomic_write_text(Path(output), text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


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


# ----------------------------------------------------------------------------- the gate


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


def _config_dir(cfg: Config) -> Path:
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
    from reload_lint.suppress import load_allowlist

    entries = []
    if plan.release is not None:
        codebase = plan.release[0]
    if codebase is not None:
        bundled = bundled_allowlist(codebase)
        if bundled is not None:
            entries += load_allowlist(bundled, display=f"allowlists/{bundled.name}")
    for a in cfg.allowlists:
        entries += load_allowlist(_config_dir(cfg) / a, display=a)
    for a in getattr(args, "allowlist", None) or []:
        entries += load_allowlist(Path(a), display=a)
    return entries


def baseline_path(args, cfg: Config) -> Path | None:
    if getattr(args, "baseline", None):
        return Path(args.baseline)
    if cfg.baseline and not getattr(args, "no_config_baseline", False):
        return _config_dir(cfg) / cfg.baseline
    return None


def apply_gate(
    result, cfg: Config, plan: Plan, args, *, use_baseline: bool = True, changed=None
) -> GateOutcome:
    """Engine result -> what the user sees: rule selection, suppressions, allowlists,
    baseline, diff. Order matters: unused-suppression and stale-baseline are judged on the
    full result, before --diff narrows what is reported."""
    from reload_lint.fold import fold_shared_storage
    from reload_lint.suppress import apply_allowlists, apply_suppressions

    findings = [
        f
        for f in result.findings
        if cfg.rule_enabled(f.path, f.rule) and (plan.narrow is None or _under(f.path, plan.narrow))
    ]
    if plan.only_paths is not None:  # located in a named file or passing through one
        from reload_lint.through import through_files

        findings = through_files(findings, plan.only_paths)
    errors = [
        e
        for e in result.errors
        if (plan.only_paths is None or e.path in plan.only_paths)
        and (plan.narrow is None or _under(e.path, plan.narrow))
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
        from reload_lint.baseline import load_baseline, match_baseline

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
        from reload_lint.diff import filter_to_diff

        out.reported, out.errors = filter_to_diff(out.reported, out.errors, changed)
        shown_suppressed, _ = filter_to_diff(shown_suppressed, [], changed)
    out.shown = sorted([*out.reported, *shown_suppressed], key=Finding.sort_key)
    return out


def _gate_notes(out: GateOutcome, strict: bool, show_suppressed: bool) -> list[str]:
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


def cmd_check(args) -> int:
    cfg = effective_config(args)
    plan = plan_targets(args, cfg)
    if getattr(args, "print_source", False):
        print(plan.base)  # the release's unpacked root (resolve_targets checked the flags)
        return EXIT_CLEAN
    from reload_lint.fix import FIX_DIFF
    from reload_lint.fix import command as fixcmd

    changed = None
    fix_diff = getattr(args, "diff", None) == FIX_DIFF
    if getattr(args, "diff", None) and not fix_diff:
        from reload_lint.diff import changed_lines

        changed = changed_lines(args.diff, plan.base)  # fail fast on a bad REV
    fixcmd.check_writable(args, plan)
    if plan.only_paths is not None and not plan.only_paths:
        result = _EmptyResult()  # every file passed by name is excluded by config
    else:
        result = run_engine(args, cfg, plan)
    out = apply_gate(result, cfg, plan, args, changed=changed)
    fx = fixcmd.attach(args, cfg, plan, out.reported) if fixcmd.wanted(args, plan) else None
    unsafe = getattr(args, "unsafe_fixes", False)
    if fix_diff:
        patch, code = fixcmd.diff_report(fx, out.reported, unsafe)
        write_output(patch, args.output)
        return code
    fixed: list[Finding] = []
    if getattr(args, "fix", False) and fx is not None:
        fixed = fixcmd.fixed_findings(out.reported, fx, unsafe)
        written = fixcmd.write_fixes(fx, plan, unsafe)
        shown = [r for r in fx.revealed if r[0] in written]
        if shown:
            print(
                f"reload-lint: the fixes show {len(shown)} more finding"
                f"{'s' if len(shown) != 1 else ''} the report folded into a fixed one "
                "(one storage, one finding); run `check` again",
                file=sys.stderr,
            )
        gone = {id(f) for f in fixed}
        total = len(out.reported)
        out.reported = [f for f in out.reported if id(f) not in gone]
        out.shown = [f for f in out.shown if id(f) not in gone]
    text = render_report(args, out, result.files_scanned, cfg.strict)
    if args.fmt == "text" and not args.output and not getattr(args, "statistics", False):
        if getattr(args, "fix", False):
            text = text.rsplit("Found ", 1)[0] + fixcmd.fixed_line(total if fx else 0, len(fixed))
            text += "\n"
        hint = fixcmd.hint_line(out.reported, unsafe)
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
        *_nothing_analysed(plan, cfg, result),
        *_gate_notes(out, args.strict_baseline, args.show_suppressed),
    ]:
        print(note, file=sys.stderr)
    if args.exit_zero:
        return EXIT_CLEAN
    if args.strict_baseline and out.stale:
        return EXIT_FINDINGS
    return exit_code(out.reported, out.errors, False, cfg.strict)


def _nothing_analysed(plan: Plan, cfg: Config, result) -> list[str]:
    """One stderr line when the run found no Python file at all: a clean report of nothing
    must not read like a clean codebase."""
    if result.files_scanned:
        return []
    if plan.only_paths:  # named files that are not excluded: each has its RL906 row
        why = "no file named could be analysed (the RL906 rows say why)"
    elif plan.only_paths is not None:
        where = f" in {cfg.source}" if cfg.source else ""
        why = f"every file named is excluded by `exclude`{where}"
    else:
        shown = ", ".join(_relposix(p, plan.base) or str(p) for p in plan.paths)
        why = f"no Python files under {shown}"
        if cfg.exclude or cfg.include:
            why += " (after `include`/`exclude` in [tool.reload-lint])"
    return [f"reload-lint: nothing analysed: {why}"]


@dataclass
class _EmptyResult:
    findings: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    files_scanned: int = 0
    suppressions: dict = field(default_factory=dict)


def cmd_baseline(args) -> int:
    """Record today's unsuppressed findings; atomic, sorted, readable."""
    from reload_lint.baseline import write_baseline

    cfg = effective_config(args)
    plan = plan_targets(args, cfg)
    args.show_suppressed = False
    result = run_engine(args, cfg, plan)
    for note in _nothing_analysed(plan, cfg, result):
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
    from reload_lint.baseline import load_baseline

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


__all__ = [
    "cmd_confirm",
    "cmd_check",
    "cmd_baseline",
    "cmd_worklist",
    "cmd_rule",
    "cmd_gen_docs",
    "EXIT_ERROR",
]


def cmd_allow(args) -> int:
    """Append allowlist entries for findings this run reports, refusing unknown ones."""
    from reload_lint.allow import append_entries

    cfg = effective_config(args)
    if args.to:
        target = Path(args.to)
    elif cfg.allowlists:
        target = _config_dir(cfg) / cfg.allowlists[0]
    else:
        raise ReloadLintError(
            "name the allowlist with --to FILE (or set `allowlists` in [tool.reload-lint])"
        )
    plan = plan_targets(args, cfg)
    args.show_suppressed = True
    configured = [_config_dir(cfg) / a for a in cfg.allowlists]
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
    from reload_lint.cachedir import clean, describe, human
    from reload_lint.sources import cache_root

    root = cache_root()
    if args.action is None:
        sys.stdout.write(describe(root))
        return EXIT_CLEAN
    n, freed = clean(root, args.what, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    print(f"reload-lint: {verb} {n} item{'s' if n != 1 else ''} ({human(freed)}) from {root}")
    return EXIT_CLEAN


def cmd_explain(args) -> int:
    """What the engine decided for every store on PATH:LINE (reload_lint/explain.py)."""
    import json

    from reload_lint import explain

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
    if args.fmt == "json":
        write_output(json.dumps({"explain": answers}, indent=2) + "\n", None)
    else:
        write_output(explain.render_text(answers), None)
    return EXIT_CLEAN
