"""The worklist's "likely failure": what a captured graph does once a flagged storage moves.

Derived from three facts, never from how the attribute is spelled:

- the rule (an alias or a captured callable keeps the old storage alive: the graph reads old
  values);
- the kind of tensor stored, from the op that made it in the finding's trace (an `argsort` is
  an index, `torch.zeros` a zero-initialised counter or accumulator, `torch.full` a constant,
  arithmetic a scale or a converted weight), refined by the dtype the runtime census saw;
- the kernel family that reads it, from the file names in the trace (Marlin kernels spin on
  zero-initialised int32 locks; vLLM's CUTLASS grouped GEMM reads integer stride arrays).

When these do not settle it the answer is "" (the column stays empty). Runtime evidence that
names a failure overrides all of this (render/worklist.py).
"""

from __future__ import annotations

import re

from reload_lint.findings import Finding

# Kinds of stored tensor, by the op that made it (as the engine's trace notes spell the op).
INDEX_OPS = frozenset(
    {
        "torch.argsort",
        ".argsort()",
        "torch.argmax",
        ".argmax()",
        "torch.argmin",
        ".argmin()",
        "torch.arange",
        "torch.randperm",
        "torch.nonzero",
        ".nonzero()",
        "torch.searchsorted",
        "torch.bucketize",
    }
)
ZERO_OPS = frozenset({"torch.zeros", "torch.zeros_like", ".zero_()", ".new_zeros()"})
CONSTANT_OPS = frozenset(
    {
        "torch.full",
        "torch.full_like",
        "torch.ones",
        "torch.ones_like",
        "torch.tensor",
        "torch.as_tensor",
        "torch.from_numpy",
        ".new_full()",
        ".new_ones()",
        ".new_tensor()",
    }
)
VALUE_OPS = frozenset(
    {
        "*",
        "/",
        "+",
        "-",
        "**",
        ".reciprocal()",
        ".max()",
        ".min()",
        ".amax()",
        ".amin()",
        ".sum()",
        ".mean()",
        ".abs()",
        ".sqrt()",
        ".exp()",
        ".clamp()",
        ".float()",
        ".half()",
        ".bfloat16()",
        "torch.maximum",
        "torch.minimum",
        "torch.where",
    }
)
# Ops that keep the kind of their input: look one step further back.
PASS_OPS = frozenset(
    {
        ".to()",
        ".contiguous()",
        ".clone()",
        ".detach()",
        ".view()",
        ".reshape()",
        ".reshape_as()",
        ".t()",
        ".transpose()",
        ".permute()",
        ".flip()",
        ".repeat()",
        ".repeat_interleave()",
        ".expand()",
        ".cpu()",
        ".cuda()",
        ".int()",
        ".long()",
        ".index_select()",
        "torch.cat",
        "torch.stack",
        "torch.nn.functional.pad",
    }
)

# Kernel families, by a word of a trace file's name; the first that appears wins, so
# `flashinfer_cutlass_moe.py` is FlashInfer, not vLLM's own CUTLASS MoE.
FAMILIES = ("flashinfer", "trtllm", "aiter", "marlin", "machete", "cutlass")

# The rule alone decides when the old storage stays alive: an alias (RL107), a callable's
# captured argument (RL103) or a derived copy (RL2xx) keeps it, and the graph reads old values.
_STALE_RULES = ("RL103", "RL107")

_OP = re.compile(r"`([^`]+)` (?:allocates|returns a new tensor|on `[^`]*` \(assumed a tensor\))")
_STORE = "stored on `"
_UNKNOWN_CALLEE = "unknown callee"


def family_of(path: str) -> str:
    """The kernel family a file belongs to, from the words of its name ('' if none)."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".py").lower()
    words = set(re.split(r"[^a-z0-9]+", stem))
    return next((fam for fam in FAMILIES if fam in words), "")


def _kind(op: str) -> str:
    if op in INDEX_OPS:
        return "index"
    if op in ZERO_OPS:
        return "zeroed"
    if op in CONSTANT_OPS:
        return "constant"
    if op in VALUE_OPS:
        return "value"
    if op in PASS_OPS:
        return "pass"
    return ""


def _producer(f: Finding) -> tuple[str, str]:
    """(kind, path) of the op that made the stored tensor: the last kind-bearing step before
    the store, looking through ops that keep their input's kind; ('', '') when unknown."""
    steps = list(f.trace)
    store = next((i for i, s in enumerate(steps) if _STORE in s.note), len(steps))
    for s in reversed(steps[:store]):
        if _UNKNOWN_CALLEE in s.note:
            return "", ""
        ops = _OP.findall(s.note)
        if not ops:
            continue
        kind = _kind(ops[-1])
        if kind == "pass":
            continue
        return kind, s.path
    return "", ""


def _is_float(dtype: str) -> bool:
    d = dtype.removeprefix("torch.")
    return d.startswith(("float", "bfloat", "half", "double"))


def _is_int(dtype: str) -> bool:
    d = dtype.removeprefix("torch.")
    return d.startswith(("int", "uint", "long", "short"))


def failure_of(kind: str, family: str, dtype: str = "") -> str:
    """The failure for a tensor kind read by a kernel family, refined by a known dtype."""
    if kind == "index":
        return "illegal access"  # gathers through garbage indices leave the buffer
    if kind == "zeroed":
        if family == "marlin" and not _is_float(dtype):
            return "livelock"  # Marlin's int32 locks: the kernel spins until they read zero
        return "stale read" if _is_float(dtype) else ""
    if kind == "constant":
        if _is_int(dtype) or (not dtype and family == "cutlass"):
            return "illegal access"  # integer strides / problem sizes become addresses
        return "stale read"  # scales and GEMM constants read from reclaimed memory
    if kind == "value":
        return "stale read"
    return "stale read" if _is_float(dtype) else ""


def likely_failure(f: Finding, dtype: str = "") -> str:
    """The static guess for one finding; `dtype` is the runtime census's, when known."""
    if f.rule in _STALE_RULES or f.rule.startswith("RL2"):
        return "stale read"
    if f.rule == "RL105":
        return _rebuilt_failure(f)
    kind, where = _producer(f)
    family = ""
    for path in (where, f.path, *(s.path for s in f.trace)):
        family = family_of(path) if path else ""
        if family:
            break
    return failure_of(kind, family, dtype)


def _rebuilt_failure(f: Finding) -> str:
    """A rebuilt object keeps every tensor its constructor chain allocates: one failure when each
    allocation has one and they agree, else ''."""
    store = next((i for i, s in enumerate(f.trace) if _STORE in s.note), len(f.trace))
    seen = set()
    for s in f.trace[:store]:
        if _UNKNOWN_CALLEE in s.note:
            return ""
        for op in _OP.findall(s.note):
            seen.add(failure_of(_kind(op), family_of(s.path)))
    return seen.pop() if len(seen) == 1 and "" not in seen else ""
