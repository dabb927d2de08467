"""The pipeline: files -> index -> summaries/analysis -> findings (fingerprinted, sorted).

Only files whose text mentions a root name are parsed up front (in parallel); every other
module is parsed lazily, the first time the analysis resolves a name into it. Per-file
records are cached by content hash (reload_lint/cache.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint import cache as cachemod
from reload_lint.analysis.contracts import CONTRACT_NAMES, make_contract
from reload_lint.analysis.interp import Analyzer
from reload_lint.config import Config, path_matches
from reload_lint.discover import SourceFile, discover
from reload_lint.errors import ReloadLintError
from reload_lint.findings import FileError, Finding, compute_fingerprints
from reload_lint.index.project import ProjectIndex
from reload_lint.rules import selected


@dataclass
class RunResult:
    findings: list[Finding]
    errors: list[FileError]
    files_scanned: int
    files_parsed: int = 0
    suppressions: dict = field(default_factory=dict)
    texts: dict = field(default_factory=dict)


def _module_name(rel_parts: tuple[str, ...], pkg_dirs: set[tuple[str, ...]]) -> tuple[str, bool]:
    """Dotted module name from a file's path parts: walk up while the parent is a package."""
    *dirs, fname = rel_parts
    stem = fname[:-3]
    is_pkg = stem == "__init__"
    parts = [] if is_pkg else [stem]
    i = len(dirs)
    while i > 0 and tuple(dirs[:i]) in pkg_dirs:
        parts.insert(0, dirs[i - 1])
        i -= 1
    if not parts:  # an __init__.py whose directory is not itself under a package
        parts = [dirs[-1]] if dirs else ["__init__"]
    return ".".join(parts), is_pkg


def auto_contract(files: Iterable[SourceFile]) -> str:
    for sf in files:
        top = sf.rel.split("/", 1)[0]
        if top == "sglang":
            return "inplace-only"
        if top == "vllm":
            return "vllm-layerwise"
    return "vllm-layerwise"


def run_check(
    paths,
    cfg: Config,
    *,
    base_dir: Path,
    use_cache: bool = True,
    cache_dir: Path | None = None,
    jobs: int | None = None,
    only_paths: set[str] | None = None,
) -> RunResult:
    base_dir = Path(base_dir)
    files, errors = discover([Path(p) for p in paths], base_dir, cfg)
    pkg_dirs = {tuple(sf.rel.split("/")[:-1]) for sf in files if sf.rel.endswith("/__init__.py")}
    by_module: dict[str, SourceFile] = {}
    for sf in files:
        name, is_pkg = _module_name(tuple(sf.rel.split("/")), pkg_dirs)
        sf.module, sf.is_package = name, is_pkg
        by_module.setdefault(name, sf)

    contract_name = cfg.contract
    if contract_name == "auto":
        contract_name = auto_contract(files)
    if contract_name not in CONTRACT_NAMES:
        raise ReloadLintError(
            f"unknown reload contract `{contract_name}` (known: {', '.join(CONTRACT_NAMES)})"
        )
    contracts = {n: make_contract(n, cfg.preserving_helpers) for n in CONTRACT_NAMES}
    # checked up front: contract_for runs inside the analysis, which survives odd statements
    for pp in cfg.per_path:
        if pp.contract and pp.contract not in contracts:
            raise ReloadLintError(
                f'unknown reload contract `{pp.contract}` in per-path "{pp.pattern}" '
                f"(known: {', '.join(CONTRACT_NAMES)})"
            )

    def contract_for(path: str):
        """The first per-path entry naming a contract whose glob matches, else the run's."""
        for pp in cfg.per_path:
            if pp.contract and path_matches(pp.pattern, path):
                return contracts[pp.contract]
        return contracts[contract_name]

    store = cachemod.RecordStore(
        files, cfg, use_cache=use_cache, cache_dir=cache_dir, jobs=jobs, errors=errors
    )
    roots = cfg.all_root_names()
    seeds = [sf for sf in files if store.mentions_any(sf, roots)]
    # files passed by name are parsed even when no root mentions them, so a syntax error in
    # the file a pre-commit hook names is reported (a directory run parses what it reaches)
    named = [sf for sf in files if only_paths and sf.rel in only_paths and sf not in seeds]
    store.prefetch(seeds + named)

    def loader(module: str):
        sf = by_module.get(module)
        return store.record(sf) if sf is not None else None

    index = ProjectIndex(
        {m: sf.rel for m, sf in by_module.items()}, loader, _class_bases(store, by_module)
    )
    analyzer = Analyzer(index, roots, cfg.all_apply_names(), contract_for)
    seed_modules = sorted(sf.module for sf in seeds)
    for m in seed_modules:
        index.record(m)
    analyzer.cache_modules = sorted(
        sf.module for sf in files if _LAZY_CACHE_RE.search(store.texts.get(sf.rel, ""))
    )
    findings = analyzer.run(seed_modules)
    store.save()
    errors.extend(getattr(analyzer, "errors", ()))

    findings = [f for f in findings if _selected(f.rule, f.path, cfg)]
    findings.sort(key=Finding.sort_key)
    compute_fingerprints(findings)
    texts = store.texts
    for f in findings:
        f.snippet = _snippet(texts, f)
    if only_paths is not None:
        findings = [f for f in findings if f.path in only_paths]
        errors = [e for e in errors if e.path in only_paths]
    suppressions = _scan_suppressions(texts)
    errors = [e for e in store.errors if _selected(e.rule, e.path, cfg)]
    if only_paths is not None:
        errors = [e for e in errors if e.path in only_paths]
    errors.sort(key=lambda e: (e.path, e.line, e.rule))
    return RunResult(
        findings=findings,
        errors=errors,
        files_scanned=len(files),
        files_parsed=store.parsed,
        suppressions=suppressions,
        texts=texts,
    )


