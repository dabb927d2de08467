"""Byte-identical JSON on a real tree (vLLM 0.25.1): without the cache, cold and warm with it,
with one worker or several, and with only the parsed records (not the whole-run result)
coming from the cache. Skipped unless the release sources are already in the user cache, so
the unit run never downloads anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.incremental import cache as cachemod
from reload_lint.render.json_ import render_json
from reload_lint.sources import cache_root

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VERSION = "0.25.1"


@pytest.fixture(scope="module")
def vllm_root() -> Path:
    root = cache_root() / "sources" / f"vllm-{VERSION}"
    if not (root / "vllm").is_dir():
        pytest.skip(f"vLLM {VERSION} sources not cached (python scripts/bench.py fetches them)")
    return root


def _json(root: Path, **kw) -> str:
    res = run_check([root / "vllm"], Config(), base_dir=root, **kw)
    return render_json(res.findings, res.errors, files=res.files_scanned)


def test_vllm_output_identical_across_cache_and_workers(vllm_root, tmp_path, monkeypatch):
    plain = _json(vllm_root, use_cache=False, jobs=1)
    assert '"findings": [' in plain
    assert _json(vllm_root, use_cache=False, jobs=os.cpu_count() or 2) == plain
    cache = tmp_path / "cache"
    assert _json(vllm_root, cache_dir=cache, jobs=2) == plain  # cold: writes the pack
    assert _json(vllm_root, cache_dir=cache, jobs=2) == plain  # warm: whole-run result
    # a new tool fingerprint misses the whole-run result but reuses every parsed record
    monkeypatch.setitem(cachemod._FINGERPRINTS, "tool", "a-different-analysis")
    res = run_check([vllm_root / "vllm"], Config(), base_dir=vllm_root, cache_dir=cache)
    assert res.files_parsed == 0
    assert render_json(res.findings, res.errors, files=res.files_scanned) == plain
