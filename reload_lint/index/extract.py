"""One parse per file: CPython's `ast` tree -> a small, picklable module record (the per-file
index).

The record holds imports, classes, functions and, for each function, its statements lowered
to a tiny expression language of tuples. Everything later (summaries, analysis) reads only
these records, so they are what the content-hash cache stores. Nothing here imports or
executes the audited code: `ast.parse` only parses.

Expression forms (tuples):
  ("n", name)                       name load (`None`, `True`, `False` included)
  ("a", base, attr)                 attribute
  ("c", func, args, kwargs, line, star)   call; kwargs is a tuple of (name, expr)
  ("b", op, left, right, line)      binary op        ("u", op, operand) unary op
  ("s", base, index)                subscript; index is ("slice", elems) for basic slicing
                                    (("slice",) with EXTENSIONS off; elems: index/lower_expr.py
                                    _slice_elems)
  ("k", kind, value)                constant: none/int/float/str/bool/other; an int's value is
                                    its source text ("0x10", "1_000")
  ("t", kind, items)                tuple/list/set display; `*x` items are ("star", x)
  ("t", "list", (elt,), gens)       comprehension; gens: ((target, iterable), ...) when every
                                    target binds names only (else no gens)
  ("d", items)                      dict display; items: tuple of (key, value)
  ("d", ((key, value),), gens)      dict comprehension
  ("l", params, body, free)         lambda; free = names it reads from the enclosing scope
  ("if", body, orelse)              conditional expression
  ("f", parts)                      f-string; parts are ("k", "str", text) or expressions
  ("?",)                            anything else
Statement forms: ("assign"|"aug"|"expr"|"ret"|"def"|"del"|"for", line, col, end_line, ...);
a `(x := v)` in a statement (in an `if`/`elif`/`while` test, a `for` iterable, a `with` item:
the header only) is an ("assign", ...) of `x = v` at the `:=`'s position just before it;
pseudo-statements: ("narrow"/"unnarrow", ...) around an isinstance block, and state flags read
by an `if`: ("flagon", .., base, attr, sense, block) / ("flagoff", .., base, attr) around a
block that runs when the flag's truth is `sense`, ("flagexit", .., base, attr, sense, block)
after an
`if <flag>: ... return` (the rest of the function runs when it is not).

Positions: `line` is the node's first line, `col` its first column (1-based, in characters),
`end_line` a simple statement's last line; for a compound statement (def, class, if, for,
with, ...) it is the line after its last line, where that last line also counts the comment
and blank lines after the body that are indented at least as deep as its last block (they
belong to the block, not to the next statement). These are the conventions of the libcst
lowering this one replaced (commit 876de75); `scripts/diff_extract.py` checks the two give
identical records on every file of the audited trees.

The lowering keeps that concrete-syntax view elsewhere too: the body of a one-line suite
(`if x: return`, `def f(): ...`) is not lowered (its block still gets an id); `None`, `True`
and `False` are names; f-string text parts are their source text (`{{` and escapes as
written); an implicit concatenation joins the values of its literals (so one of bytes fails,
as it always did: the file is RL906); `a[1, 2]` has two subscript elements, `a[(1, 2)]` one.
Identifiers are as Python reads them, NFKC-normalized (PEP 3131), where libcst kept them as
written: `µ` is `μ`.

Where each part lives: this module lowers statements (`block`, `stmt`, `_compound`, `small`)
and builds the record (`extract_module`, then the registered-name tables). `_Extractor` gets
the rest from mixins: lower_source.py (source text, character columns, spans, one-line
suites), lower_expr.py (expressions, strings and f-strings, assignment targets), lower_guard.py
(what an `if` test says: lazy and early-exit guards, flag, member, compat, isinstance and dtype
terms), lower_defs.py (module top level, classes, functions, dataclass fields, annotations,
imports). lower_names.py walks a body for its names and attribute reads; lower_util.py holds
the parser call, shared node readers, the string-literal tokenizer and the EXTENSIONS switch.
"""

from __future__ import annotations

import ast
import gc

