"""Issue 20: a finding is reported for a named file (pre-commit) or a changed line (`--diff`)
when it lies there *or passes through it*: a step of its trace, where a backend is chosen,
its reader; the `via` steps say which (text, JSON, SARIF, GitHub). tests/unit/test_hook_vllm.py
does the same on vLLM sources."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from _engine_util import write_files
from _gate_util import finding

from reload_lint.cli import main
from reload_lint.findings import Finding, TraceStep
from reload_lint.gate import ChangedLines, filter_to_diff
from reload_lint.incremental import steps, through_files
from reload_lint.render.github import annotation
from reload_lint.render.sarif import render_sarif
from reload_lint.render.text import render_text

PROJECT = {
    "pkg/__init__.py": "",
    "pkg/helpers.py": """\
        import torch


        def make(n):
            def inner():
                return 1

            out = torch.zeros(n)
            return out
        """,
    "pkg/k.py": """\
        from pkg.helpers import make


        class K:
            def process_weights_after_loading(self, layer):
                layer.buf = make(4)

            def apply(self, layer, x):
                return layer.buf + x
        """,
    "pkg/other.py": "x = 1\n",
}


SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "findings.schema.json").read_text())


def check_json(capsys, *args) -> tuple[int, list[dict]]:
    capsys.readouterr()
    rc = main(["check", "--no-cache", "--format", "json", *args])
    report = json.loads(capsys.readouterr().out)
    jsonschema.validate(report, SCHEMA)
    return rc, report["findings"]


def test_named_helper_file_reports_the_finding_it_decides(tmp_path, monkeypatch, capsys):
    write_files(tmp_path, PROJECT)
    monkeypatch.chdir(tmp_path)
    rc, found = check_json(capsys, "pkg/helpers.py")
    assert rc == 1
    (f,) = found
    assert (f["path"], f["target"]) == ("pkg/k.py", "layer.buf")
    assert [(s["path"], s["line"]) for s in f["via"]] == [
        ("pkg/helpers.py", 8),
        ("pkg/helpers.py", 4),
    ]
    # located in the named file: reported as before, no via
    rc, found = check_json(capsys, "pkg/k.py")
    assert rc == 1 and "via" not in found[0]
    # a file no step lies in
    assert check_json(capsys, "pkg/other.py") == (0, [])
    # a full run never sets via: its JSON is what it was
    rc, found = check_json(capsys, ".")
    assert rc == 1 and "via" not in found[0]


def test_text_shows_the_via_steps(tmp_path, monkeypatch, capsys):
    write_files(tmp_path, PROJECT)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", "pkg/helpers.py"]) == 1
    out = capsys.readouterr().out
    assert "    via pkg/helpers.py:8,4 (trace steps in a named or changed file)\n" in out


def _finding() -> Finding:
    f = finding(path="k.py", line=6)
    f.trace = [TraceStep("h.py", 8, "`torch.zeros` allocates a new tensor")]
    f.backends = ["FastExperts (oracle.py:40)", "not a backend spelling"]
    f.reader = "k.py:9 in K.apply"
    return f


def test_steps_are_trace_backend_choices_and_reader():
    assert [(s.path, s.line) for s in steps(_finding())] == [
        ("h.py", 8),
        ("oracle.py", 40),
        ("k.py", 9),
    ]
    assert steps(_finding())[1].note == "the oracle chooses FastExperts here"
    (f,) = through_files([_finding()], {"oracle.py"})
    assert [s.path for s in f.via] == ["oracle.py"]
    assert through_files([_finding()], {"elsewhere.py"}) == []


def test_diff_touches_a_step_through_the_function_around_it(tmp_path):
    write_files(tmp_path, {"h.py": PROJECT["pkg/helpers.py"]})
    f = _finding()  # its step: h.py:8, the allocation in make (lines 4-9)

    def kept(lines):
        changed = ChangedLines(base="x", files={"h.py": set(lines)}, root=tmp_path)
        out, _ = filter_to_diff([_finding()], [], changed)
        return [[(s.path, s.line) for s in g.via] for g in out]

    assert kept([9]) == [[("h.py", 8)]]  # the return line of the helper
    assert kept([4]) == [[("h.py", 8)]]  # its def line
    assert kept([6]) == [[("h.py", 8)]]  # a function nested in the helper is part of it
    assert kept([1, 2]) == []  # outside
    # a step inside the nested function: the innermost function around it counts
    inner = _finding()
    inner.trace = [TraceStep("h.py", 6, "returned by inner")]
    for lines, hit in (({5}, True), ({9}, False)):
        changed = ChangedLines(base="x", files={"h.py": lines}, root=tmp_path)
        assert bool(filter_to_diff([inner], [], changed)[0]) is hit
    # the finding's own location touched: reported, no via
    changed = ChangedLines(base="x", files={"k.py": {6}}, root=tmp_path)
    (g,) = filter_to_diff([f], [], changed)[0]
    assert g.via == []
    # a file that cannot be read or parsed: the step's own line only
    changed = ChangedLines(base="x", files={"h.py": {9}}, root=tmp_path / "missing")
    assert filter_to_diff([_finding()], [], changed)[0] == []
    changed = ChangedLines(base="x", files={"h.py": {8}}, root=tmp_path / "missing")
    assert len(filter_to_diff([_finding()], [], changed)[0]) == 1


def test_via_in_json_sarif_and_github():
    f = _finding()
    f.via = [TraceStep("h.py", 8, "`torch.zeros` allocates a new tensor")]
    data = f.to_json()
    assert data["via"] == [{"path": "h.py", "line": 8, "note": f.via[0].note}]
    assert Finding.from_json(data).via == f.via
    assert "via" not in _finding().to_json()
    sarif = json.loads(render_sarif([f], []))
    (rel,) = sarif["runs"][0]["results"][0]["relatedLocations"]
    assert rel["physicalLocation"]["region"]["startLine"] == 8
    assert "via h.py:8" in annotation(f)
    assert "    via h.py:8: `torch.zeros`" in render_text([f], [], show_trace=False)
