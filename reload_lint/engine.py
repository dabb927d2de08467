"""The pipeline: files -> index -> summaries/analysis -> findings (fingerprinted, sorted).

Only files whose text mentions a root name are parsed up front (in parallel); every other
module is parsed lazily, the first time the analysis resolves a name into it. Per-file
records are cached by content hash (reload_lint/incremental/cache.py).
"""

from __future__ import annotations

import ast
import gc
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.analysis import reloadfacts
from reload_lint.bases import is_base_path
from reload_lint.config import CONTRACT_CHOICES, Config, path_matches
from reload_lint.discover import SourceFile, discover
from reload_lint.errors import ReloadLintError
from reload_lint.findings import FileError, Finding, compute_fingerprints
from reload_lint.fsutil import read_regular
from reload_lint.incremental import RecordStore
from reload_lint.progress import Progress


@dataclass
class RunResult:
    findings: list[Finding]
    errors: list[FileError]
    files_scanned: int
    files_parsed: int = 0
    suppressions: dict = field(default_factory=dict)
    texts: dict = field(default_factory=dict)
    codebase: str | None = None  # detect_codebase: "vllm", "sglang" or None
    # the files the analysis could reach (one per module name), and the files it could not
    # because another file holds the same module name (file -> that other file)
    analysed: frozenset = frozenset()
    shadowed: dict = field(default_factory=dict)
    # `reload-lint explain`: what the analysis decided on the asked-for lines (explain.py)
    explain: dict | None = None
    # the run's contract and what decided it (choose_contract), the `--base` trees indexed,
    # and the engine classes the audited package subclasses that no tree indexed defines
    contract: tuple[str, str] = ("vllm-layerwise", "")
    bases: tuple = ()
    unresolved: tuple[str, ...] = ()
    # audited files that cannot be imported on the base: (path, module, line) of the first
    # unconditional engine import the base does not have (reload_lint/unread.py), and how
    # many findings whose post-load lies there were not reported
    unimportable: tuple = ()
    unimportable_dropped: int = 0


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
    # PEP 420: a folder without __init__.py inside a regular package (sglang/srt/) is a
    # namespace package; name the file from the outermost regular package above it.
    for j in range(1, i + 1):
        if tuple(dirs[:j]) in pkg_dirs:
            bridged = [*dirs[j - 1 :], *([] if is_pkg else [stem])]
            return ".".join(bridged), is_pkg
    return ".".join(parts), is_pkg


def detect_codebase(files: Iterable[SourceFile]) -> str | None:
    """ "vllm" or "sglang" when the audited tree holds that package at its top (a release's
    sources, or a checkout of the repository: `vllm/...` relative to the project root), else
    None. It picks the default reload contract and the bundled allowlist."""
    for sf in files:
        top = sf.rel.split("/", 1)[0]
        if top in ("vllm", "sglang"):
            return top
    return None


_ENGINE_IMPORT = re.compile(rb"^[ \t]*(?:from|import)[ \t]+(vllm|sglang)\b", re.M)
_PWAL = "process_weights_after_loading"


def auto_contract(files: Iterable[SourceFile], bases=()) -> str:
    """The contract `choose_contract` picks (its name only)."""
    return choose_contract(files, bases)[0]


# vLLM's layerwise machinery (model_loader/reload/layerwise.py): the reload's entry points, and
# the online processing that runs a layer's post-load through the same pipeline (0.33.0)
_LAYERWISE_CALLS = (
    b"initialize_layerwise_reload",
    b"finalize_layerwise_reload",
    b"initialize_online_processing",
)
# a loop over a model's modules, by text: only such files are parsed for `_reruns_post_load`
_MODULE_LOOP = re.compile(rb"\bfor\b[^\n]*\.(?:named_)?(?:modules|children)\(")


