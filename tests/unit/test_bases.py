"""`--base SPEC`: a package audited against the tree it runs on (issue 26; docs/plugins.md).

Each tree here is written the way a plugin is: a vLLM-like base (a kernel class whose
post-load calls an overridable method, a first-load driver, with or without the layerwise
reload package) and a plugin package next to it.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from reload_lint import bases
from reload_lint.config import Config
from reload_lint.engine import choose_contract, run_check
from reload_lint.errors import ReloadLintError
from tests.unit._cli_util import run_cli

BASE_KERNEL = """
import torch


class BaseKernel:
    def process_weights_after_loading(self, layer):
        self._prepare(layer)
        # the base's own escape: the base release's finding, never the plugin's
        self.base_ws = torch.empty(8, device=layer.weight.device)

    def _prepare(self, layer):
        pass

    def apply_weights(self, layer, x):
        return x @ layer.weight + self.base_ws
"""

PLUGIN = """
import torch

from vllm.kernels.base import BaseKernel


class MyKernel(BaseKernel):
    def _prepare(self, layer):
        self.scratch = torch.empty(64, device=layer.weight.device)

    def apply_weights(self, layer, x):
        return super().apply_weights(layer, x) + self.scratch[:1]
"""

ONCE = """
import torch

from vllm.kernels.base import BaseKernel


class OnceMethod(BaseKernel):
    def create_weights(self, layer):
        layer.register_parameter("w_scale", torch.nn.Parameter(torch.empty(8), requires_grad=False))
        layer.register_parameter("zp", torch.nn.Parameter(torch.empty(8), requires_grad=False))
        layer.register_parameter("w_s2", torch.nn.Parameter(torch.empty(8), requires_grad=False))

    def process_weights_after_loading(self, layer):
        # derived once from a loaded weight: stale after `model.load_weights`
        self.w_t = layer.weight.t().contiguous()
        # a workspace no load writes: nothing to refresh
        self.ws = torch.empty(1024, device=layer.weight.device)
        # transformed in place once: the next load writes the checkpoint's scale there
        layer.w_scale.mul_(127.0)
        layer.zp *= 2
        layer.w_s2.copy_(layer.w_s2 / 7.0)
        # a write of other values, not a transform of the loaded ones
        layer.zp.copy_(torch.zeros(8))

    def apply_weights(self, layer, x):
        return x @ self.w_t * layer.w_scale + self.ws[:1] + layer.zp + layer.w_s2
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")


def _base_tree(root: Path, layerwise: bool) -> Path:
    files = {
        "vllm/__init__.py": "",
        "vllm/kernels/__init__.py": "",
        "vllm/kernels/base.py": BASE_KERNEL,
    }
    if layerwise:
        files["vllm/model_executor/__init__.py"] = ""
        files["vllm/model_executor/model_loader/__init__.py"] = ""
        files["vllm/model_executor/model_loader/reload/__init__.py"] = ""
        files["vllm/model_executor/model_loader/reload/layerwise.py"] = (
            "def initialize_layerwise_reload(model):\n    pass\n"
        )
    _write(root, files)
    return root


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    _write(tmp_path, {"plugin/__init__.py": "", "plugin/kernel.py": PLUGIN})
    return tmp_path


def _run(proj: Path, *base_specs: str, paths=("plugin",)):
    specs = bases.resolve_all(base_specs, proj)
    return run_check(list(paths), Config(), base_dir=proj, use_cache=False, bases=specs)


def test_subclass_escape_is_reported_only_with_the_base(proj):
    _base_tree(proj / "vllm-src", layerwise=True)
    alone = _run(proj)
    assert alone.findings == []
    assert alone.unresolved == ("BaseKernel",)
    got = _run(proj, "vllm-src")
    assert [(f.path, f.target) for f in got.findings] == [("plugin/kernel.py", "self.scratch")]
    f = got.findings[0]
    assert any("inherited by MyKernel" in s.note for s in f.trace)
    assert f.reader is not None and "plugin/kernel.py" in f.reader
    # the base's own escape (self.base_ws) is its release's, not reported here
    assert all(not bases.is_base_path(x.path) for x in got.findings)
    assert got.unresolved == ()
    assert got.contract[0] == "vllm-layerwise" and "layerwise reload" in got.contract[1]


