"""Never-read stores: a finding whose attribute no code in the audited tree or its base reads.

Inputs: the run's findings (cached or fresh), each file's text facts (`name_tokens`, computed
by the engine's text scan and kept per file in the file table), and the texts of the few files
whose tokens mention a candidate attribute (read on demand). Output: the findings to keep, and
for each dropped one the reason (`explain` shows it, fact `unread`).

A captured forward reads a stored tensor by the attribute's name: `layer.w_fp32`,
`getattr(layer, "w_fp32")`, `getattr(layer, f"{prefix}_fp32")`. When that name appears
nowhere in the tree or its base except as the target of a store, no forward can read it, and
the storage moving on a reload is harmless. The check is textual and conservative:

- a candidate is a finding with no apply-time reader found (`reader` empty) although the
  search walked apply/forward paths of the store's family (`apply_paths_searched`: a tree
  that shows no forward at all says nothing of what reads it), whose rule is about
  a store (not a `.data` swap, a registration or a load-undone transform: those are registered
  tensors, read through the module's parameter tables), with every folded store (`also`)
  a candidate too;
- a name counts as read where a file has `.name` other than as an assignment target, the
  string `"name"` (getattr, hasattr, a list of names), or, on a line that builds an attribute
  name dynamically (`getattr`, `attrgetter`, `__dict__`, `vars`), a literal fragment of three or
  more characters that the name contains (`f"{p}_scale"` may be `w13_scale`);
- comments and docstrings count too (a read the scan cannot tell from text is kept).

It applies only where the whole program is in view: a release tree (vLLM's or SGLang's own
sources) or a package audited with the vLLM it runs on (`--base`). A package audited alone is
not: the engine that drives it may read its attributes by name.

This runs after the analysis and after the whole-run cache, on every run, so an edit anywhere
that adds (or removes) the only read of a name is seen without invalidating the analysis.
"""

from __future__ import annotations

import bisect
import re
import sys

# cheap per-file tokens: `.name`, `"name`, `'name` (a superset of the reads)
TOKEN_RE = re.compile(r"""[.'"][ \t]*[A-Za-z_]\w*""")
_DYN_RE = re.compile(r"(?:getattr|attrgetter|__dict__|\bvars)\b[^\n]*")
_FSTR_RE = re.compile(r"""\b[fF][rR]?(["'])(.*?)\1""")
_CAT_RE = re.compile(r"""["'](\w+)["'][ \t]*\+|\+[ \t]*["'](\w+)["']""")
_FMT_RE = re.compile(r"""(["'])([^"'\n]*(?:%s|%d|\{\w*\})[^"'\n]*)\1""")
# rules about a registered tensor: its reads go through the module's own tables
_REGISTERED_RULES = frozenset({"RL106", "RL109", "RL203"})


def name_tokens(text: str) -> tuple:
    """The file's `.name` / quoted-name tokens, without the leading punctuation or blanks,
    sorted (a stable value in the file table) and interned (pickled once per distinct name)."""
    out = set()
    for t in TOKEN_RE.findall(text):
        out.add(sys.intern(t[1:].lstrip(" \t")))
    return tuple(sorted(out))


def _has(tokens: tuple, name: str) -> bool:
    i = bisect.bisect_left(tokens, name)
    return i < len(tokens) and tokens[i] == name


def dynamic_fragments(text: str) -> tuple:
    """Literal fragments (3+ word characters) of attribute names built on a dynamic-access
    line: f-string parts, `"x" + ...`, `"%s_x" % ...`, `"{}_x".format(...)`."""
    if not any(k in text for k in ("getattr", "attrgetter", "__dict__", "vars")):
        return ()
    out: set[str] = set()
    for m in _DYN_RE.finditer(text):
        line = m.group(0)
        parts: list[str] = []
        for f in _FSTR_RE.finditer(line):
            parts += re.split(r"\{[^}]*\}", f.group(2))
        for c in _CAT_RE.finditer(line):
            parts.append(c.group(1) or c.group(2))
        for f in _FMT_RE.finditer(line):
            parts += re.split(r"%s|%d|\{\w*\}", f.group(2))
        for p in parts:
            for w in re.findall(r"\w+", p):
                if len(w.strip("_")) >= 3:
                    out.add(w)
    return tuple(sorted(out))


_ENGINE_IMPORT_RE = re.compile(
    r"^(?:from[ \t]+((?:vllm|sglang)(?:\.\w+)+)[ \t]+import\b|import[ \t]+((?:vllm|sglang)(?:\.\w+)+))",
    re.M,
)


