import torch


def to_mma(w: torch.Tensor) -> torch.Tensor:
    return w.t().contiguous()


class Experts:
    def __init__(self, n: int) -> None:
        self.n = n
        self.w_mma = None
        self.workspace = torch.empty(n * 16)

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        self.w_mma = to_mma(layer.w13_weight)

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w_mma


class Kernel:
    def __init__(self, experts: Experts) -> None:
        self.experts = experts


class Method:
    def create_weights(self, layer: torch.nn.Module, n: int) -> None:
        layer.register_parameter("w13_weight", torch.nn.Parameter(torch.ones(n, n), requires_grad=False))

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        self.kernel = Kernel(Experts(4))
        self.kernel.experts.process_weights_after_loading(layer)

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return self.kernel.experts.apply(x)
