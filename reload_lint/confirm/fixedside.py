"""Planning the fixed side: one isolated run per site, its own fix from source where one exists.

For each site whose bug side came out red, the fixed side is a run in which only that site's
storage may escape:

* its own fix is the codemod's patch (the finding's ``remedy.patch``), or the user's checkout
  (``confirm --source DIR``), applied to a copy of the sources on the import path
  (``patched.py``): ``fix_source`` "codemod" / "source", with the patch's sha256. Only where
  neither exists does the runtime monkeypatch of ``fixes.py`` stand in (``fix_source``
  "monkeypatch");
* every *other* target of the build is held fixed by its codemod where it has one, else by its
  monkeypatch, and the record lists them (``isolation``), so a build's fixed side never applies
  other sites' fixes unnamed;
* under the ``unshadow`` precondition, another target whose attribute that precondition takes
  off the layer before the restore (``taken_off``: the masking attributes the bug side's
  refused reload named) is held by its monkeypatch, not its codemod: the codemod keeps what the
  layer holds at post-load, which the precondition has just removed, so it would bind new
  tensors and free storage the capture read, and the site under test would inherit that
  escape (H200 session 14: ``w13_precision_config`` red through ``w13_weight``). The
  monkeypatch keeps the value the precondition set aside (``fixes.KEEP_ASIDE``).

Sites that share one target and one patch share one run; a patch that does not apply gives an
inconclusive record that says so, never a silent fallback to the monkeypatch.
"""

from __future__ import annotations

import re
from pathlib import Path

from reload_lint.confirm.patched import (
    PatchError,
    SourceFix,
    from_patch,
    merge_fixes,
    module_name,
)

#: a storage the patch's added lines register under a name of its own (its new home, linked by
#: the census in addition to the finding's target)
_HOME = re.compile(
    r"""(?:register_buffer|register_parameter)\(\s*["'](\w+)["']"""
    r"""|replace_parameter\(\s*\w+\s*,\s*["'](\w+)["']"""
)


def new_homes(patch: str) -> list[str]:
    out = []
    for ln in patch.splitlines():
        if ln.startswith("+") and not ln.startswith("+++"):
            for m in _HOME.finditer(ln):
                name = m.group(1) or m.group(2)
                if f"layer.{name}" not in out:
                    out.append(f"layer.{name}")
    return out


def prepare_sources(findings, raw_patches: dict, source_fix: SourceFix | None) -> dict:
    """fingerprint -> SourceFix (its own fix from source) or str (why its patch cannot be
    applied). ``source_fix`` (``--source DIR``) serves every site; otherwise the finding's own
    codemod patch, when it has one."""
    out: dict[str, SourceFix | str] = {}
    cache: dict[str, SourceFix | str] = {}
    for f in findings:
        if source_fix is not None:
            out[f.fingerprint] = source_fix
            continue
        got = raw_patches.get(f.fingerprint)
        if got is None:
            continue
        patch, sha, label = got
        if patch not in cache:
            try:
                cache[patch] = from_patch(patch, "codemod", sha)
                cache[patch].label = label
            except (PatchError, OSError, UnicodeDecodeError) as exc:
                cache[patch] = (
                    f"the codemod's patch does not apply to the importable sources: {exc}"
                )
        out[f.fingerprint] = cache[patch]
    return out


