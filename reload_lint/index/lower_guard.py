"""Condition lowering (index/extract.py): what an `if` test says about the code it guards --
lazy-initialisation guards, early exits, state-flag terms, enum-member terms, copy-or-rebind
compatibility tests, isinstance narrowing, dtype terms."""

from __future__ import annotations

import ast

from reload_lint.index import lower_util
from reload_lint.index.lower_util import (
    _COMPOUND,
    _ast_dotted,
    _call_args,
    _has_args,
    _is_const,
    _is_int,
    _name_of,
)


class GuardLowering:
    """Mixin of the extractor; needs its SourceText methods."""

    # ---- guards ----------------------------------------------------------------------

    def lazy_guard(self, test) -> tuple | None:
        """`if self._x is None`, `if not hasattr(self, "_x")`, `getattr(self, "_x", None) is None`."""
        tp = type(test)
        if tp is ast.BoolOp:
            for v in test.values:
                g = self.lazy_guard(v)
                if g:
                    return g
            return None
        if tp is ast.Compare and len(test.ops) == 1:
            if type(test.ops[0]) in (ast.Is, ast.Eq) and _is_const(test.comparators[0], None):
                left = test.left
                if type(left) is ast.Attribute:
                    base = _guard_base(left.value)
                    if base:
                        return (base, left.attr)
                if type(left) is ast.Call and _ast_dotted(left.func) == "getattr":
                    return self._getattr_guard(left)
        if tp is ast.UnaryOp and type(test.op) is ast.Not:
            inner = test.operand
            if type(inner) is ast.Call and _ast_dotted(inner.func) == "hasattr":
                return self._getattr_guard(inner)
            if type(inner) is ast.Attribute:
                base = _guard_base(inner.value)
                if base:
                    return (base, inner.attr)
        return None

    def state_guard(self, test, body) -> tuple | None:
        """`if layer.state == State.INIT: layer.state = State.READY; ...`: an equality test of
        an attribute against a constant (a literal, or a dotted name such as an enum member)
        whose body stores another value in that attribute. The body runs on first use only,
        as `if self._x is None: self._x = ...` does: the same lazy guard (base, attr)."""
        if type(test) is not ast.Compare or len(test.ops) != 1 or type(test.ops[0]) is not ast.Eq:
            return None
        left, const = test.left, test.comparators[0]
        if type(left) is not ast.Attribute or not _state_constant(const):
            return None
        base = _guard_base(left.value)
        if not base:
            return None
        want = ast.dump(const)
        for st in body:
            for node in ast.walk(st):
                if type(node) is ast.Assign:
                    targets, value = node.targets, node.value
                elif type(node) is ast.AnnAssign and node.value is not None:
                    targets, value = [node.target], node.value
                else:
                    continue
                for t in targets:
                    if type(t) is ast.Attribute and t.attr == left.attr:
                        if _ast_dotted(t.value) == base and ast.dump(value) != want:
                            return (base, left.attr)
        return None

    def else_lazy_guard(self, test, orelse) -> tuple | None:
        """The lazy guard of an `else` branch that initializes the attribute it tests: `if
        self._x is not None: ... else: self._x = <init>` (also `getattr(self, "_x", None) is
        not None`, `hasattr(self, "_x")`; one test, no `and` / `or`), read as `if self._x is
        None: self._x = <init>` is. An `else` that stores only other attributes is not a
        first-use init of the tested one."""
        got = None
        tp = type(test)
        if tp is ast.Compare and len(test.ops) == 1:
            if type(test.ops[0]) in (ast.IsNot, ast.NotEq) and _is_const(test.comparators[0], None):
                left = test.left
                if type(left) is ast.Attribute:
                    base = _guard_base(left.value)
                    if base:
                        got = (base, left.attr)
                elif type(left) is ast.Call and _ast_dotted(left.func) == "getattr":
                    got = self._getattr_guard(left)
        elif tp is ast.Call and _ast_dotted(test.func) == "hasattr":
            got = self._getattr_guard(test)
        if got is None:
            return None
        for st in orelse:
            for node in ast.walk(st):
                targets = node.targets if type(node) is ast.Assign else []
                if type(node) in (ast.AnnAssign, ast.AugAssign):
                    targets = [node.target]
                for t in targets:
                    if type(t) is ast.Attribute and t.attr == got[1]:
                        if _ast_dotted(t.value) == got[0]:
                            return got
        return None

    def _getattr_guard(self, call) -> tuple | None:
        args = _call_args(call)
        if len(args) >= 2 and self.simple_string(args[1][0]):
            base = _ast_dotted(args[0][0])
            name = args[1][0].value
            if base and isinstance(name, str):
                return (base, name)
        return None

    def early_exit_guard(self, node) -> tuple | None:
        """`if self._x is not None: return` / `if hasattr(self, "_x"): return` (no else)."""
        if type(node) is not ast.If or node.orelse:
            return None
        body = node.body
        if self.is_suite(body) or type(body[-1]) is not ast.Return:
            return None
        for a, b in zip(
            body, body[1:], strict=False
        ):  # one line of simple statements (`x = 1; return`)
            if type(a) in _COMPOUND or a.end_lineno != b.lineno:
                return None
        test = node.test
        if type(test) is ast.Compare and len(test.ops) == 1:
            if type(test.ops[0]) in (ast.IsNot, ast.NotEq) and _is_const(test.comparators[0], None):
                left = test.left
                if type(left) is ast.Attribute:
                    base = _guard_base(left.value)
                    return (base, left.attr) if base else None
                if type(left) is ast.Call and _ast_dotted(left.func) == "getattr":
                    return self._getattr_guard(left)
        if type(test) is ast.Call and _ast_dotted(test.func) == "hasattr":
            return self._getattr_guard(test)
        return None

    # ---- flag tests --------------------------------------------------------------------
    def flag_terms(self, test, exit_form: bool) -> list[tuple[str, str, object]]:
        """State flags a test reads: (base, attr, sense), the test holding when the flag's
        truth is `sense` (True / False) or, for `hasattr`, its presence (`"has"` /
        `"absent"`).

        Only terms that must hold for the test to hold (body form: the `and` operands) or
        whose holding is enough (exit form, `if a or b: return`: the `or` operands) are
        returned, so "the guarded code runs only when <term> does not hold / holds" stays
        true.
        """
        tp = type(test)
        if tp is ast.BoolOp:
            keep = type(test.op) is (ast.Or if exit_form else ast.And)
            if not keep:
                if exit_form or not lower_util.EXTENSIONS:
                    return []
                # body form `if a or b:` runs when some term holds: one compound term
                # ("", "<or>", terms), kept only when every operand is one flag term
                terms = []
                for v in test.values:
                    got = self.flag_terms(v, exit_form)
                    if len(got) != 1 or got[0][1] == "<or>":
                        return []
                    terms.append(got[0])
                return [("", "<or>", tuple(terms))]
            out: list = []
            for v in test.values:
                out += self.flag_terms(v, exit_form)
            return out
        if tp is ast.UnaryOp and type(test.op) is ast.Not:
            inner = self.flag_terms(test.operand, not exit_form)
            return [(b, a, _INVERT[s]) for b, a, s in inner if a != "<or>"]
        if tp is ast.Attribute:
            base = _guard_base(test.value)
            return [(base, test.attr, True)] if base else []
        if tp is ast.Name:
            return [("", test.id, True)]  # a module-level switch (`if _is_cpu:`)
        if tp is ast.Call and not _has_args(test):
            # a predicate call (`current_platform.is_cpu()`): named with `()`, never a state flag
            fn = _ast_dotted(test.func)
            if fn:
                base, _, name = fn.rpartition(".")
                return [(base, name + "()", True)]
            return []
        if tp is ast.Call:
            args = _call_args(test)
            if len(args) < 2:
                return []
            fn = _ast_dotted(test.func)
            if fn not in ("getattr", "hasattr") or not self.simple_string(args[1][0]):
                return []
            if fn == "getattr" and len(args) > 2:
                d = args[2][0]
                if not (_is_const(d, False) or _is_const(d, None)) and not (
                    type(d) is ast.Constant and _is_int(d.value) and self._int_text(d) == "0"
                ):
                    return []
            base = _guard_base(args[0][0])
            name = args[1][0].value
            if not base or not isinstance(name, str):
                return []
            return [(base, name, True if fn == "getattr" else "has")]
        if tp is ast.Compare and len(test.ops) == 1:
            op = type(test.ops[0])
            rhs = test.comparators[0]
            dtype = _dtype_term(test.left, op, rhs) if lower_util.EXTENSIONS else None
            if dtype is not None:
                return [dtype]
            if _is_const(rhs, True) or _is_const(rhs, False):
                pos = op in (ast.Is, ast.Eq)
                neg = op in (ast.IsNot, ast.NotEq)
                if pos or neg:
                    terms = self.flag_terms(test.left, exit_form)[:1]
                    want = (rhs.value is True) == pos
                    return [(b, a, s if want else not s) for b, a, s in terms if s in (True, False)]
            if _is_const(rhs, None):
                pos = op in (ast.Is, ast.Eq)
                neg = op in (ast.IsNot, ast.NotEq)
                left = test.left
                if (pos or neg) and type(left) in (ast.Attribute, ast.Call):
                    terms = [t for t in self.flag_terms(left, exit_form) if t[2] is True][:1]
                    return [(b, a, "none" if pos else "notnone") for b, a, _s in terms]
                if (pos or neg) and type(left) is ast.Name:
                    # a local bound to a slot (`pool = getattr(self, "_pool", None)`)
                    slot = self.local_flags.get("<slot>" + left.id)
                    if slot:
                        b, a = slot[0]
                        return [(b, a, "none" if pos else "notnone")]
        return []

    def slot_of(self, value) -> tuple[str, str] | None:
        """(base, attr) for `getattr(self, "a", None)` / `self.a` on a guard base; for
        `_POOLS.get(key)` on a module-level name, the registry's entry ("", "_POOLS[]")."""
        if (
            type(value) is ast.Call
            and type(value.func) is ast.Attribute
            and value.func.attr == "get"
            and type(value.func.value) is ast.Name
            and 1 <= len(value.args) <= 2
            and not value.keywords
            and (len(value.args) == 1 or _is_const(value.args[1], None))
        ):
            return ("", value.func.value.id + "[]")
        if type(value) is ast.Attribute:
            base = _guard_base(value.value)
            return (base, value.attr) if base else None
        if type(value) is ast.Call and _ast_dotted(value.func) == "getattr":
            args = _call_args(value)
            if len(args) == 3 and _is_const(args[2][0], None) and self.simple_string(args[1][0]):
                base = _guard_base(args[0][0])
                name = args[1][0].value
                if base and isinstance(name, str):
                    return (base, name)
        return None

    # ---- predicate functions -------------------------------------------------------------
    def ret_test(self, node) -> tuple | None:
        """What a predicate function returns, when its body (after a docstring) is one
        `return <test>` and its decorators only cache (`@cache`, `@functools.lru_cache(...)`)
        or bind (`@classmethod`, `@staticmethod`): the test's conjuncts, each
        ("term", base, attr, sense) (`flag_terms` terms, `<or>` ones too),
        ("enum", positive, members) (`self._enum == PlatformEnum.X`, `in (...)`, negated),
        ("const", truth) (`return False`) or ("?",) (anything else). None when the function is
        not of that form or says nothing a platform decides (analysis/platforms.py)."""
        for d in node.decorator_list:
            name = _ast_dotted(d.func if type(d) is ast.Call else d) or ""
            if name.rpartition(".")[2] not in _PURE_DECOS:
                return None
        body = node.body
        if body and type(body[0]) is ast.Expr and type(body[0].value) is ast.Constant:
            body = body[1:]
        if len(body) != 1 or type(body[0]) is not ast.Return or body[0].value is None:
            return None
        test = body[0].value
        parts = test.values if type(test) is ast.BoolOp and type(test.op) is ast.And else [test]
        out: list = []
        for v in parts:
            if type(v) is ast.Constant and type(v.value) is bool:
                out.append(("const", v.value))
                continue
            enum = _enum_test(v)
            if enum is not None:
                out.append(("enum", *enum))
                continue
            terms = self.flag_terms(v, False)
            if len(terms) == 1 and (type(v) is not ast.BoolOp or terms[0][1] == "<or>"):
                out.append(("term", *terms[0]))
            else:
                out.append(("?",))
        decided = ("const", "enum")
        if not any(c[0] in decided or (c[0] == "term" and _calls(c)) for c in out):
            return None
        return tuple(out)


