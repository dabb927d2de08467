"""Synthetic checkpoints for layers built by vLLM's ``create_weights``.

The parameters a quant method registers *are* the checkpoint format (the layerwise reload
records exactly these as its restore metadata). A checkpoint is therefore derived from the
layer itself: one tensor per parameter (per expert and shard for a FusedMoE), with values drawn
from the parameter's dtype and role, and the weight loader's call shape found by probing the
real loader once (the first shape it accepts is kept; the plan is reused for every later load,
the reload included, so the loaders see the same calls a real checkpoint produces).

Values: float8 weights ``randn * 0.5``; e8m0 scales (uint8 named ``*scale*``) 2^-7..2^-3;
float8 block scales 64..448 (ModelOpt/compressed-tensors normalize NVFP4 block scales so);
other float scales 0.005..0.015; global scales (``*global_scale*``) ~1000 (stored as the
reciprocal); packed integer weights random bits; zero points 0x7 nibbles; ``g_idx`` a valid
permuted group index; ``weight_shape`` the logical [rows, cols]; high-precision weights
``randn * 0.1``.
"""

from __future__ import annotations

from dataclasses import dataclass

SHARDS = {"w13": ("w1", "w3"), "w2": ("w2",)}
CKPT = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj"}


def value_for(name: str, shape, dtype, g, logical=None):
    """A tensor for parameter ``name`` of ``shape``/``dtype`` (CPU), from generator ``g``."""
    import torch

    with torch.device("cpu"):  # the harness builds layers under torch.device("cuda")
        return _value_for(name, shape, dtype, g, logical)


