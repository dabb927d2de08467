"""How coupled are the analysis's roots? The figures docs/performance.md (Session 5) gives for
why `one-file root` cannot re-analyse only the roots an edit reaches.

One `--no-cache` analysis of a tree, with the analyzer's summary memo and its root runs
instrumented (in this process only; the code is not changed):

- roots and root runs (runs beyond the roots are the re-runs of roots that read an object
  field another root's constructor fills);
- roots that hit a summary another root computed, and how often (a summary's side effects
  are recorded once, by the first root to compute it);
- roots that share no summary either way;
- files each root's own analysis asks the index about (no memo propagation, so a lower
  bound), and the files asked about by the most roots.

    python scripts/root_coupling.py ~/.cache/reload-lint/sources/vllm-0.25.1
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path


def measure(tree: Path, package: str) -> dict:
    from reload_lint.analysis import interp
    from reload_lint.config import Config
    from reload_lint.engine import run_check
    from reload_lint.index import project

    current: list = [None]
    owner: dict = {}  # memo key -> the root that computed it
    hits: collections.Counter = collections.Counter()  # root -> hits on others' summaries
    given: set = set()  # roots whose summaries another root hit
    runs: list = []
    asked: dict = collections.defaultdict(set)  # root -> files it asked the index about

    class Memo(dict):
        def __setitem__(self, k, v):
            owner.setdefault(k, current[0])
            dict.__setitem__(self, k, v)

        def __contains__(self, k):
            found = dict.__contains__(self, k)
            if found and owner.get(k) not in (None, current[0]):
                hits[current[0]] += 1
                given.add(owner[k])
            return found

    init, run_root = interp.Analyzer.__init__, interp.Analyzer.run_root

    def patched_init(self, *a, **k):
        init(self, *a, **k)
        self.memo = Memo()

    def patched_run_root(self, mod, qn, f):
        current[0] = (mod, qn)
        runs.append(current[0])
        try:
            return run_root(self, mod, qn, f)
        finally:
            current[0] = None

    def tap(name):
        fn = getattr(project.ProjectIndex, name)

        def wrapped(self, module, *a, **k):
            if current[0] is not None and isinstance(module, str):
                mod = module.split(":", 1)[0]
                asked[current[0]].add(self.module_paths.get(mod, mod))
            return fn(self, module, *a, **k)

        setattr(project.ProjectIndex, name, wrapped)

    interp.Analyzer.__init__ = patched_init
    interp.Analyzer.run_root = patched_run_root
    for name in ("record", "function", "class_record", "view", "module_name", "qualify"):
        tap(name)
    run_check([tree / package], Config(), base_dir=tree, use_cache=False)
    roots = set(runs)
    sizes = sorted(len(v) for v in asked.values()) or [0]
    return {
        "roots": len(roots),
        "runs": len(runs),
        "hitting": sum(1 for r in roots if hits[r]),
        "cross_hits": sum(hits.values()),
        "summaries": len(owner),
        "isolated": sum(1 for r in roots if not hits[r] and r not in given),
        "files_median": sizes[len(sizes) // 2],
        "files_max": sizes[-1],
        "most_asked": collections.Counter(p for v in asked.values() for p in v).most_common(8),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path, help="an unpacked release (holds vllm/ or sglang/)")
    ap.add_argument("--package", default="vllm", help="the package folder under TREE")
    args = ap.parse_args(argv)
    m = measure(args.tree, args.package)
    print(
        f"roots {m['roots']} (root runs {m['runs']}: {m['runs'] - m['roots']} field re-runs)\n"
        f"roots hitting a summary another root computed: {m['hitting']} "
        f"({m['cross_hits']} hits; {m['summaries']} summaries)\n"
        f"roots sharing no summary either way: {m['isolated']}\n"
        f"files a root asks the index about: median {m['files_median']}, max {m['files_max']}"
    )
    for path, n in m["most_asked"]:
        print(f"  {n:4} roots ask about {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
