"""Code shapes of out-of-tree quantization plugins (issue 26, measured on two PyPI plugins in
docs/reviews/plugins-round4.md), written here as a plugin author would write them:

- a quant method class defined inside a builder function (the base class imported there, so
  the package imports without vLLM) is a post-load root like a module-level one;
- a post-load hook of an object the layer's post-load builds and calls (a per-group method) is
  post-load code: where the post-load analysis reports the store as moving, no second
  "first-forward lazy init" finding names the wrong mechanism for it;
- `b"\\0" + name.encode()` in post-load code is a bytes value, not a string the analysis
  joins: the statement is analysed, not skipped with an RL906 row;
- many calls cut at the call-depth limit in one file are one RL906 row for that file."""

from __future__ import annotations

from _engine_util import check_files

from reload_lint.engine import collapse_depth_rows
from reload_lint.findings import FileError

FACTORY = """
import torch


def build_method(mode):
    from vllm.model_executor.layers.linear import LinearMethodBase

    class PackedMethod(LinearMethodBase):
        def process_weights_after_loading(self, layer):
            layer.packed_lut = torch.empty(16, device=layer.weight.device)
            layer.mode = mode

        def apply(self, layer, x, bias=None):
            return x @ layer.packed_lut

    return PackedMethod()
"""

FACTORY_SAFE = """
import torch


def build_method(mode):
    from vllm.model_executor.layers.linear import LinearMethodBase

    class PackedMethod(LinearMethodBase):
        def process_weights_after_loading(self, layer):
            layer.lut.copy_(torch.ones(16))
            layer.rows = int(layer.weight.shape[0])

        def apply(self, layer, x, bias=None):
            return x @ layer.lut

    return PackedMethod()
"""


def test_quant_method_defined_in_a_builder_function_is_a_root(tmp_path):
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/route.py": FACTORY})
    got = {(f.rule, f.target) for f in res.findings}
    assert ("RL101", "layer.packed_lut") in got
    (fd,) = [f for f in res.findings if f.target == "layer.packed_lut"]
    assert fd.symbol == "build_method.<locals>.PackedMethod.process_weights_after_loading"


def test_builder_class_that_copies_in_place_is_not_reported(tmp_path):
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/route.py": FACTORY_SAFE})
    assert [f for f in res.findings if not f.rule.startswith("RL9")] == []


GROUPS = """
import torch
from vllm.model_executor.layers.fused_moe import FusedMoEMethodBase


class GroupMethod(FusedMoEMethodBase):
    def __init__(self, scheme):
        self.scheme = scheme
        self.fp4 = scheme == "b"

    def process_weights_after_loading(self, layer):
        if layer.fast is not None and not self.fp4:
            layer.lut_f32 = layer.lut.float().contiguous()

    def apply(self, layer, x):
        return x @ layer.lut_f32


class MixedMethod(FusedMoEMethodBase):
    def process_weights_after_loading(self, layer):
        for scheme in ("a", "b"):
            GroupMethod(scheme).process_weights_after_loading(layer)

    def apply(self, layer, x):
        return x @ layer.lut_f32
"""


def test_post_load_of_an_object_the_post_load_builds_is_not_first_forward(tmp_path):
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/moe.py": GROUPS})
    rules = {f.rule for f in res.findings if f.target == "layer.lut_f32"}
    assert "RL101" in rules  # the store itself: a new tensor every post-load
    assert "RL108" not in rules


LAZY = """
import torch
from vllm.model_executor.layers.linear import LinearMethodBase


class Scratch:
    def __init__(self):
        self.buf = None

    def get(self, x):
        if self.buf is None:
            self.buf = torch.empty(x.shape[-1], device=x.device)
        return self.buf


class Method(LinearMethodBase):
    def process_weights_after_loading(self, layer):
        layer.scratch = Scratch()

    def apply(self, layer, x, bias=None):
        return x @ layer.scratch.get(x)
"""


def test_guarded_allocation_only_the_forward_calls_is_still_first_forward(tmp_path):
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/lazy.py": LAZY})
    assert ("RL108", "self.buf") in {(f.rule, f.target) for f in res.findings}


