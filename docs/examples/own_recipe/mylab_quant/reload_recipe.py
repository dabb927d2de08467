"""reload-lint harness recipe for mylab_quant's Int8LinearMethod (`confirm --recipes`)."""

import torch

from mylab_quant.int8_linear import Int8LinearMethod
from reload_lint.confirm import fixes as fx
from reload_lint.confirm.recipes import Built, Fix, Recipe, register

IN, OUT = 64, 32


class Int8Linear(torch.nn.Module):
    """The smallest layer that drives the method: create_weights, then apply in forward."""

    def __init__(self):
        super().__init__()
        self.quant_method = Int8LinearMethod()
        self.quant_method.create_weights(self, IN, OUT)

    def forward(self, x):
        return self.quant_method.apply(self, x)


@register
class Int8LinearRecipe(Recipe):
    name = "mylab-int8-linear"
    family = "mylab int8 weight-only linear"
    paths = ("mylab_quant/int8_linear.py",)  # findings in this file ...
    classes = ("Int8LinearMethod",)  # ... whose symbol is in this class

    def construct(self, device: str) -> Built:
        layer = Int8Linear()
        return Built(model=layer, layer=layer, forward=layer, component="Int8LinearMethod")

    def checkpoint(self, seed: int, device: str) -> dict:
        g = torch.Generator().manual_seed(seed)
        w = torch.randint(-127, 128, (OUT, IN), generator=g, dtype=torch.int8)
        s = torch.rand(OUT, generator=g) / 64 + 1e-3
        return {"weight": w.to(device), "weight_scale": s.to(device)}

    def example_input(self, device: str):
        g = torch.Generator().manual_seed(7)
        return torch.randn(4, IN, generator=g).to(device)

    def fixes(self) -> dict:
        # the runtime stand-in where no codemod patch is given: register the tensor so the
        # reload's copy-back writes the new values into the captured storage
        return {
            "layer.w_t": Fix(
                "layer.w_t",
                "registration",
                lambda: fx.register(Int8LinearMethod, "layer.w_t"),
                "register layer.w_t as a parameter the copy-back preserves",
            )
        }
