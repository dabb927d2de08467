"""The capture-time manifest and the post-reload census.

At capture the manifest records a weak reference to every storage a graph could bake in, from
two sources that cover each other's blind spots:

* the attribute walk (``walk.py``) of the layer and everything reachable from it, which names
  each tensor (``layer.quant_method.kernel.workspace``);
* a ``TorchDispatchMode`` active while the graph is captured, which records every tensor an op
  reads that was not produced by an earlier op of the same capture. It finds tensors no
  attribute path reaches (a module-level dict, a global cache).

After the reload, the census reports per recorded storage whether it was freed (its weak
reference expired: the graph now holds a dangling address) and, per named path, whether the slot
moved (the path now resolves to a different storage: the graph reads the old one).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from reload_lint.confirm.walk import TensorHit, walk_tensors


def storage_key(t: torch.Tensor) -> int | None:
    if t.is_meta:
        return None
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


_CONTAINERS = ("builtins.", "functools.", "torch.")


class DispatchRecorder(TorchDispatchMode):
    """Records the storages ops read during a capture that the capture did not produce.

    With ``keep_log`` it also keeps the op sequence, so that on CPU (no CUDA graphs) the capture
    can be replayed like a graph: the same ops on the same captured tensor objects (see
    ``cpugraph.py``).
    """

    def __init__(self, keep_log: bool = False):
        super().__init__()
        self.produced: set[int] = set()
        self.external: dict[int, dict] = {}
        self.keep_log = keep_log
        self.log: list[tuple] = []
        self.ops = 0

    def _reads(self, flat, op: str) -> None:
        for i, a in enumerate(flat):
            if not isinstance(a, torch.Tensor):
                continue
            key = storage_key(a)
            if key is None or key in self.produced or key in self.external:
                continue
            st = a.untyped_storage()
            self.external[key] = {
                "read_by": reader(),
                "ref": StorageWeakRef(st),
                "data_ptr": st.data_ptr(),
                "nbytes": st.nbytes(),
                "dtype": str(a.dtype).replace("torch.", ""),
                "shape": list(a.shape),
                "op": op,
                "arg": i,
                "tensor_ref": _weak_tensor(a) if self.keep_log else None,
            }

    def __enter__(self):
        self._triton_undo = _watch_triton(self)
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            undo, self._triton_undo = getattr(self, "_triton_undo", None), None
            if undo is not None:
                undo()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.ops += 1
        flat, _ = tree_flatten((args, kwargs))
        self._reads(flat, str(func))
        out = func(*args, **kwargs)
        for o in tree_flatten(out)[0]:
            if isinstance(o, torch.Tensor):
                key = storage_key(o)
                if key is not None and key not in self.external:
                    self.produced.add(key)
        if self.keep_log:
            self.log.append((func, args, kwargs, out))
        return out


#: frames that are neither the reader nor its caller of interest: torch's dispatch, triton's
#: launcher, this recorder, and the census stand-ins (a stand-in runs *for* its caller)
_SKIP_DIRS = (f"{os.sep}torch{os.sep}", f"{os.sep}triton{os.sep}")
_SKIP_FILES = (
    os.path.abspath(__file__),
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "recipes", "standins.py"),
)


def reader() -> str | None:
    """Who read a storage at capture: ``vllm:<file>:<line>`` when the nearest caller outside
    torch, triton, this recorder and the stand-ins is vLLM's code, ``harness:<file>:<line>``
    when it is the runner's own (a recipe's forward), else ``<file>:<line>``."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        skip = any(d in name for d in _SKIP_DIRS) or os.path.abspath(name) in _SKIP_FILES
        if not skip and not name.startswith("<"):
            where = f"{name}:{f.f_lineno}"
            for pkg, kind in ((f"{os.sep}vllm{os.sep}", "vllm"), ("reload_lint", "harness")):
                i = name.rfind(pkg)
                if i >= 0:
                    rel = name[i + 1 :] if kind == "vllm" else name[name.rfind("reload_lint") :]
                    return f"{kind}:{rel}:{f.f_lineno}"
            return where
        f = f.f_back
    return None


def _watch_triton(recorder: DispatchRecorder):
    """Triton kernels launch without going through torch's dispatcher: while recording, their
    tensor arguments count as reads too (``triton:<kernel>``). Returns an undo, or None."""
    try:
        from triton.runtime.jit import JITFunction
    except Exception:  # triton is optional (CPU CI)
        return None
    orig = JITFunction.run

    def run(self, *args, **kwargs):
        name = getattr(getattr(self, "fn", None), "__name__", "kernel")
        recorder.ops += 1
        recorder._reads(list(args) + list(kwargs.values()), f"triton:{name}")
        return orig(self, *args, **kwargs)

    JITFunction.run = run

    def undo():
        JITFunction.run = orig

    return undo


def _weak_tensor(t: torch.Tensor):
    import weakref

    try:
        return weakref.ref(t)
    except TypeError:  # pragma: no cover
        return None


@dataclass
class Entry:
    """One recorded graph-visible storage."""

    key: int
    ref: StorageWeakRef = field(repr=False)
    data_ptr: int
    nbytes: int
    dtype: str
    shape: list[int]
    paths: list[str] = field(default_factory=list)
    hits: list[TensorHit] = field(default_factory=list, repr=False)
    sources: set[str] = field(default_factory=set)  # {"walk", "dispatch"}
    op: str | None = None
    is_input: bool = False
    read_by: str | None = None  # recorder.reader() at the capture's first read

    @property
    def standin(self) -> bool:
        """Reached only through objects a census stand-in made (its own buffers)."""
        return bool(self.hits) and all(
            any(st.qual.startswith("reload_lint.") for st in h.steps) for h in self.hits
        )


