#!/usr/bin/env bash
# Elementwise fusion (ElementwiseRegion) on the GPU machine, in one call:
#   build (CUDA on) -> test_fusion on cuda (fused vs unfused, fused counts,
#   text round trip) -> parity of the region op on cuda vs the CPU reference
#   -> compute-sanitizer memcheck of that case -> test_cuda and the training
#   fixtures on cuda with fusion on -> timing: the GELU derivative chain of
#   the GPT-2 backward ([4096, 3072], 18 ops, 5 scalar constants) fused vs
#   RLX_NO_FUSION=1, in f32 and bf16 (--precision).
# The fused run should be several times faster than the unfused one (one
# pass over x and dy instead of 18 kernels over [4096, 3072]).
# Outputs go to $OUT (or bench/results/device-fusion): log.txt, bench.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-bench/results/device-fusion}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
stage() { echo; echo "== $* ($(date +%T))"; }
export PATH=/usr/local/cuda/bin:$PATH
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done

stage "build"
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DRLX_WERROR=OFF >/dev/null || exit 1
cmake --build build-cuda -j"$(nproc)" --target test_fusion test_parity test_cuda test_train_fixtures rlx 2>&1 |
  grep -E "error|warning" || true
[ -x build-cuda/rlx ] || { echo "build failed"; exit 1; }

stage "test_fusion on cuda"
timeout 600 build-cuda/test_fusion cuda | tail -25

stage "parity: elementwise_region on cuda vs the CPU reference"
RLX_PARITY_ROUNDS=6 RLX_PARITY_ONLY=region timeout 600 build-cuda/test_parity cuda | tail -6

stage "compute-sanitizer memcheck (one round)"
if command -v compute-sanitizer >/dev/null; then
  RLX_PARITY_ROUNDS=1 RLX_PARITY_ONLY=region timeout 900 \
    compute-sanitizer --tool memcheck --error-exitcode 1 build-cuda/test_parity cuda | tail -4
fi

stage "test_cuda, training fixtures on cuda (fusion on)"
timeout 900 build-cuda/test_cuda | tail -4
timeout 900 build-cuda/test_train_fixtures cuda | tail -4

stage "bench: GELU derivative chain [4096, 3072], fused vs unfused"
G="$OUT/gelu_backward.rlx"
# the chain a gradient rule writes for the tanh GELU, times dy
cat > "$G" <<'EOF'
rlx 1
%0 = input name="x" : f32[4096,3072]
%1 = input name="dy" : f32[4096,3072]
%2 = constant data=0x0000003f : f32[]
%3 = constant data=0x0000803f : f32[]
%4 = constant data=0x2a424c3f : f32[]
%5 = constant data=0x1327373d : f32[]
%6 = constant data=0x4f5d093e : f32[]
%7 = mul(%0, %0) : f32[4096,3072]
%8 = mul(%7, %0) : f32[4096,3072]
%9 = mul(%5, %8) : f32[4096,3072]
%10 = add(%0, %9) : f32[4096,3072]
%11 = mul(%4, %10) : f32[4096,3072]
%12 = tanh(%11) : f32[4096,3072]
%13 = add(%3, %12) : f32[4096,3072]
%14 = mul(%2, %13) : f32[4096,3072]
%15 = mul(%12, %12) : f32[4096,3072]
%16 = sub(%3, %15) : f32[4096,3072]
%17 = mul(%6, %7) : f32[4096,3072]
%18 = add(%3, %17) : f32[4096,3072]
%19 = mul(%4, %18) : f32[4096,3072]
%20 = mul(%2, %0) : f32[4096,3072]
%21 = mul(%16, %19) : f32[4096,3072]
%22 = mul(%20, %21) : f32[4096,3072]
%23 = add(%14, %22) : f32[4096,3072]
%24 = mul(%23, %1) : f32[4096,3072]
outputs %24
EOF
for prec in f32 bf16; do
  for fusion in on off; do
    env_set=""
    [ "$fusion" = off ] && env_set="RLX_NO_FUSION=1"
    echo "-- $prec, fusion $fusion"
    env $env_set RLX_DISPATCH_REPORT=1 timeout 300 build-cuda/rlx bench "$G" --device cuda \
      --precision "$prec" --warmup 5 --iters 50 -o json | tee -a "$OUT/bench.jsonl"
  done
done
