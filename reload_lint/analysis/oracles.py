"""Backend selection: which classes a class-valued attribute can hold, read from the code of
the oracle that chooses it.

A quant method picks its experts/kernel class once (`self.backend, self.experts_cls =
select_fp8_moe_backend(...)` in `__init__`) and its post-load path builds an instance of
whatever was picked (`experts_cls(...)` behind a `type[Base]` parameter). Which classes that
can be is written in the oracle: the branches, returns and tables of the select function and
the helpers it returns through (`return [TritonExperts]`, `for k_cls in
backend_to_kernel_cls(b): ... return b, k_cls`, `_TABLE[backend]`). This module reads them,
flow-insensitively: every class a return can produce counts, whatever the platform.

Values are frozensets of items:
  ("C", class_key, path, line)   a class, named at path:line (where the choice is made)
  ("F", module, qualname)        a project function (so calls through locals resolve)
  ("L", items)                   a list/tuple/set/dict of items (iterated or indexed)
  ("T", (items, ...))            a positional tuple (unpacked by position)
  ("E", "module:Enum.MEMBER")    a member of a project enum class (`Backend.MARLIN`)
  ("N",)                         None
  ("?",)                         anything else
Nothing here evaluates tensors or reports; it only names classes.
"""

from __future__ import annotations

from reload_lint.index.extract import dotted
from reload_lint.index.project import ProjectIndex

UNKNOWN = frozenset({("?",)})
NONE = frozenset({("N",)})
MAX_DEPTH = 16


