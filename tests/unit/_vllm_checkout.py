"""A tiny stand-in for a vLLM checkout: one kernel file whose post-load store is a site the
bundled vLLM allowlist accepts, so a test can tell whether that allowlist was applied."""

from __future__ import annotations

import re
from pathlib import Path

from reload_lint.rules import data_dir
from reload_lint.suppress import load_allowlist


def accepted_rl101_site() -> tuple[str, str, str]:
    """(path, class, attribute) of the first RL101 entry of the bundled vLLM allowlist that
    names a `Class.process_weights_after_loading` storing `layer.<attr>`."""
    for e in load_allowlist(data_dir("allowlists") / "vllm.toml"):
        m = re.fullmatch(r"(\w+)\.process_weights_after_loading", e.symbol or "")
        t = re.fullmatch(r"layer\.(\w+)", e.target or "")
        if e.rule == "RL101" and m and t and e.path:
            return e.path, m.group(1), t.group(1)
    raise AssertionError("the bundled vLLM allowlist has no RL101 layer-attribute entry")


def write_checkout(root: Path) -> str:
    """Write the checkout under root; returns the kernel file's project-relative path."""
    rel, cls, attr = accepted_rl101_site()
    kernel = root / rel
    kernel.parent.mkdir(parents=True, exist_ok=True)
    for d in [kernel.parent, *kernel.parent.parents]:
        if d == root:
            break
        (d / "__init__.py").touch()
    kernel.write_text(
        "import torch\n\n\n"
        f"class {cls}:\n"
        "    def process_weights_after_loading(self, layer):\n"
        f"        layer.{attr} = torch.empty(8)\n\n"
        "    def apply_weights(self, layer, x):\n"
        f"        return layer.{attr} + x\n",
        encoding="utf-8",
    )
    return rel
