import torch


class ScaleSlot:
    def __init__(self, scale: torch.Tensor | None = None) -> None:
        self.scale = scale


class KernelConfig:
    def __init__(self) -> None:
        self.w1 = ScaleSlot()


class GroupedExperts:
    def __init__(self) -> None:
        self.kernel_config = KernelConfig()

    def create_weights(self, layer: torch.nn.Module, e: int) -> None:
        scale = torch.nn.Parameter(torch.ones(e), requires_grad=False)
        layer.register_parameter("w13_scale", scale)

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        scale = layer.w13_scale  # the config reads it at apply
        if getattr(self.kernel_config.w1, "scale", None) is not None:
            if (
                self.kernel_config.w1.scale.shape == scale.shape
                and self.kernel_config.w1.scale.dtype == scale.dtype
                and self.kernel_config.w1.scale.device == scale.device
            ):
                self.kernel_config.w1.scale.copy_(scale)
            else:
                self.kernel_config.w1.scale = scale
        else:
            self.kernel_config.w1.scale = scale
        # the layer's scale is folded to one value after the config took it
        folded = layer.w13_scale.max().expand(1)
        layer.w13_scale = torch.nn.Parameter(folded, requires_grad=False)

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return x * self.kernel_config.w1.scale
