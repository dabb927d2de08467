import torch


class ClosureKernel:
    def process_weights_after_loading(self, layer):
        scale = layer.weight_scale.float() * 2
        self.scaled = lambda x: x * scale

    def apply_weights(self, layer, x):
        return self.scaled(x)
