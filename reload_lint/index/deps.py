"""What the analysis read from each module record (the finer-grained early cutoff, cache.py).

A run's findings are a function of what the analysis *observed* of the records: the entries it
looked up (present or not), the tables it enumerated, and the derived views (the roots of a
module, the functions reading an attribute, ...) it asked for. The analysis is deterministic
given those observations, so when a file changes but every observation it gave is the same on
its new record, a full run over the new tree would make the same observations in the same
order and give the same result.

Every read goes through a record wrapped here (`Reads.wrap`): its tables are `_Table`s, which
note each key looked up (a miss too) and note the whole table when it is iterated, sized or
compared; top-level keys are noted likewise. The places in the analysis that enumerate a table
ask `ProjectIndex.view` for a named view instead (`VIEWS`: pure functions of the raw record and
the view's parameters), so what they depend on is the filtered result, not the whole table:
appending a function no root reaches changes no view and no looked-up entry.

`Reads.observed(rel, raw)` turns what was read of a file into its observations and one digest
of all their values, kept in the pack with the result; `unchanged(raw, observed)` recomputes
each observation on a new record and compares. Digests are of `marshal` version 2 (no references, no interning flags: equal
values of the same types give equal bytes; records hold only str/int/float/bool/None/bytes/
tuple/list/dict); a value marshal cannot write gets no digest and never matches.
"""

from __future__ import annotations

import hashlib
import marshal
import pickle

# a record's tables: looked up by key, each lookup noted on its own
TABLES = frozenset(
    ("functions", "classes", "imports", "globals", "self_registered", "self_buffers")
)
WHOLE = ("*",)  # a table (or the record) read as a whole; never a key of any table
TOP = "^"  # observation kind: a top-level key of the record
VIEW = "v"  # observation kind: a named view
_ABSENT = b"-"  # what a key that is not there reads as (a present one: b"+" and its digest)


def digest(value) -> bytes | None:
    try:
        data = marshal.dumps(value, 2)
    except (ValueError, RecursionError):
        return None
    return hashlib.blake2b(data, digest_size=12).digest()


class ReadOnlyRecord(TypeError):
    pass


def _readonly(self, *a, **k):
    raise ReadOnlyRecord("module records are read-only during the analysis")


class _Table(dict):
    """One table of a record (functions, classes, imports, globals, ...), noting what is read."""

    __slots__ = ("_seen",)

    def __getitem__(self, k):
        self._seen.add(k)
        return dict.__getitem__(self, k)

    def get(self, k, default=None):
        self._seen.add(k)
        return dict.get(self, k, default)

    def __contains__(self, k):
        self._seen.add(k)
        return dict.__contains__(self, k)

    def __iter__(self):
        self._seen.add(WHOLE)
        return dict.__iter__(self)

    def keys(self):
        self._seen.add(WHOLE)
        return dict.keys(self)

    def values(self):
        self._seen.add(WHOLE)
        return dict.values(self)

    def items(self):
        self._seen.add(WHOLE)
        return dict.items(self)

    def __len__(self):
        self._seen.add(WHOLE)
        return dict.__len__(self)

    def __reversed__(self):
        self._seen.add(WHOLE)
        return dict.__reversed__(self)

    def __eq__(self, other):
        self._seen.add(WHOLE)
        return dict.__eq__(self, other)

    def __ne__(self, other):
        self._seen.add(WHOLE)
        return dict.__ne__(self, other)

    def __repr__(self):
        self._seen.add(WHOLE)
        return dict.__repr__(self)

    def copy(self):
        self._seen.add(WHOLE)
        return dict(dict.items(self))

    def __or__(self, other):
        self._seen.add(WHOLE)
        return dict(dict.items(self)) | other

    def __ror__(self, other):
        self._seen.add(WHOLE)
        return other | dict(dict.items(self))

    def __reduce_ex__(self, protocol):
        self._seen.add(WHOLE)
        return (dict, (dict(dict.items(self)),))

    __hash__ = None
    __setitem__ = __delitem__ = pop = popitem = setdefault = update = clear = _readonly
    __ior__ = _readonly


class _Record(_Table):
    """A record's top level: its tables come back as `_Table`s (which note their own reads);
    any other key (`registered`, `buffers`, ...) is noted when read."""

    __slots__ = ()

    def __getitem__(self, k):
        if k not in TABLES:
            self._seen.add(k)
        return dict.__getitem__(self, k)

    def get(self, k, default=None):
        if k not in TABLES:
            self._seen.add(k)
        return dict.get(self, k, default)

    def __contains__(self, k):
        if k not in TABLES:
            self._seen.add(k)
        return dict.__contains__(self, k)


