import torch


class AttentionLayerBase(torch.nn.Module):
    """Named like vLLM's: the reload runs this layer's post-load last, with no copy-back."""


class MLALike(AttentionLayerBase):
    def __init__(self):
        super().__init__()
        self.kv = torch.nn.Parameter(torch.empty(4, 4), requires_grad=False)

    def process_weights_after_loading(self, act_dtype):
        self.W_UV = self.kv.t().contiguous()

    def forward(self, x):
        return x @ self.W_UV
