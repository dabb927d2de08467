import torch


class SinkKernel:
    def process_weights_after_loading(self, layer):
        self.sinks = layer.sinks
        self.sinks = self.sinks.to(torch.float32)

    def apply_weights(self, layer, x):
        return x + self.sinks
