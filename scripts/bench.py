#!/usr/bin/env python3
"""Speed of reload-lint against `ruff check` on real vLLM release trees (issue 4).

For each release (downloaded once into the user cache by reload_lint.sources), the tree is
copied to a scratch folder (the one-file case edits it) and each case runs as a fresh
process, several times; the script prints medians, ratios to ruff measured in the same run,
and each case's peak RSS (from wait4, per process).

Cases:
  ruff cold      ruff check --no-cache vllm
  ruff warm      ruff check vllm (its own cache primed)
  cold           reload-lint check vllm --no-cache
  warm           reload-lint check vllm (cache primed, nothing changed)
  one-file       a kernel file is edited, then `reload-lint check <that file>` from the tree's
                 root, as pre-commit calls it (whole project indexed, one file reported); the
                 edit appends a comment line, which leaves the file's record as it was: the
                 result is reused after re-parsing that one file (cache.py, early cutoff)
  one-file code  the same, but the edit appends a function nothing calls: the record changes,
                 but nothing the analysis read of it does (index/deps.py), so the result is
                 reused after re-parsing that one file (the finer-grained early cutoff)
  one-file note  a comment line put at the top of the body of the file's first post-load root
                 (`process_weights_after_loading`, the place `one-file root` edits): every
                 later line of the file moves, nothing else; the result is reused with its
                 lines moved once the new record is proven to be the last analysed one with a
                 line map (shiftcut.py, the line-shift cutoff). Run k puts k lines there, so
                 each run moves lines against the state the run before it left
  one-file root  pre-commit on the same file after a statement is added to the body of its first
                 post-load root (`process_weights_after_loading`): what the analysis read
                 changed, so it runs again over records from the pack (only that file is
                 parsed); the case a cutoff cannot help, reported as it is
  one-file pass  pre-commit on a file no finding passes through (the hook reports findings
                 located in or passing through the named files), after appending a function
                 nothing calls to it: the hook must pass (exit 0, shown) in under 1 s
  one-file new   pre-commit naming a file it has not named before (each run another file on
                 no finding's path, unedited): a new set of staged files shares the result of
                 the runs before it (the analysis is not keyed on the named files)

Targets: cold <= 10x ruff, warm <= 2x ruff, one-file, one-file code, one-file note and
one-file pass < 1 s, peak RSS < 1 GiB.

    python scripts/bench.py                      # vLLM 0.25.1 and 0.33.0, 5 runs each
    python scripts/bench.py --versions 0.25.1 --runs 3 --jobs 2
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ONE_FILE = "vllm/model_executor/layers/quantization/fp8.py"
ROOT_DEF = "    def process_weights_after_loading(self, layer"  # the first root method in it
# read by the analysis, on no finding's path in 0.25.1 or 0.33.0 (the one-file pass case)
QUIET_FILE = "vllm/model_executor/layers/quantization/utils/w8a8_utils.py"
# also on no finding's path in both releases: one newly named file per `one-file new` run
NEW_FILES = [
    f"vllm/model_executor/{p}"
    for p in (
        "parameter.py",
        "utils.py",
        "layers/quantization/utils/int8_utils.py",
        "layers/quantization/utils/fp8_utils.py",
        "layers/layernorm.py",
        "layers/activation.py",
    )
]


def timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in MiB, exit status) of one fresh process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    rc = proc.returncode
    if rc not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({rc}):\n{err}")
    rss = usage.ru_maxrss // 1024 if sys.platform != "darwin" else usage.ru_maxrss // (1 << 20)
    return wall, rss, rc


def _load() -> float:
    """The 1-minute load average (0 where the platform has none): the machine may be shared."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def ruff_cmd() -> list[str]:
    exe = shutil.which("ruff")
    return [exe] if exe else [sys.executable, "-m", "ruff"]


