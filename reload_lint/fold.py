"""One storage, one finding: findings whose storage another finding already reports are folded
into it (its `also` list, docs/findings.md).

The shapes, all read from the findings' traces (never from names):

- **Held by an object rebuilt next to it.** In one function, a rebuilt object (RL105) is built
  from what another store of the same function keeps: `self.moe_quant_config = cfg(...)` then
  `self.moe_kernel = make_kernel(moe_quant_config=self.moe_quant_config, ...)`. Every step of
  the smaller finding's value (its allocations and what keeps them) is a step of the object's:
  the object holds that storage, so the object's finding reports it.
- **Kept inside a rebuilt object.** A store made by the object's own code (an experts
  constructor keeping `self.gemm1_alpha`) that a rebuilt-object finding already lists as what
  the object keeps (its trace has a step at that store, naming that attribute).
- **Read out of a rebuilt object.** A method of a class (an experts class) storing a tensor
  the trace says an object it holds keeps (`self._fc2_input_scale = self.quant_config.a2_gscale`:
  "`self.quant_config._a2...` holds it"), where a rebuilt-object finding both reports that
  allocation and names the class (the oracle may build it): the storage of the object the
  host's kernel hands it, bound under one more name. When several methods' kernels may build
  the class, the first one (by path and line) hosts it.
- **Built into a rebuilt object.** A tensor the post-load keeps (`self.row_strides`,
  `layer.in_scale`) that nothing reads at apply time, read again by the statement that stores
  a rebuilt object (`self.kernel = make(row_strides=self.row_strides)`, or through a helper
  that builds a quant config from the layer): its trace has the step "read again later in this
  post-load to build `T`" (analysis/feeds.py). Whatever of it a captured forward reads, it
  reads through T, so T's finding (or T's own host) reports it.
- **Allocated by a later method of a rebuilt object.** A method of a class other than its
  constructor (the experts' own post-load) keeps on `self` a tensor it certainly allocates,
  and an apply-time method of that class reads it, where a rebuilt-object finding's oracle
  may pick that class: the object is built anew with the kernel, and the tensor goes with it.
  Only an oracle's pick counts: an object the kernel is handed may be reused across loads
  (a store the post-load returns again), and what its methods allocate is then a storage of
  its own. A value from a callee assumed to return a new tensor (possibly a view) is not
  folded this way.

Tensor stores of the same function whose traces match step for step are NOT folded: two calls
of one helper (`layer.w13 = repack(w13)`, `layer.w2 = repack(w2)`) give identical traces and
two storages, and nothing in a trace tells them from one tensor stored under two names.

A folded finding keeps its fingerprint in its host's `also`, so a baseline that recorded it
still matches (`check --baseline` says how many entries are folded, docs/gate.md). The host
takes the higher confidence of the two and the folded finding's reader when it had none.
Suppressed findings are neither folded nor hosts.
"""

from __future__ import annotations

from reload_lint.analysis.feeds import FEEDS_NOTE
from reload_lint.findings import Finding

# Rules whose finding is a storage that moves (not an alias, a swap or a refresh bug).
FOLDABLE = frozenset({"RL101", "RL102", "RL103", "RL104", "RL105", "RL108"})
# Trace steps that describe where a finding is stored, rooted or read, not its value.
_META = (
    "stored on ",
    "post-load root ",
    "read at apply time",
    "reached from ",
    "no apply-time",
    FEEDS_NOTE,
)
_RANK = {"low": 0, "medium": 1, "high": 2}


def _value_steps(f: Finding) -> frozenset:
    steps = frozenset((s.path, s.line, s.note) for s in f.trace if not s.note.startswith(_META))
    allocates = any("allocates" in n or "new tensor" in n for _, _, n in steps)
    return steps if allocates else frozenset()


def _attr(target: str) -> str:
    head = target.split("[", 1)[0]
    return head.rsplit(".", 1)[-1] if "." in head else ""


def _keeps_here(host: Finding, f: Finding) -> bool:
    """The host's trace says its object keeps `f`'s attribute at `f`'s own store."""
    attr = _attr(f.target)
    if not attr or not f.target.startswith("self."):
        return False
    return any(
        s.path == f.path and s.line == f.line and " keeps " in s.note and f"self.{attr}" in s.note
        for s in host.trace
    )


