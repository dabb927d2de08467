import torch


def quantize(w):
    return w.to(torch.int8), w.abs().amax(dim=-1)


class MLALike(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.kv = torch.nn.Parameter(torch.empty(4, 4), requires_grad=False)

    def process_weights_after_loading(self):
        W_K, W_K_scale = quantize(
            self.kv.t()
        )
        self.register_buffer("W_K", W_K)
        self.register_buffer("W_K_scale", W_K_scale)

    def forward(self, x):
        return (x @ self.W_K.float()) * self.W_K_scale
