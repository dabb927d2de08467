import torch


class TransposeMethod:
    def create_weights(self, layer):
        w = torch.nn.Parameter(torch.empty(4, 4), requires_grad=False)
        layer.register_parameter("weight", w)

    def process_weights_after_loading(self, layer):
        # the kernel wants the transposed weight
        layer.register_buffer("weight_t", layer.weight.t().contiguous())  # read by apply

    def apply(self, layer, x):
        return x @ layer.weight_t
