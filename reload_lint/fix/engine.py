"""Compute every finding's remedy; validate the codemods by parsing and re-auditing the patched
tree; apply the accepted ones.

A codemod is kept only if the patched file parses and a re-audit of the patched tree reports
neither the finding it fixes (at its key: rule, path, symbol, target) nor anything new in
the file it edits. A refused codemod becomes a manual recipe, with the reason.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.findings import Finding, normalize_target
from reload_lint.fix import rebind, recipes
from reload_lint.fix.locate import FileModel
from reload_lint.fix.model import DISPLAY, SAFE, Edit, Remedy
from reload_lint.fix.plan import StmtEdit, plan_statement
from reload_lint.fix.rewrite import apply_edits, parse_error, unified
from reload_lint.fix.tree import TreeApi

MAX_ROUNDS = 5


def _key(f: Finding) -> tuple:
    return (f.rule, f.path, f.symbol, normalize_target(f.target))


@dataclass
class FixSet:
    remedies: dict[int, Remedy] = field(default_factory=dict)  # id(finding) -> remedy
    accepted: list[StmtEdit] = field(default_factory=list)
    models: dict[str, FileModel] = field(default_factory=dict)
    rounds: int = 0
    still: Counter | None = None  # finding keys the last re-audit reported
    hosts: dict = field(default_factory=dict)  # id(folded store) -> the finding it is in
    # id(rebuild-site store) -> the RL108 findings it serves: a post-load store that keeps a
    # new owner on every reload, not reported itself (its object allocates nothing when
    # built), whose keep_object edit keeps the owner of a first-forward allocation
    rebuilds: dict = field(default_factory=dict)
    # findings of the patched files the re-audit reports that the first run did not (one
    # storage reported once: fixing the reported store shows the next), (path, line, rule,
    # target) in the patched text
    revealed: list = field(default_factory=list)
    # path -> (BOM, CRLF): the codemods work on the text without its BOM and with `\n` line
    # ends; what is written and diffed gets both back, so no byte outside a fix changes
    encodings: dict[str, tuple[bool, bool]] = field(default_factory=dict)

    def restore(self, path: str, text: str) -> str:
        bom, crlf = self.encodings.get(path, (False, False))
        if crlf:
            text = text.replace("\n", "\r\n")
        return "\ufeff" + text if bom else text

    def remedy(self, f: Finding) -> Remedy | None:
        return self.remedies.get(id(f))

    def files(self, unsafe: bool) -> dict[str, tuple[str, str]]:
        """path -> (before, after) with every accepted edit of the chosen applicability."""
        by_path: dict[str, list[StmtEdit]] = defaultdict(list)
        for e in self.accepted:
            if unsafe or e.applicability == SAFE:
                by_path[e.findings[0].path].append(e)
        out = {}
        for path, (before, after) in patched(self.models, by_path).items():
            out[path] = (self.restore(path, before), self.restore(path, after))
        return out

    def diff(self, unsafe: bool) -> str:
        return "".join(
            unified(p, a, b, new_file=(a == "" and p not in self.models))
            for p, (a, b) in self.files(unsafe).items()
        )


HELPERS_MODULE = "_reload_lint_helpers"


def _package(path: str) -> str | None:
    """The top-level package folder of `path` ("vllm" for vllm/a/b.py), None for a module
    outside one."""
    parts = path.split("/")
    return parts[0] if len(parts) > 1 else None


def patched(models: dict, by_path: dict, spans: dict | None = None) -> dict[str, tuple[str, str]]:
    """path -> (before, after) of the files `by_path`'s edits change. A helper that edits in
    two or more files of one package need is written once, in `<package>/_reload_lint_helpers
    .py`, which those files import (a new file: before is "")."""
    need: dict[str, dict[str, str]] = defaultdict(dict)  # package -> helper name -> source
    users: dict[str, set[str]] = defaultdict(set)
    for path, edits in by_path.items():
        pkg = _package(path)
        bound = models[path].module_names()
        for e in edits:
            for name, src in e.helpers:
                if pkg and name not in bound:
                    need[pkg][name] = src
                    users[pkg].add(path)
    shared = {pkg for pkg, us in users.items() if len(us) > 1}
    out = {}
    for path, edits in sorted(by_path.items()):
        fm = models[path]
        pkg = _package(path)
        mod = f"{pkg}.{HELPERS_MODULE}" if pkg in shared else None
        sp: dict | None = {} if spans is not None else None
        out[path] = (fm.text, apply_edits(fm, edits, sp, shared=mod))
        if spans is not None:
            spans[path] = sp
    for pkg in sorted(shared):
        body = "\n\n".join(src.strip("\n") + "\n" for _, src in sorted(need[pkg].items()))
        out[f"{pkg}/{HELPERS_MODULE}.py"] = (
            "",
            '"""Helpers the reload-lint fixes of this package call (written once, imported by '
            'each fixed module)."""\n\nimport torch\n\n\n' + body,
        )
    return out


