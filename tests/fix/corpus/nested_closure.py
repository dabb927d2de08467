import torch


class NestedKernel:
    def process_weights_after_loading(self, layer):
        perm = torch.argsort(layer.g_idx)

        def act(x):
            return x[:, perm]

        self.act = act

    def apply_weights(self, layer, x):
        return self.act(x) @ layer.weight
