"""Issue 11, frictions a new user met: help text, usage errors that name the valid values,
runs that analysed nothing, where release sources are, download progress, SARIF's %SRCROOT%,
gen-docs messages."""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

import pytest
from _cli_util import KERNEL, run_cli

from reload_lint import sources
from reload_lint.cli import build_parser
from reload_lint.config import CONTRACT_CHOICES


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "kern.py").write_text(KERNEL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys, *argv) -> tuple[int, str, str]:
    return run_cli(capsys, *argv)


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


# ----------------------------------------------------------------------------- help
def test_every_check_flag_has_help_and_the_epilog_has_exit_codes_and_env():
    check = _subparser("check")
    missing = [a.option_strings or a.dest for a in check._actions if not a.help]
    assert not missing, f"flags without help: {missing}"
    text = check.format_help()
    for needle in ("exit codes:", "  0  ", "  1  ", "  2  ", "  3  ", "RELOAD_LINT_CACHE"):
        assert needle in text, needle
    for flag in ("--select", "--ignore", "--show-suppressed", "--print-source", "--jobs"):
        assert flag in text


@pytest.mark.parametrize(
    "command", ["check", "baseline", "worklist", "rule", "gen-docs", "confirm"]
)
def test_every_flag_of_every_subcommand_has_help(command):
    parser = _subparser(command)
    missing = [a.option_strings or a.dest for a in parser._actions if not a.help]
    assert not missing, f"{command}: flags without help: {missing}"


def test_confirm_help_mentions_no_flag_check_lacks():
    text = _subparser("confirm").format_help()
    assert "-f json" not in text and "check --format json" in text


def test_contract_choices_match_the_analysis():
    from reload_lint.analysis.contracts import CONTRACT_NAMES

    assert CONTRACT_CHOICES == ("auto", *CONTRACT_NAMES)


# ----------------------------------------------------------------------------- usage errors
@pytest.mark.parametrize("jobs", ["-3", "0", "many"])
def test_bad_jobs_is_a_usage_error(proj, capsys, jobs):
    code, out, err = _run(capsys, "check", "-j", jobs, "pkg")
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "--jobs/-j" in err


@pytest.mark.parametrize(
    "argv",
    [
        ("check", "--bas", "vllm==0.25.1", "pkg"),
        ("check", "--basel", "b.json", "pkg"),
        ("check", "--vll", "0.25.1", "pkg"),
        ("cache", "clean", "--kin", "index"),
    ],
)
def test_an_abbreviated_or_mistyped_flag_is_a_usage_error(proj, capsys, argv):
    # no argparse prefix matching: `--bas` is neither `--base` nor `--baseline`, `--vll` is not `--vllm`
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1


def test_every_parser_refuses_abbreviations():
    parser = build_parser()
    todo = [parser]
    while todo:
        p = todo.pop()
        assert p.allow_abbrev is False, p.prog
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                todo.extend(a.choices.values())


def test_unknown_contract_lists_auto(proj, capsys):
    code, _, err = _run(capsys, "check", "--contract", "layerwise", "pkg")
    assert code == 2 and "auto, vllm-layerwise, inplace-only" in err
    (proj / "pyproject.toml").write_text('[tool.reload-lint]\ncontract = "layerwise"\n')
    code, _, err = _run(capsys, "check", "pkg")
    assert code == 2 and "auto, vllm-layerwise, inplace-only" in err
    assert len(err.splitlines()) == 1


def test_unknown_select_code_lists_the_known_codes(proj, capsys):
    code, _, err = _run(capsys, "check", "--select", "RL999", "pkg")
    assert code == 2 and "RL999" in err and "RL101" in err and "RL906" in err


# ----------------------------------------------------------------------------- nothing analysed
def test_empty_folder_says_nothing_was_analysed(proj, capsys):
    (proj / "empty").mkdir()
    code, out, err = _run(capsys, "check", "empty")
    assert code == 0
    assert "reload-lint: nothing analysed: no Python files under empty" in err


def test_every_named_file_excluded_says_so(proj, capsys):
    (proj / "pyproject.toml").write_text('[tool.reload-lint]\nexclude = ["pkg"]\n')
    code, _, err = _run(capsys, "check", "pkg/kern.py")
    assert code == 0 and "nothing analysed: every file named is excluded by `exclude`" in err
    code, _, err = _run(capsys, "check", ".")
    assert code == 0 and "nothing analysed" in err and "`include`/`exclude`" in err


