"""Baseline files: readable, sorted, atomic, line-free; corrupt input is exit 2 and untouched."""

from __future__ import annotations

import json

import pytest
from _gate_util import finding, fingerprinted

from reload_lint.errors import ReloadLintError
from reload_lint.gate import (
    load_baseline,
    match_baseline,
    render_baseline,
    write_baseline,
)


def _three():
    return fingerprinted(
        [
            finding("pkg/b.py", 30, target="self.act_perm", rule="RL103", symbol="M.pwal"),
            finding("pkg/a.py", 12, target="layer.workspace"),
            finding("pkg/a.py", 40, target="layer.g_idx_sort_indices"),
        ]
    )


def test_render_is_sorted_readable_and_line_free():
    text = render_baseline(_three())
    doc = json.loads(text)
    assert doc["kind"] == "reload-lint-baseline" and doc["version"] == 1
    paths = [(e["path"], e["target"]) for e in doc["entries"]]
    assert paths == sorted(paths)
    assert all(
        set(e) == {"fingerprint", "rule", "path", "symbol", "target", "snippet"}
        for e in doc["entries"]
    )
    assert '"line"' not in text
    assert doc["entries"][0]["snippet"] == "layer.g_idx_sort_indices = torch.empty(1)"


def test_render_is_independent_of_input_order_and_lines():
    a = _three()
    moved = fingerprinted(
        [
            finding("pkg/a.py", 52, target="layer.g_idx_sort_indices"),
            finding("pkg/b.py", 33, target="self.act_perm", rule="RL103", symbol="M.pwal"),
            finding("pkg/a.py", 15, target="layer.workspace"),
        ]
    )
    assert render_baseline(a) == render_baseline(moved)


def test_write_then_load_roundtrip(tmp_path):
    p = tmp_path / "baseline.json"
    assert write_baseline(p, _three()) == 3
    entries = load_baseline(p)
    assert [e.target for e in entries] == [
        "layer.g_idx_sort_indices",
        "layer.workspace",
        "self.act_perm",
    ]
    assert not list(tmp_path.glob(".baseline.json.*"))  # no temp file left behind


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"{not json", "invalid JSON at line 1"),
        (b"\xff\xfe", "not valid UTF-8"),
        (b"[]", "not a reload-lint baseline"),
        (b'{"kind": "reload-lint-baseline", "version": 9, "entries": []}', "unsupported"),
        (b'{"kind": "reload-lint-baseline", "version": 1, "entries": {}}', "must be a list"),
        (
            b'{"kind": "reload-lint-baseline", "version": 1, "entries": [{"rule": "RL101"}]}',
            "no fingerprint",
        ),
        (
            b'{"kind": "reload-lint-baseline", "version": 1, "entries": [{"fingerprint": 3}]}',
            "not a string",
        ),
    ],
)
def test_corrupt_baseline_is_one_line_error(tmp_path, content, needle):
    p = tmp_path / "b.json"
    p.write_bytes(content)
    with pytest.raises(ReloadLintError) as exc:
        load_baseline(p)
    msg = str(exc.value)
    assert needle in msg and "\n" not in msg and str(p) in msg
    assert p.read_bytes() == content


def test_missing_baseline_names_the_command(tmp_path):
    with pytest.raises(ReloadLintError, match="reload-lint baseline --output"):
        load_baseline(tmp_path / "nope.json")


def test_failed_write_leaves_existing_file(tmp_path, monkeypatch):
    p = tmp_path / "b.json"
    p.write_text("precious")
    import reload_lint.fsutil as fsutil

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil.os, "replace", boom)
    with pytest.raises(ReloadLintError, match="No space left"):
        write_baseline(p, _three())
    assert p.read_text() == "precious"
    assert [x.name for x in tmp_path.iterdir()] == ["b.json"]


def test_match_new_baselined_stale(tmp_path):
    p = tmp_path / "b.json"
    write_baseline(p, _three())
    entries = load_baseline(p)
    now = fingerprinted(
        [
            finding("pkg/a.py", 12, target="layer.workspace"),
            finding("pkg/a.py", 60, target="layer.new_thing"),
            finding("pkg/b.py", 30, target="self.act_perm", rule="RL103", symbol="M.pwal"),
        ]
    )
    res = match_baseline(now, entries)
    assert [f.target for f in res.new] == ["layer.new_thing"]
    assert len(res.baselined) == 2
    assert [e.target for e in res.stale] == ["layer.g_idx_sort_indices"]
    # Out-of-scope entries are never stale (e.g. a pre-commit run on other files).
    res = match_baseline(now, entries, in_scope=lambda e: e.path == "pkg/b.py")
    assert res.stale == []


def test_suppressed_finding_is_neither_new_nor_matching(tmp_path):
    p = tmp_path / "b.json"
    write_baseline(p, _three())
    now = _three()
    now[0].suppressed = "accepted"
    res = match_baseline(now, load_baseline(p))
    assert res.new == [] and len(res.baselined) == 2
    assert [e.fingerprint for e in res.stale] == [now[0].fingerprint]
