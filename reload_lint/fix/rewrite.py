"""Apply statement edits to one file with libcst, and write the unified diff of the result.

Each edited statement is parsed with libcst on its own (dedented: a whole 100 kB module
takes libcst seconds, a statement milliseconds) and replaced by the shape's statements with a
libcst transformer (a comment at the end of the statement stays on its first line); the
result is indented back to where the statement stood. Every other line keeps its original
bytes. Imports go after the module's last top-level import, helpers at its end.
"""

from __future__ import annotations

import ast
from collections import Counter

import libcst as cst

from reload_lint.fix.locate import FileModel, Site
from reload_lint.fix.plan import StmtEdit
from reload_lint.fix.udiff import _lines, unified  # noqa: F401  (re-exported)


class _Replace(cst.CSTTransformer):
    """Replace the statement (the module's only one) by the shape's statements; comment lines
    above it stay above, a comment at its end stays on its first line."""

    def __init__(self, code: str, cfg):
        self.code = code
        self.cfg = cfg

    def leave_SimpleStatementLine(self, original, updated):
        body = list(cst.parse_module(self.code, config=self.cfg).body)
        first = body[0].with_changes(leading_lines=original.leading_lines)
        if isinstance(first, cst.SimpleStatementLine):
            first = first.with_changes(trailing_whitespace=original.trailing_whitespace)
        body[0] = first
        return cst.FlattenSentinel(body)


def _stmt_rewrite(
    fm: FileModel, site: Site, code: str, around: tuple[str, str] | None = None
) -> list[str]:
    """The lines of the edited statement, replaced (libcst on the statement alone, indented
    back to where it stood)."""
    s, e = site.first_line, site.last_line
    lines = fm.lines[s - 1 : e]
    head = lines[0]
    lead = head[: len(head) - len(head.lstrip(" \t"))]
    if around is not None:
        # the statement stays byte for byte; the shape's statements go around it
        before, after = (cst.parse_module(c, config=cst.PartialParserConfig()).code for c in around)
        kept = list(lines)
        tail = not kept[-1].endswith("\n")
        if tail:
            kept[-1] += "\n"
        new = [*_indented(before, lead, fm.indent), *kept, *_indented(after, lead, fm.indent)]
        if tail:
            new[-1] = new[-1].rstrip("\n")
        return new
    snippet = "".join(ln[len(lead) :] if ln.startswith(lead) else ln for ln in lines)
    if not snippet.endswith("\n"):
        snippet += "\n"
    module = cst.parse_module(snippet)
    if len(module.body) != 1 or not isinstance(module.body[0], cst.SimpleStatementLine):
        raise ValueError("the store is not one simple statement")
    out = module.visit(_Replace(code, module.config_for_parsing)).code
    new = _indented(out, lead, fm.indent)
    if not lines[-1].endswith("\n") and new:
        new[-1] = new[-1].rstrip("\n")
    return new


def _indented(code: str, lead: str, unit: str = "    ") -> list[str]:
    return [lead + _unit(ln, unit) if ln.strip() else ln for ln in code.splitlines(keepends=True)]