def compute(findings: list[Finding], read_text, api: TreeApi, reaudit=None) -> FixSet:
    """`read_text(path)` -> the file's text (None if unreadable); `reaudit(patched)` -> the
    findings of the tree with `patched` ({path: text}) written over it (None: no re-audit)."""
    fs = FixSet()
    groups: dict[tuple[str, int], list[Finding]] = defaultdict(list)
    sites = {}
    folded = _folded(fs, findings)
    at_sites = _site_stores(fs, findings)
    for f in [*findings, *folded, *at_sites]:
        fm = fs.models.get(f.path)
        if fm is None and f.path not in fs.models:
            text = read_text(f.path)
            if text is not None:
                text = _plain(fs, f.path, text)
            try:
                fm = FileModel(text) if text is not None else None
            except Exception:  # libcst cannot parse what ast could: leave it to a human
                fm = None
            fs.models[f.path] = fm
        if fm is None:
            fs.remedies[id(f)] = _manual(f, api, "the file could not be read or parsed by libcst")
            continue
        site = fm.site(f.line, f.target)
        if not isinstance(site, str):
            # a re-binding derived from itself is fixed with the store it re-binds
            site = rebind.head(fm, site, f.target.replace(" ", "")) or site
        if isinstance(site, str):
            fs.remedies[id(f)] = _manual(f, api, site)
            continue
        k = (f.path, site.first_line)
        if id(f) in fs.hosts and any(id(g) not in fs.hosts for g in groups.get(k, ())):
            continue  # a reported finding's statement: its own edit covers it
        if id(f) in fs.rebuilds and groups.get(k):
            # a statement some finding (reported, folded, or another RL108's site) already
            # edits: that edit keeps the object there (_rebuild_sites finds it by its lines)
            for g in groups[k]:
                if id(g) in fs.rebuilds:
                    fs.rebuilds[id(g)].extend(fs.rebuilds[id(f)])
            continue
        sites[k] = site
        groups[k].append(f)
    edits: list[StmtEdit] = []
    for k, flagged in groups.items():
        fm = fs.models[k[0]]
        rules = {f.rule for f in flagged}
        e = plan_statement(fm, sites[k], flagged, api) if len(rules) == 1 else "mixed rules"
        if e is None or isinstance(e, str):
            for f in flagged:
                fs.remedies[id(f)] = _manual(f, api, e or "no codemod for this store")
            continue
        why = _overlap(e, edits) or _offer(fs, e)
        if why:
            for f in flagged:
                fs.remedies[id(f)] = _refused(f, api, e, why)
            continue
        edits.append(e)
    fs.accepted = edits
    if reaudit is not None:
        _validate(fs, findings, api, reaudit)
    _rebuild_sites(fs, findings)
    _fold_remedies(fs, findings)
    return fs


def _plain(fs: FixSet, path: str, text: str) -> str:
    """The text the codemods edit: no BOM, `\n` line ends when every line ends in `\r\n`
    (a file mixing both is edited as it is)."""
    bom = text.startswith("\ufeff")
    if bom:
        text = text[1:]
    crlf = "\r\n" in text and text.count("\n") == text.count("\r\n")
    if crlf:
        text = text.replace("\r\n", "\n")
    fs.encodings[path] = (bom, crlf)
    return text


def _folded(fs: FixSet, findings: list[Finding]) -> list[Finding]:
    """The stores folded into a reported finding (`also`: one storage, one finding), as
    findings of their own: fixing the host alone would leave them to the next run."""
    out = []
    for f in findings:
        for a in f.also or []:
            try:
                g = Finding(
                    rule=a["rule"],
                    path=a["path"],
                    line=int(a["line"]),
                    column=1,
                    end_line=int(a["line"]),
                    symbol=f.symbol,
                    target=a["target"],
                    message="",
                    contract=f.contract,
                )
            except (KeyError, TypeError, ValueError):
                continue
            fs.hosts[id(g)] = f
            out.append(g)
    return out


