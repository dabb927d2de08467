import torch


class GateBiasImpl:
    """Holds the layer's gate-bias Parameter; its kernel reads them in float32."""

    def __init__(self, gate_bias: torch.Tensor | None = None) -> None:
        self.gate_bias = gate_bias

    # the kernel wants float32
    def process_weights_after_loading(self, act_dtype: torch.dtype) -> None:
        if self.gate_bias is not None and self.gate_bias.dtype != torch.float32:
            self.gate_bias = self.gate_bias.float()  # cast once

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return q + self.gate_bias
