#!/usr/bin/env python3
"""Differential check of the extractor: the records an old commit's extractor produced against
the current one's, file by file.

The old extractor (its `index/extract.py`, `index/positions.py`, `guard.py` and the
`_extract_job` / `_syntax_detail` of its `cache.py`) is read from git at OLD (`git show`) into
a temporary package and run beside the working tree's `reload_lint.incremental.cache._extract_job`. Each
file's extraction result, `("ok", record)` or `("err", rule, line, message)`, must be equal,
dict key order and exact types included (True is not 1, a tuple is not a list).

The old extractor is the libcst one (commit 876de75 and before), so this script needs libcst
installed (`pip install libcst`); reload-lint itself no longer does.

    python scripts/diff_extract.py                    # 876de75 vs the working tree
    python scripts/diff_extract.py --old <commit> --show 10 path/to/tree ...

Default inputs: every .py file under the cached audit trees (vLLM 0.25.1, 0.33.0, SGLang
0.5.23 in ~/.cache/reload-lint/sources/) and tests/fixtures/.

Differences that are expected against the libcst extractor (none occurs in those trees): a
file only one parser accepts (libcst took 3.0-3.14 grammar and some invalid code; its
validator raised on some valid code and on mixed str/bytes concatenations, which were RL906
"could not analyse file"); a syntax error before a pathologically deep chain (the old token
scan made it RL906, CPython reports the error: RL901); an identifier with NFKC-compatibility
characters (`µ`), which CPython normalizes (`μ`) and libcst kept as written. The flag
lowerings added since (`EXTENSIONS` in index/lower_util.py: `elif` flag terms, `or` guards,
dtype terms, class string constants) are switched off for the comparison.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's reload_lint, not an installed one
DEFAULT_OLD = "876de75"
OLD_PKG = "_rl_old_extract"
TREES = ("vllm-0.25.1", "vllm-0.33.0", "sglang-0.5.23")


def _git_show(commit: str, rel: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:{rel}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def install_old(commit: str, where: Path) -> None:
    """Write the old extractor as package OLD_PKG under `where`."""
    pkg = where / OLD_PKG
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    extract = _git_show(commit, "reload_lint/index/extract.py")
    extract = extract.replace(
        "from reload_lint.index.positions import", f"from {OLD_PKG}.positions import"
    )
    (pkg / "extract.py").write_text(extract)
    (pkg / "positions.py").write_text(_git_show(commit, "reload_lint/index/positions.py"))
    (pkg / "guard.py").write_text(_git_show(commit, "reload_lint/guard.py"))
    try:  # reload_lint/cache.py until the incremental/ package (issue 28)
        cache_src = _git_show(commit, "reload_lint/incremental/cache.py")
    except subprocess.CalledProcessError:
        cache_src = _git_show(commit, "reload_lint/cache.py")
    funcs = []
    for node in ast.parse(cache_src).body:
        if isinstance(node, ast.FunctionDef) and node.name in ("_extract_job", "_syntax_detail"):
            funcs.append(ast.get_source_segment(cache_src, node))
    job = "\n\n\n".join(funcs)
    job = job.replace("from reload_lint.guard import", f"from {OLD_PKG}.guard import")
    job = job.replace("from reload_lint.index.extract import", f"from {OLD_PKG}.extract import")
    (pkg / "job.py").write_text("from __future__ import annotations\n\n\n" + job + "\n")


def first_diff(a, b, path: str = "") -> str | None:
    """Where `a` and `b` first differ (a path into the record and both values), or None."""
    if type(a) is not type(b):
        return f"{path or '<root>'}: {type(a).__name__} {a!r:.200} != {type(b).__name__} {b!r:.200}"
    if isinstance(a, dict):
        ka, kb = list(a), list(b)
        if ka != kb:
            missing = [k for k in ka if k not in b][:3]
            extra = [k for k in kb if k not in a][:3]
            if not missing and not extra:
                return f"{path}: key order {ka[:6]} != {kb[:6]}"
            return f"{path}: keys only old {missing}, only new {extra}"
        for k in ka:
            d = first_diff(a[k], b[k], f"{path}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(a, (tuple, list)):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            d = first_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)} (old {a[len(b) :]!r:.200} / new {b[len(a) :]!r:.200})"
        return None
    if isinstance(a, float) and a != a and b != b:
        return None
    if a != b:
        return f"{path or '<root>'}: {a!r:.300} != {b!r:.300}"
    return None


def _init(where: str) -> None:
    sys.path.insert(0, where)
    sys.setrecursionlimit(sys.getrecursionlimit())


def _run(job, args):
    try:
        return job(args)
    except BaseException as exc:  # a crash is a result to compare too
        return ("crash", f"{type(exc).__name__}: {exc}")


def _read(path: str) -> str | tuple[str]:
    """The text the tool would extract from (cache.RecordStore.text), or (why not,)."""
    from reload_lint.incremental.cache import _decode

    data = Path(path).read_bytes()
    if b"\x00" in data:
        return ("NUL bytes (screened before extraction)",)
    text = _decode(data)
    if not isinstance(text, str):
        return text
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def compare_one(item):
    path, module, is_pkg = item
    text = _read(path)
    if not isinstance(text, str):
        return path, "skip", text[0]
    return compare_text(path, text, module, is_pkg)


def compare_text(path: str, text: str, module: str, is_pkg: bool):
    old_job = importlib.import_module(f"{OLD_PKG}.job")._extract_job
    from reload_lint.incremental.cache import _extract_job
    from reload_lint.index import lower_util

    # the flag lowerings added since the libcst extractor are compared off (lower_util.py)
    before, lower_util.EXTENSIONS = lower_util.EXTENSIONS, False
    try:
        return _compare(path, text, module, is_pkg, old_job, _extract_job)
    finally:
        lower_util.EXTENSIONS = before


def _compare(path, text, module, is_pkg, old_job, _extract_job):

    t0 = time.perf_counter()
    old = _run(old_job, (text, module, is_pkg))
    t1 = time.perf_counter()
    new = _run(_extract_job, (text, module, is_pkg))
    t2 = time.perf_counter()
    d = first_diff(old, new)
    if d is None:
        return path, "same", (t1 - t0, t2 - t1, old[0] if old[0] == "ok" else old[1])
    kind = f"old {old[0]} / new {new[0]}"
    if old[0] != "ok" and new[0] != "ok":
        kind += f" ({old[1:]!r:.150} / {new[1:]!r:.150})"
    elif old[0] != "ok":
        kind += f" ({old[1:]!r:.150})"
    elif new[0] != "ok":
        kind += f" ({new[1:]!r:.150})"
    return path, "diff", (kind, d)


_SNIPPETS = [
    "",
    "    ",
    "# c",
    "    # c",
    "        # c",
    "\x0c",
    "if x: return",
    "    if self._x is None: return",
    "    else:",
    "    elif y:",
    "        pass",
    "    x = 1; return x",
    "    return",
    "    del a,",
    "    y = f'{a.b!r}' f'{c=}' 'd' f'{e:{f}}'",
    "    z = b'a' 'b'",
    "    w = x[(1, 2)] + x[(1), 2] + x[1:2, ...]",
    "    async with a as (b, c): pass",
    "    match x:",
    "        case {'k': v, **r}: pass",
    "    try:",
    "    except* E:",
    "    finally:",
    "@deco",
    "def g(a, /, b=c.d, *e, f=1, **g): return getattr(a, 'x')",
    "class Q(A, *B, metaclass=M): x: int = field(init=False)",
]


def _mutate(text: str, rng, pool: list[str]) -> str:
    """1-3 line edits: delete, duplicate, swap, re-indent, or insert a line from elsewhere."""
    lines = text.split("\n")
    for _ in range(rng.randint(1, 3)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        op = rng.randrange(6)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[i])
        elif op == 2 and i + 1 < len(lines):
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
        elif op == 3:
            lines[i] = lines[i][4:] if lines[i].startswith("    ") else "    " + lines[i]
        elif op == 4:
            lines.insert(i, rng.choice(pool))
        else:
            lines.insert(i, rng.choice(_SNIPPETS))
    return "\n".join(lines)


def _fuzz_one(item):
    path, text, module = item
    return compare_text(path, text, module, False)


def fuzz(files: list[tuple[str, str, bool]], n: int, seed: int, pool_size: int = 300):
    """N mutated copies of randomly chosen files (deterministic for SEED)."""
    import random

    rng = random.Random(seed)
    picks = [files[rng.randrange(len(files))] for _ in range(pool_size)]
    texts = []
    for path, module, _pkg in picks:
        t = _read(path)
        if isinstance(t, str) and len(t) < 200_000:
            texts.append((path, t, module))
    pool = [ln for _p, t, _m in texts for ln in t.split("\n")[:400]]
    for k in range(n):
        path, t, module = texts[k % len(texts)]
        yield (f"{path}#mutant{k}", _mutate(t, rng, pool), module)


def _files(roots: list[Path]) -> list[tuple[str, str, bool]]:
    out = []
    for root in roots:
        for p in sorted(root.rglob("*.py")):
            if not p.is_file():
                continue
            rel = p.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            is_pkg = parts[-1] == "__init__"
            if is_pkg:
                parts = parts[:-1]
            out.append((str(p), ".".join(parts), is_pkg))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("roots", nargs="*", type=Path, help="trees to compare (default: see above)")
    ap.add_argument("--old", default=DEFAULT_OLD, help=f"old commit (default {DEFAULT_OLD})")
    ap.add_argument(
        "--show", type=int, default=8, help="differing files to describe, per kind of difference"
    )
    ap.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1)
    ap.add_argument(
        "--fuzz", type=int, default=0, help="compare N line-mutated copies of the files instead"
    )
    ap.add_argument("--seed", type=int, default=0, help="random seed for --fuzz")
    args = ap.parse_args(argv)
    roots = args.roots
    if not roots:
        from reload_lint.sources import cache_root

        base = cache_root() / "sources"
        roots = [base / t for t in TREES if (base / t).is_dir()] + [REPO / "tests" / "fixtures"]
    files = _files(roots)
    with tempfile.TemporaryDirectory(prefix="rl-diff-extract-") as tmp:
        install_old(args.old, Path(tmp))
        print(f"old extractor: {args.old}; new: {REPO}; {len(files)} files under", flush=True)
        for r in roots:
            print(f"  {r}")
        ctx = mp.get_context("fork") if hasattr(os, "fork") else mp.get_context()
        with ctx.Pool(args.jobs, initializer=_init, initargs=(tmp,)) as pool:
            if args.fuzz:
                items = list(fuzz(files, args.fuzz, args.seed))
                files = items
                results = pool.map(_fuzz_one, items, chunksize=8)
            else:
                results = pool.map(compare_one, files, chunksize=8)
    same = [r for r in results if r[1] == "same"]
    skipped = [r for r in results if r[1] == "skip"]
    diffs = [r for r in results if r[1] == "diff"]
    old_t = sum(r[2][0] for r in same)
    new_t = sum(r[2][1] for r in same)
    print(f"compared {len(files) - len(skipped)} files: {len(same)} identical, {len(diffs)} differ")
    print(f"  extraction time on identical files: old {old_t:.1f} s, new {new_t:.1f} s")
    outcome: dict[str, int] = {}
    for r in same:
        outcome[r[2][2]] = outcome.get(r[2][2], 0) + 1
    print("  identical results: " + ", ".join(f"{k} {v}" for k, v in sorted(outcome.items())))
    for path, _, why in skipped:
        print(f"  skipped {path}: {why}")
    kinds: dict[str, int] = {}
    for _, _, (kind, _d) in diffs:
        k = kind.split(" (")[0]
        kinds[k] = kinds.get(k, 0) + 1
    for k, n in sorted(kinds.items()):
        print(f"  {n} x {k}")
    shown: dict[str, int] = {}
    for path, _, (kind, d) in diffs:  # up to --show of each kind
        k = kind.split(" (")[0]
        shown[k] = shown.get(k, 0) + 1
        if shown[k] <= args.show:
            print(f"- {path}\n    {kind}\n    {d}")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
