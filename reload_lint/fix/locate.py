"""Where a fix goes: the statement that stores a finding's target.

Finding the statement and the names around it reads the file with CPython's `ast` (a few
milliseconds); the rewrite itself is libcst's (rewrite.py), on the enclosing function only:
libcst keeps every byte of what it parsed, but parsing a whole 100 kB module with it costs
seconds on the audited trees, while its functions parse in milliseconds.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


def dotted(node: ast.AST) -> str | None:
    """`self.a.b` -> "self.a.b"; None for anything that is not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


@dataclass
class Site:
    """A store statement (one Assign / AnnAssign on its own lines), its targets as written
    (one per tuple element), the enclosing function and the names it uses."""

    node: ast.stmt
    value: ast.expr
    targets: list[str | None]  # dotted spelling per tuple element (None: not a dotted name)
    elements: list[str]  # each tuple element's source, as written
    is_tuple: bool
    first_line: int  # 1-based, inclusive
    last_line: int
    func: ast.FunctionDef | ast.AsyncFunctionDef | None
    names: set[str] = field(default_factory=set)
    params: list[str] = field(default_factory=list)
    # `B.register_buffer("x", value, persistent=False)` instead of `B.x = value`: the
    # call's keyword arguments after the value, as written ("persistent=False")
    register_kwargs: list[str] | None = None


