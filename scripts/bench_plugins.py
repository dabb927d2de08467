#!/usr/bin/env python3
"""Speed of a plugin audit against its base (issue 26): `check PKG --base vllm==X` next to
`check --vllm X` (the base alone) and `ruff check PKG`, in the same run.

Cases per package (each a fresh process, medians of --runs):
  ruff            ruff check --no-cache PKG
  base alone      reload-lint check --vllm X --no-cache        (the whole release analysed)
  plugin cold     reload-lint check PKG --base vllm==X --no-cache
  plugin warm     reload-lint check PKG --base vllm==X          (cache primed, nothing changed)

Target: plugin cold < 3x base alone. The wheels come from PyPI once (sources.release_sources);
the host load is printed with each line.

    python scripts/bench_plugins.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# (PyPI name, version, top-level package, base vLLM)
TARGETS = [
    ("vllm-kunlun", "0.11.1", "vllm_kunlun", "0.11.1"),
    ("vllm-ascend", "0.23.0", "vllm_ascend", "0.23.0"),
    ("vllm-rbln", "0.12.0", "vllm_rbln", "0.30.0"),
]


def _timed(cmd, cwd, env) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", help="one PyPI name of TARGETS")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from reload_lint.sources import release_sources

    lint = [sys.executable, "-m", "reload_lint", "check"]
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {args.runs} runs per case")
    for dist, version, top, base in TARGETS:
        if args.only and dist != args.only:
            continue
        root = release_sources(top, version, dist=dist)
        release_sources("vllm", base)
        if True:
            env = dict(os.environ)
            env.pop("RELOAD_LINT_DEBUG", None)
            cases = {
                "ruff": ["ruff", "check", "--no-cache", "--exit-zero", "-q", top],
                "base alone": [*lint, "--vllm", base, "--no-cache", "--exit-zero"],
                "plugin cold": [*lint, top, "--base", f"vllm=={base}", "--no-cache", "--exit-zero"],
                "plugin warm": [*lint, top, "--base", f"vllm=={base}", "--exit-zero"],
            }
            subprocess.run(cases["plugin warm"], cwd=root, env=env, capture_output=True)
            med = {}
            for name, cmd in cases.items():
                med[name] = statistics.median(_timed(cmd, root, env) for _ in range(args.runs))
        load = os.getloadavg()[0]
        ratio = med["plugin cold"] / med["base alone"]
        print(
            f"{dist} {version} on vllm {base} (load {load:.2f}): ruff {med['ruff']:.2f} s, "
            f"base alone {med['base alone']:.2f} s, plugin cold {med['plugin cold']:.2f} s "
            f"({ratio:.2f}x base alone), plugin warm {med['plugin warm']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