def choose_contract(files: Iterable[SourceFile], bases=()) -> tuple[str, str]:
    """(contract, what decided it) for `contract = "auto"` (docs/contracts.md, "Choosing a
    contract"). A release tree: its own. An out-of-tree package, in order:

    - its own weight update calls vLLM's `initialize_layerwise_reload` /
      `finalize_layerwise_reload`: `vllm-layerwise` (of the base release when one is given);
    - it imports SGLang and not vLLM: `inplace-only`;
    - its own code re-runs post-load on live modules (a loop over `model.modules()` that calls
      `process_weights_after_loading`, outside a replacement of vLLM's first-load driver):
      `inplace-only`, nothing copies back after it;
    - a `--base` vLLM: `vllm-layerwise` when the release has `model_loader/reload/`, else
      `vllm-load-weights` (an update is `model.load_weights` and never re-runs post-load);
    - else `vllm-layerwise` with the newest release's reload facts.
    """
    files = list(files)
    top = detect_codebase(files)
    if top is not None:
        if top == "sglang":
            return "inplace-only", f"the audited tree is SGLang's (`{top}/` at its top)"
        loader = _release_loader(files, top)
        if loader is not None and not (loader / "reload").is_dir():
            return (
                "vllm-load-weights",
                f"the audited tree is vLLM's (`{top}/` at its top) and has no "
                f"`{top}/model_executor/model_loader/reload/`: an update is `model.load_weights`, "
                "which copies into the registered parameters and never re-runs post-load",
            )
        return "vllm-layerwise", f"the audited tree is vLLM's (`{top}/` at its top)"
    engines: set[bytes] = set()
    reruns = layerwise = None
    for sf in files:
        data = read_regular(sf.path)
        if data is None:  # not a regular file: the record store reports it (RL903)
            continue
        if len(engines) < 2:  # which engines it imports: only SGLang-and-not-vLLM matters
            engines.update(_ENGINE_IMPORT.findall(data))
        if layerwise is None and any(c + b"(" in data for c in _LAYERWISE_CALLS):
            line = _call_line(data, _LAYERWISE_CALLS)
            if line:
                layerwise = f"{sf.rel}:{line}"
        if reruns is None and _PWAL.encode() + b"(" in data and _MODULE_LOOP.search(data):
            line = _reruns_post_load(data)
            if line:
                reruns = f"{sf.rel}:{line}"
    vllm_base = next((b for b in bases if b.package == "vllm"), None)
    sglang_base = next((b for b in bases if b.package == "sglang"), None)
    if layerwise is not None:
        of = f" of {vllm_base.label}" if vllm_base is not None else ""
        return (
            "vllm-layerwise",
            f"the package's weight update runs vLLM's layerwise reload{of} ({layerwise})",
        )
    if (engines == {b"sglang"} and vllm_base is None) or (sglang_base and vllm_base is None):
        return "inplace-only", "the package runs on SGLang (imports SGLang, not vLLM)"
    if reruns is not None:
        return (
            "inplace-only",
            f"the package's own code re-runs post-load on live modules ({reruns}): nothing "
            "copies back after it",
        )
    if vllm_base is not None:
        if vllm_base.has_reload_package():
            return (
                "vllm-layerwise",
                f"base {vllm_base.label} has the layerwise reload "
                "(vllm/model_executor/model_loader/reload/)",
            )
        return (
            "vllm-load-weights",
            f"base {vllm_base.label} has no vllm/model_executor/model_loader/reload/: an "
            "update is `model.load_weights`, which copies into the registered parameters and "
            "never re-runs post-load",
        )
    return "vllm-layerwise", "default for a vLLM package (the newest release's reload facts)"


_BUILDS = re.compile(r"(?i)init|build|create|construct|instantiate|make|^[A-Z]")


def _first_load_loops(fn) -> set[int]:
    """ids of the nodes of each module loop in `fn` over a model `fn` itself built before the
    loop (bound from a constructor-like call: `_initialize_model(...)`, `build_model(...)`,
    `ModelClass(...)`): post-load run there runs on the first load only."""
    built: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            f = node.value.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name and _BUILDS.search(name):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        built.setdefault(t.id, node.lineno)
    out: set[int] = set()
    for loop in ast.walk(fn):
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or not isinstance(loop.iter, ast.Call):
            continue
        recv = getattr(loop.iter.func, "value", None)
        if isinstance(recv, ast.Name) and built.get(recv.id, loop.lineno) < loop.lineno:
            out.update(id(n) for n in ast.walk(loop))
    return out


def _release_loader(files, top: str):
    """The tree's `<top>/model_executor/model_loader/` folder on disk (looked up beside the
    audited files, so auditing a sub-folder of a checkout still sees it), or None where the
    tree has none (a partial copy: nothing can be said about its reload)."""
    for sf in files:
        rel, path = sf.rel, str(sf.path)
        if rel.split("/", 1)[0] != top or not path.endswith(rel):
            continue
        loader = Path(path[: len(path) - len(rel)] or ".") / top / "model_executor" / "model_loader"
        return loader if loader.is_dir() else None
    return None


def _call_line(data: bytes, names) -> int | None:
    """The first line calling one of `names` (a call, not an import or a definition)."""
    for i, line in enumerate(data.splitlines(), 1):
        s = line.strip()
        if s.startswith((b"#", b"from ", b"import ", b"def ")):
            continue
        if any(n + b"(" in s for n in names):
            return i
    return None


