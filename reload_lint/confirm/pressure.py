"""Allocation pressure: hand freed captured blocks back out, filled with a poison pattern.

A captured graph keeps launching with the addresses it saw at capture. A freed block stays
harmless only until the caching allocator reuses it, so a same-weights comparison right after a
reload usually passes on broken code. Pressure makes the reuse happen on purpose: for every
freed graph-visible storage it allocates blocks of the same size and fills them with 0x7F bytes
(a nonzero spin counter for Marlin's barrier, an out-of-range index for a permutation, an absurd
stride for a grouped GEMM), and reports how many old addresses were actually handed out again.
"""

from __future__ import annotations

import gc

import torch

POISON_BYTE = 0x7F


def apply_pressure(rows, device: str, copies: int = 16, max_bytes: int = 1 << 30) -> dict:
    freed = {}
    for r in rows:
        if r.freed and r.graph_visible:
            freed[r.old_ptr] = r.nbytes
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    hold: list[torch.Tensor] = []
    total = 0
    reused: set[int] = set()
    old_ranges = [(p, p + n) for p, n in freed.items()]
    for nbytes in sorted(set(freed.values())):
        want = copies * sum(1 for n in freed.values() if n == nbytes)
        for _ in range(want):
            if total + nbytes > max_bytes:
                break
            t = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)
            t.fill_(POISON_BYTE)
            hold.append(t)
            total += nbytes
            start, end = t.data_ptr(), t.data_ptr() + t.numel()
            for lo, hi in old_ranges:
                if start < hi and lo < end:
                    reused.add(lo)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return {
        "mode": "allocator",
        "freed_graph_visible": len(freed),
        "blocks": len(hold),
        "bytes": total,
        "reused_old_addresses": len(reused),
        "_hold": hold,
    }
