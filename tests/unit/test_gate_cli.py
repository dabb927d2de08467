"""The gate end to end through the CLI, with a stand-in engine: exit codes, baseline flow,
suppressions, allowlists, pre-commit file semantics, --diff errors, output formats."""

from __future__ import annotations

import json

import pytest
from _gate_util import FakeEngine, file_error, finding, fingerprinted

from reload_lint.cli import main


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n" * 50)
    (tmp_path / "pkg" / "b.py").write_text("y = 1\n" * 50)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _findings():
    return fingerprinted(
        [
            finding("pkg/a.py", 10, target="layer.workspace"),
            finding("pkg/b.py", 20, target="self.act_perm", rule="RL103", symbol="M.pwal"),
        ]
    )


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_codes_clean_findings_incomplete(proj, capsys, monkeypatch):
    FakeEngine([]).install(monkeypatch)
    assert run(capsys, "check", "pkg")[0] == 0
    FakeEngine(_findings()).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg")
    assert code == 1
    assert "pkg/a.py:10:9: RL101" in out and "Found 2 findings." in out
    assert run(capsys, "check", "pkg", "--exit-zero")[0] == 0
    FakeEngine([], [file_error()]).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg")
    assert code == 3 and "pkg/bad.py:3: RL901" in out


def test_baseline_then_check_then_new_finding(proj, capsys, monkeypatch):
    FakeEngine(_findings()).install(monkeypatch)
    code, _, err = run(capsys, "baseline", "pkg", "--output", "rl-baseline.json")
    assert code == 0 and "wrote 2 baseline entries" in err
    code, out, err = run(capsys, "check", "pkg", "--baseline", "rl-baseline.json")
    assert code == 0, out
    assert "baseline: 2 known findings matched, 0 stale entries" in err
    # Lines move: fingerprints are line-free, still clean.
    moved = fingerprinted(
        [
            finding("pkg/a.py", 13, target="layer.workspace"),
            finding("pkg/b.py", 23, target="self.act_perm", rule="RL103", symbol="M.pwal"),
        ]
    )
    FakeEngine(moved).install(monkeypatch)
    assert run(capsys, "check", "pkg", "--baseline", "rl-baseline.json")[0] == 0
    # One new finding: exit 1, only it is reported.
    new = fingerprinted([*moved, finding("pkg/c.py", 5, target="layer.new_ws")])
    FakeEngine(new).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg", "--baseline", "rl-baseline.json", "--format", "json")
    assert code == 1
    report = json.loads(out)
    assert [f["target"] for f in report["findings"]] == ["layer.new_ws"]
    assert report["summary"]["baselined"] == 2


def test_stale_entries_reported_and_strict(proj, capsys, monkeypatch):
    FakeEngine(_findings()).install(monkeypatch)
    run(capsys, "baseline", "pkg", "-o", "b.json")
    FakeEngine(_findings()[:1]).install(monkeypatch)
    code, _, err = run(capsys, "check", "pkg", "--baseline", "b.json")
    assert code == 0
    assert "1 stale entry" in err and "stale: pkg/b.py: RL103 M.pwal `self.act_perm`" in err
    code, _, err = run(capsys, "check", "pkg", "--baseline", "b.json", "--strict-baseline")
    assert code == 1 and "--strict-baseline: failing" in err


def test_corrupt_baseline_exit_2_one_line_untouched(proj, capsys, monkeypatch):
    FakeEngine(_findings()).install(monkeypatch)
    bad = proj / "b.json"
    bad.write_text('{"kind": "reload-lint-baseline", "version": 1, "entries": [')
    before = bad.read_bytes()
    code, out, err = run(capsys, "check", "pkg", "--baseline", "b.json")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "corrupt baseline" in err and "Traceback" not in err
    assert bad.read_bytes() == before


def test_baseline_write_failure_keeps_old_file(proj, capsys, monkeypatch):
    FakeEngine(_findings()).install(monkeypatch)
    code, _, err = run(capsys, "baseline", "pkg", "-o", "no/such/dir/b.json")
    assert code == 2 and "cannot write" in err and err.count("\n") == 1
    target = proj / "b.json"
    target.write_text("old")
    import reload_lint.fsutil as fsutil

    def full_disk(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil.os, "replace", full_disk)
    code, _, err = run(capsys, "baseline", "pkg", "-o", str(target))
    assert code == 2 and "No space left on device" in err and err.count("\n") == 1
    assert target.read_text() == "old"
    assert sorted(p.name for p in proj.iterdir() if p.name.startswith(".b.json")) == []


def test_config_baseline_key_used(proj, capsys, monkeypatch):
    FakeEngine(_findings()).install(monkeypatch)
    run(capsys, "baseline", "pkg", "-o", "b.json")
    (proj / "pyproject.toml").write_text('[tool.reload-lint]\nbaseline = "b.json"\n')
    assert run(capsys, "check", "pkg")[0] == 0


def test_inline_suppression_and_show_suppressed(proj, capsys, monkeypatch):
    lines = ["x = 1\n"] * 30
    lines[9] = "layer.workspace = torch.empty(3)  # reload-lint: ignore[RL101] -- read at load\n"
    lines[14] = "z = 2  # reload-lint: ignore[RL102] -- nothing here\n"
    lines[15] = "w = 2  # reload-lint: ignore[RL101]\n"
    (proj / "pkg" / "a.py").write_text("".join(lines))
    FakeEngine(_findings(), base=proj).install(monkeypatch)
    code, out, err = run(capsys, "check", "pkg")
    assert code == 1
    assert "pkg/a.py:10:" not in out
    assert "pkg/a.py:15:8: RL905" in out and "pkg/a.py:16:8: RL904" in out
    assert "1 suppressed finding" in err
    code, out, _ = run(capsys, "check", "pkg", "--show-suppressed")
    assert "pkg/a.py:10:9: RL101" in out and "[suppressed: read at load]" in out
    # RL905 is not reported when the rule it names is not selected.
    code, out, _ = run(capsys, "check", "pkg", "--ignore", "RL102")
    assert "RL905" not in out


