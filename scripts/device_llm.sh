#!/usr/bin/env bash
# Issue 17 on the GPU machine: the LLM path on CUDA, checked and measured
# beside llama.cpp built there from the bundled source.
#
#   here:    scripts/device_llm.sh pack       # $BUILD (CUDA) -> build-llm-carry/
#   device:  run, carry [build-llm-carry]:
#              OUT=$OUT bash build-llm-carry/device_llm.sh check   (~6 min)
#                parity (every matmul case: DequantMatMul, GroupedMatMul),
#                test_llm / test_llm_gguf / test_llama_oracle on cuda,
#                rlx generate on a tiny GGUF; meanwhile llama.cpp's
#                llama-bench is built (CUDA, sm_90) into build-llama/ and the
#                Llama-3-8B-shaped random files are written into
#                build-llm-models/ (both ignored paths: they stay on the warm
#                machine for the next call)
#              OUT=$OUT bash build-llm-carry/device_llm.sh bench   (~3 min)
#                rlx bench and llama-bench, pp512 and tg128, on each file
#                (a fresh machine: the files are written first, llama-bench
#                is skipped unless check built it)
#              OUT=$OUT bash build-llm-carry/device_llm.sh tests   (~4 min)
#                check's tests alone (no llama-bench build, no 8B files)
#              OUT=$OUT bash build-llm-carry/device_llm.sh decode  (~3 min)
#                Sample parity, test_llm_cache, tg128 (f32, bf16) and a
#                decode profile
#              OUT=$OUT bash build-llm-carry/device_llm.sh one     (~9 min)
#                everything in one call (the machine does not stay warm
#                between calls for long): llama-bench built and the files
#                written in the background while test_cuda, test_precision
#                and the dequant parity run on cuda; then rlx bench (f32,
#                --tf32, --precision bf16) and llama-bench on each file,
#                and RLX_CUDA_PROFILE tables of rlx's prefill and decode;
#                GEMV_AB=1 adds tg128 on _m1 and the GEMV lab (copy
#                lab_dequant_gemv into build-llm-carry/ first)
#   then:    copy $OUT/*.txt to bench/results/ (issue17_llm_h200_*.txt)
# TYPES (default "q4_k_m q8_0") picks the files.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
CARRY="${CARRY:-build-llm-carry}"
BUILD="${BUILD:-build}"
BINS="test_parity test_llm test_llm_gguf test_llm_cache test_llama_oracle test_cuda test_precision rlx"
TYPES="${TYPES:-q4_k_m q8_0}"

