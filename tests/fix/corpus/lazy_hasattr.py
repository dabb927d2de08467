import torch


class HasattrRunner:
    def __call__(self, x):
        if not hasattr(self, "_buf"):
            self._buf = torch.empty(x.shape[0], 64, device=x.device)
        return x + self._buf[:, : x.shape[1]]


class Method:
    def process_weights_after_loading(self, layer):
        self.runner = HasattrRunner()

    def apply(self, layer, x):
        return self.runner(x)