def test_a_run_that_analysed_something_has_no_such_note(proj, capsys):
    code, _, err = _run(capsys, "check", "--no-cache", "pkg")
    assert code == 1 and "nothing analysed" not in err


# ----------------------------------------------------------------------------- release sources
def _fake_release(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache" / "sources" / "vllm-9.9.9"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    (root / "vllm" / "kern.py").write_text(KERNEL)

    def fake(pkg, version):
        assert (pkg, version) == ("vllm", "9.9.9")
        return root

    monkeypatch.setattr(sources, "release_sources", fake)
    return root


def test_release_run_names_its_source_folder(tmp_path, monkeypatch, capsys):
    root = _fake_release(tmp_path, monkeypatch)
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "check", "--no-cache", "--vllm", "9.9.9")
    assert code == 1 and "vllm/kern.py:6:" in out
    assert f"vllm 9.9.9 release sources in {root} (finding paths are relative to it)" in err
    code, out, err = _run(capsys, "check", "--vllm", "9.9.9", "--print-source")
    assert (code, out, err) == (0, f"{root}\n", "")


def test_print_source_needs_a_release(proj, capsys):
    code, _, err = _run(capsys, "check", "--print-source")
    assert code == 2 and "--print-source needs --vllm VERSION or --sglang VERSION" in err


def test_download_shows_pip_progress_with_the_size(tmp_path, monkeypatch):
    """pip's own lines (the wheel's size; a bar on a terminal) reach the user as they come."""
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / "cache"))
    script = (
        "import sys, pathlib; d = pathlib.Path(sys.argv[1]);"
        "print('Collecting fakepkg==1.0'); print('  Downloading fakepkg-1.0-py3-none-any.whl"
        " (123.4 MB)', flush=True);"
        "(d / 'fakepkg-1.0-py3-none-any.whl').write_bytes(b'PK')"
    )

    def cmd(dist, version, dest, tty):
        assert tty is False  # a StringIO log is no terminal: pip's bar is off
        return [sys.executable, "-c", script, str(dest)]

    monkeypatch.setattr(sources, "pip_download_command", cmd)
    log = io.StringIO()
    wheel = sources.download_wheel("fakepkg", "1.0", log=log)
    assert wheel.name == "fakepkg-1.0-py3-none-any.whl"
    text = log.getvalue()
    assert text.startswith("reload-lint: downloading fakepkg==1.0 with pip (once; cached in ")
    assert "Downloading fakepkg-1.0-py3-none-any.whl (123.4 MB)" in text
    log2 = io.StringIO()
    assert sources.download_wheel("fakepkg", "1.0", log=log2) == wheel and not log2.getvalue()


def test_download_failure_names_pips_last_line(tmp_path, monkeypatch):
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / "cache"))
    script = "import sys; print('ERROR: No matching distribution found for x==1'); sys.exit(1)"
    monkeypatch.setattr(sources, "pip_download_command", lambda *a: [sys.executable, "-c", script])
    with pytest.raises(sources.SourceError, match="No matching distribution found for x==1"):
        sources.download_wheel("x", "1", log=io.StringIO())


# ----------------------------------------------------------------------------- SARIF
def test_sarif_declares_srcroot(proj, capsys):
    code, out, _ = _run(capsys, "check", "--no-cache", "--format", "sarif", "pkg")
    assert code == 1
    run = json.loads(out)["runs"][0]
    base = run["originalUriBaseIds"]["%SRCROOT%"]
    assert "uri" not in base and base["description"]["text"]  # no absolute path: same bytes
    loc = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": "pkg/kern.py", "uriBaseId": "%SRCROOT%"}


# ----------------------------------------------------------------------------- gen-docs
def test_gen_docs_says_what_it_wrote_and_checked(tmp_path, capsys):
    from reload_lint.catalog import load_catalog, render_docs

    n = len(render_docs(load_catalog()))
    code, _, err = _run(capsys, "gen-docs", "--output", str(tmp_path))
    assert code == 0 and f"reload-lint: wrote {n} of {n} pages to {tmp_path}" in err
    code, _, err = _run(capsys, "gen-docs", "--check", "--output", str(tmp_path))
    assert code == 0 and err.strip().endswith("up to date") and "checked" in err
    code, _, err = _run(capsys, "gen-docs", "--output", str(tmp_path))
    assert code == 0 and "already up to date; nothing written" in err