class FileModel:
    """One file: its text, its `ast`, parents of statements, and module-level names."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.tree = ast.parse(text)
        self.parents: dict[int, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        self._stmts = [
            n
            for n in ast.walk(self.tree)
            if isinstance(n, (ast.Assign, ast.AnnAssign)) or _register_call(n) is not None
        ]
        self.indent = _indent_unit(self.tree, self.lines)

    def source(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ast.unparse(node)

    def relative_source(self, node: ast.AST, line: int) -> str:
        """The node's source with its continuation lines' indentation made relative to the
        statement on `line` (libcst indents them again inside the block it is placed in)."""
        text = self.source(node)
        head = self.lines[line - 1]
        lead = head[: len(head) - len(head.lstrip(" \t"))]
        if not lead or "\n" not in text:
            return text
        first, *rest = text.split("\n")
        return "\n".join([first, *(r[len(lead) :] if r.startswith(lead) else r for r in rest)])

    def enclosing_function(self, node: ast.AST):
        cur = self.parents.get(id(node))
        while cur is not None and not isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
            cur = self.parents.get(id(cur))
        return cur

    def site(self, line: int, target: str) -> Site | str:
        """The store of `target` on `line`, or why there is none a codemod can edit."""
        want = target.replace(" ", "")
        for st in self._stmts:
            if not (st.lineno <= line <= (st.end_lineno or st.lineno)):
                continue
            reg = _register_call(st)
            if reg is not None:
                base, name, value, kws = reg
                if f"{base}.{name}" != want:
                    continue
                site = self._site(st, value, [want], [want], False)
                if isinstance(site, Site):
                    site.register_kwargs = [self.source(k) for k in kws]
                return site
            if isinstance(st, ast.Assign):
                if len(st.targets) != 1:
                    return "a chained assignment (`a = b = ...`)"
                tnode = st.targets[0]
            elif st.value is not None:
                tnode = st.target
            else:
                continue
            if isinstance(tnode, (ast.Tuple, ast.List)):
                if any(isinstance(e, ast.Starred) for e in tnode.elts):
                    return "a starred tuple store"
                elems = list(tnode.elts)
                is_tuple = True
            else:
                elems = [tnode]
                is_tuple = False
            names = [dotted(e) or self._subscript(e) for e in elems]
            if want not in names:
                continue
            return self._site(
                st, st.value, names, [self.relative_source(e, st.lineno) for e in elems], is_tuple
            )
        return f"no plain assignment to `{target}` on line {line}"

    def _subscript(self, node: ast.AST) -> str | None:
        """`self.cache[key]` -> "self.cache[key]" (spaces dropped, as targets are compared),
        for a dotted container; None otherwise."""
        if not isinstance(node, ast.Subscript):
            return None
        base = dotted(node.value)
        if base is None:
            return None
        return f"{base}[{self.source(node.slice)}]".replace(" ", "")

    def dict_attribute(self, target: str) -> bool:
        """Whether the file binds `target` (`self._cache`) to a dict: a dict display or
        comprehension, a `dict(...)` / `defaultdict(...)` / `OrderedDict(...)` call, or an
        annotation that names a dict."""
        for st in ast.walk(self.tree):
            if isinstance(st, ast.Assign):
                tgts, value, ann = st.targets, st.value, None
            elif isinstance(st, ast.AnnAssign):
                tgts, value, ann = [st.target], st.value, st.annotation
            else:
                continue
            if not any(dotted(t) == target for t in tgts):
                continue
            if isinstance(value, (ast.Dict, ast.DictComp)):
                return True
            if isinstance(value, ast.Call):
                fn = (dotted(value.func) or "").rsplit(".", 1)[-1]
                if fn in ("dict", "defaultdict", "OrderedDict"):
                    return True
            if ann is not None:
                head = ann.value if isinstance(ann, ast.Subscript) else ann
                if (dotted(head) or "").rsplit(".", 1)[-1] in ("dict", "Dict"):
                    return True
        return False

    def _site(self, st, value, names, elements, is_tuple) -> Site | str:
        if True:
            if any(
                isinstance(n, ast.Constant)
                and isinstance(n.value, str)
                and n.lineno != n.end_lineno
                for n in ast.walk(st)
            ):
                return "the statement holds a multi-line string (re-indenting would change it)"
            if not self._own_lines(st):
                return "the store shares its lines with other statements or its block's header"
            func = self.enclosing_function(st)
            ids: set[str] = set()
            params: list[str] = []
            if func is not None:
                for n in ast.walk(func):
                    if isinstance(n, ast.Name):
                        ids.add(n.id)
                    elif isinstance(n, ast.arg):
                        ids.add(n.arg)
                a = func.args
                params = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
            return Site(
                node=st,
                value=value,
                targets=names,
                elements=elements,
                is_tuple=is_tuple,
                first_line=st.lineno,
                last_line=st.end_lineno or st.lineno,
                func=func,
                names=ids,
                params=params,
            )

    def owns_lines(self, st: ast.stmt) -> bool:
        return self._own_lines(st)

    def block_of(self, st: ast.stmt) -> tuple[list[ast.stmt], int] | None:
        """The statement list holding ``st`` (its parent's body, orelse or finalbody) and its
        index there; None when it is in none of them."""
        parent = self.parents.get(id(st))
        for fld in ("body", "orelse", "finalbody"):
            seq = getattr(parent, fld, None)
            if isinstance(seq, list):
                for i, s in enumerate(seq):
                    if s is st:
                        return seq, i
        return None

    def _own_lines(self, st: ast.stmt) -> bool:
        """Whether the statement is alone on its lines inside a block body (not `if c: x = y`,
        not `a = 1; x = y`)."""
        where = self.block_of(st)
        if where is None:
            return False
        seq, i = where
        prev = seq[i - 1] if i else None
        nxt = seq[i + 1] if i + 1 < len(seq) else None
        if prev is not None and prev.end_lineno == st.lineno:
            return False
        if nxt is not None and nxt.lineno == st.end_lineno:
            return False
        parent = self.parents.get(id(st))
        if parent is not self.tree and getattr(parent, "lineno", 0) == st.lineno:
            return False
        return self.lines[st.lineno - 1][: st.col_offset].strip() == ""

    def module_names(self) -> set[str]:
        """Names bound at the module's top (defs, classes, imports, assignments)."""
        out: set[str] = set()
        for st in self.tree.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(st.name)
            elif isinstance(st, (ast.Import, ast.ImportFrom)):
                for a in st.names:
                    if a.name != "*":
                        out.add((a.asname or a.name).split(".")[0])
            elif isinstance(st, ast.Assign):
                for t in st.targets:
                    if isinstance(t, ast.Name):
                        out.add(t.id)
        return out

    def imported_from(self, name: str) -> str | None:
        """The module a top-level `from M import name` binds `name` from, else None."""
        for st in self.tree.body:
            if isinstance(st, ast.ImportFrom):
                for a in st.names:
                    if (a.asname or a.name) == name:
                        return "." * st.level + (st.module or "")
        return None

    def import_at(self, line: str) -> int:
        """Where the new top-level import `line` goes, as isort (ruff's I001) orders it: among
        the `from P... import` statements of its own top package P before the first def or
        class, before the first whose module sorts after its own (case-insensitive), else
        after the last of them; `import_end()` when the file has none or `line` is a plain
        `import`."""
        words = line.split()
        if len(words) < 4 or words[0] != "from" or words[2] != "import":
            return self.import_end()
        mod = words[1]
        top = mod.split(".")[0]
        key = mod.lower()
        after = 0
        for st in self.tree.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                break
            if not isinstance(st, ast.ImportFrom) or st.level or not st.module:
                continue
            if st.module.split(".")[0] != top:
                continue
            if st.module.lower() > key:
                return st.lineno - 1
            after = st.end_lineno or st.lineno
        return after or self.import_end()

    def import_section_break(self, line: str) -> bool:
        """Whether the new `from P... import` line starts a section of its own (isort puts a
        blank line between sections): no top-level import of its package P is there, and the
        line it goes after is another import."""
        words = line.split()
        if len(words) < 4 or words[0] != "from":
            return False
        top = words[1].split(".")[0]
        last = None
        for st in self.tree.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                break
            if isinstance(st, ast.ImportFrom) and not st.level and st.module:
                if st.module.split(".")[0] == top:
                    return False
                last = st
            elif isinstance(st, ast.Import):
                if any(a.name.split(".")[0] == top for a in st.names):
                    return False
                last = st
        return last is not None and (last.end_lineno or last.lineno) == self.import_end()

    def import_end(self) -> int:
        """The line after which a new top-level import goes (0: the file's start, after a
        docstring and `from __future__` when there is no import)."""
        last = 0
        for st in self.tree.body:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                last = st.end_lineno or st.lineno
            elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                break
            elif last == 0 and isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant):
                last = st.end_lineno or st.lineno  # the docstring
        return last


