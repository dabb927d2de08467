import torch


class CopyKernel:
    def process_weights_after_loading(self, layer):
        new = layer.weight_scale.data * 0.5
        layer.weight_scale.data.copy_(new)

    def apply_weights(self, layer, x):
        return x * layer.weight_scale
