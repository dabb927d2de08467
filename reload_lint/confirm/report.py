"""The sweep summary page (docs/evidence/h200-vllm-0.25.1.md), generated from evidence alone.

One line per finding of the findings file. Stock reload and preconditions are kept apart: the
"stock reload" column is the finding's most decisive bug-side record made with vLLM's reload as
it is, the "under a precondition" column the most decisive one made with a precondition
(``unshadow``, ``expanded_copy_back``: fixes applied on both sides so the reload gets past a
refusal). Grades (``evidence.GRADES``) rank red-observed, masked, red-unobserved, unread, green,
not-applicable, inconclusive. The headline counts findings per grade for each, the storage
clusters (``verdicts.py``) and the clusters red with an observed failure under stock reload whose
fixed side is green. A finding's row shows its deciding records; every record, bug and fixed
side, is listed after the table with what it stands on (its tier and stand-ins, preconditions,
the platform path and flags it forces, harness reads, grade, cluster). Evidence older than
schema 1.3 is re-derived first (``verdicts.upgrade``).

    python -m reload_lint.confirm.report FINDINGS EVIDENCE -o PAGE
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from reload_lint.confirm.evidence import GRADES
from reload_lint.confirm.report_fix import diff_section, fixed_cell, headline
from reload_lint.confirm.verdicts import escaped_rows, precondition_names

#: most decisive first
RANK = ("red-observed", "masked", "red-unobserved", "unread", "green", "not-applicable")
RED = ("red-observed", "masked", "red-unobserved")


def _rank(r: dict) -> tuple[int, bool]:
    """Most decisive first; among equals, a record whose build let only its own cluster
    escape (an isolated rerun) before a shared build's."""
    g = r.get("grade") or "inconclusive"
    return (RANK.index(g) if g in RANK else len(RANK), bool(r.get("shared_build")))


def _fixed_of(recs: list[dict], head: dict) -> dict | None:
    return next(
        (
            r
            for r in recs
            if r["fixed"]
            and r.get("recipe") == head.get("recipe")
            and r.get("preconditions", []) == head.get("preconditions", [])
        ),
        None,
    )


def site_verdicts(evidence: list[dict]) -> dict[str, dict]:
    """fingerprint -> {"stock": (record, fixed record) or None, "pre": the same for records made
    under a precondition, "others": the remaining bug-side records}."""
    by_fp: dict[str, list[dict]] = defaultdict(list)
    for r in evidence:
        by_fp[r["fingerprint"]].append(r)
    out = {}
    for fp, recs in by_fp.items():
        bug = sorted((r for r in recs if not r["fixed"]), key=_rank)
        stock = [r for r in bug if not r.get("preconditions")]
        pre = [r for r in bug if r.get("preconditions")]
        heads = [x[0] for x in (stock, pre) if x]
        out[fp] = {
            "stock": (stock[0], _fixed_of(recs, stock[0])) if stock else None,
            "pre": (pre[0], _fixed_of(recs, pre[0])) if pre else None,
            "others": [r for r in bug if all(r is not h for h in heads)],
            "stock_all": stock,
        }
    return out


def _short(text: str, n: int = 110) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= n else text[: n - 1] + "…"


def _cell(pair) -> str:
    if pair is None:
        return "-"
    r = pair[0]
    text = r.get("grade") or r["verdict"]
    if r.get("failure") and r["grade"] not in ("masked",):
        text += f" ({r['failure']})"
    if r.get("preconditions"):
        text = f"{'+'.join(precondition_names(r))}: {text}"
    return text


def _fixed_cell(pair) -> str:
    """The fixed side's grade and where its fix came from (report_fix.fixed_cell)."""
    if pair is None or pair[1] is None:
        return "-"
    fixed = pair[1]
    return fixed_cell({**fixed, "verdict": fixed.get("grade") or fixed["verdict"]})


