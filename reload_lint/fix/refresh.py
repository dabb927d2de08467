"""Refresh a stale derived copy in place: a post-load that stores a cast of an attribute back
under its own name (`self.sinks = self.sinks.to(torch.float32)`, a backend impl handed the
layer's Parameter) replaces the Parameter by the copy on the first pass; from the second pass
on the attribute already has the dtype, the cast returns it unchanged, and the copy keeps the
first load's values. The fix keeps the tensor the copy is made from, the first time, and
copies it into the copy after the statement that casts, on every pass:

    if getattr(self, "_sinks_source", None) is None:
        self._sinks_source = self.sinks
    if self.sinks is not None and self.sinks.dtype != torch.float32:   # as before
        self.sinks = self.sinks.to(torch.float32)
    if (
        self._sinks_source is not None
        and self.sinks is not None
        and self.sinks is not self._sinks_source
    ):
        self.sinks.copy_(self._sinks_source)

The statement edited is the one of the function's body that holds the store (the store itself,
or the `if` around it, kept byte for byte): code before and after it, never inside the guard,
which later passes skip.

Applicability `unsafe`: the object gains an attribute that holds the source tensor, and a
reload that changes the source's shape makes `copy_` raise instead of serving a stale copy.
"""

from __future__ import annotations

import ast

from reload_lint.fix.base import Plan, Store
from reload_lint.fix.locate import FileModel, dotted
from reload_lint.fix.model import UNSAFE

#: tensor methods that return a tensor of another dtype (or the tensor itself when it has it)
CASTS = frozenset({"to", "type", "float", "half", "bfloat16", "double", "int", "long", "bool"})


def self_cast(value: ast.expr, target: str) -> bool:
    """`<target>.to(...)`, `<target>.float()`, ...: a cast of the stored attribute itself."""
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in CASTS
        and dotted(value.func.value) == target.replace(" ", "")
    )


def enclosing_statement(fm: FileModel, node: ast.stmt, func) -> ast.stmt | None:
    """The statement of `func`'s own body that holds `node` (`node` itself at the top)."""
    cur = node
    while cur is not None:
        parent = fm.parents.get(id(cur))
        if parent is func:
            return cur if cur in func.body else None
        cur = parent
    return None


def source_name(fm: FileModel, attr: str) -> str:
    """`_<attr>_source`, or with a number when the file already uses that attribute name."""
    base = f"_{attr.lstrip('_')}_source"
    name, n = base, 1
    while f".{name}" in fm.text or f'"{name}"' in fm.text:
        n += 1
        name = f"{base}_{n}"
    return name


def plan(store: Store, ind: str, src: str) -> Plan:
    """`src`: the attribute name the source tensor is kept under (on `store.base`)."""
    t, b, a = store.target, store.base, store.attr
    keep = f"{b}.{src}"
    before = f'if getattr({b}, "{src}", None) is None:\n{ind}{keep} = {t}\n'
    after = (
        f"if (\n"
        f"{ind}{keep} is not None\n"
        f"{ind}and {t} is not None\n"
        f"{ind}and {t} is not {keep}\n"
        f"):\n"
        f"{ind}{t}.copy_({keep})\n"
    )
    return Plan(
        shape="refresh",
        applicability=UNSAFE,
        description=(
            f"keep the tensor `{t}` is cast from (`{keep}`, the first time) and copy it into "
            f"the cast copy after the cast on every post-load: `{t}.copy_({keep})` (the cast "
            f"returns `{a}` itself from the second pass on)"
        ),
        code=before + after,
        needs_tmp=False,
        prelude=before,
        postlude=after,
    )