_PURE_DECOS = frozenset(("cache", "lru_cache", "classmethod", "staticmethod"))


def _calls(term) -> bool:
    """Whether a ("term", ...) conjunct is (or, for `<or>`, holds) a predicate call."""
    if term[2] == "<or>":
        return any(a.endswith("()") for _b, a, _s in term[3])
    return term[2].endswith("()")


def _enum_test(test) -> tuple | None:
    """`self._enum == E.X` / `!=` / `in (E.X, ...)` / `not in` (or `cls._enum`) ->
    (positive, member names as written), else None."""
    if type(test) is not ast.Compare or len(test.ops) != 1:
        return None
    left = test.left
    if type(left) is not ast.Attribute or left.attr != "_enum":
        return None
    if type(left.value) is not ast.Name or left.value.id not in ("self", "cls"):
        return None
    op, right = type(test.ops[0]), test.comparators[0]
    if op in (ast.In, ast.NotIn) and type(right) in (ast.List, ast.Tuple, ast.Set):
        names = [_ast_dotted(e) for e in right.elts]
        positive = op is ast.In
    elif op in (ast.Eq, ast.NotEq, ast.Is, ast.IsNot) and type(right) is ast.Attribute:
        names = [_ast_dotted(right)]
        positive = op in (ast.Eq, ast.Is)
    else:
        return None
    if not names or any(n is None or "." not in n for n in names):
        return None
    return (positive, tuple(names))


