"""Attribute stores across the branches of an if-chain (the frame's heap, `layer.w` -> value).

The lowering is flat: an `if` body, its `elif` bodies and its `else` body follow each other in
one statement list, and the function records each chain's branches as line regions
(`branches` in the function's record, index/lower_defs.py). Without this, a store in one
branch is what the next branch reads: `if online: layer.w = Parameter(new); return` followed
by `else: w = layer.w; layer.w = Parameter(w.t())` judged the `else` with the `if` branch's new
Parameter, not the loaded one.

Here each branch starts from the heap the chain was entered with, and after the chain the heap
is the join of the branches that fall through: a branch whose last statement returns or raises
adds nothing, a chain with no `else:` adds the entry heap (the test may fail). The join of one
attribute is the union of its values in the branches that hold it. Only the heap is joined;
local names keep their block-path rule (Frame.blocks).
"""

from __future__ import annotations

from reload_lint.analysis import values as V

# statements the lowering emits with the `if` header's line after the chain's bodies: they
# carry no position inside a branch
PSEUDO = frozenset(("condon", "condoff", "flagon", "flagoff", "flagexit", "narrow", "unnarrow"))


def _region(chain, line: int) -> int | None:
    for i, (start, end, _leaves) in enumerate(chain[0]):
        if start <= line <= end:
            return i
    return None


def _join(entry: dict, outs: list) -> dict:
    states = [entry if o is None else o for o in outs]
    if len(states) == 1:
        return dict(states[0])
    joined: dict = {}
    for st in states:
        for k, v in st.items():
            joined[k] = v if k not in joined else V.union(joined[k], v)
    return joined


class BranchState:
    """One open chain: its regions, the branch being run, the heap it was entered with (and
    whether the chain was reached at all) and the heaps of the branches done (None: a branch
    that ran with the entry heap unchanged)."""

    __slots__ = ("chain", "idx", "entry", "entry_unreached", "outs")

    def __init__(self, chain, idx: int, entry: dict, unreached: bool):
        self.chain = chain
        self.idx = idx
        self.entry = entry
        self.entry_unreached = unreached
        self.outs: list = [None for k in range(idx) if not chain[0][k][2]]

    @property
    def end(self) -> int:
        return self.chain[0][-1][1]

    def _done(self, fr, upto: int) -> None:
        """The branch being run is done (it falls through unless it leaves, or a chain in it
        left on every branch); so are the ones up to `upto` that ran no statement."""
        regions = self.chain[0]
        if not regions[self.idx][2] and not fr.unreached:
            self.outs.append(fr.heap)
        self.outs.extend(None for k in range(self.idx + 1, upto) if not regions[k][2])

    def switch(self, fr, j: int) -> None:
        self._done(fr, j)
        self.idx = j
        fr.heap = dict(self.entry)
        fr.unreached = self.entry_unreached

    def close(self, fr) -> None:
        regions, has_else = self.chain
        self._done(fr, len(regions))
        if not has_else:
            self.outs.append(None)
        if self.entry_unreached or not self.outs:
            # every branch leaves: what follows runs on no path through the chain (the
            # enclosing branch, if any, adds nothing after it)
            fr.unreached = True
            return
        fr.heap = _join(self.entry, self.outs)
        fr.unreached = False


def step(fr, st) -> None:
    """Before statement `st` of frame `fr`: leave the chains it is past, move to the branch it
    is in, enter the chains it starts."""
    chains = fr.func.get("branches")
    if not chains or st[0] in PSEUDO:
        return
    line = st[1]
    stack = fr.branches
    while stack and line > stack[-1].end:
        stack.pop().close(fr)
    if stack:
        top = stack[-1]
        j = _region(top.chain, line)
        if j is not None and j > top.idx:
            top.switch(fr, j)
    opened = fr.branches_opened
    for n, chain in enumerate(chains):
        if n in opened:
            continue
        regions = chain[0]
        if regions[0][0] > line:
            break  # sorted by first line
        if line > regions[-1][1]:
            continue
        j = _region(chain, line)
        if j is None:
            continue
        opened.add(n)
        stack.append(BranchState(chain, j, dict(fr.heap), fr.unreached))
        if j > 0:
            fr.heap = dict(fr.heap)
