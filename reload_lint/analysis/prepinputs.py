"""Inputs of a reused preparation (issue 17, class 2 "storage reused through a helper").

A post-load may build a prepared object (packed weights, a swizzled layout) from tensors it
first puts on the object, then hand the result to a storage-reuse helper
(`contracts.reuse_helper`: `cur = reuse(cur, new)` copies `new` into the storage the first
load kept and returns that storage). The shape, in a method of the class that stores:

    self.cfg.scale = layer.w_scale          # or `1.0 / layer.x`, or a cached `torch.ones`
    prepared = self._prepare(...)           # reads self.cfg.scale (directly, through
                                            # properties, or in methods it calls)
    prepared = self._keep(layer, prepared)  # passes it as the replacement of a reuse helper
                                            # (directly, or through a method that does)

On an update the preparation runs again from the new inputs and its result is copied into the
first load's storage: what graphs captured is refreshed in place. The inputs themselves are
not what the captured forward reads. A finding for such an input is dropped when, in addition,
the apply-time reader search of its class found no reader (readers.py); a store some apply or
forward path reads stays reported, reader and all.

Mixed into Analyzer (analysis/interp.py). Reads records only: nothing is interpreted again.
"""

from __future__ import annotations

from reload_lint.index.extract import dotted

_DEPTH = 4  # method calls followed from the preparation (self.m(...), properties)


def _self_chains(e, me: str, out: list) -> None:
    """Attribute chains rooted at `me` in expression `e` (`self.a.b` -> ("a", "b")), and the
    methods it calls on `me` (`self.m(...)` -> ("()", "m"))."""
    if not isinstance(e, tuple) or not e:
        return
    if not isinstance(e[0], str):  # a tuple of expressions (arguments, targets)
        for part in e:
            _self_chains(part, me, out)
        return
    if e[0] == "a":
        parts = []
        cur = e
        while isinstance(cur, tuple) and cur and cur[0] == "a":
            parts.append(cur[2])
            cur = cur[1]
        if cur == ("n", me):
            out.append(tuple(reversed(parts)))
            return
        _self_chains(cur, me, out)
        return
    if e[0] == "c" and len(e) >= 3:
        fn = e[1]
        if isinstance(fn, tuple) and fn[:1] == ("a",) and fn[1] == ("n", me):
            out.append(("()", fn[2]))
        else:
            _self_chains(fn, me, out)
        for part in e[2:]:
            _self_chains(part, me, out)
        return
    for part in e[1:]:
        _self_chains(part, me, out)


def _target_chain(target: str) -> tuple[str, ...] | None:
    """`self.cfg._w1.scale` -> ("cfg", "_w1", "scale"); `self._cache[dev]` -> ("_cache",)."""
    if not target.startswith("self."):
        return None
    parts = target.split("[", 1)[0].split(".")[1:]
    return tuple(parts) if parts and all(p.isidentifier() for p in parts) else None


