"""Parent side: map findings to family rows, run each row's builds in children, decide.

The parent never touches the GPU. A *run* is one child process building one layer of one
family row on one backend (``pipeline.py``); it serves every finding of that row, since the
census links each finding's target separately. Per row and backend there is one bug-side run
(or, for recipes that ask for isolation, one per target with the other targets fixed) and one
fixed-side run with every fix applied. The parent enforces a per-run deadline and a shorter
replay deadline: a replay that does not return is killed and reported "livelock"; a child that
dies during replay, or raises a CUDA error there, is "illegal access"; a replay that disagrees
with a cold load of the new weights is "stale read". Everything a child reported before it hung
or died (the census above all) is kept.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.confirm.decide import census_links, executed_lines, judge, reach
from reload_lint.confirm.evidence import EvidenceRecord
from reload_lint.confirm.fixedside import (
    fix_fields,
    fixed_runs,
    prepare_sources,
    taken_off_names,
)
from reload_lint.confirm.patched import cleanup
from reload_lint.confirm.pipeline import run_pipeline
from reload_lint.confirm.planning import Site, plan_site
from reload_lint.findings import Finding


@dataclass
class Options:
    device: str = "cpu"
    site_timeout: float = 300.0
    replay_timeout: float = 30.0
    with_fix: bool = True
    recipe_modules: tuple[str, ...] = ()
    seeds: tuple[int, int] = (1, 2)
    log: object = None  # a file-like for progress lines
    backends: tuple[str, ...] | None = None  # restrict forced backends (None: the table's)
    jobs: int = 1  # children run at once (one GPU is shared; each child has its own allocator)
    #: fingerprint -> (unified diff, sha256, label): each finding's codemod (remedy.patch)
    patches: dict = field(default_factory=dict)
    #: the fixed side from a user's checkout (confirm --source DIR), for every site
    source_fix: object = None
    #: rerun each shared build once per red storage cluster with the other targets fixed, so
    #: the failure class of a red comes from a build where only its cluster's storage escapes
    isolate: bool = False


#: held while forking a child and while printing, so that no child inherits a lock that a
#: printing thread of the parent held at the fork
_FORK_LOCK = threading.Lock()


def _say(opts: Options, msg: str) -> None:
    out = opts.log if opts.log is not None else sys.stderr
    with _FORK_LOCK:
        print(msg, file=out, flush=True)


def _context():
    """fork (children inherit the imported vLLM: no 30-40 s import per run) unless this
    process already holds a CUDA context, which a forked child cannot use."""
    cuda_live = False
    if "torch" in sys.modules:
        import torch

        cuda_live = torch.cuda.is_initialized()
    if "fork" in mp.get_all_start_methods() and not cuda_live:
        return mp.get_context("fork")
    return mp.get_context("spawn")


def run_child(spec: dict, opts: Options) -> tuple[list[dict], dict]:
    """Run one pipeline in a child; returns (stage messages, outcome)."""
    # a fixed side from source imports the patched copy: a fresh interpreter (spawn), since a
    # forked child inherits the modules the parent already imported from the original
    ctx = mp.get_context("spawn") if spec.get("overlay") else _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=run_pipeline, args=(send, spec), daemon=True)
    with _FORK_LOCK:
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
            if msg["stage"] == "done" or not (msg.get("ok", True) or msg.get("continues")):
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


def stage(msgs: list[dict], name: str) -> dict | None:
    for m in msgs:
        if m["stage"] == name and m.get("ok", True):
            return m
    return None


def failed(msgs: list[dict]) -> dict | None:
    for m in msgs:
        if not m.get("ok", True):
            return m
    return None


# -- planning: planning.py (Site, plan_site) --------------------------------------------------


def _base(f: Finding, opts: Options, site: Site) -> dict:
    return {
        "fingerprint": f.fingerprint,
        "rule": f.rule,
        "path": f.path,
        "line": f.line,
        "symbol": f.symbol,
        "target": f.target,
        "device": opts.device,
        "row": site.row,
    }


def _common(recipe, sites: list[Site], opts: Options, preconditions: tuple[str, ...] = ()):
    """The spec fields every run of one build shares, and the recipe's fixes by target."""
    targets: dict[str, str | None] = {}
    for s in sites:
        # sites sharing a target share its owner: a path-qualified owner wins over a bare name
        if ":" not in (targets.get(s.canonical) or ""):
            targets[s.canonical] = s.owner
    rebuilt = sorted({s.canonical.split(".", 1)[-1] for s in sites if s.rebuilt})
    _mark_rebuilt(rebuilt)
    fixes = recipe.fixes_for(targets)
    common = {
        "rebuilt": rebuilt,
        "recipe": recipe.name,
        "recipe_modules": list(opts.recipe_modules),
        "device": opts.device,
        "targets": targets,
        "seeds": list(opts.seeds),
        "watch": sorted({s.finding.path for s in sites}),
        "preconditions": list(preconditions),
    }
    return common, fixes


