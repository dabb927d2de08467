import torch


def weight_loader(param, loaded):
    param.data.copy_(loaded)


class PrunedExpertsKernel:
    def create_weights(self, layer, n):
        live = torch.nn.Parameter(torch.empty(n), requires_grad=False)
        live.weight_loader = weight_loader
        layer.register_parameter("live", live)

    def process_weights_after_loading(self, layer):
        # the experts kept are the ones whose gate is set: how many depends on the checkpoint
        layer.live.data = layer.live.data.nonzero().flatten()

    def apply_weights(self, layer, x):
        return x[:, layer.live]
