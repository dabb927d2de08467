import torch


def to_mma(w: torch.Tensor) -> torch.Tensor:
    return w.t().contiguous()


class Experts:
    def __init__(self, n: int) -> None:
        self.n = n
        self.w_mma = None
        self.workspace = torch.empty(n * 16)

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        w_mma = to_mma(layer.w13_weight)
        if getattr(self, "w_mma", None) is not None:
            _copy_into_kept(self.w_mma, w_mma)
        else:
            self.w_mma = w_mma

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w_mma


class Kernel:
    def __init__(self, experts: Experts) -> None:
        self.experts = experts


class Method:
    def create_weights(self, layer: torch.nn.Module, n: int) -> None:
        layer.register_parameter("w13_weight", torch.nn.Parameter(torch.ones(n, n), requires_grad=False))

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        kernel = Kernel(Experts(4))
        if getattr(self, "kernel", None) is not None:
            _copy_into_kept(self.kernel, kernel)
        else:
            self.kernel = kernel
        self.kernel.experts.process_weights_after_loading(layer)

    def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return self.kernel.experts.apply(x)


def _copy_into_kept(kept, new, depth: int = 0) -> None:
    """Copy the tensors of `new`, rebuilt by a weight reload, into the tensors `kept` holds
    at the same attribute paths: the storage captured CUDA graphs read keeps its address."""
    if depth > 6 or kept is new:
        return
    if isinstance(kept, torch.Tensor) and isinstance(new, torch.Tensor):
        if (kept.shape, kept.dtype, kept.device) != (new.shape, new.dtype, new.device):
            raise ValueError(
                f"reloaded tensor {tuple(new.shape)}/{new.dtype} does not fit the kept "
                f"storage {tuple(kept.shape)}/{kept.dtype}"
            )
        with torch.no_grad():
            kept.copy_(new)
        return
    if type(kept) is not type(new):
        raise TypeError(f"reload built a {type(new).__name__} where a {type(kept).__name__} is kept")
    if not hasattr(kept, "__dict__") or not hasattr(new, "__dict__"):
        return
    if isinstance(new, (torch.nn.Module, type)):
        return
    held = vars(kept)
    for name, value in vars(new).items():
        if held.get(name) is not None and value is not None:
            _copy_into_kept(held[name], value, depth + 1)
