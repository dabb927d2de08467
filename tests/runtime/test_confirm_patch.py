"""The fixed side from source: the codemod's patch applied to a copy of the sources on the import
path, one site per run, and ``confirm --source DIR`` (docs/runner.md, "The fixed side").

The fixture kernels stand in for vLLM: their module is patched as text, laid over the import
path, and the fixed side runs in a fresh interpreter that imports the patched copy. A patch that
does not fix the storage comes out red, so a green here is the patch's, not a monkeypatch's.
"""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from reload_lint.confirm.fixedside import new_homes  # noqa: E402
from reload_lint.confirm.patched import (  # noqa: E402
    PatchError,
    apply_file,
    build_overlay,
    from_patch,
    map_lines,
    parse_patch,
    sha256_text,
)
from reload_lint.confirm.runner import Options, confirm  # noqa: E402

from . import fixture_kernels as fk  # noqa: E402
from .test_confirm_cpu import MOD, ROOT, finding  # noqa: E402

SORT = "        layer.sort_idx = torch.argsort(layer.g_idx).to(torch.int64)\n"
STORE = "        self.workspace = torch.zeros(4, dtype=torch.int32)\n" + SORT
#: the storage-keeping shape the codemod writes for a kernel workspace
KEEP = (
    '        ws = getattr(self, "workspace", None)\n'
    "        if ws is None:\n"
    "            self.workspace = torch.zeros(4, dtype=torch.int32)\n"
    "        else:\n"
    "            ws.zero_()\n" + SORT
)


def diff_of(replace_with: str, old: str = STORE) -> str:
    src = Path(fk.__file__).read_text()
    assert src.count(old) == 1
    new = src.replace(old, replace_with)
    return "".join(
        difflib.unified_diff(
            src.splitlines(True), new.splitlines(True), f"a/{fk.PATH}", f"b/{fk.PATH}"
        )
    )


def run_with_patch(patch: str | None, **kw):
    f = finding("ScratchKernel.process_weights_after_loading", "self.workspace")
    opts = Options(device="cpu", replay_timeout=4.0, recipe_modules=(MOD,))
    if patch is not None:
        opts.patches = {f.fingerprint: (patch, sha256_text(patch), "keep, safe")}
    for k, v in kw.items():
        setattr(opts, k, v)
    recs = confirm([f], opts)
    return {("fixed" if r.fixed else "bug"): r for r in recs}


def test_codemod_patch_makes_the_fixed_side_green_in_an_isolated_run():
    patch = diff_of(KEEP)
    out = run_with_patch(patch)
    bug, fixed = out["bug"], out["fixed"]
    assert bug.verdict == "red" and bug.failure == "livelock", bug.reason
    assert fixed.verdict == "green", fixed.reason
    assert fixed.fix_source == "codemod"
    assert fixed.fix_patch_sha256 == sha256_text(patch)
    assert fixed.fix_files == [fk.PATH]
    assert "keep, safe" in fixed.fix
    # the site's own monkeypatch was not applied; the sibling target is held fixed, and named
    assert not any("workspace" in i for i in fixed.isolation)
    assert any("layer.sort_idx" in i for i in fixed.isolation)
    fixes = next(s for s in fixed.stages if s["stage"] == "fixes")
    assert fixes["ok"]
    assert not any(r["moved"] or r["freed"] for r in fixed.census["rows"])


def test_a_patch_that_keeps_the_escape_is_red_on_the_fixed_side():
    # the store rewritten but still a fresh allocation: the fixed side must run this text
    patch = diff_of("        self.workspace = torch.zeros(4, dtype=torch.int32) + 0\n" + SORT)
    out = run_with_patch(patch)
    fixed = out["fixed"]
    assert fixed.fix_source == "codemod"
    assert fixed.verdict == "red" and fixed.failure == "livelock", fixed.reason
    assert fixed.reason.startswith("fix does not hold")


def test_a_patch_that_does_not_apply_is_inconclusive_not_a_monkeypatch():
    patch = diff_of(KEEP).replace(" class ScratchKernel:", " class ScratchKernelRenamed:")
    out = run_with_patch(patch)
    fixed = out["fixed"]
    assert fixed.verdict == "inconclusive"
    assert fixed.fix_source == "codemod"
    assert "does not apply" in fixed.reason


def test_without_a_patch_the_monkeypatch_stands_in_and_says_so():
    out = run_with_patch(None)
    fixed = out["fixed"]
    assert fixed.verdict == "green", fixed.reason
    assert fixed.fix_source == "monkeypatch"
    assert fixed.fix_patch_sha256 is None
    assert "ScratchKernel.workspace" in fixed.fix


# -- the patch machinery ------------------------------------------------------------------------


