"""Issue 26: the post-load root's first parameter after `self` is the layer, whatever its name."""

from __future__ import annotations

import pytest
from _cli_util import run_cli

KERN = """import torch


class K(torch.nn.Module):
    def process_weights_after_loading(self, {p}):
        {p}.w_t = {p}.weight.t().contiguous()
"""


@pytest.mark.parametrize("name", ["l", "lyr", "target", "layer"])
def test_first_param_of_the_root_is_the_layer(tmp_path, monkeypatch, capsys, name):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "k.py").write_text(KERN.format(p=name))
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "check", "pkg")
    assert "RL101" in out and f"{name}.w_t" in out, out + err
