"""reload-lint harness recipe for mylab_layer's SchemeLinear (`confirm --recipes`). No
`fixes()`: the fixed side proves check's codemods, every one of the layer's at once."""

import torch

from mylab_layer.scheme import SchemeLinear
from reload_lint.confirm.recipes import Built, Recipe, register

IN, OUT = 64, 32


@register
class SchemeLinearRecipe(Recipe):
    name = "mylab-scheme-linear"
    family = "mylab int8 linear, scheme at layer.scheme"
    paths = ("mylab_layer/scheme.py",)
    classes = ("Int8Scheme",)

    def construct(self, device: str) -> Built:
        layer = SchemeLinear(IN, OUT)
        return Built(model=layer, layer=layer, forward=layer)

    def checkpoint(self, seed: int, device: str) -> dict:
        g = torch.Generator().manual_seed(seed)
        w = torch.randint(-127, 128, (OUT, IN), generator=g, dtype=torch.int8)
        s = torch.rand(OUT, generator=g) / 64 + 1e-3
        return {"weight": w.to(device), "weight_scale": s.to(device)}

    def example_input(self, device: str):
        g = torch.Generator().manual_seed(7)
        return torch.randn(4, IN, generator=g).to(device)