def test_allowlist_flag_and_config(proj, capsys, monkeypatch):
    fs = _findings()
    FakeEngine(fs).install(monkeypatch)
    (proj / "allow.toml").write_text(
        "[[allow]]\n"
        f'fingerprint = "{fs[1].fingerprint}"\n'
        'reason = "the partial is rebuilt before every capture"\n'
        'link = "https://example.invalid/x"\n'
    )
    code, out, _ = run(capsys, "check", "pkg", "--allowlist", "allow.toml")
    assert code == 1 and "RL103" not in out and "RL101" in out
    (proj / "pyproject.toml").write_text('[tool.reload-lint]\nallowlists = ["allow.toml"]\n')
    code, out, _ = run(capsys, "check", "pkg", "--show-suppressed")
    assert "allowlisted (allow.toml#1)" in out
    (proj / "allow.toml").write_text("[[allow]]\nfingerprint = 'x'\n")
    code, _, err = run(capsys, "check", "pkg")
    assert code == 2 and "`reason` is required" in err


def test_files_by_name_get_only_paths_and_excludes(proj, capsys, monkeypatch):
    eng = FakeEngine(_findings()).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg/a.py")
    assert code == 1 and "pkg/a.py" in out and "pkg/b.py" not in out
    call = eng.calls[-1]
    assert call["only_paths"] == {"pkg/a.py"}
    assert [p.resolve() for p in call["paths"]] == [proj.resolve()]  # whole project indexed
    (proj / "pyproject.toml").write_text('[tool.reload-lint]\nexclude = ["pkg/a.py"]\n')
    n = len(eng.calls)
    code, out, _ = run(capsys, "check", "pkg/a.py")
    assert code == 0 and "Found 0 findings." in out
    assert len(eng.calls) == n  # nothing left to report: the engine is not even run
    code, out, _ = run(capsys, "check", "pkg/a.py", "pkg/b.py")
    assert eng.calls[-1]["only_paths"] == {"pkg/b.py"} and code == 1
    # A directory keeps ordinary semantics.
    run(capsys, "check", "pkg")
    assert eng.calls[-1]["only_paths"] is None


def test_pre_commit_mode_keeps_out_of_scope_baseline_entries_fresh(proj, capsys, monkeypatch):
    FakeEngine(_findings()).install(monkeypatch)
    run(capsys, "baseline", "pkg", "-o", "b.json")
    code, _, err = run(capsys, "check", "pkg/a.py", "--baseline", "b.json", "--strict-baseline")
    assert code == 0 and "0 stale entries" in err


def test_diff_unresolvable_rev_exit_2(proj, capsys, monkeypatch):
    eng = FakeEngine(_findings()).install(monkeypatch)
    code, out, err = run(capsys, "check", "pkg", "--diff", "origin/main")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--diff origin/main" in err
    assert eng.calls == []  # failed before the (expensive) analysis


def test_unknown_format_combination_and_missing_path(proj, capsys, monkeypatch):
    FakeEngine([]).install(monkeypatch)
    code, _, err = run(capsys, "check", "nope/")
    assert code == 2 and "no such file" in err


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_every_format_deterministic_and_atomic_output(proj, capsys, monkeypatch, fmt):
    FakeEngine(_findings(), [file_error()]).install(monkeypatch)
    code1 = main(["check", "pkg", "--format", fmt, "-o", "r1"])
    code2 = main(["check", "pkg", "--format", fmt, "-o", "r2"])
    assert code1 == code2 == 1
    assert (proj / "r1").read_bytes() == (proj / "r2").read_bytes()
    assert (proj / "r1").read_bytes()


def test_github_format_lines(proj, capsys, monkeypatch):
    FakeEngine(_findings()).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg", "--format", "github")
    lines = out.splitlines()
    assert code == 1 and len(lines) == 2
    assert lines[0].startswith("::error file=pkg/a.py,line=10,col=9,title=RL101 ")


def test_statistics(proj, capsys, monkeypatch):
    FakeEngine(_findings()).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg", "--statistics")
    assert code == 1
    assert out.splitlines() == [
        "    1  RL101  unregistered-module-tensor",
        "    1  RL103  callable-captured-tensor",
    ]


def test_statistics_counts_file_errors(proj, capsys, monkeypatch):
    """An exit 3 (or a 1 with a bad file) must show why: RL9xx rows are counted too."""
    FakeEngine(_findings()[:1], [file_error(), file_error("pkg/c.py")]).install(monkeypatch)
    code, out, _ = run(capsys, "check", "pkg", "--statistics")
    assert code == 1
    assert out.splitlines() == [
        "    2  RL901  syntax-error",
        "    1  RL101  unregistered-module-tensor",
    ]


def test_pre_commit_hook_entries_parse():
    from pathlib import Path

    from reload_lint.cli import build_parser

    text = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    entries = [ln.split("entry:", 1)[1].split() for ln in lines if "entry:" in ln]
    ids = [ln.split("id:", 1)[1].strip() for ln in lines if ln.startswith("- id:")]
    assert "reload-lint" in ids and len(entries) == len(ids)
    for argv in entries:
        assert argv[0] == "reload-lint"
        args = build_parser().parse_args([*argv[1:], "pkg/a.py"])
        assert args.command == "check" and args.paths == ["pkg/a.py"]
    assert "require_serial: true" in text and "types: [python]" in text
