"""The written tree adds no lint a maintainer's linter reports (issue 27, "a patch a maintainer
would merge"): each golden case, fixed, gives no `ruff check` diagnostic the case did not give
before, under the pyflakes, isort and bugbear rules vLLM's own configuration selects (an unused
import, an import out of isort's order, `getattr` with a constant name)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from _fix_util import NAMES, project, run

RUFF = [sys.executable, "-m", "ruff", "check", "--no-cache", "--isolated", "--output-format"]
RULES = ["--select", "F,I,B", "--config", "lint.isort.known-first-party = ['pkg']"]


def _lint(root) -> Counter:
    out = subprocess.run(
        [*RUFF, "concise", *RULES, "pkg"], cwd=root, capture_output=True, text=True
    ).stdout
    # file and code, not the line: the fix moves lines
    return Counter(
        (ln.split(":", 1)[0], ln.split(": ", 1)[1].split()[0])
        for ln in out.splitlines()
        if ln.startswith("pkg/") and ": " in ln
    )


@pytest.mark.skipif(shutil.which("ruff") is None and not sys.modules.get("ruff"), reason="ruff")
@pytest.mark.parametrize("name", NAMES)
def test_a_fixed_case_adds_no_lint(name, tmp_path, monkeypatch, capsys):
    proj = project(tmp_path, name)
    monkeypatch.chdir(proj)
    before = _lint(proj)
    run(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    new = _lint(proj) - before
    assert not new, f"the fix added {dict(new)}"


def test_the_fixed_corpus_adds_no_lint(tmp_path, monkeypatch, capsys):
    # every corpus case as one package: the fixes that need `_copy_into_kept` import it from
    # one helper module, and that import must land where isort puts it
    corpus = Path(__file__).parent / "corpus"
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for f in sorted(corpus.glob("*.py")):
        shutil.copy2(f, pkg / f.name)
    monkeypatch.chdir(tmp_path)
    before = _lint(tmp_path)
    run(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    assert "_copy_into_kept" in "".join(p.read_text() for p in pkg.glob("*.py"))
    new = _lint(tmp_path) - before
    assert not new, f"the fixes added {dict(new)}"
