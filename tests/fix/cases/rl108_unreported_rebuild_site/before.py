import torch


class Experts:
    def __init__(self, n):
        self.n = n
        self._scratch = None

    def scratch(self):
        if self._scratch is None:
            self._scratch = torch.empty(16)
        return self._scratch

    def run(self, x):
        return x + self.scratch()


class MoEMethod:
    def process_weights_after_loading(self, layer):
        self.experts = Experts(4)

    def apply(self, layer, x):
        return self.experts.run(x)
