"""Backends that only the CPU platform selects: no CUDA graphs where they run.

vLLM picks an attention backend per platform: `platforms/cpu.py` returns
`AttentionBackendEnum.AMX_MLA.get_path()`, where the enum member's value names the backend
class (`"vllm.v1.attention.backends.mla.amx_mla.AMXMLABackend"`). A backend module named by a
member that the CPU platform modules (`<top>.platforms.*cpu*`) read and no other platform
module reads is selected only on the CPU platform, which captures no CUDA graphs: a store on a
path through that module is out of scope, like the CPU backends `pathfacts.BUILTIN_SCOPES`
lists by path. Only the platform package is read (its CPU modules' imported enum classes and
every platform module's reads of the member), never the whole tree.

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

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
