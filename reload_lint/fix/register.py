"""Register the tensor on the module, so vLLM's reload copies the new values back into the
storage registered when graphs were captured:

    layer.register_buffer("g_idx_sort_indices", g_idx_sort_indices)

or, for a name the module already holds as a Parameter (register_buffer refuses it), the
tree's own `replace_parameter(layer, name, value, prefer_copy=True)`, imported from the module
that defines the `prefer_copy` variant (`tree.ReplaceParameter` resolves it and reads its
signature; a tree whose `replace_parameter` has no such parameter gets the keep shape).

The buffer is persistent (register_buffer's default): vLLM 0.33's reload skips non-persistent
buffers the checkpoint does not load when it copies back (model_loader/reload/layerwise.py), so
`persistent=False` would keep the first load's values there; 0.25.1 copies both back.

Applicability `unsafe`: the module gains a buffer (moved by `.to()`, listed by
`named_buffers()` and in `state_dict()`).
"""

from __future__ import annotations

from reload_lint.fix.base import Plan, Store
from reload_lint.fix.model import UNSAFE


def plan_buffer(store: Store, single: bool) -> Plan:
    b, a, v = store.base, store.attr, store.value
    return Plan(
        shape="register",
        applicability=UNSAFE,
        description=(
            f"register `{a}` as a buffer of `{b}` (persistent: the reload copies persistent "
            "buffers back into their storage)"
        ),
        code=f'{b}.register_buffer("{a}", {v})\n',
        needs_tmp=not single,
    )


def plan_replace(store: Store, single: bool, module: str, local: str) -> Plan:
    b, a, v = store.base, store.attr, store.value
    return Plan(
        shape="replace_parameter",
        applicability=UNSAFE,
        description=(
            f'`{module}.replace_parameter({b}, "{a}", ..., prefer_copy=True)`: copy into the '
            "registered Parameter when compatible, else re-register it"
        ),
        code=f'{local}({b}, "{a}", {v}, prefer_copy=True)\n',
        needs_tmp=not single,
        imports=[(module, "replace_parameter", None if local == "replace_parameter" else local)],
    )


def plan_persist(store: Store, kwargs: list[str]) -> Plan:
    """`B.register_buffer("x", value, persistent=False)` -> the same call, persistent."""
    b, a, v = store.base, store.attr, store.value
    extra = "".join(f", {k}" for k in kwargs)
    return Plan(
        shape="register",
        applicability=UNSAFE,
        description=(
            f"register `{a}` persistent: the reload's copy-back skips non-persistent buffers "
            "the checkpoint does not load, so it would keep the first load's values"
        ),
        code=f'{b}.register_buffer("{a}", {v}{extra})\n',
        needs_tmp=False,
    )
