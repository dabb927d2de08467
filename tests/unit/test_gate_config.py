"""Config pieces the gate relies on: path globs, excludes, per-path rule selection."""

from __future__ import annotations

import pytest

from reload_lint.config import ConfigError, PerPath, load_config, path_matches


@pytest.mark.parametrize(
    "pattern, path, expected",
    [
        ("tests", "tests/a.py", True),
        ("tests", "x/tests/a.py", True),
        ("tests/", "tests/sub/a.py", True),
        ("vllm/tests", "vllm/tests/a.py", True),
        ("vllm/tests", "x/vllm/tests/a.py", False),
        ("*_test.py", "a/b/k_test.py", True),
        ("vllm/*", "vllm/a/b.py", True),
        ("a/**/c.py", "a/c.py", True),
        ("a/**/c.py", "a/x/y/c.py", True),
        ("./pkg/a.py", "pkg/a.py", True),
        ("pkg/a.py", "pkg/ab.py", False),
        ("benchmarks", "vllm/benchmarks_x.py", False),
    ],
)
def test_path_matches(pattern, path, expected):
    assert path_matches(pattern, path) is expected


def test_excludes_and_per_path_rule_selection(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text(
        "[tool.reload-lint]\n"
        'exclude = ["tests", "vllm/third_party"]\n'
        'ignore = ["RL106"]\n'
        '[tool.reload-lint.per-path."vllm/attention/**"]\n'
        'ignore = ["RL101"]\n'
        '[tool.reload-lint.per-path."vllm/legacy/*"]\n'
        'select = ["RL2"]\n'
    )
    cfg = load_config(p)
    assert cfg.is_excluded("tests/unit/x.py") and cfg.is_excluded("vllm/third_party/a.py")
    assert not cfg.is_excluded("vllm/a.py")
    assert cfg.rule_enabled("vllm/a.py", "RL101")
    assert not cfg.rule_enabled("vllm/a.py", "RL106")
    assert not cfg.rule_enabled("vllm/attention/x/y.py", "RL101")
    assert cfg.rule_enabled("vllm/attention/x/y.py", "RL102")
    assert cfg.rule_enabled("vllm/legacy/k.py", "RL201")
    assert not cfg.rule_enabled("vllm/legacy/k.py", "RL101")
    assert cfg.per_path[0] == PerPath("vllm/attention/**", ignore=["RL101"])


def test_unknown_per_path_key_named(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text('[tool.reload-lint.per-path."x"]\nselects = ["RL1"]\n')
    with pytest.raises(ConfigError, match="unknown key `selects`"):
        load_config(p)
