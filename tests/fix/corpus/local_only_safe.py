import torch


class LocalKernel:
    def process_weights_after_loading(self, layer):
        tmp = torch.empty(4, device=layer.weight.device)
        tmp.zero_()
        layer.weight.data.add_(tmp.sum())

    def apply_weights(self, layer, x):
        return x @ layer.weight
