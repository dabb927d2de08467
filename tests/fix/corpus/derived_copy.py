import torch


class DerivedKernel:
    def process_weights_after_loading(self, layer):
        self.w_t = layer.weight.t().contiguous()

    def apply_weights(self, layer, x):
        return x @ self.w_t
