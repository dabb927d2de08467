"""Table-driven recipes: one per (family row, backend), built from ``confirm/families.py``.

``moe`` rows: vLLM's ``FusedMoE`` factory (a ``MoERunner`` around ``RoutedExperts``) with the
row's quantization config, ``create_weights`` through vLLM, a checkpoint synthesized from the
created parameters and loaded through ``RoutedExperts.weight_loader`` (``checkpoint.py``), the
forward inside ``set_forward_context``. ``linear`` rows: a ``ReplicatedLinear`` with the row's
config. The backend is forced with ``KernelConfig.moe_backend`` (``auto`` lets vLLM choose).
After post-load the recipe records what vLLM built: the quant method (``component``) and the
kernel/experts object (``backend``).

Fixes are generic over the finding's target: a plain attribute (``layer.X`` / ``self.X``) keeps
its captured storage (``reuse_storage``); a rebuilt object (``self.moe_kernel``) has its tensors
copied into the captured ones (``reuse_rebuilt``); a ``.data`` swap keeps the parameter's
storage (``reuse_storage`` on the parameter).
"""

from __future__ import annotations

import itertools

from reload_lint.confirm import fixes as fx
from reload_lint.confirm.recipes.base import Built, Fix, Recipe, backend_of
from reload_lint.confirm.recipes.checkpoint import dense_plan, materialize, moe_plan
from reload_lint.confirm.recipes.vllm_common import (
    gen,
    install_import_shims,
    install_model_config,
    setup_vllm,
    shim_notes,
    vllm_unavailable,
)
from reload_lint.confirm.targets import parse_target
from reload_lint.confirm.walk import qualified_class

PREFIX = "family:"
E, TOPK, H, INTER, T = 8, 2, 1024, 512, 16  # experts, top-k, hidden, intermediate, tokens
MLA_N, MLA_P, MLA_V, MLA_L = 16, 128, 128, 512  # heads, qk_nope, v, kv_lora_rank
_COUNTER = itertools.count()


def build_quant_config(row):
    """The row's QuantizationConfig, through vLLM's own constructors (None: unquantized)."""
    if row.quant is None:
        return None
    name, cfg = row.quant
    if name == "online":
        from vllm.config.quantization import _ONLINE_SHORTHANDS
        from vllm.model_executor.layers.quantization.online.base import (
            OnlineQuantizationConfig,
        )

        return OnlineQuantizationConfig(args=_ONLINE_SHORTHANDS[cfg])
    from vllm.model_executor.layers.quantization import get_quantization_config

    return get_quantization_config(name).from_config(dict(cfg))


def force_backend(backend: str) -> None:
    from vllm.config import get_current_vllm_config

    kc = get_current_vllm_config().kernel_config
    if backend != "auto":
        try:
            kc.moe_backend = backend
        except Exception:
            object.__setattr__(kc, "moe_backend", backend)


