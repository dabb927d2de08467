"""Which fix shape each finding gets, and the statement edits that carry it out.

Findings are grouped by the statement that stores them (a tuple store, `self.W_K, self.W_K_scale
= ...`, is one edit for every flagged element). The value is bound to a fresh local first when
a shape reads it more than once; the elements nobody flagged are stored as before.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from reload_lint.findings import Finding
from reload_lint.fix import keep, latebind, rebind, rebuilt, refresh, register
from reload_lint.fix.base import Plan, Store
from reload_lint.fix.locate import FileModel, Site, dotted, fresh_name
from reload_lint.fix.tree import TreeApi
from reload_lint.summaries.tensorapi import TENSOR_API

#: rules whose store is fixed by keeping the first tensor and copying into it
KEEP_RULES = frozenset({"RL102", "RL109", "RL201", "RL202"})
#: rules whose store is an object rebuilt on every reload
OBJECT_RULES = frozenset({"RL105"})


@dataclass
class StmtEdit:
    """The replacement of one statement, for the findings stored by it."""

    site: Site
    findings: list[Finding]
    plans: list[Plan]
    code: str  # the replacement statements (column 0)
    imports: list[tuple[str, str, str | None]] = field(default_factory=list)
    helpers: list[tuple[str, str]] = field(default_factory=list)
    alt: int = 0  # which of the store's shapes (plan_statement's `alt`)
    # (before, after): `site` (the statement holding the store) stays as written, these go
    # around it (`code` is unused then)
    around: tuple[str, str] | None = None
    # more statements the edit replaces (a store's re-bindings moved onto a local: rebind.py),
    # each with its replacement (column 0)
    parts: list[tuple[Site, str]] = field(default_factory=list)

    @property
    def first_line(self) -> int:
        return self.site.first_line

    @property
    def last_line(self) -> int:
        return max([self.site.last_line, *(s.last_line for s, _c in self.parts)])

    @property
    def shape(self) -> str:
        return "+".join(sorted({p.shape for p in self.plans}))

    @property
    def applicability(self) -> str:
        return "unsafe" if any(p.applicability == "unsafe" for p in self.plans) else "safe"

    @property
    def description(self) -> str:
        return "; ".join(p.description for p in self.plans)


def _allocated_here(f: Finding) -> bool:
    """Whether the stored tensor is allocated by a torch call in the storing function itself
    (not returned by a helper, which may return another type on another backend)."""
    notes = [s.note for s in f.trace]
    return (
        bool(notes)
        and "allocates a new tensor" in notes[0]
        and not any(n.startswith("returned by") or "assumed" in n for n in notes)
    )


def _tensor_made_here(f: Finding) -> bool:
    """Whether the stored value is a tensor a torch op of the storing function makes
    (`layer.weight.t().contiguous()`, `torch.empty(...)`), not something a helper returns
    (which may be another type on another backend)."""
    notes = [s.note for s in f.trace]
    return (
        bool(notes)
        and ("allocates a new tensor" in notes[0] or "returns a new tensor" in notes[0])
        and not any(n.startswith("returned by") or "assumed" in n for n in notes)
    )


def _binds_registered_tensor(f: Finding) -> bool:
    """RL107 on a plain tensor: the registered tensor itself or a view of it (not a callable,
    a container or a rebuilt object that holds one)."""
    return any(
        "registered tensor bound on an object" in s.note
        or "view of a registered tensor taken" in s.note
        for s in f.trace
    )


def _is_tensor_store(f: Finding) -> bool:
    """Whether the analysis saw the stored value as a tensor (not an object holding some)."""
    return any("tensor" in s.note and f.target in s.note for s in f.trace[-4:]) or not any(
        "built here" in s.note or "keeps a rebuilt" in s.note for s in f.trace
    )


#: the words a library-object reason carries (fix/recipes.py gives it its own recipe)
LIBRARY_OBJECT = "a library object, not a tensor"
_UNKNOWN_CALLEE = re.compile(r"unknown callee `([^`]+)` assumed to return a new tensor")


def library_object(f: Finding, fm: FileModel) -> str | None:
    """Why no keep-and-copy fits a store of what an unknown library callee returns when the
    module calls a method on it that `torch.Tensor` does not have (`self.w13_moe.apply(x)`
    after `self.w13_moe = self.lib.Gemm.prepare(w, s)`): the value is a library object, not
    a tensor, and `_copy_into_kept` reaches tensors only through an attribute dict, which an
    extension type has none of; keeping it would keep the first load's object with the first
    load's packed values. None when nothing says so."""
    notes = [s.note for s in f.trace]
    m = _UNKNOWN_CALLEE.match(notes[0]) if notes else None
    if m is None:
        return None
    called = set(re.findall(rf"{re.escape(f.target)}\.(\w+)\s*\(", fm.text))
    foreign = sorted(called - TENSOR_API)
    if not foreign:
        return None
    return (
        f"`{f.target}` is {LIBRARY_OBJECT}: it holds what `{m.group(1)}` returns, and the "
        f"module calls `{f.target}.{foreign[0]}(...)`, which no tensor has, so a keep-and-copy "
        "would keep the first load's object and copy nothing into it (no attribute path "
        "reaches its storage)"
    )