def _site_stores(fs: FixSet, findings: list[Finding]) -> list[Finding]:
    """The rebuild sites of the RL108 findings (`rebuild_sites`: the post-load stores that keep
    a new owner on every reload), as RL105 stores of their own, so each gets the keep_object
    edit and is judged by the re-audit with the rest. A site that is a reported finding's (or
    a folded store's) statement is left to that finding's edit."""
    out = []
    seen: dict[tuple, Finding] = {}
    for f in findings:
        if f.rule != "RL108":
            continue
        for r in f.rebuild_sites or []:
            k = _site_key(r)
            if k is None:
                continue
            g = seen.get(k)
            if g is None:
                g = seen[k] = Finding(
                    rule="RL105",
                    path=k[0],
                    line=k[1],
                    column=1,
                    end_line=k[1],
                    symbol="",
                    target=r["target"],
                    message="",
                    contract=f.contract,
                )
                fs.rebuilds[id(g)] = []
                out.append(g)
            fs.rebuilds[id(g)].append(f)
    return out


def _fold_remedies(fs: FixSet, findings: list[Finding]) -> None:
    """A host's patch also carries the accepted edits of the stores folded into it; a folded
    store's edit without its host's is dropped (nothing reported would account for it)."""
    own: dict[int, StmtEdit] = {}
    for e in fs.accepted:
        for g in e.findings:
            own[id(g)] = e
    extra: dict[int, list[StmtEdit]] = defaultdict(list)
    keep = []
    for e in fs.accepted:
        hosts = {id(fs.hosts[id(g)]) for g in e.findings if id(g) in fs.hosts}
        if not hosts:
            keep.append(e)
            continue
        live = [h for h in hosts if h in own]
        if live:
            keep.append(e)
        for h in live:
            extra[h].append(e)
    fs.accepted = keep
    for f in findings:
        more = extra.get(id(f))
        if not more or id(f) not in own:
            continue
        edits = [own[id(f)], *more]
        by_path: dict[str, list[StmtEdit]] = defaultdict(list)
        for e in edits:
            if e not in by_path[e.findings[0].path]:
                by_path[e.findings[0].path].append(e)
        rem = fs.remedies[id(f)]
        rem.edits, rem.patch = [], ""
        for path, es in sorted(by_path.items()):
            fm = fs.models[path]
            after = apply_edits(fm, es)
            rem.edits.append(Edit(path, fm.text, after))
            rem.patch += unified(path, fm.text, after)
        if any(e.applicability != SAFE for e in more):
            rem.applicability = "unsafe"
        names = ", ".join(f"`{g.target}`" for e in more for g in e.findings)
        rem.description += f"; the same for what is folded into it: {names}"


def _overlap(e: StmtEdit, edits: list[StmtEdit]) -> str | None:
    """Why `e` cannot join `edits`: a statement edited around (`refresh`) that holds, or sits
    in, another edit's statement."""
    path = e.findings[0].path
    for o in edits:
        if o.findings[0].path != path:
            continue
        if e.first_line <= o.last_line and o.first_line <= e.last_line:
            return f"its statement overlaps the fix of `{o.findings[0].target}`"
    return None


def _offer(fs: FixSet, e: StmtEdit) -> str | None:
    """Compute the edit's own patch and make it its findings' remedy; why not, if it fails."""
    path = e.findings[0].path
    fm = fs.models[path]
    try:
        after = apply_edits(fm, [e])
    except Exception as exc:  # libcst refused the generated code: report, never crash
        return f"the generated code does not parse ({type(exc).__name__})"
    bad = parse_error(after)
    if bad:
        return bad
    patch = unified(path, fm.text, after)
    for f in e.findings:
        fs.remedies[id(f)] = Remedy(
            applicability=e.applicability,
            shape=e.shape,
            description=e.description,
            edits=[Edit(path, fm.text, after)],
            patch=patch,
        )
    return None


def _next_shape(fs: FixSet, e: StmtEdit, api: TreeApi) -> StmtEdit | None:
    """The store's next shape that parses, or None."""
    alt = e.alt
    while True:
        alt += 1
        nxt = plan_statement(fs.models[e.findings[0].path], e.site, e.findings, api, alt)
        if nxt is None or isinstance(nxt, str):
            return None
        if _offer(fs, nxt) is None:
            return nxt


