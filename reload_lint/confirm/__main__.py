"""``python -m reload_lint.confirm``: the confirm subcommand without the rest of the CLI."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from reload_lint.confirm.command import add_arguments, run
    from reload_lint.errors import ReloadLintError

    p = argparse.ArgumentParser(prog="reload-lint confirm", allow_abbrev=False)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except ReloadLintError as exc:
        print(f"reload-lint: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
