"""What a harness recipe provides, and how findings find their recipe."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from reload_lint.confirm.targets import parse_target, symbol_class
from reload_lint.confirm.walk import qualified_class
from reload_lint.findings import Finding


@dataclass
class Built:
    """One small real layer, ready for load/capture/reload."""

    model: object  # torch.nn.Module root handed to the reload driver
    layer: object  # the layer under test
    forward: Callable  # x -> output tensor (what the graph captures)
    roots: dict[str, object] = field(default_factory=dict)  # walk roots (default: layer)
    notes: list[str] = field(default_factory=list)
    #: the quant method / scheme / kernel class the harness drove (qualified name)
    component: str | None = None
    #: the kernel or experts object vLLM built for this layer (qualified class name)
    backend: str | None = None
    #: ops replaced by stand-ins; any makes this a census-tier run
    standins: set[str] = field(default_factory=set)

    @property
    def tier(self) -> str:
        return "census" if self.standins else "replay"


@dataclass
class Fix:
    """A fix for one target: ``apply()`` patches (in the child process) and returns undo."""

    target: str  # canonical target, e.g. "self.workspace"
    kind: str  # "reuse storage" | "registration" | "late binding" | "reuse rebuilt"
    apply: Callable[[], Callable[[], None]]
    description: str
    #: where the target lives once fixed, when the fix moves it (late binding registers the
    #: tensor under a new name): linked in addition to the finding's own target
    links: tuple[str, ...] = ()


class Recipe:
    """A kernel family's harness. Subclasses fill in the hooks; see docs/runner.md."""

    name = "recipe"
    family = ""
    #: path suffixes of source files whose findings this recipe confirms
    paths: tuple[str, ...] = ()
    #: class names (finding symbol's class) this recipe confirms; empty = any
    classes: tuple[str, ...] = ()
    #: function names (for findings outside a class, e.g. prepare_fp8_layer_for_marlin)
    functions: tuple[str, ...] = ()
    #: canonical targets -> aliases the static engine may report
    target_aliases: dict[str, tuple[str, ...]] = {}
    uses_vllm = False
    needs_cuda = False
    dtype = None  # model dtype for the reload driver

    # -- matching -----------------------------------------------------------------------------
    def matches(self, f: Finding) -> bool:
        if self.paths and not any(f.path.endswith(p) for p in self.paths):
            return False
        cls = symbol_class(f)
        func = f.symbol.split(".")[0] if f.symbol else ""
        if cls is not None:
            return not self.classes or cls in self.classes
        return not self.functions or func in self.functions

    def canonical_target(self, f: Finding) -> str:
        base, attrs = parse_target(f.target)
        spelled = ".".join([base, *attrs]) if base else ".".join(attrs)
        for canon, aliases in self.target_aliases.items():
            if spelled == canon or spelled in aliases:
                return canon
        return spelled

    # -- lifecycle hooks (run in the child process) --------------------------------------------
    def unavailable(self, device: str) -> str | None:
        """Why this recipe cannot run here (None when it can)."""
        return None

    def setup(self, device: str) -> None:
        """Once per child process, before anything is built."""

    #: bug-side runs one target at a time, the recipe's fixes for every other target applied (a
    #: failure one storage causes, a livelock, would otherwise mask what another does)
    isolate = True

    def fixes(self) -> dict[str, Fix]:
        return {}

    def fixes_for(self, targets: dict[str, str]) -> dict[str, Fix]:
        """Fixes for these canonical targets (target -> the class that stores it)."""
        return self.fixes()

    def finish(self, built: Built) -> None:
        """After post-load, in the child: record what vLLM built (``built.backend``) and the
        quant method the harness drove (``built.component``)."""
        from reload_lint.confirm.reload import post_load_component

        qm = post_load_component(built.layer)
        if qm is None:
            return
        if built.component is None:
            built.component = qualified_class(qm)
        if built.backend is None:
            built.backend = backend_of(qm)

    def construct(self, device: str) -> Built:
        """Build the model in checkpoint format (called inside ``torch.device(device)``)."""
        raise NotImplementedError

    def checkpoint(self, seed: int, device: str) -> dict:
        """Checkpoint-format weights, keyed by parameter name relative to ``Built.model``."""
        raise NotImplementedError

    def example_input(self, device: str):
        raise NotImplementedError

    def post_load(self, module) -> bool:
        """Run ``module``'s post-load wherever the layer holds it (``reload.find_post_load``:
        ``layer.quant_method``, the layer's own hook, or a method object under any other
        attribute); True if one ran."""
        from reload_lint.confirm.reload import harness_post_load

        return harness_post_load(module)

    def describe(self) -> str:
        return f"{self.name} ({self.family})" if self.family else self.name


def backend_of(quant_method) -> str | None:
    """Qualified class of the experts (or kernel) object vLLM built for the layer."""
    mk = getattr(quant_method, "moe_kernel", None)
    if mk is not None:
        impl = getattr(mk, "impl", None)
        experts = getattr(impl, "fused_experts", None) or getattr(mk, "fused_experts", None)
        return qualified_class(experts if experts is not None else mk)
    for attr in ("kernel", "fp8_linear", "experts"):
        k = getattr(quant_method, attr, None)
        if k is not None and not isinstance(k, (str, int, float, bool)):
            return qualified_class(k)
    scheme = getattr(quant_method, "scheme", None)
    if scheme is not None:
        return backend_of(scheme) or qualified_class(scheme)
    return None


class Registry:
    def __init__(self):
        self._recipes: list[Recipe] = []

    def add(self, recipe: Recipe) -> Recipe:
        self._recipes.append(recipe)
        return recipe

    def __iter__(self):
        return iter(self._recipes)

    def find(self, f: Finding) -> Recipe | None:
        for r in self._recipes:
            if r.matches(f):
                return r
        return None


REGISTRY = Registry()


def register(recipe_cls):
    """Class decorator: instantiate and add to the global registry."""
    REGISTRY.add(recipe_cls())
    return recipe_cls
