"""The evidence record: one per (site, side), plain JSON, merged by the worklist per site.

The schema is documented in docs/runner.md. Fields are only ever added (a minor version bump);
a breaking change bumps the major version of EVIDENCE_SCHEMA_VERSION. ``VERDICTS`` and
``FAILURES`` are defined here and nowhere else: readers of evidence files import them.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path

from reload_lint import __version__
from reload_lint.fsutil import atomic_write_text

EVIDENCE_SCHEMA_VERSION = "1.4"

#: red: a linked storage the captured graph reads moved or was freed (confirmed);
#: green: the linked storages stayed put and the replay matched a cold load (not confirmed);
#: unread: a linked storage moved or was freed, but the capture never read it;
#: inconclusive: neither could be established (the reason says which piece is missing).
VERDICTS = ("red", "green", "unread", "inconclusive")
#: masked: vLLM's own reload raised because the post-load left a plain attribute over a
#: checkpoint Parameter (the update fails loudly; the graph keeps the old weights)
FAILURES = ("livelock", "illegal access", "stale read", "moved", "freed", "masked")
#: replay: the real kernels ran under a captured CUDA graph and were replayed;
#: census: the real Python ran (post-load, reload, forward) with stand-ins for ops this device
#: lacks, so only the storage census counts, no replay.
TIERS = ("replay", "census")
#: the fine verdict (1.3): what a record's verdict stands on. ``verdict`` stays the coarse one.
#: red-observed: a storage of the finding's own store the capture read moved or was freed, and
#: the replay failed (livelock, illegal access, stale read); red-unobserved: the same escape,
#: but no failure was observed (census tier, or the replay still matched); masked: vLLM's stock
#: reload refuses the layer at this site's store (the update fails loudly); green: reached, the
#: storages stable, the replay matches (census tier: the census alone); not-applicable: the
#: target holds no tensor of its own on the backend this device built (no verdict on the
#: finding); unread: an own storage moved or was freed, but the capture never read it;
#: inconclusive: none of these could be established (the reason says which piece is missing).
GRADES = (
    "red-observed",
    "red-unobserved",
    "masked",
    "green",
    "not-applicable",
    "unread",
    "inconclusive",
)
#: failures a replay observed (the others, moved/freed/masked, are what the census saw)
OBSERVED_FAILURES = ("livelock", "illegal access", "stale read")


@dataclass
class EvidenceRecord:
    """What the runner established about one static finding, on one side of its fix."""

    fingerprint: str
    rule: str
    path: str
    line: int
    symbol: str
    target: str
    verdict: str  # one of VERDICTS
    failure: str | None  # one of FAILURES, or None
    reason: str
    fixed: bool = False
    recipe: str | None = None
    family: str | None = None
    device: str = "cpu"
    reload_path: str | None = None  # "vllm-layerwise" | "simulated-copy-back"
    fix: str | None = None  # description of the fix applied (fixed side)
    isolation: list[str] = field(default_factory=list)  # sibling fixes applied on the bug side
    census: dict = field(default_factory=dict)
    pressure: dict = field(default_factory=dict)
    replay: dict = field(default_factory=dict)
    stages: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    # -- 1.1 ---------------------------------------------------------------------------------
    tier: str | None = None  # one of TIERS, None when neither ran
    standins: list[str] = field(default_factory=list)  # ops replaced by stand-ins (census tier)
    backend: str | None = None  # qualified class of the kernel/experts object vLLM built
    built: list[str] = field(default_factory=list)  # qualified classes the component built
    component: str | None = None  # the quant method / scheme / kernel class the harness drove
    row: str | None = None  # the family table row (confirm/families.py)
    # -- 1.2 ---------------------------------------------------------------------------------
    #: fixes applied on both sides so the reload gets past a masking site (fixes.PRECONDITIONS)
    preconditions: list[str] = field(default_factory=list)
    # -- 1.3 ---------------------------------------------------------------------------------
    #: fixed side: where its own fix came from: "codemod" (the finding's remedy.patch applied to a
    #: copy of the sources on the import path), "source" (confirm --source DIR: the checkout's
    #: changes), or "monkeypatch" (a runtime fix of confirm/fixes.py, where no codemod exists)
    fix_source: str | None = None
    fix_patch_sha256: str | None = None  # sha256 of the unified diff applied (from source)
    fix_files: list[str] = field(default_factory=list)  # the files that patch replaced
    gpu_peak_mib: float | None = None  # the run's peak GPU memory reserved (CUDA), MiB
    grade: str | None = None  # one of GRADES (verdicts.finalize sets it)
    #: storage cluster id: findings whose own escaped storages are one (verdicts.clusters)
    cluster: str | None = None
    #: other clusters' graph-visible storages escaped in the same build: the failure class
    #: belongs to the build, not to this cluster alone
    shared_build: bool = False
    #: a platform-only path this build forces on this device: {"platform", "flags", "env"}
    forced: dict | None = None
    #: linked graph-visible storages whose capture-time read came from harness code rather
    #: than vLLM's own code (census rows' ``read_by``); or the row's note for older records
    harness_reads: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def evidence_document(
    records: list[EvidenceRecord] | list[dict], *, device: str, env: dict | None = None
) -> dict:
    """The evidence file's document. Records are taken as they are: the runner finalizes them
    first (``verdicts.finalize``: grades, clusters, what each stands on)."""
    rows = [r.to_json() if isinstance(r, EvidenceRecord) else r for r in records]
    counts = {v: 0 for v in VERDICTS}
    tiers = {t: 0 for t in (*TIERS, "none")}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        tiers[r["tier"] or "none"] += 1
    return {
        "schema_version": EVIDENCE_SCHEMA_VERSION,
        "tool": {"name": "reload-lint", "version": __version__},
        "device": device,
        "environment": {"python": platform.python_version(), **(env or {})},
        "evidence": rows,
        "summary": counts,
        "tiers": tiers,
        "grades": grade_counts(rows),
    }


def grade_counts(rows: list[dict]) -> dict[str, dict[str, int]]:
    """Bug-side records per grade, stock reload apart from records made under a precondition."""
    out: dict[str, dict[str, int]] = {
        k: dict.fromkeys(GRADES, 0) for k in ("stock", "precondition")
    }
    for r in rows:
        if r.get("fixed") or r.get("grade") not in GRADES:
            continue
        out["precondition" if r.get("preconditions") else "stock"][r["grade"]] += 1
    return out


def write_evidence(path: Path, document: dict) -> None:
    atomic_write_text(Path(path), json.dumps(document, indent=2, sort_keys=False) + "\n")
