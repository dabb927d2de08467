"""The finer-grained early cutoff (index/deps.py, cache.py): a pre-commit run after an edit
reuses the last result when every part of the changed records the analysis read (entries
looked up, a miss too; views of the tables it enumerated) gives what it gave before, and
never otherwise. Each edit below changes what a full run reports; the cached run must give
exactly the `--no-cache` result, and the edits nothing reads must not run the analysis."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from _engine_util import findings_json, precommit_run
from _reads_util import assert_reads_complete

from reload_lint import engine
from reload_lint.config import Config
from reload_lint.engine import run_check

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# root (pkg/a.py) -> b.outer -> c.middle: the allocation is in c, or in c2 once b imports it
FILES = {
    "pkg/__init__.py": "",
    "pkg/a.py": """\
        import torch

        from pkg.b import outer


        class Method:
            def create_weights(self, layer):
                layer.register_parameter("weight", torch.nn.Parameter(torch.ones(1)))

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                layer.x = outer(layer.weight)

            def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
                return x[:, layer.x] + layer.y + self.k
        """,
    "pkg/b.py": """\
        from pkg.c import middle


        def outer(w):
            return middle(w)
        """,
    "pkg/c.py": """\
        import torch


        def middle(w):
            return torch.nn.Parameter(w.float(), requires_grad=False)
        """,
    "pkg/c2.py": """\
        import torch


        def middle(w):
            return torch.argsort(w)
        """,
    # type[Base] that no oracle reads: every allocating subclass is a backend
    "pkg/base.py": """\
        class Base:
            def __init__(self, n: int) -> None:
                self.n = n


        def make(cls: type[Base], n: int) -> Base:
            return cls(n)
        """,
    "pkg/subs.py": """\
        import torch

        from pkg.base import Base


        class Alloc(Base):
            def __init__(self, n: int) -> None:
                super().__init__(n)
                self.strides = torch.full((n,), 4)


        class Plain(Base):
            pass
        """,
    "pkg/kern.py": """\
        import torch

        from pkg.base import make
        from pkg.subs import Plain


        class KernelMethod:
            def __init__(self, picked) -> None:
                self.experts_cls = Plain if picked is None else picked

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                self.kernel = make(self.experts_cls, 4)

            def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
                return self.kernel(x)
        """,
    # an oracle reading a module table (tests/unit/test_engine_backends.py BRANCH_ORACLE)
    "pkg/oracle.py": """\
        import enum


        class Backend(enum.Enum):
            CUTLASS = "cutlass"
            MARLIN = "marlin"
            TRITON = "triton"


        _SUPPORTED: tuple = (Backend.MARLIN, Backend.TRITON)
        _BY_NAME: dict[str, Backend] = {"marlin": Backend.MARLIN, "triton": Backend.TRITON}


        def select_narrow(name):
            if name != "auto":
                return _BY_NAME.get(name)
            for backend in _SUPPORTED:
                return backend
            return Backend.TRITON


        def select_wide(name):
            if name == "cutlass":
                return Backend.CUTLASS
            return select_narrow(name)


        class Config:
            def __init__(self, a_scale, a_gscale):
                self.a_scale = a_scale
                self.a_gscale = a_gscale


        def make_config(backend, a_scale, block_shape):
            if backend in [Backend.CUTLASS] and block_shape is None:
                return Config(a_scale, 1.0 / a_scale)
            return Config(a_scale, None)
        """,
    "pkg/methods.py": """\
        import torch

        from pkg.oracle import make_config, select_narrow


        class NarrowMethod:
            def create_weights(self, layer):
                layer.register_parameter("a_scale", torch.nn.Parameter(torch.ones(1)))

            def __init__(self, name):
                self.backend = select_narrow(name)

            def process_weights_after_loading(self, layer):
                self.quant_config = make_config(self.backend, layer.a_scale, None)

            def apply(self, layer, x):
                return run(x, self.quant_config)
        """,
    "pkg/reg.py": """\
        import torch


        class RegMethod:
            def create_weights(self, layer):
                layer.register_parameter("w", torch.nn.Parameter(torch.ones(1)))

            def process_weights_after_loading(self, layer):
                self.k = layer.w
                del layer.w

            def apply(self, layer, x):
                return x + self.k
        """,
    "pkg/unrelated.py": """\
        def nothing_to_see():
            return 1
        """,
}


def _tree(root: Path) -> None:
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    for p in root.rglob("*.py"):  # back-dated, as a checkout looks: no racy rows
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns - 60_000_000_000))


def _rows(res) -> list[tuple]:
    return [(f.rule, f.target, f.line, tuple(f.backends or ())) for f in res.findings]


def _edit(path: Path, old: str, new: str) -> None:
    """Replace the first OLD in the file by NEW; OLD "\\n" alone appends NEW at the end."""
    text = path.read_text()
    assert old in text, old
    if old == "\n":
        path.write_text(text + new)
    else:
        path.write_text(text.replace(old, new, 1))
    st = path.stat()  # a distinct mtime even on coarse clocks
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


@pytest.fixture
def analyses(monkeypatch):
    """Counts the runs of the analysis."""
    count = [0]
    orig = engine._analyse

    def counted(*a, **kw):
        count[0] += 1
        return orig(*a, **kw)

    monkeypatch.setattr(engine, "_analyse", counted)
    return count


APPENDED = """

