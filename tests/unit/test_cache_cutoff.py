"""Results kept by what the analysis consumed (cache.py, "early cutoff"): a pre-commit run
after an edit reuses the last result only when every record the analysis read is unchanged,
and never serves a stale one when a helper calls away from the root changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _engine_util import findings_json, precommit_run

from reload_lint import engine

# root (pkg/a.py) -> b.outer -> c.middle -> d.inner: the allocation is three calls away
A_PY = """\
import torch

from pkg.b import outer


class Method:
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.x = outer(layer.weight)

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return x[:, layer.x]
"""
B_PY = """\
from pkg.c import middle


def outer(w):
    return middle(w)
"""
C_PY = """\
from pkg.d import inner


def middle(w):
    return inner(w)
"""
D_PARAM = """\
import torch


def inner(w):
    return torch.nn.Parameter(w.float(), requires_grad=False)
"""
D_FRESH = """\
import torch


def inner(w):
    return torch.argsort(w)
"""
UNRELATED = """\
def nothing_to_see():
    return 1
"""


def _tree(root: Path, d_text: str = D_PARAM) -> None:
    pkg = root / "pkg"
    pkg.mkdir(parents=True, exist_ok=True)
    for name, text in {
        "__init__.py": "",
        "a.py": A_PY,
        "b.py": B_PY,
        "c.py": C_PY,
        "d.py": d_text,
        "unrelated.py": UNRELATED,
    }.items():
        (pkg / name).write_text(text)
    for p in root.rglob("*.py"):  # back-dated, as a checkout looks: no racy rows
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 60_000_000_000))


def _edit(path: Path, text: str) -> None:
    path.write_text(text)
    st = path.stat()  # a distinct mtime even on coarse clocks
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.fixture
def no_analysis(monkeypatch):
    """Fails the test if the analysis runs (the result must come from the cache)."""

    def boom(*a, **kw):
        raise AssertionError("the analysis ran")

    def install():
        monkeypatch.setattr(engine, "_analyse", boom)

    return install


def test_helper_three_calls_away_changes_the_one_file_result(tmp_path):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root)
    assert precommit_run(root, cache).findings == []
    d = root / "pkg" / "d.py"
    for text, expected in ((D_FRESH, ["RL101"]), (D_PARAM, []), (D_FRESH, ["RL101"])):
        _edit(d, text)
        res = precommit_run(root, cache)
        assert [f.rule for f in res.findings] == expected
        assert all(f.path == "pkg/a.py" for f in res.findings)
        assert findings_json(res) == findings_json(precommit_run(root, None))


def test_comment_in_a_consumed_helper_reuses_the_result(tmp_path, no_analysis):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root, D_FRESH)
    before = findings_json(precommit_run(root, cache))
    no_analysis()
    _edit(root / "pkg" / "d.py", D_FRESH + "\n# a note, no code\n")
    res = precommit_run(root, cache)
    assert res.files_parsed == 1  # only d.py, to see its record is unchanged
    assert findings_json(res) == before
    assert precommit_run(root, cache).files_parsed == 0  # and now a plain warm hit


def test_edit_to_a_file_the_analysis_never_reads_reparses_nothing(tmp_path, no_analysis):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root, D_FRESH)
    before = findings_json(precommit_run(root, cache))
    no_analysis()
    _edit(root / "pkg" / "unrelated.py", UNRELATED + "\n\ndef more():\n    return 2\n")
    res = precommit_run(root, cache)
    assert res.files_parsed == 0
    assert findings_json(res) == before


def test_edit_that_moves_lines_in_a_consumed_file_moves_the_findings(tmp_path):
    """The kept result is not served with its old lines: it is analysed again, or relabelled
    by the line-shift cutoff (tests/unit/test_cache_shift.py)."""
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root, D_FRESH)
    first = precommit_run(root, cache)
    assert [f.line for f in first.findings] == [8]
    _edit(root / "pkg" / "a.py", "# a new first line\n" + A_PY)
    res = precommit_run(root, cache)
    assert [f.line for f in res.findings] == [9]
    assert findings_json(res) == findings_json(precommit_run(root, None))


def test_text_facts_are_part_of_the_key(tmp_path):
    """A file that starts to mention a root name becomes a seed: never a reused result."""
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root, D_FRESH)
    precommit_run(root, cache)
    extra = (
        "import torch\n\n\nclass Other:\n"
        "    def process_weights_after_loading(self, layer):\n"
        "        layer.y = torch.empty(3)\n\n"
        "    def apply(self, layer, x):\n        return x + layer.y\n"
    )
    _edit(root / "pkg" / "unrelated.py", extra)
    res = precommit_run(root, cache, "pkg/unrelated.py")
    assert [f.rule for f in res.findings] == ["RL101"]
    assert findings_json(res) == findings_json(precommit_run(root, None, "pkg/unrelated.py"))


def test_snippets_follow_the_current_text(tmp_path):
    """A trailing comment on the finding's own line leaves the record as it was: the result
    is reused, with the snippet read from the edited text."""
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root, D_FRESH)
    precommit_run(root, cache)
    a = root / "pkg" / "a.py"
    _edit(a, A_PY.replace("outer(layer.weight)\n", "outer(layer.weight)  # why\n"))
    res = precommit_run(root, cache)
    assert res.files_parsed == 1
    assert [f.snippet for f in res.findings] == ["layer.x = outer(layer.weight)  # why"]
    assert [f.snippet for f in precommit_run(root, None).findings] == [res.findings[0].snippet]
