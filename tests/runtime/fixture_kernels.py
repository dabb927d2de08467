"""Plain-torch fixture kernels laid out like vLLM's, for the runner's CPU red/green tests.

Each kernel follows vLLM's shape: a layer whose ``quant_method.create_weights`` registers
checkpoint-format parameters with weight loaders, whose ``process_weights_after_loading``
(delegated to a kernel object) repacks them, and whose ``apply`` reads runtime tensors.

* ScratchKernel        Marlin's shape: a kernel-owned workspace read by a barrier op that spins
                       until its counters read zero, plus an unregistered argsort permutation.
* PartialPermKernel    Machete's shape: a permutation hidden in a functools.partial keyword;
                       "compile artifacts" retain old callables, so old storage stays alive.
* RebuiltExperts       FlashInfer's shape: post-load rebuilds an object that allocates constants.
* RegisteredKernel     the correct shape: registered permutation, reused workspace (green).
* SelfContained        a layer with its own post-load hook (generic fallback).
* NeedsArgs            a layer the generic fallback cannot construct (inconclusive).
* HIDDEN               a module-level dict the walk cannot see (the dispatch recorder can).
* OverwrittenLambda    Machete's other shape: a lambda stored, then at once replaced by a
                       partial over the same permutation; a third store in a branch not taken.
* UnreadStats          a post-load tensor apply never reads (unread, whatever moves).
* AliasingExperts      a rebuilt experts object holding the layer's own unregistered
                       permutation (another finding's store) and a constant of its own.
* FoldedScale          NVFP4's shape: a rebuilt kernel object that holds no tensor, and a
                       global scale kept as a plain layer attribute that the engine folds into
                       the object's finding (its ``also``): the finding's own store.
"""

from __future__ import annotations

import functools
import time

import torch

from reload_lint.confirm import fixes as fx
from reload_lint.confirm.recipes.base import Built, Fix, Recipe, register

PATH = "tests/runtime/fixture_kernels.py"
IN, OUT, GROUP = 16, 8, 4


@torch.library.custom_op("reload_lint_fixture::sync_mm", mutates_args=())
def sync_mm(x: torch.Tensor, w: torch.Tensor, workspace: torch.Tensor) -> torch.Tensor:
    """x @ w.T behind a barrier: like Marlin's, it waits until every counter reads zero."""
    while bool((workspace != 0).any()):
        time.sleep(0.001)
    return x @ w.t()


HIDDEN: dict[str, torch.Tensor] = {}


def copy_loader(param: torch.Tensor, loaded: torch.Tensor) -> None:
    assert param.shape == loaded.shape, (param.shape, loaded.shape)
    param.data.copy_(loaded)


def replace_parameter(layer: torch.nn.Module, name: str, value: torch.Tensor) -> None:
    layer.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))


class FixtureLinear(torch.nn.Module):
    def __init__(self, kernel_cls, in_features: int = IN, out_features: int = OUT):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.quant_method = FixtureMethod(kernel_cls)
        self.quant_method.create_weights(self, in_features, out_features)

    def forward(self, x):
        return self.quant_method.apply(self, x)


class FixtureMethod:
    def __init__(self, kernel_cls):
        self.kernel = kernel_cls()

    def create_weights(self, layer, in_features, out_features):
        w = torch.nn.Parameter(torch.empty(out_features, in_features), requires_grad=False)
        g = torch.nn.Parameter(torch.empty(in_features, dtype=torch.int32), requires_grad=False)
        w.weight_loader = copy_loader
        g.weight_loader = copy_loader
        layer.register_parameter("weight", w)
        layer.register_parameter("g_idx", g)

    def process_weights_after_loading(self, layer):
        self.kernel.process_weights_after_loading(layer)

    def apply(self, layer, x):
        return self.kernel.apply(layer, x)