class Oracles:
    def __init__(self, index: ProjectIndex):
        self.index = index
        self._attr: dict[tuple[str, str], tuple | None] = {}
        self._ret: dict[tuple[str, str], frozenset] = {}
        self._binds: dict[tuple[str, str], dict] = {}
        self._active: set = set()

    # ------------------------------------------------------------------ entry point
    def attr_choices(self, cls_key: str, attr: str) -> tuple | None:
        """The classes `self.<attr>` can hold, as ((class_key, path, line), ...) with where each
        is chosen, read from every store to `self.<attr>` in the class's methods (MRO order).
        None when no store names a class, or when some value a store can take is not read
        (a parameter, an external call, a registry): the caller keeps its conservative
        default then, never a subset of the choices."""
        key = (cls_key, attr)
        if key in self._attr:
            return self._attr[key]
        self._attr[key] = None  # recursion through the same attribute reads as unknown
        found: dict[str, tuple] = {}
        unread = False
        for vals in self._stores_to(cls_key, attr):
            if any(item[0] in ("?", "L", "T", "F", "E") for item in vals):
                unread = True
            for item in _classes(vals):
                found.setdefault(item[1], item[1:])
        out = None if unread else (tuple(found[k] for k in sorted(found)) or None)
        self._attr[key] = out
        return out

    def attr_members(self, cls_key: str, attr: str) -> frozenset | None:
        """The enum members (`module:Enum.MEMBER`) `self.<attr>` can hold, read from every
        store to it in the class's methods, like attr_choices; None when a store can hold
        anything else (a value not read, a class, None)."""
        key = ("members", cls_key, attr)
        if key in self._attr:
            return self._attr[key]
        self._attr[key] = None
        found: set[str] = set()
        for vals in self._stores_to(cls_key, attr):
            if not vals or any(item[0] != "E" for item in vals):
                return None
            found.update(item[1] for item in vals)
        out = frozenset(found) or None
        self._attr[key] = out
        return out

    def _stores_to(self, cls_key: str, attr: str):
        """The values of every store to `self.<attr>` in the class's methods (MRO order), one
        frozenset of read items per store (a tuple target unpacked at the attribute's place)."""
        for mod, _name, mqn in self.index.mro_methods(cls_key):
            f = self.index.function(mod, mqn)
            if f is None or not f["params"] or "staticmethod" in f["decos"]:
                continue
            me = ("n", f["params"][0])
            for st in f["body"]:
                if st[0] != "assign":
                    continue
                for tgt in st[4]:
                    pos = _position(tgt, me, attr)
                    if pos is None:
                        continue
                    vals = self.expr(mod, f, st[5], st[1], 0)
                    yield _unpack(vals, pos) if pos >= 0 else vals

    # ------------------------------------------------------------------ expressions
    def expr(self, mod: str, f: dict | None, e, line: int, depth: int) -> frozenset:
        if depth > MAX_DEPTH or not isinstance(e, tuple) or not e:
            return UNKNOWN
        k = e[0]
        if k == "k":
            return NONE if e[1] == "none" or e[2] == "None" else UNKNOWN
        if k == "n":
            return self.name(mod, f, e[1], line, depth)
        if k == "a":
            d = dotted(e)
            if d is not None and (f is None or d.split(".", 1)[0] not in f["params"]):
                got = self._qualified(mod, d, line)
                if got:
                    return got
            if f is not None and f["cls"] and f["params"] and e[1] == ("n", f["params"][0]):
                ch = self.attr_choices(f"{mod}:{f['cls']}", e[2])
                if ch:
                    return frozenset(("C", *c) for c in ch)
            return UNKNOWN
        if k == "c":
            return self.call(mod, f, e, depth)
        if k == "s":
            base = self.expr(mod, f, e[1], line, depth + 1)
            idx = e[2]
            pos = int(idx[2]) if idx[0] == "k" and idx[1] == "int" and _is_int(idx[2]) else None
            out: set = set()
            for item in base:
                if item[0] == "L":
                    out |= item[1]
                elif item[0] == "T":
                    groups = item[1]
                    if pos is not None and -len(groups) <= pos < len(groups):
                        out |= groups[pos]
                    else:
                        for g in groups:
                            out |= g
                else:
                    out.add(("?",))
            return frozenset(out) or UNKNOWN
        if k == "t":
            if any(it[0] == "star" for it in e[2]):  # `[a, *rest]`: rest's items spliced in
                out = set()
                for it in e[2]:
                    if it[0] == "star":
                        out |= _elements(self.expr(mod, f, it[1], line, depth + 1))
                    else:
                        out |= self.expr(mod, f, it, line, depth + 1)
                return frozenset({("L", frozenset(out))})
            groups = tuple(self.expr(mod, f, it, line, depth + 1) for it in e[2])
            if e[1] == "tuple":
                return frozenset({("T", groups)})
            return frozenset({("L", frozenset().union(*groups))})
        if k == "d":
            vals = frozenset().union(*(self.expr(mod, f, v, line, depth + 1) for _, v in e[1]))
            return frozenset({("L", vals)})
        if k == "if":
            return self.expr(mod, f, e[1], line, depth + 1) | self.expr(
                mod, f, e[2], line, depth + 1
            )
        return UNKNOWN

    def name(self, mod: str, f: dict | None, name: str, line: int, depth: int) -> frozenset:
        if name == "None":
            return NONE
        if f is not None:
            if name in f["params"]:
                return UNKNOWN
            binds = self._local_binds(mod, f)
            if name in binds:
                out: frozenset = frozenset()
                for kind, ex, pos, ln in binds[name]:
                    if kind == "def":
                        out |= {("F", mod, ex)}
                        continue
                    vals = self.expr(mod, f, ex, ln, depth + 1)
                    if kind == "for":
                        vals = _elements(vals)
                    elif pos >= 0:
                        vals = _unpack(vals, pos)
                    out |= vals
                return out or UNKNOWN
            if f.get("parent"):
                parent = self.index.function(mod, f["parent"])
                if parent is not None:
                    return self.name(mod, parent, name, line, depth + 1)
        rec = self.index.record(mod)
        if rec is None:
            return UNKNOWN
        if name in rec["classes"]:
            return frozenset({("C", f"{mod}:{name}", self.index.path_of(mod), line)})
        if name in rec["functions"]:
            return frozenset({("F", mod, name)})
        if name in rec["imports"]:
            return self._qualified(mod, name, line) or UNKNOWN
        g = rec["globals"].get(name)
        if g is not None:
            return self.expr(mod, None, g, line, depth + 1)
        return UNKNOWN

    def _qualified(self, mod: str, dotted_name: str, line: int) -> frozenset:
        q = self.index.qualify(mod, dotted_name)
        r = self.index.resolve(q) if q else None
        if r is None:
            head, _, member = dotted_name.rpartition(".")
            if head and member.isupper():
                # `Backend.MARLIN`: a member of a project enum class
                q = self.index.qualify(mod, head)
                r = self.index.resolve(q) if q else None
                if r is not None and r[0] == "class":
                    return frozenset({("E", f"{r[1]}:{r[2]}.{member}")})
            return frozenset()
        kind, m, qn = r
        if kind == "class":
            return frozenset({("C", f"{m}:{qn}", self.index.path_of(mod), line)})
        if kind == "func":
            return frozenset({("F", m, qn)})
        return frozenset()

    def call(self, mod: str, f: dict | None, e, depth: int) -> frozenset:
        func = e[1]
        if func[0] == "a" and func[2] in ("get", "pop", "copy"):
            # `TABLE.get(backend)`: an element of the table
            base = self.expr(mod, f, func[1], e[4], depth + 1)
            if any(item[0] == "L" for item in base):
                return _elements(base)
        if func[0] == "a" and f is not None and f["cls"] and func[1] == ("n", f["params"][0]):
            m = self.index.lookup_method(f"{mod}:{f['cls']}", func[2]) if f["params"] else None
            return self.returns(*m) if m else UNKNOWN
        out: set = set()
        for item in self.expr(mod, f, func, e[4], depth + 1):
            if item[0] == "F":
                out |= self.returns(item[1], item[2])
            else:
                out.add(("?",))  # an instance, an external call: not a class
        return frozenset(out) or UNKNOWN

    def returns(self, mod: str, qn: str) -> frozenset:
        """What a function can return; each function is read once, with its own depth budget
        (a result never depends on how deep the caller was), recursion reads as unknown."""
        key = (mod, qn)
        if key in self._ret:
            return self._ret[key]
        f = self.index.function(mod, qn)
        if f is None or key in self._active or len(self._active) > MAX_DEPTH:
            return UNKNOWN
        self._active.add(key)
        try:
            out: frozenset = frozenset()
            for st in f["body"]:
                if st[0] == "ret":
                    out |= self.expr(mod, f, st[4], st[1], 0) if st[4] else NONE
        finally:
            self._active.discard(key)
        out = out or NONE
        self._ret[key] = out
        return out

    def _local_binds(self, mod: str, f: dict) -> dict:
        key = (mod, f["qn"])
        if key in self._binds:
            return self._binds[key]
        binds: dict[str, list] = {}
        for st in f["body"]:
            if st[0] == "assign":
                for tgt in st[4]:
                    if tgt[0] == "n":
                        binds.setdefault(tgt[1], []).append(("val", st[5], -1, st[1]))
                    elif tgt[0] == "t":
                        for i, sub in enumerate(tgt[2]):
                            if sub[0] == "n":
                                binds.setdefault(sub[1], []).append(("val", st[5], i, st[1]))
            elif st[0] == "for" and st[4][0] == "n":
                binds.setdefault(st[4][1], []).append(("for", st[5], -1, st[1]))
            elif st[0] == "def":
                binds.setdefault(st[4], []).append(("def", st[5], -1, st[1]))
        self._binds[key] = binds
        return binds


def _position(tgt, me, attr: str) -> int | None:
    """-1 when tgt is `self.<attr>`, i when it is the i-th item of a tuple target, else None."""
    if tgt[0] == "a" and tgt[1] == me and tgt[2] == attr:
        return -1
    if tgt[0] == "t":
        for i, sub in enumerate(tgt[2]):
            if sub[0] == "a" and sub[1] == me and sub[2] == attr:
                return i
    return None


def _unpack(vals: frozenset, pos: int) -> frozenset:
    out: set = set()
    for item in vals:
        if item[0] == "T":
            if pos < len(item[1]):
                out |= item[1][pos]
        elif item[0] == "L":
            out |= item[1]
        elif item[0] != "N":
            out.add(("?",))
    return frozenset(out)


def _elements(vals: frozenset) -> frozenset:
    out: set = set()
    for item in vals:
        if item[0] == "L":
            out |= item[1]
        elif item[0] == "T":
            for g in item[1]:
                out |= g
        elif item[0] != "N":
            out.add(("?",))
    return frozenset(out)


def _classes(vals: frozenset) -> list[tuple]:
    return sorted(item for item in vals if item[0] == "C")


def _is_int(text) -> bool:
    try:
        int(text)
    except (TypeError, ValueError):
        return False
    return True
