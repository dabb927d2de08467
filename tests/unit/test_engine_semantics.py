"""Engine semantics that the rule examples do not pin: module naming across PEP 420 folders,
branch-aware attribute reads, zero-element allocations, the call-depth limit."""

from __future__ import annotations

from pathlib import Path

import pytest
from _engine_util import check_files

from reload_lint.engine import _module_name


def _run(tmp_path: Path, files: dict[str, str], contract: str = "vllm-layerwise"):
    return check_files(tmp_path, files, contract=contract)


def _found(result) -> set[tuple[str, int, str]]:
    return {(f.path, f.line, f.rule) for f in result.findings}


def test_module_names_bridge_namespace_folders():
    pkgs = {("top",), ("top", "srt", "layers")}
    assert _module_name(("top", "srt", "layers", "q.py"), pkgs) == ("top.srt.layers.q", False)
    assert _module_name(("top", "srt", "util.py"), pkgs) == ("top.srt.util", False)
    assert _module_name(("top", "srt", "layers", "__init__.py"), pkgs) == ("top.srt.layers", True)
    # no regular package above: plain module name, as before
    assert _module_name(("scripts", "tool.py"), pkgs) == ("tool", False)


def test_store_in_one_branch_does_not_hide_the_registered_value(tmp_path):
    result = _run(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/m.py": """
            import torch


            class Method:
                def create_weights(self, layer: torch.nn.Module) -> None:
                    layer.register_parameter("s", torch.nn.Parameter(torch.ones(1)))

                def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                    if layer.s is None:
                        layer.s = None
                    else:
                        layer.s = torch.nn.Parameter(layer.s.data, requires_grad=False)
            """,
        },
        contract="inplace-only",
    )
    assert _found(result) == set()


def test_zero_element_tensors_are_not_storage_registered_or_not(tmp_path):
    # a constant shape with a 0 dimension allocates nothing: no address to move or free under
    # a captured graph, registered (`marlin_make_empty_g_idx`) or plain (RDNA3's
    # `rdna3_empty_tw`). `.set_(storage)` gives such a tensor another one's storage: that is
    # new storage (or an alias) again, and a `p.data =` swap to an empty one still frees p's
    result = _run(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/m.py": """
            import torch


            class Method:
                def create_weights(self, layer: torch.nn.Module) -> None:
                    layer.register_parameter("w", torch.nn.Parameter(torch.ones(4, 4)))

                def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                    layer.register_parameter("g", torch.nn.Parameter(torch.empty((4, 0))))
                    layer.empty_tw = torch.empty(0)
                    layer.empty_2d = torch.zeros((4, 0), dtype=torch.int32)
                    s = torch.zeros(64).untyped_storage()
                    layer.packed = torch.empty(0, dtype=torch.uint8).set_(s, 0, (64,), (1,))
                    layer.w.data = torch.empty(0)
            """,
        },
        contract="inplace-only",
    )
    assert _found(result) == {("pkg/m.py", 14, "RL101"), ("pkg/m.py", 15, "RL106")}


def test_reshape_of_a_registered_tensor_is_a_view(tmp_path):
    result = _run(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/m.py": """
            import torch


            class Method:
                def create_weights(self, layer: torch.nn.Module) -> None:
                    layer.register_parameter("w", torch.nn.Parameter(torch.ones(4, 4)))

                def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                    layer.w.data = layer.w.data.reshape(16)
                    layer.w.data = layer.w.data * 2
            """,
        },
        contract="inplace-only",
    )
    # the control: arithmetic allocates on every pass (a `.float()` cast stored back under
    # its own name would not: it is idempotent from the second pass, see pathfacts)
    assert _found(result) == {("pkg/m.py", 11, "RL106")}


def test_call_depth_limit_is_reported_not_silent(tmp_path):
    chain = "\n".join(f"def h{i}(x):\n    return h{i + 1}(x)\n" for i in range(30))
    result = _run(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/deep.py": "import torch\n\n"
            + chain
            + "\ndef h30(x):\n    return torch.argsort(x)\n",
            "pkg/m.py": """
            import torch

            from pkg.deep import h0


            class Method:
                def create_weights(self, layer: torch.nn.Module) -> None:
                    layer.register_parameter("g_idx", torch.nn.Parameter(torch.ones(4)))

                def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                    layer.perm = h0(layer.g_idx)
            """,
        },
    )
    assert any(e.rule == "RL906" and "depth limit" in e.message for e in result.errors)
    # the store is still reported, with the low confidence of the assumed result
    assert ("pkg/m.py", 12, "RL101") in _found(result)


def test_a_fresh_value_from_one_branch_survives_the_join(tmp_path):
    result = _run(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/m.py": """
            import torch


            class Method:
                def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                    perm = None
                    if layer.act_order:
                        perm = torch.argsort(layer.g_idx)
                    layer.perm = perm
                    w = torch.empty(4)
                    w = torch.nn.Parameter(w)  # same block: the Parameter replaces w
                    layer.w2 = w
            """,
        },
    )
    assert _found(result) == {("pkg/m.py", 10, "RL101")}


def test_isinstance_narrowing_keeps_an_existing_parameter(tmp_path):
    result = _run(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/m.py": """
            import torch


            def rebind(layer: torch.nn.Module, name: str, tensor) -> None:
                if isinstance(tensor, torch.nn.Parameter):
                    param = tensor
                else:
                    param = torch.nn.Parameter(tensor, requires_grad=False)
                setattr(layer, name, param)


            class Method:
                def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                    rebind(layer, "w", layer.w.t().contiguous())
            """,
        },
    )
    assert _found(result) == set()


def test_recursion_with_changing_arguments_is_cut_before_the_depth_limit(tmp_path):
    # vLLM 0.33.0's merge_attn_states imports the custom op of the same name inside its own
    # body; resolved to the module function, every level feeds itself new values, so the
    # exact-context recursion check never matched and the call chain ran to the depth limit
    # (two RL906 rows on a release). A second nested activation of one function is cut.
    result = _run(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/ops.py": """
            import torch

            def merge(out, a):
                if a.shape[0] > 0:
                    from pkg._custom_ops import merge
                    return merge(out, a * 2)
                return out
            """,
            "pkg/layer.py": """
            import torch
            from pkg.ops import merge

            class Method:
                def process_weights_after_loading(self, layer):
                    layer.tmp = merge(torch.empty(4), layer.weight)

                def apply(self, layer, x):
                    return x @ layer.tmp
            """,
        },
    )
    assert not [e for e in result.errors if "depth limit" in e.message]
    assert ("pkg/layer.py", 7, "RL101") in _found(result)


def test_a_lambda_captures_what_it_reads_not_its_keyword_names(tmp_path):
    """`lambda *a, **k: f(*a, perm=getattr(layer, "perm"), **k)` (a partial made late-bound)
    reads no local `perm`: the keyword is the callee's parameter. `perm=perm` does read it."""
    src = """
    import torch


    def gather(x, perm):
        return x[:, perm]


    class K:
        def process_weights_after_loading(self, layer):
            perm = torch.argsort(layer.g_idx)
            layer.register_buffer("k_perm", perm)
            self.{attr} = lambda *a, **k: gather(*a, perm={arg}, **k)

        def apply_weights(self, layer, x):
            return self.{attr}(x)
    """
    late = src.format(attr="late", arg='getattr(layer, "k_perm")')
    bound = src.format(attr="bound", arg="perm")
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": late, "pkg/b.py": bound})
    assert [(f.path, f.rule) for f in res.findings] == [("pkg/b.py", "RL103")]


ELSE_GUARD = """import torch


class Kernel:
    def process_weights_after_loading(self, layer):
        ws = torch.zeros(8, dtype=torch.int32)
        if getattr(self, "{flag}", None) is not None:
            self.{flag}.copy_(ws)
        else:
            self.{store} = ws

    def apply_weights(self, layer, x):
        return x + self.{store}
"""


def test_the_else_of_a_flag_test_runs_only_while_the_test_fails(tmp_path):
    """`if getattr(self, "ws", None) is not None: ... else: self.ws = t` stores only while
    `self.ws` is None: the first load's tensor stays (the keep-and-copy codemod's `if`/`else`).
    An `else` that stores another attribute than the one tested still runs on every update."""
    kept = _run(tmp_path / "a", {"pkg/k.py": ELSE_GUARD.format(flag="ws", store="ws")})
    assert _found(kept) == set()
    other = _run(tmp_path / "b", {"pkg/k.py": ELSE_GUARD.format(flag="other", store="ws")})
    assert {r for _, _, r in _found(other)} == {"RL102"}


REBUILT_KEEP = 'import torch\n\n\ndef to_mma(w: torch.Tensor) -> torch.Tensor:\n    return w.t().contiguous()\n\n\nclass Experts:\n    def __init__(self, n: int) -> None:\n        self.n = n\n        self.w_mma = None\n        self.workspace = torch.empty(n * 16)\n\n    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:\n        w_mma = to_mma(layer.w13_weight)\n        if getattr(self, "w_mma", None) is not None:\n            _copy_into_kept(self.w_mma, w_mma)\n        else:\n            self.w_mma = w_mma\n\n    def apply(self, x: torch.Tensor) -> torch.Tensor:\n        return x @ self.w_mma\n\n\nclass Kernel:\n    def __init__(self, experts: Experts) -> None:\n        self.experts = experts\n\n\nclass Method:\n    def create_weights(self, layer: torch.nn.Module, n: int) -> None:\n        layer.register_parameter("w13_weight", torch.nn.Parameter(torch.ones(n, n), requires_grad=False))\n\n    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:\n        self.kernel = Kernel(Experts(4))\n        self.kernel.experts.process_weights_after_loading(layer)\n\n    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:\n        return self.kernel.experts.apply(x)\n\n\ndef _copy_into_kept(kept, new):\n    kept.copy_(new)\n'


@pytest.mark.parametrize("form", ["else", "two ifs"])
def test_a_kept_copy_on_a_rebuilt_object_is_first_use_init_in_either_form(tmp_path, form):
    """`if getattr(self, "x", None) is not None: <copy> else: self.x = t` on an object that
    post-load rebuilds is read as the two-`if` form is (`if ... is None: self.x = t`): a
    fresh object has no `x`, so the store runs on every update (RL108), not run-once."""
    code = REBUILT_KEEP
    if form == "two ifs":
        code = code.replace(
            "        else:\n            self.w_mma = w_mma\n",
            '        if getattr(self, "w_mma", None) is None:\n            self.w_mma = w_mma\n',
        )
    got = _run(tmp_path, {"pkg/k.py": code})
    assert ("pkg/k.py", 19, "RL108") in _found(got)


PADDED_REPLACE = """import torch
import torch.nn.functional as F


def replace(layer, name, new):
    old = getattr(layer, name)
    if old.shape == new.shape and old.dtype == new.dtype:
        old.data.copy_(new)
    else:
        old.data = new


class Kernel:
    def create_weights(self, layer, n, k):
        layer.register_parameter("weight", torch.nn.Parameter(torch.empty(n, k)))

    def process_weights_after_loading(self, layer):
        replace(layer, "weight", F.pad(layer.weight.data, (0, 16)))

    def apply_weights(self, layer, x):
        return x @ layer.weight.t()
"""


def test_a_copy_test_against_a_padded_checkpoint_parameter_depends_on_the_contract(tmp_path):
    """The copy-or-rebind test compares the checkpoint Parameter with a padded tensor. Under
    `inplace-only` it never holds (the first pass rebinds, the next in-place load meets the
    re-bound Parameter): the `.data` swap is reported. Under `vllm-layerwise` the copy-back
    keeps the first pass's storage: nothing is reported (vLLM 0.33's replace_parameter)."""
    files = {"pkg/k.py": PADDED_REPLACE}
    assert _found(_run(tmp_path / "a", files)) == set()
    got = _run(tmp_path / "b", files, contract="inplace-only")
    assert ("pkg/k.py", 10, "RL106") in _found(got)