def test_apply_and_map_lines_follow_the_hunks():
    old = "".join(f"l{i}\n" for i in range(1, 21))
    new = old.replace("l3\n", "l3\nA\n").replace("l10\n", "B1\nB2\n").replace("l15\n", "")
    patch = "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), "a/p/m.py", "b/p/m.py")
    )
    [fp] = parse_patch(patch)
    a = apply_file(old, fp)
    assert a.text == new
    lines = new.splitlines()
    assert [lines[n - 1] for n in map_lines(a, 10, 10)] == ["B1", "B2"]
    assert [lines[n - 1] for n in map_lines(a, 12, 12)] == ["l12"]
    assert [lines[n - 1] for n in map_lines(a, 15, 15)] == ["l16"]
    assert [lines[n - 1] for n in map_lines(a, 20, 20)] == ["l20"]
    with pytest.raises(PatchError):
        apply_file(old.replace("l9\n", "x\n"), fp)


def test_overlay_links_everything_but_the_patched_file(tmp_path):
    root = tmp_path / "root"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "__init__.py").write_text("")
    (root / "pkg" / "sub" / "m.py").write_text("X = 1\n")
    (root / "pkg" / "other.py").write_text("Y = 2\n")
    ov = build_overlay(tmp_path / "ov", root, {"pkg/sub/m.py": "X = 2\n"})
    assert (ov / "pkg" / "other.py").is_symlink()
    assert not (ov / "pkg" / "sub").is_symlink()
    assert (ov / "pkg" / "sub" / "m.py").read_text() == "X = 2\n"
    assert (root / "pkg" / "sub" / "m.py").read_text() == "X = 1\n"  # the original untouched
    code = "import pkg.sub.m as m, pkg.other as o; print(m.X, o.Y)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{ov}:{root}"},
        capture_output=True,
        text=True,
    )
    assert out.stdout.split() == ["2", "2"], out.stderr


def test_from_patch_refuses_a_wrong_hash_and_a_file_off_the_path():
    patch = diff_of(KEEP)
    with pytest.raises(PatchError, match="does not match"):
        from_patch(patch, sha256="0" * 64)
    with pytest.raises(PatchError, match="not on the import path"):
        from_patch(patch.replace(fk.PATH, "nowhere/x.py"))


def test_finding_patch_reads_the_remedy_and_its_flat_mirror():
    from reload_lint.confirm.patched import finding_patch

    remedy = {"patch": "P", "patch_sha256": "S", "shape": "keep", "applicability": "safe"}
    assert finding_patch({"remedy": remedy}) == ("P", "S", "keep, safe")
    assert finding_patch({"fix_patch": "P", "fix_patch_sha256": "S"}) == ("P", "S", "")
    assert finding_patch({"remedy": {**remedy, "patch": None}, "fix": "text"}) is None
    assert finding_patch({"fix": "register as buffer: ..."}) is None


def test_new_homes_reads_registrations_from_added_lines():
    patch = (
        "--- a/p.py\n+++ b/p.py\n@@ -1 +1,2 @@\n x\n"
        '+        layer.register_buffer("perm_t", perm, persistent=False)\n'
    )
    assert new_homes(patch) == ["layer.perm_t"]


# -- confirm --source DIR -----------------------------------------------------------------------


def _tree(root: Path, version: str, ops: bool = True) -> Path:
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("raise SystemExit('vllm must not be imported')\n")
    (root / "vllm" / "_version.py").write_text(f"__version__ = version = '{version}'\n")
    (root / "vllm" / "layer.py").write_text("A = 1\n")
    if ops:
        (root / "vllm" / "_C.abi3.so").write_bytes(b"\0")
    return root


