import torch


class Base:
    def process_weights_after_loading(self, layer):
        self.ready = True


class Child(Base):
    def process_weights_after_loading(self, layer):
        super().process_weights_after_loading(layer)
        self.zp = torch.zeros(layer.weight.shape[0], device=layer.weight.device)

    def apply_weights(self, layer, x):
        return x - self.zp
