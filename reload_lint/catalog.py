"""The rule catalog: parse rules/RLxxx.md into RuleDoc records, render the docs
pages.

A rule file is a small header block followed by fixed `##` headings::

    ---
    code: RL101
    name: unregistered-module-tensor
    severity: error
    message: `{target}` holds a tensor created after loading ...
    ---

    ## What it does
    ...

Code examples are fenced blocks tagged ```` ```python INVALID ```` or ```` ```python VALID ````.
An HTML comment ``<!-- contract: inplace-only -->`` right before a block runs it under that
reload contract (default: vllm-layerwise). Inside INVALID blocks, ``# expect: RL101`` marks the
line where the finding must be reported; ``# expect[inplace-only]: RL109`` limits a marker to one
contract. The same markers drive the fixture packages under tests/fixtures/.

The static path only reads these files; nothing here imports audited code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from reload_lint.errors import ReloadLintError
from reload_lint.rules import RULES, catalog_dir

HEADINGS: tuple[str, ...] = (
    "What it does",
    "Why is this bad",
    "Example",
    "Use instead",
    "Fix guidance",
    "Known limits",
    "Under each reload contract",
)
HEADER_FIELDS: tuple[str, ...] = ("code", "name", "severity", "message")
CONTRACTS: tuple[str, ...] = ("vllm-layerwise", "inplace-only", "vllm-load-weights")
DEFAULT_CONTRACT = "vllm-layerwise"
EXAMPLE_KINDS: tuple[str, ...] = ("INVALID", "VALID")

_FENCE_OPEN = re.compile(r"^```(\w+)?(?:[ \t]+(\w+))?[ \t]*$")
_CONTRACT_COMMENT = re.compile(r"^<!--\s*contract:\s*([\w-]+)\s*-->\s*$")
_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t]*$")
# `# expect: RL101`, `# expect: RL101, RL103`, `# expect[inplace-only]: RL109`
_EXPECT = re.compile(r"#\s*expect(?:\[([\w-]+)\])?:\s*(RL\d{3}(?:\s*,\s*RL\d{3})*)")


class Example(NamedTuple):
    """One runnable example: kind is INVALID or VALID, code the Python source."""

    kind: str
    code: str
    contract: str


@dataclass
class RuleDoc:
    code: str
    name: str
    severity: str
    message: str
    sections: dict[str, str]
    examples: list[Example] = field(default_factory=list)
    path: Path | None = None
    header: dict[str, str] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        rule = RULES.get(self.code)
        return rule.summary if rule else ""

    def format_message(self, **values: str) -> str:
        """The message template with `{placeholders}` filled; unknown ones stay as written."""

        def sub(m: re.Match) -> str:
            return str(values.get(m.group(1), m.group(0)))

        return re.sub(r"\{(\w+)\}", sub, self.message)


class CatalogError(ReloadLintError):
    """A rule file is malformed (one line, names the file)."""


@dataclass(frozen=True)
class Expectation:
    line: int
    rule: str
    contract: str | None  # None: every contract


def parse_expectations(source: str) -> list[Expectation]:
    """Every `# expect...: RLxxx` marker in `source`, with its 1-based line."""
    out: list[Expectation] = []
    for lineno, text in enumerate(source.splitlines(), start=1):
        for m in _EXPECT.finditer(text):
            contract = m.group(1)
            for code in re.split(r"\s*,\s*", m.group(2).strip()):
                out.append(Expectation(lineno, code, contract))
    return out


def expected_findings(source: str, contract: str) -> set[tuple[int, str]]:
    """(line, rule) pairs the markers in `source` demand under `contract`."""
    return {
        (e.line, e.rule)
        for e in parse_expectations(source)
        if e.contract is None or e.contract == contract
    }


def _split_header(text: str, where: str) -> tuple[dict[str, str], str]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise CatalogError(f"{where}: missing header block (a `---` line first)")
    header: dict[str, str] = {}
    for i in range(1, len(lines)):
        line = lines[i]
        if line.strip() == "---":
            return header, "\n".join(lines[i + 1 :])
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise CatalogError(f"{where}:{i + 1}: header line is not `key: value`")
        key = key.strip()
        if key in header:
            raise CatalogError(f"{where}:{i + 1}: duplicate header field `{key}`")
        header[key] = value.strip()
    raise CatalogError(f"{where}: header block is not closed with `---`")


def _split_sections(body: str, where: str) -> dict[str, str]:
    sections: dict[str, str] = {}
    current: str | None = None
    buf: list[str] = []
    in_fence = False
    for line in body.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            if current is not None:
                sections[current] = "\n".join(buf).strip("\n")
            current = m.group(1).strip()
            if current in sections:
                raise CatalogError(f"{where}: heading `{current}` appears twice")
            buf = []
        elif current is not None:
            buf.append(line)
        elif line.strip():
            raise CatalogError(f"{where}: text before the first `##` heading")
    if in_fence:
        raise CatalogError(f"{where}: unclosed code fence")
    if current is not None:
        sections[current] = "\n".join(buf).strip("\n")
    return sections


def _extract_examples(body: str, where: str) -> list[Example]:
    examples: list[Example] = []
    lines = body.splitlines()
    pending_contract: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        cm = _CONTRACT_COMMENT.match(line.strip())
        if cm:
            pending_contract = cm.group(1)
            if pending_contract not in CONTRACTS:
                raise CatalogError(f"{where}: unknown contract `{pending_contract}`")
            i += 1
            continue
        if line.startswith("```"):
            fm = _FENCE_OPEN.match(line)
            if fm is None:
                raise CatalogError(f"{where}: cannot read code fence `{line.strip()}`")
            lang, tag = fm.group(1), fm.group(2)
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if j >= len(lines):
                raise CatalogError(f"{where}: unclosed code fence")
            if tag is not None:
                if tag not in EXAMPLE_KINDS:
                    raise CatalogError(f"{where}: unknown example tag `{tag}` (INVALID or VALID)")
                if lang != "python":
                    raise CatalogError(f"{where}: examples must be ```python blocks")
                code = "\n".join(lines[i + 1 : j]) + "\n"
                examples.append(Example(tag, code, pending_contract or DEFAULT_CONTRACT))
            pending_contract = None
            i = j + 1
            continue
        if line.strip():
            pending_contract = None
        i += 1
    return examples


def parse_rule_text(text: str, where: str = "<rule>") -> RuleDoc:
    header, body = _split_header(text, where)
    for key in HEADER_FIELDS:
        if not header.get(key):
            raise CatalogError(f"{where}: header field `{key}` is missing or empty")
    sections = _split_sections(body, where)
    return RuleDoc(
        code=header["code"],
        name=header["name"],
        severity=header["severity"],
        message=header["message"],
        sections=sections,
        examples=_extract_examples(body, where),
        header=header,
    )


def parse_rule_file(path: Path) -> RuleDoc:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read rule file: {exc}") from None
    doc = parse_rule_text(text, str(path))
    doc.path = Path(path)
    return doc


def load_catalog(directory: Path | None = None) -> dict[str, RuleDoc]:
    """Every RLxxx.md of the catalog, keyed by code, in code order."""
    directory = Path(directory) if directory is not None else catalog_dir()
    if not directory.is_dir():
        raise CatalogError(f"{directory}: rule catalog directory not found")
    docs: dict[str, RuleDoc] = {}
    for path in sorted(directory.glob("RL*.md")):
        doc = parse_rule_file(path)
        if doc.code != path.stem:
            raise CatalogError(f"{path}: header code `{doc.code}` does not match the file name")
        docs[doc.code] = doc
    return dict(sorted(docs.items()))


def get_rule(code: str, directory: Path | None = None) -> RuleDoc:
    """A rule by code (`RL101`, any case) or by name (`unregistered-module-tensor`, the name
    `check --statistics` prints)."""
    key = code.strip()
    catalog = load_catalog(directory)
    if key.upper() in catalog:
        return catalog[key.upper()]
    for doc in catalog.values():
        if doc.name == key.lower():
            return doc
    known = ", ".join(catalog) or "none"
    raise ReloadLintError(
        f"unknown rule `{key}` (known codes: {known}; `reload-lint rule` lists their names)"
    )


# ---------------------------------------------------------------------------------------------
# Rendering: one page per rule plus an index. Generated files are byte-stable.

GENERATED_NOTE = "<!-- generated by `reload-lint gen-docs` from rules/{code}.md; do not edit -->"


def _render_body(doc: RuleDoc) -> str:
    """The sections, with example tags turned into readable labels."""
    out: list[str] = []
    for heading in [*HEADINGS, *[h for h in doc.sections if h not in HEADINGS]]:
        if heading not in doc.sections:
            continue
        out.append(f"## {heading}")
        out.append("")
        out.append(_relabel_examples(doc.sections[heading]))
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _relabel_examples(markdown: str) -> str:
    out: list[str] = []
    contract: str | None = None
    for line in markdown.splitlines():
        cm = _CONTRACT_COMMENT.match(line.strip())
        if cm:
            contract = cm.group(1)
            continue
        fm = _FENCE_OPEN.match(line)
        if fm and fm.group(2) in EXAMPLE_KINDS:
            label = "Invalid" if fm.group(2) == "INVALID" else "Valid"
            suffix = f" (contract `{contract}`)" if contract else ""
            out.append(f"*{label}{suffix}:*")
            out.append("")
            out.append(f"```{fm.group(1)}")
            contract = None
            continue
        out.append(line)
    return "\n".join(out)


def render_rule_page(doc: RuleDoc, *, generated_note: bool = True) -> str:
    lines = [
        GENERATED_NOTE.format(code=doc.code) if generated_note else "",
        "",
        f"# {doc.code}: {doc.name}",
        "",
        f"{doc.summary}" if doc.summary else "",
        "",
        "| Field | Value |",
        "|---|---|",
        f"| Code | `{doc.code}` |",
        f"| Name | `{doc.name}` |",
        f"| Severity | {doc.severity} |",
        f"| Message | {_table_cell(doc.message)} |",
    ]
    for key, value in doc.header.items():
        if key not in HEADER_FIELDS:
            lines.append(f"| {key.capitalize()} | {_table_cell(value)} |")
    lines.append("")
    if any(e.kind == "INVALID" for e in doc.examples):
        lines.append(
            "In the examples, `# expect: RLxxx` marks the line where reload-lint reports the "
            "finding; each example is a test in `tests/rules/test_examples.py`."
        )
        lines.append("")
    text = "\n".join(lines).lstrip("\n") + "\n"
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text + _render_body(doc)


def _table_cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_index(catalog: dict[str, RuleDoc]) -> str:
    lines = [
        "<!-- generated by `reload-lint gen-docs` from rules/; do not edit -->",
        "",
        "# reload-lint rules",
        "",
        "RL1xx: storage identity (a tensor a captured graph reads moves on reload). "
        "RL2xx: stale derived copies. RL9xx: the tool's own diagnostics.",
        "",
        "| Code | Name | Severity | Summary |",
        "|---|---|---|---|",
    ]
    for code, doc in catalog.items():
        lines.append(
            f"| [{code}]({code}.md) | `{doc.name}` | {doc.severity} | {_table_cell(doc.summary)} |"
        )
    return "\n".join(lines) + "\n"


def render_docs(catalog: dict[str, RuleDoc]) -> dict[str, str]:
    """File name -> content for docs/rules/."""
    files = {f"{code}.md": render_rule_page(doc) for code, doc in catalog.items()}
    files["index.md"] = render_index(catalog)
    return files


def default_docs_dir() -> Path:
    """docs/rules/ of the source checkout this package runs from; an installed wheel has no
    docs folder, so there `gen-docs` needs --output."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file() or not (root / "docs").is_dir():
        raise ReloadLintError(
            "gen-docs: reload-lint is not running from a source checkout (no docs/ beside the "
            "package); pass --output DIR"
        )
    return root / "docs" / "rules"


def generate_docs(
    out_dir: Path | None = None, *, check: bool = False, catalog_path: Path | None = None
) -> list[Path]:
    """Write (or, with check, only compare) docs/rules. Returns the paths that were stale.

    Stale means: content differs, the file is missing, or a generated RL*.md page has no rule
    file any more. With check=False the stale paths are rewritten / removed.
    """
    from reload_lint.fsutil import atomic_write_text

    out_dir = Path(out_dir) if out_dir is not None else default_docs_dir()
    files = render_docs(load_catalog(catalog_path))
    stale: list[Path] = []
    for name, content in files.items():
        target = out_dir / name
        try:
            current = target.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current != content:
            stale.append(target)
            if not check:
                out_dir.mkdir(parents=True, exist_ok=True)
                atomic_write_text(target, content)
    if out_dir.is_dir():
        for extra in sorted(out_dir.glob("RL*.md")):
            if extra.name not in files:
                stale.append(extra)
                if not check:
                    extra.unlink()
    return stale
