import torch


class PermKernel:
    def process_weights_after_loading(self, layer):
        perm = torch.argsort(layer.g_idx)
        layer.register_buffer("act_perm_index", perm)
        self.act_perm = lambda *args, **kwargs: torch.index_select(
            *args, dim=1, index=layer.act_perm_index, **kwargs
        )

    def apply_weights(self, layer, x):
        return self.act_perm(x) @ layer.weight
