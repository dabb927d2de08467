"""Issue 6, beyond single bad files: nothing a user wrote is lost, output is deterministic, and
the audited code is never imported or executed."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from reload_lint.cli import main
from reload_lint.errors import ReloadLintError
from reload_lint.fsutil import atomic_write_text

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "minivllm"

KERNEL = """import functools

import torch
from torch import argsort as a


def _perm(g_idx):
    return a(g_idx).to(torch.int)


class Kernel{n}:
    def __init__(self):
        self.cache = {{}}

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.g_idx_sort_indices{n} = _perm(layer.g_idx)
        self.cache["w{n}"] = layer.weight.t().contiguous()
        self.fn = functools.partial(torch.index_select, index=torch.arange({n}))
        layer.scale_inv = 1.0 / layer.weight_scale  # reload-lint: ignore[RL101] -- test {n}

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        y = x[:, layer.g_idx_sort_indices{n}] @ self.cache["w{n}"]
        return self.fn(y, 0) * layer.scale_inv
"""


def _project(root: Path) -> Path:
    """A project with enough post-load files for the parallel path (>= 8 to parse), the
    fixture package, and a few bad files."""
    shutil.copytree(FIXTURE, root / "fx")
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    pkg = root / "pkg"
    pkg.mkdir()
    for n in range(14):
        (pkg / f"k{n:02d}.py").write_text(KERNEL.format(n=n))
    (pkg / "syntax.py").write_text("# process_weights_after_loading\ndef f(:\n")
    (pkg / "nul.py").write_bytes(b"x = 1\x00\n")
    (pkg / "latin.py").write_bytes(b"# process_weights_after_loading\n# caf\xe9\n")
    return root


def _run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, out


FORMATS = ("text", "json", "sarif", "github")


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_is_identical_across_jobs_cache_states_and_directories(
    fmt, tmp_path, capsys, monkeypatch
):
    a = _project(tmp_path / "a")
    b = tmp_path / "elsewhere" / "b"
    shutil.copytree(a, b)
    cache = tmp_path / "cache"
    runs: dict[str, str] = {}

    def check(label: str, where: Path, *extra: str) -> None:
        monkeypatch.chdir(where)
        code, out = _run(capsys, "check", "pkg", "fx", "--format", fmt, *extra)
        assert code == 1, out
        runs[label] = out

    check("no-cache -j1", a, "--no-cache", "-j", "1")
    check("no-cache -j2", a, "--no-cache", "-j", "2")
    check("cold cache -j2", a, "--cache-dir", str(cache), "-j", "2")
    check("warm cache -j1", a, "--cache-dir", str(cache), "-j", "1")
    check("warm cache -j2", a, "--cache-dir", str(cache), "-j", "2")
    for p in sorted((a / "pkg").iterdir()):  # new mtimes, same bytes
        os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 5_000_000_000))
    check("touched, warm cache", a, "--cache-dir", str(cache), "-j", "2")
    check("another directory", b, "--cache-dir", str(cache), "-j", "2")
    check("another directory, no cache", b, "--no-cache", "-j", "3")
    first = runs["no-cache -j1"]
    assert "pkg/syntax.py" in first and "pkg/nul.py" in first and "pkg/latin.py" in first
    for label, out in runs.items():
        assert out == first, f"{fmt}: `{label}` differs from `no-cache -j1`"
    assert str(tmp_path) not in first  # no absolute paths leak into the report


def test_output_is_identical_across_processes_and_hash_seeds(tmp_path):
    """Set and dict ordering of str keys changes with PYTHONHASHSEED: run in fresh processes."""
    root = _project(tmp_path / "p")
    outs = []
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run(
            [sys.executable, "-m", "reload_lint", "check", "pkg", "fx", "--format", "json"]
            + ["--no-cache", "-j", "2"],
            cwd=root,
            env=env,
            capture_output=True,
            timeout=300,
        )
        assert res.returncode == 1, res.stderr.decode()
        outs.append(res.stdout)
    assert outs[0] == outs[1] == outs[2]
    report = json.loads(outs[0])
    assert report["summary"]["findings"] > 14 and report["summary"]["errors"] == 3


# ----------------------------------------------------------------------------- no execution

EVIL = """import os
open({marker!r}, "w").close()
raise SystemExit("audited code was executed")
"""


def test_audited_code_is_never_imported_or_executed(tmp_path, capsys, monkeypatch):
    root = tmp_path / "proj"
    pkg = root / "evilpkg"
    pkg.mkdir(parents=True)
    marker = tmp_path / "EXECUTED"
    evil = EVIL.format(marker=str(marker))
    (pkg / "__init__.py").write_text(evil)
    (pkg / "kern.py").write_text(evil + "\n" + KERNEL.format(n=1))
    # names reload-lint itself imports: with `python -m`, the cwd would shadow them
    for name in ("ast", "tokenize", "json", "pickle", "fnmatch", "libcst", "tomllib"):
        (root / f"{name}.py").write_text(evil)
    (root / "conftest.py").write_text(evil)
    (root / "sitecustomize.py").write_text(evil)
    before = set(sys.modules)
    monkeypatch.chdir(root)

    code, out = _run(capsys, "check", "evilpkg", "--no-cache", "-j", "1")
    assert code == 1 and "evilpkg/kern.py" in out and "RL101" in out
    assert not marker.exists()
    assert not any(m == "evilpkg" or m.startswith("evilpkg.") for m in set(sys.modules) - before)

    # and through the documented `python -m reload_lint`, run from inside the project
    for fmt in ("text", "json"):
        res = subprocess.run(
            [sys.executable, "-m", "reload_lint", "check", "evilpkg", "--no-cache"]
            + ["--format", fmt],
            cwd=root,
            capture_output=True,
            timeout=300,
        )
        assert res.returncode == 1, res.stdout.decode() + res.stderr.decode()
        assert b"evilpkg/kern.py" in res.stdout
        assert not marker.exists()


# ----------------------------------------------------------------------------- nothing lost


def _digest(*paths: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


@pytest.fixture
def gated(tmp_path, monkeypatch):
    """A project with a baseline and an allowlist the user wrote."""
    root = _project(tmp_path / "p")
    monkeypatch.chdir(root)
    assert main(["baseline", "pkg", "--no-cache", "-o", "rl-baseline.json"]) == 3
    (root / "rl-allow.toml").write_text(
        '[[allow]]\nrule = "RL103"\npath = "pkg/k00.py"\nsymbol = "*"\ntarget = "*"\n'
        'reason = "accepted: a test"\nlink = "https://example.invalid/1"\n'
    )
    return root


def _no_temp_files(root: Path) -> bool:
    return not [p for p in root.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("fail_at", ["replace", "fsync", "write", "interrupt"])
def test_a_failed_baseline_write_leaves_the_old_file(gated, capsys, monkeypatch, fail_at):
    bl, al = gated / "rl-baseline.json", gated / "rl-allow.toml"
    (gated / "pkg" / "k00.py").write_text(KERNEL.format(n=99))  # the baseline would change
    before = _digest(bl, al)
    capsys.readouterr()
    if fail_at == "replace":
        monkeypatch.setattr(os, "replace", _raiser(OSError(28, "No space left on device")))
    elif fail_at == "fsync":
        monkeypatch.setattr(os, "fsync", _raiser(OSError(5, "Input/output error")))
    elif fail_at == "write":
        monkeypatch.setattr(os, "fdopen", _short_writes)
    else:
        monkeypatch.setattr(os, "replace", _raiser(KeyboardInterrupt()))
    code = main(["baseline", "pkg", "--no-cache", "-o", "rl-baseline.json"])
    _, err = capsys.readouterr()
    assert code == 2
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("reload-lint: ")
    assert _digest(bl, al) == before
    assert _no_temp_files(gated)


def test_a_failed_report_write_leaves_the_old_report(gated, capsys, monkeypatch):
    report = gated / "report.json"
    report.write_text("{}\n")
    monkeypatch.setattr(os, "replace", _raiser(OSError(30, "Read-only file system")))
    code = main(["check", "pkg", "--no-cache", "--format", "json", "-o", "report.json"])
    _, err = capsys.readouterr()
    assert code == 2 and err == "reload-lint: report.json: cannot write: Read-only file system\n"
    assert report.read_text() == "{}\n"
    assert _no_temp_files(gated)


@pytest.mark.parametrize(
    "breakage",
    ["bad-config", "bad-allowlist", "engine-crash", "unknown-rule"],
)
def test_a_failed_run_leaves_baseline_and_allowlist_untouched(gated, capsys, monkeypatch, breakage):
    bl, al = gated / "rl-baseline.json", gated / "rl-allow.toml"
    before = _digest(bl, al)
    argv = ["baseline", "pkg", "--no-cache", "-o", "rl-baseline.json", "--allowlist", al.name]
    if breakage == "bad-config":
        (gated / "pyproject.toml").write_text("[tool.reload-lint]\nbogus = 1\n")
    elif breakage == "bad-allowlist":
        (gated / "extra.toml").write_text("[[allow]\n")
        argv += ["--allowlist", "extra.toml"]
    elif breakage == "engine-crash":
        import reload_lint.engine as engine

        monkeypatch.setattr(engine, "run_check", _raiser(RuntimeError("boom")))
    else:
        argv += ["--select", "RL999"]
    capsys.readouterr()
    assert main(argv) == 2
    _, err = capsys.readouterr()
    assert len(err.splitlines()) == 1
    assert _digest(bl, al) == before
    assert _no_temp_files(gated)


def test_check_never_writes_baseline_or_allowlist(gated, capsys):
    bl, al = gated / "rl-baseline.json", gated / "rl-allow.toml"
    before = _digest(bl, al)
    stat_before = (bl.stat().st_mtime_ns, al.stat().st_mtime_ns)
    for fmt in FORMATS:
        argv = ["check", "pkg", "--no-cache", "--baseline", bl.name, "--allowlist", al.name]
        assert main([*argv, "--format", fmt]) == 3  # all baselined; the bad files remain
    capsys.readouterr()
    assert _digest(bl, al) == before
    assert (bl.stat().st_mtime_ns, al.stat().st_mtime_ns) == stat_before


def test_baseline_keeps_entries_of_files_it_could_not_read(gated, capsys, monkeypatch):
    """A transient read error must not silently drop what the baseline recorded."""
    bl = gated / "rl-baseline.json"
    old = json.loads(bl.read_text())["entries"]
    k03 = [e for e in old if e["path"] == "pkg/k03.py"]
    assert k03
    real_open = os.open

    def flaky_open(path, flags, *a, **kw):
        if os.fspath(path).endswith("k03.py"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(os, "open", flaky_open)
    capsys.readouterr()
    assert main(["baseline", "pkg", "--no-cache", "-o", bl.name]) == 3
    _, err = capsys.readouterr()
    assert "pkg/k03.py: RL903 cannot read file: Permission denied" in err
    new = json.loads(bl.read_text())["entries"]
    assert [e for e in new if e["path"] == "pkg/k03.py"] == k03
    assert new == old


def test_atomic_write_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "shared" / "baseline.json"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "rl-baseline.json"
    try:
        link.symlink_to(real)
    except (OSError, NotImplementedError):
        pytest.skip("cannot create symlinks here")
    atomic_write_text(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"


def test_atomic_write_keeps_mode_and_new_files_follow_the_umask(tmp_path):
    p = tmp_path / "out.txt"
    atomic_write_text(p, "a\n")
    mask = os.umask(0o022)
    os.umask(mask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~mask
    p.chmod(0o640)
    atomic_write_text(p, "b\n")
    assert p.stat().st_mode & 0o777 == 0o640 and p.read_text() == "b\n"


def test_atomic_write_errors_are_one_line(tmp_path):
    with pytest.raises(ReloadLintError, match=r"^.*nope/x.txt: cannot write: "):
        atomic_write_text(tmp_path / "nope" / "x.txt", "x")


# helpers -------------------------------------------------------------------------------


def _raiser(exc: BaseException):
    def f(*a, **kw):
        raise exc

    return f


_real_fdopen = os.fdopen


def _short_writes(fd, *a, **kw):
    """A file object whose write fails halfway, as on a full disk."""
    fh = _real_fdopen(fd, *a, **kw)

    class Half:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            fh.close()
            return False

        def write(self, data):
            fh.write(data[: len(data) // 2])
            raise OSError(28, "No space left on device")

        def __getattr__(self, name):
            return getattr(fh, name)

    return Half()


def test_output_to_a_fifo_writes_into_it_and_keeps_it(gated, capsys):
    """-o /dev/null, -o /dev/stdout, a FIFO: not a file to replace atomically. Renaming over
    one replaced the node itself (as root, /dev/null became a regular file); it is written
    to instead. A FIFO stands in for the devices, which a test must not risk."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    fifo = gated / "report.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so the writer's open() won't block
    try:
        # --statistics: a few lines, well inside the pipe's buffer (nothing reads concurrently)
        code = main(["check", "pkg", "--no-cache", "--statistics", "-o", fifo.name])
        data = os.read(reader, 1 << 20)
    finally:
        os.close(reader)
    capsys.readouterr()
    assert code == 1
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert b"RL101" in data
    assert _no_temp_files(gated)
