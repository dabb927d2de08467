import torch


class InitKernel:
    def __init__(self, n):
        self.workspace = torch.zeros(n)

    def apply_weights(self, layer, x):
        return x + self.workspace[0]
