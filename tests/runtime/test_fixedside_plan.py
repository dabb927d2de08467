"""Planning the fixed side and rendering it: one run per site, the build's other targets named;
the page's figures by fix source; the worklist's Fix cell. No child process runs here."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from reload_lint.confirm.fixedside import fixed_runs, prepare_sources
from reload_lint.confirm.patched import sha256_text
from reload_lint.confirm.report_fix import diff_section, fixed_cell, headline
from reload_lint.findings import Finding
from reload_lint.render.worklist_fix import fix_cell

PATH = "tests/runtime/fixture_kernels.py"


@dataclass
class FakeFix:
    description: str


@dataclass
class FakeSite:
    finding: Finding
    canonical: str

    def spec_entry(self) -> dict:
        return {"fingerprint": self.finding.fingerprint, "canonical": self.canonical}


def _finding(fp: str, target: str, line: int) -> Finding:
    return Finding("RL102", PATH, line, 1, line, "ScratchKernel.m", target, "m", fingerprint=fp)


def _patch() -> str:
    src = Path(__file__).with_name("fixture_kernels.py").read_text()
    new = src.replace("IN, OUT, GROUP = 16, 8, 4", "IN, OUT, GROUP = 16, 8, 4  # patched")
    return "".join(
        difflib.unified_diff(src.splitlines(True), new.splitlines(True), f"a/{PATH}", f"b/{PATH}")
    )


def test_one_run_per_site_own_fix_from_source_others_named(tmp_path):
    ws = FakeSite(_finding("a" * 20, "self.workspace", 84), "self.workspace")
    idx = FakeSite(_finding("b" * 20, "layer.sort_idx", 85), "layer.sort_idx")
    green = FakeSite(_finding("c" * 20, "self.other", 86), "self.other")
    patch = _patch()
    sources = prepare_sources(
        [ws.finding, idx.finding], {ws.finding.fingerprint: (patch, None, "keep, safe")}, None
    )
    fixes = {"self.workspace": FakeFix("ws"), "layer.sort_idx": FakeFix("idx")}
    common = {"recipe": "r", "targets": {}, "preconditions": []}
    runs, refused = fixed_runs(
        common, [ws, idx, green], fixes, {"a" * 20, "b" * 20}, sources, tmp_path
    )
    assert refused == []
    by_own = {r["own"]: r for r in runs}
    assert set(by_own) == {"self.workspace", "layer.sort_idx"}  # the green site gets no run
    src_run, mp_run = by_own["self.workspace"], by_own["layer.sort_idx"]
    assert src_run["fix_source"] == "codemod" and src_run["fixes"] == ["layer.sort_idx"]
    assert src_run["patch_sha256"] == sha256_text(patch) and src_run["patch_label"] == "keep, safe"
    assert Path(src_run["overlay"], PATH).read_text().count("# patched") == 1
    assert mp_run["fix_source"] == "monkeypatch"
    assert mp_run["fixes"] == ["self.workspace", "layer.sort_idx"]  # others, then its own


def test_a_patch_that_does_not_apply_is_refused_not_replaced(tmp_path):
    ws = FakeSite(_finding("a" * 20, "self.workspace", 84), "self.workspace")
    bad = _patch().replace("IN, OUT, GROUP", "IN, OUT, GRP")
    sources = prepare_sources([ws.finding], {ws.finding.fingerprint: (bad, None, "")}, None)
    runs, refused = fixed_runs(
        {"targets": {}}, [ws], {"self.workspace": FakeFix("ws")}, {"a" * 20}, sources, tmp_path
    )
    assert runs == [] and len(refused) == 1 and "does not apply" in refused[0][1]


def _rec(fp, fixed, verdict, **kw):
    base = {"fingerprint": fp, "fixed": fixed, "verdict": verdict, "path": PATH, "line": 84}
    return {**base, "target": "self.workspace", "recipe": "r", "reason": "x", **kw}


def test_page_counts_by_fix_source_and_shows_the_proved_diff():
    patch = _patch()
    sha = sha256_text(patch)
    ev = [
        _rec("a" * 20, False, "red", tier="replay", failure="livelock"),
        _rec("a" * 20, True, "green", tier="replay", fix_source="codemod", fix_patch_sha256=sha),
        _rec("b" * 20, False, "red", tier="replay", failure="stale read"),
        _rec("b" * 20, True, "red", tier="replay", fix_source="monkeypatch"),
    ]
    sites = {
        "a" * 20: (ev[0], ev[1], []),
        "b" * 20: (ev[2], ev[3], []),
    }
    head = "\n".join(headline(ev, sites))
    # by grade: the monkeypatch's red saw no failure at replay (its record names none)
    assert "codemod: 1 green; monkeypatch: 1 red-unobserved" in head
    assert (
        "(no precondition): 2 sites; green with the codemod's patch, each in an isolated run: 1"
        in head
    )
    assert fixed_cell(ev[1]) == f"green (codemod {sha[:8]})"
    page = "\n".join(diff_section([{"fingerprint": "a" * 20, "fix_patch": patch}], ev))
    assert "```diff" in page and "# patched" in page and sha in page


def test_worklist_fix_cell_links_the_component_diff(tmp_path):
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "fused_moe.experts.diff").write_text("--- a\n")
    fs = [_finding("a" * 20, "self.workspace", 84), _finding("b" * 20, "layer.sort_idx", 85)]
    fixed = {
        "a" * 20: [_rec("a" * 20, True, "green", fix_source="codemod")],
        "b" * 20: [_rec("b" * 20, True, "red", fix_source="codemod", failure="stale read")],
    }
    cell = fix_cell("fused_moe/experts", fs, fixed, tmp_path / "patches", tmp_path / "w.md")
    assert cell == (
        "[fused_moe.experts.diff](patches/fused_moe.experts.diff): codemod green 1/2, red 1/2 "
        "(line 85 red stale read)"
    )
    assert fix_cell("Other", fs[:0], {}, tmp_path / "patches", None) == "-"


def test_worklist_patches_adds_the_fix_column(tmp_path):
    from reload_lint.cli import main

    root = Path(__file__).resolve().parents[2]
    ev = root / "docs" / "evidence"
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "quantization.utils.diff").write_text("--- a\n")
    argv = ["worklist", "--findings", str(ev / "h200-vllm-0.25.1.findings.json")]
    argv += ["--evidence", str(ev / "h200-vllm-0.25.1.json"), "-o", str(tmp_path / "w.md")]
    assert main([*argv, "--patches", str(tmp_path / "p")]) == 0
    text = (tmp_path / "w.md").read_text()
    assert "| Status | Fix |" in text
    assert "[quantization.utils.diff](p/quantization.utils.diff): " in text
    assert main([*argv, "--patches", str(tmp_path / "nope")]) == 2
    assert main(argv) == 0 and "| Fix |" not in (tmp_path / "w.md").read_text()


def test_worklist_fix_cell_links_the_areas_the_codemod_edits(tmp_path):
    (tmp_path / "quantization.diff").write_text("--- a\n")
    f = _finding("a" * 20, "self._permute_scratch", 84)
    f.remedy = {"paths": ["vllm/model_executor/layers/quantization/fp8.py"]}
    fixed = {"a" * 20: [_rec("a" * 20, True, "green", fix_source="codemod")]}
    cell = fix_cell("fused_moe/experts", [f], fixed, tmp_path, tmp_path / "w.md")
    assert cell == "[quantization.diff](quantization.diff): codemod green 1/1"


def _line_patch(old: str, new: str) -> str:
    src = Path(__file__).with_name("fixture_kernels.py").read_text()
    assert src.count(old) == 1
    after = src.replace(old, new)
    return "".join(
        difflib.unified_diff(src.splitlines(True), after.splitlines(True), f"a/{PATH}", f"b/{PATH}")
    )


def _unshadow_build(tmp_path, taken_off):
    """A masking build (H200 session 14, mxfp4.py:352-355): `layer.w13_weight` is a plain
    attribute over a deleted checkpoint Parameter (the reload needs the unshadow precondition),
    `self.w13_precision_config` is stored next to it; both have a keep-and-copy codemod."""
    w13 = FakeSite(_finding("a" * 20, "layer.w13_weight", 84), "layer.w13_weight")
    cfg = FakeSite(_finding("b" * 20, "self.w13_precision_config", 85), "self.w13_precision_config")
    patches = {
        w13.finding.fingerprint: (
            _line_patch("IN, OUT, GROUP = 16, 8, 4", "IN, OUT, GROUP = 16, 8, 4  # w13"),
            None,
            "keep w13",
        ),
        cfg.finding.fingerprint: (
            _line_patch(
                'PATH = "tests/runtime/fixture_kernels.py"',
                'PATH = "tests/runtime/fixture_kernels.py"  # cfg',
            ),
            None,
            "keep cfg",
        ),
    }
    tmp_path.mkdir()
    sources = prepare_sources([w13.finding, cfg.finding], patches, None)
    fixes = {"layer.w13_weight": FakeFix("reuse w13"), "self.w13_precision_config": FakeFix("cfg")}
    common = {"recipe": "r", "targets": {}, "preconditions": ["unshadow"]}
    runs, refused = fixed_runs(
        common, [w13, cfg], fixes, {"a" * 20, "b" * 20}, sources, tmp_path, taken_off
    )
    assert refused == []
    return {r["own"]: r for r in runs}


def test_unshadow_removed_attribute_is_held_by_its_monkeypatch_not_merged_as_a_codemod(tmp_path):
    # before: the w13 codemod was merged into the precision config's run; under unshadow it
    # found nothing to keep, bound new tensors, and the config's record went red through them
    merged = _unshadow_build(tmp_path / "before", set())["self.w13_precision_config"]
    text = Path(merged["overlay"], PATH).read_text()
    assert "# w13" in text and "# cfg" in text and merged["fixes"] == []
    runs = _unshadow_build(tmp_path / "after", {"w13_weight"})
    cfg = runs["self.w13_precision_config"]
    text = Path(cfg["overlay"], PATH).read_text()
    assert "# cfg" in text and "# w13" not in text  # its own codemod only
    assert cfg["fixes"] == ["layer.w13_weight"]  # the monkeypatch keeps what unshadow set aside
    [note] = cfg["codemods_with"]
    assert note.startswith("codemod of layer.w13_weight not applied with this one: the unshadow")
    assert "held fixed by its monkeypatch" in note
    # the masking site's own run keeps its own codemod (its record is graded by verdicts.py)
    w13 = runs["layer.w13_weight"]
    assert "# w13" in Path(w13["overlay"], PATH).read_text()
    assert w13["codemods_with"][0].startswith("codemod of self.w13_precision_config: keep cfg")


def test_taken_off_names_from_a_refused_reload():
    from reload_lint.confirm.fixedside import taken_off_names

    got = taken_off_names(["routed_experts.w13_weight", "w2_weight", "layer.w13_bias"])
    assert got == {"w13_weight", "w2_weight", "w13_bias"}
    assert taken_off_names(None) == set()