def _runs_for(
    recipe, sites: list[Site], opts: Options, preconditions: tuple[str, ...] = ()
) -> list[dict]:
    """The bug-side child specs for one recipe (row + backend) and the sites it serves: one
    run, or one per target when the recipe isolates. ``preconditions`` (fixes.PRECONDITIONS)
    apply to both sides; the fixed side is planned by ``fixedside.fixed_runs``."""
    common, fixes = _common(recipe, sites, opts, preconditions)
    entries = [s.spec_entry() for s in sites]
    if recipe.isolate:
        runs = []
        for t in sorted(common["targets"]):
            mine = [e for e in entries if e["canonical"] == t]
            others = sorted(x for x in fixes if x != t)
            runs.append({**common, "fixed": False, "fixes": others, "findings": mine})
        return runs
    return [{**common, "fixed": False, "fixes": [], "findings": entries}]


def _isolated_run(
    recipe, sites: list[Site], opts: Options, preconditions: tuple[str, ...], members: set[str]
) -> dict | None:
    """The bug-side spec of a shared build rerun for one storage cluster (``members``: its
    fingerprints): every other target of the build fixed. None when nothing else can be fixed
    (the shared build is then all there is)."""
    [spec] = _runs_for(recipe, sites, opts, preconditions)
    mine = {s.canonical for s in sites if s.finding.fingerprint in members}
    others = sorted(t for t in recipe.fixes_for(spec["targets"]) if t not in mine)
    if not others:
        return None
    findings = [e for e in spec["findings"] if e["fingerprint"] in members]
    return {**spec, "fixes": others, "findings": findings}


def shared_clusters(records: list[EvidenceRecord]) -> dict[tuple, dict[str, set[str]]]:
    """(build name, preconditions) -> {cluster: its fingerprints} for the red bug-side records
    of builds that let more than one cluster escape (verdicts.finalize on a copy)."""
    from reload_lint.confirm.verdicts import finalize, precondition_names

    rows = finalize([r.to_json() for r in records if not r.fixed])
    out: dict[tuple, dict[str, set[str]]] = {}
    for r in rows:
        if r["shared_build"] and r["cluster"] and not r.get("isolation"):
            key = (r["recipe"], tuple(precondition_names(r)))
            out.setdefault(key, {}).setdefault(r["cluster"], set()).add(r["fingerprint"])
    return out


def _isolation_jobs(by_recipe: dict, records: list[EvidenceRecord], opts: Options) -> list:
    """Jobs for ``--isolate``: per shared build (not an isolating recipe), one bug-side rerun
    per red storage cluster with every other target fixed."""
    jobs = []
    for (name, pre), clusters in sorted(shared_clusters(records).items()):
        recipe, group = by_recipe[name]
        if getattr(recipe, "isolate", False):
            continue
        for cluster, members in sorted(clusters.items()):
            spec = _isolated_run(recipe, group, opts, pre, members)
            if spec is not None:
                _say(opts, f"{name}: cluster {cluster} alone (others fixed: {spec['fixes']})")
                jobs.append((name, recipe, group, spec))
    return jobs


def _mark_rebuilt(attrs) -> None:
    from reload_lint.confirm.recipes.vllm_layers import REBUILT

    REBUILT.update(attrs)


