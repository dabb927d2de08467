import torch
import torch.nn.functional as F


def weight_loader(param, loaded):
    param.data.copy_(loaded)


class PaddedKernel:
    def create_weights(self, layer, n, k):
        w = torch.nn.Parameter(torch.empty(n, k), requires_grad=False)
        w.weight_loader = weight_loader
        layer.register_parameter("weight", w)

    def process_weights_after_loading(self, layer):
        # the kernel wants K padded: the loaded storage is swapped for a larger one
        layer.weight.data = F.pad(layer.weight.data, (0, 16))

    def apply_weights(self, layer, x):
        return F.pad(x, (0, 16)) @ layer.weight.t()
