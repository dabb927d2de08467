#!/usr/bin/env python3
"""Regenerate docs/rules/ from rules/ (same as `reload-lint gen-docs`; `--check` to verify)."""

from __future__ import annotations

import sys

from reload_lint.cli import main

if __name__ == "__main__":
    sys.exit(main(["gen-docs", *sys.argv[1:]]))
