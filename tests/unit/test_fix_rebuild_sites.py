"""RL108 rebuild sites (issue 27): an object whose first forward allocates (an RL108 owner) is
rebuilt at every post-load store that keeps a new one on every reload, whether or not that
store is reported (an experts object that allocates nothing when built is no RL105). The RL108
finding names those stores (`rebuild_sites`); `--fix` keeps the owner at each of them (the
keep_object shape), and the re-audit no longer reports the RL108: the owner is kept, so its
first forward runs once (analysis/kept.py)."""

from __future__ import annotations

import json
import textwrap

from _cli_util import run_cli
from _engine_util import check_files, write_files

EXPERTS = """
import torch


class Experts:
    def __init__(self, n):
        self.n = n
        self._scratch = None

    def scratch(self):
        if self._scratch is None:
            self._scratch = torch.empty(16)
        return self._scratch

    def run(self, x):
        return x + self.scratch()
"""

# two post-load stores of the experts, neither reported (Experts allocates nothing when built)
METHODS = """
from pkg.experts import Experts


class MoEMethodA:
    def process_weights_after_loading(self, layer):
        self.experts = Experts(4)

    def apply(self, layer, x):
        return self.experts.run(x)


class MoEMethodB:
    def process_weights_after_loading(self, layer):
        self._setup(layer)

    def _setup(self, layer):
        self.kernel = Experts(8)

    def apply(self, layer, x):
        return self.kernel.run(x)
"""

# one of them behind the first-use test of its slot already
ONE_KEPT = METHODS.replace(
    "        self.kernel = Experts(8)",
    "        if getattr(self, 'kernel', None) is None:\n            self.kernel = Experts(8)",
)


def _files(methods=METHODS):
    return {"pkg/__init__.py": "", "pkg/experts.py": EXPERTS, "pkg/methods.py": methods}


def test_rl108_names_every_unreported_rebuild_site(tmp_path):
    res = check_files(tmp_path, _files())
    rl108 = [f for f in res.findings if f.rule == "RL108"]
    assert [f.target for f in res.findings] == ["self._scratch"], res.findings
    assert rl108[0].rebuild_sites == [
        {"path": "pkg/methods.py", "line": 7, "target": "self.experts"},
        {"path": "pkg/methods.py", "line": 18, "target": "self.kernel"},
    ]


def test_a_store_behind_its_first_use_test_is_no_rebuild_site(tmp_path):
    res = check_files(tmp_path, _files(ONE_KEPT))
    (f,) = [f for f in res.findings if f.rule == "RL108"]
    assert [r["target"] for r in f.rebuild_sites] == ["self.experts"]


def test_rebuild_sites_are_in_the_json_and_read_back(tmp_path, monkeypatch, capsys):
    write_files(tmp_path, _files())
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "check", "pkg", "--no-cache", "--format", "json")
    (f,) = json.loads(out)["findings"]
    assert [r["line"] for r in f["rebuild_sites"]] == [7, 18], err
    from reload_lint.findings import Finding

    assert Finding.from_json(f).rebuild_sites == f["rebuild_sites"]


def test_fix_keeps_the_owner_at_unreported_rebuild_sites(tmp_path, monkeypatch, capsys):
    write_files(tmp_path, _files())
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    assert "Found 1 finding (1 fixed, 0 remaining, 0 new)." in out, out + err
    text = (tmp_path / "pkg" / "methods.py").read_text()
    assert (
        'if getattr(self, "experts", None) is not None:\n'
        "            _copy_into_kept(self.experts, experts)\n"
        "        else:\n"
        "            self.experts = experts"
    ) in text
    assert (
        'if getattr(self, "kernel", None) is not None:\n'
        "            _copy_into_kept(self.kernel, kernel)\n"
        "        else:\n"
        "            self.kernel = kernel"
    ) in text
    # the plain re-audit says the same
    code, out, err = run_cli(capsys, "check", "pkg", "--no-cache")
    assert "Found 0 findings" in out or "All checks passed" in out or code == 0, out + err
    res = check_files(tmp_path, {})
    assert res.findings == []


def test_the_rl108_remedy_is_the_patch_of_its_rebuild_sites(tmp_path, monkeypatch, capsys):
    write_files(tmp_path, _files())
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(
        capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "json"
    )
    (f,) = json.loads(out)["findings"]
    rem = f["remedy"]
    assert rem["shape"] == "keep_object" and rem["applicability"] == "unsafe", rem
    assert rem["paths"] == ["pkg/methods.py"]
    assert "2 rebuild site(s) (2 of them not reported" in rem["description"]
    assert rem["patch"].count("_copy_into_kept(self.") == 2


def test_an_edit_that_does_not_stop_the_rl108_is_not_written(tmp_path, monkeypatch, capsys):
    """A rebuild site whose keep cannot make the owner kept (another store, on an object built
    on the same path, keeps a new one on every reload) fixes nothing: it is not written."""
    holder = textwrap.dedent(
        """
        from pkg.experts import Experts


        class Holder:
            pass


        class MoEMethodC:
            def process_weights_after_loading(self, layer):
                self.experts = Experts(4)
                h = Holder()
                h.experts = Experts(2)
                layer.holder = h

            def apply(self, layer, x):
                return self.experts.run(x) + layer.holder.experts.run(x)
        """
    )
    write_files(tmp_path, {"pkg/__init__.py": "", "pkg/experts.py": EXPERTS, "pkg/c.py": holder})
    monkeypatch.chdir(tmp_path)
    before = (tmp_path / "pkg" / "c.py").read_text()
    code, out, err = run_cli(capsys, "check", "pkg", "--no-cache", "--fix", "--unsafe-fixes")
    assert "Found 1 finding (0 fixed, 1 remaining, 0 new)." in out, out + err
    assert (tmp_path / "pkg" / "c.py").read_text() == before
    code, out, err = run_cli(
        capsys, "check", "pkg", "--no-cache", "--show-fixes", "--format", "json"
    )
    (f,) = json.loads(out)["findings"]
    assert f["rebuild_sites"] == [{"path": "pkg/c.py", "line": 11, "target": "self.experts"}]
    assert f["fix_status"].startswith("none: ") and f["remedy"]["patch"] is None
