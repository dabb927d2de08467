"""Reading files and producing per-file records, with one packed cache file per tree.

Input: the run's SourceFiles, the config and the cache folder. Output: each file's text,
sha256 and text facts (by stat when its row matches), its record (`record`, `prefetch`),
whole-run and consumed-input results (`get_result`, `get_deps_result`), and the pack written
back (`save`).

A record depends only on the file's bytes, its module name and the extractor, so records are
keyed by sha256(bytes) + module name + package flag + extractor fingerprint. Everything one
audited tree needs lives in one pickle, `<cache-dir>/packs/<tree key>.pack`:

- a file table, rel -> ((mtime_ns, size, inode, ctime_ns), sha256, facts): a file whose
  stat() matches its row in all four is not read or hashed again. That is git's and ruff's
  test (mtime, size, inode) plus the change time, which no tool can set back: content
  rewritten in place at the same size with its mtime put back (`cp -p`, `rsync -t`,
  `touch -r`) still changes ctime, so it is read again. The stat is the open descriptor's,
  taken before the bytes are read, so a write during the read leaves a row that no longer
  matches. Rows whose mtime or ctime is less than two seconds before the pack was written
  are "racy", as git calls them (a write in the same clock tick leaves the stat unchanged),
  and are always re-hashed; a run that finds a once-racy row settled rewrites it;
- per-file records as pickled bytes, unpickled only when the analysis asks for them;
- whole-run results keyed by every file's hash and module, the config and the tool's own
  sources, so a run over an unchanged tree reads no source file at all;
- the same results keyed by what the analysis actually consumed ("early cutoff", as build
  systems call it; cutoff.py): every file's module name, read status and text facts, plus the
  extraction result of each file the analysis asked for. An edit that leaves those unchanged
  (a file the analysis never reads; a comment that moves no line), that changes nothing the
  analysis read of a record (index/deps.py), or that only moves lines (shiftcut.py) reuses the
  result after re-parsing only the edited files.

The pack is written to a temp file in the same folder and os.replace()d in: concurrent runs
never see a torn file; the worst case is one run's additions being lost and recomputed.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import sys
import tempfile
import time
from pathlib import Path

from reload_lint import __version__
from reload_lint.config import Config
from reload_lint.discover import SourceFile
from reload_lint.findings import FileError
from reload_lint.incremental.cutoff import ConsumedResults, blob_digest

# 9: class decorators and dataclass fields, early-exit lazy guards; 10: binary operators carry
# their line; 11: state-flag pseudo-statements, block paths on expression statements; 12: member
# tests (condon/condoff); 13: parsed with CPython's `ast` instead of libcst (the same records,
# scripts/diff_extract.py; the key holds the interpreter's exact version instead of libcst's);
# 16: storage_asserts (`assert a.data_ptr() == b.data_ptr()` in a function body); 17: basic
# subscripts keep what each element does (`("slice", elems)`), functions their fixed integer
# locals (`sizes`, index/lower_sizes.py); 18: comprehensions keep their generators
# (`("t", kind, items, gens)`, `("d", items, gens)`), `(x := v)` emits `x = v` before its statement;
# 19: a guard on `type(x).attr` names x (lower_guard._guard_base); 20: `fills_cache` on a
# function that stores into a container attribute inside a block (a cache filled on first use);
# 21: `ret_test` on a function that is one `return <test>` (a predicate), `enum_attr` on a class
# setting `_enum = E.X` (a platform's kind: analysis/platforms.py); 22: `patches` on a
# module-level function that replaces an engine class's method (a decorator given the dotted
# target, `Cls.m = fn`, `setattr(Cls, "m", fn)`)
# 23: the `else` of a plain `if <flag test>:` gets the test's flags, the opposite sense, and
# the lazy guard of `if X is not None: ... else: <init>`
EXTRACT_VERSION = "28"
# pack layout; 2: consumed-input results keep, per file, what the analysis read of its record
PACK_VERSION = 2
MAX_FILE_BYTES = 8 * 1024 * 1024
RACY_NS = 2_000_000_000  # rows this close to the pack's write time are re-hashed
KEEP_RESULTS = 8  # whole-run results kept per tree (e.g. a few --select variants)


def default_cache_dir() -> Path:
    from reload_lint.sources import cache_root

    return cache_root() / "index"


def _stat_key(st) -> tuple[int, int, int, int]:
    """What identifies a file's content without reading it (the module docstring)."""
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def _stamp(key: tuple) -> int:
    """The latest time a stat key says the file changed (mtime or ctime)."""
    return max(key[0], key[3])


