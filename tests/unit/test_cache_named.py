"""The analysis is keyed without pre-commit's named files (issue 20): the hook reports the
subset of one analysis that lies in or passes through the named files, so a directory run
and every set of staged files share a result; only the named files' parse errors are added
per run (a staged file with a syntax error is reported even when no root reaches it)."""

from __future__ import annotations

import pytest
from _engine_util import findings_json, precommit_run
from test_cache_cutoff import D_FRESH, _edit, _tree

from reload_lint import engine
from reload_lint.config import Config
from reload_lint.engine import run_check


@pytest.fixture
def analyses(monkeypatch):
    """Counts the runs of the analysis."""
    calls = []
    real = engine._analyse

    def counted(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(engine, "_analyse", counted)
    return calls


def test_any_named_set_reuses_one_analysis(tmp_path, analyses):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root, D_FRESH)
    run_check([root / "pkg"], Config(), base_dir=root, cache_dir=cache)
    assert len(analyses) == 1
    for rel in ("pkg/a.py", "pkg/d.py", "pkg/unrelated.py", "pkg/b.py"):
        res = precommit_run(root, cache, rel)
        assert findings_json(res) == findings_json(precommit_run(root, None, rel))
    assert len(analyses) == 1 + 4  # one analysis, then only the four --no-cache runs
    # the helper three calls away names the finding in a.py it decides
    (f,) = precommit_run(root, cache, "pkg/d.py").findings
    assert f.path == "pkg/a.py" and {s.path for s in f.via} == {"pkg/d.py"}
    assert precommit_run(root, cache, "pkg/unrelated.py").findings == []


def test_a_named_file_with_a_syntax_error_is_reported_from_a_shared_result(tmp_path, analyses):
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root, D_FRESH)
    _edit(root / "pkg" / "broken.py", "def f(:\n")  # no root mentions it, nothing imports it
    full = run_check([root / "pkg"], Config(), base_dir=root, cache_dir=cache)
    assert not [e for e in full.errors if e.path == "pkg/broken.py"]  # never reached
    for _ in range(2):  # the shared result, then the whole-run hit
        res = precommit_run(root, cache, "pkg/broken.py")
        assert [(e.rule, e.path) for e in res.errors] == [("RL901", "pkg/broken.py")]
        assert findings_json(res) == findings_json(precommit_run(root, None, "pkg/broken.py"))
    assert len(analyses) == 1 + 2
    # and the directory run's result is as it was
    again = run_check([root / "pkg"], Config(), base_dir=root, cache_dir=cache)
    assert findings_json(again) == findings_json(full)
