import torch


class AttentionLayerBase(torch.nn.Module):
    """Named like vLLM's: the reload runs this layer's post-load last, with no copy-back."""


def split_scale(w):
    scale = w.abs().amax(dim=-1, keepdim=True)
    return (w / scale).to(torch.float16), scale


class LatentProjection(AttentionLayerBase):
    def __init__(self):
        super().__init__()
        self.kv = torch.nn.Parameter(torch.empty(2, 3, 4), requires_grad=False)

    def process_weights_after_loading(self):
        w_k, w_k_scale = split_scale(self.kv)
        # (L, N, P) -> (N, L, P): the layer keeps transposed views
        w_k = w_k.transpose(0, 1)
        if getattr(self, "w_k", None) is not None:
            if (
                self.w_k.shape == w_k.shape
                and self.w_k.dtype == w_k.dtype
                and self.w_k.device == w_k.device
            ):
                self.w_k.copy_(w_k)
            else:
                self.w_k = w_k
        else:
            self.w_k = w_k
        w_k_scale = w_k_scale.transpose(0, 1)
        if getattr(self, "w_k_scale", None) is not None:
            if (
                self.w_k_scale.shape == w_k_scale.shape
                and self.w_k_scale.dtype == w_k_scale.dtype
                and self.w_k_scale.device == w_k_scale.device
            ):
                self.w_k_scale.copy_(w_k_scale)
            else:
                self.w_k_scale = w_k_scale
        else:
            self.w_k_scale = w_k_scale

    def forward(self, x):
        return torch.matmul(x, (self.w_k.float() * self.w_k_scale).transpose(1, 2))