def _member_terms(test) -> tuple:
    """(name, positive, members) for each conjunct of an `if` test that compares a local name
    with enum-like members: `x in [E.A, E.B]`, `x not in (...)`, `x == E.A`, `x != E.A`.
    One false conjunct makes the test false; a test with `or` gives none."""
    tp = type(test)
    if tp is ast.BoolOp:
        if type(test.op) is not ast.And:
            return ()
        out: tuple = ()
        for v in test.values:
            out += _member_terms(v)
        return out
    if tp is not ast.Compare or len(test.ops) != 1:
        return ()
    left = _name_of(test.left)
    if left is None:
        return ()
    op, right = type(test.ops[0]), test.comparators[0]
    if op in (ast.In, ast.NotIn) and type(right) in (ast.List, ast.Tuple, ast.Set):
        names = [_ast_dotted(e.value if type(e) is ast.Starred else e) for e in right.elts]
        positive = op is ast.In
    elif op in (ast.Eq, ast.NotEq) and type(right) is ast.Attribute:
        names = [_ast_dotted(right)]
        positive = op is ast.Eq
    else:
        return ()
    if not names or any(n is None or "." not in n for n in names):
        return ()
    return ((left, positive, tuple(names)),)


class _Invert(dict):
    """Flag senses and their negations; `dtype==D` / `dtype!=D` invert into each other."""

    def __missing__(self, key):
        if isinstance(key, str) and key.startswith("dtype=="):
            return "dtype!=" + key[7:]
        if isinstance(key, str) and key.startswith("dtype!="):
            return "dtype==" + key[7:]
        raise KeyError(key)


