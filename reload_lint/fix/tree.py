"""What the audited tree offers a fix: its `replace_parameter` functions (vLLM 0.25.1 has two:
`vllm.model_executor.utils.replace_parameter(layer, param_name, new_data, prefer_copy=False)`
and `...quantization.utils.layer_utils.replace_parameter(mod, name, new)`), read from the
sources with `ast` (nothing audited is imported), and the attribute names the tree registers
as Parameters (register_buffer refuses a name that is already a Parameter)."""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

_REGISTERED = re.compile(
    r"""(?:register_parameter|replace_parameter)\(\s*(?:[\w.]+\s*,\s*)?["'](\w+)["']"""
)


@dataclass
class TreeApi:
    #: module -> parameter names of its top-level `replace_parameter`
    replace_parameter: dict[str, list[str]] = field(default_factory=dict)
    parameter_names: set[str] = field(default_factory=set)

    def prefer_copy_module(self) -> str | None:
        """The module whose `replace_parameter` takes `prefer_copy` (the shortest name when
        several do), else None."""
        mods = sorted(
            (m for m, ps in self.replace_parameter.items() if "prefer_copy" in ps),
            key=lambda m: (len(m), m),
        )
        return mods[0] if mods else None


def _module_of(rel: str) -> str:
    parts = rel[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def scan(base: Path, roots: list[Path]) -> TreeApi:
    api = TreeApi()
    seen: set[Path] = set()
    for root in roots:
        root = Path(root)
        walk = [(str(root.parent), [], [root.name])] if root.is_file() else os.walk(root)
        for dirpath, dirnames, filenames in walk:
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
            for fn in filenames:
                if not fn.endswith(".py"):
                    continue
                p = Path(dirpath) / fn
                if p in seen or not p.is_file():  # a FIFO named x.py would block a read
                    continue
                seen.add(p)
                try:
                    text = p.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                api.parameter_names.update(_REGISTERED.findall(text))
                if "def replace_parameter" not in text:
                    continue
                try:
                    tree = ast.parse(text)
                    rel = p.resolve().relative_to(Path(base).resolve()).as_posix()
                except (SyntaxError, ValueError):
                    continue
                for node in tree.body:
                    if isinstance(node, ast.FunctionDef) and node.name == "replace_parameter":
                        a = node.args
                        names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
                        api.replace_parameter[_module_of(rel)] = names
    return api
