"""Whole-run errors: one clear line each, exit code 2. A leaf module: it imports nothing of
reload_lint, so every other module can raise these (ConfigError and SourceError subclass it)."""

from __future__ import annotations


class ReloadLintError(Exception):
    """Base class for whole-run errors that carry a user-facing one-line message."""


def describe(exc: BaseException) -> str:
    """One line for any exception: ours verbatim, others with their type."""
    if isinstance(exc, ReloadLintError):
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    msg = str(exc).splitlines()[0] if str(exc) else ""
    return f"internal error: {type(exc).__name__}: {msg} (rerun with --debug for a traceback)"
