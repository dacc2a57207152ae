#!/usr/bin/env bash
# Regenerates the committed ONNX conformance table tests/onnx_results/<backend>.txt
# by running the ONNX backend node tests of Debian's libonnx-testdata (data/node,
# pytorch-converted, pytorch-operator, simple) through the importer and the
# backend. CI (ctest test_onnx_conformance) compares every run with this table.
#   scripts/onnx_conformance.sh [backend]     default backend: cpu
# Environment: RLX_BUILD_DIR (default build), RLX_ONNX_TESTDATA (default
# /usr/share/libonnx-testdata/data).
set -euo pipefail
cd "$(dirname "$0")/.."
backend="${1:-cpu}"
build="${RLX_BUILD_DIR:-build}"
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j2 --target test_onnx_conformance
mkdir -p tests/onnx_results
"$build/test_onnx_conformance" --backend "$backend" \
  --write "tests/onnx_results/$backend.txt" >/dev/null
grep '^summary' "tests/onnx_results/$backend.txt"
