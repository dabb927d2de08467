"""Checks that what the analysis is noted to read of each record (index/deps.py) is all it
reads: run once and keep the reads; then change every part of every record that was *not*
read (drop unread functions, classes, imports and globals, empty the bodies of unread
functions, add new entries), keeping only the changes after which every noted observation
still gives the same digest (the condition the cache's cutoff tests); run again over those
records without the cache. The findings must be byte-identical: a read the tracking missed
shows up as a difference."""

from __future__ import annotations

import copy

from reload_lint import engine
from reload_lint.incremental import cache as cachemod
from reload_lint.index import deps as D
from reload_lint.render.json_ import render_json


def capture_run(monkeypatch, run):
    """Run `run()` (a run_check with the cache on, which must analyse) and return (result,
    Reads, raw records by path) of that analysis."""
    got: dict = {}
    orig = cachemod.RecordStore.put_deps_result

    def put(self, key, value, reads=None):
        got["reads"] = reads
        got["records"] = {rel: r for rel, r in self._records.items() if r is not None}
        return orig(self, key, value, reads)

    monkeypatch.setattr(cachemod.RecordStore, "put_deps_result", put)
    res = run()
    monkeypatch.setattr(cachemod.RecordStore, "put_deps_result", orig)
    assert "reads" in got, "the run did not analyse"
    return res, got["reads"], got["records"]


def _views_hold(raw: dict, observed: bytes) -> bool:
    return D.unchanged(raw, observed)


def scramble(raw: dict, observed: bytes, salt: int = 0) -> tuple[dict, int]:
    """A copy of `raw` changed wherever no observation looks, and the number of changes kept."""
    rec = copy.deepcopy({k: v for k, v in raw.items() if not k.startswith("_")})
    seen = {kind: set(keys) for kind, keys in D.observations(observed).items()}
    kept = 0
    fresh = f"zz_scrambled_{salt}"

    def attempt(change) -> None:
        nonlocal rec, kept
        trial = copy.copy(rec)
        for t in D.TABLES:
            if t in trial:
                trial[t] = dict(trial[t])
        change(trial)
        if _views_hold(trial, observed):
            rec = trial
            kept += 1

    for table in D.TABLES:
        if table not in rec or D.WHOLE in seen.get(table, ()):
            continue
        unread = [k for k in rec[table] if k not in seen.get(table, ())]
        for k in unread:
            if table == "functions":
                f = rec[table][k]
                emptied = {**f, "body": (), "reads": (), "guarded": False}
                attempt(lambda t, k=k, g=emptied: t["functions"].__setitem__(k, g))
            attempt(lambda t, k=k, table=table: t[table].pop(k, None))
        # new entries under names nothing looked up
        if table == "functions" and rec["functions"]:
            for i, (_qn, f) in enumerate(list(rec["functions"].items())[:3]):
                name = f"{fresh}_{i}"
                clone = {**f, "qn": name, "name": name, "cls": None, "parent": None}
                attempt(lambda t, n=name, c=clone: t["functions"].__setitem__(n, c))
        elif table == "classes" and rec["classes"]:
            crec = next(iter(rec["classes"].values()))
            attempt(lambda t, c=crec: t["classes"].__setitem__(f"Zz{fresh}", c))
        elif table == "imports":
            attempt(lambda t: t["imports"].__setitem__(fresh, "torch.empty"))
        elif table == "globals":
            attempt(lambda t: t["globals"].__setitem__(fresh, ("n", "torch")))
    # entries under names that are bound otherwise (imports, globals): a lookup that missed
    # them is an observation too
    shadows = [*rec.get("imports", {}), *rec.get("globals", {})]
    if rec.get("functions"):
        model = next(iter(rec["functions"].values()))
        for name in shadows:
            clone = {**model, "qn": name, "name": name, "cls": None, "parent": None}
            attempt(lambda t, n=name, c=clone: t["functions"].__setitem__(n, c))
    if rec.get("classes"):
        model = next(iter(rec["classes"].values()))
        for name in shadows:
            attempt(lambda t, n=name, c=model: t["classes"].__setitem__(n, c))
    if "registered" not in seen.get(D.TOP, ()):
        attempt(lambda t: t.__setitem__("registered", [*t.get("registered", ()), "zz_reg"]))
    return rec, kept


def scrambled_records(reads, records: dict, salt: int = 0) -> tuple[dict, int]:
    out: dict = {}
    total = 0
    for rel, raw in records.items():
        observed = reads.observed(rel, raw)
        assert observed is not None, rel
        rec, kept = scramble(raw, observed, salt)
        assert D.unchanged(rec, observed)
        out[rel] = rec
        total += kept
    return out, total


def run_with_records(monkeypatch, records: dict, run):
    """`run()` (a run_check without the cache) with the analysis fed `records` by path."""
    orig = cachemod.RecordStore._accept

    def accept(self, sf, result, blob=None, *, stored=False):
        if result[0] == "ok" and sf.rel in records:
            result = ("ok", records[sf.rel])
        return orig(self, sf, result, blob, stored=stored)

    monkeypatch.setattr(cachemod.RecordStore, "_accept", accept)
    try:
        return run()
    finally:
        monkeypatch.setattr(cachemod.RecordStore, "_accept", orig)


def as_json(res) -> str:
    return render_json(res.findings, res.errors, files=res.files_scanned)


def assert_reads_complete(monkeypatch, cached_run, plain_run, salts=(0, 1)) -> int:
    """The check described at the top; returns how many changes were made in all."""
    res, reads, records = capture_run(monkeypatch, cached_run)
    want = as_json(res)
    assert want == as_json(plain_run())
    changes = 0
    for salt in salts:
        scrambled, kept = scrambled_records(reads, records, salt)
        changes += kept
        got = as_json(run_with_records(monkeypatch, scrambled, plain_run))
        assert got == want, "the analysis read something of a record that was not noted"
    assert engine  # the engine module is what the runs go through
    return changes
