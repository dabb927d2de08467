"""Issue 20: the commands a kernel-PR author types besides `check`: `allow` (append an
allowlist entry for a finding, atomically, keeping the file), `cache` / `cache clean`, and
`check --vllm X PATH...` narrowed to folders of a release."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reload_lint.cli import main
from reload_lint.gate.suppress import tomllib

KERNEL = """\
import torch


class Method:
    def process_weights_after_loading(self, layer):
        layer.w_t = layer.weight.t().contiguous()
        layer.perm = torch.argsort(layer.g_idx)

    def apply(self, layer, x):
        return (x @ layer.w_t)[:, layer.perm]
"""

EXISTING = """\
# team allowlist -- keep this comment
[meta]
codebase = "ours"

[[allow]]  # an older entry
rule = "RL101"
path = "other.py"
symbol = "X.process_weights_after_loading"
target = "layer.z"
reason = "never read"
link = "https://example.invalid/1"
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "kern.py").write_text(KERNEL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    return tmp_path


def _findings(capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["check", "--no-cache", "--format", "json", "--exit-zero"]) == 0
    return json.loads(capsys.readouterr().out)["findings"]


def test_allow_appends_an_entry_that_check_then_applies(project, capsys):
    found = _findings(capsys)
    assert {f["target"] for f in found} == {"layer.w_t", "layer.perm"}
    fp = next(f["fingerprint"] for f in found if f["target"] == "layer.perm")
    allow = project / "allow.toml"
    allow.write_text(EXISTING)
    reason = 'perm is "host only" here \\ really'
    assert main(["allow", fp, "--reason", reason, "--to", str(allow), "--no-cache"]) == 0
    text = allow.read_text()
    assert text.startswith(EXISTING), "what the user wrote is kept byte for byte"
    entries = tomllib.loads(text)["allow"]
    assert entries[-1]["target"] == "layer.perm" and entries[-1]["reason"] == reason
    assert main(["check", "--no-cache", "--allowlist", str(allow)]) == 1  # w_t still fails
    out = capsys.readouterr().out
    assert "layer.w_t" in out and "layer.perm" not in out
    # allowing it again writes nothing: it is already accepted
    assert main(["allow", fp, "--reason", "again", "--to", str(allow), "--no-cache"]) == 0
    assert allow.read_text() == text


def test_allow_uses_the_configured_allowlist_and_creates_it(project, capsys):
    fps = [f["fingerprint"] for f in _findings(capsys)]
    (project / "pyproject.toml").write_text('[tool.reload-lint]\nallowlists = ["ok.toml"]\n')
    assert main(["allow", *fps, "--reason", "measured safe", "--no-cache"]) == 0
    assert len(tomllib.loads((project / "ok.toml").read_text())["allow"]) == 2
    assert main(["check", "--no-cache"]) == 0


def test_allow_refuses_unknown_fingerprints_and_leaves_the_file(project, capsys):
    allow = project / "allow.toml"
    allow.write_text(EXISTING)
    rc = main(["allow", "0123456789abcdef0123", "--reason", "x", "--to", str(allow), "--no-cache"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "unknown fingerprint 0123456789abcdef0123" in err and len(err.splitlines()) == 1
    assert allow.read_text() == EXISTING


def test_allow_refuses_a_broken_allowlist_without_touching_it(project, capsys):
    fp = _findings(capsys)[0]["fingerprint"]
    allow = project / "allow.toml"
    allow.write_text("[[allow]\nbroken")
    assert main(["allow", fp, "--reason", "x", "--to", str(allow), "--no-cache"]) == 2
    assert "invalid allowlist TOML" in capsys.readouterr().err
    assert allow.read_text() == "[[allow]\nbroken"


def test_allow_needs_a_target_file_and_a_reason(project, capsys):
    fp = _findings(capsys)[0]["fingerprint"]
    assert main(["allow", fp, "--reason", "x", "--no-cache"]) == 2
    assert "--to FILE" in capsys.readouterr().err
    assert main(["allow", fp, "--reason", "  ", "--to", "a.toml", "--no-cache"]) == 2
    assert not (project / "a.toml").exists()


def test_cache_lists_and_cleans_only_its_own_layout(project, capsys):
    root = project / ".cache"
    (root / "wheels").mkdir(parents=True)
    (root / "wheels" / "vllm-9.9.9-cp38-abi3-any.whl").write_bytes(b"x" * 2048)
    (root / "sources" / "vllm-9.9.9" / "vllm").mkdir(parents=True)
    (root / "sources" / "vllm-9.9.9" / ".complete").write_text("w\n")
    (root / "sources" / "vllm-9.9.9" / "vllm" / "a.py").write_text("x = 1\n")
    (root / "sources" / "sglang-1.0").mkdir(parents=True)
    (root / "mine.txt").write_text("a user's file")
    capsys.readouterr()
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert "vllm-9.9.9-cp38-abi3-any.whl" in out and "2.0 KiB" in out
    assert "sglang-1.0 (incomplete)" in out and "total" in out
    assert main(["cache", "clean", "nothing-like-this"]) == 2
    assert main(["cache", "clean", "--dry-run", "vllm-9.9.9"]) == 0
    assert (root / "sources" / "vllm-9.9.9").exists()
    assert main(["cache", "clean", "vllm-9.9.9"]) == 0
    assert "removed 2 items" in capsys.readouterr().out
    assert not (root / "sources" / "vllm-9.9.9").exists()
    assert (root / "sources" / "sglang-1.0").exists()
    assert main(["cache", "clean"]) == 0
    assert sorted(os.listdir(root)) == ["mine.txt", "sources", "wheels"]
    assert main(["cache"]) == 0 and "(empty)" in capsys.readouterr().out


def test_this_repository_is_clean_under_its_own_config(monkeypatch, capsys):
    """`reload-lint check` at the repository root: its config excludes the fixtures."""
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    assert main(["check", "--no-cache", "-j", "1"]) == 0, capsys.readouterr().out[-2000:]


@pytest.mark.integration
def test_vllm_release_narrowed_to_a_folder(capsys):
    from reload_lint.sources import SourceError, release_sources

    try:
        release_sources("vllm", "0.25.1")
    except SourceError as exc:  # pragma: no cover - offline machine
        pytest.skip(str(exc))
    args = ["check", "--vllm", "0.25.1", "--format", "json", "--exit-zero"]
    assert main(args) == 0
    full = json.loads(capsys.readouterr().out)["findings"]
    folder = "vllm/model_executor/layers/quantization/utils"
    for given in (folder, folder.removeprefix("vllm/")):
        assert main([*args, given]) == 0
        narrowed = json.loads(capsys.readouterr().out)["findings"]
        want = [f for f in full if f["path"].startswith(folder + "/")]
        assert want and narrowed == want
    assert main([*args, "no/such/folder"]) == 2
    assert "no such file or folder in vllm 0.25.1" in capsys.readouterr().err


def test_a_folder_named_on_the_command_line_is_audited_even_if_excluded(project, capsys):
    """As ruff does for paths passed explicitly: `exclude` keeps `check` clean of the folder,
    naming the folder audits it; a file named (pre-commit) stays excluded."""
    (project / "fx").mkdir()
    (project / "kern.py").rename(project / "fx" / "kern.py")
    (project / "fx" / "gen").mkdir()
    (project / "fx" / "gen" / "k2.py").write_text(KERNEL)
    (project / "pyproject.toml").write_text('[tool.reload-lint]\nexclude = ["fx", "gen"]\n')
    capsys.readouterr()
    assert main(["check", "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["check", "--no-cache", "--format", "json", "--exit-zero", "fx"]) == 0
    paths = {f["path"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert paths == {"fx/kern.py"}  # `gen` does not match `fx`: it still applies below it
    assert main(["check", "--no-cache", "fx/kern.py"]) == 0
