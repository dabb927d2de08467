"""Reload contracts: one fixture package, two verdicts; storage-preserving helpers by name.

The fixture is tests/fixtures/contracts_pkg (SGLang-shaped: a quant method whose post-load
registers new Parameters/buffers, swaps `.data`, writes in place, calls a copy-or-rebind helper
re-exported from `layers/utils/__init__.py`, and keeps a workspace on itself). Its markers are
also checked exactly by tests/unit/test_fixtures.py; here the contract differences are spelled
out, and `preserving-helpers` is shown to silence exactly the declared helper.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from _engine_util import write_files

from reload_lint.analysis import triage
from reload_lint.analysis import values as V
from reload_lint.analysis.contracts import (
    BUILTIN_PRESERVING,
    CONTRACT_NAMES,
    SGLANG_PRESERVING,
    make_contract,
)
from reload_lint.analysis.values import AV
from reload_lint.catalog import expected_findings
from reload_lint.config import Config, PerPath, load_config
from reload_lint.discover import SourceFile
from reload_lint.engine import auto_contract, run_check

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "contracts_pkg"
QUANT = "contracts_pkg/layers/quantization/int4_like.py"
HELPERS = "contracts_pkg/layers/utils/common.py"
HELPER = "contracts_pkg.layers.utils.common.keep_or_rebind"


def _line(rel: str, needle: str) -> int:
    for i, text in enumerate((FIXTURE / rel).read_text(encoding="utf-8").splitlines(), 1):
        if needle in text:
            return i
    raise AssertionError(f"{needle!r} not in {rel}")


def _run(cfg: Config, root: Path = FIXTURE):
    result = run_check([root], cfg, base_dir=root, use_cache=False)
    assert not result.errors, result.errors
    return result


def _found(cfg: Config, root: Path = FIXTURE) -> set[tuple[str, int, str]]:
    return {(f.path, f.line, f.rule) for f in _run(cfg, root).findings}


def _markers(contract: str) -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted(FIXTURE.rglob("*.py")):
        rel = path.relative_to(FIXTURE).as_posix()
        for line, rule in expected_findings(path.read_text(encoding="utf-8"), contract):
            out.add((rel, line, rule))
    return out


# ---------------------------------------------------------------- one package, two verdicts
@pytest.mark.parametrize("contract", CONTRACT_NAMES)
def test_fixture_matches_markers(contract):
    assert _found(Config(contract=contract)) == _markers(contract)


@pytest.mark.parametrize(
    "needle, layerwise, inplace",
    [
        ("layer.qweight = torch.nn.Parameter", None, "RL109"),
        # weight-derived, non-persistent: stale where copy-back skips such buffers (the
        # default facts for a tree without vLLM's reload module: the newest release's)
        ('layer.register_buffer("perm"', "RL201", "RL109"),
        ("layer.scales.data = layer.scales.data * 0.5", None, "RL106"),
        ("layer.sort_idx.copy_(", None, None),
        ("write_into(layer.g_idx", None, None),
        ("keep_or_rebind(layer", None, None),
        ("self.workspace = make_workspace", "RL102", "RL102"),
    ],
)
def test_verdict_per_contract(needle, layerwise, inplace):
    line = _line(QUANT, needle)
    for contract, want in (("vllm-layerwise", layerwise), ("inplace-only", inplace)):
        rules = {r for p, ln, r in _found(Config(contract=contract)) if p == QUANT and ln == line}
        assert rules == ({want} if want else set()), (contract, needle, rules)


def test_findings_name_their_contract():
    for contract in CONTRACT_NAMES:
        findings = _run(Config(contract=contract)).findings
        assert findings and {f.contract for f in findings} == {contract}


def test_fix_follows_the_contract():
    """The fix line is chosen per contract: registering is the fix under vllm-layerwise and
    itself a finding (RL109) under inplace-only, where writing into existing storage is."""
    inplace = _run(Config(contract="inplace-only")).findings
    assert inplace and all(f.fix for f in inplace)
    assert not [f.fix for f in inplace if f.fix.startswith(triage.REGISTER)]
    assert any(f.fix.startswith(triage.COPY) for f in inplace if f.rule in ("RL101", "RL109"))
    layerwise = {(f.path, f.line): f for f in _run(Config(contract="vllm-layerwise")).findings}
    assert layerwise and all(f.fix for f in layerwise.values())
    both = [(f, layerwise[f.path, f.line]) for f in inplace if (f.path, f.line) in layerwise]
    assert any(a.fix != b.fix for a, b in both)


def test_copy_or_rebind_body_is_judged_without_declaration():
    """Undeclared, the helper's body is judged: the `.data =` rebind behind a shape/dtype test
    runs on the first pass only (on an update the tensors match and it copies in place), the
    setattr branch is reported, inplace-only only."""
    body = {(HELPERS, _line(HELPERS, "setattr(module, name, Parameter"), "RL109")}
    found = _found(Config(contract="inplace-only"))
    assert body <= found
    assert (HELPERS, _line(HELPERS, "param.data = value"), "RL106") not in found
    assert not {f for f in _found(Config(contract="vllm-layerwise")) if f[0] == HELPERS}


# ---------------------------------------------------------------- preserving helpers
@pytest.mark.parametrize(
    "declared",
    [
        HELPER,  # the defining module
        "contracts_pkg.layers.utils.keep_or_rebind",  # the re-export callers import
        "layers.utils.common.keep_or_rebind",  # trailing components of the qualified name
    ],
)
def test_declared_helper_silences_exactly_its_body(declared):
    base = _found(Config(contract="inplace-only"))
    silenced = _found(Config(contract="inplace-only", preserving_helpers=[declared]))
    assert silenced == {f for f in base if f[0] != HELPERS}
    assert base - silenced and all(f[0] == HELPERS for f in base - silenced)


@pytest.mark.parametrize(
    "declared",
    [
        "keep_or_rebind",  # a bare name is not a qualified name
        "contracts_pkg.layers.quantization.keep_or_rebind",  # a sibling package
        "contracts_pkg.layers.utils.common.keep_or",  # a prefix of the name
        "other_pkg.utils.common.keep_or_rebind",
    ],
)
def test_other_names_silence_nothing(declared):
    base = _found(Config(contract="inplace-only"))
    assert _found(Config(contract="inplace-only", preserving_helpers=[declared])) == base


def test_preserving_helpers_and_contract_from_pyproject(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        textwrap.dedent(
            f"""
            [tool.reload-lint]
            contract = "inplace-only"
            preserving-helpers = ["{HELPER}"]
            """
        ),
        encoding="utf-8",
    )
    cfg = load_config(pyproject)
    assert cfg.contract == "inplace-only" and cfg.preserving_helpers == [HELPER]
    found = _found(cfg)
    assert found == {f for f in _markers("inplace-only") if f[0] != HELPERS}


@pytest.mark.parametrize(
    "pattern",
    ["contracts_pkg/layers/quantization/*", "contracts_pkg/layers/quantization/", "quantization"],
)
def test_per_path_contract_overrides_the_run_contract(pattern):
    """per-path globs follow config.path_matches (a bare name matches a folder at any depth)."""
    cfg = Config(
        contract="vllm-layerwise",
        per_path=[PerPath(pattern=pattern, contract="inplace-only")],
    )
    findings = _run(cfg).findings
    got = {(f.path, f.line, f.rule) for f in findings}
    # the quant file is judged inplace-only, the helper module (other path) vllm-layerwise
    assert got == {f for f in _markers("inplace-only") if f[0] == QUANT}
    assert {f.contract for f in findings} == {"inplace-only"}


def test_per_path_unknown_contract_is_an_error():
    from reload_lint.errors import ReloadLintError

    cfg = Config(per_path=[PerPath(pattern="contracts_pkg/*", contract="layerwise")])
    with pytest.raises(ReloadLintError, match="unknown reload contract"):
        _run(cfg)


# ---------------------------------------------------------------- choosing a contract
@pytest.mark.parametrize(
    "top, want",
    [("sglang", "inplace-only"), ("vllm", "vllm-layerwise"), ("mypkg", "vllm-layerwise")],
)
def test_auto_contract(top, want):
    files = [SourceFile(path=Path(f"{top}/x.py"), rel=f"{top}/x.py")]
    assert auto_contract(files) == want


DRIVER = """
import torch


