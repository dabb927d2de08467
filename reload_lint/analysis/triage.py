"""Triage text of a finding: the one-line message and the fix that applies.

Both are chosen per finding from its rule, the reload contract, the stored value's kind and
the target as written (`layer.x`, `self.workspace`, `layer.w.data`, `self.kernel`), not one
fixed text per rule. The long explanation of *why* a store moves lives in the rule page
(`reload-lint rule RL1xx`), not in every finding.
"""

from __future__ import annotations

from reload_lint.analysis import values as V
from reload_lint.analysis.values import AV

# The four fixes issue 12 names, as the lead words of every fix line.
REGISTER = "register as buffer"
COPY = "copy into the existing storage"
LATE = "late binding through the layer"
REUSE = "reuse the rebuilt object"
ALLOC_ONCE = "reuse the existing allocation"


def split_target(target: str) -> tuple[str, str]:
    """(`base`, `attr`) of a stored location: `layer.w.data` -> (`layer`, `w`); the attribute
    is "" when it is not a plain name (`layer.<dynamic>`, a subscript)."""
    t = target.split("[", 1)[0]
    parts = t.split(".")
    if len(parts) > 2 and parts[-1] == "data":
        parts = parts[:-1]
    if len(parts) < 2:
        return t, ""
    attr = parts[-1]
    if not attr.isidentifier():
        attr = ""
    return ".".join(parts[:-1]), attr


def _src_attr(v: AV) -> str:
    attr = v.src.rsplit(".", 1)[-1] if v.src else ""
    return attr if attr.isidentifier() else ""


def _captured(v: AV) -> list[str]:
    """Names under which a callable holds tensors (keyword names, closure names)."""
    out: list[str] = []
    for name, cap in v.items:
        if not V.tensorish(cap):
            continue
        if name == "arg":
            name = next((_src_attr(c) for c in cap if _src_attr(c)), "")
        name = name.removeprefix("default:")
        if name and name not in out:
            out.append(name)
    return out


def _keep(name: str, inplace: bool) -> str:
    """How a tensor gets storage the contract protects."""
    if inplace:
        return f"allocate `{name}` once on the layer at load and write it with `.copy_(...)`"
    return f"register `{name}` on the layer"


def message(rule: str, target: str, v: AV, why: str, inplace: bool) -> str:
    """One sentence: what is stored where, without repeating itself or the rule page."""
    t = f"`{target}`"
    if rule == "RL101":
        return f"{t} is a plain attribute holding a tensor created after loading"
    if rule == "RL102":
        return f"{t} keeps a tensor created after loading on a non-Module object"
    if rule == "RL103":
        return f"{t} holds a {v.value or 'callable'} that captures a tensor created after loading"
    if rule == "RL104":
        return f"{t} holds a tensor created after loading in a container"
    if rule == "RL105":
        name = v.cls.split(":")[-1] if v.cls else "the object"
        return f"{t} is rebuilt after loading and {name} allocates tensors in its constructor chain"
    if rule == "RL106":
        if "slice" in why:
            return f"{t} re-points a parameter at a sliced view, changing its shape and storage"
        if inplace:
            return f"{t} rebinds the parameter to new storage through `.data =`"
        return f"{t} replaces the parameter's storage with a shape-changing `.data =` swap"
    if rule == "RL107":
        if v.kind == V.CALLABLE:
            return (
                f"{t} holds a {v.value or 'callable'} bound to a registered tensor before copy-back"
            )
        if v.kind in (V.CONTAINER, V.TUPLE):
            return f"{t} holds registered tensors in a container bound before copy-back"
        if v.kind in (V.OBJ, V.MODULE):
            name = v.cls.split(":")[-1] if v.cls else "the object"
            return (
                f"{t} is rebuilt after loading and {name} binds registered tensors before copy-back"
            )
        return f"{t} binds a registered tensor (or a view of one) before copy-back"
    if rule == "RL108":
        return f"{t} is allocated on the first forward of an object post-load rebuilds"
    if rule == "RL109" and "deferred" in why:
        return (
            f"{t} binds new storage in a deferred layer's post-load, which the reload runs on "
            "live tensors with no copy-back"
        )
    if rule == "RL109" and why == "register_buffer" and v.kind != V.PARAM:
        return f"{t} registers new buffer storage on every update"
    if rule == "RL109":
        if v.kind == V.PARAM:
            return f"{t} is bound to a new Parameter, not the one the weight loader writes"
        return f"{t} registers new buffer storage by assigning to a buffer name"
    if rule == "RL201" and "never re-runs post-load" in why:
        return f"{t} is {why}"
    if rule == "RL203":
        return f"{t}: {why}"
    if rule == "RL201" and "non-persistent" in why:
        return f"{t} is a non-persistent buffer {why}, so it keeps the first load's values"
    if rule == "RL201":
        return f"{t} caches a value {why} that no reload refreshes"
    return f"{t}: {why}"


