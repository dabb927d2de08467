import torch


class SwapKernel:
    def process_weights_after_loading(self, layer):
        layer.weight.data = layer.weight.data.reshape(-1, 16).t().contiguous()

    def apply_weights(self, layer, x):
        return x @ layer.weight
