"""External callees the tree asserts return a view of their first argument
(analysis/externals.py; issue 17, class 7).

tests/fixtures/miniviews: `miniviews/layouts.py` calls two library functions and asserts that
each result shares its first argument's storage (`r.data_ptr() == x.data_ptr()`, and
`x.untyped_storage().data_ptr() == r.untyped_storage().data_ptr()`, the argument a view of
`x`). `miniviews/experts.py` keeps those functions' results on its kernel object, one called
through a lazy-import wrapper: views of the layer's registered scales, not reported, and
`explain` names the assertion. The markers (tests/unit/test_fixtures.py) pin the positives: a
view of a tensor made in post-load, library calls no assertion names, an assertion about the
second argument, and a wrapper that never looks its name up. The facts follow edits to the
asserting file and the wrapper through the cache.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest
from _engine_util import findings_json

from reload_lint import engine
from reload_lint.cli import main
from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.index.deps import VIEWS
from reload_lint.index.extract import extract_module

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "miniviews"
EXPERTS = "miniviews/experts.py"
LAYOUTS = "miniviews/layouts.py"


def _line(root: Path, rel: str, text: str) -> int:
    return next(i for i, s in enumerate((root / rel).read_text().splitlines(), 1) if text in s)


@pytest.fixture
def tree(tmp_path, monkeypatch):
    root = tmp_path / "src"
    shutil.copytree(FIXTURE, root)
    for p in root.rglob("*.py"):  # back-dated, as a checkout looks: no racy rows
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 60_000_000_000))
    monkeypatch.chdir(root)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    return root


def _run(root: Path, cache: Path | None):
    return run_check([root], Config(), base_dir=root, use_cache=cache is not None, cache_dir=cache)


def _targets(res) -> list[str]:
    return sorted(f.target for f in res.findings)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    st = path.stat()  # a distinct mtime even on coarse clocks
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


ASSERTED = 'tiled.data_ptr() == scale.data_ptr(), "tile_scales must not copy"'
POSITIVES = ["self.w2_tiles", "self.w_filled", "self.w_like", "self.w_packed"]


def test_asserted_views_are_explained(tree, capsys):
    specs = [
        f"{EXPERTS}:{_line(tree, EXPERTS, t)}"
        for t in ("self.w_tiles =", "self.b_swz =", "self.w2_tiles =", "self.w_packed =")
    ]
    capsys.readouterr()
    assert main(["explain", "--no-cache", "--format", "json", *specs]) == 0
    tiles, swz, fresh, packed = (
        a["decisions"][0] for a in json.loads(capsys.readouterr().out)["explain"]
    )
    lazy_line = _line(tree, LAYOUTS, "assert tiled.data_ptr()")
    assert tiles["status"] == "decided-safe" and tiles["fact"] == "alias", tiles
    assert (
        f"`tilekit.layout.tile_scales` returns a view of its first argument (asserted at "
        f"{LAYOUTS}:{lazy_line})" in tiles["why"]
    ), tiles
    assert swz["status"] == "decided-safe" and "`tilekit.swz.swizzle` returns a view" in swz["why"]
    # a view of a tensor post-load made is that new tensor
    assert fresh["status"] == "reported" and fresh["rule"] == "RL102", fresh
    # no assertion names pack_tiles: the library result is still a new tensor
    assert packed["status"] == "reported" and packed["rule"] == "RL102", packed


def _record(src: str, module: str = "m") -> dict:
    return extract_module(textwrap.dedent(src), module, False)


def test_which_assertions_state_a_view():
    rec = _record(
        """
        from lib import conv, fill, other

        def a(x):
            r = conv(x.reshape(4, -1).view(-1), 3)
            assert r.data_ptr() == x.data_ptr(), "msg"

        def b(x):
            r = conv(x.data)
            assert x.untyped_storage().data_ptr() == r.untyped_storage().data_ptr() and r.is_cuda

        def c(x, y):
            r = fill(x, y)
            assert r.data_ptr() == y.data_ptr()  # the second argument

        def d(x):
            assert other(x).data_ptr() == x.data_ptr()  # no name bound to the result
            r = other(x)

        def e(x):
            r = other(x.clone())
            assert r.data_ptr() == x.data_ptr()  # a copy of x is handed in

        def f(x):
            r = other(x)
            assert r.data_ptr() != x.data_ptr()
            assert r.data_ptr() % 16 == 0
        """
    )
    assert [(qn, ln) for qn, ln, _a, _b in rec["storage_asserts"]] == [
        ("a", 6),
        ("b", 10),
        ("c", 14),
        ("d", 17),
        ("e", 22),
    ]
    got = VIEWS["alias_asserts"](rec, {})
    assert got == (("conv", "a", 6), ("conv", "b", 10))


def test_without_extensions_nothing_is_recorded(monkeypatch):
    from reload_lint.index import lower_util

    monkeypatch.setattr(lower_util, "EXTENSIONS", False)
    rec = _record("def a(x):\n    r = g(x)\n    assert r.data_ptr() == x.data_ptr()\n")
    assert "storage_asserts" not in rec


def test_text_fact_finds_the_asserting_files():
    facts = engine._text_facts
    assert facts("assert r.data_ptr() == x.data_ptr()\n", ())[4]
    assert facts("assert (\n    r.untyped_storage().data_ptr() == x.data_ptr()\n)\n", ())[4]
    assert facts("assert r.untyped_storage().data_ptr() == (\n    x.data_ptr()\n)\n", ())[4]
    assert facts("assert y is None or r.data_ptr() == y.data_ptr(), 'm'\n", ())[4]
    assert not facts("p = x.data_ptr()\nassert p\n", ())[4]
    assert not facts("assert x.data_ptr() % 16 == 0\n", ())[4]
    assert not facts("assert a.ctypes.data == x.data_ptr()\n", ())[4]
    assert not facts("assert x\n", ())[4]


def test_edits_to_the_asserting_file_and_the_wrapper_follow_through_the_cache(tree, tmp_path):
    cache = tmp_path / "cache"
    assert _targets(_run(tree, cache)) == POSITIVES
    layouts, lazy = tree / LAYOUTS, tree / "miniviews/lazy.py"
    swz = "scale.untyped_storage().data_ptr() == out.untyped_storage().data_ptr()"
    steps = [
        # the argument is a copy of what the assertion names: no fact (text facts unchanged)
        (layouts, "tile_scales(scale.reshape(", "tile_scales(scale.clone().reshape(", ["w_tiles"]),
        (layouts, "tile_scales(scale.clone().reshape(", "tile_scales(scale.reshape(", []),
        # one assertion goes, then the other (the file no longer asserts: its text fact)
        (layouts, f"assert {ASSERTED}", f"print({ASSERTED})", ["w_tiles"]),
        (layouts, f"assert {swz}", f"print({swz})", ["b_swz", "w_tiles"]),
        (layouts, f"print({ASSERTED})", f"assert {ASSERTED}", ["b_swz"]),
        (layouts, f"print({swz})", f"assert {swz}", []),
        # the wrapper no longer looks its second argument up: no lazy-import target
        (lazy, "fn = getattr(lib, attr_name)", "fn = getattr(lib, 'run')", ["w_tiles"]),
        (lazy, "fn = getattr(lib, 'run')", "fn = getattr(lib, attr_name)", []),
    ]
    for path, old, new, reported in steps:
        _edit(path, old, new)
        res = _run(tree, cache)
        assert _targets(res) == sorted([*POSITIVES, *(f"self.{t}" for t in reported)]), new
        assert findings_json(res) == findings_json(_run(tree, None))


def test_a_comment_in_the_asserting_file_reuses_the_result(tree, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    before = findings_json(_run(tree, cache))

    def boom(*a, **kw):
        raise AssertionError("the analysis ran")

    monkeypatch.setattr(engine, "_analyse", boom)
    _edit(tree / LAYOUTS, '"""Where the tree', '# a note\n"""Where the tree')
    _edit(tree / LAYOUTS, "# a note\n", "")
    _edit(tree / LAYOUTS, "must not copy", "must never copy")
    res = _run(tree, cache)
    assert res.files_parsed == 1
    assert findings_json(res) == before


