"""`[tool.reload-lint]` in pyproject.toml.

Unknown keys are an error naming the key; a corrupt file is a ConfigError (exit 2).
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.errors import ReloadLintError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[no-redef]


class ConfigError(ReloadLintError):
    """A whole-run configuration problem: one line, exit code 2."""


# `contract` values: "auto" and the contracts of analysis/contracts.py (kept here, not imported,
# so parsing arguments stays cheap; a test checks the two agree).
CONTRACT_CHOICES = ("auto", "vllm-layerwise", "inplace-only", "vllm-load-weights")
DEFAULT_ROOT_NAMES = ("process_weights_after_loading",)
DEFAULT_APPLY_NAMES = (
    "apply",
    "apply_weights",
    "apply_monolithic",
    "forward",
    "forward_native",
    "forward_cuda",
    "forward_hip",
    "forward_impl",
    "forward_oot",
    "__call__",
    "apply_router_weight_on_input",
    "run_experts",
)


@dataclass
class PerPath:
    pattern: str
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    contract: str | None = None
    # path facts (docs/gate.md): `cuda-graphs = false` -- this code runs on a platform that
    # captures no CUDA graphs; `update-reruns = false` -- its post-load roots never re-run on
    # a weight update. Stores reached through such code are not reported.
    cuda_graphs: bool | None = None
    update_reruns: bool | None = None


@dataclass
class Config:
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    root_names: list[str] = field(default_factory=lambda: list(DEFAULT_ROOT_NAMES))
    extra_root_names: list[str] = field(default_factory=list)
    apply_names: list[str] = field(default_factory=lambda: list(DEFAULT_APPLY_NAMES))
    extra_apply_names: list[str] = field(default_factory=list)
    contract: str = "auto"
    preserving_helpers: list[str] = field(default_factory=list)
    per_path: list[PerPath] = field(default_factory=list)
    allowlists: list[str] = field(default_factory=list)
    base: list[str] = field(default_factory=list)  # `--base` specs (bases.py)
    baseline: str | None = None
    strict: bool = False  # a finding without a reader found fails too (see docs/gate.md)
    source: str | None = None  # the file it came from, for messages

    def all_root_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.root_names, *self.extra_root_names]))

    def all_apply_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.apply_names, *self.extra_apply_names]))

    def is_excluded(self, relpath: str) -> bool:
        """Whether a base-relative posix path (or one of its folders) matches `exclude`.

        Also applies to files passed by name (pre-commit), as ruff's force-exclude does.
        """
        return any(path_matches(p, relpath) for p in self.exclude)

    def rule_enabled(self, relpath: str, code: str) -> bool:
        """Global select/ignore, then every matching `per-path` entry in order.

        A per-path `select` replaces the selection for those files; `ignore` adds to it.
        """
        from reload_lint.rules import selected

        select, ignore = list(self.select), list(self.ignore)
        for pp in self.per_path:
            if path_matches(pp.pattern, relpath):
                if pp.select:
                    select = list(pp.select)
                ignore = [*ignore, *pp.ignore]
        return selected(code, select, ignore)


@functools.lru_cache(maxsize=8192)  # a pure function of its two strings, asked per store
def path_matches(pattern: str, relpath: str) -> bool:
    """Whether `relpath` (posix, relative to the project) or a folder above it matches `pattern`.

    fnmatch semantics (`*` also crosses `/`, as in ruff's per-file-ignores), plus: a pattern
    without `/` also matches a file or folder name at any depth (`tests`, `*_test.py`); a
    trailing `/` is ignored; `**/` also matches zero folders.
    """
    pat = pattern.strip().replace("\\", "/").rstrip("/")
    if pat.startswith("./"):
        pat = pat[2:]
    pat = pat.lstrip("/")
    pats = {pat, pat.replace("**/", "")}
    rel = relpath.replace("\\", "/")
    if rel.startswith("./"):
        rel = rel[2:]
    parts = rel.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for p in pats:
        for cand in candidates:
            if fnmatch.fnmatchcase(cand, p):
                return True
        if "/" not in p and any(fnmatch.fnmatchcase(name, p) for name in parts):
            return True
    return False


_LIST_KEYS = {
    "include",
    "exclude",
    "select",
    "ignore",
    "root-names",
    "extra-root-names",
    "apply-names",
    "extra-apply-names",
    "preserving-helpers",
    "allowlists",
    "base",
}
_STR_KEYS = {"contract", "baseline"}
_BOOL_KEYS = {"strict"}
_KNOWN = _LIST_KEYS | _STR_KEYS | _BOOL_KEYS | {"per-path"}
_PER_PATH_KEYS = {"select", "ignore", "contract", "cuda-graphs", "update-reruns"}


def _str_list(value, key: str, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: `{key}` must be a list of strings")
    return list(value)


def parse_table(table: dict, where: str) -> Config:
    cfg = Config(source=where)
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [tool.reload-lint] must be a table")
    for key, value in table.items():
        if key not in _KNOWN:
            raise ConfigError(f"{where}: unknown key `{key}` in [tool.reload-lint]")
        attr = key.replace("-", "_")
        if key in _LIST_KEYS:
            setattr(cfg, attr, _str_list(value, key, where))
        elif key in _BOOL_KEYS:
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: `{key}` must be true or false")
            setattr(cfg, attr, value)
        elif key in _STR_KEYS:
            if not isinstance(value, str):
                raise ConfigError(f"{where}: `{key}` must be a string")
            setattr(cfg, attr, value)
        elif key == "per-path":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: `per-path` must be a table of glob -> table")
            for pattern, sub in value.items():
                if not isinstance(sub, dict):
                    raise ConfigError(f'{where}: `per-path."{pattern}"` must be a table')
                for sk in sub:
                    if sk not in _PER_PATH_KEYS:
                        raise ConfigError(
                            f'{where}: unknown key `{sk}` in per-path entry "{pattern}"'
                        )
                pp = PerPath(pattern=pattern)
                if "select" in sub:
                    pp.select = _str_list(sub["select"], "select", where)
                if "ignore" in sub:
                    pp.ignore = _str_list(sub["ignore"], "ignore", where)
                if "contract" in sub:
                    if not isinstance(sub["contract"], str):
                        raise ConfigError(f"{where}: per-path `contract` must be a string")
                    pp.contract = sub["contract"]
                for bk in ("cuda-graphs", "update-reruns"):
                    if bk in sub:
                        if not isinstance(sub[bk], bool):
                            raise ConfigError(f"{where}: per-path `{bk}` must be true or false")
                        setattr(pp, bk.replace("-", "_"), sub[bk])
                cfg.per_path.append(pp)
    return cfg


def find_pyproject(start: Path) -> Path | None:
    start = start.resolve()
    for d in [start, *start.parents]:
        p = d / "pyproject.toml"
        if p.is_file():
            return p
    return None


def load_config(path: Path | None = None, start: Path | None = None) -> Config:
    """Load `[tool.reload-lint]` from `path` or the nearest pyproject.toml above `start`."""
    if path is None:
        path = find_pyproject(start or Path.cwd())
        if path is None:
            return Config()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: config is not valid UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    table = data.get("tool", {}).get("reload-lint")
    if table is None:
        return Config(source=str(path))
    return parse_table(table, str(path))