from reload_lint.index import lower_util
from reload_lint.index.lower_defs import DefLowering
from reload_lint.index.lower_expr import ExprLowering, named_exprs
from reload_lint.index.lower_guard import _INVERT as _INVERT
from reload_lint.index.lower_guard import DTYPE_ALIASES as DTYPE_ALIASES
from reload_lint.index.lower_guard import (
    GuardLowering,
    _compat_test,
    _isinstance_test,
    _local_flag_terms,
    _member_terms,
)
from reload_lint.index.lower_source import SourceText
from reload_lint.index.lower_util import _BINOPS, _COMPOUND, _FUNCS, _TRIES, parse_source
from reload_lint.index.lower_util import OTHER as OTHER
from reload_lint.index.lower_util import TooNested as TooNested
from reload_lint.index.lower_util import dotted as dotted

# (`X as X` above: names other modules import from here, which now live in the lower_* modules)


class _Extractor(SourceText, ExprLowering, GuardLowering, DefLowering):
    def __init__(self, module_name: str, is_package: bool, source: str):
        self.module_name = module_name
        self.is_package = is_package
        self.lines = source.split("\n")
        # `:=` appears in the text at all (most files: no, and no statement is walked for it)
        self.any_walrus = ":=" in source
        self._bytes: dict[int, bytes] = {}  # line -> its UTF-8 bytes (non-ASCII lines only)
        # path of suite ids from the function body down to the current block: a later
        # assignment overwrites an earlier one only when its block encloses the earlier one's
        self.local_flags: dict[str, list] = {}  # local name -> the flag test it holds
        # names the current function uses as sizes (slice bounds, pad amounts): the ones
        # its `sizes` are worked out for (index/lower_sizes.py)
        self.size_names: set[str] = set()
        self.block_path: list[int] = []
        self.block_ids = 0
        # the current function's if-chains, for the branch join (analysis/interp.py)
        self.branches: list[tuple] = []
        self.imports: dict[str, str] = {}
        self.functions: dict[str, dict] = {}
        self.classes: dict[str, dict] = {}
        self.buffers: set[str] = set()
        self.globals: dict[str, tuple] = {}
        self._suite: dict[int, bool] = {}
        # (function qualname, line, a, b) of `assert a.data_ptr() == b.data_ptr()` in a body
        self.storage_asserts: list[tuple] = []

    # ---- statements ------------------------------------------------------------------
    def block(self, stmts: list, out: list, guard, func_qn: str, cls_qn: str | None) -> None:
        self.block_ids += 1
        self.block_path.append(self.block_ids)
        try:
            if self.is_suite(stmts):
                return  # a one-line suite's statements were never lowered (libcst's view)
            for stmt in stmts:
                self.stmt(stmt, out, guard, func_qn, cls_qn)
                # `if self._x is not None: return` guards the rest of the block like
                # `if self._x is None:` guards its body
                guard = guard or self.early_exit_guard(stmt)
        finally:
            self.block_path.pop()

    def walrus(self, parts, out: list, guard) -> None:
        """`(x := v)` in a statement binds x before the statement runs: an assignment
        `x = v` is emitted first (the expression itself still lowers to v)."""
        if not self.any_walrus:
            return
        for part in parts:
            if not any(":=" in ln for ln in self.lines[part.lineno - 1 : part.end_lineno]):
                continue
            for ne in named_exprs(part):
                ln, col, end = self.span(ne)
                tgt = (("n", ne.target.id),)
                out.append(
                    (
                        "assign",
                        ln,
                        col,
                        end,
                        tgt,
                        self.expr(ne.value),
                        guard,
                        tuple(self.block_path),
                    )
                )

    def ends_in_return(self, stmts: list) -> bool:
        """The block's last line of statements holds a `return` (an early exit)."""
        if self.is_suite(stmts):
            return False
        i = len(stmts) - 1
        if type(stmts[i]) in _COMPOUND:
            return False
        while True:
            if type(stmts[i]) is ast.Return:
                return True
            if i == 0 or type(stmts[i - 1]) in _COMPOUND:
                return False
            if stmts[i - 1].end_lineno != stmts[i].lineno:
                return False
            i -= 1

    def stmt(self, node, out: list, guard, func_qn: str, cls_qn: str | None) -> None:
        if lower_util.EXTENSIONS and self.any_walrus:
            self.walrus(_header(node), out, guard)
        if type(node) in _COMPOUND:
            self._compound(node, out, guard, func_qn, cls_qn)
        elif type(node) is ast.Assert:
            if lower_util.EXTENSIONS and func_qn:
                for a, b in lower_util.storage_pairs(node.test):
                    fact = (func_qn, node.lineno, self.expr(a), self.expr(b))
                    self.storage_asserts.append(fact)
        else:
            self.small(node, out, guard)

    def _compound(self, node, out: list, guard, func_qn: str, cls_qn: str | None) -> None:
        tp = type(node)
        if tp is ast.If:
            g = self.lazy_guard(node.test)
            if g is None and lower_util.EXTENSIONS:
                g = self.state_guard(node.test, node.body)
            narrowed = _isinstance_test(node.test)
            ln, col, end = self.span(node)
            if narrowed:
                out.append(("narrow", ln, col, end, *narrowed))
            exits = self.ends_in_return(node.body)
            # a state flag tested here: `if self.done: return` guards the rest of the
            # function, `if not self.done: ...` its own body (see analysis/pathfacts.py)
            flags = _local_flag_terms(self.flag_terms(node.test, exits), self.local_flags)
            # `if old.shape == new.shape and ...: copy_ else: rebind` (copy-or-rebind): the
            # rebind branch runs only while the compared tensors differ
            compat = _compat_test(node.test)
            has_else = bool(node.orelse) and not self.is_elif(node)
            rebind = None
            if compat is not None:
                a, b, feats, positive = compat
                rebind = ("flagon", ln, col, end, f"{a}|{b}", "<compat:" + ",".join(feats) + ">")
                rebind = (*rebind, False, ())
                if positive and not has_else:
                    rebind = None
            if not exits:
                for base, attr, sense in flags:
                    # the block path the body gets (block() numbers it next)
                    body = (*self.block_path, self.block_ids + 1)
                    out.append(("flagon", ln, col, end, base, attr, sense, body))
            if rebind is not None and not compat[3]:
                out.append(rebind)
            # `if backend in [E.A, E.B] and ...:` -- a body that runs only for those members
            # (the analysis skips it when the value's possible members exclude them)
            members = _member_terms(node.test)
            if members:
                out.append(("condon", ln, col, end, members))
            self.block(node.body, out, g or guard, func_qn, cls_qn)
            if members:
                out.append(("condoff", ln, col, end))
            if rebind is not None and not compat[3]:
                out.append(("flagoff", ln, col, end, rebind[4], rebind[5]))
            if not exits:
                for base, attr, _sense in reversed(flags):
                    out.append(("flagoff", ln, col, end, base, attr))
            if narrowed:
                out.append(("unnarrow", ln, col, end, narrowed[0]))
            cur = node
            while cur.orelse:
                if self.is_elif(cur):
                    orelse = cur.orelse[0]
                    if lower_util.EXTENSIONS and self.any_walrus:
                        self.walrus([orelse.test], out, guard)
                    members = _member_terms(orelse.test)
                    if members:
                        out.append(("condon", *self.span(orelse), members))
                    # an `elif` body runs only when its own test holds: its flag terms
                    # guard it as an `if`'s do (no exit form: the chain goes on after it)
                    el_flags = []
                    if lower_util.EXTENSIONS and not self.ends_in_return(orelse.body):
                        el_flags = _local_flag_terms(
                            self.flag_terms(orelse.test, False), self.local_flags
                        )
                    el_span = self.span(orelse)
                    for base, attr, sense in el_flags:
                        body = (*self.block_path, self.block_ids + 1)
                        out.append(("flagon", *el_span, base, attr, sense, body))
                    self.block(orelse.body, out, guard, func_qn, cls_qn)
                    for base, attr, _sense in reversed(el_flags):
                        out.append(("flagoff", *el_span, base, attr))
                    if members:
                        out.append(("condoff", *self.span(orelse)))
                    cur = orelse
                else:
                    if rebind is not None and compat[3]:
                        out.append(rebind)
                    # the `else` of `if <flag test>:` runs only when the test fails: each term
                    # whose holding is enough for the test (the exit form's terms) guards it
                    # with the opposite sense (`if getattr(B, "x", None) is not None: ...
                    # else: B.x = t` stores only while `B.x` is None); only after a plain `if`
                    else_flags = []
                    if lower_util.EXTENSIONS and cur is node and not exits:
                        else_flags = _local_flag_terms(
                            self.flag_terms(node.test, True), self.local_flags
                        )
                    for base, attr, sense in else_flags:
                        body = (*self.block_path, self.block_ids + 1)
                        out.append(("flagon", ln, col, end, base, attr, _INVERT[sense], body))
                    # and, as `if X is None: <init>` does, a lazy guard (first-use init)
                    eg = self.else_lazy_guard(node.test, cur.orelse) if cur is node else None
                    self.block(cur.orelse, out, eg or guard, func_qn, cls_qn)
                    for base, attr, _sense in reversed(else_flags):
                        out.append(("flagoff", ln, col, end, base, attr))
                    if rebind is not None and compat[3]:
                        out.append(("flagoff", ln, col, end, rebind[4], rebind[5]))
                    break
            if exits:
                for base, attr, sense in flags:
                    here = tuple(self.block_path)
                    out.append(("flagexit", ln, col, end, base, attr, sense, here))
            if func_qn and lower_util.EXTENSIONS:
                self.branches.append(_branch_regions(node, self.is_elif))
            return
        if tp is ast.For or tp is ast.AsyncFor:
            ln, col, end = self.span(node)
            out.append(("for", ln, col, end, self.target(node.target), self.expr(node.iter)))
            self.block(node.body, out, guard, func_qn, cls_qn)
            if node.orelse:
                self.block(node.orelse, out, guard, func_qn, cls_qn)
            return
        if tp is ast.While:
            self.block(node.body, out, guard, func_qn, cls_qn)
            if node.orelse:
                self.block(node.orelse, out, guard, func_qn, cls_qn)
            return
        if tp is ast.With or tp is ast.AsyncWith:
            for item in node.items:
                if item.optional_vars is not None:
                    ln, col, end = self.span(node)
                    out.append(
                        (
                            "assign",
                            ln,
                            col,
                            end,
                            (self.target(item.optional_vars),),
                            self.expr(item.context_expr),
                            guard,
                        )
                    )
            self.block(node.body, out, guard, func_qn, cls_qn)
            return
        if tp in _TRIES:
            self.block(node.body, out, guard, func_qn, cls_qn)
            for h in node.handlers:
                self.block(h.body, out, guard, func_qn, cls_qn)
            if node.orelse:
                self.block(node.orelse, out, guard, func_qn, cls_qn)
            if node.finalbody:
                self.block(node.finalbody, out, guard, func_qn, cls_qn)
            return
        if tp is ast.ClassDef and func_qn:
            # a class defined in a function body (a factory that builds the quant method
            # once vLLM is importable): a class like any other, named as Python does
            self.klass(node, f"{func_qn}.<locals>.{node.name}")
            return
        if tp in _FUNCS:
            qn = f"{func_qn}.<locals>.{node.name}" if func_qn else node.name
            self.function(node, qn, cls_qn=None, parent=func_qn)
            ln, col, end = self.span(node)
            out.append(("def", ln, col, end, node.name, qn))
            return
        if tp is ast.Match:
            for case in node.cases:
                self.block(case.body, out, guard, func_qn, cls_qn)
            return

    def small(self, node, out: list, guard) -> None:
        tp = type(node)
        if tp is ast.Assign:
            ln, col, end = self.span(node)
            targets = tuple(self.target(t) for t in node.targets)
            if len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                name = node.targets[0].id
                test = node.value
                if type(test) in (ast.Compare, ast.UnaryOp, ast.BoolOp):
                    self.local_flags[name] = self.flag_terms(test, False)
                else:
                    self.local_flags.pop(name, None)
                if lower_util.EXTENSIONS:
                    # `pool = getattr(self, "_pool", None)` / `pool = self._pool`: a local
                    # standing for that slot, so `if pool is None:` tests the slot
                    slot = self.slot_of(test)
                    if slot is not None:
                        self.local_flags["<slot>" + name] = [slot]
                    else:
                        self.local_flags.pop("<slot>" + name, None)
            out.append(
                (
                    "assign",
                    ln,
                    col,
                    end,
                    targets,
                    self.expr(node.value),
                    guard,
                    tuple(self.block_path),
                )
            )
        elif tp is ast.AnnAssign:
            if node.value is not None:
                ln, col, end = self.span(node)
                out.append(
                    (
                        "assign",
                        ln,
                        col,
                        end,
                        (self.target(node.target),),
                        self.expr(node.value),
                        guard,
                        tuple(self.block_path),
                    )
                )
        elif tp is ast.AugAssign:
            ln, col, end = self.span(node)
            op = _BINOPS.get(type(node.op), "?")
            out.append(("aug", ln, col, end, self.target(node.target), op, self.expr(node.value)))
        elif tp is ast.Expr:
            ln, col, end = self.span(node)
            out.append(("expr", ln, col, end, self.expr(node.value), tuple(self.block_path)))
        elif tp is ast.Return:
            ln, col, end = self.span(node)
            out.append(("ret", ln, col, end, self.expr(node.value) if node.value else None))
        elif tp is ast.Delete:
            ln, col, end = self.span(node)
            out.append(("del", ln, col, end, self.del_target(node), tuple(self.block_path)))
        elif tp is ast.Import or tp is ast.ImportFrom:
            self.add_import(node)

    def del_target(self, node) -> tuple:
        """`del a, b` (and `del a,`) deletes a tuple; `del a` one target."""
        targets = node.targets
        if len(targets) == 1:
            t = targets[0]
            tail = self.text(t.end_lineno, t.end_col_offset, node.end_lineno, node.end_col_offset)
            if "," not in tail:
                return self.target(t)
        return ("t", "tuple", tuple(self.target(t) for t in targets))


