"""Runtime evidence for the worklist: load the runner's records and attach each to its site.

A record proves the site it ran on and nothing else (docs/worklist.md, "Merging evidence"):

1. **direct**: the finding with the record's fingerprint, and the findings that store the
   record's target in the record's file (in the record's function when one of them is) and
   that no record names by fingerprint (a drifted fingerprint);
2. **via trace**: only for a record with no direct match, a finding whose trace has an
   allocation step at the record's site. That merge counts only when the record shows the
   finding's own component built the step's object: its `component` is the row's component and
   its `built` list or `backend` names the step's class. Without that the finding is
   `unconfirmed`: the record is shown, its verdict is not lent.

The record schema is the runner's (reload_lint/confirm/evidence.py, docs/runner.md); fields
added later are read with defaults so older evidence files still load.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.confirm.evidence import GRADES, TIERS, VERDICTS
from reload_lint.confirm.verdicts import grade_from
from reload_lint.errors import ReloadLintError
from reload_lint.findings import Finding, normalize_target

# How a record reached a finding, closest first.
MATCH_KINDS = ("fingerprint", "target", "trace")
# The most decisive verdict first: a red run beats a storage that moved unread, which beats a
# stable one; inconclusive decides nothing.
VERDICT_RANK = ("red", "unread", "green", "inconclusive")
# Within one verdict: an observed failure first, a target without a tensor of its own last.
GRADE_RANK = ("red-observed", "masked", "red-unobserved", "unread", "green", "not-applicable")


@dataclass(frozen=True)
class Record:
    """One runtime record: a site on one side of its fix (`fixed` true: the fixed side).

    `path`, `line`, `symbol` and `target` are the site the runner confirmed (copied from the
    finding it was given). `component` is the quant method, scheme or kernel class the harness
    drove, `built` the classes it saw that component build, `backend` the kernel or experts
    class vLLM chose, `dtype` the census's dtype of the linked storage.
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
    tier: str = ""
    standins: tuple[str, ...] = ()
    backend: str = ""
    built: tuple[str, ...] = ()
    component: str = ""
    dtype: str = ""
    # -- evidence schema 1.3 (older records: derived from the verdict, empty otherwise) ------
    grade: str = ""  # one of GRADES
    preconditions: tuple[str, ...] = ()  # names: unshadow, expanded_copy_back
    cluster: str = ""
    shared_build: bool = False
    forced: str = ""  # "ROCm ... (flag=True, ...)" for a row forcing a platform-only path
    harness_reads: tuple[str, ...] = ()

    @property
    def site(self) -> str:
        """`Symbol` `target` (or the fingerprint when the record names no site)."""
        parts = [f"`{x}`" for x in (self.symbol, self.target) if x]
        return " ".join(parts) or f"`{self.fingerprint}`"


def short(qualname: str) -> str:
    """`vllm.x.y.Cls` -> `Cls`."""
    return qualname.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class Match:
    record: Record
    via: str  # one of MATCH_KINDS
    # For a trace match: the built class that proves the finding's component built the step's
    # object ("" = unproven; the match is shown but decides nothing).
    proof: str = ""

    @property
    def proven(self) -> bool:
        return self.via != "trace" or bool(self.proof)


def best(matches: list[Match]) -> Match | None:
    """The most decisive record; ties: the closer match."""
    if not matches:
        return None

    def rank(m: Match) -> tuple[int, int, bool, int]:
        v, g = m.record.verdict, m.record.grade
        return (
            VERDICT_RANK.index(v) if v in VERDICT_RANK else len(VERDICT_RANK),
            GRADE_RANK.index(g) if g in GRADE_RANK else len(GRADE_RANK),
            m.record.shared_build,
            MATCH_KINDS.index(m.via),
        )

    return min(matches, key=rank)


