import torch


class W8A8LikeMethod:
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        self.in_scale = layer.input_scale.clone()
        delattr(layer, "input_scale")

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return x * self.in_scale
