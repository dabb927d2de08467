#!/usr/bin/env bash
# Stage 4 of the H200 bundle (../shared/gpu/README.md builds stages 1-3): the wheels a whole vLLM
# 0.25.1 engine (`LLM(...)`) imports beyond the kernel stages, so a real engine with CUDA graphs
# runs on the device machine (no network there). Verified on 2026-12-02: a tiny random-weight Llama,
# quantization="fp8", CUDA graphs on, generate -> collective_rpc("reload_weights") -> generate.
#
#   usage: scripts/prepare_engine_stage.sh [OUTDIR]      (default .gpu/stage4, git-ignored)
#   device call (after stages 1-2; stage 3 for FlashAttention 3):
#     bash .gpu/stage4/install.sh && . .gpu/stage4/env.sh && python3 your_engine_script.py
#
# Two things are not wheels:
# - xgrammar: PyPI's newest release here needs a newer apache-tvm-ffi than vLLM 0.25.1 pins
#   (0.1.9), and an older one is not on this mirror. The structured-output backend is imported at
#   engine start but never used by these runs, so env.sh puts a stub module first on the path;
#   a request that asks for structured output would fail, none does.
# - FlashInfer is not on the machine: env.sh sets VLLM_USE_FLASHINFER_SAMPLER=0 (the sampler
#   probes it at load time).
set -euo pipefail
OUT="${1:-.gpu/stage4}"
mkdir -p "$OUT/whl"
for p in 'llguidance==1.6.1' blake3 'fastapi<0.137,>=0.133' 'starlette>=1.0.1' setproctitle \
         diskcache==5.6.3 lark==1.2.2 outlines_core==0.2.14 lm-format-enforcer==0.11.3 \
         partial-json-parser prometheus_client prometheus-fastapi-instrumentator tiktoken py-cpuinfo \
         depyf==0.20.0 python-json-logger ijson watchfiles anyio sniffio annotated-doc gguf \
         interegular astor dill mistral_common anthropic docstring-parser cloudpickle \
         apache-tvm-ffi==0.1.9; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d "$OUT/whl" "$p"
done
cat > "$OUT/install.sh" <<'EOS'
#!/usr/bin/env bash
# Device side: each wheel into /tmp/site only when the device image lacks that distribution.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
test -d /tmp/vroot/vllm || { echo "stage1 is missing: the machine was not warm" >&2; exit 3; }
missing=()
for w in "$HERE"/whl/*.whl; do
  name=$(basename "$w" | cut -d- -f1)
  PYTHONPATH=/tmp/site python3 -c "import importlib.metadata as m, sys; m.version(sys.argv[1])" \
    "$name" 2>/dev/null || missing+=("$w")
done
[ ${#missing[@]} -gt 0 ] && python3 -m pip install -q --no-index --no-deps --no-compile \
  --no-cache-dir --target /tmp/site "${missing[@]}" >/dev/null 2>&1
rm -rf /tmp/site/xgrammar /tmp/site/xgrammar-*
mkdir -p /tmp/stub/xgrammar
printf 'def __getattr__(n):\n    if n.startswith("__"):\n        raise AttributeError(n)\n    return type(n, (), {})\n' \
  > /tmp/stub/xgrammar/__init__.py
echo "stage4 installed (${#missing[@]} wheels); source $HERE/env.sh"
EOS
cat > "$OUT/env.sh" <<'EOS'
export PYTHONPATH="/tmp/site:/tmp/vroot:/tmp/stub${PYTHONPATH:+:$PYTHONPATH}"
export VLLM_USE_FLASHINFER_SAMPLER=0
EOS
chmod +x "$OUT/install.sh"
du -sh "$OUT"
