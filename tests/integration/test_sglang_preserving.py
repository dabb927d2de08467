"""The SGLang copy-or-rebind helpers the `inplace-only` contract names (SGLANG_PRESERVING)
against the real SGLang 0.5.23 sources: each named helper exists, and its body really copies
into the storage it is handed, rebinding only on its other branch. A helper renamed, moved or
rewritten to always rebind fails here, rather than silencing findings on the next release.

Downloads the release wheel once (no deps) into the user cache; skipped when PyPI is
unreachable and the sources are not cached.
"""

from __future__ import annotations

import pytest

from reload_lint.analysis.contracts import SGLANG_PRESERVING, copy_or_rebind_shape
from reload_lint.index.extract import extract_module
from reload_lint.sources import SourceError, release_sources

pytestmark = pytest.mark.integration

VERSION = "0.5.23"


@pytest.fixture(scope="module")
def sglang_root():
    try:
        return release_sources("sglang", VERSION)
    except SourceError as exc:
        pytest.skip(f"SGLang {VERSION} sources unavailable: {exc}")


def _function(root, qualified: str) -> dict | None:
    """The record of `pkg.mod.Outer.<locals>.inner`: the longest module prefix that is a file."""
    parts = qualified.split(".")
    for i in range(len(parts) - 1, 0, -1):
        mod = ".".join(parts[:i])
        path = root.joinpath(*parts[:i]).with_suffix(".py")
        if path.is_file():
            rec = extract_module(path.read_text(encoding="utf-8"), mod, False)
            return rec["functions"].get(".".join(parts[i:]))
    return None


@pytest.mark.parametrize("qualified", SGLANG_PRESERVING)
def test_named_helper_copies_into_existing_storage(sglang_root, qualified):
    f = _function(sglang_root, qualified)
    assert f is not None, f"{qualified} not found in SGLang {VERSION}"
    assert copy_or_rebind_shape(f) == [], qualified
