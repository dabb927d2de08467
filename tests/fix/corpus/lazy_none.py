import torch


class LazyExperts:
    def __init__(self):
        self._scratch = None

    def apply(self, x):
        if self._scratch is None:
            self._scratch = torch.empty(x.shape[0], 128, device=x.device)
        return x + self._scratch[:, : x.shape[1]]


class Method:
    def process_weights_after_loading(self, layer):
        self.experts = LazyExperts()

    def apply(self, layer, x):
        return self.experts.apply(x)
