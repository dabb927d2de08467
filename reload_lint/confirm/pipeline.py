"""One run of the confirmation pipeline, in a child process, one function per stage.

setup -> fixes -> cold_b -> load_a -> capture -> reload -> census -> eager_b -> pressure ->
replay. Each stage's result is sent to the parent as soon as it exists, so a replay that never
returns (livelock) or kills the process (illegal access) loses nothing that came before it.

A run serves every finding of one family-table row whose target it covers (``spec["findings"]``):
the census links each finding's target separately, so one build answers them all.
"""

from __future__ import annotations

import gc
import importlib
import math
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field

STAGES = ("setup", "fixes", "cold_b", "load_a", "capture", "reload", "census", "eager_b")
STAGES = (*STAGES, "pressure", "replay_start", "replay", "done")


def compare(out, ref) -> dict:
    import torch

    out = out.detach().float().cpu()
    ref = ref.detach().float().cpu()
    if out.shape != ref.shape:
        return {"match": False, "reason": f"shape {tuple(out.shape)} != {tuple(ref.shape)}"}
    finite = bool(torch.isfinite(out).all())
    diff = (out - ref).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    rel = max_abs / (scale + 1e-12)
    ok = math.isfinite(rel)
    return {
        "match": finite and ok and rel <= 1e-2,
        "bitwise": bool(torch.equal(out, ref)),
        "max_abs": max_abs if math.isfinite(max_abs) else None,
        "rel": rel if ok else None,
        "finite": finite,
    }


class LineTracer:
    """Which lines of the watched files ran (``sys.settrace``, this thread only): whether the
    flagged store actually executed in this configuration is measured, not assumed."""

    def __init__(self, paths):
        self.paths = tuple(paths)
        self.hits: dict[str, set[int]] = {p: set() for p in self.paths}
        self._match: dict[str, str | None] = {}

    def _which(self, filename: str) -> str | None:
        if filename not in self._match:
            self._match[filename] = next(
                (p for p in self.paths if filename.replace("\\", "/").endswith("/" + p)), None
            )
        return self._match[filename]

    def _call(self, frame, event, arg):
        p = self._which(frame.f_code.co_filename)
        if p is None:
            return None
        lines = self.hits[p]
        lines.add(frame.f_lineno)

        def local(frame, event, arg):
            if event == "line":
                lines.add(frame.f_lineno)
            return local

        return local

    def __enter__(self):
        self._old = sys.gettrace()
        if self.paths:
            sys.settrace(self._call)
        return self

    def __exit__(self, *exc):
        sys.settrace(self._old)
        return False

    def result(self) -> dict[str, list[int]]:
        return {p: sorted(v) for p, v in self.hits.items()}


@dataclass
class Run:
    """State handed from stage to stage inside the child."""

    spec: dict
    send: object
    recipe: object = None
    fixes: dict = field(default_factory=dict)
    driver: object = None
    device: object = None
    built: object = None
    x: object = None
    ref: object = None
    eager_a: object = None
    graph: object = None
    static_out: object = None
    manifest: object = None
    rows: list = field(default_factory=list)
    hold: object = None
    executed: dict | None = None
    driver_note: str | None = None
    stop: bool = False  # a stage ended the run early with its own messages (reload refused)


def stage_setup(run: Run) -> None:
    import torch

    torch.set_num_threads(1)
    for mod in run.spec.get("recipe_modules", []):
        importlib.import_module(mod)
    from reload_lint.confirm.recipes import get_recipe

    run.recipe = get_recipe(run.spec["recipe"])
    pre = getattr(run.recipe, "preimport", None)
    if run.spec.get("overlay") and pre is not None:
        # a spawned child starts bare: import what a forked child inherits from the parent
        # (runner.confirm's preimport), before set-up installs stand-ins (vLLM probes for the
        # real packages with find_spec at import time)
        pre()
    run.recipe.setup(run.spec["device"])
    run.device = torch.device(run.spec["device"])
    run.send("setup", pid=os.getpid())


