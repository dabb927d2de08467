"""Bad input never crashes a run and never hides the rest of it (issue 6).

Two tables drive these tests, and docs/bad-input.md shows both to users:

- FILE_CASES: one broken file among good ones. The run goes on; the broken file gets an RL9xx
  diagnostic naming it (text and JSON), the good file's finding is still reported, and the
  exit code is 1 with findings, 3 ("incomplete") without.
- RUN_CASES: a whole-run problem (missing path, bad config/baseline/allowlist, unknown rule,
  unwritable output, bad usage). Exit 2, exactly one line on stderr, no traceback.

`test_doc_table_lists_every_case` keeps the doc and the tests from drifting: every case id is a
row of the doc, and every row of the doc is a case.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from reload_lint.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "bad-input.md"

# A file with one RL101 finding: the rest of the run, which must survive every bad input.
GOOD = """import torch


class GPTQMarlinLikeMethod:
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.g_idx_sort_indices = torch.argsort(layer.g_idx).to(torch.int)

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return x[:, layer.g_idx_sort_indices]
"""
GOOD_LINE = "pkg/good.py:6:9: RL101"
# Bad files mention a root name, so a directory run parses them (a file that no post-load
# path can reach is read, but not parsed: see the syntax-error-unreached case).
SEED = "# process_weights_after_loading\n"


def _write(p: Path, data: str | bytes) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    p.write_bytes(data)


def _bad(data: str | bytes, name: str = "bad.py"):
    return lambda root, mp: _write(root / "pkg" / name, data)


def _root_can_read_anything() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _chmod_000(root: Path, mp) -> None:
    p = root / "pkg" / "bad.py"
    _write(p, SEED + "x = 1\n")
    p.chmod(0)
    try:
        with open(p, "rb"):
            readable = True
    except PermissionError:
        readable = False
    if readable:  # root (or CAP_DAC_OVERRIDE): chmod blocks nothing; see the simulated case
        p.chmod(0o644)
        pytest.skip("running with privileges that ignore file modes")


def _simulate_eacces(root: Path, mp) -> None:
    p = root / "pkg" / "bad.py"
    _write(p, SEED + "x = 1\n")
    real_open = os.open

    def fake_open(path, flags, *a, **kw):
        if os.fspath(path).endswith(os.path.join("pkg", "bad.py")):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, flags, *a, **kw)

    mp.setattr(os, "open", fake_open)


def _unlistable_dir(root: Path, mp) -> None:
    _write(root / "pkg" / "sub" / "bad.py", SEED + "x = 1\n")
    real_scandir = os.scandir

    def fake_scandir(path="."):
        if os.fspath(path).endswith(os.path.join("pkg", "sub")):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    mp.setattr(os, "scandir", fake_scandir)


def _unlistable_dir_chmod(root: Path, mp) -> None:
    d = root / "pkg" / "sub"
    _write(d / "bad.py", SEED + "x = 1\n")
    d.chmod(0)
    try:
        os.listdir(d)
        listable = True
    except PermissionError:
        listable = False
    if listable:
        d.chmod(0o755)
        pytest.skip("running with privileges that ignore directory modes")


def _fifo(root: Path, mp) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    (root / "pkg").mkdir(parents=True, exist_ok=True)
    os.mkfifo(root / "pkg" / "bad.py")


def _symlink(target: str) -> Callable:
    def make(root: Path, mp) -> None:
        (root / "pkg").mkdir(parents=True, exist_ok=True)
        try:
            os.symlink(target, root / "pkg" / "bad.py")
        except (OSError, NotImplementedError):
            pytest.skip("cannot create symlinks here")

    return make


def _vanishing(root: Path, mp) -> None:
    """The file is there when discovery lists it and gone when it is read."""
    import reload_lint.engine as engine

    p = root / "pkg" / "bad.py"
    real = engine.discover

    def discover_then_delete(*a, **kw):
        _write(p, SEED + "x = 1\n")
        out = real(*a, **kw)
        p.unlink()
        return out

    mp.setattr(engine, "discover", discover_then_delete)


def _analysis_crash(root: Path, mp) -> None:
    from reload_lint.analysis.interp import Analyzer

    _write(root / "pkg" / "bad.py", GOOD.replace("GPTQMarlinLikeMethod", "Crashy"))
    real = Analyzer.run_root

    def run_root(self, mod, qn, f):
        if mod.endswith("bad"):
            raise RuntimeError("simulated engine bug")
        return real(self, mod, qn, f)

    mp.setattr(Analyzer, "run_root", run_root)


def _extract_crash(root: Path, mp) -> None:
    import reload_lint.index.extract as extract

    _write(root / "pkg" / "bad.py", SEED + "x = 1\n")
    real = extract.extract_module

    def extract_module(text, module, *a, **kw):
        if module.endswith("bad"):
            raise KeyError("simulated extractor bug")
        return real(text, module, *a, **kw)

    mp.setattr(extract, "extract_module", extract_module)


def _huge(root: Path, mp) -> None:
    from reload_lint.incremental import MAX_FILE_BYTES

    line = b"x = 1  # " + b"p" * 90 + b"\n"
    data = SEED.encode() + line * (MAX_FILE_BYTES // len(line) + 2)
    _write(root / "pkg" / "bad.py", data)


def _non_utf8_name(root: Path, mp) -> None:
    name = os.fsdecode(b"my\xffkernel.py")  # a Latin-1 byte: not valid UTF-8
    try:
        _write(root / "pkg" / name, GOOD.replace("GPTQMarlinLikeMethod", "Bytes"))
    except (OSError, UnicodeEncodeError):
        pytest.skip("this filesystem refuses file names that are not valid UTF-8")


@dataclass(frozen=True)
class FileCase:
    id: str
    make: Callable  # (project root, monkeypatch) -> None: writes pkg/bad.py (and patches)
    rule: str | None  # the diagnostic expected, None: none (the file is fine)
    msg: str = ""  # a piece of its message
    path: str = "pkg/bad.py"
    line: int = 0  # the diagnostic's line, 0: no line
    findings: int = 0  # findings in the bad file itself (it is analysed normally)


LATIN1 = ("# -*- coding: latin-1 -*-\n# café\n" + GOOD.replace("Method", "MethodL")).encode(
    "latin-1"
)
CRLF = GOOD.replace("GPTQMarlinLikeMethod", "K").replace("\n", "\r\n")
CR = GOOD.replace("GPTQMarlinLikeMethod", "K").replace("\n", "\r")
DEEP_OK = GOOD.replace("GPTQMarlinLikeMethod", "Deep") + "X = " + "-" * 150 + "1\n"

FILE_CASES: list[FileCase] = [
    FileCase("syntax-error", _bad(SEED + "def f(x:\n    y = (\n"), "RL901", "never closed", line=3),
    FileCase("python2-print", _bad(SEED + 'print "hi"\n'), "RL901", "Missing parentheses", line=2),
    FileCase(
        "merge-conflict-markers",
        _bad(SEED + "<<<<<<< HEAD\nx = 1\n=======\nx = 2\n>>>>>>> b\n"),
        "RL901",
        "syntax error",
        line=2,
    ),
    FileCase(
        "inconsistent-tabs", _bad(SEED + "if x:\n\ty = 1\n        z = 2\n"), "RL901", "tabs", line=4
    ),
    FileCase("syntax-error-unreached", _bad("def f(x:\n"), None),
    FileCase("invalid-utf8", _bad(SEED.encode() + b"# caf\xe9\n"), "RL902", "not valid UTF-8"),
    FileCase("latin1-with-coding-cookie", _bad(LATIN1), None, findings=1),
    FileCase(
        "unknown-coding-cookie",
        _bad("# -*- coding: klingon -*-\n" + SEED),
        "RL902",
        "unknown encoding",
    ),
    FileCase("nul-bytes", _bad(SEED.encode() + b"x = 1\x00\n"), "RL902", "NUL"),
    FileCase("utf16-file", _bad((SEED + "x = 1\n").encode("utf-16")), "RL902", "NUL"),
    FileCase(
        "utf8-bom",
        _bad(b"\xef\xbb\xbf" + GOOD.replace("Method", "B").encode()),
        None,
        0,
        findings=1,
    ),
    FileCase("empty-file", _bad(b""), None),
    FileCase("comment-only-file", _bad(SEED + "\n\n   \n"), None),
    FileCase("crlf-line-endings", _bad(CRLF), None, findings=1),
    FileCase("cr-only-line-endings", _bad(CR), None, findings=1),
    FileCase("form-feed", _bad(SEED + "x = 1\n\x0c\ny = 2\n"), None),
    FileCase("huge-file", _huge, "RL906", "larger than 8 MiB"),
    FileCase(
        "deep-unary-chain", _bad(SEED + "x = " + "-" * 10000 + "1\n"), "RL906", "nested too deeply"
    ),
    FileCase(
        "deep-brackets", _bad(SEED + "x = " + "[" * 3000 + "]" * 3000 + "\n"), "RL906", "nested"
    ),
    FileCase(
        "deep-lambdas",
        _bad(SEED + "x = " + "lambda: " * 4000 + "1\n"),
        "RL906",
        "nested too deeply",
    ),
    FileCase(
        "long-attribute-chain",
        _bad(SEED + "x = a" + ".b" * 6000 + "\n"),
        "RL906",
        "nested too deeply",
    ),
    # a syntax error before a pathological chain: the parser stops at the error (when libcst
    # parsed files, a token scan refused these, since libcst could crash on the chain)
    FileCase(
        "long-call-chain-and-syntax-error",
        _bad(SEED + "def f(:\n    pass\nx = f" + "()" * 6500 + "\n"),
        "RL901",
        "syntax error: invalid syntax",
        line=2,
    ),
    FileCase(
        "deep-nesting-and-syntax-error",
        _bad(SEED + "def f(:\n    pass\nx = " + "-" * 10000 + "1\n"),
        "RL901",
        "syntax error: invalid syntax",
        line=2,
    ),
    FileCase(
        "deep-expression-parseable",
        _bad(SEED + "x = " + "-" * 2000 + "1\n"),
        "RL906",
        "too deeply nested",
    ),
    FileCase("moderately-deep-is-fine", _bad(DEEP_OK), None, findings=1),
    FileCase("unreadable-chmod-000", _chmod_000, "RL903", "Permission denied"),
    FileCase("unreadable-simulated", _simulate_eacces, "RL903", "Permission denied"),
    FileCase(
        "unlistable-directory-simulated",
        _unlistable_dir,
        "RL903",
        "cannot read directory",
        path="pkg/sub",
    ),
    FileCase(
        "unlistable-directory-chmod-000",
        _unlistable_dir_chmod,
        "RL903",
        "cannot read directory",
        path="pkg/sub",
    ),
    FileCase("directory-named-py", lambda r, mp: (r / "pkg" / "bad.py").mkdir(parents=True), None),
    FileCase("fifo-named-py", _fifo, "RL903", "not a regular file"),
    FileCase("symlink-loop", _symlink("bad.py"), "RL903", "symbolic links"),
    FileCase("dangling-symlink", _symlink("gone.py"), "RL903", "broken symlink"),
    FileCase("vanished-mid-run", _vanishing, "RL903", "vanished"),
    FileCase("analysis-crash", _analysis_crash, "RL906", "internal error: RuntimeError", line=5),
    FileCase("extractor-crash", _extract_crash, "RL906", "KeyError"),
    FileCase(
        "non-utf8-file-name",
        _non_utf8_name,
        None,
        path="pkg/my\\xffkernel.py",
        findings=1,
    ),
    FileCase(
        "odd-file-name",
        _bad(GOOD.replace("Method", "Odd"), name="my kernel ü-1.py"),
        None,
        path="pkg/my kernel ü-1.py",
        findings=1,
    ),
]


@pytest.fixture
def proj(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    monkeypatch.chdir(root)
    yield root
    for p in (root / "pkg" / "sub", root / "pkg" / "bad.py"):  # let tmp_path clean up
        if p.exists() and not p.is_symlink():
            p.chmod(0o755)


def _run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _diag_line(case: FileCase) -> str:
    loc = f"{case.path}:{case.line}:" if case.line else f"{case.path}:"
    return f"{loc} {case.rule}"


@pytest.mark.parametrize("case", FILE_CASES, ids=[c.id for c in FILE_CASES])
def test_bad_file(case: FileCase, proj: Path, capsys, monkeypatch):
    _write(proj / "pkg" / "good.py", GOOD)
    case.make(proj, monkeypatch)

    code, out, err = _run(capsys, "check", "pkg", "--no-cache")
    assert "Traceback" not in out + err
    assert code == 1, out + err
    assert GOOD_LINE in out  # the rest of the run is unaffected
    diag = [ln for ln in out.splitlines() if case.rule and ln.startswith(_diag_line(case))]
    if case.rule is None:
        assert not re.search(r"RL9\d\d", out), out
    else:
        assert len(diag) == 1, out
        assert case.msg in diag[0], diag[0]
    mine = [ln for ln in out.splitlines() if ln.startswith(case.path + ":") and " RL1" in ln]
    assert len(mine) == case.findings, out

    code, out, err = _run(capsys, "check", "pkg", "--no-cache", "--format", "json")
    assert code == 1 and "Traceback" not in err
    report = json.loads(out)
    assert any(f["path"] == "pkg/good.py" and f["rule"] == "RL101" for f in report["findings"])
    errs = [e for e in report["errors"] if e["path"] == case.path]
    if case.rule is None:
        assert errs == []
    else:
        assert [(e["rule"], e["line"]) for e in errs] == [(case.rule, case.line)]
        assert case.msg in errs[0]["message"]

    # Nothing else found: exit 3 ("incomplete") when the file could not be analysed.
    (proj / "pkg" / "good.py").unlink()
    code, out, err = _run(capsys, "check", "pkg", "--no-cache")
    assert "Traceback" not in out + err
    expected = 1 if case.findings else (3 if case.rule else 0)
    assert code == expected, out + err


def test_syntax_error_in_a_file_named_on_the_command_line(proj, capsys):
    """Pre-commit names the changed files: each is parsed even if no root mentions it."""
    _write(proj / "pkg" / "good.py", GOOD)
    _write(proj / "pkg" / "bad.py", "def f(x:\n")
    code, out, _ = _run(capsys, "check", "pkg/bad.py", "--no-cache")
    assert code == 3
    assert out.startswith("pkg/bad.py:1: RL901 syntax error: ")


def test_non_utf8_file_name_named_and_in_a_diff(proj, capsys, monkeypatch):
    """The shown path (`\\xff`) is what a named file, the baseline and --diff match on."""
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git not installed")
    _non_utf8_name(proj, monkeypatch)
    shown = "pkg/my\\xffkernel.py"
    code, out, _ = _run(capsys, "check", os.fsdecode(b"pkg/my\xffkernel.py"), "--no-cache")
    assert code == 1 and f"{shown}:6:9: RL101" in out and "RL906" not in out
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=proj, check=True)
    subprocess.run([*git, "add", "-A"], cwd=proj, check=True)
    subprocess.run([*git, "commit", "-qm", "base"], cwd=proj, check=True)
    assert _run(capsys, "check", "pkg", "--no-cache", "--diff", "HEAD")[0] == 0
    real = proj / "pkg" / os.fsdecode(b"my\xffkernel.py")
    real.write_text(real.read_text().replace("torch.argsort(", "torch.argsort(  ("))
    real.write_text(real.read_text().replace(".to(torch.int)", ").to(torch.int)"))
    code, out, _ = _run(capsys, "check", "pkg", "--no-cache", "--diff", "HEAD")
    assert code == 1 and f"{shown}:6:9: RL101" in out, out


def test_fifo_named_on_the_command_line_does_not_hang(proj, capsys):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    _write(proj / "pkg" / "good.py", GOOD)
    os.mkfifo(proj / "pkg" / "pipe.py")
    code, out, _ = _run(capsys, "check", "pkg/pipe.py", "pkg/good.py", "--no-cache")
    assert code == 1
    assert "pkg/pipe.py: RL903 cannot read file: not a regular file" in out


def test_file_growing_past_the_limit_while_read(proj, capsys, monkeypatch):
    """The size check is repeated on the bytes actually read, not only on stat()."""
    import reload_lint.incremental.cache as cache

    _write(proj / "pkg" / "good.py", GOOD)
    _write(proj / "pkg" / "bad.py", SEED + "x = 1\n" * 400)
    real_fstat = os.fstat

    def small_fstat(fd):  # stat says the file is small; it is not
        st = real_fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_size > 1000:
            return os.stat_result((st.st_mode, *st[1:6], 10, *st[7:]))
        return st

    monkeypatch.setattr(cache, "MAX_FILE_BYTES", 1000)
    monkeypatch.setattr(os, "fstat", small_fstat)
    code, out, _ = _run(capsys, "check", "pkg", "--no-cache")
    assert code == 1
    assert "pkg/bad.py: RL906 file is larger than" in out


# ----------------------------------------------------------------------------- whole run


@dataclass(frozen=True)
class RunCase:
    id: str
    files: dict  # name -> content written into the project first
    argv: tuple
    msg: str  # a piece of the one stderr line


BASELINE_OK = json.dumps({"version": 1, "entries": []})
CONFIRM_FINDINGS = json.dumps(
    {"findings": [{"rule": "RL101", "path": "vllm/layer.py", "line": 1, "fingerprint": "ab" * 10}]}
)
RUN_CASES: list[RunCase] = [
    RunCase("missing-path", {}, ("check", "nope"), "nope: no such file or directory"),
    RunCase(
        "config-invalid-toml",
        {"bad.toml": "[tool.reload-lint\n"},
        ("check", "pkg", "--config", "bad.toml"),
        "bad.toml: invalid TOML",
    ),
    RunCase(
        "config-unknown-key",
        {"bad.toml": "[tool.reload-lint]\nbogus = 1\n"},
        ("check", "pkg", "--config", "bad.toml"),
        "unknown key `bogus`",
    ),
    RunCase(
        "config-wrong-type",
        {"bad.toml": "[tool.reload-lint]\nexclude = 3\n"},
        ("check", "pkg", "--config", "bad.toml"),
        "`exclude` must be a list of strings",
    ),
    RunCase(
        "config-not-utf8",
        {"bad.toml": b"[tool.reload-lint]\n# \xff\n"},
        ("check", "pkg", "--config", "bad.toml"),
        "bad.toml: config is not valid UTF-8",
    ),
    RunCase(
        "config-missing",
        {},
        ("check", "pkg", "--config", "missing.toml"),
        "missing.toml: cannot read config",
    ),
    RunCase(
        "config-in-pyproject-unknown-key",
        {"pyproject.toml": "[tool.reload-lint]\nselectt = ['RL1']\n"},
        ("check", "pkg"),
        "unknown key `selectt`",
    ),
    RunCase(
        "baseline-corrupt",
        {"bl.json": "{not json"},
        ("check", "pkg", "--baseline", "bl.json"),
        "bl.json: corrupt baseline",
    ),
    RunCase(
        "baseline-wrong-shape",
        {"bl.json": "[1, 2, 3]"},
        ("check", "pkg", "--baseline", "bl.json"),
        "bl.json:",
    ),
    RunCase(
        "baseline-missing",
        {},
        ("check", "pkg", "--baseline", "bl.json"),
        "bl.json: baseline not found",
    ),
    RunCase(
        "allowlist-corrupt",
        {"al.toml": "[[allow]\n"},
        ("check", "pkg", "--allowlist", "al.toml"),
        "al.toml: invalid allowlist TOML",
    ),
    RunCase(
        "allowlist-unknown-key",
        {"al.toml": "[[allow]]\nbogus = 1\n"},
        ("check", "pkg", "--allowlist", "al.toml"),
        "unknown key `bogus`",
    ),
    RunCase("allowlist-missing", {}, ("check", "pkg", "--allowlist", "al.toml"), "al.toml:"),
    RunCase(
        "unknown-rule-select",
        {},
        ("check", "pkg", "--select", "RL999"),
        "unknown rule code `RL999`",
    ),
    RunCase(
        "unknown-rule-ignore", {}, ("check", "pkg", "--ignore", "XYZ"), "unknown rule code `XYZ`"
    ),
    RunCase(
        "unknown-rule-in-config",
        {"pyproject.toml": "[tool.reload-lint]\nselect = ['RL999']\n"},
        ("check", "pkg"),
        "RL999",
    ),
    RunCase(
        "unknown-contract", {}, ("check", "pkg", "--contract", "bogus"), "unknown reload contract"
    ),
    RunCase(
        "output-dir-missing",
        {},
        ("check", "pkg", "--output", "no/such/dir/report.txt"),
        "no/such/dir/report.txt: cannot write",
    ),
    RunCase("output-is-directory", {}, ("check", "pkg", "--output", "pkg"), "pkg: cannot write"),
    RunCase(
        "baseline-output-unwritable",
        {},
        ("baseline", "pkg", "--output", "no/such/dir/bl.json"),
        "cannot write",
    ),
    RunCase("usage-bad-format", {}, ("check", "pkg", "--format", "xml"), "invalid choice: 'xml'"),
    RunCase("usage-unknown-option", {}, ("check", "pkg", "--bogus"), "unrecognized arguments"),
    RunCase("usage-bad-jobs", {}, ("check", "pkg", "--jobs", "x"), "invalid int value"),
    RunCase("usage-negative-jobs", {}, ("check", "pkg", "-j", "-3"), "must be 1 or more"),
    RunCase("diff-outside-git", {}, ("check", "pkg", "--diff", "HEAD~1"), "--diff HEAD~1"),
    RunCase(
        "worklist-findings-not-a-report",
        {"f.json": '{"x": 1}'},
        ("worklist", "--findings", "f.json"),
        "f.json: not a findings JSON report: no `findings` list",
    ),
    RunCase(
        "confirm-findings-not-utf8",
        {"f.json": b"\xff\n"},
        ("confirm", "--findings", "f.json", "-o", "e.json"),
        "f.json: cannot read findings: not valid UTF-8",
    ),
    RunCase(
        "confirm-source-not-a-checkout",
        {"f.json": CONFIRM_FINDINGS, "src/README.md": "not vllm\n"},
        ("confirm", "--findings", "f.json", "--source", "src", "-o", "e.json"),
        "--source src: not a vllm checkout (no vllm/__init__.py)",
    ),
    RunCase(
        "confirm-source-no-version",
        {"f.json": CONFIRM_FINDINGS, "src/vllm/__init__.py": ""},
        ("confirm", "--findings", "f.json", "--source", "src", "-o", "e.json"),
        "--source src: cannot read its vllm version",
    ),
]


@pytest.mark.parametrize("case", RUN_CASES, ids=[c.id for c in RUN_CASES])
def test_whole_run_error(case: RunCase, proj: Path, capsys):
    _write(proj / "pkg" / "good.py", GOOD)
    for name, content in case.files.items():
        _write(proj / name, content)
    try:
        no_cache = case.argv[0] not in ("rule", "confirm")  # confirm has no cache
        code = main([*case.argv, "--no-cache"] if no_cache else list(case.argv))
    except SystemExit as exc:  # argparse usage errors exit through the parser
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, out + err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("reload-lint"), err
    assert case.msg in lines[0], err


def test_internal_error_is_one_line_and_debug_shows_the_traceback(proj, capsys, monkeypatch):
    import reload_lint.engine as engine

    _write(proj / "pkg" / "good.py", GOOD)

    def boom(*a, **kw):
        raise ZeroDivisionError("simulated\nsecond line")

    monkeypatch.setattr(engine, "run_check", boom)
    code, out, err = _run(capsys, "check", "pkg", "--no-cache")
    assert code == 2 and out == ""
    assert err == (
        "reload-lint: internal error: ZeroDivisionError: simulated "
        "(rerun with --debug for a traceback)\n"
    )
    with pytest.raises(ZeroDivisionError):
        main(["check", "pkg", "--no-cache", "--debug"])


# ----------------------------------------------------------------------------- the doc


def _doc_ids() -> list[str]:
    return re.findall(r"^\|\s*`([a-z0-9-]+)`\s*\|", DOC.read_text(encoding="utf-8"), re.M)


def test_doc_table_lists_every_case():
    ids = [c.id for c in FILE_CASES] + [c.id for c in RUN_CASES]
    assert len(ids) == len(set(ids)), "duplicate case id"
    doc = _doc_ids()
    assert len(doc) == len(set(doc)), "duplicate row in docs/bad-input.md"
    assert sorted(doc) == sorted(ids), (
        f"docs/bad-input.md and the tests disagree: "
        f"not in the doc {sorted(set(ids) - set(doc))}, not tested {sorted(set(doc) - set(ids))}"
    )


def test_doc_rows_match_the_cases():
    """Each file case's row names its rule and its exit code alone; each run case's row says 2."""
    text = DOC.read_text(encoding="utf-8")
    for c in [*FILE_CASES, *RUN_CASES]:
        row = re.search(rf"^\|\s*`{re.escape(c.id)}`\s*\|.*\|\s*(\d)\s*\|$", text, re.M)
        assert row is not None, f"{c.id}: no row ending in an exit code"
        if isinstance(c, RunCase):
            assert row.group(1) == "2", c.id
            continue
        if c.rule:
            assert c.rule in row.group(0), f"{c.id}: the doc row should name {c.rule}"
        alone = 1 if c.findings else (3 if c.rule else 0)
        assert row.group(1) == str(alone), f"{c.id}: exit alone is {alone}"
