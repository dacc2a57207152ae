#!/usr/bin/env bash
# Issue 17 item 7's decode GEMV rows on the GPU machine, rlx against ggml
# built there from the bundled llama.cpp source, in ONE device call:
#   test_parity on cuda filtered to DequantMatMul (every scheme, both roles,
#   x f32 / f16 / bf16; RLX_DISPATCH_REPORT shows the steps native) ->
#   lab_dequant_gemv --check and the 4096 x 14336 timings (q4_0 .. q6_k) ->
#   lab_gemv 14336 4096 (the f32 row: rlx's f32 GEMV kernel) and bench_gpu's
#   "gemv llm" rows (f32 / f16 MatMul through the library, run overhead
#   included) -> ggml's test-backend-ops perf -o MUL_MAT -b CUDA0 (built in
#   the background meanwhile) -> $OUT/issue17_gemv_h200.md, side by side.
#
#   here:    scripts/device_quant.sh pack     # builds $BUILD, fills $CARRY
#   device:  run, carry [build-cuq-carry]:  bash build-cuq-carry/device_quant.sh
#            (the script travels in the carried folder too, so the run does
#            not depend on which checkout the device tool sends)
#   then:    cp $OUT/issue17_gemv_h200.md bench/results/
#
# $OUT gets: log.txt, parity.txt, lab.txt, ggml_perf.txt, ggml_build.txt,
# issue17_gemv_h200.md. GGML_BUILD_S (default 300) bounds the ggml build;
# GGML_PERF=FILE (a ggml_perf.txt of an earlier call, e.g. carried) skips
# the ggml build and perf run and takes ggml's numbers from FILE.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
CARRY="${CARRY:-build-cuq-carry}"
BUILD="${BUILD:-build-gpu}"
BINS="test_parity lab_dequant_gemv lab_gemv bench_gpu"