class ScratchKernel:
    def process_weights_after_loading(self, layer):
        self.workspace = torch.zeros(4, dtype=torch.int32)
        layer.sort_idx = torch.argsort(layer.g_idx).to(torch.int64)
        replace_parameter(layer, "weight", layer.weight.data[:, layer.sort_idx].contiguous())

    def apply(self, layer, x):
        xs = torch.index_select(x, 1, layer.sort_idx)
        return torch.ops.reload_lint_fixture.sync_mm(xs, layer.weight, self.workspace)


class PartialPermKernel:
    def __init__(self):
        self._compiled = []  # stands in for compile artifacts that retain old callables

    def process_weights_after_loading(self, layer):
        perm = torch.argsort(layer.g_idx).to(torch.int64)
        self.act_perm = functools.partial(torch.index_select, dim=1, index=perm)
        self._compiled.append(self.act_perm)
        replace_parameter(layer, "weight", layer.weight.data[:, perm].contiguous())

    def apply(self, layer, x):
        return self.act_perm(x) @ layer.weight.t()


class Experts:
    def __init__(self, n: int):
        self.alpha = torch.full((n,), 1.5)
        self.beta = torch.full((n,), 0.25)


class RebuiltExperts:
    def process_weights_after_loading(self, layer):
        self.experts = Experts(layer.out_features)

    def apply(self, layer, x):
        return (x @ layer.weight.t()) * self.experts.alpha + self.experts.beta


class RegisteredKernel:
    def process_weights_after_loading(self, layer):
        ws = getattr(self, "workspace", None)
        if ws is None:
            self.workspace = torch.zeros(4, dtype=torch.int32)
        else:
            ws.zero_()
        perm = torch.argsort(layer.g_idx).to(torch.int64)
        replace_parameter(layer, "sort_idx", perm)
        replace_parameter(layer, "weight", layer.weight.data[:, perm].contiguous())

    def apply(self, layer, x):
        xs = torch.index_select(x, 1, layer.sort_idx)
        return torch.ops.reload_lint_fixture.sync_mm(xs, layer.weight, self.workspace)


class HiddenGlobalKernel:
    def process_weights_after_loading(self, layer):
        HIDDEN["bias"] = torch.full((layer.out_features,), 0.5) * layer.weight.data.sum()

    def apply(self, layer, x):
        return x @ layer.weight.t() + HIDDEN["bias"]


class SelfContained(torch.nn.Module):
    """Generic-fallback shape: its own post-load hook caches a plain tensor read in forward."""

    def __init__(self):
        super().__init__()
        self.in_features = IN
        self.weight = torch.nn.Parameter(torch.empty(OUT, IN), requires_grad=False)

    def process_weights_after_loading(self):
        self.row_scale = self.weight.abs().amax(dim=1) + 1.0

    def forward(self, x):
        return (x @ self.weight.t()) / self.row_scale


