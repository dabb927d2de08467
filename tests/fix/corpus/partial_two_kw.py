from functools import partial

import torch


def gemm(x, w, s):
    return (x @ w) * s


class TwoKwKernel:
    def process_weights_after_loading(self, layer):
        w_t = layer.weight.t().contiguous()
        self.run = partial(gemm, w=w_t, s=layer.weight_scale)

    def apply_weights(self, layer, x):
        return self.run(x)
