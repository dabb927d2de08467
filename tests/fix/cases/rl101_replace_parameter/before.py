import torch

from pkg.layer_utils import replace_parameter


class PackedMethod:
    def process_weights_after_loading(self, layer):
        replace_parameter(layer, "w_q", layer.w_q.t().contiguous())


class PlainMethod:
    def process_weights_after_loading(self, layer):
        layer.w_q = layer.weight.t().contiguous()

    def apply(self, layer, x):
        return x @ layer.w_q
