import torch


class ListKernel:
    def process_weights_after_loading(self, layer):
        self.bufs = [torch.empty(8, device=layer.weight.device) for _ in range(2)]

    def apply_weights(self, layer, x):
        return x + self.bufs[0]