def _reruns_post_load(data: bytes) -> int | None:
    """The line of a loop by which the file drives post-load itself: a loop over a model's
    modules (`.modules()`, `.named_modules()`, `.children()`) that calls
    `process_weights_after_loading` (a package's own update path re-running post-load on
    live parameters). Not one: a post-load that delegates to a kernel's post-load, and a
    replacement of vLLM's first-load driver (a function named `*process_weights_after_loading`
    or assigned over `<module>.process_weights_after_loading`), which runs once after the
    first load as the function it replaces does, and a first-load driver written inline: the
    loop walks a model the same function has just built (`model = _initialize_model(...)`;
    `model.load_weights(...)`; `for _, m in model.named_modules(): ...`, vLLM 0.4's
    `DefaultModelLoader.load_model`), which exists only on the first load."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    drivers = {
        node.value.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Name)
        and any(isinstance(t, ast.Attribute) and t.attr == _PWAL for t in node.targets)
    }
    skip: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            fn.name.endswith(_PWAL) or fn.name in drivers
        ):
            if not any(isinstance(a, ast.Name) and a.id == "self" for a in fn.args.args[:1]):
                skip.update(id(n) for n in ast.walk(fn))
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            skip.update(_first_load_loops(fn))
    # a re-run that copies its results back into the first pass's storage (`old.copy_(new)`,
    # in the function itself or a function of this file it calls): not a re-run on live
    # modules with nothing copied back after it
    fns = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    copies = {fn.name for fn in fns if _calls_attr(fn, "copy_")}
    for fn in fns:
        called = {
            c.func.id
            for c in ast.walk(fn)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
        }
        if fn.name in copies or called & copies:
            skip.update(id(n) for n in ast.walk(fn))
    for loop in ast.walk(tree):
        if not isinstance(loop, (ast.For, ast.AsyncFor)) or id(loop) in skip:
            continue
        it = loop.iter
        if not (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Attribute)
            and it.func.attr in ("modules", "named_modules", "children", "named_children")
        ):
            continue
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == _PWAL
            ):
                return loop.lineno
    return None


def _calls_attr(fn, attr: str) -> bool:
    return any(
        isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == attr
        for c in ast.walk(fn)
    )


def run_check(paths, cfg: Config, **kw) -> RunResult:
    """One check (the keywords as `_run_check`'s), with the cyclic garbage collector off.

    A run allocates millions of small objects (unpickled records and the pack, the
    analysis's abstract values, frames and memo keys) and makes no reference cycles worth
    collecting: reference counting frees what it drops (peak RSS is the same either way on
    the vLLM and SGLang trees). With the collector on, every few hundred allocations it walks
    the youngest objects, and now and then every object kept so far (the records): ~20% of
    an analysis on vLLM 0.33.0. The collector's state is put back when the run ends."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _run_check(paths, cfg, **kw)
    finally:
        if collecting:
            gc.enable()


def _run_check(
    paths,
    cfg: Config,
    *,
    base_dir: Path,
    use_cache: bool = True,
    cache_dir: Path | None = None,
    jobs: int | None = None,
    only_paths: set[str] | None = None,
    explain: set[tuple[str, int]] | None = None,
    bases=(),
) -> RunResult:
    base_dir = Path(base_dir)
    files, errors = discover([Path(p) for p in paths], base_dir, cfg)
    # library context (`--base`, bases.py): indexed, never a root, never reported
    lib = _base_files(bases)
    pkg_dirs = {
        tuple(sf.rel.split("/")[:-1]) for sf in [*files, *lib] if sf.rel.endswith("/__init__.py")
    }
    by_module: dict[str, SourceFile] = {}
    for sf in [*files, *lib]:  # the audited package's own module wins (a fork and its base)
        name, is_pkg = _module_name(tuple(sf.rel.split("/")), pkg_dirs)
        sf.module, sf.is_package = name, is_pkg
        by_module.setdefault(name, sf)
    own = {id(sf) for sf in files}
    views = _root_views(files, {m: sf for m, sf in by_module.items() if id(sf) in own})
    for _, view in views:
        for sf in lib:
            view.setdefault(sf.module, sf)

    contract_name = cfg.contract
    contract_why = "configured (`contract` in [tool.reload-lint] or `--contract`)"
    if contract_name == "auto":
        contract_name, contract_why = choose_contract(files, bases)
    # a CPU-only build of the audited distribution (its metadata): no captured graph reads
    # anything a reload moves, so every post-load path is a no-graphs scope
    from reload_lint.bases import cpu_build

    cpu = cpu_build(paths, {sf.rel.split("/", 1)[0] for sf in files if "/" in sf.rel})
    if cpu:
        contract_why += f"; the audited build captures no CUDA graphs: {cpu}"
    if contract_name not in CONTRACT_NAMES:
        raise ReloadLintError(
            f"unknown reload contract `{contract_name}` (known: {', '.join(CONTRACT_NAMES)})"
        )
    # checked up front: contract_for runs inside the analysis, which survives odd statements
    for pp in cfg.per_path:
        if pp.contract and pp.contract not in CONTRACT_NAMES:
            raise ReloadLintError(
                f'unknown reload contract `{pp.contract}` in per-path "{pp.pattern}" '
                f"(known: {', '.join(CONTRACT_NAMES)})"
            )

    contracts: dict = {}  # made when the analysis first asks (a kept result needs none)

    def contract_for(path: str):
        """The first per-path entry naming a contract whose glob matches, else the run's."""
        if not contracts:
            from reload_lint.analysis.contracts import make_contract

            for n in CONTRACT_NAMES:
                contracts[n] = make_contract(n, cfg.preserving_helpers, facts)
        for pp in cfg.per_path:
            if pp.contract and path_matches(pp.pattern, path):
                return contracts[pp.contract]
        return contracts[contract_name]

    roots = cfg.all_root_names()
    progress = Progress()
    n_discover = len(errors)
    store = RecordStore(
        [*files, *lib],
        cfg,
        use_cache=use_cache,
        cache_dir=cache_dir,
        jobs=jobs,
        errors=errors,
        tree=base_dir.resolve(),
        progress=progress,
    )
    store.keyed_facts = _KEYED_FACTS
    store.scan(lambda text: _text_facts(text, roots), f"{_FACTS_VERSION}\x1f{roots!r}")
    # what the tree's own reload code does (a vLLM tree or a base: read from it; else the newest),
    # kept in the pack with the hashes of the files it was read from
    facts = reloadfacts.detect_kept([*files, *lib], store)
    run_key = deps_key = ""
    cached = None
    explained: dict | None = {} if explain is not None else None
    if use_cache and explain is None:  # an explaining run analyses, whatever is kept
        # not the named files: the analysis is the same whichever files pre-commit names (it
        # reports a subset of it), so a directory run and every set of staged files share
        # their results; the named files' own parse errors are added below
        key_parts = (
            _config_key(cfg),
            f"{contract_name}\x1f{facts.key()}\x1f{','.join(b.prefix for b in bases)}",
        )
        run_key = store.run_key(*key_parts)
        cached = store.get_result(run_key)
        if cached is None:
            # early cutoff: the files that changed give the records they gave before (a
            # comment, a file the analysis never reads): the findings stand; their snippets
            # and the suppression comments are read again from the current texts
            deps_key = store.deps_key(*key_parts)
            cached = store.get_deps_result(deps_key)
            if cached is not None:
                findings, store_errors, _ = cached
                _add_snippets(findings, store)
                cached = (findings, store_errors, _suppressions(store, files))
                store.put_result(run_key, cached)
                store.commit_moved(cached)  # a hit by moved lines: the new state (shiftcut.py)
    if cached is not None:
        findings, store_errors, suppressions = cached
    else:
        # what the analysis reads of each record, kept with the result (fine-grained cutoff)
        from reload_lint.index.deps import Reads  # here: a kept result needs none

        reads = Reads() if use_cache and explain is None else None
        findings = _analyse(
            store,
            files,
            views,
            cfg,
            roots,
            contract_for,
            progress,
            reads,
            explain=(explain, explained) if explain is not None else None,
            inherit=bool(bases),
        )
        store_errors = errors[n_discover:]
        suppressions = _suppressions(store, files)
        if use_cache and explain is None:
            store.put_result(run_key, (findings, store_errors, suppressions))
            store.put_deps_result(deps_key, (findings, store_errors, suppressions), reads)
    if cpu:
        findings = _drop_moves_without_graphs(findings, cpu, explained)
    unimportable: tuple = ()
    n_before = len(findings)
    if lib:
        findings, unimportable = _drop_unimportable(findings, store, files, lib, bases, explained)
    n_unimportable = n_before - len(findings)
    if lib or detect_codebase(files) is not None:
        # the whole program is in view (a release tree, or a package with the vLLM it runs
        # on): a name nothing in it reads is read by nothing. A package audited alone is not:
        # the engine that drives it may read its attributes by name.
        findings = _drop_never_read(findings, store, [*files, *lib], explained)
    if only_paths:
        store_errors = [*store_errors, *_named_errors(store, files, only_paths, store_errors)]
    store.save()
    progress.close()
    errors = [
        e
        for e in [*errors[:n_discover], *store_errors]
        if cfg.rule_enabled(e.path, e.rule) and not is_base_path(e.path)
    ]
    if only_paths is not None:
        # pre-commit's named files: the findings located in them, and those whose trace passes
        # through them (a helper, constructor or oracle edited), each with its `via` steps
        from reload_lint.incremental import through_files

        findings = through_files(findings, only_paths)
        errors = [e for e in errors if e.path in only_paths]
    errors.sort(key=lambda e: (e.path, e.line, e.rule))
    return RunResult(
        findings=findings,
        errors=errors,
        files_scanned=len(files),
        files_parsed=store.parsed,
        suppressions=suppressions,
        texts=_Texts(store),
        codebase=detect_codebase(files),
        analysed=frozenset(
            sf.rel for group, view in views for sf in group if view[sf.module] is sf
        ),
        shadowed={
            sf.rel: view[sf.module].rel
            for group, view in views
            for sf in group
            if view[sf.module] is not sf
        },
        explain=explained,
        contract=(contract_name, contract_why),
        bases=tuple(bases),
        unresolved=_unresolved(store, files, lib),
        unimportable=unimportable,
        unimportable_dropped=n_unimportable,
    )


def _base_files(bases) -> list[SourceFile]:
    """The files of the `--base` trees, each path under its base's prefix (bases.py)."""
    from reload_lint.config import Config as _Plain

    out: list[SourceFile] = []
    for b in bases:
        found, _ = discover(list(b.paths), b.root, _Plain())
        for sf in found:
            sf.rel = f"{b.prefix}/{sf.rel}"
            out.append(sf)
    return out


def _unresolved(store, files, lib) -> tuple[str, ...]:
    """Engine classes (imported from `vllm...` / `sglang...`) that audited classes subclass
    and that no indexed tree defines: what the analysis could not see (the unresolved note).
    Only for an out-of-tree package: a release tree defines its own."""
    from reload_lint.bases import engine_imports

    if detect_codebase(files) is not None:
        return ()
    have = {sf.module.partition(".")[0] for sf in [*files, *lib]}
    out: set[str] = set()
    for sf in files:
        names = (store.facts(sf) or _NO_FACTS)[3]
        if not names:
            continue
        text = store.text_of(sf.rel) or ""
        imported = engine_imports(text)
        for n in names:
            mod = imported.get(n)
            if mod is not None and mod.partition(".")[0] not in have:
                out.add(n)
    return tuple(sorted(out))


def config_scopes(cfg: Config) -> tuple:
    """Per-path `cuda-graphs = false` / `update-reruns = false` as analysis scopes."""
    from reload_lint.analysis.pathfacts import Scope

    out = []
    for pp in cfg.per_path:
        if pp.cuda_graphs is False:
            why = f"configured: `{pp.pattern}` runs where no CUDA graphs are captured"
            out.append(Scope(pp.pattern, "no-graphs", why))
        if pp.update_reruns is False:
            why = f"configured: post-load under `{pp.pattern}` never re-runs on an update"
            out.append(Scope(pp.pattern, "no-update", why))
    return tuple(out)


_DEPTH = "call depth limit ("


def collapse_depth_rows(errors) -> list[FileError]:
    """One RL906 row per file for the call-depth limit: a package whose post-load reaches a
    deep parser or encoder would otherwise get a row for every call cut there. The row is
    at the first such call of the file and says how many there were."""
    out: list[FileError] = []
    depth: dict[str, list[FileError]] = {}
    for e in errors:
        if e.message.startswith(_DEPTH):
            depth.setdefault(e.path, []).append(e)
        else:
            out.append(e)
    for path, rows in depth.items():
        rows.sort(key=lambda e: (e.line, e.message))
        first = rows[0]
        if len(rows) == 1:
            out.append(first)
            continue
        limit = first.message[len(_DEPTH) :].split(")", 1)[0]
        names = sorted({r.message.split(" reached at ", 1)[-1].split(";", 1)[0] for r in rows})
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(
            FileError(
                first.rule,
                path,
                f"call depth limit ({limit}) reached at {len(rows)} calls in this file ({shown});"
                " their bodies were not analysed (a result is assumed to be a new tensor"
                " when the call takes tensors)",
                first.line,
            )
        )
    return out


def _named_errors(store, files, only_paths: set[str], have: list[FileError]) -> list[FileError]:
    """The parse errors of the files pre-commit names that the result does not hold: each
    named file is parsed (from the pack when it is there) even when no root reaches it, so a
    syntax error in a staged file is reported whatever the analysis read."""
    known = {(e.path, e.rule, e.line, e.message) for e in have}
    n = len(store.errors)
    for sf in files:
        if sf.rel in only_paths:
            store.record(sf)
    return [e for e in store.errors[n:] if (e.path, e.rule, e.line, e.message) not in known]


def _analyse(
    store,
    files,
    views,
    cfg,
    roots,
    contract_for,
    progress,
    reads=None,
    explain=None,
    inherit=False,
):
    """Index + analysis (a whole-run cache miss): findings selected, sorted, fingerprinted.
    `inherit` (a run with `--base`): the audited classes are looked at for post-load roots
    they inherit from a base's class (Analyzer.inherited_roots)."""
    from reload_lint.analysis.interp import Analyzer
    from reload_lint.index.project import ProjectIndex

    seeds = [sf for sf in files if (store.facts(sf) or _NO_FACTS)[0]]
    # first-use cache candidates (RL201) are analysed whatever the roots reach: parse them
    # with the seeds, in parallel, rather than one by one on demand
    seen = set(map(id, seeds))
    caches = [sf for sf in files if (store.facts(sf) or _NO_FACTS)[2] and id(sf) not in seen]
    seen.update(map(id, caches))
    addr = [sf for sf in files if (store.facts(sf) or _NO_FACTS)[5] and id(sf) not in seen]
    seen.update(map(id, addr))
    # classes that may inherit a base's post-load (simple base names found by the text scan)
    heirs = (
        [sf for sf in files if (store.facts(sf) or _NO_FACTS)[3] and id(sf) not in seen]
        if inherit
        else []
    )
    progress.start("parsing", len(seeds) + len(caches) + len(addr) + len(heirs))
    # a cold run keeps its worker pool for the batches of subclass modules (prefetch_batch)
    store.prefetch(seeds + caches + addr + heirs, keep_pool=True)

    found: dict[tuple, Finding] = {}
    try:
        for view_files, view in views:
            index = ProjectIndex(
                {m: sf.rel for m, sf in view.items()},
                _loader(store, view),
                _class_bases(store, view),
                prefetch=lambda mods, view=view: store.prefetch_batch(
                    [view[m] for m in mods if m in view]
                ),
                reads=reads,
            )
            analyzer = Analyzer(
                index,
                roots,
                cfg.all_apply_names(),
                contract_for,
                scopes=config_scopes(cfg),
            )
            if explain is not None:
                analyzer.explaining = explain[0]
            in_view = set(map(id, view_files))
            seed_modules = sorted(sf.module for sf in seeds if id(sf) in in_view)
            for m in seed_modules:
                index.record(m)
            if inherit:
                analyzer.heir_modules = sorted(
                    sf.module
                    for sf in view_files
                    if (store.facts(sf) or _NO_FACTS)[3] and view.get(sf.module) is sf
                )
            analyzer.addr_modules = sorted(
                sf.module
                for sf in view_files
                if (store.facts(sf) or _NO_FACTS)[5] and view.get(sf.module) is sf
            )
            analyzer.cache_modules = sorted(
                sf.module
                for sf in view_files
                if (store.facts(sf) or _NO_FACTS)[2] and view.get(sf.module) is sf
            )
            # modules asserting a data_ptr equality: what external callees return views
            # (analysis/externals.py); read only when a call needs them
            analyzer.alias_modules = tuple(
                sorted(m for m, sf in view.items() if (store.facts(sf) or _NO_FACTS)[4])
            )
            progress.start("analysing (parsing on demand)", 0)
            for f in analyzer.run(seed_modules):
                # a file another view reaches too: the first view's finding stands
                found.setdefault((f.path, f.line, f.rule, f.target), f)
            if explain is not None:
                out = explain[1]
                out.setdefault("judged", []).extend(analyzer.explained)
                for key, made in analyzer.explain_created.items():
                    out.setdefault("created", {}).setdefault(key, made)
                for key, why in analyzer.dropped.items():
                    out.setdefault("dropped", {}).setdefault(key, why)
            for e in collapse_depth_rows(getattr(analyzer, "errors", ())):
                if all(
                    (e.path, e.line, e.message) != (x.path, x.line, x.message) for x in store.errors
                ):
                    store.errors.append(e)
    finally:
        store.close()
    # a base's own code is context: its findings are its release's, not the package's
    findings = [f for f in found.values() if not is_base_path(f.path)]

    findings = [f for f in findings if cfg.rule_enabled(f.path, f.rule)]
    findings.sort(key=Finding.sort_key)
    compute_fingerprints(findings)
    _add_snippets(findings, store)
    return findings


def _add_snippets(findings: list[Finding], store) -> None:
    """Each finding's source line, from its file's current text."""
    lines: dict[str, list[str]] = {}
    for f in findings:
        if f.path not in lines:
            lines[f.path] = (store.text_of(f.path) or "").splitlines()
        f.snippet = _snippet_line(lines[f.path], f.line)


def _suppressions(store, files) -> dict:
    return _scan_suppressions(
        {rel: store.text_of(rel) or "" for rel in _marker_files(store, files)}
    )


def _loader(store, view: dict):
    def loader(module: str):
        sf = view.get(module)
        return store.record(sf) if sf is not None else None

    return loader


def _root_of(sf: SourceFile) -> str:
    """The folder a file's package hierarchy starts in: `a` for `a/pkg/x.py` named `pkg.x`."""
    parts = sf.rel.split("/")
    depth = len(sf.module.split(".")) + (1 if sf.is_package else 0)
    return "/".join(parts[: max(len(parts) - depth, 0)])


def _root_views(files: list[SourceFile], by_module: dict) -> list[tuple[list, dict]]:
    """The module tables the analysis runs over, each with the files whose roots it runs.

    Normally one: every module name names one file. When two folders hold a package of the
    same name (`a/pkg`, `b/pkg`: two checkouts, vendored copies), the module table is keyed by
    the folder too: each such folder gets its own view, where its own files win and names it
    lacks resolve as in the others, and runs its own roots; the files of the remaining
    folders share one view. Every file is then analysed against its own copy of its package.
    """
    folders: dict[str, set[str]] = {}
    for sf in files:
        folders.setdefault(sf.module, set()).add(_root_of(sf))
    shared = {f for fs in folders.values() if len(fs) > 1 for f in fs}
    if not shared:
        return [(files, by_module)]
    views = []
    groups = [[sf for sf in files if _root_of(sf) not in shared]]
    groups += [[sf for sf in files if _root_of(sf) == f] for f in sorted(shared)]
    for group in groups:
        if not group:
            continue
        view: dict[str, SourceFile] = {}
        for sf in [*group, *files]:
            view.setdefault(sf.module, sf)
        views.append((group, view))
    return views


class _Texts:
    """RunResult.texts: file texts read on demand (a warm run reads almost none)."""

    def __init__(self, store):
        self._store = store

    def get(self, rel: str, default=None):
        text = self._store.text_of(rel)
        return default if text is None else text

    def __getitem__(self, rel: str) -> str:
        text = self._store.text_of(rel)
        if text is None:
            raise KeyError(rel)
        return text

    def __contains__(self, rel) -> bool:
        return self._store.text_of(rel) is not None


CONTRACT_NAMES = CONTRACT_CHOICES[1:]  # analysis/contracts.py's, without importing it
_FACTS_VERSION = "11"
_NO_FACTS = (False, False, False, (), False, False, (), (), ())
# the text facts the analysis reads (the early-cutoff key holds these); the rest (name tokens,
# dynamic-name fragments) feed the never-read pass, which runs on every run
_KEYED_FACTS = 6


def _text_facts(text: str, roots) -> tuple:
    """What the run needs to know about a file before parsing anything, cached per file in
    the file table: (mentions a root name, has a suppression marker, has a first-use cache
    (_LAZY_CACHE_RE), simple base names of the classes it declares, asserts a `data_ptr()`
    equality (_ALIAS_ASSERT_RE: analysis/externals.py), keys a cache on a storage address,
    its `.name` / quoted-name tokens and dynamic attribute-name fragments (reload_lint/unread.py))."""
    from reload_lint.unread import dynamic_fragments, engine_module_imports, name_tokens

    global _CLASS_RE
    if _CLASS_RE is None:
        import re

        _CLASS_RE = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)\)", re.M)
    bases: list[str] = []
    if "class" in text:
        for m in _CLASS_RE.finditer(text):
            for base in m.group(1).split(","):
                name = base.strip().split("[", 1)[0].rsplit(".", 1)[-1]
                if name.isidentifier() and name not in bases:
                    bases.append(name)
    return (
        any(n in text for n in roots),
        "reload-lint:" in text,
        bool(_LAZY_CACHE_RE.search(text)) or _state_guarded(text),
        tuple(bases),
        "data_ptr()" in text and bool(_ALIAS_ASSERT_RE.search(text)),
        _addr_keyed(text),
        name_tokens(text),
        dynamic_fragments(text),
        engine_module_imports(text),
    )


