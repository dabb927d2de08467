import torch


def split(w):
    return w[0].clone(), w[1].clone()


class TupleKernel:
    def process_weights_after_loading(self, layer):
        self.w_a, self.w_b = split(layer.weight)

    def apply_weights(self, layer, x):
        return x @ self.w_a + x @ self.w_b
