import torch


class BranchKernel:
    def process_weights_after_loading(self, layer):
        if layer.weight.shape[0] > 128:
            self.ws = torch.empty(1024, device=layer.weight.device)
        else:
            self.ws = torch.empty(256, device=layer.weight.device)

    def apply_weights(self, layer, x):
        return x + self.ws[0]