# what a moved storage breaks only through a captured graph: the RL1xx rules and RL202 (a copy
# kept in place of a deleted source); RL201 / RL203 are stale or undone values, graphs or not
_MOVE_RULES = ("RL1", "RL202")


def _drop_moves_without_graphs(findings, cpu: str, explained):
    """On a build that captures no CUDA graphs (bases.cpu_build), nothing a reload moves is
    read by a captured graph: the move findings go, stale-value ones stay."""
    kept, dropped = [], {}
    for f in findings:
        if f.rule.startswith(_MOVE_RULES):
            dropped[(f.path, f.line, f.rule, f.target)] = (
                f"no cuda graphs: the audited build captures none ({cpu}), so the storage "
                "moving on a reload is read afresh by every forward"
            )
            continue
        kept.append(f)
    if explained is not None and dropped:
        explained.setdefault("dropped", {}).update(dropped)
    return kept


def _drop_unimportable(findings, store, files, lib, bases, explained):
    """Findings whose every post-load root lies in a file that cannot be imported on the base:
    an unconditional module-level `from vllm.x import ...` of a module the base does not have
    (reload_lint/unread.py `unimportable`)."""
    from reload_lint.unread import drop_unimportable

    modules = {sf.module for sf in [*files, *lib]}
    dead = {}
    for sf in files:
        for mod, line in (store.facts(sf) or _NO_FACTS)[8]:
            if mod not in modules and mod.split(".", 1)[0] in {b.package for b in bases}:
                dead.setdefault(sf.rel, (mod, line))
    if not dead:
        return findings, ()
    label = ", ".join(b.label for b in bases)
    kept, dropped = drop_unimportable(findings, dead, label)
    if explained is not None and dropped:
        explained.setdefault("dropped", {}).update(dropped)
    return kept, tuple((rel, mod, line) for rel, (mod, line) in sorted(dead.items()))


