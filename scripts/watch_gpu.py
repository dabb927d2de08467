"""The storage watch end to end on the lent H200 (docs/watch.md, "On the lent H200").

Path A ("engine"): a tiny random Llama (hidden 256, 2 layers) saved to a local folder, a real
``LLM(...)`` with online dynamic fp8 (``quantization="fp8"``: its post-load code rebinds) and
CUDA graphs on, the watch plugin on (``RELOAD_LINT_WATCH=warn``, registered in-process with
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` since the project is not pip-installed there), then
``llm.collective_rpc("reload_weights")`` and the watch's report.

Path B ("layerwise", when path A fails anywhere): a vLLM fp8 ``ReplicatedLinear`` built and
post-loaded by hand, the watch collected, vLLM's layerwise reload with new weights (as the
confirmation runner does, confirm/reload.py), and the report.

Writes ``$OUT/watch_gpu[-TAG].json`` (or ./...; ``TAG`` from ``$WATCH_TAG``) and prints which
path ran. ``$WATCH_QUANT`` picks the quantization (default ``fp8``); with
``VLLM_TEST_FORCE_FP8_MARLIN=1`` the fp8 linears run the Marlin kernel, whose post-load
``layer.workspace`` (marlin_utils_fp8.py) moves on every reload: the known escape. The whole engine
needs stage 4 (scripts/prepare_engine_stage.sh). Run with vLLM
0.25.1 importable (docs: /work/shared/gpu/README.md):
    bash .gpu/stage2/install.sh && PYTHONPATH=/tmp/site:/tmp/vroot:$PWD python3 scripts/watch_gpu.py
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
import traceback

os.environ.setdefault("RELOAD_LINT_WATCH", "warn")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

OUT = os.environ.get("OUT") or "."
# the module tree's size for the cost line (docs/performance.md, "Runtime watch"): a check costs
# per storage, a weight sync per byte; WATCH_LAYERS=32 gives an 8B-class module count
LAYERS = int(os.environ.get("WATCH_LAYERS", "2"))
HIDDEN = int(os.environ.get("WATCH_HIDDEN", "256"))
RESULT: dict = {"path": None, "attempts": {}}


class Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(f"{record.levelname} {record.getMessage()}")


LOG = Lines()
logging.getLogger("reload_lint.watch").addHandler(LOG)
logging.getLogger("reload_lint.watch").setLevel(logging.INFO)


def write() -> None:
    RESULT["watch_log"] = LOG.lines
    tag = os.environ.get("WATCH_TAG")
    RESULT["tag"] = tag
    RESULT["env"] = {
        k: os.environ.get(k)
        for k in ("WATCH_QUANT", "VLLM_TEST_FORCE_FP8_MARLIN", "RELOAD_LINT_WATCH")
    }
    path = os.path.join(OUT, f"watch_gpu-{tag}.json" if tag else "watch_gpu.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(RESULT, fh, indent=2, default=str)
    print(f"wrote {path}")


def tiny_llama(folder: str) -> str:
    cfg = dict(
        architectures=["LlamaForCausalLM"],
        model_type="llama",
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1024,
        max_position_embeddings=512,
        rms_norm_eps=1e-5,
        torch_dtype="bfloat16",
        tie_word_embeddings=False,
    )
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig(**cfg)).to(torch.bfloat16)
        model.save_pretrained(folder, safe_serialization=True)
        return "transformers"
    except Exception as exc:
        print(f"transformers save failed ({exc!r}); writing config.json + safetensors by hand")
    import torch
    from safetensors.torch import save_file

    h, i, v, kv = HIDDEN, 2 * HIDDEN, 1024, 2 * (HIDDEN // 4)
    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)

    w = {"model.embed_tokens.weight": r(v, h), "lm_head.weight": r(v, h)}
    w["model.norm.weight"] = torch.ones(h, dtype=torch.bfloat16)
    for n in range(LAYERS):
        p = f"model.layers.{n}."
        w |= {
            p + "self_attn.q_proj.weight": r(h, h),
            p + "self_attn.k_proj.weight": r(kv, h),
            p + "self_attn.v_proj.weight": r(kv, h),
            p + "self_attn.o_proj.weight": r(h, h),
            p + "mlp.gate_proj.weight": r(i, h),
            p + "mlp.up_proj.weight": r(i, h),
            p + "mlp.down_proj.weight": r(h, i),
            p + "input_layernorm.weight": torch.ones(h, dtype=torch.bfloat16),
            p + "post_attention_layernorm.weight": torch.ones(h, dtype=torch.bfloat16),
        }
    save_file(w, os.path.join(folder, "model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w") as fh:
        json.dump(cfg, fh)
    return "by hand"


def _report(worker):
    """Runs in the worker (collective_rpc): the watch's report as JSON."""
    runner = getattr(worker, "model_runner", worker)
    watch = getattr(runner, "_reload_lint_watch", None)
    if watch is None:
        return {"error": "no watch on the model runner (capture_model not wrapped or not run)"}
    t = time.perf_counter()
    rep = watch.check()
    first_ms = (time.perf_counter() - t) * 1e3
    again = []  # checks with nothing changed since: the steady cost per sync
    for _ in range(5):
        t = time.perf_counter()
        watch.check()
        again.append((time.perf_counter() - t) * 1e3)
    lookups = []  # the pointer look-up alone (recorded paths taken again), without the report
    for _ in range(5):
        t = time.perf_counter()
        watch._now()
        lookups.append((time.perf_counter() - t) * 1e3)
    # where the paths a replay cannot take leave the recorded steps: the owner's class and
    # the kind of the step (a set member, a dict entry under a key the watch must not hold)
    import collections
    import re

    from reload_lint.confirm.walk import walk_tensors

    kinds: collections.Counter = collections.Counter()
    for hit in walk_tensors({"": runner.get_model()}):
        for s in hit.steps:
            if s.get is None:
                kinds[f"{s.qual} {re.sub(r'[0-9]+', 'N', s.label)[:60]}"] += 1
                break
    t = time.perf_counter()
    from reload_lint.watch import StorageWatch

    StorageWatch.collect(runner.get_model())
    collect_ms = (time.perf_counter() - t) * 1e3
    return {
        "slots": len(watch.slots),
        "report": rep.to_json(),
        "text": str(rep),
        "check_ms": round(first_ms, 2),
        "check_ms_steady": round(min(again), 2),
        "lookup_ms": round(min(lookups), 2),
        "unreplayable": len(watch._plan.unreplayable),
        "unreplayable_at": kinds.most_common(12),
        "collect_ms": round(collect_ms, 2),
    }


