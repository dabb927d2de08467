"""The apply-time call graph the reader search walks (analysis/readers.py): what a function
calls, resolved to project functions with the class their `self` is.

Followed: `self.m(...)` in the same MRO; `self.held.m(...)` and `layer.held.m(...)` on objects
of known class (`self.x = Class(...)`, what the analysis saw stored there, what the root's
class stores on the layer); a held object called like a function (`self.experts(x)`,
`layer.kernel(x)`: its class's `__call__`, an nn.Module's `forward`); project functions; static
and class methods called on a class, on a module global naming classes or on what a project
function returns (a dispatcher class picked per device: `Ops.matmul(x, layer)`, `_OPS = CudaOps
if ... else RocmOps`, `ops = pick_ops(dev); ops.matmul(x, layer)`). A local bound once to an
attribute or a call stands for it (`kernel = self.kernel; kernel(x)`).

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

from reload_lint.analysis.frame import MODULE_ANNOT_HINTS, MODULE_PARAM_NAMES
from reload_lint.index.deps import calls_in as _calls
from reload_lint.index.extract import dotted


def module_param(f: dict, p: str) -> bool:
    """Whether parameter `p` of `f` is a module (the layer): by name or annotation."""
    ann = dict(f["annotations"]).get(p, "")
    return p in MODULE_PARAM_NAMES or any(h in ann for h in MODULE_ANNOT_HINTS)


def _as_call_method(c):
    """`obj(x)` spelled `obj.__call__(x)`: the receiver is `obj`, not the caller's `self`."""
    return (c[0], ("a", c[1], "__call__"), *c[2:])


