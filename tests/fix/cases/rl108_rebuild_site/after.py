import torch


class Experts:
    def __init__(self, n):
        self.buf = torch.empty(n)
        self._scratch = None

    def scratch(self):
        if self._scratch is None:
            self._scratch = torch.empty(16)
        return self._scratch

    def run(self, x):
        return x + self.buf + self.scratch()


class MoEMethod:
    def process_weights_after_loading(self, layer):
        experts = Experts(4)
        if getattr(self, "experts", None) is not None:
            _copy_into_kept(self.experts, experts)
        else:
            self.experts = experts

    def apply(self, layer, x):
        return self.experts.run(x)


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
