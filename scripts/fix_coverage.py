"""Issue 18's done-when figures for one release, on copies of its sources (never the cache).

    python scripts/fix_coverage.py --vllm 0.25.1 [--work /tmp/fixcov]

1. copy the release twice (`fix/` and `diff/`); audit `fix/` (JSON, fixes computed): how many
   findings have a patch, by rule, and every finding without one with its reason;
2. `check --diff --unsafe-fixes` in `diff/` (writes nothing), then `git apply` that diff there;
3. `check --fix --unsafe-fixes` in `fix/`;
4. the two trees must be byte-identical (`--diff` prints exactly what `--fix` writes), every
   changed file must parse, and a re-audit of `fix/` must report none of the patched findings
   (RL108's patch is at the rebuild sites: counted apart).
"""

from __future__ import annotations

import argparse
import ast
import filecmp
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path


def _check(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "reload_lint", "check", "vllm", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=3600)


def _findings(cwd: Path, *extra: str) -> list[dict]:
    out = cwd.parent / f"{cwd.name}-{len(extra)}.json"
    proc = _check(cwd, "--format", "json", "-o", str(out), "--exit-zero", *extra)
    if proc.returncode != 0:
        raise SystemExit(f"check failed in {cwd}: {proc.stderr[-2000:]}")
    return json.loads(out.read_text())["findings"]


def _diff_trees(a: Path, b: Path) -> list[str]:
    bad = []
    for dirpath, _dirs, files in os.walk(a):
        for fn in files:
            if fn.endswith(".py"):
                pa = Path(dirpath) / fn
                pb = b / pa.relative_to(a)
                if not pb.exists() or not filecmp.cmp(pa, pb, shallow=False):
                    bad.append(str(pa.relative_to(a)))
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm", required=True, metavar="VERSION")
    ap.add_argument("--work", default="/tmp/reload-lint-fixcov")
    ns = ap.parse_args(argv)
    from reload_lint.sources import release_sources

    src = release_sources("vllm", ns.vllm)
    work = Path(ns.work) / ns.vllm
    shutil.rmtree(work, ignore_errors=True)
    fix, dif = work / "fix", work / "diff"
    for d in (fix, dif):
        shutil.copytree(src, d)
    before = _findings(fix, "--show-fixes")
    total, patched = Counter(), Counter()
    manual = []
    for f in before:
        total[f["rule"]] += 1
        rem = f.get("remedy") or {}
        if rem.get("patch"):
            patched[f["rule"]] += 1
        else:
            manual.append(f)
    n, p = len(before), sum(patched.values())
    print(f"vLLM {ns.vllm}: {p}/{n} findings have a validated patch ({100 * p / max(n, 1):.1f}%)")
    for rule in sorted(total):
        print(f"  {rule}: {patched[rule]}/{total[rule]}")
    for f in manual:
        why = (f.get("remedy") or {}).get("refused") or (f.get("remedy") or {}).get("recipe")
        print(f"  no codemod: {f['path']}:{f['line']} {f['rule']} {f['target']}: {why}")

    proc = _check(dif, "--diff", "--unsafe-fixes")
    patch = proc.stdout
    print(f"--diff: exit {proc.returncode}, {len(patch.splitlines())} lines; {proc.stderr.strip()}")
    subprocess.run(["git", "apply", "-p1", "-"], input=patch, text=True, cwd=dif, check=True)
    proc = _check(fix, "--fix", "--unsafe-fixes")
    print("--fix:", [ln for ln in proc.stdout.splitlines() if ln.startswith("Found")])
    differ = _diff_trees(fix, dif) + _diff_trees(dif, fix)
    print(
        f"--diff applied == --fix written: {not differ}"
        + (f" (differ: {differ})" if differ else "")
    )
    changed = _diff_trees(fix, src)
    bad = []
    for rel in changed:
        try:
            ast.parse((fix / rel).read_text(encoding="utf-8"))
        except SyntaxError as exc:
            bad.append(f"{rel}: {exc}")
    print(f"patched files: {len(changed)}, all parse: {not bad} {bad or ''}")
    after = _findings(fix, "--no-fixes")
    key = lambda f: (f["rule"], f["path"], f["symbol"], f["target"])  # noqa: E731
    fixed = [f for f in before if (f.get("remedy") or {}).get("patch")]
    still = Counter(key(f) for f in after)
    # a key fixed at one store may still be reported at another one nobody patched
    unfixed = Counter(key(f) for f in before if not (f.get("remedy") or {}).get("patch"))
    direct = [f for f in fixed if f["rule"] != "RL108"]
    back = [f for f in direct if still[key(f)] > unfixed[key(f)]]
    lazy = [f for f in fixed if f["rule"] == "RL108" and still[key(f)]]
    print(
        f"re-audit: {len(after)} findings; patched sites reported again: {len(back)} of "
        f"{len(direct)}; RL108 lazy stores still listed (patched at the rebuild site): "
        f"{len(lazy)}"
    )
    for f in back:
        print(f"  reported again: {f['path']}:{f['line']} {f['rule']} {f['target']}")
    gained = [f for f in after if key(f) not in {key(g) for g in before}]
    for f in gained:
        print(
            f"  shown by the fixes (folded or masked before): {f['path']}:{f['line']} "
            f"{f['rule']} {f['target']}"
        )
    return 1 if differ or bad or back else 0


if __name__ == "__main__":
    raise SystemExit(main())
