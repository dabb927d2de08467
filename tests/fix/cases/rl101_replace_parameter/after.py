import torch

from pkg.layer_utils import replace_parameter
from pkg.utils import replace_parameter as replace_parameter_prefer_copy


class PackedMethod:
    def process_weights_after_loading(self, layer):
        replace_parameter(layer, "w_q", layer.w_q.t().contiguous())


class PlainMethod:
    def process_weights_after_loading(self, layer):
        replace_parameter_prefer_copy(layer, "w_q", layer.weight.t().contiguous(), prefer_copy=True)

    def apply(self, layer, x):
        return x @ layer.w_q
