"""The incremental machinery: what a run can reuse from the runs before it.

Input: the files `discover` found (their paths, module names) and the tool's own sources.
Output: each file's text, content hash and text facts (by stat when its row matches), its
parsed record (from the pack, or parsed), and, when the analysis's inputs are unchanged or
changed only in ways it cannot see, the findings of an earlier run instead of a new analysis.

- cache.py     `RecordStore`: the per-tree pack (file table, records, kept results), the
               scan by stat, whole-run results, the fingerprints of the tool and extractor
- cutoff.py    early cutoff: results kept by what the analysis consumed, and the three tests
               (same records, same observations, lines only moved)
- shiftcut.py  the line-shift cutoff: a line map, and findings relabelled through it
- through.py   pre-commit's named files: the findings located in or passing through them
- cachedir.py  `reload-lint cache` / `cache clean`: what the cache folder holds, and its size

The rest of the package imports from here (`from reload_lint.incremental import RecordStore`);
each name's module is imported the first time it is asked for, so a run loads only what it
uses (docs/performance.md, Session 16). Tests reach private helpers in the modules directly.
"""

from __future__ import annotations

_EXPORTS = {
    "RecordStore": "cache",
    "MAX_FILE_BYTES": "cache",
    "tool_fingerprint": "cache",
    "steps": "through",
    "through_files": "through",
    "via": "through",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """`from reload_lint.incremental import NAME`: the module that defines NAME, imported on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
