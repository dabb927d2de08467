"""The RL working group's worklist: findings (+ runtime evidence) as the RFC's risk table.

One row per component (the enclosing class, or the module for module-level helpers) and
file: component | tensors | site path:line | pattern | likely failure | evidence | status.
Rows are grouped by reload contract, then by area (the folder under the package). Evidence
JSON from the confirmation runner is attached per site (worklist_evidence.py, docs/worklist.md)
and turns "static only" into confirmed red, fixed green, unread, inconclusive or unconfirmed.
The Markdown comes from templates/worklist.md.j2 (jinja2).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.confirm.evidence import FAILURES, GRADES, TIERS, VERDICTS
from reload_lint.findings import Finding
from reload_lint.render.likely_failure import likely_failure
from reload_lint.render.worklist_evidence import (
    MATCH_KINDS,
    Match,
    Record,
    SiteEvidence,
    best,
    component_of,
    load_evidence,
    merge_evidence,
    short,
)
from reload_lint.rules import RULES

__all__ = [
    "STATUS_ORDER",
    "area_of",
    "component_of",
    "likely_failure",
    "load_evidence",
    "merge_evidence",
    "render_worklist",
]

# Row order: the worst first. "unconfirmed": only records of another site reached the finding
# (via its trace) and none shows this component built that object.
STATUS_ORDER = (
    "confirmed red",
    "red under a precondition",
    "unread",
    "inconclusive",
    "unconfirmed",
    "static only",
    "not applicable",
    "not reproduced",
    "fixed green",
)
# Columns of the header's count table: the tier of the record that decides a finding's status.
TIER_COLUMNS = (*TIERS, "none")

_CONF = ("high", "medium", "low")
# Prefixes of paths that say nothing about the area (the package and its layer root).
_AREA_PREFIXES = ("model_executor/layers/", "model_executor/")


def area_of(path: str) -> str:
    parts = path.split("/")
    rel = "/".join(parts[1:-1]) + "/" if len(parts) > 2 else ""
    for p in _AREA_PREFIXES:
        if rel.startswith(p):
            rel = rel[len(p) :]
            break
    rel = rel.rstrip("/")
    return rel or (parts[0] if len(parts) > 1 else "(top level)")


def _finding_status(ev: SiteEvidence | None) -> str:
    return ev.status if ev is not None else "static only"


def _finding_failure(f: Finding, ev: SiteEvidence | None) -> str:
    """The runtime failure of a proven red record; else the static guess, refined by the
    dtype a proven record's census saw."""
    if ev is not None and ev.failure:
        return ev.failure
    return likely_failure(f, ev.dtype if ev is not None else "")


@dataclass
class Row:
    component: str
    path: str
    findings: list[Finding] = field(default_factory=list)
    evidence: list[SiteEvidence | None] = field(default_factory=list)
    fix: str = ""  # the Fix cell (worklist --patches: render/worklist_fix.py)

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
        out = {_finding_failure(f, ev) for f, ev in zip(self.findings, self.evidence, strict=True)}
        out.discard("")
        return sorted(out, key=lambda s: (FAILURES.index(s) if s in FAILURES else 9, s))

    @property
    def statuses(self) -> list[str]:
        return [_finding_status(ev) for ev in self.evidence]

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
        """Every record attached to the row, once, with the closest (proven first) way it
        reached the row."""
        top: dict[int, Match] = {}
        for ev in self.evidence:
            for m in ev.matches if ev is not None else ():
                prev = top.get(id(m.record))
                if prev is None or _match_order(m) < _match_order(prev):
                    top[id(m.record)] = m
        return list(top.values())

    @property
    def evidence_text(self) -> str:
        matches = self.matches
        proven = [m for m in matches if m.proven]
        unproven = [m for m in matches if not m.proven]
        parts = []
        for fixed in (False, True):
            side = [m for m in proven if m.record.fixed == fixed]
            if side:
                parts.append(_side_text(side, fixed))
        if unproven:
            parts.append(_unconfirmed_text(unproven, self.component))
        if parts:
            return "; ".join(parts)
        conf = Counter(f.confidence for f in self.findings)
        top = min(conf, key=lambda c: _CONF.index(c) if c in _CONF else len(_CONF))
        text = f"static, {top} confidence"
        read = next(filter(None, map(_read_site, self.findings)), "")
        return text + f"; read at {read}" if read else text


def _read_site(f: Finding) -> str:
    """`file.py:line` of the graph-visible read: the finding's `reader` (schema 1.1), else its
    trace's "read at ..." step (older findings files); '' when none was found."""
    if f.reader:
        where = f.reader.split(" ", 1)[0]
        path, _, line = where.rpartition(":")
        return f"{path.rsplit('/', 1)[-1]}:{line}" if path and line.isdigit() else ""
    step = next((s for s in f.trace if s.note.startswith("read at")), None)
    return f"{step.path.rsplit('/', 1)[-1]}:{step.line}" if step else ""


