import torch
from torch import nn


def _swizzle(sf, rows):
    from accel_gemm_kernels.layout import to_mma_layout

    return to_mma_layout(sf, rows)


class BlockScaledKernel:
    def create_weights(self, layer, n):
        layer.register_parameter("w_sf", nn.Parameter(torch.empty(n, n), requires_grad=False))

    def process_weights_after_loading(self, layer):
        self.w_sf_mma = _swizzle(layer.w_sf, layer.w_sf.shape[0])

    def apply(self, layer, x):
        return torch.ops.accel.block_scaled_mm(x, layer.w_sf, self.w_sf_mma)
