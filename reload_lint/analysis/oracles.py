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

Enum members flow through calls: a function's returns are read for the values its arguments
can hold (`backend_to_kernel_cls(backend)` with `backend` one of the members a caller passes;
`prioritize(list(BACKENDS))` returning its argument), and a branch whose member test
(`if backend == E.A:`, `backend in [...]`) no value passed can satisfy is skipped. A branch
that always returns narrows what the code after it sees (`if backend == E.A: return [...]`,
then `return resolver(backend)` for every member but A).
"""

from __future__ import annotations

from reload_lint.index.extract import dotted
from reload_lint.index.project import ProjectIndex

UNKNOWN = frozenset({("?",)})
NONE = frozenset({("N",)})
MAX_DEPTH = 16
NO_ENV: dict = {}
# builtins that make a sequence of their argument's elements
_SEQUENCE_BUILTINS = frozenset({"list", "tuple", "sorted", "reversed", "set", "frozenset"})


class Oracles:
    def __init__(self, index: ProjectIndex):
        self.index = index
        self._attr: dict[tuple[str, str], tuple | None] = {}
        self._ret: dict[tuple, frozenset] = {}
        self._binds: dict[tuple[str, str], dict] = {}
        self._active: set = set()
        self._naming: set = set()  # local names being evaluated (self-referencing binds)
        self._names: dict[tuple, frozenset] = {}  # a local's values, per parameter values
        self._when: tuple = ()  # flags of `self` the current read holds them to

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

    def attr_choices_when(self, cls_key: str, attr: str, truths: tuple) -> tuple | None:
        """attr_choices on a path where the flags of `self` in `truths` ((attr, value), ...)
        hold (analysis/flagpaths.py): a store on a branch those flags rule out is not a choice,
        and enum members stored on `self` that a store computes from are read the same way."""
        if not truths:
            return self.attr_choices(cls_key, attr)
        key = ("when", cls_key, attr, truths)
        if key in self._attr:
            return self._attr[key]
        self._attr[key] = None
        before, self._when = self._when, truths
        try:
            found: dict[str, tuple] = {}
            for vals in self._stores_to(cls_key, attr, truths):
                if any(item[0] in ("?", "L", "T", "F", "E") for item in vals):
                    return None
                for item in _classes(vals):
                    found.setdefault(item[1], item[1:])
        finally:
            self._when = before
        out = tuple(found[k] for k in sorted(found)) or None
        self._attr[key] = out
        return out

    def _members_when(self, cls_key: str, attr: str, truths: tuple) -> frozenset | None:
        found: set = set()
        for vals in self._stores_to(cls_key, attr, truths):
            if not vals or any(item[0] != "E" for item in vals):
                return None
            found |= vals
        return frozenset(found) or None

    def _stores_to(self, cls_key: str, attr: str, truths: tuple = ()):
        """The values of every store to `self.<attr>` in the class's methods (MRO order), one
        frozenset of read items per store (a tuple target unpacked at the attribute's place);
        with `truths`, only the stores those flags of `self` do not rule out."""
        from reload_lint.analysis.flagpaths import flags_at

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
                    if truths and _ruled_out(flags_at(f, st[1], me[1]), truths):
                        continue
                    vals = self.expr(mod, f, st[5], st[1], 0)
                    yield _unpack(vals, pos) if pos >= 0 else vals

    # ------------------------------------------------------------------ expressions
    def expr(self, mod: str, f: dict | None, e, line: int, depth: int, env=NO_ENV) -> frozenset:
        if depth > MAX_DEPTH or not isinstance(e, tuple) or not e:
            return UNKNOWN
        k = e[0]
        if k == "k":
            return NONE if e[1] == "none" or e[2] == "None" else UNKNOWN
        if k == "n":
            return self.name(mod, f, e[1], line, depth, env)
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
                if self._when:  # read under flags (attr_choices_when): the members stored
                    got = self._members_when(f"{mod}:{f['cls']}", e[2], self._when)
                    if got:
                        return got
            return UNKNOWN
        if k == "c":
            return self.call(mod, f, e, depth, env)
        if k == "s":
            base = self.expr(mod, f, e[1], line, depth + 1, env)
            idx = e[2]
            pos = const_index(idx)
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
                        out |= _elements(self.expr(mod, f, it[1], line, depth + 1, env))
                    else:
                        out |= self.expr(mod, f, it, line, depth + 1, env)
                return frozenset({("L", frozenset(out))})
            groups = tuple(self.expr(mod, f, it, line, depth + 1, env) for it in e[2])
            if e[1] == "tuple":
                return frozenset({("T", groups)})
            return frozenset({("L", frozenset().union(*groups))})
        if k == "d":
            vals = frozenset().union(*(self.expr(mod, f, v, line, depth + 1, env) for _, v in e[1]))
            return frozenset({("L", vals)})
        if k == "if":
            return self.expr(mod, f, e[1], line, depth + 1, env) | self.expr(
                mod, f, e[2], line, depth + 1
            )
        return UNKNOWN

    def name(
        self, mod: str, f: dict | None, name: str, line: int, depth: int, env=NO_ENV
    ) -> frozenset:
        if name == "None":
            return NONE
        if f is not None:
            binds = self._local_binds(mod, f)
            param = name in f["params"]
            passed = env.get(name, UNKNOWN) if param else frozenset()
            if name not in binds:
                if param:
                    return passed
            else:
                key = (mod, f["qn"], name)
                if key in self._naming:  # `x = x.copy()`: the value x had before
                    return passed if param else UNKNOWN
                memo = (*key, frozenset(env.items()), self._when)
                if memo in self._names:
                    return self._names[memo]
                self._naming.add(key)
                try:
                    out: frozenset = passed
                    for kind, ex, pos, ln in binds[name]:
                        if kind == "def":
                            out |= {("F", mod, ex)}
                            continue
                        vals = self.expr(mod, f, ex, ln, depth + 1, env)
                        if kind == "for":
                            vals = _elements(vals)
                        elif pos >= 0:
                            vals = _unpack(vals, pos)
                        out |= vals
                finally:
                    self._naming.discard(key)
                out = out or UNKNOWN
                self._names[memo] = out
                return out
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

    def call(self, mod: str, f: dict | None, e, depth: int, env=NO_ENV) -> frozenset:
        func = e[1]
        if func[0] == "a" and func[2] in ("get", "pop", "copy"):
            # `TABLE.get(backend)`: an element of the table; `seq.copy()`: the same items
            base = self.expr(mod, f, func[1], e[4], depth + 1, env)
            if any(item[0] == "L" for item in base):
                return base if func[2] == "copy" else _elements(base)
        if (
            func[0] == "n"
            and func[1] in _SEQUENCE_BUILTINS
            and len(e[2]) == 1
            and not self._bound_here(mod, f, func[1])
        ):
            # `list(BACKENDS)`: a sequence of the argument's elements
            arg = self.expr(mod, f, e[2][0], e[4], depth + 1, env)
            return frozenset({("L", _elements(arg))})
        if func[0] == "a" and f is not None and f["cls"] and func[1] == ("n", f["params"][0]):
            m = self.index.lookup_method(f"{mod}:{f['cls']}", func[2]) if f["params"] else None
            if not m:
                return UNKNOWN
            callee = self.index.function(m[0], m[1])
            return self.returns(*m, self._bind(mod, f, e, callee, 1, depth, env))
        out: set = set()
        for item in self.expr(mod, f, func, e[4], depth + 1, env):
            if item[0] == "F":
                callee = self.index.function(item[1], item[2])
                out |= self.returns(item[1], item[2], self._bind(mod, f, e, callee, 0, depth, env))
            else:
                out.add(("?",))  # an instance, an external call: not a class
        return frozenset(out) or UNKNOWN

    def _bound_here(self, mod: str, f: dict | None, name: str) -> bool:
        """Whether `name` is a local, a parameter or a module-level name (not the builtin)."""
        while f is not None:
            if name in f["params"] or name in self._local_binds(mod, f):
                return True
            f = self.index.function(mod, f["parent"]) if f.get("parent") else None
        rec = self.index.record(mod)
        return rec is not None and (
            name in rec["functions"]
            or name in rec["classes"]
            or name in rec["imports"]
            or name in rec["globals"]
        )

    def _bind(self, mod: str, f: dict | None, e, callee: dict | None, skip: int, depth, env):
        """The callee's parameters bound to what the call passes, where that is read (enum
        members, sequences, classes); parameters passed nothing known are left out."""
        if callee is None:
            return NO_ENV
        params = callee["params"][skip:]
        out: dict = {}
        for i, a in enumerate(e[2]):
            if i >= len(params) or (isinstance(a, tuple) and a and a[0] == "star"):
                break
            out[params[i]] = a
        for k, a in e[3]:
            if k in params:
                out[k] = a
        env_out = {}
        for k, a in out.items():
            vals = self.expr(mod, f, a, e[4], depth + 1, env)
            if vals and ("?",) not in vals:
                env_out[k] = vals
        return env_out

    def returns(self, mod: str, qn: str, env=NO_ENV) -> frozenset:
        """What a function can return given what its parameters hold (`env`); each function
        is read once per `env`, with its own depth budget (a result never depends on how deep
        the caller was), recursion reads as unknown."""
        key = (mod, qn, frozenset(env.items()), self._when)
        if key in self._ret:
            return self._ret[key]
        f = self.index.function(mod, qn)
        if f is None or (mod, qn) in self._active or len(self._active) > MAX_DEPTH:
            return UNKNOWN
        self._active.add((mod, qn))
        try:
            out: frozenset = frozenset()
            for st, cur in self._live(mod, f, env):
                if st[0] == "ret":
                    out |= self.expr(mod, f, st[4], st[1], 0, cur) if st[4] else NONE
        finally:
            self._active.discard((mod, qn))
        out = out or NONE
        self._ret[key] = out
        return out

    def _live(self, mod: str, f: dict, env: dict):
        """The statements of `f` that can run for the members its parameters hold, each with
        what the parameters hold there: a branch whose member test cannot hold is skipped,
        and after a single-test branch at the function's top level that always returns, the
        tested members are gone (no member left: nothing after it runs)."""
        body = f["body"]
        env = dict(env)
        top = min((st[2] for st in body), default=None)  # the body's own column
        dead = 0
        opened: list = []  # (condon statement, index)
        for i, st in enumerate(body):
            k = st[0]
            if k == "condon":
                if dead:
                    dead += 1
                elif self._cannot_hold(mod, st, env):
                    dead = 1
                else:
                    opened.append((st, i))
                continue
            if k == "condoff":
                if dead:
                    dead -= 1
                elif opened:
                    on, j = opened.pop()
                    if on[2] == top and _always_returns(body, j, i):
                        if not self._narrow_after(mod, on, env):
                            return
                continue
            if not dead:
                yield st, env

    def _members_of(self, mod: str, names, line: int) -> frozenset | None:
        out = set()
        for n in names:
            got = self._qualified(mod, n, line)
            if len(got) != 1 or next(iter(got))[0] != "E":
                return None
            out.add(next(iter(got))[1])
        return frozenset(out)

    def _cannot_hold(self, mod: str, st, env: dict) -> bool:
        for name, positive, names in st[4]:
            held = env.get(name)
            if not held or any(item[0] != "E" for item in held):
                continue
            tested = self._members_of(mod, names, st[1])
            if tested is None:
                continue
            can = {item[1] for item in held}
            if positive and not (can & tested):
                return True
            if not positive and can <= tested:
                return True
        return False

    def _narrow_after(self, mod: str, st, env: dict) -> bool:
        """Remove the members a returning branch took; False when none is left."""
        if len(st[4]) != 1:
            return True  # `a and b` failing says nothing about either
        name, positive, names = st[4][0]
        held = env.get(name)
        tested = self._members_of(mod, names, st[1])
        if not held or tested is None or any(item[0] != "E" for item in held):
            return True
        keep = frozenset(item for item in held if (item[1] in tested) != positive)
        env[name] = keep
        return bool(keep)

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


_PSEUDO = ("condon", "condoff", "flagon", "flagoff", "flagexit", "narrow", "unnarrow")


def _always_returns(body, start: int, stop: int) -> bool:
    """Whether the block between the condon at `start` and its condoff at `stop` ends in a
    `return` at its own top level (the column of its first statement)."""
    top = None
    for st in body[start + 1 : stop]:
        if st[0] in _PSEUDO:
            continue
        if top is None:
            top = st[2]
        if st[0] == "ret" and st[2] == top:
            return True
    return False


def _ruled_out(facts, truths: tuple) -> bool:
    """Whether the flag facts a store runs under contradict the path's known flags."""
    known = dict(truths)
    return any(a in known and known[a] != v for a, v in facts)


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


def const_index(idx) -> int | None:
    """The value of a subscript whose index is an int literal (``x[1]``, ``x[-1]``), else None."""
    if idx[0] != "k" or idx[1] != "int":
        return None
    try:
        return int(idx[2])
    except (TypeError, ValueError):
        return None
