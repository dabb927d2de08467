"""What one run audits: the targets (paths, a release, files named as pre-commit names them),
the effective config, and the engine run over them. The CLI's subcommands (commands.py) and
scripts call these; the gate (gate/report.py) turns the engine's result into what is reported.

Input: the parsed arguments. Output: the effective Config, a Plan (base folder, paths,
release, named files) and the engine's RunResult over it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from reload_lint.config import CONTRACT_CHOICES, Config, load_config
from reload_lint.errors import ReloadLintError
from reload_lint.findings import FileError


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
    bases: tuple = ()  # `--base` / `base = [...]` trees (bases.py)

    def in_scope(self, relpath: str) -> bool:
        if self.narrow is not None and not under(relpath, self.narrow):
            return False
        if self.only_paths is not None:
            return relpath in self.only_paths
        for p in self.paths:
            rel = relposix(p, self.base)
            if rel is None or rel in (".", "") or relpath == rel or relpath.startswith(rel + "/"):
                return True
        return False


def under(relpath: str, prefixes) -> bool:
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


def relposix(path: Path, base: Path) -> str | None:
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
    import dataclasses

    plan = _plan_targets(args, cfg)
    specs = [*cfg.base, *(getattr(args, "base", None) or [])]
    if specs:
        from reload_lint.bases import resolve_all

        where = Path(cfg.source).parent if cfg.source else Path.cwd()
        plan = dataclasses.replace(plan, bases=resolve_all(specs, where))
    return plan


def _plan_targets(args, cfg: Config) -> Plan:
    paths, base = resolve_targets(args)
    if getattr(args, "vllm", None) or getattr(args, "sglang", None):
        pkg = "vllm" if args.vllm else "sglang"
        narrow = _narrow_release(args, base, pkg)
        return Plan(paths, base, release=(pkg, args.vllm or args.sglang), narrow=narrow)
    if args.paths and all(p.is_file() for p in paths):
        only: set[str] = set()
        for p in paths:
            rel = relposix(p, base)
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
        bases=plan.bases,
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


def nothing_analysed(plan: Plan, cfg: Config, result) -> list[str]:
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
        shown = ", ".join(relposix(p, plan.base) or str(p) for p in plan.paths)
        why = f"no Python files under {shown}"
        if cfg.exclude or cfg.include:
            why += " (after `include`/`exclude` in [tool.reload-lint])"
    return [f"reload-lint: nothing analysed: {why}"]


def base_notes(plan: Plan, result) -> list[str]:
    """stderr lines about library context (docs/plugins.md): the bases indexed and the
    contract they decided; or, with none given, the engine classes the package subclasses
    that nothing indexed defines, with the base to pass."""
    bases = getattr(result, "bases", None) or plan.bases
    contract = getattr(result, "contract", None)
    out = []
    if bases:
        for b in bases:
            out.append(f"reload-lint: base {b.label} ({b.root}): library context, not reported")
    dead = getattr(result, "unimportable", ())
    if dead:
        rel, mod, line = dead[0]
        more = (
            f" (and {len(dead) - 1} more file{'s' if len(dead) > 2 else ''})"
            if len(dead) > 1
            else ""
        )
        n = getattr(result, "unimportable_dropped", 0)
        label = ", ".join(b.label for b in bases) or "the base"
        out.append(
            f"reload-lint: note: {rel}:{line} imports `{mod}`, which {label} does not have{more}: "
            f"that code cannot be imported on this base, so its post-load never runs there "
            f"({n} finding{'s' if n != 1 else ''} not reported); pass the base the package is "
            "written for"
        )
    unresolved = getattr(result, "unresolved", ())
    if unresolved:
        from reload_lint.bases import suggest

        shown = ", ".join(unresolved[:6]) + (", ..." if len(unresolved) > 6 else "")
        texts = []
        if getattr(result, "texts", None) is not None and result.files_scanned < 5000:
            texts = [(rel, result.texts.get(rel, "")) for rel in sorted(result.analysed)]
        hint = suggest(plan.paths, texts)
        how = (
            f"pass `--base {hint[0]}` (named by {hint[1]})"
            if hint
            else "pass `--base vllm==VERSION` (the release the package runs on)"
        )
        n = len(unresolved)
        out.append(
            f"reload-lint: note: {n} engine class{'es' if n != 1 else ''} the package "
            f"subclasses {'are' if n != 1 else 'is'} not in the audited tree ({shown}): "
            f"their post-load, registrations and readers are guessed; {how}"
        )
    elif not bases and not (contract and "tree is vLLM's" in (contract[1] or "")):
        # a package that imports the engine only lazily, or requires a distribution built
        # on it, subclasses nothing the note above could name (a vLLM tree is its own base)
        from reload_lint.bases import engine_dependency_note

        texts = []
        if getattr(result, "texts", None) is not None and result.files_scanned < 5000:
            texts = [(rel, result.texts.get(rel, "")) for rel in sorted(result.analysed)]
        line = engine_dependency_note(plan.paths, texts)
        if line:
            out.append(line)
    if contract and contract[0] and result.files_scanned:
        # on every run that judged a file: which contract judged it, and what decided it
        out.append(
            f"reload-lint: contract {contract[0]}" + (f": {contract[1]}" if contract[1] else "")
        )
    return out
