"""One site's pipeline, run in a child process: cold B, load A, capture, reload B, census,
eager check, pressure, replay. Each stage's result is sent to the parent as soon as it exists,
so a replay that never returns (livelock) or kills the process (illegal access) loses nothing
that came before it.
"""

from __future__ import annotations

import gc
import importlib
import math
import os
import time
import traceback

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


def link_rows(finding: dict, manifest, rows, extra_targets=()) -> list:
    """Census rows of the storages the finding's target (or a fix's new home for it) names."""
    out = _link(finding.get("target", ""), finding, manifest, rows)
    for t in extra_targets:
        out += [r for r in _link(t, finding, manifest, rows) if r not in out]
    return out


def _link(target: str, finding: dict, manifest, rows) -> list:
    from reload_lint.confirm.sites import parse_target

    base, attrs = parse_target(target)
    symbol = finding.get("symbol", "")
    parts = [p for p in symbol.split(".") if p and not p.startswith("<")]
    cls = parts[0] if len(parts) >= 2 and parts[0][:1].isupper() else None
    if not attrs:
        return []
    linked_paths: set[str] = set()
    for e in manifest.entries.values():
        for hit in e.hits:
            steps = hit.steps
            for i, st in enumerate(steps):
                if not st.attr or st.label != attrs[0]:
                    continue
                if base == "self" and cls is not None and cls not in st.owner:
                    continue
                if base not in ("self", "") and "Module" not in st.owner:
                    continue
                rest = [s.label for s in steps[i + 1 :] if s.attr]
                if rest[: len(attrs) - 1] == attrs[1:]:
                    linked_paths.add(hit.path)
                    break
    return [r for r in rows if r.path in linked_paths]


def run_site(conn, spec: dict) -> None:
    """Child entry point. ``spec`` is plain data (picklable for spawn)."""
    t0 = time.monotonic()

    def send(stage, ok=True, **data):
        conn.send({"stage": stage, "ok": ok, "t": round(time.monotonic() - t0, 3), **data})

    stage = "setup"
    try:
        import torch

        torch.set_num_threads(1)
        for mod in spec.get("recipe_modules", []):
            importlib.import_module(mod)
        from reload_lint.confirm.cpugraph import CpuGraph
        from reload_lint.confirm.recipes import get_recipe
        from reload_lint.confirm.recorder import DispatchRecorder, Manifest, take_census
        from reload_lint.confirm.reload import choose_driver, load_weights, post_load_model

        device = spec["device"]
        recipe = get_recipe(spec["recipe"])
        recipe.setup(device)
        send("setup", pid=os.getpid())

        stage = "fixes"
        fixes = recipe.fixes()
        applied = []
        for target in spec.get("fixes", []):
            fix = fixes[target]
            fix.apply()
            applied.append(f"{fix.kind}: {fix.description}")
        send("fixes", applied=applied)

        driver, why = choose_driver(recipe.uses_vllm, recipe.post_load, recipe.dtype)
        dev = torch.device(device)
        seed_a, seed_b = spec.get("seeds", (1, 2))

        stage = "cold_b"
        with dev:
            built = recipe.construct(device)
        with torch.no_grad():
            load_weights(built.model, recipe.checkpoint(seed_b, device))
            with dev:
                post_load_model(built.model, recipe.post_load)
            x = recipe.example_input(device)
            ref = built.forward(x).detach().float().cpu().clone()
        del built
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        send("cold_b", shape=list(ref.shape))

        stage = "load_a"
        with dev:
            built = recipe.construct(device)
            driver.record(built.model)
        with torch.no_grad():
            load_weights(built.model, recipe.checkpoint(seed_a, device))
            with dev:
                post_load_model(built.model, recipe.post_load)
            static_x = x.clone()
            eager_a = built.forward(static_x).detach().float().cpu().clone()
        send("load_a", reload_path=driver.name, reload_note=why, notes=built.notes)

        stage = "capture"
        roots = built.roots or {"layer": built.layer}
        graph = None
        with torch.no_grad():
            if dev.type == "cuda":
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(2):
                        built.forward(static_x)
                torch.cuda.current_stream().wait_stream(s)
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                rec = DispatchRecorder()
                with torch.cuda.graph(graph):
                    with rec:
                        static_out = built.forward(static_x)
                manifest = Manifest.record(roots, rec, inputs=[static_x])
                graph.replay()
                torch.cuda.synchronize()
                replay_a = compare(static_out, eager_a)
            else:
                rec = DispatchRecorder(keep_log=True)
                with rec:
                    static_out = built.forward(static_x)
                graph = CpuGraph(rec, static_out)
                manifest = Manifest.record(roots, rec, inputs=[static_x])
                replay_a = compare(graph.replay(), eager_a)
        send(
            "capture",
            walk=sum(1 for e in manifest.entries.values() if "walk" in e.sources),
            dispatch=sum(1 for e in manifest.entries.values() if "dispatch" in e.sources),
            dispatch_only=[e.op for e in manifest.entries.values() if e.sources == {"dispatch"}],
            graph_visible=len(manifest.graph_visible()),
            ops=rec.ops,
            replay_before_reload=replay_a,
        )
        if not replay_a["match"]:
            raise RuntimeError(f"replay before reload disagrees with eager A: {replay_a}")

        stage = "reload"
        with torch.no_grad():
            driver.reload(built.model, recipe.checkpoint(seed_b, device))
        gc.collect()
        send("reload", reload_path=driver.name)

        stage = "census"
        rows = take_census(manifest)
        own = fixes.get(spec.get("target", ""))
        extra = own.links if (own is not None and spec.get("fixed")) else ()
        linked = link_rows(spec["finding"], manifest, rows, extra)
        send(
            "census",
            rows=[r.to_json() for r in rows],
            linked=[r.path for r in linked],
        )

        stage = "eager_b"
        with torch.no_grad():
            eager_b = built.forward(static_x)
        send("eager_b", **compare(eager_b, ref))
        del eager_b

        stage = "pressure"
        if dev.type == "cuda":
            from reload_lint.confirm.pressure import apply_pressure

            pressure = apply_pressure(rows, device)
            hold = pressure.pop("_hold")
        else:
            pressure = {"mode": "cpu-poison", "note": "dead captured tensors read as 0x7F bytes"}
            hold = None
        send("pressure", **pressure)

        stage = "replay"
        send("replay_start")
        if dev.type == "cuda":
            graph.replay()
            torch.cuda.synchronize()
            out = static_out.detach().float().cpu()
            extra = {}
        else:
            out = graph.replay()
            extra = {"poisoned_reads": list(graph.poisoned)}
        send("replay", **compare(out, ref), **extra)
        del hold
        send("done")
    except BaseException as exc:  # report everything, the parent decides
        msg = str(exc).strip().splitlines()
        send(
            stage,
            ok=False,
            error=f"{type(exc).__name__}: {msg[0] if msg else ''}"[:500],
            tb=traceback.format_exc()[-4000:],
        )
    finally:
        try:
            conn.close()
        except Exception:
            pass
