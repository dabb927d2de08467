"""The line-shift cutoff: an edit that only moves lines (a comment or blank line added or
removed, a trailing comment changed) reuses the last analysis, with its lines moved.

Input: a file's old record, its new text and the kept findings. Output: a strictly
increasing line map when the new record is the old one with its lines renamed (else None),
and the findings relabelled through it.

Such an edit shifts every later line of the file, so the file's record differs from the one
the analysis read (records carry lines) and neither the extraction digest nor the kept
observations match (cache.py, index/deps.py). What this module proves instead, for each such
file, is that the new record is the old one with its lines renamed by a strictly increasing
map, and nothing else changed:

1. **Which ints are lines.** The new text is extracted a second time with `SHIFT` blank lines
   in front of it. An int of the record that moves by exactly `SHIFT` is a line (a position,
   or a position-derived bound such as a compound statement's `end_line`); one that does not
   move is not (a column, a block id, a count). Anything else (an int that moves otherwise,
   a record of another shape) refuses the cutoff.
2. **The map.** The old record (kept in the pack under the old hash) and the new one are
   walked together: every non-line leaf (strings, columns, constants, block ids, dict keys and
   their order, lengths, types) must be equal, and each line pairs an old value with a new
   one. The pairs must form a strictly increasing one-to-one map; otherwise the cutoff is
   refused. The new record is then exactly the old one with `m` applied to its lines. When the
   whole records differ otherwise (a function nothing calls appended next to the comment), the
   same walk is made over what the analysis read of them instead (every kept observation,
   index/deps.py, read on both): the analysis sees nothing else of a record.
3. **The analysis treats lines as labels.** It compares lines of one file with `==`, `<` and
   `<=` (a statement's span, the block holding a call, the first reader by path and line),
   sorts findings by (path, line), and writes them into the findings: never `line + 1` on a
   value it reports, never comparing lines of two files without their paths. A strictly
   increasing map preserves every such comparison, so the run over the new record is the
   old run with `m` applied to that file's lines. (The one place that ordered lines as
   text, identity.py's dtype items sorted by `repr`, now orders them as numbers.)
4. **Relabelling the result.** Every place a finding carries a line of the file is mapped:
   `line`, `end_line`, trace and `via` steps, `also` and `rebuild_sites` entries, and the
   `path:line` references in its texts (reader, backends, guard, masked, message, fix, notes).
   A line that is not in the map's domain, a finding field this module does not know, or an
   analysis error row in the file refuses the cutoff. Snippets and suppression comments are read again from the
   current texts by the engine, as for the other cutoffs.

When any step refuses, the run analyses as before: the cutoff is never a guess.
"""

from __future__ import annotations

import dataclasses
import pickle
import re

from reload_lint.findings import FileError, Finding, TraceStep

SHIFT = 1009  # blank lines put in front of the text to tell lines from other ints

# every field of a Finding, by how a line shift moves it (a field added to Finding and not
# named here turns the cutoff off until it is)
_LINES = ("line", "end_line")
_TEXTS = (
    "rule",
    "path",
    "symbol",
    "target",
    "message",
    "severity",
    "confidence",
    "contract",
    "fingerprint",
    "reader",
    "guard",
    "masked",
    "fix",
    "fix_status",
    "suppressed",
)
_STEPS = ("trace", "via")
_OTHER = (
    "column",
    "backends",
    "also",
    "rebuild_sites",
    "snippet",
    "remedy",
    "apply_paths_searched",
)
KNOWN_FIELDS = frozenset((*_LINES, *_TEXTS, *_STEPS, *_OTHER))


class Refused(Exception):
    """The result cannot be relabelled exactly: analyse instead."""


def line_map(old: dict, new: dict, shifted: dict) -> dict[int, int] | None:
    """The strictly increasing map `m` with `new` == `old` with `m` applied to its lines, or
    None when there is none. `shifted` is the record of the new text with SHIFT blank lines in
    front: it tells which ints of `new` are lines."""
    pairs: dict[int, int] = {}
    back: dict[int, int] = {}
    try:
        if not _walk(old, new, shifted, pairs, back):
            return None
    except RecursionError:
        return None
    return _increasing(pairs)


def observed_map(old: dict, new: dict, shifted: dict, observed: bytes) -> dict[int, int] | None:
    """The same, for only what the analysis read of the record (`observed`, index/deps.py):
    every kept observation must read on `new` what it read on `old` with one strictly
    increasing map applied to its lines. The rest of the record may differ (a function nothing
    calls appended next to a comment line): the analysis never sees it, as for the
    observations cutoff."""
    from reload_lint.index.deps import Unobservable, observations, read_observation

    pairs: dict[int, int] = {}
    back: dict[int, int] = {}
    caches: tuple[dict, dict, dict] = ({}, {}, {})
    try:
        for kind, keys in observations(observed).items():
            for key in keys:
                o, n, s = (
                    read_observation(r, kind, key, c)
                    for r, c in zip((old, new, shifted), caches, strict=True)
                )
                if not _walk(o, n, s, pairs, back):
                    return None
    except (Unobservable, RecursionError, KeyError, TypeError, ValueError, IndexError):
        return None  # an observation of another shape: no proof
    return _increasing(pairs)


def _increasing(pairs: dict[int, int]) -> dict[int, int] | None:
    """`pairs` (one to one by construction) when it is strictly increasing on lines >= 1."""
    prev = 0
    for o in sorted(pairs):
        n = pairs[o]
        if o < 1 or n <= prev:
            return None  # not increasing (or not a line at all)
        prev = n
    return pairs