_INVERT = _Invert({True: False, False: True, "has": "absent", "absent": "has", "none": "notnone"})
_INVERT["notnone"] = "none"
# dtype spellings torch aliases to one dtype
DTYPE_ALIASES = {
    "torch.float": "torch.float32",
    "torch.half": "torch.float16",
    "torch.double": "torch.float64",
    "torch.int": "torch.int32",
    "torch.long": "torch.int64",
}


def _dtype_term(left, op, rhs):
    """`self.x.dtype != torch.float32` -> ("self", "x", "dtype!=torch.float32") (`==` and
    `is`/`is not` alike), or None."""
    if type(left) is not ast.Attribute or left.attr != "dtype":
        return None
    holder = left.value
    if type(holder) is not ast.Attribute:
        return None
    base = _ast_dotted(holder.value)
    want = _ast_dotted(rhs)
    if not base or not want or not want.startswith("torch."):
        return None
    want = DTYPE_ALIASES.get(want, want)
    if op in (ast.Eq, ast.Is):
        return (base, holder.attr, "dtype==" + want)
    if op in (ast.NotEq, ast.IsNot):
        return (base, holder.attr, "dtype!=" + want)
    return None


def _local_flag_terms(flags, local_flags: dict):
    """Replace a local name standing for a flag test (`done = self.x is not None`, then
    `if not done:`) by that test's own term."""
    out = []
    for base, attr, sense in flags:
        derived = local_flags.get(attr) if not base else None
        if derived and len(derived) == 1 and sense in (True, False) and derived[0][1] != "<or>":
            b, a, s = derived[0]
            out.append((b, a, s if sense else _INVERT[s]))
        else:
            out.append((base, attr, sense))
    return out


_FEATURE_ATTRS = {"shape", "dtype", "device", "layout"}
_FEATURE_CALLS = {"size", "stride", "dim", "numel", "nbytes", "data_ptr"}


