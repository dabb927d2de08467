"""Parent side: map findings to recipes, run each site in a child under a watchdog, decide.

The parent never touches the GPU. Each (site, side) runs in its own child process, which
streams stage results back; the parent enforces a per-site deadline and a shorter replay
deadline. A replay that does not return is killed and reported red "livelock"; a child that
dies or reports a CUDA error during replay is red "illegal access"; a replay that disagrees with
a cold load of the new weights is red "stale read". Everything a child reported before it hung
or died (the census above all) is kept.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass

from reload_lint.confirm.evidence import Evidence
from reload_lint.confirm.site import run_site
from reload_lint.findings import Finding

CUDA_ERROR_MARKERS = ("illegal memory access", "CUDA error", "cudaError", "misaligned address")


@dataclass
class Options:
    device: str = "cpu"
    site_timeout: float = 300.0
    replay_timeout: float = 30.0
    with_fix: bool = True
    recipe_modules: tuple[str, ...] = ()
    seeds: tuple[int, int] = (1, 2)
    log: object = None  # a file-like for progress lines


def _say(opts: Options, msg: str) -> None:
    out = opts.log if opts.log is not None else sys.stderr
    print(msg, file=out, flush=True)


def _context():
    """fork (children inherit the imported vLLM: no 30-40 s import per site) unless this
    process already holds a CUDA context, which a forked child cannot use."""
    cuda_live = False
    if "torch" in sys.modules:
        import torch

        cuda_live = torch.cuda.is_initialized()
    if "fork" in mp.get_all_start_methods() and not cuda_live:
        return mp.get_context("fork")
    return mp.get_context("spawn")


def run_child(spec: dict, opts: Options) -> tuple[list[dict], dict]:
    """Run one site's pipeline in a child; returns (stage messages, outcome)."""
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=run_site, args=(send, spec), daemon=True)
    proc.start()
    send.close()
    msgs: list[dict] = []
    outcome = {"status": "ok"}
    start = time.monotonic()
    replay_started: float | None = None
    while True:
        now = time.monotonic()
        if replay_started is not None:
            deadline = replay_started + opts.replay_timeout
        else:
            deadline = start + opts.site_timeout
        wait = max(0.0, deadline - now)
        try:
            ready = recv.poll(min(wait, 1.0))
        except (EOFError, OSError):
            ready = False
        if ready:
            try:
                msg = recv.recv()
            except (EOFError, OSError):
                msg = None
            if msg is None:
                proc.join(5)
                outcome = _died(proc, replay_started)
                break
            msgs.append(msg)
            if msg["stage"] == "replay_start":
                replay_started = time.monotonic()
            if not msg.get("ok", True) or msg["stage"] == "done":
                break
            continue
        if not proc.is_alive() and not recv.poll(0):
            proc.join(5)
            outcome = _died(proc, replay_started)
            break
        if time.monotonic() >= deadline:
            if replay_started is not None:
                outcome = {
                    "status": "hang",
                    "stage": "replay",
                    "after_s": round(time.monotonic() - replay_started, 1),
                }
            else:
                last = msgs[-1]["stage"] if msgs else "start"
                outcome = {"status": "timeout", "stage": f"after {last}"}
            _kill(proc)
            break
    recv.close()
    if proc.is_alive():
        proc.join(10)
        if proc.is_alive():
            _kill(proc)
    return msgs, outcome


def _kill(proc) -> None:
    try:
        proc.kill()
    except Exception:
        pass
    proc.join(30)


def _died(proc, replay_started) -> dict:
    code = proc.exitcode
    return {
        "status": "died",
        "stage": "replay" if replay_started is not None else "before replay",
        "exitcode": code,
        "signal": -code if code is not None and code < 0 else None,
    }


def _stage(msgs: list[dict], name: str) -> dict | None:
    for m in msgs:
        if m["stage"] == name and m.get("ok", True):
            return m
    return None


def _failed(msgs: list[dict]) -> dict | None:
    for m in msgs:
        if not m.get("ok", True):
            return m
    return None


