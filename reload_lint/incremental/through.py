"""Which files a finding passes through (issue 20): what pre-commit's named files and
`check --diff REV`'s changed lines are matched against.

Input: findings and a set of file paths (named files, or changed lines). Output: the
findings located in or passing through them, each with its `via` steps.

A finding is decided by more than the line it is reported at: the helper that allocated the
tensor (`marlin_sort_g_idx` in `marlin_utils.py`), the constructor of the object that keeps
it, the oracle that chose the backend, the apply-time reader. Each of those is a step of the
finding (its trace, its backends' choice sites, its reader), and an edit to any of them can
make the finding appear or change it. So a finding is reported for a named or changed file
when its location *or any of its steps* lies there; the steps that do are its `via` (shown
under the finding in text, the `via` field in JSON), unless the location itself does.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from reload_lint.findings import Finding, TraceStep

# a backend as the analysis names it: "FlashInferExperts (vllm/.../oracle/nvfp4.py:99)"
_BACKEND = re.compile(r"^(?P<name>.*?) \((?P<path>[^()]+):(?P<line>\d+)\)$")
# the reader: "vllm/.../marlin.py:236 in MarlinLinearKernel.apply_weights"
_READER = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+) in (?P<where>.+)$")


def steps(f: Finding) -> list[TraceStep]:
    """Every place a finding's verdict depends on, besides its own location: its trace steps,
    where each of its backends is chosen, and its apply-time reader (in that order, each
    place once)."""
    out: list[TraceStep] = list(f.trace)
    for b in f.backends:
        m = _BACKEND.match(b)
        if m:
            out.append(TraceStep(m["path"], int(m["line"]), f"the oracle chooses {m['name']} here"))
    if f.reader:
        m = _READER.match(f.reader)
        if m:
            out.append(TraceStep(m["path"], int(m["line"]), f"read at apply time in {m['where']}"))
    seen: set = set()
    uniq = []
    for s in out:
        if (s.path, s.line, s.note) not in seen:
            seen.add((s.path, s.line, s.note))
            uniq.append(s)
    return uniq


def via(
    f: Finding,
    located: Callable[[Finding], bool],
    step_in: Callable[[TraceStep], bool],
) -> list[TraceStep] | None:
    """None when `f` neither lies in (`located`) nor passes through (`step_in`) what was
    named or changed; [] when it lies there; else the steps that pass through it."""
    if located(f):
        return []
    hit = [s for s in steps(f) if step_in(s)]
    return hit or None


def through_files(findings: list[Finding], files: set[str]) -> list[Finding]:
    """The findings located in or passing through `files` (pre-commit's named files), each
    with `via` set to the steps in those files when it is not located in one."""
    out = []
    for f in findings:
        v = via(f, lambda f: f.path in files, lambda s: s.path in files)
        if v is not None:
            f.via = v
            out.append(f)
    return out