_CLASS_RE = None
# `if self._x is None:` followed by `self._x = self.<attr>...`: a first-use cache derived from
# the object's own state (RL201 candidates), found by text before anything is parsed.
_LAZY_CACHE_RE = __import__("re").compile(
    r"if self\.(\w+) is None:\s*\n\s*self\.\1 = [^\n]*self\.\w+"
)


def _class_bases(store, by_module: dict) -> dict[str, list[str]]:
    """Simple base name -> modules that declare a subclass of it (text scan, no parse)."""
    import re

    global _CLASS_RE
    if _CLASS_RE is None:
        _CLASS_RE = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)\)", re.M)
    out: dict[str, list[str]] = {}
    for mod, sf in sorted(by_module.items()):
        text = store.texts.get(sf.rel)
        if text is None or "class" not in text:
            continue
        for m in _CLASS_RE.finditer(text):
            for base in m.group(1).split(","):
                name = base.strip().split("[", 1)[0].rsplit(".", 1)[-1]
                if name.isidentifier():
                    lst = out.setdefault(name, [])
                    if not lst or lst[-1] != mod:
                        lst.append(mod)
    return out


def _selected(code: str, path: str, cfg: Config) -> bool:
    select, ignore = list(cfg.select), list(cfg.ignore)
    import fnmatch

    for pp in cfg.per_path:
        if fnmatch.fnmatch(path, pp.pattern):
            if pp.select:
                select = list(pp.select)
            ignore = ignore + list(pp.ignore)
    return selected(code, select, ignore)


def _snippet(texts: dict, f: Finding) -> str:
    text = texts.get(f.path)
    if text is None:
        return ""
    lines = text.splitlines()
    if 0 < f.line <= len(lines):
        return lines[f.line - 1].strip()
    return ""


def _scan_suppressions(texts: dict) -> dict:
    try:
        from reload_lint.suppress import scan_suppressions
    except ImportError:
        return {}
    out = {}
    for path, text in texts.items():
        if "reload-lint:" in text:
            sups = scan_suppressions(text)
            if sups:
                out[path] = sups
    return out


def default_jobs() -> int:
    return max(1, min(8, os.cpu_count() or 1))
