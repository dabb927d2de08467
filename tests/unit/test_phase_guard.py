"""An internal error in the passes that run after the roots (first-forward lazy init, apply-time
caches, the apply-time reader search) is an RL906 row for the module or finding concerned; the
run goes on and the other findings are still reported (never a whole-run exit 2).

Each test makes one pass fail from inside (an index call or the reader search raises while that
pass runs), as an engine bug would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reload_lint.analysis.interp import Analyzer
from reload_lint.cli import main

KERNEL = """import torch


class Kernel:
    def __init__(self, n):
        self.n = n
        self.workspace = None

    def run(self, x):
        if self.workspace is None:
            self.workspace = torch.empty(self.n)
        return x + self.workspace


class Method:
    def process_weights_after_loading(self, layer):
        layer.kernel = Kernel(4)
        layer.g_idx_sort_indices = torch.argsort(layer.g_idx).to(torch.int)

    def apply(self, layer, x):
        return layer.kernel.run(x)[:, layer.g_idx_sort_indices]
"""


@pytest.fixture
def proj(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "kern.py").write_text(KERNEL)
    monkeypatch.chdir(root)
    return root


def _check(capsys) -> tuple[int, dict, str]:
    code = main(["check", "--no-cache", "-j", "1", "--format", "json", "pkg"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _failing_inside(monkeypatch, phase: str, patch) -> None:
    """Run the real `phase` with `patch(analyzer)` applied for its duration only."""
    real = getattr(Analyzer, phase)

    def wrapped(self, *args):
        undo = patch(self)
        try:
            return real(self, *args)
        finally:
            undo()

    monkeypatch.setattr(Analyzer, phase, wrapped)


def _raising(obj, name: str, when=lambda *a: True):
    real = getattr(obj, name)

    def fake(*args, **kwargs):
        if when(*args):
            raise RuntimeError("simulated engine bug")
        return real(*args, **kwargs)

    setattr(obj, name, fake)
    return lambda: setattr(obj, name, real)


def test_clean_run_has_both_findings(proj, capsys):
    code, report, _ = _check(capsys)
    assert code == 1
    assert {f["rule"] for f in report["findings"]} == {"RL101", "RL108"}
    assert report["errors"] == []


def test_lazy_init_failure_is_an_rl906_row(proj, capsys, monkeypatch):
    _failing_inside(monkeypatch, "run_lazy", lambda a: _raising(a.index, "mro"))
    code, report, err = _check(capsys)
    assert "internal error" not in err and "Traceback" not in err
    assert code == 1  # the RL101 with its reader still fails the gate
    assert [f["rule"] for f in report["findings"]] == ["RL101"]
    assert report["errors"] == [
        {
            "rule": "RL906",
            "path": "pkg/kern.py",
            "line": 0,
            "message": "first-forward analysis of Kernel did not complete "
            "(internal error: RuntimeError)",
        }
    ]


def test_apply_cache_failure_is_an_rl906_row(proj, capsys, monkeypatch):
    _failing_inside(
        monkeypatch,
        "run_apply_caches",
        lambda a: _raising(a.index, "record", when=lambda m: m == "pkg.kern"),
    )
    code, report, err = _check(capsys)
    assert "internal error" not in err and "Traceback" not in err
    assert code == 1
    assert {f["rule"] for f in report["findings"]} == {"RL101", "RL108"}
    assert [(e["rule"], e["path"], e["message"]) for e in report["errors"]] == [
        (
            "RL906",
            "pkg/kern.py",
            "apply-time cache analysis did not complete (internal error: RuntimeError)",
        )
    ]


def test_reader_search_failure_is_an_rl906_row_for_that_finding(proj, capsys, monkeypatch):
    def patch(a):
        return _raising(a, "find_reader", when=lambda attr, *rest: attr == "g_idx_sort_indices")

    _failing_inside(monkeypatch, "add_graph_visibility", patch)
    code, report, err = _check(capsys)
    assert "internal error" not in err and "Traceback" not in err
    # both findings stay; the one whose reader search failed has no reader (a warning), so
    # the run is incomplete (3) rather than clean
    assert {f["rule"] for f in report["findings"]} == {"RL101", "RL108"}
    rl101 = next(f for f in report["findings"] if f["rule"] == "RL101")
    assert rl101["reader"] is None
    assert report["errors"] == [
        {
            "rule": "RL906",
            "path": "pkg/kern.py",
            "line": rl101["line"],
            "message": "the apply-time reader search for layer.g_idx_sort_indices did not "
            "complete (internal error: RuntimeError)",
        }
    ]
    assert code == 3


def test_text_output_names_the_row(proj, capsys, monkeypatch):
    _failing_inside(monkeypatch, "run_lazy", lambda a: _raising(a.index, "mro"))
    code = main(["check", "--no-cache", "-j", "1", "pkg"])
    out, err = capsys.readouterr()
    assert code == 1 and err.count("\n") <= 1
    assert "pkg/kern.py: RL906 first-forward analysis of Kernel did not complete" in out
    assert Path("pkg/kern.py").read_text() == KERNEL  # the audited file is only read