def fix_for(
    rule: str, target: str, v: AV, why: str, inplace: bool, stale_nonpersistent: bool = False
) -> str:
    """One line naming the fix that applies to this store. `stale_nonpersistent`: the reload
    skips non-persistent buffers in copy-back (vLLM 0.33), so a value derived from a weight
    is registered persistent."""
    base, attr = split_target(target)
    name = attr or "<name>"
    src = _src_attr(v)
    derived = bool(src) or v.kind == V.PARAM
    np = "" if stale_nonpersistent and (derived or rule == "RL201") else ", persistent=False"
    if rule in ("RL101", "RL109"):
        if inplace:
            return (
                f"{COPY}: allocate `{base}.{name}` once at load and write the new values with "
                f"`{base}.{name}.copy_(...)` (or the codebase's copy-or-rebind helper)"
            )
        return (
            f'{REGISTER}: `{base}.register_buffer("{name}", ...{np})` or '
            f'`replace_parameter({base}, "{name}", ...)`'
        )
    if rule == "RL102":
        if not derived:
            # scratch whose contents do not come from weights: keep the first allocation
            return (
                f"{ALLOC_ONCE}: keep the first `{target}` and copy the new values into it "
                f"(`.copy_`) on reload, or {_keep(name, inplace)}"
            )
        if inplace:
            return f"{COPY}: keep `{target}` allocated once and write it with `.copy_(...)`"
        return (
            f'{LATE}: register it on the layer (`layer.register_buffer("{name}", ...)`) and '
            f"read `layer.{name}` at apply time instead of `{target}`"
        )
    if rule == "RL103":
        caps = _captured(v)
        reads = ", ".join(f"`layer.{c}`" for c in caps[:3]) or "the tensor through the layer"
        what = "allocate the tensor once on the layer" if inplace else "register the tensor"
        return (
            f"{LATE}: {what} and replace the {v.value or 'callable'} with a call that reads "
            f"{reads} when it runs"
        )
    if rule == "RL104":
        if inplace:
            return (
                f"{COPY}: allocate the tensors in `{target}` once and write them with `.copy_(...)`"
            )
        return (
            f"{REGISTER}: register each tensor on the layer under its own name and keep the "
            f"names, not the tensors, in `{target}`"
        )
    if rule == "RL105":
        cls = v.cls.split(":")[-1] if v.cls else "the object"
        return (
            f"{REUSE}: keep the {cls} of the first load in `{target}` and copy the rebuilt "
            "one's tensors into it (or build it once)"
        )
    if rule == "RL106":
        if inplace:
            return (
                f"{COPY}: write with `{base}.{name}.data.copy_(...)` into storage allocated at load"
            )
        return (
            f"{COPY}: allocate the final shape of `{base}.{name}` in create_weights and let the "
            "loader write into it, or register the new tensor under a new name"
        )
    if rule == "RL107" and v.kind in (V.OBJ, V.MODULE):
        cls = v.cls.split(":")[-1] if v.cls else "the object"
        return (
            f"{LATE}: keep a reference to the layer in {cls} (or build it from the layer at "
            f"apply time) instead of binding its registered tensors into `{target}`"
        )
    if rule == "RL107":
        return (
            f"{LATE}: read `layer.{src or name}` when the graph runs (in apply) instead of "
            f"binding it into `{target}` during post-load"
        )
    if rule == "RL108":
        return (
            f"{REUSE}: keep the object that owns `{target}` across reloads, or "
            f"{_keep(name, inplace)}"
        )
    if rule == "RL203":
        return (
            f"{COPY}: keep the loaded Parameter as the loader made it and write the transformed "
            f"values into a tensor registered under another name (re-derived after every update), "
            f"or transform at load time inside the weight loader"
        )
    if rule == "RL201" and "never re-runs post-load" in why:
        return (
            f"{COPY}: derive `{name}` again after every update (the package's weight-update "
            "path re-runs this post-load step, or copies the new derivation into it with "
            f"`.copy_(...)`), or compute it from `{src or 'the loaded tensor'}` in the forward"
        )
    if rule == "RL201" and "behind a test of the copy itself" in why:
        return (
            f"{COPY}: when `{target}` already exists, write the value derived from "
            f"`{src or 'the source'}` into it (`{target}.copy_(...)`) instead of skipping it"
        )
    if rule == "RL201" and "into a copy under its own name" in why:
        return (
            f"{COPY}: keep the tensor the copy is made from (the registered Parameter) and, "
            f"once `{target}` exists, refresh it in place on every post-load "
            f"(`{target}.copy_(source)`)"
        )
    if rule == "RL201" and inplace:
        return (
            f"{COPY}: derive `{name}` in process_weights_after_loading into storage allocated "
            "at load (`.copy_(...)`), so every update refreshes it"
        )
    if rule == "RL201" and "non-persistent" in why:
        return (
            f'{REGISTER}: register `{name}` persistent (`{base}.register_buffer("{name}", ...)` '
            "without `persistent=False`): the reload copies persistent buffers back"
        )
    if rule == "RL201":
        return (
            f"{REGISTER}: derive `{name}` in process_weights_after_loading and register it "
            f'(`{base}.register_buffer("{name}", ...{np})`)'
        )
    if rule == "RL202" and inplace:
        return (
            f"{COPY}: keep `{src or 'the source'}` and write the derived value into storage "
            "allocated at load with `.copy_(...)`"
        )
    if rule == "RL202":
        return (
            f"{REGISTER}: keep the derived value registered "
            f'(`replace_parameter({base}, "{name}", ...)`) and do not delete '
            f"`{src or 'the source'}`"
        )
    return f"see the rule page: reload-lint rule {rule}"
