"""Issue 11, defect 1: a cold parallel run crashed in the engine's import ordering
(`engine._call_heads`, which ordered speculative parses) on a lambda whose parameter is named
`c`, the tag of a call node. Speculative parsing and that walk are gone (docs/performance.md,
Session 4); a cold run over such kernels, with one worker or a pool, must still analyse every
file without an RL906 row."""

from __future__ import annotations

from pathlib import Path

import pytest

from reload_lint import engine
from reload_lint.config import Config

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


def _project(tmp_path: Path, n: int = 9) -> Path:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(n):
        (pkg / f"k{i}.py").write_text(KERNEL.format(n=i))
        (pkg / f"helpers{i}.py").write_text("def make(c=None):\n    return c\n")
    return tmp_path


@pytest.mark.parametrize("jobs", [1, 2])
def test_cold_parallel_run_with_lambda_parameter_c(tmp_path, jobs):
    root = _project(tmp_path)
    res = engine.run_check(
        [root], Config(), base_dir=root, use_cache=False, jobs=jobs, only_paths=None
    )
    assert [e for e in res.errors if e.rule == "RL906"] == []
    assert sorted({f.path for f in res.findings}) == [f"pkg/k{i}.py" for i in range(9)]