def _an_edit_nothing_calls():
    return 42
"""

# (file edited, file reported, old text, new text): each changes what a full run reports
RELEVANT = {
    # the body of a post-load root the analysis runs
    "root body": (
        "pkg/a.py",
        "pkg/a.py",
        "        layer.x = outer(layer.weight)\n",
        "        layer.x = outer(layer.weight)\n        layer.y = torch.empty(3)\n",
    ),
    # a second root in a file that already names one (its text facts do not change),
    # appended: no entry the analysis looked up before changes, only the module's roots
    "new root": (
        "pkg/a.py",
        "pkg/a.py",
        "\n",
        "\n\n\nclass Other:\n"
        "    def process_weights_after_loading(self, layer):\n"
        "        layer.y = torch.empty(3)\n",
    ),
    # a name the root's module looked up and missed (`outer` is imported) is now defined
    # there, after everything else: only that miss sees it
    "missed lookup": (
        "pkg/a.py",
        "pkg/a.py",
        "\n",
        "\n\n\ndef outer(w):\n    return torch.argsort(w)\n",
    ),
    # an import of a helper the root reaches (not a seed: only its record changes)
    "helper import": ("pkg/b.py", "pkg/a.py", "from pkg.c import", "from pkg.c2 import"),
    # a subclass of a class whose subclasses are enumerated, appended to a file that already
    # declares one (the text facts of the tree are unchanged): only the enumeration sees it
    "new subclass": (
        "pkg/subs.py",
        "pkg/kern.py",
        "\n",
        "\n\n\nclass Alloc2(Base):\n"
        "    def __init__(self, n: int) -> None:\n"
        "        super().__init__(n)\n"
        "        self.scales = torch.ones(n)\n",
    ),
    # the name a weight-creation method registers: `layer.w` registered or not decides
    # whether `self.k = layer.w` (then deleted) is a detached alias; nothing looks it up
    "registered name": ("pkg/reg.py", "pkg/reg.py", '"w", torch', '"w2", torch'),
    # a module table an oracle reads: CUTLASS becomes a choice of the narrow selection
    "oracle table": (
        "pkg/oracle.py",
        "pkg/methods.py",
        '{"marlin": Backend.MARLIN,',
        '{"cutlass": Backend.CUTLASS, "marlin": Backend.MARLIN,',
    ),
}


@pytest.mark.parametrize("case", sorted(RELEVANT))
def test_an_edit_the_analysis_reads_gives_the_full_result(tmp_path, case, analyses):
    edited, reported, old, new = RELEVANT[case]
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root)
    before = precommit_run(root, cache, reported)
    assert analyses[0] == 1
    _edit(root / edited, old, new)
    res = precommit_run(root, cache, reported)
    plain = precommit_run(root, None, reported)
    assert _rows(plain) != _rows(before), "the edit must change the result"
    assert findings_json(res) == findings_json(plain)
    assert analyses[0] == 3  # the cached run analysed again (and so did the plain one)


def test_registered_name_edit_decides_the_finding(tmp_path):
    """The `registered name` case above, there and back: RL107 goes and comes back."""
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root)
    rel = "pkg/reg.py"
    assert [f.rule for f in precommit_run(root, cache, rel).findings] == ["RL107"]
    for old, new, rules in (('"w", torch', '"w2", torch', []), ('"w2"', '"w"', ["RL107"])):
        _edit(root / rel, old, new)
        res = precommit_run(root, cache, rel)
        assert [f.rule for f in res.findings] == rules
        assert findings_json(res) == findings_json(precommit_run(root, None, rel))


@pytest.mark.parametrize("edited", ["pkg/a.py", "pkg/b.py", "pkg/subs.py", "pkg/oracle.py"])
def test_a_function_nothing_reads_reuses_the_result(tmp_path, edited, analyses):
    """The bench's `one-file code` edit: a function appended to a file the analysis read."""
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root)
    rel = "pkg/a.py"
    before = findings_json(precommit_run(root, cache, rel))
    precommit_run(root, cache, "pkg/methods.py")  # the oracle file is read by this root's run
    n = analyses[0]
    _edit(root / edited, "\n", APPENDED)
    res = precommit_run(root, cache, rel)
    assert analyses[0] == n, "the analysis ran"
    assert res.files_parsed == 1  # the edited file, to compare what was read of it
    assert findings_json(res) == before == findings_json(precommit_run(root, None, rel))


