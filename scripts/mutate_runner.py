#!/usr/bin/env python3
"""Mutation check of the confirmation runner: each mutant must make a test fail.

A runner whose central checks are broken would still print verdicts; these mutants break one
check each, the way a regression would, and the CPU tests must catch every one
(docs/runner.md, "Mutation check"):

    reach      the flagged line's reach check is ignored (runner._record)
    read       every walked storage counts as read by the capture (Manifest.graph_visible)
    standins   the harness drops the row's stand-ins (FamilyRecipe.construct, every layer kind)
    lent       a storage another finding names closer is kept as the finding's own (ownership)
    kind       a callable replaced by another kind before the capture keeps its store's verdict
    also       the stores folded into a finding (its ``also``) are not linked as its own

For each mutant the script copies the checkout (without .git) to a temporary folder, applies the
one textual change (the snippet must occur exactly once: a drifted snippet is an error, not a
pass), runs the mutant's tests there with ``-x`` and expects a test to *fail* (pytest's exit
code 1). A mutant that stops the tests from running at all (an import or collection error,
exit 2-5) is an error, not a kill: it shows nothing about what the tests check. The unmutated
copy runs first and must pass.

    python scripts/mutate_runner.py [--only NAME ...] [--keep]

Exit codes: 0 every mutant killed, 1 a mutant survived, errored or the baseline failed, 2 a
snippet is missing or ambiguous.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRUTH = "tests/runtime/test_runner_truth.py"

#: name -> (file, snippet, replacement, the tests expected to fail)
MUTANTS: dict[str, tuple[str, str, str, list[str]]] = {
    "reach": (
        "reload_lint/confirm/runner.py",
        "    reached, why = reach(seen, msgs)\n    if not reached:\n",
        "    reached, why = reach(seen, msgs)\n    if False:\n",
        [f"{TRUTH}::test_a_store_in_a_branch_not_taken_gets_no_verdict_from_its_targets_storage"],
    ),
    "read": (
        "reload_lint/confirm/recorder.py",
        '            if not has_dispatch or "dispatch" in e.sources:\n',
        "            if True:\n",
        [f"{TRUTH}::test_a_post_load_tensor_the_capture_never_reads_is_unread"],
    ),
    "standins": (
        "reload_lint/confirm/recipes/vllm_layers.py",
        "        built.standins = built.standins | set(self.row.standins)\n",
        "",
        [
            f"{TRUTH}::test_a_census_row_builds_its_moe_layer_at_census_tier_with_its_standins",
            f"{TRUTH}::test_every_layer_kind_of_a_row_with_standins_builds_at_census_tier",
        ],
    ),
    "lent": (
        "reload_lint/confirm/ownership.py",
        "        if closer is not None:\n",
        "        if False:\n",
        [f"{TRUTH}::test_a_rebuilt_object_is_not_lent_a_storage_that_is_another_findings_store"],
    ),
    "kind": (
        "reload_lint/confirm/ownership.py",
        "            if got is not None and got != kind:\n",
        "            if False:\n",
        [f"{TRUTH}::test_a_lambda_replaced_at_once_by_a_partial_is_not_lent_the_partials_red"],
    ),
    "also": (
        "reload_lint/confirm/pipeline.py",
        "            paths += sorted({p for ps in also.values() for p in ps} - set(paths))\n",
        "            pass\n",
        [f"{TRUTH}::test_a_store_folded_into_a_finding_is_its_own_store"],
    ),
}

_IGNORE = shutil.ignore_patterns(".git", "__pycache__", ".pytest_cache", ".ruff_cache", ".gpu")


def _copy(dest: Path) -> None:
    for item in ROOT.iterdir():
        if item.name in (".git", ".gpu", ".venv") or item.name.endswith(".egg-info"):
            continue
        if item.is_dir():
            shutil.copytree(item, dest / item.name, ignore=_IGNORE, symlinks=True)
        else:
            shutil.copy2(item, dest / item.name)


def _pytest(where: Path, tests: list[str]) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(where), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    p = subprocess.run(cmd, cwd=where, env=env, capture_output=True, text=True)
    tail = [ln for ln in p.stdout.splitlines() if ln.strip()][-1:] or [p.stderr.strip()[-200:]]
    return p.returncode, tail[0]


def outcome(rc: int) -> str:
    """What a mutant's test run shows: ``killed`` only when a test ran and failed (pytest exit
    code 1); ``survived`` when every test passed; ``error`` when pytest could not run them
    (interrupted by a collection or import error, internal error, usage error, no tests)."""
    if rc == 0:
        return "survived"
    return "killed" if rc == 1 else "error"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", choices=sorted(MUTANTS), help="mutants to run")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copies")
    a = ap.parse_args(argv)
    names = a.only or list(MUTANTS)
    for name in names:
        path, old, _, _ = MUTANTS[name]
        n = (ROOT / path).read_text(encoding="utf-8").count(old)
        if n != 1:
            print(f"mutant {name}: snippet occurs {n} times in {path}", file=sys.stderr)
            return 2
    tmp = Path(tempfile.mkdtemp(prefix="mutate-runner-"))
    try:
        base = tmp / "base"
        base.mkdir()
        _copy(base)
        tests = sorted({t for n in names for t in MUTANTS[n][3]})
        t0 = time.monotonic()
        rc, tail = _pytest(base, tests)
        print(f"baseline: {'pass' if rc == 0 else 'FAIL'} ({tail}; {time.monotonic() - t0:.0f}s)")
        if rc != 0:
            return 1
        survived = []
        for name in names:
            path, old, new, tests = MUTANTS[name]
            where = tmp / name
            shutil.copytree(base, where, symlinks=True)
            f = where / path
            f.write_text(f.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
            t0 = time.monotonic()
            rc, tail = _pytest(where, tests)
            got = outcome(rc)
            if got != "killed":
                survived.append(f"{name} ({got}, pytest exit {rc})")
            print(
                f"mutant {name}: {got if got == 'killed' else got.upper()} "
                f"({tail}; {time.monotonic() - t0:.0f}s)"
            )
        if survived:
            print(f"not killed: {', '.join(survived)}", file=sys.stderr)
            return 1
        print(f"all {len(names)} mutants killed")
        return 0
    finally:
        if a.keep:
            print(f"copies kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
