"""Triage fields of a finding (schema 1.1): reader, guard, masked, backends, fix; the text
output's `fix:` / `see:` lines; messages that do not repeat themselves or the rule page."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from _engine_util import check_files

from reload_lint.analysis import triage
from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.findings import Finding, compute_fingerprints
from reload_lint.render.json_ import build_report
from reload_lint.render.text import render_text

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture(scope="module")
def minivllm():
    base = FIXTURES / "minivllm"
    return run_check([base], Config(), base_dir=base, use_cache=False).findings


def test_every_finding_carries_a_fix_and_the_text_ends_with_fix_and_see(minivllm):
    assert minivllm
    text = render_text(minivllm, [])
    blocks = re.split(r"\n(?=\S)", text.strip())
    assert len(blocks) == len(minivllm)
    for f, block in zip(minivllm, blocks, strict=True):
        lines = block.splitlines()
        assert f.fix and lines[-2] == f"    fix: {f.fix}", block
        assert lines[-1] == f"    see: reload-lint rule {f.rule}", block


def test_messages_drop_the_repeated_sentence_and_the_headline_parenthetical(minivllm):
    for f in minivllm:
        assert "copies back only" not in f.message
        assert "nothing is copied back" not in f.message
        # the old shape: "<headline> (<why restating it>); <tail>"
        assert not re.search(r"\) ?;", f.message), f.message
        assert len(f.message) < 200 or f.rule == "RL202", f.message


def test_fix_is_chosen_per_store_not_per_rule(minivllm):
    by_rule: dict[str, set[str]] = {}
    for f in minivllm:
        by_rule.setdefault(f.rule, set()).add(f.fix)
        assert f.fix.split(":", 1)[0] in (
            triage.REGISTER,
            triage.COPY,
            triage.LATE,
            triage.REUSE,
            triage.ALLOC_ONCE,
        ), f.fix
    # several RL101 / RL103 stores, each fix names its own attribute
    assert len(by_rule["RL101"]) > 1
    assert len(by_rule["RL103"]) > 1


@pytest.mark.parametrize(
    ("rule", "target", "value", "inplace", "lead", "needle"),
    [
        ("RL101", "layer.perm", triage.AV("fresh"), False, triage.REGISTER, '"perm"'),
        ("RL101", "layer.perm", triage.AV("fresh"), True, triage.COPY, "`layer.perm.copy_"),
        ("RL102", "self.workspace", triage.AV("fresh"), False, triage.ALLOC_ONCE, ".copy_"),
        (
            "RL102",
            "self.w_s",
            triage.AV("fresh", src="layer.weight_scale"),
            False,
            triage.LATE,
            "`layer.w_s`",
        ),
        ("RL105", "self.kernel", triage.AV("obj", cls="m:Experts"), False, triage.REUSE, "Experts"),
        ("RL106", "layer.w.data", triage.AV("fresh"), True, triage.COPY, "`layer.w.data.copy_"),
        (
            "RL107",
            "self.perm",
            triage.AV("view", src="layer.perm"),
            False,
            triage.LATE,
            "`layer.perm`",
        ),
    ],
)
def test_fix_depends_on_store_kind_target_and_contract(rule, target, value, inplace, lead, needle):
    fix = triage.fix_for(rule, target, value, "", inplace)
    assert fix.startswith(lead + ":"), fix
    assert needle in fix, fix


def test_triage_fields_in_json_and_back(minivllm):
    report = build_report(minivllm, [])
    assert report["schema_version"] == "1.2"
    for row in report["findings"]:
        for key in ("reader", "guard", "masked", "backends", "fix"):
            assert key in row
        assert row["reader"] is None or re.fullmatch(r"\S+\.py:\d+ in \S+", row["reader"])
    back = [Finding.from_json(json.loads(json.dumps(r))) for r in report["findings"]]
    assert [b.to_json() for b in back] == report["findings"]


def test_a_1_0_finding_reads_with_empty_triage_and_the_same_fingerprint():
    old = {
        "rule": "RL101",
        "path": "a.py",
        "line": 3,
        "symbol": "M.process_weights_after_loading",
        "target": "layer.x",
        "message": "m",
        "fingerprint": "",
    }
    f = Finding.from_json(old)
    assert (f.reader, f.guard, f.masked, f.backends, f.fix) == (None, None, None, [], "")
    g = Finding.from_json({**old, "fix": "x", "reader": "a.py:9 in M.apply", "backends": ["B"]})
    compute_fingerprints([f])
    compute_fingerprints([g])
    assert f.fingerprint == g.fingerprint


# ---------------------------------------------------------------------- reader evidence


def _run(tmp_path: Path, files: dict[str, str], contract: str = "vllm-layerwise"):
    return check_files(tmp_path, files, contract=contract)


def _line(files: dict[str, str], rel: str, needle: str) -> int:
    lines = textwrap.dedent(files[rel]).splitlines()
    return next(i for i, t in enumerate(lines, start=1) if needle in t)


def _by_target(result) -> dict[str, Finding]:
    return {f.target: f for f in result.findings}


READERS = {
    "pkg/__init__.py": "",
    "pkg/utils.py": """
    import torch


    class Info:
        def __init__(self, w, s):
            self.w = w
            self.s = s


    def build_info(layer):
        return Info(layer.weight, layer.w_info_scale)


    def prepare_layer_for_marlin(layer):
        layer.w_marlin = torch.argsort(layer.g_idx)
    """,
    "pkg/kernel.py": """
    import torch


    class MarlinKernel:
        def apply_weights(self, layer, x):
            return x[:, layer.held_perm]


    class Unrelated:
        def apply(self, layer, x):
            return x * layer.name_only
    """,
    "pkg/method.py": """
    import torch

    from pkg.kernel import MarlinKernel
    from pkg.utils import build_info, prepare_layer_for_marlin


    class Method:
        def __init__(self):
            self.kernel = MarlinKernel()
            self.use_marlin = True

        def create_weights(self, layer: torch.nn.Module) -> None:
            layer.register_parameter("weight", torch.nn.Parameter(torch.ones(4)))
            layer.register_parameter("weight_scale", torch.nn.Parameter(torch.ones(4)))
            layer.register_parameter("g_idx", torch.nn.Parameter(torch.ones(4)))

        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            layer.w_info_scale = layer.weight_scale.float()
            layer.held_perm = torch.argsort(layer.g_idx)
            layer.name_only = torch.zeros(4)
            layer.deep = layer.weight_scale * 2
            prepare_layer_for_marlin(layer)
            self._process_weights_for_sm120_cutlass(layer)

        def apply(self, layer, x):
            if self.use_marlin:
                return self._apply_marlin(layer, x)
            if self.use_sm90:
                return self._apply_sm90_cutlass(layer, x)
            if self.use_sm120:
                return self._apply_sm120_cutlass(layer, x)
            return self._apply_aiter(layer, x)

        def _process_weights_for_sm120_cutlass(self, layer):
            layer.w_sm120 = layer.weight_scale.float()

        def _apply_sm90_cutlass(self, layer, x):
            return x * layer.w_sm120

        def _apply_sm120_cutlass(self, layer, x):
            return x + layer.w_sm120

        def _apply_aiter(self, layer, x):
            return x[:, layer.w_marlin] * layer.deep

        def _apply_marlin(self, layer, x):
            info = build_info(layer)
            y = self.kernel.apply_weights(layer, x)
            return y * info.s + self._helper(layer)[:, layer.w_marlin]

        def _helper(self, layer):
            return layer.deep
    """,
}


def test_reader_found_behind_an_info_object_a_held_kernel_and_a_helper(tmp_path):
    found = _by_target(_run(tmp_path, READERS))
    # read inside the module-level helper that builds the info object
    ln = _line(READERS, "pkg/utils.py", "return Info(layer.weight")
    assert found["layer.w_info_scale"].reader == f"pkg/utils.py:{ln} in build_info"
    # read by the kernel object the method holds (`self.kernel = MarlinKernel()`)
    ln = _line(READERS, "pkg/kernel.py", "layer.held_perm]")
    assert found["layer.held_perm"].reader == f"pkg/kernel.py:{ln} in MarlinKernel.apply_weights"
    for t in ("layer.w_info_scale", "layer.held_perm"):
        assert found[t].confidence == "high"
        assert found[t].trace[-1].note.startswith("read at apply time in ")


def test_a_name_match_in_an_unrelated_class_is_not_evidence(tmp_path):
    f = _by_target(_run(tmp_path, READERS))["layer.name_only"]
    assert f.reader is None
    assert f.confidence == "medium"
    assert not any("Unrelated" in s.note for s in f.trace)
    assert f.trace[-1].note == "no apply-time read of this attribute found"


def test_a_store_on_the_marlin_path_is_not_read_by_the_aiter_path(tmp_path):
    found = _by_target(_run(tmp_path, READERS))
    marlin = found["layer.w_marlin"]
    ln = _line(READERS, "pkg/method.py", "+ self._helper(layer)[:, layer.w_marlin]")
    assert marlin.reader == f"pkg/method.py:{ln} in Method._apply_marlin"
    assert "_apply_aiter" not in marlin.trace[-1].note
    # the same family (cutlass) on another architecture is another backend
    ln = _line(READERS, "pkg/method.py", "return x + layer.w_sm120")
    assert found["layer.w_sm120"].reader == f"pkg/method.py:{ln} in Method._apply_sm120_cutlass"
    # a store on no backend's path takes the first read the entry reaches
    ln = _line(READERS, "pkg/method.py", "layer.w_marlin] * layer.deep")
    assert found["layer.deep"].reader == f"pkg/method.py:{ln} in Method._apply_aiter"


def test_high_confidence_needs_an_unconditional_store_and_a_reader(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/k.py": """
        import torch


        class Kernel:
            def __init__(self):
                self.ws = None

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                if self.ws is None:
                    self.ws = torch.zeros(4)
                self.buf = torch.zeros(4)
                self.unread = torch.zeros(4)

            def apply_weights(self, layer, x):
                return x + self.ws + self.buf + ext.run(self, x)
        """,
    }
    found = _by_target(_run(tmp_path, files))
    assert found["self.buf"].reader and found["self.buf"].confidence == "high"
    # `if self.ws is None:` is a run-once guard the reload does not reset (path facts): the
    # second pass keeps the first storage, so there is no finding to rank at all
    assert "self.ws" not in found
    # no read found, but apply hands the object to code the search does not follow: kept,
    # one step less sure
    assert found["self.unread"].reader is None and found["self.unread"].confidence == "medium"
    ranks = {"high": 0, "medium": 1, "low": 2}
    # sorting by confidence puts the unconditional, read store first
    first = min(found.values(), key=lambda f: ranks[f.confidence])
    assert first.target == "self.buf"


def test_new_storage_on_one_branch_only_is_a_conditional_store(tmp_path):
    # a helper that re-binds its argument under a config `if` and returns it: the store is new
    # storage on that path and the registered tensor itself on the other (a pad kept, not
    # sliced back: sliced back it keeps the shape, tests/unit/test_engine_shapes.py)
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": """
        import torch
        import torch.nn.functional as F
        from torch.nn import Parameter


        class Method:
            def create_weights(self, layer):
                layer.register_parameter("w13", Parameter(torch.empty(4, 8)))
                layer.register_parameter("w2", Parameter(torch.empty(4, 8)))

            def _maybe_pad(self, weight):
                if envs.PAD and weight.stride(-1) == 1:
                    weight = F.pad(weight, (0, 64))
                return weight

            def _pad(self, weight):
                weight = F.pad(weight, (0, 64))
                return weight

            def process_weights_after_loading(self, layer):
                layer.w13.data = self._maybe_pad(layer.w13.data)
                layer.w2.data = self._pad(layer.w2.data)

            def apply(self, layer, x):
                return x @ layer.w13 @ layer.w2
        """,
    }
    # (under vllm-load-weights, where a shape change is reported: the next load fails)
    found = _by_target(_run(tmp_path, files, contract="vllm-load-weights"))
    maybe, always = found["layer.w13.data"], found["layer.w2.data"]
    assert maybe.rule == always.rule == "RL106"
    assert maybe.reader and always.reader
    assert maybe.confidence == "medium"
    assert always.confidence == "high"


MOE_WORKSPACE = {
    "pkg/__init__.py": "",
    "pkg/layer.py": """
    import torch


    class MoELayer(torch.nn.Module):
        def forward(self, x):
            return self.quant_method.apply(self, x)
    """,
    "pkg/dense.py": """
    import torch


    class DenseMarlinKernel:
        def apply_weights(self, layer, x):
            return marlin_gemm(x, layer.weight, workspace=layer.workspace)
    """,
    "pkg/moe.py": """
    import torch

    from pkg.layer import MoELayer


    def make_workspace(device):
        return torch.zeros(64, device=device)


    class MarlinMoEMethod:
        def process_weights_after_loading(self, layer: MoELayer) -> None:
            layer.workspace = make_workspace(layer.w13.device)
            layer.handed_scale = torch.ones(4)
            layer.read_scale = torch.ones(4)
            self.config = self.make_config(layer)

        def make_config(self, layer):
            return (layer.handed_scale,)

        def apply(self, layer, x):
            return fused_marlin_moe(x, layer.w13, layer.read_scale, self.config)


    class UntypedMoEMethod:
        def process_weights_after_loading(self, layer) -> None:
            layer.workspace = make_workspace(layer.w13.device)

        def apply(self, layer, x):
            return fused_marlin_moe(x, layer.w13)
    """,
}


def test_a_store_no_apply_path_of_its_family_reads_is_no_finding(tmp_path):
    # the MoE Marlin workspace: the dense Marlin kernel reads `layer.workspace` (another class
    # family, matched by name only); the MoE method's apply, the layer's forward that calls
    # it, and everything they call never read it: nothing captures it, no finding
    findings = _run(tmp_path, MOE_WORKSPACE).findings
    found = {(f.path, f.target): f for f in findings}
    ws = [f for f in findings if f.target == "layer.workspace"]
    assert [f.symbol for f in ws] == ["UntypedMoEMethod.process_weights_after_loading"]
    kept = ws[0]
    # the layer's class is unknown there: the search is not complete, the finding stays
    assert kept.reader is None and kept.confidence == "medium"
    # a store the family reads outside apply (handed into the config apply reads) stays
    assert found[("pkg/moe.py", "layer.handed_scale")].reader is None
    assert found[("pkg/moe.py", "layer.read_scale")].reader


def test_a_kernel_the_layer_holds_is_followed_from_apply(tmp_path):
    # `layer.kernel = Kernel(...)` in create_weights, prepared by a post-load helper of
    # another name; apply reaches the kernel through the layer (`layer.kernel.run(x)`)
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": """
        import torch


        class Kernel:
            def __init__(self, n):
                self.n = n

            def prepare(self, layer):
                self.workspace = torch.zeros(self.n)

            def run(self, x):
                return x + self.workspace


        class Method:
            def create_weights(self, layer):
                layer.kernel = Kernel(4)

            def process_weights_after_loading(self, layer):
                layer.kernel.prepare(layer)

            def apply(self, layer, x):
                return layer.kernel.run(x)
        """,
    }
    fd = _by_target(_run(tmp_path, files))["self.workspace"]
    assert fd.reader == "pkg/m.py:13 in Kernel.run"
    assert "via Method.apply" in fd.trace[-1].note
    assert fd.confidence == "high"


# ---------------------------------------------------------------------- locations and names


def test_an_operator_allocation_points_at_the_operator_line(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/fp8_utils.py": """
        import torch


        def normalize_scale(
            weight: torch.Tensor,
            weight_scale: torch.Tensor,
        ) -> torch.Tensor:
            weight = weight.view(torch.int8)
            doubled = weight_scale * 2.0
            return doubled
        """,
        "pkg/m.py": """
        import torch

        from pkg.fp8_utils import normalize_scale


        class M:
            def create_weights(self, layer: torch.nn.Module) -> None:
                layer.register_parameter("weight", torch.nn.Parameter(torch.ones(4)))
                layer.register_parameter("weight_scale", torch.nn.Parameter(torch.ones(1)))

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                layer.scale2 = normalize_scale(layer.weight, layer.weight_scale)

            def apply(self, layer, x):
                return x * layer.scale2
        """,
    }
    (f,) = _run(tmp_path, files).findings
    step = next(s for s in f.trace if "`*` allocates" in s.note)
    assert (step.path, step.line) == (
        "pkg/fp8_utils.py",
        _line(files, "pkg/fp8_utils.py", "weight_scale * 2.0"),
    )


FSTRINGS = {
    "pkg/__init__.py": "",
    "pkg/m.py": """
    import torch


    def _invert(layer: torch.nn.Module, prefix: str) -> None:
        setattr(layer, f"{prefix}_scale_inv", 1.0 / getattr(layer, f"{prefix}_scale"))


    class M:
        def create_weights(self, layer: torch.nn.Module) -> None:
            layer.register_parameter("w13_scale", torch.nn.Parameter(torch.ones(2)))
            layer.register_parameter("w2_scale", torch.nn.Parameter(torch.ones(2)))
            layer.register_parameter("w13_weight", torch.nn.Parameter(torch.ones(2)))

        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            _invert(layer, "w13")
            _invert(layer, "w2")
            for prefix in ("w13",):
                weight = getattr(layer, f"{prefix}_weight")
                weight.data = torch.unique(weight.data)

        def apply(self, layer, x):
            return x * layer.w13_scale_inv * layer.w2_scale_inv @ layer.w13_weight
    """,
}


def test_fstring_attribute_names_resolve_from_the_prefixes_callers_pass(tmp_path):
    result = _run(tmp_path, FSTRINGS)
    targets = {f.target for f in result.findings}
    assert not [t for t in targets if "<" in t], targets
    found = _by_target(result)
    for t in ("layer.w13_scale_inv", "layer.w2_scale_inv"):
        assert found[t].rule == "RL101"
        assert found[t].reader and found[t].reader.endswith("in M.apply")
    # the `.data` swap of a Parameter fetched by an f-string name is read as `w13_weight`
    assert found["weight.data"].rule == "RL106"
    assert found["weight.data"].reader and found["weight.data"].reader.endswith("in M.apply")


def test_names_joined_with_plus_in_a_loop_resolve_per_name(tmp_path):
    # `name + "_inv"` over a loop of literal names: one store per name, and `getattr(layer,
    # name)` reads each registered scale; a loop over the same names re-registering
    # Parameters stays clean; a prefix the caller passes resolves per caller, as in f-strings
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": """
        import torch


        class M:
            def create_weights(self, layer: torch.nn.Module) -> None:
                layer.register_parameter("w13_scale", torch.nn.Parameter(torch.ones(2)))
                layer.register_parameter("w2_scale", torch.nn.Parameter(torch.ones(2)))

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                for name in ("w13_scale", "w2_scale"):
                    setattr(layer, name + "_inv", 1.0 / getattr(layer, name))
                for name in ("w13_scale", "w2_scale"):
                    setattr(layer, name, torch.nn.Parameter(getattr(layer, name) * 2))
                self._given(layer, "w2")

            def _given(self, layer, prefix):
                setattr(layer, prefix + "_perm", torch.argsort(layer.w2_scale))

            def apply(self, layer, x):
                return x * layer.w13_scale_inv * layer.w2_scale_inv + x[layer.w2_perm]
        """,
    }
    found = _by_target(_run(tmp_path, files))
    assert sorted(found) == ["layer.w13_scale_inv", "layer.w2_perm", "layer.w2_scale_inv"]
    for t in found:
        assert found[t].rule == "RL101"
        assert found[t].reader and found[t].reader.endswith("in M.apply")


def test_a_site_reached_with_and_without_a_known_prefix_reports_the_known_names(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": """
        import torch


        class Npu:
            def process_weights_after_loading(self, layer: torch.nn.Module, prefix: str) -> None:
                setattr(layer, f"{prefix}_perm", torch.argsort(layer.g_idx))

            def apply(self, layer, x):
                return x[:, layer.w13_perm]


        class Outer:
            def __init__(self):
                self.inner = Npu()

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                self.inner.process_weights_after_loading(layer, "w13")
        """,
    }
    targets = sorted(f.target for f in _run(tmp_path, files).findings)
    assert targets == ["layer.w13_perm"]


SHARED = {
    "pkg/__init__.py": "",
    "pkg/utils.py": """
    import torch


    def set_plain(mod: torch.nn.Module, name: str, value: torch.Tensor) -> None:
        setattr(mod, name, value)


    def prepare_for_marlin(layer: torch.nn.Module) -> None:
        layer.workspace = torch.zeros(8)
    """,
    "pkg/a.py": """
    import torch

    from pkg.utils import prepare_for_marlin, set_plain


    class A:
        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            set_plain(layer, "perm", torch.argsort(layer.g_idx))
            prepare_for_marlin(layer)

        def apply(self, layer, x):
            return x[:, layer.perm] + layer.workspace
    """,
    "pkg/b.py": """
    import torch

    from pkg.utils import set_plain


    class B:
        def create_weights(self, layer: torch.nn.Module) -> None:
            layer.register_parameter("weight_scale", torch.nn.Parameter(torch.ones(1)))

        def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
            set_plain(layer, "scale_inv", 1.0 / layer.weight_scale)

        def apply(self, layer, x):
            return x * layer.scale_inv
    """,
}


def test_a_shared_helper_store_is_reported_at_the_caller_that_passes_the_name(tmp_path):
    found = _by_target(_run(tmp_path, SHARED))
    perm, inv = found["layer.perm"], found["layer.scale_inv"]
    assert (perm.path, perm.line, perm.symbol) == (
        "pkg/a.py",
        _line(SHARED, "pkg/a.py", 'set_plain(layer, "perm"'),
        "A.process_weights_after_loading",
    )
    assert (inv.path, inv.line, inv.symbol) == (
        "pkg/b.py",
        _line(SHARED, "pkg/b.py", 'set_plain(layer, "scale_inv"'),
        "B.process_weights_after_loading",
    )
    # the helper stays in the trace
    store = _line(SHARED, "pkg/utils.py", "setattr(mod, name, value)")
    for f in (perm, inv):
        assert ("pkg/utils.py", store) in {(s.path, s.line) for s in f.trace}
        assert f.reader and f.reader.endswith(".apply")
    # a helper that decides the name itself is where the change goes: it stays the location
    ws = found["layer.workspace"]
    assert (ws.path, ws.symbol) == ("pkg/utils.py", "prepare_for_marlin")


def test_an_operator_inside_a_multi_line_call_points_at_its_own_line(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": """
        import torch


        class Config:
            def __init__(self, a, b):
                self.a = a
                self.b = b


        class M:
            def create_weights(self, layer: torch.nn.Module) -> None:
                layer.register_parameter("a_scale", torch.nn.Parameter(torch.ones(1)))

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                self.cfg = Config(
                    a=None,
                    b=1.0 / layer.a_scale,
                )

            def apply(self, layer, x):
                return x * self.cfg.b
        """,
    }
    (f,) = _run(tmp_path, files).findings
    step = next(s for s in f.trace if "`/` allocates" in s.note)
    assert step.line == _line(files, "pkg/m.py", "b=1.0 / layer.a_scale")


def test_a_config_object_handed_to_the_kernel_is_read_where_the_kernel_reads_it(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": """
        import torch


        class QuantConfig:
            def __init__(self, a1_scale):
                self.a1_gscale = 1.0 / a1_scale


        class Experts:
            def __init__(self, quant_config):
                self.quant_config = quant_config

            def apply(self, x):
                return x * self.quant_config.a1_gscale


        class Method:
            def create_weights(self, layer: torch.nn.Module) -> None:
                layer.register_parameter("a1_scale", torch.nn.Parameter(torch.ones(1)))

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                self.moe_quant_config = QuantConfig(layer.a1_scale)
                self.experts = Experts(self.moe_quant_config)

            def apply(self, layer, x):
                return self.experts.apply(x)
        """,
    }
    found = _by_target(_run(tmp_path, files))
    f = found["self.moe_quant_config"]
    ln = _line(files, "pkg/m.py", "return x * self.quant_config.a1_gscale")
    assert f.reader == f"pkg/m.py:{ln} in Experts.apply"
    assert "as `quant_config`" in f.trace[-1].note