def _drop_never_read(findings, store, files, explained):
    """Findings whose attribute nothing in the tree or its base reads (reload_lint/unread.py);
    run on every run, after the whole-run cache, so it sees every file's current text."""
    from reload_lint.unread import drop_never_read

    facts = [(sf.rel, store.facts(sf) or _NO_FACTS) for sf in files]
    fragments = frozenset(fr for _rel, fx in facts for fr in fx[7])
    kept, dropped = drop_never_read(
        findings,
        lambda: ((rel, fx[6]) for rel, fx in facts),
        fragments,
        store.text_of,
    )
    if explained is not None and dropped:
        explained.setdefault("dropped", {}).update(dropped)
    return kept


def _addr_keyed(text: str) -> bool:
    """A subscript store keyed by a storage address (analysis/addrcache.py): `[...data_ptr()
    ...] =` / `[id(...)] =`, or `[key] =` with `key = ...data_ptr()` earlier in the file."""
    if "data_ptr()" not in text and "id(" not in text:
        return False
    if _ADDR_SUB_RE.search(text):
        return True
    for m in _ADDR_KEY_RE.finditer(text):
        if re.search(r"\[\s*" + re.escape(m.group(1)) + r"\s*\]\s*=[^=]", text):
            return True
    return False


_ADDR_SUB_RE = re.compile(r"\[[^\]\n]*(?:\.data_ptr\(\)|\bid\()[^\]\n]*\]\s*=[^=]")
_ADDR_KEY_RE = re.compile(r"^[ \t]*(\w+)\s*=\s*[^\n]*(?:\.data_ptr\(\)|\bid\()", re.M)


