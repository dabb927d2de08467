"""The fix corpus (tests/fix/corpus/, not derived from vLLM files): each case's findings end
as its manifest says once `check --fix --unsafe-fixes` has run and a plain re-audit judged it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from _fix_util import run

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

CORPUS = Path(__file__).parent / "corpus"
MANIFEST = tomllib.loads((CORPUS / "manifest.toml").read_text())


def test_every_case_is_in_the_manifest():
    assert {p.stem for p in CORPUS.glob("*.py")} == set(MANIFEST)


def _fingerprints(capsys, contract: list[str]) -> set[str]:
    code, out, err = run(
        capsys, "check", "pkg", "--no-cache", "--format", "json", "--exit-zero", *contract
    )
    assert code == 0, err
    return {f["fingerprint"] for f in json.loads(out)["findings"]}


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_corpus_case(name, tmp_path, monkeypatch, capsys):
    case = MANIFEST[name]
    expect = case["expect"]
    contract = ["--contract", case["contract"]] if case.get("contract") else []
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    shutil.copy2(CORPUS / f"{name}.py", pkg / "m.py")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(
        capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "json", *contract
    )
    before = json.loads(out)["findings"]
    if expect == "clean":
        assert before == [], before
        return
    assert before, f"{name}: the case must have a finding"
    code, out, err = run(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes", *contract)
    m = re.search(r"\((\d+) fixed, (\d+) remaining, (\d+) new\)", out)
    assert m, out + err
    if expect in ("refused", "none"):
        for f in before:
            assert (f.get("fix_status") or "").startswith(expect + ": "), f
        # a fix must not mark it clean: nothing counted fixed, and a plain re-audit of the
        # tree --fix wrote still reports every finding
        assert m.groups() == ("0", str(len(before)), "0"), out + err
        assert _fingerprints(capsys, contract) == {f["fingerprint"] for f in before}
        return
    assert m.groups() == (str(len(before)), "0", "0"), out + err
    assert _fingerprints(capsys, contract) == set()
