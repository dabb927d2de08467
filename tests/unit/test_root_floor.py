"""scripts/root_floor.py (docs/performance.md, Session 8): the root runs it says read the edited
function are those that do, every pass after the roots is timed, and the analyzer's classes
are put back as they were (the script patches them in its own process)."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from reload_lint.analysis import interp
from reload_lint.index import project

ROOT = Path(__file__).resolve().parents[2]

FILES = {
    "pkg/__init__.py": "",
    "pkg/helpers.py": """
    import torch


    def pack(w):
        return w.t().contiguous()


    def unused(w):
        return w
    """,
    "pkg/a.py": """
    import torch

    from pkg.helpers import pack


    class UsesPack:
        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            layer.w_t = pack(layer.weight)

        def apply(self, layer, x):
            return x @ layer.w_t
    """,
    "pkg/b.py": """
    import torch


    class Alone:
        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            layer.s = layer.weight_scale * 2

        def apply(self, layer, x):
            return x * layer.s
    """,
}


@pytest.fixture(scope="module")
def rf():
    spec = importlib.util.spec_from_file_location("root_floor", ROOT / "scripts/root_floor.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tree(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def test_the_roots_reading_the_edited_function_are_counted(rf, tmp_path):
    before = (interp.Analyzer.run_root, interp.Analyzer.run, project.ProjectIndex.function)
    m = rf.measure(_tree(tmp_path), "pkg", "pkg/helpers.py", "pack")
    assert (interp.Analyzer.run_root, interp.Analyzer.run, project.ProjectIndex.function) == before
    runs = {qn: reads for _mod, qn, _cpu, reads in m["roots"]}
    assert runs == {
        "UsesPack.process_weights_after_loading": True,
        "Alone.process_weights_after_loading": False,
    }
    assert set(m["post"]) == set(rf.POST)
    assert m["state_mib"] > 0
    # a function no root calls is read by none; `-` (every function of the file) by one
    none = rf.measure(_tree(tmp_path), "pkg", "pkg/helpers.py", "unused")
    assert none["first"] is None
    any_of_file = rf.measure(_tree(tmp_path), "pkg", "pkg/helpers.py", None)
    assert [r[3] for r in any_of_file["roots"]] == [r[3] for r in m["roots"]]
