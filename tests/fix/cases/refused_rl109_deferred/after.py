import torch


class AttentionLayerBase(torch.nn.Module):
    """Named like vLLM's: the reload runs this layer's post-load last, with no copy-back."""


class MLALike(AttentionLayerBase):
    def __init__(self):
        super().__init__()
        self._q_scale = torch.nn.Parameter(torch.ones(1), requires_grad=False)

    def process_weights_after_loading(self, act_dtype):
        # Precompute the reciprocal once.
        self.register_buffer(
            "_q_scale_inv", self._q_scale.reciprocal().reshape(1), persistent=False
        )

    def forward(self, x):
        return x * self._q_scale_inv