def _walk(o, n, s, pairs: dict, back: dict) -> bool:
    t = type(n)
    if type(o) is not t or type(s) is not t:
        return False
    if t is int:
        if s == n:  # not a line: must not have changed
            return o == n
        if s != n + SHIFT:
            return False
        if pairs.setdefault(o, n) != n or back.setdefault(n, o) != o:
            return False  # one old line at two new places, or two old lines at one
        return True
    if t is tuple or t is list:
        if len(o) != len(n) or len(s) != len(n):
            return False
        for a, b, c in zip(o, n, s, strict=True):
            if not _walk(a, b, c, pairs, back):
                return False
        return True
    if t is dict:
        if len(o) != len(n) or len(s) != len(n):
            return False
        for (ka, a), (kb, b), (kc, c) in zip(o.items(), n.items(), s.items(), strict=True):
            if type(kb) is not str or ka != kb or kc != kb or type(ka) is not str:
                return False  # keys in the same order; keys that are not names refuse
            if not _walk(a, b, c, pairs, back):
                return False
        return True
    if t in (str, bool, float, bytes, type(None)):
        return o == n and (t is not float or repr(o) == repr(n))  # 0.0 == -0.0: not the same
    return o == n and s == n  # another type: equal, and nothing in it moved with the lines


def record_map(old_blob: bytes, new_blob: bytes, text: str, extract, observed=None):
    """The line map from the old extraction result to the new one of `text` (both pickled
    ("ok", record) results): of the whole record, else (given `observed`, what the analysis
    read of the old record) of what the analysis read; None when the new record is not the old
    one with its lines moved, there. `extract(text)` is the extraction result of a text under
    the file's module name."""
    try:
        old, new = pickle.loads(old_blob), pickle.loads(new_blob)
    except Exception:  # a corrupt entry: no proof
        return None
    if not (_is_ok(old) and _is_ok(new)):
        return None
    shifted = extract("\n" * SHIFT + text)
    if not _is_ok(shifted):
        return None
    got = line_map(old[1], new[1], shifted[1])
    if got is None and observed is not None:
        got = observed_map(old[1], new[1], shifted[1], observed)
    return got


def _is_ok(res) -> bool:
    return isinstance(res, tuple) and len(res) == 2 and res[0] == "ok" and isinstance(res[1], dict)


# ---- relabelling a kept result --------------------------------------------------------------


def relabel(value, maps: dict[str, dict[int, int]]):
    """The kept (findings, errors, suppressions) with every line of the files in `maps`
    moved by its map, or None when that cannot be done exactly."""
    try:
        findings, errors, suppressions = value
        return (
            [_finding(f, maps) for f in findings],
            [_error(e, maps) for e in errors],
            suppressions,  # read again from the current texts by the engine
        )
    except (Refused, TypeError, ValueError, AttributeError):
        return None


def _finding(f: Finding, maps) -> Finding:
    if not isinstance(f, Finding):
        raise Refused
    names = {fl.name for fl in dataclasses.fields(f)}
    if names != KNOWN_FIELDS or f.remedy is not None:
        raise Refused
    m = maps.get(f.path)
    changes: dict = {}
    if m is not None:
        changes["line"] = _line(m, f.line)
        changes["end_line"] = _line(m, f.end_line)
    for name in _TEXTS:
        v = getattr(f, name)
        if isinstance(v, str):
            changes[name] = _text(v, maps)
        elif v is not None:
            raise Refused
    for name in _STEPS:
        changes[name] = [_step(s, maps) for s in getattr(f, name)]
    changes["backends"] = [_text(_str(b), maps) for b in f.backends]
    changes["also"] = [_also(a, maps) for a in f.also]
    changes["rebuild_sites"] = [_also(r, maps) for r in f.rebuild_sites]
    return dataclasses.replace(f, **changes)


def _step(s: TraceStep, maps) -> TraceStep:
    if not isinstance(s, TraceStep):
        raise Refused
    m = maps.get(s.path)
    line = _line(m, s.line) if m is not None else s.line
    return TraceStep(s.path, line, _text(_str(s.note), maps))


def _also(a: dict, maps) -> dict:
    if not isinstance(a, dict):
        raise Refused
    m = maps.get(a.get("path"))
    out = {}
    for k, v in a.items():
        if k == "line":
            out[k] = _line(m, v) if m is not None else v
        elif isinstance(v, str):
            out[k] = _text(v, maps)
        elif v is None or isinstance(v, bool):
            out[k] = v
        else:
            raise Refused  # an int that might be a line of another name
    return out


def _error(e: FileError, maps) -> FileError:
    if not isinstance(e, FileError) or e.path in maps:
        raise Refused  # an analysis error row in a moved file: rare, and its text names lines
    return FileError(e.rule, e.path, _text(e.message, maps), e.line)


def _line(m: dict[int, int], line) -> int:
    if type(line) is not int:
        raise Refused
    if line == 0:  # "no line"
        return 0
    got = m.get(line)
    if got is None:
        raise Refused  # a line the record does not hold: not provably a label
    return got


def _str(v) -> str:
    if not isinstance(v, str):
        raise Refused
    return v


_REFS: dict[tuple, re.Pattern] = {}


def _text(text: str, maps) -> str:
    """`text` with each `path:line` reference to a moved file moved."""
    if ":" not in text:
        return text
    for rel, m in maps.items():
        if rel not in text:
            continue
        pat = _REFS.get((rel,))
        if pat is None:
            pat = _REFS[(rel,)] = re.compile(r"(?<![\w./\\-])" + re.escape(rel) + r":(\d+)")
        text = pat.sub(lambda mo, m=m, rel=rel: f"{rel}:{_line(m, int(mo.group(1)))}", text)
    return text
