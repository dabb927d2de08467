"""A finding's target (``self.act_perm``, ``layer.workspace``) and the recorded storages it names.

The static engine reports where a tensor is stored as ``base.attr[.attr...]`` inside
``Class.method`` (or a free function). At runtime the attribute walk names every tensor by the
chain of (owner classes, attribute) steps that reach it; a target links the walk steps whose
attribute matches, on an owner whose MRO contains the finding's class (``self.X``) or on an
``nn.Module`` (``layer.X``). Rows below the linked step (``act_perm.kw[perm]``, the strides of a
rebuilt experts object under ``moe_kernel``) belong to the target.
"""

from __future__ import annotations

import re


def symbol_class(f) -> str | None:
    """The enclosing class of a finding's symbol (``Class.method`` -> ``Class``), if any."""
    return symbol_class_of(f.symbol)


def symbol_class_of(symbol: str) -> str | None:
    parts = [p for p in (symbol or "").split(".") if p and not p.startswith("<")]
    if len(parts) >= 2 and parts[0].lstrip("_")[:1].isupper():  # `_GateLinearMethod.m` too
        return parts[0]
    return None


def parse_target(target: str) -> tuple[str, list[str]]:
    """``self.act_perm`` -> ("self", ["act_perm"]); ``layer.a.b`` -> ("layer", ["a", "b"]).

    A trailing ``.data`` (a ``.data =`` swap) names the tensor itself, not an attribute."""
    t = re.sub(r"\s+", "", target or "")
    t = re.sub(r"\[[^\]]*\]", "", t)
    parts = [p for p in t.split(".") if p]
    while len(parts) > 1 and parts[-1] == "data":
        parts.pop()
    if not parts:
        return "", []
    if len(parts) == 1:
        return "", parts
    return parts[0], parts[1:]


def linked_paths(target: str, symbol: str, manifest) -> set[str]:
    """Recorded walk paths the target names (see the module docstring)."""
    base, attrs = parse_target(target)
    cls = symbol_class_of(symbol)
    if not attrs:
        return set()
    out: set[str] = set()
    for e in manifest.entries.values():
        for hit in e.hits:
            steps = hit.steps
            for i, st in enumerate(steps):
                if not st.attr or st.label != attrs[0]:
                    continue
                if base == "self" and cls is not None and cls not in st.owner:
                    continue
                if base == "layer" and "Module" not in st.owner:
                    continue
                # any other base is a local name (``quant_config._w1.bias``): the attribute
                # chain alone links, on whatever object holds it
                rest = [s.label for s in steps[i + 1 :] if s.attr]
                if rest[: len(attrs) - 1] == attrs[1:]:
                    out.add(hit.path)
                    break
    return out


def also_links(finding: dict, manifest) -> dict[str, list[str]]:
    """The recorded paths each store folded into the finding (its ``also``) names, by that
    store's fingerprint. A folded store's class is not in the findings JSON, so a ``self.X``
    target links on any owner that holds an ``X``."""
    out: dict[str, list[str]] = {}
    for a in finding.get("also") or ():
        paths = linked_paths(a.get("target", ""), "", manifest)
        out[a.get("fingerprint") or a.get("target", "")] = sorted(paths)
    return out


def link_rows(finding: dict, manifest, rows, extra_targets=()) -> list:
    """Census rows of the storages the finding's target (or a fix's new home for it) names."""
    paths = linked_paths(finding.get("target", ""), finding.get("symbol", ""), manifest)
    for t in extra_targets:
        paths |= linked_paths(t, finding.get("symbol", ""), manifest)
    return [r for r in rows if r.path in paths]
