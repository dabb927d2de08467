"""What each verdict stands on: grades, preconditions, forced platforms, harness reads, clusters.

``finalize`` runs over a sweep's records (plain JSON dicts) once they all exist
(``confirm``'s command, before ``evidence.evidence_document``) and is idempotent:

* ``grade``: the fine verdict (``evidence.GRADES``), from ``decide.judge``;
* ``tier``: ``replay`` only when a replay ran; a build that stopped before it (vLLM's reload
  refused the layer) reached the census only, whatever its row's tier;
* a record made under the ``unshadow`` precondition at a site whose stock record is ``masked``
  is inconclusive: the precondition itself took that attribute off the layer, and that freed
  the storage the record saw go;
* ``forced``: the platform and flags of a row that forces a platform-only path on this device
  (``families.Row.platform``);
* ``harness_reads``: the finding's own graph-visible storages the capture read from harness code
  (census rows' ``read_by``) rather than vLLM's;
* ``cluster``: findings whose own escaped, graph-visible storages are one storage in some
  bug-side build form one cluster (``S1``, ``S2``, ... in site order);
* ``shared_build``: a red record whose build let storages of other clusters escape too (the
  failure class belongs to the build, not to this cluster alone).

``upgrade`` re-derives a pre-1.3 evidence file: each record's stage data is turned back into the
messages ``decide.judge`` reads (census rows, every link of the run, the replay's result, how the
child ended) and judged again, then finalized. A record whose verdict changes keeps the old one
in ``regraded_from``.

    python -m reload_lint.confirm.verdicts FINDINGS EVIDENCE -o OUT
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

from reload_lint.confirm.evidence import OBSERVED_FAILURES, grade_counts


def precondition_names(rec: dict) -> list[str]:
    """``unshadow: before vLLM's ...`` -> ``unshadow``."""
    return [p.split(":", 1)[0].strip() for p in rec.get("preconditions") or []]


def run_key(rec: dict) -> tuple:
    """Records of one child run share this (one build, one side, its preconditions)."""
    return (
        rec.get("recipe"),
        bool(rec.get("fixed")),
        tuple(precondition_names(rec)),
        tuple(rec.get("isolation") or []),
    )


def grade_from(verdict: str, failure: str | None, reason: str = "") -> str:
    """The grade a record's coarse verdict implies (records judged before 1.3)."""
    if verdict == "red":
        if failure == "masked":
            return "masked"
        return "red-observed" if failure in OBSERVED_FAILURES else "red-unobserved"
    if verdict == "green" and "holds no " in reason:
        return "not-applicable"
    return verdict


def replay_ran(rec: dict) -> bool:
    outcome = (rec.get("replay") or {}).get("outcome") or {}
    started = {s["stage"] for s in rec.get("stages") or []}
    return bool(started & {"replay", "replay_start"}) or outcome.get("stage") == "replay"


# -- re-deriving older records ----------------------------------------------------------------

_MASKED_ATTR = re.compile(r"attribute '(\w+)' already exists")


def legacy_messages(rec: dict, run: list[dict]) -> tuple[list[dict], dict]:
    """The stage messages and outcome ``judge`` reads, rebuilt from a stored record and the
    other records of its run (their links and targets)."""
    census = rec.get("census") or {}
    msgs: list[dict] = []
    for s in rec.get("stages") or []:
        m = {"stage": s["stage"], "ok": s.get("ok", True)}
        if not m["ok"]:
            err = s.get("error") or ""
            m.update(error=err, error_type=err.split(":", 1)[0])
            if s["stage"] == "reload":
                if _MASKED_ATTR.search(err):
                    m["precondition"] = "unshadow"
                    names = {a for o in run for a in _masking_attrs(o)}
                    names.update(_MASKED_ATTR.findall(err))
                    m["masked"] = sorted(f"layer.{a}" for a in names)
                elif "more than one element" in err:
                    m["precondition"] = "expanded_copy_back"
        elif s["stage"] == "load_a":
            m.update(
                tier=rec.get("tier") or ("census" if rec.get("standins") else "replay"),
                standins=rec.get("standins") or [],
                backend=rec.get("backend"),
                component=rec.get("component"),
            )
        elif s["stage"] == "census" and census:
            linked = {o["fingerprint"]: _all_links(o) for o in run}
            targets = {o["fingerprint"]: o.get("target", "") for o in run}
            # the run's findings without a record of their own (1.3: ``shared_with``)
            for fp, other in (census.get("shared_with") or {}).items():
                linked.setdefault(fp, list(other.get("paths", [])))
                targets.setdefault(fp, other.get("target", ""))
            # the stores folded into each finding (1.4: the census's ``also``)
            also = {
                o["fingerprint"]: {"targets": [a.get("target", "") for a in folded.values()]}
                for o in run
                if (folded := (o.get("census") or {}).get("also"))
            }
            m.update(
                rows=census.get("rows") or [],
                linked=linked,
                targets=targets,
                also=also,
                none_targets=[
                    o["fingerprint"] for o in run if "(it is None on this backend)" in o["reason"]
                ],
            )
        elif s["stage"] == "replay":
            m.update({k: v for k, v in (rec.get("replay") or {}).items() if k != "outcome"})
        msgs.append(m)
    outcome = (rec.get("replay") or {}).get("outcome") or {"status": "ok"}
    return msgs, outcome


