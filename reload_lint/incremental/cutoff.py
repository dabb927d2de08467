"""Results kept by what the analysis consumed: the early cutoff of a cached run (mixed into
cache.RecordStore; docs/performance.md, "The run, step by step", step 3b).

Input: the pack's kept states and this run's changed files (texts, hashes). Output: the
kept findings (possibly with lines moved) when no changed file alters what the analysis
consumed, else None; and the new state to keep after an analysis.

A whole-run result is keyed by every file's hash; the same result is also kept under what the
analysis consumed (`RecordStore.deps_key`: paths, module names, text facts, config), as up to
STATES_PER_KEY analysed states, each naming the consumed files with their hash, the digest of
their extraction result and the id of what the analysis read of their record
(index/deps.py). A later run whose changed files each give

- the same extraction result (a comment that moves no line), or
- a record on which every kept observation gives the same value (a function nothing calls
  appended), or
- the kept record with its lines moved by a strictly increasing map (a comment or blank line
  added or removed: shiftcut.py; the result comes back with those lines moved),

reuses the state's result without analysing.
"""

from __future__ import annotations

import hashlib
import pickle

from reload_lint.incremental.shiftcut import record_map, relabel

MAX_DEPS_REPARSE = 8  # changed files re-parsed to test a consumed-input result before giving up
STATES_PER_KEY = 3  # analysed states kept per consumed-input key (an edit undone finds its own)


def blob_digest(blob: bytes) -> str:
    """The digest a state keeps of an extraction result or an observation set (pickled)."""
    return hashlib.sha256(blob).hexdigest()[:32]


