"""The line-shift cutoff (reload_lint/incremental/shiftcut.py): an edit that only moves lines (a comment or
blank line added or removed) reuses the last analysis with its lines moved, and the output,
text and JSON, is byte for byte what `--no-cache` prints on the edited tree."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
from pathlib import Path

import pytest

from reload_lint import engine
from reload_lint.cli import main
from reload_lint.findings import Finding
from reload_lint.incremental import shiftcut

ROOT_PY = '''\
import torch

from pkg.helpers import build, pad_to


class Method:
    """A quant method.

    Its post-load keeps what the helpers return.
    """

    def process_weights_after_loading(self, layer):
        layer.sorted_idx = build(
            layer.weight,
            4,
        )
        total = layer.weight.shape[0] + \\
            layer.weight.shape[1]
        layer.padded = pad_to(layer.weight, total)
        self.cache = {"w": layer.weight.float()}

    def apply(self, layer, x):
        return x[:, layer.sorted_idx] + layer.padded + self.cache["w"]
'''
HELPERS_PY = '''\
import torch


def build(w, n):
    """Sort indices."""
    order = torch.argsort(w)
    return order


def pad_to(w, n):
    return torch.nn.functional.pad(w, (0, n))
'''
FILES = {"pkg/__init__.py": "", "pkg/a.py": ROOT_PY, "pkg/helpers.py": HELPERS_PY}


def _write(root: Path, files: dict[str, str], newline: str = "\n") -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.replace("\n", newline).encode())
    for p in root.rglob("*.py"):  # back-dated, as a checkout looks: no racy rows
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 60_000_000_000))


def _edit(path: Path, text: str, newline: str = "\n") -> None:
    path.write_bytes(text.replace("\n", newline).encode())
    st = path.stat()  # a distinct mtime even on coarse clocks
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def _insert(text: str, after: str, line: str) -> str:
    """`text` with `line` put on its own line after the first line holding `after`."""
    i = text.index(after)
    j = text.index("\n", i) + 1
    return text[:j] + line + "\n" + text[j:]


class Runs:
    """`reload-lint check` in this process, cached and `--no-cache`, counting analyses."""

    def __init__(self, root: Path, cache: Path, monkeypatch, capsys):
        self.root, self.cache, self.capsys = root, cache, capsys
        self.analyses = 0
        real = engine._analyse

        def counted(*a, **kw):
            self.analyses += 1
            return real(*a, **kw)

        monkeypatch.setattr(engine, "_analyse", counted)
        monkeypatch.chdir(root)

    def out(self, *args: str, cached: bool) -> str:
        self.capsys.readouterr()
        where = ["--cache-dir", str(self.cache)] if cached else ["--no-cache"]
        main(["check", "--exit-zero", *where, *args])
        return self.capsys.readouterr().out

    def same(self, *paths: str) -> int:
        """Runs the cached check (JSON, then text) and the `--no-cache` one over `paths`;
        asserts they print the same bytes; returns how many analyses the cached runs made."""
        before = self.analyses
        got_json = self.out("--format", "json", *paths, cached=True)
        got_text = self.out(*paths, cached=True)
        made = self.analyses - before
        assert got_json == self.out("--format", "json", *paths, cached=False)
        assert got_text == self.out(*paths, cached=False)
        return made


@pytest.fixture
def runs(tmp_path, monkeypatch, capsys):
    root = tmp_path / "src"
    _write(root, FILES)
    r = Runs(root, tmp_path / "cache", monkeypatch, capsys)
    r.same("pkg")  # prime: the pack and a directory run's result
    r.same("pkg/a.py")  # pre-commit's first run
    return r


def _lines(out_json: str) -> list[int]:
    return [f["line"] for f in json.loads(out_json)["findings"]]


def _steps_in(out_json: str, rel: str) -> list[int]:
    return [
        s["line"] for f in json.loads(out_json)["findings"] for s in f["trace"] if s["path"] == rel
    ]


def test_comment_in_a_root_body_moves_the_lines_without_analysing(runs):
    a = runs.root / "pkg" / "a.py"
    before = _lines(runs.out("--format", "json", "pkg/a.py", cached=True))
    _edit(a, _insert(ROOT_PY, "def process_weights_after_loading", "        # a note"))
    assert runs.same("pkg/a.py") == 0
    after = _lines(runs.out("--format", "json", "pkg/a.py", cached=True))
    # the kept lines would be stale: every finding lies after the note
    assert after == [n + 1 for n in before] and before
    assert runs.same("pkg") == 0


def test_blank_line_removed_and_several_hunks(runs):
    a = runs.root / "pkg" / "a.py"
    text = ROOT_PY.replace('    """\n\n    def process', '    """\n    def process')
    text = _insert(text, "layer.padded = pad_to", "        # about the padding")
    text = _insert(text, "def apply", "        # read here")
    text = text.replace("import torch\n\n", "import torch\n\n\n\n", 1)
    _edit(a, text)
    assert runs.same("pkg/a.py") == 0


def test_helper_edit_moves_the_trace_steps_through_it(runs):
    h = runs.root / "pkg" / "helpers.py"
    before = runs.out("--format", "json", "pkg/helpers.py", cached=True)
    _edit(h, _insert(HELPERS_PY, "def build", "    # the order of the rows\n"))
    assert runs.same("pkg/helpers.py") == 0
    after = runs.out("--format", "json", "pkg/helpers.py", cached=True)
    # argsort's step and pad's moved by the two lines; `def build` above them did not
    assert _steps_in(before, "pkg/helpers.py") == [6, 4, 11, 10]
    assert _steps_in(after, "pkg/helpers.py") == [8, 4, 13, 12]
    assert runs.same("pkg/a.py", "pkg/helpers.py") == 0


def test_two_files_at_once(runs):
    _edit(runs.root / "pkg" / "a.py", "# top\n" + ROOT_PY)
    _edit(
        runs.root / "pkg" / "helpers.py", HELPERS_PY.replace("\n\n\ndef pad_to", "\n\ndef pad_to")
    )
    assert runs.same("pkg/a.py") == 0


def test_a_move_next_to_an_edit_nothing_reads(runs):
    """One file's lines move, another file gains a function nothing calls (the observations
    cutoff): both at once are still a cutoff."""
    _edit(runs.root / "pkg" / "a.py", _insert(ROOT_PY, "def apply", "        # read here"))
    _edit(runs.root / "pkg" / "helpers.py", HELPERS_PY + "\n\ndef spare(w):\n    return w\n")
    assert runs.same("pkg/a.py", "pkg/helpers.py") == 0


def test_a_move_and_an_edit_nothing_reads_in_one_file(runs):
    """A note in the root body and a function nothing calls appended to the same file: the
    record is not the old one with lines moved, but what the analysis read of it is."""
    a = runs.root / "pkg" / "a.py"
    text = _insert(ROOT_PY, "def process_weights_after_loading", "        # a note")
    _edit(a, text + "\n\ndef spare(layer):\n    return layer\n")
    assert runs.same("pkg/a.py") == 0
    # the same with a change to what the root reads: analysed
    _edit(a, text.replace("4,\n", "5,\n") + "\n\ndef spare(layer):\n    return layer\n")
    assert runs.same("pkg/a.py") == 1


def test_a_move_next_to_a_real_change_analyses(runs):
    _edit(runs.root / "pkg" / "a.py", "# top\n" + ROOT_PY)
    real = HELPERS_PY.replace("return order", "return order.contiguous()")
    _edit(runs.root / "pkg" / "helpers.py", real)
    assert runs.same("pkg/a.py") == 1


def test_comment_between_arguments_of_a_call(runs):
    a = runs.root / "pkg" / "a.py"
    _edit(a, ROOT_PY.replace("            layer.weight,\n", "            layer.weight,\n  # n\n"))
    assert runs.same("pkg/a.py") == 0


def test_backslash_continuation(runs):
    a = runs.root / "pkg" / "a.py"
    # a blank line above the continued statement: its two lines move together
    _edit(a, _insert(ROOT_PY, "        )\n", ""))
    assert runs.same("pkg/a.py") == 0
    # the continuation joined into one line: whatever the cutoff decides, the output is exact
    joined = ROOT_PY.replace(" + \\\n            layer.weight.shape[1]", " + layer.weight.shape[1]")
    _edit(a, joined)
    runs.same("pkg/a.py")


def test_docstring_lines(runs):
    a = runs.root / "pkg" / "a.py"
    # a class docstring's text is not in the record: a line added to it only moves lines
    _edit(a, ROOT_PY.replace("    Its post-load", "    More words.\n    Its post-load"))
    assert runs.same("pkg/a.py") == 0
    # a function body's docstring is an expression statement of the record: its text changed
    h = runs.root / "pkg" / "helpers.py"
    _edit(h, HELPERS_PY.replace('"""Sort indices."""', '"""Sort indices.\n\n    Stable.\n    """'))
    assert runs.same("pkg/a.py") == 1


def test_crlf_file(tmp_path, monkeypatch, capsys):
    root = tmp_path / "src"
    _write(root, FILES, newline="\r\n")
    r = Runs(root, tmp_path / "cache", monkeypatch, capsys)
    r.same("pkg/a.py")
    text = _insert(ROOT_PY, "def process_weights_after_loading", "        # a note")
    _edit(root / "pkg" / "a.py", text, newline="\r\n")
    assert r.same("pkg/a.py") == 0


def test_the_next_edit_cuts_off_against_the_moved_state(runs):
    """After a hit by moved lines the new state is kept with its observations: a function
    nothing calls appended next is an observation hit, not an analysis."""
    a = runs.root / "pkg" / "a.py"
    moved = "# top\n" + ROOT_PY
    _edit(a, moved)
    assert runs.same("pkg/a.py") == 0
    _edit(a, moved + "\n\ndef unused():\n    return 1\n")
    assert runs.same("pkg/a.py") == 0
    _edit(a, moved.replace("# top\n", "# top\n# and more\n"))
    assert runs.same("pkg/a.py") == 0


def test_a_real_edit_still_analyses(runs):
    a = runs.root / "pkg" / "a.py"
    _edit(
        a,
        ROOT_PY.replace("        total =", "        layer.extra = torch.zeros(2)\n        total ="),
    )
    assert runs.same("pkg/a.py") == 1


# ---- the proof on records ------------------------------------------------------------------


def _records(old: str, new: str):
    from reload_lint.index.extract import extract_module

    return (
        extract_module(old, "m", False),
        extract_module(new, "m", False),
        extract_module("\n" * shiftcut.SHIFT + new, "m", False),
    )


def test_line_map_of_a_comment_line():
    m = shiftcut.line_map(*_records(HELPERS_PY, "# head\n" + HELPERS_PY))
    assert m is not None and m and all(n == o + 1 for o, n in m.items())


@pytest.mark.parametrize(
    "new",
    [
        HELPERS_PY.replace("argsort", "sort"),  # another callee
        HELPERS_PY.replace("(0, n)", "(1, n)"),  # a constant
        HELPERS_PY.replace(
            "    order = torch.argsort(w)\n", "    order = torch.argsort(\n        w)\n"
        ),
        HELPERS_PY + "\n\ndef more():\n    return 2\n",  # a function added
    ],
)
def test_line_map_refuses_anything_but_moved_lines(new):
    assert shiftcut.line_map(*_records(HELPERS_PY, new)) is None


def test_line_map_refuses_a_map_that_is_not_increasing():
    old = {"f": ("assign", 3, 5, 7)}
    assert shiftcut.line_map(
        old, {"f": ("assign", 4, 5, 8)}, {"f": ("assign", 4 + 1009, 5, 8 + 1009)}
    )
    # one old line at two new places; two old lines at one new place; order reversed
    assert not shiftcut.line_map(
        {"f": (3, 3)}, {"f": (4, 5)}, {"f": (4 + shiftcut.SHIFT, 5 + shiftcut.SHIFT)}
    )
    assert not shiftcut.line_map(
        {"f": (3, 4)}, {"f": (5, 5)}, {"f": (5 + shiftcut.SHIFT, 5 + shiftcut.SHIFT)}
    )
    assert not shiftcut.line_map(
        {"f": (3, 4)}, {"f": (6, 5)}, {"f": (6 + shiftcut.SHIFT, 5 + shiftcut.SHIFT)}
    )
    # an int that does not move with the text (a column) must not change
    assert not shiftcut.line_map({"f": (3, 9)}, {"f": (3, 8)}, {"f": (3, 8)})


def test_every_finding_field_is_known_to_the_relabelling():
    assert {f.name for f in dataclasses.fields(Finding)} == shiftcut.KNOWN_FIELDS


def test_relabel_refuses_a_line_it_cannot_map():
    from reload_lint.findings import TraceStep

    f = Finding("RL101", "p.py", 5, 1, 5, "s", "t", "m", trace=[TraceStep("p.py", 6, "x")])
    value = ([f], [], {})
    assert shiftcut.relabel(value, {"p.py": {5: 7}}) is None  # line 6 is not in the map
    got = shiftcut.relabel(value, {"p.py": {5: 7, 6: 9}})
    assert got[0][0].line == 7 and got[0][0].trace[0].line == 9
    f.reader = "p.py:6 in K.apply"
    f.backends = ["Fast (q/p.py:5)", "Slow (p.py:6)"]
    got = shiftcut.relabel(([f], [], {}), {"p.py": {5: 7, 6: 9}})
    assert got[0][0].reader == "p.py:9 in K.apply"
    assert got[0][0].backends == ["Fast (q/p.py:5)", "Slow (p.py:9)"]


# ---- fuzz: random comment and blank lines, each run against --no-cache ----------------------

FIXTURES = Path(__file__).parents[1] / "fixtures"


def _movable(text: str, rng: random.Random) -> str:
    """One random line-moving edit: a comment or blank line put in, or one taken out; now and
    then a function nothing calls appended instead."""
    if rng.random() < 0.15:
        return text + f"\n\ndef _spare_{rng.randrange(999)}():\n    return 0\n"
    lines = text.split("\n")
    drop = [i for i, ln in enumerate(lines[:-1]) if not ln.strip() or ln.lstrip().startswith("#")]
    if drop and rng.random() < 0.35:
        del lines[rng.choice(drop)]
    else:
        at = rng.randrange(len(lines))
        indent = " " * rng.choice((0, 4, 8, 12))
        lines.insert(at, rng.choice(("", f"{indent}# note {rng.randrange(99)}", indent)))
    return "\n".join(lines)


@pytest.mark.parametrize("fixture", ["minimoe", "minioracle"])
def test_fuzz_moved_lines_equal_no_cache(fixture, tmp_path, monkeypatch, capsys):
    src = FIXTURES / fixture
    root = tmp_path / "src"
    pkg = next(p for p in src.iterdir() if p.is_dir())
    shutil.copytree(pkg, root / pkg.name)
    _write(root, {})
    r = Runs(root, tmp_path / "cache", monkeypatch, capsys)
    r.same(pkg.name)
    rng = random.Random(f"shift-{fixture}")
    # the files the findings lie in or pass through: where moved lines matter
    files = sorted(
        p.relative_to(root).as_posix()
        for p in (root / pkg.name).rglob("*.py")
        if p.name != "__init__.py"
    )
    cut = 0
    for case in range(18):
        rel = rng.choice(files)
        p = root / rel
        text = p.read_text()
        for _ in range(rng.randint(1, 3)):
            text = _movable(text, rng)
        _edit(p, text)
        named = (rel,) if case % 2 else (pkg.name,)
        cut += r.same(*named) == 0
    assert cut >= 9  # most of these edits are taken by a cutoff, not analysed
