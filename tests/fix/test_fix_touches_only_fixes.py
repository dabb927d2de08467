"""A patch a maintainer would merge touches nothing outside a fix: every line `--fix` changes
lies in the function holding a finding it fixes (its statement, the `if` around it; for RL108,
a rebuild site the finding names), or is an
import the fix needs (or made unused), or the helper it adds at the module's end."""

from __future__ import annotations

import ast
import difflib
import json

import pytest
from _fix_util import NAMES, project, run


def _functions(tree: ast.Module) -> list[tuple[int, int]]:
    return [
        (n.lineno, n.end_lineno)
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _is_import(line: str) -> bool:
    s = line.strip()
    return not s or s.startswith(("import ", "from "))


@pytest.mark.parametrize("name", NAMES)
def test_every_changed_line_maps_to_a_fix(name, tmp_path, monkeypatch, capsys):
    proj = project(tmp_path, name)
    monkeypatch.chdir(proj)
    code, out, _ = run(capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "json")
    findings = [f for f in json.loads(out)["findings"] if f["path"] == "pkg/m.py"]
    before = (proj / "pkg" / "m.py").read_text()
    run(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    after = (proj / "pkg" / "m.py").read_text()
    a, b = before.splitlines(), after.splitlines()
    funcs = _functions(ast.parse(before))
    # a finding's own line, and for RL108 the rebuild sites its fix keeps the owner at
    lines = [f["line"] for f in findings] + [
        r["line"] for f in findings for r in f.get("rebuild_sites") or [] if r["path"] == "pkg/m.py"
    ]
    homes = [
        (lo, hi)
        for ln in lines
        for lo, hi in funcs
        if lo <= ln <= hi and not any(lo < x <= ln <= y < hi for x, y in funcs)
    ]
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for op, a0, a1, b0, b1 in sm.get_opcodes():
        if op == "equal":
            continue
        new, old = b[b0:b1], a[a0:a1]
        if all(_is_import(x) for x in new + old):
            continue  # an import the fix needs, or one it made unused
        if a0 == len(a):
            continue  # the helper, once, at the module's end
        # a change inside (or right at the edge of) a function holding a finding
        assert any(lo <= a0 + 1 <= hi + 1 and a1 <= hi for lo, hi in homes), (
            f"{name}: lines {a0 + 1}-{a1} changed outside every fixed finding's function:\n"
            + "\n".join(old + ["---"] + new)
        )
