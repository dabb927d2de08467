"""Allowlists: reason + link mandatory, match by fingerprint or path + symbol + target."""

from __future__ import annotations

from pathlib import Path

import pytest
from _gate_util import finding, fingerprinted

from reload_lint.errors import ReloadLintError
from reload_lint.gate import apply_allowlists, load_allowlist

GOOD = """
[meta]
codebase = "vllm 0.25.1"

[[allow]]
path = "pkg/a.py"
symbol = "Kern.process_weights_after_loading"
target = "layer.workspace"
reason = "only read during load"
link = "https://example.invalid/a.py#L12"

[[allow]]
fingerprint = "{fp}"
rule = "RL103"
reason = "partial rebuilt per forward"
link = "https://example.invalid/b.py#L30"
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "allow.toml"
    p.write_text(text)
    return p


def test_match_by_symbol_target_and_fingerprint(tmp_path):
    fs = fingerprinted(
        [
            finding("pkg/a.py", 12, target="layer . workspace"),
            finding("pkg/b.py", 30, target="self.act_perm", rule="RL103", symbol="M.pwal"),
            finding("pkg/a.py", 40, target="layer.other"),
        ]
    )
    fp = next(f.fingerprint for f in fs if f.target == "self.act_perm")
    entries = load_allowlist(_write(tmp_path, GOOD.replace("{fp}", fp)), display="allow.toml")
    used = apply_allowlists(fs, entries)
    got = {f.target: f.suppressed for f in fs}
    assert got["layer . workspace"] == "allowlisted (allow.toml#1): only read during load"
    assert got["self.act_perm"].startswith("allowlisted (allow.toml#2)")
    assert got["layer.other"] is None
    assert used == {"allow.toml#1", "allow.toml#2"}


def test_rule_restricts_match(tmp_path):
    text = GOOD.replace("{fp}", "0" * 20).replace(
        'path = "pkg/a.py"', 'path = "pkg/a.py"\nrule = "RL102"'
    )
    entries = load_allowlist(_write(tmp_path, text))
    f = fingerprinted([finding("pkg/a.py", 12)])[0]
    apply_allowlists([f], entries)
    assert f.suppressed is None


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[[allow]]\nfingerprint='x'\nlink='l'\n", "#1: `reason` is required"),
        ("[[allow]]\nfingerprint='x'\nreason='r'\n", "`link` is required"),
        ("[[allow]]\nfingerprint='x'\nreason='  '\nlink='l'\n", "`reason` is required"),
        ("[[allow]]\npath='a'\nsymbol='s'\nreason='r'\nlink='l'\n", "missing `target`"),
        ("[[allow]]\nfingerprint='x'\nreason='r'\nlink='l'\nwhy='?'\n", "unknown key `why`"),
        ("[[allow]]\nfingerprint='x'\nreason='r'\nlink='l'\nrule='RL999'\n", "unknown rule"),
        ("[[allow]]\nfingerprint=3\nreason='r'\nlink='l'\n", "must be a string"),
        ("allow = 3\n", "array of tables"),
        ("[allowed]\n", "unknown top-level key `allowed`"),
        ("[[allow]\n", "invalid allowlist TOML"),
    ],
)
def test_bad_allowlist_is_one_line_error(tmp_path, text, needle):
    p = _write(tmp_path, text)
    with pytest.raises(ReloadLintError) as exc:
        load_allowlist(p)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_unreadable_allowlist(tmp_path):
    with pytest.raises(ReloadLintError, match="cannot read allowlist"):
        load_allowlist(tmp_path / "missing.toml")


def test_shipped_allowlists_parse():
    """Each bundled allowlist parses, names the codebase it is looked up for (its file name) and
    the releases it was audited against, and every entry gives reasoning and a link. A file may
    hold no entry (vllm.toml for 0.25.1/0.33.0: its header says why); the integration test
    test_shipped_vllm_allowlist_entries_all_match keeps entries from going dead."""
    import tomllib

    from reload_lint.rules import data_dir

    files = sorted((data_dir("allowlists")).glob("*.toml"))
    assert files, "no bundled allowlist found"
    for p in files:
        entries = load_allowlist(p)
        meta = tomllib.loads(p.read_text(encoding="utf-8"))["meta"]
        assert meta["codebase"] == p.stem, f"{p}: [meta] codebase must name the file's codebase"
        assert meta["audited"].strip(), f"{p}: [meta] audited must name the releases read"
        for e in entries:
            assert len(e.reason) > 40, f"{e.source}: give the reasoning, not a label"
            assert e.link.startswith("https://")
