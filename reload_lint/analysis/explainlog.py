"""What the analysis decided about each store on the lines `reload-lint explain` asks about.

Off by default (`explaining` is None) and then free: every hook returns at its first test.
When a run explains, the analysis notes, for a store on an asked-for line, each value it judged
there and the verdict (a rule, or none), and keeps the finding records it created there, so
that `reload_lint.cli.explain` can say for every store whether it is reported and, if not, which
fact decided it (registered, view, zero-element, guarded, unread, platform-only, ...).
"""

from __future__ import annotations

from reload_lint.analysis import values as V
from reload_lint.analysis.contracts import idempotent_cast
from reload_lint.analysis.externals import VIEW_FACT
from reload_lint.analysis.shapes import shape_ops


class Everything:
    """`explaining` for a whole-tree run (`worklist --include-decided`): every line, but only
    the judgements that kept new storage unreported are noted."""

    def __contains__(self, _item) -> bool:
        return True


EVERYTHING = Everything()
_NEW_STORAGE = (V.FRESH, V.PARAM, V.OBJ, V.MODULE)


class ExplainMixin:
    explaining: set[tuple[str, int]] | None = None

    def _explain_init(self) -> None:
        self.explained: list[dict] = []  # one row per judged value on an asked-for line
        self.explain_created: dict[tuple, object] = {}  # finding key -> first Finding made

    def note_judged(self, fr, line: int, target: str, v, verdict, how: str, owner=None) -> None:
        if self.explaining is None or (fr.path, line) not in self.explaining:
            return
        if self.explaining is EVERYTHING and (
            verdict or getattr(v, "kind", None) not in _NEW_STORAGE
        ):
            return
        root = fr.chain[0] if fr.chain else None
        inplace = self.contract_for(fr.path).name == "inplace-only"
        safe = safe_reason(v, owner, target, inplace) if not verdict else None
        if safe and getattr(v, "value", None) == "rebuilt":
            # the engine facts that kept the rebuilt object's constructor chain allocation-free
            # on this root's path (analysis/identity.py, analysis/oracles.py)
            notes = list(dict.fromkeys(ev[1] for ev in fr.root.events if ev[0] == "modelnote"))
            if notes:
                safe = (safe[0], f"{safe[1]}; " + "; ".join(notes))
        if safe and safe[0] == "view":
            # an external callee the tree asserts returns a view (analysis/externals.py)
            notes = [s.note for s in getattr(v, "trace", ()) if VIEW_FACT in s.note]
            if notes:
                safe = (safe[0], f"{safe[1]}; " + "; ".join(dict.fromkeys(notes)))
        self.explained.append(
            {
                "path": fr.path,
                "line": line,
                "target": target,
                "mode": fr.mode,
                "owner": owner,
                "how": how,
                "kind": getattr(v, "kind", str(v)),
                "value": getattr(v, "value", None),
                "src": getattr(v, "src", None),
                "backends": list(getattr(v, "backends", ()) or ()),
                "chosen": bool(getattr(v, "chosen", False)),
                "rule": verdict[0] if isinstance(verdict, tuple) else (verdict or None),
                "why": verdict[1] if isinstance(verdict, tuple) else None,
                "safe": safe,
                "root": f"{root.path}:{root.line} {root.note}" if root else "",
                "function": fr.func.get("qn", "") if fr.func else "",
            }
        )

    def note_created(self, key: tuple, finding, origin: tuple[str, int]) -> None:
        """A finding record made at `key` for the store at `origin` (a store in a shared
        helper is reported at its call: the two differ)."""
        if self.explaining is None:
            return
        if (key[0], key[1]) in self.explaining or origin in self.explaining:
            self.explain_created.setdefault(key, (finding, origin))


def safe_reason(v, owner: str | None, target: str = "", inplace: bool = False) -> tuple[str, str]:
    """(fact, why) for a judged value that is no escape, from what the analysis knows of it
    (the contract's store judgement returned no rule for it). `inplace`: judged under
    `inplace-only`, where nothing is copied back, so no reason may rest on copy-back."""
    kind = getattr(v, "kind", None)
    value = getattr(v, "value", None)
    if value == "empty":
        return ("zero-element", "a zero-element tensor: no storage to move or free")
    if idempotent_cast(v, target.rsplit(".", 1)[-1] or None):
        return ("idempotent", "an idempotent cast of a registered tensor: the same tensor")
    if inplace and kind == V.PARAM and value != "alias":
        return (
            "registered",
            "a Parameter of a value not traced to new storage (in place only, a Parameter "
            "is reported when what it wraps is new)",
        )
    if inplace and kind in (V.REG, V.VIEW):
        return ("view" if kind == V.VIEW else "registered", "existing storage: nothing moves")
    if kind == V.PARAM:
        if value == "alias":
            return ("view", "a Parameter wrapping existing storage: no new storage")
        return ("registered", "a Parameter registered on the module: copy-back refreshes it")
    if kind == V.REG:
        return ("registered", "a registered tensor (Parameter or buffer): copy-back keeps it")
    if kind == V.VIEW:
        return ("view", "a view of registered storage, which copy-back refreshes in place")
    if kind in (V.OBJ, V.MODULE) and value == "rebuilt":
        if getattr(v, "chosen", False) and not getattr(v, "backends", ()):
            return (
                "allocates-nothing",
                "a rebuilt object whose backends, as the oracle picks them, allocate no "
                "device tensor",
            )
        return ("allocates-nothing", "a rebuilt object that allocates no tensor")
    if kind == V.FRESH and owner == "module":
        return ("registered", "assigned to a registered buffer name: copy-back refreshes it")
    if kind == V.FRESH and owner == "data":
        if shape_ops(v):
            return (
                "same-shape",
                "a shape-changing op undone (shape arithmetic): the value has the parameter's "
                "shape, copy-back copies it into the registered storage",
            )
        return ("registered", "a same-shape `.data =`: copy-back restores the registered storage")
    if kind in (V.CONTAINER, V.CALLABLE):
        return ("no-tensor", "holds no tensor created after loading and binds no registered one")
    if kind == V.FRESH:
        return ("not-kept", "new storage, but not kept where a captured forward reads it")
    return ("no-tensor", f"not new device storage (the value is {kind or 'unknown'})")


_FACTS = (
    ("run-once", "guarded"),
    ("reused storage", "reused"),
    ("copy-or-rebind", "guarded"),
    ("no apply-time read", "unread"),
    ("never read", "unread"),
    ("alias", "alias"),
    ("no cuda graphs", "platform-only"),
    ("cpu", "platform-only"),
    ("platform", "platform-only"),
    ("rocm", "platform-only"),
    ("never re-runs", "no-update"),
    ("configured", "scope"),
)


def fact_of(why: str) -> str:
    low = why.lower()
    for needle, fact in _FACTS:
        if needle in low:
            return fact
    return "decided"
