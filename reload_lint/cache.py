"""Reading files and producing per-file records, with a content-hash cache.

A record depends only on the file's bytes, its module name and the extractor version, so the
cache key is sha256(bytes) + module name + tool version; entries are written atomically
(write to a temp file, rename), which makes concurrent runs safe: the worst case is two
processes writing the same entry.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import tempfile
from pathlib import Path

from reload_lint import __version__
from reload_lint.config import Config
from reload_lint.discover import SourceFile
from reload_lint.findings import FileError

EXTRACT_VERSION = "3x"
MAX_FILE_BYTES = 8 * 1024 * 1024


def default_cache_dir() -> Path:
    from reload_lint.sources import cache_root

    return cache_root() / "index"


def _extract_job(args):
    text, module, is_pkg = args
    from reload_lint.guard import too_complex
    from reload_lint.index.extract import extract_module

    why = too_complex(text)  # libcst's native parser segfaults on pathological nesting
    if why is not None:
        return ("err", "RL906", 0, f"file skipped: {why}")
    try:
        return ("ok", extract_module(text, module, is_pkg))
    except RecursionError:
        return ("err", "RL906", 0, "file too deeply nested to analyse")
    except Exception as exc:  # noqa: BLE001 - becomes a per-file diagnostic
        import libcst as cst

        if isinstance(exc, cst.ParserSyntaxError):
            line, detail = _syntax_detail(text, exc)
            return ("err", "RL901", line, f"syntax error: {detail}")
        return ("err", "RL906", 0, f"could not analyse file: {type(exc).__name__}: {exc}")


def _decode(data: bytes) -> str | tuple[str]:
    """UTF-8, or the encoding a PEP 263 coding cookie declares; (why,) when neither works."""
    import codecs
    import io
    import tokenize

    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # unknown codec, or a cookie that contradicts a BOM
        return (f"cannot decode file: {str(exc.msg or exc).splitlines()[0]}",)
    enc = codecs.lookup(enc).name
    if enc in ("utf-8", "utf-8-sig"):
        enc = "utf-8"
    try:
        text = data.decode(enc)
    except UnicodeDecodeError as exc:
        what = "valid UTF-8" if enc == "utf-8" else f"valid {enc} (its coding cookie)"
        return (f"file is not {what} (byte {exc.start})",)
    except LookupError as exc:
        return (f"cannot decode file: {exc}",)
    return text


def _syntax_detail(text: str, exc) -> tuple[int, str]:
    """Line and one-line reason for a libcst syntax error; CPython's wording when CPython
    agrees the file is invalid (it says what is wrong: "'(' was never closed")."""
    import ast
    import warnings

    line = int(getattr(exc, "raw_line", 0) or 0)
    detail = str(getattr(exc, "message", "") or "").strip().splitlines()
    detail_s = detail[0] if detail else "invalid syntax"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as err:
        if err.msg:
            return int(err.lineno or line), str(err.msg).splitlines()[0]
    except (RecursionError, MemoryError, ValueError):
        pass
    return line, detail_s


class RecordStore:
    def __init__(
        self,
        files: list[SourceFile],
        cfg: Config,
        *,
        use_cache: bool,
        cache_dir: Path | None,
        jobs: int | None,
        errors: list[FileError],
    ):
        self.files = files
        self.use_cache = use_cache
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.jobs = jobs
        self.errors = errors
        self.texts: dict[str, str] = {}
        self._hash: dict[str, str] = {}
        self._records: dict[str, dict | None] = {}
        self._bad: set[str] = set()
        self.parsed = 0
        self._new: dict[str, dict] = {}

    # ---- text ----------------------------------------------------------------------
    def text(self, sf: SourceFile) -> str | None:
        if sf.rel in self.texts:
            return self.texts[sf.rel]
        if sf.rel in self._bad:
            return None
        data = self._read(sf)
        if data is None:
            return None
        if b"\x00" in data:
            self._fail(sf, "RL902", "file contains NUL bytes")
            return None
        text = _decode(data)
        if not isinstance(text, str):
            self._fail(sf, "RL902", text[0])
            return None
        if text.startswith("\ufeff"):
            text = text[1:]
        self.texts[sf.rel] = text
        self._hash[sf.rel] = hashlib.sha256(data).hexdigest()
        return text

    def _read(self, sf: SourceFile) -> bytes | None:
        """The file's bytes, or None with an RL903/RL906 recorded. Opened non-blocking and
        checked to be a regular file on the open descriptor, so a FIFO or device named *.py
        can neither hang the run nor be swapped in between a check and the read."""
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(sf.path, flags)
        except FileNotFoundError:
            if os.path.islink(sf.path):
                self._fail(sf, "RL903", "broken symlink: its target does not exist")
            else:
                self._fail(sf, "RL903", "file vanished during the run")
            return None
        except OSError as exc:
            self._fail(sf, "RL903", f"cannot read file: {exc.strerror or exc}")
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
                self._fail(sf, "RL903", f"cannot read file: {kind}")
                return None
            if st.st_size > MAX_FILE_BYTES:
                mib = MAX_FILE_BYTES // (1024 * 1024)
                self._fail(sf, "RL906", f"file is larger than {mib} MiB; skipped")
                return None
            chunks = []
            while True:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                if sum(map(len, chunks)) > MAX_FILE_BYTES:  # grew while we read it
                    mib = MAX_FILE_BYTES // (1024 * 1024)
                    self._fail(sf, "RL906", f"file is larger than {mib} MiB; skipped")
                    return None
            return b"".join(chunks)
        except OSError as exc:
            self._fail(sf, "RL903", f"cannot read file: {exc.strerror or exc}")
            return None
        finally:
            os.close(fd)

    def _fail(self, sf: SourceFile, rule: str, msg: str, line: int = 0) -> None:
        self._bad.add(sf.rel)
        self.errors.append(FileError(rule, sf.rel, msg, line))

    def mentions_any(self, sf: SourceFile, names) -> bool:
        text = self.text(sf)
        return text is not None and any(n in text for n in names)

    # ---- records -------------------------------------------------------------------
    def _key(self, sf: SourceFile) -> str:
        raw = f"{self._hash[sf.rel]}\x1f{sf.module}\x1f{int(sf.is_package)}\x1f{__version__}\x1f{EXTRACT_VERSION}"
        return hashlib.sha256(raw.encode()).hexdigest()

    def _cache_path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.pickle"

    def _load_cached(self, sf: SourceFile) -> dict | None:
        if not self.use_cache:
            return None
        try:
            with open(self._cache_path(self._key(sf)), "rb") as fh:
                rec = pickle.load(fh)
            return rec if isinstance(rec, dict) and rec.get("module") == sf.module else None
        except Exception:  # noqa: BLE001 - a corrupt or missing entry is a miss
            return None

    def _accept(self, sf: SourceFile, result) -> dict | None:
        if result[0] == "ok":
            rec = result[1]
            self._records[sf.rel] = rec
            if self.use_cache:
                self._new[self._key(sf)] = rec
            return rec
        _, rule, line, msg = result
        self._records[sf.rel] = None
        self._fail(sf, rule, msg, line)
        return None

    def record(self, sf: SourceFile) -> dict | None:
        if sf.rel in self._records:
            return self._records[sf.rel]
        text = self.text(sf)
        if text is None:
            self._records[sf.rel] = None
            return None
        rec = self._load_cached(sf)
        if rec is not None:
            self._records[sf.rel] = rec
            return rec
        self.parsed += 1
        return self._accept(sf, _extract_job((text, sf.module, sf.is_package)))

    def prefetch(self, files: list[SourceFile]) -> None:
        todo = []
        for sf in files:
            if sf.rel in self._records:
                continue
            text = self.text(sf)
            if text is None:
                continue
            rec = self._load_cached(sf)
            if rec is not None:
                self._records[sf.rel] = rec
                continue
            todo.append(sf)
        if not todo:
            return
        jobs = self.jobs if self.jobs is not None else (os.cpu_count() or 1)
        self.parsed += len(todo)
        payload = [(self.texts[sf.rel], sf.module, sf.is_package) for sf in todo]
        if jobs > 1 and len(todo) >= 8:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if hasattr(os, "fork") else mp.get_context()
            with ctx.Pool(min(jobs, len(todo))) as pool:
                results = pool.map(_extract_job, payload, chunksize=4)
        else:
            results = [_extract_job(p) for p in payload]
        for sf, res in zip(todo, results, strict=False):
            self._accept(sf, res)

    def save(self) -> None:
        if not self.use_cache or not self._new:
            return
        for key, rec in self._new.items():
            path = self._cache_path(key)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
                with os.fdopen(fd, "wb") as fh:
                    pickle.dump(rec, fh, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)
            except OSError:
                continue  # an unwritable cache never fails the run
        self._new.clear()
