"""The worked example of docs/runner.md ("Your own quant method: --recipes MODULE"), run as a
user would: `reload-lint check` on the lab's package, then `confirm --recipes` on its findings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "own_recipe"


def _run(*args, cwd):
    env = {**os.environ, "PYTHONPATH": f"{EXAMPLE}{os.pathsep}{ROOT}"}
    return subprocess.run(
        [sys.executable, "-m", "reload_lint", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_own_quant_method_red_then_green_through_its_recipe(tmp_path):
    out = _run(
        "check", str(EXAMPLE), "--format", "json", "--show-fixes", "--no-cache", "--exit-zero",
        "-o", str(tmp_path / "f.json"), cwd=EXAMPLE,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    findings = json.loads((tmp_path / "f.json").read_text())["findings"]
    assert [(f["rule"], f["target"]) for f in findings] == [("RL101", "layer.w_t")]
    out = _run(
        "confirm", "--findings", str(tmp_path / "f.json"), "--recipes",
        "mylab_quant.reload_recipe", "-o", str(tmp_path / "e.json"), cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr  # a red site
    recs = json.loads((tmp_path / "e.json").read_text())["evidence"]
    by_side = {r["fixed"]: r for r in recs}
    assert by_side[False]["verdict"] == "red" and by_side[False]["recipe"] == "mylab-int8-linear"
    # check's own codemod for the finding (register the tensor) is what the fixed side proves
    assert by_side[True]["verdict"] == "green", by_side[True]["reason"]
    assert by_side[True]["fix_source"] == "codemod"
    assert by_side[True]["fix_files"] == ["mylab_quant/int8_linear.py"]
    assert findings[0]["remedy"]["patch_sha256"] == by_side[True]["fix_patch_sha256"]