class Reads:
    """rel -> what the analysis read of that file's record: {TOP: keys, table: keys, VIEW:
    {(name, params): value}}."""

    def __init__(self):
        self.by_rel: dict[str, dict] = {}
        self._params: dict[tuple, tuple] = {}  # view parameters, one object each (pickle memo)

    def _log(self, rel: str) -> dict:
        log = self.by_rel.get(rel)
        if log is None:
            log = self.by_rel[rel] = {}
        return log

    def wrap(self, rel: str, raw: dict) -> dict:
        """The record the analysis reads: `raw`'s public keys, its tables as `_Table`s."""
        log = self._log(rel)
        rec = _Record()
        for k, v in raw.items():
            if k.startswith("_"):  # the engine's own notes (speculation), never analysed
                continue
            if k in TABLES and type(v) is dict:
                t = _Table()
                dict.update(t, v)
                t._seen = log.setdefault(k, set())
                v = t
            dict.__setitem__(rec, k, v)
        rec._seen = log.setdefault(TOP, set())
        return rec

    def note_view(self, rel: str, name: str, params: tuple, value) -> None:
        """The analysis used `value`, view `name` of `rel`'s record with `params`."""
        params = self._params.setdefault(params, params)
        self._log(rel).setdefault(VIEW, {})[(name, params)] = value

    def observed(self, rel: str, raw: dict) -> bytes | None:
        """What was read of `rel` (its record `raw`) as kept with a result: the observations,
        grouped by kind, and one digest of all their values; None when a value has no digest
        (the file's whole extraction result must then match)."""
        log = self.by_rel.get(rel, {})
        h = hashlib.blake2b(digest_size=16)
        kinds: dict = {}
        cache: dict = {}
        for kind, keys in log.items():
            keys = tuple(keys)
            for key in keys:
                if kind == VIEW:  # the value the analysis used (views are pure)
                    d = digest(log[VIEW][key])
                    d = None if d is None else b"+" + d
                else:
                    d = _evaluate(raw, kind, key, cache)
                if d is None:
                    return None
                h.update(d)
            kinds[kind] = keys
        return pickle.dumps((kinds, h.digest()), protocol=pickle.HIGHEST_PROTOCOL)


def _public(raw: dict) -> dict:
    return {k: v for k, v in raw.items() if not k.startswith("_")}


def _present(value) -> bytes | None:
    d = digest(value)
    return None if d is None else b"+" + d


