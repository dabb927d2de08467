"""Whose store is a linked storage: a finding's verdict comes from its own store only.

A target links every recorded path through its attribute, and the rows below it (the strides of
a rebuilt experts object under ``moe_kernel``). Two findings can therefore link one storage:

* another finding links it *closer*: ``layer.w13_weight`` names the parameter itself (depth 0
  below its target), ``self.moe_kernel`` reaches it three steps down through the experts object
  that aliases it. The storage is the closer finding's store; the rebuilt object only borrows
  it, and a fix of ``layer.w13_weight`` repairs both. It is *lent* to the farther finding.
* a store folded into a finding (its ``also``: one storage, one finding) is the finding's own
  store: its paths are linked with the finding's and measured from the nearer target.
* the object at the finding's target at capture is not the kind of object the flagged line
  stores: the line stores a lambda (its tensors sit in ``<closure:...>`` cells) but the
  captured ``self.act_perm`` is a ``functools.partial`` (its tensors sit in ``kw[...]``): another
  store of the same target replaced this line's object before the capture, so nothing the
  capture read came from this line.

``own_links`` returns the paths left to the finding and, for the others, why they are not its
own. It needs the census's ``linked`` map of every finding of the run and, for the first rule,
their ``targets`` (the pipeline sends both; ``verdicts.legacy_messages`` rebuilds them for
evidence written before schema 1.3).
"""

from __future__ import annotations

import re

from reload_lint.confirm.targets import parse_target

#: "`self.act_perm` holds a lambda that captures ..." (the callable-capture rule's message)
_KIND = re.compile(r"holds an? ([\w.]+) (?:that captures|bound to)")
#: the walk's step labels below a callable, by the kind of callable that has them (walk.py)
_STEP_KINDS = {
    "partial": ("kw[", "args["),
    "closure": ("<closure:", "<default:"),
}
_KIND_OF = {
    "partial": "partial",
    "functools.partial": "partial",
    "lambda": "closure",
    "closure": "closure",
    "function": "closure",
    "nested function": "closure",
}
_TOKEN = re.compile(r"<[^>]*>|[A-Za-z_]\w*\[[^\]]*\]|\[[^\]]*\]|[^.\[<]+")


def tokens(path: str) -> list[str]:
    """``layer.quant_method.kernel.act_perm.kw[perm]`` -> its step labels."""
    return _TOKEN.findall(path or "")


def depth(path: str, target: str) -> int:
    """Steps below the target's last attribute in a linked path (0: the path names the target
    itself); a large number when the path does not contain it."""
    _, attrs = parse_target(target or "")
    if not attrs:
        return 1 << 20
    toks = tokens(path)
    for i in range(len(toks) - 1, -1, -1):
        if toks[i] == attrs[-1]:
            return len(toks) - i - 1
    return 1 << 20


def reach_depth(path: str, fingerprint: str, target: str, census: dict) -> int:
    """``depth`` below the closest of the finding's own target and the targets of the stores
    folded into it (the census's ``also``: they are the finding's own stores)."""
    folded = (census.get("also") or {}).get(fingerprint) or {}
    return min(depth(path, t) for t in (target, *folded.get("targets", ())))


def stored_kind(message: str) -> str | None:
    """``closure`` or ``partial`` when the finding stores a callable that captures tensors."""
    m = _KIND.search(message or "")
    return _KIND_OF.get(m.group(1)) if m else None


def _step_kind(label: str) -> str | None:
    for kind, prefixes in _STEP_KINDS.items():
        if label.startswith(prefixes):
            return kind
    return None


def own_links(
    fingerprint: str, target: str, message: str, census: dict
) -> tuple[list[str], dict[str, str]]:
    """(own linked paths, {lent path: why}) for one finding of a run (module docstring)."""
    linked = list(census.get("linked", {}).get(fingerprint, []))
    if not linked:
        return [], {}
    storage = {r["path"]: r.get("storage") for r in census.get("rows", [])}
    targets = census.get("targets") or {}
    kind = stored_kind(message)
    _, attrs = parse_target(target or "")
    own: list[str] = []
    lent: dict[str, str] = {}
    for p in linked:
        if kind is not None and attrs:
            toks = tokens(p)
            below = None
            for i in range(len(toks) - 1, -1, -1):
                if toks[i] == attrs[-1]:
                    below = toks[i + 1] if i + 1 < len(toks) else None
                    break
            got = _step_kind(below or "")
            if got is not None and got != kind:
                lent[p] = (
                    f"the captured {target} is a {got}, not the {kind} this line stores: "
                    "another store of the target replaced it before the capture"
                )
                continue
        mine = reach_depth(p, fingerprint, target, census)
        key = storage.get(p)
        closer = None
        if key is not None:
            for fp, paths in census.get("linked", {}).items():
                if fp == fingerprint or fp not in targets:
                    continue
                for q in paths:
                    if storage.get(q) == key and reach_depth(q, fp, targets[fp], census) < mine:
                        closer = (fp, q)
                        break
                if closer:
                    break
        if closer is not None:
            lent[p] = f"{closer[1]} is the store of {targets[closer[0]]} ({closer[0][:10]})"
            continue
        own.append(p)
    return own, lent
