import torch


class Router:
    def __init__(self):
        self.bufs = {}

    def process_weights_after_loading(self, layer):
        self.bufs["w"] = torch.empty(16, device=layer.weight.device)

    def apply(self, layer, x):
        return x + self.bufs["w"]
