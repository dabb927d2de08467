"""Storage watch: the run-time check an RL trainer turns on with one line (issue 29).

``StorageWatch.collect(model)`` records a weak reference to every storage reachable from the
model (the attribute walk of ``confirm/walk.py``: parameters, buffers, plain tensor attributes,
nested objects, partials, closures, dicts, lists); ``watch.check()`` after a weight update says
which paths now point at a different storage (``moved``) and which recorded storages were freed
(``freed``). The watch never keeps a storage alive. See docs/watch.md.
"""

from __future__ import annotations

import fnmatch
import functools
import inspect
import json
import logging
import re
import sys
import weakref
from dataclasses import dataclass, field

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from reload_lint.confirm.recorder import DispatchRecorder
from reload_lint.confirm.walk import TensorHit, walk_tensors
from reload_lint.watch._replay import Plan

__all__ = [
    "Change",
    "Report",
    "StorageMovedError",
    "StorageWatch",
    "graph_kwargs",
    "graph_liveness_oracle",
]

log = logging.getLogger("reload_lint.watch")

_FINGERPRINT = re.compile(r"^[0-9a-f]{20}$")
_SAID = [False]  # the missing liveness oracle is logged once per process


class StorageMovedError(RuntimeError):
    """Raised by ``check()`` in ``raise`` mode: a captured graph would read a stale address."""

    def __init__(self, report: Report):
        super().__init__(f"reload-lint watch: storages moved or freed\n{report}")
        self.report = report


@dataclass
class Change:
    kind: str  # "moved" | "freed"
    path: str
    where: str | None = None  # file:line of the owning object's class
    owner: str | None = None  # qualified class of the owning object
    old_ptr: int = 0
    new_ptr: int | None = None
    nbytes: int = 0
    fingerprint: str | None = None
    fix: str | None = None

    def __str__(self) -> str:
        ptr = f"0x{self.old_ptr:x}"
        if self.new_ptr is not None:
            ptr += f" -> 0x{self.new_ptr:x}"
        parts = [f"{self.kind:5} {self.path}", ptr, f"{self.nbytes} B"]
        if self.where:
            parts.append(f"{self.owner} ({self.where})")
        if self.fingerprint:
            parts.append(f"finding {self.fingerprint}")
        if self.fix:
            parts.append(f"fix: {self.fix}")
        return "  ".join(parts)

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Report:
    moved: list[Change] = field(default_factory=list)
    freed: list[Change] = field(default_factory=list)
    oracle: str | None = None  # what the graph-liveness oracle says, where one exists

    def __bool__(self) -> bool:
        return bool(self.moved or self.freed)

    def __str__(self) -> str:
        return "\n".join(str(c) for c in [*self.moved, *self.freed])

    def to_json(self) -> dict:
        return {
            "moved": [c.to_json() for c in self.moved],
            "freed": [c.to_json() for c in self.freed],
            "oracle": self.oracle,
        }


@dataclass
class _Slot:
    path: str
    ref: StorageWeakRef = field(repr=False)
    data_ptr: int
    nbytes: int
    owner: str | None
    owner_mro: tuple[str, ...]
    attr: str
    cdata: int = 0  # the storage object's identity (alive while a path still reaches it)


@functools.lru_cache(maxsize=1024)
def _class_where(qual: str | None) -> str | None:
    """``file:line`` of a class named ``module.Qual.Name``; None where it cannot be found.
    Cached per class: ``inspect.getsourcelines`` of a class parses its whole module (~20 ms
    for vLLM's linear.py), and a report names the same few classes for every layer."""
    if not qual:
        return None
    parts = qual.split(".")
    for i in range(len(parts) - 1, 0, -1):
        mod, name = ".".join(parts[:i]), parts[i:]
        m = sys.modules.get(mod)
        if m is None:
            continue
        obj = m
        try:
            for n in name:
                obj = getattr(obj, n)
            src = inspect.getsourcefile(obj)
            line = inspect.getsourcelines(obj)[1]
        except (AttributeError, TypeError, OSError):
            return None
        return f"{src}:{line}" if src else None
    return None


