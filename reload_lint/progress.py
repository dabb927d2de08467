"""A one-line progress indicator on stderr: only when stderr is a terminal, and only once the
run has taken longer than a couple of seconds (a warm or small run prints nothing). The line
is erased when the run ends, so nothing of it is left in the terminal's scrollback."""

from __future__ import annotations

import os
import sys
import time

DELAY_S = 2.0
_REDRAW_S = 0.1


class Progress:
    def __init__(self, stream=None, *, delay_s: float = DELAY_S, enabled: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = _is_tty(self.stream) and not os.environ.get("RELOAD_LINT_NO_PROGRESS")
        self.enabled = enabled
        self.t0 = time.monotonic()
        self.delay_s = delay_s
        self.phase = ""
        self.total = 0
        self.done = 0
        self._last = 0.0
        self._shown = False

    def start(self, phase: str, total: int) -> None:
        self.phase, self.total, self.done = phase, total, 0
        self._draw()

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._draw()

    def _draw(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.t0 < self.delay_s or now - self._last < _REDRAW_S:
            return
        self._last = now
        count = f"{self.done}/{self.total}" if self.total else f"{self.done} files"
        line = f"reload-lint: {self.phase} {count} ({now - self.t0:.0f}s)"
        try:
            self.stream.write("\r\x1b[2K" + line)
            self.stream.flush()
            self._shown = True
        except (OSError, ValueError):
            self.enabled = False

    def close(self) -> None:
        if self._shown:
            try:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._shown = False


def _is_tty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False
