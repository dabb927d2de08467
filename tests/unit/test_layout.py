"""Issue 11, layout: no import circle inside reload_lint, counting every import statement
(module level or deferred inside a function, which only hides a circle from the interpreter)
except those under `if TYPE_CHECKING:`. Read statically with ast; nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "reload_lint"


def _module_names() -> dict[str, Path]:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _exports(path: Path) -> dict[str, str]:
    """A package entry's `_EXPORTS` table (name -> its module in the package), read from its
    `__init__.py`: the entry imports each module on first use, so an import of a name from the
    entry is an edge to the module that defines it."""
    init = path / "__init__.py"
    if not init.is_file():
        return {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return {}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            entry = _exports(modules[base].parent) if base in modules else {}
            for a in node.names:
                sub = f"{base}.{a.name}"
                if a.name in entry:
                    sub = f"{base}.{entry[a.name]}"
                found.add(sub if sub in modules else base)
    # an import of a.b.c runs a/__init__ and a/b/__init__ too, but those import nothing of
    # ours unless they say so (their own edges); keep the named module only
    return {m for m in found if m in modules and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _module_names()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_graph_is_read():
    graph = import_graph()
    assert "reload_lint.cli.commands" in graph["reload_lint.cli.parser"]
    assert "reload_lint.cli.plan" in graph["reload_lint.cli.commands"]
    assert "reload_lint.engine" in graph["reload_lint.cli.plan"]
    # a name imported from a package entry is an edge to the module that defines it
    assert "reload_lint.gate.report" in graph["reload_lint.cli.commands"]
    assert "reload_lint.incremental.cache" in graph["reload_lint.engine"]


def test_grouped_packages_have_one_entry():
    """Outside reload_lint/incremental/, gate/ and cli/, their modules are imported through the
    package (`from reload_lint.gate import apply_gate`), not one by one."""
    groups = ("reload_lint.incremental", "reload_lint.gate", "reload_lint.cli")
    bad = []
    for name, path in _module_names().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                mods = [node.module]
            elif isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            for mod in mods:
                for g in groups:
                    if mod.startswith(g + ".") and not name.startswith(g + "."):
                        bad.append(f"{name}: {mod}")
    assert not bad, bad


def test_no_import_cycles():
    cycles = _cycles(import_graph())
    assert not cycles, "import circles in reload_lint: " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def test_test_files_have_unique_basenames():
    # the test folders have no __init__.py: pytest imports each file by its basename, so two
    # files with one name in two folders stop the whole run at collection
    root = Path(__file__).resolve().parents[1]
    seen: dict[str, str] = {}
    clashes = []
    for p in sorted(root.rglob("test_*.py")):
        if "fixtures" in p.relative_to(root).parts:
            continue
        rel = p.relative_to(root).as_posix()
        if p.name in seen:
            clashes.append(f"{seen[p.name]} and {rel}")
        seen.setdefault(p.name, rel)
    assert not clashes, clashes
