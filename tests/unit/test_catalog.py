"""The rule catalog (rules/*.md) agrees with the registry and is complete."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from reload_lint import catalog
from reload_lint.catalog import (
    HEADINGS,
    CatalogError,
    expected_findings,
    load_catalog,
    parse_expectations,
    parse_rule_text,
)
from reload_lint.cli import main
from reload_lint.rules import RULES, catalog_dir

CATALOG = load_catalog()
STORAGE_AND_STALE = [c for c in RULES if c.startswith(("RL1", "RL2"))]


def test_every_registry_rule_has_a_file():
    assert sorted(CATALOG) == sorted(RULES)
    for code in RULES:
        assert (catalog_dir() / f"{code}.md").is_file(), code


def test_every_rule_file_is_in_the_registry():
    for path in catalog_dir().glob("*.md"):
        assert path.stem in RULES, f"{path.name} has no entry in reload_lint/rules.py"


def test_codes_and_names_are_unique():
    names = [doc.name for doc in CATALOG.values()]
    assert len(set(names)) == len(names)
    assert len(set(CATALOG)) == len(CATALOG)


@pytest.mark.parametrize("code", sorted(RULES))
def test_header_matches_registry(code):
    doc, rule = CATALOG[code], RULES[code]
    assert doc.code == rule.code
    assert doc.name == rule.name
    assert doc.severity == rule.severity
    assert doc.message.strip()


@pytest.mark.parametrize("code", sorted(RULES))
def test_every_heading_present_in_order(code):
    doc = CATALOG[code]
    present = [h for h in doc.sections if h in HEADINGS]
    assert present == list(HEADINGS), f"{code}: headings {list(doc.sections)}"
    for heading in HEADINGS:
        assert doc.sections[heading].strip(), f"{code}: `{heading}` is empty"


@pytest.mark.parametrize("code", STORAGE_AND_STALE)
def test_enough_examples(code):
    kinds = [e.kind for e in CATALOG[code].examples]
    assert kinds.count("INVALID") >= 2, code
    assert kinds.count("VALID") >= 2, code


@pytest.mark.parametrize("code", STORAGE_AND_STALE)
def test_examples_are_python_and_marked(code):
    for i, ex in enumerate(CATALOG[code].examples):
        ast.parse(ex.code, filename=f"{code}[{i}]")  # examples are valid Python
        marks = parse_expectations(ex.code)
        if ex.kind == "VALID":
            assert not marks, f"{code}[{i}]: VALID examples carry no expect markers"
        else:
            rules = {rule for _, rule in expected_findings(ex.code, ex.contract)}
            assert code in rules, f"{code}[{i}]: INVALID example never expects {code}"
            assert rules <= set(RULES), f"{code}[{i}]: unknown code in {rules}"


def test_rl109_examples_name_a_contract():
    contracts = {e.contract for e in CATALOG["RL109"].examples}
    assert "inplace-only" in contracts


def test_expect_marker_syntax():
    src = "a = 1  # expect: RL101\nb = 2  # expect[inplace-only]: RL109, RL106\nc = 3\n"
    assert expected_findings(src, "vllm-layerwise") == {(1, "RL101")}
    assert expected_findings(src, "inplace-only") == {
        (1, "RL101"),
        (2, "RL109"),
        (2, "RL106"),
    }


def test_parse_rejects_missing_header_and_bad_tags():
    with pytest.raises(CatalogError):
        parse_rule_text("## What it does\n\nx\n")
    bad = "---\ncode: RL101\nname: n\nseverity: error\nmessage: m\n---\n\n## Example\n\n"
    with pytest.raises(CatalogError):
        parse_rule_text(bad + "```python BROKEN\nx = 1\n```\n")
    with pytest.raises(CatalogError):
        parse_rule_text(bad + "```python INVALID\nx = 1\n")  # unclosed fence
    doc = parse_rule_text(bad + "<!-- contract: inplace-only -->\n```python VALID\nx = 1\n```\n")
    assert doc.examples == [catalog.Example("VALID", "x = 1\n", "inplace-only")]


def test_format_message_fills_known_placeholders():
    doc = CATALOG["RL101"]
    msg = doc.format_message(target="layer.g_idx_sort_indices")
    assert "layer.g_idx_sort_indices" in msg and "{target}" not in msg


def test_docs_rules_is_not_stale():
    stale = catalog.generate_docs(check=True)
    assert not stale, f"docs/rules is stale ({stale[0].name}...): run `reload-lint gen-docs`"


def test_gen_docs_writes_then_check_passes(tmp_path: Path, capsys):
    assert main(["gen-docs", "--check", "--output", str(tmp_path)]) == 1
    assert main(["gen-docs", "--output", str(tmp_path)]) == 0
    assert main(["gen-docs", "--check", "--output", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([*(f"{c}.md" for c in RULES), "index.md"])
    (tmp_path / "RL999.md").write_text("orphan\n")  # a page whose rule is gone is stale
    assert main(["gen-docs", "--check", "--output", str(tmp_path)]) == 1
    assert main(["gen-docs", "--output", str(tmp_path)]) == 0
    assert not (tmp_path / "RL999.md").exists()


def test_rule_command_prints_page(capsys):
    assert main(["rule", "rl103"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# RL103: callable-captured-tensor")
    for heading in HEADINGS:
        assert f"## {heading}" in out
    assert main(["rule"]) == 0
    assert "RL905" in capsys.readouterr().out


def test_rule_command_unknown_code(capsys):
    assert main(["rule", "RL999"]) == 2
    err = capsys.readouterr().err
    assert "unknown rule `RL999`" in err and "RL101" in err  # the known codes are listed


def test_rule_command_accepts_rule_names(capsys):
    """`check --statistics` prints names; `rule NAME` opens the same page as `rule CODE`."""
    assert main(["rule", "unregistered-module-tensor"]) == 0
    by_name = capsys.readouterr().out
    assert main(["rule", "rl101"]) == 0
    assert capsys.readouterr().out == by_name
    assert by_name.startswith("# RL101: unregistered-module-tensor")
