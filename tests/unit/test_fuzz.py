"""Fuzz the static path: generated modules through extraction, analysis, suppressions and every
renderer, in process, with zero crashes (issue 6).

A crash is any exception escaping, or an RL906 diagnostic that reports an internal error
(RL906 for a file too large or too deeply nested is the designed answer, not a crash).

Two sources of modules:

- mutations of real kernel-shaped code: the rule catalog's INVALID/VALID examples and the
  fixture package's files, with lines and tokens deleted, duplicated, swapped, re-indented and
  spliced in from other kernels, and kernel-ish tokens inserted (`torch.empty(`, `partial(`,
  `nn.Parameter(`, `setattr(layer, "x", `, `lambda`, brackets, quotes, suppressions ...);
- grammar-generated modules from hypothesmith.

CI runs FUZZ_EXAMPLES (default 2500) mutations and a tenth as many grammar modules, derandomized
so a CI failure reproduces; set FUZZ_EXAMPLES for a longer, randomized campaign, e.g.
`FUZZ_EXAMPLES=20000 pytest tests/unit/test_fuzz.py -s` (it prints its statistics).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reload_lint.analysis.contracts import make_contract
from reload_lint.analysis.interp import Analyzer
from reload_lint.catalog import load_catalog
from reload_lint.config import Config
from reload_lint.findings import FileError, Finding, compute_fingerprints
from reload_lint.gate import apply_suppressions, scan_suppressions
from reload_lint.incremental.cache import _extract_job
from reload_lint.index.project import ProjectIndex
from reload_lint.render.github import render_github
from reload_lint.render.json_ import render_json
from reload_lint.render.sarif import render_sarif
from reload_lint.render.text import render_text

REPO = Path(__file__).resolve().parents[2]
_ENV = os.environ.get("FUZZ_EXAMPLES")
EXAMPLES = int(_ENV) if _ENV else 2500
GRAMMAR_EXAMPLES = max(50, EXAMPLES // 10)
FUZZ_SETTINGS = dict(
    deadline=None,
    derandomize=_ENV is None,  # CI: the same examples every run; a long run explores
    database=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)

STATS: Counter = Counter()


def _corpus() -> list[str]:
    out = [e.code for doc in load_catalog().values() for e in doc.examples]
    fixtures = REPO / "tests" / "fixtures"
    out += [p.read_text(encoding="utf-8") for p in sorted(fixtures.rglob("*.py"))]
    return [s for s in out if s.strip()]


CORPUS = _corpus()
LINES = sorted({ln for src in CORPUS for ln in src.splitlines() if ln.strip()})
TOKENS = [
    "(", ")", "[", "]", "{", "}", ":", ",", "=", ".", "*", "**", "-", "~", "not ", "lambda ",
    "lambda: ", " if x else ", "yield ", "await ", "return ", "del ", "global g\n", "\n",
    "    ", "\t", "\\\n", "'", '"', '"""', "#", "@property\n", "@staticmethod\n", "self.",
    "layer.", "torch.empty(4)", "torch.argsort(", "torch.nn.Parameter(", "nn.Parameter(",
    "functools.partial(", "partial(", "setattr(layer, 'x', ", "getattr(layer, 'w')",
    "register_buffer('b', ", "register_parameter('p', ", ".data = ", ".t()", ".contiguous()",
    "super().__init__()", "cls(", "type(self)(", "process_weights_after_loading",
    "def process_weights_after_loading(self, layer):\n", "def apply(self, layer, x):\n",
    "class K(torch.nn.Module):\n", "import torch\n", "from torch import argsort as a\n",
    "  # reload-lint: ignore[RL101] -- reason", "  # reload-lint: ignore[RL1", "  # expect: RL101",
    "0", "1.5", "None", "True", "...", "x", "layer", "self", "__init__", "async ", "with ", "for ",
    "in ", "match x:\n    case _:\n", "*args", "**kw", "f'{x}'", "b'\\x00'", "\u00e9", "\ufeff",
]  # fmt: skip
_TOKEN_RE = re.compile(r"\w+|\s+|.", re.S)


