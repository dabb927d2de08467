"""What library calls do to tensors: the built-in summaries for torch and friends.

Project functions get summaries computed from their bodies (analysis/interp.py); these rows
cover the callees we never read.
"""

from __future__ import annotations

from functools import lru_cache

# Tensor methods that return a view of the receiver's storage (no new storage).
VIEW_METHODS = frozenset(
    {
        "view",
        "view_as",
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "narrow",
        "squeeze",
        "unsqueeze",
        "detach",
        "as_strided",
        "select",
        "unflatten",
        "unfold",
        "diagonal",
        "movedim",
        "swapaxes",
        "swapdims",
        "real",
        "imag",
        "requires_grad_",
        "reshape",
        "flatten",
        "untyped_storage",
        "storage",
    }
)
# Views whose result is in general not contiguous (strides permuted, broadcast or skipping).
STRIDING_VIEWS = frozenset(
    {
        "t",
        "transpose",
        "permute",
        "expand",
        "expand_as",
        "narrow",
        "select",
        "as_strided",
        "unfold",
        "diagonal",
        "movedim",
        "swapaxes",
        "swapdims",
        "T",
        "mT",
        "H",
        "mH",
        "torch.t",
        "torch.transpose",
        "torch.permute",
        "torch.narrow",
        "torch.select",
        "torch.as_strided",
        "torch.movedim",
    }
)
# A view of a contiguous input, a copy (new storage) of a non-contiguous one.
VIEW_OR_COPY = frozenset({"reshape", "flatten", "torch.reshape", "torch.flatten"})
# Tensor methods returning several views.
VIEW_TUPLE_METHODS = frozenset({"split", "chunk", "unbind", "tensor_split"})
# View-like attributes.
VIEW_ATTRS = frozenset({"data", "T", "mT", "H", "mH"})
# Tensor methods/attributes that return Python scalars, shapes or metadata, not tensors.
SCALAR_METHODS = frozenset(
    {
        "item",
        "tolist",
        "size",
        "dim",
        "ndimension",
        "numel",
        "nelement",
        "data_ptr",
        "stride",
        "storage_offset",
        "is_contiguous",
        "element_size",
        "get_device",
        "is_floating_point",
        "is_complex",
        "equal",
        "allclose",
        "any",
        "all",
        "register_hook",
        "numpy",
        "nbytes",
        "itemsize",
    }
)
SCALAR_ATTRS = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "ndim",
        "is_cuda",
        "requires_grad",
        "layout",
        "is_meta",
        "weight_loader",
        "grad",
        "is_leaf",
        "names",
    }
)
# Shape-changing ops that make a `.data =` swap move storage under the vLLM contract.
# ops whose result's shape depends on the input's values (the size of a selection)
DATA_SHAPED = frozenset(
    {
        "nonzero",
        "torch.nonzero",
        "argwhere",
        "torch.argwhere",
        "masked_select",
        "torch.masked_select",
        "unique",
        "torch.unique",
        "unique_consecutive",
        "torch.unique_consecutive",
        "nonzero_static",
    }
)
SHAPE_CHANGING = frozenset(
    {
        "torch.nn.functional.pad",
        "torch.cat",
        "torch.concat",
        "torch.concatenate",
        "torch.stack",
        "torch.narrow",
        "pad",
        # a copying reshape/flatten (non-contiguous input) changes the shape as well
        "reshape",
        "flatten",
        "torch.reshape",
        "torch.flatten",
    }
)
# torch.* callables that do not produce tensors.
TORCH_NON_TENSOR_PREFIXES = (
    "torch.cuda.",
    "torch.distributed.",
    "torch.compiler.",
    "torch.library.",
    "torch._dynamo.",
    "torch.fx.",
    "torch.backends.",
    "torch.utils.",
    "torch.version.",
    "torch.accelerator.",
    "torch.jit.",
)
TORCH_NON_TENSOR = frozenset(
    {
        "torch.device",
        "torch.dtype",
        "torch.Size",
        "torch.finfo",
        "torch.iinfo",
        "torch.is_tensor",
        "torch.is_floating_point",
        "torch.no_grad",
        "torch.inference_mode",
        "torch.enable_grad",
        "torch.get_default_dtype",
        "torch.set_default_dtype",
        "torch.compile",
        "torch.manual_seed",
        "torch.Generator",
        "torch.Stream",
        "torch.Event",
        "torch.numel",
        "torch.is_grad_enabled",
        "torch.get_device",
        "torch.promote_types",
        "torch.result_type",
        "torch.can_cast",
        "torch.equal",
        "torch.allclose",
        "torch.is_inference_mode_enabled",
        "torch.set_grad_enabled",
    }
)
# Factories of a tensor from Python data (`torch.tensor(1.0)`): with no `device=` the result
# is in host memory (post-load runs outside the device context the loaders build the model
# under); given a tensor, `torch.tensor`/`as_tensor` keep its device instead.
HOST_FACTORIES = frozenset({"tensor", "as_tensor", "scalar_tensor", "from_numpy"})
TORCH_VIEW_FUNCS = frozenset(
    {
        "torch.t",
        "torch.transpose",
        "torch.permute",
        "torch.squeeze",
        "torch.unsqueeze",
        "torch.narrow",
        "torch.select",
        "torch.as_strided",
        "torch.view_as_real",
        "torch.view_as_complex",
        "torch.movedim",
        "torch.flatten_view",
    }
)
PARTIAL = frozenset({"functools.partial", "partial", "functools.partialmethod"})
BUILTIN_SCALAR = frozenset(
    {
        "len",
        "int",
        "float",
        "bool",
        "str",
        "max",
        "min",
        "range",
        "print",
        "isinstance",
        "issubclass",
        "hasattr",
        "callable",
        "id",
        "hash",
        "type",
        "repr",
        "abs",
        "round",
        "sum",
        "any",
        "all",
        "enumerate",
        "zip",
        "sorted",
        "reversed",
        "next",
        "iter",
        "divmod",
        "format",
        "vars",
        "dir",
        "super",
        "object",
        "dict",
        "list",
        "tuple",
        "set",
        "frozenset",
        "open",
        "logger.info",
        "logger.warning",
        "logger.debug",
        "logger.warning_once",
        "logger.info_once",
    }
)


