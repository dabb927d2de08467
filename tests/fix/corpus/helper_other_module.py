import torch


def make_workspace(device):
    return torch.zeros(256, dtype=torch.uint8, device=device)


class HelperKernel:
    def process_weights_after_loading(self, layer):
        self.workspace = make_workspace(layer.weight.device)

    def apply_weights(self, layer, x):
        return x + self.workspace[0]
