"""Cost of the run-time storage watch (docs/performance.md, "Runtime watch").

A CPU stub with the module tree of a 70B-class decoder (80 layers; per layer q/k/v/o and
gate/up/down linears, two norms, a quant_method object holding a kernel with a workspace, a
functools.partial over a tensor, and a dict of scales; tensors are tiny: the walk's cost
depends on the number of objects, not on bytes). Prints ms per collect and per check, and the
manifest's Python memory (tracemalloc), as JSON.

    PYTHONPATH=. python3 scripts/bench_watch.py [--layers 80] [--repeat 5]

Each figure is the best of ``--repeat`` runs; ``full_walk_ms`` is what the check cost when it
re-walked the model (before it took the recorded paths again), ``host_load_1min`` the load the
figures were taken under.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import time
import tracemalloc

import torch

from reload_lint.watch import StorageWatch


class Kernel:
    def __init__(self):
        self.workspace = torch.zeros(16)
        self.act_perm = functools.partial(torch.index_select, dim=0, index=torch.arange(4))
        # a path no replay can take (a set member): the check walks only the set
        self.pool = {torch.zeros(2)}


@dataclasses.dataclass(frozen=True)
class BatchDescriptor:  # vLLM's key for each captured graph (vllm/forward_context.py)
    num_tokens: int
    num_reqs: int | None = None
    uniform: bool = False


class GraphEntry:  # a captured piece's entry: the graph's output buffer
    def __init__(self):
        self.output = torch.zeros(2)


class QuantMethod:
    def __init__(self):
        self.kernel = Kernel()


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(4, 4), requires_grad=False)
        self.weight_scale = torch.nn.Parameter(torch.ones(1), requires_grad=False)
        self.quant_method = QuantMethod()
        self.scales = {"input": torch.ones(1), "output": torch.ones(1)}


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = torch.nn.Module()
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(self.self_attn, n, Linear())
        self.mlp = torch.nn.Module()
        for n in ("gate_proj", "up_proj", "down_proj"):
            setattr(self.mlp, n, Linear())
        self.self_attn.attn = torch.nn.Module()  # the attention backend's layer
        self.self_attn.rotary_emb = torch.nn.Module()
        self.self_attn.rotary_emb.register_buffer("cos_sin_cache", torch.ones(4, 2))
        self.mlp.act_fn = torch.nn.SiLU()
        # the piecewise CUDA graphs' entries, one per capture size, keyed by a frozen dataclass
        # (on a real vLLM 0.25.1 engine ~40% of the storages the watch sees sit in such dicts)
        self.graph_entries = {BatchDescriptor(n): GraphEntry() for n in (1, 2, 4, 8)}
        self.input_layernorm = torch.nn.RMSNorm(4)
        self.post_attention_layernorm = torch.nn.RMSNorm(4)


def stub(layers: int) -> torch.nn.Module:
    m = torch.nn.Module()
    m.embed_tokens = torch.nn.Embedding(8, 4)
    m.layers = torch.nn.ModuleList([Layer() for _ in range(layers)])
    m.norm = torch.nn.RMSNorm(4)
    m.lm_head = Linear()
    return m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=80)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    model = stub(args.layers)
    modules = sum(1 for _ in model.modules())

    collect, check, walk = [], [], []
    for _ in range(args.repeat):
        t = time.perf_counter()
        watch = StorageWatch.collect(model)
        collect.append(time.perf_counter() - t)
        t = time.perf_counter()
        report = watch.check()
        check.append(time.perf_counter() - t)
        assert not report
        t = time.perf_counter()
        watch._pointers()  # what a check cost when it re-walked the model
        walk.append(time.perf_counter() - t)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    watch = StorageWatch.collect(model)
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    mem = sum(s.size_diff for s in after.compare_to(before, "filename"))
    # assumption: a bf16 weight sync over NCCL / CUDA IPC at ~50 GB/s effective: ~0.3 s for an
    # 8B model (16 GB), ~2.8 s for a 70B one (140 GB). The stub's layer count picks the model
    # it mirrors: 32 layers an 8B-class tree, 80 a 70B-class one
    sync_s = {"8B": 16 / 50, "70B": 140 / 50}
    like = "8B" if args.layers <= 48 else "70B"
    out = {
        "layers": args.layers,
        "modules": modules,
        "storages": len(watch.slots),
        "unreplayable": len(watch._plan.unreplayable),
        "collect_ms": round(min(collect) * 1e3, 1),
        "check_ms": round(min(check) * 1e3, 2),
        "full_walk_ms": round(min(walk) * 1e3, 1),
        "manifest_kib": round(mem / 1024, 1),
        "weight_sync_s_assumed": sync_s,
        "mirrors": like,
        "check_share_of_sync": round(min(check) / sync_s[like], 5),
        "check_share_of_70B_sync": round(min(check) / sync_s["70B"], 5),
        "check_share_of_8B_sync": round(min(check) / sync_s["8B"], 5),
        "host_load_1min": round(os.getloadavg()[0], 2),
        "repeat": args.repeat,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
