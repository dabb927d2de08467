"""Argument parsing only: every subcommand calls into the library.

Input: argv. Output: the parsed arguments handed to the subcommand (commands.py), whose
exit code `main` returns; usage errors are one line on stderr, exit 2.

Exit codes: reload_lint/exitcodes.py (docs/cli.md): 0 clean, 1 a finding fails the gate,
2 usage/config/internal error, 3 incomplete (some files could not be analysed and nothing
fails the gate).
"""

from __future__ import annotations

import argparse
import os
import sys

from reload_lint import __version__
from reload_lint.config import CONTRACT_CHOICES
from reload_lint.exitcodes import EXIT_ERROR


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every whole-run
    error; the full usage is one `--help` away. No prefix matching (`allow_abbrev=False`,
    here for the parser and every subparser, which argparse builds with this class): a
    mistyped `--base` must not be taken as `--baseline`."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


CHECK_EPILOG = """\
exit codes:
{codes}

environment:
  RELOAD_LINT_CACHE        cache root: release sources, downloaded wheels and the index
                           cache (default: $XDG_CACHE_HOME/reload-lint, else
                           ~/.cache/reload-lint); --cache-dir overrides the index cache only
  XDG_CACHE_HOME           see RELOAD_LINT_CACHE
  RELOAD_LINT_NO_PROGRESS  set to anything to hide the progress line (shown only on a
                           terminal, after 2 s)
  RELOAD_LINT_SHUFFLE_ROOTS  test hook: analyse the roots in an order shuffled by this seed
                           (the output must not change; docs/design.md, "Root order")

configuration: [tool.reload-lint] in the nearest pyproject.toml (docs/cli.md).
"""


def _jobs(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more worker processes, not {n}")
    return n


def _contract(value: str) -> str:
    if value not in CONTRACT_CHOICES:
        raise argparse.ArgumentTypeError(
            f"unknown reload contract {value!r} (known: {', '.join(CONTRACT_CHOICES)})"
        )
    return value


def _add_common_check_args(p: argparse.ArgumentParser, paths: bool = True) -> None:
    if paths:
        p.add_argument("paths", nargs="*", help="files or directories to audit (default: .)")
    p.add_argument(
        "--vllm",
        metavar="VERSION",
        help="audit a released vLLM's sources (downloaded once with pip, never imported)",
    )
    p.add_argument("--sglang", metavar="VERSION", help="audit a released SGLang's sources")
    p.add_argument(
        "--base",
        action="append",
        default=[],
        metavar="SPEC",
        help="audit against this dependency tree: vllm==X, sglang==X (downloaded once) or a "
        "folder; its classes, helpers and reload contract are known, its own findings are not "
        "reported; repeatable; adds to `base` in config (docs/plugins.md)",
    )
    p.add_argument(
        "--config", metavar="FILE", help="pyproject.toml to read [tool.reload-lint] from"
    )
    p.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="CODES",
        help="only these rules: comma-separated codes or prefixes (RL101, RL1, ALL); "
        "repeatable; replaces `select` in config",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CODES",
        help="skip these rules (codes or prefixes); adds to `ignore` in config",
    )
    p.add_argument(
        "--contract",
        type=_contract,
        metavar="{" + ",".join(CONTRACT_CHOICES) + "}",
        help="reload contract: auto (the default: inplace-only for SGLang sources, else "
        "vllm-layerwise), vllm-layerwise or inplace-only",
    )
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="index cache location (default: $RELOAD_LINT_CACHE/index)",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=_jobs,
        default=None,
        metavar="N",
        help="worker processes for parsing, 1 or more (default: the number of cores)",
    )
    p.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")


def _allowlist_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allowlist",
        action="append",
        default=[],
        metavar="FILE",
        help="extra allowlist TOML (repeatable), on top of `allowlists` in config and the "
        "bundled allowlist of the audited codebase",
    )


