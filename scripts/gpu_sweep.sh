#!/usr/bin/env bash
# The H200 confirmation sweep over the main job's own findings (docs/runner.md, docs/evidence/).
# Runs on the device machine after the vLLM bundle's stages 1-3 are installed
# (../shared/gpu/README.md): vLLM sources in /tmp/vroot, dependency wheels in /tmp/site.
#   usage: bash scripts/gpu_sweep.sh FINDINGS [EXTRA confirm ARGS...]
# FINDINGS is the output of `reload-lint check --vllm 0.25.1 --format json --show-fixes` (bundled allowlist; --show-fixes puts each codemod's patch in the findings for the fixed side),
# made where the audited sources are (the device has no network).
set -uo pipefail
FINDINGS="${1:?usage: gpu_sweep.sh FINDINGS [confirm args...]}"
shift || true
OUT="${OUT:-/tmp/reload-lint-out}"
mkdir -p "$OUT"
export PYTHONPATH="/tmp/site:/tmp/vroot:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# torch.cuda.is_available() through NVML, so the parent never creates a CUDA context and the
# children can fork from it with vLLM already imported
export PYTORCH_NVML_BASED_CUDA_CHECK=1
{
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__)"
  python3 -c "import vllm, sys; print('vllm', vllm.__version__)" 2>&1 | tail -1
  echo "findings: $FINDINGS sha256 $(sha256sum "$FINDINGS" | cut -c1-16)"
} 2>&1 | tee "$OUT/environment.txt"
start=$(date +%s)
# 10 children: the fixed side's spawned children spend most of their ~28 s importing vLLM on one
# CPU core each (16 cores on the H200 machine); the GPU holds < 0.3 GiB per child
python3 -m reload_lint.confirm --findings "$FINDINGS" --device cuda --jobs "${JOBS:-10}" \
  --replay-timeout 20 --site-timeout 150 --isolate --exit-zero -o "$OUT/evidence.json" \
  --log "$OUT/sweep.log" "$@" > "$OUT/confirm.out" 2>&1
rc=$?
tail -5 "$OUT/confirm.out"
echo "sweep wall time: $(( $(date +%s) - start ))s, exit $rc" | tee -a "$OUT/environment.txt"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader | tee -a "$OUT/environment.txt"
exit "$rc"
