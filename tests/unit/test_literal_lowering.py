"""Issue 26: no file lost to a literal. Every literal form Python accepts lowers without an
error; before, `MAGIC = b"GGUF" b"\\x00"` made the whole file RL906 (bytes failed to join)."""

from __future__ import annotations

import pytest

from reload_lint.index.extract import extract_module

LITERALS = [
    'b"GGUF" b"\\x00"',
    '(b"a"\n    rb"b" Rb"c")',
    'rb"\\d" br"x"',
    'b""',
    'f"{f\'{1:{2}}\'!r:>{3}}" u"x" "y" f""',
    'f"{x!r:>{w}}"',
    'f"{x:{w}.{p}f}" "tail"',
    'u"a" "b"',
    '"a" f"{x}" "c"',
    "2j",
    "1.5e300",
    "...",
    "123456789012345678901234567890123456789012345678901234567890",
    "0x" + "f" * 400,
    "0b1010_1010",
    "None",
]


@pytest.mark.parametrize("lit", LITERALS)
def test_every_literal_form_lowers(lit):
    src = (
        f"V = {lit}\n\n\nclass L:\n    def process_weights_after_loading(self, layer):\n"
        f"        x = w = p = 1\n        layer.tag = {lit}\n        setattr(layer, {lit}, 1)\n"
    )
    extract_module(src, "pkg.m", False)
