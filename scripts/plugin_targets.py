"""Out-of-tree vLLM packages audited for issue 26's baseline (docs/reviews/plugins-baseline.md).

Fetch: pip download --no-deps <name>==<version> -d /tmp/plugins/<name>  (wheel), unzip, then
reload-lint check <unzipped>/<top> --format json
"""

TARGETS = [
    # (pypi name, version, top-level package, held_out)
    ("vllm-ascend", "0.23.0", "vllm_ascend", False),
    ("vllm-kunlun", "0.11.1", "vllm_kunlun", False),
    ("vllm-rbln", "0.12.0", "vllm_rbln", False),
    ("tpu-inference", "0.32.0", "tpu_inference", True),  # held-out: not to be used for tuning
]
# Looked at and dropped (no process_weights_after_loading): vllm-spyre 1.10.0,
# vllm-neuron 0.1.0, vllm-hpu-extension 0.1. Not downloadable here: vllm-gaudi, vllm-metax, vllm-tt.

if __name__ == "__main__":
    for name, ver, top, held in TARGETS:
        print(f"{name}=={ver}\t{top}\t{'held-out' if held else ''}")
