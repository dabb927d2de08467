"""Reload facts read from a tree's reload code (analysis/reloadfacts.py), on the fixtures
shaped like vLLM 0.25.1's and 0.33.0's reload (tests/fixtures/minireload*): each fact, where
it was read, and the default for a tree without a reload module. The findings these facts
decide are pinned by the fixtures' markers (tests/unit/test_fixtures.py) and on the real
releases by tests/integration/test_vllm_reload_facts.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from reload_lint.analysis import reloadfacts
from reload_lint.discover import SourceFile

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RELOAD = "vllm/model_executor/model_loader/reload"


def _files(root: Path) -> list[SourceFile]:
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        out.append(
            SourceFile(path=p, rel=rel, module=rel[:-3].replace("/", ".").removesuffix(".__init__"))
        )
    return out


def _line(root: Path, at: str) -> str:
    path, _, line = at.split(" ")[0].rpartition(":")
    return (root / path).read_text(encoding="utf-8").splitlines()[int(line) - 1]


def test_reload_shaped_like_0251():
    root = FIXTURES / "minireload025"
    f = reloadfacts.detect(_files(root))
    assert f.origin == f"tree: {RELOAD}"
    assert f.nonpersistent_copied is True
    assert f.deferred_bases == ("Attention", "MLAAttention")
    assert f.restore_deletes_plain is False
    assert f.none_buffer_breaks is True
    assert "isinstance(layer, (Attention, MLAAttention))" in _line(root, f.deferred_at)
    assert _line(root, f.restore_at).strip().startswith("for name in")
    assert f.restore_at.startswith(f"{RELOAD}/meta.py:")
    assert f.hooks_take_args is True
    assert "process_weights_after_loading(None)" in _line(root, f.hooks_at)


def test_reload_shaped_like_0330():
    root = FIXTURES / "minireload033"
    f = reloadfacts.detect(_files(root))
    assert f.nonpersistent_copied is False
    assert "non_persistent" in _line(root, f.nonpersistent_at)
    # the deferral predicate is followed into the module it is imported from
    assert f.deferred_bases == ("AttentionLayerBase", "MMEncoderAttention")
    assert "is_deferred_attention_layer" in f.deferred_at
    assert f.restore_deletes_plain is True
    assert f.none_buffer_breaks is True
    assert f.hooks_take_args is True
    assert "process_weights_after_loading(None)" in _line(root, f.hooks_at)


@pytest.mark.parametrize(
    "call", ["model.process_weights_after_loading()", "process_weights_after_loading(model)"]
)
def test_a_reload_running_a_hook_with_no_argument_or_the_driver(tmp_path, call):
    d = tmp_path / RELOAD
    d.mkdir(parents=True)
    lw = d / "layerwise.py"
    lw.write_text(
        f"def finish(model, layer):\n    layer.process_weights_after_loading(1)\n    {call}\n",
        encoding="utf-8",
    )
    f = reloadfacts.detect([SourceFile(path=lw, rel=f"{RELOAD}/layerwise.py", module="m")])
    assert f.hooks_take_args is False
    assert f.hooks_at == f"{RELOAD}/layerwise.py:3"


@pytest.mark.parametrize("what", ["none", "no-meta", "unparsable"])
def test_missing_or_unreadable_reload_code_falls_back_to_the_newest(tmp_path, what):
    files = []
    if what != "none":
        d = tmp_path / RELOAD
        d.mkdir(parents=True)
        lw = d / "layerwise.py"
        lw.write_text("def f(:\n" if what == "unparsable" else "x = 1\n", encoding="utf-8")
        files.append(SourceFile(path=lw, rel=f"{RELOAD}/layerwise.py", module="m"))
    f = reloadfacts.detect(files)
    for k in (
        "nonpersistent_copied",
        "deferred_bases",
        "restore_deletes_plain",
        "none_buffer_breaks",
        "hooks_take_args",
    ):
        assert getattr(f, k) == getattr(reloadfacts.NEWEST, k)


def test_facts_kept_in_the_pack_while_the_reload_files_stand(tmp_path, monkeypatch):
    """A cached run reads the facts from the pack (cache.py, `kept`) and parses no reload
    file; an edit to a file they were read from (the reload package's
    layerwise.py here) reads them again, and the result is the one `--no-cache` gives."""
    import shutil

    from reload_lint.config import Config
    from reload_lint.engine import run_check

    root = tmp_path / "tree"
    shutil.copytree(FIXTURES / "minireload025", root)
    cache = tmp_path / "cache"
    first = run_check([root], Config(), base_dir=root, cache_dir=cache)
    real = reloadfacts.detect
    calls = []
    monkeypatch.setattr(reloadfacts, "detect", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = run_check([root], Config(), base_dir=root, cache_dir=cache)
    assert calls == [] and again.findings == first.findings
    pred = root / "vllm/model_executor/model_loader/reload/layerwise.py"
    pred.write_text(pred.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    edited = run_check([root], Config(), base_dir=root, cache_dir=cache)
    assert calls == [1]
    plain = run_check([root], Config(), base_dir=root, use_cache=False)
    assert [f.to_json() for f in edited.findings] == [f.to_json() for f in plain.findings]
    assert calls == [1, 1]  # --no-cache reads them
    assert run_check([root], Config(), base_dir=root, cache_dir=cache).findings == plain.findings
    assert calls == [1, 1]
