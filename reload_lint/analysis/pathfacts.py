"""Path facts: conditions on a post-load path that decide whether a store runs again on an
update, and whether the same root breaks the next load loudly.

- **Run-once guards.** `if self.done: return` (or `if getattr(layer, "_done", False): return`)
  guards the rest of the function; `if not self.first_pass: ...` guards its own block. A guard
  is *run-once* when some post-load path sets the flag to the value that skips the guarded
  code (`self.done = True`, `self.first_pass = False`). A store behind a run-once guard runs
  on the first post-load only, so it does not move on an update: no finding, unless the
  engine's reload resets the flag (vLLM's layerwise reload deletes
  `_already_called_process_weights_after_loading`; SGLang runs each quant method's
  `restore_weights_before_loading` before an update), in which case the finding stays and its
  `guard` says so.
- **Scopes.** Paths whose platform captures no CUDA graphs (CPU backends) and roots the
  serving engine never re-runs on an update (SGLang's diffusion runtime): built in below,
  extended per path in `[tool.reload-lint.per-path]` (`cuda-graphs = false`,
  `update-reruns = false`). A store reached through such a frame is not reported.
- **Masked.** Under a contract that does not restore the checkpoint Parameters before a load
  (`inplace-only`), a root that deletes a checkpoint Parameter, re-binds it to a new
  `nn.Parameter` without a `weight_loader`, or reshapes it through `.data` (with no
  `restore_weights_before_loading` to undo that) makes the next update fail before any graph
  replays: every finding of that root gets a `masked` text. Under `vllm-layerwise` only a
  plain tensor left under a deleted checkpoint Parameter's name masks, and only where the
  tree's reload does not delete such attributes first (`ReloadFacts.restore_deletes_plain`).

Mixed into Analyzer (analysis/interp.py).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from reload_lint.analysis import values as V
from reload_lint.analysis.shapes import shape_changing
from reload_lint.config import path_matches
from reload_lint.index.extract import _INVERT as _NOT  # flag senses and their negations
from reload_lint.index.extract import DTYPE_ALIASES, dotted

# values a run-once guard's binding can make: new storage, objects holding it, callables
_ONCE_KINDS = frozenset({V.FRESH, V.PARAM, V.OBJ, V.MODULE, V.CALLABLE, V.CONTAINER, V.TUPLE})

# Where checkpoint Parameters are created (what a loader looks up by name on the next load);
# these run once per engine, never on an update.
ONCE_NAMES = ("create_weights", "__init__")


@dataclass(frozen=True)
class Scope:
    """Code that never needs a finding: `pattern` is a path glob (`path_matches`) or, with
    `qualname=True`, a glob over `module.qualname` of a frame on the path."""

    pattern: str
    kind: str  # "no-graphs" | "no-update" | "unreachable" (a platform branch)
    why: str
    qualname: bool = False


# Cited in docs/contracts.md ("Path facts").
BUILTIN_SCOPES: tuple[Scope, ...] = (
    # vLLM's CPU platform empties cudagraph_capture_sizes (platforms/cpu.py:158 in 0.25.1):
    # its backends run eagerly, so a rebound tensor is simply what the next forward reads.
    *(
        Scope(p, "no-graphs", "vLLM CPU backend: the CPU platform captures no CUDA graphs")
        for p in (
            "vllm/model_executor/kernels/linear/mixed_precision/cpu.py",
            "vllm/model_executor/kernels/linear/mixed_precision/zentorch.py",
            "vllm/model_executor/kernels/linear/scaled_mm/cpu.py",
            "vllm/model_executor/kernels/mhc/cpu.py",
            "vllm/model_executor/layers/fused_moe/cpu_fused_moe.py",
            "vllm/model_executor/layers/fused_moe/experts/cpu_moe.py",
            "vllm/model_executor/layers/fused_moe/experts/cpu_int4_moe.py",
            "vllm/model_executor/layers/fused_moe/router/cpu_router.py",
            "vllm/v1/attention/backends/cpu_attn.py",
            "vllm/v1/attention/backends/mla/cpu_mla.py",
            "vllm/v1/attention/backends/mla/prefill/cpu_sdpa.py",
            "vllm/v1/attention/backends/mla/prefill/zen_cpu_sdpa.py",
            "vllm/models/deepseek_v4/cpu",
            "vllm/lora/punica_wrapper/punica_cpu.py",
        )
    ),
    *(
        Scope(q, "no-graphs", "vLLM CPU backend: the CPU platform captures no CUDA graphs", True)
        for q in (
            # oneDNN GEMM handles, built only for the CPU kernels
            "vllm._custom_ops.create_onednn_mm",
            "vllm._custom_ops.create_onednn_scaled_mm",
            # `layer.cpu_linear`, reached only under `current_platform.is_cpu()`
            "vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm",
        )
    ),
    Scope(
        "sglang/srt/hardware_backend/cpu",
        "no-graphs",
        "SGLang CPU backend: the CPU runner captures no CUDA graphs",
    ),
    # The diffusion runtime's updater copies into the loaded parameters in place and never
    # calls process_weights_after_loading (multimodal_gen/runtime/post_training/
    # weights_updater.py:177-220, :310-349): its post-load roots run once, at load.
    Scope(
        "sglang/multimodal_gen",
        "no-update",
        "SGLang diffusion runtime: its weight updater never re-runs post-load",
    ),
)

# Platform predicates whose truth means "this platform captures no CUDA graphs": an `if` on
# one of these scopes its block like a CPU path (`if current_platform.is_cpu():`).
NO_GRAPH_PREDICATES = frozenset({"is_cpu()", "is_zen_cpu()", "_is_cpu", "_is_cpu_amx_available"})


def _const_truth(e):
    """Truth of a constant expression, or None."""
    if e[0] == "n" and e[1] in ("True", "False", "None"):
        return e[1] == "True"
    if e[0] == "k":
        if e[1] in ("none",) or e[2] in ("None",):
            return False
        if e[1] == "int":
            return e[2] not in ("0",)
        if e[1] == "bool":
            return e[2] == "True"
    return None


class PathFactsMixin:
    """Run-once guards, scopes and masked roots; uses Analyzer state."""

    # ------------------------------------------------------------------ flags
    def exec_flag(self, fr, st) -> None:
        kind = st[0]
        # a guard: (base, attr, runs when, path, line, (function, block where a set counts))
        if kind == "flagexit":
            _, ln, _c, _e, base, attr, sense, block = st
            where = (fr.func.get("qn", ""), block)
            self._add_guard(fr, (base, attr, _NOT[sense], fr.path, ln, where))
        elif kind == "flagon":
            _, ln, _c, _e, base, attr, sense, block = st
            if attr.startswith("<compat:"):
                base = self._compat_verdict(fr, base, attr)
            where = (fr.func.get("qn", ""), block)
            self._add_guard(fr, (base, attr, sense, fr.path, ln, where))
        elif kind == "flagoff":
            ln, attr = st[1], st[5]
            for i in range(len(fr.guards) - 1, -1, -1):
                g = fr.guards[i]
                if g[1] == attr and g[4] == ln and g[3] == fr.path:
                    fr.guards = fr.guards[:i] + fr.guards[i + 1 :]
                    break

    def _add_guard(self, fr, g: tuple) -> None:
        fr.guards = fr.guards + (g,)
        if g[1].endswith("()") or g[1] == "<or>":
            # a platform predicate the package's platform decides (analysis/platforms.py)
            why = self.platform_guard_dead(fr.module, g)
            if why is not None:
                self.__dict__.setdefault("_dead_guards", {})[g] = why

    def _compat_verdict(self, fr, pair: str, attr: str) -> str:
        """Whether the copy branch of a copy-or-rebind test holds on an update: "holds|a|b",
        "never|a|b" or "unknown|a|b".

        The rebind branch binds the new tensor, so on the next pass the existing tensor has
        the shape, dtype, stride and device the same computation produces again: the test
        holds, unless it compares `type(...)` of a plain tensor with a Parameter, or the shape
        of a checkpoint Parameter with a tensor that went through a shape-changing op (the
        loader's Parameter is there again before every post-load: "never").
        """
        sides = []
        for name in pair.split("|"):
            parts = name.split(".")
            e: tuple = ("n", parts[0])
            for p in parts[1:]:
                e = ("a", e, p)
            sides.append(self.eval(fr, e))
        new = [s for s in sides if any(v.kind in (V.FRESH, V.PARAM) for v in s)]
        if not new:
            # a registered tensor (or a view of one) bound into an object: the rebind branch
            # binds it, the copy branch copies it into what the first pass bound
            new = [s for s in sides if any(v.kind in (V.REG, V.VIEW) for v in s)]
        old = [s for s in sides if s not in new]
        if len(new) != 1 or len(old) != 1:
            return f"unknown|{pair}"  # which one is the tensor already there is unclear
        if "type" in attr[len("<compat:") : -1].split(","):
            if all(v.kind == V.FRESH for v in new[0] if v.kind in V.TENSORISH):
                return f"never|{pair}"  # a plain tensor is never the Parameter's type
        if (
            "shape" in attr[len("<compat:") : -1].split(",")
            and not self.contract_for(fr.path).restores_params
        ):
            # the tensor already there is a checkpoint Parameter (the loader's) and the new
            # one went through a shape-changing op: on the first pass their shapes differ, so
            # the rebind runs and the next in-place load meets the re-bound Parameter
            # (`w = F.pad(layer.weight.data, ...)` compared with `layer.weight`). Under a
            # contract that restores the checkpoint Parameters and copies the processed ones
            # back (vLLM's layerwise reload), the rebind reaches only the restored Parameter
            # and the copy-back keeps the first pass's storage: the test reads as holding.
            ckpt = self.checkpoint_names()
            held = [v for v in old[0] if v.kind == V.REG and v.value in ckpt]
            if held and any(
                v.kind in V.TENSORISH and shape_changing(v, held[0].src) for v in new[0]
            ):
                return f"never|{pair}"
        return f"holds|{pair}"

    def note_flag_set(self, fr, attr: str, rhs, block=()) -> None:
        """`x.attr = <constant>` on a post-load path: a state flag this path sets, with the
        function and block it is set in (a guard counts a set only at its own block's level:
        set in a sibling branch, it does not make the guarded code run once)."""
        if fr.mode != "post":
            return
        truth = _const_truth(rhs)
        if truth is None:
            truth = "obj"  # some other value: not None (`self.kernel = Kernel(...)`)
        elif rhs in (("n", "None"),) or rhs[:2] == ("k", "none"):
            truth = "nonelit"
        where = (fr.path, fr.func.get("qn", ""), tuple(block))
        sets = self.flag_sets.setdefault(attr, {})
        sets.setdefault((truth, where), rhs_line(fr))
        if len(block) == 1 and fr.positions:
            # set at a helper's top level: it runs whenever the call into the helper does,
            # so it counts at each caller's call site (paths beside each position)
            calls = tuple(
                (fr.stack[i][0], q, tuple(b or ())) for i, (q, b) in enumerate(fr.positions)
            )
            self.__dict__.setdefault("_flag_calls", {}).setdefault(attr, set()).add((truth, calls))
        dtype = _result_dtype(rhs)
        if dtype:
            # `self.x = src.to(torch.float32)`: a tensor of that dtype from then on
            sets.setdefault((f"dtype:{dtype}", where), rhs_line(fr))

    def _reset_flags(self, contract) -> dict[str, str]:
        """Flags the contract's update path resets, each with where (built in, or set back by
        a pre-update hook such as SGLang's `restore_weights_before_loading`)."""
        cached = self._resets.get(contract.name)
        if cached is not None:
            return cached
        out = dict(contract.reset_flags)
        hooks = set(contract.reset_hooks)
        if hooks:
            for mod, named in self.index.each_view("named", tuple(sorted(hooks))):
                path = self.index.path_of(mod)
                for f in named:
                    for st in f["body"]:
                        if st[0] == "assign" and _const_truth(st[5]) is not None:
                            for t in st[4]:
                                if t[0] == "a":
                                    out.setdefault(
                                        t[2],
                                        f"{f['qn']} resets it before an update ({path}:{st[1]})",
                                    )
                        elif st[0] == "expr" and st[4][0] == "c" and st[4][1] == ("n", "delattr"):
                            args = st[4][2]
                            if len(args) >= 2 and args[1][0] == "k" and args[1][1] == "str":
                                out.setdefault(
                                    args[1][2],
                                    f"{f['qn']} deletes it before an update ({path}:{st[1]})",
                                )
        self._resets[contract.name] = out
        return out

    def _disabled(self, g, pos=()) -> bool:
        """Whether the guarded code sets the guard's flag to the value that skips it, in a
        block that encloses the store (`pos`: where each function on the path stands), so
        that the store runs once: set in a sibling branch, it does not count."""
        base, attr, run_when, path, _l, (qn, block) = g
        if attr.startswith("<compat:"):
            return base.startswith("holds|")
        if attr == "<or>":
            # `if a or b:` runs while some term holds: once only when every term is off
            return all(self._disabled(t, pos) for t in _terms(g))
        if isinstance(run_when, str) and run_when.startswith("dtype!="):
            # `if self.x.dtype != D:` is off once the path stores a tensor of dtype D there
            want = {"dtype:" + run_when[len("dtype!=") :]}
            return self._set_in_block(attr, want, path, qn, block, pos)
        # the values a set must give the flag for the guarded code to be skipped next time
        want = {
            True: {False, "nonelit"},
            False: {True},
            "absent": {True, False, "obj", "nonelit"},
            "none": {True, False, "obj"},
            "notnone": {"nonelit"},
        }.get(run_when)
        if want is None:
            return False
        return self._set_in_block(attr, want, path, qn, block, pos)

    def _reset_why(self, g, resets: dict, contract) -> str | None:
        """Where the update path or other code sets guard `g`'s flag back (for an `or` guard,
        any of its terms'), or None."""
        for t in _terms(g):
            why = resets.get(t[1]) or self.code_reset(t, contract)
            if why:
                return why
        return None

    def _set_in_block(self, attr, want, path, qn, block, pos) -> bool:
        here = dict(pos).get(qn)
        block = tuple(block)
        for truth, (spath, sqn, sblock) in self.flag_sets.get(attr, {}):
            if truth not in want or spath != path or sqn != qn or sblock[: len(block)] != block:
                continue
            if sblock == block or (here is not None and tuple(here)[: len(sblock)] == sblock):
                return True
        # set in a helper called from the guarded code: the guarded function's call site
        # counts like a set there, when every later call on the way is at its function's top
        for truth, calls in self.__dict__.get("_flag_calls", {}).get(attr, ()):
            if truth not in want:
                continue
            for i, (cpath, cqn, cblock) in enumerate(calls):
                if cpath != path or cqn != qn or cblock[: len(block)] != block:
                    continue
                if any(len(b) != 1 for _p, _q, b in calls[i + 1 :]):
                    continue
                if cblock == block or (here is not None and tuple(here)[: len(cblock)] == cblock):
                    return True
        return False

    # ------------------------------------------------------------------ scopes
    def dead_branch(self, fr) -> Scope | None:
        """The platform branch a store's path lies in that the package's platform never
        takes (`if current_platform.is_rocm():` on a CUDA platform), if any."""
        dead = self.__dict__.get("_dead_guards")
        if not dead:
            return None
        for g in fr.guards:
            why = dead.get(g)
            if why is not None:
                return Scope(f"{g[3]}:{g[4]}", "unreachable", why)
        return None

    def scope_of(self, fr) -> Scope | None:
        """The no-graphs / no-update scope a store's path lies in, if any."""
        frames = fr.stack or ((fr.path, fr.module, fr.func.get("qn", "")),)
        first = self.first_load_scope(fr)  # analysis/firstload.py
        if first is not None:
            return first
        for g in fr.guards:
            if g[1] in NO_GRAPH_PREDICATES and g[2] is True:
                return Scope(
                    f"{g[3]}:{g[4]}", "no-graphs", f"behind `{g[1]}` ({g[3]}:{g[4]}): no graphs"
                )
        for scope in self.scopes:
            for path, module, qn in frames:
                if scope.qualname:
                    if _glob(scope.pattern, f"{module}.{qn}"):
                        return scope
                elif path_matches(scope.pattern, path):
                    return scope
        for _path, module, _qn in frames:
            scope = self.platform_scope(module)  # analysis/platforms.py
            if scope is not None:
                return scope
        return None

    def bound_once(self, fr, vals: tuple) -> tuple:
        """VALS as bound by an assignment under FR's first-use guards (`if self._pool is
        None:`): each value object is noted with the guards in force and where they stand, so
        a store that later keeps that same object (`self.kept = self._pool`) is judged as
        running behind them too: the object is made on the first load only. Each bound value is
        a copy of its own, noted by identity (kept alive with its note): a memoised value other
        paths share is not marked, and a value derived from it is a new object, made on every
        run, that carries nothing."""
        if fr.constructing:  # a constructor's bindings are the object's own
            return vals
        gs = tuple(
            g
            for g in fr.guards
            if g[2] in ("none", "absent") and not g[0].startswith("never|") and g[1][:1] != "<"
        )
        if not gs:
            return vals
        pos = (*fr.positions, (fr.func.get("qn"), fr.block_hint))
        add = tuple((g, pos) for g in gs)
        out = []
        for v in vals:
            if v.kind in _ONCE_KINDS:
                had = self._once_vals.get(id(v))
                prior = had[1] if had and had[0] is v else ()
                v = replace(v)  # this binding's own object: a memoised value is shared
                self._once_vals[id(v)] = (v, prior + add)
            out.append(v)
        return tuple(out)

    # ------------------------------------------------------------------ reporting hooks
    def note_report(self, fr, key: tuple, v=None) -> bool:
        """Called for every reported store; False when the store is out of scope."""
        if fr.mode != "post":
            dead = self.dead_branch(fr)
            if dead is not None:  # never runs where the package runs, in any mode
                self.dropped.setdefault(key, dead.why)
                return False
            self.note_hook_key(fr, key)
            return True
        scope = self.dead_branch(fr) or self.scope_of(fr)
        # what several roots note at one key is kept in the sequential order: the lowest
        # rank's first (the first pass), then the later passes' in their order
        rank = self.rank if self.ranked else 1 << 30
        if scope is not None:
            if key not in self.scoped or self._scope_rank.get(key, -1) > rank:
                self.scoped[key] = scope
                self.dropped[key] = scope.why
                self._scope_rank[key] = rank
            return False
        self.note_hook_key(fr, key)
        pos = (*fr.positions, (fr.func.get("qn"), fr.block_hint))
        ctxs = self._guard_ctx.setdefault(key, [])
        ranks = self._guard_ranks.setdefault(key, [])
        at = bisect.bisect_right(ranks, (rank, self.report_seq))
        ranks.insert(at, (rank, self.report_seq))
        # the value's own run-once guards, each with where it was bound (bound_once)
        noted = self._once_vals.get(id(v)) if v is not None else None
        once = noted[1] if noted is not None and noted[0] is v else ()
        made = tuple(("@once", g, gpos) for g, gpos in once)
        ctxs.insert(at, (tuple(fr.guards) + made, pos))
        fr.root.keys.setdefault(key, pos)
        return True

    def resolve_guards(self) -> None:
        """Drop findings whose every reaching path is behind a run-once guard the reload does
        not reset; say `guard` on the ones whose guard it resets."""
        for key, ctxs in sorted(self._guard_ctx.items()):
            fd = self.findings.get(key)
            if fd is None:
                continue
            never = [next((g for g in c if g[0].startswith("never|")), None) for c, _p in ctxs]
            if never and all(never):
                g = never[0]
                feats = g[1][len("<compat:") : -1]
                why = (
                    "a plain tensor never has the type of the Parameter it replaces"
                    if "type" in feats.split(",")
                    else "the checkpoint Parameter's shape is never the one a shape-changing "
                    "op gives the new tensor"
                )
                self.facts.setdefault(key, {})["guard"] = (
                    f"the rebind branch of a copy-or-rebind test ({g[3]}:{g[4]}, comparing "
                    f"{feats}) runs on every update: {why}"
                )
            contract = self.contract_for(fd.path)
            resets = self._reset_flags(contract)
            verdicts = []
            for ctx, pos in ctxs:
                pairs = [(g[1], g[2]) if g[0] == "@once" else (g, pos) for g in ctx]
                once = [g for g, p in pairs if self._disabled(g, p)]
                if not once:
                    verdicts.append(None)
                    break
                why = {g: self._reset_why(g, resets, contract) for g in once}
                kept = [g for g in once if not why[g]]
                verdicts.append(("once", kept[0]) if kept else ("reset", once[0], why[once[0]]))
            if not verdicts or any(v is None for v in verdicts):
                continue
            if all(v[0] == "once" for v in verdicts):
                if fd.rule == "RL201":
                    continue  # a stale derived copy is stale because it is never made again
                g = verdicts[0][1]
                if fd.rule in ("RL101", "RL102", "RL109") and self.stale_copy(key, fd, g):
                    continue  # made once behind a test of the copy itself: stale (resets.py)
                if g[1].startswith("<compat:"):
                    why = (
                        f"in the rebind branch of a copy-or-rebind test ({g[3]}:{g[4]}): on an "
                        "update the tensors compare equal and the helper copies in place"
                    )
                else:
                    why = (
                        f"behind the run-once flag `{_flag_text(g)}` ({g[3]}:{g[4]}), set on "
                        "the post-load path and not reset by the reload"
                    )
                if key in self.scoped:  # its other paths lie in a scope (analysis/firstload.py)
                    why += f"; every other path is out of scope: {self.scoped[key].why}"
                self.dropped[key] = why
                del self.findings[key]
                continue
            g, reset = next(v[1:] for v in verdicts if v[0] == "reset")
            self.facts.setdefault(key, {})["guard"] = (
                f"post-load runs once per load behind `{_flag_text(g)}` ({g[3]}:{g[4]}), and "
                f"{reset}: the store runs again on every update"
            )
        for key, fd in list(self.findings.items()):
            if fd.rule not in ("RL101", "RL102") or key not in self._guard_ctx:
                continue
            attr = fd.target.split("[", 1)[0].rsplit(".", 1)[-1]
            only = self.first_forward_only(attr)
            if only:
                self.dropped[key] = only
                del self.findings[key]
        for key in list(self.findings):
            if key in self.scoped and key not in self._guard_ctx:
                scope = self.scoped[key]
                self.dropped[key] = scope.why
                del self.findings[key]

    def first_forward_only(self, attr: str) -> str | None:
        """Why `attr` is read only on a first forward, or None.

        Every function that reads it (outside post-load roots and weight creation, and not
        storing it) clears a state flag (`self.calculate_kv_scales = False`) that some
        function of its module tests: it runs until its first completion and never again,
        so after an update nothing reads the rebound tensor (the KV-scale calibration shape).
        """
        if attr in self._ffo:
            return self._ffo[attr]
        self._ffo[attr] = None
        skip = tuple(sorted(self.root_names | set(self.once_names)))
        readers = [
            (mod, f)
            for mod, fs in self.index.each_view("readers", attr, skip)
            for f in fs
            if not any(_stores_attr(st, attr) for st in f["body"])
        ]
        if not readers:
            return None
        whys = []
        for mod, f in readers:
            cleared = {
                t[2]
                for st in f["body"]
                if st[0] == "assign" and _const_truth(st[5]) is False
                for t in st[4]
                if t[0] == "a"
            }
            tested = set(self.index.view(mod, "flag_tests"))
            flags = sorted(cleared & tested)
            if not flags:
                return None
            path = self.index.path_of(mod)
            whys.append(f"{f['qn']} ({path}:{f['line']}) clears `{flags[0]}`")
        self._ffo[attr] = (
            f"`{attr}` is read only on a first forward: {'; '.join(whys)} after its first run, "
            "so nothing reads it after an update"
        )
        return self._ffo[attr]

    # ------------------------------------------------------------------ masked
    def checkpoint_names(self) -> set[str]:
        """Parameter names registered where weights are created (`create_weights`, `__init__`):
        what a weight loader looks up by name on the next load."""
        if self._ckpt is None:
            names: set[str] = set()
            for _mod, named in self.index.each_view("named", tuple(sorted(self.once_names))):
                for f in named:
                    for st in f["body"]:
                        e = st[4] if st[0] == "expr" else None
                        if e and e[0] == "c" and e[1][0] == "a" and e[1][2] == "register_parameter":
                            first = e[2][0] if e[2] else None
                            if first and first[0] == "k" and first[1] == "str":
                                names.add(first[2])
                        if st[0] == "assign" and st[5][0] == "c" and st[5][1][0] in ("n", "a"):
                            callee = st[5][1][1] if st[5][1][0] == "n" else st[5][1][2]
                            if isinstance(callee, str) and callee.endswith("Parameter"):
                                names.update(t[2] for t in st[4] if t[0] == "a")
            self._ckpt = names
        return self._ckpt

    def note_masking_store(
        self, fr, attr: str, v, owner: str, rule: str, holder_src: str = ""
    ) -> None:
        """A post-load store that may break the next load: a checkpoint Parameter re-bound
        without a weight_loader, or reshaped through `.data` (`holder_src`: the tensor whose
        `.data` is written, as its values name it)."""
        if fr.mode != "post" or attr not in self.checkpoint_names():
            return
        pos = self.root_block(fr)
        qn, block = pos[-1]
        if block and any(g[0].startswith("never|") and g[5][0] == qn for g in fr.guards):
            # the rebind branch of a copy-or-rebind test that never holds runs on every
            # update: as unconditional as the `if` itself
            pos = (*pos[:-1], (qn, tuple(block)[:-1]))
        if owner in ("module", "held") and v.kind == V.PARAM and v.value is not None:
            # a torch nn.Parameter (a project Parameter class takes its weight_loader)
            fr.root.rebound.setdefault(attr, (fr.path, fr.line_hint, pos))
        elif owner == "data" and rule == "RL106" and shape_changing(v, holder_src):
            fr.root.reshaped.setdefault(attr, (fr.path, fr.line_hint, self.root_block(fr)))
        elif owner == "module" and v.kind in (V.FRESH, V.VIEW, V.REG):
            fr.root.plain.setdefault(attr, (fr.path, fr.line_hint, self.root_block(fr)))

    def note_loader_call(self, fr, e) -> None:
        """`set_weight_attrs(layer.w, {"weight_loader": ...})` / `f(p, weight_loader=...)`:
        the Parameters passed get a loader."""
        if fr.mode != "post" or e[0] != "c":
            return
        gives = any(k == "weight_loader" for k, _ in e[3]) or any(
            a[0] == "d" and any(k == ("k", "str", "weight_loader") for k, _ in a[1]) for a in e[2]
        )
        if not gives:
            return
        for a in e[2]:
            if a[0] == "a":
                fr.root.loaders.add(a[2])
            elif a[0] == "n":
                for v in fr.env.get(a[1], ()):
                    if v.src:
                        fr.root.loaders.add(v.src.rsplit(".", 1)[-1])

    def root_block(self, fr):
        """Where the current statement stands: ((function, block path), ...) from the root."""
        return (*fr.positions, (fr.func.get("qn"), fr.block_hint))

    def finish_masked(self, state, f: dict, cls_key: str | None, path: str = "") -> None:
        """At the end of a root: the `masked` text of each of its findings, when the root
        breaks the next load on the path that makes the store (the breaking statement's
        block encloses the store's: a rebind in another branch masks nothing)."""
        if not state.keys:
            return
        events: list[tuple[object, str]] = []  # (root block, why)
        ckpt = self.checkpoint_names()
        gone = sorted(a for a in state.deleted if a in ckpt)
        contract = self.contract_for(path)
        if contract.restores_params:
            # vLLM re-registers the recorded checkpoint Parameters before a reload
            # (`restore_layer_on_meta`): only a plain attribute left under a deleted
            # Parameter's name breaks that (`register_parameter` raises "already exists"),
            # and only where the restore does not delete plain attributes under those names
            # first (vLLM 0.33 does: the reload finishes, analysis/reloadfacts.py)
            for attr in gone if not contract.facts.restore_deletes_plain else ():
                if attr in state.plain:
                    spath, sline, block = state.plain[attr]
                    events.append(
                        (
                            block,
                            f"the next reload fails: post-load deletes the checkpoint Parameter "
                            f"`{attr}` and leaves a plain tensor under that name "
                            f"({spath}:{sline}), which the reload's register_parameter refuses "
                            f"({contract.facts.restore_at})",
                        )
                    )
        else:
            for attr in gone:
                events.append(
                    (
                        state.deleted_at.get(attr),
                        f"the next load fails: post-load deletes the checkpoint Parameter `{attr}`",
                    )
                )
            for attr, (spath, sline, block) in sorted(state.rebound.items()):
                if attr not in state.loaders:
                    events.append(
                        (
                            block,
                            f"the next load fails: `{attr}` is re-bound without a weight_loader "
                            f"({spath}:{sline})",
                        )
                    )
            if not self._restores_shapes(cls_key):
                for attr, (spath, sline, block) in sorted(state.reshaped.items()):
                    events.append(
                        (
                            block,
                            f"the next load fails: `{attr}` is reshaped through `.data` "
                            f"({spath}:{sline}) and nothing restores its checkpoint shape",
                        )
                    )
        rank = self.rank if self.ranked else 1 << 30  # kept in rank order (note_report)
        for key, here in state.keys.items():
            why = next((w for b, w in events if _encloses(b, here)), None)
            whys, ranks = self._masked.setdefault(key, []), self._masked_ranks.setdefault(key, [])
            at = bisect.bisect_right(ranks, rank)
            ranks.insert(at, rank)
            whys.insert(at, why)

    def _restores_shapes(self, cls_key: str | None) -> bool:
        if not cls_key:
            return False
        m = self.index.lookup_method(cls_key, "restore_weights_before_loading")
        f = self.index.function(*m) if m is not None else None
        return bool(f and any(st[0] in ("assign", "expr", "for", "aug") for st in f["body"]))

    def apply_facts(self) -> None:
        for key, whys in self._masked.items():
            fd = self.findings.get(key)
            if fd is None or not all(whys):
                continue
            self.facts.setdefault(key, {})["masked"] = whys[0]
        for key, facts in self.facts.items():
            fd = self.findings.get(key)
            if fd is None:
                continue
            for name, value in facts.items():
                setattr(fd, name, value)  # triage fields (docs/findings.md)


def _encloses(ev, key) -> bool:
    """Whether the statement at position `ev` runs whenever the one at `key` does.

    Positions are ((function, block path), ...) from the root down. Where the two paths part,
    the event's block must enclose the key's (or the event sits in another callee of the
    same block), and below that the event must be at the top level of each function."""

    def flat(rest) -> bool:
        return all(b is not None and len(b) == 1 for _q, b in rest)

    for i in range(min(len(ev), len(key))):
        (qe, be), (qk, bk) = ev[i], key[i]
        if qe != qk:
            return i > 0 and flat(ev[i:])
        if be is None or bk is None:
            return False
        be, bk = tuple(be), tuple(bk)
        if be != bk:
            return bk[: len(be)] == be and flat(ev[i + 1 :])
    return flat(ev[len(key) :])


def _stores_attr(st, attr: str) -> bool:
    return st[0] in ("assign", "aug") and any(
        t[0] == "a" and t[2] == attr for t in (st[4] if st[0] == "assign" else (st[4],))
    )


def rhs_line(fr) -> int:
    return fr.line_hint or fr.func.get("line", 0)


def _flag_text(g) -> str:
    base, attr = g[0], g[1]
    if attr.startswith("<compat:"):
        return attr
    if attr == "<or>":
        return " or ".join(_flag_text(t) for t in g[2])
    return f"{base}.{attr}" if base else attr


def _terms(g) -> tuple:
    """A guard's terms as guards of their own (the terms of an `or` guard; else itself)."""
    return tuple((b, a, s, *g[3:]) for b, a, s in g[2]) if g[1] == "<or>" else (g,)


_CAST_DTYPES = {"float": "torch.float32", "half": "torch.float16", "bfloat16": "torch.bfloat16"}


def _result_dtype(rhs) -> str | None:
    """The dtype of what `rhs` makes, when it says: `x.to(torch.float32)`, `x.to(dtype=D)`,
    `x.float()`, a factory given `dtype=D`."""
    if not isinstance(rhs, tuple) or rhs[0] != "c":
        return None
    func, args, kwargs = rhs[1], rhs[2], rhs[3]
    spelled = None
    if func[0] == "a" and func[2] in _CAST_DTYPES and not args:
        return _CAST_DTYPES[func[2]]
    if func[0] == "a" and func[2] == "to" and args:
        spelled = dotted(args[0])
    for k, v in kwargs:
        if k == "dtype":
            spelled = dotted(v)
    if not spelled or not spelled.startswith("torch."):
        return None
    return DTYPE_ALIASES.get(spelled, spelled)


def _glob(pattern: str, text: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(text, pattern)