def stage_fixes(run: Run) -> None:
    from reload_lint.confirm.recipes.vllm_layers import REBUILT

    REBUILT.update(run.spec.get("rebuilt", []))
    targets = run.spec.get("targets")
    run.fixes = run.recipe.fixes_for(targets) if targets else run.recipe.fixes()
    applied = []
    for target in run.spec.get("fixes", []):
        fix = run.fixes[target]
        fix.apply()
        applied.append(f"{fix.kind}: {fix.description}")
    patched = []
    if run.spec.get("overlay"):
        from reload_lint.confirm.fixedside import check_overlay

        patched = check_overlay(run.spec)
    from reload_lint.confirm.fixes import PRECONDITIONS

    pre = []
    for name in run.spec.get("preconditions", []):
        apply, description = PRECONDITIONS[name]
        apply()
        pre.append(description)
    run.send(
        "fixes",
        applied=applied,
        applied_targets=list(run.spec.get("fixes", [])),
        preconditions=pre,
        patched=patched,
    )


def _load(run: Run, seed: int, record: bool = False):
    import torch

    from reload_lint.confirm.reload import load_weights, post_load_model

    with run.device:
        built = run.recipe.construct(run.spec["device"])
        if record:
            run.driver.record(built.model)
    with torch.no_grad():
        load_weights(built.model, run.recipe.checkpoint(seed, run.spec["device"]))
        with run.device:
            post_load_model(built.model, run.recipe.post_load)
    run.recipe.finish(built)
    return built


def stage_cold_b(run: Run) -> None:
    import torch

    from reload_lint.confirm.reload import choose_driver

    run.driver, run.driver_note = choose_driver(
        run.recipe.uses_vllm, run.recipe.post_load, run.recipe.dtype
    )
    _, seed_b = run.spec.get("seeds", (1, 2))
    # traced: the load, the post-load and the first forward (first-forward stores: a wrapper
    # or scratch built lazily at the first apply)
    tracer = LineTracer(run.spec.get("watch", []))
    try:
        with tracer:
            built = _load(run, seed_b)
            with torch.no_grad():
                run.x = run.recipe.example_input(run.spec["device"])
                run.ref = built.forward(run.x).detach().float().cpu().clone()
    finally:
        run.executed = tracer.result()
    del built
    gc.collect()
    if run.device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    run.send("cold_b", shape=list(run.ref.shape), executed=run.executed)


def stage_load_a(run: Run) -> None:
    import torch

    seed_a, _ = run.spec.get("seeds", (1, 2))
    run.built = _load(run, seed_a, record=True)
    with torch.no_grad():
        run.x = run.x.clone()
        run.eager_a = run.built.forward(run.x).detach().float().cpu().clone()
    b = run.built
    run.send(
        "load_a",
        reload_path=run.driver.name,
        reload_note=run.driver_note,
        notes=b.notes,
        component=b.component,
        backend=b.backend,
        standins=sorted(b.standins),
        tier=b.tier,
    )


def stage_capture(run: Run) -> None:
    import torch

    from reload_lint.confirm.cpugraph import CpuGraph
    from reload_lint.confirm.recorder import DispatchRecorder, Manifest

    b = run.built
    roots = b.roots or {"layer": b.layer}
    with torch.no_grad():
        if run.device.type == "cuda" and b.tier == "replay":
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    b.forward(run.x)
            torch.cuda.current_stream().wait_stream(s)
            torch.cuda.synchronize()
            run.graph = torch.cuda.CUDAGraph()
            rec = DispatchRecorder()
            with torch.cuda.graph(run.graph):
                with rec:
                    run.static_out = b.forward(run.x)
            run.manifest = Manifest.record(roots, rec, inputs=[run.x])
            run.graph.replay()
            torch.cuda.synchronize()
            replay_a = compare(run.static_out, run.eager_a)
        elif run.device.type == "cuda":
            # census tier: the forward runs eagerly under the recorder (stand-ins cannot be
            # captured faithfully); what it reads is what a graph would bake in
            rec = DispatchRecorder()
            with rec:
                run.static_out = b.forward(run.x)
            run.manifest = Manifest.record(roots, rec, inputs=[run.x])
            replay_a = {"match": True, "note": "census tier: no graph replay"}
        else:
            rec = DispatchRecorder(keep_log=True)
            with rec:
                run.static_out = b.forward(run.x)
            run.graph = CpuGraph(rec, run.static_out)
            run.manifest = Manifest.record(roots, rec, inputs=[run.x])
            replay_a = compare(run.graph.replay(), run.eager_a)
    m = run.manifest
    run.send(
        "capture",
        walk=sum(1 for e in m.entries.values() if "walk" in e.sources),
        dispatch=sum(1 for e in m.entries.values() if "dispatch" in e.sources),
        dispatch_only=[e.op for e in m.entries.values() if e.sources == {"dispatch"}],
        graph_visible=len(m.graph_visible()),
        ops=rec.ops,
        built=m.built_classes(b.component),
        replay_before_reload=replay_a,
    )
    if not replay_a["match"]:
        raise RuntimeError(f"replay before reload disagrees with eager A: {replay_a}")


