"""Tensors a post-load consumes by building a rebuilt object (issue 17, one storage, one
finding).

A post-load often keeps a new tensor under a name and, a few statements later, builds an
object from it:

    w, self.row_strides = encode(layer.w)
    self.kernel = make_kernel(row_strides=self.row_strides)     # RL105
    layer.in_scale = 1.0 / layer.in_gscale
    self.cfg = self.quant_config_for(layer)                     # reads layer.in_scale; RL105

When the kept tensor has no apply-time reader of its own, whatever of its storage a captured
forward reads, it reads through the object (the object keeps it, or a value derived from it),
and the object's finding reports that storage. The analysis records, per root and in order:

- ("stored", finding key, attribute): a tensor store reported on that attribute;
- ("read", attribute): an attribute read on a module or object while interpreting post-load;
- ("feeds", attribute, finding key): an attribute read while evaluating the right-hand side
  of an assignment that reported a rebuilt object (RL105) with that key.

All three are root events, so a memoised callee replays them (calls.py). At the end of the
root, a store followed by a `feeds` of its attribute is consumed by that object. The reader
search (readers.py) adds the step "read again later in this post-load to build `T`" to a
finding with no apply-time reader, and reload_lint/fold.py folds it into T's finding.

The reads of an assignment to a local name are remembered with the name (per activation), and
a later right-hand side that reads the name inherits them: `k = make(row_strides=self.rs)`
then `self.k = k` links `rs` to `self.k` as the one-statement form does. Names are looked up
in the expression as written, so a name read inside a nested lambda or comprehension counts
too (it can only make the object's inputs larger, never drop one).
"""

from __future__ import annotations

from reload_lint.analysis import values as V
from reload_lint.analysis.frame import bound_names
from reload_lint.findings import TraceStep

# the tensor stores whose attribute may be consumed by a rebuilt object built later
_STORED_RULES = frozenset({"RL101", "RL102", "RL103", "RL104"})
FEEDS_NOTE = "read again later in this post-load to build"


class FeedsMixin:
    _feeds: dict  # finding key -> keys of rebuilt-object findings built from it

    def note_attr_read(self, fr, base: tuple, attr: str) -> None:
        if fr.mode == "post" and any(b.kind in (V.MODULE, V.OBJ) for b in base):
            fr.root.events.append(("read", attr))

    def note_feeds_report(self, fr, key: tuple, rule: str, target: str) -> None:
        """A reported store: a tensor kept on an attribute, or a rebuilt object."""
        if fr.mode != "post":
            return
        if rule == "RL105":
            fr.root.events.append(("built", key))
        elif rule in _STORED_RULES:
            head = target.split("[", 1)[0]
            if "." in head:
                fr.root.events.append(("stored", key, head.rsplit(".", 1)[-1]))

    def note_feeds_assign(self, fr, start: int, mid: int, st=None) -> None:
        """After an assignment: the attributes read while its right-hand side was evaluated
        (events[start:mid]), and those remembered with the local names it reads, feed the
        rebuilt objects its store reported (events[mid:]); a local name it binds remembers
        them."""
        if fr.mode != "post":
            return
        events = fr.root.events
        reads = dict.fromkeys(ev[1] for ev in events[start:mid] if ev[0] == "read")
        if st is not None:
            held = fr.local_reads
            if held:
                for name in _local_names(st[5]):
                    reads.update(dict.fromkeys(held.get(name, ())))
            for name in bound_names(*st[4]):
                if reads:
                    held[name] = tuple(reads)
                else:
                    held.pop(name, None)
        built = [ev[1] for ev in events[mid:] if ev[0] == "built"]
        if not built:
            return
        for key in built:
            for attr in reads:
                events.append(("feeds", attr, key))

    def finish_feeds(self, state) -> None:
        stored: dict[str, list] = {}
        for ev in state.events:
            if ev[0] == "stored":
                stored.setdefault(ev[2], []).append(ev[1])
            elif ev[0] == "feeds":
                for fkey in stored.get(ev[1], ()):
                    if fkey != ev[2]:
                        self._feeds.setdefault(fkey, set()).add(ev[2])

    def feeds_steps(self, key: tuple) -> list[TraceStep]:
        """For a finding with no apply-time reader: the rebuilt objects built from it."""
        out = []
        for hkey in sorted(self._feeds.get(key, ())):
            host = self.findings.get(hkey)
            if host is not None and host.rule == "RL105":
                out.append(TraceStep(host.path, host.line, f"{FEEDS_NOTE} `{host.target}`"))
        return out


def _local_names(e) -> set:
    """The names (`("n", name)`) an expression of the record's tuple language reads."""
    out: set = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if not isinstance(x, tuple) or not x:
            continue
        if x[0] == "n" and len(x) == 2 and isinstance(x[1], str):
            out.add(x[1])
            continue
        stack.extend(y for y in x[1:] if isinstance(y, tuple))
    return out
