"""A lab's own int8 weight-only linear method, laid out like a vLLM quant method."""

import torch


def weight_loader(param: torch.Tensor, loaded: torch.Tensor) -> None:
    param.data.copy_(loaded)


class Int8LinearMethod:
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
        # the kernel wants the weight transposed and dequantized once
        layer.w_t = (layer.weight.data.float() * layer.weight_scale.data[:, None]).t().contiguous()

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return x @ layer.w_t