BYTES = """
import hashlib
import torch
from vllm.model_executor.layers.linear import LinearMethodBase


class Method(LinearMethodBase):
    def process_weights_after_loading(self, layer):
        digest = hashlib.sha256()
        for name in ("w", "s"):
            digest.update(b"\\0" + name.encode() + b"\\0")
        tag = b"GG" + b"UF"
        layer.lut = torch.empty(4, device=layer.weight.device)
        layer.tag = tag

    def apply(self, layer, x, bias=None):
        return x @ layer.lut
"""


def test_bytes_concatenation_in_post_load_is_analysed(tmp_path):
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/m.py": BYTES})
    assert [e for e in res.errors if e.rule == "RL906"] == []
    assert ("RL101", "layer.lut") in {(f.rule, f.target) for f in res.findings}


def _depth(path, line, qn):
    return FileError(
        "RL906",
        path,
        f"call depth limit (24) reached at {qn}; its body was not analysed "
        "(its result is assumed to be a new tensor when it takes tensors)",
        line,
    )


def test_depth_limit_rows_collapse_to_one_per_file():
    rows = [
        _depth("pkg/a.py", 30, "Reader.uint"),
        _depth("pkg/a.py", 10, "Reader.blob"),
        _depth("pkg/a.py", 30, "Reader.sint"),
        _depth("pkg/b.py", 5, "decode"),
        FileError("RL906", "pkg/a.py", "statement at line 3 of f skipped: TypeError", 3),
    ]
    out = collapse_depth_rows(rows)
    a = [e for e in out if e.path == "pkg/a.py" and "depth" in e.message]
    assert len(a) == 1 and a[0].line == 10
    assert "3 calls in this file" in a[0].message
    assert "Reader.blob, Reader.sint, Reader.uint" in a[0].message
    b = [e for e in out if e.path == "pkg/b.py"]
    assert b == [rows[3]]  # a single row is kept as it was
    assert any("skipped: TypeError" in e.message for e in out)


SHARED = """
import torch
from vllm.model_executor.layers.linear import LinearMethodBase


class Pool:
    def __init__(self, n):
        self.buf = torch.zeros(n, device="cuda")


class Aliased(LinearMethodBase):
    def __init__(self):
        self.pool = None

    def process_weights_after_loading(self, layer):
        if self.pool is None:
            self.pool = Pool(128)
        self.kept = self.pool

    def apply(self, layer, x, bias=None):
        return x + self.kept.buf


class ViaLocal(LinearMethodBase):
    def process_weights_after_loading(self, layer):
        pool = getattr(self, "_pool", None)
        if pool is None:
            pool = Pool(128)
            self._pool = pool
        self.pool_d = pool

    def apply(self, layer, x, bias=None):
        return x + self.pool_d.buf


_POOLS = {}


class Registry(LinearMethodBase):
    def process_weights_after_loading(self, layer):
        pool = _POOLS.get("cuda")
        if pool is None:
            pool = Pool(64)
            _POOLS["cuda"] = pool
        self.pool_r = pool

    def apply(self, layer, x, bias=None):
        return x + self.pool_r.buf


class Always(LinearMethodBase):
    def process_weights_after_loading(self, layer):
        pool = getattr(self, "_pool", None)
        pool = Pool(128)
        self._pool = pool
        self.pool_e = pool

    def apply(self, layer, x, bias=None):
        return x + self.pool_e.buf
"""


def test_a_shared_object_made_once_then_aliased_is_not_rebuilt(tmp_path):
    """`if self.pool is None: self.pool = Pool()` then `self.kept = self.pool`, and the same
    through a local (`pool = getattr(self, "_pool", None)`; `if pool is None:` ... `self._pool =
    pool`; a module registry's `pool = _POOLS.get(k)` ... `_POOLS[k] = pool`): the object is
    made on the first load only; a reload keeps it. A Pool made on every post-load is still
    reported."""
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/shared.py": SHARED})
    got = {f.target for f in res.findings}
    assert "self.kept" not in got and "self.pool" not in got
    assert "self.pool_d" not in got and "self._pool" not in {
        f.target for f in res.findings if f.symbol.startswith("ViaLocal")
    }
    assert "self.pool_r" not in got  # a module registry's get-or-create
    assert {"self.pool_e"} <= got