class FamilyRecipe(Recipe):
    """A family row on one backend. ``name`` is ``family:<row>:<backend>``."""

    uses_vllm = True
    needs_cuda = True
    #: one bug-side build serves every finding of the row (device time); the census still
    #: links each target separately and the reason names other escaped storages
    isolate = False

    def __init__(self, row, backend: str = "auto"):
        self.row = row
        self.backend = backend
        self.name = f"{PREFIX}{row.id}:{backend}"
        self.family = f"{row.layer}: {row.id} (backend {backend})"
        self._plan = None
        self._layer = None
        self._shim = None

    @classmethod
    def from_name(cls, name: str) -> FamilyRecipe:
        from reload_lint.confirm.families import BY_ID

        row_id, _, backend = name[len(PREFIX) :].partition(":")
        return cls(BY_ID[row_id], backend or "auto")

    @property
    def dtype(self):
        import torch

        return torch.bfloat16

    def unavailable(self, device: str) -> str | None:
        if self.row.unsupported:
            return self.row.unsupported
        if self.row.missing:
            return f"the runner lacks {self.row.missing}"
        why = vllm_unavailable(device)
        if why:
            return why
        import importlib.util

        for mod in self.row.modules:
            try:
                found = importlib.util.find_spec(mod) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                return f"module {mod} is not importable; row {self.row.id} needs " + "; ".join(
                    self.row.needs
                )
        return None

    def preimport(self) -> None:
        install_import_shims()
        import vllm.model_executor.layers.fused_moe
        import vllm.model_executor.layers.linear
        import vllm.model_executor.model_loader.reload  # noqa: F401

    def setup(self, device: str) -> None:
        import os

        import torch

        os.environ.update(dict(self.row.env))
        setup_vllm(device)
        if self.row.standins:
            from reload_lint.confirm.recipes import standins

            standins.install(self.row.standins)
        quant = self.row.quant[1] if self.row.quant and isinstance(self.row.quant[1], dict) else {}
        dims = {}
        if self.row.layer == "mla":
            dims = {"qk_nope_head_dim": MLA_P, "qk_rope_head_dim": 64, "v_head_dim": MLA_V}
        self._shim = install_model_config(torch.bfloat16, quant, **dims)
        force_backend(self.backend)
        if self.row.linear_backend:
            # vLLM 0.33.0's --linear-backend (KernelConfig.linear_backend)
            from vllm.config import get_current_vllm_config

            kc = get_current_vllm_config().kernel_config
            try:
                kc.linear_backend = self.row.linear_backend
            except Exception:
                object.__setattr__(kc, "linear_backend", self.row.linear_backend)
        if self.row.quant is not None:
            # loads the row's quant-method module, so that the fixes (applied before any layer
            # is built) find its classes by name
            try:
                build_quant_config(self.row)
            except Exception:
                pass  # construct raises it again, as the stage's error
        if self.row.layer == "moe":
            import torch
            from vllm.v1.worker.workspace import init_workspace_manager

            try:
                init_workspace_manager(torch.device(device))
            except Exception:
                pass

    # -- construction --------------------------------------------------------------------------
    def construct(self, device: str) -> Built:
        built = self._construct(device)
        # every layer kind: a row whose ops are stood in is census tier (its records say which)
        built.standins = built.standins | set(self.row.standins)
        return built

    def _construct(self, device: str) -> Built:
        if self.row.layer == "moe":
            return self._construct_moe(device)
        if self.row.layer == "mla" and self.backend != "auto":
            raise RuntimeError("MLA rows take no moe_backend")
        if self.row.layer == "linear":
            return self._construct_linear(device)
        if self.row.layer == "mla":
            return self._construct_mla(device)
        raise RuntimeError(f"no harness for layer kind {self.row.layer!r} (row {self.row.id})")

    def _construct_moe(self, device: str) -> Built:
        import torch
        from vllm.config import get_current_vllm_config
        from vllm.forward_context import set_forward_context
        from vllm.model_executor.layers.fused_moe import FusedMoE

        layer = FusedMoE(
            num_experts=E,
            top_k=TOPK,
            hidden_size=H,
            intermediate_size=INTER,
            params_dtype=torch.bfloat16,
            quant_config=build_quant_config(self.row),
            prefix=f"model.layers.{next(_COUNTER)}.mlp.experts",
            activation=self.row.activation,
            **dict(self.row.moe_kwargs),
        )
        experts = layer.routed_experts
        self._layer = experts
        notes = []
        if getattr(layer, "_shared_experts", None) is None:
            # vLLM wraps the MoE forward in the opaque custom op `vllm.moe_forward` (one op to
            # torch.compile); call the Python function it wraps, as vLLM itself does on CPU and
            # TPU, so that the dispatch recorder sees every tensor the kernels read
            from vllm.model_executor.layers.fused_moe.runner import moe_runner

            layer._forward_entry = moe_runner._moe_forward
            notes.append(
                "harness: MoERunner._forward_entry = _moe_forward (the function inside the "
                "opaque vllm.moe_forward op), so the recorder sees the kernels' reads"
            )
        logits = torch.randn(T, E, generator=gen(55), device="cpu").to(torch.float32).to(device)
        cfg = get_current_vllm_config()

        def forward(x):
            with set_forward_context(None, cfg, num_tokens=x.shape[0]):
                out = layer(x, logits)
            return out[0] if isinstance(out, tuple) else out

        qm = experts.quant_method
        return Built(
            model=layer,
            layer=experts,
            forward=forward,
            roots={"layer": layer},
            notes=[
                f"quant method {type(qm).__name__}; moe_backend={self.backend}",
                *notes,
                *shim_notes(),
                *([self._shim] if self._shim else []),
                *(f"row {self.row.id}: {n}" for n in self.row.notes),
            ],
            component=qualified_class(qm),
        )

    def _construct_linear(self, device: str) -> Built:
        import torch
        from vllm.model_executor.layers.linear import ReplicatedLinear

        layer = ReplicatedLinear(
            H,
            INTER,
            bias=False,
            params_dtype=torch.bfloat16,
            quant_config=build_quant_config(self.row),
            prefix=f"model.layers.{next(_COUNTER)}.mlp.down_proj",
        )
        self._layer = layer
        for name, value in self.row.layer_flags:
            setattr(layer, name, value)  # a model's flag, set before loading as the model does
        qm = layer.quant_method
        comp = getattr(layer, "scheme", None) or getattr(qm, "scheme", None) or qm

        def forward(x):
            out = layer(x)
            return out[0] if isinstance(out, tuple) else out

        return Built(
            model=layer,
            layer=layer,
            forward=forward,
            roots={"layer": layer},
            notes=[f"quant method {type(qm).__name__}", *shim_notes()],
            component=qualified_class(comp),
        )

    def _construct_mla(self, device: str) -> Built:
        """``MLAAttention`` with a ``kv_b_proj`` under the row's config. The forward drives the
        two reads of the post-load products: ``MLAAttention._v_up_proj`` (vLLM's, reads
        ``W_UV``) and the decode path's ``torch.bmm(mqa_q_nope, self.W_UK_T)`` (as
        ``forward_impl`` does); the attention kernel itself needs a KV cache and is not run."""
        import torch

        n = next(_COUNTER)
        # the attention backend is chosen for the default dtype, as in a bf16 model
        old_dtype = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            return self._build_mla(n)
        finally:
            torch.set_default_dtype(old_dtype)

    def _build_mla(self, n: int) -> Built:
        import torch
        from vllm.model_executor.layers.attention import MLAAttention
        from vllm.model_executor.layers.linear import ColumnParallelLinear

        kv_b_proj = ColumnParallelLinear(
            MLA_L,
            MLA_N * (MLA_P + MLA_V),
            bias=False,
            params_dtype=torch.bfloat16,
            quant_config=build_quant_config(self.row),
            prefix=f"model.layers.{n}.self_attn.kv_b_proj",
        )
        layer = MLAAttention(
            num_heads=MLA_N,
            scale=MLA_P**-0.5,
            qk_nope_head_dim=MLA_P,
            qk_rope_head_dim=64,
            v_head_dim=MLA_V,
            q_lora_rank=None,
            kv_lora_rank=MLA_L,
            kv_b_proj=kv_b_proj,
            prefix=f"model.layers.{n}.self_attn.attn",
        )
        self._layer = kv_b_proj
        for name, value in self.row.layer_flags:
            setattr(layer, name, value)

        def forward(x):
            from vllm._aiter_ops import rocm_aiter_ops

            # x: [B, N * L]; v-up projection (vLLM's own method) ...
            out = torch.empty(x.shape[0], MLA_N * MLA_V, dtype=x.dtype, device=x.device)
            layer._v_up_proj(x, out)
            # ... and q_nope absorption: (N, B, P) x (N, P, L) as forward_impl does, on the
            # path the layer's flags select
            q = out.view(-1, MLA_N, MLA_V).transpose(0, 1)[..., :MLA_P].contiguous()
            if getattr(layer, "is_aiter_triton_fp4_bmm_enabled", False):
                ql = rocm_aiter_ops.batched_gemm_a16wfp4(
                    q, layer.W_K, layer.W_K_scale, None, transpose_bm=True, prequant=True
                )
            elif getattr(layer, "is_aiter_triton_fp8_bmm_enabled", False):
                ql = rocm_aiter_ops.triton_fp8_bmm(
                    q, layer.W_K, layer.W_K_scale, group_size=128, transpose_bm=True
                )
            else:
                ql = torch.bmm(q, layer.W_UK_T).transpose(0, 1)
            return torch.cat([out, ql.reshape(x.shape[0], -1).to(out.dtype)], dim=-1)

        return Built(
            model=layer,
            layer=layer,
            forward=forward,
            roots={"layer": layer},
            notes=[
                f"MLAAttention (backend {type(layer.impl).__name__}); kv_b_proj quant method "
                f"{type(kv_b_proj.quant_method).__name__}; forward = _v_up_proj + the W_UK_T bmm",
                *shim_notes(),
                *([self._shim] if self._shim else []),
            ],
            component=qualified_class(layer),
        )

    def post_load(self, module) -> bool:
        from reload_lint.confirm.reload import default_post_load

        if self.row.layer == "mla" and type(module).__name__ == "MLAAttention":
            import torch

            qm = getattr(module.kv_b_proj, "quant_method", None)
            if qm is not None and not getattr(module.kv_b_proj, "_rl_done", False):
                qm.process_weights_after_loading(module.kv_b_proj)
                module.kv_b_proj._rl_done = True
            module.process_weights_after_loading(torch.bfloat16)
            return True
        if self.row.layer == "mla" and getattr(module, "_rl_done", False):
            module._rl_done = False  # processed with its MLAAttention, before it
            return True
        return default_post_load(module)

    def finish(self, built: Built) -> None:
        """After post-load: what vLLM built for this layer."""
        if self.row.layer == "mla":
            impl = getattr(built.layer, "impl", None)
            built.backend = qualified_class(impl) if impl is not None else None
            return
        qm = getattr(built.layer, "quant_method", None)
        comp = getattr(built.layer, "scheme", None) or getattr(qm, "scheme", None) or qm
        built.backend = backend_of(comp) if comp is not None else None

    # -- checkpoint ---------------------------------------------------------------------------
    def checkpoint(self, seed: int, device: str):
        if self._plan is None:
            # probe the loaders on a throwaway layer: loading can trigger processing (online
            # quantization processes a layer once its last weight arrives)
            import torch

            keep = self._layer
            with torch.device(device):
                probe = self.construct(device).layer
            self._layer = keep
            if self.row.layer == "moe":
                self._plan = moe_plan(probe, E, H, INTER)
            elif self.row.layer == "mla":
                self._plan = dense_plan(probe.kv_b_proj)  # MLA's own scales: not checkpointed here
            else:
                self._plan = dense_plan(probe)
        prefix = {"moe": "routed_experts.", "mla": "kv_b_proj."}.get(self.row.layer, "")
        return materialize(self._plan, seed, device, prefix)

    def example_input(self, device: str):
        import torch

        width = MLA_N * MLA_L if self.row.layer == "mla" else H
        x = torch.randn(T, width, generator=gen(99), device="cpu") * 0.5
        return x.to(torch.bfloat16).to(device)

    # -- fixes --------------------------------------------------------------------------------
    def fixes_for(self, targets: dict[str, str]) -> dict[str, Fix]:
        """One generic fix per canonical target; ``targets`` maps target -> owner class name
        (the finding's symbol class, or the row's component for a free helper function)."""
        out: dict[str, Fix] = {}
        for target, owner in targets.items():
            fix = generic_fix(target, owner)
            if fix is not None:
                out[target] = fix
        return out


