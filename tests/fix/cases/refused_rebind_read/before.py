import torch


class AttentionLayerBase(torch.nn.Module):
    """Named like vLLM's: the reload runs this layer's post-load last, with no copy-back."""


class UpProjection(AttentionLayerBase):
    def __init__(self):
        super().__init__()
        self.kv = torch.nn.Parameter(torch.empty(2, 3, 4), requires_grad=False)
        self.widths = []

    def process_weights_after_loading(self):
        self.w_uv = self.kv * 2
        # read between the store and its re-binding: on a local it would see another value
        self.widths.append(self.w_uv.shape[-1])
        self.w_uv = self.w_uv.permute(1, 2, 0)

    def forward(self, x):
        return torch.matmul(x, self.w_uv)
