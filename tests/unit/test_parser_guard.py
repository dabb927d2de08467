"""reload_lint/guard.py: the one screen left in front of `ast.parse`. Python 3.10 builds the
tree of a very long left-recursive chain without a depth check and dies with SIGSEGV (about
150,000 steps); 3.11+ refuse it with RecursionError. So 3.10 (only) refuses statements with
more than 20,000 attribute/call/subscript/operator steps before parsing."""

from __future__ import annotations

import sys

import pytest

from reload_lint import guard
from reload_lint.incremental.cache import _extract_job

LIMIT = guard._MAX_STEPS


@pytest.mark.parametrize(
    "src",
    [
        "x = a" + ".b" * (LIMIT + 1) + "\n",
        "x = f" + "()" * (LIMIT + 1) + "\n",
        "x = a" + "[0]" * (LIMIT + 1) + "\n",
        "x = " + "1 + " * (LIMIT + 1) + "1\n",
        "x = (\n" + "a.b\n" * (LIMIT + 1) + ")\n",  # one statement over many lines
    ],
)
def test_scan_refuses_a_statement_over_the_limit(src):
    assert "more than 20000" in guard._scan(src)


@pytest.mark.parametrize(
    "src",
    [
        "x = a" + ".b" * (LIMIT - 10) + "\n",
        ("x = a" + ".b" * (LIMIT // 2) + "\n") * 3,  # counted per statement
        "x = '" + "a." * LIMIT + "'\n",  # inside a string
        '"""' + "a." * LIMIT + '"""\n',
        "# " + "a." * LIMIT + "\n",  # inside a comment
        "x = [" + "1.5, " * LIMIT + "]\n",  # numbers are not attribute steps
    ],
)
def test_scan_passes_what_cannot_be_that_deep(src):
    assert guard._scan(src) is None


def test_only_python_3_10_is_screened():
    deep = "x = a" + ".b" * 300_000 + "\n"
    if sys.version_info >= (3, 11):
        assert guard.too_complex(deep) is None
    else:
        assert "Python 3.10" in guard.too_complex(deep)
    assert guard.too_complex("x = a.b.c\n") is None


def test_a_chain_too_long_to_parse_is_rl906_on_any_python():
    """3.10: refused by the guard; 3.11+: ast.parse's RecursionError. Never a crash."""
    for src in ("x = a" + ".b" * 300_000 + "\n", "x = f" + "()" * 300_000 + "\n"):
        res = _extract_job((src, "pkg.m", False))
        assert res[:3] == ("err", "RL906", 0), res
        assert res[3].startswith("file skipped: "), res
