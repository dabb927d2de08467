"""The packed per-tree cache: identical output with and without it, invalidation through a
helper in another file, racy edits, corrupt packs, concurrent runs, and the progress line."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.incremental import cache as cachemod
from reload_lint.progress import Progress
from reload_lint.render.json_ import render_json

A_PY = """\
import torch

from pkg.b import helper


class Method:
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.x = helper(layer.weight)

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return x[:, layer.x]
"""
B_PARAM = """\
import torch


def helper(w):
    return torch.nn.Parameter(w.float(), requires_grad=False)
"""
B_FRESH = """\
import torch


def helper(w):
    return torch.argsort(w)
"""


def _pkg(root: Path, b_text: str = B_PARAM) -> Path:
    pkg = root / "pkg"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(A_PY)
    (pkg / "b.py").write_text(b_text)
    return pkg


def _run(root: Path, cache: Path | None, **kw):
    return run_check(
        [root / "pkg"],
        Config(),
        base_dir=root,
        use_cache=cache is not None,
        cache_dir=cache,
        **kw,
    )


def _json(res) -> str:
    return render_json(res.findings, res.errors, files=res.files_scanned)


def _age(root: Path, seconds: float = 60.0) -> None:
    """Back-date every file, as an unpacked release or an old checkout looks."""
    for p in root.rglob("*.py"):
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - int(seconds * 1e9)))


def test_helper_edit_in_other_file_invalidates(tmp_path):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _pkg(root)
    _age(root)
    first = _run(root, cache)
    assert first.findings == []
    assert _run(root, cache).files_parsed == 0  # warm: nothing parsed
    (root / "pkg" / "b.py").write_text(B_FRESH)
    after = _run(root, cache)
    assert [(f.rule, f.path) for f in after.findings] == [("RL101", "pkg/a.py")]
    assert after.files_parsed == 1  # only b.py; a.py's record comes from the pack
    assert _json(after) == _json(_run(root, None))


def test_racy_same_size_same_mtime_edit_is_seen(tmp_path):
    """An edit that keeps size and mtime (coarse clocks) right after a run is re-hashed."""
    root, cache = tmp_path / "src", tmp_path / "cache"
    _pkg(root)
    b = root / "pkg" / "b.py"
    st = b.stat()
    assert _run(root, cache).findings == []
    fresh = B_FRESH + " " * (len(B_PARAM) - len(B_FRESH))  # same size
    b.write_text(fresh)
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert b.stat().st_size == st.st_size and b.stat().st_mtime_ns == st.st_mtime_ns
    assert [f.rule for f in _run(root, cache).findings] == ["RL101"]


def test_in_place_rewrite_with_mtime_put_back_is_seen(tmp_path, monkeypatch):
    """Content rewritten in place (same inode) at the same size with its mtime put back
    (`cp -p`, `rsync -t`), long after the run that recorded the row (nothing racy): mtime,
    size and inode all match the row, the change time does not, so the file is read again."""
    monkeypatch.setattr(cachemod, "RACY_NS", 0)  # every row trusted: only the stat decides
    root, cache = tmp_path / "src", tmp_path / "cache"
    _pkg(root)
    b = root / "pkg" / "b.py"
    st = b.stat()
    assert _run(root, cache).findings == []
    fresh = B_FRESH + " " * (len(B_PARAM) - len(B_FRESH))  # same size
    with open(b, "r+", encoding="utf-8") as fh:  # in place: the inode stays
        fh.write(fresh)
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = b.stat()
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert [f.rule for f in _run(root, cache).findings] == ["RL101"]


def test_unchanged_file_is_not_read_again(tmp_path, monkeypatch):
    """A file whose stat matches its (settled) row is neither read nor hashed."""
    monkeypatch.setattr(cachemod, "RACY_NS", 0)
    root, cache = tmp_path / "src", tmp_path / "cache"
    _pkg(root, B_FRESH)
    first = _run(root, cache)
    read: list[str] = []
    orig = cachemod.RecordStore._read

    def spy(self, sf):
        read.append(sf.rel)
        return orig(self, sf)

    monkeypatch.setattr(cachemod.RecordStore, "_read", spy)
    again = _run(root, cache)
    assert read == []
    assert _json(again) == _json(first)


def test_output_identical_with_and_without_cache(tmp_path):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _pkg(root, B_FRESH)
    _age(root)
    plain = _json(_run(root, None))
    cold = _run(root, cache)
    warm = _run(root, cache)
    assert cold.files_parsed > 0 and warm.files_parsed == 0
    assert _json(cold) == plain
    assert _json(warm) == plain


def test_corrupt_or_foreign_pack_is_a_miss(tmp_path):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _pkg(root, B_FRESH)
    expected = _json(_run(root, cache))
    packs = list((cache / "packs").glob("*.pack"))
    assert len(packs) == 1
    for junk in (b"", b"not a pickle", b"\x80\x05K\x01."):
        packs[0].write_bytes(junk)
        assert _json(_run(root, cache)) == expected
    assert not [p for p in (cache / "packs").iterdir() if p.name.startswith(".tmp-")]


def test_unwritable_cache_never_fails_the_run(tmp_path):
    root = tmp_path / "src"
    _pkg(root, B_FRESH)
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the cache folder should be")
    res = _run(root, blocker)
    assert [f.rule for f in res.findings] == ["RL101"]


def test_only_paths_reports_one_file_and_resolves_helpers_from_cache(tmp_path):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _pkg(root, B_FRESH)
    _age(root)
    _run(root, cache)
    (root / "pkg" / "a.py").write_text(A_PY + "\n# touched\n")
    res = _run(root, cache, only_paths={"pkg/a.py"})
    assert [(f.rule, f.path) for f in res.findings] == [("RL101", "pkg/a.py")]
    assert res.files_parsed == 1  # the helper module came from the pack
    # naming the helper's file reports the finding its allocation decides (issue 20)
    (f,) = _run(root, cache, only_paths={"pkg/b.py"}).findings
    assert (f.rule, f.path) == ("RL101", "pkg/a.py")
    assert {s.path for s in f.via} == {"pkg/b.py"}


def _many_roots(root: Path, n: int = 12) -> None:
    pkg = _pkg(root, B_FRESH)
    for i in range(n):
        (pkg / f"k{i:02d}.py").write_text(
            "import torch\nfrom pkg.b import helper\n\n\n"
            f"class M{i}:\n"
            "    def process_weights_after_loading(self, layer):\n"
            f"        layer.y{i} = helper(layer.w).t()\n"
            "        layer.z = torch.nn.Parameter(layer.w.clone(), requires_grad=False)\n\n"
            f"    def apply(self, layer, x):\n        return x @ layer.y{i}\n"
        )
    (pkg / "broken.py").write_text("def process_weights_after_loading(:\n")


def test_workers_do_not_change_output(tmp_path):
    root = tmp_path / "src"
    _many_roots(root)
    one = _json(_run(root, None, jobs=1))
    many = _json(_run(root, None, jobs=4))
    assert one == many
    assert '"RL101"' in one and '"RL901"' in one


def test_pool_parses_subclass_batches_without_changing_output(tmp_path, monkeypatch):
    """A cold parallel run keeps its worker pool after the seeds for the modules the analysis
    is about to read one by one (the subclasses of a root's class, for the reader search):
    they are parsed there in one batch, and the output is that of one worker."""
    root = tmp_path / "src"
    _many_roots(root)
    for i in range(4):  # subclasses of M0 that do not name the root: not seeds
        (root / "pkg" / f"sub{i}.py").write_text(
            f"from pkg.k00 import M0\n\n\nclass S{i}(M0):\n"
            "    def forward(self, layer, x):\n        return x\n"
        )
    one = _json(_run(root, None, jobs=1))
    batches = []
    real = cachemod.RecordStore.prefetch_batch

    def spy(self, files):
        before = self.parsed
        real(self, files)
        batches.append((self._pool is not None, self.parsed - before))

    monkeypatch.setattr(cachemod.RecordStore, "prefetch_batch", spy)
    assert _json(_run(root, None, jobs=2)) == one
    assert (True, 4) in batches  # the four subclass modules, parsed on the pool at once


def test_cached_parse_errors_are_replayed(tmp_path):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _many_roots(root)
    _age(root)
    expected = _json(_run(root, None))
    assert _json(_run(root, cache, jobs=2)) == expected
    (root / "pkg" / "k00.py").write_text((root / "pkg" / "k00.py").read_text() + "\n")
    again = _run(root, cache, jobs=2)  # result cache misses; records (and errors) from the pack
    assert again.files_parsed == 1
    assert [e.rule for e in again.errors] == ["RL901"]


def test_concurrent_runs_share_one_pack(tmp_path):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _many_roots(root)
    cmd = [
        sys.executable,
        "-m",
        "reload_lint",
        "check",
        "pkg",
        "--format",
        "json",
        "--cache-dir",
        str(cache),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    procs = [
        subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 1 for p in procs), [o[1] for o in outs]
    assert len({o[0] for o in outs}) == 1
    assert len(list((cache / "packs").glob("*.pack"))) == 1
    assert not [p for p in (cache / "packs").iterdir() if p.name.startswith(".tmp-")]


def test_extractor_change_drops_records(tmp_path, monkeypatch):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _pkg(root, B_FRESH)
    _age(root)
    _run(root, cache)
    (root / "pkg" / "a.py").write_text(A_PY + "\n")
    monkeypatch.setitem(cachemod._FINGERPRINTS, "extract", "another-extractor")
    monkeypatch.setitem(cachemod._FINGERPRINTS, "tool", "another-tool")
    assert _run(root, cache).files_parsed == 2  # a.py and b.py, nothing reused


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_tty_and_only_when_slow():
    quiet = io.StringIO()
    p = Progress(quiet, delay_s=0.0)
    p.start("parsing", 3)
    p.advance()
    p.close()
    assert quiet.getvalue() == ""

    fast = _Tty()
    p = Progress(fast)  # default delay: a short run prints nothing
    p.start("parsing", 3)
    p.advance()
    p.close()
    assert fast.getvalue() == ""

    slow = _Tty()
    p = Progress(slow, delay_s=0.0)
    p.start("parsing", 3)
    p.advance()
    assert "parsing" in slow.getvalue()
    p.close()
    assert slow.getvalue().endswith("\r\x1b[2K")


@pytest.mark.parametrize("jobs", [1, 3])
def test_cli_json_identical_no_cache_cold_warm(tmp_path, jobs):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _many_roots(root)
    _age(root)
    base = [sys.executable, "-m", "reload_lint", "check", "pkg", "--format", "json"]
    base += ["-j", str(jobs)]

    def run(*extra):
        return subprocess.run(
            [*base, *extra], cwd=root, capture_output=True, text=True, timeout=120
        ).stdout

    plain = run("--no-cache")
    assert plain
    assert run("--cache-dir", str(cache)) == plain
    assert run("--cache-dir", str(cache)) == plain


def test_directory_run_and_named_file_run_share_one_pack(tmp_path):
    """`check pkg` then pre-commit's `check pkg/a.py` (whole project indexed, one file
    reported): the second run reuses the first one's records."""
    root, cache = tmp_path / "src", tmp_path / "cache"
    _pkg(root, B_FRESH)
    _age(root)
    _run(root, cache)
    res = run_check([root], Config(), base_dir=root, cache_dir=cache, only_paths={"pkg/a.py"})
    assert [(f.rule, f.path) for f in res.findings] == [("RL101", "pkg/a.py")]
    assert res.files_parsed == 0
    assert len(list((cache / "packs").glob("*.pack"))) == 1
