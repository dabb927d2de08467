import torch


class ScalarKernel:
    def process_weights_after_loading(self, layer):
        self.n = int(layer.weight.shape[0])
        self.dtype = torch.float16

    def apply_weights(self, layer, x):
        return x[:, : self.n].to(self.dtype)
