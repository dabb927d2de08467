"""Backends that only the CPU platform selects: no CUDA graphs where they run.

vLLM picks an attention backend per platform: `platforms/cpu.py` returns
`AttentionBackendEnum.AMX_MLA.get_path()`, where the enum member's value names the backend
class (`"vllm.v1.attention.backends.mla.amx_mla.AMXMLABackend"`). A backend module named by a
member that the CPU platform modules (`<top>.platforms.*cpu*`) read and no other platform
module reads is selected only on the CPU platform, which captures no CUDA graphs: a store on a
path through that module is out of scope, like the CPU backends `pathfacts.BUILTIN_SCOPES`
lists by path. Only the platform package is read (its CPU modules' imported enum classes and
every platform module's reads of the member), never the whole tree.

Platform branches. The audited package's own platform (an out-of-tree plugin's `Platform`
subclass, outside the `vllm` / `sglang` packages, whose class body sets `_enum =
PlatformEnum.X`) is what `vllm.platforms.current_platform` is where the package runs: a block
whose `if` test has a conjunct `current_platform.is_rocm()` (or a project predicate function
returning a conjunction with one) that is False there never runs, and a store on it is not
reported (`platform_guard_dead`, read by pathfacts.scope_of). Exactly one platform kind
decides: no such class, or classes of different kinds, decide nothing.

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from reload_lint.analysis.pathfacts import Scope
from reload_lint.config import path_matches


class PlatformScopeMixin:
    """No-graphs scopes derived from the platform package; uses Analyzer state."""

    def platform_scope(self, module: str) -> Scope | None:
        """A no-graphs scope when only the CPU platform selects `module`'s backend."""
        memo = self.__dict__.setdefault("_platform_scopes", {})
        if module in memo:
            return memo[module]
        memo[module] = None
        where = self._cpu_selected(module.partition(".")[0]).get(module)
        if where is not None:
            memo[module] = Scope(
                self.index.path_of(module),
                "no-graphs",
                f"backend selected only by the CPU platform ({where}): no graphs",
            )
        return memo[module]

    def no_graphs_class(self, cls_key: str) -> Scope | None:
        """The no-graphs scope class `cls_key`'s module lies in (a CPU backend), if any."""
        mod = cls_key.partition(":")[0]
        if not mod:
            return None
        path = self.index.path_of(mod)
        for scope in self.scopes:
            if (
                scope.kind == "no-graphs"
                and not scope.qualname
                and path_matches(scope.pattern, path)
            ):
                return scope
        return self.platform_scope(mod)

    def _cpu_selected(self, top: str) -> dict[str, str]:
        """{backend module: where the CPU platform names it} for the project package `top`."""
        cache = self.__dict__.setdefault("_cpu_selected_memo", {})
        if top in cache:
            return cache[top]
        out: dict[str, str] = {}
        cache[top] = out
        prefix = f"{top}.platforms."
        platforms = sorted(m for m in self.index.module_paths if m.startswith(prefix))
        cpu = [m for m in platforms if "cpu" in m[len(prefix) :]]
        others = [m for m in platforms if m not in cpu]
        for pm in cpu:
            rec = self.index.record(pm)
            if rec is None:
                continue
            for name, qualified in sorted(rec["imports"].items()):
                if not name[:1].isupper():
                    continue
                r = self.index.resolve(qualified)
                if r is None or r[0] != "class":
                    continue
                for member, value in self.index.view(r[1], "class_consts", r[2]) or ():
                    target = value.rpartition(".")[0]
                    if target in out or target not in self.index.module_paths:
                        continue
                    if not self.index.view(pm, "reads", member):
                        continue
                    if any(self.index.view(o, "reads", member) for o in others):
                        continue
                    out[target] = f"{self.index.path_of(pm)}: {name}.{member}"
        return out


# vLLM's Platform predicates that read only `_enum`, alike in 0.11.1, 0.25.1 and 0.33.0
# (platforms/interface.py:145-171 in 0.11.1, :196-229 in 0.33.0): the PlatformEnum members each
# is True for (`is_sleep_mode_available` differs between releases: not decided).
# A predicate the platform class (or a base in the index) defines is read from its body instead.
ENUM_PREDICATES: dict[str, frozenset[str]] = {
    "is_cuda": frozenset({"CUDA"}),
    "is_rocm": frozenset({"ROCM"}),
    "is_tpu": frozenset({"TPU"}),
    "is_xpu": frozenset({"XPU"}),
    "is_cpu": frozenset({"CPU"}),
    "is_out_of_tree": frozenset({"OOT"}),
    "is_unspecified": frozenset({"UNSPECIFIED"}),
    "is_cuda_alike": frozenset({"CUDA", "ROCM"}),
}
_ENGINES = ("vllm", "sglang")  # packages whose own platform classes never decide
_DEPTH = 4  # predicate functions followed through one another


