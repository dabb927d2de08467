import torch


class AttentionLayerBase(torch.nn.Module):
    """Named like vLLM's: the reload runs this layer's post-load last, with no copy-back."""


class LatentAttention(AttentionLayerBase):
    def __init__(self) -> None:
        super().__init__()
        self._k_scale = torch.nn.Parameter(torch.ones(1), requires_grad=False)

    def process_weights_after_loading(self, act_dtype: torch.dtype) -> None:
        # the kernel takes the inverse scale ready-made
        k_scale_inv = self._k_scale.reciprocal().reshape(1)
        if getattr(self, "_k_scale_inv", None) is not None:
            if (
                self._k_scale_inv.shape == k_scale_inv.shape
                and self._k_scale_inv.dtype == k_scale_inv.dtype
                and self._k_scale_inv.device == k_scale_inv.device
            ):
                self._k_scale_inv.copy_(k_scale_inv)
            else:
                self.register_buffer("_k_scale_inv", k_scale_inv, persistent=False)
        else:
            self.register_buffer("_k_scale_inv", k_scale_inv, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self._k_scale_inv
