"""Shared by the engine tests: write a small project from a dict of dedented sources and run the
real engine over it (no cache), as `reload-lint check` would."""

from __future__ import annotations

import textwrap
from pathlib import Path

from reload_lint.config import Config
from reload_lint.engine import run_check


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")


def check_files(
    root: Path, files: dict[str, str], config: Config | None = None, contract: str | None = None
):
    """Write FILES under ROOT and check ROOT; CONTRACT picks a contract on the default config."""
    write_files(root, files)
    cfg = config or (Config(contract=contract) if contract else Config())
    return run_check([root], cfg, base_dir=root, use_cache=False)


def precommit_run(root: Path, cache: Path | None, rel: str = "pkg/a.py"):
    """pre-commit's call: the project under ROOT/pkg indexed, the file REL reported."""
    return run_check(
        [root / "pkg"],
        Config(),
        base_dir=root,
        use_cache=cache is not None,
        cache_dir=cache,
        only_paths={rel},
    )


def findings_json(res) -> str:
    """A run's findings and errors as `--format json` prints them."""
    from reload_lint.render.json_ import render_json

    return render_json(res.findings, res.errors, files=res.files_scanned)
