"""index/positions.py against libcst's PositionProvider and against the generator-based pass
it replaced, for every node type the extractor looks up, on a synthetic module and (when the
release sources are cached) on real vLLM files."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from reload_lint.index.positions import RECORDED, _LineState, compute_positions
from reload_lint.sources import cache_root

SNIPPET = '''\
"""doc"""
import os, sys; from a.b import (c,
    d as e)
x = 1; y = f(
    2,  # comment
    g.h[3],
)
s = """multi
line""" + \\
    "tail"


@deco(1)
@other.deco
class K(Base, metaclass=M):
    z: int = 3

    async def m(self, w=(1, 2)):
        async with a() as b, c:
            pass
        for i in range(3):
            self.p.q(i)
        else:
            del self.r
        while (yield):
            break
        try:
            raise E from x
        except E as exc:
            return getattr(self, "n")
        finally:
            assert t, "m"
        match w:
            case (1, *rest) if rest:
                global gg
            case {"k": v}:
                lambda: (yield)
        return [k.v for k in w if k]


def g(*a, **k):
    nonlocal_ = 1
    x += 1
    return (
        h(
            a
        )
    )
'''


class _ReferenceState(_LineState):
    """The pass as it was before the lean rewrite: a generator per node, every node (the token
    counting is shared; libcst's PositionProvider checks it independently)."""

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        start = (self.line, self.column)
        yield
        if start_node is not None:
            got = self.positions.get(id(start_node))
            if got is not None:
                start = got[0]
        self.positions[id(node)] = (start, (self.line, self.column))


def _check(source: str) -> int:
    wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
    module = wrapper.module
    libcst_pos = wrapper.resolve(PositionProvider)
    ours = compute_positions(module)
    ref = _ReferenceState(
        default_indent=module.default_indent, default_newline=module.default_newline
    )
    module._codegen(ref)
    checked = 0
    for node, rng in libcst_pos.items():
        if type(node) not in RECORDED:
            assert id(node) not in ours
            continue
        got = ours[id(node)]
        assert got == ref.positions[id(node)], type(node).__name__
        assert got[0] == (rng.start.line, rng.start.column), type(node).__name__
        end = (rng.end.line, rng.end.column)
        if isinstance(node, cst.BaseCompoundStatement):
            # ours ends past the newline that closes the statement's last line
            assert got[1] == (end[0] + 1, 0), type(node).__name__
        else:
            assert got[1] == end, type(node).__name__
        checked += 1
    assert len(ours) == checked
    return checked


def test_recorded_types_cover_what_the_extractor_reads():
    for tp in (cst.Call, cst.Attribute, cst.FunctionDef, cst.ClassDef, cst.For, cst.With):
        assert tp in RECORDED
    for tp in (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.Expr, cst.Return, cst.Del):
        assert tp in RECORDED
    assert cst.Name not in RECORDED


def test_positions_match_libcst_on_snippet():
    assert _check(SNIPPET) > 40


@pytest.mark.integration
def test_positions_match_libcst_on_vllm_files():
    root = cache_root() / "sources" / "vllm-0.25.1" / "vllm"
    if not root.is_dir():
        pytest.skip("vLLM 0.25.1 sources not cached (python scripts/bench.py fetches them)")
    rels = [
        "model_executor/layers/quantization/fp8.py",
        "model_executor/layers/linear.py",
        "model_executor/models/llama.py",
        "engine/arg_utils.py",
    ]
    checked = 0
    for rel in rels:
        path = Path(root, rel)
        if path.is_file():
            checked += _check(path.read_text(encoding="utf-8"))
    assert checked > 1000
