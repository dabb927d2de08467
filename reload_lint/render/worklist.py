"""The RL working group's worklist: findings (+ runtime evidence) as the RFC's risk table.

One row per component (the enclosing class, or the module for module-level helpers) and
file: component | tensors | site path:line | pattern | likely failure | evidence | status.
Rows are grouped by reload contract, then by area (the folder under the package). Evidence
JSON from the confirmation runner (docs/worklist.md) turns "static only" into confirmed red,
fixed green or inconclusive. The Markdown comes from templates/worklist.md.j2 (jinja2).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.errors import ReloadLintError
from reload_lint.findings import Finding, normalize_target
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
    """One runtime record: a site on one side of its fix (`fixed` true: the fixed side).

    `path`, `line`, `symbol` and `target` are the site the runner confirmed (copied from the
    finding it was given); they let a record find its finding when the fingerprint drifted.
    """

    verdict: str
    failure: str = ""
    reason: str = ""
    fixed: bool = False
    fingerprint: str = ""
    path: str = ""
    line: int = 0
    symbol: str = ""
    target: str = ""
    fix: str = ""

    @property
    def site(self) -> str:
        """`Symbol` `target` (or the fingerprint when the record names no site)."""
        parts = [f"`{x}`" for x in (self.symbol, self.target) if x]
        return " ".join(parts) or f"`{self.fingerprint}`"


# How a record reached a finding, best first: its fingerprint, the same stored target in the
# same file (and function), or an allocation step of the finding's trace (docs/worklist.md).
MATCH_KINDS = ("fingerprint", "target", "trace")
_VERDICT_RANK = {"red": 0, "green": 1, "inconclusive": 2}


@dataclass(frozen=True)
class Match:
    record: Record
    via: str  # one of MATCH_KINDS


def _best(matches: list[Match]) -> Match | None:
    """The most decisive record (red, then green, then inconclusive); ties: the closer match."""
    if not matches:
        return None
    return min(matches, key=lambda m: (_VERDICT_RANK[m.record.verdict], MATCH_KINDS.index(m.via)))


@dataclass
class Evidence:
    """The runtime records attached to one finding: the bug side and the fixed side."""

    matches: list[Match] = field(default_factory=list)

    @property
    def bug(self) -> Record | None:
        m = _best([m for m in self.matches if not m.record.fixed])
        return m.record if m else None

    @property
    def fix(self) -> Record | None:
        m = _best([m for m in self.matches if m.record.fixed])
        return m.record if m else None

    @property
    def via(self) -> str:
        """The closest way any record reached this finding."""
        return min((m.via for m in self.matches), key=MATCH_KINDS.index, default="")

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


def _records(doc) -> list:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for key in ("evidence", "records", "results"):
            if isinstance(doc.get(key), list):
                return doc[key]
    raise ValueError("expected a list of records or an object with an `evidence` list")


def _text(r: dict, key: str) -> str:
    v = r.get(key)
    return " ".join(v.split()) if isinstance(v, str) else ""


def load_evidence(path: Path) -> list[Record]:
    """Runtime records, in file order; a bad file is one line, exit 2."""
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
    out: list[Record] = []
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
        line = r.get("line")
        out.append(
            Record(
                verdict,
                failure.strip(),
                " ".join(reason.split()),
                bool(r.get("fixed")),
                fingerprint=fp,
                path=_text(r, "path"),
                line=line if isinstance(line, int) and not isinstance(line, bool) else 0,
                symbol=_text(r, "symbol"),
                target=_text(r, "target"),
                fix=_text(r, "fix") if r.get("fixed") else "",
            )
        )
    return out


# A trace step that creates or keeps a tensor (the engine's wording), as opposed to the store,
# root, read or call steps: only these can stand for a constructor-level runtime site.
_ALLOC_NOTE = re.compile(r"allocates|new tensor|keeps a|returns a new|stored on", re.I)


def _names_target(note: str, target: str) -> bool:
    """Does a trace note name the record's target (`self.<attr>`, or the target as written)?"""
    leaf = target.rsplit(".", 1)[-1]
    names = {target, f"self.{leaf}"} if leaf else {target}
    return any(re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", note) for n in names if n)


def merge_evidence(
    findings: list[Finding], records: list[Record]
) -> tuple[list[Evidence | None], list[Record]]:
    """Attach each runtime record to the findings it is evidence for.

    Per record, the first level that matches anything wins:

    1. direct: the finding with the record's fingerprint, plus the findings that store the
       record's target in the record's file (in the record's function when one of them is:
       a drifted occurrence index or rule leaves path, symbol and target unchanged);
    2. via trace, same line: an allocation step of a finding's trace at the record's path and
       line (a constructor store reported on the statement that rebuilds the object, RL105);
    3. via trace, by name: an allocation step in the record's file whose note names
       `self.<attr>` of the record's target (the lines moved).

    Returns one `Evidence` (or None) per finding, in order, and the records that matched
    nothing (listed in the worklist, never dropped).
    """
    out: list[Evidence | None] = [None] * len(findings)
    unmatched: list[Record] = []

    def attach(idx: list[int], rec: Record, via: str) -> None:
        for i in idx:
            ev = out[i]
            if ev is None:
                ev = out[i] = Evidence()
            ev.matches.append(Match(rec, via))

    by_fp: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_fp.setdefault(f.fingerprint, []).append(i)
    for rec in records:
        direct = {i: "fingerprint" for i in by_fp.get(rec.fingerprint, [])}
        if rec.path and rec.target:
            want = normalize_target(rec.target)
            same = [
                i
                for i, f in enumerate(findings)
                if f.path == rec.path and normalize_target(f.target) == want
            ]
            in_symbol = [i for i in same if findings[i].symbol == rec.symbol]
            for i in in_symbol or same:
                direct.setdefault(i, "target")
        if direct:
            for i, via in direct.items():
                attach([i], rec, via)
            continue
        hits: list[int] = []
        if rec.path:
            steps = [
                (i, s)
                for i, f in enumerate(findings)
                for s in f.trace
                if s.path == rec.path and _ALLOC_NOTE.search(s.note)
            ]
            hits = [i for i, s in steps if rec.line and s.line == rec.line]
            if not hits and rec.target:
                hits = [i for i, s in steps if _names_target(s.note, rec.target)]
        if hits:
            attach(sorted(set(hits)), rec, "trace")
        else:
            unmatched.append(rec)
    return out, unmatched


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
    def matches(self) -> list[Match]:
        """Every record attached to the row, once, with the closest way it reached the row."""
        best: dict[int, Match] = {}
        for ev in self.evidence:
            for m in ev.matches if ev is not None else ():
                prev = best.get(id(m.record))
                if prev is None or MATCH_KINDS.index(m.via) < MATCH_KINDS.index(prev.via):
                    best[id(m.record)] = m
        return list(best.values())

    @property
    def evidence_text(self) -> str:
        matches = self.matches
        if matches:
            parts = []
            for fixed in (False, True):
                side = [m for m in matches if m.record.fixed == fixed]
                if side:
                    parts.append(_side_text(side, fixed))
            return "; ".join(parts)
        conf = Counter(f.confidence for f in self.findings)
        best = min(conf, key=lambda c: _CONF.index(c) if c in _CONF else len(_CONF))
        reads = [s for f in self.findings for s in f.trace if "read" in s.note.lower()]
        text = f"static, {best} confidence"
        if reads:
            r = reads[0]
            text += f"; read at {r.path.rsplit('/', 1)[-1]}:{r.line}"
        return text


def _side_text(side: list[Match], fixed: bool) -> str:
    """One side of a row's evidence: the most decisive record's verdict and reason.

    On the bug side `via trace` names the runtime site the record ran on (a constructor
    store the finding's trace reaches); the row's other records are counted by verdict.
    """
    top = _best(side)
    assert top is not None
    r = top.record
    text = ("fixed side " if fixed else "") + r.verdict
    if top.via != "fingerprint":
        text += f" via {top.via}" + ("" if fixed else f" from {r.site}")
    if r.reason:
        text += f": {r.reason}"
    others: dict[str, list[str]] = {}
    for m in side:
        if m is not top:
            others.setdefault(m.record.verdict, []).append(m.record.target or m.record.fingerprint)
    extra = []
    for verdict in VERDICTS:
        names = others.get(verdict)
        if names:
            more = " more" if verdict == r.verdict else ""
            listed = ", ".join(f"`{n}`" for n in dict.fromkeys(names))
            extra.append(f"{len(names)}{more} {verdict}: {listed}")
    if extra:
        text += " (+" + "; ".join(extra) + ")"
    return text


@dataclass
class Group:
    area: str
    rows: list[Row]


@dataclass
class Section:
    contract: str
    groups: list[Group]


def build_rows(findings: list[Finding], evidence: list[Evidence | None]) -> list[Row]:
    """Rows per (file, component); `evidence` is parallel to `findings` (merge_evidence)."""
    rows: dict[tuple[str, str], Row] = {}
    order = sorted(range(len(findings)), key=lambda i: findings[i].sort_key())
    for i in order:
        f = findings[i]
        key = (f.path, component_of(f))
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(component=key[1], path=f.path)
        row.findings.append(f)
        row.evidence.append(evidence[i])
    return list(rows.values())


def build_sections(findings: list[Finding], evidence: list[Evidence | None]) -> list[Section]:
    by_contract: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_contract.setdefault(f.contract or "unspecified", []).append(i)
    sections = []
    for contract in sorted(by_contract):
        idx = by_contract[contract]
        groups: dict[str, list[Row]] = {}
        for row in build_rows([findings[i] for i in idx], [evidence[i] for i in idx]):
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
    evidence: list[Record] | dict | None = None,
    accepted: list[Finding] | None = None,
    title: str = "reload-lint worklist",
    source: str = "",
) -> str:
    """Markdown worklist. `evidence` are runtime records (load_evidence); `accepted` are
    allowlisted findings, listed apart with their reason."""
    records = list(evidence.values()) if isinstance(evidence, dict) else list(evidence or [])
    live = [f for f in findings if f.suppressed is None]
    attached, unmatched = merge_evidence(live, records)
    sections = build_sections(live, attached)
    rows = [r for s in sections for g in s.groups for r in g.rows]
    status_counts = Counter(st for r in rows for st in r.statuses)
    used = {id(m.record): m.via for ev in attached if ev for m in ev.matches}
    direct = {k for k, via in used.items() if via != "trace"}
    with_ev = [ev for ev in attached if ev is not None]
    ctx = {
        "title": title,
        "source": source,
        "sections": sections,
        "n_findings": len(live),
        "n_rows": len(rows),
        "by_rule": sorted(Counter(f.rule for f in live).items()),
        "rule_names": {c: r.name for c, r in RULES.items()},
        "statuses": [(s, status_counts[s]) for s in STATUS_ORDER if status_counts[s]],
        "n_evidence": len(records),
        "n_evidence_direct": len(direct),
        "n_evidence_trace": len(used) - len(direct),
        "n_findings_direct": sum(1 for ev in with_ev if ev.via != "trace"),
        "n_findings_trace": sum(1 for ev in with_ev if ev.via == "trace"),
        "unmatched": sorted(unmatched, key=lambda r: (r.path, r.line, r.target, r.fixed)),
        "accepted": sorted(accepted or [], key=Finding.sort_key),
    }
    return _env().get_template("worklist.md.j2").render(**ctx)