@dataclass
class SiteEvidence:
    """The runtime records attached to one finding: the bug side and the fixed side."""

    matches: list[Match] = field(default_factory=list)

    @property
    def proven(self) -> list[Match]:
        return [m for m in self.matches if m.proven]

    @property
    def unproven(self) -> list[Match]:
        return [m for m in self.matches if not m.proven]

    @property
    def bug(self) -> Record | None:
        """The deciding bug-side record: stock reload first; a record made under a
        precondition decides only when no stock record exists."""
        side = [m for m in self.proven if not m.record.fixed]
        m = best([m for m in side if not m.record.preconditions]) or best(side)
        return m.record if m else None

    @property
    def bug_under_precondition(self) -> Record | None:
        m = best([m for m in self.proven if not m.record.fixed and m.record.preconditions])
        return m.record if m else None

    @property
    def fix(self) -> Record | None:
        m = best([m for m in self.proven if m.record.fixed])
        return m.record if m else None

    @property
    def via(self) -> str:
        """The closest way a proven record reached this finding ('' if none did)."""
        return min((m.via for m in self.proven), key=MATCH_KINDS.index, default="")

    @property
    def status(self) -> str:
        bug, fix = self.bug, self.fix
        if bug is None and fix is None:
            return "unconfirmed"
        if bug is not None and bug.verdict == "red" and not bug.preconditions:
            return "fixed green" if fix is not None and fix.verdict == "green" else "confirmed red"
        under = self.bug_under_precondition
        if under is not None and under.verdict == "red":
            return "red under a precondition"
        if fix is not None and fix.verdict == "red":
            return "confirmed red"
        if bug is not None and bug.verdict == "unread":
            return "unread"
        if bug is not None and bug.grade == "not-applicable":
            return "not applicable"
        if bug is not None and bug.verdict == "green":
            return "not reproduced"
        return "inconclusive"

    @property
    def tier(self) -> str:
        """The tier of the record that decides the status ('' when none does or it has none)."""
        rec = self.bug or self.fix
        return rec.tier if rec is not None else ""

    @property
    def failure(self) -> str:
        for r in (self.bug, self.fix):
            if r is not None and r.verdict == "red" and r.failure:
                return r.failure
        return ""

    @property
    def dtype(self) -> str:
        return next((m.record.dtype for m in self.proven if m.record.dtype), "")


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


def _names(r: dict, key: str, where: str) -> tuple[str, ...]:
    v = r.get(key)
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ReloadLintError(f"{where}: `{key}` must be a list of strings")
    return tuple(x.strip() for x in v if x.strip())


def _linked_dtype(r: dict) -> str:
    """The dtype the census saw on the record's linked storage, when it says."""
    census = r.get("census")
    if not isinstance(census, dict):
        return ""
    linked = census.get("linked") or []
    for row in census.get("rows") or []:
        if isinstance(row, dict) and row.get("path") in linked:
            dtype = row.get("dtype")
            if isinstance(dtype, str) and dtype:
                return dtype
    return ""


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
    return [_record(r, f"{path}: record {i}") for i, r in enumerate(records, 1)]


def _record(r, where: str) -> Record:
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
    tier = r.get("tier")
    if tier is not None and tier not in TIERS:
        raise ReloadLintError(
            f"{where}: `tier` must be one of {', '.join(TIERS)} or null, not {tier!r}"
        )
    line = r.get("line")
    grade = r.get("grade") or grade_from(verdict, failure or None, reason)
    if grade not in GRADES:
        raise ReloadLintError(f"{where}: `grade` must be one of {', '.join(GRADES)}, not {grade!r}")
    forced = r.get("forced") if isinstance(r.get("forced"), dict) else None
    forced_text = ""
    if forced and forced.get("platform"):
        flags = [str(x) for x in (forced.get("flags") or []) + (forced.get("env") or [])]
        forced_text = str(forced["platform"]) + (f" ({', '.join(flags)})" if flags else "")
    return Record(
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
        tier=tier or "",
        standins=_names(r, "standins", where),
        backend=_text(r, "backend"),
        built=_names(r, "built", where),
        component=_text(r, "component"),
        dtype=_linked_dtype(r),
        grade=grade,
        preconditions=tuple(p.split(":", 1)[0].strip() for p in _names(r, "preconditions", where)),
        cluster=_text(r, "cluster"),
        shared_build=bool(r.get("shared_build")),
        forced=forced_text,
        harness_reads=_names(r, "harness_reads", where),
    )


# A trace step that creates or keeps a tensor (the engine's wording), as opposed to the store,
# root, read or call steps: only these can stand for a constructor-level runtime site.
_ALLOC_NOTE = re.compile(r"allocates|new tensor|keeps a|returns a new|stored on", re.I)
# "CutlassBatchedExpertsFp8 keeps a new tensor on self.ab_strides1": the object's class.
_KEEPER = re.compile(r"\b([A-Za-z_]\w*) keeps a\b")


