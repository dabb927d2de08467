"""Flags of `self` known on a path: which of a method's own branches built what it reads.

A quant method may fix its backend itself on a branch of its constructor instead of asking the
oracle (`if self.is_special: self.experts_cls = backend_to_kernel_cls(B.SPECIAL)[0] else:
self.backend, self.experts_cls = select_backend(...)`) and test the same flag again on the
post-load path (`if self.is_special: self._setup_special(layer); return`). On the path through
that test the flag holds, so what the method reads of `self` there was stored by the branches
the flag takes: the else branch's oracle choices are not built on that path.

The facts come from the flag tests the index records (`flagon` around a block that runs when a
flag has a truth value, `flagexit` after an `if <flag>: ...; return`):

- `call_truths`: the flags of `self` a call made on `self` (`self._setup(layer)`) runs under:
  those the caller already ran under, plus the tests whose body (or else branch, or the code
  after an exiting test) holds the call. Only flags no method but `__init__` stores are
  facts (a flag another method sets may change between the stores and the test).
- `Oracles.attr_choices_when` (analysis/oracles.py) reads the stores of a class-valued
  attribute with these truths: a store on a branch the truths rule out is not a choice, and
  enum members stored on the attribute the choice is computed from are read the same way.

The truths are part of a call's memo key (analysis/calls.py), so a helper read under one set of
flags never answers for another. Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

_PLACED = ("assign", "aug", "expr")  # statements that carry their block path last


class FlagTruthMixin:
    """Flags of `self` on the current path; uses Analyzer state."""

    def call_truths(self, fr, selfv, line: int) -> tuple:
        """((attr, value), ...) of `self` the callee runs under; () unless the callee is a
        method called on the caller's own `self`."""
        f = fr.func
        if selfv is None or not f or not f.get("params") or not fr.cls_key:
            return ()
        mine = fr.env.get(f["params"][0])
        if mine is None or tuple(v.key() for v in mine) != tuple(v.key() for v in selfv):
            return ()
        known = dict(fr.truths)
        for attr, value in flags_at(f, line, f["params"][0]):
            if attr not in known and self._init_only_flag(fr.cls_key, attr):
                known[attr] = value
        return tuple(sorted(known.items()))

    def choices_on_path(self, fr, b, attr: str) -> tuple | None:
        """The classes `b.<attr>` can hold here: the oracle reader's choices, narrowed by the
        flags known on this path when `b` is the frame's `self` (noted for explain)."""
        truths = ()
        f = fr.func
        if fr.truths and f and f.get("params"):
            mine = fr.env.get(f["params"][0]) or ()
            if any(v.key() == b.key() for v in mine):
                truths = fr.truths
        got = self.oracles.attr_choices_when(b.cls, attr, truths)
        if truths and got != self.oracles.attr_choices(b.cls, attr):
            held = ", ".join(f"self.{a} is {v}" for a, v in truths)
            names = ", ".join(sorted(k.split(":")[-1] for k, _p, _l in got or ()))
            self.note_model(
                fr,
                f"`{b.src}.{attr}` read where {held}: only the stores on that branch "
                f"are built here ({names or 'none'}), not the oracle's other choices",
            )
        return got

    def _init_only_flag(self, cls_key: str, attr: str) -> bool:
        memo = self.__dict__.setdefault("_init_only_flags", {})
        key = (cls_key, attr)
        if key not in memo:
            memo[key] = _stored_only_in_init(self.index, cls_key, attr)
        return memo[key]


def _stored_only_in_init(index, cls_key: str, attr: str) -> bool:
    for k in [cls_key, *index.subclasses(cls_key)]:
        for mod, name, mqn in index.mro_methods(k):
            f = index.function(mod, mqn)
            if f is None or not f["params"] or name == "__init__":
                continue
            me = ("n", f["params"][0])
            for st in f["body"]:
                targets = st[4] if st[0] == "assign" else (st[4],) if st[0] == "aug" else ()
                if any(_names_attr(t, me, attr) for t in targets):
                    return False
    return True


def _names_attr(t, me, attr: str) -> bool:
    if t == ("a", me, attr):
        return True
    return t[0] == "t" and any(_names_attr(s, me, attr) for s in t[2] if s[0] != "star")


def flags_at(f: dict, line: int, me: str) -> list[tuple[str, bool]]:
    """(attr, value) of the flags of `me` that hold where the statement at `line` of `f` runs,
    read from the flag tests around it."""
    body = f["body"]
    path = _block_at(body, line)
    if path is None:
        return []
    out: list[tuple[str, bool]] = []
    for st in body:
        k = st[0]
        if k == "flagon":
            _, ln, _c, end, base, attr, sense, blk = st
            if not ln <= line < end:
                continue
            inside = path[: len(blk)] == tuple(blk)
            out += _test_facts(me, base, attr, sense, holds=inside)
        elif k == "flagexit":
            _, ln, _c, end, base, attr, sense, here = st
            here = tuple(here)
            if path[: len(here)] != here:
                continue
            if line >= end:
                out += _test_facts(me, base, attr, sense, holds=False)
            elif ln <= line and len(path) > len(here):
                first = _first_child(body, ln, end, here)
                if first is not None and path[len(here)] == first:
                    out += _test_facts(me, base, attr, sense, holds=True)
    return out


def _test_facts(me: str, base: str, attr: str, sense, holds: bool) -> list[tuple[str, bool]]:
    """What a flag test's outcome says about the flags of `me`: `holds` is whether the test
    took its `sense` branch."""
    if attr == "<or>":
        # `if a or b:` taken says one of them; not taken says each is off
        if holds or not isinstance(sense, tuple):
            return []
        return [(a, not s) for b, a, s in sense if b == me and not a.startswith("<")]
    if base != me or attr.startswith("<") or attr.endswith(")"):
        return []
    return [(attr, bool(sense) if holds else not sense)]


def _block_at(body, line: int):
    for st in body:
        if st[0] in _PLACED and st[1] <= line <= st[3]:
            return tuple(st[-1])
    return None


def _first_child(body, ln: int, end: int, here: tuple):
    ids = [
        st[-1][len(here)]
        for st in body
        if st[0] in _PLACED
        and ln <= st[1] < end
        and len(st[-1]) > len(here)
        and tuple(st[-1][: len(here)]) == here
    ]
    return min(ids) if ids else None
