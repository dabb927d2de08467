"""``reload-lint confirm``: findings JSON in, evidence JSON out (docs/runner.md).

Exit codes: 0 no site confirmed red on its bug side (or ``--exit-zero``), 1 at least one red,
2 usage error (missing/corrupt findings file, unknown selector, no torch, bad device).
"""

from __future__ import annotations

import sys
from pathlib import Path

from reload_lint.errors import ReloadLintError


def add_arguments(p) -> None:
    p.add_argument(
        "--findings", required=True, metavar="FILE", help="findings JSON (check --format json)"
    )
    p.add_argument(
        "--site",
        action="append",
        default=[],
        metavar="SELECTOR",
        help="fingerprint (or prefix), rule code, or path:line; repeatable (default: all)",
    )
    p.add_argument("--device", default="cpu", help="cpu (storage census, CI) or cuda[:N]")
    p.add_argument("--output", "-o", required=True, metavar="FILE", help="evidence JSON to write")
    p.add_argument(
        "--recipes",
        action="append",
        default=[],
        metavar="MODULE",
        help="import extra harness recipes from MODULE (repeatable)",
    )
    p.add_argument("--no-fix", action="store_true", help="skip the fixed side of each pair")
    p.add_argument(
        "--source",
        metavar="DIR",
        help="fixed side from this vLLM checkout (your branch), bug side from the importable "
        "vLLM; refused (exit 2) unless both are the same version",
    )
    p.add_argument(
        "--replay-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds a graph replay may take before the run is stopped (default 30)",
    )
    p.add_argument(
        "--site-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds one run (a build, capture, reload and replay) may take (default 300)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="runs at once (children share the GPU; each has its own allocator); default 1",
    )
    p.add_argument(
        "--isolate",
        action="store_true",
        help="rerun each shared build once per red storage cluster with the other targets "
        "fixed (the failure class of a red then comes from its own cluster's storage)",
    )
    p.add_argument(
        "--log", metavar="FILE", help="also write every progress line (the sweep log) to FILE"
    )
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when sites are red")
    p.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")


def run(args) -> int:
    from reload_lint.confirm.selection import load_findings, load_patches, select_sites

    findings = load_findings(args.findings)
    sites = select_sites(findings, args.site)
    source = None
    if args.source:
        # before torch or vLLM is imported: the check reads versions from files only
        from reload_lint.confirm.source import check_versions

        source = check_versions(Path(args.source), _package(sites))
    device = args.device.strip().lower()
    if not (device == "cpu" or device == "cuda" or device.startswith("cuda:")):
        raise ReloadLintError(f"--device {args.device}: expected cpu or cuda[:N]")
    try:
        import torch
    except ImportError:
        raise ReloadLintError(
            "confirm needs torch: pip install 'reload-lint[runtime]' (torch==2.13.0 here)"
        ) from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ReloadLintError("--device cuda: no CUDA device is visible")
    if device == "cuda":
        device = "cuda:0"
    from reload_lint.confirm.evidence import evidence_document, write_evidence
    from reload_lint.confirm.reload import VllmLayerwiseReload
    from reload_lint.confirm.runner import Options, confirm
    from reload_lint.confirm.verdicts import finalize

    import_root = str(Path.cwd())
    if import_root not in sys.path:
        sys.path.insert(0, import_root)
    for mod in args.recipes:
        try:
            __import__(mod)
        except Exception as exc:
            raise ReloadLintError(f"--recipes {mod}: cannot import ({exc})") from None
    fix_from_source = None
    if source is not None and not args.no_fix:
        from reload_lint.confirm.source import source_fix

        fix_from_source = source_fix(Path(args.source), _package(sites))
    opts = Options(
        patches=load_patches(args.findings),
        source_fix=fix_from_source,
        device=device,
        site_timeout=args.site_timeout,
        replay_timeout=args.replay_timeout,
        with_fix=not args.no_fix,
        recipe_modules=tuple(args.recipes),
        jobs=max(1, args.jobs),
        isolate=args.isolate,
    )
    log = open(args.log, "a", encoding="utf-8") if args.log else None
    if log is not None:
        opts.log = _Tee(log, sys.stderr)
    try:
        records = confirm(sites, opts)
    finally:
        if log is not None:
            log.close()
    env = {"torch": torch.__version__}
    if device.startswith("cuda"):
        env["gpu"] = _gpu_name(device)
    try:
        import vllm

        env["vllm"] = getattr(vllm, "__version__", "unknown")
    except Exception:
        env["vllm"] = None
    env["vllm_reload_api"] = VllmLayerwiseReload.importable() or "importable"
    if source is not None:
        env["source"] = source
    doc = evidence_document(finalize([r.to_json() for r in records]), device=device, env=env)
    write_evidence(Path(args.output), doc)
    summary = summary_lines(doc, len(sites), args.output)
    for line in summary:
        print(line, file=sys.stderr)
    if args.log:
        # the sweep log ends with the same summary (the committed log is what a reviewer reads)
        with open(args.log, "a", encoding="utf-8") as log:
            log.write("".join(line + "\n" for line in summary))
    red_bug = any(r["verdict"] == "red" and not r["fixed"] for r in doc["evidence"])
    return 1 if red_bug and not args.exit_zero else 0


