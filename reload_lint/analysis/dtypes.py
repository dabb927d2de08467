"""Tensor dtypes read from the code, for one question: is a dtype cast the identity?

`t.to(dtype=D)` given only a dtype (no device, no `copy=True`, no memory format) returns `t`
itself when `t` already has dtype D: no new storage, nothing a captured graph could lose. A
constructor that "normalises" the tables it is handed (`_maybe_cast(t) -> t.to(dtype=
self.index_dtype())`) therefore allocates nothing when the tables were made with that dtype.
This module reads both sides from the code, statically and conservatively:

- the *target*: a `torch.<dtype>` name, or a name, module global, method or function return
  that is one (`self.topk_indices_dtype()` returning `torch.int64`). `getattr(ext, "name", D)`
  on a module outside the audited tree is taken as its default D: the attribute is not in the
  tree, and the default is the value the code is written for (an assumption, named in the
  explain output and in docs/contracts.md);
- the *receiver*: where the tensor was made, followed through locals, returns, tuples,
  `self` attributes and registered buffers (stores and `register_buffer` in the class and its
  subclasses, properties), typed holders (`self.mgr = mgr` with `mgr: Manager`), and torch
  ops whose result dtype is their input's: a factory given `dtype=` makes that dtype;
  `torch.arange` of integers makes int64; `*_like`, slicing, indexing, `clone`/`contiguous`
  keep the input's; elementwise ops (`+ - * // %`, `remainder`, `minimum`, `div(...,
  rounding_mode=...)`) of same-dtype tensors keep it. An int64 tensor combined with a Python
  number stays int64 unless the code marks the number floating (a float literal, `/`,
  `float(...)`): int64 is the widest integer type, and indexing arithmetic mixes tables with
  counts and sizes.

Anything else is unknown, and an unknown side never makes a cast the identity. The layer a
quant method is handed is typed by the annotation its class's methods give it
(`layer: "RoutedExperts"`), which lets a call on the layer (`layer._routing_tables()`) be read.

Values are frozensets of items:
  ("D", dtype, path, line)   a tensor (or a torch.dtype value) of `dtype`, made at path:line
  ("T", (items, ...))        a positional tuple
  ("I",)                     a Python integer (annotated `int`, an int literal, `len(...)`)
  ("F",)                     a Python float (a float literal, `/`, `float(...)`)
  ("N",)                     None
  ("?",)                     anything else
Nothing here executes audited code; the analysis asks it only at a cast it would otherwise
count as new storage (analysis/calls.py).
"""

from __future__ import annotations

from reload_lint.analysis.oracles import const_index
from reload_lint.index.extract import DTYPE_ALIASES, dotted
from reload_lint.index.project import ProjectIndex

UNK = frozenset({("?",)})
NONE = frozenset({("N",)})
INT = frozenset({("I",)})
FLOAT = frozenset({("F",)})
MAX_DEPTH = 24

_DTYPES = frozenset(
    {
        "torch.bool",
        "torch.uint8",
        "torch.int8",
        "torch.int16",
        "torch.int32",
        "torch.int64",
        "torch.float16",
        "torch.bfloat16",
        "torch.float32",
        "torch.float64",
        "torch.short",
        *DTYPE_ALIASES,
    }
)
# tensor methods that return a tensor of the receiver's dtype
_KEEP_METHODS = frozenset(
    {
        "clone",
        "contiguous",
        "detach",
        "view",
        "reshape",
        "flatten",
        "squeeze",
        "unsqueeze",
        "t",
        "permute",
        "transpose",
        "expand",
        "narrow",
        "cuda",
        "cpu",
        "repeat",
        "index_select",
    }
)
_FIXED_METHODS = {
    "long": "torch.int64",
    "int": "torch.int32",
    "short": "torch.int16",
    "float": "torch.float32",
    "half": "torch.float16",
    "bfloat16": "torch.bfloat16",
    "double": "torch.float64",
    "bool": "torch.bool",
}
# torch functions whose result has the promoted dtype of their tensor arguments
_ELEMENTWISE = frozenset(
    {
        "remainder",
        "fmod",
        "minimum",
        "maximum",
        "add",
        "sub",
        "mul",
        "floor_divide",
        "abs",
        "neg",
        "clamp",
        "where",
        "cat",
        "stack",
        "flatten",
        "reshape",
        "clone",
        "index_select",
        "gather",
    }
)
_INT_OPS = ("+", "-", "*", "//", "%", "&", "|", "^")


def canonical(name: str) -> str:
    if name == "torch.short":
        return "torch.int16"
    return DTYPE_ALIASES.get(name, name)