def bench_version(version: str, runs: int, jobs: int | None, keep: bool) -> dict:
    from reload_lint.sources import release_sources

    src = release_sources("vllm", version)
    scratch = Path(tempfile.mkdtemp(prefix=f"rl-bench-{version}-"))
    try:
        tree = scratch / "tree"
        shutil.copytree(src / "vllm", tree / "vllm")  # copy2 keeps the release's mtimes
        cache = scratch / "cache"
        env = {**os.environ, "RELOAD_LINT_NO_PROGRESS": "1", "PYTHONHASHSEED": "0"}
        # an installed reload-lint runs from byte-compiled modules (pip compiles them); with
        # PYTHONDONTWRITEBYTECODE set (some sessions set it) every measured run would compile
        # the package from source, ~0.2 s of CPU. The bytecode goes to the scratch folder.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
        pkg = Path(sys.modules["reload_lint"].__file__).parent
        compile_cmd = [sys.executable, "-m", "compileall", "-q", str(pkg)]
        subprocess.run(compile_cmd, env=env, stdout=subprocess.DEVNULL, check=False)
        rl = [sys.executable, "-m", "reload_lint", "check", "--exit-zero", "--format", "json"]
        if jobs:
            rl += ["-j", str(jobs)]
        ruff = [*ruff_cmd(), "check", "--exit-zero", "-q"]
        n_files = sum(1 for _ in (tree / "vllm").rglob("*.py"))

        cases: dict[str, list[tuple[float, int]]] = {}
        loads: dict[str, list[float]] = {}  # the 1-minute load average after each run

        codes: dict[str, list[int]] = {}

        def run(name: str, cmd: list[str], before=None) -> None:
            for _ in range(runs):
                if before is not None:
                    before()
                wall, rss, rc = timed(cmd, tree, env)
                cases.setdefault(name, []).append((wall, rss))
                loads.setdefault(name, []).append(_load())
                codes.setdefault(name, []).append(rc)

        run("ruff cold", [*ruff, "--no-cache", "vllm"])
        timed([*ruff, "vllm"], tree, env)  # prime ruff's cache
        run("ruff warm", [*ruff, "vllm"])
        run("cold", [*rl, "--no-cache", "vllm"])
        cache_args = ["--cache-dir", str(cache)]
        timed([*rl, *cache_args, "vllm"], tree, env)  # prime: the pack and the run result
        run("warm", [*rl, *cache_args, "vllm"])
        timed([*rl, *cache_args, ONE_FILE], tree, env)  # pre-commit's own first run
        edited = tree / ONE_FILE
        original = edited.read_text(encoding="utf-8")
        counter = iter(range(1_000_000))

        def edit() -> None:
            edited.write_text(original + f"\n# bench edit {next(counter)}\n", encoding="utf-8")

        run("one-file", [*rl, *cache_args, ONE_FILE], before=edit)

        def edit_code() -> None:
            n = next(counter)
            edited.write_text(
                original + f"\n\ndef _bench_edit_{n}():\n    return {n}\n", encoding="utf-8"
            )

        run("one-file code", [*rl, *cache_args, ONE_FILE], before=edit_code)

        anchor = original.index(ROOT_DEF)
        body = original.index(":\n", anchor) + 2  # the root's first body line
        notes = iter(range(1, 1_000_000))

        def edit_note() -> None:
            lines = "".join(f"        # bench note {i}\n" for i in range(next(notes)))
            edited.write_text(original[:body] + lines + original[body:], encoding="utf-8")

        run("one-file note", [*rl, *cache_args, ONE_FILE], before=edit_note)

        def edit_root() -> None:
            n = next(counter)
            edited.write_text(
                original[:body] + f"        _bench_probe = {n}\n" + original[body:],
                encoding="utf-8",
            )

        run("one-file root", [*rl, *cache_args, ONE_FILE], before=edit_root)
        edited.write_text(original, encoding="utf-8")

        quiet = tree / QUIET_FILE
        quiet_text = quiet.read_text(encoding="utf-8")
        gate = [c for c in rl if c != "--exit-zero"]  # the hook's exit status is the point
        timed([*gate, *cache_args, QUIET_FILE], tree, env)  # pre-commit's first run on it

        def edit_quiet() -> None:
            n = next(counter)
            quiet.write_text(quiet_text + f"\n\ndef _bench_quiet_{n}():\n    return {n}\n")

        run("one-file pass", [*gate, *cache_args, QUIET_FILE], before=edit_quiet)
        quiet.write_text(quiet_text, encoding="utf-8")
        timed([*gate, *cache_args, QUIET_FILE], tree, env)  # the tree as it was: its result
        for i in range(runs):
            rel = NEW_FILES[i % len(NEW_FILES)]
            wall, rss, rc = timed([*gate, *cache_args, rel], tree, env)
            cases.setdefault("one-file new", []).append((wall, rss))
            loads.setdefault("one-file new", []).append(_load())
            codes.setdefault("one-file new", []).append(rc)
        return {
            "version": version,
            "files": n_files,
            "cases": cases,
            "loads": loads,
            "codes": codes,
        }
    finally:
        if keep:
            print(f"kept {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def report(res: dict) -> str:
    cases = res["cases"]
    med = {k: statistics.median(w for w, _ in v) for k, v in cases.items()}
    peak = {k: max(r for _, r in v) for k, v in cases.items()}
    lines = [f"vLLM {res['version']} ({res['files']} files)"]
    loads = res.get("loads", {})
    lines.append(
        f"  {'case':<13} {'median s':>9} {'min s':>7} {'max s':>7} {'peak MiB':>9} "
        f"{'load':>9}  ratio"
    )
    for k, v in cases.items():
        walls = [w for w, _ in v]
        ld = loads.get(k) or [0.0]
        load = f"{min(ld):.1f}-{max(ld):.1f}"
        ratio = ""
        if k == "cold":
            ratio = (
                f"{med[k] / med['ruff warm']:.1f}x ruff, {med[k] / med['ruff cold']:.1f}x "
                "ruff --no-cache (target <= 10x)"
            )
        elif k == "warm":
            ratio = f"{med[k] / med['ruff warm']:.2f}x ruff (target <= 2x)"
        elif k == "one-file":
            ratio = f"{med[k] / med['ruff warm']:.2f}x ruff (target < 1 s)"
        elif k in ("one-file code", "one-file note"):
            ratio = f"{med[k] / med['ruff warm']:.2f}x ruff (target < 1 s)"
        elif k in ("one-file pass", "one-file new"):
            exits = ",".join(sorted({str(c) for c in res.get("codes", {}).get(k, ())}))
            ratio = f"{med[k] / med['ruff warm']:.2f}x ruff, exit {exits} (target < 1 s, exit 0)"
        elif k == "one-file root":
            ratio = (
                f"{med[k] / med['ruff warm']:.2f}x ruff (what was read changed: analysis re-run)"
            )
        lines.append(
            f"  {k:<13} {med[k]:>9.2f} {min(walls):>7.2f} {max(walls):>7.2f} {peak[k]:>9} "
            f"{load:>9}  {ratio}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", default="0.25.1,0.33.0", help="comma-separated vLLM releases")
    ap.add_argument("--runs", type=int, default=5, help="runs per case (median reported)")
    ap.add_argument("--jobs", "-j", type=int, default=None, help="reload-lint --jobs")
    ap.add_argument("--keep", action="store_true", help="keep the scratch trees")
    args = ap.parse_args(argv)
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {args.runs} runs per case")
    for v in [s.strip() for s in args.versions.split(",") if s.strip()]:
        print(report(bench_version(v, args.runs, args.jobs, args.keep)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
