"""A plain `check` (pre-commit's run, the CI gate) does not load what only other jobs need:
libcst is the codemods' parser (`--fix`, `--diff`, `--show-fixes`), a few hundred ms to
import, which a pre-commit run on one file would otherwise pay every time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "minivllm"
ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from reload_lint.cli.parser import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "libcst")[:3]))
"""


def _libcst_loaded(tmp_path: Path, *extra: str) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RELOAD_LINT_NO_PROGRESS": "1"}
    args = ["check", str(FIXTURE), "--no-cache", "--exit-zero", "--format", "json"]
    args += ["-o", str(tmp_path / "out.json"), *extra]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.json").exists(), proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_plain_check_does_not_import_libcst(tmp_path):
    assert _libcst_loaded(tmp_path) == []


def test_show_fixes_still_imports_libcst(tmp_path):
    # the probe can see an import: computing fixes loads the codemods' parser
    assert _libcst_loaded(tmp_path, "--show-fixes") != []


CACHED_PROBE = """
import json, sys
from reload_lint.cli.parser import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
want = ("reload_lint.analysis.contracts", "reload_lint.analysis.interp", "subprocess")
# nor what only another command, a fix flag or an analysis needs (docs/performance.md,
# Session 16): the fix layer, the runtime confirmer, the observations of index/deps.py
hit = ("reload_lint.fix.command", "reload_lint.confirm", "reload_lint.index.deps")
print(json.dumps([m for m in want if m in sys.modules]))
print(json.dumps([m for m in hit if m in sys.modules]))
"""


def test_cached_check_does_not_import_the_analysis(tmp_path):
    """A check the cache answers (nothing changed; a comment added to a file, the early
    cutoff) makes no contract and runs no analysis: it does not import them, nor what only a
    download needs (sources.py). Nor does it parse the reload package (the reload facts are
    kept in the pack: tests/unit/test_reloadfacts.py)."""
    import shutil

    tree = tmp_path / "tree"
    shutil.copytree(FIXTURE, tree)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RELOAD_LINT_NO_PROGRESS": "1"}
    args = ["check", ".", "--cache-dir", str(tmp_path / "cache"), "--exit-zero"]
    args += ["--format", "json", "-o", str(tmp_path / "out.json")]

    def loaded(which: int = -2) -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-c", CACHED_PROBE, *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tree,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[which])

    assert "reload_lint.analysis.interp" in loaded()  # the first run analyses
    assert loaded() == []  # nothing changed: the whole-run result
    assert loaded(-1) == []  # ... which needs neither the fix layer nor the observations
    some = sorted(tree.rglob("*.py"))[-1]
    some.write_text(some.read_text(encoding="utf-8") + "\n# a note\n", encoding="utf-8")
    assert loaded() == []  # a comment: the early cutoff
