"""The fix record: what one finding's remedy is, whether it can be applied, and its patch.

Applicability follows ruff's vocabulary:

- ``safe``: the edit keeps every first-load behaviour and only changes what a second
  post-load does (copy into the storage the first one allocated, and rebind exactly when it
  cannot be copied, as before). ``check --fix`` applies it.
- ``unsafe``: the edit changes what the module or object holds (a registered buffer, a
  callable that reads the layer when it runs, an object kept across reloads whose tensors are
  refreshed in place and that refuses a reload changing their shape). ``--unsafe-fixes``.
- ``display-only``: no codemod; a manual recipe that names functions of the audited tree.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

SAFE = "safe"
UNSAFE = "unsafe"
DISPLAY = "display-only"

# The rule pages `reload-lint gen-docs` writes, relative to the repository root (the project
# publishes no web address; `reload-lint rule CODE` prints the same page offline).
RULE_DOC = "docs/rules/{code}.md"


def rule_url(code: str) -> str:
    return RULE_DOC.format(code=code)


@dataclass
class Edit:
    """A whole-file replacement of ``path`` (relative to the audited base): ``before`` is the
    text it was computed on, ``after`` the text with this fix (and nothing else) applied."""

    path: str
    before: str
    after: str


@dataclass
class Remedy:
    """One finding's fix. ``shape`` names the codemod (``keep``, ``keep_object``,
    ``register``, ``replace_parameter``, ``late_bind``) or ``manual``."""

    applicability: str
    shape: str
    description: str
    edits: list[Edit] = field(default_factory=list)
    recipe: str = ""  # display-only: what to do by hand
    refused: str = ""  # a codemod was computed but not applied: why
    patch: str = ""  # unified diff of `edits` (paths a/ and b/ relative to the base)

    @property
    def patch_sha256(self) -> str:
        return hashlib.sha256(self.patch.encode("utf-8")).hexdigest() if self.patch else ""

    @property
    def has_patch(self) -> bool:
        return bool(self.patch) and not self.refused

    def to_json(self, rule: str) -> dict:
        out = {
            "applicability": self.applicability if self.has_patch else DISPLAY,
            "shape": self.shape if self.has_patch else "manual",
            "description": self.description,
            "patch": self.patch if self.has_patch else None,
            "patch_sha256": self.patch_sha256 if self.has_patch else None,
            "paths": sorted({e.path for e in self.edits}) if self.has_patch else [],
            "recipe": self.recipe or None,
            "refused": self.refused or None,
            "rule_url": rule_url(rule),
        }
        return out
