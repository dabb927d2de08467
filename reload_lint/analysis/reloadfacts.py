"""Reload facts: what the audited tree's own reload code does, read from its source.

vLLM's layerwise reload (`vllm/model_executor/model_loader/reload/`) changed between releases
in ways that decide whether a store escapes. The `vllm-layerwise` contract does not assume one
release: it reads four facts from the tree being audited, by the shape of the code (Python's
`ast` on the two reload files and on the deferral predicate they import; nothing is imported
or run). Where a tree has no reload module (an out-of-tree package, which runs against the
vLLM installed next to it), the facts of the newest release read so far are used; they are
also the conservative reading of each fact (docs/contracts.md, "Facts read from the tree").

- `nonpersistent_copied`: the copy-back loop over the layer's buffers copies non-persistent
  buffers too (0.25.1) or skips them unless a loader wrote them (0.33.0: an
  `if <non_persistent test>: continue` in that loop). A weight-derived `persistent=False`
  buffer registered by post-load keeps stale values when skipped.
- `deferred_bases`: the class names whose instances the reload processes last, calling the
  layer's own `process_weights_after_loading` on its live tensors with no copy-back
  (`isinstance(layer, (Attention, MLAAttention))` in 0.25.1; `is_deferred_attention_layer`,
  `AttentionLayerBase` or `MMEncoderAttention`, in 0.33.0).
- `restore_deletes_plain`: before re-registering the recorded checkpoint Parameters,
  `restore_layer_on_meta` also deletes plain attributes under their names (0.33.0: the names
  it deletes include the recorded ones, `hasattr` checked), or only registered tensors
  (0.25.1: a plain tensor left under a checkpoint name makes `register_parameter` raise).
- `none_buffer_breaks`: putting the kernel tensors back deletes only registered tensors
  before `register_buffer` (both releases): a buffer registered as None at construction is
  not recorded, so the reload deletes it, post-load's `layer.x = t` then makes a plain
  attribute, and re-registering the kernel buffer raises "attribute 'x' already exists".
- `hooks_take_args`: every `process_weights_after_loading` call in the reload module passes
  an argument (`quant_method.process_weights_after_loading(layer)`, a deferred layer's
  `layer.process_weights_after_loading(model_config.dtype)`: both releases), and none calls
  the loader's first-load driver by its bare name. A post-load method that takes no
  argument but `self` (the model-level hook `model.process_weights_after_loading()` that
  vLLM 0.33.0's loader runs after the first load, model_loader/utils.py:209-210) is then
  not run by the reload itself: it re-runs on an update only when post-load code the reload
  does run calls it (analysis/hooks.py).
- `entered_contexts`: the context managers the reload package enters (`with x(...):`). A
  post-load block that runs only while a context flag holds, set by a context manager not
  among them, never runs on an update (analysis/firstload.py: vLLM 0.33.0's
  `weights_already_processed()`, entered only by the weight-cache IPC loader's first load).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from reload_lint.fsutil import read_regular

RELOAD_DIR = "model_executor/model_loader/reload/"


@dataclass(frozen=True)
class ReloadFacts:
    origin: str  # where they were read ("tree: <dir>") or why the default applies
    nonpersistent_copied: bool
    nonpersistent_at: str
    deferred_bases: tuple[str, ...]
    deferred_at: str
    restore_deletes_plain: bool
    restore_at: str
    none_buffer_breaks: bool
    none_buffer_at: str
    hooks_take_args: bool = True
    hooks_at: str = ""
    entered_contexts: tuple[str, ...] = ()
    contexts_at: str = ""

    def key(self) -> str:
        """Identity for the analysis cache key (the `at` citations are part of it: a moved
        line in the reload code is a different tree)."""
        return repr(self)


# The newest release read by hand (vLLM 0.33.0, paths under vllm/model_executor/): also the
# conservative choice of each fact for code the tree does not show the reload of.
NEWEST = ReloadFacts(
    origin="default: no vLLM reload module in the audited tree; vLLM 0.33.0's reload",
    nonpersistent_copied=False,
    nonpersistent_at="vLLM 0.33.0 model_loader/reload/layerwise.py:429",
    deferred_bases=("AttentionLayerBase", "MMEncoderAttention"),
    deferred_at="vLLM 0.33.0 layers/attention/__init__.py:28 (is_deferred_attention_layer)",
    restore_deletes_plain=True,
    restore_at="vLLM 0.33.0 model_loader/reload/meta.py:127-132",
    none_buffer_breaks=True,
    none_buffer_at="vLLM 0.33.0 model_loader/reload/layerwise.py:437-446",
    hooks_take_args=True,
    hooks_at="vLLM 0.33.0 model_loader/reload/layerwise.py:303, :339, :388",
    entered_contexts=("CopyCounter", "restore_device", "timing_context"),
    contexts_at="vLLM 0.33.0 model_loader/reload",
)


def detect(files, default: ReloadFacts = NEWEST) -> ReloadFacts:
    """The facts of the reload module among `files` (SourceFile: `rel`, `path`, `module`),
    each fact the tree does not show in a recognised shape taken from `default`."""
    by_rel = {sf.rel: sf for sf in files}
    lw = next((r for r in sorted(by_rel) if r.endswith(RELOAD_DIR + "layerwise.py")), None)
    if lw is None:
        return default
    base = lw[: -len("layerwise.py")]
    # each file of the reload package parsed once (the facts below only read the trees)
    trees = {r: _parse(by_rel[r]) for r in sorted(by_rel) if r.startswith(base)}
    layerwise = trees[lw]
    meta = trees.get(base + "meta.py")
    if layerwise is None:
        return default
    got = dict(default.__dict__)
    got["origin"] = f"tree: {base.rstrip('/')}"
    np = _nonpersistent(layerwise, lw)
    if np is not None:
        got["nonpersistent_copied"], got["nonpersistent_at"] = np
    dfr = _deferred(layerwise, lw, files)
    if dfr is not None:
        got["deferred_bases"], got["deferred_at"] = dfr
    if meta is not None:
        rs = _deletes_plain(meta, "register_parameter", base + "meta.py")
        if rs is not None:
            got["restore_deletes_plain"], got["restore_at"] = rs
    pl = _deletes_plain(layerwise, "register_buffer", lw)
    if pl is not None:
        got["none_buffer_breaks"], got["none_buffer_at"] = not pl[0], pl[1]
    hk = _hook_calls(list(trees.items()))
    if hk is not None:
        got["hooks_take_args"], got["hooks_at"] = hk
    got["entered_contexts"] = _entered_contexts(list(trees.values()))
    got["contexts_at"] = base.rstrip("/")
    return ReloadFacts(**got)


def _entered_contexts(trees) -> tuple[str, ...]:
    """Names of the context managers the reload package enters: the last part of each
    `with <name>(...)` / `with <name>:` item (analysis/firstload.py)."""
    names: set[str] = set()
    for tree in trees:
        if tree is None:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.With, ast.AsyncWith)):
                continue
            for item in node.items:
                e = item.context_expr
                e = e.func if isinstance(e, ast.Call) else e
                if isinstance(e, ast.Attribute):
                    names.add(e.attr)
                elif isinstance(e, ast.Name):
                    names.add(e.id)
    return tuple(sorted(names))


HOOK = "process_weights_after_loading"


def _hook_calls(trees):
    """(every post-load call passes an argument, where) over the reload module's files:
    False at the first `x.process_weights_after_loading()` with no argument or bare-name
    call (the loader's driver); None when the module calls no post-load at all."""
    sites = []
    for rel, tree in trees:
        for call in _calls(tree, HOOK) if tree is not None else ():
            if not isinstance(call.func, ast.Attribute) or not (call.args or call.keywords):
                return False, f"{rel}:{call.lineno}"
            sites.append((rel, call.lineno))
    if not sites:
        return None
    first = sites[0][0]
    lines = [f"{r}:{ln}" if r != first or i == 0 else f":{ln}" for i, (r, ln) in enumerate(sites)]
    return True, ", ".join(lines)


def detect_kept(files, store, default: ReloadFacts = NEWEST) -> ReloadFacts:
    """`detect(files, default)`, kept in the record store's pack (cache.py, `kept`) with the
    hashes of the files it read: a cached run over an unchanged reload package parses none
    of them. The key is the tool's fingerprint, `default` and every file's path and module
    name (which files are the reload package, which module holds the deferral predicate)."""
    if not getattr(store, "use_cache", False):
        return detect(files, default)
    import hashlib

    from reload_lint.incremental import tool_fingerprint

    h = hashlib.sha256(f"{tool_fingerprint()}\x1e{default!r}".encode())
    for sf in files:
        h.update(f"\x1e{sf.rel}\x1f{sf.module}".encode())
    key = h.hexdigest()
    got = store.kept("reloadfacts", key)
    if isinstance(got, ReloadFacts):
        return got
    global _READ
    _READ = []
    try:
        facts = detect(files, default)
        read = _READ
    finally:
        _READ = None
    store.keep("reloadfacts", key, read, facts)
    return facts


_READ: list | None = None  # while detect_kept runs: the files _parse read


def _parse(sf) -> ast.Module | None:
    if _READ is not None and sf is not None:
        _READ.append(sf.rel)
    data = read_regular(sf.path) if sf is not None else None
    if data is None:
        return None
    try:
        return ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _names(node) -> set[str]:
    """Every identifier and attribute name under `node`."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def _calls(node, attr: str):
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name == attr:
                yield n


def _nonpersistent(tree: ast.Module, rel: str):
    """(copied, where) from the copy-back loop over buffers: a `for` over something named
    like buffers whose body calls `.copy_`; skipped when the loop `continue`s on a test
    naming non-persistent buffers."""
    for loop in ast.walk(tree):
        if not isinstance(loop, ast.For) or not any(_calls(loop, "copy_")):
            continue
        if not any("buffer" in n for n in _names(loop.target) | _names(loop.iter)):
            continue
        for st in loop.body:
            if (
                isinstance(st, ast.If)
                and any(isinstance(b, ast.Continue) for b in st.body)
                and any("non_persistent" in n for n in _names(st.test))
            ):
                return False, f"{rel}:{st.lineno}"
        return True, f"{rel}:{loop.lineno}"
    return None


def _deferred(tree: ast.Module, rel: str, files):
    """(class names, where) from the test that sets a layer aside to process last: an `if`
    whose body appends to a list and `continue`s. The test is `isinstance(layer, (A, B))` or
    a call to a predicate imported from the tree, read for its own isinstance."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        body = node.body
        if not (
            any(isinstance(b, ast.Continue) for b in body)
            and any(any(_calls(b, "append")) for b in body)
        ):
            continue
        names = _isinstance_names(node.test)
        if names:
            return names, f"{rel}:{node.lineno}"
        for call in ast.walk(node.test):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                found = _predicate(tree, call.func.id, files)
                if found:
                    return found
    return None


def _isinstance_names(test) -> tuple[str, ...]:
    for call in ast.walk(test):
        if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "isinstance":
            if len(call.args) == 2:
                cls = call.args[1]
                elts = cls.elts if isinstance(cls, ast.Tuple) else [cls]
                out = tuple(
                    e.id if isinstance(e, ast.Name) else e.attr
                    for e in elts
                    if isinstance(e, (ast.Name, ast.Attribute))
                )
                if out:
                    return out
    return ()


def _predicate(tree: ast.Module, name: str, files):
    """The isinstance classes of function `name`, imported by `tree` from a module among
    `files` (`from pkg.mod import name`)."""
    mod = None
    for st in tree.body:
        if isinstance(st, ast.ImportFrom) and st.module and st.level == 0:
            if any((a.asname or a.name) == name for a in st.names):
                mod = st.module
    if mod is None:
        return None
    for sf in files:
        if sf.module != mod:
            continue
        other = _parse(sf)
        for fn in ast.walk(other) if other is not None else ():
            if isinstance(fn, ast.FunctionDef) and fn.name == name:
                names = _isinstance_names(fn)
                if names:
                    return names, f"{sf.rel}:{fn.lineno} ({name})"
    return None


def _deletes_plain(tree: ast.Module, register: str, rel: str):
    """(deletes plain attributes, where) for the function that deletes a layer's tensors
    (`delattr` in a loop) and then re-registers recorded ones (`register` in a loop over
    `X.items()`): plain attributes under recorded names are deleted too when the names the
    first loop iterates include X's (followed through one local assignment)."""
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        loops = [n for n in ast.walk(fn) if isinstance(n, ast.For)]
        dels = [lp for lp in loops if any(_calls(lp, "delattr"))]
        regs = [lp for lp in loops if any(_calls(lp, register))]
        if not dels or not regs:
            continue
        src = regs[0].iter
        if isinstance(src, ast.Call) and isinstance(src.func, ast.Attribute):
            src = src.func.value  # `X.items()`
        if not isinstance(src, ast.Name):
            continue
        deleted = _names(dels[0].iter)
        for st in ast.walk(fn):  # one level of local assignment: `names = a.keys() | b.keys()`
            if isinstance(st, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id in deleted for t in st.targets
            ):
                deleted |= _names(st.value)
        return src.id in deleted, f"{rel}:{dels[0].lineno}"
    return None
