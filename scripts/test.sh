#!/usr/bin/env bash
# The test command (README, .ci/run): builds with -Wall -Wextra -Werror and
# runs every test with ctest; then builds again with AddressSanitizer +
# UndefinedBehaviorSanitizer and runs the suite a second time.
# Last, scripts/fuzz.sh builds the libFuzzer targets (clang) and runs each
# for 60 s from its committed corpus.
#   scripts/test.sh           all three steps
#   scripts/test.sh --fast    only the first pass
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# The Vulkan loader and drivers want a runtime dir; CI machines may not set one.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
jobs=$(nproc)

echo "== build (Release, -Werror)"
# Without a GPU (CI) the CUDA kernels are compiled to PTX only: nvcc still
# checks every kernel, nothing here could load one, and ptxas's machine code
# for two architectures is two thirds of the build (CMakeLists.txt,
# RLX_CUDA_GENCODE). With a GPU the fatbins carry everything.
gencode="-gencode;arch=compute_80,code=sm_80;-gencode;arch=compute_90,code=sm_90;-gencode;arch=compute_90,code=compute_90"
if ! nvidia-smi -L >/dev/null 2>&1; then gencode="-gencode;arch=compute_90,code=compute_90"; fi
cmake -S . -B build "-DRLX_CUDA_GENCODE=$gencode" >/dev/null
scripts/build.sh
echo "== ctest"
(cd build && ctest --output-on-failure -j"$jobs")

if [[ "${1:-}" != "--fast" ]]; then
  echo "== build (ASan + UBSan)"
  # The CUDA kernel fatbins do not depend on the host flags: take the Release
  # build's instead of running nvcc over every family a second time.
  fatbins=""
  [[ -d build/cuda_kernels ]] && fatbins="-DRLX_CUDA_FATBINS_FROM=$root/build/cuda_kernels"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DRLX_WERROR=ON -DRLX_SANITIZE=ON $fatbins >/dev/null
  cmake --build build-asan -j"$jobs"
  echo "== ctest under ASan + UBSan"
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
     LSAN_OPTIONS=suppressions=$root/tests/lsan.supp:print_suppressions=0 \
     ctest --output-on-failure -j"$jobs")
  echo "== fuzz (60 s per target)"
  scripts/fuzz.sh 60
fi
echo "== all tests passed"
