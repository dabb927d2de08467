import torch


class CacheKernel:
    def process_weights_after_loading(self, layer):
        cache = {}
        cache["w"] = layer.weight.t().contiguous()
        self.cache = cache

    def apply_weights(self, layer, x):
        return x @ self.cache["w"]
