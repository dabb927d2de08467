import torch


def gather_cols(x, order):
    return torch.index_select(x, 1, order)


class ReorderKernel:
    def process_weights_after_loading(self, layer):
        if self.config.reorder:
            order = torch.argsort(layer.g_idx).to(torch.int)
            layer.register_buffer("reorder_order", order)
            self.reorder = lambda x: x[:, layer.reorder_order]
            if self.config.fast_gather:
                layer.register_buffer("reorder_order", order)
                self.reorder = lambda *args, **kwargs: gather_cols(
                    *args, order=layer.reorder_order, **kwargs
                )

    def apply_weights(self, layer, x):
        return self.reorder(x) @ layer.weight
