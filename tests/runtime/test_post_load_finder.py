"""The harness finds a layer's post-load wherever the layer holds it (reload.find_post_load),
and the fixed side lays several codemod patches of one file together (patched.merge_fixes)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from reload_lint.confirm import patched  # noqa: E402
from reload_lint.confirm.recipes.base import Recipe  # noqa: E402
from reload_lint.confirm.reload import find_post_load, post_load_component  # noqa: E402


class Method:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def process_weights_after_loading(self, layer):
        self.log.append((self.name, type(layer).__name__))


class SelfHook:
    def __init__(self, log):
        self.log = log

    def process_weights_after_loading(self):
        self.log.append(("nolayer", None))


def _layer(**attrs):
    m = torch.nn.Module()
    for k, v in attrs.items():
        setattr(m, k, v)
    return m


def _run(layer):
    calls = find_post_load(layer)
    for _, call in calls:
        call()
    return [where for where, _ in calls]


def test_quant_method_first_then_nothing_else():
    log = []
    layer = _layer(quant_method=Method(log, "qm"), scheme=Method(log, "scheme"))
    assert _run(layer) == ["quant_method"]
    assert log == [("qm", "Module")]


@pytest.mark.parametrize("attr", ["scheme", "kernel", "method_impl"])
def test_a_method_object_under_any_attribute_runs_with_the_layer(attr):
    log = []
    layer = _layer(**{attr: Method(log, attr)})
    assert _run(layer) == [attr]
    assert log == [(attr, "Module")]
    assert post_load_component(layer) is getattr(layer, attr)
    assert Recipe().post_load(layer) is True


def test_method_objects_in_a_list_or_dict_and_a_hook_without_the_layer():
    log = []
    layer = _layer(
        methods=[Method(log, "a"), Method(log, "b")],
        by_name={"c": Method(log, "c")},
        helper=SelfHook(log),
        w=torch.zeros(2),
    )
    assert _run(layer) == ["methods[0]", "methods[1]", "by_name['c']", "helper"]
    assert [n for n, _ in log] == ["a", "b", "c", "nolayer"]


def test_the_layers_own_hook_is_its_post_load_with_or_without_a_dtype():
    got = []

    class Plain(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scheme = Method(got, "scheme")  # the layer's own hook runs it, if it wants

        def process_weights_after_loading(self):
            got.append(("plain", None))

    class Attn(torch.nn.Module):
        def process_weights_after_loading(self, act_dtype):
            got.append(("attn", act_dtype))

    assert _run(Plain()) == ["self"]
    assert _run(Attn()) == ["self"]
    assert got == [("plain", None), ("attn", torch.get_default_dtype())]


def test_a_module_with_nothing_to_run():
    assert find_post_load(_layer(w=torch.zeros(1))) == []
    assert Recipe().post_load(_layer()) is False


BASE = "import torch\n\n\ndef f(layer):\n    layer.a = 1\n    layer.b = 2\n    return layer\n"


def _fix(tmp_path, monkeypatch, after: str):
    from reload_lint.fix.rewrite import unified

    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / "m.py").write_text(BASE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return patched.from_patch(unified("pkg/m.py", BASE, after))


def test_two_codemods_of_adjacent_lines_are_laid_together(tmp_path, monkeypatch):
    # both add the same helper (their diffs place it one blank line apart): written once
    helper = "import torch\n\n\ndef keep(x):\n    return x\n"
    one = _fix(tmp_path, monkeypatch, helper + BASE[len("import torch\n") :].replace(
        "layer.a = 1", "layer.a = keep(1)"))  # fmt: skip
    two = _fix(tmp_path, monkeypatch, helper + BASE[len("import torch\n") :].replace(
        "layer.b = 2", "layer.b = keep(2)"))  # fmt: skip
    both = patched.merge_fixes([one, two])
    text = both.files["pkg/m.py"]
    assert text.count("def keep") == 1
    assert "layer.a = keep(1)" in text and "layer.b = keep(2)" in text
    # the finding's line maps through the merged patch (to the lines its change block wrote)
    mapped = [text.splitlines()[n - 1].strip() for n in both.lines_for("pkg/m.py", 6, 6)]
    assert "layer.b = keep(2)" in mapped
    assert both.lines_for("pkg/m.py", 7, 7) == [text.splitlines().index("    return layer") + 1]
    assert patched.merge_fixes([one]) is one


def test_two_codemods_that_change_one_line_differently_are_refused(tmp_path, monkeypatch):
    one = _fix(tmp_path, monkeypatch, BASE.replace("layer.a = 1", "layer.a = 10"))
    two = _fix(tmp_path, monkeypatch, BASE.replace("layer.a = 1", "layer.a = 20"))
    with pytest.raises(patched.PatchError, match="differently"):
        patched.merge_fixes([one, two])


def test_the_fixed_side_needs_no_libcst(tmp_path):
    # the GPU machine has torch and the standard library only: laying codemod patches
    # together (and everything the confirm runner imports) must not import libcst
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(BASE)
    code = (
        "import sys; sys.modules['libcst'] = None\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import reload_lint.confirm.__main__, reload_lint.confirm.patched as p\n"
        "from reload_lint.fix.udiff import unified\n"
        f"base = {BASE!r}\n"
        "one = p.from_patch(unified('pkg/m.py', base, base.replace('a = 1', 'a = 10')))\n"
        "two = p.from_patch(unified('pkg/m.py', base, base.replace('b = 2', 'b = 20')))\n"
        "text = p.merge_fixes([one, two]).files['pkg/m.py']\n"
        "assert 'layer.a = 10' in text and 'layer.b = 20' in text\n"
    )
    root = Path(__file__).resolve().parents[2]
    got = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(root)},
    )
    assert got.returncode == 0, got.stderr
