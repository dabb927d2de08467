"""Caches keyed on a weight's storage address (analysis/addrcache.py; issue 26).

Written as kernel authors write them: a module-level dict and an object dict, keyed by
`.data_ptr()` / `id()` directly or through a local, filled with a preparation of the same
weight. And the look-alikes that are not weight caches: keyed on an activation, on metadata,
a value not computed from the keyed tensor, a post-load that re-runs and overwrites.
"""

from __future__ import annotations

import textwrap

from reload_lint.config import Config
from reload_lint.engine import run_check

CODE = """
import torch

_PREPARED = {}
_BY_ACT = {}


class DataPtrKernel:
    def process_weights_after_loading(self, layer):
        pass

    def apply(self, layer, x):
        key = layer.weight.data_ptr()
        if key not in _PREPARED:
            _PREPARED[key] = layer.weight.t().contiguous()  # report
        return x @ _PREPARED[key]


class IdKernel:
    def __init__(self):
        self._cache = {}

    def forward(self, layer, x):
        w = self._cache.get(id(layer.w13))
        if w is None:
            w = layer.w13.float()
            self._cache[id(layer.w13)] = w  # report
        return x @ w


class TupleKey:
    def apply(self, layer, x):
        k = (layer.scale.untyped_storage().data_ptr(), x.device)
        _PREPARED[k] = torch.ops.quant.prep(layer.scale)  # report
        return x


class NotWeightCaches:
    def __init__(self):
        self._tables = {}

    def apply(self, layer, x, meta):
        _BY_ACT[x.data_ptr()] = x.float()  # activation: a local, not an attribute chain
        self._tables[id(meta)] = torch.empty(4)  # metadata object, value not derived from it
        _PREPARED[layer.weight.data_ptr()] = torch.zeros(8)  # not computed from the weight
        return x

    def process_weights_after_loading(self, layer):
        # a post-load re-runs on an update and overwrites its own entry
        _PREPARED[layer.weight.data_ptr()] = layer.weight.t()
"""


def test_address_keyed_weight_caches(tmp_path):
    pkg = tmp_path / "kpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "k.py").write_text(textwrap.dedent(CODE))
    got = run_check([pkg], Config(), base_dir=tmp_path, use_cache=False).findings
    lines = (pkg / "k.py").read_text().splitlines()
    want = {i for i, text in enumerate(lines, 1) if text.endswith("# report")}
    assert {f.line for f in got} == want
    assert {f.rule for f in got} == {"RL201"}
    f = next(f for f in got if "id(" in f.message)
    assert "layer.w13" in f.message and f.reader and "IdKernel.forward" in f.reader
