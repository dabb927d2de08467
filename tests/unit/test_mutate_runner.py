"""scripts/mutate_runner.py: a mutant is killed only by a failing test, never by a broken import.

The script's verdict rests on pytest's exit code. These tests run pytest on tiny test files the
way the script does and check that a failing assertion counts as a kill while an import error
(the mutated module no longer loads: nothing was tested) counts as an error; and that every
mutant's snippet and tests are still where the script looks for them.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mutate_runner.py"


@pytest.fixture(scope="module")
def mr():
    spec = importlib.util.spec_from_file_location("mutate_runner", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    "body, expected",
    [
        ("def test_ok():\n    assert True\n", "survived"),
        ("def test_bad():\n    assert 1 == 2\n", "killed"),
        ("import no_such_module_anywhere\n\ndef test_ok():\n    assert True\n", "error"),
        ("def test_syntax(:\n", "error"),
    ],
)
def test_only_a_failing_test_kills(mr, tmp_path, body, expected):
    (tmp_path / "test_mutant.py").write_text(body)
    rc, tail = mr._pytest(tmp_path, ["test_mutant.py"])
    assert mr.outcome(rc) == expected, (rc, tail)


def test_every_mutant_snippet_occurs_once_and_its_tests_exist(mr):
    for name, (path, old, new, tests) in mr.MUTANTS.items():
        text = (ROOT / path).read_text(encoding="utf-8")
        assert text.count(old) == 1, name
        assert old != new, name
        for t in tests:
            file, _, test = t.partition("::")
            src = (ROOT / file).read_text(encoding="utf-8")
            assert re.search(rf"^def {re.escape(test)}\(", src, re.M), (name, t)
    # docs/runner.md's table lists every mutant
    doc = (ROOT / "docs/runner.md").read_text(encoding="utf-8")
    section = doc.split("## Mutation check", 1)[1].split("\n## ", 1)[0]
    for name in mr.MUTANTS:
        assert f"| `{name}` |" in section, name
