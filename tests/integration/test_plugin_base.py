"""A kernel team's own package audited against the vLLM release it deploys on (issue 26).

`tests/fixtures/plugin_marlin` subclasses vLLM 0.33.0's `MarlinLinearKernel` and overrides one
method the base's post-load calls, adding one escape there. With `--base vllm==0.33.0` the
inherited post-load runs with the subclass as `self` and reports the escape (and only it: the
base's own findings are the release's); without the base, a one-line note names the class it
could not resolve and how to pass the base.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reload_lint.sources import SourceError, release_sources
from tests.unit._cli_util import run_cli

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "plugin_marlin"


@pytest.fixture(scope="module")
def release():
    try:
        return release_sources("vllm", "0.33.0")
    except SourceError as exc:  # no network and no cached copy
        pytest.skip(f"vLLM 0.33.0 sources unavailable: {exc}")


@pytest.fixture
def pkg(tmp_path, monkeypatch, release):
    shutil.copytree(FIXTURE, tmp_path / "proj")
    monkeypatch.chdir(tmp_path / "proj")
    return tmp_path / "proj"


def test_subclass_of_a_vllm_kernel_against_its_base(pkg, capsys):
    code, out, err = run_cli(
        capsys, "check", "my_kernels", "--base", "vllm==0.33.0", "--format", "json", "--no-cache"
    )
    assert code == 1, err
    found = json.loads(out)["findings"]
    assert [(f["path"], f["rule"], f["target"]) for f in found] == [
        ("my_kernels/marlin_scratch.py", "RL102", "self.scratch")
    ]
    assert "MarlinLinearKernel.process_weights_after_loading, inherited by" in json.dumps(found)
    assert "contract vllm-layerwise: base vllm==0.33.0 has the layerwise reload" in err


def test_without_the_base_it_says_what_it_could_not_resolve(pkg, capsys):
    code, out, err = run_cli(capsys, "check", "my_kernels", "--no-cache")
    assert code == 0 and "Found 0 findings" in out
    notes = [ln for ln in err.splitlines() if "note:" in ln]
    assert len(notes) == 1 and "MarlinLinearKernel" in notes[0] and "--base" in notes[0]
