"""Graph visibility: the apply-time read that makes a stored tensor matter to captured graphs.

A read counts only where the store's own object can reach it at apply time:

- the *owner classes*: the class whose method made the store, the class of the post-load root
  that reached it, their bases and their subclasses (the object may be either);
- from each owner class, its apply/forward entry methods (configured `apply-names`,
  `apply*`/`forward*`, not private `_apply_*` helpers on their own), then what they call, a few
  calls deep: `self.m(...)` in the same MRO, `self.held.m(...)` on objects the class holds (types
  from `self.x = Class(...)` or from what the analysis saw stored there), and project functions
  (the module-level helpers that build info objects and wrappers from the layer);
- a read on a path named for one backend (`_apply_aiter`, `..._for_marlin`) never counts for a
  store on a path named for another one.

An attribute of the same name read by an unrelated class is not evidence. The reader found is
written to the finding's `reader` and as the last trace step; none found lowers the
confidence one step.
"""

from __future__ import annotations

import re
from collections import deque

from reload_lint.analysis import values as V
from reload_lint.findings import TraceStep
from reload_lint.index.extract import dotted

# Backend names used in vLLM / SGLang function, method and module names. A name token from this
# set ties a code path to that backend.
BACKEND_TOKENS = frozenset(
    {
        "aiter",
        "allspark",
        "b12x",
        "bitblas",
        "conch",
        "cpu",
        "cutlass",
        "deepep",
        "deepgemm",
        "dynamic4bit",
        "exllama",
        "fbgemm",
        "flashinfer",
        "hpu",
        "humming",
        "ipex",
        "machete",
        "marlin",
        "npu",
        "onednn",
        "rdna3",
        "rocm",
        "sm100",
        "sm120",
        "sm90",
        "tpu",
        "triton",
        "trtllm",
        "xpu",
        "zentorch",
    }
)
_SPLIT = re.compile(r"[^a-z0-9]+")
MAX_CALL_DEPTH = 3


def backend_tokens(*names: str) -> frozenset:
    """Backend names among the `_`/`.`-separated words of function, class and module names."""
    out: set[str] = set()
    for name in names:
        low = name.lower().replace("deep_gemm", "deepgemm").replace("trt_llm", "trtllm")
        for word in _SPLIT.split(low):
            if word in BACKEND_TOKENS:
                out.add(word)
    return frozenset(out)


def _calls(e, out: list) -> None:
    """Every call expression (`("c", func, args, kwargs, line, star)`) inside `e`."""
    if not isinstance(e, tuple) or not e:
        return
    if e[0] == "c" and len(e) >= 5:
        out.append(e)
    for x in e[1:]:
        if isinstance(x, tuple):
            _calls(x, out)


