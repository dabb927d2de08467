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
from reload_lint.fix.outcome import _plural

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
    from reload_lint.fix.engine import remedies_for
    from reload_lint.fix.validate import shadow_audit

    def run(paths, top):
        # no cache: the copy lives in a fresh temporary folder, and what a run keeps is keyed
        # by where it ran, so each re-audit would leave a pack behind
        return _copy_audit(paths, top, cfg, args, plan).findings

    roots = [Path(p) for p in plan.paths]

    def reaudit(patched):
        return shadow_audit(plan.base, roots, patched, run)

    fx = remedies_for(live, plan.base, roots, reaudit=reaudit)
    for f in live:
        rem = fx.remedy(f)
        if rem is not None:
            f.remedy = rem
            f.fix = rem.description if rem.has_patch else (rem.recipe or f.fix)
            if not rem.has_patch:  # what `--fix` would do is known before writing
                from reload_lint.fix.outcome import status

                f.fix_status = status(f, None, False)
    return fx


def applicable(f: Finding, unsafe: bool) -> bool:
    rem = f.remedy
    if rem is None or isinstance(rem, dict) or not rem.has_patch:
        return False
    return unsafe or rem.applicability == SAFE


def write_fixes(fx: FixSet, plan, unsafe: bool) -> set[str]:
    """Write every file the chosen fixes change; returns the paths written. Every file is
    checked before any is written (nothing half-written): it must still hold the bytes the
    fixes were computed on (a file changed since the analysis is refused), be a regular file
    (a symlink's target is written, and named) and be writable. Each write is atomic (a temp
    file beside it, then os.replace) and keeps the file's mode bits."""
    import hashlib
    import os

    from reload_lint.fsutil import atomic_write_bytes

    todo = []
    for path, (before, after) in fx.files(unsafe).items():
        target = Path(plan.base) / path
        real = Path(os.path.realpath(target))
        if before == "" and not os.path.lexists(target):
            # the package's shared helper module, new
            if not os.access(real.parent, os.W_OK):
                raise ReloadLintError(f"{path}: its folder is read-only; nothing written")
            todo.append((path, real, after.encode("utf-8")))
            continue
        try:
            now = real.read_bytes()
        except OSError as exc:
            raise ReloadLintError(
                f"{path}: cannot read it again: {exc.strerror or exc}; nothing written"
            ) from None
        want = before.encode("utf-8")
        if hashlib.sha256(now).digest() != hashlib.sha256(want).digest():
            raise ReloadLintError(f"{path}: changed while reload-lint ran; nothing written")
        mode = real.stat().st_mode
        if not mode & 0o222 or not os.access(real, os.W_OK) or not os.access(real.parent, os.W_OK):
            where = f" (a symlink to {real})" if real != target.absolute() else ""
            raise ReloadLintError(f"{path}{where}: read-only; nothing written")
        todo.append((path, real, after.encode("utf-8")))
    written = set()
    for path, real, data in todo:
        atomic_write_bytes(real, data)
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


def diff_report(
    fx: FixSet | None, findings: list[Finding], unsafe: bool, oc=None
) -> tuple[str, int]:
    """`--diff`: the patch (for stdout or -o) and the exit code (1 when there is a patch);
    `Would fix N findings (M remaining, K new).` goes to stderr, the figures from a plain
    re-audit of the patched copy (`oc`, reload_lint/fix/outcome.py)."""
    text = fx.diff(unsafe) if fx is not None else ""
    n = len(oc.fixed) if oc is not None else 0
    hidden = 0
    if not unsafe and fx is not None:
        hidden = len(fixed_findings(findings, fx, True)) - len(fixed_findings(findings, fx, False))
    note = f"Would fix {_plural(n, 'finding')}" if n else "No fixes available"
    if oc is not None:
        note += f" ({len(oc.remaining)} remaining, {len(oc.new)} new)"
    if hidden > 0:
        note += f" ({_plural(hidden, 'additional fix')} available with `--unsafe-fixes`)"
    print(note + ".", file=sys.stderr)
    if oc is not None:
        for line in new_lines(oc):
            print(line, file=sys.stderr)
    return text, (1 if text else 0)


def edited_spans(fx: FixSet, unsafe: bool) -> dict[str, list[tuple[int, int, str]]]:
    """path -> (first line, last line, target) of every fix written: a new finding's cause."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    for e in fx.accepted:
        if unsafe or e.applicability == SAFE:
            out.setdefault(e.findings[0].path, []).append(
                (e.first_line, e.last_line, e.findings[0].target)
            )
    return out


def reaudit_written(args, cfg, plan, changed=None):
    """A plain, fresh audit of the written tree: the same paths and config, no cache (a cached
    result could hide what the write changed). Returns the gate's outcome."""
    import argparse

    from reload_lint.cli import run_engine
    from reload_lint.gate import apply_gate

    fresh = argparse.Namespace(**vars(args))
    fresh.no_cache = True
    result = run_engine(fresh, cfg, plan)
    return result, apply_gate(result, cfg, plan, fresh, changed=changed)


def reaudit_patched(args, cfg, plan, texts: dict[str, str], changed=None):
    """`--diff`: the same plain audit, of a temporary copy with the patch written over it."""
    from reload_lint.fix.validate import shadow_audit
    from reload_lint.gate import apply_gate

    def run(paths, top):
        return apply_gate(
            _copy_audit(paths, top, cfg, args, plan), cfg, plan, args, changed=changed
        )

    return shadow_audit(plan.base, [Path(p) for p in plan.paths], texts, run)


def _copy_audit(paths, top, cfg, args, plan):
    """A fresh audit of a patched copy: no cache (the copy lives in a temporary folder, and a
    run keyed by where it ran would leave a pack behind), the run's `--base` trees."""
    from reload_lint.engine import run_check

    return run_check(
        paths,
        cfg,
        base_dir=top,
        use_cache=False,
        jobs=getattr(args, "jobs", None),
        bases=plan.bases,
    )


def mark(before: list[Finding], after: list[Finding], oc, unsafe: bool) -> None:
    """Every finding's `fix_status`: the first run's from its remedy and the re-audit; the
    re-audit's from the first run's finding it continues, or its cause when it is new."""
    from reload_lint.fix.outcome import folded_status, status

    by_print = {}
    for f in before:
        f.fix_status = status(f, oc, applicable(f, unsafe))
        by_print[f.fingerprint] = f
        for a in f.also or []:
            by_print.setdefault(a.get("fingerprint"), f)
    for g in after:
        if id(g) in oc.cause:
            g.fix_status = f"none: new, caused by {oc.cause[id(g)]}"
            continue
        host = by_print.get(g.fingerprint)
        if (
            host is not None
            and host.fingerprint != g.fingerprint
            and any(host is p for p in oc.partial)
        ):
            g.fix_status = folded_status(host)
        else:
            g.fix_status = host.fix_status if host is not None else "none: no fix was computed"
        if g.remedy is None and host is not None:
            g.remedy = None if applicable(host, unsafe) else host.remedy


def new_lines(oc) -> list[str]:
    return [
        f"reload-lint: new {g.rule} {g.path}:{g.line} `{g.target}`, caused by {oc.cause[id(g)]}"
        for g in oc.new
    ]
