"""Issue 17, safe classes 2 and 3: `reload-lint explain` names the fact that drops an input of a
reused preparation (tests/fixtures/minireuse) and a kernel built behind a first-load context
flag (tests/fixtures/minireload033, layers/first_ctx.py); the positives next to them stay
reported (the fixtures' markers, tests/unit/test_fixtures.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reload_lint.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _line(path: Path, text: str) -> int:
    return next(i for i, s in enumerate(path.read_text().splitlines(), 1) if text in s)


def _explain(capsys, root: Path, rel: str, *texts: str) -> list[dict]:
    specs = [f"{rel}:{_line(root / rel, t)}" for t in texts]
    capsys.readouterr()
    rc = main(["explain", "--no-cache", "--format", "json", *specs])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return [a["decisions"][0] for a in json.loads(out)["explain"]]


@pytest.fixture
def copy(tmp_path, monkeypatch):
    def make(name: str) -> Path:
        shutil.copytree(FIXTURES / name, tmp_path / name)
        monkeypatch.chdir(tmp_path / name)
        monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
        return tmp_path / name

    return make


def test_inputs_of_a_reused_preparation_are_dropped_with_the_fact(copy, capsys):
    root = copy("minireuse")
    rel = "minireuse/experts/packed.py"
    gain, ones, kept, unkept = _explain(
        capsys,
        root,
        rel,
        "self.cfg._x.gain = 1.0 / layer.x_scale\n" if False else "self.cfg._x.gain = 1.0 /",
        "self._ones[device] = got",
        "self.bias_gain = 2.0 /",
        "self._packed = pack_experts(",
    )
    for d in (gain, ones):
        assert d["status"] == "decided-safe" and d["fact"] == "reused", d
        assert "keep_first_storage" in d["why"] and "_pack" in d["why"], d
    # apply reads the input itself: still an escape, with its reader
    assert kept["status"] == "reported" and kept["reader"], kept
    # the packing kept without a reuse helper is the escape
    assert unkept["status"] == "reported" and unkept["rule"] == "RL102", unkept


def test_a_block_under_a_first_load_context_flag_never_runs_on_an_update(copy, capsys):
    root = copy("minireload033")
    rel = "vllm/model_executor/layers/first_ctx.py"
    lines = (root / rel).read_text().splitlines()
    builds = [i for i, s in enumerate(lines, 1) if "self.kernel = Kernel(" in s]
    capsys.readouterr()
    rc = main(["explain", "--no-cache", "--format", "json", *(f"{rel}:{n}" for n in builds)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    ctx, marked = (a["decisions"][0] for a in json.loads(out)["explain"])
    assert ctx["status"] == "decided-safe" and ctx["fact"] == "guarded", ctx
    assert "packed_already" in ctx["why"] and "never enters" in ctx["why"], ctx
    # a flag set outside a context manager may hold on any later post-load
    assert marked["status"] == "reported" and marked["rule"] == "RL105", marked