_SHADOW = re.compile(r"attribute '(\w+)' already exists")
_OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


def _in_copy_back(exc: BaseException) -> bool:
    return any(
        f.name == "_copy_and_restore_kernel_tensors"
        for f in traceback.extract_tb(exc.__traceback__)
    )


def shadowing(model) -> list[str]:
    """``module.attr`` for each plain attribute that sits where the reload will re-register a
    checkpoint Parameter or buffer of the same name (vLLM's restore metadata)."""
    from vllm.model_executor.model_loader.reload.layerwise import get_layerwise_info

    out = []
    for mname, m in model.named_modules():
        meta = getattr(get_layerwise_info(m), "restore_metadata", None) or ({}, {})
        for name in [*meta[0], *meta[1]]:
            if name in vars(m) and name not in m._parameters and name not in m._buffers:
                out.append(f"{mname}.{name}" if mname else name)
    return out


def stage_reload(run: Run) -> None:
    import torch

    _, seed_b = run.spec.get("seeds", (1, 2))
    shadows = shadowing(run.built.model) if run.driver.name == "vllm-layerwise" else []
    try:
        with torch.no_grad():
            run.driver.reload(run.built.model, run.recipe.checkpoint(seed_b, run.spec["device"]))
    except KeyError as exc:
        m = _SHADOW.search(str(exc))
        if m is None or not shadows:
            raise
        # the post-load masked the reload: vLLM's restore_layer_on_meta refuses to register a
        # checkpoint Parameter over the plain attribute post-load left under its name. The
        # update fails loudly; the census still says which storages the capture read.
        _send_refused(run, f"KeyError: {exc}", "unshadow", masked=shadows, continues=True)
        stage_census(run)
        run.stop = True
        return
    except RuntimeError as exc:
        if _OVERLAP not in str(exc) or not _in_copy_back(exc):
            raise
        # vLLM's copy-back writes the processed values into the kept kernel tensors; one that
        # post-load made an expanded (stride-0) view refuses the write
        _send_refused(run, f"RuntimeError: {str(exc).splitlines()[0]}", "expanded_copy_back")
        run.stop = True
        return
    gc.collect()
    run.send("reload", reload_path=run.driver.name)


def _send_refused(run: Run, error: str, precondition: str, **extra) -> None:
    """vLLM's own reload refused the layer (inside an except block): the record names the
    error and the precondition a rerun applies to get past it."""
    run.send(
        "reload",
        ok=False,
        error=error[:500],
        error_type=error.split(":", 1)[0],
        precondition=precondition,
        tb=traceback.format_exc()[-4000:],
        **extra,
    )


def stage_census(run: Run) -> None:
    from reload_lint.confirm.recorder import take_census
    from reload_lint.confirm.targets import also_links, link_rows

    run.rows = take_census(run.manifest)
    linked = {}
    folded = {}
    for f in run.spec["findings"]:
        own = run.fixes.get(f.get("canonical", ""))
        extra = own.links if (own is not None and run.spec.get("fixed")) else ()
        if run.spec.get("overlay"):
            extra = tuple(run.spec.get("links", ()))  # the patch's new homes for the tensor
        paths = [r.path for r in link_rows(f, run.manifest, run.rows, extra)]
        # the stores folded into the finding are its own stores too: one storage, one finding
        also = also_links(f, run.manifest)
        if also:
            folded[f["fingerprint"]] = {
                "targets": [a.get("target", "") for a in f.get("also") or ()],
                "links": also,
            }
            paths += sorted({p for ps in also.values() for p in ps} - set(paths))
        linked[f["fingerprint"]] = paths
    empty = [
        f["fingerprint"]
        for f in run.spec["findings"]
        if not linked[f["fingerprint"]] and layer_target_is_none(run.built.model, f["target"])
    ]
    targets = {f["fingerprint"]: f["target"] for f in run.spec["findings"]}
    run.send(
        "census",
        rows=[r.to_json() for r in run.rows],
        linked=linked,
        none_targets=empty,
        targets=targets,
        also=folded,
    )