def _match_order(m: Match) -> tuple[bool, int]:
    return (not m.proven, MATCH_KINDS.index(m.via))


def _tier_text(r: Record) -> str:
    """`replay`, `census, stand-ins: a, b`, or '' for a record without a tier."""
    if not r.tier:
        return ""
    if r.standins:
        return f"{r.tier}, stand-ins: " + ", ".join(f"`{x}`" for x in r.standins)
    return r.tier


def _side_text(side: list[Match], fixed: bool) -> str:
    """One side of a row's evidence: the most decisive record's verdict and reason.

    Labels say how the record reached the row: `via target` (same stored target, another
    fingerprint) or `via trace (<Component> built <Class>)` (a constructor store in the
    finding's trace, and the record shows this component built that class). The row's other
    records of the side are counted by verdict.
    """
    # stock reload decides; a record made under a precondition leads only when no stock one is
    top = best([m for m in side if not m.record.preconditions]) or best(side)
    assert top is not None
    r = top.record
    text = ("fixed side " if fixed else "") + (r.grade or r.verdict)
    about = [b for b in (_tier_text(r), f"backend `{short(r.backend)}`" if r.backend else "") if b]
    about += _standing(r)
    if about:
        text += " (" + "; ".join(about) + ")"
    if top.via == "trace":
        text += f" via trace (`{short(r.component)}` built `{top.proof}`)"
        if not fixed:
            text += f" from {r.site}"
    elif top.via != "fingerprint":
        text += f" via {top.via}" + ("" if fixed else f" from {r.site}")
    if r.reason:
        text += f": {r.reason}"
    # the row's other records by grade and by what each stands on (a census tier, a
    # precondition, a forced platform path, harness reads): none of them is folded into a
    # coarse verdict or into the deciding record's circumstances
    others: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for m in side:
        if m is not top:
            key = (m.record.grade or m.record.verdict, _qualifiers(m.record))
            others.setdefault(key, []).append(_label(m.record))
    extra = []
    top_key = (r.grade or r.verdict, _qualifiers(r))
    for key in sorted(others, key=lambda k: (_grade_index(k[0]), k[1])):
        names = others[key]
        grade, quals = key
        more = " more" if key == top_key else ""
        about = f" ({', '.join(quals)})" if quals else ""
        listed = ", ".join(dict.fromkeys(names))
        extra.append(f"{len(names)}{more} {grade}{about}: {listed}")
    if extra:
        text += " (+" + "; ".join(extra) + ")"
    return text


def _grade_index(grade: str) -> int:
    return GRADES.index(grade) if grade in GRADES else len(GRADES) + VERDICTS.index(grade)


def _qualifiers(r: Record) -> tuple[str, ...]:
    """What a record among a row's others stands on, beyond replay under the stock reload."""
    out = []
    if r.tier != "replay":
        out.append(r.tier or "no tier")
    if r.preconditions:
        out.append("under " + ", ".join(f"`{p}`" for p in r.preconditions))
    if r.forced:
        out.append(f"forces {r.forced}")
    if r.harness_reads:
        out.append("harness reads")
    if r.shared_build:
        out.append("shared build")
    return tuple(out)


def _standing(r: Record) -> list[str]:
    """What a record stands on beyond its verdict: preconditions, the platform path it forces,
    reads made by harness code, its storage cluster and whether its build was shared."""
    out = []
    if r.preconditions:
        out.append("under precondition " + ", ".join(f"`{p}`" for p in r.preconditions))
    if r.forced:
        out.append(f"forces {r.forced}")
    if r.harness_reads:
        out.append("harness reads or stand-in storage")
    if r.cluster and not r.fixed:
        out.append(f"cluster {r.cluster}" + (", shared build" if r.shared_build else ""))
    return out


def _label(r: Record) -> str:
    """A record among a row's others: its target, and the backend when it names one (one
    record per backend of the same site)."""
    text = f"`{r.target or r.fingerprint}`"
    return text + f" on `{short(r.backend)}`" if r.backend else text


def _unconfirmed_text(unproven: list[Match], component: str) -> str:
    """Records that reached the row only through a trace step, without proof: name the sites
    they ran on and why they do not count, never their verdicts."""
    sites = list(dict.fromkeys(m.record.site for m in unproven if not m.record.fixed))
    sites = sites or list(dict.fromkeys(m.record.site for m in unproven))
    ran_for = sorted({short(m.record.component) for m in unproven if m.record.component})
    who = "run for " + ", ".join(f"`{c}`" for c in ran_for) if ran_for else "naming no component"
    return (
        f"unconfirmed: the trace reaches {', '.join(sites)}; "
        f"{len(unproven)} runtime record(s) there, {who}, none showing `{component}` "
        "built that object"
    )