def fixed_runs(
    common: dict,
    sites: list,
    fixes: dict,
    red: set[str],
    sources: dict,
    overlay_parent: Path,
    taken_off: set[str] | frozenset[str] = frozenset(),
) -> tuple[list[dict], list[tuple[object, str]]]:
    """The fixed-side child specs for one build (``common``: the build's shared spec fields;
    ``fixes``: the recipe's monkeypatch fixes by canonical target) over its ``sites`` whose bug
    side is red (``red``: fingerprints), and the sites that get no run with the reason.
    ``taken_off``: layer attribute names the build's ``unshadow`` precondition removes before
    the restore (their codemods are not merged into another site's run)."""
    runs: list[dict] = []
    refused: list[tuple[object, str]] = []
    groups: dict[tuple, list] = {}
    for s in sites:
        fp = s.finding.fingerprint
        if fp not in red:
            continue
        src = sources.get(fp)
        if isinstance(src, str):
            refused.append((s, src))
            continue
        if src is not None:
            groups.setdefault((s.canonical, "source", src.sha256), []).append((s, src))
        elif s.canonical in fixes:
            groups.setdefault((s.canonical, "monkeypatch", ""), []).append((s, None))
    # every codemod of the build, by target: the fixed side of one site applies them all
    # (its own, and each other target's in place of that target's monkeypatch)
    codemods: dict[str, SourceFix] = {}
    for s in sites:
        src = sources.get(s.finding.fingerprint)
        if isinstance(src, SourceFix) and src.kind == "codemod":
            codemods.setdefault(s.canonical, src)
    unshadowed = "unshadow" in (common.get("preconditions") or [])
    removed = {t for t in codemods if unshadowed and _taken_off(t, taken_off)}
    overlays: dict[str, str] = {}
    for (canon, how, _sha), members in sorted(groups.items(), key=lambda kv: kv[0]):
        src = members[0][1]
        with_ = {}
        kept_aside: list[str] = []
        if src is not None and src.kind == "codemod":
            with_ = {
                t: fx
                for t, fx in sorted(codemods.items())
                if t != canon and fx is not src and t not in removed
            }
            kept_aside = sorted(t for t in removed if t != canon and codemods[t] is not src)
        applied, held = src, {}
        if with_:
            try:
                applied = merge_fixes([src, *with_.values()])
                held = with_
            except PatchError as exc:
                held = {"": str(exc)}
        others = sorted(t for t in fixes if t != canon and t not in held)
        spec = {
            **common,
            "fixed": True,
            "fixes": others + ([canon] if how == "monkeypatch" else []),
            "own": canon,
            "findings": [s.spec_entry() for s, _ in members],
            "fix_source": "monkeypatch",
        }
        if src is not None:
            assert applied is not None
            if applied.sha256 not in overlays:
                overlays[applied.sha256] = str(applied.overlay(overlay_parent))
            spec.update(
                fix_source=src.kind,
                patch_sha256=src.sha256,
                patch_label=src.label,
                overlay=overlays[applied.sha256],
                patched=[{"path": p, "module": module_name(p)} for p in sorted(applied.files)],
                lines={
                    s.finding.fingerprint: applied.lines_for(
                        s.finding.path, s.finding.line, s.finding.end_line or s.finding.line
                    )
                    for s, _ in members
                },
                # the own patch's new homes only: another target's are that target's
                links=new_homes(src.patch),
                codemods_with=[
                    f"codemod of {t}: {fx.label + ', ' if fx.label else ''}sha256 {fx.sha256[:12]}"
                    if isinstance(fx, SourceFix)
                    else f"the other targets' codemods not applied with this one: {fx}"
                    for t, fx in held.items()
                ]
                + [
                    f"codemod of {t} not applied with this one: the unshadow precondition takes "
                    f"{t} off the layer before the patched post-load, so that codemod would find "
                    "nothing to keep and free the storage the capture read; "
                    + (
                        "held fixed by its monkeypatch, which keeps the value set aside"
                        if t in fixes
                        else "no monkeypatch holds it: its storage may escape in this run"
                    )
                    for t in kept_aside
                ],
            )
        runs.append(spec)
    return runs, refused


def _taken_off(target: str, names) -> bool:
    base, _, attr = target.partition(".")
    return base == "layer" and attr in names


def taken_off_names(masked) -> set[str]:
    """The attribute names of a refused reload's ``masked`` paths (``routed_experts.w13_weight``
    -> ``w13_weight``): what the ``unshadow`` precondition takes off the layer."""
    return {str(m).rsplit(".", 1)[-1] for m in masked or []}


def fix_fields(canonical: str, recipe, spec: dict, fx: dict) -> dict:
    """The record's fix fields: on the fixed side, its own fix (from source, or the
    monkeypatch) and the others held fixed; on the bug side, the fixes isolating it."""
    applied = list(fx.get("applied", []))
    if not spec["fixed"]:
        return {"isolation": applied}
    own = spec.get("own", canonical)
    targets = fx.get("applied_targets") or []
    others = [a for t, a in zip(targets, applied, strict=False) if t != own]
    how = spec.get("fix_source", "monkeypatch")
    out = {"isolation": others, "fix_source": how}
    if how == "monkeypatch":
        fixes = recipe.fixes_for(spec["targets"])
        out["fix"] = fixes[own].description if own in fixes else None
        return out
    out["isolation"] = [*spec.get("codemods_with", []), *others]
    files = [p["path"] for p in spec.get("patched", [])]
    what = "the codemod's patch" if how == "codemod" else "the checkout's changes"
    label = f"{spec['patch_label']}, " if spec.get("patch_label") else ""
    out["fix"] = f"{what} ({label}sha256 {spec['patch_sha256'][:12]}) to {', '.join(files)}"
    out["fix_patch_sha256"] = spec["patch_sha256"]
    out["fix_files"] = files
    return out


def check_overlay(spec: dict) -> list[dict]:
    """In the child, after set-up: each patched module resolves to the overlay's file (the
    patched copy), not to the original. Raises RuntimeError when one does not."""
    import importlib.util

    out = []
    root = spec["overlay"].rstrip("/") + "/"
    for p in spec.get("patched", []):
        spec_ = importlib.util.find_spec(p["module"])
        origin = getattr(spec_, "origin", None) or ""
        if not origin.startswith(root):
            raise RuntimeError(
                f"the patched {p['path']} is not what Python imports here ({origin or 'absent'})"
            )
        out.append({"path": p["path"], "origin": origin})
    return out
