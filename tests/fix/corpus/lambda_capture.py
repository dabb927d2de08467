import torch


class LambdaKernel:
    def process_weights_after_loading(self, layer):
        w_t = layer.weight.t().contiguous()
        self.mm = lambda x: x @ w_t

    def apply_weights(self, layer, x):
        return self.mm(x)