def _value_for(name: str, shape, dtype, g, logical=None):
    import torch

    low = name.lower()
    shape = tuple(shape)
    if "weight_shape" in low and logical is not None:
        n = 1
        for d in shape:
            n *= d
        if n == len(logical):
            return torch.tensor(list(logical), dtype=dtype).reshape(shape)
        if not shape:
            return None
    if "g_idx" in low:
        n = shape[-1] if shape else 1
        groups = max(1, n // 128)
        base = (torch.arange(n) * groups // max(n, 1)).to(torch.int64)
        flat = base[torch.randperm(n, generator=g)]
        return flat.expand(shape).clone().to(dtype)
    if dtype in (torch.float8_e4m3fn, getattr(torch, "float8_e4m3fnuz", None)):
        if "scale" in low:
            return (torch.rand(shape, generator=g) * 384 + 64).to(dtype)
        return (torch.randn(shape, generator=g) * 0.5).to(dtype)
    if dtype == getattr(torch, "float8_e8m0fnu", None):
        return (2.0 ** torch.randint(-7, -2, shape, generator=g).float()).to(dtype)
    if dtype == torch.uint8 and "scale" in low:
        return torch.randint(120, 125, shape, generator=g, dtype=torch.uint8)
    if dtype in (torch.uint8, torch.int8):
        if dtype == torch.int8:
            return torch.randint(-127, 128, shape, generator=g, dtype=torch.int8)
        return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
    if dtype in (torch.int32, torch.int64):
        if "zero" in low or "qzeros" in low:
            return torch.full(shape, 0x77777777, dtype=torch.int64).to(dtype)
        return torch.randint(-(2**31), 2**31 - 1, shape, generator=g, dtype=torch.int64).to(dtype)
    if dtype.is_floating_point:
        # per-tensor scales are constants: w1 and w3 shards must agree (vLLM checks)
        if "global_scale" in low:
            return torch.full(shape, 1000.0, dtype=torch.float32).to(dtype)
        if "input_scale" in low:
            return torch.full(shape, 0.02, dtype=torch.float32).to(dtype)
        if "scale_2" in low:
            return torch.full(shape, 0.001, dtype=torch.float32).to(dtype)
        if "scale" in low:
            return (torch.rand(shape, generator=g) * 0.01 + 0.005).to(dtype)
        if "bias" in low:
            return (torch.randn(shape, generator=g) * 0.05).to(dtype)
        return (torch.randn(shape, generator=g) * 0.1).to(dtype)
    if dtype == torch.bool:
        return torch.ones(shape, dtype=torch.bool)
    return torch.zeros(shape, dtype=dtype)


@dataclass
class LoadCall:
    """One weight-loader call of the plan: which parameter, the tensor's shape/dtype, and the
    loader's extra arguments (FusedMoE: weight_name, shard_id, expert_id)."""

    param: str
    shape: tuple
    dtype: object
    extra: tuple = ()
    logical: tuple | None = None
    #: the loader wrote exactly the elements an earlier call of the plan wrote (w1 and w3
    #: sharing one per-expert input scale): loaded last, see ``materialize``
    repeat: bool = False


def _candidates(shape: tuple, shard: str, transposed: bool) -> list[tuple]:
    """Per-expert checkpoint shapes to try, most likely first."""
    per = tuple(shape[1:])
    out: list[tuple] = []
    if shard in ("w1", "w3") and per:
        dim = 1 if transposed else 0
        if len(per) > dim and per[dim] % 2 == 0:
            half = list(per)
            half[dim] //= 2
            out.append(tuple(half))
        if len(per) > 1 - dim and per[1 - dim] % 2 == 0 and len(per) >= 2:
            half = list(per)
            half[1 - dim] //= 2
            out.append(tuple(half))
    out.append(per)
    if per and per[-1] == 2:  # one value per shard (per-tensor scales of w13)
        out.append(())
    out += [(), (1,)]
    if transposed:  # stored transposed: the checkpoint has the other orientation
        out += [tuple(reversed(c)) for c in out if len(c) == 2]
    seen, uniq = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


def _no_broadcast():
    """A dispatch mode under which a ``copy_`` must fill its destination element for element:
    a probe shape the loader would merely broadcast is not the checkpoint's shape (vLLM's
    layerwise reload asserts the same when it counts loaded elements). ``mode.written`` keeps
    the destinations (address, elements) the loader copied into."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class NoBroadcastCopy(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.written: list[tuple[int, int]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.copy_.default:
                if args[0].numel() != args[1].numel():
                    raise ValueError(
                        f"copy_ broadcasts {tuple(args[1].shape)} into {tuple(args[0].shape)}"
                    )
                self.written.append((args[0].data_ptr(), args[0].numel()))
            return func(*args, **(kwargs or {}))

    return NoBroadcastCopy()


def _loaded_then_processed(exc: BaseException) -> bool:
    """The loader accepted the tensor and the failure came from the processing a completed
    load triggers (online quantization): the shape was right."""
    import traceback

    names = {f.name for f in traceback.extract_tb(exc.__traceback__)}
    return bool(names & {"_layerwise_process", "process_weights_after_loading"})


def moe_plan(experts, num_experts: int, hidden: int, inter: int) -> list[LoadCall]:
    """Probe the FusedMoE weight loader: one LoadCall per (parameter, expert, shard), or one
    per parameter when the loader takes all experts at once (gpt-oss MXFP4)."""
    import torch

    plan: list[LoadCall] = []
    for pname, p in list(experts.named_parameters(recurse=False)):
        if computed(pname):
            continue
        prefix = pname.split("_", 1)[0]
        if prefix not in SHARDS or "_" not in pname:
            continue
        suffix = pname.split("_", 1)[1]
        loader = getattr(p, "weight_loader", None)
        if loader is None:
            continue
        transposed = bool(getattr(p, "is_transposed", False))
        whole = False
        written: set[tuple] = set()  # destinations earlier calls of this parameter wrote
        for shard in SHARDS[prefix]:
            logical = (inter, hidden) if shard in ("w1", "w3") else (hidden, inter)
            for e in range(num_experts):
                if whole:
                    break
                wname = f"experts.{e}.{CKPT[shard]}.{suffix}"
                chosen = None
                last = None
                dest: tuple = ()
                cands = _candidates(tuple(p.shape), shard, transposed) + [tuple(p.shape)]
                for cand in cands:
                    t = value_for(suffix, cand, p.dtype, torch.Generator().manual_seed(0), logical)
                    if t is None:
                        continue
                    mode = _no_broadcast()
                    try:
                        with torch.no_grad(), mode:
                            loader(
                                p,
                                t.to(p.device if p.device.type != "meta" else "cpu"),
                                wname,
                                shard,
                                e,
                            )
                    except Exception as exc:
                        if not _loaded_then_processed(exc):
                            last = exc
                            continue
                    chosen = cand
                    dest = tuple(sorted(set(mode.written)))
                    break
                if chosen is None:
                    raise RuntimeError(
                        f"no checkpoint shape the weight loader of {pname} accepts "
                        f"(expert {e}, shard {shard}): {type(last).__name__}: {last}"
                    )
                repeat = bool(dest) and dest in written
                written.add(dest)
                plan.append(LoadCall(pname, chosen, p.dtype, (wname, shard, e), logical, repeat))
                whole = chosen == tuple(p.shape) and len(chosen) == 3
    return plan


def computed(pname: str) -> bool:
    """Parameters a post-load computes and no checkpoint carries (``g_idx_sort_indices``)."""
    return "sort_indices" in pname


def dense_plan(layer) -> list[LoadCall]:
    """One LoadCall per parameter of a linear layer (the loader takes ``(param, tensor)``)."""
    out = []
    for pname, p in layer.named_parameters():
        if computed(pname):
            continue
        if getattr(p, "weight_loader", None) is None and pname.endswith("bias"):
            continue
        out.append(LoadCall(pname, tuple(p.shape), p.dtype))
    return out


def materialize(plan: list[LoadCall], seed: int, device: str, prefix: str = "") -> list[tuple]:
    """``(name, tensor, extra)`` load calls for ``reload.load_weights``, values from ``seed``."""
    import torch

    g = torch.Generator().manual_seed(seed)
    first, repeats = [], []
    for c in plan:
        t = value_for(c.param, c.shape, c.dtype, g, c.logical)
        (repeats if c.repeat else first).append((prefix + c.param, t.to(device), c.extra))
    # vLLM's layerwise reload counts every loaded element and processes a layer once the count
    # reaches its size: a load that rewrites elements an earlier one wrote (w1 and w3 sharing a
    # per-expert input scale; the values agree) comes last, so the processing it may trigger
    # early loses nothing the checkpoint had not already delivered
    return first + repeats
