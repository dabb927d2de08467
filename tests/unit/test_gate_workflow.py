"""Issue 11: docs/gate.md's GitHub Actions workflow is valid YAML, and every reload-lint
command it runs is accepted by this version's argument parser (flags and values exist)."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest
import yaml  # pyyaml: a dev dependency, so this runs in .ci/run

from reload_lint.cli import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "gate.md"


def _workflow() -> dict:
    blocks = re.findall(r"^```yaml\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)
    flows = [yaml.safe_load(b) for b in blocks if re.search(r"^jobs:", b, re.M)]
    assert len(flows) == 1, "docs/gate.md should hold exactly one workflow"
    return flows[0]


def _steps(flow: dict) -> list[dict]:
    return [step for job in flow["jobs"].values() for step in job["steps"]]


def _commands(flow: dict) -> list[list[str]]:
    out = []
    for step in _steps(flow):
        for line in str(step.get("run", "")).splitlines():
            argv = shlex.split(line, comments=True)
            if argv and argv[0] == "reload-lint":
                out.append(argv[1:])
    return out


def test_workflow_runs_the_gate_and_uploads_sarif():
    flow = _workflow()
    assert flow["permissions"]["security-events"] == "write"
    cmds = _commands(flow)
    assert any(c[0] == "check" and "--diff" in c for c in cmds)
    sarif = [c for c in cmds if "--format" in c and c[c.index("--format") + 1] == "sarif"]
    assert len(sarif) == 1
    output = sarif[0][sarif[0].index("--output") + 1]
    uploads = [
        s
        for s in _steps(flow)
        if str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif@")
    ]
    assert [u["with"]["sarif_file"] for u in uploads] == [output]
    checkout = next(
        s for s in _steps(flow) if str(s.get("uses", "")).startswith("actions/checkout")
    )
    assert checkout["with"]["fetch-depth"] == 0  # --diff needs the base branch's history
    installs = [s["run"] for s in _steps(flow) if "pip install" in str(s.get("run", ""))]
    assert installs, "the workflow installs reload-lint"


def test_every_reload_lint_command_in_the_workflow_parses(capsys):
    parser = build_parser()
    cmds = _commands(_workflow())
    assert cmds
    for argv in cmds:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse: unknown flag or bad value
            pytest.fail(f"`reload-lint {' '.join(argv)}` is rejected: {capsys.readouterr().err}")
            raise AssertionError from exc
        assert args.command == "check"
        # argparse accepts abbreviations (`--dif`); the doc must spell each flag in full
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        known = set(sub.choices[argv[0]]._option_string_actions)
        flags = [a.split("=", 1)[0] for a in argv if a.startswith("-")]
        assert set(flags) <= known, f"unknown flags {set(flags) - known} in {argv}"
