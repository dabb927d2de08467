"""Names and attribute reads of a function body (index/extract.py): `_body_names`."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from reload_lint.index.lower_util import _call_args

if TYPE_CHECKING:
    from reload_lint.index.lower_source import SourceText

# ---- names and attribute reads of a function body ------------------------------------
# One iterative pass over the body's nodes. Identifiers count as names where libcst had a
# Name node: loads, stores and deletes, def/class names, parameters, keyword-argument names,
# imported and `as` names, global/nonlocal names, match captures, and `None`/`True`/`False`.

_NO_CHILD_FIELDS = frozenset(
    {"ctx", "op", "ops", "type_comment", "type_ignores", "kind", "conversion", "is_async"}
)
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(tp: type) -> tuple[str, ...]:
    names = _CHILD_FIELDS.get(tp)
    if names is None:
        names = tuple(f for f in tp._fields if f not in _NO_CHILD_FIELDS)
        _CHILD_FIELDS[tp] = names
    return names


def _body_names(roots: list, ex: SourceText | None) -> tuple[set, set, dict]:
    """(names loaded, plain names assigned, attribute reads: attr -> first line) of the nodes
    under `roots`, nested definitions included; attribute reads include literal getattr /
    hasattr names (their lines are 0 without `ex`)."""
    loads: set[str] = set()
    stores: set[str] = set()
    attrs: dict[str, int] = {}
    AST, Name, Attribute, Call, Constant = ast.AST, ast.Name, ast.Attribute, ast.Call, ast.Constant

    def note(name: str, line: int) -> None:
        old = attrs.get(name)
        if old is None or (line and (line < old or not old)):
            attrs[name] = line

    stack = list(roots)
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node = pop()
        tp = type(node)
        if tp is Name:
            loads.add(node.id)
            continue
        if tp is Attribute:
            note(node.attr, node.lineno if ex is not None else 0)
            push(node.value)
            continue
        if tp is Constant:
            v = node.value
            if v is None or v is True or v is False:
                loads.add(str(v))
            continue
        if tp is Call:
            if (
                ex is not None
                and type(node.func) is Name
                and node.func.id in ("getattr", "hasattr")
            ):
                args = _call_args(node)
                if len(args) >= 2 and ex is not None and ex.simple_string(args[1][0]):
                    s = args[1][0].value
                    if isinstance(s, str):
                        note(s, node.lineno)
        else:
            name_of = _NAMES.get(tp)
            if name_of is not None:
                name_of(node, loads, stores, note, ex)
        for f in _child_fields(tp):
            v = getattr(node, f)
            if isinstance(v, AST):
                push(v)
            elif type(v) is list:
                extend([c for c in v if isinstance(c, AST)])
    return loads, stores, attrs


def _n_assign(node, loads, stores, note, ex):
    for t in node.targets:
        if type(t) is ast.Name:
            stores.add(t.id)


def _n_named(node, loads, stores, note, ex):  # def/class names, parameters, type parameters
    loads.add(node.name if hasattr(node, "name") else node.arg)


def _n_arg(node, loads, stores, note, ex):
    loads.add(node.arg)


def _n_keyword(node, loads, stores, note, ex):
    if node.arg is not None:
        loads.add(node.arg)


def _n_alias(node, loads, stores, note, ex):
    if node.name != "*":
        first, *rest = node.name.split(".")
        loads.add(first)
        line = getattr(node, "lineno", 0) if ex is not None else 0
        for part in rest:
            note(part, line)
    if node.asname is not None:
        loads.add(node.asname)


def _n_importfrom(node, loads, stores, note, ex):
    if node.module:
        first, *rest = node.module.split(".")
        loads.add(first)
        for part in rest:
            note(part, node.lineno if ex is not None else 0)


def _n_names(node, loads, stores, note, ex):  # global / nonlocal
    loads.update(node.names)


def _n_optional_name(node, loads, stores, note, ex):  # except ... as e, case x, case [*r]
    if node.name is not None:
        loads.add(node.name)


def _n_match_mapping(node, loads, stores, note, ex):
    if node.rest is not None:
        loads.add(node.rest)


def _n_match_class(node, loads, stores, note, ex):
    loads.update(node.kwd_attrs)


def _n_match_singleton(node, loads, stores, note, ex):
    loads.add(str(node.value))


_NAMES = {
    ast.Assign: _n_assign,
    ast.FunctionDef: _n_named,
    ast.AsyncFunctionDef: _n_named,
    ast.ClassDef: _n_named,
    ast.arg: _n_arg,
    ast.keyword: _n_keyword,
    ast.alias: _n_alias,
    ast.ImportFrom: _n_importfrom,
    ast.Global: _n_names,
    ast.Nonlocal: _n_names,
    ast.ExceptHandler: _n_optional_name,
    ast.MatchAs: _n_optional_name,
    ast.MatchStar: _n_optional_name,
    ast.MatchMapping: _n_match_mapping,
    ast.MatchClass: _n_match_class,
    ast.MatchSingleton: _n_match_singleton,
}
for _tp in ("TypeVar", "ParamSpec", "TypeVarTuple"):  # Python 3.12+ type parameters
    if hasattr(ast, _tp):
        _NAMES[getattr(ast, _tp)] = _n_named
