"""Library context: the dependency trees a package is audited against (`--base SPEC`).

A plugin's quant methods subclass vLLM's, its layers are vLLM's, its parameters come from
vLLM's `create_weights`, and its weight update runs vLLM's reload. `--base vllm==X` (or
`sglang==X`, or a path) indexes that tree next to the audited paths: its classes, helpers
and reload code are known to the analysis, its roots are not run on their own, and findings
are reported only in the audited paths (engine.py). The release is downloaded once, like
`--vllm` (sources.py); its files go into the project's record pack, so a second audit reads
them from the cache.

Inputs: the specs (CLI `--base`, config `base = [...]`). Outputs: `Base` records the engine
indexes, and `suggest` (what base an audited package names: its metadata's `Requires-Dist`,
a `vllm_version_is("X")` gate), used by the unresolved-base note (`unresolved_note`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from reload_lint.errors import ReloadLintError
from reload_lint.lazyre import LazyPattern

ENGINES = ("vllm", "sglang")
_SPEC = LazyPattern(r"^(vllm|sglang)\s*==\s*([0-9][0-9A-Za-z.+_-]*)$")
# the prefix of a base file's path: never a package folder, never a path a user audits
PREFIX = "@base"


@dataclass(frozen=True)
class Base:
    spec: str  # as given
    root: Path  # the folder whose entries are top-level packages (`vllm/`)
    paths: tuple[Path, ...]  # what is indexed
    prefix: str  # base files' paths start with this (`@base/vllm-0.33.0`)
    package: str | None = None  # "vllm" / "sglang" when the tree holds one at its top
    version: str | None = None

    @property
    def label(self) -> str:
        if self.package and self.version:
            return f"{self.package}=={self.version}"
        return self.spec

    def has_reload_package(self) -> bool:
        """Whether the base vLLM has the layerwise reload (`model_loader/reload/`)."""
        return (self.root / "vllm/model_executor/model_loader/reload/layerwise.py").is_file()


def is_base_path(rel: str) -> bool:
    return rel.startswith(PREFIX + "/")


def _slug(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z._+-]+", "-", text).strip("-") or "base"


def resolve(spec: str, cwd: Path | None = None) -> Base:
    """A `--base` spec as a tree to index; a release is fetched once (sources.py)."""
    spec = spec.strip()
    m = _SPEC.match(spec)
    if m:
        from reload_lint.sources import release_sources

        pkg, version = m.group(1), m.group(2).split("+", 1)[0]
        root = release_sources(pkg, version)
        return Base(
            spec,
            root,
            (root / pkg,),
            f"{PREFIX}/{pkg}-{version}",
            package=pkg,
            version=version,
        )
    if "==" in spec or re.match(r"^[A-Za-z][\w-]*\s*[<>=!~]", spec):
        raise ReloadLintError(
            f"--base {spec}: give `vllm==VERSION`, `sglang==VERSION` or a folder "
            "(one exact release: a range cannot say which tree to read)"
        )
    p = Path(spec).expanduser()
    if not p.is_absolute() and cwd is not None:
        p = cwd / p
    if not p.is_dir():
        raise ReloadLintError(f"--base {spec}: no such folder (or give vllm==VERSION)")
    p = p.resolve()
    if (p / "__init__.py").is_file():  # a package folder: its parent holds the top level
        root, paths = p.parent, (p,)
        tops = [p.name]
    else:
        root, paths = p, (p,)
        tops = [c.name for c in sorted(p.iterdir()) if (c / "__init__.py").is_file()]
    package = next((t for t in tops if t in ENGINES), None)
    version = _tree_version(root, package) if package else None
    return Base(spec, root, paths, f"{PREFIX}/{_slug(p.name)}", package=package, version=version)


def _tree_version(root: Path, package: str) -> str | None:
    for name in ("version.py", "_version.py"):
        f = root / package / name
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = re.search(
            r"""(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([0-9][^'"]*)['"]""", text
        )
        if m:
            return m.group(1)
    return None


def resolve_all(specs, cwd: Path | None = None) -> tuple[Base, ...]:
    out: list[Base] = []
    seen: set[str] = set()
    for spec in specs:
        b = resolve(spec, cwd)
        if b.prefix in seen:
            continue
        seen.add(b.prefix)
        out.append(b)
    return tuple(out)


# --------------------------------------------------------------------- what a package names
_REQ = LazyPattern(
    r"^Requires-Dist:\s*(vllm|sglang)\s*(?:\[[^\]]*\])?\s*==\s*([0-9][\w.+-]*)", re.M
)
_PYPROJECT_REQ = LazyPattern(r"""['"](vllm|sglang)\s*(?:\[[^\]]*\])?\s*==\s*([0-9][\w.+-]*)['"]""")
_GATE = LazyPattern(r"""\bvllm_version_is\(\s*['"]([0-9][\w.+-]*)['"]\s*\)""")


_RANGE = LazyPattern(r"^Requires-Dist:\s*(vllm|sglang)\s*(?:\[[^\]]*\])?\s*([<>!=~][^;\n]*)", re.M)


def _version_key(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in v.split("."))


def _ranged(text: str) -> tuple[str, str] | None:
    """A `Requires-Dist: vllm>=0.22.1,<=0.31.0,!=0.30.*` range: (spec, why). An inclusive
    upper bound the exclusions do not rule out names the newest release the range admits;
    an open range is quoted for the user to pick a release in it (spec `vllm==VERSION`)."""
    m = _RANGE.search(text)
    if m is None:
        return None
    pkg, body = m.group(1), m.group(2).strip().strip("()")
    clauses = [c.strip() for c in body.split(",") if c.strip()]
    excluded = [c[2:].strip() for c in clauses if c.startswith("!=")]
    tops = [c[2:].strip() for c in clauses if c.startswith("<=")]
    for top in sorted(tops, key=_version_key):  # the tightest inclusive bound
        if not any(top == x or (x.endswith(".*") and top.startswith(x[:-1])) for x in excluded):
            return f"{pkg}=={top}", f"the newest release `{pkg}{body}` admits"
        break
    return f"{pkg}==VERSION", f"a release in `{pkg}{body}`"


def _wheel_dirs(paths):
    """Each audited folder and the three folders above it (where an unzipped wheel keeps its
    `*.dist-info`), as they exist."""
    for p in paths:
        p = Path(p).resolve()
        for d in [p, *list(p.parents)[:3]]:
            if d.is_dir():
                yield d


def _metadata_in(d: Path):
    """(path, text) of each readable `*.dist-info/METADATA` in folder `d`, sorted."""
    for meta in sorted(d.glob("*.dist-info/METADATA")):
        try:
            yield meta, meta.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue


_CPU_TORCH = re.compile(r"^Requires-Dist:\s*torch\s*==\s*[0-9][\w.]*\+cpu\b", re.M)
_VERSION = re.compile(r"^Version:\s*(\S+)", re.M)


def _provides(meta: Path, tops: set[str]) -> bool:
    """Whether the distribution of `meta` (a `*.dist-info/METADATA`) installs one of the
    audited top-level packages (its `top_level.txt`, else a `RECORD` row under it)."""
    info = meta.parent
    try:
        top_level = (info / "top_level.txt").read_text(encoding="utf-8", errors="replace")
        if tops & set(top_level.split()):
            return True
    except OSError:
        pass
    try:
        with open(info / "RECORD", encoding="utf-8", errors="replace") as fh:
            return any(row.split("/", 1)[0] in tops for row in fh if "/" in row)
    except OSError:
        return False


def cpu_build(paths, tops) -> str | None:
    """Why the audited distribution is a CPU-only build, or None: the `*.dist-info` beside the
    audited folders that installs the audited package (an unzipped wheel, a site-packages
    install) has a `+cpu` local version or requires a `+cpu` torch. Such a build captures no
    CUDA graphs, so nothing a reload moves is read by a captured graph."""
    tops = set(tops)
    for d in _wheel_dirs(paths):
        for meta in sorted(d.glob("*.dist-info/METADATA")):
            if not _provides(meta, tops):
                continue
            try:
                text = meta.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            v = _VERSION.search(text)
            if v and "+" in v.group(1) and "cpu" in v.group(1).split("+", 1)[1]:
                return f"{meta.parent.name}: version {v.group(1)} is a CPU-only build"
            m = _CPU_TORCH.search(text)
            if m:
                return (
                    f"{meta.parent.name}/METADATA requires "
                    f"`{m.group(0).split(':', 1)[1].strip()}` (a CPU-only build)"
                )
    return None


def suggest(paths, texts) -> tuple[str, str] | None:
    """(spec, where it comes from) for the base an audited package names, or None.

    In order: a `Requires-Dist: vllm==X` in a `*.dist-info/METADATA` beside the audited
    folders (an unzipped wheel), a `"vllm==X"` in a `pyproject.toml` at or above them, and
    the version most often tested by a `vllm_version_is("X")` gate in the audited texts."""
    for d in _wheel_dirs(paths):
        for meta, text in _metadata_in(d):
            m = _REQ.search(text)
            if m:
                return f"{m.group(1)}=={m.group(2).split('+', 1)[0]}", f"{meta}"
            got = _ranged(text)
            if got is not None:
                return got[0], f"{meta} ({got[1]})"
        pp = d / "pyproject.toml"
        if pp.is_file():
            try:
                text = pp.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            m = _PYPROJECT_REQ.search(text)
            if m:
                return f"{m.group(1)}=={m.group(2).split('+', 1)[0]}", f"{pp}"
    gates: Counter = Counter()
    where: dict[str, str] = {}
    for rel, text in texts:
        if "vllm_version_is" not in text:
            continue
        for m in _GATE.finditer(text):
            gates[m.group(1)] += 1
            where.setdefault(m.group(1), f"{rel}:{text.count(chr(10), 0, m.start()) + 1}")
    if gates:
        version = max(sorted(gates), key=lambda v: gates[v])
        return f"vllm=={version}", f'`vllm_version_is("{version}")` gate, {where[version]}'
    return None


_IMPORT = LazyPattern(
    r"^[ \t]*from[ \t]+((?:vllm|sglang)(?:\.[\w.]+)?)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)", re.M
)


def engine_imports(text: str) -> dict[str, str]:
    """{name: module} for `from vllm... import name` / `from sglang... import name`."""
    out: dict[str, str] = {}
    for m in _IMPORT.finditer(text):
        body = m.group(2).strip().strip("()")
        for part in body.split(","):
            part = part.strip()
            if not part:
                continue
            name, _, alias = part.partition(" as ")
            name = (alias or name).strip()
            if name.isidentifier():
                out[name] = m.group(1)
    return out


# a requirement on a distribution built on vLLM / SGLang (`vllm-omni==0.24.*`, `sglang_router`)
_DERIVED_REQ = LazyPattern(
    r"^Requires-Dist:\s*((?:vllm|sglang)[-_.][\w.-]+)\s*(?:\[[^\]]*\])?\s*([<>!=~][^;\n]*)?",
    re.M | re.I,
)
# `import vllm` / `from vllm.x import y` anywhere, a function body's lazy import included
_ANY_IMPORT = LazyPattern(
    r"^[ \t]*(?:import[ \t]+(vllm|sglang)\b|from[ \t]+(vllm|sglang)[.\s])", re.M
)


def derived_requirement(paths) -> tuple[str, str] | None:
    """(requirement, METADATA path) of a `Requires-Dist` on a vLLM / SGLang derivative in a
    `*.dist-info/METADATA` beside the audited folders (an unzipped wheel)."""
    for d in _wheel_dirs(paths):
        for meta, text in _metadata_in(d):
            m = _DERIVED_REQ.search(text)
            if m:
                return (m.group(1) + (m.group(2) or "").strip(), str(meta))
    return None


def engine_dependency_note(paths, texts) -> str | None:
    """With no base given and no engine class left unresolved: a package that still runs on
    vLLM or SGLang (it imports one, at module level or lazily inside a function, or its
    metadata requires a distribution built on one) is audited without the engine's classes,
    helpers and reload contract. One stderr line says so and names the base to pass."""
    hint = suggest(paths, texts)
    evidence = None
    engine = "vllm"
    for rel, text in texts:
        m = _ANY_IMPORT.search(text)
        if m:
            engine = m.group(1) or m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            inside = " (inside a function)" if text[m.start()] in " \t" else ""
            evidence = f"imports {engine} at {rel}:{line}{inside}"
            break
    derived = derived_requirement(paths) if hint is None else None
    if derived is not None:
        engine = derived[0].split("-", 1)[0].split("_", 1)[0].lower()
        evidence = f"requires `{derived[0]}`, a distribution built on {engine} ({derived[1]})"
    if evidence is None and hint is None:
        return None
    if hint is not None:
        how = f"pass `--base {hint[0]}` (named by {hint[1]})"
    elif derived is not None:
        how = (
            f"pass `--base {engine}==VERSION` with the {engine} release `{derived[0]}` runs on "
            "(and `--base <its sources>` for its own classes)"
        )
    else:
        how = f"pass `--base {engine}==VERSION` (the release the package runs on)"
    why = evidence or f"names a {engine} release"
    return (
        f"reload-lint: note: no base was given, but the package {why}: the engine's classes, "
        f"helpers and reload contract are guessed; {how}"
    )
