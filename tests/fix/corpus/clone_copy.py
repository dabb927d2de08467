import torch


class CloneKernel:
    def process_weights_after_loading(self, layer):
        self.bias_copy = layer.bias.clone()

    def apply_weights(self, layer, x):
        return x + self.bias_copy
