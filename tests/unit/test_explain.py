"""Issue 20: `reload-lint explain PATH:LINE` says, for every store on a line, what the engine
decided: reported (with its facts), or decided safe with the fact that decided it, a step of
another finding's trace, or not reached. Fixture: tests/fixtures/explainpkg/kern.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reload_lint.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "explainpkg"


@pytest.fixture
def project(tmp_path, monkeypatch):
    shutil.copytree(FIXTURE, tmp_path / "pkg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    return tmp_path


def _line(text: str) -> int:
    lines = (FIXTURE / "kern.py").read_text().splitlines()
    return next(i for i, s in enumerate(lines, 1) if text in s)


def _explain(capsys, *specs: str) -> dict:
    capsys.readouterr()
    rc = main(["explain", "--no-cache", "--format", "json", *specs])
    out, err = capsys.readouterr()
    assert rc == 0, err
    return {a["query"]: a for a in json.loads(out)["explain"]}


def _decision(answer: dict, target: str) -> dict:
    (d,) = [d for d in answer["decisions"] if d["target"] == target]
    return d


CASES = [
    # (line text, target, status, fact or rule)
    ("layer.w_t = ", "layer.w_t", "reported", "RL101"),
    ("layer.empty = ", "layer.empty", "decided-safe", "zero-element"),
    ("layer.scale = ", "layer.scale", "decided-safe", "registered"),
    ("layer.once = ", "layer.once", "decided-safe", "guarded"),
    ("layer.kernel = ", "layer.kernel", "reported", "RL105"),
]


def test_every_store_gets_its_decision(project, capsys):
    specs = {f"pkg/kern.py:{_line(t)}": c for t, *c in [(c[0], *c[1:]) for c in CASES]}
    answers = _explain(capsys, *specs)
    for spec, (target, status, what) in specs.items():
        d = _decision(answers[spec], target)
        assert d["status"] == status, (spec, d)
        if status == "reported":
            assert d["rule"] == what and d["fingerprint"] and d["gate"] == "fails"
            assert d["reader"].startswith("pkg/kern.py:")
        else:
            assert d["fact"] == what and d["why"], d


def test_unread_store_is_a_warning_and_guard_names_the_flag(project, capsys):
    spec_u = f"pkg/kern.py:{_line('layer.unread_buf = ')}"
    spec_g = f"pkg/kern.py:{_line('layer.once = ')}"
    answers = _explain(capsys, spec_u, spec_g)
    assert _decision(answers[spec_u], "layer.unread_buf")["gate"] == "warning"
    assert "_prepared" in _decision(answers[spec_g], "layer.once")["why"]


def test_constructor_store_is_a_trace_step_and_create_weights_is_not_reached(project, capsys):
    ctor = f"pkg/kern.py:{_line('self.perm = ')}"
    once = f"pkg/kern.py:{_line('layer.ws = ')}"
    answers = _explain(capsys, ctor, once)
    (step,) = answers[ctor]["in_traces"]
    assert "RL105 layer.kernel" in step["finding"] and "self.perm" in step["note"]
    assert answers[once]["decisions"] == [] and answers[once]["note"].startswith("not reached")
    assert answers[once]["stores"] == ["layer.ws"]


def test_text_format_and_a_line_without_stores(project, capsys):
    capsys.readouterr()
    assert (
        main(["explain", "--no-cache", "pkg/kern.py:1", f"pkg/kern.py:{_line('layer.w_t = ')}"])
        == 0
    )
    out = capsys.readouterr().out
    assert "pkg/kern.py:1\n  no store on this line" in out
    assert "layer.w_t: REPORTED RL101" in out and "reader: pkg/kern.py:" in out


def test_allowlisted_store_says_so(project, capsys):
    (project / "allow.toml").write_text(
        '[[allow]]\nrule = "RL101"\npath = "pkg/kern.py"\n'
        'symbol = "Method.process_weights_after_loading"\ntarget = "layer.w_t"\n'
        'reason = "measured: a host copy"\nlink = "x"\n'
    )
    spec = f"pkg/kern.py:{_line('layer.w_t = ')}"
    capsys.readouterr()
    assert (
        main(["explain", "--no-cache", "--format", "json", "--allowlist", "allow.toml", spec]) == 0
    )
    d = _decision(json.loads(capsys.readouterr().out)["explain"][0], "layer.w_t")
    assert d["status"] == "accepted" and d["fact"] == "allowlisted" and "host copy" in d["why"]


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("pkg/kern.py", "expected PATH:LINE"),
        ("pkg/nope.py:3", "no such file"),
        ("pkg/kern.py:9999", "has 2"),
    ],
)
def test_bad_locations_are_one_line_exit_2(project, capsys, spec, needle):
    capsys.readouterr()
    assert main(["explain", "--no-cache", spec]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
