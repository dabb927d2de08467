import torch


class NegKernel:
    def process_weights_after_loading(self, layer):
        layer.weight.data.neg_()

    def apply_weights(self, layer, x):
        return x @ layer.weight
