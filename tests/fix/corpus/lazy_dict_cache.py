import torch


class DictLazy:
    def __init__(self):
        self._bufs = {}

    def apply(self, x):
        n = x.shape[0]
        if n not in self._bufs:
            self._bufs[n] = torch.empty(n, 16, device=x.device)
        return x + self._bufs[n][:, : x.shape[1]]


class Method:
    def process_weights_after_loading(self, layer):
        self.impl = DictLazy()

    def apply(self, layer, x):
        return self.impl.apply(x)