def single_dtype(vals: frozenset) -> str | None:
    """The one dtype `vals` holds (None values aside), or None."""
    ds = {it[1] for it in vals if it[0] == "D"}
    if len(ds) != 1 or any(it[0] not in ("D", "N") for it in vals):
        return None
    return next(iter(ds))


class Dtypes:
    def __init__(self, index: ProjectIndex):
        self.index = index
        self._memo: dict = {}
        self._active: set = set()
        self._cut: set = set()  # active keys a nested evaluation met (its result is partial)
        self.assumptions: dict[tuple, str] = {}  # (path, line) of a taken default -> why

    # ------------------------------------------------------------------ entry points
    def of(self, mod: str, f: dict | None, e, cls_key: str | None) -> frozenset:
        """What `e` (in function `f` of `mod`, `self` being of class `cls_key`) can be."""
        return self.expr(mod, f, e, cls_key, 0)

    def method_returns(self, cls_key: str, name: str) -> frozenset:
        """What `obj.<name>(...)` returns for an object of class `cls_key` or a subclass."""
        out: set = set()
        found = False
        for k in [cls_key, *self.index.subclasses(cls_key)]:
            m = self.index.lookup_method(k, name)
            if m is None:
                continue
            found = True
            out |= self.returns(m[0], m[1], k)
        return frozenset(out) if found and out else UNK

    def declared_class(self, cls_key: str, param: str) -> str | None:
        """The project class the methods of `cls_key`'s MRO annotate parameter `param` with
        (`layer: "RoutedExperts"`): the most derived when they lie on one inheritance line,
        None when none does or they diverge."""
        key = ("declared", cls_key, param)
        if key in self._memo:
            return self._memo[key]
        found: set[str] = set()
        for mod, _name, mqn in self.index.mro_methods(cls_key):
            f = self.index.function(mod, mqn)
            if f is None:
                continue
            ann = dict(f["annotations"]).get(param, "")
            if not ann or ann.startswith("type:"):
                continue
            got = self._class_named(mod, ann.strip("\"'"))
            if got is not None:
                found.add(got)
        # annotations along one inheritance line (`layer: "RoutedExperts"` on the base,
        # `layer: "SpecialRoutedExperts"` on an override): the most derived one
        out = next(
            (c for c in sorted(found) if found <= set(self.index.mro(c))),
            None,
        )
        self._memo[key] = out
        return out

    # ------------------------------------------------------------------ expressions
    def expr(self, mod: str, f: dict | None, e, cls: str | None, depth: int) -> frozenset:
        if depth > MAX_DEPTH or not isinstance(e, tuple) or not e:
            return UNK
        k = e[0]
        if k == "k":
            if e[1] == "int":
                return INT
            if e[1] == "float":
                return FLOAT
            return NONE if e[1] == "none" else UNK
        if k == "n":
            return self.name(mod, f, e[1], cls, depth)
        if k == "a":
            return self.attr(mod, f, e, cls, depth)
        if k == "c":
            return self.call(mod, f, e, cls, depth)
        if k == "b":
            if e[1] not in _INT_OPS:
                return FLOAT if e[1] == "/" else UNK
            return _promote(
                self.expr(mod, f, e[2], cls, depth + 1), self.expr(mod, f, e[3], cls, depth + 1)
            )
        if k == "s":
            base = self.expr(mod, f, e[1], cls, depth + 1)
            if not base:
                return base  # `x = x[:n]`: the other bindings of x decide
            idx = e[2]
            pos = const_index(idx)
            out: set = set()
            for it in base:
                if it[0] == "T":
                    if pos is not None and -len(it[1]) <= pos < len(it[1]):
                        out |= it[1][pos]
                    else:
                        out.add(("?",))
                elif it[0] == "D":
                    out.add(it)  # slicing and indexing keep the dtype
                else:
                    out.add(("?",))
            return frozenset(out) or UNK
        if k == "t" and e[1] == "tuple" and not any(it[0] == "star" for it in e[2]):
            return frozenset({("T", tuple(self.expr(mod, f, it, cls, depth + 1) for it in e[2]))})
        if k == "if":
            return self.expr(mod, f, e[1], cls, depth + 1) | self.expr(mod, f, e[2], cls, depth + 1)
        return UNK

    def name(self, mod: str, f: dict | None, name: str, cls: str | None, depth: int) -> frozenset:
        if name == "None":
            return NONE
        while f is not None:
            binds = _binds(f, name)
            if binds:
                key = ("name", mod, f["qn"], name, cls)
                if key in self._memo:
                    return self._memo[key]
                if key in self._active:
                    self._cut.add(key)
                    return frozenset()  # `x = x + y`: the other bindings decide
                self._active.add(key)
                try:
                    out: set = set()
                    for ex, pos in binds:
                        vals = self.expr(mod, f, ex, cls, depth + 1)
                        out |= _unpack(vals, pos) if pos >= 0 else vals
                finally:
                    self._active.discard(key)
                return self._keep(key, frozenset(out) or UNK)
            if name in f["params"]:
                ann = dict(f["annotations"]).get(name, "")
                return INT if ann == "int" else UNK
            f = self.index.function(mod, f["parent"]) if f.get("parent") else None
            if f is not None and f.get("cls"):
                cls = cls or f"{mod}:{f['cls']}"
        q = self.index.qualify_external(mod, name)
        if canonical(q) in _DTYPES or q in _DTYPES:
            return frozenset({("D", canonical(q), self.index.path_of(mod), 0)})
        rec = self.index.record(mod)
        if rec is None:
            return UNK
        g = rec["globals"].get(name)
        if g is not None and name not in rec["functions"] and name not in rec["classes"]:
            return self.expr(mod, None, g, None, depth + 1)
        return UNK

    def attr(self, mod: str, f: dict | None, e, cls: str | None, depth: int) -> frozenset:
        d = dotted(e)
        if d is not None:
            q = canonical(self.index.qualify_external(mod, d))
            if q in _DTYPES:
                return frozenset({("D", q, self.index.path_of(mod), 0)})
        holder = self.class_of(mod, f, e[1], cls, depth + 1)
        if holder is None:
            return UNK
        return self.member(holder, e[2], depth + 1)

    def member(self, cls_key: str, attr: str, depth: int) -> frozenset:
        """What `obj.<attr>` holds for an object of class `cls_key` (or a subclass): a
        property's returns, or every value stored to `self.<attr>` / registered under that
        name by the class's methods."""
        key = ("member", cls_key, attr)
        if key in self._memo:
            return self._memo[key]
        if key in self._active:
            self._cut.add(key)
            return frozenset()
        self._active.add(key)
        out: set = set()
        try:
            for k in [cls_key, *self.index.subclasses(cls_key)]:
                for mod, mname, mqn in self.index.mro_methods(k):
                    fn = self.index.function(mod, mqn)
                    if fn is None or not fn["params"]:
                        continue
                    if mname == attr and "property" in fn["decos"]:
                        out |= self.returns(mod, mqn, k)
                        continue
                    me = ("n", fn["params"][0])
                    for ex, pos in _stores(fn, me, attr):
                        vals = self.expr(mod, fn, ex, k, depth + 1)
                        out |= _unpack(vals, pos) if pos >= 0 else vals
        finally:
            self._active.discard(key)
        return self._keep(key, frozenset(out) or UNK)

    def _keep(self, key, got: frozenset) -> frozenset:
        """Memoise `got` unless it was computed while an enclosing evaluation was cut short
        (it then lacks that evaluation's contribution and holds only for this query)."""
        self._cut.discard(key)
        if not (self._cut & self._active):
            self._memo[key] = got
        return got

    def class_of(self, mod: str, f: dict | None, e, cls: str | None, depth: int) -> str | None:
        """The project class of the object `e` evaluates to, when the code says: `self`, a
        parameter annotated with a project class, `self.<x>` stored from either or built as
        `Class(...)`."""
        if depth > MAX_DEPTH:
            return None
        if e[0] == "n":
            if f is not None and f["params"] and e[1] == f["params"][0] and f.get("cls"):
                return cls or f"{mod}:{f['cls']}"
            if f is not None and e[1] in f["params"]:
                ann = dict(f["annotations"]).get(e[1], "")
                return self._class_named(mod, ann.strip("\"'")) if ann else None
            return None
        if e[0] == "a":
            holder = self.class_of(mod, f, e[1], cls, depth + 1)
            if holder is None:
                return None
            key = ("holds", holder, e[2])
            if key not in self._memo:
                self._memo[key] = None
                self._memo[key] = self._held_class(holder, e[2], depth + 1)
            return self._memo[key]
        return None

    def _held_class(self, holder: str, attr: str, depth: int) -> str | None:
        found: set[str] = set()
        for mod, _name, mqn in self.index.mro_methods(holder):
            fn = self.index.function(mod, mqn)
            if fn is None or not fn["params"]:
                continue
            for ex, pos in _stores(fn, ("n", fn["params"][0]), attr):
                if pos >= 0:
                    return None
                if ex[0] == "c" and ex[1][0] in ("n", "a"):
                    got = self._class_named(mod, dotted(ex[1]) or "")
                else:
                    got = self.class_of(mod, fn, ex, holder, depth + 1)
                if got is None:
                    return None
                found.add(got)
        return next(iter(found)) if len(found) == 1 else None

    def _class_named(self, mod: str, name: str) -> str | None:
        if not name:
            return None
        q = self.index.qualify(mod, name)
        r = self.index.resolve(q) if q else None
        return f"{r[1]}:{r[2]}" if r is not None and r[0] == "class" else None

    def call(self, mod: str, f: dict | None, e, cls: str | None, depth: int) -> frozenset:
        func, args, kwargs = e[1], e[2], dict(e[3])
        if len(e) > 5 and e[5]:
            return UNK  # `f(*args)`: positions unknown
        d = dotted(func) if func[0] in ("n", "a") else None
        q = self.index.qualify_external(mod, d) if d else ""
        if q == "getattr" and len(args) == 3:
            return self._getattr_default(mod, f, e, cls, depth)
        if q in ("typing.cast", "cast") and len(args) == 2:
            return self.expr(mod, f, args[1], cls, depth + 1)
        if q in ("len", "int"):
            return INT
        if q == "float":
            return FLOAT
        if q.startswith("torch.") and q.count(".") == 1:
            return self._torch(mod, f, e, q[6:], cls, depth)
        if func[0] == "a":
            meth = func[2]
            if meth == "to" and not kwargs.keys() - {"dtype", "non_blocking"}:
                target = kwargs.get("dtype") or (args[0] if args else None)
                if target is not None:
                    vals = self.expr(mod, f, target, cls, depth + 1)
                    if single_dtype(vals):
                        return vals
                return UNK
            if meth in _FIXED_METHODS and not args:
                return frozenset({("D", _FIXED_METHODS[meth], self.index.path_of(mod), e[4])})
            if meth in _KEEP_METHODS:
                recv = self.expr(mod, f, func[1], cls, depth + 1)
                if any(it[0] == "D" for it in recv):
                    return recv
            holder = self.class_of(mod, f, func[1], cls, depth + 1)
            if holder is not None:
                return self.method_returns(holder, meth)
            return UNK
        if func[0] == "n":
            r = self.index.resolve(self.index.qualify(mod, func[1]) or "")
            if r is not None and r[0] == "func":
                return self.returns(r[1], r[2], None)
        return UNK

    def _getattr_default(self, mod, f, e, cls, depth) -> frozenset:
        """`getattr(m, "name", default)` with `m` a module outside the audited tree: the
        default (an assumption: the attribute is not in the tree to read), made at the
        `getattr` (`assumption` says so for that place)."""
        obj, name, default = e[2]
        d = dotted(obj) if obj[0] in ("n", "a") else None
        if d is None or name[0] != "k" or name[1] != "str":
            return UNK
        rec = self.index.record(mod)
        q = rec["imports"].get(d.split(".", 1)[0]) if rec is not None else None
        if q is None or self.index.resolve(q) is not None or q in self.index.module_paths:
            return UNK  # not an imported module, or one the tree holds
        got = single_dtype(self.expr(mod, f, default, cls, depth + 1))
        if got is None:
            return UNK
        where = (self.index.path_of(mod), e[4])
        self.assumptions[where] = f"`{d}.{name[2]}` is outside the tree: taken as its default {got}"
        return frozenset({("D", got, *where)})

    def assumed_for(self, vals: frozenset) -> list[str]:
        """The assumptions the dtype items of `vals` rest on."""
        return sorted(
            {
                self.assumptions[it[2:4]]
                for it in vals
                if it[0] == "D" and it[2:4] in self.assumptions
            }
        )

    def _torch(self, mod, f, e, fn: str, cls, depth) -> frozenset:
        args, kwargs = e[2], dict(e[3])
        where = (self.index.path_of(mod), e[4])
        if "dtype" in kwargs:
            vals = self.expr(mod, f, kwargs["dtype"], cls, depth + 1)
            got = single_dtype(vals)
            return frozenset({("D", got, *where)}) if got else UNK
        if fn.endswith("_like") and args:
            return self.expr(mod, f, args[0], cls, depth + 1)
        if fn == "arange":
            parts = [self.expr(mod, f, a, cls, depth + 1) for a in args]
            if parts and all(p == INT for p in parts):
                return frozenset({("D", "torch.int64", *where)})
            return UNK
        if fn == "div":
            if "rounding_mode" not in kwargs or len(args) != 2:
                return UNK  # true division: a floating result
            fn = "floor_divide"
        if fn in _ELEMENTWISE:
            vals: frozenset = frozenset()
            for a in args:
                part = self.expr(mod, f, a, cls, depth + 1)
                if a[0] == "t":  # `torch.cat([a, b])`: the elements
                    part = frozenset(x for it in part for x in _items(it))
                vals = _promote(vals, part) if vals else part
            return vals if any(it[0] == "D" for it in vals) else UNK
        return UNK

    def returns(self, mod: str, qn: str, cls: str | None) -> frozenset:
        key = ("ret", mod, qn, cls)
        if key in self._memo:
            return self._memo[key]
        if key in self._active or len(self._active) > MAX_DEPTH:
            return UNK
        f = self.index.function(mod, qn)
        if f is None:
            return UNK
        self._active.add(key)
        out: set = set()
        try:
            for st in f["body"]:
                if st[0] == "ret":
                    out |= self.expr(mod, f, st[4], cls, 1) if st[4] else NONE
        finally:
            self._active.discard(key)
        got = frozenset(out) or NONE
        self._memo[key] = got
        return got