def _shape_for(
    f: Finding,
    store: Store,
    single: bool,
    fm: FileModel,
    site: Site,
    api: TreeApi,
    ind: str,
    alt: int = 0,
) -> Plan | str | None:
    """The `alt`-th shape that may fix `f` (None when there are no more). The first is the
    rule's own fix; the next ones are tried when a re-audit still reports the store (a layer
    whose post-load runs after the copy-back, so registering keeps nothing: copy instead)."""
    rule = f.rule
    shapes: list = []
    opaque = library_object(f, fm) if alt == 0 else None
    if opaque:
        return opaque
    if rule == "RL101":
        if store.attr in api.parameter_names and _tensor_made_here(f):
            # a name the tree also registers as a Parameter, and a value the storing function
            # itself makes with a tensor op: a tensor, so the tree's own
            # replace_parameter(..., prefer_copy=True) registers it where the copy-back keeps it
            shapes.append(lambda: _replace(store, single, fm, api))
            shapes.append(lambda: rebuilt.plan(store, ind, "value"))
        elif store.attr in api.parameter_names:
            # a name the tree also registers as a Parameter: what is stored under it may be
            # no tensor at all (vLLM's triton `Tensor` wrappers of MXFP4 weights, which
            # replace_parameter cannot take: the H200 sweep's first loads failed), so keep
            # the first object and copy into its tensors
            shapes.append(lambda: rebuilt.plan(store, ind, "value"))
            # a tensor the re-audit still reports there: the tree's own
            # replace_parameter(..., prefer_copy=True), proved green on the H200
            shapes.append(lambda: _replace(store, single, fm, api))
        else:
            shapes.append(lambda: register.plan_buffer(store, single))
            shapes.append(lambda: keep.plan(store, ind))
            shapes.append(lambda: rebuilt.plan(store, ind, "value"))
    elif rule == "RL106" and f.contract == "vllm-layerwise":
        # reported there only for a shape that depends on the loaded values
        # (analysis/contracts.py): another load gives another length, so neither a copy into
        # the first storage nor a new Parameter the copy-back keeps can hold it
        return (
            "the swapped shape depends on the loaded values: no storage of one shape fits "
            "every load (allocate the largest in create_weights and keep a count)"
        )
    elif rule in KEEP_RULES:
        # keep_object first: its helper copies tensor into tensor and walks an object's
        # tensors, and one value may be either (vLLM's `w13_precision_config` is a tensor on
        # the Marlin backend and a triton PrecisionConfig on the triton one, where the `keep`
        # shape's `.shape` stopped the reload on the H200); `keep` when a value is a tensor
        # the analysis saw allocated in the function itself
        if _allocated_here(f):
            shapes.append(lambda: keep.plan(store, ind))
        if not (f.masked and store.base == "layer" and store.attr in api.parameter_names):
            shapes.append(lambda: rebuilt.plan(store, ind, "object"))
        elif not shapes:
            # a checkpoint Parameter re-bound (the next load fails, `masked`): the loaded
            # Parameter is there on the first load, so keeping "the first object" copies into
            # it, and the helper raises on the first load when post-load changed its shape
            return "a checkpoint Parameter re-bound by post-load: only a copy into it keeps it"
    elif rule == "RL107" and _binds_registered_tensor(f):
        # a registered tensor (or a view of one) bound into an object (a quant config's
        # scale): on a reload copy the reloaded values into the tensor the first load bound,
        # which captured graphs read; a callable, container or rebuilt object binding one
        # gets no codemod (the `.shape` test would not hold for it)
        shapes.append(lambda: keep.plan(store, ind))
    elif rule in OBJECT_RULES:
        shapes.append(lambda: rebuilt.plan(store, ind, "object"))
    else:
        return f"no codemod for {rule}" if alt == 0 else None
    while alt < len(shapes):
        p = shapes[alt]()
        if p is not None:
            return p
        alt += 1
    return None


