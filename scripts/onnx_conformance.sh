#!/usr/bin/env bash
# Regenerates the committed ONNX conformance table tests/onnx_results/<device>.txt
# by running the ONNX backend node tests of Debian's libonnx-testdata (data/node,
# pytorch-converted, pytorch-operator, simple) through the importer and the
# backend. CI compares every run with this table (ctest test_onnx_conformance
# for the CPU, onnx_conformance_vulkan and onnx_conformance_webgpu).
#   scripts/onnx_conformance.sh [device]     cpu (default), vulkan or webgpu
# vulkan runs on the system driver (lavapipe in CI) with the Khronos
# validation layer on, as its ctest entry does; webgpu on Dawn over the Mesa 25
# lavapipe that scripts/setup_webgpu.sh unpacks into third_party/.
# Environment: RLX_BUILD_DIR (default build), RLX_ONNX_TESTDATA (default
# /usr/share/libonnx-testdata/data).
set -euo pipefail
cd "$(dirname "$0")/.."
device="${1:-cpu}"
build="${RLX_BUILD_DIR:-build}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
case "$device" in
  vulkan) export RLX_VK_VALIDATION=1 ;;
  webgpu)
    tp="$(pwd)/third_party"
    export RLX_WG_LIB="$tp/bun-webgpu-linux-x64/libwebgpu_wrapper.so"
    export VK_DRIVER_FILES="$tp/mesa25/lvp_icd.json"
    export LD_LIBRARY_PATH="$tp/mesa25/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    if [ ! -f "$RLX_WG_LIB" ] || [ ! -f "$VK_DRIVER_FILES" ]; then
      echo "webgpu: run scripts/setup_webgpu.sh first"
      exit 1
    fi
    ;;
esac
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j2 --target test_onnx_conformance
mkdir -p tests/onnx_results
rc=0
"$build/test_onnx_conformance" --device "$device" \
  --write "tests/onnx_results/$device.txt" > "$build/onnx_conformance_$device.log" || rc=$?
if [ "$rc" = 77 ]; then
  cat "$build/onnx_conformance_$device.log"
  exit 77
fi
grep -E '^summary|^# node-scope|^# [0-9]+ cases' "$build/onnx_conformance_$device.log"
[ "$rc" = 0 ] || echo "exit $rc: validation messages or a failure writing the table (see $build/onnx_conformance_$device.log)"
exit "$rc"
