import torch


class QuantConfig:
    def __init__(self, scale):
        self.inv_scale = torch.reciprocal(scale)


class Kernel:
    def __init__(self, config):
        self.config = config
        self.strides = torch.full((4,), 16)

    def run(self, x):
        return x * self.config.inv_scale + self.strides


class MoEMethod:
    def process_weights_after_loading(self, layer):
        self.moe_quant_config = QuantConfig(layer.w13_scale)
        self.moe_kernel = Kernel(self.moe_quant_config)

    def apply(self, layer, x):
        return self.moe_kernel.run(x)
