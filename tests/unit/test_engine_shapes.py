"""Shape arithmetic for `.data =` swaps (analysis/shapes.py, index/lower_sizes.py): a swap to
new storage whose shape provably equals the parameter's is not shape-changing under the
`vllm-load-weights` contract (the next `load_weights` copies the checkpoint into it), however
it got there:
padded then sliced back, reshaped to the parameter's own shape, then made contiguous or
scaled. Anything the arithmetic cannot prove stays RL106: a pad never sliced back, a slice
by another amount or on another dimension, an amount that may be zero or is rebound, a
reshape of the result in place, the shape of another parameter."""

from __future__ import annotations

import ast
import json

import pytest
from _engine_util import check_files

from reload_lint.cli import main
from reload_lint.index import lower_util
from reload_lint.index.extract import extract_module
from reload_lint.index.lower_sizes import function_sizes

SAFE = """
import torch
import torch.nn.functional as F


class SpreadWeights:
    def create_weights(self, layer: torch.nn.Module) -> None:
        layer.w_in = torch.nn.Parameter(torch.empty(8, 8))
        layer.w_out = torch.nn.Parameter(torch.empty(8, 8))
        layer.w_gate = torch.nn.Parameter(torch.empty(8, 8))
        layer.w_up = torch.nn.Parameter(torch.empty(8, 8))
        layer.w_down = torch.nn.Parameter(torch.empty(8, 8))
        layer.w_skip = torch.nn.Parameter(torch.empty(8, 8))

    # pad for memory spacing, then slice back: a strided view of the same shape
    def _spread(self, w):
        if w.stride(-1) == 1:
            gap = 512 // w.element_size()
            w = F.pad(w, (0, gap), "constant", 0)[..., :-gap]
        return w

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.w_in.data = self._spread(layer.w_in.data)
        layer.w_out.data = F.pad(layer.w_out.data, (0, 64))[..., :-64]
        padded = F.pad(layer.w_gate.data, (0, 32, 0, 16))
        layer.w_gate.data = padded[..., :-16, :-32].contiguous().mul(2.0)
        layer.w_up.data = F.pad(layer.w_up.data, (8, 8))[..., 8:-8]
        layer.w_down.data = layer.w_down.data.t().reshape(layer.w_down.shape)
        layer.w_skip.data = layer.w_skip.data.t().reshape(layer.w_skip.size()).float()

    def apply(self, layer, x):
        return x @ layer.w_in @ layer.w_out @ layer.w_gate @ layer.w_up @ layer.w_down
"""

UNSAFE = """
import torch
import torch.nn.functional as F


def widen(x, k):
    extra = k * 2
    return F.pad(x, (0, extra))


class ReshapingWeights:
    def create_weights(self, layer: torch.nn.Module) -> None:
        layer.a = torch.nn.Parameter(torch.empty(8, 8))
        layer.b = torch.nn.Parameter(torch.empty(8, 8))
        layer.c = torch.nn.Parameter(torch.empty(8, 8))
        layer.d = torch.nn.Parameter(torch.empty(8, 8))
        layer.e = torch.nn.Parameter(torch.empty(8, 8))
        layer.f = torch.nn.Parameter(torch.empty(8, 8))
        layer.g = torch.nn.Parameter(torch.empty(8, 8))
        layer.h = torch.nn.Parameter(torch.empty(8, 8))
        layer.i = torch.nn.Parameter(torch.empty(8, 8))
        layer.j = torch.nn.Parameter(torch.empty(8, 8))
        layer.scale = torch.nn.Parameter(torch.empty(8))
        layer.k = torch.nn.Parameter(torch.empty(8, 8))
        layer.l = torch.nn.Parameter(torch.empty(8, 8))
        layer.o = torch.nn.Parameter(torch.empty(8, 8))

    def process_weights_after_loading(self, layer: torch.nn.Module, flag: bool) -> None:
        layer.a.data = F.pad(layer.a.data, (0, 64))
        n = 256 // layer.b.element_size()
        m = 128 // layer.b.element_size()
        layer.b.data = F.pad(layer.b.data, (0, n))[..., :-m]
        layer.c.data = F.pad(layer.c.data, (0, n))[:-n]
        rebound = 8
        if flag:
            rebound = 16
        layer.d.data = F.pad(layer.d.data, (0, rebound))[..., :-rebound]
        maybe_zero = layer.e.shape[-1] % 4
        layer.e.data = F.pad(layer.e.data, (0, maybe_zero))[..., :-maybe_zero]
        grown = F.pad(layer.f.data, (0, n))[..., :-n]
        grown.unsqueeze_(0)
        layer.f.data = grown
        layer.g.data = F.pad(layer.h.data, (0, n))[..., :-n]
        extra = 4
        layer.i.data = widen(layer.i.data, 2)[..., :-extra]
        layer.j.data = F.pad(layer.j.data, (0, n))[..., :-n].mul(layer.scale)
        layer.k.data = F.pad(layer.k.data, (0, 8))[..., :-4]
        layer.l.data = layer.l.data.t().reshape(layer.h.shape)
        for step in (1, 2):
            layer.o.data = F.pad(layer.o.data, (0, step))[..., :-step]

    def apply(self, layer, x):
        y = x @ layer.a @ layer.b @ layer.c @ layer.d @ layer.e @ layer.f @ layer.g
        return y @ layer.i @ layer.j @ layer.k @ layer.l @ layer.o
"""


