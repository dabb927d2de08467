"""The exit codes are one contract, worded once (reload_lint/exitcodes.py DESCRIPTIONS): the
runs below exit as it says, `check --help` prints it, and the tables of docs/cli.md and
docs/bad-input.md and the README's summary say the same."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reload_lint.cli import build_parser, main
from reload_lint.exitcodes import DESCRIPTIONS

ROOT = Path(__file__).resolve().parents[2]

WARNING_ONLY = """import torch


class K:
    def process_weights_after_loading(self, layer):
        layer.ws = torch.empty(4)
"""
READ = (
    WARNING_ONLY
    + """
    def apply(self, layer, x):
        return x + layer.ws
"""
)
BROKEN = "# process_weights_after_loading\ndef f(x:\n"
UNUSED_SUPPRESSION = "x = 1  # reload-lint: ignore[RL101] -- nothing is stored here\n"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _exit(proj: Path, files: dict[str, str], *flags: str) -> int:
    for name, text in files.items():
        (proj / "pkg" / name).write_text(text)
    try:
        return main(["check", "--no-cache", "-j", "1", *flags, "pkg"])
    except SystemExit as exc:
        return int(exc.code)


@pytest.mark.parametrize(
    ("files", "flags", "code"),
    [
        ({"k.py": WARNING_ONLY}, (), 0),  # a warning only: clean
        ({"k.py": READ}, (), 1),  # a reader found: fails the gate
        ({"k.py": WARNING_ONLY}, ("--strict",), 1),
        ({"s.py": UNUSED_SUPPRESSION}, (), 1),  # RL905 fails the gate
        ({"k.py": WARNING_ONLY, "bad.py": BROKEN}, (), 3),  # warnings do not hide a bad file
        ({"k.py": READ, "bad.py": BROKEN}, (), 1),  # findings win over a bad file
        ({"k.py": READ, "bad.py": BROKEN}, ("--exit-zero",), 0),
        ({"k.py": WARNING_ONLY}, ("--select", "RL999"), 2),
        ({"k.py": WARNING_ONLY}, ("--select", "RL999", "--exit-zero"), 2),
    ],
)
def test_runs_exit_as_the_contract_says(proj, capsys, files, flags, code):
    assert _exit(proj, files, *flags) == code
    capsys.readouterr()


def _plain(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "")).strip()


def _table_rows(doc: Path) -> dict[int, str]:
    rows = re.findall(r"^\| ([0-3]) \| (.*) \|$", doc.read_text(encoding="utf-8"), re.M)
    return {int(code): _plain(text) for code, text in rows}


@pytest.mark.parametrize("doc", ["docs/cli.md", "docs/bad-input.md"])
def test_doc_tables_start_each_row_with_the_contract(doc):
    rows = _table_rows(ROOT / doc)
    assert sorted(rows) == [0, 1, 2, 3]
    for code, text in DESCRIPTIONS:
        assert rows[code].startswith(_plain(text)), (doc, code, rows[code])


def test_check_help_prints_the_contract():
    parser = build_parser()
    check = parser._subparsers._group_actions[0].choices["check"]
    text = _plain(check.format_help())
    for code, desc in DESCRIPTIONS:
        assert f"{code} {_plain(desc)}" in text


def test_readme_summary_names_every_code():
    readme = _plain((ROOT / "README.md").read_text(encoding="utf-8"))
    summary = readme[readme.index("Exit codes: ") :].split(". ", 1)[0]
    for code, desc in DESCRIPTIONS:
        head = desc.split(":")[0].split(" (")[0]  # "clean", "a finding fails the gate", ...
        head = head.removeprefix("a ").split(",")[0]
        assert f"{code} " in summary and head.split()[0] in summary, (code, head, summary)