def engine_module_imports(text: str) -> tuple:
    """(module, line) of each unconditional module-level import of an engine submodule
    (`from vllm.x.y import z` / `import vllm.x.y` at column 0: not under `try`, `if` or a
    function). The module must exist for the file to import at all."""
    if "vllm" not in text and "sglang" not in text:
        return ()
    out = []
    for m in _ENGINE_IMPORT_RE.finditer(text):
        out.append((m.group(1) or m.group(2), text.count("\n", 0, m.start()) + 1))
    return tuple(out)


def drop_unimportable(findings: list, dead: dict, base_label: str) -> tuple[list, dict]:
    """(kept, {(path, line, rule, target): why}): the findings whose post-load roots all lie in
    a file of `dead` (rel -> (module, line) of an import the base cannot satisfy), or that
    name no root and lie in one."""
    kept, dropped = [], {}
    for f in findings:
        roots = (
            [
                (st.path if hasattr(st, "path") else st.get("path"))
                for st in f.trace
                if (st.note if hasattr(st, "note") else st.get("note", "")).startswith(
                    "post-load root "
                )
            ]
            or [
                # RL108: the post-load stores that keep the rebuilt object
                (r.get("path") if isinstance(r, dict) else r.path)
                for r in getattr(f, "rebuild_sites", None) or ()
            ]
            or [f.path]
        )
        if f.rule.startswith("RL9") or not all(r in dead for r in roots):
            kept.append(f)
            continue
        rel = roots[0]
        mod, line = dead[rel]
        dropped[(f.path, f.line, f.rule, f.target)] = (
            f"cannot run on {base_label}: its post-load is in {rel}, whose import of `{mod}` "
            f"({rel}:{line}) the base does not have, so the module never imports"
        )
    return kept, dropped


def target_attr(target: str) -> str:
    """`layer.w_fp32` -> `w_fp32`; `self.cache[...]` -> `cache`; `x.w.data` -> `w`; "" when
    the target names no attribute (a local, a dynamic name)."""
    parts = target.split("[", 1)[0].split("(", 1)[0].split(".")
    while len(parts) > 2 and parts[-1] == "data":
        parts.pop()
    if len(parts) < 2:
        return ""
    a = parts[-1]
    return a if a.isidentifier() else ""


def _read_re(attr: str):
    a = re.escape(attr)
    return re.compile(
        rf"""\.[ \t]*{a}\b(?![ \t]*=[^=])|["']{a}["']""",
    )


def drop_never_read(findings: list, tokens_of, fragments, text_of) -> tuple[list, dict]:
    """(kept findings, {(path, line, rule, target): why}) for the never-read ones.

    tokens_of(): iterable of (rel, tokens) for every file of the tree and its base;
    fragments: every dynamic-access fragment of those files; text_of(rel): a file's text."""
    cands: dict[int, list[str]] = {}
    for i, f in enumerate(findings):
        if f.rule in _REGISTERED_RULES or f.rule.startswith("RL9") or f.reader:
            continue
        if not getattr(f, "apply_paths_searched", False):
            continue  # no forward path of its family was seen: nothing to go by
        attrs = [target_attr(f.target)]
        for a in getattr(f, "also", None) or ():
            attrs.append(
                target_attr(a.get("target", "")) if a.get("rule") not in _REGISTERED_RULES else ""
            )
        if all(attrs):
            cands[i] = attrs
    if not cands:
        return findings, {}
    wanted = {a for attrs in cands.values() for a in attrs}
    wanted = {a for a in wanted if not any(fr in a for fr in fragments)}
    suspects: dict[str, list[str]] = {a: [] for a in wanted}
    if wanted:
        for rel, toks in tokens_of():
            for a in wanted:
                if _has(toks, a):
                    suspects[a].append(rel)
    read: set[str] = set(a for attrs in cands.values() for a in attrs) - wanted
    for a, rels in suspects.items():
        rx = _read_re(a)
        for rel in rels:
            text = text_of(rel)
            if text is None or rx.search(text):
                read.add(a)
                break
    kept, dropped = [], {}
    for i, f in enumerate(findings):
        attrs = cands.get(i)
        if attrs and not any(a in read for a in attrs):
            names = ", ".join(f"`{a}`" for a in dict.fromkeys(attrs))
            dropped[(f.path, f.line, f.rule, f.target)] = (
                f"never read: no code in the audited tree or its base reads {names} (no "
                "attribute load, no string of the name, no dynamically built name that "
                "could be it), so no captured forward can read this storage"
            )
            continue
        kept.append(f)
    return kept, dropped