def _all_links(rec: dict) -> list[str]:
    """Every path the record's target linked: its own and, from 1.3 on, the lent ones."""
    census = rec.get("census") or {}
    return [*census.get("linked", []), *(census.get("lent") or {})]


def _masking_attrs(rec: dict) -> list[str]:
    """Attributes a stored record shows masking the reload (its target, when it is the
    masking site of a refused reload)."""
    reason = rec.get("reason") or ""
    if not reason.startswith("vLLM's layerwise reload raises") or rec["verdict"] == "inconclusive":
        return []
    t = (rec.get("target") or "").split(".")
    return [t[1]] if len(t) > 1 and t[0] == "layer" else []


def upgrade(findings_doc: dict, evidence_doc: dict) -> dict:
    """A pre-1.3 evidence document, every record judged again on its stored data (module
    docstring), finalized; schema 1.3."""
    from reload_lint.confirm.decide import census_links, judge
    from reload_lint.confirm.evidence import EVIDENCE_SCHEMA_VERSION, VERDICTS

    if all("grade" in r for r in evidence_doc["evidence"]):
        # already judged with grades (1.3): finalizing again changes nothing
        rows = finalize([dict(r) for r in evidence_doc["evidence"]])
        return {
            **evidence_doc,
            "evidence": rows,
            "summary": {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS},
            "grades": grade_counts(rows),
        }
    findings = {f["fingerprint"]: f for f in findings_doc.get("findings", [])}
    records = [dict(r) for r in evidence_doc["evidence"]]
    runs: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        runs[run_key(r)].append(r)
    out = []
    for r in records:
        if not r.get("stages"):
            r["grade"] = r.get("grade") or grade_from(r["verdict"], r["failure"], r["reason"])
            out.append(r)
            continue
        f = findings.get(r["fingerprint"], {})
        finding = SimpleNamespace(
            fingerprint=r["fingerprint"],
            rule=r["rule"],
            path=r["path"],
            line=r["line"],
            end_line=f.get("end_line"),
            target=r["target"],
            message=f.get("message", ""),
        )
        msgs, outcome = legacy_messages(r, runs[run_key(r)])
        verdict, failure, reason, grade = judge(finding, msgs, outcome, bool(r.get("fixed")))
        new = {**r, "verdict": verdict, "failure": failure, "reason": reason, "grade": grade}
        census = next((m for m in msgs if m["stage"] == "census" and "rows" in m), None)
        if census is not None:
            own, lent = census_links(finding, census)
            new["census"] = {**r["census"], "linked": own, "lent": lent}
        if (verdict, failure) != (r["verdict"], r["failure"]):
            new["regraded_from"] = {k: r[k] for k in ("verdict", "failure", "reason")}
        out.append(new)
    doc = {**evidence_doc, "schema_version": EVIDENCE_SCHEMA_VERSION}
    doc["regraded"] = {
        "from_schema": evidence_doc.get("schema_version"),
        "by": "python -m reload_lint.confirm.verdicts (decide.judge on each record's stored data)",
    }
    rows = finalize(out)
    doc["evidence"] = rows
    doc["summary"] = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    doc["tiers"] = {
        t: sum(1 for r in rows if (r.get("tier") or "none") == t)
        for t in ("replay", "census", "none")
    }
    doc["grades"] = grade_counts(rows)
    return doc


# -- finalize -----------------------------------------------------------------------------------


def finalize(rows: list[dict]) -> list[dict]:
    """Set the 1.3 fields over a sweep's records (module docstring); returns ``rows``."""
    from reload_lint.confirm.families import BY_ID

    for r in rows:
        r.setdefault("grade", None)
        if r["grade"] is None:
            r["grade"] = grade_from(r["verdict"], r.get("failure"), r.get("reason", ""))
        if r.get("tier") == "replay" and not replay_ran(r):
            r["tier"] = "census"
            note = "no replay ran (the build stopped before it): census only"
            if note not in r.setdefault("notes", []):
                r["notes"].append(note)
        row = BY_ID.get(r.get("row") or "")
        r["forced"] = row.forced() if row is not None else None
        r["harness_reads"] = _harness_reads(r, row)
    _precondition_artifacts(rows)
    _clusters(rows)
    return rows


