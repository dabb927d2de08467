"""Every VALID / INVALID example in rules/*.md is a test of the engine.

INVALID: the RL1xx/RL2xx findings are exactly the `# expect:` markers (line and rule).
VALID: no RL1xx/RL2xx finding at all. The block's contract comes from
`<!-- contract: ... -->` before the block (default vllm-layerwise).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reload_lint.catalog import expected_findings, load_catalog
from reload_lint.config import Config

# Examples whose markers the engine does not meet yet, with the reason. Strict xfail: the
# day the engine learns one, the test errors and the entry has to come off this list.
KNOWN_GAPS: dict[tuple[str, int], str] = {}

CASES = [
    pytest.param(
        code,
        i,
        ex,
        id=f"{code}-{i}-{ex.kind}",
        marks=[pytest.mark.xfail(reason=KNOWN_GAPS[(code, i)], strict=True)]
        if (code, i) in KNOWN_GAPS
        else [],
    )
    for code, doc in load_catalog().items()
    for i, ex in enumerate(doc.examples)
]


def _storage_findings(findings) -> set[tuple[int, str]]:
    return {
        (f.line, f.rule)
        for f in findings
        if f.rule.startswith(("RL1", "RL2")) and not getattr(f, "suppressed", None)
    }


@pytest.mark.parametrize("code,index,example", CASES)
def test_rule_example(tmp_path: Path, code, index, example):
    from reload_lint.engine import run_check

    pkg = tmp_path / "example_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "example.py").write_text(example.code, encoding="utf-8")
    cfg = Config(contract=example.contract)
    result = run_check([tmp_path], cfg, base_dir=tmp_path, use_cache=False)

    assert not [e for e in result.errors], f"engine errors: {result.errors}"
    paths = {f.path for f in result.findings}
    assert paths <= {"example_pkg/example.py"}, paths
    got = _storage_findings(result.findings)
    want = expected_findings(example.code, example.contract)
    if example.kind == "VALID":
        assert not want
    numbered = "\n".join(f"{n:3} {line}" for n, line in enumerate(example.code.splitlines(), 1))
    assert got == want, (
        f"{code} example {index} ({example.kind}, contract {example.contract}):\n"
        f"missing {sorted(want - got)}, unexpected {sorted(got - want)}\n{numbered}"
    )
