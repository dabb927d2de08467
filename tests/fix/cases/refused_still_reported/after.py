import torch


class PermKernel:
    def process_weights_after_loading(self, layer):
        perm = torch.argsort(layer.g_idx)
        # the default binds the tensor when the lambda is made: the late-bind codemod reads
        # `perm` in the body from the layer, the default still captures it
        self.act_perm = lambda x, p=perm: x[:, p] if perm is not None else x

    def apply_weights(self, layer, x):
        return self.act_perm(x) @ layer.weight
