"""`reload-lint explain PATH:LINE`: what the engine decided for every store on a line.

Input: PATH:LINE queries and the engine's explain log of a run. Output: one answer per
store on each line, as text or JSON.

For each store the line holds (an attribute assignment, `setattr`, `register_buffer` /
`register_parameter`, an item store on an attribute), the answer is one of:

- reported: the finding (rule, confidence, gate, reader, guard, masked, backends, fix,
  fingerprint), or accepted (`allowlisted (...)` / inline) with its reason;
- decided safe, with the fact that decided it: registered, view, zero-element, idempotent,
  allocates-nothing, same-shape, guarded (run-once), unread, platform-only, alias, scope, ...;
- a step of another finding's trace (an allocation in a constructor is reported where the
  object is rebuilt);
- not reached: no post-load root, constructor of a rebuilt object, first-forward lazy init or
  apply path runs the function.

It runs the same analysis as `check` (no whole-run cache: the decisions are not kept there),
with the analysis noting its judgements on the asked-for lines (analysis/explainlog.py).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.analysis.explainlog import fact_of
from reload_lint.errors import ReloadLintError

STORE_CALLS = {"setattr", "register_buffer", "register_parameter", "replace_parameter"}


@dataclass
class Query:
    spec: str
    rel: str  # base-relative posix path
    line: int
    stmt_lines: tuple[int, ...] = ()  # first lines of the statements covering `line`
    stores: list[str] = field(default_factory=list)  # what the line stores, as written


def parse_spec(spec: str) -> tuple[str, int]:
    m = re.fullmatch(r"(.+?):(\d+)(?::\d+)?", spec.strip())
    if not m:
        raise ReloadLintError(f"{spec}: expected PATH:LINE (e.g. vllm/x.py:120)")
    return m.group(1), int(m.group(2))


def resolve_query(spec: str, base: Path, package: str | None) -> Query:
    raw, line = parse_spec(spec)
    p = Path(raw)
    cands = []
    if p.is_absolute():
        try:
            cands.append(p.resolve().relative_to(base.resolve()).as_posix())
        except ValueError:
            raise ReloadLintError(f"{spec}: {raw} is not under {base}") from None
    else:
        cands.append(p.as_posix())  # Path drops a leading "./" itself
        if package:
            cands.append(f"{package}/{p.as_posix()}")
    for rel in cands:
        f = base / rel
        if f.is_file():
            break
    else:
        raise ReloadLintError(f"{spec}: no such file under {base}")
    try:
        text = f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReloadLintError(f"{spec}: cannot read {rel}: {exc}") from None
    n = text.count("\n") + (0 if text.endswith("\n") else 1)
    if not 1 <= line <= max(n, 1):
        raise ReloadLintError(f"{spec}: {rel} has {n} lines")
    q = Query(spec, rel, line)
    try:
        tree = ast.parse(text, filename=rel)
    except (SyntaxError, ValueError) as exc:
        raise ReloadLintError(f"{spec}: {rel} does not parse: {exc}") from None
    starts, stores = set(), []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or isinstance(
            node,
            (
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.ClassDef,
                ast.If,
                ast.For,
                ast.While,
                ast.With,
                ast.Try,
            ),
        ):
            continue
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        if node.lineno <= line <= end:
            starts.add(node.lineno)
            stores += _stores_of(node)
    q.stmt_lines = tuple(sorted(starts | {line}))
    q.stores = list(dict.fromkeys(stores))
    return q


def _stores_of(node: ast.stmt) -> list[str]:
    out = []
    targets: list = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    while targets:
        t = targets.pop(0)
        if isinstance(t, (ast.Tuple, ast.List)):
            targets[:0] = list(t.elts)
        elif isinstance(t, ast.Starred):
            targets.insert(0, t.value)
        elif isinstance(t, (ast.Attribute, ast.Subscript)):
            out.append(ast.unparse(t))
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            name = (
                sub.func.attr
                if isinstance(sub.func, ast.Attribute)
                else getattr(sub.func, "id", "")
            )
            if name in STORE_CALLS:
                out.append(ast.unparse(sub)[:120])
    return out


def explain_queries(queries: list[Query], result, gate_findings) -> list[dict]:
    """One answer per query, from an explaining run's result and the gated findings."""
    data = result.explain or {}
    judged = data.get("judged", [])
    created = data.get("created", {})
    dropped = data.get("dropped", {})
    by_key = {(f.path, f.line, f.rule, f.target): f for f in gate_findings}
    answers = []
    for q in queries:
        lines = set(q.stmt_lines)
        decisions: list[dict] = []
        seen_targets: set[str] = set()
        # reported (or accepted) findings located on the line, and stores folded into a
        # finding elsewhere (one storage, one finding: its `also`)
        for f in gate_findings:
            if f.path == q.rel and f.line in lines:
                decisions.append(_reported(f))
                seen_targets.add(f.target)
            for a in getattr(f, "also", None) or ():
                if a.get("path") == q.rel and a.get("line") in lines:
                    d = _reported(f)
                    d.update(
                        target=a.get("target", ""),
                        rule=a.get("rule", f.rule),
                        fingerprint=a.get("fingerprint", ""),
                        folded_into=f"{f.path}:{f.line} {f.rule} {f.target} [{f.fingerprint}]",
                    )
                    decisions.append(d)
                    seen_targets.add(d["target"])
        # findings the analysis made for a store here: reported elsewhere (a store in a shared
        # helper is reported at the call), or removed by a later pass, with its reason
        for key, (made, origin) in sorted(created.items(), key=lambda kv: repr(kv[0])):
            at_line = key[0] == q.rel and key[1] in lines
            from_line = origin[0] == q.rel and origin[1] in lines
            if not (at_line or from_line):
                continue
            fd = by_key.get(key)
            if fd is not None:
                if not at_line:
                    decisions.append(_reported(fd, moved=True))
                    seen_targets.add(made.target)
                continue
            why = dropped.get(key)
            if (
                why is None
                and "<" in key[3]
                and any(k[:3] == key[:3] and "<" not in k[3] for k in by_key)
            ):
                why = "reported under the resolved attribute name instead"
            decisions.append(
                {
                    "target": made.target,
                    "status": "decided-safe",
                    "fact": fact_of(why) if why else "removed",
                    "rule": made.rule,
                    "why": why or "removed by a later pass of the analysis",
                }
            )
            seen_targets.add(made.target)
        # values judged with no rule (no finding was ever made for them)
        safe: dict[tuple, dict] = {}
        for row in judged:
            if row["path"] != q.rel or row["line"] not in lines:
                continue
            if row["target"] in seen_targets:
                continue
            if row["rule"]:
                # judged an escape, but out of scope before any finding was made (a CPU
                # backend, a branch the package's platform never takes: analysis/pathfacts.py)
                why = dropped.get((row["path"], row["line"], row["rule"], row["target"]))
                if why:
                    decisions.append(
                        {
                            "target": row["target"],
                            "status": "decided-safe",
                            "fact": fact_of(why),
                            "rule": row["rule"],
                            "why": why,
                        }
                    )
                    seen_targets.add(row["target"])
                continue
            fact, why = row["safe"] or ("decided", "no rule applies")
            safe.setdefault(
                (row["target"], fact),
                {
                    "target": row["target"],
                    "status": "decided-safe",
                    "fact": fact,
                    "why": why,
                    "mode": row["mode"],
                    "root": row["root"],
                },
            )
        decisions += list(safe.values())
        # trace steps of findings located elsewhere
        steps = []
        for f in gate_findings:
            if f.path == q.rel and f.line in lines:
                continue
            for s in f.trace:
                if s.path == q.rel and s.line in lines:
                    steps.append(
                        {
                            "finding": f"{f.path}:{f.line} {f.rule} {f.target}",
                            "fingerprint": f.fingerprint,
                            "note": s.note,
                        }
                    )
                    break
        reached = any(row["path"] == q.rel and row["line"] in lines for row in judged)
        if not decisions and not steps:
            if not q.stores:
                note = "no store on this line (nothing is assigned to an attribute or registered)"
            elif reached:
                note = "reached, but no stored value is a tensor the analysis tracks"
            else:
                note = (
                    "not reached: no post-load root, constructor of an object built after "
                    "loading, first-forward lazy init or apply path runs this statement"
                )
        else:
            note = ""
        answers.append(
            {
                "query": q.spec,
                "path": q.rel,
                "line": q.line,
                "statement_lines": list(q.stmt_lines),
                "stores": q.stores,
                "decisions": decisions,
                "in_traces": steps,
                "note": note,
            }
        )
    return answers


