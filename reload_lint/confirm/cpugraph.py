"""A CPU stand-in for a captured CUDA graph, for CI without a GPU.

A CUDA graph replays recorded kernel launches against the addresses it saw at capture. The
stand-in replays the op sequence recorded by the ``DispatchRecorder`` (``keep_log=True``) against
the tensor *objects* it saw at capture:

* tensors produced by earlier ops of the capture are recomputed in order (the graph's pool);
* tensors from outside the capture are used as captured, through a weak reference: if the
  object is still alive the replay reads it even if the layer has since rebound the slot (a
  stale read, as when compile artifacts retain the old storage); if it died, the replay reads a
  poisoned tensor of the same shape and dtype, which is what the caching allocator hands a
  captured address once pressure reuses the freed block.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_map

from reload_lint.confirm.recorder import DispatchRecorder, storage_key

POISON_BYTE = 0x7F


def poisoned_like(shape, dtype, device="cpu") -> torch.Tensor:
    t = torch.empty(shape, dtype=dtype, device=device)
    t.view(torch.uint8).fill_(POISON_BYTE) if t.numel() else None
    return t


class IllegalAccess(RuntimeError):
    """The CPU stand-in of a GPU illegal memory access: an op of the replay failed while reading
    a captured tensor that had been freed (its bytes are the poison pattern)."""


class CpuGraph:
    def __init__(self, recorder: DispatchRecorder, static_out: torch.Tensor):
        if not recorder.keep_log:
            raise ValueError("CpuGraph needs a recorder with keep_log=True")
        self._log = recorder.log
        self._static_out = static_out
        produced = set()
        self._external: dict[int, tuple] = {}  # id(tensor) -> (weakref, shape, dtype)
        for _func, args, kwargs, out in self._log:
            for a in tree_flatten((args, kwargs))[0]:
                if isinstance(a, torch.Tensor) and id(a) not in produced:
                    if id(a) not in self._external:
                        import weakref

                        self._external[id(a)] = (weakref.ref(a), tuple(a.shape), a.dtype)
            for o in tree_flatten(out)[0]:
                if isinstance(o, torch.Tensor):
                    produced.add(id(o))
        # the log holds strong references to the external tensors; drop them (a real graph
        # holds addresses, not references), keeping only the produced ones
        self._log = [
            (
                func,
                tree_map(lambda a: _Ext(id(a)) if _is_ext(a, self._external) else a, args),
                tree_map(lambda a: _Ext(id(a)) if _is_ext(a, self._external) else a, kwargs),
                tree_map(lambda a: _Ext(id(a)) if _is_ext(a, self._external) else a, out),
            )
            for func, args, kwargs, out in self._log
        ]
        recorder.log.clear()
        self.poisoned: list[str] = []

    def replay(self) -> torch.Tensor:
        mapping: dict[int, torch.Tensor] = {}
        self.poisoned = []

        def resolve(a):
            if isinstance(a, _Ext):
                ref, shape, dtype = self._external[a.ident]
                t = ref()
                if t is None:
                    t = poisoned_like(shape, dtype)
                    self.poisoned.append(f"{tuple(shape)}/{str(dtype).replace('torch.', '')}")
                    self._external[a.ident] = (_Keep(t), shape, dtype)
                return t
            if isinstance(a, torch.Tensor):
                return mapping.get(id(a), a)
            return a

        for func, args, kwargs, out in self._log:
            nargs = tree_map(resolve, args, is_leaf=lambda x: isinstance(x, _Ext))
            nkwargs = tree_map(resolve, kwargs, is_leaf=lambda x: isinstance(x, _Ext))
            try:
                res = func(*nargs, **nkwargs)
            except (IndexError, RuntimeError) as exc:
                # an op failing after the replay read a freed captured tensor (directly or
                # through what earlier ops computed from it)
                if self.poisoned:
                    raise IllegalAccess(f"{func} read freed captured storage: {exc}") from exc
                raise
            flat_out = tree_flatten(out, is_leaf=lambda x: isinstance(x, _Ext))[0]
            for o, r in zip(flat_out, tree_flatten(res)[0], strict=False):
                if isinstance(o, torch.Tensor):
                    mapping[id(o)] = r
        return mapping.get(id(self._static_out), self._static_out)


class _Ext:
    __slots__ = ("ident",)

    def __init__(self, ident: int):
        self.ident = ident


class _Keep:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def _is_ext(a, external) -> bool:
    return isinstance(a, torch.Tensor) and id(a) in external


__all__ = ["CpuGraph", "IllegalAccess", "poisoned_like", "storage_key"]