def _feature(node) -> tuple[str, str] | None:
    """(feature, tensor name) for `x.shape`, `x.stride()`, `x.untyped_storage().nbytes()`,
    `type(x)`; the tensor as a dotted name."""
    tp = type(node)
    if tp is ast.Attribute and node.attr in _FEATURE_ATTRS:
        base = _ast_dotted(node.value)
        return (node.attr, base) if base else None
    if tp is ast.Call:
        fn = node.func
        if _ast_dotted(fn) == "type":
            args = _call_args(node)
            if len(args) == 1:
                base = _ast_dotted(args[0][0])
                return ("type", base) if base else None
        if type(fn) is ast.Attribute and fn.attr in _FEATURE_CALLS and not _has_args(node):
            inner = fn.value
            if (
                type(inner) is ast.Call
                and type(inner.func) is ast.Attribute
                and inner.func.attr in ("untyped_storage", "storage")
            ):
                inner = inner.func.value
            base = _ast_dotted(inner)
            return (fn.attr, base) if base else None
    return None


def _compat_test(test) -> tuple[str, str, tuple[str, ...], bool] | None:
    """`a.shape == b.shape and a.dtype == b.dtype ...` -> (a, b, features, True); the negation
    (`!=` joined by `or`, or `not (...)`) -> (..., False). Every term compares the same two
    tensors."""
    if type(test) is ast.UnaryOp and type(test.op) is ast.Not:
        inner = _compat_test(test.operand)
        return (*inner[:3], not inner[3]) if inner else None
    terms = []
    present = set()  # `x is not None` terms (the copy needs a tensor there)
    positive = None

    def walk(t) -> bool:
        nonlocal positive
        tp = type(t)
        if tp is ast.Compare and len(t.ops) == 1 and _is_none(t.comparators[0]):
            # `x is not None and x.shape == y.shape ...` (or `x is None or x.shape != ...`)
            want = type(t.ops[0]) is ast.IsNot
            name = _ast_dotted(t.left)
            if name is None or type(t.ops[0]) not in (ast.Is, ast.IsNot):
                return False
            if positive is None:
                positive = want
            if positive != want:
                return False
            present.add(name)
            return True
        if tp is ast.BoolOp:
            want = type(t.op) is ast.And
            if positive is None:
                positive = want
            return positive == want and all(walk(v) for v in t.values)
        if tp is ast.Compare and len(t.ops) == 1:
            op = type(t.ops[0])
            eq = op in (ast.Eq, ast.Is)
            ne = op in (ast.NotEq, ast.IsNot)
            left, right = _feature(t.left), _feature(t.comparators[0])
            if not (eq or ne) or not left or not right or left[0] != right[0]:
                return False
            if positive is None:
                positive = eq
            if positive != eq:
                return False
            terms.append((left[0], left[1], right[1]))
            return True
        return False

    if not walk(test) or not terms:
        return None
    pairs = {tuple(sorted((a, b))) for _f, a, b in terms}
    if len(pairs) != 1:
        return None
    a, b = next(iter(pairs))
    if not present <= {a, b}:
        return None
    return (a, b, tuple(sorted({f for f, _a, _b in terms})), bool(positive))


def _isinstance_test(test) -> tuple[str, str] | None:
    """`if isinstance(x, T):` -> ("x", "T") (T dotted as written)."""
    if type(test) is ast.Call and _ast_dotted(test.func) == "isinstance":
        args = _call_args(test)
        if len(args) == 2:
            x = _name_of(args[0][0])
            if x is not None:
                t = _ast_dotted(args[1][0])
                if t:
                    return (x, t)
    return None


def _state_constant(node) -> bool:
    """A literal other than None, or a dotted name with at least one dot (`State.INIT`,
    `mod.State.INIT`): what a state attribute is compared against."""
    if type(node) is ast.Constant:
        return node.value is not None
    return type(node) is ast.Attribute and _ast_dotted(node) is not None


def _is_none(node) -> bool:
    return type(node) is ast.Constant and node.value is None


def _guard_base(node) -> str | None:
    """The dotted receiver of a tested attribute; `type(x)` tests x's class attribute, which
    a store through `type(x).attr = v` sets (analysis/frame.py class_of): named as x."""
    if (
        lower_util.EXTENSIONS
        and type(node) is ast.Call
        and _ast_dotted(node.func) == "type"
        and len(node.args) == 1
        and not node.keywords
    ):
        return _ast_dotted(node.args[0])
    return _ast_dotted(node)
