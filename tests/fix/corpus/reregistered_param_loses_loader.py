import torch
import torch.nn.functional as F


def weight_loader(param, loaded):
    param.data.copy_(loaded)


class PaddedRepackKernel:
    def create_weights(self, layer, n, k):
        w = torch.nn.Parameter(torch.empty(n, k), requires_grad=False)
        w.weight_loader = weight_loader
        layer.register_parameter("weight", w)

    def process_weights_after_loading(self, layer):
        # pad K for the kernel and re-register: the new Parameter has no weight_loader and
        # not the checkpoint's shape, so an in-place update cannot load into it
        w = F.pad(layer.weight.data, (0, 16))
        layer.weight = torch.nn.Parameter(w, requires_grad=False)

    def apply_weights(self, layer, x):
        return F.pad(x, (0, 16)) @ layer.weight.t()
