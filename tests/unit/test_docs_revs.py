"""Issue 20: the install and hook snippets a new user copies point at things that exist.

Every `rev:` in a pre-commit snippet and every `@<commit>` in a pip install line of the docs
is a commit of this repository that is an ancestor of HEAD and carries the hook ids the
snippet names; no placeholder owner or made-up tag is left."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "docs" / "gate.md", REPO / ".pre-commit-hooks.yaml"]


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)


def _history_available() -> bool:
    if _git("rev-parse", "--git-dir").returncode != 0:
        return False
    return _git("rev-parse", "--is-shallow-repository").stdout.strip() != "true"


def _pins() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"^\s*rev:\s*([^\s#]+)", text, re.M):
            out.append((doc.name, m.group(1)))
        for m in re.finditer(r"git\+[^\s\"']*@([0-9a-f]{7,40})\b", text):
            out.append((doc.name, m.group(1)))
    return out


def _hook_ids() -> list[str]:
    text = (REPO / "docs" / "gate.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)
    ids = []
    for b in blocks:
        data = yaml.safe_load(b)
        if isinstance(data, dict) and "repos" in data:
            ids += [h["id"] for r in data["repos"] for h in r["hooks"]]
    return ids


def test_no_placeholder_owner_or_made_up_tag():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        assert "github.com/OWNER" not in text, doc
        assert "<tag>" not in text and "@v0.1.0" not in text, doc


def _release_tag() -> str:
    """The tag of the newest CHANGELOG.md entry (`## 0.2.0` -> `v0.2.0`): the release the
    docs' pre-commit `rev:` names."""
    m = re.search(r"^## \[?(\d+\.\d+\.\d+)", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert m, "CHANGELOG.md has no release entry"
    return f"v{m.group(1)}"


def test_the_docs_pin_commits():
    pins = _pins()
    assert {d for d, _ in pins} >= {"gate.md"}, pins
    for doc, rev in pins:
        assert re.fullmatch(r"[0-9a-f]{40}", rev) or rev == _release_tag(), (
            f"{doc}: pin {rev!r} is neither a full commit SHA nor the release tag"
        )


@pytest.mark.skipif(not _history_available(), reason="needs this repository's git history")
def test_pinned_commits_exist_and_carry_the_hooks():
    ids = _hook_ids()
    assert "reload-lint" in ids
    for doc, rev in _pins():
        if rev == _release_tag() and _git("rev-parse", "-q", "--verify", rev).returncode:
            continue  # the release tag the lead creates when tagging the CHANGELOG's entry
        assert _git("cat-file", "-e", f"{rev}^{{commit}}").returncode == 0, f"{doc}: {rev}"
        assert _git("merge-base", "--is-ancestor", rev, "HEAD").returncode == 0, (
            f"{doc}: {rev} is not in this branch's history"
        )
        hooks = _git("show", f"{rev}:.pre-commit-hooks.yaml")
        assert hooks.returncode == 0, f"{doc}: {rev} has no .pre-commit-hooks.yaml"
        have = {h["id"] for h in yaml.safe_load(hooks.stdout)}
        assert set(ids) <= have, f"{doc}: {rev} lacks hooks {set(ids) - have}"
