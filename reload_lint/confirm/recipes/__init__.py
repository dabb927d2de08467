"""Harness recipes: how to build, load and drive one layer. Which recipe a finding gets is
decided by the family table (``confirm/families.py``); table rows of kind ``moe``/``linear``
use the generic ``FamilyRecipe`` (``vllm_layers.py``), rows of kind ``recipe`` name one of the
hand-built recipes below.

Built in: Marlin and Machete mixed-precision linear kernels (through the real AutoGPTQ linear
method's ``create_weights`` and weight loaders), the dense FP8 Marlin fallback (through the real
``Fp8LinearMethod``), the dense NVFP4 W4A16 and MXFP8 Marlin fallbacks (through the real
ModelOpt linear methods), CUTLASS FP8 grouped-GEMM MoE experts, and a generic fallback for classes
with a post-load hook and an apply method. ``--recipes MODULE`` imports more (the CPU fixture
kernels in tests/runtime use this).
"""

from __future__ import annotations

from reload_lint.confirm.recipes.base import REGISTRY, Built, Fix, Recipe, register

_BUILTIN_LOADED = False


def load_builtin() -> None:
    global _BUILTIN_LOADED
    if _BUILTIN_LOADED:
        return
    _BUILTIN_LOADED = True
    from reload_lint.confirm.recipes import vllm_linear  # noqa: F401


def get_recipe(name: str) -> Recipe:
    load_builtin()
    from reload_lint.confirm.recipes.generic import GenericRecipe

    for r in REGISTRY:
        if r.name == name:
            return r
    from reload_lint.confirm.recipes.vllm_layers import PREFIX, FamilyRecipe

    if name.startswith(PREFIX):
        return FamilyRecipe.from_name(name)
    if name.startswith(GenericRecipe.prefix):
        return GenericRecipe.from_name(name)
    raise KeyError(f"no recipe named {name!r}")


def find_recipe(finding) -> tuple[Recipe | None, str]:
    """The recipe for a finding, else the generic fallback, else None and why."""
    load_builtin()
    r = REGISTRY.find(finding)
    if r is not None:
        return r, ""
    from reload_lint.confirm.recipes.generic import GenericRecipe

    return GenericRecipe.for_finding(finding)


__all__ = ["Built", "Fix", "Recipe", "register", "get_recipe", "find_recipe", "REGISTRY"]
