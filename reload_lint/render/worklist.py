"""The RL working group's worklist: findings (+ runtime evidence) as the RFC's risk table.

One row per component (the enclosing class, or the module for module-level helpers) and
file: component | tensors | site path:line | pattern | likely failure | evidence | status.
Rows are grouped by reload contract, then by area (the folder under the package). Evidence
JSON from the confirmation runner (docs/worklist.md) turns "static only" into confirmed red,
fixed green or inconclusive. The Markdown comes from templates/worklist.md.j2 (jinja2).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.errors import ReloadLintError
from reload_lint.findings import Finding
from reload_lint.rules import RULES

VERDICTS = ("red", "green", "inconclusive")
FAILURES = ("livelock", "illegal access", "stale read", "moved", "freed")
STATUS_ORDER = ("confirmed red", "inconclusive", "static only", "not reproduced", "fixed green")

_CONF = ("high", "medium", "low")
_WORKSPACE_WORDS = ("workspace", "buf", "scratch", "lock", "counter", "semaphore")
# Prefixes of paths that say nothing about the area (the package and its layer root).
_AREA_PREFIXES = ("model_executor/layers/", "model_executor/")


@dataclass(frozen=True)
class Record:
    """One runtime record: a site on one side of its fix (`fixed` true: the fixed side)."""

    verdict: str
    failure: str = ""
    reason: str = ""
    fixed: bool = False


@dataclass
class Evidence:
    """All runtime records for one fingerprint: the bug side and the fixed side."""

    fingerprint: str
    bug: Record | None = None
    fix: Record | None = None

    @property
    def status(self) -> str:
        if self.fix is not None and self.fix.verdict == "green":
            return "fixed green"
        if (self.fix is not None and self.fix.verdict == "red") or (
            self.bug is not None and self.bug.verdict == "red"
        ):
            return "confirmed red"
        if self.bug is not None and self.bug.verdict == "green":
            return "not reproduced"
        return "inconclusive"

    @property
    def failure(self) -> str:
        for r in (self.bug, self.fix):
            if r is not None and r.verdict == "red" and r.failure:
                return r.failure
        return ""

    @property
    def text(self) -> str:
        parts = []
        for label, r in (("", self.bug), ("fixed side ", self.fix)):
            if r is not None:
                parts.append(f"{label}{r.verdict}" + (f": {r.reason}" if r.reason else ""))
        return "; ".join(parts)


_VERDICT_RANK = {"red": 0, "green": 1, "inconclusive": 2}


def _records(doc) -> list:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in ("evidence", "records", "results"):
            if isinstance(doc.get(key), list):
                return doc[key]
    raise ValueError("expected a list of records or an object with an `evidence` list")


def load_evidence(path: Path) -> dict[str, Evidence]:
    """Runtime evidence keyed by fingerprint; a bad file is one line, exit 2."""
    path = Path(path)
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise ReloadLintError(f"{path}: evidence file not found") from None
    except OSError as exc:
        raise ReloadLintError(f"{path}: cannot read evidence: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReloadLintError(
            f"{path}: corrupt evidence JSON: {str(exc).splitlines()[0]}"
        ) from None
    try:
        records = _records(doc)
    except ValueError as exc:
        raise ReloadLintError(f"{path}: corrupt evidence: {exc}") from None
    out: dict[str, Evidence] = {}
    for i, r in enumerate(records, 1):
        where = f"{path}: record {i}"
        if not isinstance(r, dict):
            raise ReloadLintError(f"{where} is not an object")
        fp = r.get("fingerprint")
        if not isinstance(fp, str) or not fp:
            raise ReloadLintError(f"{where} has no `fingerprint`")
        verdict = r.get("verdict")
        if verdict not in VERDICTS:
            raise ReloadLintError(
                f"{where}: `verdict` must be one of {', '.join(VERDICTS)}, not {verdict!r}"
            )
        failure = r.get("failure") or ""
        reason = r.get("reason") or ""
        if not isinstance(failure, str) or not isinstance(reason, str):
            raise ReloadLintError(f"{where}: `failure` and `reason` must be strings")
        rec = Record(verdict, failure.strip(), " ".join(reason.split()), bool(r.get("fixed")))
        ev = out.setdefault(fp, Evidence(fp))
        side = "fix" if rec.fixed else "bug"
        prev = getattr(ev, side)
        # Several runs of one side: the most decisive verdict wins (red, then green).
        if prev is None or _VERDICT_RANK[rec.verdict] < _VERDICT_RANK[prev.verdict]:
            setattr(ev, side, rec)
    return out


def likely_failure(f: Finding) -> str:
    """What a captured graph does once this storage moves (a heuristic; evidence overrides).

    Kernel workspaces hold locks/counters: reclaimed memory spins forever (Marlin, #48438).
    Storage still referenced elsewhere (a partial, a retained object) or a derived copy that is
    never refreshed yields stale reads (Machete act_perm). Storage whose last reference was the
    rebound attribute is freed: the graph reads reclaimed memory (illegal access or garbage).
    """
    leaf = f.target.rsplit(".", 1)[-1].lower()
    if any(w in leaf for w in _WORKSPACE_WORDS):
        return "livelock"
    if f.rule in ("RL103", "RL107") or f.rule.startswith("RL2"):
        return "stale read"
    return "illegal access"


def component_of(f: Finding) -> str:
    head = f.symbol.split(".", 1)[0] if f.symbol else ""
    if head and head[0].isupper():
        return head
    stem = f.path.rsplit("/", 1)[-1]
    return stem[:-3] if stem.endswith(".py") else stem


def area_of(path: str) -> str:
    parts = path.split("/")
    rel = "/".join(parts[1:-1]) + "/" if len(parts) > 2 else ""
    for p in _AREA_PREFIXES:
        if rel.startswith(p):
            rel = rel[len(p) :]
            break
    rel = rel.rstrip("/")
    return rel or (parts[0] if len(parts) > 1 else "(top level)")


@dataclass
class Row:
    component: str
    path: str
    findings: list[Finding] = field(default_factory=list)
    evidence: list[Evidence | None] = field(default_factory=list)

    @property
    def tensors(self) -> list[str]:
        return list(dict.fromkeys(f.target for f in self.findings))

    @property
    def sites(self) -> str:
        lines = sorted({f.line for f in self.findings})
        return f"{self.path}:{','.join(str(n) for n in lines)}"

    @property
    def patterns(self) -> list[str]:
        codes = sorted({f.rule for f in self.findings})
        return [f"{c} {RULES[c].name}" if c in RULES else c for c in codes]

    @property
    def failures(self) -> list[str]:
        out = []
        for f, ev in zip(self.findings, self.evidence, strict=True):
            out.append(ev.failure if ev is not None and ev.failure else likely_failure(f))
        return sorted(set(out), key=lambda s: (FAILURES.index(s) if s in FAILURES else 9, s))

    @property
    def statuses(self) -> list[str]:
        return [ev.status if ev is not None else "static only" for ev in self.evidence]

    @property
    def status(self) -> str:
        counts = Counter(self.statuses)
        if len(counts) == 1:
            return next(iter(counts))
        order = sorted(counts, key=STATUS_ORDER.index)
        return ", ".join(f"{s} ({counts[s]}/{len(self.statuses)})" for s in order)

    @property
    def rank(self) -> int:
        return min(STATUS_ORDER.index(s) for s in self.statuses)

    @property
    def evidence_text(self) -> str:
        parts: list[str] = []
        for ev in self.evidence:
            if ev is not None and ev.text:
                text = ev.text
                if text not in parts:
                    parts.append(text)
        if parts:
            return "; ".join(parts)
        conf = Counter(f.confidence for f in self.findings)
        best = min(conf, key=lambda c: _CONF.index(c) if c in _CONF else len(_CONF))
        reads = [s for f in self.findings for s in f.trace if "read" in s.note.lower()]
        text = f"static, {best} confidence"
        if reads:
            r = reads[0]
            text += f"; read at {r.path.rsplit('/', 1)[-1]}:{r.line}"
        return text


@dataclass
class Group:
    area: str
    rows: list[Row]


@dataclass
class Section:
    contract: str
    groups: list[Group]


def build_rows(findings: list[Finding], evidence: dict[str, Evidence]) -> list[Row]:
    rows: dict[tuple[str, str], Row] = {}
    for f in sorted(findings, key=Finding.sort_key):
        key = (f.path, component_of(f))
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(component=key[1], path=f.path)
        row.findings.append(f)
        row.evidence.append(evidence.get(f.fingerprint))
    return list(rows.values())


def build_sections(findings: list[Finding], evidence: dict[str, Evidence]) -> list[Section]:
    by_contract: dict[str, list[Finding]] = {}
    for f in findings:
        by_contract.setdefault(f.contract or "unspecified", []).append(f)
    sections = []
    for contract in sorted(by_contract):
        groups: dict[str, list[Row]] = {}
        for row in build_rows(by_contract[contract], evidence):
            groups.setdefault(area_of(row.path), []).append(row)
        sections.append(
            Section(
                contract,
                [
                    Group(a, sorted(rs, key=lambda r: (r.rank, r.path, r.component)))
                    for a, rs in sorted(groups.items())
                ],
            )
        )
    return sections


def md_cell(value) -> str:
    """A Markdown table cell: pipes escaped, newlines flattened."""
    if isinstance(value, (list, tuple)):
        value = ", ".join(str(v) for v in value)
    text = " ".join(str(value).split())
    return text.replace("|", "\\|")


def code_list(values) -> str:
    return ", ".join(f"`{v}`" for v in values)


def _env():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parent / "templates")),
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["cell"] = md_cell
    env.filters["codes"] = code_list
    return env


def render_worklist(
    findings: list[Finding],
    *,
    evidence: dict[str, Evidence] | None = None,
    accepted: list[Finding] | None = None,
    title: str = "reload-lint worklist",
    source: str = "",
) -> str:
    """Markdown worklist. `accepted` are allowlisted findings, listed apart with their reason."""
    evidence = evidence or {}
    live = [f for f in findings if f.suppressed is None]
    sections = build_sections(live, evidence)
    rows = [r for s in sections for g in s.groups for r in g.rows]
    status_counts = Counter(st for r in rows for st in r.statuses)
    matched = sum(1 for f in live if f.fingerprint in evidence)
    ctx = {
        "title": title,
        "source": source,
        "sections": sections,
        "n_findings": len(live),
        "n_rows": len(rows),
        "by_rule": sorted(Counter(f.rule for f in live).items()),
        "rule_names": {c: r.name for c, r in RULES.items()},
        "statuses": [(s, status_counts[s]) for s in STATUS_ORDER if status_counts[s]],
        "n_evidence": len(evidence),
        "n_evidence_matched": matched,
        "unmatched_evidence": sorted(set(evidence) - {f.fingerprint for f in live}),
        "accepted": sorted(accepted or [], key=Finding.sort_key),
    }
    return _env().get_template("worklist.md.j2").render(**ctx)
