"""Reload contracts: what a serving engine protects across a weight update.

`vllm-layerwise`: post-load re-runs on freshly materialised parameters, then every tensor in
`layer._parameters` / `layer._buffers` is copied back into its original storage. Registered
means safe; everything stored elsewhere moves.

`inplace-only` (SGLang): post-processing re-runs, weight loaders write into whatever Parameter
objects the module holds at that moment, nothing is copied back. Only in-place writes (and the
codebase's own storage-preserving helpers) keep storage; registering a new Parameter or buffer,
or swapping `.data`, moves it on every update.

A contract can name storage-preserving helpers by qualified name (`preserving-helpers` in
`[tool.reload-lint]`, plus the built-in list of the engine the contract describes). A call to
one is treated as keeping the storage of what it writes; its body is not judged. Helpers whose
body only writes in place (`dst.copy_(src)`) need no name: the analysis sees that on its own.
See docs/contracts.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reload_lint.analysis import shapes, triage
from reload_lint.analysis import values as V
from reload_lint.analysis.frame import _allocates
from reload_lint.analysis.reloadfacts import NEWEST, ReloadFacts
from reload_lint.analysis.values import AV
from reload_lint.index.deps import calls_in

CONTRACT_NAMES = ("vllm-layerwise", "inplace-only", "vllm-load-weights")
# vLLM before `model_loader/reload/`: an update is `model.load_weights`, which writes the
# checkpoint into the registered parameters (in place, through their weight loaders) and never
# re-runs post-load. Nothing post-load stored moves; what a post-load derived once goes stale.
LOAD_WEIGHTS = "vllm-load-weights"
ONCE_STALE_WHY = (
    "derived once after loading{src}: an update (`model.load_weights`) refreshes the loaded "
    "tensors in place and never re-runs post-load, so the copy keeps the first load's values"
)


UNDONE_WHY = (
    "post-load writes a transform of the loaded values where the weight loader writes: the "
    "next `load_weights` writes the checkpoint's values there and post-load never runs again"
)
UNDONE_FIRST_USE_WHY = (
    "a first-use block transforms the loaded values once: the next `load_weights` writes the "
    "checkpoint's values there and the block's guard keeps it from running again"
)
FIRST_USE_REBIND_WHY = (
    "a first-use block binds a new Parameter where the loaded one was: the next `load_weights` "
    "finds neither the loaded shape nor its `weight_loader` there, and the block's guard keeps "
    "it from running again"
)
LOADER_LOST_WHY = (
    "a new Parameter object replaces the loaded one without its `weight_loader`: the next "
    "`load_weights` finds no loader (a fused or sharded weight fails) or loads it unsharded"
)


def once_stale_why(src: str) -> str:
    return ONCE_STALE_WHY.format(src=f" from `{src}`" if src else "")


# SGLang 0.5.23's copy-or-rebind helpers: each copies into the existing storage when shape and
# dtype match and binds new storage only when they do not (the first post-load, when the
# checkpoint layout differs from the runtime layout); every later update copies in place.
# Path-insensitive analysis cannot see that guard, so they are named. Citations: docs/contracts.md.
# tests/integration/test_sglang_preserving.py checks each name against the real 0.5.23 sources
# with `copy_or_rebind_shape` below: the function exists, copies into storage it was handed,
# and rebinds only on its other branch.
SGLANG_PRESERVING = (
    # `param.data.copy_(new)` if shape/dtype match, else `param.data = new`; setattr a
    # Parameter only when no Parameter is there yet (srt/layers/utils/common.py:58)
    "sglang.srt.layers.utils.common.copy_or_rebind_param",
    # broadcast-copy into the source Parameter and alias it, else copy_or_rebind_param (:74)
    "sglang.srt.layers.utils.common.alias_or_bind_derived_param",
    # `target.copy_(source); return target` when a target exists (srt/utils/common.py:3950)
    "sglang.srt.utils.common.bind_or_assign",
    # the same shape as bind_or_assign (srt/layers/attention/deepseek_v4_backend.py:386)
    "sglang.srt.layers.attention.deepseek_v4_backend._copy_or_replace",
    # nested copy-or-rebind in the MXFP8 MoE post-load (srt/layers/quantization/fp8.py:2554)
    "sglang.srt.layers.quantization.fp8.Fp8MoEMethod._process_mxfp8_moe_weights"
    ".<locals>._copy_or_rebind",
)

BUILTIN_PRESERVING: dict[str, tuple[str, ...]] = {
    "vllm-layerwise": (),
    LOAD_WEIGHTS: (),
    "inplace-only": SGLANG_PRESERVING,
}


def _name_matches(declared: str, qualified: str) -> bool:
    """Whether a declared helper name denotes the function the analysis reached.

    - the same qualified name;
    - one is the other's trailing dotted components, at least `module.function` (a tree
      audited from inside its package, or a namespace package the index names shorter);
    - the same function name, one module path a parent package of the other (a re-export:
      `pkg.utils.f` for `pkg.utils.common.f`, the way `from .common import *` publishes it).
    """
    if declared == qualified:
        return True
    d_parts, q_parts = declared.split("."), qualified.split(".")
    if d_parts[-1] != q_parts[-1]:
        return False
    short, long_ = sorted((d_parts, q_parts), key=len)
    if len(short) >= 2 and long_[-len(short) :] == short:
        return True
    d_mod, q_mod = d_parts[:-1], q_parts[:-1]
    if not d_mod or not q_mod:
        return False
    a, b = sorted((d_mod, q_mod), key=len)
    return b[: len(a)] == a


# Run-once flags an engine's update path resets before re-running post-load (see
# analysis/pathfacts.py): by name, and by the pre-update hooks whose constant flag stores /
# `delattr`s reset them. Citations: docs/contracts.md ("Path facts").
RESET_FLAGS: dict[str, tuple[tuple[str, str], ...]] = {
    "vllm-layerwise": (
        (
            "_already_called_process_weights_after_loading",
            "vLLM's layerwise reload deletes that flag before re-running post-load "
            "(model_loader/reload/layerwise.py, _layerwise_process)",
        ),
    ),
    "inplace-only": (),
    LOAD_WEIGHTS: (),
}
RESET_HOOKS: dict[str, tuple[str, ...]] = {
    "vllm-layerwise": (),
    LOAD_WEIGHTS: (),
    # SGLang calls quant_method.restore_weights_before_loading(module) before every update
    # (srt/model_loader/loader.py:1092-1100)
    "inplace-only": ("restore_weights_before_loading",),
}


@dataclass
class Contract:
    name: str
    preserving: frozenset = field(default_factory=frozenset)
    # what the audited tree's reload code does (analysis/reloadfacts.py); `vllm-layerwise` only
    facts: ReloadFacts = NEWEST

    @property
    def layerwise(self) -> bool:
        return self.name == "vllm-layerwise"

    @property
    def stale_nonpersistent(self) -> bool:
        """Whether copy-back skips non-persistent buffers (their values stay the first load's)."""
        return self.layerwise and not self.facts.nonpersistent_copied

    @property
    def deferred_bases(self) -> tuple[str, ...]:
        """Class names whose own post-load the reload runs last, on live tensors, with no
        copy-back (vLLM's deferred attention layers)."""
        return self.facts.deferred_bases if self.layerwise else ()

    @property
    def reset_flags(self) -> tuple[tuple[str, str], ...]:
        return RESET_FLAGS.get(self.name, ())

    @property
    def reset_hooks(self) -> tuple[str, ...]:
        return RESET_HOOKS.get(self.name, ())

    @property
    def restores_params(self) -> bool:
        """Whether the update path puts the checkpoint Parameters back before loading (vLLM's
        layerwise reload re-registers the ones it recorded at load, `restore_layer_on_meta`)."""
        return self.name == "vllm-layerwise"

    def preserves(self, qualified: str) -> bool:
        """Whether a call to `qualified` keeps the storage of what it writes.

        `qualified` is `module.qualname` for a project function (nested functions as
        `outer.<locals>.inner`) or the qualified spelling of a call the index cannot resolve.
        """
        if not self.preserving or not qualified:
            return False
        return any(_name_matches(p, qualified) for p in self.preserving)

    # store judgement -------------------------------------------------------------------
    def judge_store(
        self,
        owner: str,
        attr: str,
        v: AV,
        buffers: set[str],
        st,
        fr,
        holder: str | None = None,
        *,
        deferred: bool = False,
        none_buffers=(),
        nonpersistent=(),
        holder_src: str = "",
        registered=(),
    ):
        """owner: module | object | held | tensor (a Parameter's own attribute) | data (then
        `holder` is the attribute whose `.data`
        is written, `holder_src` the tensor it is, as its values name it). `deferred`: the
        store is on a layer whose own post-load the reload runs with no copy-back (judged as
        in place only); `none_buffers`: buffer names registered only as None, `nonpersistent`
        only with `persistent=False`; `registered`: the names registered on the module (a
        store there under `vllm-load-weights` replaces what the loader writes). Returns
        (rule, why) or None."""
        inplace = self.name == "inplace-only" or deferred
        if (v.kind == V.PARAM and v.value == "empty") or (
            V.no_device_storage(v) and owner != "data"
        ):
            # a zero-element tensor (`torch.empty(0)`) or a host tensor (`torch.tensor(1.0)`,
            # `.to("cpu")`), registered or not: it has no device storage, so there is no
            # address to move or free under a captured graph (`p.data =` one still frees the
            # storage p had)
            return None
        if idempotent_cast(v, holder if owner == "data" else attr):
            if owner == "object" and v.kind == V.FRESH:
                # a cast copy on a plain object under a name nothing registers (a backend
                # impl's `self.sinks = self.sinks.to(torch.float32)`): the first pass replaces
                # the Parameter it was handed by the copy, later passes find the dtype already
                # right, so the copy keeps the first load's values: stale, not moved. Unless
                # the same post-load copies into it in place (`self.sinks.copy_(source)`,
                # from the Parameter it kept): refreshed on every pass
                if fr is not None and refreshes_in_place(fr.func, attr):
                    return None
                return ("RL201", f"cast from `{v.src}` into a copy under its own name")
            return None
        if v.kind == V.TUPLE:  # a tuple display is a container too
            flat = tuple(x for group in v.items for x in group)
            v = AV(V.CONTAINER, items=flat, value="tuple", trace=v.trace)
        if v.kind == V.PARAM and v.value == "alias" and owner in ("object", "data"):
            # `Parameter(x.data)` / `Parameter(x)` of an existing tensor: no new storage. It
            # binds that tensor like a view does (a registered one: before copy-back), and of
            # a tensor of unknown provenance nothing can be said
            if not v.src:
                return None
            v = AV(V.VIEW, conf=v.conf, trace=v.trace, src=v.src)
        if self.name == LOAD_WEIGHTS:
            # a name registered on the module counts where the root's own body stores it (a
            # helper storing under its caller's name may do so only on a branch for a name
            # nothing registered yet: a copy-or-rebind helper)
            direct = fr is None or len(getattr(fr, "stack", ())) <= 1
            return _judge_once(owner, attr, v, buffers, holder_src, registered if direct else ())
        k = v.kind
        if owner == "data":
            if k != V.FRESH and not (k == V.VIEW and v.value == "slice"):
                return None
            if inplace:
                if k != V.FRESH:
                    return None
                return ("RL106", "`.data =` rebinds the parameter to new storage")
            # copy-back writes each pass's result into the first pass's storage (the kernel
            # tensors saved before the reload, vLLM's `_copy_and_restore_kernel_tensors`): a
            # shape made from the checkpoint's shapes and the config (a pad, a concatenation,
            # a slice, a reshape) comes out the same on every pass and is copied in. Only a
            # shape that depends on the values loaded can differ from the first pass's
            if shapes.data_shaped(v):
                return (
                    "RL106",
                    "a `.data =` swap to a tensor whose shape depends on the loaded values: "
                    "copy-back cannot write another pass's result into the first one's storage",
                )
            return None
        if k == V.CALLABLE:
            fresh = [
                c
                for _, cap in v.items
                for c in cap
                if c.kind in (V.FRESH, V.PARAM) and not V.no_device_storage(c)
            ]
            alias = [c for _, cap in v.items for c in cap if c.kind in (V.REG, V.VIEW)]
            if fresh:
                return ("RL103", f"{v.value} captures a tensor created after loading")
            if alias and not inplace:
                return ("RL107", f"{v.value} binds a registered tensor before copy-back")
            return None
        if k == V.CONTAINER:
            if any(
                c.kind in (V.FRESH, V.PARAM) and not _aliases(c) and not V.no_device_storage(c)
                for c in v.items
            ):
                return ("RL104", "container holds a tensor created after loading")
            if any(
                c.kind == V.CALLABLE
                and any(
                    x.kind in (V.FRESH, V.PARAM) and not V.no_device_storage(x)
                    for _, cap in c.items
                    for x in cap
                )
                for c in v.items
            ):
                # a dispatch table of closures / partials (`{"mm": lambda x: x @ w_t}`)
                return (
                    "RL104",
                    "container holds a callable capturing a tensor created after loading",
                )
            if (
                any(
                    _binds_registered(c)
                    or (
                        c.kind == V.CALLABLE
                        and any(_binds_registered(x) for _, cap in c.items for x in cap)
                    )
                    for c in v.items
                )
                and not inplace
            ):
                return ("RL107", "container binds a registered tensor before copy-back")
            built = [
                c
                for c in v.items
                if c.kind in (V.OBJ, V.MODULE)
                and c.value == "rebuilt"
                and any(_allocates(a) for a in c.items)
            ]
            if built:
                # objects built on the path kept in a list / dict (`[Runner(w)]`)
                name = built[0].cls.split(":")[-1]
                return ("RL104", f"container holds a rebuilt {name} that allocates tensors")
            return None
        if k in (V.OBJ, V.MODULE) and v.value == "rebuilt" and v.items:
            name = v.cls.split(":")[-1]
            if v.chosen and not v.backends and all(a.conf == "low" for a in v.items):
                # built from a backend the oracle chooses, and no choice allocates: what is
                # left are guesses about values of unknown type (analysis/oracles.py)
                return None
            if any(_allocates(a) for a in v.items):
                return ("RL105", f"rebuilt {name} allocates tensors in its constructor chain")
            if not inplace:
                return ("RL107", f"rebuilt {name} binds registered tensors before copy-back")
            return None
        if owner == "module":
            if k == V.FRESH:
                if attr in buffers:
                    if not inplace:
                        if attr in none_buffers and self.facts.none_buffer_breaks:
                            # not recorded at construction: the reload deletes the buffer,
                            # this assignment then makes a plain attribute (reloadfacts.py)
                            return ("RL101", "a buffer registered as None, plain on a reload")
                        if attr in nonpersistent and _stale_derived(v, self):
                            return ("RL201", STALE_WHY.format(src=v.src))
                        return None
                    # Module.__setattr__ puts it in _buffers: a new buffer storage
                    return ("RL109", "assigning to a buffer name registers a new buffer")
                return ("RL101", "plain tensor attribute, not registered")
            if k == V.PARAM:
                return judge_param_on_module(v, inplace, attr)
            if k == V.VIEW and not inplace:
                return ("RL107", "view of a registered tensor taken before copy-back")
            return None
        if owner == "tensor":
            # a Python attribute of a Parameter the layer holds (`layer.w._e8m0 = e8m0(s)`):
            # in place only, the next post-load replaces it and frees what a captured graph
            # read; layerwise, the reload puts the original Parameter object back with the
            # attribute the first load hung on it, so a value derived from a weight is stale
            if k not in (V.FRESH, V.PARAM) or _aliases(v):
                return None
            if inplace:
                return ("RL102", "tensor kept on a Parameter object, not registered")
            if k == V.FRESH and v.src and v.value != "cast":
                return (
                    "RL201",
                    f"derived from `{v.src}` on a Parameter object the reload restores",
                )
            return None
        # object or held (attribute of an object reached through the layer)
        if k == V.PARAM and owner == "held":
            # `setattr(layer.experts, name, Parameter(...))`: what the layer holds is most
            # often a child nn.Module, where a Parameter registers like on the layer itself
            return judge_param_on_module(v, inplace)
        if k in (V.FRESH, V.PARAM):
            return ("RL102", "tensor kept on a non-Module object")
        if k in (V.REG, V.VIEW) and not inplace:
            return ("RL107", "registered tensor bound on an object before copy-back")
        return None

    def judge_register(
        self,
        v: AV,
        name: str | None = None,
        *,
        deferred: bool = False,
        persistent: bool | None = True,
    ) -> str | None:
        """`register_parameter` / `register_buffer(name, v)` on post-load. `deferred`: on a
        layer whose own post-load runs with no copy-back; `persistent`: the buffer's
        `persistent=` (None when not a literal)."""
        if v.value == "empty" or V.no_device_storage(v) or idempotent_cast(v, name):
            return None
        if self.name == LOAD_WEIGHTS:
            # a buffer no checkpoint holds: `load_weights` never writes it
            return "RL201" if _derived_copy(v) else None
        if self.name != "inplace-only" and not deferred:
            if persistent is False and _stale_derived(v, self):
                # copy-back skips it: the registered storage keeps the first load's values
                return "RL201"
            return None
        if v.kind == V.FRESH or (v.kind == V.PARAM and v.value in ("fresh", "cast")):
            return "RL109"
        return None

    def message(self, rule: str, target: str, v: AV, why: str) -> str:
        """One sentence (analysis/triage.py); why it moves is the rule page's job."""
        return triage.message(rule, target, v, why, self.name == "inplace-only")

    def fix(self, rule: str, target: str, v: AV, why: str) -> str:
        """The one-line fix that applies to this store under this contract."""
        return triage.fix_for(
            rule, target, v, why, self.name == "inplace-only", self.stale_nonpersistent
        )


STALE_WHY = "derived from `{src}`; the reload's copy-back skips non-persistent buffers"


def _derived_copy(v: AV) -> bool:
    """A new tensor computed from a loaded one (transposed, requantised, `.contiguous()`,
    arithmetic): not a view, not a dtype cast of itself, not a fresh workspace."""
    if v.kind == V.FRESH and v.value == "derived":
        return True  # computed by a tensor method from a tensor of unknown provenance
    return v.kind in (V.FRESH, V.PARAM) and bool(v.src) and v.value not in ("alias", "empty")


def _names_itself(src: str, attr: str) -> bool:
    """Whether `src` (a value's source, as its values name it) is `<x>.attr` or its `.data`."""
    if not src:
        return False
    parts = src.split(".")
    if parts[-1] == "data":
        parts = parts[:-1]
    return len(parts) > 1 and parts[-1] == attr


def _judge_once(owner: str, attr: str, v: AV, buffers: set[str], holder_src: str, registered=()):
    """A store under `vllm-load-weights`: post-load ran once, after the first load, and every
    update writes the checkpoint into the registered parameters in place. Nothing moves; a
    copy derived from a loaded tensor and kept under a name no checkpoint loads goes stale,
    and a `.data` swap to another shape makes the next load fail (the loader copies the
    checkpoint's shape into it)."""
    k = v.kind
    if owner == "data":
        if k == V.FRESH and shapes.shape_changing(v, holder_src):
            return (
                "RL106",
                "shape-changing `.data =` swap: the next `load_weights` copies the checkpoint's "
                "shape into it and fails",
            )
        if _derived_copy(v) and v.value != "cast":
            return ("RL203", UNDONE_WHY)
        return None
    if k == V.CONTAINER:
        if any(_derived_copy(c) for c in v.items):
            return (
                "RL201",
                once_stale_why(next(c.src for c in v.items if _derived_copy(c))),
            )
        return None
    if k == V.CALLABLE:
        cap = [c for _, group in v.items for c in group if _derived_copy(c)]
        if cap:
            return ("RL201", once_stale_why(cap[0].src))
        return None
    if (
        owner == "module"
        and k == V.PARAM
        and (_names_itself(v.src, attr) or (attr in registered and attr not in buffers))
    ):
        # the loaded Parameter wrapped again under its own name: a new Parameter object,
        # without the `weight_loader` the next load calls on it
        if v.value == "alias":
            return ("RL203", LOADER_LOST_WHY)
        if v.value == "fresh" or (_derived_copy(v) and v.value != "cast"):
            return ("RL203", UNDONE_WHY + "; the new Parameter has no `weight_loader` either")
        return None
    if owner == "module" and (attr in buffers or k == V.PARAM):
        # a registered name: a checkpoint tensor the next load writes again (a Parameter
        # replaced by a derived one keeps the name; what its loader does is the load's)
        return None
    if _derived_copy(v) and v.value != "cast":
        return ("RL201", once_stale_why(v.src))
    return None


def _stale_derived(v: AV, contract: Contract) -> bool:
    """A new tensor derived from a registered one, bound to a non-persistent buffer where the
    reload's copy-back skips those: the buffer keeps the first load's values. A dtype cast is
    left out (of a tensor already of that dtype it returns the tensor itself: an alias)."""
    return contract.stale_nonpersistent and v.kind == V.FRESH and bool(v.src) and v.value != "cast"


def _aliases(v: AV) -> bool:
    """A Parameter wrapping storage that already exists (`Parameter(x.data)`)."""
    return v.kind == V.PARAM and v.value == "alias"


def _binds_registered(v: AV) -> bool:
    return v.kind in (V.REG, V.VIEW) or (_aliases(v) and bool(v.src))


def _calls(f: dict) -> list:
    calls: list = []
    for st in f["body"]:
        for part in st[4:]:
            calls_in(part, calls)
    return calls


def _copy_dest(c):
    """The receiver `R` of an in-place copy call `R.copy_(...)` (also `R.data.copy_(...)`), or
    None."""
    fn = c[1]
    if fn[0] != "a" or fn[2] != "copy_":
        return None
    recv = fn[1]
    if recv[0] == "a" and recv[2] == "data":
        recv = recv[1]
    return recv


def copies_into_params(g: dict) -> frozenset[int]:
    """Positions of the parameters of function record `g` that it copies another of its
    parameters into in place (`def keep(dst, src): dst.copy_(src)`, also through `.data`, at
    any depth of its body): a call of it with a tensor at such a position refreshes that
    tensor's values and leaves its storage where it is."""
    params = list(g.get("params") or ())
    out = set()
    for c in _calls(g):
        recv = _copy_dest(c)
        if recv is None or recv[0] != "n" or recv[1] not in params:
            continue
        args = c[2] or ()
        src = args[0] if args else None
        if src is not None and src[0] == "a" and src[2] == "data":
            src = src[1]
        if src is not None and src[0] == "n" and src[1] in params and src[1] != recv[1]:
            out.add(params.index(recv[1]))
    return frozenset(out)


def refreshes_in_place(f: dict, attr: str, copies_into=None) -> bool:
    """Whether function record `f` writes into `<x>.attr` in place (`.copy_(...)`, also
    through `.data`), or hands `<x>.attr` to a helper that does (`copies_into(call)`: the
    argument positions the called function copies another argument into,
    `copies_into_params`; `_copy_into_kept(self.w, w)`, a keep-and-copy's helper)."""
    for c in _calls(f):
        recv = _copy_dest(c)
        if recv is not None:
            if recv[0] == "a" and recv[2] == attr:
                return True
            continue
        if copies_into is None:
            continue
        args = c[2] or ()
        for i in copies_into(c):
            a = args[i] if i < len(args) else None
            if a is not None and a[0] == "a" and a[2] == "data":
                a = a[1]
            if a is not None and a[0] == "a" and a[2] == attr:
                return True
    return False


def idempotent_cast(v: AV, attr: str | None) -> bool:
    """A dtype cast of the registered tensor stored back under its own name
    (`layer.x = Parameter(layer.x.float())`, `x.data = x.data.to(torch.float32)`,
    `register_parameter("x", Parameter(layer.x.half()))`): the first pass stores a tensor of
    that dtype under that name, so on every later pass the cast returns that tensor itself and
    no storage moves."""
    return bool(
        attr
        and v.kind in (V.FRESH, V.PARAM)
        and v.value == "cast"
        and v.src
        and v.src.rsplit(".", 1)[-1] == attr
    )


def judge_param_on_module(v: AV, inplace: bool, attr: str | None = None):
    """A Parameter stored on a module (or on what a layer holds, attr unknown: None)."""
    if idempotent_cast(v, attr):
        return None
    if inplace and v.value in ("fresh", "cast"):
        return ("RL109", "a new Parameter replaces the one the weight loader writes")
    return None


def make_contract(name: str, preserving=(), facts: ReloadFacts | None = None) -> Contract:
    """The named contract, knowing its built-in helpers plus `preserving` (from config), and
    the reload facts of the audited tree (analysis/reloadfacts.py; default: the newest)."""
    names = [*BUILTIN_PRESERVING.get(name, ()), *preserving]
    return Contract(
        name=name,
        preserving=frozenset(n.strip() for n in names if n.strip()),
        facts=facts or NEWEST,
    )


def copy_or_rebind_shape(f: dict) -> list[str]:
    """What a function record lacks to be a copy-or-rebind helper ([] when it is one).

    - a `.copy_(...)` into storage the caller owns: the receiver is rooted at one of the
      function's parameters, or at a local read off one (`getattr(module, name)`);
    - a rebinding alternative, which the helper takes only when the copy cannot be made:
      `.data = ...`, `setattr(...)`, or returning a value instead of the target.
    """
    params = set(f["params"])
    owned = set(params)
    copies = rebinds = False
    for st in f["body"]:
        if st[0] == "assign":
            value = st[5]
            for t in st[4]:
                if t[0] == "n" and _rooted(value, owned, via_getattr=True):
                    owned.add(t[1])
                if t[0] == "a" and t[2] == "data":
                    rebinds = True
        elif st[0] == "expr":
            e = st[4]
            if e[0] == "c" and e[1][0] == "a" and e[1][2] == "copy_" and _rooted(e[1][1], owned):
                copies = True
            if e[0] == "c" and e[1] == ("n", "setattr"):
                rebinds = True
        elif st[0] == "ret" and st[4] is not None and st[4][0] == "n" and st[4][1] in params:
            rebinds = True  # `return source`: the caller binds what it is given
    missing = []
    if not copies:
        missing.append("no `.copy_()` into storage it is handed")
    if not rebinds:
        missing.append("no rebinding alternative (`.data =`, `setattr`, returning the source)")
    return missing


def _rooted(e, names: set, via_getattr: bool = False) -> bool:
    """Whether expression `e` reads `name`, `name.x.y`, or (via_getattr) `getattr(name, ...)`."""
    while e[0] == "a":
        e = e[1]
    if e[0] == "n":
        return e[1] in names
    if via_getattr and e[0] == "c" and e[1] == ("n", "getattr") and e[2]:
        return _rooted(e[2][0], names)
    return False


def reuse_helper(f: dict, callee) -> tuple[str, str] | None:
    """(current, replacement) when `f` is a storage-reuse helper, else None.

    The shape (`reuse_packed_weight_storage(current, replacement)` in vLLM 0.33.0's
    utils/b12x.py): it returns `replacement` on some path (no storage yet, or a layout that
    differs) and, last, returns `current` after copying `replacement` into it (`current.copy_(
    replacement)`, directly or through a function that does). On an update `current` is what
    the first load stored, and the same computation gives the same layout: the call returns the
    existing storage, written in place. `callee(expr)` is the project function a call names.
    """
    params = [p for p in f["params"] if p not in ("self", "cls")]
    rets = [st[4][1] for st in f["body"] if st[0] == "ret" and st[4] and st[4][0] == "n"]
    if len(params) < 2 or not rets or rets[-1] not in params:
        return None
    current = rets[-1]
    for st in f["body"]:
        if st[0] != "expr" or st[4][0] != "c":
            continue
        c = st[4]
        args = [a[1] if a[0] == "n" else None for a in c[2]]
        if c[1][0] == "a" and c[1][2] == "copy_" and c[1][1] == ("n", current) and args:
            new = args[0]
        elif current in args:
            g = callee(c[1])
            shape = reuse_copies(g) if g else None
            if shape is None or shape[0] >= len(args) or shape[1] >= len(args):
                continue
            if args[shape[0]] != current:
                continue
            new = args[shape[1]]
        else:
            continue
        if new in params and new != current and new in rets:
            return current, new
    return None


def reuse_copies(g: dict) -> tuple[int, int] | None:
    """(destination, source) positions when function `g` copies its source parameter into its
    destination parameter (`dst.copy_(src)`, or through a function that does)."""
    params = list(g["params"])
    for st in g["body"]:
        if st[0] != "expr" or st[4][0] != "c":
            continue
        c = st[4]
        args = [a[1] if a[0] == "n" else None for a in c[2]]
        if c[1][0] == "a" and c[1][2] == "copy_" and c[1][1][0] == "n" and args:
            dst, src = c[1][1][1], args[0]
            if dst in params and src in params and dst != src:
                return params.index(dst), params.index(src)
    return None
