"""Keep the first storage and copy into it: a tensor the post-load computes again on every
reload is copied into the tensor the first post-load stored (the one captured CUDA graphs
read) when shape, dtype and device agree; only when they do not (or on the first load) is the
new tensor bound, exactly as before.

    if getattr(self, "workspace", None) is not None:
        if (self.workspace.shape == workspace.shape and ...):
            self.workspace.copy_(workspace)
        else:
            self.workspace = workspace
    else:
        self.workspace = workspace

Applicability `safe`: the first load binds what it bound before; a later load that can copy,
copies; one that cannot, rebinds as before.
"""

from __future__ import annotations

from reload_lint.fix.base import Plan, Store
from reload_lint.fix.model import SAFE


def plan(store: Store, ind: str) -> Plan:
    t, v, b, a = store.target, store.value, store.base, store.attr
    i1, i2, i3 = ind, ind * 2, ind * 3
    code = (
        f'if getattr({b}, "{a}", None) is not None:\n'
        f"{i1}if (\n"
        f"{i2}{t}.shape == {v}.shape\n"
        f"{i2}and {t}.dtype == {v}.dtype\n"
        f"{i2}and {t}.device == {v}.device\n"
        f"{i1}):\n"
        f"{i2}{t}.copy_({v})\n"
        f"{i1}else:\n"
        f"{i2}{t} = {v}\n"
        f"else:\n"
        f"{i1}{t} = {v}\n"
    )
    del i3
    return Plan(
        shape="keep",
        applicability=SAFE,
        description=(
            f"keep the first storage of `{t}`: on a reload copy the new values into it "
            "(`.copy_`) when shape, dtype and device agree, rebind only when they do not"
        ),
        code=code,
    )


def plan_register(store: Store, ind: str, kwargs: list[str]) -> Plan:
    """The keep shape for a `register_buffer` call: copy into the buffer already there; the
    call runs only on the first load or when the new tensor does not fit."""
    t, v, b, a = store.target, store.value, store.base, store.attr
    extra = "".join(f", {k}" for k in kwargs)
    reg = f'{b}.register_buffer("{a}", {v}{extra})\n'
    code = (
        f'if getattr({b}, "{a}", None) is not None:\n'
        f"{ind}if (\n"
        f"{ind * 2}{t}.shape == {v}.shape\n"
        f"{ind * 2}and {t}.dtype == {v}.dtype\n"
        f"{ind * 2}and {t}.device == {v}.device\n"
        f"{ind}):\n"
        f"{ind * 2}{t}.copy_({v})\n"
        f"{ind}else:\n"
        f"{ind * 2}{reg}"
        f"else:\n"
        f"{ind}{reg}"
    )
    return Plan(
        shape="keep",
        applicability=SAFE,
        description=(
            f"keep the first storage of `{t}`: on a reload copy the new values into the "
            "buffer already registered (`.copy_`) when shape, dtype and device agree"
        ),
        code=code,
    )


def plan_item(container: str, key: str, value: str, kept: str, rebind: bool, ind: str) -> Plan:
    """The keep shape for a dict item, `C[k] = value`: copy into the tensor the dict already
    holds under `k` when it fits, else store as before. `rebind`: `value` is a local name the
    function reads on; it then names the kept tensor, so what the function returns or passes
    on is the storage captured graphs read."""
    t = f"{container}[{key}]"
    code = (
        f"{kept} = {container}.get({key})\n"
        f"if (\n"
        f"{ind}{kept} is not None\n"
        f"{ind}and {kept}.shape == {value}.shape\n"
        f"{ind}and {kept}.dtype == {value}.dtype\n"
        f"{ind}and {kept}.device == {value}.device\n"
        f"):\n"
        f"{ind}{kept}.copy_({value})\n"
        + (f"{ind}{value} = {kept}\n" if rebind else "")
        + f"else:\n"
        f"{ind}{t} = {value}\n"
    )
    return Plan(
        shape="keep",
        applicability=SAFE,
        description=(
            f"keep the tensor `{t}` holds from the first load: on a reload copy the new values "
            "into it (`.copy_`) when shape, dtype and device agree"
            + (f" and go on with it as `{value}`" if rebind else "")
            + ", store the new one only when they do not"
        ),
        code=code,
    )
