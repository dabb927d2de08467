"""Never-read stores (reload_lint/unread.py): a post-load store whose attribute nothing in the tree
or its base reads is not a finding; any read of the name (an attribute load, the name as a
string, a dynamically built name that could be it) keeps it, and the check sees edits of other
files through the cache."""

from __future__ import annotations

from _engine_util import check_files, write_files

from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.unread import dynamic_fragments, name_tokens, target_attr

QUANT = """
import torch
from torch.nn import Parameter


class PluginLinearMethod:
    def create_weights(self, layer, n, k):
        layer.register_parameter("weight", Parameter(torch.empty(n, k), requires_grad=False))

    def process_weights_after_loading(self, layer):
        layer.w_fp32 = layer.weight.to(torch.float32)
        layer.w_t = layer.weight.t().contiguous()

    def apply(self, layer, x):
        # the layer's class is not known here: the reader search cannot be complete
        return layer.npu_run(x, layer.w_t)
"""


def _targets(res):
    return {f.target for f in res.findings}


def test_a_package_audited_alone_keeps_it(tmp_path):
    # the engine that drives the package is not in view: it may read the name
    res = check_files(tmp_path, {"pkg/__init__.py": "", "pkg/quant.py": QUANT})
    assert {"layer.w_t", "layer.w_fp32"} <= _targets(res)


def test_a_store_nothing_reads_is_not_reported(tmp_path):
    res = check_files(tmp_path, {"vllm/__init__.py": "", "vllm/quant.py": QUANT})
    got = _targets(res)
    assert "layer.w_t" in got  # read by apply
    assert "layer.w_fp32" not in got


def test_any_read_of_the_name_keeps_it(tmp_path):
    reads = {
        "attr": "def fwd(layer, x):\n    return x @ layer.w_fp32\n",
        "getattr": "def fwd(layer, x):\n    return x @ getattr(layer, 'w_fp32')\n",
        "names": "NAMES = ['w_fp32']\n\ndef fwd(layer, x):\n    return [getattr(layer, n) for n in NAMES]\n",
        "fstring": "def fwd(layer, x, p):\n    return x @ getattr(layer, f'{p}_fp32')\n",
        "concat": "def fwd(layer, x, p):\n    return x @ getattr(layer, p + '_fp32')\n",
        "format": "def fwd(layer, x, p):\n    return x @ getattr(layer, '{}_fp32'.format(p))\n",
    }
    for name, text in reads.items():
        root = tmp_path / name
        res = check_files(
            root, {"vllm/__init__.py": "", "vllm/quant.py": QUANT, "vllm/fwd.py": text}
        )
        assert "layer.w_fp32" in _targets(res), name


def test_a_store_or_a_longer_name_is_not_a_read(tmp_path):
    other = (
        "def reset(layer):\n"
        "    layer.w_fp32 = None\n"
        "    layer.w_fp32x = 1\n"
        "    return layer.w_fp32_scale\n"
    )
    res = check_files(
        tmp_path, {"vllm/__init__.py": "", "vllm/quant.py": QUANT, "vllm/o.py": other}
    )
    assert "layer.w_fp32" not in _targets(res)


def test_explain_names_the_reason(tmp_path, capsys):
    from _cli_util import run_cli

    write_files(tmp_path, {"vllm/__init__.py": "", "vllm/quant.py": QUANT})
    line = next(i for i, t in enumerate(QUANT.splitlines(), 1) if "w_fp32 =" in t)
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, err = run_cli(capsys, "explain", f"vllm/quant.py:{line}")
    finally:
        os.chdir(cwd)
    assert "never read" in out, out + err


def test_an_edit_elsewhere_that_adds_the_only_read_is_seen_through_the_cache(tmp_path):
    cache = tmp_path / "cache"
    root = tmp_path / "proj"
    write_files(root, {"vllm/__init__.py": "", "vllm/quant.py": QUANT, "vllm/fwd.py": "X = 1\n"})

    def run(use_cache=True):
        return run_check([root], Config(), base_dir=root, use_cache=use_cache, cache_dir=cache)

    assert "layer.w_fp32" not in _targets(run())
    (root / "vllm/fwd.py").write_text("def fwd(layer, x):\n    return x @ layer.w_fp32\n")
    warm = run()
    assert "layer.w_fp32" in _targets(warm)
    assert [f.to_json() for f in warm.findings] == [f.to_json() for f in run(False).findings]
    (root / "vllm/fwd.py").write_text("X = 2\n")
    assert "layer.w_fp32" not in _targets(run())


def test_tokens_and_fragments():
    text = "a.b = 1\nx = y .  c\ns = 'd_e'\nz = getattr(m, f'{p}_scale_inv' + 'ab')\n"
    toks = name_tokens(text)
    assert {"b", "c", "d_e"} <= set(toks) and list(toks) == sorted(toks)
    assert dynamic_fragments(text) == ("_scale_inv",)
    assert dynamic_fragments("x = f'{p}_scale'\n") == ()  # no dynamic access on the line
    assert target_attr("layer.w13.data") == "w13"
    assert target_attr("self.cache[...]") == "cache"
    assert target_attr("scale") == ""
    assert target_attr("layer.<dynamic>") == ""