class ReaderMixin:
    """Mixed into Analyzer (analysis/interp.py)."""

    def is_entry(self, name: str) -> bool:
        """Apply/forward entry points: configured names and public `apply*`/`forward*`."""
        return name in self.apply_names or name.startswith(("forward", "apply"))

    def note_held(self, owner_cls: str, attr: str, held_cls: str) -> None:
        """The analysis saw an object of class `held_cls` stored on `owner.<attr>`."""
        if owner_cls and held_cls:
            self._held_types.setdefault((owner_cls, attr), set()).add(held_cls)

    def note_stored_class(self, key: tuple, v) -> None:
        """The class of the object a finding stores (a rebuilt config, kernel, wrapper)."""
        if v.kind in (V.OBJ, V.MODULE) and v.cls:
            self._stored_cls[key] = v.cls

    def note_store_site(self, key: tuple, fr, st) -> None:
        """Remember what the reader search needs about a finding's store."""
        names = [fr.func.get("qn", ""), fr.path.rsplit("/", 1)[-1]]
        names += [s.note.removeprefix("calls ") for s in fr.chain[1:]]
        self._store_site[key] = (fr.cls_key, getattr(fr.root, "cls_key", None), tuple(names))
        self._store_site_module[key] = fr.module
        if st[0] == "assign" and len(st) > 6 and st[6]:
            self._conditional.add(key)  # under `if self._x is None:` and the like

    # ------------------------------------------------------------------ location
    def callers_of(self, name: str) -> set:
        """Functions (module, qualname) of the parsed modules that call something named
        `name` (`f(...)`, `mod.f(...)`); updated as the analysis parses more modules."""
        for rec in self.index.loaded_records():
            mod = rec["module"]
            if mod in self._callers_seen:
                continue
            self._callers_seen.add(mod)
            for qn, g in rec["functions"].items():
                calls: list = []
                for st in g["body"]:
                    for part in st[4:]:
                        _calls(part, calls)
                for c in calls:
                    fn = c[1]
                    head = fn[2] if fn[0] == "a" else fn[1] if fn[0] == "n" else None
                    if isinstance(head, str):
                        self._callers.setdefault(head, set()).add((mod, qn))
        return self._callers.get(name, set())

    def relocate(self, fr, target: str) -> tuple | None:
        """(path, line, symbol, target) of the call site when the store sits in a shared helper
        that stores under a name its caller passes (`replace_parameter(layer, "g_idx", t)`,
        `setattr(layer, f"{prefix}_scale", ...)`): the caller decides what is stored where, so
        the caller is what must change; the helper stays in the trace. The target is spelled
        as the caller's object (`mod.g_idx` in the helper is `layer.g_idx` at the call)."""
        f = fr.func
        if fr.mode != "post" or f.get("cls") or f.get("parent") or len(fr.chain) < 2:
            return None
        base, _, rest = target.partition(".")
        attr = rest.split(".", 1)[0].split("[", 1)[0]
        if not attr.isidentifier():
            return None
        passed = {
            v.value
            for p in f["params"]
            for v in fr.env.get(p, ())
            if v.kind == V.STR and v.value and len(v.value) >= 2
        }
        if not any(s == attr or s in attr for s in passed):
            return None
        if len(self.callers_of(f["name"])) < 2:
            return None  # used once: the helper is as good a place to change as its caller
        call, caller = fr.chain[-1], fr.chain[-2].note.rsplit(" ", 1)[-1]
        srcs = {v.src for v in fr.env.get(base, ()) if v.src}
        if len(srcs) == 1:
            src = next(iter(srcs))
            if all(part.isidentifier() for part in src.split(".")):
                base = src
        return call.path, call.line, caller, f"{base}.{rest}"

    # ------------------------------------------------------------------ owner classes
    def _owner_classes(self, keys) -> list[str]:
        out: list[str] = []
        for k in keys:
            if not k or self.index.class_record(k) is None:
                continue
            for c in (*self.index.mro(k), *self.index.subclasses(k)):
                if c not in out and self.index.class_record(c) is not None:
                    out.append(c)
        return out

    def _held_classes(self, cls_key: str, attr: str) -> list[str]:
        found = set(self._held_types.get((cls_key, attr), ()))
        for k in self.index.mro(cls_key):
            found |= self._held_types.get((k, attr), set())
        t = self.attr_type(cls_key, attr)
        if t:
            found.add(t)
        return sorted(found)

    # ------------------------------------------------------------------ call graph
    def _callees(self, mod: str, f: dict, cls_key: str | None) -> list[tuple]:
        """(module, qualname, function, class key of its self) for what `f` calls."""
        calls: list = []
        for st in f["body"]:
            for part in st[4:]:
                _calls(part, calls)
        me = f["params"][0] if f["cls"] and f["params"] else None
        out: list[tuple] = []
        seen: set = set()
        for c in calls:
            fn = c[1]
            targets: list[tuple] = []
            if fn[0] == "a" and me and fn[1] == ("n", me) and cls_key:
                found = self.index.lookup_method(cls_key, fn[2])
                if found:
                    targets.append((*found, cls_key))
            elif fn[0] == "a" and me and fn[1][0] == "a" and fn[1][1] == ("n", me) and cls_key:
                for held in self._held_classes(cls_key, fn[1][2]):
                    found = self.index.lookup_method(held, fn[2])
                    if found:
                        targets.append((*found, held))
            else:
                d = dotted(fn) if fn[0] in ("n", "a") else None
                q = self.index.qualify(mod, d) if d else None
                r = self.index.resolve(q) if q else None
                if r is not None and r[0] == "func":
                    g = self.index.function(r[1], r[2])
                    if g is not None and not g["cls"]:
                        targets.append((r[1], r[2], None))
            for m, qn, ck in targets:
                if (m, qn, ck) in seen:
                    continue
                seen.add((m, qn, ck))
                g = self.index.function(m, qn)
                if g is not None:
                    out.append((m, qn, g, ck))
        return out

    def _reachable(self, cls_key: str) -> list[tuple]:
        """(module, qn, function, path of qualnames) reachable from the class's entries; for
        `module:` (no class), from the module's own top-level apply/forward functions."""
        if cls_key in self._reach:
            return self._reach[cls_key]
        self._reach[cls_key] = []
        mod0, _, cqn = cls_key.partition(":")
        entries: list[tuple] = []
        done: set[str] = set()
        rec0 = self.index.record(mod0) if not cqn else None
        for qn, f in sorted((rec0 or {}).get("functions", {}).items()):
            if not f["cls"] and not f["parent"] and self.is_entry(f["name"]):
                entries.append((mod0, qn, f, None, (qn,)))
        for mod, name, qn in self.index.mro_methods(cls_key) if cqn else ():
            if name in done or not self.is_entry(name):
                continue
            done.add(name)
            f = self.index.function(mod, qn)
            if f is not None:
                entries.append((mod, qn, f, cls_key, (qn,)))
        out: list[tuple] = []
        seen: set = set()
        queue = deque(entries)
        while queue:
            mod, qn, f, ck, path = queue.popleft()
            if (mod, qn, ck) in seen:
                continue
            seen.add((mod, qn, ck))
            out.append((mod, qn, f, path))
            if len(path) > MAX_CALL_DEPTH:
                continue
            for m2, qn2, g, ck2 in self._callees(mod, f, ck):
                queue.append((m2, qn2, g, ck2, (*path, qn2)))
        self._reach[cls_key] = out
        return out

    def find_reader(self, attr: str, owners: list[str], store_names: tuple) -> tuple | None:
        """(path, line, qn, via) of the first read of `attr` reachable from an owner's entries."""
        if not attr:
            return None
        mine = backend_tokens(*store_names)
        best, best_score = None, -1
        for ck in owners:
            for mod, qn, f, path in self._reachable(ck):
                line = next((ln for a, ln in f["reads"] if a == attr), None)
                if line is None:
                    continue
                theirs = backend_tokens(*path, mod)
                if (theirs - mine) and (mine - theirs):
                    continue  # a read on another backend's path (`sm90` for an `sm120` store)
                score = len(mine & theirs)
                if score > best_score:
                    best, best_score = (self.index.path_of(mod), line, qn, path), score
                    if score == len(mine):
                        return best
        return best

    # ------------------------------------------------------------------ per finding
    def add_graph_visibility(self) -> None:
        for key, fd in list(self.findings.items()):
            what = f"the apply-time reader search for {fd.target}"
            self._contained("", what, self._graph_visibility, {key: fd}, line=fd.line, path=fd.path)

    def _graph_visibility(self, findings: dict) -> None:
        for key, fd in findings.items():
            if fd.rule.startswith("RL9"):
                continue
            parts = fd.target.split("[", 1)[0].split(".")
            while len(parts) > 1 and parts[-1] in ("data", "<dynamic>"):
                parts.pop()
            attr = self._read_attr.get(key) or parts[-1]
            if attr.startswith("<") or not attr.isidentifier():
                attr = ""
            store_cls, root_cls, names = self._store_site.get(key, (None, None, ()))
            owners = self._owner_classes([store_cls, root_cls])
            # top-level apply/forward functions of the store's own module (`forward_x(layer,
            # ...)` next to the `prepare_x(layer)` that stores)
            owners.append(f"{self._store_site_module.get(key, '')}:")
            hit = self.find_reader(attr, owners, names)
            alias = ""
            cls = self._stored_cls.get(key)
            if hit is None and cls:
                # the object is handed on (a quant config given to the experts the kernel
                # holds): a read of an attribute that holds an object of the same class,
                # on the apply path of what the owner holds, is the graph-visible read
                for a in sorted(
                    a for (_k, a), held in self._held_types.items() if cls in held and a != attr
                ):
                    hit = self.find_reader(a, owners, names)
                    if hit is not None:
                        alias = f" (as `{a}`, which holds the {cls.split(':')[-1]})"
                        break
            if hit is not None:
                path, line, qn, via = hit
                note = f"read at apply time in {qn}{alias}"
                if len(via) > 1:
                    note += " (via " + " -> ".join(via[:-1]) + ")"
                fd.trace.append(TraceStep(path, line, note))
                fd.reader = f"{path}:{line} in {qn}"
            elif fd.rule not in ("RL108", "RL201"):
                fd.confidence = V.lower(fd.confidence)
                fd.trace.append(
                    TraceStep(fd.path, fd.line, "no apply-time read of this attribute found")
                )

    def drop_unresolved_names(self) -> None:
        """A store site reached both with names resolved (`layer.w13_scale`, from callers that
        pass the prefix) and unresolved (`layer.<f"{prefix}_scale">`, a root that takes the
        prefix as a parameter) is reported under the resolved names only."""
        resolved = {(k[0], k[1], k[2]) for k in self.findings if "<" not in self.findings[k].target}
        for key in [k for k, fd in self.findings.items() if "<" in fd.target]:
            if (key[0], key[1], key[2]) in resolved:
                del self.findings[key]

    def finalize_confidence(self) -> None:
        """Confidence sorts: `high` only for an unconditional store (no guard, no lazy `if`)
        with a reader found; anything else is at most `medium`. Runs after every fact is in."""
        for key, fd in self.findings.items():
            if fd.rule.startswith("RL9") or fd.confidence != "high":
                continue
            if fd.reader is None or fd.guard or key in self._conditional:
                fd.confidence = "medium"