def _find_class(owner: str):
    """The class ``owner`` names: ``path/to/module.py:Class`` (imported) or a bare name
    already loaded."""
    import gc
    import importlib

    path, _, name = owner.rpartition(":")
    if path.endswith(".py"):
        mod = importlib.import_module(path[:-3].replace("/", "."))
        cls = getattr(mod, name, None)
        if isinstance(cls, type):
            return cls
    for obj in gc.get_objects():
        if isinstance(obj, type) and obj.__name__ == name and obj.__module__.startswith("vllm"):
            return obj
    raise LookupError(f"class {name} is not loaded (from {path or 'no module'})")


#: targets the runner marks as rebuilt objects (RL105/RL108 findings): their tensors are copied
#: into the captured storages rather than the attribute itself being kept
REBUILT: set[str] = set()


def generic_fix(target: str, owner: str) -> Fix | None:
    """The storage-preserving fix for ``target`` stored by ``owner``'s post-load."""
    base, attrs = parse_target(target)
    if not attrs or base not in ("self", "layer"):
        return None
    attr = attrs[0]
    spelled = f"{base}.{attr}"
    if base == "self" and (attr in ("moe_kernel", "kernel", "experts") or attr in REBUILT):

        def apply_rebuilt(owner=owner, attr=attr):
            return fx.reuse_rebuilt(
                _find_class(owner), spelled, lambda m, layer: getattr(m, attr, None)
            )

        return Fix(
            spelled,
            "reuse rebuilt",
            apply_rebuilt,
            f"{owner.rpartition(':')[2]}: after {spelled} is rebuilt, copy its tensors into the captured storages "
            "and rebind them",
        )

    def apply_reuse(owner=owner):
        return fx.reuse_storage(_find_class(owner), spelled)

    return Fix(
        spelled,
        "reuse storage",
        apply_reuse,
        f"{owner.rpartition(':')[2]}.process_weights_after_loading: copy the new {spelled} "
        "into the captured "
        "storage and keep it",
    )
