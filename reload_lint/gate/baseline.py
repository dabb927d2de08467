"""Baselines: today's findings recorded as "fix later", so a gate fails only on new ones.

Input: findings (to write), or a baseline file and this run's findings (to match). Output:
the baseline JSON, or the findings not in it with the stale and folded entries.

A baseline is a JSON file of line-free fingerprints with enough context (rule, path, symbol,
target, the stored line's source) for a reviewer to read it. It is written atomically and
sorted, so regenerating it on unchanged sources is byte-identical. `check --baseline` reports
entries no current finding matches ("stale": fixed, renamed or suppressed) so the baseline
ratchets down; they fail the run only with `--strict-baseline`. An entry whose finding is now
folded into another finding's `also` (reload_lint/fold.py: the same storage, reported once) is
"folded", not stale: said once per run, never failing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.errors import ReloadLintError
from reload_lint.findings import Finding
from reload_lint.fsutil import atomic_write_text

FORMAT_VERSION = 1
_KIND = "reload-lint-baseline"
_FIELDS = ("fingerprint", "rule", "path", "symbol", "target", "snippet")


@dataclass(frozen=True)
class BaselineEntry:
    fingerprint: str
    rule: str
    path: str
    symbol: str
    target: str
    snippet: str

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in _FIELDS}

    def sort_key(self) -> tuple:
        return (self.path, self.symbol, self.rule, self.target, self.fingerprint)


def entry_for(f: Finding) -> BaselineEntry:
    if not f.fingerprint:
        raise ReloadLintError(f"{f.path}:{f.line}: finding has no fingerprint (internal error)")
    return BaselineEntry(f.fingerprint, f.rule, f.path, f.symbol, f.target, f.snippet.strip())


def baseline_entries(findings: list[Finding]) -> list[BaselineEntry]:
    return sorted({entry_for(f) for f in findings}, key=BaselineEntry.sort_key)


def render_baseline(findings: list[Finding], keep: list[BaselineEntry] = ()) -> str:
    entries = sorted(set(baseline_entries(findings)) | set(keep), key=BaselineEntry.sort_key)
    doc = {
        "kind": _KIND,
        "version": FORMAT_VERSION,
        "entries": [e.to_json() for e in entries],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def write_baseline(path: Path, findings: list[Finding], keep: list[BaselineEntry] = ()) -> int:
    """Atomically write the baseline for `findings` (plus `keep`: old entries carried over for
    files this run could not analyse); return the number of entries."""
    atomic_write_text(Path(path), render_baseline(findings, keep))
    return len(set(baseline_entries(findings)) | set(keep))


def load_baseline(path: Path) -> list[BaselineEntry]:
    """Read a baseline; any problem is a one-line ReloadLintError (exit 2), file untouched."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ReloadLintError(
            f"{path}: baseline not found (create it with `reload-lint baseline --output {path}`)"
        ) from None
    except OSError as exc:
        raise ReloadLintError(f"{path}: cannot read baseline: {exc.strerror or exc}") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ReloadLintError(f"{path}: corrupt baseline: not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ReloadLintError(
            f"{path}: corrupt baseline: invalid JSON at line {exc.lineno} column {exc.colno}"
        ) from None
    if not isinstance(doc, dict) or doc.get("kind") != _KIND:
        raise ReloadLintError(f"{path}: corrupt baseline: not a reload-lint baseline file")
    if doc.get("version") != FORMAT_VERSION:
        raise ReloadLintError(
            f"{path}: unsupported baseline version {doc.get('version')!r} "
            f"(this reload-lint reads version {FORMAT_VERSION})"
        )
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise ReloadLintError(f"{path}: corrupt baseline: `entries` must be a list")
    out: list[BaselineEntry] = []
    for i, e in enumerate(entries, 1):
        if not isinstance(e, dict):
            raise ReloadLintError(f"{path}: corrupt baseline: entry {i} is not an object")
        for k in _FIELDS:
            if not isinstance(e.get(k, ""), str):
                raise ReloadLintError(f"{path}: corrupt baseline: entry {i}: `{k}` not a string")
        if not e.get("fingerprint"):
            raise ReloadLintError(f"{path}: corrupt baseline: entry {i} has no fingerprint")
        out.append(BaselineEntry(**{k: e.get(k, "") for k in _FIELDS}))
    return out


@dataclass
class BaselineResult:
    new: list[Finding]
    baselined: list[Finding]
    stale: list[BaselineEntry]
    # (entry, host finding): entries whose finding is now in another finding's `also`
    folded: list = field(default_factory=list)


def match_baseline(
    findings: list[Finding],
    entries: list[BaselineEntry],
    *,
    in_scope=None,
) -> BaselineResult:
    """Split unsuppressed findings into new and baselined; list stale entries.

    `in_scope(entry) -> bool` limits stale reporting to entries this run could have seen
    (paths audited, rules enabled); an entry outside the scope is never stale.
    """
    known = {e.fingerprint for e in entries}
    live = {f.fingerprint for f in findings if f.suppressed is None}
    # a baseline written before a finding was folded into another (fold.py) names it by its
    # own fingerprint, kept in the host's `also`: the storage is still reported, not fixed
    hosts = {
        a["fingerprint"]: f
        for f in findings
        if f.suppressed is None
        for a in f.also
        if a.get("fingerprint")
    }
    new = [f for f in findings if f.suppressed is None and f.fingerprint not in known]
    old = [f for f in findings if f.suppressed is None and f.fingerprint in known]
    gone = [
        e
        for e in sorted(entries, key=BaselineEntry.sort_key)
        if e.fingerprint not in live and (in_scope is None or in_scope(e))
    ]
    folded = [(e, hosts[e.fingerprint]) for e in gone if e.fingerprint in hosts]
    stale = [e for e in gone if e.fingerprint not in hosts]
    return BaselineResult(new=new, baselined=old, stale=stale, folded=folded)