def _record(site: Site, recipe, spec, msgs, outcome, opts, t0) -> EvidenceRecord | None:
    f = site.finding
    fixed = spec["fixed"]
    lines = (spec.get("lines") or {}).get(f.fingerprint)
    # a patched file's lines moved: the flagged store is where the patch put its lines
    seen = dataclasses.replace(f, line=min(lines), end_line=max(lines)) if lines else f
    reached, why = reach(seen, msgs)
    if not reached:
        # no record: the build says nothing about this store; the log says why, so a reader
        # of the sweep sees every build a finding was planned on (a refused backend, a branch)
        row = getattr(getattr(recipe, "row", None), "id", None)
        _say(opts, f"{_site_head(f, fixed, row, recipe.name)}: NOT REACHED - {why}")
        return None
    verdict, failure, reason, grade = judge(f, msgs, outcome, fixed)
    load_a = stage(msgs, "load_a") or {}
    cap = stage(msgs, "capture") or {}
    fx = stage(msgs, "fixes") or {}
    pressure = dict(stage(msgs, "pressure") or {})
    replay = dict(stage(msgs, "replay") or {})
    if outcome["status"] != "ok":
        replay["outcome"] = outcome
    eager = stage(msgs, "eager_b")
    notes = list(load_a.get("notes", []))
    if load_a.get("reload_note"):
        notes.append(f"reload path: {load_a['reload_note']}")
    if eager is not None and not eager.get("match"):
        notes.append("eager forward after reload disagrees with cold B")
    if why:
        notes.append(why)
    err = failed(msgs)
    if err is not None and err.get("tb"):
        notes.append(f"error at {err['stage']}: {err['error']}")
    stages = []
    for m in msgs:
        s = {"stage": m["stage"], "ok": m.get("ok", True), "t": m.get("t")}
        if not m.get("ok", True):
            s["error"] = m.get("error")
            s["traceback"] = m.get("tb")
        stages.append(s)
    census = stage(msgs, "census")
    tier = load_a.get("tier") if census is not None else None
    base = _base(f, opts, site)
    row = getattr(recipe, "row", None)
    if row is not None:
        base["row"] = row.id
    return EvidenceRecord(
        **base,
        verdict=verdict,
        failure=failure,
        reason=reason,
        fixed=fixed,
        recipe=recipe.name,
        family=recipe.family,
        reload_path=load_a.get("reload_path"),
        **fix_fields(site.canonical, recipe, spec, fx),
        census=summarize_census(census, f, executed_lines(msgs)),
        pressure={k: v for k, v in pressure.items() if k not in ("stage", "ok", "t")},
        replay={k: v for k, v in replay.items() if k not in ("stage", "ok", "t")},
        stages=stages,
        notes=notes,
        elapsed_s=round(time.monotonic() - t0, 2),
        tier=tier,
        standins=list(load_a.get("standins", [])),
        backend=load_a.get("backend"),
        built=list(cap.get("built", [])),
        component=load_a.get("component"),
        preconditions=list(fx.get("preconditions", [])),
        gpu_peak_mib=(stage(msgs, "done") or {}).get("gpu_peak_mib"),
        grade=grade,
    )


def summarize_census(census: dict | None, finding, executed=None) -> dict:
    """The census as the record keeps it: ``linked`` the finding's own paths, ``lent`` the
    linked paths that are another finding's store (ownership.py), with why; ``also`` each store
    folded into the finding with its own paths among them and whether its line ran."""
    if census is None:
        return {}
    rows = census["rows"]
    own, lent = census_links(finding, census)
    out = {
        "linked": own,
        "lent": lent,
        "shared_with": shared_with(finding.fingerprint, census),
        "recorded": len(rows),
        "graph_visible": sum(1 for r in rows if r["graph_visible"]),
        "moved": sum(1 for r in rows if r["moved"]),
        "freed": sum(1 for r in rows if r["freed"]),
        "rows": rows,
    }
    folded = (census.get("also") or {}).get(finding.fingerprint)
    if folded:
        out["also"] = folded_stores(finding, folded["links"], own, executed)
    return out


