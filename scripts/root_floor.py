"""What would exact per-root reuse leave of `one-file root`? The floor docs/performance.md
(Session 8) gives for why that bench case is not under 1 s.

One analysis of a tree over records from a warm pack (what pre-commit's run after a root
edit does), with the root runs and the passes after them timed (CPU, this process only; the
code is not changed). Each root run is also told whether it asked the index about the
edited file. Suppose an ideal reuse: every root that does not read the file is replayed for
free and its state is had for nothing. Such a run still pays

- the cached one-file run (imports, scan, pack; the bench's `one-file` case),
- the roots that read the edited file (they must run again),
- the passes after the roots (first-forward, apply-time caches, guards, graph visibility,
  facts), which run over every root's state,

and the state of the analyzer the reused roots left, which must come from somewhere: its
pickled size and the time to load it are printed too.

    python scripts/root_floor.py ~/.cache/reload-lint/sources/vllm-0.33.0 \
        --file vllm/model_executor/layers/quantization/fp8.py
"""

from __future__ import annotations

import argparse
import gc
import pickle
import sys
import tempfile
import time
from pathlib import Path

POST = (
    "run_lazy",
    "run_apply_caches",
    "drop_unresolved_names",
    "drop_stable_aliases",
    "drop_hook_only",
    "resolve_guards",
    "add_graph_visibility",
    "drop_prep_inputs",
    "apply_facts",
    "finalize_confidence",
)


def measure(tree: Path, package: str, edited: str, function: str | None) -> dict:
    from reload_lint.config import Config
    from reload_lint.engine import run_check

    with tempfile.TemporaryDirectory(prefix="reload-lint-floor-") as tmp:
        cache = Path(tmp)
        # warm the pack: every record the analysis reads is then unpickled, not parsed
        run_check([tree / package], Config(), base_dir=tree, cache_dir=cache)
        saved: list = []
        try:
            return _instrumented(tree, package, edited, function, cache, saved)
        finally:  # the classes as they were (the script may run inside a test process)
            for owner, name, fn in reversed(saved):
                setattr(owner, name, fn)


def _instrumented(tree, package, edited, function, cache, saved) -> dict:
    from reload_lint.analysis import interp
    from reload_lint.config import Config
    from reload_lint.engine import run_check
    from reload_lint.index import project

    def patch(owner, name, fn) -> None:
        saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, fn)

    roots: list = []  # (mod, qn, cpu seconds, read the edited file)
    post: dict = {}
    current: list = [None]
    reads: set = set()
    kept: list = []
    A = interp.Analyzer
    run_root, run = A.run_root, A.run

    def timed_root(self, mod, qn, f):
        current[0] = (mod, qn)
        reads.discard(current[0])
        t = time.process_time()
        try:
            return run_root(self, mod, qn, f)
        finally:
            roots.append((mod, qn, time.process_time() - t, current[0] in reads))
            current[0] = None

    def timed_pass(name):
        fn = getattr(A, name)

        def wrapped(self, *a, **k):
            t = time.process_time()
            try:
                return fn(self, *a, **k)
            finally:
                post[name] = post.get(name, 0.0) + time.process_time() - t

        patch(A, name, wrapped)

    def kept_run(self, modules):
        out = run(self, modules)
        kept.append(self)
        return out

    def tap(name):
        fn = getattr(project.ProjectIndex, name)

        def wrapped(self, module, *a, **k):
            if current[0] is not None and isinstance(module, str):
                if self.module_paths.get(module.split(":", 1)[0]) == edited and (
                    function is None or (name == "function" and a and a[0] == function)
                ):
                    reads.add(current[0])
            return fn(self, module, *a, **k)

        patch(project.ProjectIndex, name, wrapped)

    patch(A, "run_root", timed_root)
    patch(A, "run", kept_run)
    for name in POST:
        timed_pass(name)
    for name in ("record", "function", "class_record", "view", "module_name", "qualify"):
        tap(name)
    # another config is another result key: the analysis runs again over the pack's records
    t = time.process_time()
    run_check(
        [tree / package], Config(exclude=["*/no-such-folder/*"]), base_dir=tree, cache_dir=cache
    )
    total = time.process_time() - t
    state, refused = {}, []
    for name, table in sorted(vars(kept[0]).items()):
        if name in ("index", "oracles"):  # the records and what is read off them: the pack's
            continue
        try:
            pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # a table that holds a function or a generator
            refused.append(name)
            continue
        state[name] = table
    blob = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)  # one memo: shared values once
    gc.disable()  # as a check runs (engine.run_check)
    t = time.process_time()
    pickle.loads(blob)
    load = time.process_time() - t
    gc.enable()
    size = len(blob)
    first = next((i for i, r in enumerate(roots) if r[3]), None)
    return {
        "run": total,
        "roots": roots,
        "first": first,
        "post": post,
        "state_mib": size / 2**20,
        "state_load": load,
        "refused": refused,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path, help="an unpacked release (holds vllm/ or sglang/)")
    ap.add_argument("--package", default="vllm", help="the package folder under TREE")
    ap.add_argument(
        "--file",
        default="vllm/model_executor/layers/quantization/fp8.py",
        help="the edited file, relative to TREE (the bench's one-file case)",
    )
    ap.add_argument(
        "--function",
        default="Fp8LinearMethod.process_weights_after_loading",
        help="the edited function's qualified name in FILE (the bench edits the file's first "
        "post-load root); `-` counts every root that reads the file",
    )
    args = ap.parse_args(argv)
    function = None if args.function == "-" else args.function
    m = measure(args.tree, args.package, args.file, function)
    what = args.file if function is None else f"{function} ({args.file})"
    roots = m["roots"]
    cpu = sum(r[2] for r in roots)
    reading = [r for r in roots if r[3]]
    after = roots[m["first"] :] if m["first"] is not None else []
    post = sum(m["post"].values())
    print(f"check over the pack's records: {m['run']:.2f} s CPU")
    print(f"root runs: {len(roots)}, {cpu:.2f} s CPU")
    if m["first"] is None:
        print(f"  no root run reads {what}")
    else:
        print(
            f"  first root run reading {what}: #{m['first'] + 1}; from it to the end "
            f"{len(after)} runs, {sum(r[2] for r in after):.2f} s"
        )
        print(
            f"  root runs reading it: {len(reading)}, {sum(r[2] for r in reading):.2f} s "
            f"({', '.join(r[1] for r in reading[:4])}{', ...' if len(reading) > 4 else ''})"
        )
    print(f"passes after the roots: {post:.2f} s CPU")
    for name, s in sorted(m["post"].items(), key=lambda kv: -kv[1]):
        if s >= 0.005:
            print(f"  {name:24} {s:.3f} s")
    print(
        f"analyzer state after the roots: {m['state_mib']:.1f} MiB pickled, "
        f"{m['state_load']:.2f} s to unpickle"
        + (f" (not counted, does not pickle: {', '.join(m['refused'])})" if m["refused"] else "")
    )
    floor = sum(r[2] for r in reading) + post
    print(
        f"floor of an ideal per-root reuse, beyond the cached one-file run: {floor:.2f} s "
        "(the root runs reading it and the passes after the roots), "
        f"{floor + m['state_load']:.2f} s with the kept state loaded"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