class NeedsArgs(torch.nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.width = width

    def process_weights_after_loading(self):
        pass


def checkpoint(seed: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(OUT, IN, generator=g)
    g_idx = (torch.randperm(IN, generator=g) // GROUP).to(torch.int32)
    return {"weight": w.to(device), "g_idx": g_idx.to(device)}


class FixtureRecipe(Recipe):
    paths = (PATH,)
    kernel_cls: type = ScratchKernel

    def construct(self, device: str) -> Built:
        layer = FixtureLinear(self.kernel_cls)
        return Built(model=layer, layer=layer, forward=layer, roots={"layer": layer})

    def checkpoint(self, seed: int, device: str) -> dict:
        return checkpoint(seed, device)

    def example_input(self, device: str):
        g = torch.Generator().manual_seed(11)
        return torch.randn(3, IN, generator=g).to(device)


@register
class ScratchRecipe(FixtureRecipe):
    name = "fixture-scratch"
    family = "fixture (Marlin shape)"
    classes = ("ScratchKernel",)
    kernel_cls = ScratchKernel

    def fixes(self):
        return {
            "self.workspace": Fix(
                "self.workspace",
                "reuse storage",
                lambda: fx.reuse_storage(ScratchKernel, "self.workspace"),
                "ScratchKernel.workspace: zero and reuse the captured storage",
            ),
            "layer.sort_idx": Fix(
                "layer.sort_idx",
                "registration",
                lambda: fx.register(ScratchKernel, "layer.sort_idx"),
                "register layer.sort_idx so the copy-back preserves it",
            ),
        }


@register
class PartialRecipe(FixtureRecipe):
    name = "fixture-partial"
    family = "fixture (Machete shape)"
    classes = ("PartialPermKernel",)
    kernel_cls = PartialPermKernel

    def fixes(self):
        return {
            "self.act_perm": Fix(
                "self.act_perm",
                "late binding",
                lambda: fx.late_bind(PartialPermKernel, "self.act_perm"),
                "register the permutation on the layer and read it at call time",
                links=(f"layer.{fx.late_bound_name('act_perm')}",),
            )
        }


@register
class RebuiltRecipe(FixtureRecipe):
    name = "fixture-rebuilt"
    family = "fixture (FlashInfer experts shape)"
    classes = ("RebuiltExperts", "Experts")
    kernel_cls = RebuiltExperts
    target_aliases = {"self.experts": ("self.alpha", "self.beta")}

    def fixes(self):
        return {
            "self.experts": Fix(
                "self.experts",
                "reuse rebuilt",
                lambda: fx.reuse_rebuilt(
                    RebuiltExperts, "self.experts", lambda k, layer: getattr(k, "experts", None)
                ),
                "copy the rebuilt experts' constants into the captured storages",
            )
        }


@register
class RegisteredRecipe(FixtureRecipe):
    name = "fixture-registered"
    family = "fixture (correct shape)"
    classes = ("RegisteredKernel",)
    kernel_cls = RegisteredKernel


@register
class HiddenRecipe(FixtureRecipe):
    name = "fixture-hidden"
    family = "fixture (module-level cache)"
    classes = ("HiddenGlobalKernel",)
    kernel_cls = HiddenGlobalKernel


class OutputWrapper:
    """B12x's ``B12xMoEWrapper`` shape: a pre-allocated output buffer the kernel writes."""

    def __init__(self, rows: int, cols: int):
        self.buf = torch.zeros(rows, cols)

    def run(self, x, w):
        out = self.buf[: x.shape[0]]
        torch.mm(x, w.t(), out=out)
        return out


class LazyExperts:
    def __init__(self):
        self._wrapper = None

    def _ensure_wrapper(self, rows: int, cols: int) -> OutputWrapper:
        if self._wrapper is None:
            self._wrapper = OutputWrapper(rows, cols)
        return self._wrapper


class LazyWrapperKernel:
    """Post-load rebuilds the experts object; its wrapper is built at the first forward."""

    def process_weights_after_loading(self, layer):
        self.experts = LazyExperts()

    def apply(self, layer, x):
        wrapper = self.experts._ensure_wrapper(8, layer.out_features)
        return wrapper.run(x, layer.weight) * 1.0


@register
class LazyWrapperRecipe(FixtureRecipe):
    name = "fixture-lazy-wrapper"
    family = "fixture (B12x wrapper shape)"
    classes = ("LazyWrapperKernel", "LazyExperts")
    kernel_cls = LazyWrapperKernel
    target_aliases = {"self.experts": ("self._wrapper",)}

    def fixes(self):
        return {
            "self.experts": Fix(
                "self.experts",
                "reuse rebuilt",
                lambda: fx.reuse_rebuilt(
                    LazyWrapperKernel, "self.experts", lambda k, layer: getattr(k, "experts", None)
                ),
                "reuse the captured experts' lazily built wrapper and its buffer",
            )
        }


class OverwrittenLambdaKernel:
    def process_weights_after_loading(self, layer):
        perm = torch.argsort(layer.g_idx).to(torch.int64)
        self.act_perm = lambda x: torch.index_select(x, 1, perm)
        if layer.in_features % 8 == 0:
            self.act_perm = functools.partial(torch.index_select, dim=1, index=perm)
        else:
            self.act_perm = functools.partial(torch.index_select, dim=1, index=perm.flip(0))
        replace_parameter(layer, "weight", layer.weight.data[:, perm].contiguous())

    def apply(self, layer, x):
        return self.act_perm(x) @ layer.weight.t()


class UnreadStatsKernel:
    def process_weights_after_loading(self, layer):
        self.stats = torch.zeros(4)  # kept for logging; apply never reads it

    def apply(self, layer, x):
        return x @ layer.weight.t()


class PermExperts:
    def __init__(self, perm: torch.Tensor, n: int):
        self.perm = perm  # the layer's own permutation, aliased
        self.scale = torch.full((n,), 2.0)


class AliasingExpertsKernel:
    def process_weights_after_loading(self, layer):
        layer.sort_idx = torch.argsort(layer.g_idx).to(torch.int64)
        self.experts = PermExperts(layer.sort_idx, layer.out_features)

    def apply(self, layer, x):
        xs = torch.index_select(x, 1, self.experts.perm)
        return (xs @ layer.weight.t()) * self.experts.scale


@register
class OverwrittenLambdaRecipe(FixtureRecipe):
    name = "fixture-overwritten-lambda"
    family = "fixture (Machete lambda then partial)"
    classes = ("OverwrittenLambdaKernel",)
    kernel_cls = OverwrittenLambdaKernel

    def fixes(self):
        return {
            "self.act_perm": Fix(
                "self.act_perm",
                "late binding",
                lambda: fx.late_bind(OverwrittenLambdaKernel, "self.act_perm"),
                "register the permutation on the layer and read it at call time",
                links=(f"layer.{fx.late_bound_name('act_perm')}",),
            )
        }


@register
class UnreadStatsRecipe(FixtureRecipe):
    name = "fixture-unread-stats"
    family = "fixture (unread post-load tensor)"
    classes = ("UnreadStatsKernel",)
    kernel_cls = UnreadStatsKernel


@register
class AliasingExpertsRecipe(FixtureRecipe):
    name = "fixture-aliasing-experts"
    family = "fixture (rebuilt object aliasing another store)"
    classes = ("AliasingExpertsKernel", "PermExperts")
    kernel_cls = AliasingExpertsKernel
    #: one build serves both targets, as a family row does (no isolation)
    isolate = False

    def fixes(self):
        return {
            "layer.sort_idx": Fix(
                "layer.sort_idx",
                "registration",
                lambda: fx.register(AliasingExpertsKernel, "layer.sort_idx"),
                "register layer.sort_idx so the copy-back preserves it",
            ),
            "self.experts": Fix(
                "self.experts",
                "reuse rebuilt",
                lambda: fx.reuse_rebuilt(
                    AliasingExpertsKernel,
                    "self.experts",
                    lambda k, layer: getattr(k, "experts", None),
                ),
                "copy the rebuilt experts' tensors into the captured storages",
            ),
        }


class TensorlessRunner:
    def __init__(self, n: int):
        self.n = n  # what the kernel dispatches on; no tensor


class FoldedScaleKernel:
    def process_weights_after_loading(self, layer):
        layer.gscale = (layer.weight.abs().amax() / 4.0).reshape(1)
        self.runner = TensorlessRunner(layer.out_features)

    def apply(self, layer, x):
        return (x @ layer.weight.t()) * layer.gscale


@register
class FoldedScaleRecipe(FixtureRecipe):
    name = "fixture-folded-scale"
    family = "fixture (a folded store: NVFP4 global scale)"
    classes = ("FoldedScaleKernel", "TensorlessRunner")
    kernel_cls = FoldedScaleKernel

    def fixes(self):
        # the host finding's patch keeps its folded store too, as the codemod's does
        return {
            "self.runner": Fix(
                "self.runner",
                "registration",
                lambda: fx.register(FoldedScaleKernel, "layer.gscale"),
                "register layer.gscale so the copy-back preserves it",
            )
        }
