"""The rule registry: codes, names, default severity. Docs and examples live in the catalog,
rules/*.md (the top-level catalog folder)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reload_lint.errors import ReloadLintError


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: str
    summary: str


RULES: dict[str, Rule] = {
    r.code: r
    for r in [
        Rule(
            "RL101",
            "unregistered-module-tensor",
            "error",
            "A tensor created after loading is stored as a plain nn.Module attribute, "
            "outside _parameters/_buffers.",
        ),
        Rule(
            "RL102",
            "object-owned-tensor",
            "error",
            "A tensor created after loading is stored on a non-Module object "
            "(kernel, quant method, experts, config).",
        ),
        Rule(
            "RL103",
            "callable-captured-tensor",
            "error",
            "A tensor created after loading is captured by functools.partial, a lambda, "
            "a closure or a default argument.",
        ),
        Rule(
            "RL104",
            "container-held-tensor",
            "error",
            "A tensor created after loading is stored in a dict, list, tuple or set.",
        ),
        Rule(
            "RL105",
            "rebuilt-object-tensors",
            "error",
            "Post-load rebuilds an object whose constructor chain allocates tensors it keeps.",
        ),
        Rule(
            "RL106",
            "storage-swap",
            "warning",
            "A `.data =` swap replaces a parameter's storage instead of writing into it.",
        ),
        Rule(
            "RL107",
            "detached-alias",
            "error",
            "A registered tensor (or a view of it) is bound into a callable, object or plain "
            "attribute during post-load, before copy-back restores the original storage.",
        ),
        Rule(
            "RL108",
            "lazy-runtime-allocation",
            "error",
            "An object rebuilt by post-load allocates a tensor lazily on first forward.",
        ),
        Rule(
            "RL109",
            "registration-moves-storage",
            "error",
            "Where nothing is copied back (an in-place-only reload contract, a deferred "
            "layer's post-load), registering or rebinding a new Parameter/buffer moves storage "
            "on every update.",
        ),
        Rule(
            "RL201",
            "stale-derived-cache",
            "warning",
            "A value derived from a weight is cached on first use and never refreshed after a "
            "reload.",
        ),
        Rule(
            "RL202",
            "deleted-source-copy",
            "error",
            "Post-load keeps an unregistered copy derived from a registered tensor and deletes "
            "the registered source.",
        ),
        Rule(
            "RL203",
            "load-undoes-transform",
            "error",
            "Where an update only reloads the checkpoint (`vllm-load-weights`), post-load "
            "transforms a loaded Parameter where its weight loader writes: the next load writes "
            "the checkpoint's values there, or fails, and nothing applies the transform again.",
        ),
        Rule("RL901", "syntax-error", "error", "The file could not be parsed."),
        Rule("RL902", "decode-error", "error", "The file is not valid UTF-8 (or has NUL bytes)."),
        Rule("RL903", "unreadable-file", "error", "The file could not be read."),
        Rule(
            "RL904",
            "malformed-suppression",
            "error",
            "A `# reload-lint: ignore` comment is malformed or gives no reason.",
        ),
        Rule("RL905", "unused-suppression", "warning", "A suppression matched no finding."),
        Rule(
            "RL906",
            "analysis-incomplete",
            "error",
            "The analysis of a file or function could not complete (internal error or budget).",
        ),
    ]
}


def split_codes(values: list[str]) -> list[str]:
    """`--select RL101,RL2 --select rl3` -> ["RL101", "RL2", "RL3"]."""
    out: list[str] = []
    for v in values:
        out.extend(c.strip().upper() for c in v.split(",") if c.strip())
    return out


def validate_codes(codes: list[str]) -> None:
    """Accept full codes (RL101) and prefixes (RL1, RL10, ALL); reject anything else."""
    for c in codes:
        if c == "ALL":
            continue
        if c in RULES:
            continue
        if c.startswith("RL") and any(code.startswith(c) for code in RULES):
            continue
        raise ReloadLintError(
            f"unknown rule code `{c}` (known: {', '.join(RULES)}, a prefix such as RL1, or ALL)"
        )


def selected(code: str, select: list[str], ignore: list[str]) -> bool:
    def match(pats: list[str]) -> int:
        best = -1
        for p in pats:
            if p == "ALL":
                best = max(best, 0)
            elif code.startswith(p):
                best = max(best, len(p))
        return best

    s = match(select) if select else 0
    if s < 0:
        return False
    i = match(ignore)
    return not (i >= 0 and i >= s)


PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """One lookup for the project's top-level data folders, `rules/` (the catalog) and
    `allowlists/` (justified exceptions per audited codebase), wherever reload-lint runs from.

    A built wheel carries them as package data under `reload_lint/_data/<name>/` (setup.py's
    build step copies them there); a source checkout and an editable install read the folders
    themselves, beside the package. The wheel's copy wins, so an installed wheel never reads a
    stray `rules/` that happens to sit next to site-packages."""
    bundled = PACKAGE_DIR / "_data" / name
    if bundled.is_dir():
        return bundled
    return PACKAGE_DIR.parent / name


def catalog_dir() -> Path:
    """The rule catalog: `rules/` at the top of the source tree, `reload_lint/_data/rules/`
    in a wheel (see data_dir)."""
    return data_dir("rules")
