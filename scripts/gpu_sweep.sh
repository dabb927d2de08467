#!/usr/bin/env bash
# The whole H200 confirmation sweep in ONE device call (docs/runner.md, docs/evidence/).
# Runs on the device machine after the vLLM bundle's stage 1 and stage 2 are installed
# (../shared/gpu/README.md): vLLM sources in /tmp/vroot, dependency wheels in /tmp/site.
#   usage: bash scripts/gpu_sweep.sh [FINDINGS] [EXTRA confirm ARGS...]
set -uo pipefail
FINDINGS="${1:-tests/runtime/data/vllm-0.25.1-sites.json}"
shift || true
OUT="${OUT:-/tmp/reload-lint-out}"
mkdir -p "$OUT"
# pure-Python packages vLLM imports that neither the image nor the bundle has (carry .whl)
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="/tmp/site:/tmp/vroot:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# torch.cuda.is_available() through NVML, so the parent never creates a CUDA context and the
# per-site children can fork from it with vLLM already imported
export PYTORCH_NVML_BASED_CUDA_CHECK=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__)"
} 2>&1 | tee "$OUT/environment.txt"
python3 -m reload_lint.confirm --findings "$FINDINGS" --device cuda \
  --replay-timeout 20 --site-timeout 240 --exit-zero -o "$OUT/evidence.json" "$@" 2>&1 \
  | tee "$OUT/sweep.log"
rc=${PIPESTATUS[0]}
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader | tee -a "$OUT/environment.txt"
exit "$rc"