class Manifest:
    """Storages recorded at capture: the union of the attribute walk and the dispatch recorder."""

    def __init__(self, roots: dict[str, object]):
        self.roots = roots
        self.entries: dict[int, Entry] = {}
        self.path_keys: dict[str, int] = {}

    @classmethod
    def record(
        cls,
        roots: dict[str, object],
        recorder: DispatchRecorder | None,
        inputs: list[torch.Tensor] = (),
    ) -> Manifest:
        m = cls(roots)
        input_keys = {storage_key(t) for t in inputs}
        for hit in walk_tensors(roots):
            t = hit.tensor
            key = storage_key(t)
            if key is None:
                continue
            e = m.entries.get(key)
            if e is None:
                st = t.untyped_storage()
                e = Entry(
                    key=key,
                    ref=StorageWeakRef(st),
                    data_ptr=st.data_ptr(),
                    nbytes=st.nbytes(),
                    dtype=str(t.dtype).replace("torch.", ""),
                    shape=list(t.shape),
                )
                m.entries[key] = e
            e.sources.add("walk")
            e.paths.append(hit.path)
            hit.tensor = None  # the manifest holds weak references only
            e.hits.append(hit)
            m.path_keys[hit.path] = key
        if recorder is not None:
            for key, info in recorder.external.items():
                e = m.entries.get(key)
                if e is None:
                    e = Entry(
                        key=key,
                        ref=info["ref"],
                        data_ptr=info["data_ptr"],
                        nbytes=info["nbytes"],
                        dtype=info["dtype"],
                        shape=info["shape"],
                    )
                    m.entries[key] = e
                e.sources.add("dispatch")
                e.op = e.op or info["op"]
                e.read_by = e.read_by or info.get("read_by")
        for e in m.entries.values():
            if e.key in input_keys:
                e.is_input = True
        return m

    def built_classes(self, component: str | None) -> list[str]:
        """Qualified classes of the objects below ``component`` (a qualified class name) that
        hold a graph-visible storage: what the component built, as observed at runtime."""
        if not component:
            return []
        out: set[str] = set()
        for e in self.graph_visible():
            for hit in e.hits:
                below = False
                for st in hit.steps:
                    if below and st.attr and not st.qual.startswith(_CONTAINERS):
                        out.add(st.qual)
                    if st.qual == component:
                        below = True
        return sorted(out)

    def graph_visible(self) -> list[Entry]:
        """Entries an op read during capture (dispatch), plus walk-only ones when no recorder ran."""
        has_dispatch = any("dispatch" in e.sources for e in self.entries.values())
        out = []
        for e in self.entries.values():
            if e.is_input:
                continue
            if not has_dispatch or "dispatch" in e.sources:
                out.append(e)
        return out


@dataclass
class CensusRow:
    path: str
    key: int
    sources: list[str]
    graph_visible: bool
    freed: bool
    moved: bool
    old_ptr: int
    new_ptr: int | None
    nbytes: int
    dtype: str
    shape: list[int]
    op: str | None = None
    read_by: str | None = None
    standin: bool = False

    def to_json(self) -> dict:
        return {
            "read_by": self.read_by,
            "standin": self.standin,
            "path": self.path,
            "sources": self.sources,
            "graph_visible": self.graph_visible,
            "freed": self.freed,
            "moved": self.moved,
            "old_ptr": hex(self.old_ptr),
            "new_ptr": hex(self.new_ptr) if self.new_ptr is not None else None,
            "nbytes": self.nbytes,
            "dtype": self.dtype,
            "shape": self.shape,
            "op": self.op,
            "storage": self.key,
        }


def take_census(manifest: Manifest) -> list[CensusRow]:
    """Per recorded path (and per unnamed dispatch storage): freed? moved?"""
    now: dict[str, tuple[int, int]] = {}
    for hit in walk_tensors(manifest.roots):
        key = storage_key(hit.tensor)
        if key is not None:
            now[hit.path] = (key, hit.tensor.untyped_storage().data_ptr())
    visible = {e.key for e in manifest.graph_visible()}
    rows: list[CensusRow] = []
    for e in manifest.entries.values():
        if e.is_input:
            continue
        freed = e.ref.expired()
        paths = e.paths or [f"<dispatch:{e.op}#{len(rows)}>"]
        for path in paths:
            cur = now.get(path) if e.paths else None
            if e.paths:
                moved = cur is None or cur[0] != e.key
                new_ptr = cur[1] if cur is not None else None
            else:
                moved = freed
                new_ptr = None
            rows.append(
                CensusRow(
                    path=path,
                    key=e.key,
                    sources=sorted(e.sources),
                    graph_visible=e.key in visible,
                    freed=freed,
                    moved=moved,
                    old_ptr=e.data_ptr,
                    new_ptr=new_ptr,
                    nbytes=e.nbytes,
                    dtype=e.dtype,
                    shape=e.shape,
                    op=e.op,
                    read_by=e.read_by,
                    standin=e.standin,
                )
            )
    rows.sort(key=lambda r: r.path)
    return rows
