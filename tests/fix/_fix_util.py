"""Shared by the fix tests: the golden cases and running the CLI in-process."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from reload_lint.cli import main

CASES = Path(__file__).parent / "cases"
NAMES = sorted(p.name for p in CASES.iterdir() if (p / "before.py").is_file())


def project(tmp: Path, name: str) -> Path:
    pkg = tmp / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for f in (CASES / name).glob("*.py"):
        if f.name == "before.py":
            shutil.copy2(f, pkg / "m.py")
        elif f.name != "after.py":
            shutil.copy2(f, pkg / f.name)
    return tmp


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def load_case(case: str, which: str):
    """Import a golden case's ``before.py`` or ``after.py`` (our own fixture code) as a module."""
    spec = importlib.util.spec_from_file_location(f"_{case}_{which}", CASES / case / which)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