def _validate(fs: FixSet, findings: list[Finding], api: TreeApi, reaudit) -> None:
    """Re-audit the tree with every codemod applied; refuse an edit whose statements (or the
    helper it adds) are still reported, and repeat without the refused ones."""
    before = Counter(_key(f) for f in findings)
    folded = {
        (a.get("rule"), a.get("path"), normalize_target(a.get("target") or ""))
        for f in findings
        for a in f.also or []
    }
    for _round in range(MAX_ROUNDS):
        fs.rounds += 1
        by_path: dict[str, list[StmtEdit]] = defaultdict(list)
        for e in fs.accepted:
            by_path[e.findings[0].path].append(e)
        if not by_path:
            return
        spans: dict = {}
        refuse: dict[int, str] = {}
        texts = {p: after for p, (_, after) in patched(fs.models, by_path, spans).items()}
        for path, edits in by_path.items():
            why = parse_error(texts[path])
            if why:
                for e in edits:
                    refuse[id(e)] = f"combined with the other fixes of the file: {why}"
        if not refuse:
            try:
                after = reaudit(texts)
            except Exception as exc:  # an unreadable tree, a full disk: offer no patch
                why = f"the patched copy could not be re-audited ({_why(exc)})"
                for e in fs.accepted:
                    for f in e.findings:
                        fs.remedies[id(f)] = _refused(f, api, e, why)
                fs.accepted = []
                return
            for g in after:
                sp = spans.get(g.path)
                if sp is None:
                    continue
                for e in by_path[g.path]:
                    first, last = sp[id(e)]
                    in_helper = (
                        e.helpers
                        and "helpers" in sp
                        and (sp["helpers"][0] <= g.line <= sp["helpers"][1])
                    )
                    if first <= g.line <= last or in_helper:
                        refuse.setdefault(
                            id(e),
                            f"a re-audit of the patched tree still reports {g.rule} "
                            f"`{g.target}` at the patched statement",
                        )
            if not refuse:
                # a fix that makes a finding the first run did not report (itself or folded
                # into another) is dropped, and the rest are judged again without it
                for g in after:
                    if before[_key(g)] or (g.rule, g.path, normalize_target(g.target)) in folded:
                        continue
                    e = _culprit(g, by_path, spans)
                    if e is not None:
                        refuse.setdefault(
                            id(e),
                            f"a re-audit of the patched tree reports a new {g.rule} "
                            f"`{g.target}` ({g.path}:{g.line})",
                        )
            if not refuse:
                # a rebuild-site edit (a store nobody reported) is there only to stop an RL108:
                # dropped when the re-audit reports every RL108 it serves all the same
                still = Counter(_key(g) for g in after)
                for e in fs.accepted:
                    served = [o for g in e.findings for o in fs.rebuilds.get(id(g), ())]
                    if served and all(still[_key(o)] for o in served):
                        o = served[0]
                        refuse[id(e)] = (
                            f"keeping the object here does not stop the re-audit reporting "
                            f"{o.rule} `{o.target}` ({o.path}:{o.line})"
                        )
            if not refuse:
                fs.still = Counter(_key(g) for g in after)
                fs.revealed = sorted(
                    {(g.path, g.line, g.rule, g.target) for g in after if g.path in texts}
                    - {(g.path, g.line, g.rule, g.target) for g in after if before[_key(g)]}
                )
                return
        keep = []
        for e in fs.accepted:
            why = refuse.get(id(e))
            if why is None:
                keep.append(e)
                continue
            last = _round == MAX_ROUNDS - 1  # nothing would judge another shape
            nxt = _next_shape(fs, e, api) if "still reports" in why and not last else None
            if nxt is not None:
                keep.append(nxt)  # judged by the next round's re-audit
                continue
            for f in e.findings:
                fs.remedies[id(f)] = _refused(f, api, e, why)
        fs.accepted = keep


def _culprit(g: Finding, by_path: dict, spans: dict) -> StmtEdit | None:
    """The accepted edit a new finding is blamed on: the nearest edit of its file, else an
    edit of another file storing the same attribute."""
    edits = by_path.get(g.path)
    if edits:
        sp = spans[g.path]

        def dist(e):
            first, last = sp[id(e)]
            return 0 if first <= g.line <= last else min(abs(g.line - first), abs(g.line - last))

        return min(edits, key=dist)
    attr = normalize_target(g.target).rsplit(".", 1)[-1]
    for es in by_path.values():
        for e in es:
            if any(normalize_target(f.target).rsplit(".", 1)[-1] == attr for f in e.findings):
                return e
    return None