def test_base_without_reload_package_is_the_load_weights_contract(proj):
    _base_tree(proj / "vllm-src", layerwise=False)
    (proj / "plugin" / "once.py").write_text(textwrap.dedent(ONCE), encoding="utf-8")
    got = _run(proj, "vllm-src")
    assert got.contract[0] == "vllm-load-weights"
    assert "no vllm/model_executor/model_loader/reload/" in got.contract[1]
    by_target = {f.target: f for f in got.findings}
    # nothing moves under that contract: the plain scratch and workspace are not reported,
    # the copy derived from the loaded weight is stale
    assert {(f.target, f.rule) for f in got.findings} == {
        ("self.w_t", "RL201"),
        ("layer.w_scale", "RL203"),
        ("layer.zp", "RL203"),
        ("layer.w_s2", "RL203"),
    }
    assert by_target["self.w_t"].rule == "RL201"
    assert by_target["self.w_t"].contract == "vllm-load-weights"
    assert "never re-runs post-load" in by_target["self.w_t"].message


def test_worker_running_the_layerwise_reload_decides_the_contract(tmp_path):
    w = tmp_path / "plugin" / "worker.py"
    w.parent.mkdir(parents=True)
    w.write_text(
        "from vllm.model_executor.model_loader.reload import initialize_layerwise_reload\n\n"
        "class Worker:\n"
        "    def update_weights(self, model, weights):\n"
        "        initialize_layerwise_reload(model)\n"
        "        model.load_weights(weights)\n",
        encoding="utf-8",
    )
    from reload_lint.discover import SourceFile

    base = _base_tree(tmp_path / "vllm-src", layerwise=False)
    name, why = choose_contract(
        [SourceFile(path=w, rel="plugin/worker.py")], bases.resolve_all([str(base)])
    )
    assert name == "vllm-layerwise" and "plugin/worker.py:5" in why


def test_replaced_first_load_driver_is_not_an_update_path(tmp_path):
    # a plugin re-implementing vLLM's first-load driver: it runs once, after the first load
    w = tmp_path / "plugin" / "patch.py"
    w.parent.mkdir(parents=True)
    w.write_text(
        "from vllm.model_executor.model_loader import utils\n\n"
        "def my_process_weights(model, model_config, target_device):\n"
        "    for _, module in model.named_modules():\n"
        "        qm = getattr(module, 'quant_method', None)\n"
        "        if qm is not None:\n"
        "            qm.process_weights_after_loading(module)\n\n"
        "utils.process_weights_after_loading = my_process_weights\n",
        encoding="utf-8",
    )
    from reload_lint.discover import SourceFile

    name, _ = choose_contract([SourceFile(path=w, rel="plugin/patch.py")])
    assert name == "vllm-layerwise"
    # the same loop in a function that is not the driver's replacement is an update path
    w.write_text(w.read_text().replace("utils.process_weights_after_loading = ", "_ = "))
    name, why = choose_contract([SourceFile(path=w, rel="plugin/patch.py")])
    assert name == "inplace-only" and "plugin/patch.py:4" in why


def test_cli_names_base_and_contract_and_note(proj, capsys):
    _base_tree(proj / "vllm-src", layerwise=True)
    code, out, err = run_cli(capsys, "check", "plugin", "--no-cache")
    assert code == 0
    note = [ln for ln in err.splitlines() if "note:" in ln]
    assert len(note) == 1 and "BaseKernel" in note[0] and "--base" in note[0]
    code, out, err = run_cli(capsys, "check", "plugin", "--no-cache", "--base", "vllm-src")
    assert code == 1 and "self.scratch" in out
    assert "base " in err and "contract vllm-layerwise" in err and "note:" not in err


def test_base_from_config_relative_to_pyproject(proj, capsys):
    _base_tree(proj / "vllm-src", layerwise=True)
    (proj / "pyproject.toml").write_text('[tool.reload-lint]\nbase = ["vllm-src"]\n')
    code, out, _ = run_cli(capsys, "check", "plugin", "--no-cache", "--format", "json")
    assert code == 1
    assert [f["target"] for f in json.loads(out)["findings"]] == ["self.scratch"]


def test_note_suggests_the_base_the_metadata_pins(proj, capsys):
    meta = proj / "plugin-0.1.dist-info" / "METADATA"
    meta.parent.mkdir()
    meta.write_text("Name: plugin\nRequires-Dist: vllm==0.30.0+cpu\n", encoding="utf-8")
    _, _, err = run_cli(capsys, "check", "plugin", "--no-cache")
    assert "--base vllm==0.30.0" in err


def test_note_suggests_the_version_gate(proj, capsys):
    (proj / "plugin" / "compat.py").write_text(
        "from vllm_plugin.utils import vllm_version_is\n"
        'if vllm_version_is("0.23.0"):\n    X = 1\n'
        'if vllm_version_is("0.23.0"):\n    Y = 1\n',
        encoding="utf-8",
    )
    _, _, err = run_cli(capsys, "check", "plugin", "--no-cache")
    assert "--base vllm==0.23.0" in err and "plugin/compat.py:2" in err