if [ "${1:-}" = pack ]; then
  set -e
  cd "$HERE/.."
  grep -q RLX_HAVE_CUDA "$BUILD/CMakeFiles/rlx_lib.dir/flags.make" || { echo "no CUDA in $BUILD"; exit 1; }
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j2 --target $BINS
  rm -rf "$CARRY" && mkdir -p "$CARRY/bin"
  for b in $BINS; do strip -o "$CARRY/bin/$b" "$BUILD/$b"; done
  cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 "$CARRY/bin/"
  tar -C "$CARRY" -cf - bin | xz -9 -T2 > "$CARRY/bin.tar.xz" && rm -rf "${CARRY:?}/bin"
  # the llama.cpp source test-backend-ops needs (ggml, libllama, common)
  tar -C third_party/llama.cpp -cf - CMakeLists.txt cmake ggml src include common tests vendor \
    LICENSE licenses | xz -6 -T2 > "$CARRY/llama.tar.xz"
  cp scripts/device_quant.sh "$CARRY/"
  du -sh "$CARRY"/*
  exit 0
fi

ROOT="$(cd "$HERE/.." && pwd)"
cd "$ROOT"
[ -d "$CARRY" ] || CARRY="$HERE"
OUT="${OUT:-bench/results/device-run-quant}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
stage() { echo; echo "== $* ($(date +%T))"; }
T=/tmp/rlxq
rm -rf "$T" && mkdir -p "$T"

stage "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv || true
NPROC=$(nproc)

GGML_PID=
if [ -z "${GGML_PERF:-}" ]; then
stage "ggml: configure + build test-backend-ops in the background"
mkdir -p "$T/ll" && tar -C "$T/ll" -xJf "$CARRY/llama.tar.xz"
export PATH="/usr/local/cuda/bin:$PATH"
(
  cd "$T/ll" &&
    cmake -S . -B b -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DLLAMA_CURL=OFF -DGGML_CUDA_FA=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DGGML_NATIVE=OFF -DGGML_CUDA_NCCL=OFF \
      $(command -v ninja >/dev/null && echo -G Ninja) &&
    timeout "${GGML_BUILD_S:-300}" cmake --build b --target test-backend-ops -j"$NPROC"
) > "$OUT/ggml_build.txt" 2>&1 &
GGML_PID=$!
fi

stage "rlx binaries"
tar -C "$T" -xJf "$CARRY/bin.tar.xz"
B=$T/bin
export LD_LIBRARY_PATH="$B:/usr/local/nvidia/lib64:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for d in $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:$LD_LIBRARY_PATH"
done

stage "parity: DequantMatMul on cuda vs the CPU reference"
RLX_PARITY_ONLY=dequant RLX_PARITY_ROUNDS=5 timeout 120 "$B/test_parity" > "$OUT/parity.txt" 2>&1
echo "test_parity exit $?"
grep -E "dequant" "$OUT/parity.txt" | head -40
grep -cE "FAIL" "$OUT/parity.txt"
stage "dispatch report: where the DequantMatMul steps run"
RLX_PARITY_ONLY=dequant_matmul_half RLX_PARITY_ROUNDS=1 RLX_DISPATCH_REPORT=1 timeout 60 \
  "$B/test_parity" 2>&1 | grep -E "^  (op  |dequant_matmul )" | head -6
stage "A/B: RLX_CUDA_NO_QUANT_KERNELS=1 (host fallback)"
RLX_CUDA_NO_QUANT_KERNELS=1 RLX_PARITY_ONLY=dequant RLX_PARITY_ROUNDS=1 timeout 60 "$B/test_parity" 2>&1 | tail -2

stage "lab: dequant GEMV --check, then 4096 x 14336"
{ "$B/lab_dequant_gemv" --check; echo "check exit $?"; "$B/lab_dequant_gemv"; echo "lab exit $?"; } > "$OUT/lab.txt" 2>&1
cat "$OUT/lab.txt"
stage "lab: f32 GEMV (rlx MatMul's kernel), K 14336 N 4096"
"$B/lab_gemv" 14336 4096 2>&1 | tee "$T/lab_gemv.txt"
stage "bench_gpu: f32 / f16 MatMul GEMV through the library"
RLX_BENCH_WARMUP_MS=300 "$B/bench_gpu" cuda "gemv llm" 2>&1 | tee "$T/bench.txt"

stage "ggml: wait for the build, then test-backend-ops perf MUL_MAT"
TBO=
if [ -n "$GGML_PID" ]; then
  wait "$GGML_PID"
  echo "ggml build exit $?"
  tail -5 "$OUT/ggml_build.txt"
  TBO=$(find "$T/ll/b" -name test-backend-ops -type f | head -1)
else
  cp "$GGML_PERF" "$OUT/ggml_perf.txt" && echo "ggml numbers from $GGML_PERF (an earlier call)"
fi
if [ -n "$TBO" ]; then
  timeout 150 "$TBO" perf -o MUL_MAT -b CUDA0 -p 'm=4096,n=(1|8|512),k=14336,' > "$OUT/ggml_perf.txt" 2>&1
  echo "test-backend-ops exit $?"
  grep -E "m=4096,n=1,k=14336" "$OUT/ggml_perf.txt" | head -20
elif [ -n "$GGML_PID" ]; then
  echo "no test-backend-ops binary (build failed or timed out): ggml column empty"
fi

stage "table"
us_rlx() { grep -E "^    $1 x0:" "$OUT/lab.txt" | tail -1 | awk '{print $3}'; }
us_m8() { grep -E "^    $1 x3:" "$OUT/lab.txt" | tail -1 | awk '{print $3}'; }
us_pre() { grep -E "^    $1 x$2:" "$OUT/lab.txt" | tail -1 | awk '{print $3}'; }
us_cold() { grep -E "^    $1 x2:" "$OUT/lab.txt" | tail -1 | awk '{print $3}'; }
us_ggml() { # "MUL_MAT(type_a=T,...,n=1,k=14336,...): [CUDA graph notes] N runs - X us/run - ..."; $2: n
  awk -v want="MUL_MAT(type_a=$1,type_b=f32,m=4096,n=${2:-1},k=14336,bs=[1,1]" '
    index($0, want) { on = 1 }
    on && match($0, /[0-9.]+ us\/run/) { v = substr($0, RSTART, RLENGTH); sub(/ us\/run/, "", v); print v; exit }
    on && /MUL_MAT\(/ && !index($0, want) { exit }' "$OUT/ggml_perf.txt" 2>/dev/null
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", b / a; else print "-" }'; }
F32_US=$(awk '$1 == "0" {print $(NF-1) * 1000; exit}' "$T/lab_gemv.txt")
F16_MS=$(grep -o '"name": "gemv llm f16[^}]*"device_ms": [0-9.]*' "$T/bench.txt" | sed -E 's/.*"device_ms": //')
F32B_MS=$(grep -o '"name": "gemv llm f32[^}]*"device_ms": [0-9.]*' "$T/bench.txt" | sed -E 's/.*"device_ms": //')
{
  echo "# Issue 17: decode GEMV 4096 x 14336 on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  echo
  echo "Made by scripts/device_quant.sh in one device call ($(date -u +%F)): rlx's kernels"
  echo "(lab_dequant_gemv: rlx_dqmm_gemv_<scheme>_m1 from src/backends/cuda/kernels/quant.cu, x f32,"
  echo "CUDA-event median of 50 runs; lab_gemv for f32) against ggml's test-backend-ops perf"
  echo "-o MUL_MAT -b CUDA0 built in the same call from third_party/llama.cpp (m=4096, n=1, k=14336)."
  echo "ratio = ggml us / rlx us (> 1: rlx faster). 'cold' rotates 8 copies of W so no run"
  echo "finds W in the L2 (60 MB on the H200); both main columns re-read one W, as test-backend-ops does."
  echo
  echo "| type | rlx us | rlx us (cold W) | ggml us | ratio | rlx us M=8 | ggml us n=8 | ratio M=8 |"
  echo "|---|---|---|---|---|---|---|---|"
  echo "| f32 | ${F32_US:--} | - | $(us_ggml f32) | $(ratio "${F32_US:-0}" "$(us_ggml f32)") | | | |"
  F16_US=$(awk -v m="${F16_MS:-0}" 'BEGIN { printf "%.1f", m * 1000 }')
  echo "| f16 (bench_gpu device_ms: MatMul through the library) | ${F16_US} | - | $(us_ggml f16) | $(ratio "$F16_US" "$(us_ggml f16)") | | | |"
  for t in q8_0 q4_0 q4_K q4_1 q5_0 q5_1 q2_K q3_K q5_K q6_K; do
    l=$(echo $t | tr K k)
    echo "| $t | $(us_rlx $l) | $(us_cold $l) | $(us_ggml $t) | $(ratio "$(us_rlx $l)" "$(us_ggml $t)") | $(us_m8 $l) | $(us_ggml $t 8) | $(ratio "$(us_m8 $l)" "$(us_ggml $t 8)") |"
  done
  echo
  echo "Prefill, M = 512 (ggml n=512; ggml's x is f32, converted internally; rlx: 6 = tensor cores with x f16,"
  echo "7 = the f32 tiled kernel):"
  echo
  echo "| type | rlx us mma x f16 | rlx us tiled x f32 | ggml us n=512 | ratio (mma) |"
  echo "|---|---|---|---|---|"
  for t in q8_0 q4_0 q4_K q6_K; do
    l=$(echo $t | tr K k)
    echo "| $t | $(us_pre $l 6) | $(us_pre $l 7) | $(us_ggml $t 512) | $(ratio "$(us_pre $l 6)" "$(us_ggml $t 512)") |"
  done
  echo
  echo "bench_gpu (MatMul through the library, device time of one run): f32 ${F32B_MS:-?} ms, f16 ${F16_MS:-?} ms."
  echo "Parity (RLX_PARITY_ONLY=dequant, 5 rounds): $(tail -1 "$OUT/parity.txt")"
} > "$OUT/issue17_gemv_h200.md"
cat "$OUT/issue17_gemv_h200.md"
