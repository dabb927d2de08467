"""The premise of the line-shift cutoff (reload_lint/incremental/shiftcut.py): the analysis treats a file's
lines as labels. Every record of a fixture package is relabelled with a strictly increasing
map of its own (`a*line + b`, different per file: gaps, new digit counts, files' lines
interleaved differently), the package is analysed over those records, and the result must be
the plain run's with the same maps applied by `shiftcut.relabel`. Arithmetic on lines
(`line + 1`), lines compared across files without their paths, or lines ordered as text
would each make some fixture differ.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from reload_lint.analysis.reloadfacts import RELOAD_DIR
from reload_lint.config import Config
from reload_lint.engine import run_check
from reload_lint.incremental import cache, shiftcut

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_EXTRACT = cache._extract_job


def _map_for(text: str) -> tuple[int, int]:
    """(a, b) of this file's map `a*line + b`, from its text: each file its own."""
    h = hashlib.blake2b(text.encode(), digest_size=4).digest()
    return 2 + h[0] % 5, 7 + int.from_bytes(h[1:3], "big") % 990


def _move(n, s, a: int, b: int):
    """Record `n` with each line (the ints that moved by SHIFT in `s`) mapped by a*l + b."""
    if type(n) is int:
        return a * n + b if s == n + shiftcut.SHIFT else n
    if type(n) is tuple:
        return tuple(_move(x, y, a, b) for x, y in zip(n, s, strict=True))
    if type(n) is list:
        return [_move(x, y, a, b) for x, y in zip(n, s, strict=True)]
    if type(n) is dict:
        return {k: _move(v, s[k], a, b) for k, v in n.items()}
    return n


def _read_as_text(module_or_rel: str) -> bool:
    """The reload package's files: analysis/reloadfacts.py reads their text, not their records,
    and its citations (lines) are part of the cache key, so they are left as they are."""
    return RELOAD_DIR in module_or_rel or RELOAD_DIR.replace("/", ".") in f".{module_or_rel}."


def _moved_extract(args):
    text, module, is_pkg = args
    res = _EXTRACT(args)
    if res[0] != "ok" or _read_as_text(module):
        return res
    shifted = _EXTRACT(("\n" * shiftcut.SHIFT + text, module, is_pkg))
    assert shifted[0] == "ok"
    return ("ok", _move(res[1], shifted[1], *_map_for(text)))


def _report(findings) -> list[dict]:
    out = []
    for f in findings:
        d = f.to_json()
        d.pop("snippet", None)  # read from the text at the line: not the analysis's output
        out.append(d)
    return out


CASES = [pytest.param(p.parent, id=p.parent.name) for p in sorted(FIXTURES.glob("*/fixture.toml"))]


@pytest.mark.parametrize("root", CASES)
def test_relabelled_records_give_the_relabelled_result(root: Path, monkeypatch):
    import tomllib

    contract = tomllib.loads((root / "fixture.toml").read_text())["contracts"][-1]
    cfg = Config(contract=contract)
    plain = run_check([root], cfg, base_dir=root, use_cache=False)
    maps = {}
    for p in root.rglob("*.py"):
        if _read_as_text(p.relative_to(root).as_posix()):
            continue
        text = p.read_text(encoding="utf-8")
        a, b = _map_for(text)
        maps[p.relative_to(root).as_posix()] = {
            line: a * line + b for line in range(1, text.count("\n") + 3)
        }
    want = shiftcut.relabel((plain.findings, [], {}), maps)
    assert want is not None, "a finding carries a line the map does not cover"
    monkeypatch.setattr(cache, "_extract_job", _moved_extract)
    moved = run_check([root], cfg, base_dir=root, use_cache=False)
    assert [e.rule for e in moved.errors] == [e.rule for e in plain.errors]
    got, expect = _report(moved.findings), _report(want[0])
    assert json.dumps(got, indent=1) == json.dumps(expect, indent=1)
    assert plain.findings  # a fixture with findings: the comparison says something


def test_dtype_items_order_lines_as_numbers():
    """identity.py keeps the first of equal dtype items: the first by line as a number (as
    text, line 12 came before line 9, and a moved line could change which came first)."""
    from reload_lint.analysis.identity import order_text

    items = [("D", "torch.int64", "p.py", 12), ("D", "torch.int64", "p.py", 9)]
    assert sorted(items, key=order_text)[0][3] == 9
    moved = [("D", "torch.int64", "p.py", 13), ("D", "torch.int64", "p.py", 10)]
    assert sorted(moved, key=order_text)[0][3] == 10
    assert order_text(frozenset({("N",), ("D", "x", "p", 3)})) == order_text(
        frozenset({("D", "x", "p", 3), ("N",)})
    )


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize(
    "name", os.environ.get("RELOAD_LINT_SHIFT_TREES", "vllm-0.25.1").split(",")
)
def test_release_relabelled_records_give_the_relabelled_result(name, monkeypatch):
    """The same premise on a release tree: vLLM 0.25.1, or those RELOAD_LINT_SHIFT_TREES names
    (`vllm-0.33.0`, `sglang-0.5.23`; skipped when not cached)."""
    import re

    from reload_lint.sources import cache_root

    root = cache_root() / "sources" / name
    top = root / name.split("-", 1)[0]  # vllm/ or sglang/
    if not top.is_dir():
        pytest.skip(f"{name} sources not cached (python scripts/bench.py fetches them)")
    cfg = Config()
    plain = run_check([top], cfg, base_dir=root, use_cache=False)
    named = set()
    for f in plain.findings:
        named |= {f.path, *(s.path for s in f.trace), *(r["path"] for r in f.rebuild_sites)}
        named |= set(re.findall(r"([\w./-]+\.py):\d+", json.dumps(f.to_json())))
    maps = {}
    for rel in sorted(named):
        p = root / rel
        if _read_as_text(rel) or not p.is_file():
            continue
        text = p.read_text(encoding="utf-8")
        a, b = _map_for(text)
        maps[rel] = {line: a * line + b for line in range(1, text.count("\n") + 3)}
    want = shiftcut.relabel((plain.findings, [], {}), maps)
    assert want is not None
    monkeypatch.setattr(cache, "_extract_job", _moved_extract)
    moved = run_check([top], cfg, base_dir=root, use_cache=False)
    assert json.dumps(_report(moved.findings), indent=1) == json.dumps(_report(want[0]), indent=1)