def summary_lines(doc: dict, n_sites: int, output: str) -> list[str]:
    """The end-of-run summary: the coarse verdicts, then every grade counted on its own (bug
    side: stock reload and under a precondition apart, each with the tiers its records
    reached; the fixed side per fix source), the storage clusters, and how many red bug-side
    records force a platform-only path or rest on harness reads. ``--log`` gets it too."""
    from reload_lint.confirm.evidence import GRADES

    s = doc["summary"]
    rows = doc["evidence"]
    out = [
        f"confirmed {n_sites} site(s), {len(rows)} record(s): "
        f"{s['red']} red, {s['green']} green, {s['unread']} unread, "
        f"{s['inconclusive']} inconclusive -> {output}"
    ]
    for side, label in (("stock", "stock reload"), ("precondition", "under a precondition")):
        g = doc["grades"][side]
        mine = [
            r for r in rows if not r["fixed"] and bool(r.get("preconditions")) == (side != "stock")
        ]
        if side == "precondition" and not mine:
            continue
        tiers: dict[str, int] = {}
        for r in mine:
            tiers[r.get("tier") or "none"] = tiers.get(r.get("tier") or "none", 0) + 1
        out.append(
            f"  bug-side records, {label}: "
            + ", ".join(f"{g.get(grade, 0)} {grade}" for grade in GRADES)
            + " (tier: "
            + ", ".join(f"{tiers.get(t, 0)} {t}" for t in ("replay", "census", "none"))
            + ")"
        )
    by_source: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["fixed"]:
            how = r.get("fix_source") or "monkeypatch"
            if r.get("preconditions"):
                how += " under a precondition"
            row = by_source.setdefault(how, dict.fromkeys(GRADES, 0))
            grade = r.get("grade") or "inconclusive"
            row[grade] = row.get(grade, 0) + 1
    for how, row in sorted(by_source.items()):
        out.append(
            f"  fixed side from {how}: " + ", ".join(f"{n} {grade}" for grade, n in row.items())
        )
    clusters = {r["cluster"] for r in rows if r.get("cluster")}
    shared = {r["cluster"] for r in rows if r.get("cluster") and r.get("shared_build")}
    out.append(f"  storage clusters: {len(clusters)} ({len(shared)} with a shared build)")
    red = [r for r in rows if not r["fixed"] and r.get("verdict") == "red"]
    if red:
        forced: dict[str, int] = {}
        for r in red:
            if r.get("forced"):
                forced[r["forced"]["platform"]] = forced.get(r["forced"]["platform"], 0) + 1
        out.append(
            f"  red bug-side records forcing a platform-only path: {sum(forced.values())}"
            + (
                " (" + ", ".join(f"{n} {p}" for p, n in sorted(forced.items())) + ")"
                if forced
                else ""
            )
            + f"; resting on harness reads or stand-in storage: "
            f"{sum(1 for r in red if r.get('harness_reads'))}"
        )
    return out


def _package(sites) -> str:
    """The top-level package the findings' paths are in (``vllm``)."""
    tops = {f.path.split("/", 1)[0] for f in sites if "/" in f.path}
    return tops.pop() if len(tops) == 1 else "vllm"


class _Tee:
    def __init__(self, *outs):
        self.outs = outs

    def write(self, text: str) -> None:
        for o in self.outs:
            o.write(text)

    def flush(self) -> None:
        for o in self.outs:
            o.flush()


def _gpu_name(device: str) -> str:
    # Only the name; nvidia-smi avoids initialising CUDA in this (forking) parent.
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
