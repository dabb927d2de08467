"""Issue 20: `explain` answers for every seed-named site on vLLM 0.25.1 and 0.33.0: reported
(with its rule), or decided safe / not reached with its reason. The sites are the seed tables
of test_vllm_seeds.py (POSITIVES, DECIDED, NEGATIVES)."""

from __future__ import annotations

import functools
import json
import re

import pytest
from test_vllm_seeds import DECIDED, NEGATIVES, POSITIVES

from reload_lint.cli import main
from reload_lint.sources import SourceError, release_sources

pytestmark = pytest.mark.integration


def _store_lines(text: str, target: str) -> list[int]:
    attr = target.split(".", 1)[1]
    pat = re.compile(rf"(^|[\s,(]){re.escape(target)}\s*(=[^=]|,|:)")
    named = re.compile(
        rf"(setattr|register_buffer|register_parameter)\(.*[\"']{re.escape(attr)}[\"']"
    )
    return [i for i, s in enumerate(text.splitlines(), 1) if pat.search(s) or named.search(s)]


def _frag_lines(text: str, fragment: str) -> list[int]:
    return [i for i, s in enumerate(text.splitlines(), 1) if fragment in s]


@functools.cache
def _explained(version: str) -> tuple:
    try:
        root = release_sources("vllm", version)
    except SourceError as exc:  # pragma: no cover - offline
        pytest.skip(f"vLLM {version} sources unavailable: {exc}")
    specs = []
    for path, target, *_ in [*POSITIVES.get(version, []), *DECIDED.get(version, [])]:
        text = (root / path).read_text()
        specs += [f"{path}:{n}" for n in _store_lines(text, target)]
    for path, fragment in NEGATIVES.get(version, []):
        specs += [f"{path}:{n}" for n in _frag_lines((root / path).read_text(), fragment)]
    specs = list(dict.fromkeys(specs))
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["explain", "--vllm", version, "--format", "json", *specs])
    assert rc == 0
    return root, json.loads(buf.getvalue())["explain"]


def _answers(version: str, path: str) -> list[dict]:
    _root, answers = _explained(version)
    return [a for a in answers if a["path"] == path]


def _cases(table: dict) -> list:
    return [
        pytest.param(v, *row, id=f"{v}-{row[0][-30:]}-{row[1]}") for v in table for row in table[v]
    ]


@pytest.mark.parametrize("version,path,target,rules", _cases(POSITIVES))
def test_explain_reports_seed_positive(version, path, target, rules):
    found = [
        d
        for a in _answers(version, path)
        for d in a["decisions"]
        if d["target"] == target and d["status"] in ("reported", "accepted")
    ]
    assert found, f"{path}: explain reports nothing on {target}"
    assert {d["rule"] for d in found} & rules
    assert all(d["fingerprint"] and d["confidence"] in ("high", "medium", "low") for d in found)


@pytest.mark.parametrize("version,path,target,why", _cases(DECIDED))
def test_explain_gives_the_reason_a_seed_site_is_safe(version, path, target, why):
    mine = [d for a in _answers(version, path) for d in a["decisions"] if d["target"] == target]
    assert mine, f"{path}: explain says nothing about {target}"
    assert not [d for d in mine if d["status"] == "reported"], mine
    assert all(d.get("fact") and d.get("why") for d in mine), mine


@pytest.mark.parametrize("version,path,fragment", _cases(NEGATIVES))
def test_explain_answers_seed_negatives(version, path, fragment):
    root, _ = _explained(version)
    lines = set(_frag_lines((root / path).read_text(), fragment))
    answers = [a for a in _answers(version, path) if a["line"] in lines]
    assert answers
    for a in answers:
        assert not [d for d in a["decisions"] if d["status"] == "reported"], a
        assert a["decisions"] or a["in_traces"] or a["note"], a


@functools.cache
def _worklist(version: str) -> str:
    import contextlib
    import io

    try:
        release_sources("vllm", version)
    except SourceError as exc:  # pragma: no cover - offline
        pytest.skip(f"vLLM {version} sources unavailable: {exc}")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["worklist", "--vllm", version, "--include-decided"]) == 0
    return buf.getvalue()


@pytest.mark.parametrize("version,path,target,why", _cases(DECIDED))
def test_worklist_lists_decided_seed_sites_with_reason(version, path, target, why):
    decided = _worklist(version).split("## Decided safe by the engine", 1)[1]
    rows = [r for r in decided.splitlines() if f"`{path}:" in r and f"| `{target}` |" in r]
    assert rows, f"{path} {target} missing from the decided section"
    assert all(r.rstrip(" |").split("|")[-1].strip() for r in rows)


@pytest.mark.parametrize("version", sorted(POSITIVES))
def test_worklist_answers_every_rfc_row(version):
    from reload_lint.render.worklist_decided import RFC_ROWS

    table = _worklist(version).split("## RFC storage-identity rows", 1)[1].split("## Decided")[0]
    body = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| RFC")]
    assert len(body) == len(RFC_ROWS)
    statuses = {r.split(" | ")[1]: r.split(" | ")[3] for r in body}
    known = ("reported", "reported (some stores decided safe)", "reported in traces")
    known = (*known, "decided safe")
    assert all(s in (*known, "no store reached", "not in this tree") for s in statuses.values())
    # a row holding a seed positive of this release is reported
    from reload_lint.render.worklist_decided import _in_row

    for path, target, _rules in POSITIVES[version]:
        for row in RFC_ROWS:
            if _in_row(row, path, target):
                assert statuses[row.component].startswith("reported"), (row, path, target)
