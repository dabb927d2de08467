import torch


class EmptyLikeKernel:
    def process_weights_after_loading(self, layer):
        self.out_buf = torch.empty_like(layer.weight)

    def apply_weights(self, layer, x):
        return torch.mm(x, layer.weight, out=self.out_buf)