_FINGERPRINTS: dict[str, str] = {}


def extractor_fingerprint() -> str:
    """Changes whenever the record a file produces could change: the extractor's own
    sources and the parser, which is the interpreter's own (`ast`): its implementation and
    exact version (a bugfix release can move a position or accept other syntax)."""
    if "extract" not in _FINGERPRINTS:
        impl = sys.implementation.name
        h = hashlib.sha256(
            f"{__version__}|{EXTRACT_VERSION}|{impl}|{sys.version_info[:3]}".encode()
        )
        here = Path(__file__).resolve().parents[1]  # the package: this is incremental/cache.py
        # the lowering is index/extract.py and the index/lower_*.py modules it is built from
        lowering = sorted(f"index/{p.name}" for p in (here / "index").glob("lower_*.py"))
        for rel in ("index/extract.py", *lowering, "guard.py", "incremental/cache.py"):
            try:
                h.update(rel.encode() + b"\0" + (here / rel).read_bytes())
            except OSError:
                h.update(rel.encode() + b"\0missing")
        _FINGERPRINTS["extract"] = h.hexdigest()[:32]
    return _FINGERPRINTS["extract"]


def tool_fingerprint() -> str:
    """Changes whenever any of reload-lint's own sources changes (stat of every module):
    whole-run results are reused only by the exact code that produced them."""
    if "tool" not in _FINGERPRINTS:
        h = hashlib.sha256(extractor_fingerprint().encode())
        here = Path(__file__).resolve().parents[1]  # the package
        from reload_lint.rules import data_dir

        # the package, and the top-level catalog and allowlists where they live outside it
        tops = [here] + [
            d for d in (data_dir("rules"), data_dir("allowlists")) if here not in d.parents
        ]
        for dirpath, dirnames, filenames in (w for top in tops for w in os.walk(top)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".py", ".toml", ".json", ".md", ".j2")):
                    p = os.path.join(dirpath, name)
                    try:
                        st = os.stat(p)
                    except OSError:
                        continue
                    rel = os.path.relpath(p, here)
                    h.update(f"{rel}|{st.st_mtime_ns}|{st.st_size}\n".encode())
        _FINGERPRINTS["tool"] = h.hexdigest()[:32]
    return _FINGERPRINTS["tool"]