def _register_call(st: ast.AST):
    """`B.register_buffer("x", value, **kw)` as a statement -> (B, "x", value, [kw nodes])."""
    if not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)):
        return None
    call = st.value
    fn = call.func
    if not (isinstance(fn, ast.Attribute) and fn.attr == "register_buffer"):
        return None
    base = dotted(fn.value)
    args = list(call.args)
    kws = list(call.keywords)
    named = {k.arg: k.value for k in kws if k.arg}
    name = args[0] if args else named.get("name")
    value = args[1] if len(args) > 1 else named.get("tensor")
    if base is None or value is None or any(isinstance(a, ast.Starred) for a in args):
        return None
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return None
    rest = [k for k in kws if k.arg not in ("name", "tensor")]
    if len(args) > 2 or any(k.arg is None for k in rest):
        return None
    return base, name.value, value, rest


def _indent_unit(tree: ast.Module, lines: list[str]) -> str:
    """The file's indentation step (the body of its first function or class)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            head = lines[node.lineno - 1]
            body = lines[node.body[0].lineno - 1]
            a = len(head) - len(head.lstrip())
            b = len(body) - len(body.lstrip())
            if b > a:
                return body[a:b]
    return "    "


def fresh_name(wanted: str, taken: set[str]) -> str:
    """A local name for the new value: the attribute's own name when the function does not use
    it (`workspace` for `self.workspace`), else `new_<attr>`, `new_<attr>_2`, ..."""
    base = wanted.lstrip("_") or "value"
    if not base.isidentifier() or base in _RESERVED:
        base = f"new_{base}"
    if base not in taken:
        return base
    base = f"new_{wanted.lstrip('_')}"
    n, name = 1, base
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    return name


_RESERVED = frozenset({"self", "layer", "cls", "torch", "super", "type", "id", "input", "len"})