def layer_target_is_none(model, target: str) -> bool:
    """``layer.X`` is None on every module of the built model that has an ``X`` (and one has):
    on this backend the post-load stored nothing a graph could bake in."""
    from reload_lint.confirm.targets import parse_target

    base, attrs = parse_target(target or "")
    if base != "layer" or not attrs:
        return False
    seen = False
    for m in model.modules():
        for where in (vars(m), m._parameters, m._buffers):
            if attrs[0] in where:
                seen = True
                if where[attrs[0]] is not None:
                    return False
    return seen


def stage_eager_b(run: Run) -> None:
    import torch

    with torch.no_grad():
        eager_b = run.built.forward(run.x)
    run.send("eager_b", **compare(eager_b, run.ref))


def stage_pressure(run: Run) -> None:
    if run.device.type == "cuda":
        from reload_lint.confirm.pressure import apply_pressure

        pressure = apply_pressure(run.rows, run.spec["device"])
        run.hold = pressure.pop("_hold")
    else:
        pressure = {"mode": "cpu-poison", "note": "dead captured tensors read as 0x7F bytes"}
    run.send("pressure", **pressure)


def stage_replay(run: Run) -> None:
    import torch

    if run.graph is None:  # census tier
        _done(run)
        return
    run.send("replay_start")
    if run.device.type == "cuda":
        run.graph.replay()
        torch.cuda.synchronize()
        out = run.static_out.detach().float().cpu()
        extra = {}
    else:
        out = run.graph.replay()
        extra = {"poisoned_reads": list(run.graph.poisoned)}
    run.send("replay", **compare(out, run.ref), **extra)
    run.hold = None
    _done(run)


def _done(run: Run) -> None:
    """The last message: the run's peak GPU memory (the allocator's reserve, MiB) on CUDA."""
    import torch

    extra = {}
    if run.device is not None and run.device.type == "cuda":
        extra["gpu_peak_mib"] = round(torch.cuda.max_memory_reserved(run.device) / 2**20, 1)
    run.send("done", **extra)


PIPELINE = (
    ("setup", stage_setup),
    ("fixes", stage_fixes),
    ("cold_b", stage_cold_b),
    ("load_a", stage_load_a),
    ("capture", stage_capture),
    ("reload", stage_reload),
    ("census", stage_census),
    ("eager_b", stage_eager_b),
    ("pressure", stage_pressure),
    ("replay", stage_replay),
)


def run_pipeline(conn, spec: dict) -> None:
    """Child entry point. ``spec`` is plain data (picklable for spawn)."""
    t0 = time.monotonic()

    def send(stage, ok=True, **data):
        conn.send({"stage": stage, "ok": ok, "t": round(time.monotonic() - t0, 3), **data})

    if spec.get("overlay"):
        # the patched copy first on the import path (a fresh interpreter: nothing imported yet)
        sys.path.insert(0, spec["overlay"])
        importlib.invalidate_caches()
    run = Run(spec=spec, send=send)
    stage = "setup"
    try:
        for name, fn in PIPELINE:
            stage = name
            fn(run)
            if run.stop:
                send("done")
                break
    except BaseException as exc:
        msg = str(exc).strip().splitlines()
        extra = {"executed": run.executed} if run.executed is not None else {}
        send(
            stage,
            ok=False,
            **extra,
            error=f"{type(exc).__name__}: {msg[0] if msg else ''}"[:500],
            error_type=type(exc).__name__,
            tb=traceback.format_exc()[-4000:],
        )
    finally:
        try:
            conn.close()
        except Exception:
            pass