def _host(f: Finding, hosts: list[Finding], steps: dict) -> Finding | None:
    same_fn = [
        h
        for h in hosts
        if h is not f and h.path == f.path and h.symbol == f.symbol and h.contract == f.contract
    ]
    mine = steps[id(f)]
    if mine:
        for h in same_fn:
            theirs = steps[id(h)]
            if mine < theirs or (mine == theirs and f.rule != "RL105"):
                return h
    for h in hosts:
        if h is not f and h.contract == f.contract and _keeps_here(h, f):
            return h
    if f.rule == "RL105":
        return None
    built_from = _built_from(f)
    for h in hosts:
        if h is not f and h.contract == f.contract and (h.path, h.line, h.target) in built_from:
            return h
    owner, _, method = f.symbol.rpartition(".")
    held = _allocations(f) if any(" holds it" in s.note for s in f.trace) else frozenset()
    if held and owner:
        for h in hosts:
            if (
                h is not f
                and h.contract == f.contract
                and held <= _allocations(h)
                and any(_names_class(s.note, owner) for s in h.trace)
            ):
                return h
    if _owned_and_read(f, owner, method):
        for h in hosts:
            if h is not f and h.contract == f.contract and _rebuilds_class(h, owner):
                return h
    return None


def _built_from(f: Finding) -> set:
    """(path, line, target) of the rebuilt objects the post-load builds from `f`'s tensor,
    when nothing reads it at apply time (analysis/feeds.py)."""
    if f.reader is not None:
        return set()
    out = set()
    for s in f.trace:
        if s.note.startswith(FEEDS_NOTE) and s.note.endswith("`"):
            out.add((s.path, s.line, s.note[len(FEEDS_NOTE) :].strip().strip("`")))
    return out


def _owned_and_read(f: Finding, owner: str, method: str) -> bool:
    """A later method of class `owner` (not its constructor) keeps on `self` a tensor it
    certainly allocates (no callee assumed to return one), and the graph reads it out of that
    same object (an apply-time method of `owner`)."""
    return bool(
        owner
        and method != "__init__"
        and f.target.startswith("self.")
        and f.reader is not None
        and f.reader.rsplit(" in ", 1)[-1].rpartition(".")[0] == owner
        and _allocations(f)
        and not any("assumed" in s.note for s in f.trace)
    )


def _rebuilds_class(h: Finding, cls: str) -> bool:
    """The rebuilt object's trace says its build constructs an object of class `cls`: the
    oracle that picks the class it builds may pick `cls`. An object only kept by it (handed
    in by the caller, "keeps a rebuilt Cls") may outlive it: a store the post-load reuses."""
    return any("the oracle may choose" in s.note and _names_class(s.note, cls) for s in h.trace)


def _names_class(note: str, cls: str) -> bool:
    """The step names class `cls` as a word (an oracle's choice, what an object keeps)."""
    i = note.find(cls)
    while i != -1:
        before = note[i - 1] if i else " "
        after = note[i + len(cls)] if i + len(cls) < len(note) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        i = note.find(cls, i + 1)
    return False


def _allocations(f: Finding) -> frozenset:
    """The trace's allocation steps (where new storage is made), as (path, line, note)."""
    return frozenset(
        (s.path, s.line, s.note)
        for s in f.trace
        if ("allocates" in s.note or "new tensor" in s.note)
        and " keeps " not in s.note
        and " holds it" not in s.note
        and not s.note.startswith(_META)
    )


def fold_shared_storage(findings: list[Finding]) -> list[Finding]:
    """The findings with each one whose storage another reports folded into that one's
    `also` (in place on the hosts); order kept."""
    live = [f for f in findings if f.suppressed is None and f.rule in FOLDABLE]
    hosts = sorted((f for f in live if f.rule == "RL105"), key=Finding.sort_key)
    if not hosts:
        return findings
    steps = {id(f): _value_steps(f) for f in live}
    into: dict[int, Finding] = {}
    for f in sorted(live, key=Finding.sort_key):
        h = _host(f, hosts, steps)
        if h is not None:
            into[id(f)] = h
    # a host folded into another host: follow to the final one (no cycles: a host with a
    # strict superset of steps, or the first by order, never points back)
    for key, h in list(into.items()):
        seen = {key}
        while id(h) in into and id(h) not in seen:
            seen.add(id(h))
            h = into[id(h)]
        into[key] = h
    by_id = {id(f): f for f in live}
    for key, h in into.items():
        if id(h) == key:
            continue
        f = by_id[key]
        if any(a.get("fingerprint") == f.fingerprint for a in h.also):
            continue  # folded by an earlier gate over the same result
        h.also.append(
            {
                "rule": f.rule,
                "path": f.path,
                "line": f.line,
                "target": f.target,
                "fingerprint": f.fingerprint,
            }
        )
        if _RANK.get(f.confidence, 0) > _RANK.get(h.confidence, 0):
            h.confidence = f.confidence
        if h.reader is None and f.reader is not None:
            h.reader = f.reader
    for h in hosts:
        h.also.sort(key=lambda a: (a["path"], a["line"], a["target"]))
    return [f for f in findings if id(f) not in into or into[id(f)] is f]