@pytest.mark.integration
def test_vllm_033_b12x_mma_views(tmp_path):
    """vLLM 0.33.0 asserts that FlashInfer's convert_sf_to_mma_layout returns a view of its
    input (quantization/utils/flashinfer_fp4_moe.py:211); the B12x experts call it through the
    lazy-import wrapper `flashinfer_convert_sf_to_mma_layout` (utils/flashinfer.py:314). Their
    MMA views are no finding of their own."""
    from reload_lint.sources import SourceError, release_sources

    try:
        release_sources("vllm", "0.33.0")
    except SourceError as exc:  # pragma: no cover - offline
        pytest.skip(f"vLLM 0.33.0 sources unavailable: {exc}")
    out = tmp_path / "f.json"
    args = ["check", "--vllm", "0.33.0", "--no-cache", "--format", "json", "-o", str(out)]
    assert main([*args, "--exit-zero"]) == 0
    findings = json.loads(out.read_text())["findings"]
    b12x = "vllm/model_executor/layers/fused_moe/experts/flashinfer_b12x_moe.py"
    mma = {"self.w1_sf_mma", "self.w2_sf_mma"}
    assert not [f for f in findings if f["path"] == b12x and f["target"] in mma]
    step = (
        "`flashinfer.cute_dsl.utils.convert_sf_to_mma_layout` returns a view of its first "
        "argument (asserted at vllm/model_executor/layers/quantization/utils/"
        "flashinfer_fp4_moe.py:211)"
    )
    assert any(s["note"] == step for f in findings for s in f["trace"])
