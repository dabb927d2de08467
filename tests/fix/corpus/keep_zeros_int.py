import torch


class LockKernel:
    def process_weights_after_loading(self, layer):
        n = layer.weight.shape[0]
        self.locks = torch.zeros(n // 64 + 1, dtype=torch.int32, device=layer.weight.device)

    def apply_weights(self, layer, x):
        return x + self.locks.sum()
