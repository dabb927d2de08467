import torch


class AttentionLayerBase(torch.nn.Module):
    """Named like vLLM's: the reload runs this layer's post-load last, with no copy-back."""


class MLALike(AttentionLayerBase):
    def __init__(self):
        super().__init__()
        self.kv = torch.nn.Parameter(torch.empty(4, 4), requires_grad=False)

    def process_weights_after_loading(self, act_dtype):
        W_UV = self.kv.t().contiguous()
        if getattr(self, "W_UV", None) is not None:
            if (
                self.W_UV.shape == W_UV.shape
                and self.W_UV.dtype == W_UV.dtype
                and self.W_UV.device == W_UV.device
            ):
                self.W_UV.copy_(W_UV)
            else:
                self.W_UV = W_UV
        else:
            self.W_UV = W_UV

    def forward(self, x):
        return x @ self.W_UV