def _promote(a: frozenset, b: frozenset) -> frozenset:
    """The dtype of an elementwise op of `a` and `b` (see the module docstring)."""
    if not a or not b:
        return a or b  # a binding being evaluated (`x = x + y`) stands for the others
    ta = {it[1] for it in a if it[0] == "D"}
    tb = {it[1] for it in b if it[0] == "D"}
    if not ta and not tb:
        if ("F",) in a or ("F",) in b:
            return FLOAT
        return INT if a == INT and b == INT else UNK
    if ta and tb:
        return (a | b) if single_dtype(a) and single_dtype(a) == single_dtype(b) else UNK
    tensors, other = (a, b) if ta else (b, a)
    dtype = single_dtype(tensors)
    if dtype is None or any(it[0] in ("F", "T", "N") for it in other):
        return UNK
    if other == INT or dtype == "torch.int64":
        # int64 is the widest integer type: only a floating operand changes it
        return tensors
    return UNK


def _items(it) -> frozenset:
    if it[0] == "T":
        return frozenset().union(*it[1])
    return frozenset({it})


def _unpack(vals: frozenset, pos: int) -> frozenset:
    out: set = set()
    for it in vals:
        if it[0] == "T":
            out |= it[1][pos] if pos < len(it[1]) else {("?",)}
        elif it[0] != "N":
            out.add(("?",))
    return frozenset(out) or UNK


