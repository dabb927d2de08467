"""Positions in the records (index/extract.py, from CPython's `ast`) against the libcst
lowering they replaced: the line/column/end-line of every statement, function and class, the
line of every call and binary operator, and each attribute read's first line.

The expected tables were produced by the libcst extractor of commit 876de75 (libcst's own
codegen, the position pass `index/positions.py` that the port removed) on the same sources;
the ast extractor must reproduce them exactly. The conventions they pin: a decorated def or
class starts at `def` / `class`; columns are 1-based, in characters (not UTF-8 bytes, as ast
counts them); a simple statement ends on its last line; a compound statement ends on the line
after its last line, that last line counting the comment and blank lines after the body that
are indented at least as deep as its last block. On real vLLM files, when libcst is installed,
the whole record is compared with that commit's extractor (scripts/diff_extract.py).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from reload_lint.index.extract import extract_module
from reload_lint.sources import cache_root

REPO = Path(__file__).resolve().parents[2]

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

SNIPPET_POSITIONS = [
    ("function", "K.m", 18, 5, 39),
    ("reads", "K.m", (("n", 30), ("p", 22), ("q", 22), ("r", 24), ("v", 38))),
    ("assign", 19, 9, 21),
    ("call", 19),
    ("for", 21, 9, 25),
    ("call", 21),
    ("expr", 22, 13, 22),
    ("call", 22),
    ("del", 24, 13, 24),
    ("ret", 30, 13, 30),
    ("call", 30),
    ("expr", 37, 17, 37),
    ("ret", 38, 9, 38),
    ("function", "g", 41, 1, 49),
    ("reads", "g", ()),
    ("assign", 42, 5, 42),
    ("aug", 43, 5, 43),
    ("ret", 44, 5, 48),
    ("call", 45),
    ("class", "K", 15, 39),
    ("call", 4),
    ("binop", 8),
]

# trailing comments at several depths, elif, one-line suites, tabs, non-ASCII columns,
# try/except*, match, a file that ends without a newline
EDGES = """\
import os


def after_comments():
    if a:
        b()
    elif c:
        d(e.f)
        # indented as the elif's block: part of the if
    # indented as the function's block: part of the def
# at column 0: the next statement's
x = g(1,
      h.i)


class Suite: pass


@decorated
async def one_line(self): return self.x
def tabs():
\tif t:
\t\ty = k.m(1)
\t# c
\treturn y
def wide(ü="é"):
    x = "é"; y = ü.ß(2); z = f"{ü}é{w.v(3)}"
    if ü: return
    return x + y


def nested():
    try:
        with open(p) as fh:
            for i in range(3):
                while i:
                    i -= (1 +
                          2)
    except* ValueError:
        pass
    finally:
        match i:
            case 1:
                del q
            case _:
                r = [s.t for s in u]
            # a case's trailing comment
        # the finally's
  # shallower than any block: the next line's


def tail():
    return 1
    # the last lines of the file, without a newline
    #"""

EDGE_POSITIONS = [
    ("function", "after_comments", 4, 1, 11),
    ("reads", "after_comments", (("f", 8),)),
    ("flagon", 5, 5, 10),
    ("expr", 6, 9, 6),
    ("call", 6),
    ("flagoff", 5, 5, 10),
    ("flagon", 7, 5, 10),
    ("expr", 8, 9, 8),
    ("call", 8),
    ("flagoff", 7, 5, 10),
    ("function", "one_line", 20, 1, 21),
    ("reads", "one_line", (("x", 20),)),
    ("function", "tabs", 21, 1, 26),
    ("reads", "tabs", (("m", 23),)),
    ("flagon", 22, 2, 24),
    ("assign", 23, 3, 23),
    ("call", 23),
    ("flagoff", 22, 2, 24),
    ("ret", 25, 2, 25),
    ("function", "wide", 26, 1, 30),
    ("reads", "wide", (("v", 27), ("ß", 27))),
    ("assign", 27, 5, 27),
    ("assign", 27, 14, 27),
    ("call", 27),
    ("assign", 27, 26, 27),
    ("call", 27),
    ("flagon", 28, 5, 29),
    ("flagoff", 28, 5, 29),
    ("ret", 29, 5, 29),
    ("binop", 29),
    ("function", "nested", 32, 1, 49),
    ("reads", "nested", (("t", 46),)),
    ("assign", 34, 9, 39),
    ("call", 34),
    ("for", 35, 13, 39),
    ("call", 35),
    ("aug", 37, 21, 38),
    ("binop", 37),
    ("del", 44, 17, 44),
    ("assign", 46, 17, 46),
    ("function", "tail", 52, 1, 56),
    ("reads", "tail", ()),
    ("ret", 53, 5, 53),
    ("class", "Suite", 16, 17),
    ("call", 12),
]


