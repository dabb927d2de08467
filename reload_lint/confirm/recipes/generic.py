"""Generic fallback: a layer class with its own post-load hook and a forward.

Used when no family recipe matches. The class named by the finding's symbol must be importable
from the finding's path, be an ``nn.Module`` whose ``process_weights_after_loading`` and
``forward`` it defines or inherits, and be constructible without arguments. Its parameters at
construction are the checkpoint format (random weights, two seeds); the input is
``example_input()`` when the class provides one, else ``randn(4, in_features)``. Anything else
is reported inconclusive with the precise reason.
"""

from __future__ import annotations

import importlib

from reload_lint.confirm.recipes.base import Built, Recipe
from reload_lint.confirm.targets import symbol_class


def module_name_for(path: str) -> str:
    p = path.replace("\\", "/")
    if p.endswith(".py"):
        p = p[:-3]
    if p.endswith("/__init__"):
        p = p[: -len("/__init__")]
    for prefix in ("src/", "./"):
        if p.startswith(prefix):
            p = p[len(prefix) :]
    return p.replace("/", ".")


class GenericRecipe(Recipe):
    prefix = "generic:"
    family = "generic (post-load hook + forward)"

    def __init__(self, module: str, cls: str):
        self.module = module
        self.cls_name = cls
        self.name = f"{self.prefix}{module}:{cls}"

    @classmethod
    def from_name(cls, name: str) -> GenericRecipe:
        module, _, klass = name[len(cls.prefix) :].partition(":")
        return cls(module, klass)

    @classmethod
    def for_finding(cls, finding) -> tuple[GenericRecipe | None, str]:
        klass = symbol_class(finding)
        if klass is None:
            return None, (
                f"no recipe for {finding.symbol or finding.path} and the generic fallback needs "
                "a class (the finding's symbol is a free function)"
            )
        module = module_name_for(finding.path)
        try:
            mod = importlib.import_module(module)
        except Exception as exc:
            return None, (
                f"no recipe for {klass}; generic fallback cannot import {module}: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            )
        obj = getattr(mod, klass, None)
        if obj is None:
            return None, f"no recipe for {klass}; {module} has no attribute {klass}"
        why = cls._unsupported(obj)
        if why:
            return None, f"no recipe for {klass}; generic fallback: {why}"
        return cls(module, klass), ""

    @staticmethod
    def _unsupported(obj) -> str | None:
        try:
            import torch
        except ImportError:
            return "torch is not installed"
        if not isinstance(obj, type) or not issubclass(obj, torch.nn.Module):
            return f"{getattr(obj, '__name__', obj)} is not an nn.Module (needs a family recipe)"
        if not callable(getattr(obj, "process_weights_after_loading", None)):
            return f"{obj.__name__} has no process_weights_after_loading"
        try:
            obj()
        except Exception as exc:
            return f"{obj.__name__}() cannot be constructed without arguments ({exc})"
        return None

    def _cls(self):
        return getattr(importlib.import_module(self.module), self.cls_name)

    def construct(self, device: str) -> Built:
        layer = self._cls()()
        return Built(model=layer, layer=layer, forward=lambda x: layer(x), roots={"layer": layer})

    def checkpoint(self, seed: int, device: str) -> dict:
        import torch

        layer = self._cls()()
        g = torch.Generator().manual_seed(seed)
        out = {}
        for name, p in layer.named_parameters():
            if p.dtype.is_floating_point:
                t = torch.randn(p.shape, generator=g) * 0.5
            else:
                t = torch.randint(0, 16, p.shape, generator=g)
            out[name] = t.to(dtype=p.dtype, device=device)
        return out

    def example_input(self, device: str):
        import torch

        cls = self._cls()
        if hasattr(cls, "example_input"):
            return cls.example_input().to(device)
        layer = cls()
        n = getattr(layer, "in_features", None)
        if n is None:
            raise RuntimeError(f"{self.cls_name}: no example_input() and no in_features")
        g = torch.Generator().manual_seed(7)
        return torch.randn(4, n, generator=g).to(device)

    def post_load(self, module) -> bool:
        if type(module) is self._cls():
            module.process_weights_after_loading()
            return True
        return False