class CallGraphMixin:
    """Uses Analyzer state: index, attr_type, layer_attr_type, _held_types."""

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
        return [t[:4] for t in self._call_targets(mod, f, cls_key)]

    def _call_targets(self, mod: str, f: dict, cls_key: str | None, gaps=None) -> list[tuple]:
        """(module, qualname, function, class key of its self, call, bound) for what `f`
        calls; `bound` when the callee's first parameter is the receiver. With `gaps` (a
        list), the calls not followed are described there."""
        calls: list = []
        for st in f["body"]:
            for part in st[4:]:
                _calls(part, calls)
        me = f["params"][0] if f["cls"] and f["params"] else None
        alias = _local_aliases(f, me)
        out: list[tuple] = []
        seen: set = set()
        for c in calls:
            fn = c[1]
            if fn[0] == "n" and fn[1] in alias:
                fn = alias[fn[1]]  # `kernel = self.kernel; kernel(x)`
            elif fn[0] == "a" and fn[1][0] == "n" and fn[1][1] in alias:
                fn = ("a", alias[fn[1][1]], fn[2])  # `ops = pick_ops(); ops.matmul(x, w)`
            if fn is not c[1]:
                c = (c[0], fn, *c[2:])
            targets: list[tuple] = []
            if fn[0] == "a" and me and fn[1] == ("n", me) and cls_key:
                found = self.index.lookup_method(cls_key, fn[2])
                if found:
                    targets.append((*found, cls_key, True))
                else:
                    # `self.experts(x)`: the held object's `__call__` (an nn.Module's forward)
                    for held in self._held_classes(cls_key, fn[2]):
                        found = self._call_entry(held)
                        if found:
                            targets.append((*found, held, True))
                    c = _as_call_method(c)
            elif (
                fn[0] == "a"
                and fn[1][0] == "n"
                and fn[1][1] != me
                and module_param(f, fn[1][1])
                and cls_key
                and self.layer_attr_type(cls_key, fn[2])
            ):
                # `layer.kernel(x)`: the `__call__` / forward of what the layer holds there
                held = self.layer_attr_type(cls_key, fn[2])
                found = self._call_entry(held)
                if found:
                    targets.append((*found, held, True))
                c = _as_call_method(c)
            elif fn[0] == "a" and me and fn[1][0] == "a" and fn[1][1] == ("n", me) and cls_key:
                for held in self._held_classes(cls_key, fn[1][2]):
                    found = self.index.lookup_method(held, fn[2])
                    if found:
                        targets.append((*found, held, True))
            elif (
                fn[0] == "a"
                and fn[1][0] == "a"
                and fn[1][1][0] == "n"
                and fn[1][1][1] != me
                and module_param(f, fn[1][1][1])
                and cls_key
            ):
                # `layer.kernel.run(...)`: an object the layer holds, of the class this
                # class's methods (or the layer's constructor) store there
                held = self.layer_attr_type(cls_key, fn[1][2])
                found = self.index.lookup_method(held, fn[2]) if held else None
                if found:
                    targets.append((*found, held, True))
            else:
                d = dotted(fn) if fn[0] in ("n", "a") else None
                q = self.index.qualify(mod, d) if d else None
                r = self.index.resolve(q) if q else None
                if r is not None and r[0] == "func":
                    g = self.index.function(r[1], r[2])
                    if g is not None and not g["cls"]:
                        targets.append((r[1], r[2], None, False))
                    elif g is not None and fn[0] == "a":
                        # `Ops.matmul(x, layer)`: a static or class method of a class named
                        # at the call (a dispatcher class)
                        targets += self._static_targets(r[1], r[2], g)
                elif fn[0] == "a" and fn[1][0] in ("n", "c") and fn[1] != ("n", me):
                    # `_OPS.matmul(x, layer)`, `_OPS = CudaOps if ... else RocmOps`; a call
                    # returning the class (`pick_ops().matmul(x, layer)`): each class named
                    for ck in self._classes_of(mod, fn[1]):
                        found = self.index.lookup_method(ck, fn[2])
                        g = self.index.function(*found) if found else None
                        if g is not None:
                            targets += self._static_targets(found[0], found[1], g)
            if not targets and gaps is not None:
                gaps.append(c)
            for m, qn, ck, bound in targets:
                if (m, qn, ck) in seen:
                    continue
                seen.add((m, qn, ck))
                g = self.index.function(m, qn)
                if g is not None:
                    out.append((m, qn, g, ck, c, bound))
        return out

    def _call_entry(self, cls_key: str) -> tuple | None:
        """(module, qualname) of what calling an object of class `cls_key` runs: its
        `__call__`, or for an nn.Module (whose `__call__` is torch's) its `forward`."""
        found = self.index.lookup_method(cls_key, "__call__")
        if found is None and self.index.is_module_class(cls_key):
            found = self.index.lookup_method(cls_key, "forward")
        return found

    def _static_targets(self, mod: str, qn: str, g: dict) -> list[tuple]:
        """A static method (nothing bound) or class method (the class bound to its first
        parameter) called on its class; [] for a plain method."""
        decos = set(g["decos"])
        if "staticmethod" in decos:
            return [(mod, qn, None, False)]
        if "classmethod" in decos:
            return [(mod, qn, None, True)]
        return []

    def _classes_of(self, mod: str, expr) -> list[str]:
        """Class keys an expression can name: a module global `X = A` / `X = A if c else B`,
        or a call to a project function whose returns name classes (`return CudaOps`)."""
        if expr[0] == "n":
            rec = self.index.record(mod)
            value = rec["globals"].get(expr[1]) if rec is not None else None
            return self._named_classes(mod, [value] if value is not None else [])
        d = dotted(expr[1]) if expr[0] == "c" and expr[1][0] in ("n", "a") else None
        q = self.index.qualify(mod, d) if d else None
        r = self.index.resolve(q) if q else None
        g = self.index.function(r[1], r[2]) if r is not None and r[0] == "func" else None
        if g is None or g["cls"]:
            return []
        rets = [st[4] for st in g["body"] if st[0] == "ret" and st[4] is not None]
        return self._named_classes(r[1], rets)

    def _named_classes(self, mod: str, exprs: list) -> list[str]:
        out: list[str] = []
        todo = list(exprs)
        while todo:
            e = todo.pop()
            if e[0] == "if":
                todo += [e[1], e[2]]
                continue
            d = dotted(e) if e[0] in ("n", "a") else None
            q = self.index.qualify(mod, d) if d else None
            r = self.index.resolve(q) if q else None
            if r is not None and r[0] == "class" and f"{r[1]}:{r[2]}" not in out:
                out.append(f"{r[1]}:{r[2]}")
        return out


def _local_aliases(f: dict, me: str | None) -> dict:
    """Locals bound once in `f` to an attribute of its `self` or of a parameter
    (`kernel = self.kernel`), or to a call (`ops = pick_ops()`): name -> that expression."""
    bound: dict = {}
    count: dict = {}
    for st in f["body"]:
        if st[0] != "assign":
            continue
        for t in st[4]:
            if t[0] == "n":
                count[t[1]] = count.get(t[1], 0) + 1
        if len(st[4]) == 1 and st[4][0][0] == "n":
            v = st[5]
            if (v[0] == "a" and v[1][0] == "n" and v[1][1] in f["params"]) or (
                v[0] == "c" and v[1][0] in ("n", "a")
            ):
                bound[st[4][0][1]] = v
    return {n: v for n, v in bound.items() if count.get(n) == 1 and n not in f["params"]}