def extract_module(source: str, module_name: str, is_package: bool) -> dict:
    """Parse `source` (CPython's ast) and return the module record. Raises SyntaxError for
    invalid code, TooNested where the parser refuses the nesting, RecursionError where the
    lowering does."""
    if "\r" in source:  # universal newlines, as the file reader gives them
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    # The tree is a few hundred thousand small objects without reference cycles, freed by
    # reference counting; building it runs the cyclic collector over and over, each pass also
    # walking the records kept so far (~10% of a cold run). It stays off while one file is
    # parsed and lowered.
    collecting = gc.isenabled()
    gc.disable()
    try:
        tree = parse_source(source)
        ex = _Extractor(module_name, is_package, source)
        ex.module(tree)
        del tree
    finally:
        if collecting:
            gc.enable()
    # names registered by literal: `x.register_buffer("name", ...)`, `x.register_parameter(
    # "name", ...)`, `x.name = Parameter(...)`. A method registering on its own `self` keys the
    # name by its class (self_registered / self_buffers); any other receiver (the layer a
    # create_weights is handed, a local module) is a handed registration, one table per module
    registered: set[str] = set()
    self_regs: dict[str, set[str]] = {}
    self_bufs: dict[str, set[str]] = {}
    # buffer name -> {(registered as None?, persistent=False?)} over the module
    bufvals: dict[str, set[tuple[bool, bool]]] = {}
    for f in ex.functions.values():
        me = _self_param(f)
        if me is None:
            _collect_buffers(f["body"], ex.buffers, registered, bufvals=bufvals)
            continue
        regs = self_regs.setdefault(f["cls"], set())
        bufs = self_bufs.setdefault(f["cls"], set())
        _collect_buffers(f["body"], ex.buffers, registered, me, bufs, regs, bufvals)
    rec = {
        "module": module_name,
        "is_package": is_package,
        "imports": ex.imports,
        "functions": ex.functions,
        "classes": ex.classes,
        "globals": ex.globals,
        "buffers": sorted(ex.buffers),
        "registered": sorted(registered),
        "self_registered": {c: sorted(v) for c, v in sorted(self_regs.items()) if v},
        "self_buffers": {c: sorted(v) for c, v in sorted(self_bufs.items()) if v},
    }
    # added since the libcst extractor (readers use .get: absent is empty)
    if lower_util.EXTENSIONS:
        # buffer names this module only ever registers as None (`register_buffer("x", None)`)
        # / only ever with a literal `persistent=False`
        rec["none_buffers"] = sorted(n for n, ks in bufvals.items() if all(k[0] for k in ks))
        rec["nonpersistent_buffers"] = sorted(
            n for n, ks in bufvals.items() if all(k[1] for k in ks)
        )
        # what the module asserts shares storage (analysis/externals.py)
        rec["storage_asserts"] = tuple(ex.storage_asserts)
    return rec


