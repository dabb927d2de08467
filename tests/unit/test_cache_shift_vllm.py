"""The line-shift cutoff (reload_lint/incremental/shiftcut.py) on a vLLM release tree: comment and blank
lines put into `fp8.py`'s first post-load root and into `modular_kernel.py` (the helper most
traces pass through), each followed by pre-commit's cached run, print exactly what `--no-cache`
prints, without analysing. A copy of the cached vLLM 0.25.1 sources
(`RELOAD_LINT_SHIFT_TREES=vllm-0.25.1,vllm-0.33.0` for both); skipped when not cached."""

from __future__ import annotations

import os
import shutil

import pytest

from reload_lint import engine
from reload_lint.cli import main
from reload_lint.sources import cache_root

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FP8 = "vllm/model_executor/layers/quantization/fp8.py"
HELPER = "vllm/model_executor/layers/fused_moe/modular_kernel.py"
ROOT_DEF = "    def process_weights_after_loading(self, layer"
TREES = os.environ.get("RELOAD_LINT_SHIFT_TREES", "vllm-0.25.1").split(",")


def _after_def(text: str, anchor: str, line: str, nth: int = 0) -> str:
    """`text` with `line` as the first line of the body of the `nth` def starting `anchor`."""
    i = -1
    for _ in range(nth + 1):
        i = text.index(anchor, i + 1)
    j = text.index(":\n", i) + 2
    return text[:j] + line + "\n" + text[j:]


@pytest.mark.parametrize("name", TREES)
def test_moved_lines_in_vllm_equal_no_cache_without_analysing(name, tmp_path, monkeypatch, capsys):
    src = cache_root() / "sources" / name
    if not (src / "vllm").is_dir():
        pytest.skip(f"{name} sources not cached (python scripts/bench.py fetches them)")
    root = tmp_path / "tree"
    shutil.copytree(src / "vllm", root / "vllm")
    cache = str(tmp_path / "cache")
    monkeypatch.chdir(root)
    monkeypatch.setenv("RELOAD_LINT_NO_PROGRESS", "1")
    analyses = []
    real = engine._analyse
    monkeypatch.setattr(engine, "_analyse", lambda *a, **k: analyses.append(1) or real(*a, **k))

    def out(*args: str, cached: bool) -> str:
        capsys.readouterr()
        where = ["--cache-dir", cache] if cached else ["--no-cache"]
        main(["check", "--exit-zero", "--format", "json", *where, *args])
        return capsys.readouterr().out

    out("vllm", cached=True)
    out(FP8, cached=True)
    fp8, helper = root / FP8, root / HELPER
    steps = [
        (fp8, lambda t: _after_def(t, ROOT_DEF, "        # a note on this body"), (FP8,)),
        (helper, lambda t: _after_def(t, "    def __init__(", "        # why"), (HELPER,)),
        (helper, lambda t: t.replace("\n\n\n", "\n\n\n\n", 3), (FP8, HELPER)),
        (fp8, lambda t: _after_def(t, ROOT_DEF, "", nth=1), ("vllm",)),
    ]
    for path, edit, named in steps:
        path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
        before = len(analyses)
        got = out(*named, cached=True)
        assert len(analyses) == before, (path.name, named)  # a cutoff, not an analysis
        assert got == out(*named, cached=False), (path.name, named)