def _mutate(src: str, ops: list[tuple[int, int, int, int]]) -> str:
    lines = src.splitlines(keepends=True) or ["\n"]
    for op, i, j, k in ops:
        n = len(lines)
        if not n:
            lines = ["\n"]
            n = 1
        i, j = i % n, j % n
        if op == 0:  # delete a line
            del lines[i]
        elif op == 1:  # duplicate a line
            lines.insert(j, lines[i])
        elif op == 2:  # swap two lines
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:  # splice in a line from another kernel, at this line's indentation
            donor = LINES[k % len(LINES)].strip()
            indent = re.match(r"[ \t]*", lines[i]).group(0)
            lines.insert(i, f"{indent}{donor}\n")
        elif op == 4:  # re-indent a line
            lines[i] = " " * (4 * (k % 4)) + lines[i].lstrip(" \t")
        else:  # token-level edits on one line
            toks = _TOKEN_RE.findall(lines[i]) or [""]
            t = j % len(toks)
            if op == 5:  # delete a token
                del toks[t]
            elif op == 6:  # duplicate a token
                toks.insert(t, toks[t])
            else:  # insert a kernel-ish token
                toks.insert(t, TOKENS[k % len(TOKENS)])
            lines[i] = "".join(toks)
    return "".join(lines)


def _internal(e: FileError) -> bool:
    return e.rule == "RL906" and not (
        "larger than" in e.message or "nested" in e.message or "file skipped" in e.message
    )


def analyse(text: str, module: str = "pkg.kern") -> tuple[list[Finding], list[FileError]]:
    """A light in-process engine: extraction, the analysis, suppressions, every renderer.
    Raises on any crash; returns findings and file diagnostics."""
    path = module.replace(".", "/") + ".py"
    errors: list[FileError] = []
    res = _extract_job((text, module, False))
    records: dict[str, dict] = {}
    if res[0] == "ok":
        records[module] = res[1]
        STATS["parsed"] += 1
    else:
        _, rule, line, msg = res
        errors.append(FileError(rule, path, msg, line))
        STATS[f"diagnostic {rule}"] += 1
    cfg = Config()
    contract = make_contract("vllm-layerwise", cfg.preserving_helpers)
    index = ProjectIndex({module: path}, records.get)
    analyzer = Analyzer(index, cfg.all_root_names(), cfg.all_apply_names(), lambda p: contract)
    findings = analyzer.run(sorted(records))
    errors += analyzer.errors
    compute_fingerprints(findings)
    lines = text.splitlines()
    for f in findings:
        f.snippet = lines[f.line - 1].strip() if 0 < f.line <= len(lines) else ""
    sups = {path: scan_suppressions(text)} if "reload-lint:" in text else {}
    findings += apply_suppressions(findings, sups, enabled=lambda p, c: True, paths=None)
    findings.sort(key=Finding.sort_key)
    render_text(findings, errors)
    json.loads(render_json(findings, errors, files=1))
    json.loads(render_sarif(findings, errors))
    render_github(findings, errors)
    STATS["findings"] += len(findings)
    bad = [e for e in errors if _internal(e)]
    assert not bad, f"internal error on generated module: {bad}\n----\n{text}"
    return findings, errors


@pytest.fixture(scope="module", autouse=True)
def _report():
    """Collect statistics; also count statements whose evaluation raised inside the analysis
    (exec_body skips such a statement by design: not a crash, but worth watching)."""
    STATS.clear()
    real = Analyzer.exec_stmt

    def counting(self, fr, st):
        try:
            return real(self, fr, st)
        except RecursionError:
            raise
        except Exception as exc:
            STATS[f"skipped statement ({type(exc).__name__})"] += 1
            raise

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Analyzer, "exec_stmt", counting)
        yield
    if STATS:
        print("\nfuzz statistics: " + ", ".join(f"{k}={v}" for k, v in sorted(STATS.items())))


def test_corpus_is_kernel_shaped():
    assert len(CORPUS) >= 40
    found = sum(1 for src in CORPUS if analyse(src)[0])
    assert found >= 20  # the unmutated kernels do produce findings


