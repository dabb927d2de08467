"""Recall gaps of the SGLang 0.5.23 audit (docs/reviews/recall-sglang-0.5.23.md) as `explain`
sees them on tests/fixtures/minisglgaps: a tensor hung on a Parameter object is judged per
contract, and under `inplace-only` no decided-safe reason rests on copy-back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reload_lint.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "minisglgaps"
QUANT = "minisglgaps/srt/layers/quantization"


@pytest.fixture
def project(tmp_path, monkeypatch):
    shutil.copytree(FIXTURE, tmp_path / "pkg")
    monkeypatch.chdir(tmp_path / "pkg")
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    return tmp_path


def _spec(name: str, text: str) -> str:
    lines = (FIXTURE / QUANT / name).read_text().splitlines()
    return f"{QUANT}/{name}:{next(i for i, s in enumerate(lines, 1) if text in s)}"


def _decisions(capsys, contract: str, *specs: str) -> dict:
    capsys.readouterr()
    rc = main(["explain", "--no-cache", "--format", "json", "--contract", contract, *specs])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return {d["target"]: d for a in json.loads(out)["explain"] for d in a["decisions"]}


@pytest.mark.parametrize("contract,rule", [("inplace-only", "RL102"), ("vllm-layerwise", "RL201")])
def test_tensor_on_a_parameter_object_is_judged_per_contract(project, capsys, contract, rule):
    got = _decisions(capsys, contract, _spec("paramattrs.py", "layer.weight._exp_scale = "))
    d = got["layer.weight._exp_scale"]
    assert d["status"] == "reported" and d["rule"] == rule, d


def test_inplace_safe_reasons_do_not_rest_on_copy_back(project, capsys):
    specs = [
        _spec("paramattrs.py", "layer.weight._scale_ref = "),
        _spec("paramattrs.py", "layer.weight_scale._flat = "),
    ]
    got = _decisions(capsys, "inplace-only", *specs)
    for target in ("layer.weight._scale_ref", "layer.weight_scale._flat"):
        d = got[target]
        assert d["status"] == "decided-safe" and "copy-back" not in d["why"], d
    layerwise = _decisions(capsys, "vllm-layerwise", *specs)
    assert "copy-back" in layerwise["layer.weight_scale._flat"]["why"]
