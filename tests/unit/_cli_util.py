"""Shared by the CLI tests: the smallest kernel that has one finding, and a way to run the
command line in-process and get (exit code, stdout, stderr)."""

from __future__ import annotations

from reload_lint.cli import main

# one RL101 with a reader: a plain layer attribute allocated in post-load, read by forward
KERNEL = """import torch


class K:
    def process_weights_after_loading(self, layer):
        layer.ws = torch.empty(4)

    def forward(self, layer, x):
        return layer.ws + x
"""


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """Run `reload-lint ARGV` in this process; a usage error's SystemExit gives its code."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
