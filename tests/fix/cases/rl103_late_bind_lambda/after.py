import torch


class PermKernel:
    def process_weights_after_loading(self, layer):
        perm = torch.argsort(layer.g_idx)
        layer.register_buffer("act_perm_perm", perm)
        self.act_perm = lambda x: x[:, layer.act_perm_perm]

    def apply_weights(self, layer, x):
        return self.act_perm(x) @ layer.weight
