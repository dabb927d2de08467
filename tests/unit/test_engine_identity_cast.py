"""Identity casts (analysis/dtypes.py, analysis/identity.py): a constructor that casts the
index tables it is handed with `.to(dtype=D)` allocates nothing when the tables were made with
dtype D, read from where they are made (a factory's `dtype=`, int64 arithmetic, a registered
buffer of the layer class the quant method's annotation names). A cast to another dtype, or of
a table whose dtype the code does not say, stays new storage."""

from __future__ import annotations

import json

from _engine_util import check_files

from reload_lint.cli import main

FILES = {
    "pkg/__init__.py": "",
    "pkg/tables.py": """
        import torch


        class SlotPlan:
            def __init__(self, n_slots: int, world: int):
                self.n_slots = n_slots
                self.world = world
                self._tables = self._build()

            @property
            def tables(self):
                return self._tables

            def _build(self):
                ids = torch.arange(self.n_slots, dtype=torch.long)
                owner = torch.remainder(ids, self.world)
                slot = ids // self.world + owner * 0
                back = torch.empty_like(slot)
                back[slot] = ids
                return (slot, back)
    """,
    "pkg/layer.py": """
        import torch
        from pkg.tables import SlotPlan


        class SlotLayer(torch.nn.Module):
            def __init__(self, plan: SlotPlan):
                super().__init__()
                self.plan = plan
                fwd, back = self.plan.tables
                self.register_buffer("slot_fwd", fwd, persistent=False)
                self.register_buffer("slot_back", back, persistent=False)

            def slot_tables(self):
                if hasattr(self, "slot_fwd"):
                    return (self.slot_fwd, self.slot_back)
                return None
    """,
    "pkg/dispatch.py": """
        import torch
        import far_away_lib

        INDEX_T = getattr(far_away_lib, "index_t", torch.int64)


        class Dispatch:
            def __init__(self, fwd=None, back=None):
                want = self.index_dtype()

                def _norm(t):
                    if t is None:
                        return t
                    return t.to(dtype=want)

                self.fwd = _norm(fwd)
                self.back = _norm(back)

            def index_dtype(self):
                return WANT

            def run(self, x):
                return x[self.fwd]


        def build(tables):
            fwd, back = tables
            return Dispatch(fwd=fwd, back=back)
    """,
    "pkg/method.py": """
        from pkg.dispatch import build
        from pkg.layer import SlotLayer


        class SlotMethod:
            def process_weights_after_loading(self, layer: SlotLayer) -> None:
                self.kernel = build(layer.slot_tables())

            def apply(self, layer: SlotLayer, x):
                return self.kernel.run(x)
    """,
}


def _run(tmp_path, want: str, table_op: str = "//"):
    files = dict(FILES)
    files["pkg/dispatch.py"] = files["pkg/dispatch.py"].replace("WANT", want)
    files["pkg/tables.py"] = files["pkg/tables.py"].replace(
        "ids // self.world", f"ids {table_op} self.world"
    )
    return check_files(tmp_path, files)


def _kernel_findings(res):
    return [f for f in res.findings if f.target == "self.kernel"]


def test_cast_to_the_tables_own_dtype_is_no_allocation(tmp_path):
    assert _kernel_findings(_run(tmp_path, "torch.int64")) == []


def test_cast_to_another_dtype_is_new_storage(tmp_path):
    (f,) = _kernel_findings(_run(tmp_path, "torch.int32"))
    assert f.rule == "RL105"
    assert any("`.to()` on `t`" in s.note for s in f.trace)


def test_table_of_unknown_dtype_keeps_the_cast(tmp_path):
    """`/` makes a floating table: its dtype is not int64, so the cast may allocate."""
    (f,) = _kernel_findings(_run(tmp_path, "torch.int64", table_op="/"))
    assert f.rule == "RL105"


def test_external_default_is_taken_and_explained(tmp_path, monkeypatch, capsys):
    files = dict(FILES)
    files["pkg/dispatch.py"] = files["pkg/dispatch.py"].replace("WANT", "INDEX_T")
    assert _kernel_findings(check_files(tmp_path, files)) == []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RELOAD_LINT_CACHE", str(tmp_path / ".cache"))
    written = (tmp_path / "pkg/method.py").read_text().splitlines()
    line = next(i for i, s in enumerate(written, 1) if "self.kernel = build(" in s)
    capsys.readouterr()
    assert main(["explain", "--no-cache", "--format", "json", f"pkg/method.py:{line}"]) == 0
    (answer,) = json.loads(capsys.readouterr().out)["explain"]
    (d,) = [d for d in answer["decisions"] if d["target"] == "self.kernel"]
    assert d["status"] == "decided-safe" and d["fact"] == "allocates-nothing"
    assert "returns the tensor itself" in d["why"]
    assert "made at pkg/tables.py:" in d["why"]
    assert (
        "`far_away_lib.index_t` is outside the tree: taken as its default torch.int64" in d["why"]
    )


def test_layer_annotations_on_one_inheritance_line_take_the_most_derived(tmp_path):
    """The base annotates the layer with the base layer class, the override with a subclass:
    the call on the layer is read on the subclass."""
    files = dict(FILES)
    files["pkg/dispatch.py"] = files["pkg/dispatch.py"].replace("WANT", "torch.int64")
    files["pkg/method.py"] = """
        from pkg.dispatch import build
        from pkg.layer import SlotLayer


        class WideSlotLayer(SlotLayer):
            pass


        class SlotMethodBase:
            def apply(self, layer: SlotLayer, x):
                return self.kernel.run(x)


        class WideSlotMethod(SlotMethodBase):
            def process_weights_after_loading(self, layer: "WideSlotLayer") -> None:
                self.kernel = build(layer.slot_tables())
    """
    assert _kernel_findings(check_files(tmp_path, files)) == []
