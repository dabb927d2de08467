import torch


class BaseKernel:
    def process_weights_after_loading(self, layer):
        pass


class PluginKernel(BaseKernel):
    def process_weights_after_loading(self, layer):
        self.workspace = torch.zeros(64, dtype=torch.int32, device=layer.weight.device)

    def apply_weights(self, layer, x):
        return x + self.workspace[: x.shape[-1]]