def _self_param(f: dict) -> str | None:
    """The name a method's instance is bound to (`self`), None for functions, static and
    class methods."""
    if not f["cls"] or not f["params"]:
        return None
    if any(d.rsplit(".", 1)[-1] in ("staticmethod", "classmethod") for d in f["decos"]):
        return None
    return f["params"][0]


def _leaves(stmts: list) -> bool:
    """The block's last statement leaves the function (`return`, `raise`)."""
    return type(stmts[-1]) in (ast.Return, ast.Raise)


def _branch_regions(node, is_elif) -> tuple:
    """The line regions of an if-chain's branches, in order: (first line, last line, leaves
    the function), and whether the chain ends in an `else:`. A region after the first starts
    on the line after the previous branch ends, so an `elif` test's own lowering (a walrus)
    belongs to the branch it opens."""
    regions = [(node.body[0].lineno, node.body[-1].end_lineno, _leaves(node.body))]
    cur = node
    while cur.orelse:
        prev_end = regions[-1][1]
        if is_elif(cur):
            cur = cur.orelse[0]
            regions.append((prev_end + 1, cur.body[-1].end_lineno, _leaves(cur.body)))
            continue
        regions.append((prev_end + 1, cur.orelse[-1].end_lineno, _leaves(cur.orelse)))
        return (tuple(regions), True)
    return (tuple(regions), False)