@pytest.mark.parametrize("spec", ["vllm>=0.30", "vllm==", "no/such/folder"])
def test_bad_base_spec_is_a_one_line_error(proj, capsys, spec):
    code, out, err = run_cli(capsys, "check", "plugin", "--base", spec)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1


def test_release_spec_drops_the_local_version(monkeypatch, tmp_path):
    seen = []

    def fake(pkg, version):
        seen.append((pkg, version))
        (tmp_path / pkg).mkdir(exist_ok=True)
        return tmp_path

    monkeypatch.setattr("reload_lint.sources.release_sources", fake)
    b = bases.resolve("vllm==0.30.0+cpu")
    assert seen == [("vllm", "0.30.0")] and b.label == "vllm==0.30.0"
    assert b.prefix == "@base/vllm-0.30.0"
    with pytest.raises(ReloadLintError):
        bases.resolve("torch==2.1")


PATCHES = """
import torch

from vllm.kernels.base import BaseKernel
from plugin.registry import register_patch

_original = BaseKernel.process_weights_after_loading


@register_patch(target="vllm.kernels.base.BaseKernel.process_weights_after_loading")
def patched_post_load(self, layer):
    _original(self, layer)
    # a transposed copy kept on the kernel object, rebuilt on every reload
    self.w_t = layer.weight.t().contiguous()


def patched_apply(self, layer, x):
    return x @ self.w_t + self.ws[:1]


def assigned_post_load(self, layer):
    self.ws = torch.empty(16, device=layer.weight.device)


def unrelated(self, layer):
    self.cfg = torch.empty(16)


BaseKernel.apply_weights = patched_apply
setattr(BaseKernel, "process_weights_after_loading", assigned_post_load)
helper_table = {"x": unrelated}
"""


def test_hooks_patched_onto_a_base_class_are_post_load_roots(proj):
    _base_tree(proj / "vllm-src", layerwise=True)
    _write(
        proj,
        {
            "plugin/registry.py": "def register_patch(target, reason=''):\n"
            "    return lambda fn: fn\n",
            "plugin/patches.py": PATCHES,
        },
    )
    got = _run(proj, "vllm-src")
    found = {(f.path, f.target): f for f in got.findings if f.path == "plugin/patches.py"}
    assert set(found) == {("plugin/patches.py", "self.w_t"), ("plugin/patches.py", "self.ws")}
    f = found[("plugin/patches.py", "self.w_t")]
    assert f.rule == "RL102"
    assert any("patched over BaseKernel's post-load" in s.note for s in f.trace)
    # a function in a table is not a patch: `unrelated` is no root
    assert not [x for x in got.findings if x.target == "self.cfg"]


LAYERS = """
import torch

from vllm.attention import AttentionLayerBase


class PlainLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(4, 4))

    def process_weights_after_loading(self, act_dtype):
        # a layer's own post-load the layerwise pass does not run (not an attention layer)
        self.w_t = self.weight.t().contiguous()

    def forward(self, x):
        return x @ self.w_t


class MyAttention(torch.nn.Module, AttentionLayerBase):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(4, 4))

    def process_weights_after_loading(self, act_dtype):
        # a deferred layer: its own post-load runs on every update
        self.w_t = self.weight.t().contiguous()

    def forward(self, x):
        return x @ self.w_t
"""


def test_layer_post_load_the_base_reload_does_not_run(proj):
    _base_tree(proj / "vllm-src", layerwise=True)
    _write(
        proj,
        {
            "vllm-src/vllm/attention.py": "class AttentionLayerBase:\n    pass\n",
            "plugin/layers.py": LAYERS,
        },
    )
    got = _run(proj, "vllm-src")
    found = {f.symbol for f in got.findings if f.path == "plugin/layers.py"}
    assert found == {"MyAttention.process_weights_after_loading"}


def test_a_ranged_requirement_names_its_inclusive_upper_bound():
    from reload_lint.bases import _ranged

    meta = "Name: p\nRequires-Dist: vllm!=0.25.0,!=0.29.*,<=0.31.0,>=0.22.1\n"
    spec, why = _ranged(meta)
    assert spec == "vllm==0.31.0" and "newest release" in why
    # an excluded bound names nothing: the user picks a release in the range
    spec, why = _ranged("Requires-Dist: vllm>=0.22,<=0.30.1,!=0.30.*\n")
    assert spec == "vllm==VERSION" and "<=0.30.1" in why
    spec, why = _ranged('Requires-Dist: vllm>=0.28; extra == "serve"\n')
    assert spec == "vllm==VERSION" and why == "a release in `vllm>=0.28`"
    assert _ranged("Requires-Dist: torch>=2.4\n") is None