def _harness_reads(rec: dict, row) -> list[str]:
    census = rec.get("census") or {}
    linked = set(census.get("linked") or [])
    out = []
    legacy = any("standin" not in c for c in census.get("rows") or [])
    made = [b for b in rec.get("built") or [] if b.startswith("reload_lint.")]
    if legacy and made and linked:
        # before 1.3 the census did not say which storage a stand-in object holds; the build's
        # observed classes say one did
        out.append(
            f"a census stand-in ({', '.join(b.rsplit('.', 1)[-1] for b in made)}) holds "
            "graph-visible storage in this build (which, not recorded before 1.3)"
        )
    for c in census.get("rows") or []:
        if c["path"] not in linked or not c.get("graph_visible"):
            continue
        who = c.get("read_by")
        if who is None and "read_by" not in c and row is not None and row.harness_forward:
            out.append(f"{c['path']} (reader not recorded; {row.harness_forward})")
        elif who and who.startswith("harness:"):
            out.append(f"{c['path']} ({who})")
        if c.get("standin"):
            out.append(f"{c['path']} (a census stand-in's own buffer)")
    return out


def _precondition_artifacts(rows: list[dict]) -> None:
    """At a masking site the unshadow precondition takes the site's own attribute off the
    layer before the restore, which frees the storage the capture read: a bug-side run under
    it says nothing about the site, and a fixed-side red says nothing about the fix (the fix
    keeps the object the precondition just removed). Both become inconclusive."""
    masked = {
        (r["fingerprint"], r.get("recipe"))
        for r in rows
        if not r.get("fixed") and not r.get("preconditions") and r.get("failure") == "masked"
    }
    for r in rows:
        if "unshadow" not in precondition_names(r):
            continue
        if (r["fingerprint"], r.get("recipe")) not in masked or r["grade"] == "inconclusive":
            continue
        if r.get("fixed") and r["verdict"] != "red":
            continue
        r.setdefault("regraded_from", {k: r[k] for k in ("verdict", "failure", "reason")})
        if r.get("fixed"):
            why = (
                "the unshadow precondition itself took this site's attribute off the layer "
                "(freeing the storage this run saw go) before the patched post-load could keep "
                "it, so the run says nothing about the fix; the stock run is masked"
            )
        else:
            why = (
                "the unshadow precondition itself took this site's attribute off the layer "
                "(freeing the storage this run saw go), so the run says nothing about the site; "
                "the stock run is masked"
            )
        r.update(verdict="inconclusive", failure=None, grade="inconclusive", reason=why)


def escaped_rows(rec: dict) -> list[dict]:
    """The record's census rows the capture read that moved or were freed (a moved path whose
    old storage another path still holds did not escape: ``decide.still_held``)."""
    from reload_lint.confirm.decide import still_held

    rows = still_held([dict(c) for c in (rec.get("census") or {}).get("rows") or []])
    return [c for c in rows if c.get("graph_visible") and (c["moved"] or c["freed"])]


def _escaped(rec: dict) -> set:
    """Storage keys of the record's own linked rows that escaped (``escaped_rows``)."""
    linked = set((rec.get("census") or {}).get("linked") or [])
    return {c.get("storage") for c in escaped_rows(rec) if c["path"] in linked}


def _all_escaped(rec: dict) -> set:
    return {c.get("storage") for c in escaped_rows(rec)}


def _clusters(rows: list[dict]) -> None:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    runs: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        r["cluster"] = None
        r["shared_build"] = False
        if not r.get("fixed") and r["grade"] in ("red-observed", "red-unobserved", "masked"):
            runs[run_key(r)].append(r)
            parent.setdefault(r["fingerprint"], r["fingerprint"])
    for recs in runs.values():
        by_key: dict[object, str] = {}
        for r in recs:
            for key in _escaped(r):
                other = by_key.setdefault(key, r["fingerprint"])
                parent[find(r["fingerprint"])] = find(other)
    where = {r["fingerprint"]: (r["path"], r["line"], r["target"]) for r in rows}
    roots = sorted(
        {find(fp) for fp in parent}, key=lambda fp: min(where[x] for x in parent if find(x) == fp)
    )
    ids = {root: f"S{i}" for i, root in enumerate(roots, 1)}
    for r in rows:
        if r["fingerprint"] in parent:
            r["cluster"] = ids[find(r["fingerprint"])]
    for recs in runs.values():
        for r in recs:
            mine = set()
            for o in recs:
                if o.get("cluster") == r["cluster"]:
                    mine |= _escaped(o)
            r["shared_build"] = bool(_all_escaped(r) - mine)


def main(argv: list[str] | None = None) -> int:
    from reload_lint.confirm.evidence import write_evidence

    p = argparse.ArgumentParser(prog="python -m reload_lint.confirm.verdicts", allow_abbrev=False)
    p.add_argument("findings", help="the findings JSON the sweep ran on")
    p.add_argument("evidence", help="the evidence JSON (schema 1.0-1.2)")
    p.add_argument("-o", "--output", required=True, help="the 1.3 evidence JSON to write")
    a = p.parse_args(argv)
    try:
        findings = json.loads(Path(a.findings).read_text(encoding="utf-8"))
        evidence = json.loads(Path(a.evidence).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"reload-lint: cannot read input: {exc}", file=sys.stderr)
        return 2
    write_evidence(Path(a.output), upgrade(findings, evidence))
    return 0


if __name__ == "__main__":
    sys.exit(main())
