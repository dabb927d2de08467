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
from reload_lint.cli import main
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