class PrepInputMixin:
    """Drops stores that only feed a reused preparation; uses Analyzer state."""

    def drop_prep_inputs(self) -> None:
        for key, fd in list(self.findings.items()):
            if fd.reader is not None or fd.rule.startswith("RL9") or fd.rule in ("RL108",):
                continue
            chain = _target_chain(fd.target)
            store_cls = self._store_site.get(key, (None, None, ()))[0]
            if chain is None or not store_cls:
                continue
            for prep in self.reused_preparations(store_cls):
                if any(r[: len(chain)] == chain for r in self.prep_reads(store_cls, prep[0])):
                    p, g, helper, path, line = prep
                    self.dropped[key] = (
                        f"reused storage: `{fd.target}` is an input of {p}, whose result "
                        f"{g} hands to the storage-reuse helper {helper} ({path}:{line}): "
                        "on an update it is copied into the first load's storage, and no "
                        "apply-time read of the input was found"
                    )
                    del self.findings[key]
                    break

    # ------------------------------------------------------------------ the shape
    def reused_preparations(self, cls_key: str) -> list[tuple]:
        """(preparation method, method that keeps its result, reuse helper, path, line) for
        the methods of `cls_key` (its MRO) that pass a `self.<prep>(...)` result as the
        replacement of a storage-reuse helper, directly or through a method of the class."""
        memo = self.__dict__.setdefault("_reused_preps", {})
        if cls_key in memo:
            return memo[cls_key]
        memo[cls_key] = out = []
        for mod, _name, qn in self.index.mro_methods(cls_key):
            f = self.index.function(mod, qn)
            if f is None or not f["params"]:
                continue
            me = f["params"][0]
            prepared: dict[str, str] = {}  # local -> the preparation method that made it
            for st in f["body"]:
                value = st[5] if st[0] == "assign" else st[4] if st[0] == "expr" else None
                if value is None:
                    continue
                kept = self._reuse_call(mod, cls_key, me, value, prepared)
                if kept is not None:
                    helper, path, line = kept
                    prep = prepared[_passed(value, prepared)[0]]
                    out.append((prep, qn, helper, path, line))
                    continue
                if st[0] != "assign":
                    continue
                for t in st[4]:
                    if t[0] != "n":
                        continue
                    fn = value[1] if value[0] == "c" else None
                    if fn is not None and fn[0] == "a" and fn[1] == ("n", me):
                        prepared[t[1]] = fn[2]
                    else:
                        prepared.pop(t[1], None)  # re-bound to something else
        return out

    def _reuse_call(self, mod, cls_key, me, value, prepared) -> tuple | None:
        """(helper qualname, path, line of the helper call) when call `value` hands a prepared local to a reuse helper
        as its replacement (directly, or through a method of `cls_key` that does)."""
        if value[0] != "c" or not prepared:
            return None
        fn = value[1]
        passed = _passed(value, prepared)
        if passed is None:
            return None
        local, pos, kw = passed
        if fn[0] == "a" and fn[1] == ("n", me):
            found = self.index.lookup_method(cls_key, fn[2])
            g = self.index.function(*found) if found else None
            if g is None or not g["params"]:
                return None
            params = list(g["params"][1:])
            param = (
                kw
                if kw in params
                else params[pos]
                if pos is not None and pos < len(params)
                else None
            )
            if param is None:
                return None
            for st in g["body"]:
                value2 = st[5] if st[0] == "assign" else st[4] if st[0] == "expr" else None
                if value2 is None or value2[0] != "c":
                    continue
                hit = self._helper_replaces(found[0], value2, param)
                if hit:
                    return hit, self.index.path_of(found[0]), value2[4]
            return None
        hit = self._helper_replaces(mod, value, local)
        return (hit, self.index.path_of(mod), value[4]) if hit else None

    def _helper_replaces(self, mod: str, call, name: str) -> str | None:
        """The qualified name of the reuse helper `call` calls with `name` as replacement."""
        fn = call[1]
        d = dotted(fn) if fn[0] in ("n", "a") else None
        q = self.index.qualify(mod, d) if d else None
        r = self.index.resolve(q) if q else None
        if not r or r[0] != "func":
            return None
        g = self.index.function(r[1], r[2])
        shape = self.reuse_shape(r[1], r[2], g) if g else None
        if shape is None:
            return None
        params = [p for p in g["params"] if p not in ("self", "cls")]
        args = list(call[2])
        kw = dict(call[3]) if len(call) > 3 else {}
        i = params.index(shape[1])
        given = kw.get(shape[1], args[i] if i < len(args) else None)
        return f"{r[1]}.{r[2]}" if given == ("n", name) else None

    # ------------------------------------------------------------------ what it reads
    def prep_reads(self, cls_key: str, method: str) -> set[tuple]:
        """Attribute chains on `self` that `method` of `cls_key` reads, through the methods it
        calls on `self` and the properties it reads (of the class, and of the objects its
        attributes hold), `_DEPTH` deep."""
        memo = self.__dict__.setdefault("_prep_reads", {})
        key = (cls_key, method)
        if key in memo:
            return memo[key]
        memo[key] = out = set()
        seen: set = set()
        work = [(cls_key, method, 0)]
        while work:
            ck, name, depth = work.pop()
            if (ck, name) in seen or depth > _DEPTH:
                continue
            seen.add((ck, name))
            found = self.index.lookup_method(ck, name)
            f = self.index.function(*found) if found else None
            if f is None or not f["params"]:
                continue
            chains: list = []
            for st in f["body"]:
                for part in st[4:]:
                    _self_chains(part, f["params"][0], chains)
            for c in chains:
                if c[0] == "()":
                    work.append((ck, c[1], depth + 1))
                    continue
                for full in self._expand(ck, c, depth):
                    out.add(full)
        return out

    def _expand(self, ck: str, chain: tuple, depth: int) -> list[tuple]:
        """`chain` with its property reads replaced by what the property returns: on the
        class itself (`self.w_scale` -> `self.cfg.w_scale`), then on the class an attribute
        holds (`cfg.w_scale` -> `cfg._w.scale`)."""
        out = [chain]
        if depth > _DEPTH or not chain:
            return out
        ret = self._property_chain(ck, chain[0])
        if ret is not None:
            out += self._expand(ck, ret + chain[1:], depth + 1)
        if len(chain) >= 2:
            for held in self._holds(ck, chain[0]):
                ret = self._property_chain(held, chain[1])
                if ret is not None:
                    for sub in self._expand(held, ret + chain[2:], depth + 1):
                        out.append((chain[0], *sub))
        return out

    def _property_chain(self, ck: str, name: str) -> tuple | None:
        """What property `name` of class `ck` returns, as a chain on its `self`."""
        found = self.index.lookup_method(ck, name)
        f = self.index.function(*found) if found else None
        if f is None or "property" not in f["decos"] or not f["params"]:
            return None
        rets = [st[4] for st in f["body"] if st[0] == "ret" and st[4] is not None]
        if len(rets) != 1:
            return None
        chains: list = []
        _self_chains(rets[0], f["params"][0], chains)
        if len(chains) != 1 or chains[0][0] == "()" or rets[0][0] != "a":
            return None
        return chains[0]

    def _holds(self, ck: str, attr: str) -> list[str]:
        """Classes an attribute of `ck` holds: what the analysis saw stored there, or the
        annotation of the constructor parameter it is set from (`self.cfg = cfg`)."""
        found = list(self._held_classes(ck, attr))
        if found:
            return found
        for k in self.index.mro(ck):
            found_init = self.index.lookup_method(k, "__init__")
            f = self.index.function(*found_init) if found_init else None
            if f is None or not f["params"]:
                continue
            ann = dict(f["annotations"])
            for st in f["body"]:
                if st[0] != "assign" or st[5][0] != "n" or st[5][1] not in ann:
                    continue
                if any(t == ("a", ("n", f["params"][0]), attr) for t in st[4]):
                    q = self.index.qualify(found_init[0], ann[st[5][1]].strip("'\""))
                    r = self.index.resolve(q) if q else None
                    if r and r[0] == "class":
                        return [f"{r[1]}:{r[2]}"]
        return []


def _passed(call, prepared: dict) -> tuple | None:
    """(local, position or None, keyword or None) of the first prepared local a call passes."""
    for i, a in enumerate(call[2]):
        if a[0] == "n" and a[1] in prepared:
            return a[1], i, None
    for k, a in call[3] if len(call) > 3 else ():
        if a[0] == "n" and a[1] in prepared:
            return a[1], None, k
    return None
