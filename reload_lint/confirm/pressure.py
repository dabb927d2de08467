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


def apply_pressure(
    rows,
    device: str,
    copies: int = 16,
    max_bytes: int = 1 << 30,
    chase: int | None = None,
    alloc=None,
) -> dict:
    """Hand each freed graph-visible block out again, poisoned. ``copies`` blocks per freed
    storage first; then, per old address the allocator has not handed out yet, up to ``chase``
    more blocks of its size until one lands on it (the caching allocator keeps other free
    blocks of that size, and its best fit may pick any of them first: on the H200 sweep 16
    copies reused none of the Marlin workspaces). ``chase`` defaults to 4096 on CUDA, 0
    elsewhere (no caching allocator to chase); ``max_bytes`` caps everything held."""
    if chase is None:
        chase = 4096 if device.startswith("cuda") else 0
    if alloc is None:

        def alloc(nbytes):
            return torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)

    freed = {}
    for r in rows:
        if r.freed and r.graph_visible:
            freed[r.old_ptr] = r.nbytes
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    hold: list = []
    reused: set[int] = set()
    old_ranges = [(p, p + n) for p, n in freed.items()]
    budget = {"total": 0}

    def take(nbytes: int) -> bool:
        if budget["total"] + nbytes > max_bytes:
            return False
        t = alloc(nbytes)
        t.fill_(POISON_BYTE)
        hold.append(t)
        budget["total"] += nbytes
        start, end = t.data_ptr(), t.data_ptr() + t.numel()
        for lo, hi in old_ranges:
            if start < hi and lo < end:
                reused.add(lo)
        return True

    for nbytes in sorted(set(freed.values())):
        want = copies * sum(1 for n in freed.values() if n == nbytes)
        for _ in range(want):
            if not take(nbytes):
                break
    chased = 0
    for ptr, nbytes in sorted(freed.items()):
        for _ in range(chase):
            if ptr in reused or not take(nbytes):
                break
            chased += 1
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return {
        "mode": "allocator",
        "freed_graph_visible": len(freed),
        "blocks": len(hold),
        "bytes": budget["total"],
        "reused_old_addresses": len(reused),
        "chased_blocks": chased,
        "_hold": hold,
    }