_ops = st.lists(
    st.tuples(st.integers(0, 7), st.integers(0, 500), st.integers(0, 500), st.integers(0, 10_000)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=EXAMPLES, **FUZZ_SETTINGS)
@given(base=st.integers(0, len(CORPUS) - 1), ops=_ops)
def test_mutated_kernels_never_crash(base, ops):
    STATS["mutated modules"] += 1
    analyse(_mutate(CORPUS[base], ops))


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compile()s its output
def test_grammar_generated_modules_never_crash():
    hypothesmith = pytest.importorskip("hypothesmith")

    @settings(max_examples=GRAMMAR_EXAMPLES, **FUZZ_SETTINGS)
    @given(src=hypothesmith.from_grammar())
    def run(src):
        STATS["grammar modules"] += 1
        analyse(src)
        # and spliced into a kernel, so the analysis walks it from a post-load root
        body = "".join("        " + ln + "\n" for ln in src.splitlines()) or "        pass\n"
        kern = (
            "import torch\n\nclass K:\n    def process_weights_after_loading(self, layer):\n"
            + body
            + "        layer.x = torch.empty(1)\n"
        )
        analyse(kern)

    run()


# Literal forms on purpose, not by chance (issue 26: `b"GGUF" b"\\x00"` made its file RL906):
# implicit concatenations of str/bytes/raw/u pieces, f-strings with conversions and nested
# format specs, parenthesised over lines, and the other constants.
_STR_PIECE = st.sampled_from(
    [
        '"a"',
        "'b'",
        'u"c"',
        'r"\\d"',
        'R"e"',
        '""',
        'f"{x}"',
        'f"{x!r:>{w}}"',
        'f"{x:{w}.{p}f}"',
        "f'{f\"{x:{w}}\"!s}'",
        'fr"{x}\\n"',
        'f""',
        '"\\x00"',
    ]
)
_BYTES_PIECE = st.sampled_from(['b"GGUF"', 'b"\\x00"', "rb'\\d'", 'Br"x"', 'b""', "B'y'"])
_OTHER = st.sampled_from(
    [
        "2j",
        "1.5e300",
        "...",
        "10**400",
        "0x" + "f" * 60,
        "0b1_0",
        "None",
        "123456789012345678901234567890123456789",
    ]
)


def _concat(pieces, parens):
    if parens:
        return "(" + "\n     ".join(pieces) + ")"
    return " ".join(pieces)


LITERAL = st.one_of(
    st.builds(_concat, st.lists(_STR_PIECE, min_size=1, max_size=4), st.booleans()),
    st.builds(_concat, st.lists(_BYTES_PIECE, min_size=1, max_size=4), st.booleans()),
    _OTHER,
)


@settings(max_examples=EXAMPLES, **FUZZ_SETTINGS)
@given(lits=st.lists(LITERAL, min_size=1, max_size=4))
def test_literal_forms_never_lose_the_file(lits):
    STATS["literal modules"] += 1
    body = "".join(
        f"        layer.a{i} = {lit}\n        setattr(layer, {lit}, 1)\n"
        for i, lit in enumerate(lits)
    )
    kern = (
        "import torch\n\nV = " + lits[0] + "\n\nclass K:\n"
        "    def process_weights_after_loading(self, layer):\n        x = w = p = 1\n"
        + body
        + "        layer.x = torch.empty(1)\n"
    )
    _, errors = analyse(kern)
    assert not [e for e in errors if e.code == "RL906"], kern


# The tags of the record's expression and statement language (index/extract.py). A lambda or
# comprehension parameter, a free name or a keyword argument spelled like one is stored as a
# bare string inside a tuple, and a walker that matches tags without the node's shape mistakes
# it for a node (issue 11: `lambda c: c` crashed the engine's call-head walk at -j 2; that walk
# went with speculative parsing, the analysis's own walks of records remain).
RECORD_TAGS = ["n", "a", "c", "b", "u", "s", "k", "t", "d", "l", "assign", "aug", "expr", "ret"]
TAG_SHAPES = [
    "lambda {ps}: {p0}",
    "lambda: {p0}",
    "lambda {p0}=g({p1}): {p0}",
    "[{p0} for {p0} in {p1}]",
    "{{{p0}: {p1} for {p0}, {p1} in x}}",
    "({p0} for {p0} in x if {p1})",
    "f({p0}={p1})",
    "f(lambda {ps}: g({p0}), {p1}={p0})",
    "sorted(x, key=lambda {p0}: {p0}.{p1})",
]


@settings(max_examples=GRAMMAR_EXAMPLES, **FUZZ_SETTINGS)
@given(
    shapes=st.lists(st.sampled_from(TAG_SHAPES), min_size=1, max_size=3),
    names=st.lists(st.sampled_from(RECORD_TAGS), min_size=2, max_size=4, unique=True),
)
def test_parameters_named_like_record_tags_never_crash(shapes, names):
    STATS["tag-named parameters"] += 1
    fill = {"ps": ", ".join(names), "p0": names[0], "p1": names[1]}
    body = "".join(f"        v{i} = {shape.format(**fill)}\n" for i, shape in enumerate(shapes))
    analyse(
        "import torch\n\nclass K:\n    def process_weights_after_loading(self, layer):\n"
        + body
        + "        layer.x = torch.empty(1)\n"
    )
