"""Issue 11, defect 3: pre-commit on a vLLM checkout applies the bundled vLLM allowlist with
no configuration (the codebase is detected from the tree, as the reload contract is)."""

from __future__ import annotations

from _vllm_checkout import write_checkout

from reload_lint.cli import main


def test_named_file_in_a_vllm_checkout_uses_the_bundled_allowlist(tmp_path, monkeypatch, capsys):
    rel = write_checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", rel]) == 0  # pre-commit passes the staged files
    err = capsys.readouterr().err
    assert "1 suppressed finding" in err
    assert main(["check", "--no-cache", "--show-suppressed", "--format", "json", rel]) == 0
    assert "allowlisted (allowlists/vllm.toml#" in capsys.readouterr().out


def test_directory_run_on_a_vllm_checkout_uses_it_too(tmp_path, monkeypatch, capsys):
    write_checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", "."]) == 0


def test_other_projects_do_not_get_it(tmp_path, monkeypatch, capsys):
    rel = write_checkout(tmp_path / "src")  # `src/vllm/...`: not a vLLM checkout's layout
    monkeypatch.chdir(tmp_path / "src")
    assert main(["check", "--no-cache", rel]) == 0  # found as vllm/ from here...
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--no-cache", f"src/{rel}"]) == 1  # ...but not from the parent
    assert "RL101" in capsys.readouterr().out
