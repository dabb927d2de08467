import torch


class Inner:
    pass


class OuterKernel:
    def __init__(self):
        self.inner = Inner()

    def process_weights_after_loading(self, layer):
        self.inner.ws = torch.empty(32, device=layer.weight.device)

    def apply_weights(self, layer, x):
        return x + self.inner.ws[0]
