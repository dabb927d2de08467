import torch


class Runner:
    def __init__(self, n):
        self.offsets = torch.arange(n)

    def run(self, x):
        return x + self.offsets


def build(layer):
    return Runner(layer.w13_weight.shape[0])


class Method:
    def process_weights_after_loading(self, layer):
        self.runner = build(layer)

    def apply(self, layer, x):
        return self.runner.run(x)
