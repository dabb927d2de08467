"""tests/unit/_reads_util.py on a real tree (vLLM 0.25.1, whole tree and pre-commit's one
file): every part of every record the analysis was not noted to read is changed, and the
findings stay byte-identical. Skipped unless the release sources are already in the user
cache, so the unit run never downloads anything. Other releases:
`RELOAD_LINT_READS_TREES=vllm-0.33.0,sglang-0.5.23 python -m pytest tests/unit/test_cache_reads_vllm.py`.
"""

from __future__ import annotations

import itertools
import os

import pytest
from _reads_util import assert_reads_complete

from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.incremental import cache as cachemod
from reload_lint.sources import cache_root

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TREES = os.environ.get("RELOAD_LINT_READS_TREES", "vllm-0.25.1").split(",")
ONE_FILE = {
    "vllm": "vllm/model_executor/layers/quantization/fp8.py",
    "sglang": "sglang/srt/layers/quantization/fp8.py",
}
_TOOL = itertools.count()


@pytest.mark.parametrize("tree", TREES)
def test_release_runs_read_only_what_is_noted(tree, tmp_path, monkeypatch):
    root = cache_root() / "sources" / tree
    codebase = tree.split("-", 1)[0]
    top = root / codebase
    if not top.is_dir():
        top = root / "python" / codebase  # SGLang releases keep the package under python/
    if not top.is_dir():
        pytest.skip(f"{tree} sources not cached (python scripts/bench.py fetches them)")
    base = top.parent
    cache = tmp_path / "cache"

    def run(only=None):
        # a new tool fingerprint per run: no kept result is reused, the records are
        monkeypatch.setitem(cachemod._FINGERPRINTS, "tool", f"reads-check-{next(_TOOL)}")
        return run_check([top], Config(), base_dir=base, cache_dir=cache, jobs=2, only_paths=only)

    assert_reads_complete(monkeypatch, run, run, salts=(0,))
    one = {ONE_FILE[codebase]}
    assert_reads_complete(monkeypatch, lambda: run(one), lambda: run(one), salts=(1,))
