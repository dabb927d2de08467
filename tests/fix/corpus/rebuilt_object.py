import torch


class Fused:
    def __init__(self, n):
        self.strides = torch.full((n,), 16)

    def run(self, x):
        return x + self.strides


class Method:
    def process_weights_after_loading(self, layer):
        self.fused = Fused(layer.w13_weight.shape[0])

    def apply(self, layer, x):
        return self.fused.run(x)