def decide(finding: Finding, msgs: list[dict], outcome: dict, fixed: bool) -> tuple[str, str, str]:
    """(verdict, failure, reason) from a child's stage messages and how it ended."""
    census = _stage(msgs, "census")
    err = _failed(msgs)
    if census is None:
        if err is not None:
            return "inconclusive", None, f"stopped at {err['stage']}: {err['error']}"
        if outcome["status"] == "timeout":
            return "inconclusive", None, f"timed out {outcome['stage']}"
        if outcome["status"] == "died":
            return (
                "inconclusive",
                None,
                f"child died {outcome['stage']} (exit {outcome['exitcode']})",
            )
        return "inconclusive", None, "no census was taken"
    rows = census["rows"]
    linked = [r for r in rows if r["path"] in set(census["linked"])]
    if not linked:
        seen = sorted({r["path"] for r in rows if r["moved"] or r["freed"]})
        return (
            "inconclusive",
            None,
            f"target {finding.target} not found among the recorded storages"
            + (f"; escaped: {', '.join(seen[:6])}" if seen else ""),
        )
    freed = [r for r in linked if r["freed"]]
    moved = [r for r in linked if r["moved"]]
    escaped = freed or moved
    others = [
        r
        for r in rows
        if (r["moved"] or r["freed"]) and r["graph_visible"] and r["path"] not in census["linked"]
    ]
    # replay outcome
    replay = _stage(msgs, "replay")
    rfail, rdetail = None, ""
    if outcome["status"] == "hang":
        rfail, rdetail = "livelock", f"replay did not return within {outcome['after_s']}s; killed"
    elif outcome["status"] == "died" and outcome["stage"] == "replay":
        rfail = "illegal access"
        rdetail = f"replay killed the process (exit {outcome['exitcode']})"
    elif err is not None and err["stage"] == "replay":
        e = err["error"]
        if any(m in e for m in CUDA_ERROR_MARKERS):
            rfail, rdetail = "illegal access", f"replay raised {e}"
        else:
            rfail, rdetail = "illegal access", f"replay raised {e} (out-of-bounds read on CPU)"
    elif replay is not None and not replay["match"]:
        rfail = "stale read"
        rdetail = f"replay disagrees with cold load of B (rel err {replay.get('rel')})"
    elif err is not None:
        return "inconclusive", None, f"stopped at {err['stage']}: {err['error']}"
    elif replay is None:
        return "inconclusive", None, f"replay did not run ({outcome})"

    def fmt(r):
        if r["freed"]:
            return f"{r['path']} freed (was {r['old_ptr']})"
        return f"{r['path']} moved {r['old_ptr']} -> {r['new_ptr']}"

    esc_txt = "; ".join(fmt(r) for r in (freed + [m for m in moved if m not in freed])[:4])
    if escaped:
        failure = rfail or ("freed" if freed else "moved")
        reason = esc_txt
        if rfail:
            reason += f"; {rdetail}"
        elif replay is not None and replay["match"]:
            reason += "; replay still matched cold B (value-identical stale memory)"
        side = "fix does not hold: " if fixed else ""
        return "red", failure, side + reason
    # target stable
    if rfail is None:
        extra = f" ({len(others)} other storages escaped)" if others else ""
        return (
            "green",
            None,
            f"target stable ({len(linked)} storage(s)); replay matches cold B" + (extra),
        )
    if fixed:
        other_txt = ", ".join(fmt(r) for r in others[:4]) or "none recorded"
        return "red", rfail, f"target stable but {rdetail}; other escaped: {other_txt}"
    other_txt = ", ".join(fmt(r) for r in others[:4])
    if others:
        return (
            "inconclusive",
            rfail,
            f"target stable; {rdetail}, attributable to other escaped storages: {other_txt}",
        )
    return "inconclusive", rfail, f"target stable and nothing else escaped, yet {rdetail}"


def _summarize_census(census: dict | None) -> dict:
    if census is None:
        return {}
    rows = census["rows"]
    return {
        "linked": census["linked"],
        "recorded": len(rows),
        "graph_visible": sum(1 for r in rows if r["graph_visible"]),
        "moved": sum(1 for r in rows if r["moved"]),
        "freed": sum(1 for r in rows if r["freed"]),
        "rows": rows,
    }


