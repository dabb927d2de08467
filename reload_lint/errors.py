"""Whole-run errors: one clear line each, exit code 2."""

from __future__ import annotations


class ReloadLintError(Exception):
    """Base class for whole-run errors that carry a user-facing one-line message."""


def describe(exc: BaseException) -> str:
    """One line for any exception: ours verbatim, others with their type."""
    from reload_lint.config import ConfigError
    from reload_lint.sources import SourceError

    if isinstance(exc, (ReloadLintError, ConfigError, SourceError)):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    msg = str(exc).splitlines()[0] if str(exc) else ""
    return f"internal error: {type(exc).__name__}: {msg} (rerun with --debug for a traceback)"