def _slot(hit: TensorHit) -> _Slot | None:
    t = hit.tensor
    try:
        st = t.untyped_storage()
        ptr, nbytes = st.data_ptr(), st.nbytes()
        ref = StorageWeakRef(st)
    except (RuntimeError, NotImplementedError, TypeError):
        return None
    last = hit.steps[-1] if hit.steps else None
    label = last.label if last else hit.path
    attr = re.sub(r"^<\w+:(.*)>$|^kw\[(.*)\]$", lambda m: m.group(1) or m.group(2), label)
    return _Slot(
        path=hit.path,
        ref=ref,
        data_ptr=ptr,
        nbytes=nbytes,
        owner=last.qual if last else None,
        owner_mro=last.owner if last else (),
        attr=attr,
        cdata=ref.cdata,
    )


def _load_findings(findings) -> list[dict]:
    if findings is None:
        return []
    if isinstance(findings, (str, bytes)) or hasattr(findings, "__fspath__"):
        with open(findings, encoding="utf-8") as fh:
            findings = json.load(fh)
    if isinstance(findings, dict):
        findings = findings.get("findings", [])
    return [f for f in findings if isinstance(f, dict)]


def _finding_key(f: dict) -> tuple[str, str]:
    cls = (f.get("symbol") or "").split(".")[0]
    target = (f.get("target") or "").split("[")[0]
    return cls, target.rsplit(".", 1)[-1]


def _has_liveness_check() -> bool:
    """Whether this torch's ``torch.cuda.graph`` takes ``check_input_liveness``."""
    graph = getattr(getattr(torch, "cuda", None), "graph", None)
    try:
        params = inspect.signature(graph).parameters if graph is not None else {}
    except (TypeError, ValueError):
        params = {}
    return "check_input_liveness" in params


def graph_liveness_oracle() -> str:
    """Whether this torch's ``torch.cuda.graph`` takes ``check_input_liveness`` (a second
    oracle beside the census: torch itself checks that captured inputs are still alive)."""
    if _has_liveness_check():
        return "torch.cuda.graph(check_input_liveness=True) available"
    return f"torch {torch.__version__}: torch.cuda.graph has no check_input_liveness"


def graph_kwargs() -> dict:
    """Keyword arguments to add to ``torch.cuda.graph(...)`` for torch's own liveness check:
    ``{"check_input_liveness": True}`` where this torch takes it, else ``{}``."""
    return {"check_input_liveness": True} if _has_liveness_check() else {}


