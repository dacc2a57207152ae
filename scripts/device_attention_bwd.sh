#!/usr/bin/env bash
# AttentionBackward on the GPU machine (issue 15, item 2 and item 7's
# attention targets), in one call:
#   build (CUDA on) -> test_attention_backward (CPU reference vs finite
#   differences) -> op parity of attention_backward on cuda vs the CPU
#   reference (every mask kind, GQA, layouts, softcap, f16 / bf16) ->
#   compute-sanitizer memcheck of that parity case -> bench_gpu's sdpa rows
#   (forward, backward, forward + backward; f32 and bf16, B8 H16 S1024 D64).
# Targets: fwd+bwd f32 <= 2.0 ms, bf16 <= 0.30 ms (device_ms).
# Outputs go to $OUT (or bench/results/device-attnbwd): log.txt, bench.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-bench/results/device-attnbwd}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
stage() { echo; echo "== $* ($(date +%T))"; }
export PATH=/usr/local/cuda/bin:$PATH
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done

stage "build"
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DRLX_WERROR=OFF >/dev/null || exit 1
cmake --build build-cuda -j"$(nproc)" --target test_attention_backward test_parity bench_gpu 2>&1 |
  grep -E "error|warning" || true
[ -x build-cuda/bench_gpu ] || { echo "build failed"; exit 1; }

stage "CPU reference vs finite differences"
timeout 120 build-cuda/test_attention_backward | tail -3

stage "parity: attention_backward on cuda vs the CPU reference"
RLX_PARITY_ROUNDS=6 RLX_PARITY_ONLY=attention_backward timeout 600 build-cuda/test_parity cuda | tail -6

stage "compute-sanitizer memcheck (one round)"
if command -v compute-sanitizer >/dev/null; then
  RLX_PARITY_ROUNDS=1 RLX_PARITY_ONLY=attention_backward timeout 900 \
    compute-sanitizer --tool memcheck --error-exitcode 1 build-cuda/test_parity cuda | tail -4
fi

stage "bench: sdpa forward, backward, forward + backward"
RLX_CUDA_TIMING=1 timeout 900 build-cuda/bench_gpu cuda sdpa | tee "$OUT/bench.jsonl"
