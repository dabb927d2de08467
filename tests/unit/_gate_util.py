"""Shared helpers for the gate tests: hand-built findings and a stand-in engine.

The stand-in replaces `reload_lint.engine` in sys.modules, so these tests exercise the gate
(suppressions, allowlists, baseline, diff, renderers, exit codes) independently of the
analysis; the integration tests run the real engine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

from reload_lint.findings import FileError, Finding, TraceStep, compute_fingerprints
from reload_lint.gate import scan_suppressions


def finding(
    path="pkg/kern.py",
    line=10,
    rule="RL101",
    symbol="Kern.process_weights_after_loading",
    target="layer.workspace",
    *,
    end_line=None,
    trace=None,
    severity="error",
    contract="vllm-layerwise",
    message=None,
    snippet=None,
    reader="pkg/kern.py:40 in Kern.apply",
) -> Finding:
    return Finding(
        rule=rule,
        path=path,
        line=line,
        column=9,
        end_line=end_line or line,
        symbol=symbol,
        target=target,
        message=message or f"`{target}` holds a tensor created after loading",
        severity=severity,
        confidence="high",
        trace=trace
        or [
            TraceStep(path, max(1, line - 2), "allocated by torch.empty"),
            TraceStep(path, line, f"stored on {target}"),
        ],
        contract=contract,
        reader=reader,
        snippet=snippet if snippet is not None else f"{target} = torch.empty(1)",
    )


def fingerprinted(findings: list[Finding]) -> list[Finding]:
    compute_fingerprints(findings)
    return sorted(findings, key=Finding.sort_key)


@dataclass
class FakeResult:
    findings: list
    errors: list = field(default_factory=list)
    files_scanned: int = 1
    suppressions: dict = field(default_factory=dict)


class FakeEngine:
    """Returns a fixed set of findings; records each call's arguments.

    `suppressions_from` (a base dir) makes it scan the files the findings live in, as the real
    engine does, so inline comments written into tmp files take effect.
    """

    def __init__(self, findings=None, errors=None, base: Path | None = None):
        self.findings = findings or []
        self.errors = errors or []
        self.base = base
        self.calls: list[dict] = []

    def run_check(self, paths, cfg, **kw):
        self.calls.append({"paths": list(paths), **kw})
        found = [Finding.from_json(f.to_json()) for f in self.findings]
        for f, src in zip(found, self.findings, strict=True):
            f.snippet = src.snippet
        sups = {}
        if self.base is not None:
            for p in sorted({f.path for f in found} | _py_files(self.base)):
                fp = self.base / p
                if fp.is_file():
                    text = fp.read_text()
                    if "reload-lint:" in text:
                        sups[p] = scan_suppressions(text)
        only = kw.get("only_paths")
        errors = list(self.errors)
        if only is not None:
            found = [f for f in found if f.path in only]
            errors = [e for e in errors if e.path in only]
        return FakeResult(found, errors, files_scanned=3, suppressions=sups)

    def install(self, monkeypatch) -> FakeEngine:
        mod = types.ModuleType("reload_lint.engine")
        mod.run_check = self.run_check
        monkeypatch.setitem(sys.modules, "reload_lint.engine", mod)
        return self


def _py_files(base: Path) -> set[str]:
    return {p.relative_to(base).as_posix() for p in base.rglob("*.py")}


def file_error(path="pkg/bad.py", rule="RL901", line=3) -> FileError:
    return FileError(rule, path, "invalid syntax", line)


# a git identity and no user/system config, so test repositories commit the same everywhere
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_SYSTEM": os.devnull,
}


def git(cwd: Path, *args: str) -> str:
    """Run git in `cwd` with GIT_ENV; its stdout, stripped (raises on failure)."""
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