def _reported(f, moved: bool = False) -> dict:
    from reload_lint.findings import fails_gate

    status = "reported"
    if f.suppressed is not None:
        status = "accepted"
    d = {
        "target": f.target,
        "status": status,
        "rule": f.rule,
        "confidence": f.confidence,
        "fingerprint": f.fingerprint,
        "gate": "fails" if fails_gate(f, False) else "warning",
        "message": f.message,
        "reader": f.reader,
        "guard": f.guard,
        "masked": f.masked,
        "backends": list(f.backends),
        "fix": f.fix if isinstance(f.fix, str) else getattr(f.fix, "description", str(f.fix)),
    }
    if f.suppressed is not None:
        d["fact"] = "allowlisted" if f.suppressed.startswith("allowlisted") else "suppressed"
        d["why"] = f.suppressed
    if moved:
        d["at"] = f"{f.path}:{f.line}"
    return d


def render_text(answers: list[dict]) -> str:
    out = []
    for a in answers:
        head = f"{a['path']}:{a['line']}"
        if a["statement_lines"] and a["statement_lines"] != [a["line"]]:
            head += f" (statement at line {a['statement_lines'][0]})"
        out.append(head)
        for s in a["stores"]:
            out.append(f"  store: {s}")
        for d in a["decisions"]:
            if d["status"] in ("reported", "accepted"):
                at = f" at {d['at']}" if d.get("at") else ""
                if d.get("folded_into"):
                    at += f", folded into {d['folded_into']} (one storage, one finding)"
                out.append(
                    f"  {d['target']}: {d['status'].upper()} {d['rule']}{at} "
                    f"[{d['confidence']}, gate: {d['gate']}] {d['fingerprint']}"
                )
                out.append(f"    {d['message']}")
                for k in ("reader", "guard", "masked"):
                    if d.get(k):
                        out.append(f"    {k}: {d[k]}")
                if d.get("backends"):
                    out.append(f"    backends: {', '.join(d['backends'])}")
                if d.get("why"):
                    out.append(f"    {d['fact']}: {d['why']}")
            else:
                rule = f" (would be {d['rule']})" if d.get("rule") else ""
                out.append(f"  {d['target']}: not reported, {d['fact']}{rule}: {d['why']}")
        for s in a["in_traces"]:
            out.append(f"  in the trace of {s['finding']} [{s['fingerprint']}]: {s['note']}")
        if a["note"]:
            out.append(f"  {a['note']}")
    return "\n".join(out) + "\n"