def _add_check(sub) -> None:
    import textwrap

    from reload_lint.exitcodes import DESCRIPTIONS

    codes = "\n".join(
        textwrap.fill(text, 78, initial_indent=f"  {code}  ", subsequent_indent="     ")
        for code, text in DESCRIPTIONS
    )
    check = sub.add_parser(
        "check",
        help="audit sources and report findings",
        description="Audit sources and report findings. Nothing audited is imported or run.",
        epilog=CHECK_EPILOG.format(codes=codes),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common_check_args(check)
    check.add_argument(
        "--print-source",
        action="store_true",
        help="with --vllm/--sglang: fetch the sources if needed, print the folder that holds "
        "them (finding paths are relative to it) and exit",
    )
    check.add_argument(
        "--format",
        default="text",
        choices=["text", "json", "sarif", "github"],
        dest="fmt",
        help="report format (default: text); json is the documented findings contract",
    )
    check.add_argument("--output", "-o", metavar="FILE", help="write the report here")
    check.add_argument(
        "--exit-zero",
        action="store_true",
        help="exit 0 even with findings or files that could not be analysed (1 and 3; a 2 stays)",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="also fail (exit 1) on findings with no apply-time reader found (default: warnings)",
    )
    check.add_argument("--baseline", metavar="FILE", help="report only findings not in FILE")
    check.add_argument(
        "--strict-baseline",
        action="store_true",
        help="also fail (exit 1) when the baseline has stale entries",
    )
    from reload_lint.fix import FIX_DIFF

    check.add_argument(
        "--diff",
        metavar="REV",
        nargs="?",
        const=FIX_DIFF,
        help="with REV: only findings touching lines changed since REV (git), at their "
        "location or through a step; without a "
        "value (last, or before another option): print the unified diff `--fix` would write "
        "and write nothing (exit 1 when there is one)",
    )
    check.add_argument(
        "--fix",
        action="store_true",
        help="apply the safe fixes (codemods) to the audited files, then report what remains",
    )
    check.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="also show and apply the unsafe fixes (with --fix or --diff)",
    )
    check.add_argument(
        "--show-fixes",
        action="store_true",
        help="compute and validate the codemods and put them in the report (JSON remedy, "
        "SARIF fixes, the text and GitHub fix lines) without writing anything; --fix, "
        "--unsafe-fixes and a bare --diff imply it. Costs a re-audit of a patched copy",
    )
    check.add_argument(
        "--no-fixes",
        action="store_true",
        help="compute no fixes, even with --show-fixes (the default without the fix flags)",
    )
    check.add_argument(
        "--show-suppressed",
        action="store_true",
        help="also list findings accepted inline or by an allowlist, marked as such",
    )
    _allowlist_arg(check)
    check.add_argument(
        "--statistics", action="store_true", help="print counts by rule (text format)"
    )


def _add_baseline(sub) -> None:
    base = sub.add_parser("baseline", help="record today's findings so `check` fails only on new")
    _add_common_check_args(base)
    base.add_argument("--output", "-o", metavar="FILE", required=True, help="baseline to write")
    _allowlist_arg(base)


def _add_worklist(sub) -> None:
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
        "--patches",
        metavar="DIR",
        help="add a Fix column: each row's area diff in DIR (scripts/gen_patches.py) and the "
        "fixed-side verdicts of its sites (from --evidence)",
    )
    work.add_argument(
        "--include-decided",
        action="store_true",
        help="add every RFC storage-identity row with its status, and the sites the engine "
        "decided safe with their reasons (analyses the tree again; not with --findings)",
    )
    _allowlist_arg(work)


def _add_allow(sub) -> None:
    allow = sub.add_parser(
        "allow",
        help="append an allowlist entry for a finding (by fingerprint), with its reason",
        description="Append an allowlist entry for each FINGERPRINT that this run reports "
        "(`check --format json` lists them). The file keeps everything already in it; the "
        "write is atomic. An unknown fingerprint is refused (exit 2).",
    )
    allow.add_argument("fingerprints", nargs="+", metavar="FINGERPRINT")
    allow.add_argument("--reason", required=True, help="why the site is safe (required)")
    allow.add_argument(
        "--link", help="where the reasoning lives (issue, PR, code line; default: the site)"
    )
    allow.add_argument(
        "--to",
        metavar="FILE",
        help="allowlist to append to (default: the first `allowlists` entry in config)",
    )
    _add_common_check_args(allow)