class _Absent:
    """What an observation of a key that is not there reads (one object: equal to itself)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()


class Unobservable(Exception):
    """An observation that cannot be made on a record: an unknown view, a table that is not
    one."""


def read_observation(raw: dict, kind: str, key, cache: dict):
    """The value observation (`kind`, `key`) reads on `raw`; ABSENT for a key that is not
    there. Raises Unobservable when it cannot be made."""
    if kind == VIEW:
        name, params = key
        fn = VIEWS.get(name)
        if fn is None:
            raise Unobservable(name)
        return fn(raw, cache, *params)
    if kind == TOP:
        if key == WHOLE:
            return _public(raw)
        if isinstance(key, str) and key.startswith("_"):
            return ABSENT
        return raw[key] if key in raw else ABSENT
    table = raw.get(kind)
    if not isinstance(table, dict):
        raise Unobservable(kind)
    if key == WHOLE:
        return table
    return table[key] if key in table else ABSENT


def _evaluate(raw: dict, kind: str, key, cache: dict) -> bytes | None:
    """One observation made on `raw`: b"+" and the digest of the value read, b"-" for a key
    that is not there (a prefix-free code: the concatenation of a file's observations is
    unambiguous), None when the value has no digest."""
    try:
        value = read_observation(raw, kind, key, cache)
    except Unobservable:
        return None
    return _ABSENT if value is ABSENT else _present(value)


def observations(observed: bytes) -> dict:
    """kind -> the keys of the observations kept in `observed` (Reads.observed)."""
    return pickle.loads(observed)[0]


def reobserved(raw: dict, observed: bytes) -> bytes | None:
    """The observations kept in `observed`, made again on `raw` (a record the same run would
    read through the same keys: the file's record with its lines moved, shiftcut.py), in
    `Reads.observed`'s form; None when a value has no digest."""
    kinds, _ = pickle.loads(observed)
    h = hashlib.blake2b(digest_size=16)
    cache: dict = {}
    for kind, keys in kinds.items():
        for key in keys:
            d = _evaluate(raw, kind, key, cache)
            if d is None:
                return None
            h.update(d)
    return pickle.dumps((kinds, h.digest()), protocol=pickle.HIGHEST_PROTOCOL)


def unchanged(raw: dict, observed: bytes) -> bool:
    """Whether every observation kept in `observed` gives on `raw` what it gave when made."""
    kinds, want = pickle.loads(observed)
    h = hashlib.blake2b(digest_size=16)
    cache: dict = {}
    for kind, keys in kinds.items():
        for key in keys:
            d = _evaluate(raw, kind, key, cache)
            if d is None:
                return False
            h.update(d)
    return h.digest() == want


# ---- views: what the analysis's enumerations of a record's tables really use -------------
# Each is a pure function of the raw record and its parameters (hashable, marshal-able);
# `cache` is a per-record dict for indexes shared between calls. The analysis uses the value a
# view returns and nothing else of the enumeration, so an edit that leaves it equal leaves the
# analysis where it was.


def is_apply_name(name: str, apply_names: tuple) -> bool:
    """Apply/forward-path methods: the configured names and their `forward*`/`apply*` kin."""
    return name in apply_names or name.lstrip("_").startswith(("forward", "apply"))


def is_entry_name(name: str, apply_names: tuple) -> bool:
    """Apply/forward entry points: configured names and public `apply*`/`forward*`."""
    return name in apply_names or name.startswith(("forward", "apply"))


def _v_roots(rec, cache, names):
    """(qn, function) of the module-level or class-level functions named in `names` (roots),
    by qualname."""
    return tuple(
        (qn, f)
        for qn, f in sorted(rec["functions"].items())
        if f["name"] in names and not f["parent"]
    )


def _v_patched(rec, cache, names):
    """(qn, function, target) of the module-level functions that replace a method named in
    `names` on a class (`@register_patch("pkg.Cls.process_weights_after_loading")`,
    `Cls.process_weights_after_loading = fn`): post-load hooks a plugin patches in. With no
    names: every method patched onto a class."""
    out = []
    for qn, f in sorted(rec["functions"].items()):
        for target in f.get("patches", ()):
            owner, _, attr = target.rpartition(".")
            if (not names or attr in names) and owner and owner.rsplit(".", 1)[-1][:1].isupper():
                out.append((qn, f, target))
    return tuple(out)


def _v_apply_guarded(rec, cache, apply_names):
    """(qn, method) of the apply/forward methods that carry a lazy guard, by qualname."""
    return tuple(
        (qn, f)
        for qn, f in sorted(rec["functions"].items())
        if is_apply_name(f["name"], apply_names) and f["guarded"] and f["cls"]
    )


def _v_entries(rec, cache, apply_names):
    """(qn, function) of the module-level apply/forward entry functions, by qualname."""
    return tuple(
        (qn, f)
        for qn, f in sorted(rec["functions"].items())
        if not f["cls"] and not f["parent"] and is_entry_name(f["name"], apply_names)
    )


def _v_named(rec, cache, names):
    """The functions whose simple name is in `names`, in record order."""
    return tuple(f for f in rec["functions"].values() if f["name"] in names)


def _v_flag_tests(rec, cache):
    """The state flags (attribute names) some function of the module tests, sorted (the
    analysis uses them as a set)."""
    tested = {
        st[5]
        for g in rec["functions"].values()
        for st in g["body"]
        if st[0] in ("flagon", "flagexit")
    }
    return tuple(sorted(tested, key=repr))


def _flag_value(e) -> object:
    """What `x.attr = e` leaves in a state flag: True/False, "nonelit" (None), "obj"."""
    if e[0] == "n" and e[1] in ("True", "False", "None"):
        return {"True": True, "False": False, "None": "nonelit"}[e[1]]
    if e[0] == "k":
        if e[1] == "none" or e[2] == "None":
            return "nonelit"
        if e[1] == "bool":
            return e[2] == "True"
        if e[1] == "int":
            return e[2] != "0"
    return "obj"


def _dict_pop(c) -> tuple | None:
    """(object, attribute) for `vars(x).pop("attr", ...)` / `x.__dict__.pop("attr", ...)`."""
    fn, args = c[1], c[2]
    if fn[0] != "a" or fn[2] != "pop" or not args or args[0][:2] != ("k", "str"):
        return None
    d = fn[1]
    if d[0] == "c" and d[1] == ("n", "vars") and len(d[2]) == 1:
        return d[2][0], args[0][2]
    if d[0] == "a" and d[2] == "__dict__":
        return d[1], args[0][2]
    return None


def _v_flag_writes(rec, cache, attr):
    """(qn, name, class qualname, on its own self, line, value) of every write of attribute
    `attr` with a constant (`x.attr = False`, `setattr(x, "attr", None)`) and every delete
    (`del x.attr`, `delattr(x, "attr")`, `vars(x).pop("attr", None)`: value "del"), in record
    order: where a state flag may be set back."""
    idx = cache.get("flag_writes")
    if idx is None:
        idx = {}
        for qn, f in rec["functions"].items():
            me = f["params"][0] if f["cls"] and f["params"] else None
            for st in f["body"]:
                hits: list = []
                if st[0] == "assign":
                    hits = [(t[1], t[2], _flag_value(st[5])) for t in st[4] if t[0] == "a"]
                elif st[0] == "del" and st[4][0] == "a":
                    hits = [(st[4][1], st[4][2], "del")]
                elif st[0] == "expr" and st[4][0] == "c" and _dict_pop(st[4]) is not None:
                    hits = [(*_dict_pop(st[4]), "del")]  # `vars(x).pop("attr", None)`
                elif st[0] == "expr" and st[4][0] == "c" and st[4][1][0] == "n":
                    fn, args = st[4][1][1], st[4][2]
                    named = len(args) >= 2 and args[1][0] == "k" and args[1][1] == "str"
                    if fn == "delattr" and named:
                        hits = [(args[0], args[1][2], "del")]
                    elif fn == "setattr" and named and len(args) >= 3:
                        hits = [(args[0], args[1][2], _flag_value(args[2]))]
                for base, name, value in hits:
                    if value == "obj":
                        continue  # a computed value: not a flag write
                    on_self = bool(me) and base == ("n", me)
                    idx.setdefault(name, []).append(
                        (qn, f["name"], f["cls"] or "", on_self, st[1], value)
                    )
        cache["flag_writes"] = idx
    return tuple(idx.get(attr, ()))


def _v_readers(rec, cache, attr, skip):
    """The functions (record order) not named in `skip` that read attribute `attr`."""
    idx = cache.get(("readers", skip))
    if idx is None:
        idx = {}
        for f in rec["functions"].values():
            if f["name"] in skip:
                continue
            seen = set()
            for a, _ln in f["reads"]:
                if a not in seen:  # each attribute once per function, in first-read order
                    seen.add(a)
                    idx.setdefault(a, []).append(f)
        cache[("readers", skip)] = idx
    return tuple(idx.get(attr, ()))


def reads_attr(f: dict, attr: str) -> bool:
    """Whether `f` reads `attr` other than by storing to it (`x.attr = ...` is recorded as a
    read of the target too)."""
    lines = {ln for a, ln in f["reads"] if a == attr}
    if not lines:
        return False
    for st in f["body"]:
        if st[0] == "assign" and any(t[0] == "a" and t[2] == attr for t in st[4]):
            lines -= set(range(st[1], (st[3] if len(st) > 3 else st[1]) + 1))
    return bool(lines)


def _v_reads(rec, cache, attr):
    """(qn, class qualname) of the functions that read `attr` other than by storing it, in
    record order."""
    return tuple((qn, f["cls"]) for qn, f in rec["functions"].items() if reads_attr(f, attr))


def calls_in(e, out: list) -> None:
    """Every call expression (`("c", func, args, kwargs, line, star)`) inside `e`."""
    if not isinstance(e, tuple) or not e:
        return
    if e[0] == "c" and len(e) >= 5:
        out.append(e)
    for x in e[1:]:
        if isinstance(x, tuple):
            calls_in(x, out)


def _v_callers(rec, cache, name):
    """Qualnames of the functions that call something named `name` (`f(...)`,
    `mod.f(...)`), in record order."""
    idx = cache.get("callers")
    if idx is None:
        idx = {}
        for qn, g in rec["functions"].items():
            calls: list = []
            for st in g["body"]:
                for part in st[4:]:
                    calls_in(part, calls)
            for c in calls:
                fn = c[1]
                head = fn[2] if fn[0] == "a" else fn[1] if fn[0] == "n" else None
                if isinstance(head, str):
                    qns = idx.setdefault(head, [])
                    if qn not in qns:
                        qns.append(qn)
        cache["callers"] = idx
    return tuple(idx.get(name, ()))


def _v_class_names(rec, cache):
    """The record's class qualnames, in record order."""
    return tuple(rec["classes"])


def _v_registrations(rec, cache):
    """(names registered on a handed module, buffer names, (class key, dotted callee) of each
    `self.<x> = Callee(...)` in a class's methods): the module-wide registration tables."""
    return (
        tuple(rec.get("registered", ())),
        tuple(rec.get("buffers", ())),
        tuple(builds_on_self(rec)),
    )


def _v_buffer_kinds(rec, cache):
    """(buffer names the module only ever registers as None, only with `persistent=False`)."""
    return (tuple(rec.get("none_buffers", ())), tuple(rec.get("nonpersistent_buffers", ())))


def builds_on_self(rec: dict) -> list[tuple[str, str]]:
    """(class key, dotted callee) for `self.<x> = Callee(...)` in the methods of the record's
    classes (CamelCase callees: classes)."""
    from reload_lint.index.extract import dotted

    out = []
    mod = rec["module"]
    for cls_qn, crec in rec["classes"].items():
        for mqn in crec["methods"].values():
            f = rec["functions"].get(mqn)
            if f is None or not f["params"]:
                continue
            me = f["params"][0]
            for st in f["body"]:
                if st[0] != "assign" or st[5][0] != "c" or st[5][1][0] not in ("n", "a"):
                    continue
                if not any(t[0] == "a" and t[1] == ("n", me) for t in st[4]):
                    continue
                d = dotted(st[5][1])
                if d and d.rsplit(".", 1)[-1].lstrip("_")[:1].isupper():
                    out.append((f"{mod}:{cls_qn}", d))
    return out


def _v_class_consts(rec, cache, cls_qn):
    """(name, text) of the string constants in class `cls_qn`'s body, in order."""
    cls = rec["classes"].get(cls_qn)
    return cls.get("consts", ()) if cls is not None else ()


# methods that return a view of their receiver's storage (a layout change, no copy for the
# contiguous inputs such an assertion is made on)
_VIEW_METHODS = frozenset(
    ("reshape", "view", "view_as", "flatten", "unflatten", "squeeze", "unsqueeze", "detach")
)


def _strip_views(e) -> tuple:
    """`x` of `x.reshape(...)`, `x.view(...).squeeze()`, `x.data`, ...: the tensor whose
    storage the expression views."""
    while True:
        if e[0] == "c" and e[1][0] == "a" and e[1][2] in _VIEW_METHODS:
            e = e[1][1]
        elif e[0] == "a" and e[2] == "data":
            e = e[1]
        else:
            return e


def _v_alias_asserts(rec, cache):
    """(callee spelling, function qualname, line) for each `assert r.data_ptr() ==
    x.data_ptr()` (either order) where `r` is a local name last bound before the assertion to
    `callee(x, ...)` or `callee(<a view of x>, ...)`: the module states that the callee's
    result shares its first argument's storage (analysis/externals.py)."""
    from reload_lint.index.extract import dotted

    out = []
    for qn, line, a, b in rec.get("storage_asserts", ()):
        f = rec["functions"].get(qn)
        if f is None:
            continue
        for r, x in ((a, b), (b, a)):
            if r[0] != "n":
                continue
            bound = None
            for st in f["body"]:
                if st[0] == "assign" and st[1] < line and st[4] == (r,):
                    bound = st[5]
            if bound is None or bound[0] != "c" or not bound[2] or bound[5]:
                continue  # not a call, no first argument, or a `*args` one
            if bound[1][0] not in ("n", "a"):
                continue
            spelling = dotted(bound[1])
            if spelling and _strip_views(bound[2][0]) == _strip_views(x):
                out.append((spelling, qn, line))
                break
    return tuple(out)


VIEWS = {
    "roots": _v_roots,
    "patched": _v_patched,
    "apply_guarded": _v_apply_guarded,
    "entries": _v_entries,
    "named": _v_named,
    "flag_tests": _v_flag_tests,
    "flag_writes": _v_flag_writes,
    "readers": _v_readers,
    "reads": _v_reads,
    "callers": _v_callers,
    "class_names": _v_class_names,
    "registrations": _v_registrations,
    "buffer_kinds": _v_buffer_kinds,
    "class_consts": _v_class_consts,
    "alias_asserts": _v_alias_asserts,
}
