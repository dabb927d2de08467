"""Planning: which family row and recipes serve a finding, its canonical target and owner.

``plan_site`` maps one finding to a ``Site``: the recipes (one per row and backend) that can
build its layer here, the canonical target the census links, the class whose post-load stores
it (where a fix applies), or why no run can answer it (``early``). ``runner.confirm`` groups the
sites by build.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reload_lint.findings import Finding


@dataclass
class Site:
    """A finding and how the runner reaches it."""

    finding: Finding
    recipes: list = field(default_factory=list)  # Recipe objects, one per backend
    row: str | None = None
    canonical: str = ""
    owner: str | None = None  # the class whose post-load stores the target
    early: str | None = None  # why no run can answer it (inconclusive before any run)
    rebuilt: bool = False  # the target is an object rebuilt after loading (RL105/RL108)

    def spec_entry(self) -> dict:
        f = self.finding
        return {
            "fingerprint": f.fingerprint,
            "target": f.target,
            "symbol": f.symbol,
            "path": f.path,
            "canonical": self.canonical,
            # the stores folded into this finding (one storage, one finding): their storages
            # are the finding's own too (targets.also_links)
            "also": [
                {k: a.get(k) for k in ("fingerprint", "target", "path", "line")}
                for a in f.also or ()
            ],
        }


def _qualified_owner(f: Finding, fallback: str) -> str:
    """``path:Class`` of the post-load root the trace names (the class whose post-load reaches
    a helper), else the row's component by bare name."""
    for step in f.trace or []:
        note = step.get("note", "") if isinstance(step, dict) else getattr(step, "note", "")
        path = step.get("path", "") if isinstance(step, dict) else getattr(step, "path", "")
        if note.startswith("post-load root ") and "." in note:
            cls = note[len("post-load root ") :].split(".")[0]
            return f"{path}:{cls}"
    return fallback


def plan_site(f: Finding, opts) -> Site:
    from reload_lint.confirm.families import map_finding, rows_for_finding
    from reload_lint.confirm.recipes import REGISTRY, get_recipe, load_builtin
    from reload_lint.confirm.recipes.generic import GenericRecipe
    from reload_lint.confirm.recipes.vllm_layers import FamilyRecipe
    from reload_lint.confirm.targets import symbol_class

    load_builtin()
    site = Site(f)
    m = map_finding(f)
    if m.row is not None:
        row = m.row
        site.row = row.id
        recipes = []
        for r_ in rows_for_finding(f):
            if r_.layer == "recipe":
                recipes.append(get_recipe(r_.recipe))
                continue
            backends = [b for b in r_.backends if opts.backends is None or b in opts.backends]
            recipes += [FamilyRecipe(r_, b) for b in backends or ["auto"]]
        cls = symbol_class(f)
        if cls in row.kernels:
            # a class the component builds: the object is rebuilt by the component's post-load
            # (the trace's post-load root may be the built class's own post-load, which the
            # component calls: the owner is still the component)
            site.canonical = "self.moe_kernel"
            owner = _qualified_owner(f, row.components[0])
            if owner.rpartition(":")[2] in row.kernels:
                owner = row.components[0]
            site.owner = owner
        else:
            site.canonical = recipes[0].canonical_target(f)
            site.owner = f"{f.path}:{cls}" if cls else _qualified_owner(f, row.components[0])
        if f.rule in ("RL105", "RL108"):
            site.rebuilt = True
    else:
        r = REGISTRY.find(f)
        if r is None:
            r, why = GenericRecipe.for_finding(f)
            if r is None:
                site.early = f"{m.how}; {why}"
                return site
        recipes = [r]
        site.canonical = r.canonical_target(f)
        site.owner = symbol_class(f)
    usable = []
    whys = []
    for r in recipes:
        why = r.unavailable(opts.device)
        if why:
            whys.append(why)
        else:
            usable.append(r)
    if not usable:
        site.early = whys[0]
        return site
    site.recipes = usable
    return site
