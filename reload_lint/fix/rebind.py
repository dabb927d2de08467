"""A store followed by re-bindings derived from itself: keep and copy the final value.

    self.W_K, self.W_K_scale = quantize(W_UK)
    self.W_K = self.W_K.transpose(0, 1)
    self.W_K_scale = self.W_K_scale.transpose(0, 1)

What the layer holds after a post-load is the value of the last re-binding (here a transposed
view), not what the first statement stored. A shape that keeps the first storage and copies
into it (or registers it, or replaces a Parameter) must therefore act on that final value: a
keep-and-copy at the first statement compares the new tensor with the held view, finds another
shape on a reload, falls back to rebinding, and the storage captured CUDA graphs read is freed.

So the chain is moved onto a local and the shape is applied once, after the last re-binding:

    new_W_K, W_K_scale = quantize(W_UK)
    new_W_K = new_W_K.transpose(0, 1)
    <keep-and-copy `self.W_K` from `new_W_K`>
    W_K_scale = W_K_scale.transpose(0, 1)
    <keep-and-copy `self.W_K_scale` from `W_K_scale`>

A re-binding is a statement of the store's block, after it, that assigns the attribute (alone)
an expression reading the attribute. Inside a re-binding every read of an attribute of the
chain still on its local reads the local. The rewrite is refused with a reason when it could
change what a statement sees: a statement between the store and a last re-binding that reads
the attribute, passes the object holding it, or calls one of its methods (which may read it);
a re-binding that is conditional (in a nested block), part of a tuple store, an augmented
assignment, or a `del`. A re-binding whose block holds no plain store of the attribute before
it, while the function stores it elsewhere before, is refused too: the object it would keep
is not the one the function stores.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst
from libcst.helpers import get_full_name_for_node

from reload_lint.fix.locate import FileModel, Site, dotted


@dataclass
class Chain:
    """The re-bindings of `target` after its store, in order (each a `Site` the rewrite
    replaces)."""

    target: str
    links: list[Site]

    @property
    def last(self) -> Site:
        return self.links[-1]


def _reads(node: ast.AST | None, target: str) -> bool:
    if node is None:
        return False
    return any(
        isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and dotted(n) == target
        for n in ast.walk(node)
    )


def _stores(node: ast.AST, target: str) -> int | None:
    """The line of a store (or `del`) of `target` anywhere in `node`, else None."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
            if dotted(n) == target:
                return n.lineno
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr":
            args = n.args
            if (
                len(args) >= 2
                and isinstance(args[1], ast.Constant)
                and dotted(args[0]) == target.rsplit(".", 1)[0]
                and args[1].value == target.rsplit(".", 1)[1]
            ):
                return n.lineno
    return None


def _is_rebinding(st: ast.stmt, target: str) -> bool:
    return (
        isinstance(st, ast.Assign)
        and len(st.targets) == 1
        and dotted(st.targets[0]) == target
        and _reads(st.value, target)
    )


def _is_plain_store(st: ast.stmt, target: str) -> bool:
    """`target = <value not reading it>`, alone or as an element of a tuple store."""
    if not isinstance(st, ast.Assign) or len(st.targets) != 1:
        return False
    t = st.targets[0]
    elems = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
    return any(dotted(e) == target for e in elems) and not _reads(st.value, target)


