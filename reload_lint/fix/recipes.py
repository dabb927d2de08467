"""Manual recipes: the fix in words where no codemod applies, naming functions of the tree."""

from __future__ import annotations

from reload_lint.findings import Finding
from reload_lint.fix.plan import LIBRARY_OBJECT
from reload_lint.fix.tree import TreeApi


def recipe(f: Finding, api: TreeApi, why: str) -> str:
    base, _, attr = f.target.partition(".")
    attr = attr.split(".")[0] or "<name>"
    rp = api.prefer_copy_module()
    reg = (
        f'`{rp}.replace_parameter({base}, "{attr}", new, prefer_copy=True)`'
        if rp
        else f'`{base}.register_buffer("{attr}", new)`'
    )
    if f.rule == "RL106":
        text = (
            f"allocate `{base}.{attr}` with its final shape in create_weights so the loader "
            f"writes into it, or register the reshaped tensor under a new name with {reg}"
        )
    elif f.rule == "RL104":
        text = (
            f"register each tensor of `{f.target}` on the layer under its own name "
            f"({reg}) and keep the names in the container, reading them at apply time"
        )
    elif f.rule == "RL107":
        text = (
            f"read the registered tensor from the layer when the graph runs (in apply) instead "
            f"of binding it into `{f.target}` during post-load"
        )
    elif f.rule == "RL108":
        text = (
            "keep the object that owns "
            f"`{f.target}` across reloads: at the post-load that rebuilds it, keep the first "
            "object and copy the rebuilt one's tensors into it (the keep_object codemod of "
            "the RL105 finding at that site)"
        )
    elif LIBRARY_OBJECT in why:
        text = (
            "prepare the object the first load kept again in place through the library's own "
            "API, if it has one, or rebuild it and capture the graphs again"
        )
    else:
        text = f.fix or f"see reload-lint rule {f.rule}"
    return f"{text} (no codemod: {why})"
