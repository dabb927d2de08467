import torch


class UnreadKernel:
    def process_weights_after_loading(self, layer):
        self.debug_copy = layer.weight.clone()

    def apply_weights(self, layer, x):
        return x @ layer.weight
