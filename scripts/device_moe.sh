#!/usr/bin/env bash
# GroupedMatMul (MoE, issue 17) on the GPU machine, one device call: the
# CUDA kernels rlx_gmm_f / rlx_gmm_f_rows / rlx_gmm_q against the CPU
# reference (parity cases grouped_matmul and dequant_grouped_matmul), the
# bad-expert-index contract, the same parity under compute-sanitizer, and
# Vulkan / WebGPU on the real GPU when the carry has them.
#
#   here:   BINS="$(scripts/device_moe.sh bins)" scripts/device_gpu_all.sh pack
#   device: run with carry [build-gpu-carry]:  OUT=$OUT scripts/device_moe.sh
#
# $OUT gets log.txt (the summary) and parity.txt. The Mixtral logits tests
# (test_llm, test_llm_gguf) need Debian's torch and gguf-py beside the
# binaries; run them on the device only where those exist.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = bins ]; then
  echo "test_parity test_contract"
  exit 0
fi
CARRY="${CARRY:-build-gpu-carry}"
OUT="${OUT:-bench/results/device-run-moe}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
T=/tmp/rlxmoe
B=$T/bin
[ -f "$CARRY/bin.tar.xz" ] || { echo "no $CARRY/bin.tar.xz (see the header)"; exit 1; }
# shellcheck source=scripts/device_env.sh
source scripts/device_env.sh > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

for dev in cuda vulkan webgpu; do
  timeout 120 $B/test_contract $dev > $T/c.txt 2>&1
  echo "contract $dev exit $?: $(grep -E 'expert|checks' $T/c.txt | tr '\n' ' ')"
  RLX_PARITY_ONLY=grouped_matmul RLX_PARITY_ROUNDS=3 timeout 300 $B/test_parity $dev \
    > $T/par.txt 2>&1
  echo "parity grouped_matmul $dev exit $?: $(grep -E "^(PASS|FAIL|SKIP) +$dev" $T/par.txt)"
  grep -E "^FAIL" $T/par.txt | head -12
  cat $T/par.txt >> "$OUT/parity.txt"
done
# dispatch: the quantized form native on CUDA, host fallback on the shaders
RLX_DISPATCH_REPORT=1 RLX_PARITY_ONLY=dequant_grouped RLX_PARITY_ROUNDS=1 timeout 120 \
  $B/test_parity cuda 2>&1 | grep -E "grouped_matmul" | sort | uniq -c
if command -v compute-sanitizer > /dev/null; then
  RLX_PARITY_ONLY=grouped_matmul RLX_PARITY_ROUNDS=1 timeout 400 compute-sanitizer \
    --error-exitcode 9 $B/test_parity cuda > $T/san.txt 2>&1
  echo "compute-sanitizer memcheck exit $?: $(grep -E 'ERROR SUMMARY' $T/san.txt | tail -1)"
fi
echo "== done ($(date +%T))"
