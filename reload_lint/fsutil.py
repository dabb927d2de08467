"""Atomic writes: a user's file is either the old bytes or the new bytes, never half.

The new bytes go to a temporary file in the same folder (same filesystem), are flushed and
fsync()ed, and are renamed over the target. Any failure, an interrupt included, removes the
temporary file and leaves the target as it was; OS errors become one-line ReloadLintErrors.
A symlinked target (a baseline shared between checkouts) is written through: the link stays a
link and the file it points at gets the new bytes. The target keeps its permission bits; a
new file gets the ones the umask allows, as open() would give it. A target that is not a
regular file (a device such as /dev/null, a FIFO, a terminal) is written to directly.

`read_regular` is the read side for code that peeks at audited files outside the record store
(the reload facts, the contract auto-detection): regular files only, never blocking.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from reload_lint.errors import ReloadLintError


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: Path, data: bytes) -> None:
    shown = Path(path)  # what the user typed, for messages
    try:
        st = os.stat(shown)  # through links: /dev/stdout is one
    except OSError:
        st = None
    if st is not None and not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        # a device, FIFO or terminal (-o /dev/null, -o /dev/stdout): there is no file to keep,
        # and renaming over it would replace the device node itself (as root, it can)
        try:
            with open(shown, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise ReloadLintError(f"{shown}: cannot write: {exc.strerror or exc}") from None
        return
    path = Path(os.path.realpath(shown)) if shown.is_symlink() else shown
    parent = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise ReloadLintError(f"{shown}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask()
            os.chmod(tmp, mode)
        except OSError:
            pass
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise ReloadLintError(f"{shown}: cannot write: {exc.strerror or exc}") from None
        raise


def read_regular(path, limit: int = 8 * 1024 * 1024) -> bytes | None:
    """The bytes of a regular file of at most `limit` bytes, else None (a FIFO or device named
    *.py, a directory, a missing or unreadable path). Opened non-blocking and checked on the
    descriptor, so a FIFO can never hang the caller."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