def _confirm_source(tmp_path, src: Path, installed: Path):
    fnd = tmp_path / "f.json"
    fnd.write_text(
        json.dumps({"findings": [{"rule": "RL101", "path": "vllm/layer.py", "line": 1}]})
    )
    return subprocess.run(
        [sys.executable, "-m", "reload_lint", "confirm", "--findings", str(fnd)]
        + ["--source", str(src), "-o", str(tmp_path / "e.json")],
        env={"PYTHONPATH": f"{ROOT}:{installed}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


def test_source_with_a_different_version_exits_2_with_one_line(tmp_path):
    installed = _tree(tmp_path / "site", "0.25.1")
    branch = _tree(tmp_path / "branch", "0.26.0", ops=False)
    out = _confirm_source(tmp_path, branch, installed)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert "0.26.0" in lines[0] and "0.25.1" in lines[0]
    assert not (tmp_path / "e.json").exists()


def test_source_checks_pass_for_the_same_release(tmp_path):
    from reload_lint.confirm.source import base_version, check_versions, read_version

    installed = _tree(tmp_path / "site", "0.25.1")
    branch = _tree(tmp_path / "branch", "0.25.1", ops=False)
    (branch / "vllm" / "layer.py").write_text("A = 2\n")
    sys.path.insert(0, str(installed))
    try:
        got = check_versions(branch)
        from reload_lint.confirm.source import source_fix

        fix = source_fix(branch)
    finally:
        sys.path.remove(str(installed))
    assert got["source_version"] == "0.25.1" and got["compiled_ops"] == ["_C.abi3.so"]
    assert fix.kind == "source" and list(fix.files) == ["vllm/layer.py"]
    assert fix.files["vllm/layer.py"] == "A = 2\n"
    assert read_version(branch) == ("0.25.1", "vllm/_version.py")
    assert base_version("0.25.2.dev5+g1a2b") == "0.25.2"


def test_source_without_compiled_ops_importable_exits_2(tmp_path):
    installed = _tree(tmp_path / "site", "0.25.1", ops=False)
    branch = _tree(tmp_path / "branch", "0.25.1", ops=False)
    out = _confirm_source(tmp_path, branch, installed)
    assert out.returncode == 2
    assert "no compiled ops" in out.stderr


LAYER = """import torch


def weight_loader(param, loaded):
    param.data.copy_(loaded)


class Method:
    def create_weights(self, layer, n_in, n_out):
        w = torch.nn.Parameter(torch.empty(n_out, n_in), requires_grad=False)
        s = torch.nn.Parameter(torch.empty(n_out), requires_grad=False)
        w.weight_loader = weight_loader
        s.weight_loader = weight_loader
        layer.register_parameter("weight", w)
        layer.register_parameter("weight_scale", s)

    def process_weights_after_loading(self, layer):
        layer.w_t = (layer.weight.data * layer.weight_scale.data[:, None]).t().contiguous()

    def apply(self, layer, x):
        return x @ layer.w_t
"""
KEEP_W_T = """        w_t = (layer.weight.data * layer.weight_scale.data[:, None]).t().contiguous()
        if getattr(layer, "w_t", None) is not None:
            layer.w_t.copy_(w_t)
        else:
            layer.w_t = w_t
"""
RECIPE = """import torch

from reload_lint.confirm.recipes import Built, Recipe, register


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        from vllm.int8 import Method  # the checkout's module on the fixed side

        self.quant_method = Method()
        self.quant_method.create_weights(self, 8, 4)

    def forward(self, x):
        return self.quant_method.apply(self, x)


@register
class Int8(Recipe):
    name = "stand-in-int8"
    paths = ("vllm/int8.py",)
    classes = ("Method",)

    def construct(self, device):
        layer = Layer()
        return Built(model=layer, layer=layer, forward=layer)

    def checkpoint(self, seed, device):
        g = torch.Generator().manual_seed(seed)
        return {"weight": torch.randn(4, 8, generator=g), "weight_scale": torch.rand(4, generator=g)}

    def example_input(self, device):
        return torch.randn(3, 8, generator=torch.Generator().manual_seed(5))
"""


def test_source_dir_fixed_side_runs_the_checkout_and_says_so(tmp_path):
    installed = _tree(tmp_path / "site", "0.25.1")
    (installed / "vllm" / "__init__.py").write_text("")
    (installed / "vllm" / "int8.py").write_text(LAYER)
    branch = _tree(tmp_path / "branch", "0.25.1", ops=False)
    (branch / "vllm" / "__init__.py").write_text("")
    store = "        layer.w_t = (layer.weight.data * layer.weight_scale.data[:, None]).t().contiguous()\n"
    (branch / "vllm" / "int8.py").write_text(LAYER.replace(store, KEEP_W_T))
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "int8_recipe.py").write_text(RECIPE)
    line = LAYER.splitlines().index(store.rstrip("\n")) + 1
    f = {
        "rule": "RL101",
        "path": "vllm/int8.py",
        "line": line,
        "symbol": "Method.process_weights_after_loading",
        "target": "layer.w_t",
        "fingerprint": "cd" * 10,
    }
    (tmp_path / "f.json").write_text(json.dumps({"findings": [f]}))
    out = subprocess.run(
        [sys.executable, "-m", "reload_lint", "confirm", "--findings", "f.json", "--recipes"]
        + ["int8_recipe", "--source", str(branch), "-o", "e.json"],
        env={"PYTHONPATH": f"{ROOT}:{installed}:{tmp_path / 'rec'}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert out.returncode == 1, out.stderr  # red on the bug side
    doc = json.loads((tmp_path / "e.json").read_text())
    by_side = {r["fixed"]: r for r in doc["evidence"]}
    assert by_side[False]["verdict"] == "red", by_side[False]["reason"]
    fixed = by_side[True]
    assert fixed["verdict"] == "green", fixed["reason"]
    assert fixed["fix_source"] == "source" and fixed["fix_files"] == ["vllm/int8.py"]
    assert doc["environment"]["source"]["source_version"] == "0.25.1"
    assert (
        "fixed side from source: 0 red-observed, 0 red-unobserved, 0 masked, 1 green, "
        "0 not-applicable" in out.stderr
    )