def _unit(line: str, unit: str) -> str:
    """A generated line's 4-space steps in the file's own indentation unit (a tab-indented
    file gets tabs); a line that starts otherwise (the statement's own text) is kept."""
    if unit == "    " or not line.startswith("    "):
        return line
    n = len(line) - len(line.lstrip(" "))
    return unit * (n // 4) + " " * (n % 4) + line[n:]


def _import_line(mod: str, name: str, alias: str | None) -> str:
    if not mod:
        return f"import {name}\n"
    return f"from {mod} import {name}" + (f" as {alias}" if alias else "") + "\n"


def apply_edits(
    fm: FileModel, edits: list[StmtEdit], spans: dict | None = None, shared: str | None = None
) -> str:
    """The file's text with `edits` applied (the original when there are none). `spans`, when
    given, receives id(edit) -> (first, last) line of its statements in the new text, and
    "helpers" -> the lines of the added helpers."""
    if not edits:
        return fm.text
    lines = list(fm.lines)
    # every replaced statement: an edit's own, and its parts (a chain's re-bindings)
    units = [
        (site, code, around, ed)
        for ed in edits
        for site, code, around in [
            (ed.site, ed.code, ed.around),
            *((s, c, None) for s, c in ed.parts),
        ]
    ]
    sizes = {}
    for site, code, around, _ed in sorted(units, key=lambda u: u[0].first_line, reverse=True):
        new = _stmt_rewrite(fm, site, code, around)
        sizes[id(site)] = len(new)
        lines[site.first_line - 1 : site.last_line] = new
    bound = fm.module_names()
    imports: list[str] = []
    for ed in edits:
        for mod, name, alias in ed.imports:
            local = alias or name
            if local in bound and (not mod or fm.imported_from(local) == mod):
                continue
            line = _import_line(mod, name, alias)
            if line not in imports:
                imports.append(line)
    helpers: list[str] = []
    for ed in edits:
        for name, src in ed.helpers:
            if name in bound:
                continue
            if shared:  # one module of the package holds it: import it from there
                line = _import_line(shared, name, None)
                if line not in imports:
                    imports.append(line)
            elif src not in helpers:
                helpers.append(src)
    if helpers:
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        for src in helpers:
            text = "\n\n" + src.strip("\n") + "\n"
            lines.extend(_unit(ln, fm.indent) for ln in text.splitlines(keepends=True))
    added = 0  # lines the imports add above every edited statement
    if imports:
        # each where isort puts it (fm.import_at), the lowest first so the places above stay
        for line, at in sorted(
            ((ln, fm.import_at(ln)) for ln in imports),
            key=lambda p: (p[1], p[0].lower()),
            reverse=True,
        ):
            new = ["\n", line] if fm.import_section_break(line) else [line]
            lines[at:at] = new
            added += len(new)
    if spans is not None:
        shift = added
        for site, _code, _around, ed in sorted(units, key=lambda u: u[0].first_line):
            first = site.first_line + shift
            last = first + sizes[id(site)] - 1
            a, b = spans.get(id(ed), (first, last))
            spans[id(ed)] = (min(a, first), max(b, last))
            shift += sizes[id(site)] - (site.last_line - site.first_line + 1)
        if helpers:
            spans["helpers"] = (len(lines) - sum(h.count("\n") for h in helpers), len(lines))
    text = "".join(lines)
    return drop_unused_imports(fm.text, text, spans)


def _loads(tree: ast.Module) -> Counter:
    used: Counter = Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used[node.id] += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used[node.value] += 1  # `__all__`, string annotations: never drop what they name
    return used


def drop_unused_imports(before: str, after: str, spans: dict | None = None) -> str:
    """Remove a module-level import the fixes made unused: a name the original file used and
    the patched one no longer does (`from functools import partial` once the `partial(...)`
    became a lambda). Only single-line imports are edited; a name still used stays."""
    try:
        old, new = ast.parse(before), ast.parse(after)
    except SyntaxError:
        return after
    was, now = _loads(old), _loads(new)
    lines = after.splitlines(keepends=True)
    gone: list[int] = []
    for node in new.body:
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno != node.end_lineno:
            continue
        names = [a for a in node.names if a.name != "*"]
        local = {id(a): a.asname or a.name.split(".")[0] for a in names}
        dead = [a for a in names if was[local[id(a)]] and not now[local[id(a)]]]
        if not dead:
            continue
        line = lines[node.lineno - 1]
        if "#" in line or ";" in line:
            continue  # a comment or a second statement on the line: leave it to a human
        keep = [a for a in names if a not in dead]
        if not keep:
            gone.append(node.lineno)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        spell = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in keep)
        head = (
            f"from {'.' * node.level}{node.module or ''} import "
            if isinstance(node, ast.ImportFrom)
            else "import "
        )
        lines[node.lineno - 1] = lead + head + spell + "\n"
    removed: set[int] = set(gone)
    for n in sorted(gone):
        # the blank line after an import group that is now gone goes with it
        nxt = n + 1
        while nxt in removed:
            nxt += 1
        prev = n - 1
        while prev in removed:
            prev -= 1
        blank_next = nxt <= len(lines) and not lines[nxt - 1].strip()
        if blank_next and (prev < 1 or not lines[prev - 1].strip()):
            removed.add(nxt)
    for n in sorted(removed, reverse=True):
        del lines[n - 1]
    if spans is not None and removed:
        for k, (a, b) in list(spans.items()):
            spans[k] = (a - sum(r < a for r in removed), b - sum(r < b for r in removed))
    return "".join(lines)


def parse_error(text: str) -> str | None:
    """Why `text` is not valid Python for this interpreter, else None."""
    try:
        ast.parse(text)
    except SyntaxError as exc:
        return f"the patched file does not parse: line {exc.lineno}: {exc.msg}"
    return None
