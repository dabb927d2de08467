"""Inline suppressions: grammar, placement, RL904 malformed, RL905 unused."""

from __future__ import annotations

import pytest
from _gate_util import finding

from reload_lint.gate import apply_suppressions, scan_suppressions


def test_trailing_suppression_parsed():
    text = (
        "x = 1\nlayer.ws = torch.empty(3)  # reload-lint: ignore[RL101] -- freed before capture\n"
    )
    (s,) = scan_suppressions(text)
    assert s.line == 2
    assert s.codes == ["RL101"]
    assert s.reason == "freed before capture"
    assert s.error is None
    assert s.applies_to == (2,)
    assert not s.standalone


def test_standalone_comment_applies_to_next_code_line():
    text = (
        "def f(layer):\n"
        "    # reload-lint: ignore[RL101, rl102] -- scratch, re-created per call\n"
        "    # (more explanation)\n"
        "\n"
        "    layer.ws = torch.empty(3)\n"
    )
    (s,) = scan_suppressions(text)
    assert s.standalone
    assert s.codes == ["RL101", "RL102"]
    assert s.applies_to == (5,)


def test_marker_inside_string_is_not_a_suppression():
    text = 'msg = "# reload-lint: ignore[RL101] -- nope"\n'
    assert scan_suppressions(text) == []


def test_after_other_comment_text():
    text = "x = f()  # noqa: E501  # reload-lint: ignore[RL103] -- partial rebuilt each call\n"
    (s,) = scan_suppressions(text)
    assert s.codes == ["RL103"] and s.error is None


@pytest.mark.parametrize(
    "comment",
    [
        "# write `# reload-lint: ignore[RL101] -- why` on the line",
        "# e.g. '# reload-lint: ignore[RL101] -- why'",
        '# see "#reload-lint: ignore[RL999]"',
    ],
)
def test_marker_quoted_in_comment_prose_is_not_a_directive(comment):
    # reload-lint's own suppress.py documents the syntax in a comment like these; it was
    # reported as an unused (RL905) or malformed (RL904) suppression
    assert scan_suppressions(f"x = 1\n{comment}\ny = 2\n") == []


def test_directive_after_hash_without_space():
    (s,) = scan_suppressions("x = f()  # noqa:E501 #reload-lint: ignore[RL103] -- why\n")
    assert s.codes == ["RL103"] and s.error is None


@pytest.mark.parametrize(
    "comment, needle",
    [
        ("# reload-lint: ignore[RL101]", "missing reason"),
        ("# reload-lint: ignore[RL101] --   ", "empty reason"),
        ("# reload-lint: ignore -- because", "no rule codes"),
        ("# reload-lint: ignore[] -- because", "empty rule list"),
        ("# reload-lint: ignore[RL999] -- because", "unknown rule code `RL999`"),
        ("# reload-lint: ignore[E501] -- because", "unknown rule code `E501`"),
        ("# reload-lint: disable[RL101] -- because", "unknown directive `disable[RL101]`"),
        ("# reload-lint:", "unknown directive"),
    ],
)
def test_malformed_comments(comment, needle):
    (s,) = scan_suppressions(f"x = 1  {comment}\n")
    assert s.error is not None and needle in s.error


def test_unparseable_file_falls_back_to_line_scan():
    text = "def f(:\n    x = 1  # reload-lint: ignore[RL101] -- reason here\n"
    (s,) = scan_suppressions(text)
    assert s.line == 2 and s.codes == ["RL101"] and s.reason == "reason here"


def test_apply_marks_covered_finding_and_reports_unused_and_malformed():
    text = (
        "class K:\n"
        "    def process_weights_after_loading(self, layer):\n"
        "        layer.ws = torch.empty(3)  # reload-lint: ignore[RL101] -- kernel never reads it\n"
        "        layer.b = torch.empty(3)  # reload-lint: ignore[RL102] -- wrong code\n"
        "        layer.c = torch.empty(3)  # reload-lint: ignore[RL101]\n"
    )
    sups = {"pkg/k.py": scan_suppressions(text)}
    f1 = finding("pkg/k.py", 3, target="layer.ws")
    f2 = finding("pkg/k.py", 4, target="layer.b")
    f3 = finding("pkg/k.py", 5, target="layer.c")
    meta = apply_suppressions([f1, f2, f3], sups)
    assert f1.suppressed == "kernel never reads it"
    assert f2.suppressed is None  # RL102 comment does not cover an RL101 finding
    assert f3.suppressed is None  # malformed comments suppress nothing
    assert [(m.rule, m.line) for m in meta] == [("RL905", 4), ("RL904", 5)]
    assert all(m.fingerprint for m in meta)
    assert "missing reason" in meta[1].message


def test_multiline_statement_covered_on_any_line():
    text = (
        "layer.ws = torch.empty(\n"
        "    3,\n"
        ")  # reload-lint: ignore[RL1] -- prefix code covers the family\n"
    )
    f = finding("a.py", 1, end_line=3)
    meta = apply_suppressions([f], {"a.py": scan_suppressions(text)})
    assert f.suppressed and meta == []


def test_unused_not_reported_for_disabled_rule_or_outside_only_paths():
    text = "x = 1  # reload-lint: ignore[RL106] -- swap is intended\n"
    sups = {"a.py": scan_suppressions(text)}
    assert apply_suppressions([], sups, enabled=lambda p, c: c != "RL106") == []
    assert len(apply_suppressions([], sups, enabled=lambda p, c: True)) == 1
    sups = {"a.py": scan_suppressions(text)}
    assert apply_suppressions([], sups, paths={"b.py"}) == []


def test_suppression_in_other_file_does_not_cover():
    text = "layer.ws = torch.empty(3)  # reload-lint: ignore[RL101] -- ok\n"
    f = finding("b.py", 1)
    meta = apply_suppressions([f], {"a.py": scan_suppressions(text)})
    assert f.suppressed is None
    assert [m.rule for m in meta] == ["RL905"]