def _binds(f: dict, name: str) -> list:
    """(expression, position) of every binding of local `name` in `f` (position -1 for a
    plain target, i for the i-th name of a tuple target); a `for`, augmented or other
    binding makes it unknown."""
    out = []
    for st in f["body"]:
        if st[0] == "assign":
            for tgt in st[4]:
                if tgt == ("n", name):
                    out.append((st[5], -1))
                elif tgt[0] == "t":
                    for i, sub in enumerate(tgt[2]):
                        if sub == ("n", name):
                            out.append((st[5], i))
                        elif sub[0] == "star" and sub[1] == ("n", name):
                            out.append((("?",), -1))
        elif st[0] in ("for", "aug") and st[4] == ("n", name):
            out.append((("?",), -1))
        elif st[0] == "def" and st[4] == name:
            out.append((("?",), -1))
    return out


def _stores(f: dict, me, attr: str):
    """(expression, position) of each store to `<me>.<attr>` in `f`, and of each
    `<me>.register_buffer("<attr>", t)` / `register_parameter`."""
    for st in f["body"]:
        if st[0] == "assign":
            for tgt in st[4]:
                if tgt == ("a", me, attr):
                    yield st[5], -1
                elif tgt[0] == "t":
                    for i, sub in enumerate(tgt[2]):
                        if sub == ("a", me, attr):
                            yield st[5], i
        elif st[0] == "aug" and st[4] == ("a", me, attr):
            yield ("?",), -1
        if st[0] in ("expr", "assign"):
            e = st[4] if st[0] == "expr" else st[5]
            if (
                isinstance(e, tuple)
                and e[0] == "c"
                and e[1][0] == "a"
                and e[1][1] == me
                and e[1][2] in ("register_buffer", "register_parameter")
                and len(e[2]) >= 2
                and e[2][0] == ("k", "str", attr)
            ):
                yield e[2][1], -1