def refresh(model: torch.nn.Module) -> None:
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        if method is not None:
            method.process_weights_after_loading(module)
"""
DELEGATES = """
class PluginMethod:
    def process_weights_after_loading(self, layer):
        self._prepare(layer)

    def _prepare(self, layer):
        self.kernel.process_weights_after_loading(layer)
"""


# vLLM 0.4's first-load driver, written inline in the loader: the loop walks a model the same
# function has just built, so it runs on the first load only
FIRST_LOAD = """
def _initialize_model(config):
    ...


class DefaultModelLoader:
    def load_model(self, *, model_config):
        model = _initialize_model(model_config)
        model.load_weights(self._get_weights())
        for _, module in model.named_modules():
            quant_method = getattr(module, "quant_method", None)
            if quant_method is not None:
                quant_method.process_weights_after_loading(module)
        return model.eval()
"""
# the same loop over a model it did not build: an update path re-running post-load
UPDATE = """
class Worker:
    def update_weights(self, weights):
        model = self.model_runner.model
        model.load_weights(weights)
        for _, module in model.named_modules():
            quant_method = getattr(module, "quant_method", None)
            if quant_method is not None:
                quant_method.process_weights_after_loading(module)
"""

# the same re-run, copying each refreshed tensor back into the first pass's storage through
# a helper of the file: the package keeps the storage itself, nothing is left on live modules
COPIES_BACK = """
def _keep_storage(module, before):
    for name, old in before.items():
        old.copy_(getattr(module, name))
        setattr(module, name, old)


