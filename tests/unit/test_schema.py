"""The findings JSON contract: real output validates against docs/findings.schema.json, and
every field the doc's table names is present."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "docs" / "findings.schema.json").read_text())
FIXTURES = ROOT / "tests" / "fixtures"


def _report(*args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "reload_lint", "check", *args, "--format", "json", "--no-cache"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode in (0, 1, 3), proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("fixture", ["minivllm", "minimoe", "miniroots"])
def test_real_output_validates(fixture):
    report = _report(str(FIXTURES / fixture), "--show-suppressed")
    jsonschema.validate(report, SCHEMA)
    assert report["findings"], "the fixture must produce findings for this test to mean much"
    for f in report["findings"]:
        assert re.fullmatch(r"[0-9a-f]{20}", f["fingerprint"])
        assert "\\" not in f["path"]
        assert f["trace"], f


def test_errors_validate(tmp_path):
    (tmp_path / "bad.py").write_text("def process_weights_after_loading(:\n")
    proc = subprocess.run(
        [sys.executable, "-m", "reload_lint", "check", str(tmp_path), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    report = json.loads(proc.stdout)
    jsonschema.validate(report, SCHEMA)
    assert [e["rule"] for e in report["errors"]] == ["RL901"]


def test_doc_table_names_every_finding_field():
    doc = (ROOT / "docs" / "findings.md").read_text()
    required = SCHEMA["$defs"]["finding"]["required"]
    for field in required:
        assert f"`{field}`" in doc, field


def test_schema_rejects_a_finding_without_fingerprint():
    report = _report(str(FIXTURES / "minivllm"))
    del report["findings"][0]["fingerprint"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(report, SCHEMA)


@pytest.mark.parametrize("fixture", ["minivllm", "minimoe"])
def test_summary_and_confidence_say_what_findings_md_says(fixture):
    """findings.md: `findings`/`by_rule` count the listed findings (suppressed ones included
    with --show-suppressed); a finding with no reader found is never `high`."""
    report = _report(str(FIXTURES / fixture), "--show-suppressed")
    listed = report["findings"]
    assert report["summary"]["findings"] == len(listed)
    by_rule: dict[str, int] = {}
    for f in listed:
        by_rule[f["rule"]] = by_rule.get(f["rule"], 0) + 1
    assert report["summary"]["by_rule"] == by_rule
    assert all(f["reader"] is not None for f in listed if f["confidence"] == "high")