@dataclass
class Group:
    area: str
    rows: list[Row]


@dataclass
class Section:
    contract: str
    groups: list[Group]


def build_rows(findings: list[Finding], evidence: list[SiteEvidence | None]) -> list[Row]:
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


def build_sections(findings: list[Finding], evidence: list[SiteEvidence | None]) -> list[Section]:
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
    fix_column=None,
) -> str:
    """Markdown worklist. `evidence` are runtime records (load_evidence); `accepted` are
    allowlisted findings, listed apart with their reason. `fix_column(area, findings)`, when
    given, fills a Fix column (the area's patch and its fixed-side verdicts)."""
    records = list(evidence.values()) if isinstance(evidence, dict) else list(evidence or [])
    live = [f for f in findings if f.suppressed is None]
    attached, unmatched = merge_evidence(live, records)
    sections = build_sections(live, attached)
    rows = [r for s in sections for g in s.groups for r in g.rows]
    if fix_column is not None:
        for g in (g for s in sections for g in s.groups):
            for r in g.rows:
                r.fix = fix_column(g.area, r.findings)
    # Per record: the closest way it reached any finding (direct, proven trace, unproven trace).
    reach: dict[int, tuple[bool, int]] = {}
    for ev in attached:
        for m in ev.matches if ev is not None else ():
            order = _match_order(m)
            reach[id(m.record)] = min(reach.get(id(m.record), order), order)
    n_direct = sum(1 for unproven, via in reach.values() if not unproven and via < 2)
    n_proven_trace = sum(1 for unproven, via in reach.values() if not unproven and via == 2)
    with_ev = [ev for ev in attached if ev is not None]
    ctx = {
        "title": title,
        "show_fix": fix_column is not None,
        "source": source,
        "sections": sections,
        "n_findings": len(live),
        "n_rows": len(rows),
        "by_rule": sorted(Counter(f.rule for f in live).items()),
        "rule_names": {c: r.name for c, r in RULES.items()},
        "tiers": TIER_COLUMNS,
        "counts": count_table(attached),
        "grades": grade_table(attached),
        "n_evidence": len(records),
        "n_evidence_direct": n_direct,
        "n_evidence_trace": n_proven_trace,
        "n_evidence_unproven": len(reach) - n_direct - n_proven_trace,
        "n_findings_direct": sum(1 for ev in with_ev if ev.via in ("fingerprint", "target")),
        "n_findings_trace": sum(1 for ev in with_ev if ev.via == "trace"),
        "n_findings_unconfirmed": sum(1 for ev in with_ev if ev.status == "unconfirmed"),
        "unmatched": sorted(unmatched, key=lambda r: (r.path, r.line, r.target, r.fixed)),
        "accepted": sorted(accepted or [], key=Finding.sort_key),
    }
    return _env().get_template("worklist.md.j2").render(**ctx)


def count_table(attached: list[SiteEvidence | None]) -> list[tuple[str, list[int], int]]:
    """Findings per status (rows, STATUS_ORDER, then "all") and per tier of the deciding record
    (columns, TIER_COLUMNS): [(status, [count per tier], total), ...]."""
    cells: Counter = Counter()
    for ev in attached:
        status = _finding_status(ev)
        tier = ev.tier if ev is not None and ev.tier in TIERS else "none"
        cells[(status, tier)] += 1
    table = []
    for status in STATUS_ORDER:
        per = [cells[(status, t)] for t in TIER_COLUMNS]
        table.append((status, per, sum(per)))
    per = [sum(cells[(s, t)] for s in STATUS_ORDER) for t in TIER_COLUMNS]
    table.append(("all", per, sum(per)))
    return table


def grade_table(attached: list[SiteEvidence | None]) -> list[tuple[str, int, int]]:
    """Findings per grade of the deciding bug-side record: [(grade, stock reload, under a
    precondition), ...]; a finding counts in the second column by its best record made under
    a precondition (only findings that have one)."""
    stock: Counter = Counter()
    pre: Counter = Counter()
    for ev in attached:
        if ev is None:
            continue
        bug = ev.bug
        if bug is not None and not bug.preconditions:
            stock[bug.grade] += 1
        under = ev.bug_under_precondition
        if under is not None:
            pre[under.grade] += 1
    return [(g, stock[g], pre[g]) for g in GRADES]
