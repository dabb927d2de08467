"""Issue 11, defect 3: pre-commit on a vLLM checkout applies the bundled vLLM allowlist with
no configuration (the codebase is detected from the tree, as the reload contract is).

The shipped allowlists/vllm.toml holds no entry for the releases audited, so these tests put
an allowlist that accepts the checkout's one store where the bundled file is looked up, and
check it is applied on a detected checkout and only there; the shipped file itself is checked
to be found and to parse."""

from __future__ import annotations

import tomllib
from _vllm_checkout import bundle_accepting_allowlist, write_checkout

from reload_lint.cli import main
from reload_lint.gate import bundled_allowlist, load_allowlist
from reload_lint.rules import PACKAGE_DIR


def test_named_file_in_a_vllm_checkout_uses_the_bundled_allowlist(tmp_path, monkeypatch, capsys):
    rel = write_checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    # the shipped file accepts nothing here: the store is reported
    assert main(["check", "--no-cache", rel]) == 1
    assert "RL101" in capsys.readouterr().out
    bundle_accepting_allowlist(monkeypatch, tmp_path / "bundled")
    assert main(["check", "--no-cache", rel]) == 0  # pre-commit passes the staged files
    err = capsys.readouterr().err
    assert "1 suppressed finding" in err
    assert main(["check", "--no-cache", "--show-suppressed", "--format", "json", rel]) == 0
    assert "allowlisted (allowlists/vllm.toml#1)" in capsys.readouterr().out


def test_directory_run_on_a_vllm_checkout_uses_it_too(tmp_path, monkeypatch, capsys):
    write_checkout(tmp_path)
    bundle_accepting_allowlist(monkeypatch, tmp_path / "bundled")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", "."]) == 0


def test_other_projects_do_not_get_it(tmp_path, monkeypatch, capsys):
    rel = write_checkout(tmp_path / "src")  # `src/vllm/...`: not a vLLM checkout's layout
    bundle_accepting_allowlist(monkeypatch, tmp_path / "bundled")
    monkeypatch.chdir(tmp_path / "src")
    assert main(["check", "--no-cache", rel]) == 0  # found as vllm/ from here...
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", f"src/{rel}"]) == 1  # ...but not from the parent
    assert "RL101" in capsys.readouterr().out


def test_the_shipped_vllm_allowlist_is_found_and_parses():
    path = bundled_allowlist("vllm")
    assert path is not None and path.name == "vllm.toml"
    assert path.parent.name == "allowlists" and PACKAGE_DIR.parent in path.parents
    load_allowlist(path)  # a malformed entry raises (exit 2 from the CLI)
    assert tomllib.loads(path.read_text(encoding="utf-8"))["meta"]["codebase"] == "vllm"
    assert bundled_allowlist("no-such-codebase") is None