def folded_stores(finding, links: dict, own: list[str], executed) -> dict:
    """Per store folded into the finding: where it is, its own linked paths (those of its
    target that are the finding's own), and whether its line ran (None: no line trace)."""
    mine = set(own)
    out = {}
    for a in finding.also or ():
        key = a.get("fingerprint") or a.get("target", "")
        ran = None
        if executed is not None:
            ran = a.get("line") in set(executed.get(a.get("path", ""), ()))
        out[key] = {
            "rule": a.get("rule"),
            "path": a.get("path"),
            "line": a.get("line"),
            "target": a.get("target"),
            "linked": [p for p in links.get(key, ()) if p in mine],
            "ran": ran,
        }
    return out


def shared_with(fingerprint: str, census: dict) -> dict:
    """The run's other findings whose links reach a storage this finding links, with their
    target and those paths: what the ownership rules read, kept so that the record can be
    judged again from itself (verdicts.legacy_messages), whether or not they have records."""
    key = {r["path"]: r.get("storage") for r in census["rows"]}
    mine = {key.get(p) for p in census["linked"].get(fingerprint, [])} - {None}
    out = {}
    for fp, paths in census["linked"].items():
        near = [p for p in paths if key.get(p) in mine]
        if fp != fingerprint and near:
            out[fp] = {"target": (census.get("targets") or {}).get(fp, ""), "paths": near}
    return out


def _site_head(f, fixed: bool, row: str | None, recipe: str | None, tier: str = "") -> str:
    """``[fingerprint] RULE symbol target (side, row@backend[, tier T])``: how a progress line
    names one finding in one build."""
    side = "fixed" if fixed else "bug"
    where = f"{row or '-'}@{(recipe or '-').rsplit(':', 1)[-1]}"
    return f"[{f.fingerprint[:10]}] {f.rule} {f.symbol} {f.target} ({side}, {where}{tier})"


def _say_record(opts: Options, r: EvidenceRecord) -> None:
    head = _site_head(r, r.fixed, r.row, r.recipe, f", tier {r.tier or '-'}")
    _say(
        opts,
        f"{head}: {r.verdict.upper()}{' ' + r.failure if r.failure else ''} - {r.reason}",
    )