def _marks(r: dict) -> str:
    out = []
    forced = r.get("forced")
    if forced:
        flags = ", ".join(forced.get("flags", []) + forced.get("env", []))
        out.append(f"forces {forced['platform']}" + (f" ({flags})" if flags else ""))
    if r.get("harness_reads"):
        out.append("harness reads or stand-in storage: " + "; ".join(r["harness_reads"][:2]))
    if r.get("shared_build"):
        out.append("shared build: other clusters' storages escaped too")
    folded = folded_escaped(r)
    if folded:
        out.append(
            "folded stores escaped: " + ", ".join(f"{a['target']} :{a['line']}" for a in folded)
        )
    lent = (r.get("census") or {}).get("lent") or {}
    if lent:
        out.append(f"{len(lent)} linked storage(s) are other stores'")
    if "regraded_from" in r:
        o = r["regraded_from"]
        out.append(f"was {o['verdict']}" + (f" ({o['failure']})" if o.get("failure") else ""))
    return "; ".join(out)


def folded_escaped(r: dict) -> list[dict]:
    """The stores folded into the record's finding (census ``also``, schema 1.4) whose line ran
    and whose own storage escaped (``verdicts.escaped_rows``: moved or freed, as ``decide``
    judges it, while the capture read it)."""
    escaped = {c["path"] for c in escaped_rows(r)}
    return [
        a
        for a in ((r.get("census") or {}).get("also") or {}).values()
        if a.get("ran") is not False and escaped.intersection(a.get("linked", ()))
    ]


def figures(findings: list[dict], sites: dict[str, dict]) -> dict:
    """The headline's numbers (also what the tests and the closing note compare)."""
    stock: Counter = Counter()
    pre: Counter = Counter()
    tiers: Counter = Counter()
    clusters_all: set = set()
    clusters_stock: set = set()
    observed_sites: set = set()
    observed_lines = 0
    observed_clusters: dict[str, bool] = {}
    forced: Counter = Counter()
    harness = 0
    for f in findings:
        s = sites.get(f["fingerprint"])
        st = s["stock"] if s else None
        pr = s["pre"] if s else None
        stock[st[0]["grade"] if st else "no stock record"] += 1
        if pr:
            pre[pr[0]["grade"]] += 1
        head = (st or pr or (None, None))[0]
        tiers[(head or {}).get("tier") or "none"] += 1
        red = [p[0] for p in (st, pr) if p and p[0]["grade"] in RED]
        if red and red[0].get("forced"):
            forced[red[0]["forced"]["platform"]] += 1
        if red and red[0].get("harness_reads"):
            harness += 1
        for pair in (st, pr):
            if pair and pair[0].get("cluster"):
                clusters_all.add(pair[0]["cluster"])
        if st and st[0].get("cluster") and st[0]["grade"] in RED:
            clusters_stock.add(st[0]["cluster"])
        if st and st[0]["grade"] == "red-observed" and st[1] and st[1]["grade"] == "green":
            observed_sites.add(f["fingerprint"])
            observed_lines += 1 + len(folded_escaped(st[0]))
            c = st[0].get("cluster") or f["fingerprint"]
            alone = any(
                r["grade"] == "red-observed" and not r.get("shared_build") for r in s["stock_all"]
            )
            observed_clusters[c] = observed_clusters.get(c, False) or alone
    return {
        "stock": stock,
        "precondition": pre,
        "tiers": tiers,
        "clusters": len(clusters_all),
        "clusters_stock": len(clusters_stock),
        "observed_sites": len(observed_sites),
        "observed_lines": observed_lines,
        "observed_clusters": len(observed_clusters),
        "observed_isolated": sum(observed_clusters.values()),
        "forced": forced,
        "harness": harness,
    }


