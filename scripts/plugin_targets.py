"""Out-of-tree vLLM packages audited for issue 26, with the base each is audited against and
its held-out status, as the review pages say (docs/reviews/plugins-baseline.md,
plugins-round4.md, plugins-round5.md).

Fetch and unpack (cached, like the releases): sources.release_sources(top, version, dist=name)
for each top-level package; a fork repackaged under another name (vllm_npu, vllm-hust) ships
`vllm/` itself, and vllm-hust is an sdist only. Audit from the unpacked root:

    reload-lint check <top> --base vllm==<base>        (base None: the tree is its own base)

    python scripts/plugin_targets.py                  (one line per package)
"""

from __future__ import annotations

from typing import NamedTuple


class Target(NamedTuple):
    name: str  # PyPI distribution
    version: str
    tops: tuple[str, ...]  # top-level packages audited
    base: str | None  # the vLLM release passed as `--base vllm==X`; None: no base
    status: str  # "open" (tuned on), or what the review page says of its held-out use
    review: str  # docs/reviews/ page with its labels


TARGETS = [
    # round 3 (plugins-baseline.md, plugins-after-base.md)
    Target("vllm-ascend", "0.23.0", ("vllm_ascend",), "0.23.0", "open", "plugins-after-base.md"),
    Target("vllm-kunlun", "0.11.1", ("vllm_kunlun",), "0.11.1", "open", "plugins-after-base.md"),
    Target("vllm-rbln", "0.12.0", ("vllm_rbln",), "0.30.0", "open", "plugins-after-base.md"),
    Target(
        "tpu-inference",
        "0.32.0",
        ("tpu_inference",),
        "0.32.0",
        "held-out (round 3): not to be used for tuning",
        "plugins-baseline.md",
    ),
    # round 4 (plugins-round4.md)
    Target("gridbook", "0.9.1", ("gridbook",), "0.33.0", "open", "plugins-round4.md"),
    Target("tessera-quant", "0.1.0", ("tessera",), "0.33.0", "open", "plugins-round4.md"),
    Target(
        "turboquant-plus-vllm",
        "0.13.12",
        ("turboquant_vllm",),
        "0.33.0",
        "held-out (round 4), read after that round's changes; tuned on since (first-use values)",
        "plugins-round4.md",
    ),
    Target(
        "sabi-mla-vllm",
        "0.2.0",
        ("sabi_mla_vllm",),
        "0.31.0",
        "held-out (round 4), read after that round's changes",
        "plugins-round4.md",
    ),
    Target(
        "vllm_npu",
        "0.4.2.post2",
        ("vllm",),  # a vLLM 0.4.2 fork: the wheel ships `vllm/`
        "0.4.2",
        "held-out (round 4, second set); no longer held out: its defects were fixed after",
        "plugins-round4.md",
    ),
    Target(
        "vllm_omni_humming",
        "0.3.0",
        ("vllm_omni_humming",),
        "0.24.0",
        "held-out (round 4, second set); not held out for the defects fixed after",
        "plugins-round4.md",
    ),
    Target(
        "auto_round",
        "0.16.1",
        ("auto_round", "auto_round_extension"),
        "0.33.0",
        "held-out (round 4, second set); not held out for the defects fixed after",
        "plugins-round4.md",
    ),
    # round 5 (plugins-round5.md); the six open packages
    Target(
        "vllm-gguf-plugin", "0.0.5", ("vllm_gguf_plugin",), "0.33.0", "open", "plugins-round5.md"
    ),
    Target("vllm-bnb-plugin", "0.0.3", ("vllm_bnb_plugin",), "0.33.0", "open", "plugins-round5.md"),
    Target("vllm-df11", "0.0.1", ("vllm_df11",), "0.33.0", "open", "plugins-round5.md"),
    Target("vllm-mindspore", "0.5.1", ("vllm_mindspore",), "0.11.0", "open", "plugins-round5.md"),
    Target("vllm-spyre", "1.10.0", ("vllm_spyre",), "0.18.0", "open", "plugins-round5.md"),
    Target("vllm-mblt", "0.8.0", ("vllm_mblt",), "0.11.2", "open", "plugins-round5.md"),
    Target(
        "vllm-hust",
        "0.17.2.post1",
        ("vllm",),  # a vLLM 0.17 fork, sdist only; audited as its own base
        None,
        "HELD OUT (round 5): do not read its labels or audit it when changing the engine",
        "plugins-round5.md",
    ),
]
# Looked at and dropped (no process_weights_after_loading): vllm-spyre 1.10.0 in round 3 (it has
# post-load casts read in round 5), vllm-neuron 0.1.0, vllm-hpu-extension 0.1. Not downloadable
# here: vllm-gaudi, vllm-metax, vllm-tt. Round 5's other candidates: plugins-round5.md.

if __name__ == "__main__":
    for t in TARGETS:
        base = f"vllm=={t.base}" if t.base else "(own base)"
        print(f"{t.name}=={t.version}\t{','.join(t.tops)}\t{base}\t{t.status}")
