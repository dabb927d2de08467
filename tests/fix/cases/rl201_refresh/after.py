import torch


class GateBiasImpl:
    """Holds the layer's gate-bias Parameter; its kernel reads them in float32."""

    def __init__(self, gate_bias: torch.Tensor | None = None) -> None:
        self.gate_bias = gate_bias

    # the kernel wants float32
    def process_weights_after_loading(self, act_dtype: torch.dtype) -> None:
        if getattr(self, "_gate_bias_source", None) is None:
            self._gate_bias_source = self.gate_bias
        if self.gate_bias is not None and self.gate_bias.dtype != torch.float32:
            self.gate_bias = self.gate_bias.float()  # cast once
        if (
            self._gate_bias_source is not None
            and self.gate_bias is not None
            and self.gate_bias is not self._gate_bias_source
        ):
            self.gate_bias.copy_(self._gate_bias_source)

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        return q + self.gate_bias