def refresh_attention(model, dtype):
    for module in model.modules():
        before = {"W_UK_T": module.W_UK_T}
        module.process_weights_after_loading(dtype)
        _keep_storage(module, before)
"""
# quant methods that hand their layers to vLLM's layerwise online processing
ONLINE = """
from vllm.model_executor.model_loader.reload.layerwise import initialize_online_processing


class OnlineFp8MoEMethod:
    def create_weights(self, layer, *args):
        initialize_online_processing(layer)
"""


@pytest.mark.parametrize(
    "text, want",
    [
        (COPIES_BACK, "vllm-layerwise"),
        (COPIES_BACK + UPDATE, "inplace-only"),
        (ONLINE, "vllm-layerwise"),
        (ONLINE + UPDATE, "vllm-layerwise"),
        (FIRST_LOAD, "vllm-layerwise"),
        (UPDATE, "inplace-only"),
        ("from sglang.srt.layers.quantization import base_config\n", "inplace-only"),
        ("import vllm\nimport sglang\n", "vllm-layerwise"),
        (
            "from vllm.model_executor.layers.quantization.fp8 import Fp8LinearMethod\n",
            "vllm-layerwise",
        ),
        # its own update path re-runs post-load on live modules: nothing copies back after it
        (DRIVER, "inplace-only"),
        # a post-load delegating to a kernel's post-load is still post-load
        (DELEGATES, "vllm-layerwise"),
    ],
)
def test_auto_contract_out_of_tree(tmp_path, text, want):
    (tmp_path / "plugin").mkdir()
    path = tmp_path / "plugin" / "ext.py"
    path.write_text(text, encoding="utf-8")
    assert auto_contract([SourceFile(path=path, rel="plugin/ext.py")]) == want


def test_out_of_tree_layerwise_gets_the_newest_reload_facts(tmp_path):
    from reload_lint.analysis import reloadfacts

    path = tmp_path / "ext.py"
    path.write_text("import vllm\n", encoding="utf-8")
    assert reloadfacts.detect([SourceFile(path=path, rel="ext.py")]) is reloadfacts.NEWEST


def test_auto_detect_is_the_default_and_unknown_names_fail():
    from reload_lint.errors import ReloadLintError

    assert Config().contract == "auto"
    with pytest.raises(ReloadLintError, match="unknown reload contract"):
        _run(Config(contract="sglang"))


# ---------------------------------------------------------------- the contract table itself
def test_builtin_helpers_belong_to_inplace_only():
    assert set(BUILTIN_PRESERVING) == set(CONTRACT_NAMES)
    inplace, layerwise = make_contract("inplace-only"), make_contract("vllm-layerwise")
    for name in SGLANG_PRESERVING:
        assert inplace.preserves(name)
        assert not layerwise.preserves(name)
    # SGLang callers import through the package re-export (layers/utils/__init__.py: import *)
    assert inplace.preserves("sglang.srt.layers.utils.copy_or_rebind_param")
    assert inplace.preserves("sglang.srt.utils.bind_or_assign")
    # helpers that do not keep storage are not built in
    for name in (
        "sglang.srt.layers.quantization.utils.replace_parameter",
        "sglang.srt.utils.offloader.update_param",
    ):
        assert not inplace.preserves(name)


def test_config_helpers_add_to_builtins():
    c = make_contract("inplace-only", ["pkg.mod.helper", "  "])
    assert c.preserves("pkg.mod.helper") and c.preserves(SGLANG_PRESERVING[0])
    assert not c.preserves("") and not c.preserves("pkg.mod.other")
    assert make_contract("vllm-layerwise", ["pkg.mod.helper"]).preserves("pkg.mod.helper")


def test_nested_helpers_match_by_locals_name():
    c = make_contract("inplace-only", ["pkg.mod.C.pwal.<locals>.copy_back"])
    assert c.preserves("pkg.mod.C.pwal.<locals>.copy_back")
    assert not c.preserves("pkg.mod.C.other.<locals>.copy_back")


def _fresh():
    return AV(V.FRESH)


@pytest.mark.parametrize(
    "owner, attr, value, buffers, layerwise, inplace",
    [
        ("module", "w", AV(V.PARAM, value="fresh"), set(), None, "RL109"),
        ("module", "w", AV(V.PARAM, value="alias"), set(), None, None),
        ("module", "perm", _fresh(), {"perm"}, None, "RL109"),
        ("module", "perm", _fresh(), set(), "RL101", "RL101"),
        ("object", "ws", _fresh(), set(), "RL102", "RL102"),
        ("object", "w", AV(V.REG), set(), "RL107", None),
        ("data", "data", _fresh(), set(), None, "RL106"),
        ("data", "data", AV(V.VIEW), set(), None, None),
    ],
)
def test_judge_store_table(owner, attr, value, buffers, layerwise, inplace):
    for name, want in (("vllm-layerwise", layerwise), ("inplace-only", inplace)):
        verdict = make_contract(name).judge_store(owner, attr, value, buffers, None, None)
        assert (verdict[0] if verdict else None) == want, (name, owner, attr)


def test_judge_register_table():
    inplace, layerwise = make_contract("inplace-only"), make_contract("vllm-layerwise")
    assert inplace.judge_register(_fresh()) == "RL109"
    assert inplace.judge_register(AV(V.PARAM, value="fresh")) == "RL109"
    assert inplace.judge_register(AV(V.PARAM, value="alias")) is None
    assert inplace.judge_register(AV(V.REG)) is None
    assert layerwise.judge_register(_fresh()) is None


# ---------------------------------------------------------------- known engine gap
NS_FILES = {
    "nspkg/__init__.py": "",
    # nspkg/srt/ has no __init__.py: a namespace package, as sglang/srt/ is in SGLang 0.5.23
    "nspkg/srt/quant/__init__.py": "",
    "nspkg/srt/quant/method.py": """
        import torch

        from nspkg.srt.helpers import rebind


        class M:
            def create_weights(self, layer: torch.nn.Module) -> None:
                layer.register_parameter("w", torch.nn.Parameter(torch.ones(4)))

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                rebind(layer.w, layer.w * 2)

            def apply(self, layer, x):
                return x @ layer.w
        """,
    "nspkg/srt/helpers.py": """
        import torch


        def rebind(param: torch.nn.Parameter, new: torch.Tensor) -> None:
            param.data = new
        """,
}


def test_helpers_under_namespace_packages_are_followed(tmp_path):
    """PEP 420 folders (no __init__.py) inside a package are bridged: nspkg/srt/helpers.py is
    `nspkg.srt.helpers`, so the absolute import resolves and the helper's `.data =` is seen."""
    write_files(tmp_path, NS_FILES)
    found = _found(Config(contract="inplace-only"), tmp_path)
    assert ("nspkg/srt/helpers.py", 6, "RL106") in found


