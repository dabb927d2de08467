"""Issue 20: `worklist --include-decided` lists the sites the engine decided safe with their
reasons, and every RFC storage-identity row with a status (never a silently dropped row)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from reload_lint.cli import main
from reload_lint.render.worklist_decided import RFC_ROWS, attr_of, rfc_status

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "explainpkg"


@pytest.fixture
def project(tmp_path, monkeypatch):
    shutil.copytree(FIXTURE, tmp_path / "pkg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    return tmp_path


def test_decided_section_lists_each_safe_site_with_its_fact(project, capsys):
    assert main(["worklist", "--no-cache", "--include-decided", "-o", "wl.md"]) == 0
    text = (project / "wl.md").read_text()
    decided = text.split("## Decided safe by the engine", 1)[1]
    rows = [r for r in decided.splitlines() if r.startswith("| `pkg/kern.py:")]
    facts = {r.split("|")[2].strip(): r.split("|")[4].strip() for r in rows}
    assert facts["`layer.empty`"] == "zero-element"
    assert facts["`layer.once`"] == "guarded"
    assert "`layer.w_t`" not in facts  # reported, so not "decided"
    # every RFC row is on the page, with a status
    table = text.split("## RFC storage-identity rows", 1)[1].split("## Decided", 1)[0]
    body = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| RFC")]
    assert len(body) == len(RFC_ROWS)
    assert all("not in this tree" in r for r in body)  # no vLLM file here


def test_decided_needs_a_run_not_a_report(project, capsys):
    (project / "r.json").write_text("{}")
    assert main(["worklist", "--include-decided", "--findings", "r.json"]) == 2


class _F:
    def __init__(self, path, line, target, rule="RL101"):
        self.path, self.line, self.target, self.rule = path, line, target, rule


def test_rfc_row_status_reported_decided_or_absent():
    marlin = next(r for r in RFC_ROWS if "act-order sort" in r.component)
    findings = [_F("vllm/kernels/marlin.py", 177, "layer.g_idx_sort_indices")]
    decided = [
        {
            "path": "vllm/x/marlin.py",
            "line": 9,
            "target": "self.workspace",
            "fact": "unread",
            "why": "never read",
        },
        {
            "path": "vllm/x/other.py",
            "line": 9,
            "target": "self.workspace",
            "fact": "unread",
            "why": "never read",
        },
    ]
    st = {r["row"]: r for r in rfc_status(findings, decided)}
    assert st[marlin]["status"] == "reported (some stores decided safe)"
    assert [d["path"] for d in st[marlin]["decided"]] == ["vllm/x/marlin.py"]
    st = {r["row"]: r for r in rfc_status([], decided)}
    assert st[marlin]["status"] == "decided safe"
    assert st[marlin]["decided"][0]["why"] == "never read"
    st = {r["row"]: r for r in rfc_status([], [])}
    assert st[marlin]["status"] == "not in this tree"
    st = {r["row"]: r for r in rfc_status([], [], files=["vllm/k/marlin.py"])}
    assert st[marlin]["status"] == "no store reached"
    assert attr_of("layer.w13_weight.data") == "w13_weight"


def test_rfc_row_store_folded_into_another_finding_is_reported():
    """A row's store that one storage, one finding folded into another finding (its `also`)
    is reported there, not "no store reached"."""
    marlin = next(r for r in RFC_ROWS if "act-order sort" in r.component)
    host = _F("vllm/q/method.py", 40, "self.kernel", rule="RL105")
    host.also = [
        {
            "rule": "RL101",
            "path": "vllm/kernels/marlin.py",
            "line": 177,
            "target": "layer.g_idx_sort_indices",
        }
    ]
    st = {r["row"]: r for r in rfc_status([host], [], files=["vllm/kernels/marlin.py"])}
    assert st[marlin]["status"] == "reported"
    assert st[marlin]["folded"] == [(host, host.also[0])]
    assert st[marlin]["traced"] == []
