from functools import partial

import torch


def permute(x, perm):
    return x[:, perm]


class PermKernel:
    def process_weights_after_loading(self, layer):
        perm = torch.argsort(layer.g_idx)
        self.act_perm = partial(permute, perm=perm)

    def apply_weights(self, layer, x):
        return self.act_perm(x) @ layer.weight