def engine() -> dict:
    from reload_lint.watch import vllm_plugin

    wrapped = vllm_plugin.register()
    folder = tempfile.mkdtemp(prefix="tiny-llama-")
    how = tiny_llama(folder)
    from vllm import LLM, SamplingParams

    t = time.time()
    llm = LLM(
        model=folder,
        tokenizer=None,
        skip_tokenizer_init=True,
        quantization=os.environ.get("WATCH_QUANT", "fp8"),
        enforce_eager=False,
        max_model_len=256,
        gpu_memory_utilization=0.3,
        max_num_seqs=4,
    )
    start_s = time.time() - t
    prompt = {"prompt_token_ids": [1, 2, 3, 4]}
    sp = SamplingParams(max_tokens=4, temperature=0.0)
    before = llm.generate([prompt], sp)[0].outputs[0].token_ids
    errors = None
    t = time.perf_counter()
    try:
        llm.collective_rpc("reload_weights")
    except Exception as exc:  # raise mode: StorageMovedError comes back here
        errors = f"{type(exc).__name__}: {exc}"
    reload_s = time.perf_counter() - t  # the update, the plugin's check after it included
    reports = llm.collective_rpc(_report)
    after = llm.generate([prompt], sp)[0].outputs[0].token_ids
    return {
        "wrapped": wrapped,
        "model_written": how,
        "engine_start_s": round(start_s, 1),
        "reload_error": errors,
        "reload_s": round(reload_s, 3),
        "layers": LAYERS,
        "hidden": HIDDEN,
        "reports": reports,
        "tokens_before": list(before),
        "tokens_after": list(after),
    }


def layerwise() -> dict:
    import torch
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.model_executor.layers.linear import ReplicatedLinear
    from vllm.model_executor.layers.quantization.fp8 import Fp8Config

    from reload_lint.confirm.reload import VllmLayerwiseReload
    from reload_lint.watch import StorageWatch, graph_liveness_oracle

    torch.set_default_device("cuda")
    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(
            world_size=1,
            rank=0,
            distributed_init_method="tcp://127.0.0.1:29533",
            local_rank=0,
            backend="nccl",
        )
        initialize_model_parallel(1, 1)
        cfg = Fp8Config(is_checkpoint_fp8_serialized=False, activation_scheme="dynamic")
        model = torch.nn.ModuleList(
            [
                ReplicatedLinear(256, 256, bias=False, quant_config=cfg, prefix=f"l{i}")
                for i in range(2)
            ]
        ).to(torch.bfloat16)
        driver = VllmLayerwiseReload(torch.bfloat16)
        driver.record(model)
        weights = {f"{i}.weight": torch.randn(256, 256, dtype=torch.bfloat16) for i in range(2)}
        for i, layer in enumerate(model):
            loader = getattr(layer.weight, "weight_loader", None) or layer.weight_loader
            loader(layer.weight, weights[f"{i}.weight"])
            layer.quant_method.process_weights_after_loading(layer)
        watch = StorageWatch.collect(model, mode="warn")
        x = torch.randn(4, 256, dtype=torch.bfloat16)
        y0 = model[0](x)
        new = {k: torch.randn_like(v) for k, v in weights.items()}
        driver.reload(model, new)
        rep = watch.check()
        y1 = model[0](x)
    return {
        "slots": len(watch.slots),
        "paths": sorted(watch.slots),
        "report": rep.to_json(),
        "text": str(rep),
        "oracle": graph_liveness_oracle(),
        "output_changed": bool(
            (y0[0] if isinstance(y0, tuple) else y0)
            .ne(y1[0] if isinstance(y1, tuple) else y1)
            .any()
        ),
    }


def main() -> int:
    for name, fn in (("engine", engine), ("layerwise", layerwise)):
        print(f"=== path {name} ===", flush=True)
        t = time.time()
        try:
            RESULT["attempts"][name] = {"ok": True, **fn(), "wall_s": round(time.time() - t, 1)}
            RESULT["path"] = name
            print(f"path {name} RAN")
            att = RESULT["attempts"][name]
            for rep in att.get("reports") or [att]:
                text = (rep or {}).get("text")
                print(text if text else f"(empty report) {rep}")
            break
        except Exception as exc:
            RESULT["attempts"][name] = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-4000:],
                "wall_s": round(time.time() - t, 1),
            }
            print(f"path {name} FAILED: {type(exc).__name__}: {exc}", flush=True)
    write()
    print(f"path that ran: {RESULT['path']}")
    return 0 if RESULT["path"] else 1


if __name__ == "__main__":
    sys.exit(main())
