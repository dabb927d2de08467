"""Issue 11, defect 1: a cold parallel run crashed in the engine's import ordering
(`engine._call_heads`) on a lambda whose parameter is named `c`, the tag of a call node; an
internal error there must become an RL906 row for that file, and the run must go on."""

from __future__ import annotations

from pathlib import Path

import pytest

from reload_lint import engine
from reload_lint.cache import _extract_job
from reload_lint.config import Config
from reload_lint.findings import FileError

KERNEL = """import torch
from pkg.helpers{n} import make


class Kernel{n}:
    def process_weights_after_loading(self, layer):
        key = lambda c: c
        pick = lambda n, a=None: (n, a)
        rows = [c for c in range(3)]
        scaled = {{c: c * 2 for c in rows}}
        make(c=pick)
        layer.ws{n} = torch.empty(4)

    def forward(self, layer, x):
        return layer.ws{n} + x
"""


@pytest.fixture(autouse=True)
def _speculate(monkeypatch):
    """Import ordering (where the crash was) runs for speculative parsing, which runs only
    while a core idles (engine._idle_core): pinned on, so these tests exercise it whatever
    the machine's load."""
    monkeypatch.setattr(engine, "_idle_core", lambda: True)


def _project(tmp_path: Path, n: int = 9) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(n):
        (pkg / f"k{i}.py").write_text(KERNEL.format(n=i))
        (pkg / f"helpers{i}.py").write_text("def make(c=None):\n    return c\n")
    return tmp_path


def _record(src: str) -> dict:
    res = _extract_job((src, "pkg.k", False))
    assert res[0] == "ok", res
    return res[1]


@pytest.mark.parametrize(
    "src",
    [
        "def f():\n    g = lambda c: c\n",
        "def f():\n    g = lambda: c\n",  # a free-name tuple ("c",)
        "def f():\n    return [c for c in x] + [(lambda c, n, a: 0)]\n",
        "def f():\n    return {c: n for c, n in x}\n",
    ],
)
def test_call_heads_survive_parameters_named_like_node_tags(src):
    assert engine._call_heads(_record(src)) == []


def test_call_heads_skip_keyword_pairs():
    rec = _record("def f():\n    make(c=g)\n    ops.repack(n=h)\n")
    assert sorted(engine._call_heads(rec)) == ["make", "ops"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_cold_parallel_run_with_lambda_parameter_c(tmp_path, jobs):
    root = _project(tmp_path)
    res = engine.run_check(
        [root], Config(), base_dir=root, use_cache=False, jobs=jobs, only_paths=None
    )
    assert [e for e in res.errors if e.rule == "RL906"] == []
    assert sorted({f.path for f in res.findings}) == [f"pkg/k{i}.py" for i in range(9)]


def test_internal_error_while_ordering_imports_is_an_rl906_row(tmp_path, monkeypatch):
    """Whatever the bug, one file's failure is a row for that file and the run completes."""
    root = _project(tmp_path)

    def boom(rec):
        if rec.get("module") == "pkg.k3":
            raise IndexError("tuple index out of range")
        return real(rec)

    real = engine._call_heads
    monkeypatch.setattr(engine, "_call_heads", boom)
    res = engine.run_check([root], Config(), base_dir=root, use_cache=False, jobs=2)
    rows = [e for e in res.errors if e.rule == "RL906"]
    assert [(e.path, "IndexError" in e.message) for e in rows] == [("pkg/k3.py", True)]
    assert isinstance(rows[0], FileError)
    # the analysis itself still ran on every kernel, the failing one included
    assert sorted({f.path for f in res.findings}) == [f"pkg/k{i}.py" for i in range(9)]