def _extract_job(args):
    text, module, is_pkg = args
    from reload_lint.guard import too_complex
    from reload_lint.index.extract import TooNested, extract_module

    why = too_complex(text)  # Python 3.10's parser segfaults on very long chains
    if why is not None:
        return ("err", "RL906", 0, f"file skipped: {why}")
    try:
        return ("ok", extract_module(text, module, is_pkg))
    except TooNested as exc:  # CPython's parser refused the nesting (its limits, cleanly)
        return ("err", "RL906", 0, f"file skipped: {exc}")
    except SyntaxError as exc:
        line, detail = _syntax_detail(exc)
        return ("err", "RL901", line, f"syntax error: {detail}")
    except RecursionError:  # the tree parsed, but is too deep for the lowering
        return ("err", "RL906", 0, "file too deeply nested to analyse")
    except Exception as exc:  # becomes a per-file diagnostic
        if os.environ.get("RELOAD_LINT_DEBUG"):  # --debug: the traceback of the internal error
            import traceback

            print(f"reload-lint: RL906 in module {module}:", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
        return ("err", "RL906", 0, f"could not analyse file: {type(exc).__name__}: {exc}")


def _decode(data: bytes) -> str | tuple[str]:
    """UTF-8, or the encoding a PEP 263 coding cookie declares; (why,) when neither works."""
    import codecs
    import io
    import tokenize

    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # unknown codec, a cookie contradicting a BOM, or bad bytes
        why = str(exc.msg or exc).splitlines()[0]
        if "unknown encoding" not in why and "encoding problem" not in why:
            enc = "utf-8"  # non-UTF-8 bytes in the first two lines: say which byte below
        else:
            return (f"cannot decode file: {why}",)
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


def _syntax_detail(exc: SyntaxError) -> tuple[int, str]:
    """Line and one-line reason of CPython's syntax error ("'(' was never closed")."""
    detail = str(exc.msg or "").strip().splitlines()
    return int(exc.lineno or 0), detail[0] if detail else "invalid syntax"


class RecordStore(ConsumedResults):
    def __init__(
        self,
        files: list[SourceFile],
        cfg: Config,
        *,
        use_cache: bool,
        cache_dir: Path | None,
        jobs: int | None,
        errors: list[FileError],
        tree: Path | str = "",
        progress=None,
    ):
        """`tree` is the directory paths are relative to (the project root): one pack per
        tree, shared by every run over it (a directory run, pre-commit's named files)."""
        self.files = files
        self.use_cache = use_cache
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.jobs = jobs
        self.errors = errors
        self.progress = progress
        self.texts: dict[str, str] = {}
        self._hash: dict[str, str] = {}
        self._stat: dict[str, tuple] = {}  # rel -> stat key of the bytes read (before reading)
        self._records: dict[str, dict | None] = {}
        self._bad: set[str] = set()
        self.parsed = 0
        self._by_rel = {sf.rel: sf for sf in files}
        self._facts: dict[str, tuple] = {}
        # how many leading text facts are inputs of the analysis (the rest feed passes that
        # run after the cached result on every run: reload_lint/unread.py); None: all
        self.keyed_facts: int | None = None
        self._rows: dict[str, tuple] = {}
        self._facts_key = ""
        self._tree = str(tree)
        self._pack: dict = {}
        self._blobs: dict[str, bytes] = {}  # record key -> pickled record (or error tuple)
        self._dirty = False
        self.result_hit = False
        self._pool = None
        # rel -> sha256 of the extraction result the analysis consumed ("!" when none was)
        self._consumed: dict[str, str] = {}
        self._moved = None  # (key, deps, held) of a hit by moved lines (commit_moved)

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
        if "\r" in text:  # universal newlines, as CPython reads source: old-Mac CR-only
            text = text.replace("\r\n", "\n").replace("\r", "\n")  # files get real lines
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
            self._stat[sf.rel] = _stat_key(st)
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

    # ---- the file table ------------------------------------------------------------
    def _pack_path(self) -> Path:
        key = hashlib.sha256(self._tree.encode()).hexdigest()[:24]
        return self.cache_dir / "packs" / f"{key}.pack"

    def _load_pack(self) -> dict:
        try:
            with open(self._pack_path(), "rb") as fh:
                pack = pickle.load(fh)
        except Exception:  # missing, corrupt or foreign: start empty
            return {}
        if not isinstance(pack, dict) or pack.get("version") != PACK_VERSION:
            return {}
        if pack.get("extract") != extractor_fingerprint():
            pack["records"] = {}
        return pack

    def scan(self, facts, facts_key: str) -> None:
        """Hash (or recognise by stat) every file and compute `facts(text)` for it (small,
        picklable: which root names and markers it mentions...), kept in the file table under
        `facts_key`. Reads no file whose stat matches its cached row."""
        if self.use_cache:
            self._pack = self._load_pack()
            self._blobs = dict(self._pack.get("records", {}))
        if self._pack.get("facts") != facts_key:
            self._pack["files"] = {}  # the facts kept per file changed meaning: recompute
        rows = self._pack.get("files", {})
        self._facts_key = facts_key
        written = self._pack.get("written_ns", 0)
        now = time.time_ns()
        for sf in self.files:
            row = rows.get(sf.rel)
            if row is not None:
                try:
                    st = os.stat(sf.path)
                except OSError:
                    st = None
                if st is not None and stat.S_ISREG(st.st_mode) and _stat_key(st) == row[0]:
                    if _stamp(row[0]) < written - RACY_NS:
                        self._hash[sf.rel] = row[1]
                        self._facts[sf.rel] = row[2]
                        self._rows[sf.rel] = row
                        continue
                    if _stamp(row[0]) < now - RACY_NS:
                        self._dirty = True  # no longer racy: rewrite so it is trusted next time
            text = self.text(sf)
            if text is None:
                continue
            self._facts[sf.rel] = facts(text)
            if self.use_cache:
                # the stat of the descriptor the bytes were read from, taken before the read
                new = (self._stat[sf.rel], self._hash[sf.rel], self._facts[sf.rel])
                self._rows[sf.rel] = new
                if new != row:
                    self._dirty = True

    def facts(self, sf: SourceFile):
        """What `scan` noted about the file's text, or None if it could not be read."""
        return self._facts.get(sf.rel)

    def text_of(self, rel: str) -> str | None:
        sf = self._by_rel.get(rel)
        return self.text(sf) if sf is not None else None

    # ---- whole-run results -----------------------------------------------------------
    def run_key(self, *parts: str) -> str:
        """Every file's identity and hash (or why it could not be read), plus `parts`."""
        h = hashlib.sha256(f"{PACK_VERSION}|{tool_fingerprint()}".encode())
        for p in parts:
            h.update(b"\x1e" + p.encode())
        return self._files_digest(h, lambda sf: self._hash.get(sf.rel))

    def get_result(self, key: str):
        if not self.use_cache:
            return None
        blob = self._pack.get("results", {}).get(key)
        return None if blob is None else self._hit(blob)

    def put_result(self, key: str, value) -> None:
        if not self.use_cache:
            return
        self._keep("results", key, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def _keep(self, table: str, key: str, entry) -> None:
        """ENTRY under KEY in the pack's TABLE, newest last, the oldest beyond KEEP_RESULTS
        dropped."""
        results = dict(self._pack.get(table, {}))
        results.pop(key, None)
        results[key] = entry
        while len(results) > KEEP_RESULTS:
            results.pop(next(iter(results)))
        self._pack[table] = results
        self._dirty = True

    def _hit(self, blob: bytes):
        """The unpickled whole-run result (marking the run a result hit), or None when the
        entry is corrupt (a miss)."""
        try:
            value = pickle.loads(blob)
        except Exception:  # a corrupt entry is a miss
            return None
        self.result_hit = True
        return value

    # ---- small values worked out from a few files (the reload facts) ---------------
    def kept(self, name: str, key: str):
        """The value `keep` put under NAME for KEY, while every file it was read from has
        the hash it had then (this run's scan: by stat, or hashed); else None."""
        if not self.use_cache:
            return None
        entry = self._pack.get("kept", {}).get(name)
        if entry is None or entry[0] != key:
            return None
        if any(self._hash.get(rel) != sha for rel, sha in entry[1]):
            return None
        try:
            return pickle.loads(entry[2])
        except Exception:  # a corrupt entry is a miss
            return None

    def keep(self, name: str, key: str, read, value) -> None:
        """VALUE under NAME for KEY, with the hashes of the files (`rel`s) it was read from;
        not kept when one of them has no hash (it could not be read)."""
        if not self.use_cache:
            return
        reads = tuple((rel, self._hash.get(rel)) for rel in sorted(set(read)))
        if any(sha is None for _rel, sha in reads):
            return
        kept = dict(self._pack.get("kept", {}))
        kept[name] = (key, reads, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        self._pack["kept"] = kept
        self._dirty = True

    # ---- results keyed by what the analysis consumed (early cutoff) -----------------
    def deps_key(self, *parts: str) -> str:
        """Every input of the analysis except the records: `parts` (config, contract, named
        files), the tool, and each file's identity, module name and text facts (which files
        are seeds, cache candidates, subclass declarations, suppression markers) or why it
        could not be read."""
        h = hashlib.sha256(f"deps|{PACK_VERSION}|{tool_fingerprint()}|{self._facts_key}".encode())
        for p in parts:
            h.update(b"\x1e" + p.encode())
        n = self.keyed_facts
        return self._files_digest(
            h, lambda sf: None if (f := self._facts.get(sf.rel)) is None else repr(f[:n])
        )

    def _files_digest(self, h, what_of) -> str:
        """H updated with each file's identity, module name and `what_of(file)` (or, where
        that is None, why the file could not be read), as a hex digest."""
        bad = {e.path: e for e in self.errors}
        for sf in self.files:
            what = what_of(sf)
            if what is None:
                e = bad.get(sf.rel)
                what = f"!{e.rule}:{e.message}" if e is not None else "!"
            h.update(f"\x1e{sf.rel}\x1f{sf.module}\x1f{int(sf.is_package)}\x1f{what}".encode())
        return h.hexdigest()

    # ---- records -------------------------------------------------------------------
    def _extract(self, sf: SourceFile, text: str):
        """The extraction result of `text` under `sf`'s module name (cutoff.py)."""
        return _extract_job((text, sf.module, sf.is_package))

    def _extract_blob(self, sf: SourceFile, text: str) -> bytes:
        """The same, pickled as the pack keeps it."""
        return _extract_blob_job((text, sf.module, sf.is_package))

    def _key(self, sf: SourceFile) -> str:
        return f"{self._hash[sf.rel]}\x1f{sf.module}\x1f{int(sf.is_package)}"

    def _load_cached(self, sf: SourceFile):
        """(extraction result, its pickled bytes) from the pack, or None. The result is
        ("ok", record) or ("err", rule, line, msg)."""
        if not self.use_cache or sf.rel not in self._hash:
            return None
        blob = self._blobs.get(self._key(sf))
        if blob is None:
            return None
        try:
            res = pickle.loads(blob)
        except Exception:  # a corrupt entry is a miss
            return None
        if not isinstance(res, tuple) or not res:
            return None
        if res[0] == "ok" and not (isinstance(res[1], dict) and res[1].get("module") == sf.module):
            return None
        return res, blob

    def _accept(
        self, sf: SourceFile, result, blob: bytes | None = None, *, stored: bool = False
    ) -> dict | None:
        """Take an extraction result for `sf` (the analysis consumes it); `blob` is its
        pickled form, written to the pack unless it came from there (`stored`)."""
        if self.use_cache and blob is not None and sf.rel in self._hash and not stored:
            self._blobs[self._key(sf)] = blob
            self._dirty = True
        self._consumed[sf.rel] = blob_digest(blob) if blob is not None else "!"
        if result[0] == "ok":
            rec = result[1]
            self._records[sf.rel] = rec
            return rec
        _, rule, line, msg = result
        self._records[sf.rel] = None
        self._fail(sf, rule, msg, line)
        return None

    def _tick(self, n: int = 1) -> None:
        if self.progress is not None:
            self.progress.advance(n)

    def record(self, sf: SourceFile) -> dict | None:
        if sf.rel in self._records:
            return self._records[sf.rel]
        cached = self._load_cached(sf)
        if cached is not None:
            return self._accept(sf, *cached, stored=True)
        text = self.text(sf)
        if text is None:
            self._records[sf.rel] = None
            self._consumed[sf.rel] = "!"
            return None
        self.parsed += 1
        res = _extract_job((text, sf.module, sf.is_package))
        self._tick()
        blob = pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL) if self.use_cache else None
        return self._accept(sf, res, blob)

    def prefetch(self, files: list[SourceFile], *, keep_pool: bool = False) -> None:
        """Records for `files`: from the pack, or parsed in parallel (results merged in the
        order of `files`, so the outcome never depends on the number of workers). With
        `keep_pool`, a pool that was needed stays up for `prefetch_batch`."""
        todo = []
        for sf in files:
            if sf.rel in self._records:
                continue
            cached = self._load_cached(sf)
            if cached is not None:
                self._accept(sf, *cached, stored=True)
                continue
            if self.text(sf) is None:
                self._records[sf.rel] = None
                self._consumed[sf.rel] = "!"
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
            # biggest files first so no worker is left with a long tail; merged in input order
            order = sorted(range(len(todo)), key=lambda i: -len(payload[i][0]))
            blobs: list = [None] * len(todo)
            pool = ctx.Pool(min(jobs, len(todo)))
            try:
                it = pool.imap(_extract_blob_job, [payload[i] for i in order], chunksize=2)
                for i, blob in zip(order, it, strict=True):
                    blobs[i] = blob
                    self._tick()
            except BaseException:
                pool.terminate()
                raise
            if keep_pool:
                self._pool = pool
            else:
                pool.terminate()
        else:
            blobs = []
            for p in payload:
                blobs.append(_extract_blob_job(p))
                self._tick()
        for sf, blob in zip(todo, blobs, strict=True):
            self._accept(sf, pickle.loads(blob), blob if self.use_cache else None)

    def prefetch_batch(self, files: list[SourceFile]) -> None:
        """Files the analysis is about to read one by one (the modules declaring subclasses
        of a class): parsed in parallel on the pool a cold run kept, then taken in the order
        given, as `record` would have taken them. Without a pool this does nothing.

        There is no speculative parsing (guessing the modules the analysis asks for next):
        with CPython's parser a record costs a few ms, and the guesses, two in three to four in
        five unused, cost more than they saved, even with a core idle (docs/performance.md,
        Session 4)."""
        if self._pool is None:
            return
        todo = []
        for sf in files:
            rel = sf.rel
            if rel in self._records:
                continue
            if self.use_cache and rel in self._hash and self._key(sf) in self._blobs:
                continue  # record() takes it from the pack
            if self.text(sf) is None:
                continue  # record() reports it
            todo.append(sf)
        if len(todo) < 2:
            return
        payload = [(self.texts[sf.rel], sf.module, sf.is_package) for sf in todo]
        blobs = self._pool.map(_extract_blob_job, payload, chunksize=1)
        for sf, blob in zip(todo, blobs, strict=True):
            self.parsed += 1
            self._tick()
            self._accept(sf, pickle.loads(blob), blob if self.use_cache else None)

    def close(self) -> None:
        """Stop the worker pool, if one was kept."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.terminate()
            pool.join()

    def save(self) -> None:
        if not self.use_cache or not self._dirty:
            return
        rows = dict(self._rows)
        # rows of files this run did not look at (another path set over the same tree) are
        # kept while the file exists, so runs over different parts of a tree do not thrash
        for rel, row in self._pack.get("files", {}).items():
            if rel not in rows and rel not in self._by_rel and self._tree:
                if os.path.isfile(os.path.join(self._tree, rel)):
                    rows[rel] = row
        live = {row[1] for row in rows.values()}
        # and the records the kept analysed states were made on: a file whose lines moved
        # since is proven against its record then (shiftcut.py)
        deps = {k: tuple(self._states(k)) for k in self._pack.get("deps", {})}
        live |= {d[1] for states in deps.values() for st, _ in states for d in st}
        pack = {
            "version": PACK_VERSION,
            "extract": extractor_fingerprint(),
            "facts": self._facts_key,
            "written_ns": time.time_ns(),
            "files": rows,
            "records": {k: v for k, v in self._blobs.items() if k.split("\x1f", 1)[0] in live},
            "results": self._pack.get("results", {}),
            "deps": deps,
            "kept": self._pack.get("kept", {}),
        }
        # the observations of the kept results, each kept once (index/deps.py)
        named = {d[3] for states in pack["deps"].values() for deps, _ in states for d in deps}
        pack["obs"] = {k: v for k, v in self._obs().items() if k in named}
        path = self._pack_path()
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".pack")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(pack, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
            tmp = None
        except OSError:
            pass  # an unwritable cache never fails the run
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        self._dirty = False


def _extract_blob_job(args) -> bytes:
    return pickle.dumps(_extract_job(args), protocol=pickle.HIGHEST_PROTOCOL)