def _marker_files(store, files) -> list[str]:
    return sorted(sf.rel for sf in files if (store.facts(sf) or _NO_FACTS)[1])


def _config_key(cfg: Config) -> str:
    import dataclasses
    import json

    data = dataclasses.asdict(cfg)
    data.pop("source", None)
    return json.dumps(data, sort_keys=True, default=repr)


_CLASS_RE = None
# `if self._x is None:` followed by `self._x = self.<attr>...`: a first-use cache derived from
# the object's own state (RL201 candidates), found by text before anything is parsed.
_LAZY_CACHE_RE = __import__("re").compile(
    r"if self\.(\w+) is None:\s*\n\s*self\.\1 = [^\n]*(?:"
    # derived from the object's own tensor state: a cast/layout method, arithmetic, a torch op
    r"self\.\w+\.(?:float|half|bfloat16|double|to|t|contiguous|clone|reciprocal|transpose"
    r"|permute|reshape|view|T|mT|detach)\b"
    r"|[-+*/@]\s*self\.\w+"
    r"|torch\.[\w.]+\([^\n]*self\.\w+)"
)


# `if layer.state == State.INIT:` whose block stores `layer.state = ...`: a first-use guard
# written as a state test (index/lower_guard.py state_guard), found by text like the above
_STATE_TEST_RE = __import__("re").compile(
    r"^([ \t]*)(?:el)?if ([A-Za-z_][\w.]*)\.(\w+) == [\w.\"']+:[ \t]*$", __import__("re").M
)