@lru_cache(maxsize=8192)  # pure; the analysis asks about the same names many times
def is_torch_tensor_func(qualified: str) -> bool:
    """torch.* / torch.ops.* / torch.nn.functional.* calls that return a new tensor."""
    if not qualified.startswith("torch."):
        return False
    if qualified in TORCH_NON_TENSOR or qualified.startswith(TORCH_NON_TENSOR_PREFIXES):
        return False
    if qualified.startswith("torch.nn.") and not qualified.startswith("torch.nn.functional."):
        return False
    return True


@lru_cache(maxsize=8192)
def is_custom_op(qualified: str) -> bool:
    """vLLM/SGLang custom ops: `_custom_ops.x`, `torch.ops.ns.x`, `*_C.x`, `sgl_kernel.x`."""
    parts = qualified.split(".")
    if qualified.startswith("torch.ops."):
        return True
    return any(
        p in ("_custom_ops", "_C", "_moe_C", "sgl_kernel", "_rocm_C", "custom_ops")
        for p in parts[:-1]
    )


# Method names that, called on a value of unknown type, almost always mean "this is a tensor".
TENSOR_ONLY_METHODS = frozenset(
    {
        "reshape",
        "view",
        "contiguous",
        "float",
        "half",
        "bfloat16",
        "to",
        "clone",
        "t",
        "transpose",
        "permute",
        "flatten",
        "unsqueeze",
        "squeeze",
        "repeat",
        "repeat_interleave",
        "cuda",
        "argsort",
        "reciprocal",
        "expand",
        "narrow",
        "detach",
        "type_as",
        "view_as",
    }
)

# dtype casts: a new tensor unless the receiver already has the dtype.
CAST_METHODS = frozenset({"float", "half", "bfloat16", "double", "to", "type", "int", "long"})
