import torch
import torch.nn.functional as F


class PaddedMoEMethod:
    def create_weights(self, layer):
        layer.register_parameter("w13", torch.nn.Parameter(torch.empty(4, 4), requires_grad=False))

    def process_weights_after_loading(self, layer):
        # pad for the kernel
        layer.w13.data = F.pad(layer.w13.data, (0, 4))

    def apply(self, layer, x):
        return x @ layer.w13
