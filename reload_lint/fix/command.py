"""`check --fix / --unsafe-fixes / --diff`: remedies for the reported findings, the patch they
make, the files written, and ruff's summary lines.

- Every reported (unsuppressed) finding gets a remedy; its text becomes the finding's `fix`,
  so text, JSON, SARIF and GitHub annotations say the same thing.
- `--fix` writes the safe codemods (with `--unsafe-fixes`, all of them), atomically, then the
  report lists what remains. Release sources (`--vllm`/`--sglang`) are a shared cache and are
  never written: copy them first (docs/cli.md).
- `--diff` (no value) prints the unified diff `--fix` would write and writes nothing; it exits
  1 when there is something to show, as ruff does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from reload_lint.errors import ReloadLintError
from reload_lint.findings import Finding
from reload_lint.fix import FIX_DIFF
from reload_lint.fix.model import SAFE

if TYPE_CHECKING:  # fix.engine imports libcst: only a run that computes fixes loads it
    from reload_lint.fix.engine import FixSet


def wanted(args, plan) -> bool:
    """Fixes are computed when asked for: `--fix`, `--unsafe-fixes`, a bare `--diff`, or
    `--show-fixes` (not with `--no-fixes`). Validating them re-audits a patched copy of the
    tree, a second full analysis, so a plain `check` (pre-commit, the CI gate, the bench's
    cold and warm runs) does not pay it on every run."""
    if (
        getattr(args, "fix", False)
        or getattr(args, "unsafe_fixes", False)
        or getattr(args, "diff", None) == FIX_DIFF
    ):
        return True
    return getattr(args, "show_fixes", False) and not getattr(args, "no_fixes", False)


def check_writable(args, plan) -> None:
    if getattr(args, "fix", False) and plan.release is not None:
        pkg, version = plan.release
        raise ReloadLintError(
            f"--fix would edit the shared release sources of {pkg} {version} in {plan.base}; "
            f"copy them and fix the copy: cp -r {plan.base} /tmp/{pkg}-{version} && "
            f"cd /tmp/{pkg}-{version} && reload-lint check {pkg} --fix"
        )


def attach(args, cfg, plan, findings: list[Finding]) -> FixSet | None:
    """Compute and validate the remedies of `findings` (in place: `remedy`, `fix`)."""
    live = [f for f in findings if f.suppressed is None]
    if not live:
        return None
    from reload_lint.engine import run_check
    from reload_lint.fix.engine import remedies_for
    from reload_lint.fix.validate import shadow_audit

    def run(paths, top):
        # no cache: the copy lives in a fresh temporary folder, and what a run keeps is keyed
        # by where it ran, so each re-audit would leave a pack behind
        return run_check(
            paths, cfg, base_dir=top, use_cache=False, jobs=getattr(args, "jobs", None)
        ).findings

    roots = [Path(p) for p in plan.paths]

    def reaudit(patched):
        return shadow_audit(plan.base, roots, patched, run)

    fx = remedies_for(live, plan.base, roots, reaudit=reaudit)
    for f in live:
        rem = fx.remedy(f)
        if rem is not None:
            f.remedy = rem
            f.fix = rem.description if rem.has_patch else (rem.recipe or f.fix)
    return fx


def applicable(f: Finding, unsafe: bool) -> bool:
    rem = f.remedy
    if rem is None or isinstance(rem, dict) or not rem.has_patch:
        return False
    return unsafe or rem.applicability == SAFE


def write_fixes(fx: FixSet, plan, unsafe: bool) -> set[str]:
    """Write every file the chosen fixes change; returns the paths written."""
    from reload_lint.fsutil import atomic_write_text

    written = set()
    for path, (before, after) in fx.files(unsafe).items():
        target = Path(plan.base) / path
        if target.read_text(encoding="utf-8") != before:
            raise ReloadLintError(f"{path}: changed while reload-lint ran; nothing written to it")
        atomic_write_text(target, after)
        written.add(path)
    return written


def fixed_findings(findings: list[Finding], fx: FixSet, unsafe: bool) -> list[Finding]:
    """The findings whose fix is in what `--fix` writes."""
    edited = set(fx.files(unsafe))
    return [
        f
        for f in findings
        if applicable(f, unsafe) and all(e.path in edited for e in f.remedy.edits)
    ]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('x') else 's'}"


def hint_line(findings: list[Finding], unsafe: bool) -> str | None:
    """ruff's `[*] N fixable with the `--fix` option` / `No fixes available (...)` line."""
    live = [f for f in findings if f.suppressed is None]
    fixable = sum(1 for f in live if applicable(f, unsafe))
    hidden = 0 if unsafe else sum(1 for f in live if applicable(f, True)) - fixable
    more = (
        f" ({_plural(hidden, 'hidden fix')} can be enabled with the `--unsafe-fixes` option)"
        if hidden
        else ""
    )
    if fixable:
        return f"[*] {fixable} fixable with the `--fix` option{more}."
    if hidden:
        return f"No fixes available{more}."
    return None


def fixed_line(total: int, fixed: int) -> str:
    return f"Found {_plural(total, 'finding')} ({fixed} fixed, {total - fixed} remaining)."


def diff_report(fx: FixSet | None, findings: list[Finding], unsafe: bool) -> tuple[str, int]:
    """`--diff`: the patch (for stdout or -o) and the exit code (1 when there is a patch);
    `Would fix N findings.` goes to stderr."""
    text = fx.diff(unsafe) if fx is not None else ""
    n = len(fixed_findings(findings, fx, unsafe)) if fx is not None else 0
    hidden = 0
    if not unsafe and fx is not None:
        hidden = len(fixed_findings(findings, fx, True)) - n
    note = f"Would fix {_plural(n, 'finding')}" if n else "No fixes available"
    if hidden:
        note += f" ({_plural(hidden, 'additional fix')} available with `--unsafe-fixes`)"
    print(note + ".", file=sys.stderr)
    return text, (1 if text else 0)
