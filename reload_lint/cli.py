"""Argument parsing only: every subcommand calls into the library.

Exit codes (docs/cli.md): 0 clean (or only baselined/suppressed), 1 findings,
2 usage/config/internal error, 3 incomplete (some files could not be analysed and
nothing else was found).
"""

from __future__ import annotations

import argparse
import sys

from reload_lint import __version__
from reload_lint.exitcodes import EXIT_ERROR


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every whole-run
    error; the full usage is one `--help` away."""

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _add_common_check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="files or directories to audit (default: .)")
    p.add_argument("--vllm", metavar="VERSION", help="audit a released vLLM's sources")
    p.add_argument("--sglang", metavar="VERSION", help="audit a released SGLang's sources")
    p.add_argument(
        "--config", metavar="FILE", help="pyproject.toml to read [tool.reload-lint] from"
    )
    p.add_argument("--select", action="append", default=[], metavar="CODES")
    p.add_argument("--ignore", action="append", default=[], metavar="CODES")
    p.add_argument("--contract", help="reload contract: auto, vllm-layerwise, inplace-only")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--cache-dir", metavar="DIR", help="cache location (default: user cache)")
    p.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: cores)")
    p.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="reload-lint",
        description="Find tensors that escape weight-reload copy-back and break CUDA graphs.",
    )
    parser.add_argument("--version", action="version", version=f"reload-lint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="audit sources and report findings")
    _add_common_check_args(check)
    check.add_argument(
        "--format", default="text", choices=["text", "json", "sarif", "github"], dest="fmt"
    )
    check.add_argument("--output", "-o", metavar="FILE", help="write the report here")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    check.add_argument("--baseline", metavar="FILE", help="report only findings not in FILE")
    check.add_argument("--strict-baseline", action="store_true", help="fail on stale entries")
    check.add_argument(
        "--diff", metavar="REV", help="only findings touching lines changed since REV"
    )
    check.add_argument("--show-suppressed", action="store_true")
    check.add_argument(
        "--allowlist", action="append", default=[], metavar="FILE", help="extra allowlist TOML"
    )
    check.add_argument("--statistics", action="store_true", help="print counts by rule")

    base = sub.add_parser("baseline", help="record today's findings so `check` fails only on new")
    _add_common_check_args(base)
    base.add_argument("--output", "-o", metavar="FILE", required=True, help="baseline to write")
    base.add_argument(
        "--allowlist", action="append", default=[], metavar="FILE", help="extra allowlist TOML"
    )

    work = sub.add_parser("worklist", help="render the Markdown worklist (RFC risk-table shape)")
    _add_common_check_args(work)
    work.add_argument("--evidence", metavar="FILE", help="runtime evidence JSON to merge")
    work.add_argument(
        "--findings", metavar="FILE", help="render a `check --format json` report, not a run"
    )
    work.add_argument("--output", "-o", metavar="FILE", help="write here (default: stdout)")
    work.add_argument("--title", default="reload-lint worklist", help="heading of the page")
    work.add_argument("--source", default="", help="what was audited, for the page's intro")
    work.add_argument(
        "--allowlist", action="append", default=[], metavar="FILE", help="extra allowlist TOML"
    )

    rule = sub.add_parser("rule", help="print a rule's page from the catalog (rules/)")
    rule.add_argument("code", nargs="?", help="rule code, e.g. RL101 (omit to list all rules)")

    gen = sub.add_parser("gen-docs", help="generate docs/rules/ from the rule catalog")
    gen.add_argument("--output", "-o", metavar="DIR", help="output directory (default: docs/rules)")
    gen.add_argument("--check", action="store_true", help="only report stale pages; exit 1 if any")

    conf = sub.add_parser("confirm", help="confirm findings at runtime: red/green evidence JSON")
    from reload_lint.confirm.command import add_arguments as _confirm_args

    _confirm_args(conf)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    debug = getattr(args, "debug", False)
    try:
        from reload_lint import commands

        handler = getattr(commands, f"cmd_{args.command.replace('-', '_')}")
        return handler(args)
    except KeyboardInterrupt:
        print("reload-lint: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception as exc:  # the one place internal errors become exit 2
        from reload_lint.errors import describe

        if debug:
            raise
        print(f"reload-lint: {describe(exc)}", file=sys.stderr)
        return EXIT_ERROR
