import torch


class Experts:
    def __init__(self, scale):
        self.strides = torch.full((4,), 16)
        self.scale = scale

    def run(self, x):
        return x * self.scale + self.strides


class MoEMethod:
    def process_weights_after_loading(self, layer):
        self.experts = Experts(layer.w_scale)

    def apply(self, layer, x):
        return self.experts.run(x)