def confirm(findings: list[Finding], opts: Options) -> list[EvidenceRecord]:
    from reload_lint.confirm.recipes import load_builtin

    for mod in opts.recipe_modules:
        __import__(mod)
    load_builtin()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sites = [plan_site(f, opts) for f in findings]
    by_recipe: dict[str, tuple[object, list[Site]]] = {}
    for s in sites:
        for r in s.recipes:
            by_recipe.setdefault(r.name, (r, []))[1].append(s)
    pre_done = set()
    for r, _ in by_recipe.values():
        pre = getattr(r, "preimport", None)
        if pre is not None and type(r) not in pre_done:
            pre_done.add(type(r))
            try:
                pre()
            except Exception as exc:  # the child reports it properly
                _say(opts, f"preimport of {r.name} failed: {type(exc).__name__}: {exc}")
    _say(
        opts,
        f"reload-lint confirm: {len(findings)} site(s), {len(by_recipe)} build(s), "
        f"children by {_context()._name}",
    )
    records: dict[str, list[EvidenceRecord]] = {s.finding.fingerprint: [] for s in sites}
    tried: dict[str, list[str]] = {s.finding.fingerprint: [] for s in sites}
    for s in sites:
        if s.early is not None:
            rec = EvidenceRecord(
                **_base(s.finding, opts, s),
                verdict="inconclusive",
                failure=None,
                reason=s.early,
            )
            records[s.finding.fingerprint].append(rec)
            _say_record(opts, rec)
    lock = threading.Lock()
    red_recipes: set[str] = set()
    #: build -> fingerprints whose bug side it found red (each gets an isolated fixed run)
    red_sites: dict[str, set[str]] = {}
    #: builds whose reload vLLM itself refused in a way a known fix shape gets past (a post-load
    #: that masks the reload, an expanded kernel tensor the copy-back cannot write): the
    #: preconditions to rerun them with (fixes.PRECONDITIONS)
    needs: dict[str, tuple[str, ...]] = {}
    #: build -> the layer attributes its refused reload named as masking (what ``unshadow``
    #: takes off the layer): fixedside.fixed_runs holds them by monkeypatch, not codemod
    taken_off: dict[str, set[str]] = {}

    def one(job):
        name, recipe, group, spec = job
        t0 = time.monotonic()
        msgs, outcome = run_child(spec, opts)
        served = {e["fingerprint"] for e in spec["findings"]}
        err = failed(msgs)
        pre = err.get("precondition") if err is not None else None
        if pre == "unshadow":
            with lock:
                taken_off.setdefault(name, set()).update(taken_off_names(err.get("masked")))
        if pre and pre not in spec["preconditions"]:
            with lock:
                needs[name] = (*spec["preconditions"], pre)
                _say(opts, f"{name}: {err['error']}; rerun with {', '.join(needs[name])}")
        for s in group:
            if s.finding.fingerprint not in served:
                continue
            rec = _record(s, recipe, spec, msgs, outcome, opts, t0)
            with lock:
                if rec is None:
                    _, why = reach(s.finding, msgs)
                    tried[s.finding.fingerprint].append(f"{name.rsplit(':', 1)[-1]}: {why}")
                    continue
                records[s.finding.fingerprint].append(rec)
                if rec.verdict == "red" and not rec.fixed:
                    red_recipes.add(name)
                    red_sites.setdefault(name, set()).add(s.finding.fingerprint)
            _say_record(opts, rec)

    def sweep(fixed: bool, only=None, jobs=None) -> None:
        if jobs is not None:
            pass
        elif fixed:
            jobs = fixed_jobs()
        else:
            jobs = [
                (name, recipe, group, spec)
                for name, (recipe, group) in by_recipe.items()
                if only is None or name in only
                for spec in _runs_for(recipe, group, opts, needs.get(name, ()))
            ]
        if opts.jobs <= 1:
            for job in jobs:
                one(job)
            return
        with ThreadPoolExecutor(max_workers=opts.jobs) as pool:
            list(pool.map(one, jobs))

    overlay_parent = Path(tempfile.mkdtemp(prefix="reload-lint-fixed-"))
    sources = prepare_sources(findings, opts.patches, opts.source_fix)

    def fixed_jobs() -> list:
        jobs = []
        for name in sorted(red_recipes):
            recipe, group = by_recipe[name]
            common, fixes = _common(recipe, group, opts, needs.get(name, ()))
            runs, refused = fixed_runs(
                common,
                group,
                fixes,
                red_sites.get(name, set()),
                sources,
                overlay_parent,
                taken_off.get(name, set()),
            )
            for s, why in refused:
                rec = EvidenceRecord(
                    **_base(s.finding, opts, s),
                    verdict="inconclusive",
                    failure=None,
                    reason=why,
                    fixed=True,
                    recipe=recipe.name,
                    family=recipe.family,
                    fix_source="codemod",
                )
                records[s.finding.fingerprint].append(rec)
                _say_record(opts, rec)
            jobs += [(name, recipe, group, spec) for spec in runs]
        return jobs

    def isolation() -> list:
        return _isolation_jobs(by_recipe, [r for recs in records.values() for r in recs], opts)

    try:
        return _sweeps(sweep, needs, opts, records, tried, sites, isolation)
    finally:
        cleanup(overlay_parent)


def _sweeps(sweep, needs, opts, records, tried, sites, isolation) -> list[EvidenceRecord]:
    sweep(fixed=False)
    from reload_lint.confirm.fixes import PRECONDITIONS

    done: dict[str, tuple[str, ...]] = {}
    for _ in range(len(PRECONDITIONS)):  # a rerun may meet the next refusal
        todo = {n: p for n, p in needs.items() if done.get(n) != p}
        if not todo:
            break
        done.update(todo)
        sweep(fixed=False, only=set(todo))
    if opts.isolate:
        sweep(fixed=False, jobs=isolation())
    if opts.with_fix:
        sweep(fixed=True)
    out: list[EvidenceRecord] = []
    for s in sites:
        fp = s.finding.fingerprint
        if not records[fp]:
            rec = EvidenceRecord(
                **_base(s.finding, opts, s),
                verdict="inconclusive",
                failure=None,
                reason="; ".join(dict.fromkeys(tried[fp])) or "no run reached it",
                recipe=s.recipes[0].name if s.recipes else None,
            )
            records[fp].append(rec)
            _say_record(opts, rec)
        out.extend(records[fp])
    return out