def confirm_site(finding: Finding, opts: Options) -> list[Evidence]:
    from reload_lint.confirm.recipes import find_recipe

    base = {
        "fingerprint": finding.fingerprint,
        "rule": finding.rule,
        "path": finding.path,
        "line": finding.line,
        "symbol": finding.symbol,
        "target": finding.target,
        "device": opts.device,
    }
    recipe, why = find_recipe(finding)
    if recipe is None:
        return [Evidence(**base, verdict="inconclusive", failure=None, reason=why)]
    base["recipe"] = recipe.name
    base["family"] = recipe.family
    why = recipe.unavailable(opts.device)
    if why:
        return [Evidence(**base, verdict="inconclusive", failure=None, reason=why)]
    target = recipe.canonical_target(finding)
    fixes = recipe.fixes()
    others = sorted(t for t in fixes if t != target)
    sides = [(False, others)]
    if opts.with_fix and target in fixes:
        sides.append((True, sorted(fixes)))
    out = []
    for fixed, fix_targets in sides:
        spec = {
            "recipe": recipe.name,
            "recipe_modules": list(opts.recipe_modules),
            "device": opts.device,
            "fixes": fix_targets,
            "fixed": fixed,
            "target": target,
            "finding": finding.to_json(),
            "seeds": list(opts.seeds),
        }
        t0 = time.monotonic()
        msgs, outcome = run_child(spec, opts)
        verdict, failure, reason = decide(finding, msgs, outcome, fixed)
        load_a = _stage(msgs, "load_a") or {}
        fx = _stage(msgs, "fixes") or {}
        pressure = dict(_stage(msgs, "pressure") or {})
        replay = dict(_stage(msgs, "replay") or {})
        if outcome["status"] != "ok":
            replay["outcome"] = outcome
        eager = _stage(msgs, "eager_b")
        notes = list(load_a.get("notes", []))
        if load_a.get("reload_note"):
            notes.append(f"reload path: {load_a['reload_note']}")
        if eager is not None and not eager.get("match"):
            notes.append("eager forward after reload disagrees with cold B")
        err = _failed(msgs)
        stages = []
        for m in msgs:
            s = {"stage": m["stage"], "ok": m.get("ok", True), "t": m.get("t")}
            if not m.get("ok", True):
                s["error"] = m.get("error")
                s["traceback"] = m.get("tb")
            stages.append(s)
        ev = Evidence(
            **base,
            verdict=verdict,
            failure=failure,
            reason=reason,
            fixed=fixed,
            reload_path=load_a.get("reload_path"),
            fix=fixes[target].description if fixed else None,
            isolation=[a for a in fx.get("applied", [])] if not fixed else [],
            census=_summarize_census(_stage(msgs, "census")),
            pressure={k: v for k, v in pressure.items() if k not in ("stage", "ok", "t")},
            replay={k: v for k, v in replay.items() if k not in ("stage", "ok", "t")},
            stages=stages,
            notes=notes,
            elapsed_s=round(time.monotonic() - t0, 2),
        )
        if err is not None and err.get("tb"):
            ev.notes.append(f"error at {err['stage']}: {err['error']}")
        out.append(ev)
        side = "fixed" if fixed else "bug"
        _say(
            opts,
            f"[{finding.fingerprint[:10]}] {finding.symbol} {finding.target} ({side}): "
            f"{verdict.upper()}{' ' + failure if failure else ''} - {reason}",
        )
    return out


def confirm(findings: list[Finding], opts: Options) -> list[Evidence]:
    from reload_lint.confirm.recipes import REGISTRY, load_builtin

    for mod in opts.recipe_modules:
        __import__(mod)
    load_builtin()
    for r in REGISTRY:
        pre = getattr(r, "preimport", None)
        if pre is not None and any(r.matches(f) for f in findings):
            if r.unavailable(opts.device):
                continue
            try:
                pre()
            except Exception as exc:  # the child reports it properly
                _say(opts, f"preimport of {r.name} failed: {type(exc).__name__}: {exc}")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    _say(opts, f"reload-lint confirm: {len(findings)} site(s), children by {_context()._name}")
    records: list[Evidence] = []
    for f in findings:
        records.extend(confirm_site(f, opts))
    return records
