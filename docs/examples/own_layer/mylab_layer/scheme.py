"""A lab's linear layer whose scheme sits at `layer.scheme` (not `layer.quant_method`), with
two tensors its post-load keeps as plain attributes: two findings in one layer."""

import torch


def weight_loader(param: torch.Tensor, loaded: torch.Tensor) -> None:
    param.data.copy_(loaded)


class Int8Scheme:
    def create_weights(self, layer: torch.nn.Module, in_features: int, out_features: int):
        weight = torch.nn.Parameter(
            torch.empty(out_features, in_features, dtype=torch.int8), requires_grad=False
        )
        scale = torch.nn.Parameter(torch.empty(out_features), requires_grad=False)
        weight.weight_loader = weight_loader
        scale.weight_loader = weight_loader
        layer.register_parameter("weight", weight)
        layer.register_parameter("weight_scale", scale)

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.w_t = layer.weight.data.float().t().contiguous()
        layer.s_row = (layer.weight_scale.data * 2.0).contiguous()

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return (x @ layer.w_t) * layer.s_row


class SchemeLinear(torch.nn.Module):
    """The layer: it holds its scheme at `self.scheme` and calls it in forward."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.scheme = Int8Scheme()
        self.scheme.create_weights(self, in_features, out_features)

    def forward(self, x):
        return self.scheme.apply(self, x)
