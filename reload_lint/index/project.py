"""The whole-repo index: module table, import resolution, class hierarchy.

Module records are produced lazily through a loader (parse or cache), so the analysis only
pays for the files its roots can reach.
"""

from __future__ import annotations

from collections.abc import Callable

TORCH_MODULE_BASES = {
    "torch.nn.Module",
    "torch.nn.modules.module.Module",
    "torch.nn.Linear",
    "torch.nn.Embedding",
    "torch.nn.ModuleList",
    "torch.nn.ModuleDict",
    "torch.nn.Sequential",
    "torch.nn.LayerNorm",
    "torch.nn.Conv1d",
    "torch.nn.Conv2d",
}
TORCH_PARAMETER = {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}
_NONE = object()  # a memo miss (None is a value)


class ProjectIndex:
    def __init__(
        self,
        module_paths: dict[str, str],
        loader: Callable[[str], dict | None],
        class_bases: dict[str, list[str]] | None = None,
        prefetch: Callable[[list[str]], None] | None = None,
        reads=None,
    ):
        """module_paths: dotted module name -> relative path; loader(module) -> record.

        class_bases: simple base-class name -> modules declaring a class with that base
        (a cheap text scan, so subclasses can be found without parsing every file).

        prefetch(modules): a hint that `modules` are about to be read one by one (parsed in
        parallel where the loader can); never changes what `loader` returns.

        reads (index/deps.py `Reads`): when given, every record is handed out wrapped, so what
        the analysis reads of it is noted per file (the fine-grained early cutoff).
        """
        self.module_paths = module_paths
        self.class_bases = class_bases or {}
        self._loader = loader
        self._prefetch = prefetch
        self._records: dict[str, dict | None] = {}
        self._raw: dict[str, dict | None] = {}  # the loader's records, as views read them
        self._reads = reads
        self._views: dict[tuple, object] = {}
        self._loaded: tuple[int, list[str]] = (-1, [])
        self._view_cache: dict[str, dict] = {}
        self._is_module_cache: dict[str, bool] = {}
        self._is_param_cache: dict[str, bool] = {}
        self._mro_cache: dict[str, list[str]] = {}
        self._split_memo: dict[str, tuple[str, str] | None] = {}
        self._resolve_memo: dict[tuple[str, int], tuple[str, str, str] | None] = {}
        self._qualify_memo: dict[tuple[str, str], str | None] = {}
        self._name_memo: dict[tuple[str, str], tuple[str, object] | None] = {}
        self._class_memo: dict[str, dict | None] = {}
        self._function_memo: dict[tuple[str, str], dict | None] = {}
        # methods another package patches onto a class (`Cls.m = fn`, a patch decorator):
        # class key -> method name -> (module, qualname) of the function that replaces it
        self.patched: dict[str, dict[str, tuple[str, str]]] = {}

    # ---- records ---------------------------------------------------------------------
    def record(self, module: str) -> dict | None:
        if module not in self._records:
            raw = self._loader(module) if module in self.module_paths else None
            self._raw[module] = raw
            if raw is not None and self._reads is not None:
                raw = self._reads.wrap(self.module_paths[module], raw)
            self._records[module] = raw
        return self._records[module]

    def view(self, module: str, name: str, *params):
        """A named view of `module`'s record (index/deps.py VIEWS: the roots it defines, the
        functions reading an attribute, ...), or None without a record. Analysis code that
        would enumerate a record's tables asks for the view instead, so what it depends on is
        what the view returns, not every entry of the table."""
        key = (module, name, params)
        value = self._views.get(key, _NONE)
        if value is not _NONE:
            return value
        value = None
        if self.record(module) is not None:
            from reload_lint.index.deps import VIEWS

            cache = self._view_cache.setdefault(module, {})
            value = VIEWS[name](self._raw[module], cache, *params)
            if self._reads is not None:
                self._reads.note_view(self.module_paths[module], name, params, value)
        self._views[key] = value
        return value

    def each_view(self, name: str, *params):
        """(module, view) for every record loaded now, by module name (loaded_records' order)."""
        for module in self._loaded_modules():
            yield module, self.view(module, name, *params)

    def _loaded_modules(self) -> list[str]:
        """The modules with a record loaded now, sorted (kept while no module is added)."""
        if self._loaded[0] != len(self._records):
            mods = [m for m, r in sorted(self._records.items()) if r is not None]
            self._loaded = (len(self._records), mods)
        return self._loaded[1]

    def loaded_records(self) -> list[dict]:
        return [self._records[m] for m in self._loaded_modules()]

    def path_of(self, module: str) -> str:
        return self.module_paths.get(module, module.replace(".", "/") + ".py")

    # ---- name resolution -------------------------------------------------------------
    def split_qualified(self, qualified: str) -> tuple[str, str] | None:
        """'pkg.mod.Class.meth' -> ('pkg.mod', 'Class.meth') for the longest known module
        (memoised: the module table does not change during a run)."""
        try:
            return self._split_memo[qualified]
        except KeyError:
            pass
        out = None
        parts = qualified.split(".")
        for i in range(len(parts), 0, -1):
            mod = ".".join(parts[:i])
            if mod in self.module_paths:
                out = (mod, ".".join(parts[i:]))
                break
        self._split_memo[qualified] = out
        return out

    def resolve(self, qualified: str, _depth: int = 0) -> tuple[str, str, str] | None:
        """Resolve a qualified name to ('func'|'class'|'module', module, qualname).

        Memoised per run (records never change during one): a repeated call reads nothing
        new, so what it read is already noted (index/deps.py)."""
        key = (qualified, _depth)
        try:
            return self._resolve_memo[key]
        except KeyError:
            pass
        out = self._resolve(qualified, _depth)
        self._resolve_memo[key] = out
        return out

    def _resolve(self, qualified: str, _depth: int) -> tuple[str, str, str] | None:
        if _depth > 8 or not qualified:
            return None
        split = self.split_qualified(qualified)
        if split is None:
            return None
        mod, rest = split
        if not rest:
            return ("module", mod, "")
        rec = self.record(mod)
        if rec is None:
            return None
        if rest in rec["functions"]:
            return ("func", mod, rest)
        if rest in rec["classes"]:
            return ("class", mod, rest)
        head, _, tail = rest.partition(".")
        if head in rec["classes"] and tail:
            # Class.method inherited from a base
            found = self.lookup_method(f"{mod}:{head}", tail)
            if found:
                return ("func", *found)
        target = rec["imports"].get(head)
        if target:
            return self.resolve(f"{target}.{tail}" if tail else target, _depth + 1)
        g = rec["globals"].get(head)
        if g is not None and g[0] in ("n", "a"):
            from reload_lint.index.extract import dotted

            d = dotted(g)
            if d and d != head:
                q = self.qualify(mod, d)
                if q:
                    return self.resolve(f"{q}.{tail}" if tail else q, _depth + 1)
        for star in rec["imports"].get("*", "").split():
            r = self.resolve(f"{star}.{rest}", _depth + 1)
            if r:
                return r
        return None

    def module_name(self, module: str, name: str) -> tuple[str, object] | None:
        """What a simple name is bound to at the top of `module`, looked up as Python would
        find it there: ("func", None), ("class", None), ("import", target) or ("global",
        its value expression, None when it has none); None without a record. Memoised: the
        analysis asks this for every free name it evaluates."""
        key = (module, name)
        try:
            return self._name_memo[key]
        except KeyError:
            pass
        rec = self.record(module)
        out: tuple[str, object] | None = None
        if rec is not None:
            if name in rec["functions"]:
                out = ("func", None)
            elif name in rec["classes"]:
                out = ("class", None)
            elif name in rec["imports"]:
                out = ("import", rec["imports"][name])
            else:
                out = ("global", rec["globals"].get(name))
        self._name_memo[key] = out
        return out

    def qualify(self, module: str, name: str) -> str | None:
        """Qualified spelling of a dotted local name as seen from `module` (memoised)."""
        key = (module, name)
        try:
            return self._qualify_memo[key]
        except KeyError:
            pass
        out = self._qualify(module, name)
        self._qualify_memo[key] = out
        return out

    def _qualify(self, module: str, name: str) -> str | None:
        rec = self.record(module)
        if rec is None:
            return None
        head, _, tail = name.partition(".")
        if head in rec["functions"] or head in rec["classes"]:
            q = f"{module}.{head}"
        elif head in rec["imports"]:
            q = rec["imports"][head]
        else:
            return None
        return f"{q}.{tail}" if tail else q

    def qualify_external(self, module: str, name: str) -> str:
        """Like qualify, but falls back to the spelling itself (torch.argsort stays torch.argsort)."""
        return self.qualify(module, name) or name

    # ---- classes ---------------------------------------------------------------------
    def class_record(self, key: str) -> dict | None:
        try:
            return self._class_memo[key]
        except KeyError:
            pass
        mod, _, qn = key.partition(":")
        rec = self.record(mod)
        out = None if rec is None else rec["classes"].get(qn)
        self._class_memo[key] = out
        return out

    def base_keys(self, key: str) -> list[str]:
        """Resolved project bases as 'module:Class' keys; external bases as their qualified name."""
        mod = key.partition(":")[0]
        crec = self.class_record(key)
        if crec is None:
            return []
        from reload_lint.index.extract import dotted

        out = []
        for b in crec["bases"]:
            d = dotted(b) if b[0] in ("n", "a") else None
            if d is None and b[0] == "s":  # Generic[T]
                d = dotted(b[1]) if b[1][0] in ("n", "a") else None
            if not d:
                continue
            q = self.qualify_external(mod, d)
            r = self.resolve(q)
            if r and r[0] == "class":
                out.append(f"{r[1]}:{r[2]}")
            else:
                out.append(q)
        return out

    def mro(self, key: str) -> list[str]:
        if key in self._mro_cache:
            return self._mro_cache[key]
        self._mro_cache[key] = [key]
        out = [key]
        seen = {key}
        stack = list(reversed(self.base_keys(key)))
        while stack:
            k = stack.pop()
            if k in seen or ":" not in k:
                continue
            seen.add(k)
            out.append(k)
            stack.extend(reversed(self.base_keys(k)))
        self._mro_cache[key] = out
        return out

    def mro_methods(self, key: str):
        """(module, method name, method qualname) for every method of every class in key's
        MRO that has a record, in MRO order and by name within a class."""
        for k in self.mro(key):
            crec = self.class_record(k)
            if crec is None:
                continue
            mod = k.partition(":")[0]
            patched = self.patched.get(k, {})
            for name, qn in sorted(crec["methods"].items()):
                if name in patched:
                    yield patched[name][0], name, patched[name][1]
                else:
                    yield mod, name, qn
            for name in sorted(set(patched) - set(crec["methods"])):
                yield patched[name][0], name, patched[name][1]

    def external_bases(self, key: str) -> set[str]:
        out = set()
        for k in self.mro(key):
            for b in self.base_keys(k):
                if ":" not in b:
                    out.add(b)
        return out

    def is_module_class(self, key: str) -> bool:
        if key not in self._is_module_cache:
            self._is_module_cache[key] = False
            ext = self.external_bases(key)
            self._is_module_cache[key] = any(
                b in TORCH_MODULE_BASES or (b.startswith("torch.nn.") and b[9:10].isupper())
                for b in ext
            ) or any(b.startswith(("nn.", "torch.nn.modules.")) for b in ext)
        return self._is_module_cache[key]

    def is_parameter_class(self, key: str) -> bool:
        if key not in self._is_param_cache:
            self._is_param_cache[key] = False
            ext = self.external_bases(key)
            self._is_param_cache[key] = bool(ext & TORCH_PARAMETER) or "nn.Parameter" in ext
        return self._is_param_cache[key]

    def lookup_method(
        self, key: str, name: str, after: str | None = None
    ) -> tuple[str, str] | None:
        """(module, qualname) of `name` in the MRO of class `key` (optionally after class `after`)."""
        chain = self.mro(key)
        if after is not None and after in chain:
            chain = chain[chain.index(after) + 1 :]
        for k in chain:
            hit = self.patched.get(k, {}).get(name) if self.patched else None
            if hit is not None:
                return hit
            crec = self.class_record(k)
            if crec and name in crec["methods"]:
                return (k.partition(":")[0], crec["methods"][name])
        return None

    def subclasses(self, key: str) -> list[str]:
        """Known project subclasses of class `key` (transitively), sorted, verified by MRO."""
        base_name = key.split(":", 1)[1].rsplit(".", 1)[-1]
        names = [base_name]
        cand_mods: set[str] = set()
        seen = {base_name}
        while names:
            n = names.pop()
            for mod in self.class_bases.get(n, ()):
                if mod in cand_mods:
                    continue
                cand_mods.add(mod)
        # expand by names of classes found in candidate modules (multi-level hierarchies)
        changed = True
        while changed:
            changed = False
            batch = sorted(cand_mods)
            if self._prefetch is not None:
                self._prefetch([m for m in batch if m not in self._records])
            for mod in batch:
                names = self.view(mod, "class_names")
                if names is None:
                    continue
                for cqn in names:
                    short = cqn.rsplit(".", 1)[-1]
                    if short not in seen:
                        seen.add(short)
                        for m2 in self.class_bases.get(short, ()):
                            if m2 not in cand_mods:
                                cand_mods.add(m2)
                                changed = True
        out = []
        for mod in sorted(cand_mods):
            names = self.view(mod, "class_names")
            if names is None:
                continue
            for cqn in sorted(names):
                ck = f"{mod}:{cqn}"
                if ck != key and key in self.mro(ck):
                    out.append(ck)
        return out

    def function(self, module: str, qn: str) -> dict | None:
        key = (module, qn)
        try:
            return self._function_memo[key]
        except KeyError:
            pass
        rec = self.record(module)
        out = None if rec is None else rec["functions"].get(qn)
        self._function_memo[key] = out
        return out
