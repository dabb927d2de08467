"""`--format github`: workflow-command annotations with the runner's escaping."""

from __future__ import annotations

from _gate_util import file_error, finding, fingerprinted

from reload_lint.findings import TraceStep
from reload_lint.render.github import annotation, escape_property, render_github


def test_escaping():
    assert escape_property("a:b,c%d\ne") == "a%3Ab%2Cc%25d%0Ae"


def test_annotation_line_and_trace():
    f = finding(
        "pkg/a,b.py",
        10,
        end_line=12,
        message="`layer.ws` 100% moved: reload",
        trace=[TraceStep("pkg/h.py", 3, "allocated"), TraceStep("pkg/a,b.py", 10, "stored")],
    )
    line = annotation(f)
    head, body = line.split("::", 2)[1:]
    assert head == (
        "error file=pkg/a%2Cb.py,line=10,col=9,endLine=12,title=RL101 unregistered-module-tensor"
    )
    assert body == (
        "`layer.ws` 100%25 moved: reload%0A  pkg/h.py:3: allocated%0A  pkg/a,b.py:10: stored"
        "%0Asee: docs/rules/RL101.md (reload-lint rule RL101)"
    )
    assert "\n" not in line


def test_levels_and_errors():
    w = finding(severity="warning", rule="RL106")
    s = finding()
    s.suppressed = "why"
    out = render_github(fingerprinted([w]) + [s], [file_error()])
    lines = out.splitlines()
    assert lines[0].startswith("::warning ")
    assert lines[1].startswith("::notice ") and "[suppressed: why]" in lines[1]
    assert lines[2] == "::error file=pkg/bad.py,line=3,title=RL901::RL901 invalid syntax"
    assert render_github([], []) == ""
