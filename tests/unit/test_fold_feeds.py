"""A tensor the post-load keeps, that nothing reads at apply time, read again to build a rebuilt
object (analysis/feeds.py): its trace names the object, and fold.py reports its storage under
that object's finding. Run through the real engine on small projects of our own."""

from __future__ import annotations

from pathlib import Path

from reload_lint.analysis.feeds import FEEDS_NOTE
from reload_lint.fold import fold_shared_storage
from tests.unit._engine_util import check_files

# A factory with two branches: the finding of `self.runner` shows the first runner's
# allocations only, so the strides handed to the second never appear in its trace.
RUNNERS = {
    "pkg/__init__.py": "",
    "pkg/runner.py": """
        import torch


        class FlatRunner:
            def __init__(self, n: int):
                self.lanes = torch.zeros(n, device="cuda")

            def run(self, x, w):
                return torch.ops.mylib.flat(x, w, self.lanes)


        class BlockRunner:
            def __init__(self, row_strides, n: int):
                self.offsets = torch.full((n,), 4, device="cuda")
                self.b_rows = row_strides

            def run(self, x, w):
                return torch.ops.mylib.block(x, w, self.offsets, self.b_rows)


        def make_runner(kind: str, row_strides, n: int):
            if kind == "flat":
                return FlatRunner(n)
            return BlockRunner(row_strides=row_strides, n=n)


        def encode(w):
            return torch.ops.mylib.encode_blocks(w)
        """,
    "pkg/method.py": """
        import torch

        from pkg.runner import encode, make_runner


        class Int4Method:
            def __init__(self, kind: str):
                self.kind = kind

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                w1, self.row_strides = encode(layer.w1)
                w2, self.col_strides = encode(layer.w2)
                layer.w1.data.copy_(w1)
                layer.w2.data.copy_(w2)
                self.runner = make_runner(self.kind, self.row_strides, 8)
                self.col_total = self.col_strides.sum()

            def apply(self, layer, x):
                return self.runner.run(x, layer.w1)
        """,
}

# A scale kept on the layer, then read by a quant-config helper of the same class whose
# config the rebuilt runner holds.
SCALED = {
    "pkg/__init__.py": "",
    "pkg/kernel.py": """
        from dataclasses import dataclass

        import torch


        @dataclass
        class ActScales:
            act_gscale: torch.Tensor
            weight_scale: torch.Tensor


        class Runner:
            def __init__(self, scales: ActScales, n: int):
                self.scales = scales
                self.lanes = torch.zeros(n, device="cuda")

            def run(self, x, w):
                return torch.ops.mylib.mm(x, w, self.scales.act_gscale, self.lanes)
        """,
    "pkg/method.py": """
        import torch

        from pkg.kernel import ActScales, Runner


        class ScaledMethod:
            def create_weights(self, layer: torch.nn.Module, n: int) -> None:
                p = torch.nn.Parameter(torch.ones(n), requires_grad=False)
                layer.register_parameter("in_gscale", p)
                q = torch.nn.Parameter(torch.ones(n), requires_grad=False)
                layer.register_parameter("w_scale", q)

            def scales_for(self, layer) -> ActScales:
                return ActScales(act_gscale=layer.in_scale, weight_scale=layer.w_scale * 2.0)

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                layer.in_scale = 1.0 / layer.in_gscale
                self.scales = self.scales_for(layer)
                self.runner = Runner(self.scales, n=8)

            def apply(self, layer, x):
                return self.runner.run(x, layer.weight)
        """,
}


def _by_target(findings):
    return {f.target: f for f in findings}


def test_strides_handed_to_a_factory_fold_into_the_runner(tmp_path: Path):
    res = check_files(tmp_path, RUNNERS)
    got = _by_target(res.findings)
    rows, cols, runner = got["self.row_strides"], got["self.col_strides"], got["self.runner"]
    assert rows.reader is None
    assert [s.note for s in rows.trace if s.note.startswith(FEEDS_NOTE)] == [
        f"{FEEDS_NOTE} `self.runner`"
    ]
    # read again, but by a statement that builds nothing: no step, not folded
    assert not any(s.note.startswith(FEEDS_NOTE) for s in cols.trace)
    out = fold_shared_storage(list(res.findings))
    assert rows not in out and cols in out
    assert [a["target"] for a in runner.also] == ["self.row_strides"]
    assert runner.also[0]["fingerprint"] == rows.fingerprint


def test_a_scale_a_config_helper_reads_folds_through_the_config(tmp_path: Path):
    res = check_files(tmp_path, SCALED)
    got = _by_target(res.findings)
    scale, runner = got["layer.in_scale"], got["self.runner"]
    assert f"{FEEDS_NOTE} `self.scales`" in [s.note for s in scale.trace]
    out = fold_shared_storage(list(res.findings))
    # the config is held by the runner built next to it; the scale follows it there
    assert [f.target for f in out] == ["self.runner"]
    assert sorted(a["target"] for a in runner.also) == ["layer.in_scale", "self.scales"]


def test_a_scale_the_forward_also_reads_is_not_folded_this_way(tmp_path: Path):
    files = dict(SCALED)
    files["pkg/method.py"] = SCALED["pkg/method.py"].replace(
        "return self.runner.run(x, layer.weight)",
        "return self.runner.run(x * layer.in_scale, layer.weight)",
    )
    res = check_files(tmp_path, files)
    scale = _by_target(res.findings)["layer.in_scale"]
    assert scale.reader is not None
    assert not any(s.note.startswith(FEEDS_NOTE) for s in scale.trace)
    assert scale in fold_shared_storage(list(res.findings))


def test_an_object_built_into_a_local_then_stored_is_linked_like_one_statement(tmp_path: Path):
    # `runner = make_runner(...)` then `self.runner = runner`: the strides read while the
    # local was computed feed the object stored from it
    files = dict(RUNNERS)
    files["pkg/method.py"] = RUNNERS["pkg/method.py"].replace(
        "self.runner = make_runner(self.kind, self.row_strides, 8)",
        "runner = make_runner(self.kind, self.row_strides, 8)\n                self.runner = runner",
    )
    res = check_files(tmp_path, files)
    got = _by_target(res.findings)
    rows, cols, runner = got["self.row_strides"], got["self.col_strides"], got["self.runner"]
    assert f"{FEEDS_NOTE} `self.runner`" in [s.note for s in rows.trace]
    assert not any(s.note.startswith(FEEDS_NOTE) for s in cols.trace)
    out = fold_shared_storage(list(res.findings))
    assert rows not in out and cols in out
    assert [a["target"] for a in runner.also] == ["self.row_strides"]


def test_a_local_rebound_to_something_else_forgets_what_it_was_built_from(tmp_path: Path):
    # the local is rebound from a literal before the object is built from it: the strides
    # read for its first value feed nothing
    files = dict(RUNNERS)
    files["pkg/method.py"] = RUNNERS["pkg/method.py"].replace(
        "self.runner = make_runner(self.kind, self.row_strides, 8)",
        "n = self.row_strides.numel()\n"
        "                n = 8\n"
        "                self.runner = make_runner(self.kind, None, n)",
    )
    res = check_files(tmp_path, files)
    rows = _by_target(res.findings)["self.row_strides"]
    assert not any(s.note.startswith(FEEDS_NOTE) for s in rows.trace)
