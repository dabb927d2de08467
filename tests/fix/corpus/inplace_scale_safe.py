import torch


class InPlaceKernel:
    def process_weights_after_loading(self, layer):
        with torch.no_grad():
            layer.weight_scale.mul_(0.5)

    def apply_weights(self, layer, x):
        return x * layer.weight_scale
