"""Reuse the rebuilt object's storage: the post-load builds the object again on every reload
(a fused-MoE kernel, a quant config, a triton weight wrapper); the object the first post-load
stored is kept, and the rebuilt one's tensors are copied into the kept one's tensors at the
same attribute paths, so the storage captured CUDA graphs read stays put and holds the new
values. State the kept object built lazily on its first forward (a permute scratch) stays.

    moe_kernel = make_fp8_moe_kernel(...)
    if getattr(self, "moe_kernel", None) is not None:
        _copy_into_kept(self.moe_kernel, moe_kernel)
    else:
        self.moe_kernel = moe_kernel

`_copy_into_kept` is added once at the end of the module (vLLM has no such helper; the runner's
`reuse_rebuilt` fix does the same at runtime). A reload whose tensors no longer fit (another
shape, dtype or device) raises instead of rebinding silently.

Applicability `unsafe`: fields of the kept object that are not tensors stay as the first
post-load set them.
"""

from __future__ import annotations

from reload_lint.fix.base import Plan, Store
from reload_lint.fix.model import UNSAFE

HELPER = "_copy_into_kept"

HELPER_SOURCE = '''

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
'''


def plan(store: Store, ind: str, what: str) -> Plan:
    t, v, b, a = store.target, store.value, store.base, store.attr
    code = (
        f'if getattr({b}, "{a}", None) is not None:\n'
        f"{ind}{HELPER}({t}, {v})\n"
        f"else:\n"
        f"{ind}{t} = {v}\n"
    )
    return Plan(
        shape="keep_object",
        applicability=UNSAFE,
        description=(
            f"keep the {what} `{t}` holds from the first load and copy the rebuilt one's "
            f"tensors into its storage (`{HELPER}`, added to the module)"
        ),
        code=code,
        imports=[("", "torch", None)],
        helpers=[(HELPER, HELPER_SOURCE)],
    )