def _state_guarded(text: str) -> bool:
    if " == " not in text:
        return False
    for m in _STATE_TEST_RE.finditer(text):
        indent = len(m.group(1))
        store = f"{m.group(2)}.{m.group(3)} ="
        for line in text[m.end() + 1 :].split("\n", 40)[:40]:
            body = line.lstrip(" \t")
            if not body:
                continue
            if len(line) - len(body) <= indent:
                break  # the block ended
            if body.startswith(store) and not body.startswith(store + "="):
                return True
    return False


# `assert x.data_ptr() == y.data_ptr()` (also through `.untyped_storage()`, the right side
# after a parenthesised line break): a module stating what shares storage
# (analysis/externals.py)
_ALIAS_ASSERT_RE = __import__("re").compile(
    r"\bassert\b[\s(]*[^\n]*?data_ptr\(\)\s*==\s*\(?\s*[^\n]*?data_ptr\(\)"
)


def _class_bases(store, by_module: dict) -> dict[str, list[str]]:
    """Simple base name -> modules that declare a subclass of it (text scan, no parse)."""
    out: dict[str, list[str]] = {}
    for mod, sf in sorted(by_module.items()):
        for name in (store.facts(sf) or _NO_FACTS)[3]:
            out.setdefault(name, []).append(mod)
    return out


def _snippet_line(lines: list[str], line: int) -> str:
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _scan_suppressions(texts: dict) -> dict:
    from reload_lint.gate import scan_suppressions

    out = {}
    for path, text in texts.items():
        if "reload-lint:" in text:
            sups = scan_suppressions(text)
            if sups:
                out[path] = sups
    return out
