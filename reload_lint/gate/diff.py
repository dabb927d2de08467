"""`check --diff REV`: keep findings whose location or trace touches changed lines.

Input: a git revision and the project folder; findings. Output: the changed lines per file
(`changed_lines`), and the findings touching them (`filter_to_diff`).

Changed lines are those that differ between the merge base of REV and HEAD and the working
tree (committed, staged and unstaged edits), plus every line of untracked files. Renames are
followed, so moving a file does not mark all of its lines changed. Any git problem (REV
unknown, no merge base in a shallow clone, not a repository) is a one-line error, exit 2.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.errors import ReloadLintError
from reload_lint.findings import FileError, Finding, TraceStep
from reload_lint.incremental import via

ALL_LINES = -1  # sentinel in a line set: the whole file changed (new / untracked)

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


@dataclass
class ChangedLines:
    base: str  # the merge-base commit
    files: dict[str, set[int]] = field(default_factory=dict)  # base_dir-relative posix path
    root: Path | None = None  # base_dir: where the working tree's files are read
    _spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict, repr=False)

    def touches(self, path: str, lo: int, hi: int | None = None) -> bool:
        lines = self.files.get(path)
        if not lines:
            return False
        if ALL_LINES in lines:
            return True
        hi = lo if hi is None else max(lo, hi)
        if hi - lo > 64:
            return any(lo <= n <= hi for n in lines)
        return any(n in lines for n in range(lo, hi + 1))

    def finding_via(self, f: Finding) -> list[TraceStep] | None:
        """None when the change does not touch `f`; [] when it touches its location; else
        the steps it touches (through.py): a step counts as touched when a changed line lies
        in the function around it (the helper whose return decided the provenance, the
        constructor, the oracle), or on the step itself outside any function."""
        return via(
            f,
            lambda f: self.touches(f.path, f.line, f.end_line),
            lambda s: self.touches(s.path, *self.span_of(s.path, s.line)),
        )

    def finding_touched(self, f: Finding) -> bool:
        return self.finding_via(f) is not None

    def span_of(self, path: str, line: int) -> tuple[int, int]:
        """The lines of the innermost function (decorators included) around `line` of
        `path`, from the working tree's text; (line, line) outside any function or when the
        file cannot be parsed."""
        spans = self._spans.get(path)
        if spans is None:
            spans = self._spans[path] = _function_spans(self.root / path if self.root else None)
        around = [(lo, -hi) for lo, hi in spans if lo <= line <= hi]
        if not around:
            return line, line
        lo, neg_hi = max(around)  # the innermost: latest start, then earliest end
        return lo, -neg_hi

    def error_touched(self, e: FileError) -> bool:
        return e.path in self.files


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            ["git", "-c", "core.quotePath=false", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
        )
    except OSError as exc:
        raise ReloadLintError(f"--diff: cannot run git: {exc.strerror or exc}") from None


def _first_line(proc: subprocess.CompletedProcess) -> str:
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[0] if lines else f"git exited {proc.returncode}"


def _unquote(path: str) -> str:
    """Undo git's C-style quoting of unusual paths ("a\\tb", octal UTF-8 bytes)."""
    if not (len(path) >= 2 and path[0] == '"' and path[-1] == '"'):
        return path
    body = path[1:-1]
    out = bytearray()
    i = 0
    simple = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b"}
    simple |= {"f": b"\f", "r": b"\r", "v": b"\v"}
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            if body[i + 1 : i + 4].isdigit():
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
        out += c.encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")


def parse_unified_diff(text: str) -> dict[str, set[int]]:
    """New-side changed lines per repo-relative path, from `git diff -U0` output."""
    files: dict[str, set[int]] = {}
    current: set[int] | None = None
    for line in text.splitlines():
        if line.startswith("+++ "):
            target = line[4:].rstrip("\t")
            if target == "/dev/null":
                current = None  # deleted file
                continue
            target = _unquote(target)
            if target.startswith("b/"):
                target = target[2:]
            current = files.setdefault(target, set())
            continue
        m = _HUNK.match(line)
        if m and current is not None:
            start = int(m.group(1))
            count = int(m.group(2)) if m.group(2) is not None else 1
            if count == 0:
                # Pure deletion after line `start`: the neighbours changed meaning.
                current.update({max(start, 1), start + 1})
            else:
                current.update(range(start, start + count))
    return files


def changed_lines(rev: str, base_dir: Path) -> ChangedLines:
    """Lines changed since merge-base(REV, HEAD), keyed by paths relative to `base_dir`."""
    from reload_lint.discover import shown_path

    base_dir = Path(base_dir).resolve()
    top = _git(["rev-parse", "--show-toplevel"], base_dir)
    if top.returncode != 0:
        raise ReloadLintError(f"--diff {rev}: {base_dir} is not inside a git repository")
    toplevel = Path(top.stdout.strip()).resolve()
    verify = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], toplevel)
    if verify.returncode != 0:
        remote, _, branch = rev.partition("/")
        fetch = f"git fetch {remote} {branch}" if branch else f"git fetch origin {rev}"
        raise ReloadLintError(
            f"--diff {rev}: cannot resolve `{rev}` to a commit (in a shallow or single-branch "
            f"clone, fetch it first, e.g. `{fetch}`)"
        )
    mb = _git(["merge-base", verify.stdout.strip(), "HEAD"], toplevel)
    if mb.returncode != 0 or not mb.stdout.strip():
        shallow = _git(["rev-parse", "--is-shallow-repository"], toplevel).stdout.strip()
        hint = (
            "the clone is shallow; fetch more history (`git fetch --unshallow` or a larger "
            "fetch-depth)"
            if shallow == "true"
            else "the histories share no commit"
        )
        raise ReloadLintError(f"--diff {rev}: no merge base between `{rev}` and HEAD: {hint}")
    base = mb.stdout.strip()
    diff = _git(
        ["diff", "--no-color", "--no-ext-diff", "-U0", "-M", "--diff-filter=ACMRT", base, "--"],
        toplevel,
    )
    if diff.returncode != 0:
        raise ReloadLintError(f"--diff {rev}: git diff failed: {_first_line(diff)}")
    repo_files = parse_unified_diff(diff.stdout)
    untracked = _git(["ls-files", "-z", "--others", "--exclude-standard"], toplevel)
    if untracked.returncode == 0:
        for p in untracked.stdout.split("\0"):
            if p:
                repo_files[p] = {ALL_LINES}
    out = ChangedLines(base=base, root=base_dir)
    for rel, lines in repo_files.items():
        abs_path = toplevel / rel
        try:
            key = abs_path.relative_to(base_dir).as_posix()
        except ValueError:
            continue  # outside the audited tree
        out.files[shown_path(key)] = lines  # as discovery names it
    return out


def _function_spans(path: Path | None) -> list[tuple[int, int]]:
    """(first line, last line) of every function of a file, decorators included."""
    import ast

    if path is None:
        return []
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lo = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            out.append((lo, node.end_lineno or node.lineno))
    return out


def filter_to_diff(
    findings: list[Finding], errors: list[FileError], changed: ChangedLines
) -> tuple[list[Finding], list[FileError]]:
    """The findings the change touches (each with its `via` steps when the change touches
    them only through a step) and the file errors of changed files."""
    kept = []
    for f in findings:
        v = changed.finding_via(f)
        if v is not None:
            f.via = v
            kept.append(f)
    return kept, [e for e in errors if changed.error_touched(e)]