def _add_explain(sub) -> None:
    explain = sub.add_parser(
        "explain",
        help="say what the engine decided for every store on PATH:LINE, reported or not",
        description="For every store on each PATH:LINE (an attribute assignment, setattr, "
        "register_buffer/register_parameter): the finding it gives, or the fact that decided "
        "it is safe (registered, view, zero-element, guarded, unread, platform-only, "
        "allowlisted, ...), a step of another finding's trace, or not reached. Paths are "
        "relative to the working directory, or with --vllm/--sglang to the release root.",
    )
    explain.add_argument("locations", nargs="+", metavar="PATH:LINE")
    explain.add_argument("--format", default="text", choices=["text", "json"], dest="fmt")
    # PATH:LINE are not paths to audit: the project (the working directory) or the release is
    _add_common_check_args(explain, paths=False)
    _allowlist_arg(explain)


def _add_cache(sub) -> None:
    cache = sub.add_parser(
        "cache",
        help="show what the cache holds and its size; `cache clean` empties it",
        description="Without an action: list the cache's release wheels, unpacked sources and "
        "index, with sizes. `clean [WHAT...]` removes everything, or only a kind (wheels, "
        "sources, index) or a release (vllm-0.25.1, or vllm for every vLLM release); all is "
        "rebuilt on demand.",
    )
    cache_sub = cache.add_subparsers(dest="action", metavar="ACTION")
    clean = cache_sub.add_parser("clean", help="remove all, a kind, or a release")
    clean.add_argument("what", nargs="*", help="kinds or releases to remove (default: all)")
    clean.add_argument("--dry-run", action="store_true", help="say what would be removed")


def _add_rule(sub) -> None:
    rule = sub.add_parser("rule", help="print a rule's page from the rule catalog")
    rule.add_argument(
        "code",
        nargs="?",
        help="rule code or name, e.g. RL101 or unregistered-module-tensor (omit to list all)",
    )


def _add_gen_docs(sub) -> None:
    gen = sub.add_parser("gen-docs", help="generate docs/rules/ from the rule catalog")
    gen.add_argument("--output", "-o", metavar="DIR", help="output directory (default: docs/rules)")
    gen.add_argument("--check", action="store_true", help="only report stale pages; exit 1 if any")


def _add_confirm(sub) -> None:
    conf = sub.add_parser("confirm", help="confirm findings at runtime: red/green evidence JSON")
    from reload_lint.confirm.command import add_arguments as _confirm_args

    _confirm_args(conf)


_COMMANDS = {
    "check": _add_check,
    "baseline": _add_baseline,
    "worklist": _add_worklist,
    "allow": _add_allow,
    "explain": _add_explain,
    "cache": _add_cache,
    "rule": _add_rule,
    "gen-docs": _add_gen_docs,
    "confirm": _add_confirm,
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ONLY (a command's name), just that command's
    subparser: `main` builds no more than the command it runs (each builder is a few
    milliseconds of a cached run, `confirm`'s imports its package), and what it parses,
    prints and rejects is the same, as subparsers do not see each other."""
    parser = _Parser(
        prog="reload-lint",
        description="Find tensors that escape weight-reload copy-back and break CUDA graphs.",
    )
    parser.add_argument("--version", action="version", version=f"reload-lint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for name, add in _COMMANDS.items():
        if only is None or only == name:
            add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # the top-level parser takes no option but --version and --help, so a first word that
    # names a command is the command (anything else gets the whole parser, and its message)
    parser = build_parser(argv[0] if argv and argv[0] in _COMMANDS else None)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    debug = getattr(args, "debug", False)
    if debug:  # read by the per-file extraction, which may run in worker processes
        os.environ["RELOAD_LINT_DEBUG"] = "1"
    try:
        from reload_lint.cli import commands

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
