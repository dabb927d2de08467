"""The Finding record: plain data shared by the engine, the gate, the renderers and the runner.

Everything here is JSON-serialisable and ordered deterministically. The JSON shape is the
contract documented in docs/findings.md and docs/findings.schema.json; change it only by
bumping SCHEMA_VERSION.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

SCHEMA_VERSION = "1.2"
TOOL_NAME = "reload-lint"


@dataclass(frozen=True)
class TraceStep:
    path: str
    line: int
    note: str

    def to_json(self) -> dict:
        return {"path": self.path, "line": self.line, "note": self.note}


@dataclass
class Finding:
    rule: str
    path: str
    line: int
    column: int
    end_line: int
    symbol: str
    target: str
    message: str
    severity: str = "error"
    confidence: str = "high"
    trace: list[TraceStep] = field(default_factory=list)
    contract: str = "vllm-layerwise"
    fingerprint: str = ""
    # Triage (schema 1.1): where the graph-visible read is ("path:line in Class.method"),
    # a run-once guard / platform scope / condition on the store, what else breaks first
    # (the next load fails loudly), the allocating backends with where they are chosen, and
    # the one-line fix that applies. Not part of the fingerprint.
    reader: str | None = None
    guard: str | None = None
    masked: str | None = None
    backends: list[str] = field(default_factory=list)
    fix: str = ""
    # Set when a run reports only some files (pre-commit's named files, `--diff REV`) and the
    # finding lies elsewhere but passes through them: the steps that do (reload_lint/incremental/through.py).
    # Serialised only when set; not part of the fingerprint.
    via: list[TraceStep] = field(default_factory=list)
    # Other findings that report the same storage, folded into this one (reload_lint/fold.py):
    # each {rule, path, line, target, fingerprint} as it would have been reported. Serialised
    # only when set; not part of the fingerprint.
    also: list[dict] = field(default_factory=list)
    # RL108 (schema 1.2, additive, issue 27): the post-load stores that keep a new object of
    # the class whose first forward allocates, on every reload, each {path, line, target}
    # (reported or not: analysis/kept.py). Keeping the object at all of them makes its first
    # forward run once. Serialised only when set; not part of the fingerprint.
    rebuild_sites: list[dict] = field(default_factory=list)
    # Set by the reader search (analysis/readers.py) when it walked apply/forward paths of
    # the store's family and found no read: the never-read check (reload_lint/unread.py) applies
    # only then (a tree with no forward path at all says nothing of what reads the store).
    # Kept with cached results; not serialised, not part of the fingerprint.
    apply_paths_searched: bool = False
    # Not serialised in the stable part of the schema: set by the suppression layer.
    suppressed: str | None = None
    snippet: str = ""
    # The codemod or manual recipe (reload_lint/fix/, schema 1.2): a fix.model.Remedy, or the
    # `remedy` object as read back from a report. Not part of the fingerprint.
    remedy: object = None
    # What `--fix` / `--diff` did with it, from a re-audit of the tree the fixes produce
    # (reload_lint/fix/outcome.py): `applied`, `refused: <reason>` or
    # `none: <reason>`. Serialised only when set; not part of the fingerprint.
    fix_status: str | None = None

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.column, self.rule, self.target, self.symbol)

    def to_json(self) -> dict:
        out = {
            "rule": self.rule,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "symbol": self.symbol,
            "target": self.target,
            "message": self.message,
            "severity": self.severity,
            "confidence": self.confidence,
            "contract": self.contract,
            "trace": [t.to_json() for t in self.trace],
            "fingerprint": self.fingerprint,
            "reader": self.reader,
            "guard": self.guard,
            "masked": self.masked,
            "backends": list(self.backends),
            "fix": self.fix,
        }
        if self.via:
            out["via"] = [t.to_json() for t in self.via]
        if self.also:
            out["also"] = [dict(a) for a in self.also]
        if self.rebuild_sites:
            out["rebuild_sites"] = [dict(r) for r in self.rebuild_sites]
        if self.suppressed is not None:
            out["suppressed"] = self.suppressed
        if self.fix_status is not None:
            out["fix_status"] = self.fix_status
        if self.remedy is not None:
            rem = self.remedy if isinstance(self.remedy, dict) else self.remedy.to_json(self.rule)
            out["remedy"] = rem
            if rem.get("patch"):
                out["fix_patch"] = rem["patch"]
                out["fix_patch_sha256"] = rem["patch_sha256"]
        return out

    @classmethod
    def from_json(cls, data: dict) -> Finding:
        trace = [TraceStep(t["path"], int(t["line"]), t["note"]) for t in data.get("trace", [])]
        return cls(
            rule=data["rule"],
            path=data["path"],
            line=int(data["line"]),
            column=int(data.get("column", 1)),
            end_line=int(data.get("end_line", data["line"])),
            symbol=data.get("symbol", ""),
            target=data.get("target", ""),
            message=data.get("message", ""),
            severity=data.get("severity", "error"),
            confidence=data.get("confidence", "high"),
            trace=trace,
            contract=data.get("contract", "vllm-layerwise"),
            fingerprint=data.get("fingerprint", ""),
            suppressed=data.get("suppressed"),
            reader=data.get("reader"),
            guard=data.get("guard"),
            masked=data.get("masked"),
            backends=list(data.get("backends") or []),
            fix=data.get("fix") or "",
            via=[TraceStep(t["path"], int(t["line"]), t["note"]) for t in data.get("via") or []],
            also=[dict(a) for a in data.get("also") or []],
            rebuild_sites=[dict(r) for r in data.get("rebuild_sites") or []],
            remedy=data.get("remedy") if isinstance(data.get("remedy"), dict) else None,
            fix_status=data.get("fix_status"),
        )


def fails_gate(f: Finding, strict: bool = False) -> bool:
    """Whether a reported finding fails the gate (exit 1, SARIF `error`, `::error`).

    The gate fails what the design promises: a new graph-visible allocation, i.e. a finding
    whose apply-time reader was found. One with no reader found is a warning (exit 0), unless
    `strict` (`--strict`, `[tool.reload-lint] strict = true`). Findings that are not claims
    about storage (RL9xx notes on suppressions) fail as before.
    """
    return strict or f.reader is not None or not f.rule.startswith(("RL1", "RL2"))


@dataclass
class FileError:
    """A per-file problem (RL9xx) or a whole-run note; reported, never raised."""

    rule: str
    path: str
    message: str
    line: int = 0

    def to_json(self) -> dict:
        return {"rule": self.rule, "path": self.path, "line": self.line, "message": self.message}


_WS = re.compile(r"\s+")


def normalize_target(target: str) -> str:
    """Line-free, formatting-free spelling of a stored location."""
    t = _WS.sub("", target)
    t = t.replace('"', "'")
    return t


def compute_fingerprints(findings: list[Finding]) -> None:
    """Assign a line-free fingerprint to every finding, in place.

    The key is rule, path, enclosing symbol, normalised target and an occurrence index
    among findings sharing those four, counted in source order. Moving lines, editing
    other code in the same function or reformatting leaves it unchanged.
    """
    counts: dict[tuple, int] = {}
    for f in sorted(findings, key=Finding.sort_key):
        key = (f.rule, f.path, f.symbol, normalize_target(f.target))
        n = counts.get(key, 0)
        counts[key] = n + 1
        raw = "\x1f".join([*key, str(n)])
        f.fingerprint = hashlib.sha256(raw.encode()).hexdigest()[:20]
