"""`--diff REV`: changed lines since the merge base, untracked files, clear git errors."""

from __future__ import annotations

import os

import pytest
from _gate_util import file_error, finding, git

from reload_lint.errors import ReloadLintError
from reload_lint.findings import TraceStep
from reload_lint.gate import ALL_LINES, changed_lines, filter_to_diff, parse_unified_diff


@pytest.fixture
def repo(tmp_path, monkeypatch):
    for k in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"):
        monkeypatch.setenv(k, os.devnull)
    r = tmp_path / "repo"
    (r / "pkg").mkdir(parents=True)
    git(r, "init", "-q", "-b", "main")
    (r / "pkg" / "a.py").write_text("".join(f"line{i}\n" for i in range(1, 21)))
    (r / "pkg" / "b.py").write_text("x = 1\n")
    git(r, "add", ".")
    git(r, "commit", "-q", "-m", "base")
    git(r, "checkout", "-q", "-b", "feature")
    return r


def test_parse_unified_diff_hunks_and_deletions():
    text = (
        "diff --git a/x.py b/x.py\n"
        "--- a/x.py\n"
        "+++ b/x.py\n"
        "@@ -3,0 +4,2 @@\n"
        "+a\n+b\n"
        "@@ -10 +12 @@\n"
        "-old\n+new\n"
        "@@ -20,2 +21,0 @@\n"
        "-gone\n-gone\n"
        "diff --git a/gone.py b/gone.py\n"
        "--- a/gone.py\n"
        "+++ /dev/null\n"
        "@@ -1 +0,0 @@\n"
        "-x\n"
        'diff --git "a/t\\303\\251st.py" "b/t\\303\\251st.py"\n'
        '--- "a/t\\303\\251st.py"\n'
        '+++ "b/t\\303\\251st.py"\n'
        "@@ -1 +1 @@\n"
        "-a\n+b\n"
    )
    files = parse_unified_diff(text)
    assert files["x.py"] == {4, 5, 12, 21, 22}
    assert "gone.py" not in files
    assert files["tést.py"] == {1}


def test_changed_lines_committed_unstaged_and_untracked(repo, monkeypatch):
    a = repo / "pkg" / "a.py"
    lines = a.read_text().splitlines(keepends=True)
    lines[4] = "changed5\n"
    a.write_text("".join(lines))
    git(repo, "commit", "-qam", "edit line 5")
    lines[14] = "changed15\n"
    a.write_text("".join(lines))  # unstaged
    (repo / "pkg" / "new.py").write_text("y = 2\n")  # untracked
    ch = changed_lines("main", repo)
    assert ch.files["pkg/a.py"] == {5, 15}
    assert ch.files["pkg/new.py"] == {ALL_LINES}
    assert "pkg/b.py" not in ch.files
    assert ch.base == git(repo, "rev-parse", "main")
    # Paths are relative to the audited base dir, not the repository root.
    sub = changed_lines("main", repo / "pkg")
    assert set(sub.files) == {"a.py", "new.py"}


def test_merge_base_not_tip(repo):
    # main moves on after the branch point: its new lines are not "changed" on feature.
    git(repo, "checkout", "-q", "main")
    (repo / "pkg" / "b.py").write_text("x = 1\nz = 3\n")
    git(repo, "commit", "-qam", "main moves")
    git(repo, "checkout", "-q", "feature")
    assert changed_lines("main", repo).files == {}


def test_rename_is_not_a_whole_file_change(repo):
    git(repo, "mv", "pkg/a.py", "pkg/c.py")
    git(repo, "commit", "-qm", "rename")
    ch = changed_lines("main", repo)
    assert ch.files.get("pkg/c.py", set()) == set()


def test_filter_keeps_location_or_trace_touches(repo):
    a = repo / "pkg" / "a.py"
    lines = a.read_text().splitlines(keepends=True)
    lines[9] = "helper changed\n"
    a.write_text("".join(lines))
    ch = changed_lines("main", repo)
    at = finding("pkg/a.py", 10)
    via_trace = finding(
        "pkg/b.py",
        1,
        trace=[TraceStep("pkg/a.py", 10, "allocated in helper"), TraceStep("pkg/b.py", 1, "st")],
    )
    untouched = finding("pkg/a.py", 3, trace=[TraceStep("pkg/a.py", 3, "alloc")])
    spanning = finding("pkg/a.py", 8, end_line=11, trace=[TraceStep("pkg/a.py", 8, "x")])
    kept, errs = filter_to_diff(
        [at, via_trace, untouched, spanning],
        [file_error("pkg/a.py"), file_error("pkg/b.py")],
        ch,
    )
    assert kept == [at, via_trace, spanning]
    assert [e.path for e in errs] == ["pkg/a.py"]


def test_unknown_rev_is_clear_error(repo):
    with pytest.raises(ReloadLintError) as exc:
        changed_lines("origin/nope", repo)
    msg = str(exc.value)
    assert "cannot resolve `origin/nope`" in msg and "\n" not in msg
    assert "`git fetch origin nope`" in msg


def test_not_a_repository(tmp_path):
    with pytest.raises(ReloadLintError, match="not inside a git repository"):
        changed_lines("main", tmp_path)


def test_shallow_clone_without_base(repo, tmp_path):
    (repo / "pkg" / "b.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "feature work")
    clone = tmp_path / "shallow"
    git(
        tmp_path, "clone", "-q", "--depth", "1", "--branch", "feature", f"file://{repo}", str(clone)
    )
    # `main` was never fetched: REV cannot be resolved.
    with pytest.raises(ReloadLintError, match="cannot resolve `main`"):
        changed_lines("main", clone)
    # Fetch main's tip shallowly: it resolves but shares no commit with HEAD.
    git(clone, "fetch", "-q", "--depth", "1", "origin", "main:main")
    with pytest.raises(ReloadLintError, match="shallow"):
        changed_lines("main", clone)