def _notes(err: str) -> tuple[list, list]:
    lines = err.splitlines()
    return (
        [ln for ln in lines if "note:" in ln],
        [ln for ln in lines if ln.startswith("reload-lint: contract ")],
    )


def test_contract_line_on_a_plain_run(tmp_path, monkeypatch, capsys):
    # a package that subclasses nothing and imports no engine: still one contract line
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    _write(tmp_path, {"kern/__init__.py": "", "kern/ops.py": "import torch\n\nX = 1\n"})
    code, _out, err = run_cli(capsys, "check", "kern", "--no-cache")
    notes, contract = _notes(err)
    assert code == 0 and notes == []
    assert len(contract) == 1 and contract[0].startswith("reload-lint: contract vllm-layerwise: ")


def test_note_for_a_lazy_engine_import(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    entry = """
        def register():
            from vllm.model_executor.layers.quantization import register_quantization_config

            register_quantization_config("mine")(object)
    """
    _write(tmp_path, {"lazyq/__init__.py": entry})
    code, _out, err = run_cli(capsys, "check", "lazyq", "--no-cache")
    notes, contract = _notes(err)
    assert code == 0 and len(notes) == 1 and len(contract) == 1
    assert "imports vllm at lazyq/__init__.py:3 (inside a function)" in notes[0]
    assert "--base vllm==VERSION" in notes[0]
    # with the base given, no note
    _base_tree(tmp_path / "vllm-src", layerwise=True)
    code, _out, err = run_cli(capsys, "check", "lazyq", "--no-cache", "--base", "vllm-src")
    assert _notes(err)[0] == []


def test_note_for_a_derivative_requirement(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    meta = "Metadata-Version: 2.1\nName: dit-quant\nRequires-Dist: vllm-omni==0.24.*\n"
    _write(tmp_path, {"dit_quant/__init__.py": "SUFFIXES = ('.w', '.s')\n"})
    (tmp_path / "dit_quant-0.3.0.dist-info").mkdir()
    (tmp_path / "dit_quant-0.3.0.dist-info" / "METADATA").write_text(meta)
    code, _out, err = run_cli(capsys, "check", "dit_quant", "--no-cache")
    notes, _contract = _notes(err)
    assert code == 0 and len(notes) == 1
    assert "requires `vllm-omni==0.24.*`, a distribution built on vllm" in notes[0]
    assert "--base vllm==VERSION" in notes[0]


def test_no_note_for_a_vllm_tree(tmp_path, monkeypatch, capsys):
    # a vLLM tree (a fork repackaged) is its own base: the contract line, no note
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    _write(
        tmp_path,
        {
            "vllm/__init__.py": "from vllm.engine import Engine\n",
            "vllm/engine.py": "class Engine:\n    pass\n",
            "vllm/model_executor/model_loader/__init__.py": "",
        },
    )
    code, _out, err = run_cli(capsys, "check", "vllm", "--no-cache")
    notes, contract = _notes(err)
    assert code == 0 and notes == []
    assert len(contract) == 1 and "contract vllm-load-weights" in contract[0]


GONE = """
import torch

{imp}


class GoneMethod:
    def process_weights_after_loading(self, layer):
        layer.w_t = layer.weight.t().contiguous()

    def apply(self, layer, x):
        return x @ layer.w_t
"""


@pytest.mark.parametrize(
    "imp, reported",
    [
        # a module the base does not have, imported unconditionally: the file never imports
        ("from vllm.kernels.gone import GoneKernel", False),
        ("import vllm.kernels.gone", False),
        # the base has it
        ("from vllm.kernels.base import BaseKernel", True),
        # guarded: the file imports without it
        ("try:\n    from vllm.kernels.gone import GoneKernel\nexcept ImportError:\n    pass", True),
    ],
)
def test_a_file_whose_engine_import_the_base_lacks_never_runs(proj, capsys, imp, reported):
    _base_tree(proj / "vllm-src", layerwise=True)
    _write(proj, {"plugin/gone.py": GONE.replace("{imp}", imp)})
    got = _run(proj, "vllm-src")
    targets = {(f.path, f.target) for f in got.findings}
    assert (("plugin/gone.py", "layer.w_t") in targets) == reported
    assert bool(got.unimportable) == (not reported)
    if not reported:
        assert got.unimportable[0][:2] == ("plugin/gone.py", "vllm.kernels.gone")
        from reload_lint.cli.plan import Plan, base_notes

        notes = base_notes(Plan(paths=[proj / "plugin"], base=proj, bases=got.bases), got)
        assert any("imports `vllm.kernels.gone`" in n and "1 finding not" in n for n in notes)