def _rl106(tmp_path, src: str, contract: str = "vllm-load-weights") -> set[str]:
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/m.py": src}, contract=contract)
    return {f.target for f in res.findings if f.rule == "RL106"}


def test_same_shape_swaps_are_not_shape_changing(tmp_path):
    assert _rl106(tmp_path, SAFE) == set()


def test_swaps_the_arithmetic_cannot_prove_stay_reported(tmp_path):
    found = _rl106(tmp_path, UNSAFE)
    want = {f"layer.{x}.data" for x in "abcdefgijklo"}
    assert found == want


def test_explain_names_the_shape_arithmetic(tmp_path, monkeypatch, capsys):
    check_files(tmp_path, {"pkg/__init__.py": "", "pkg/m.py": SAFE})
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    written = (tmp_path / "pkg/m.py").read_text().splitlines()
    line = next(i for i, s in enumerate(written, 1) if "layer.w_out.data =" in s)
    capsys.readouterr()
    assert main(["explain", "--no-cache", "--format", "json", f"pkg/m.py:{line}"]) == 0
    (answer,) = json.loads(capsys.readouterr().out)["explain"]
    facts = {d["fact"] for d in answer["decisions"] if d["target"] == "layer.w_out.data"}
    assert facts == {"same-shape"}


def test_the_inplace_contract_still_reports_every_swap(tmp_path):
    # nothing is copied back there: a same-shape swap moves the storage all the same
    found = _rl106(tmp_path, SAFE, contract="inplace-only")
    assert "layer.w_out.data" in found and "layer.w_in.data" in found


def _sizes(src: str) -> tuple:
    fn = ast.parse(src).body[0]
    return function_sizes(fn, [a.arg for a in fn.args.args], {"n", "a", "b", "c"})


@pytest.mark.parametrize(
    ("src", "want"),
    [
        ("def f(w):\n    n = 256 // w.element_size()\n", (("n", 16),)),
        (
            "def f(w):\n    a = 4\n    b = a * 3 + 1\n    c = b - 20\n",
            (("a", 4), ("b", 13), ("c", -7)),
        ),
        ("def f(w):\n    n = w.dtype.itemsize\n", (("n", 1),)),
        # rebound, a parameter, a loop, a global, a nonlocal rebinding, no bound
        ("def f(w):\n    n = 4\n    n = 8\n", ()),
        ("def f(n):\n    n = 4\n", ()),
        ("def f(w):\n    for i in w:\n        n = 4\n", ()),
        ("def f(w):\n    global n\n    n = 4\n", ()),
        ("def f(w):\n    n = 4\n    def g():\n        nonlocal n\n        n = 5\n", ()),
        ("def f(w):\n    n = w.shape[0]\n", ()),
        ("def f(w):\n    n = 4 // w.shape[0]\n", ()),
    ],
)
def test_fixed_integer_locals(src, want):
    assert _sizes(src) == want


def test_slices_keep_their_elements_with_the_extensions_on(monkeypatch):
    src = "def f(x, n):\n    return x[..., 1:-n, ::2], x[:, None, 0], x[idx]\n"
    rec = extract_module(src, "m", False)
    ret = rec["functions"]["f"]["body"][0][4]
    first, second, third = ret[2]
    assert first[2] == ("slice", (("..",), ("sl", "1", "-n", ""), ("sl", "", "", "2")))
    assert second[2] == ("slice", (("sl", "", "", ""), ("none",), ("i",)))
    assert third[2] == ("n", "idx")
    monkeypatch.setattr(lower_util, "EXTENSIONS", False)
    rec = extract_module(src, "m", False)
    assert rec["functions"]["f"]["body"][0][4][2][0][2] == ("slice",)
    assert "sizes" not in rec["functions"]["f"]