def _replace(store: Store, single: bool, fm: FileModel, api: TreeApi) -> Plan | None:
    """The tree's `replace_parameter(..., prefer_copy=True)`, imported under a name that does
    not clash with another `replace_parameter` the module already binds; None without one."""
    mod = api.prefer_copy_module()
    if mod is None:
        return None
    bound = fm.imported_from("replace_parameter")
    local = "replace_parameter"
    if bound is not None and bound != mod:
        local = "replace_parameter_prefer_copy"
    elif bound is None and "replace_parameter" in fm.module_names():
        local = "replace_parameter_prefer_copy"
    return register.plan_replace(store, single, mod, local)


_LAYER_READ = re.compile(r"`layer\.(\w+)`")


def plan_statement(
    fm: FileModel, site: Site, flagged: list[Finding], api: TreeApi, alt: int = 0
) -> StmtEdit | str | None:
    """The edit of one store statement with its `alt`-th shape; a reason when no codemod
    applies; None when there is no `alt`-th shape."""
    ind = fm.indent
    value = fm.relative_source(site.value, site.first_line)
    first = flagged[0]
    generic = not (
        first.rule == "RL103"
        or site.register_kwargs is not None
        or (
            first.rule == "RL201"
            and not site.is_tuple
            and refresh.self_cast(site.value, first.target)
        )
    )
    if not generic:
        found = rebind.chains(fm, site, sorted({f.target.replace(" ", "") for f in flagged}))
        if found:
            return found if isinstance(found, str) else rebind.NOT_CHAINED
    if first.rule == "RL103":
        if alt:
            return None
        if site.is_tuple:
            return "a tuple store of a callable"
        layer = next((p for p in site.params if p == "layer"), None)
        if layer is None:
            return "the function has no `layer` parameter to register the tensor on"
        captured = _LAYER_READ.findall(first.fix)
        if not captured:
            return "the captured tensor's name is not known"
        p = latebind.plan(first.target, value, captured, layer)
        if isinstance(p, str):
            return p
        return StmtEdit(site, flagged, [p], p.code)
    if site.register_kwargs is not None:
        return _register_call_edit(fm, site, flagged, value, alt)
    if first.rule == "RL201" and not site.is_tuple and refresh.self_cast(site.value, first.target):
        return _refresh_edit(fm, site, flagged, alt)
    if first.rule == "RL104":
        return _item_edit(fm, site, flagged, value, alt)
    # a finding of the statement itself first (a re-binding's finding joins its store's edit)
    at_site = sorted(flagged, key=lambda f: site.first_line <= f.line <= site.last_line)
    by_target = {f.target.replace(" ", ""): f for f in at_site}
    chained = rebind.chains(fm, site, [t for t in site.targets if t and t in by_target])
    if isinstance(chained, str):
        return chained
    single = not site.is_tuple
    taken = set(site.names) | fm.module_names()
    plans: list[tuple[int, Plan]] = []
    tmps: list[str] = []
    for t in site.targets:
        attr = (t or "value").rsplit(".", 1)[-1]
        tmp = fresh_name(attr, taken)
        taken.add(tmp)
        tmps.append(tmp)
    for i, t in enumerate(site.targets):
        f = by_target.get(t or "")
        if f is None:
            continue
        if "." not in (t or ""):
            return f"`{f.target}` is not an attribute store"
        store = Store(t, tmps[i])
        p = _shape_for(f, store, single, fm, site, api, ind, alt)
        if p is None or isinstance(p, str):
            return p
        if single and not p.needs_tmp and t not in chained:
            store = Store(t, value)
            p = _shape_for(f, store, single, fm, site, api, ind, alt)
        plans.append((i, p))
    if not plans:
        return "no flagged element of the statement"
    code = ""
    if site.is_tuple or chained or any(p.needs_tmp for _i, p in plans):
        lhs = ", ".join(tmps) if site.is_tuple else tmps[0]
        code += f"{lhs} = {value}\n"
    done = {i: p for i, p in plans}
    for i in range(len(site.targets)):
        if i in done and site.targets[i] not in chained:
            code += done[i].code
        elif site.is_tuple and i not in done:
            code += f"{site.elements[i]} = {tmps[i]}\n"
    local = {site.targets[i]: tmps[i] for i in done}
    finals = {t: done[i].code for i, t in enumerate(site.targets) if t in chained}
    parts = rebind.parts(fm, chained, local, finals)
    for i, t in enumerate(site.targets):
        if t in chained:
            done[i].description += rebind.note(chained[t], local[t])
    edit = StmtEdit(site, flagged, [p for _i, p in plans], code, alt=alt, parts=parts)
    for _i, p in plans:
        for imp in p.imports:
            if imp not in edit.imports:
                edit.imports.append(imp)
        for h in p.helpers:
            if h not in edit.helpers:
                edit.helpers.append(h)
    return edit


