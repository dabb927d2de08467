"""Late-bind a callable's tensor: a lambda or `functools.partial` the post-load stores on the
kernel object captures a tensor it computed; the tensor is registered on the layer instead,
and the callable reads it from the layer each time it runs (after a reload: the registered
storage, which copy-back refreshed).

    layer.register_buffer("act_perm_perm", perm)
    self.act_perm = lambda x: x[:, layer.act_perm_perm]
    self.act_perm = lambda *args, **kwargs: ops.permute_cols(
        *args, perm=layer.act_perm_perm, **kwargs)

Applicability `unsafe`: the layer gains a buffer and the callable keeps the layer alive.
"""

from __future__ import annotations

import libcst as cst

from reload_lint.fix.base import Plan
from reload_lint.fix.model import UNSAFE


def _dotted(node: cst.BaseExpression) -> str | None:
    parts = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    return ".".join([node.value, *reversed(parts)])


class _Rename(cst.CSTTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def leave_Name(self, original, updated):
        new = self.names.get(updated.value)
        if new is None:
            return updated
        return cst.parse_expression(new)

    def leave_Arg(self, original, updated):
        # `f(perm=perm)`: the keyword is the callee's parameter name, not a read
        if original.keyword is not None:
            return updated.with_changes(keyword=original.keyword)
        return updated

    def leave_Param(self, original, updated):
        return original  # a lambda's own parameters are not captured names

    def leave_Attribute(self, original, updated):
        # `x.perm` is an attribute name, not a read of `perm`: keep it
        if isinstance(original.attr, cst.Name) and original.attr.value in self.names:
            return updated.with_changes(attr=original.attr)
        return updated


def _partial_call(
    value: cst.BaseExpression, module: cst.Module, captured: list[str], read
) -> tuple[str, dict[str, str]] | None:
    """`partial(f, a, k=v)` -> the lambda that calls `f` with the same arguments, each keyword
    named in `captured` read through `read(keyword)` instead; and keyword -> the expression it
    bound (what gets registered)."""
    if not isinstance(value, cst.Call) or not value.args:
        return None
    fn = _dotted(value.func)
    if fn not in ("partial", "functools.partial"):
        return None
    first, rest = value.args[0], value.args[1:]
    if first.star or first.keyword is not None:
        return None
    if any(a.star for a in rest):
        return None
    pos = [module.code_for_node(a.value) for a in rest if a.keyword is None]
    kws, bound = [], {}
    for a in rest:
        if a.keyword is None:
            continue
        k, v = a.keyword.value, module.code_for_node(a.value)
        if k in captured:
            bound[k] = v
            v = read(k)
        kws.append(f"{k}={v}")
    call = ", ".join([*pos, "*args", *kws, "**kwargs"])
    head = f"lambda *args, **kwargs: {module.code_for_node(first.value)}("
    if len(head) + len(call) > 72:  # one argument line, black's way
        return f"{head}\n    {call}\n)", bound
    return f"{head}{call})", bound


def plan(target: str, value_src: str, captured: list[str], layer: str) -> Plan | str:
    """`captured`: the names the analysis found the tensors under (a lambda's closure names,
    a partial's keywords)."""
    attr = target.rsplit(".", 1)[1]
    module = cst.Module(body=[])
    try:
        value = cst.parse_expression(value_src)
    except cst.ParserSyntaxError:
        return "the stored callable does not parse on its own"

    def buf(c: str) -> str:
        return f"{attr.lstrip('_')}_{c}"

    # `layer.name`: read from the layer each time the callable runs (a lambda's body is
    # evaluated then; a partial is rewritten as such a lambda)
    def read(c: str) -> str:
        return f"{layer}.{buf(c)}"

    if isinstance(value, cst.Lambda):
        src = module.code_for_node(value)
        new = module.code_for_node(value.visit(_Rename({c: read(c) for c in captured})))
        bound = {c: c for c in captured}
        if new == src:
            return "the captured tensor is not read by name in the lambda"
    else:
        made = _partial_call(value, module, captured, read)
        if made is None:
            return "the stored callable is neither a lambda nor a `functools.partial(...)`"
        new, bound = made
        if not bound:
            return "the captured tensor is not a keyword argument of the partial"
    regs = "".join(f'{layer}.register_buffer("{buf(c)}", {v})\n' for c, v in bound.items())
    reads = ", ".join(f"`{layer}.{buf(c)}`" for c in bound)
    return Plan(
        shape="late_bind",
        applicability=UNSAFE,
        description=(
            f"register the captured tensor on `{layer}` and have `{target}` read {reads} "
            "when it runs"
        ),
        code=f"{regs}{target} = {new}\n",
        needs_tmp=False,
    )
