"""Before/after golden pairs, one per fix shape and per rule with a codemod (TorchFix / Fixit
style): `cases/<name>/before.py` is audited as `pkg/m.py` (other files of the case sit beside
it in `pkg/`), `check --fix --unsafe-fixes` must write exactly `after.py`, a second run must
change nothing, a re-audit must report nothing the fix claims to fix, and `--diff` must print
exactly what `--fix` writes."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from _fix_util import CASES, NAMES, project, run


def _report(capsys) -> list[dict]:
    code, out, err = run(capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)["findings"]


@pytest.mark.parametrize("name", NAMES)
def test_fix_writes_the_golden_file(name, tmp_path, monkeypatch, capsys):
    proj = project(tmp_path, name)
    monkeypatch.chdir(proj)
    before = _report(capsys)
    assert before, "the case must have a finding to fix"
    code, out, _err = run(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    want = (CASES / name / "after.py").read_text()
    assert (proj / "pkg" / "m.py").read_text() == want
    fixed = [f for f in before if f.get("remedy", {}).get("patch")]
    # the summary's figures are a plain re-audit's of the written tree
    after = _report(capsys)
    m = re.search(r"\((\d+) fixed, (\d+) remaining, (\d+) new\)", out)
    assert m, out
    n_fixed, n_left, n_new = map(int, m.groups())
    now = {f["fingerprint"] for f in after}
    gone = [f for f in before if not ({f["fingerprint"]} | _folded(f)) & now]
    assert (n_fixed, n_left + n_new) == (len(gone), len(after))
    assert n_new == 0 or code == 1  # a fix that makes a finding fails the run
    # idempotent: the second application changes nothing
    code, out, _err = run(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    assert (proj / "pkg" / "m.py").read_text() == want
    assert "(0 fixed," in out
    # the re-audit reports no store a direct codemod fixed (RL108's patch is at the rebuild
    # site; the analysis still lists the lazy store, and its remedy says so)
    direct = {(f["rule"], f["target"]) for f in fixed if f["rule"] != "RL108"}
    assert not direct & {(f["rule"], f["target"]) for f in after}


def _folded(f: dict) -> set[str]:
    return {a["fingerprint"] for a in f.get("also") or [] if a.get("fingerprint")}


@pytest.mark.parametrize("name", NAMES)
def test_diff_prints_what_fix_writes(name, tmp_path, monkeypatch, capsys):
    proj = project(tmp_path / "a", name)
    monkeypatch.chdir(proj)
    code, patch, err = run(capsys, "check", "pkg", "--no-cache", "--diff", "--unsafe-fixes")
    before = (CASES / name / "before.py").read_text()
    assert (proj / "pkg" / "m.py").read_text() == before  # --diff writes nothing
    want = (CASES / name / "after.py").read_text()
    assert code == (1 if want != before else 0)
    assert ("Would fix" in err) == (want != before)
    if want == before:
        assert patch == ""
        return
    subprocess.run(["git", "apply", "-p1", "-"], input=patch, text=True, check=True, cwd=proj)
    assert (proj / "pkg" / "m.py").read_text() == want


def test_json_remedy_patch_applies_alone(tmp_path, monkeypatch, capsys):
    """A finding's `remedy.patch` (what the runner applies, one site per run) is that fix
    alone on the unpatched file, and `patch_sha256` is its hash."""
    import hashlib

    proj = project(tmp_path, "rl101_tuple")
    monkeypatch.chdir(proj)
    findings = _report(capsys)
    rem = findings[0]["remedy"]
    assert rem["applicability"] == "unsafe" and rem["shape"] == "register", rem
    assert rem["patch_sha256"] == hashlib.sha256(rem["patch"].encode()).hexdigest()
    assert findings[0]["fix_patch"] == rem["patch"]
    assert rem["rule_url"] == "docs/rules/RL101.md"
    subprocess.run(["git", "apply", "-p1", "-"], input=rem["patch"], text=True, check=True)
    assert (proj / "pkg" / "m.py").read_text() == (CASES / "rl101_tuple" / "after.py").read_text()


def test_safe_only_without_unsafe_fixes(tmp_path, monkeypatch, capsys):
    """`--fix` alone applies only safe fixes; the summary says how many unsafe ones wait."""
    proj = project(tmp_path, "rl105_keep_object")
    monkeypatch.chdir(proj)
    code, out, _ = run(capsys, "check", "pkg", "--no-cache", "--fix")
    assert (proj / "pkg" / "m.py").read_text() == (
        CASES / "rl105_keep_object" / "before.py"
    ).read_text()
    assert "(0 fixed, 1 remaining, 0 new)" in out
    assert (
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option)." in out
    )
    assert code == 1
    proj2 = project(tmp_path / "b", "rl102_keep")
    monkeypatch.chdir(proj2)
    code, out, _ = run(capsys, "check", "pkg", "--no-cache", "--show-fixes")
    assert "[*] 1 fixable with the `--fix` option." in out
    code, out, _ = run(capsys, "check", "pkg", "--no-cache", "--fix")
    assert "(1 fixed, 0 remaining, 0 new)" in out and code == 0


def test_fix_refused_when_still_reported(tmp_path, monkeypatch, capsys):
    proj = project(tmp_path, "refused_still_reported")
    monkeypatch.chdir(proj)
    (f,) = _report(capsys)
    rem = f["remedy"]
    assert rem["patch"] is None and rem["applicability"] == "display-only"
    assert "still reports RL103" in rem["refused"]
    assert "no codemod" in rem["recipe"] and f["fix"] == rem["recipe"]


def test_fix_refused_when_it_would_not_parse(tmp_path, monkeypatch, capsys):
    """A shape that produced code which does not parse is refused, with the reason, and the
    file is left as it was."""
    from reload_lint.fix import keep

    real = keep.plan

    def broken(store, ind):
        p = real(store, ind)
        p.code = p.code.replace("is not None:", "is not None")
        return p

    monkeypatch.setattr(keep, "plan", broken)
    proj = project(tmp_path, "rl102_keep")
    monkeypatch.chdir(proj)
    (f,) = _report(capsys)
    assert f["remedy"]["patch"] is None
    assert "does not parse" in f["remedy"]["refused"]
    code, out, _ = run(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    assert (proj / "pkg" / "m.py").read_text() == (CASES / "rl102_keep" / "before.py").read_text()
    assert "(0 fixed, 1 remaining, 0 new)" in out


def test_fix_refuses_release_sources(capsys, monkeypatch, tmp_path):
    from reload_lint import sources

    root = tmp_path / "vllm-9.9.9"
    (root / "vllm").mkdir(parents=True)
    monkeypatch.setattr(sources, "release_sources", lambda pkg, version: root)
    code, out, err = run(capsys, "check", "--vllm", "9.9.9", "--fix")
    assert code == 2
    assert "--fix would edit the shared release sources" in err and "cp -r" in err


def test_store_of_a_kept_object_is_fixed_with_its_rebuild_sites(tmp_path, monkeypatch, capsys):
    """A store of an object post-load rebuilds (`self.w_mma` of experts a kernel holds), next to
    the rebuild site's keep_object: with the kernel kept there the engine models the kept
    object (analysis/kept.py), the kept experts' own post-load runs again, and its keep-and-copy
    hands the kept `w_mma` to `_copy_into_kept`, which the re-audit reads as an in-place refresh
    (analysis/resets.py). Both are written and counted fixed; until issue 27's helper class the
    store was refused as a stale copy (RL201)."""
    proj = project(tmp_path, "kept_object_store")
    monkeypatch.chdir(proj)
    by_rule = {f["rule"]: f for f in _report(capsys)}
    assert by_rule["RL105"]["remedy"]["shape"] == "keep_object"
    rem = by_rule["RL102"]["remedy"]
    assert rem["shape"] == "keep_object" and rem["patch"] and not rem.get("refused")
    code, out, err = run(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    assert "(2 fixed, 0 remaining, 0 new)" in out, out + err
    assert (proj / "pkg" / "m.py").read_text() == (
        CASES / "kept_object_store" / "after.py"
    ).read_text()