class StorageWatch:
    """Weak manifest of a model's storages; ``check()`` compares the model against it."""

    def __init__(self, model, mode="warn", ignore=(), findings=None, root=""):
        if mode not in ("warn", "raise"):
            raise ValueError(f"mode must be 'warn' or 'raise', not {mode!r}")
        try:  # the watch keeps no model alive either
            self._model = weakref.ref(model)
        except TypeError:
            self._model = lambda: model
        self.mode = mode
        self.root = root
        self.ignore = list(ignore)
        self.findings = _load_findings(findings)
        self._by_key: dict[tuple[str, str], dict] = {}
        for f in self.findings:
            self._by_key.setdefault(_finding_key(f), f)
        self.slots: dict[str, _Slot] = {}
        self._plan = Plan()
        self.dispatch: DispatchRecorder | None = None
        self._warned: set[str] = set()
        self.oracle = graph_liveness_oracle()
        if not _has_liveness_check() and not _SAID[0]:
            _SAID[0] = True
            log.info("%s; the census is the only oracle", self.oracle)

    @property
    def model(self):
        return self._model()

    @classmethod
    def collect(cls, model, mode="warn", ignore=(), findings=None, root=""):
        watch = cls(model, mode=mode, ignore=ignore, findings=findings, root=root)
        watch.slots = watch._walk()
        watch._plan.compile()
        return watch

    # -- recording --------------------------------------------------------------------------
    def _hits(self):
        prefix = f"{self.root}." if self.root else ""
        model = self.model
        if model is None:  # the model itself was dropped: every slot is checked as freed
            return
        for hit in walk_tensors({"": model}):
            path = hit.path.lstrip(".")
            hit.path = prefix + path if path else self.root
            yield hit

    def _walk(self) -> dict[str, _Slot]:
        out: dict[str, _Slot] = {}
        self._plan = plan = Plan()
        for hit in self._hits():
            s = _slot(hit) if hit.path not in out else None
            if s is not None:
                plan.add(len(out), hit.steps)
                out[s.path] = s
        return out

    def _pointers(self) -> dict[str, int]:
        """path -> storage address now, through a full walk (the paths a replay cannot take)."""
        out: dict[str, int] = {}
        for hit in self._hits():
            if hit.path not in out:
                try:
                    out[hit.path] = hit.tensor.untyped_storage().data_ptr()
                except (RuntimeError, NotImplementedError, TypeError):
                    continue
        return out

    def record(self) -> DispatchRecorder:
        """A dispatch recorder to enter around a capture or warm-up forward: storages ops read
        that no attribute path reaches are checked for being freed too."""
        self.dispatch = DispatchRecorder()
        return self.dispatch

    # -- checking ---------------------------------------------------------------------------
    def _match(self, s: _Slot) -> dict | None:
        for cls in s.owner_mro:
            f = self._by_key.get((cls, s.attr))
            if f is not None:
                return f
        return None

    def _ignored(self, s: _Slot, finding: dict | None) -> bool:
        for pat in self.ignore:
            if _FINGERPRINT.match(pat):
                if finding is not None and finding.get("fingerprint") == pat:
                    return True
            elif fnmatch.fnmatchcase(s.path, pat):
                return True
        return False

    def _change(self, kind: str, s: _Slot, new_ptr: int | None) -> Change:
        f = self._match(s)
        return Change(
            kind=kind,
            path=s.path,
            where=_class_where(s.owner),
            owner=s.owner,
            old_ptr=s.data_ptr,
            new_ptr=new_ptr,
            nbytes=s.nbytes,
            fingerprint=(f or {}).get("fingerprint"),
            fix=(f or {}).get("fix") or None,
        )

    def _now(self):
        """(slot index -> storage address now, indices whose recorded storage a path still
        holds). Each recorded path is taken again (watch/_replay.py); below a step that cannot be
        (a set member) only the object reached there is walked, and a path that walk does not
        name again is looked up through a full walk."""
        model = self.model
        if model is None:
            return {}, set()
        ptrs: dict[int, int] = {}
        alive: set[int] = set()
        order = list(self.slots.values())
        resolved, lost = self._plan.resolve(model)
        for i, t in resolved.items():
            try:
                st = t.untyped_storage()
                ptrs[i] = st.data_ptr()
            except (AttributeError, RuntimeError, NotImplementedError, TypeError):
                continue
            if st._cdata == order[i].cdata:
                alive.add(i)
        if lost:
            walked = self._pointers()
            for i in lost:
                cur = walked.get(order[i].path)
                if cur is not None:
                    ptrs[i] = cur
        return ptrs, alive

    def check(self) -> Report:
        now, alive = self._now()
        report = Report(oracle=self.oracle)
        for i, s in enumerate(self.slots.values()):
            cur = now.get(i)
            moved = cur is not None and cur != s.data_ptr
            # a storage a path still holds is alive: only the others need the weak reference
            freed = i not in alive and s.ref.expired()
            if not (moved or freed) or self._ignored(s, self._match(s)):
                continue
            if moved:
                report.moved.append(self._change("moved", s, cur))
            if freed:
                report.freed.append(self._change("freed", s, None))
        if self.dispatch is not None:
            named = {s.data_ptr for s in self.slots.values()}
            for e in self.dispatch.external.values():
                if e["data_ptr"] in named or not e["ref"].expired():
                    continue
                s = _Slot(
                    f"<dispatch:{e['op']}>", e["ref"], e["data_ptr"], e["nbytes"], None, (), ""
                )
                if not self._ignored(s, None):
                    report.freed.append(self._change("freed", s, None))
        self._emit(report)
        return report

    def _emit(self, report: Report) -> None:
        if not report:
            return
        if self.mode == "raise":
            raise StorageMovedError(report)
        for c in [*report.moved, *report.freed]:
            key = f"{c.kind}:{c.path}"
            if key not in self._warned:
                self._warned.add(key)
                log.warning("reload-lint watch: %s", c)