if [ "${1:-}" = pack ]; then
  set -e
  cd "$HERE/.."
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j2 --target $BINS
  rm -rf "$CARRY" && mkdir -p "$CARRY/bin"
  for b in $BINS; do strip -o "$CARRY/bin/$b" "$BUILD/$b"; done
  cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 /usr/lib/x86_64-linux-gnu/libjson-c.so.5 \
    "$CARRY/bin/"
  for l in libicuuc.so.72 libicudata.so.72 libicui18n.so.72; do
    cp -L "/usr/lib/x86_64-linux-gnu/$l" "$CARRY/bin/" 2>/dev/null || true
  done
  tar -C "$CARRY" -cf - bin | xz -T1 --lzma2=preset=2,dict=256MiB > "$CARRY/bin.tar.xz" && rm -rf "${CARRY:?}/bin"
  # llama.cpp: the source llama-bench needs, gguf-py, and the CPU library
  tar -C third_party -cf - llama.cpp/CMakeLists.txt llama.cpp/cmake llama.cpp/ggml llama.cpp/src \
    llama.cpp/include llama.cpp/common llama.cpp/tools llama.cpp/vendor llama.cpp/gguf-py \
    llama.cpp/LICENSE llama.cpp/licenses llama-cpu | xz -6 -T2 > "$CARRY/third_party.tar.xz"
  cp scripts/device_llm.sh "$CARRY/"
  du -sh "$CARRY"/*
  exit 0
fi

ROOT="$(cd "$HERE/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-bench/results/device-run-llm}"
mkdir -p "$OUT"
MODE="${1:-check}"
exec > >(tee "$OUT/$MODE.txt") 2>&1
stage() { echo; echo "== $* ($(date +%T))"; }
B=/tmp/rlxl/bin
if [ ! -x "$B/rlx" ]; then
  mkdir -p /tmp/rlxl && xz -dc "$HERE/bin.tar.xz" | tar -C /tmp/rlxl -xf -
fi
[ -d third_party/llama.cpp/gguf-py ] || xz -dc "$HERE/third_party.tar.xz" | tar -C third_party -xf - 2>/dev/null ||
  { mkdir -p third_party && xz -dc "$HERE/third_party.tar.xz" | tar -C third_party -xf -; }
export LD_LIBRARY_PATH="$B:${LD_LIBRARY_PATH:-}"
export PYTHONPATH="$ROOT/third_party/llama.cpp/gguf-py"
export RLX_TEST_PYTHON="$(command -v python3)"
MODELS=build-llm-models
LB=build-llama
mkdir -p "$MODELS"

build_llama() {
  cmake -S third_party/llama.cpp -B "$LB" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DCMAKE_BUILD_TYPE=Release \
    > "$OUT/llama_build.txt" 2>&1 &&
    cmake --build "$LB" -j "$(($(nproc) - 2))" --target llama-bench >> "$OUT/llama_build.txt" 2>&1
  echo "llama-bench build rc=$? ($(date +%T))" >> "$OUT/llama_build.txt"
}

if [ "$MODE" = check ]; then
  stage machine
  nvidia-smi --query-gpu=name,driver_version --format=csv || true
  [ -x "$LB/bin/llama-bench" ] || build_llama &
  LPID=$!
  (for t in $TYPES; do
     [ -f "$MODELS/llama3-8b-$t.gguf" ] ||
       python3 scripts/gen_random_gguf.py --preset 8b --type "$t" --jobs 4 \
         -o "$MODELS/llama3-8b-$t.gguf"
   done > "$OUT/gen_models.txt" 2>&1) &
  GPID=$!
  stage "parity: every matmul case on cuda (DequantMatMul, GroupedMatMul)"
  RLX_PARITY_ONLY=matmul RLX_PARITY_ROUNDS=3 RLX_DISPATCH_REPORT=0 "$B/test_parity" cpu cuda 2>&1 | tail -8
  stage "test_llm / test_llm_gguf on cuda"
  "$B/test_llm" cuda 2>&1 | tail -4
  "$B/test_llm_gguf" cuda 2>&1 | tail -4
  stage "test_llm_cache on cuda (the KV-cache form against the full forward, samplers)"
  "$B/test_llm_cache" cuda 2>&1 | grep -E "rel err|PASS|FAIL|checks" | tail -12
  stage "test_llama_oracle on cuda (llama.cpp's CPU library as the oracle)"
  "$B/test_llama_oracle" cuda 2>&1 | grep -E "vs llama|greedy|checks|SKIP" | tail -30
  stage "rlx generate on cuda (tiny random Q4_K_M file: streams, device sampling)"
  python3 scripts/gen_random_gguf.py --preset tiny --type q4_k_m -o "$MODELS/tiny.gguf" > /dev/null &&
    "$B/rlx" generate "$MODELS/tiny.gguf" --prompt "hello" -n 16 --device cuda --seed 1 2>&1 | tail -5
  stage "waiting for the llama-bench build and the model files"
  wait $GPID; tail -4 "$OUT/gen_models.txt"; ls -la "$MODELS"
  wait $LPID; tail -3 "$OUT/llama_build.txt"
  exit 0
fi

if [ "$MODE" = bench ]; then
  stage machine
  nvidia-smi --query-gpu=name,driver_version --format=csv || true
  for t in $TYPES; do
    m="$MODELS/llama3-8b-$t.gguf"
    [ -f "$m" ] || python3 scripts/gen_random_gguf.py --preset 8b --type "$t" --jobs 8 -o "$m" ||
      { echo "cannot write $m"; continue; }
    stage "rlx bench $t"
    timeout 200 "$B/rlx" bench "$m" -p 512 -n 128 -r 3 --device cuda 2>&1 | tail -8
    stage "llama-bench $t (CUDA, all layers on the GPU)"
    [ -x "$LB/bin/llama-bench" ] || echo "(llama-bench not built on this machine: run check first)"
    [ -x "$LB/bin/llama-bench" ] && timeout 120 "$LB/bin/llama-bench" -m "$m" -p 512 -n 128 -r 3 -ngl 99 2>&1 | tail -6
  done
  exit 0
fi
if [ "$MODE" = one ]; then
  stage machine
  nvidia-smi --query-gpu=name,driver_version --format=csv || true
  # NO_LLAMA=1: rlx only (llama-bench measured by an earlier call)
  LPID=
  if [ -z "${NO_LLAMA:-}" ]; then
    [ -x "$LB/bin/llama-bench" ] || build_llama &
    LPID=$!
  fi
  (for t in $TYPES; do
     [ -f "$MODELS/llama3-8b-$t.gguf" ] ||
       python3 scripts/gen_random_gguf.py --preset 8b --type "$t" --jobs 6 \
         -o "$MODELS/llama3-8b-$t.gguf.part" && mv "$MODELS/llama3-8b-$t.gguf.part" "$MODELS/llama3-8b-$t.gguf"
   done > "$OUT/gen_models.txt" 2>&1) &
  stage "test_cuda (dequant_prefill_panels among them)"
  timeout 200 "$B/test_cuda" 2>&1 | grep -vE '^PASS' | tail -25
  stage "test_precision cuda (quant_mlp: DequantMatMul lowered to bf16 / f16)"
  timeout 60 "$B/test_precision" cuda 2>&1 | grep -E 'quant|FAIL|checks' | tail -8
  stage "parity: DequantMatMul on cuda (2 rounds)"
  RLX_PARITY_ONLY=dequant RLX_PARITY_ROUNDS=2 RLX_DISPATCH_REPORT=0 timeout 150 "$B/test_parity" cpu cuda 2>&1 | tail -4
  stage "test_llm_cache / test_llama_oracle on cuda (decode through the GEMV)"
  timeout 120 "$B/test_llm_cache" cuda 2>&1 | grep -E "FAIL|checks" | tail -6
  timeout 120 "$B/test_llama_oracle" cuda 2>&1 | grep -E "vs llama|greedy|checks|SKIP|FAIL" | tail -12
  for t in $TYPES; do
    m="$MODELS/llama3-8b-$t.gguf"
    for _ in $(seq 1 60); do [ -f "$m" ] && break; sleep 3; done
    [ -f "$m" ] || { echo "no $m yet"; tail -3 "$OUT/gen_models.txt"; continue; }
    for opt in "" "--tf32" "--precision bf16"; do
      stage "rlx bench $t $opt"
      # shellcheck disable=SC2086
      timeout 120 "$B/rlx" bench "$m" -p 512 -n 128 -r 2 --device cuda $opt 2>&1 | grep -E 'pp512|tg128|rror'
    done
    if [ "$t" = q4_k_m ]; then
      stage "A/B: rlx bench $t pp512 on the own prefill kernels (RLX_CUDA_DQMM_NO_PANEL=1)"
      RLX_CUDA_DQMM_NO_PANEL=1 timeout 90 "$B/rlx" bench "$m" -p 512 -n 0 -r 1 --device cuda 2>&1 | grep -E 'pp512|rror'
      stage "RLX_CUDA_PROFILE=2: prefill (pp512, bf16) and decode (tg64, f32) of $t"
      RLX_CUDA_PROFILE=2 timeout 90 "$B/rlx" bench "$m" -p 512 -n 0 -r 1 --device cuda --precision bf16 2>&1 | tail -40
      RLX_CUDA_PROFILE=1 timeout 90 "$B/rlx" bench "$m" -p 0 -n 64 -r 1 --device cuda 2>&1 | tail -30
    fi
  done
  [ -n "${NO_LLAMA:-}" ] && [ -z "${GEMV_AB:-}" ] && exit 0
  if [ -n "${GEMV_AB:-}" ]; then
    # the decode GEMV: _s1 (default) against _m1 (RLX_CUDA_DQMM_F32_GEMV=1)
    for t in $TYPES; do
      m="$MODELS/llama3-8b-$t.gguf"
      stage "A/B: rlx bench $t tg128 with the f32-decode GEMV (RLX_CUDA_DQMM_F32_GEMV=1)"
      RLX_CUDA_DQMM_F32_GEMV=1 timeout 90 "$B/rlx" bench "$m" -p 0 -n 128 -r 2 --device cuda 2>&1 | grep -E 'tg128|rror'
    done
    if [ -x "$HERE/lab_dequant_gemv" ]; then
      # LAB_VARIANTS (default: _m1, _l1, _s1 x f32 / f16, _s1 with 2 rows)
      export LAB_VARIANTS="${LAB_VARIANTS:-0,16,19,20,21}"
      stage "lab_dequant_gemv --check (odd shapes, variants $LAB_VARIANTS)"
      timeout 120 "$HERE/lab_dequant_gemv" --check > "$OUT/lab_check.txt" 2>&1
      grep -E 'FAIL|within' "$OUT/lab_check.txt" | tail -24
      for shape in "14336 4096" "4096 14336" "4096 1024"; do
        stage "lab_dequant_gemv $shape (K N; back to back, us)"
        # shellcheck disable=SC2086
        timeout 240 "$HERE/lab_dequant_gemv" --reps 30 $shape > "$OUT/lab_${shape// /x}.txt" 2>&1
        grep -E 'back to back|FAIL|within' "$OUT/lab_${shape// /x}.txt" | tail -60
      done
    fi
    [ -n "${NO_LLAMA:-}" ] && exit 0
  fi
  stage "waiting for the llama-bench build"
  for _ in $(seq 1 100); do kill -0 "$LPID" 2>/dev/null || break; sleep 3; done
  tail -2 "$OUT/llama_build.txt"
  for t in $TYPES; do
    m="$MODELS/llama3-8b-$t.gguf"
    stage "llama-bench $t (CUDA, all layers on the GPU)"
    [ -x "$LB/bin/llama-bench" ] && [ -f "$m" ] && timeout 90 "$LB/bin/llama-bench" -m "$m" -p 512 -n 128 -r 2 -ngl 99 2>&1 | tail -4
  done
  exit 0
fi
if [ "$MODE" = tests ]; then
  # check's correctness part alone (no llama-bench build, no 8B files)
  stage "parity: every matmul case on cuda (DequantMatMul, GroupedMatMul)"
  RLX_PARITY_ONLY=matmul RLX_PARITY_ROUNDS=2 RLX_DISPATCH_REPORT=0 timeout 150 "$B/test_parity" cpu cuda 2>&1 | tail -4
  stage "test_llm / test_llm_gguf on cuda"
  timeout 120 "$B/test_llm" cuda 2>&1 | tail -2
  timeout 120 "$B/test_llm_gguf" cuda 2>&1 | tail -2
  stage "test_llama_oracle on cuda (llama.cpp's CPU library as the oracle)"
  timeout 120 "$B/test_llama_oracle" cuda 2>&1 | grep -E "vs llama|greedy|checks|SKIP|FAIL" | tail -30
  stage "rlx generate on cuda (tiny random Q4_K_M file), 40-token prompt (the prefill panels)"
  python3 scripts/gen_random_gguf.py --preset tiny --type q4_k_m -o "$MODELS/tiny.gguf" > /dev/null &&
    "$B/rlx" generate "$MODELS/tiny.gguf" --prompt "one two three four five six seven eight nine ten eleven twelve thirteen fourteen" -n 16 --device cuda --seed 1 2>&1 | tail -3
  exit 0
fi
if [ "$MODE" = decode ]; then
  # the sampler and decode: Sample parity, the cache form, tg128 on each file
  stage machine
  (for t in $TYPES; do
     [ -f "$MODELS/llama3-8b-$t.gguf" ] ||
       python3 scripts/gen_random_gguf.py --preset 8b --type "$t" --jobs 8 -o "$MODELS/llama3-8b-$t.gguf"
   done > "$OUT/gen_models.txt" 2>&1) &
  GPID=$!
  stage "parity: Sample on cuda (3 rounds)"
  RLX_PARITY_ONLY=sample RLX_PARITY_ROUNDS=3 RLX_DISPATCH_REPORT=0 timeout 120 "$B/test_parity" cpu cuda 2>&1 | tail -4
  stage "test_llm_cache on cuda (greedy = argmax of the full forward, samplers)"
  timeout 120 "$B/test_llm_cache" cuda 2>&1 | grep -E "FAIL|checks" | tail -6
  wait $GPID
  for t in $TYPES; do
    stage "rlx bench $t tg128 (f32, then --precision bf16)"
    timeout 90 "$B/rlx" bench "$MODELS/llama3-8b-$t.gguf" -p 0 -n 128 -r 3 --device cuda 2>&1 | grep -E 'tg128|rror'
    timeout 90 "$B/rlx" bench "$MODELS/llama3-8b-$t.gguf" -p 0 -n 128 -r 3 --device cuda --precision bf16 2>&1 | grep -E 'tg128|rror'
  done
  stage "RLX_CUDA_PROFILE=1 decode (tg64, f32) of q4_k_m"
  RLX_CUDA_PROFILE=1 timeout 90 "$B/rlx" bench "$MODELS/llama3-8b-q4_k_m.gguf" -p 0 -n 64 -r 1 --device cuda 2>&1 | tail -18
  exit 0
fi
echo "usage: device_llm.sh pack|check|bench|one|decode|tests"
exit 2
