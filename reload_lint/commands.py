"""Subcommand implementations. cli.py parses; these call into the library."""

from __future__ import annotations

import sys
from pathlib import Path

from reload_lint.cli import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, EXIT_INCOMPLETE, codes
from reload_lint.config import Config, load_config
from reload_lint.errors import ReloadLintError
from reload_lint.findings import FileError, Finding


def resolve_targets(args) -> tuple[list[Path], Path]:
    """The paths to audit and the directory findings' paths are relative to."""
    from reload_lint.sources import release_sources

    if getattr(args, "vllm", None) or getattr(args, "sglang", None):
        if args.paths:
            raise ReloadLintError("give either PATHS or --vllm/--sglang, not both")
        if args.vllm and args.sglang:
            raise ReloadLintError("give one of --vllm and --sglang")
        pkg, version = ("vllm", args.vllm) if args.vllm else ("sglang", args.sglang)
        root = release_sources(pkg, version)
        return [root / pkg], root
    base = Path.cwd()
    paths = [Path(p) for p in (args.paths or ["."])]
    for p in paths:
        if not p.exists() and not p.is_symlink():
            raise ReloadLintError(f"{p}: no such file or directory")
    return paths, base


def effective_config(args) -> Config:
    cfg = load_config(Path(args.config)) if getattr(args, "config", None) else load_config()
    if getattr(args, "select", None):
        cfg.select = codes(args.select)
    if getattr(args, "ignore", None):
        cfg.ignore = [*cfg.ignore, *codes(args.ignore)]
    if getattr(args, "contract", None):
        cfg.contract = args.contract
    from reload_lint.rules import validate_codes

    validate_codes([*cfg.select, *cfg.ignore])
    return cfg


def run_engine(args, cfg: Config):
    from reload_lint.engine import run_check

    paths, base = resolve_targets(args)
    return run_check(
        paths,
        cfg,
        base_dir=base,
        use_cache=not getattr(args, "no_cache", False),
        cache_dir=Path(args.cache_dir) if getattr(args, "cache_dir", None) else None,
        jobs=getattr(args, "jobs", None),
    )


def write_output(text: str, output: str | None) -> None:
    if output:
        from reload_lint.fsutil import atomic_write_text

        atomic_write_text(Path(output), text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def exit_code(findings: list[Finding], errors: list[FileError], exit_zero: bool) -> int:
    if exit_zero:
        return EXIT_CLEAN
    if findings:
        return EXIT_FINDINGS
    if errors:
        return EXIT_INCOMPLETE
    return EXIT_CLEAN


def cmd_check(args) -> int:
    cfg = effective_config(args)
    result = run_engine(args, cfg)
    findings = [f for f in result.findings if not f.suppressed]
    errors = result.errors
    if args.fmt == "json":
        from reload_lint.render.json_ import render_json

        text = render_json(findings, errors, files=result.files_scanned)
    elif args.fmt == "text":
        from reload_lint.render.text import render_text, summary_line

        text = render_text(findings, errors)
        if not args.output:
            text += summary_line(findings, errors) + "\n"
    else:
        raise ReloadLintError(f"--format {args.fmt} is not available yet")
    write_output(text, args.output)
    return exit_code(findings, errors, args.exit_zero)


__all__ = ["cmd_check", "EXIT_ERROR"]
