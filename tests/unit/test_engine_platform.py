"""Platform branches (issue 26; analysis/platforms.py `PlatformBranchMixin`): a store behind an
`if` that the audited package's own platform class rules out is not reported, and `explain`
names the class and the predicate. The drop/keep lines on the CUDA-kind plugin are pinned by
tests/fixtures/miniplat; these are its variants (no platform class, another kind, two kinds,
overrides, a project base, a project `current_platform`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from _engine_util import check_files

from reload_lint.config import Config
from reload_lint.index.extract import extract_module

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "miniplat"
IMPL = "miniplat/attention/impl.py"
PLATFORM = "miniplat/platforms/accel.py"
CUDA_BRANCHES = {"self.staging", "self.w_uk"}  # (w_uk: the else of a False helper)
ROCM_BRANCHES = {
    "self.w_k_fp8",
    "self.w_k_scale",
    "self.rocm_ws",
    "self.w_shuffled",
    "self.rocm_tail",
}
OTHER_BRANCHES = {"self.host_ws", "self.tpu_ws", "self.xpu_ws"}  # not CUDA, TPU, XPU
ENV_DECIDES = {"self.staging_t", "self.w_split", "self.w_packed"}


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "proj"
    shutil.copytree(FIXTURE / "miniplat", dst / "miniplat")
    return dst


def _targets(root: Path, files: dict[str, str] | None = None) -> set[str]:
    result = check_files(root, files or {}, config=Config(contract="vllm-layerwise"))
    assert not result.errors
    return {f.target for f in result.findings if f.path == IMPL}


def _platform(enum: str, body: str = "") -> str:
    return (
        "from vllm.platforms.interface import Platform, PlatformEnum\n\n\n"
        f"class AccelPlatform(Platform):\n    _enum = PlatformEnum.{enum}\n{body}"
    )


def test_cuda_platform_drops_the_branches_it_never_takes(tmp_path):
    got = _targets(_copy(tmp_path))
    assert got == CUDA_BRANCHES | ENV_DECIDES


def test_without_a_platform_class_everything_is_reported(tmp_path):
    root = _copy(tmp_path)
    (root / PLATFORM).write_text("DEVICE = 'accel'\n", encoding="utf-8")
    got = _targets(root)
    assert got == CUDA_BRANCHES | ROCM_BRANCHES | OTHER_BRANCHES | ENV_DECIDES


def test_a_rocm_platform_keeps_the_rocm_branches_and_drops_the_cuda_ones(tmp_path):
    root = _copy(tmp_path)
    got = _targets(root, {PLATFORM: _platform("ROCM")})
    # `is_rocm() and <env>`: the env decides now; `not is_cuda()` holds; `is_rocm() or ...`
    assert got == {"self.w_uk"} | ROCM_BRANCHES | {"self.host_ws"} | ENV_DECIDES - {
        "self.staging_t"
    }


def test_platform_classes_of_two_kinds_decide_nothing(tmp_path):
    root = _copy(tmp_path)
    two = _platform("CUDA") + "\n\nclass OtherPlatform(Platform):\n    _enum = PlatformEnum.ROCM\n"
    got = _targets(root, {PLATFORM: two})
    assert got == CUDA_BRANCHES | ROCM_BRANCHES | OTHER_BRANCHES | ENV_DECIDES


def test_a_platform_class_without_a_kind_decides_nothing(tmp_path):
    root = _copy(tmp_path)
    got = _targets(root, {PLATFORM: _platform("CUDA").replace("_enum = ", "kind = ")})
    assert got == CUDA_BRANCHES | ROCM_BRANCHES | OTHER_BRANCHES | ENV_DECIDES


def test_an_override_in_the_platform_class_decides_its_predicate(tmp_path):
    # a CUDA-kind platform that says it is not CUDA (a plugin borrowing CUDA's code paths)
    root = _copy(tmp_path)
    body = (
        "\n    def is_cuda(self) -> bool:\n        return False\n"
        "\n    def is_rocm(self) -> bool:\n        return self._enum == PlatformEnum.ROCM\n"
        "\n    def is_xpu(self) -> bool:\n        return probe_xpu()\n"
    )
    got = _targets(root, {PLATFORM: _platform("CUDA", body)})
    # is_cuda() False: its block goes, `not is_cuda()` holds; is_xpu() is unknown: kept
    assert got == {"self.w_uk", "self.host_ws", "self.xpu_ws", "self.w_split", "self.w_packed"}


def test_the_kind_set_on_a_project_base_and_current_platform_of_the_package(tmp_path):
    root = _copy(tmp_path)
    base = (
        "from vllm.platforms.interface import Platform, PlatformEnum\n\n\n"
        "class AccelBase(Platform):\n    _enum = PlatformEnum.CUDA\n\n\n"
        "class AccelPlatform(AccelBase):\n    device_name = 'accel'\n"
    )
    # the package's own `current_platform`, an instance of its platform class
    init = (
        "from miniplat.platforms.accel import AccelPlatform\n\ncurrent_platform = AccelPlatform()\n"
    )
    impl = (root / IMPL).read_text(encoding="utf-8")
    impl = impl.replace(
        "from vllm.platforms import current_platform",
        "from miniplat.platforms import current_platform",
    )
    got = _targets(root, {PLATFORM: base, "miniplat/platforms/__init__.py": init, IMPL: impl})
    assert got == CUDA_BRANCHES | ENV_DECIDES


def test_current_platform_re_exported_by_a_project_module(tmp_path):
    root = _copy(tmp_path)
    impl = (
        (root / IMPL)
        .read_text(encoding="utf-8")
        .replace(
            "from vllm.platforms import current_platform",
            "from miniplat.compat import current_platform",
        )
    )
    compat = "from vllm.platforms import current_platform\n\n__all__ = ['current_platform']\n"
    got = _targets(root, {"miniplat/compat.py": compat, IMPL: impl})
    assert got == CUDA_BRANCHES | ENV_DECIDES


def test_platform_classes_of_vllm_itself_decide_nothing(tmp_path):
    root = _copy(tmp_path)
    (root / PLATFORM).write_text("DEVICE = 'accel'\n", encoding="utf-8")
    files = {
        "vllm/__init__.py": "",
        "vllm/platforms/__init__.py": "",
        "vllm/platforms/cuda.py": _platform("CUDA").replace("AccelPlatform", "CudaPlatform"),
    }
    got = _targets(root, files)
    assert got == CUDA_BRANCHES | ROCM_BRANCHES | OTHER_BRANCHES | ENV_DECIDES


def test_explain_names_the_platform_class_and_the_predicate(tmp_path, capsys, monkeypatch):
    import json

    from reload_lint.cli import main

    root = _copy(tmp_path)
    monkeypatch.chdir(root)
    line = next(
        i
        for i, text in enumerate((root / IMPL).read_text(encoding="utf-8").splitlines(), 1)
        if "self.w_k_fp8 =" in text
    )
    assert main(["explain", "--no-cache", "--format", "json", f"{IMPL}:{line}"]) == 0
    answer = json.loads(capsys.readouterr().out)["explain"][0]
    (d,) = [d for d in answer["decisions"] if d["target"] == "self.w_k_fp8"]
    assert d["status"] == "decided-safe" and d["fact"] == "platform-only"
    assert f"{PLATFORM}:7" in d["why"] and "PlatformEnum.CUDA" in d["why"]
    assert "`use_rocm_fused_bmm()` (miniplat/ops/switches.py:" in d["why"]
    assert "`current_platform.is_rocm()` is False" in d["why"]


def test_predicates_and_platform_kinds_are_lowered():
    src = (
        "import functools\n"
        "from vllm.platforms import current_platform\n"
        "from vllm.platforms.interface import Platform, PlatformEnum\n\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def fast():\n    '''doc'''\n    return current_platform.is_rocm() and ENV and x > 1\n\n"
        "@register\n"
        "def hooked():\n    return current_platform.is_rocm()\n\n"
        "def plain(x):\n    return x > 1\n\n"
        "class P(Platform):\n    _enum: PlatformEnum = PlatformEnum.XPU\n\n"
        "    def is_cuda_alike(self):\n"
        "        return self._enum not in (PlatformEnum.CUDA, PlatformEnum.ROCM)\n"
    )
    rec = extract_module(src, "pkg.m", False)
    fns = rec["functions"]
    assert fns["fast"]["ret_test"] == (
        ("term", "current_platform", "is_rocm()", True),
        ("term", "", "ENV", True),
        ("?",),
    )
    assert "ret_test" not in fns["hooked"]  # a decorator that may do anything
    assert "ret_test" not in fns["plain"]
    assert fns["P.is_cuda_alike"]["ret_test"] == (
        ("enum", False, ("PlatformEnum.CUDA", "PlatformEnum.ROCM")),
    )
    assert rec["classes"]["P"]["enum_attr"] == "PlatformEnum.XPU"
