"""Caches keyed on a weight's storage address: stale after every update.

Inputs: the modules whose text stores into a subscript keyed by `.data_ptr()` or `id(...)`
(engine.py's text facts, `addr_modules`), their function records. Output: RL201 findings.

A kernel that prepares a weight once and keeps it under the weight's address
(`_PREPARED[layer.weight.data_ptr()] = layer.weight.t().contiguous()`, `self._cache[id(w)] =
w.float()`) looks the preparation up again on the next forward. An update keeps that address
on purpose: the layerwise reload copies the new values into the original storage and puts the
original Parameter objects back; SGLang's and `load_weights`' in-place loads write into it. So
the lookup hits, and the forward keeps using what was derived from the first load's weights.

Reported where the cache is filled, in any function that is not a post-load root (a post-load
that re-runs overwrites its own entry): a subscript store whose key is the address of an
attribute chain (`layer.weight`, `self.w13`; or a local bound to that address) and whose value
is computed from that same chain. A cache keyed on an activation (`x.data_ptr()`) or on a
metadata object is not a weight cache and is not reported.

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

from reload_lint.findings import Finding, TraceStep
from reload_lint.rules import RULES
from reload_lint.summaries import torchapi as T

_ADDR_METHODS = ("data_ptr",)


def _attr(e) -> bool:
    """A lowered attribute read `("a", base, name)`."""
    return (
        isinstance(e, tuple)
        and len(e) == 3
        and e[0] == "a"
        and isinstance(e[1], tuple)
        and bool(e[1])
        and isinstance(e[2], str)
    )


class AddressCacheMixin:
    """Uses Analyzer state: index, root_names, contract_for, findings, render."""

    def run_address_caches(self, modules) -> None:
        for mod in sorted(set(modules)):
            self._contained(mod, "address-keyed cache analysis", self._address_module, mod)

    def _address_module(self, mod: str) -> None:
        rec = self.index.record(mod)
        if rec is None:
            return
        # names of imported modules and functions: `torch.ops.x.prep(w)` reads `w`, and
        # `torch.ops.x` is a function's path, not a tensor
        imports = rec.get("imports", {})
        self._addr_imported = frozenset(imports)
        if not any(str(v).split(".", 1)[0] == "torch" for v in imports.values()):
            return  # no tensor code here: an `id()`-keyed memo of other objects
        self._addr_torch = frozenset(k for k, v in imports.items() if str(v).startswith("torch"))
        for qn, f in sorted(rec["functions"].items()):
            if f["name"] in self.root_names:
                continue
            self._address_function(mod, qn, f)

    def _address_of(self, e) -> tuple[str, str] | None:
        """(the attribute chain, how) when `e` is `<chain>.data_ptr()` / `id(<chain>)` (also
        through `.untyped_storage()`, or inside a tuple key)."""
        if not isinstance(e, tuple) or not e:
            return None
        if not isinstance(e[0], str) or e[0] == "t":  # a tuple key: (w.data_ptr(), device)
            for part in e if not isinstance(e[0], str) else e[1:]:
                got = self._address_of(part)
                if got:
                    return got
            return None
        if e[0] != "c" or len(e) < 3 or not _attr(e[1]) and e[1] != ("n", "id"):
            return None
        func = e[1]
        if _attr(func) and func[2] in _ADDR_METHODS:
            recv = func[1]
            if (
                isinstance(recv, tuple)
                and len(recv) > 1
                and recv[0] == "c"
                and _attr(recv[1])
                and recv[1][2] == "untyped_storage"
            ):
                recv = recv[1][1]
            if _attr(recv) and recv[2] == "data":
                recv = recv[1]
            if _attr(recv):
                return self.render(recv), f"`{self.render(e)}`"
            return None
        args = e[2]
        if func == ("n", "id") and isinstance(args, tuple) and len(args) == 1 and _attr(args[0]):
            return self.render(args[0]), f"`id({self.render(args[0])})`"
        return None

    def _address_function(self, mod: str, qn: str, f: dict) -> None:
        path = self.index.path_of(mod)
        keys: dict[str, tuple[str, str, int]] = {}  # local -> (chain, how, line)
        derived: dict[str, str] = {}  # local -> chain its value is computed from
        derived_ops: set[str] = set()  # locals whose value a tensor op computed
        for st in f["body"]:
            if st[0] != "assign":
                continue
            value = st[5]
            for tgt in st[4]:
                if tgt[0] == "n":
                    got = self._address_of(value)
                    if got:
                        keys[tgt[1]] = (*got, st[1])
                        continue
                    keys.pop(tgt[1], None)
                    chain = self._computed_from(value, derived)
                    if chain:
                        derived[tgt[1]] = chain
                    else:
                        derived.pop(tgt[1], None)
                    if self._tensor_op(value, derived_ops):
                        derived_ops.add(tgt[1])
                    else:
                        derived_ops.discard(tgt[1])
                    continue
                if tgt[0] != "s" or len(tgt) < 3 or not isinstance(tgt[2], tuple) or not tgt[2]:
                    continue
                key_e = tgt[2]
                got = self._address_of(key_e)
                if got:
                    chain, how, kline = (*got, st[1])
                elif key_e[0] == "n" and len(key_e) > 1 and key_e[1] in keys:
                    chain, how, kline = keys[key_e[1]]
                else:
                    continue
                made = self._computed_from(value, derived)
                if made != chain:
                    continue
                if how.startswith("`id(") and not self._tensor_op(value, derived_ops):
                    continue  # `id()` of any object: a tensor only if a tensor op makes the value
                self._address_finding(mod, path, qn, f, st, tgt, chain, how, kline)

    def _computed_from(self, e, derived: dict) -> str | None:
        """The attribute chain a value is computed from by a call (`w.t().contiguous()`,
        `torch.ops.x.prep(layer.weight)`), or a local already known to be one."""
        if not isinstance(e, tuple) or not e:
            return None
        if e[0] == "n":
            return derived.get(e[1])
        if e[0] not in ("c", "b"):
            return None
        chains: list[str] = []
        self._chains_in(e, chains, 0)
        for name in self._names_in(e, [], 0):
            if name in derived:
                chains.append(derived[name])
        return chains[0] if len(set(chains)) == 1 else None

    def _tensor_op(self, e, ops: set, depth: int = 0) -> bool:
        """Whether `e` computes a tensor: a tensor method (`.t()`, `.float()`, a view), a
        call through torch (`torch.cat(...)`, `torch.ops.x.prep(...)`), or a local one made."""
        if depth > 30 or not isinstance(e, tuple) or not e:
            return False
        if not isinstance(e[0], str):
            return any(self._tensor_op(x, ops, depth + 1) for x in e)
        if e[0] == "n":
            return len(e) > 1 and e[1] in ops
        if e[0] == "c" and len(e) > 2:
            func = e[1]
            if _attr(func) and (
                func[2] in T.VIEW_METHODS
                or func[2] in T.CAST_METHODS
                or func[2] in T.TENSOR_ONLY_METHODS
            ):
                return True
            root = func
            while _attr(root):
                root = root[1]
            if root[:1] == ("n",) and root[1] in getattr(self, "_addr_torch", ()):
                return True
        return any(self._tensor_op(x, ops, depth + 1) for x in e[1:] if isinstance(x, tuple))

    def _chains_in(self, e, out: list, depth: int) -> None:
        if depth > 30 or not isinstance(e, tuple) or not e:
            return
        if not isinstance(e[0], str):  # a sequence of expressions (call arguments)
            for part in e:
                self._chains_in(part, out, depth + 1)
            return
        if _attr(e) and e[1][0] in ("n", "a"):
            if e[2] in ("data", "T", "mT", "shape", "dtype", "device"):
                self._chains_in(e[1], out, depth + 1)
                return
            text = self.render(e)  # the longest chain read (not a method called)
            if text.split(".", 1)[0] not in getattr(self, "_addr_imported", ()):
                out.append(text)
            return
        if e[0] == "c" and len(e) > 2 and _attr(e[1]):
            # `w.t()`: the receiver is the tensor; the method name is not an attribute read
            self._chains_in(e[1][1], out, depth + 1)
            for part in e[2:]:
                self._chains_in(part, out, depth + 1)
            return
        for part in e[1:]:
            if isinstance(part, tuple):
                self._chains_in(part, out, depth + 1)

    def _names_in(self, e, out: list, depth: int) -> list:
        if depth > 30 or not isinstance(e, tuple) or not e:
            return out
        if not isinstance(e[0], str):
            for part in e:
                self._names_in(part, out, depth + 1)
            return out
        if e[0] == "n" and len(e) == 2 and isinstance(e[1], str):
            out.append(e[1])
            return out
        for part in e[1:]:
            if isinstance(part, tuple):
                self._names_in(part, out, depth + 1)
        return out

    def _address_finding(self, mod, path, qn, f, st, tgt, chain, how, kline) -> None:
        target = self.render(tgt)
        key = (path, st[1], "RL201", target)
        if key in self.findings:
            return
        contract = self.contract_for(path)
        why = (
            f"under the storage address of `{chain}` ({how}): an update writes the new "
            "weights into that same storage (and keeps the Parameter object), so the lookup "
            "hits and returns what was derived from the first load's weights"
        )
        trace = [
            TraceStep(path, kline, f"keyed on {how}, which an update keeps"),
            TraceStep(path, st[1], f"`{target}` caches a value computed from `{chain}`"),
            TraceStep(path, f["line"], f"in {qn}, which the update does not re-run"),
        ]
        fd = Finding(
            rule="RL201",
            path=path,
            line=st[1],
            column=st[2] if len(st) > 2 else 1,
            end_line=st[3] if len(st) > 3 else st[1],
            symbol=qn,
            target=target,
            message=f"`{target}` caches a value derived from `{chain}` {why}",
            severity=RULES["RL201"].severity,
            confidence="medium",
            trace=trace,
            contract=contract.name,
            fix=(
                "[manual] key the cache on something an update changes (a version the "
                "weight-update path bumps), or clear it on every update"
            ),
        )
        # the lookup is where the cache is read: this function, on the forward that fills it
        fd.reader = f"{path}:{f['line']} in {qn}"
        self.findings[key] = fd
