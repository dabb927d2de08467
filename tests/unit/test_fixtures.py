"""Each fixture package under tests/fixtures/ against its `# expect:` markers, exactly.

A fixture is a directory with a `fixture.toml` (`contracts = [...]`) and one package laid out
like the audited project. For every contract it lists, the set of RL1xx/RL2xx findings
(path, line, rule) must equal the markers: `# expect: RLxxx` for every contract,
`# expect[<contract>]: RLxxx` for one. Nothing missing, nothing extra.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from reload_lint.catalog import CONTRACTS, expected_findings, parse_expectations
from reload_lint.config import Config
from reload_lint.rules import RULES

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - 3.10
    import tomli as tomllib  # type: ignore[no-redef]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def fixture_dirs() -> list[Path]:
    return sorted(p.parent for p in FIXTURES.glob("*/fixture.toml"))


def fixture_contracts(root: Path) -> list[str]:
    data = tomllib.loads((root / "fixture.toml").read_text(encoding="utf-8"))
    return list(data.get("contracts", ["vllm-layerwise"]))


def python_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def expected(root: Path, contract: str) -> set[tuple[str, int, str]]:
    out: set[tuple[str, int, str]] = set()
    for path in python_files(root):
        rel = path.relative_to(root).as_posix()
        for line, rule in expected_findings(path.read_text(encoding="utf-8"), contract):
            out.add((rel, line, rule))
    return out


CASES = [
    pytest.param(root, contract, id=f"{root.name}-{contract}")
    for root in fixture_dirs()
    for contract in fixture_contracts(root)
]


def test_fixtures_exist():
    names = {p.name for p in fixture_dirs()}
    assert {"minivllm", "minimoe", "minisrt", "miniroots"} <= names


@pytest.mark.parametrize("root", fixture_dirs(), ids=lambda p: p.name)
def test_fixture_is_well_formed(root: Path):
    contracts = fixture_contracts(root)
    assert contracts and set(contracts) <= set(CONTRACTS)
    for path in python_files(root):
        text = path.read_text(encoding="utf-8")
        ast.parse(text, filename=str(path))  # fixtures are valid Python
        for e in parse_expectations(text):
            assert e.rule in RULES, f"{path}:{e.line}: unknown rule {e.rule}"
            assert e.rule.startswith(("RL1", "RL2")), f"{path}:{e.line}: fixtures mark RL1xx/RL2xx"
            assert e.contract is None or e.contract in contracts, f"{path}:{e.line}"
    assert any(expected(root, c) for c in contracts), f"{root.name} has no expect markers"


def test_contract_fixture_differs_between_contracts():
    root = FIXTURES / "minisrt"
    assert expected(root, "vllm-layerwise") != expected(root, "inplace-only")


# Markers the engine does not meet yet, each with the reason. Exact (path, line, rule) rows:
# the test fails if one of them starts being reported, so the list only shrinks.
KNOWN_GAPS: set[tuple[str, int, str]] = set()


@pytest.mark.parametrize("root,contract", CASES)
def test_fixture_findings_match_markers(root: Path, contract: str):
    from reload_lint.engine import run_check

    result = run_check([root], Config(contract=contract), base_dir=root, use_cache=False)
    assert not result.errors, f"engine errors: {result.errors}"
    got = {
        (f.path, f.line, f.rule)
        for f in result.findings
        if f.rule.startswith(("RL1", "RL2")) and not getattr(f, "suppressed", None)
    }
    want = expected(root, contract)
    gaps = {g for g in KNOWN_GAPS if g[0].startswith(root.name + "/")}
    # a known gap must still be a gap: when the engine learns it, remove it from the list
    assert not (gaps & got), f"known gap now found, remove it from KNOWN_GAPS: {gaps & got}"
    want -= gaps
    missing = sorted(want - got)
    extra = sorted(got - want)
    assert not missing and not extra, (
        f"{root.name} under {contract}:\n"
        + "".join(f"  missing   {p}:{line}: {r}\n" for p, line, r in missing)
        + "".join(f"  unexpected {p}:{line}: {r}\n" for p, line, r in extra)
    )