def _hidden_use(node: ast.AST, base: str) -> str | None:
    """Why `node` may read an attribute of `base` without naming it: `base` passed or bound
    as a whole, or one of its methods called."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if dotted(n.func.value) == base:
                return f"calls `{base}.{n.func.attr}(...)`"
    roots = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    for n in ast.walk(node):
        if id(n) not in roots and dotted(n) == base:
            return f"uses `{base}` as a whole"
    return None


#: what a refused chain's recipe adds
BY_HAND = (
    "; by hand: bind the value to a local, apply the re-bindings to the local, and keep (or "
    "register) the final value once, after the last re-binding"
)


def chains(fm: FileModel, site: Site, targets: list[str]) -> dict[str, Chain] | str:
    """The chains of the store `site`'s `targets` (only those with re-bindings), or why the
    chain cannot be moved onto locals (and what to do by hand)."""
    found = _chains(fm, site, targets)
    return found + BY_HAND if isinstance(found, str) else found


def _chains(fm: FileModel, site: Site, targets: list[str]) -> dict[str, Chain] | str:
    found: dict[str, list[ast.stmt]] = {}
    where = fm.block_of(site.node)
    if where is None:
        return {}
    seq, i = where
    for t in targets:
        links: list[ast.stmt] = []
        for st in seq[i + 1 :]:
            if _is_rebinding(st, t):
                links.append(st)
                continue
            at = _stores(st, t)
            if at is None:
                continue
            if _is_plain_store(st, t):
                break  # a new value, stored as a store of its own
            if links or _reads(st, t):
                return (
                    f"`{t}` is re-bound from itself at line {at} in a form the codemod does "
                    "not move onto a local (nested, tuple, augmented or deleted)"
                )
            break
        if links:
            found[t] = links
    if not found:
        return {}
    order = sorted({id(s): s for ls in found.values() for s in ls}.values(), key=lambda s: s.lineno)
    last = {t: ls[-1].lineno for t, ls in found.items()}
    end = max(last.values())
    base_of = {t: t.rsplit(".", 1)[0] for t in found}
    link_ids = {id(s) for s in order}
    for st in seq[i + 1 :]:
        if st.lineno > end:
            break
        live = [t for t in found if last[t] >= st.lineno]
        if id(st) in link_ids:
            for b in sorted({base_of[t] for t in live}):
                why = _hidden_use(st.value, b)
                if why:
                    return (
                        f"the re-binding at line {st.lineno} {why}, which may read "
                        "the attribute the codemod moves onto a local"
                    )
            continue
        for t in live:
            if _reads(st, t):
                return (
                    f"`{t}` is read at line {st.lineno} between its store and its last "
                    f"re-binding (line {last[t]})"
                )
        for b in sorted({base_of[t] for t in live}):
            why = _hidden_use(st, b)
            if why:
                return (
                    f"line {st.lineno}, between the store of `{', '.join(live)}` and its "
                    f"last re-binding, {why}"
                )
    out: dict[str, Chain] = {}
    for t, ls in found.items():
        sites = []
        for st in ls:
            s = fm.site(st.lineno, t)
            if isinstance(s, str):
                return f"the re-binding of `{t}` at line {st.lineno}: {s}"
            sites.append(s)
        out[t] = Chain(t, sites)
    return out


def head(fm: FileModel, site: Site, target: str) -> Site | str | None:
    found = _head(fm, site, target)
    return found + BY_HAND if isinstance(found, str) else found


def _head(fm: FileModel, site: Site, target: str) -> Site | str | None:
    """For a re-binding of `target` derived from itself: the store whose chain it belongs to
    (the fix goes there); a reason when the function stores `target` before it in a way the
    codemod does not chain; None when `site` is no such re-binding, or the function does not
    store `target` before it (the value comes from elsewhere)."""
    st = site.node
    if not _reads(site.value, target):
        return None
    where = fm.block_of(st) if _is_rebinding(st, target) else None
    if where is not None:
        seq, i = where
        for prev in reversed(seq[:i]):
            if _is_rebinding(prev, target):
                continue
            if _stores(prev, target) is None:
                continue
            if _is_plain_store(prev, target):
                h = fm.site(prev.lineno, target)
                return h if isinstance(h, Site) else f"the store it re-binds: {h}"
            break
    earlier = _earlier_store(fm, site, target)
    if earlier is not None:
        return (
            f"`{target}` is re-bound from itself after the function stores it at line "
            f"{earlier}, in a place or form the codemod does not chain (another block, a "
            "nested one): a fix here would keep the wrong object"
        )
    return None


def _earlier_store(fm: FileModel, site: Site, target: str) -> int | None:
    if site.func is None:
        return None
    lines = [
        n.lineno
        for n in ast.walk(site.func)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Store)
        and dotted(n) == target
        and n.lineno < site.first_line
    ]
    return max(lines) if lines else None


class _Locals(cst.CSTTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def leave_Attribute(self, original, updated):
        name = get_full_name_for_node(original)
        if name in self.names:
            return cst.Name(self.names[name])
        return updated


def on_locals(source: str, names: dict[str, str]) -> str:
    """`source` (an expression) with each read of a dotted name of `names` replaced by its
    local."""
    expr = cst.parse_expression(source)
    return cst.Module(body=[]).code_for_node(expr.visit(_Locals(names)))


NOT_CHAINED = "the store is re-bound from itself later in its block, and this shape has no rewrite onto a local"


def parts(
    fm: FileModel, chained: dict[str, Chain], local: dict[str, str], finals: dict[str, str]
) -> list[tuple[Site, str]]:
    """The replacement of each re-binding: the same expression on the locals of the chain's
    attributes still on them; after an attribute's last re-binding, its shape (`finals`, the
    statements that store the local into the attribute)."""
    links = sorted(
        ((s, t) for t, c in chained.items() for s in c.links), key=lambda x: x[0].first_line
    )
    live = set(chained)
    out = []
    for s, t in links:
        src = on_locals(
            fm.relative_source(s.value, s.first_line), {x: local[x] for x in sorted(live)}
        )
        code = f"{local[t]} = {src}\n"
        if s is chained[t].last:
            code += finals[t]
            live.discard(t)
        out.append((s, code))
    return out


def note(chain: Chain, local: str) -> str:
    at = ", ".join(str(s.first_line) for s in chain.links)
    at = f"line {at}" if len(chain.links) == 1 else f"lines {at}"
    return (
        f" (its re-binding from itself at {at} now works on the local `{local}`, and "
        "the final value is the one kept)"
    )
