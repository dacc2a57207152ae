#!/usr/bin/env bash
# ONNX node-test conformance (tests/test_onnx_conformance.c) on the GPU
# machine, for the cuda, vulkan and webgpu backends, in one device call.
#
# The GPU machine has neither the test data (Debian's libonnx-testdata) nor
# libprotobuf-c, nor a Vulkan loader, so all of them travel in the carried
# folder with a conformance binary built HERE:
#
#   scripts/device_gpu_all.sh pack   # optional first: it empties $CARRY and
#                                    # adds the other binaries, loader and Dawn
#   scripts/device_onnx.sh pack      # here: adds onnx.tar.xz (stripped
#                                    # test_onnx_conformance, libprotobuf-c.so.1,
#                                    # the test data) + loader + Dawn if missing
#   device run, carry [$CARRY]:  scripts/device_onnx.sh
#   then copy $OUT/<backend>_<gpu>.txt into tests/onnx_results/.
#
# Each backend is compared with the CPU table (tests/onnx_results/cpu.txt):
# the REGRESSION lines of its log are the cases that pass on the CPU and not
# there. The three backends run at the same time (one GPU, 16 cores), each
# with the device opened once in a worker process (--isolate worker).
#
# $OUT (at most 8 files): log.txt, {cuda,vulkan,webgpu}_<gpu>.txt (tables in
# the tests/onnx_results format, <gpu> = h100 or h200 from nvidia-smi) and
# {cuda,vulkan,webgpu}_cases.txt (each case with its time, -v).
# Environment: CARRY (default build-gpu-carry), BUILD (pack; default
# build-gpu), BACKENDS (default "cuda vulkan webgpu"), LIMIT_S (no case
# starts after it; default 150 s), GPU (table suffix; default from nvidia-smi).
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY="${CARRY:-build-gpu-carry}"
BUILD="${BUILD:-build-gpu}"
SUITES="node pytorch-converted pytorch-operator simple"

if [ "${1:-}" = pack ]; then
  set -e
  data="${RLX_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}"
  [ -d "$data/node" ] || { echo "no ONNX test data at $data (apt install libonnx-testdata)"; exit 1; }
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  flags="$BUILD/CMakeFiles/rlx_lib.dir/flags.make"
  for want in RLX_HAVE_ONNX RLX_HAVE_VULKAN RLX_HAVE_CUDA; do
    grep -q "$want" "$flags" || { echo "$want is not set in $BUILD: see cmake's output"; exit 1; }
  done
  cmake --build "$BUILD" -j2 --target test_onnx_conformance
  stage_dir=$(mktemp -d)
  mkdir -p "$stage_dir/onnx/bin" "$stage_dir/onnx/lib" "$stage_dir/onnx/data"
  strip -o "$stage_dir/onnx/bin/test_onnx_conformance" "$BUILD/test_onnx_conformance"
  pbc=$(ldd "$BUILD/test_onnx_conformance" | awk '/libprotobuf-c\.so/ {print $3}')
  cp -L "$pbc" "$stage_dir/onnx/lib/libprotobuf-c.so.1"
  # shellcheck disable=SC2086
  tar -C "$data" -cf - $SUITES | tar -C "$stage_dir/onnx/data" -xf -
  mkdir -p "$CARRY"
  tar -C "$stage_dir" -cf - onnx | xz -T2 -6 > "$CARRY/onnx.tar.xz"
  rm -rf "$stage_dir"
  [ -f "$CARRY/libvulkan.so.1" ] || cp -L /usr/lib/x86_64-linux-gnu/libvulkan.so.1 "$CARRY/"
  [ -f "$CARRY/dawn.tgz" ] || cp third_party/downloads/bun-webgpu-linux-x64-*.tgz "$CARRY/dawn.tgz"
  du -shc "$CARRY"/*
  total_kib=$(du -sk "$CARRY" | cut -f1)
  [ "$total_kib" -le $((40 * 1024)) ] || echo "WARNING: $CARRY is over 40 MiB"
  exit 0
fi

OUT="${OUT:-build-onnx-device-out}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
stage() { echo; echo "== $* ($(date +%T))"; }
T=/tmp/rlxonnx

stage "machine"
nvidia-smi -L || true
nvidia-smi --query-gpu=name,driver_version --format=csv || true
GPU="${GPU:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -o 'H[0-9]00' | tr 'H' 'h')}"
GPU="${GPU:-gpu}"

stage "unpack the carried binary, test data, loader, ICD json, Dawn"
for f in onnx.tar.xz libvulkan.so.1 dawn.tgz; do
  [ -f "$CARRY/$f" ] || { echo "no $CARRY/$f: run 'scripts/device_onnx.sh pack' here and carry $CARRY"; exit 1; }
done
# shellcheck source=scripts/device_env.sh
source scripts/device_env.sh
tar -C "$T" -xJf "$CARRY/onnx.tar.xz"
export LD_LIBRARY_PATH="$T/onnx/lib:$LD_LIBRARY_PATH"
export RLX_ONNX_TESTDATA=$T/onnx/data
BIN=$T/onnx/bin/test_onnx_conformance

stage "conformance: ${BACKENDS:-cuda vulkan webgpu} (in parallel)"
# --deadline: no case starts after LIMIT_S, the rest are "not run", so the
# tables are written in time; a hung case is killed after 60 s.
limit="${LIMIT_S:-150}"
pids=()
for d in ${BACKENDS:-cuda vulkan webgpu}; do
  RLX_ONNX_CASE_TIMEOUT=60 timeout $((limit + 70)) "$BIN" --device "$d" -v --deadline "$limit" \
    --write "$OUT/${d}_$GPU.txt" --expect tests/onnx_results/cpu.txt \
    > "$OUT/${d}_cases.txt" 2> "$T/$d.err" &
  pids+=("$!:$d")
done
for p in "${pids[@]}"; do
  wait "${p%%:*}"
  echo "${p#*:}: exit $? (0: every CPU pass passes; 1: see REGRESSION lines; 77: skipped; 124: timeout)"
done

stage "results"
for d in ${BACKENDS:-cuda vulkan webgpu}; do
  echo "--- $d"
  grep -E '^(SKIP|ERROR)|^# [0-9]+ cases|^# time in cases|^pass count' "$OUT/${d}_cases.txt"
  grep '^summary' "$OUT/${d}_$GPU.txt" 2>/dev/null
  # cases that pass on the CPU but not here (first 40; all are in the table)
  grep -E '^REGRESSION|regression|VALIDATION|FAIL' "$T/$d.err" | head -40
  committed=tests/onnx_results/${d}_$GPU.txt
  if [ -f "$committed" ] && [ -f "$OUT/${d}_$GPU.txt" ]; then
    echo "changes against the committed $committed (< committed, > now):"
    diff <(grep '^case' "$committed" | cut -d' ' -f2-3) \
         <(grep '^case' "$OUT/${d}_$GPU.txt" | cut -d' ' -f2-3) | grep '^[<>]' | head -40
  fi
done
stage "done"