class ConsumedResults:
    """The early-cutoff half of cache.RecordStore. Uses the store's pack (`_pack`, `_keep`,
    `_hit`), hashes, texts and record blobs, and `_extract(sf, text)` / `_extract_blob(sf,
    text)`: the extraction result of `text` under `sf`'s module name, as is and pickled."""

    def put_deps_result(self, key: str, value, reads=None) -> None:
        """Keep `value` under `key` with the extraction results the analysis consumed and,
        for each record, what the analysis read of it (`reads`, index/deps.py): a later run
        whose changed files give the same observations reuses `value`. The observations are
        kept once per content in the pack's `obs` table (a directory run and pre-commit's
        runs make the same ones), the entry naming them by digest."""
        if not self.use_cache:
            return
        deps = []
        obs = dict(self._obs())
        for rel, digest in sorted(self._consumed.items()):
            sha = self._hash.get(rel)
            if digest == "!" or sha is None:
                return  # an input that could not be read: never reused
            rec = self._records.get(rel)
            oid = None
            if rec is not None and reads is not None:
                observed = reads.observed(rel, rec)
                if observed is not None:
                    oid = blob_digest(observed)
                    obs[oid] = observed
            deps.append((rel, sha, digest, oid))
        self._pack["obs"] = obs
        entry = (tuple(deps), pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        # the last few analysed states under this key, newest first: after a relevant edit
        # and its undo (a whole-run hit, which analyses nothing), the next edit still finds
        # the state it was made on
        older = [e for e in self._states(key) if e[0] != entry[0]]
        self._keep("deps", key, (entry, *older[: STATES_PER_KEY - 1]))

    def _obs(self) -> dict:
        """observations id -> what the analysis read of a file (index/deps.py), pickled."""
        obs = self._pack.get("obs", {})
        return obs if isinstance(obs, dict) else {}

    def _states(self, key: str) -> list[tuple]:
        """The analysed states kept under `key`, newest first: (deps, pickled value), each
        dep (rel, sha256, extraction digest, observations id). An entry of another shape (a
        corrupt or foreign pack) is left out: a miss, never an error."""
        states = self._pack.get("deps", {}).get(key, ())
        if not isinstance(states, tuple):
            return []
        return [
            st
            for st in states
            if isinstance(st, tuple)
            and len(st) == 2
            and isinstance(st[0], tuple)
            and isinstance(st[1], bytes)
            and all(isinstance(d, tuple) and len(d) == 4 for d in st[0])
        ]

    def get_deps_result(self, key: str):
        """The value kept under `key` if every consumed file's extraction result is the same
        now, or, for a record the analysis read, gives the same observations (index/deps.py),
        or is the kept record with its lines moved (shiftcut.py: the value comes back with its
        lines moved too): files whose hash changed are re-parsed (at most MAX_DEPS_REPARSE; the
        results stay in the pack for the analysis if this misses)."""
        if not self.use_cache:
            return None
        for deps, blob in self._states(key):
            held = self._state_holds(deps)
            if held is None:
                continue
            maps = {rel: m for rel, m in held.items() if m is not None}
            if not maps:
                return self._hit(blob)
            try:
                value = relabel(pickle.loads(blob), maps)
            except Exception:  # a corrupt entry is a miss
                value = None
            if value is None:
                continue
            self.result_hit = True
            self._moved = (key, deps, held)
            return value
        return None

    def _state_holds(self, deps) -> dict | None:
        """Whether the analysed state `deps` still describes what the analysis would read:
        each file whose hash changed gives the same extraction result, the same observations,
        or its kept record with its lines moved. None when it does not; else, for each changed
        file, its line map (shiftcut.py) or None where nothing the analysis read moved."""
        changed = [d for d in deps if self._hash.get(d[0]) != d[1]]
        if len(changed) > MAX_DEPS_REPARSE:
            return None
        held: dict = {}
        for rel, sha, digest, oid in changed:
            sf = self._by_rel.get(rel)
            if sf is None or rel not in self._hash or self.text(sf) is None:
                return None
            now = self._blobs.get(self._key(sf))
            if now is None:
                now = self._extract_blob(sf, self.texts[rel])
                self._blobs[self._key(sf)] = now
                self._dirty = True
                self.parsed += 1
            held[rel] = None
            if blob_digest(now) == digest:
                continue
            observed = self._obs().get(oid) if oid is not None else None
            if observed is not None and _same_observations(now, observed):
                continue
            old = self._blobs.get(f"{sha}\x1f{sf.module}\x1f{int(sf.is_package)}")
            if old is None or blob_digest(old) != digest:
                return None
            held[rel] = record_map(
                old, now, self.texts[rel], lambda t, sf=sf: self._extract(sf, t), observed
            )
            if held[rel] is None:
                return None
        return held

    def commit_moved(self, value) -> None:
        """After a hit by moved lines (get_deps_result), keep `value` (the relabelled result,
        its snippets and suppressions read from the current texts) as the newest analysed
        state under its key, as a full run would: each changed file with its hash, extraction
        digest and observations now, so the next edit is cut off against this state."""
        moved, self._moved = self._moved, None
        if moved is None or not self.use_cache:
            return
        from reload_lint.index.deps import reobserved

        key, deps, held = moved
        obs = dict(self._obs())
        new = []
        for rel, sha, digest, oid in deps:
            if rel in held:
                sf = self._by_rel[rel]
                now = self._blobs[self._key(sf)]
                sha, digest = self._hash[rel], blob_digest(now)
                if held[rel] is not None and oid is not None:
                    observed = obs.get(oid)
                    rec = pickle.loads(now)[1]
                    got = reobserved(rec, observed) if observed is not None else None
                    oid = None if got is None else blob_digest(got)
                    if got is not None:
                        obs[oid] = got
            new.append((rel, sha, digest, oid))
        self._pack["obs"] = obs
        entry = (tuple(new), pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        older = [e for e in self._states(key) if e[0] != entry[0]]
        self._keep("deps", key, (entry, *older[: STATES_PER_KEY - 1]))


def _same_observations(blob: bytes, observed: bytes) -> bool:
    """Whether the extraction result `blob` is a record that gives every observation kept
    in `observed` (index/deps.py Reads.observed) as it was given when the result was kept."""
    from reload_lint.index.deps import unchanged

    try:
        res = pickle.loads(blob)
    except Exception:  # a corrupt entry is a miss
        return False
    if not (isinstance(res, tuple) and len(res) == 2 and res[0] == "ok"):
        return False
    if not isinstance(res[1], dict):
        return False
    try:
        return unchanged(res[1], observed)
    except Exception:  # a corrupt entry, a record of another shape: a miss, never a wrong hit
        return False
