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
OWN_LAYER = ROOT / "docs" / "examples" / "own_layer"


def _run(*args, cwd, example=EXAMPLE):
    env = {**os.environ, "PYTHONPATH": f"{example}{os.pathsep}{ROOT}"}
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


def test_a_users_layer_with_two_findings_goes_red_then_green_with_the_codemods_alone(tmp_path):
    """docs/runner.md "A layer of your own": the scheme sits at `layer.scheme` (not
    `layer.quant_method`), its post-load keeps two plain tensors (two findings), and the recipe
    has no `fixes()`. Both bug-side records are red; each fixed side applies both codemods
    (its own and the other target's) and is green."""
    out = _run(
        "check", str(OWN_LAYER), "--format", "json", "--show-fixes", "--no-cache",
        "--exit-zero", "-o", str(tmp_path / "f.json"), cwd=OWN_LAYER, example=OWN_LAYER,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    findings = json.loads((tmp_path / "f.json").read_text())["findings"]
    assert sorted((f["rule"], f["target"]) for f in findings) == [
        ("RL101", "layer.s_row"),
        ("RL101", "layer.w_t"),
    ]
    assert all(f["remedy"]["patch"] for f in findings)
    out = _run(
        "confirm", "--findings", str(tmp_path / "f.json"), "--recipes",
        "mylab_layer.reload_recipe", "-o", str(tmp_path / "e.json"), cwd=tmp_path,
        example=OWN_LAYER,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr  # red sites
    assert "AttributeError" not in out.stderr
    recs = json.loads((tmp_path / "e.json").read_text())["evidence"]
    assert len(recs) == 4
    bug = {r["target"]: r for r in recs if not r["fixed"]}
    fixed = {r["target"]: r for r in recs if r["fixed"]}
    assert {t: r["verdict"] for t, r in bug.items()} == {"layer.w_t": "red", "layer.s_row": "red"}
    assert {t: r["verdict"] for t, r in fixed.items()} == {
        "layer.w_t": "green",
        "layer.s_row": "green",
    }, [r["reason"] for r in fixed.values()]
    by_target = {f["target"]: f for f in findings}
    for t, r in fixed.items():
        other = "layer.s_row" if t == "layer.w_t" else "layer.w_t"
        assert r["fix_source"] == "codemod"
        assert r["fix_patch_sha256"] == by_target[t]["remedy"]["patch_sha256"]
        # the other target is held fixed by its codemod, named, not by a monkeypatch
        assert r["isolation"] == [
            f"codemod of {other}: register, unsafe, "
            f"sha256 {by_target[other]['remedy']['patch_sha256'][:12]}"
        ]
