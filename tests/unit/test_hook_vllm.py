"""Issue 20: pre-commit's hook and `check --diff REV` on a vLLM tree report every finding
that passes through an edited file, not only those located in it: a helper edit
(`marlin_utils.py`), an experts-constructor edit and an oracle edit each fail the hook, and
the report names the step the edit touched (`via`). A copy of the cached vLLM 0.25.1
sources in a git repository; skipped when the sources are not cached."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _gate_util import GIT_ENV, git

from reload_lint.cli import main
from reload_lint.sources import cache_root

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HELPER = "vllm/model_executor/layers/quantization/utils/marlin_utils.py"
CTOR = "vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py"
ORACLE = "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py"
QUIET = "vllm/model_executor/layers/quantization/utils/w8a8_utils.py"  # on no finding's path


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    src = cache_root() / "sources" / "vllm-0.25.1"
    if not (src / "vllm").is_dir():
        pytest.skip("vLLM 0.25.1 sources not cached (python scripts/bench.py fetches them)")
    root = tmp_path_factory.mktemp("hook") / "vllm-0.25.1"
    shutil.copytree(src, root, ignore=shutil.ignore_patterns("*.pyc", "__pycache__"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "release")
    return root


@pytest.fixture
def repo(tree, monkeypatch, tmp_path):
    monkeypatch.chdir(tree)
    for k, v in GIT_ENV.items():
        monkeypatch.setenv(k, v)
    head = git(tree, "rev-parse", "HEAD")
    yield tree
    git(tree, "reset", "-q", "--hard", head)
    git(tree, "clean", "-qfd")


def edit(root: Path, rel: str, old: str, new: str) -> None:
    p = root / rel
    text = p.read_text(encoding="utf-8")
    assert text.count(old) == 1, (rel, old)
    p.write_text(text.replace(old, new), encoding="utf-8")


def cache_dir(root: Path) -> str:
    return str(root.parent / "cache")  # one pack for the module's runs, outside the tree


def run_json(capsys, *args: str) -> tuple[int, list[dict]]:
    capsys.readouterr()
    rc = main(["check", "--cache-dir", cache_dir(Path.cwd()), "--format", "json", *args])
    return rc, json.loads(capsys.readouterr().out)["findings"]


SORTED = "    return g_idx[g_idx_sort_indices], g_idx_sort_indices\n"
AS_PARAM = (
    "    return g_idx[g_idx_sort_indices], torch.nn.Parameter(\n"
    "        g_idx_sort_indices, requires_grad=False\n"
    "    )\n"
)


def test_helper_edit_fails_the_hook_and_diff(repo, capsys, tmp_path):
    # the user's base: the helper returns a Parameter; today's findings are the baseline
    edit(repo, HELPER, SORTED, AS_PARAM)
    git(repo, "commit", "-qam", "helper returns a Parameter")
    baseline = tmp_path / "baseline.toml"
    capsys.readouterr()
    assert main(["baseline", "--cache-dir", cache_dir(repo), "-o", str(baseline), "."]) == 0
    rc, found = run_json(capsys, "--baseline", str(baseline), HELPER)
    assert rc == 0 and found == []  # the hook passes before the edit
    # the edit: the helper returns a plain tensor again
    edit(repo, HELPER, AS_PARAM, SORTED)
    rc, found = run_json(capsys, "--baseline", str(baseline), HELPER)
    assert rc == 1
    (f,) = found
    assert (f["rule"], f["target"]) == ("RL101", "layer.g_idx_sort_indices")
    assert f["path"] != HELPER  # located in the kernel that stores it...
    assert [s["path"] for s in f["via"]] == [HELPER]  # ...reported through the helper
    assert "argsort" in f["via"][0]["note"]
    # `--diff HEAD`: only the return line changed; the step (the argsort line above it) is
    # in the same helper
    rc, found = run_json(capsys, "--diff", "HEAD", "--baseline", str(baseline), ".")
    assert rc == 1
    assert [(f["target"], [s["path"] for s in f["via"]]) for f in found] == [
        ("layer.g_idx_sort_indices", [HELPER])
    ]
    # text output says which step
    capsys.readouterr()
    assert main(["check", "--cache-dir", cache_dir(repo), "--baseline", str(baseline), HELPER]) == 1
    out = capsys.readouterr().out
    assert f"    via {HELPER}:" in out


def test_experts_constructor_edit_fails_the_hook(repo, capsys):
    rc, found = run_json(capsys, "--exit-zero", ".")
    assert not any(f["path"] == CTOR for f in found)  # reporting by location passed it
    anchor = "        self.use_dp = moe_config.moe_parallel_config.dp_size > 1\n"
    edit(
        repo,
        CTOR,
        anchor,
        anchor + "        self.expert_bias = torch.zeros(self.num_experts, device=self.device)\n",
    )
    new_line = (repo / CTOR).read_text().splitlines().index(
        "        self.expert_bias = torch.zeros(self.num_experts, device=self.device)"
    ) + 1
    rc, found = run_json(capsys, CTOR)
    assert rc == 1 and found
    assert all(f["path"] != CTOR and {s["path"] for s in f["via"]} == {CTOR} for f in found)
    # the new allocation is one of the steps reported
    assert any(s["line"] == new_line for f in found for s in f["via"])
    rc, found = run_json(capsys, "--diff", "HEAD", ".")
    assert rc == 1 and any(s["line"] == new_line for f in found for s in f["via"])


def test_oracle_edit_fails_the_hook(repo, capsys):
    rc, found = run_json(capsys, "--exit-zero", ".")
    assert not any(f["path"] == ORACLE for f in found)
    # the oracle now prefers the modular TRT-LLM experts
    edit(
        repo,
        ORACLE,
        "return [TrtLlmMxfp4ExpertsMonolithic, TrtLlmMxfp4ExpertsModular]",
        "return [TrtLlmMxfp4ExpertsModular, TrtLlmMxfp4ExpertsMonolithic]",
    )
    rc, found = run_json(capsys, ORACLE)
    assert rc == 1 and found
    assert all({s["path"] for s in f["via"]} == {ORACLE} for f in found)
    rc, diffed = run_json(capsys, "--diff", "HEAD", ".")
    assert rc == 1 and diffed
    assert all(any(s["path"] == ORACLE for s in f["via"]) for f in diffed)


def test_edit_nothing_passes_through_passes(repo, capsys):
    rc, found = run_json(capsys, "--exit-zero", ".")
    steps = {s["path"] for f in found for s in f["trace"]} | {f["path"] for f in found}
    assert QUIET not in steps
    with open(repo / QUIET, "a", encoding="utf-8") as fh:
        fh.write("\n\ndef _unused_helper():\n    return 1\n")
    rc, found = run_json(capsys, QUIET)
    assert (rc, found) == (0, [])
    rc, found = run_json(capsys, "--diff", "HEAD", ".")
    assert (rc, found) == (0, [])