def render(findings_doc: dict, evidence_doc: dict) -> str:
    from reload_lint.confirm.verdicts import upgrade

    if not all("grade" in r for r in evidence_doc["evidence"]):
        evidence_doc = upgrade(findings_doc, evidence_doc)
    findings = [f for f in findings_doc["findings"] if not f.get("suppressed")]
    records = evidence_doc["evidence"]
    sites = site_verdicts(records)
    env = evidence_doc.get("environment", {})
    fig = figures(findings, sites)
    n = len(findings)
    n_pre = sum(1 for r in records if not r["fixed"] and r.get("preconditions"))
    n_fixed = sum(1 for r in records if r["fixed"])
    regraded = evidence_doc.get("regraded")
    lines = [
        "# H200 confirmation sweep: vLLM 0.25.1, the main job's findings",
        "",
        "Generated by `python -m reload_lint.confirm.report` from "
        "`h200-vllm-0.25.1.findings.json` (the output of `reload-lint check --vllm 0.25.1 "
        "--format json`) and `h200-vllm-0.25.1.json` (the runner's evidence); the raw sweep log "
        "is `h200-vllm-0.25.1.sweep.log`, the machine `h200-vllm-0.25.1.environment.txt`. "
        "See docs/runner.md for what each verdict means.",
        "",
        f"- environment: {env.get('gpu', '?')}, torch {env.get('torch', '?')}, "
        f"vLLM {env.get('vllm', '?')}, Python {env.get('python', '?')}",
        f"- findings: {n}; records: {len(records)} (bug side: "
        f"{len(records) - n_pre - n_fixed} stock reload, {n_pre} under a precondition; "
        f"{n_fixed} fixed side)",
    ]
    if regraded:
        lines.append(
            f"- verdicts re-derived from the stored stage data of a schema "
            f"{regraded.get('from_schema')} file ({regraded.get('by')}); a changed record keeps "
            "its old verdict in `regraded_from` (the marks column says `was ...`)"
        )
    lines += [
        "- per finding, stock reload (its most decisive bug-side record with vLLM's reload as "
        "it is): "
        + ", ".join(f"{fig['stock'][g]} {g}" for g in GRADES)
        + (
            f", {fig['stock']['no stock record']} with no stock record"
            if fig["stock"]["no stock record"]
            else ""
        ),
        "- per finding, under a precondition (findings with such records only): "
        + ", ".join(f"{fig['precondition'][g]} {g}" for g in GRADES),
        f"- storage clusters (findings whose own escaped storages are one storage): "
        f"{fig['clusters']} ({fig['clusters_stock']} red under stock reload)",
        f"- red with an observed failure under stock reload and green when fixed: "
        f"{fig['observed_sites']} sites in {fig['observed_clusters']} clusters "
        f"({fig['observed_isolated']} from a build where only that cluster's storage escaped, "
        f"{fig['observed_clusters'] - fig['observed_isolated']} from a shared build); the "
        f"store lines they cover, their own and the folded stores whose own storage escaped "
        f"and was read in the same record: {fig['observed_lines']}",
        "- red findings whose red record forces a platform-only path on this GPU: "
        + (
            ", ".join(f"{n} {p}" for p, n in sorted(fig["forced"].items()))
            if fig["forced"]
            else "none"
        )
        + f"; whose red record rests on harness reads or stand-in storage: {fig['harness']}",
        "- tier of the deciding record: "
        + ", ".join(f"{fig['tiers'][t]} {t}" for t in ("replay", "census", "none")),
        # the fixed side by where its fix came from (the codemod's patch, --source, monkeypatch)
        *headline(
            records,
            {fp: (s["stock"] or s["pre"]) + (s["others"],) for fp, s in sites.items()},
        ),
        "",
        "| site | rule | target | family row | tier | cluster | stock reload | fixed side | "
        "under a precondition | fixed side | backend | marks | why |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in sorted(findings, key=lambda f: (f["path"], f["line"], f["target"])):
        s = sites.get(f["fingerprint"])
        site = f"`{f['path'].removeprefix('vllm/model_executor/')}:{f['line']}`"
        if s is None:
            lines.append(
                f"| {site} | {f['rule']} | `{f['target']}` | - | - | - | missing | - | - | - | - "
                "| - | - |"
            )
            continue
        head = (s["stock"] or s["pre"])[0]
        backend = (head.get("backend") or "-").rsplit(".", 1)[-1]
        why = head["reason"]
        cluster = head.get("cluster") or "-"
        marks = _marks(head)
        if s["pre"] and s["pre"][0] is not head:
            extra = [m for m in _marks(s["pre"][0]).split("; ") if m and m not in marks]
            if extra:
                marks += ("; " if marks else "") + "precondition record: " + "; ".join(extra)
        if s["others"]:
            grades = Counter(o.get("grade") or "inconclusive" for o in s["others"])
            more = (
                f"{len(s['others'])} more bug-side record(s) ("
                + ", ".join(f"{grades[g]} {g}" for g in GRADES if grades[g])
                + "; every record, below)"
            )
            marks = (
                (marks if len(marks) <= 180 else marks[:179] + "…") + "; " + more if marks else more
            )
        lines.append(
            f"| {site} | {f['rule']} | `{f['target']}` | {head.get('row') or '-'} | "
            f"{head.get('tier') or '-'} | {cluster} | {_cell(s['stock'])} | "
            f"{_fixed_cell(s['stock'])} | {_cell(s['pre'])} | {_fixed_cell(s['pre'])} | "
            f"{backend} | {_short(marks, 260) or '-'} | {_short(why)} |"
        )
    lines += records_section(records)
    lines += diff_section(findings_doc["findings"], records)
    return "\n".join(lines) + "\n"


def _side(r: dict) -> str:
    if r.get("fixed"):
        sha = r.get("fix_patch_sha256")
        return f"fixed ({r.get('fix_source') or 'monkeypatch'}{' ' + sha[:8] if sha else ''})"
    return "bug, isolated rerun" if r.get("isolation") else "bug"


def _tier(r: dict) -> str:
    tier = r.get("tier") or "none"
    if r.get("standins"):
        tier += " (stand-ins: " + ", ".join(r["standins"]) + ")"
    return tier


def records_section(records: list[dict]) -> list[str]:
    """Every record, one line each: what its verdict stands on. A census-tier record names
    its tier and stand-ins, a record made under a precondition names it, a row forcing a
    platform-only path names the platform and the flags, harness reads are marked."""
    lines = [
        "",
        "## Every record",
        "",
        "One line per record, bug side and fixed side (the table above shows each finding's "
        "deciding records). `tier`: `replay` (a replay ran), `census` (no replay: stand-ins for "
        "ops this GPU lacks, or a build that stopped before it, as a masked reload does), "
        "`none` (no census taken); `precondition`: `stock` for vLLM's reload as it is, else the "
        "fix applied on both sides so the reload gets past a refusal; `forces`: the "
        "platform-only path the row forces on this GPU, with the flags set; `harness reads`: "
        "the record's own storages read by the runner's code or held by a stand-in.",
        "",
        "| site | target | side | build | tier | precondition | forces | harness reads | grade "
        "| cluster |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = sorted(
        records,
        key=lambda r: (
            r["path"],
            r["line"],
            r["target"],
            bool(r.get("fixed")),
            bool(r.get("preconditions")),
            r.get("recipe") or "",
        ),
    )
    for r in order:
        site = f"`{r['path'].removeprefix('vllm/model_executor/')}:{r['line']}`"
        grade = r.get("grade") or r["verdict"]
        if r.get("failure") and grade != "masked":
            grade += f" ({r['failure']})"
        forced = r.get("forced")
        forces = "-"
        if forced:
            flags = ", ".join(forced.get("flags", []) + forced.get("env", []))
            forces = forced["platform"] + (f" ({flags})" if flags else "")
        cluster = r.get("cluster") or "-"
        if r.get("cluster") and r.get("shared_build"):
            cluster += ", shared build"
        lines.append(
            f"| {site} | `{r['target']}` | {_side(r)} | "
            f"{(r.get('recipe') or '-').removeprefix('family:')} | {_short(_tier(r), 1000)} | "
            f"{'+'.join(precondition_names(r)) or 'stock'} | {_short(forces, 400)} | "
            f"{_short('; '.join(r.get('harness_reads') or []), 600) or '-'} | {grade} | "
            f"{cluster} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m reload_lint.confirm.report", allow_abbrev=False)
    p.add_argument("findings")
    p.add_argument("evidence")
    p.add_argument("-o", "--output")
    a = p.parse_args(argv)
    text = render(
        json.loads(Path(a.findings).read_text(encoding="utf-8")),
        json.loads(Path(a.evidence).read_text(encoding="utf-8")),
    )
    if a.output:
        Path(a.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
