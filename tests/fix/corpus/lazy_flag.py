import torch


class FlagExperts:
    def __init__(self):
        self._ready = False

    def apply(self, x):
        if not self._ready:
            self._tmp = torch.empty(x.shape[0], 32, device=x.device)
            self._ready = True
        return x + self._tmp[:, : x.shape[1]]


class Method:
    def process_weights_after_loading(self, layer):
        self.experts = FlagExperts()

    def apply(self, layer, x):
        return self.experts.apply(x)
