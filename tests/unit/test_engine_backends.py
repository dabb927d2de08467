"""Backend selection: the experts classes a rebuilt kernel can be built from are read from the
method's own oracle (analysis/oracles.py), named in the finding's `backends` with where the
oracle chooses them, and a rebuild whose oracle only returns non-allocating experts is clean."""

from __future__ import annotations

from pathlib import Path

from _engine_util import check_files

from reload_lint.config import Config
from reload_lint.engine import run_check

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ORACLE = "tests/fixtures/minioracle/minioracle/model_executor/layers"


def _oracle_run():
    root = FIXTURES.parent.parent
    return run_check([FIXTURES / "minioracle"], Config(), base_dir=root, use_cache=False)


def test_backends_name_the_oracles_allocating_choices():
    result = _oracle_run()
    by_symbol = {f.symbol: f for f in result.findings if f.rule == "RL105"}
    fp8 = by_symbol["Fp8MoEMethod.process_weights_after_loading"]
    names = [b.split(" ", 1)[0] for b in fp8.backends]
    assert names == ["GroupedGemmExperts", "SwigluExperts", "TrtLikeExperts"]
    # where the choice is made: the oracle's return that names the class
    oracle = f"{ORACLE}/fused_moe/oracle/fp8.py"
    lines = (FIXTURES.parent.parent / oracle).read_text().splitlines()
    for b in fp8.backends:
        path, line = b.split("(", 1)[1].rstrip(")").rsplit(":", 1)
        assert path == oracle
        assert b.split(" ", 1)[0] in lines[int(line) - 1]
    # TritonLikeExperts is a choice too, but allocates nothing: not a backend of the finding
    assert "TritonLikeExperts" in " ".join(s.note for s in fp8.trace)
    # a branch in the method itself is where that choice is made
    mx = by_symbol["Mxfp4MoEMethod.process_weights_after_loading"]
    assert any(
        b.startswith("SwigluExperts (") and "quantization/moe_methods.py:" in b for b in mx.backends
    )


def test_constructor_reached_through_the_oracle_reads_the_config_it_is_handed():
    """TrtLikeExperts derives `_g1_alphas` from the dataclass quant config's fields."""
    result = _oracle_run()
    fp8 = next(f for f in result.findings if f.symbol.startswith("Fp8MoEMethod.process"))
    notes = [s.note for s in fp8.trace]
    assert any("TrtLikeExperts keeps a new tensor on self._g1_alphas" in n for n in notes)


def test_config_keeps_an_allocation_made_in_its_call_arguments():
    result = _oracle_run()
    cfg = next(f for f in result.findings if f.target == "self.moe_quant_config")
    assert cfg.rule == "RL105" and cfg.symbol.startswith("Fp4MoEMethod.")
    assert any("keeps a new tensor on self.gscale (dataclass field)" in s.note for s in cfg.trace)
    # a config that binds registered scales only is not a finding
    assert not [
        f
        for f in result.findings
        if f.target == "self.moe_quant_config" and f.symbol.startswith("Fp8MoEMethod.")
    ]


def test_oracle_with_no_allocating_choice_has_no_finding():
    result = _oracle_run()
    symbols = {f.symbol.split(".")[0] for f in result.findings}
    assert not symbols & {"Wna16MoEMethod", "Wna16FirstMoEMethod", "MarlinOnlyMoEMethod"}


def test_unread_oracle_keeps_every_subclass(tmp_path):
    """A choice the reader cannot follow (a parameter) keeps the conservative default."""
    files = {
        "pkg/__init__.py": "",
        "pkg/m.py": """
        import torch


        class Base:
            def __init__(self, n: int) -> None:
                self.n = n


        class Alloc(Base):
            def __init__(self, n: int) -> None:
                super().__init__(n)
                self.strides = torch.full((n,), 4)


        class Plain(Base):
            pass


        def make(cls: type[Base], n: int) -> Base:
            return cls(n)


        class Method:
            def __init__(self, picked) -> None:
                self.experts_cls = Plain if picked is None else picked

            def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
                self.kernel = make(self.experts_cls, 4)

            def apply(self, layer: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
                return self.kernel(x)
        """,
    }
    result = check_files(tmp_path, files)
    hits = [f for f in result.findings if f.rule == "RL105"]
    assert len(hits) == 1
    assert [b.split(" ", 1)[0] for b in hits[0].backends] == ["Alloc"]
    assert "any subclass" in hits[0].backends[0]


BRANCH_ORACLE = {
    "pkg/__init__.py": "",
    "pkg/oracle.py": """
    import enum

    import torch


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
    "pkg/methods.py": """
    import torch

    from pkg.oracle import make_config, select_narrow, select_wide


    class NarrowMethod:
        def create_weights(self, layer):
            layer.register_parameter("a_scale", torch.nn.Parameter(torch.ones(1)))

        def __init__(self, name):
            self.backend = select_narrow(name)

        def process_weights_after_loading(self, layer):
            self.quant_config = make_config(self.backend, layer.a_scale, None)

        def apply(self, layer, x):
            return run(x, self.quant_config)


    class WideMethod:
        def create_weights(self, layer):
            layer.register_parameter("a_scale", torch.nn.Parameter(torch.ones(1)))

        def __init__(self, name):
            self.backend = select_wide(name)

        def process_weights_after_loading(self, layer):
            self.quant_config = make_config(self.backend, layer.a_scale, None)

        def apply(self, layer, x):
            return run(x, self.quant_config)
    """,
}


def test_a_branch_for_members_the_oracle_never_chooses_is_not_analysed(tmp_path):
    # make_config allocates `1.0 / a_scale` only for CUTLASS: the narrow method's oracle
    # (a tuple, a name table, a fallback) never returns it, so its config only keeps the
    # registered scale; the wide one can, and its rebuilt config is reported
    result = check_files(tmp_path, BRANCH_ORACLE)
    got = {f.symbol.split(".")[0]: f for f in result.findings if f.target == "self.quant_config"}
    assert set(got) == {"WideMethod"}
    assert got["WideMethod"].rule == "RL105"