@dataclass(frozen=True)
class PackagePlatform:
    """The platform class(es) of the audited package, all of one kind."""

    keys: tuple[str, ...]  # "module:Class" of each deciding class
    enum: str  # the PlatformEnum member name ("CUDA")
    where: str  # "`KunlunPlatform` (path:line) sets `_enum = PlatformEnum.CUDA`"


def _engine_module(mod: str) -> bool:
    return any(mod == e or mod.startswith(e + ".") for e in _ENGINES)


class PlatformBranchMixin:
    """Branches the package's platform rules out; uses Analyzer state (`index`)."""

    def package_platform(self) -> PackagePlatform | None:
        """The audited package's platform, when its `Platform` subclasses agree on one kind."""
        memo = self.__dict__.setdefault("_package_platform", [])
        if memo:
            return memo[0]
        memo.append(None)
        index = self.index
        mods = sorted(
            {
                m
                for name, ms in index.class_bases.items()
                if name.endswith("Platform")
                for m in ms
                if not _engine_module(m)
            }
        )
        found: list[str] = []
        for mod in mods:
            for cqn in index.view(mod, "class_names") or ():
                key = f"{mod}:{cqn}"
                if key not in found and self._is_platform_class(key):
                    found.append(key)
        for key in list(found):
            for sub in index.subclasses(key):
                if sub not in found and not _engine_module(sub.partition(":")[0]):
                    found.append(sub)
        # a class another one subclasses is a base of the real one, not a platform of its own
        leaves = [k for k in found if not any(o != k and k in index.mro(o) for o in found)]
        if not leaves:
            return None
        kinds = {k: self._platform_enum(k) for k in leaves}
        if any(v is None for v in kinds.values()) or len(set(kinds.values())) != 1:
            return None
        enum = kinds[leaves[0]]
        names = []
        for k in sorted(leaves):
            mod, _, qn = k.partition(":")
            crec = index.class_record(k) or {}
            names.append(f"`{qn}` ({index.path_of(mod)}:{crec.get('line', 0)})")
        where = f"{' and '.join(names)}, which {'sets' if len(names) == 1 else 'set'} "
        where += f"`_enum = PlatformEnum.{enum}`"
        memo[0] = PackagePlatform(tuple(sorted(leaves)), enum, where)
        return memo[0]

    def _is_platform_class(self, key: str) -> bool:
        """A subclass of vLLM's `Platform`: a resolved base of that tree, or a base named
        `Platform` / `*Platform` imported from `vllm.platforms...`."""
        for k in self.index.mro(key)[1:]:
            mod, _, qn = k.partition(":")
            if mod.startswith("vllm.platforms") and qn.endswith("Platform"):
                return True
        return any(
            b.startswith("vllm.platforms.") and b.rpartition(".")[2].endswith("Platform")
            for b in self.index.external_bases(key)
        )

    def _platform_enum(self, key: str) -> str | None:
        """The `_enum` member a class sets in its body or inherits from a class of the index."""
        for k in self.index.mro(key):
            crec = self.index.class_record(k)
            text = crec.get("enum_attr") if crec else None
            if text:
                head, _, member = text.rpartition(".")
                return member if head.rpartition(".")[2] == "PlatformEnum" else None
        return None

    # ------------------------------------------------------------------ predicates
    def platform_predicate(self, name: str, depth: int = 0) -> tuple[bool, str] | None:
        """(truth, why) of `current_platform.<name>()` on the package's platform, or None."""
        plat = self.package_platform()
        if plat is None or depth > _DEPTH:
            return None
        got = [self._predicate_on(k, name, plat.enum, depth) for k in plat.keys]
        if any(g is None for g in got) or len({g[0] for g in got}) != 1:
            return None
        truth = got[0][0]
        why = f"`current_platform.{name}()` is {truth} on the package's platform, {plat.where}"
        extra = "; ".join(sorted({g[1] for g in got if g[1]}))
        return truth, why + (f" ({extra})" if extra else "")

    def _predicate_on(self, key: str, name: str, enum: str, depth: int):
        """(truth, how the class defines it, "" for vLLM's own definition) or None."""
        m = self.index.lookup_method(key, name)
        if m is None:
            members = ENUM_PREDICATES.get(name)
            return None if members is None else (enum in members, "")
        f = self.index.function(*m)
        test = f.get("ret_test") if f else None
        if not test or depth > _DEPTH:
            return None
        truths = []
        for c in test:
            if c[0] == "const":
                truths.append(c[1])
            elif c[0] == "enum":
                members = {d.rpartition(".")[2] for d in c[2]}
                truths.append((enum in members) == c[1])
            elif c[0] == "term" and c[1] in ("self", "cls") and c[2].endswith("()"):
                got = self._predicate_on(key, c[2][:-2], enum, depth + 1)
                truths.append(None if got is None or c[3] not in (True, False) else got[0] == c[3])
            else:
                truths.append(None)
        truth = _conj(truths)
        if truth is None:
            return None
        mod = m[0]
        how = "" if _engine_module(mod) else f"`{m[1]}` at {self.index.path_of(mod)}:{f['line']}"
        how = how and f"{how} defines it"
        return truth, how

    def platform_term(self, module: str, base: str, attr: str, depth: int = 0):
        """(truth, why) of a predicate call term read in `module`: `current_platform.is_x()`
        (vLLM's, or a project global built from the platform class), or a project function
        that is one `return` of a test with such terms (analysis: its `ret_test`)."""
        if not attr.endswith("()") or depth > _DEPTH:
            return None
        name = attr[:-2]
        index = self.index
        if base:
            q = index.qualify(module, base)
            if q is not None and self._is_current_platform(q):
                return self.platform_predicate(name, depth)
        dotted = f"{base}.{name}" if base else name
        q = index.qualify(module, dotted)
        r = index.resolve(q) if q else None
        if r is None or r[0] != "func":
            return None
        f = index.function(r[1], r[2])
        test = f.get("ret_test") if f else None
        if not test or f.get("cls"):
            return None  # a method: a subclass may override it
        truths, whys = [], []
        for c in test:
            got = None
            if c[0] == "const":
                got = (c[1], "")
            elif c[0] == "term":
                got = self._term_truth(r[1], c[1:], depth + 1)
            truths.append(None if got is None else got[0])
            if got is not None and got[1]:
                whys.append((got[0], got[1]))
        truth = _conj(truths)
        if truth is None:
            return None
        # the conjuncts that decide it: a False one for False, every one for True
        why = (
            next(w for t, w in whys if t is False)
            if truth is False
            else "; ".join(w for _t, w in whys)
        )
        where = f"`{dotted}()` ({index.path_of(r[1])}:{f['line']}) is {truth}"
        return truth, f"{where}: it returns a conjunction, and {why}"

    def _term_truth(self, module: str, term: tuple, depth: int):
        """(truth, why) of one flag term (base, attr, sense) as a test of it, or None."""
        base, attr, sense = term
        if attr == "<or>":
            got = [self._term_truth(module, t, depth) for t in sense]
            if any(g is None for g in got):
                if any(g is not None and g[0] for g in got):
                    return next(g for g in got if g is not None and g[0])
                return None
            if any(g[0] for g in got):
                return next(g for g in got if g[0])
            return False, "; ".join(g[1] for g in got)
        if sense not in (True, False):
            return None
        got = self.platform_term(module, base, attr, depth)
        if got is None:
            return None
        return got[0] == sense, got[1]

    def _is_current_platform(self, qualified: str, depth: int = 0) -> bool:
        """`vllm.platforms.current_platform` (or a project module's re-export of it), or a
        project global `current_platform` that instantiates one of the package's platform
        classes."""
        if qualified == "vllm.platforms.current_platform":
            return True
        plat = self.package_platform()
        split = self.index.split_qualified(qualified)
        if plat is None or split is None or split[1] != "current_platform" or depth > _DEPTH:
            return False
        name = self.index.module_name(split[0], "current_platform")
        if name is not None and name[0] == "import":
            return self._is_current_platform(name[1], depth + 1)
        if name is None or name[0] != "global" or not name[1] or name[1][0] != "c":
            return False
        from reload_lint.index.extract import dotted

        callee = dotted(name[1][1]) if name[1][1][0] in ("n", "a") else None
        q = self.index.qualify(split[0], callee) if callee else None
        r = self.index.resolve(q) if q else None
        return r is not None and r[0] == "class" and f"{r[1]}:{r[2]}" in plat.keys

    def platform_guard_dead(self, module: str, guard: tuple) -> str | None:
        """Why the code under `guard` (base, attr, sense, path, line, ...), lowered from an
        `if` test read in `module`, never runs on the package's platform; None when it may."""
        memo = self.__dict__.setdefault("_platform_dead", {})
        key = (module, guard[:5])
        if key in memo:
            return memo[key]
        memo[key] = None
        if self.package_platform() is None:
            return None
        got = self._term_truth(module, guard[:3], 0)
        if got is not None and got[0] is False:
            at = f"{guard[3]}:{guard[4]}"
            memo[key] = (
                f"unreachable on the package's platform: the code under the test at {at} runs "
                f"only when {_term_text(guard[:3])}, and {got[1]}"
            )
        return memo[key]


def _conj(truths) -> bool | None:
    """A conjunction's truth: False with one False conjunct, True with all True, else None."""
    if any(t is False for t in truths):
        return False
    if truths and all(t is True for t in truths):
        return True
    return None


def _term_text(term) -> str:
    base, attr, sense = term
    if attr == "<or>":
        return " or ".join(_term_text(t) for t in sense)
    spelled = f"{base}.{attr}" if base else attr
    return f"`{spelled}` is {sense}"