def _exprs(e, out: list) -> None:
    if isinstance(e, tuple):
        if len(e) == 6 and e[0] == "c" and isinstance(e[4], int):
            out.append(("call", e[4]))
        if len(e) == 5 and e[0] == "b" and isinstance(e[4], int) and isinstance(e[1], str):
            out.append(("binop", e[4]))
        for x in e:
            _exprs(x, out)


def positions(rec: dict) -> list:
    """Every position a record holds, in record order."""
    out: list = []
    for qn, f in rec["functions"].items():
        out.append(("function", qn, f["line"], f["col"], f["end_line"]))
        out.append(("reads", qn, f["reads"]))
        for s in f["body"]:
            out.append((s[0], s[1], s[2], s[3]))
            _exprs(s[4:], out)
    for qn, c in rec["classes"].items():
        out.append(("class", qn, c["line"], c["end_line"]))
        _exprs(c["bases"], out)
    for e in rec["globals"].values():
        _exprs(e, out)
    return out


def test_positions_match_the_libcst_lowering_on_snippet():
    assert positions(extract_module(SNIPPET, "m", False)) == SNIPPET_POSITIONS


def test_positions_match_the_libcst_lowering_on_edge_cases():
    assert positions(extract_module(EDGES, "m", False)) == EDGE_POSITIONS


def test_crlf_and_cr_sources_give_the_same_positions():
    rec = extract_module(SNIPPET, "m", False)
    for nl in ("\r\n", "\r"):
        assert extract_module(SNIPPET.replace("\n", nl), "m", False) == rec


@pytest.mark.integration
def test_records_match_the_libcst_extractor_on_vllm_files(tmp_path):
    pytest.importorskip("libcst", reason="the old extractor needs libcst")
    root = cache_root() / "sources" / "vllm-0.25.1" / "vllm"
    if not root.is_dir():
        pytest.skip("vLLM 0.25.1 sources not cached (python scripts/bench.py fetches them)")
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        diff_extract = importlib.import_module("diff_extract")
    finally:
        sys.path.remove(str(REPO / "scripts"))
    try:
        diff_extract.install_old(diff_extract.DEFAULT_OLD, tmp_path)
    except (subprocess.CalledProcessError, OSError):
        pytest.skip(f"commit {diff_extract.DEFAULT_OLD} is not in this checkout")
    sys.path.insert(0, str(tmp_path))
    try:
        rels = [
            "model_executor/layers/quantization/fp8.py",
            "model_executor/layers/linear.py",
            "model_executor/models/llama.py",
            "engine/arg_utils.py",
        ]
        checked = 0
        for rel in rels:
            path = root / rel
            if not path.is_file():
                continue
            module = "vllm." + rel[: -len(".py")].replace("/", ".")
            _path, verdict, detail = diff_extract.compare_one((str(path), module, False))
            assert verdict == "same", detail
            checked += len(positions(extract_module(path.read_text("utf-8"), module, False)))
        assert checked > 1000
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith(diff_extract.OLD_PKG)]:
            del sys.modules[name]