_SHAPES = {
    "copy_or_rebind": (
        """
        def helper(module, name, new):
            param = getattr(module, name, None)
            if param.data.shape == new.shape:
                param.data.copy_(new)
            else:
                param.data = new
        """,
        [],
    ),
    "copy_or_return": (
        """
        def helper(target, source):
            if target is not None:
                target.copy_(source)
                return target
            return source
        """,
        [],
    ),
    "always_rebinds": (
        """
        def helper(module, name, new):
            setattr(module, name, new)
        """,
        ["no `.copy_()` into storage it is handed"],
    ),
    "copies_into_its_own_tensor": (
        """
        def helper(module, name, new):
            tmp = new.clone()
            tmp.copy_(new)
            module.x.data = tmp
        """,
        ["no `.copy_()` into storage it is handed"],
    ),
    "copies_only": (
        """
        def helper(target, source):
            target.copy_(source)
        """,
        ["no rebinding alternative (`.data =`, `setattr`, returning the source)"],
    ),
}


@pytest.mark.parametrize("name", sorted(_SHAPES))
def test_copy_or_rebind_shape_checker(name):
    """The check tests/integration/test_sglang_preserving.py applies to the named helpers."""
    from reload_lint.analysis.contracts import copy_or_rebind_shape
    from reload_lint.index.extract import extract_module

    src, want = _SHAPES[name]
    rec = extract_module(textwrap.dedent(src), "m", False)
    assert copy_or_rebind_shape(rec["functions"]["helper"]) == want


@pytest.mark.parametrize(
    "reload_pkg, want", [(True, "vllm-layerwise"), (False, "vllm-load-weights")]
)
def test_a_vllm_tree_without_the_reload_package_updates_by_load_weights(tmp_path, reload_pkg, want):
    loader = tmp_path / "vllm" / "model_executor" / "model_loader"
    loader.mkdir(parents=True)
    if reload_pkg:
        (loader / "reload").mkdir()
    sub = tmp_path / "vllm" / "model_executor" / "layers"
    sub.mkdir()
    f = sub / "linear.py"
    f.write_text("x = 1\n", encoding="utf-8")
    # decided by the tree on disk, also when only a sub-folder is audited
    assert auto_contract([SourceFile(path=f, rel="vllm/model_executor/layers/linear.py")]) == want


def test_a_partial_vllm_tree_keeps_the_layerwise_default(tmp_path):
    (tmp_path / "vllm").mkdir()
    f = tmp_path / "vllm" / "x.py"
    f.write_text("x = 1\n", encoding="utf-8")
    assert auto_contract([SourceFile(path=f, rel="vllm/x.py")]) == "vllm-layerwise"
