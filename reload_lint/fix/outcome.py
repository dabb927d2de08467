"""What a fix did, as a plain re-audit of the written (or patched) tree says (issue 27).

The counts `--fix` and `--diff` print come from a fresh audit of the tree the fixes produce,
never from what the fixes were meant to do:

- **fixed**: a finding of the first run none of whose stores (its own fingerprint and every
  fingerprint folded into its `also` list) the re-audit reports;
- **partial**: a finding whose own store is gone but a folded store is still reported (never
  counted as fixed; its `fix_status` is `refused: ...` naming the folded stores left, so every
  status is one of the documented `applied` / `refused: <reason>` / `none: <reason>`);
- **remaining**: a finding of the re-audit that the first run reported (itself or folded);
- **new**: a finding of the re-audit that the first run did not report at all. Each is listed
  with the fix that caused it (the accepted fix editing its file whose span is nearest).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from reload_lint.findings import Finding


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('x') else 's'}"


# Why a first-forward lazy allocation has no codemod at its own store (docs/rules/RL108.md)
RL108_NONE = (
    "no codemod at a first-forward lazy allocation: the rebuilt object starts empty, so a "
    "keep-and-copy at the lazy store has nothing to copy into, and registering the scratch on "
    "the layer needs the layer, which the object's forward does not hold; keep the object at "
    "its rebuild site (the RL105 keep_object fix there) or build it once"
)


#: every `fix_status` value (docs/findings.schema.json `fix_status`)
VOCABULARY = re.compile(r"^(applied|refused: .+|none: .+)$", re.S)


def folded_status(host: Finding) -> str:
    """The `fix_status` of a re-audit finding that was folded into `host` in the first run and
    that `host`'s fix left (`host` is partial)."""
    return (
        f"refused: folded into {host.rule} `{host.target}` ({host.path}:{host.line}) in the "
        "first run; that finding's fix was written and leaves this store, which the re-audit "
        "reports on its own"
    )


@dataclass
class Outcome:
    fixed: list[Finding] = field(default_factory=list)
    partial: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    new: list[Finding] = field(default_factory=list)
    cause: dict[int, str] = field(default_factory=dict)  # id(new finding) -> the fix's target
    left: dict[int, list[str]] = field(default_factory=dict)  # id(partial) -> folded still there

    def summary(self, total: int) -> str:
        line = (
            f"Found {_plural(total, 'finding')} ({len(self.fixed)} fixed, "
            f"{len(self.remaining)} remaining, {len(self.new)} new)."
        )
        unfixed = total - len(self.fixed)
        if unfixed != len(self.remaining):
            # a finding whose own store is fixed and a folded one is not: the re-audit reports
            # each folded store left on its own, so remaining and not-fixed differ
            line += (
                f" The {len(self.remaining)} remaining continue the {unfixed} not fixed "
                "(a store folded into a finding is reported on its own once that finding's "
                "own store is fixed)."
            )
        return line


def _prints(f: Finding) -> set[str]:
    out = {f.fingerprint} if f.fingerprint else set()
    for a in f.also or []:
        fp = a.get("fingerprint") if isinstance(a, dict) else None
        if fp:
            out.add(fp)
    return out


def tally(before: list[Finding], after: list[Finding], edited: dict | None = None) -> Outcome:
    """`before`: the reported findings of the first run; `after`: those of the re-audit;
    `edited`: path -> [(first line, last line, target)] of the fixes written, to name a new
    finding's cause."""
    out = Outcome()
    seen_after: set[str] = set()
    for g in after:
        seen_after |= _prints(g)
    known: set[str] = set()
    for f in before:
        known |= _prints(f)
    for f in before:
        if not (_prints(f) & seen_after):
            out.fixed.append(f)
        elif f.fingerprint not in seen_after:
            out.partial.append(f)
            out.left[id(f)] = [
                f"`{a.get('target', '')}` ({a.get('path') or f.path}:{a.get('line')})"
                for a in f.also or []
                if a.get("fingerprint") in seen_after
            ]
    for g in after:
        if _prints(g) & known:
            out.remaining.append(g)
        else:
            out.new.append(g)
            out.cause[id(g)] = _cause(g, (edited or {}).get(g.path, []))
    return out


def _cause(g: Finding, spans: list[tuple[int, int, str]]) -> str:
    if not spans:
        return "no fix edited its file"
    first, last, target = min(
        spans,
        key=lambda s: 0 if s[0] <= g.line <= s[1] else min(abs(g.line - s[0]), abs(g.line - s[1])),
    )
    return f"the fix of `{target}` ({g.path}:{first})"


def status(f: Finding, out: Outcome | None, written: bool) -> str:
    """The finding's `fix_status`: `applied`, `refused: <reason>` or `none: <reason>`
    (`VOCABULARY`)."""
    rem = f.remedy
    if rem is None or isinstance(rem, dict):
        return "none: no fix was computed for this finding"
    if rem.refused:
        return f"refused: {rem.refused}"
    if not rem.has_patch:
        if f.rule == "RL108":
            return f"none: {RL108_NONE}"
        why = (rem.recipe or "no codemod for this store").split("; ")[0]
        return f"none: {why}"
    if out is None:
        return "none: not applied (run with --fix)" if not written else "applied"
    if any(f is p for p in out.fixed):
        return "applied"
    if any(f is p for p in out.partial):
        return (
            "refused: its own store is fixed, but the re-audit still reports stores folded "
            "into it: " + ", ".join(out.left.get(id(f), []))
        )
    if not written:
        return "none: not applied (an unsafe fix: add --unsafe-fixes)"
    if f.rule == "RL108":
        return f"none: {RL108_NONE} (its rebuild sites were patched; a re-audit still reports it)"
    return "refused: a re-audit of the written tree still reports it"