def test_edits_in_a_row_never_give_a_stale_result(tmp_path, analyses):
    """Unrelated, relevant, unrelated again, relevant undone: each run equals --no-cache."""
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root)
    rel = "pkg/a.py"
    precommit_run(root, cache, rel)
    a = root / "pkg" / "a.py"
    _, _, old, new = RELEVANT["root body"]
    steps = [
        lambda: _edit(a, "\n", APPENDED),
        lambda: _edit(a, old, new),
        lambda: _edit(a, "\n", APPENDED.replace("_an_edit", "_another")),
        lambda: _edit(a, new, old),
    ]
    for step in steps:
        step()
        assert findings_json(precommit_run(root, cache, rel)) == findings_json(
            precommit_run(root, None, rel)
        )


def test_an_undone_edit_finds_the_state_it_was_made_on(tmp_path, analyses):
    """Relevant edit, undo (a whole-run hit), then an edit nothing reads: the result kept for
    the original state is reused, not re-analysed against the undone one."""
    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root)
    rel = "pkg/a.py"
    a = root / "pkg" / "a.py"
    original = a.read_text()
    before = findings_json(precommit_run(root, cache, rel))
    _, _, old, new = RELEVANT["root body"]
    _edit(a, old, new)
    precommit_run(root, cache, rel)
    assert analyses[0] == 2
    _edit(a, new, old)
    assert a.read_text() == original
    assert findings_json(precommit_run(root, cache, rel)) == before
    _edit(a, "\n", APPENDED)
    res = precommit_run(root, cache, rel)
    assert analyses[0] == 2, "the analysis ran"
    assert findings_json(res) == before == findings_json(precommit_run(root, None, rel))


def test_kept_states_of_another_shape_are_a_miss(tmp_path, analyses):
    """A pack whose kept states (or observations) have another shape (an older layout, a
    corrupt write) analyses again: never an error, never a reused result."""
    import pickle

    root, cache = tmp_path / "src", tmp_path / "cache"
    _tree(root)
    rel = "pkg/a.py"
    precommit_run(root, cache, rel)
    (pack_path,) = (cache / "packs").glob("*.pack")
    for mangle in (
        lambda st: st[0],  # one state, not a tuple of them
        lambda st: (tuple(d[:3] for d in st[0][0]), st[0][1]),  # deps without observations
        lambda st: ((st[0][0], "not bytes"),),
    ):
        pack = pickle.loads(pack_path.read_bytes())
        pack["deps"] = {k: mangle(v) for k, v in pack["deps"].items()}
        pack["obs"] = ["not", "a", "dict"]
        pack_path.write_bytes(pickle.dumps(pack))
        n = analyses[0]
        _edit(root / "pkg" / "a.py", "\n", APPENDED.replace("_an_edit", f"_edit_{n}"))
        res = precommit_run(root, cache, rel)
        assert analyses[0] == n + 1
        assert findings_json(res) == findings_json(precommit_run(root, None, rel))


def test_a_table_enumerated_as_a_whole_is_read_whole(tmp_path):
    """A record's table iterated outside the named views counts as read entirely."""
    from reload_lint.index.deps import WHOLE, Reads

    reads = Reads()
    rec = reads.wrap("m.py", {"module": "m", "functions": {"f": {"name": "f"}}, "_notes": 1})
    assert "_notes" not in rec
    assert list(rec["functions"].values()) == [{"name": "f"}]
    assert WHOLE in reads.by_rel["m.py"]["functions"]
    with pytest.raises(TypeError):
        rec["functions"]["g"] = {}


def test_fixture_runs_read_only_what_is_noted(tmp_path, monkeypatch):
    """tests/unit/_reads_util.py on every fixture package: everything of every record that
    was not noted as read is changed, and the findings stay byte-identical."""
    from test_fixtures import CASES

    changes = 0
    for param in CASES:
        root, contract = param.values
        cfg = Config(contract=contract)
        cache = tmp_path / f"{root.name}-{contract}"
        changes += assert_reads_complete(
            monkeypatch,
            lambda root=root, cfg=cfg, cache=cache: run_check(
                [root], cfg, base_dir=root, use_cache=True, cache_dir=cache
            ),
            lambda root=root, cfg=cfg: run_check([root], cfg, base_dir=root, use_cache=False),
        )
    assert changes > 500  # the check did change the records


def test_this_tree_reads_only_what_is_noted(tmp_path, monkeypatch):
    root = tmp_path / "src"
    _tree(root)
    for rel in ("pkg/a.py", "pkg/kern.py", "pkg/methods.py", "pkg/reg.py"):
        assert_reads_complete(
            monkeypatch,
            lambda rel=rel: precommit_run(root, tmp_path / f"c-{rel.replace('/', '-')}", rel),
            lambda rel=rel: precommit_run(root, None, rel),
        )