def _names_target(note: str, target: str) -> bool:
    """Does a trace note name the record's target (`self.<attr>`, or the target as written)?"""
    leaf = target.rsplit(".", 1)[-1]
    names = {target, f"self.{leaf}"} if leaf else {target}
    return any(re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", note) for n in names if n)


def component_of(f: Finding) -> str:
    """The row a finding belongs to: the class enclosing the store, else the module."""
    head = f.symbol.split(".", 1)[0] if f.symbol else ""
    if head and head[0].isupper():
        return head
    stem = f.path.rsplit("/", 1)[-1]
    return stem[:-3] if stem.endswith(".py") else stem


def _is_component(qualname: str, f: Finding) -> bool:
    """Is the record's component the finding's own? By class name; a qualified name must also
    be defined in the finding's file (two classes may share a name)."""
    module, _, name = qualname.rpartition(".")
    if not name or name != component_of(f):
        return False
    if not module:
        return True
    stem = f.path.removesuffix(".py").removesuffix("/__init__")
    return module.replace(".", "/") == stem


def step_classes(note: str, rec: Record) -> set[str]:
    """The classes a trace step's object may be: the class its note names as keeping the
    tensor, and the class whose method the step is in (the record's symbol, same site)."""
    out = set(_KEEPER.findall(note))
    head = rec.symbol.split(".", 1)[0] if rec.symbol else ""
    if head and head[0].isupper():
        out.add(head)
    return out


def proof_of(rec: Record, f: Finding, note: str) -> str:
    """The built class that lets `rec` stand for finding `f` via this trace step, or ''."""
    if not rec.component or not _is_component(rec.component, f):
        return ""
    classes = step_classes(note, rec)
    for name in (*rec.built, rec.backend):
        if name and short(name) in classes:
            return short(name)
    return ""


def merge_evidence(
    findings: list[Finding], records: list[Record]
) -> tuple[list[SiteEvidence | None], list[Record]]:
    """Attach each runtime record to the findings it is evidence for.

    Per record, the first level that matches anything wins:

    1. direct: the finding with the record's fingerprint, plus the findings that store the
       record's target in the record's file (in the record's function when one of them is: a
       drifted occurrence index or rule leaves path, symbol and target unchanged) and that no
       record names by fingerprint (such a site keeps its own verdict);
    2. via trace, same line: an allocation step of a finding's trace at the record's path and
       line (a constructor store reported on the statement that rebuilds the object, RL105);
    3. via trace, by name: an allocation step in the record's file whose note names
       `self.<attr>` of the record's target (the lines moved).

    A trace match carries its proof (proof_of) or none; an unproven one is shown on the row
    and decides nothing. Returns one `SiteEvidence` (or None) per finding, in order, and the
    records that matched nothing (listed in the worklist, never dropped).
    """
    out: list[SiteEvidence | None] = [None] * len(findings)
    unmatched: list[Record] = []

    def attach(i: int, match: Match) -> None:
        ev = out[i]
        if ev is None:
            ev = out[i] = SiteEvidence()
        ev.matches.append(match)

    by_fp: dict[str, list[int]] = {}
    for i, f in enumerate(findings):
        by_fp.setdefault(f.fingerprint, []).append(i)
    recorded = {rec.fingerprint for rec in records}
    for rec in records:
        direct = {i: "fingerprint" for i in by_fp.get(rec.fingerprint, [])}
        if rec.path and rec.target:
            # the stored target stands in for a drifted fingerprint, only for findings that no
            # record names by fingerprint: a site with records of its own keeps its own verdict
            want = normalize_target(rec.target)
            same = [
                i
                for i, f in enumerate(findings)
                if f.path == rec.path
                and normalize_target(f.target) == want
                and (i in direct or f.fingerprint not in recorded)
            ]
            in_symbol = [i for i in same if findings[i].symbol == rec.symbol]
            for i in in_symbol or same:
                direct.setdefault(i, "target")
        if direct:
            for i, via in direct.items():
                attach(i, Match(rec, via))
            continue
        hits: list[tuple[int, str]] = []
        if rec.path:
            steps = [
                (i, s)
                for i, f in enumerate(findings)
                for s in f.trace
                if s.path == rec.path and _ALLOC_NOTE.search(s.note)
            ]
            hits = [(i, s.note) for i, s in steps if rec.line and s.line == rec.line]
            if not hits and rec.target:
                hits = [(i, s.note) for i, s in steps if _names_target(s.note, rec.target)]
        if not hits:
            unmatched.append(rec)
            continue
        proofs: dict[int, str] = {}
        for i, note in hits:
            proofs[i] = proofs.get(i) or proof_of(rec, findings[i], note)
        for i in sorted(proofs):
            attach(i, Match(rec, "trace", proofs[i]))
    return out, unmatched
