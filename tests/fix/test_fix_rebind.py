"""A store followed by re-bindings derived from itself (`self.w = new; self.w =
self.w.transpose(0, 1)`): the codemod keeps and copies the FINAL value, the re-bindings'
findings share the store's patch, and a chain it cannot move onto a local is refused with a
reason. The runtime test runs our own golden files on CPU."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest
from _fix_util import CASES, load_case, project, run

from reload_lint.fix import rebind
from reload_lint.fix.locate import FileModel


def _report(capsys) -> list[dict]:
    code, out, err = run(capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "json")
    assert code in (0, 1), err
    return json.loads(out)["findings"]


def test_rebindings_share_the_store_patch(tmp_path, monkeypatch, capsys):
    """The findings of the store and of its re-bindings carry one patch (the chain's), each
    applies alone to the unpatched file and gives the golden file: fixing them together or one
    at a time is the same edit."""
    proj = project(tmp_path, "rl101_rebind_chain")
    monkeypatch.chdir(proj)
    findings = _report(capsys)
    assert sorted((f["line"], f["target"]) for f in findings) == [
        (19, "self.w_k"),
        (19, "self.w_k_scale"),
        (21, "self.w_k"),
        (22, "self.w_k_scale"),
    ]
    patches = {f["remedy"]["patch"] for f in findings}
    assert len(patches) == 1 and None not in patches
    rem = findings[0]["remedy"]
    assert rem["shape"] == "keep" and rem["applicability"] == "safe"
    assert "re-binding from itself at line 21" in rem["description"]
    subprocess.run(["git", "apply", "-p1", "-"], input=patches.pop(), text=True, check=True)
    after = (CASES / "rl101_rebind_chain" / "after.py").read_text()
    assert (proj / "pkg" / "m.py").read_text() == after
    # the comparison is against the final value: no `.copy_` before the last re-binding
    lines = after.splitlines()
    first_copy = next(i for i, ln in enumerate(lines) if ".copy_(" in ln)
    last_rebind = next(i for i, ln in enumerate(lines) if "w_k = w_k.transpose(0, 1)" in ln)
    assert last_rebind < first_copy


def test_read_between_is_refused(tmp_path, monkeypatch, capsys):
    proj = project(tmp_path, "refused_rebind_read")
    monkeypatch.chdir(proj)
    findings = _report(capsys)
    assert len(findings) == 2
    for f in findings:
        rem = f["remedy"]
        assert rem["patch"] is None and rem["applicability"] == "display-only"
        assert "`self.w_uv` is read at line 17 between its store" in rem["recipe"]
        assert "apply the re-bindings to the local" in rem["recipe"]


def _model(src: str):
    fm = FileModel(textwrap.dedent(src))
    return fm


def _chains(src: str, line: int, target: str = "self.w"):
    fm = _model(src)
    site = fm.site(line, target)
    return rebind.chains(fm, site, [target])


BODY = """\
class L:
    def post(self, w):
        self.w = w * 2
"""


@pytest.mark.parametrize(
    ("rest", "want"),
    [
        ("        self.w = self.w.t()\n        self.w = self.w.contiguous()\n", [4, 5]),
        ("        x = 1\n        self.w = self.w[:, :x]\n", [5]),
        # a new value stored after the chain is a store of its own
        ("        self.w = self.w.t()\n        self.w = w\n        self.w = self.w.t()\n", [4]),
        ("        self.v = self.w\n", []),
        # in place on the held tensor: what the store kept stays the object held
        ("        self.w += 1\n", []),
    ],
)
def test_chain_links(rest, want):
    found = _chains(BODY + rest, 3)
    assert isinstance(found, dict)
    links = [s.first_line for s in found["self.w"].links] if found else []
    assert links == want


@pytest.mark.parametrize(
    ("rest", "why"),
    [
        ("        print(self.w)\n        self.w = self.w.t()\n", "is read at line 4"),
        ("        self.check()\n        self.w = self.w.t()\n", "calls `self.check(...)`"),
        ("        log(self)\n        self.w = self.w.t()\n", "uses `self` as a whole"),
        ("        self.w = self.w.t()\n        if w:\n            self.w = self.w.t()\n", "line 6"),
        ("        self.w, self.v = self.w.t(), 1\n", "re-bound from itself at line 4"),
        ("        self.w = fold(self, self.w)\n", "uses `self` as a whole"),
    ],
)
def test_chain_refused(rest, why):
    found = _chains(BODY + rest, 3)
    assert isinstance(found, str) and why in found, found
    assert found.endswith(rebind.BY_HAND)


def test_head_of_a_rebinding():
    src = BODY + "        y = 1\n        self.w = self.w.t()\n"
    fm = _model(src)
    h = rebind.head(fm, fm.site(5, "self.w"), "self.w")
    assert h is not None and not isinstance(h, str) and h.first_line == 3
    # stored in another block before: no chain, and no fix that keeps the wrong object
    src2 = "class L:\n    def post(self, w):\n        if w:\n            self.w = w\n"
    src2 += "        self.w = self.w.t()\n"
    fm2 = _model(src2)
    why = rebind.head(fm2, fm2.site(5, "self.w"), "self.w")
    assert isinstance(why, str) and "stores it at line 4" in why
    # the value comes from elsewhere (a loaded Parameter): not this shape
    src3 = "class L:\n    def post(self):\n        self.w = self.w.t()\n"
    fm3 = _model(src3)
    assert rebind.head(fm3, fm3.site(3, "self.w"), "self.w") is None


def test_other_chains_read_on_their_locals():
    fm = _model(
        """\
        class L:
            def post(self, w):
                self.a, self.b = split(w)
                self.a = self.a.t()
                self.b = self.b.view(self.a.shape)
        """
    )
    site = fm.site(3, "self.a")
    found = rebind.chains(fm, site, ["self.a", "self.b"])
    out = rebind.parts(
        fm, found, {"self.a": "a", "self.b": "b"}, {"self.a": "A\n", "self.b": "B\n"}
    )
    # `self.a`'s last re-binding is before `self.b`'s: `self.a` is kept by then, and read there
    assert [c for _s, c in out] == ["a = a.t()\nA\n", "b = b.view(self.a.shape)\nB\n"]


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("which", ["before.py", "after.py"])
def test_reload_keeps_the_final_view(which):
    """A reload (new checkpoint values, post-load again) must reach the tensors the first
    post-load left on the layer, the transposed views a captured graph reads."""
    mod = load_case("rl101_rebind_chain", which)
    layer = mod.LatentProjection()
    with torch.no_grad():
        layer.kv.copy_(torch.arange(1.0, 25.0).reshape(2, 3, 4))
    layer.process_weights_after_loading()
    held_k, held_scale = layer.w_k, layer.w_k_scale  # what a captured graph would read
    ptrs = (held_k.data_ptr(), held_scale.data_ptr())
    assert held_k.shape == (3, 2, 4) and held_scale.shape == (3, 2, 1)
    with torch.no_grad():
        layer.kv.copy_(torch.arange(24.0, 0.0, -1.0).reshape(2, 3, 4))
    layer.process_weights_after_loading()
    want_k, want_scale = mod.split_scale(layer.kv)
    want_k, want_scale = want_k.transpose(0, 1), want_scale.transpose(0, 1)
    kept = (layer.w_k.data_ptr(), layer.w_k_scale.data_ptr()) == ptrs
    fresh = torch.equal(held_k, want_k) and torch.equal(held_scale, want_scale)
    assert kept == fresh == (which == "after.py")
    # whichever it holds, the layer computes with the new values
    assert torch.equal(layer.w_k, want_k) and torch.equal(layer.w_k_scale, want_scale)
