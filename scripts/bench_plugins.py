#!/usr/bin/env python3
"""Speed of a plugin audit against its base (issue 26): `check PKG --base vllm==X` next to
`check --vllm X` (the base alone) and `ruff check PKG`, in the same run.

Cases per package (each a fresh process, medians of --runs):
  ruff            ruff check --no-cache PKG
  base alone      reload-lint check --vllm X --no-cache        (the whole release analysed;
                  timed once per base release)
  plugin cold     reload-lint check PKG --base vllm==X --no-cache
  plugin warm     reload-lint check PKG --base vllm==X          (cache primed, nothing changed)

Done when (issue 26): plugin cold < 3x base alone. A fork audited as its own base (no `--base`,
vllm-hust) has no base-alone figure. The packages, their bases and held-out status are
scripts/plugin_targets.py; their sources come from PyPI once (sources.release_sources, a
wheel or an sdist). Each line gives the host's 1-minute load average before and after it.

    python scripts/bench_plugins.py --runs 3
    python scripts/bench_plugins.py --runs 1 --cached-only --markdown   (no downloads)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from plugin_targets import TARGETS


def _timed(cmd, cwd, env) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _cached(dist: str, version: str) -> bool:
    from reload_lint import sources

    return sources._find_archive(sources.cache_root() / "wheels", dist, version) is not None


def _load() -> float:
    return os.getloadavg()[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", help="one PyPI name of plugin_targets.TARGETS")
    ap.add_argument("--cached-only", action="store_true", help="skip what is not downloaded yet")
    ap.add_argument("--markdown", action="store_true", help="also print a markdown table")
    args = ap.parse_args(argv)
    from reload_lint.sources import SourceError, release_sources

    lint = [sys.executable, "-m", "reload_lint", "check"]
    env = dict(os.environ)
    env.pop("RELOAD_LINT_DEBUG", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    print(
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {args.runs} runs per case, "
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    base_alone: dict[str, float] = {}
    rows = []

    def med(cmd, cwd):
        return statistics.median(_timed(cmd, cwd, env) for _ in range(args.runs))

    for t in TARGETS:
        if args.only and t.name != args.only:
            continue
        if args.cached_only and not (
            _cached(t.name, t.version) and (t.base is None or _cached("vllm", t.base))
        ):
            print(f"{t.name} {t.version}: skipped (not in the cache)")
            continue
        try:
            roots = [release_sources(top, t.version, dist=t.name) for top in t.tops]
            if t.base:
                release_sources("vllm", t.base)
        except SourceError as exc:
            print(f"{t.name} {t.version}: skipped ({exc})")
            continue
        load0 = _load()
        if t.base and t.base not in base_alone:
            base_alone[t.base] = med([*lint, "--vllm", t.base, "--no-cache", "--exit-zero"], None)
        with_base = ["--base", f"vllm=={t.base}"] if t.base else []
        m = {"ruff": 0.0, "plugin cold": 0.0, "plugin warm": 0.0}
        for top, root in zip(t.tops, roots, strict=True):
            ruff = [sys.executable, "-m", "ruff", "check", "--no-cache", "--exit-zero", "-q", top]
            warm = [*lint, top, *with_base, "--exit-zero"]
            subprocess.run(warm, cwd=root, env=env, capture_output=True)  # prime the cache
            m["ruff"] += med(ruff, root)
            m["plugin cold"] += med([*lint, top, *with_base, "--no-cache", "--exit-zero"], root)
            m["plugin warm"] += med(warm, root)
        files = sum(
            len(list((r / top).rglob("*.py"))) for top, r in zip(t.tops, roots, strict=True)
        )
        load1 = _load()
        alone = base_alone.get(t.base) if t.base else None
        ratio = f"{m['plugin cold'] / alone:.2f}x" if alone else "n/a"
        base = f"vllm {t.base}" if t.base else "its own tree (no base)"
        print(
            f"{t.name} {t.version} ({files} files) on {base} (load {load0:.2f} -> {load1:.2f}): "
            f"ruff {m['ruff']:.2f} s, base alone {f'{alone:.2f} s' if alone else 'n/a'}, "
            f"plugin cold {m['plugin cold']:.2f} s ({ratio} base alone), "
            f"plugin warm {m['plugin warm']:.2f} s",
            flush=True,
        )
        rows.append((t, files, alone, m, ratio, load0, load1))
    if args.markdown and rows:
        print()
        print(
            "| package | files | base | base alone | plugin cold | cold / base alone | "
            "plugin warm | ruff | load | status |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for t, files, alone, m, ratio, load0, load1 in rows:
            status = (
                "open"
                if t.status == "open"
                else "held out"
                if "HELD" in t.status
                else "was held out"
            )
            print(
                f"| {t.name} {t.version} | {files} | {t.base or 'none (own tree)'} | "
                f"{f'{alone:.1f} s' if alone else 'n/a'} | {m['plugin cold']:.1f} s | {ratio} | "
                f"{m['plugin warm']:.1f} s | {m['ruff']:.2f} s | {load0:.2f} / {load1:.2f} | "
                f"{status} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
