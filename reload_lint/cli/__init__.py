"""The command layer: the command line, parsed, turned into a run, and answered.

Input: argv. Output: the report on stdout (or `-o`), notes on stderr, the exit code
(reload_lint/exitcodes.py). Everything below the commands is the library: the engine
(reload_lint/engine.py), the gate (reload_lint/gate/), the renderers (reload_lint/render/).

- parser.py    argparse: `build_parser`, `main` (the console script, `python -m reload_lint`)
- commands.py  one `cmd_<name>` per subcommand
- plan.py      what one run audits: the targets (paths, a release, pre-commit's named
               files), the effective config, and the engine run over them
- explain.py   `reload-lint explain PATH:LINE`: the engine's decisions on a line, worded

`reload_lint.cli:main` is the console script's entry (pyproject.toml); the rest of the package
imports from here (`from reload_lint.cli import run_engine`), each name's module imported the
first time it is asked for.
"""

from __future__ import annotations

_EXPORTS = {
    "build_parser": "parser",
    "main": "parser",
    "Plan": "plan",
    "effective_config": "plan",
    "plan_targets": "plan",
    "run_engine": "plan",
    "under": "plan",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """`from reload_lint.cli import NAME`: the module that defines NAME, imported on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