def _rebuild_sites(fs: FixSet, findings: list[Finding]) -> None:
    """RL108: the scratch an object allocates on its first forward is kept when the post-load
    that rebuilds the object keeps it (the keep_object edit of the RL105 store whose trace
    names the owner's class). Its remedy is the patch of those rebuild sites."""
    owners = {}
    for f in findings:
        if f.rule == "RL108":
            built = [
                s.note[: -len(" built here")] for s in f.trace if s.note.endswith(" built here")
            ]
            owners[id(f)] = built[-1].strip("`") if built else ""
        else:
            # a store whose own codemod the re-audit reports as RL108: it sits on an object
            # post-load rebuilds, so keeping it belongs where the object is rebuilt
            rem = fs.remedies.get(id(f))
            if rem is not None and "still reports RL108" in (rem.refused or "") and f.symbol:
                owners[id(f)] = f.symbol.split(".")[0]
    for f in findings:
        cls = owners.get(id(f))
        if not cls and not (f.rule == "RL108" and f.rebuild_sites):
            continue
        sites = [
            e
            for e in fs.accepted
            if (
                cls
                and any(
                    g.rule == "RL105" and any(cls in s.note for s in g.trace) for g in e.findings
                )
            )
            or any(o is f for g in e.findings for o in fs.rebuilds.get(id(g), ()))
            or any(_edits_line(e, r) for r in f.rebuild_sites or [])
        ]
        if not sites:
            continue
        unreported = sum(1 for e in sites if any(id(g) in fs.rebuilds for g in e.findings))
        still = fs.still is not None and fs.still[_key(f)] > 0
        if f.rule != "RL108" and still:
            # the store's own codemod was refused, and with the object kept at its rebuild
            # sites the re-audit still reports it: the kept object's own post-load stores a
            # new tensor there again, so the rebuild sites alone do not fix it
            rem = fs.remedies.get(id(f))
            if rem is not None and rem.recipe:
                rem.recipe += (
                    f"; keeping the {cls} at its {len(sites)} rebuild site(s) leaves this "
                    "store reported (the kept object's own post-load stores a new tensor "
                    "here again)"
                )
            continue
        note = ""
        if still:
            note = (
                "; a re-audit still lists the store (the analysis does not model the kept object)"
            )
        by_path: dict[str, list[StmtEdit]] = defaultdict(list)
        for e in sites:
            by_path[e.findings[0].path].append(e)
        edit_list, patch = [], ""
        for path, es in sorted(by_path.items()):
            fm = fs.models[path]
            after = apply_edits(fm, es)
            edit_list.append(Edit(path, fm.text, after))
            patch += unified(path, fm.text, after)
        if unreported:
            note = f" ({unreported} of them not reported: their objects allocate nothing when built){note}"
        fs.remedies[id(f)] = Remedy(
            applicability="unsafe",
            shape="keep_object",
            description=(
                f"keep the {cls or 'object'} the post-load rebuilds (and the scratch it allocated on its "
                f"first forward) at its {len(sites)} rebuild site(s){note}"
            ),
            edits=edit_list,
            patch=patch,
        )


def _site_key(r: dict) -> tuple | None:
    """(path, line, normalised target) of a rebuild-site entry; None for a malformed one (a
    findings file read back from JSON)."""
    try:
        return (r["path"], int(r["line"]), normalize_target(r["target"]))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _edits_line(e: StmtEdit, r: dict) -> bool:
    """Whether edit `e` replaces the statement of rebuild site `r` ({path, line, target})."""
    k = _site_key(r)
    return k is not None and e.findings[0].path == k[0] and e.first_line <= k[1] <= e.last_line


def _why(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


def _manual(f: Finding, api: TreeApi, why: str) -> Remedy:
    return Remedy(DISPLAY, "manual", f.fix, recipe=recipes.recipe(f, api, why))


def _refused(f: Finding, api: TreeApi, e: StmtEdit, why: str) -> Remedy:
    return Remedy(
        e.applicability,
        e.shape,
        e.description,
        recipe=recipes.recipe(f, api, f"the {e.shape} codemod was refused: {why}"),
        refused=why,
    )


def remedies_for(findings, base: Path, roots, reaudit=None) -> FixSet:
    from reload_lint.fix.tree import scan

    api = scan(base, list(roots))

    def read_text(path: str):
        try:
            return (Path(base) / path).read_bytes().decode("utf-8")  # line ends as they are
        except (OSError, UnicodeDecodeError):
            return None

    return compute(findings, read_text, api, reaudit)