def _register_call_edit(
    fm: FileModel, site: Site, flagged: list[Finding], value: str, alt: int
) -> StmtEdit | str | None:
    """A `B.register_buffer("x", value, persistent=False)` the analysis reports as RL201:
    register it persistent (vLLM 0.33's copy-back skips non-persistent buffers), else copy
    into the buffer already there. RL109 (a deferred layer, which nothing copies back) gets
    the copy into the buffer already there."""
    f = flagged[0]
    store = Store(site.targets[0], value)
    kws = [k for k in site.register_kwargs or [] if k.replace(" ", "") != "persistent=False"]
    shapes = []
    if f.rule == "RL201" and len(kws) < len(site.register_kwargs or []):
        shapes.append(lambda: register.plan_persist(store, kws))
    tmp = fresh_name(store.attr, set(site.names) | fm.module_names())
    if f.rule in ("RL201", "RL109"):
        # RL109: a deferred layer's post-load runs after the reload put its buffers back, on
        # live tensors with no copy-back: copy into the buffer already there
        shapes.append(
            lambda: keep.plan_register(
                Store(store.target, tmp), fm.indent, site.register_kwargs or []
            )
        )
    if alt >= len(shapes):
        return f"no codemod for {f.rule} on a register_buffer call" if alt == 0 else None
    p = shapes[alt]()
    code = p.code if not p.needs_tmp else f"{tmp} = {value}\n{p.code}"
    return StmtEdit(site, flagged, [p], code, list(p.imports), list(p.helpers), alt=alt)


def _refresh_edit(fm: FileModel, site: Site, flagged: list[Finding], alt: int):
    """RL201, a cast of an attribute stored back under its own name: keep the source and
    refresh the copy in place around the function's statement that holds the store."""
    if alt:
        return None
    t = site.targets[0] or ""
    if "." not in t:
        return f"`{flagged[0].target}` is not an attribute store"
    outer = refresh.enclosing_statement(fm, site.node, site.func) if site.func else None
    if outer is None:
        return "the store is not inside a function's body"
    if not fm.owns_lines(outer):
        return "the statement holding the store shares its lines with another statement"
    store = Store(t, t)
    p = refresh.plan(store, fm.indent, refresh.source_name(fm, store.attr))
    wrap = Site(
        node=outer,
        value=site.value,
        targets=site.targets,
        elements=site.elements,
        is_tuple=False,
        first_line=_first_line(outer),
        last_line=outer.end_lineno or outer.lineno,
        func=site.func,
        names=site.names,
        params=site.params,
    )
    return StmtEdit(wrap, flagged, [p], p.code, around=(p.prelude, p.postlude))


def _first_line(st) -> int:
    decos = getattr(st, "decorator_list", None) or []
    return min([st.lineno, *(d.lineno for d in decos)])


def _item_edit(fm: FileModel, site: Site, flagged: list[Finding], value: str, alt: int):
    """RL104 on `C[k] = value`, C a dict the file builds: keep the tensor C holds under k."""
    if alt:
        return None
    node = site.node.targets[0] if isinstance(site.node, ast.Assign) else site.node.target
    if site.is_tuple or not isinstance(node, ast.Subscript):
        return "the container store is not `C[key] = value`"
    container = dotted(node.value) or ""
    if not fm.dict_attribute(container):
        return f"`{container}` is not known to be a dict (the file never binds it to one)"
    if not _simple(node.slice):
        return "the key is not a name, an attribute or a constant (it would be computed twice)"
    key = fm.source(node.slice)
    taken = set(site.names) | fm.module_names()
    kept = fresh_name(f"kept_{container.rsplit('.', 1)[-1].lstrip('_')}", taken)
    code = ""
    rebind = isinstance(site.value, ast.Name)
    if not rebind:
        tmp = fresh_name(container.rsplit(".", 1)[-1].lstrip("_") + "_item", taken | {kept})
        code, value = f"{tmp} = {value}\n", tmp
    p = keep.plan_item(container, key, value, kept, rebind, fm.indent)
    return StmtEdit(site, flagged, [p], code + p.code, alt=alt)


def _simple(node: ast.AST) -> bool:
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Attribute):
        return dotted(node) is not None
    if isinstance(node, ast.Tuple):
        return all(_simple(e) for e in node.elts)
    return False