def _collect_buffers(
    body,
    out: set[str],
    registered: set[str],
    me: str | None = None,
    self_out: set[str] | None = None,
    self_registered: set[str] | None = None,
    bufvals: dict[str, set[tuple[bool, bool]]] | None = None,
) -> None:
    """Literal names passed to register_buffer (out) and registered as parameters
    (registered); with `me` (a method's self name), registrations on `me` itself go to
    self_out / self_registered instead. `bufvals`: per buffer name, whether each
    registration passes a literal None, and a literal `persistent=False`."""

    def add(recv, name: str, buffer: bool) -> None:
        on_self = me is not None and recv == ("n", me)
        regs = self_registered if on_self else registered
        regs.add(name)
        if buffer:
            (self_out if on_self else out).add(name)

    for s in body:
        if s[0] == "expr":
            e = s[4]
            if e[0] == "c" and e[1][0] == "a" and e[2]:
                meth = e[1][2]
                first = e[2][0]
                if first[0] == "k" and first[1] == "str" and isinstance(first[2], str):
                    if meth == "register_buffer":
                        add(e[1][1], first[2], True)
                        if bufvals is not None:
                            none = len(e[2]) > 1 and e[2][1] == ("n", "None")
                            flag = e[2][2] if len(e[2]) > 2 else None
                            flag = next((v for k, v in e[3] if k == "persistent"), flag)
                            kind = (none, flag == ("n", "False"))
                            bufvals.setdefault(first[2], set()).add(kind)
                    elif meth == "register_parameter":
                        add(e[1][1], first[2], False)
        elif s[0] == "assign":
            v = s[5]
            if v[0] == "c" and v[1][0] in ("n", "a"):
                callee = v[1][1] if v[1][0] == "n" else v[1][2]
                if callee.endswith("Parameter"):
                    for t in s[4]:
                        if t[0] == "a":
                            add(t[1], t[2], False)


def _header(node) -> list:
    """The expressions a statement evaluates before any block of it: all of a simple
    statement, the test / iterable / context managers of a compound one."""
    tp = type(node)
    if tp in (ast.If, ast.While):
        return [node.test]
    if tp in (ast.For, ast.AsyncFor):
        return [node.iter]
    if tp in (ast.With, ast.AsyncWith):
        return [item.context_expr for item in node.items]
    if tp in _COMPOUND:
        return []
    return [node]
