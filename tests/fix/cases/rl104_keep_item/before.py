import torch


class GainTable:
    def __init__(self) -> None:
        self._gains: dict[str, torch.Tensor] = {}

    def _gain(self, name: str, scale: torch.Tensor) -> torch.Tensor:
        gain = torch.reciprocal(scale)
        self._gains[name] = gain  # one per input scale the kernels read
        return gain

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        self._gain("w13", layer.w13_input_scale)

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return x * self._gains["w13"]
