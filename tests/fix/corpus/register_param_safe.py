import torch


class SafeKernel:
    def process_weights_after_loading(self, layer):
        layer.weight.data.copy_(layer.weight.data * 2)

    def apply_weights(self, layer, x):
        return x @ layer.weight
