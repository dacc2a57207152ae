#!/usr/bin/env bash
# Edge cases of the ONNX quantization ops (QuantizeLinear, DequantizeLinear,
# DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger,
# QLinearConv) on one backend: tests/gen_onnx_quant.py writes them as ONNX
# node tests with numpy's expected outputs into a temporary folder, and the
# conformance runner imports, runs and compares every one; all must pass.
#   tests/onnx_quant.sh RUNNER [DEVICE]    RUNNER: build/test_onnx_conformance
# Exit 77 (skipped) when numpy / onnx or the device is missing.
set -uo pipefail
cd "$(dirname "$0")/.."
runner="$1"
device="${2:-cpu}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=$(/usr/bin/python3 tests/gen_onnx_quant.py "$dir")
rc=$?
if [ "$rc" = 77 ]; then echo "$n"; exit 77; fi
if [ "$rc" != 0 ]; then echo "FAIL: tests/gen_onnx_quant.py exited with $rc"; exit 1; fi
log="$dir/run.log"
"$runner" --device "$device" --data "$dir" --filter test_ > "$log" 2>&1
rc=$?
if [ "$rc" = 77 ]; then grep -m1 SKIP "$log"; exit 77; fi
grep -E '^case ' "$log"
summary=$(grep -E '^summary all ' "$log")
echo "$summary"
want="total +$n pass +$n fail +0 unsupported +0 error +0 "
if [ "$rc" != 0 ] || ! echo "$summary" | grep -Eq "$want"; then
  echo "FAIL: $device: expected all $n cases to pass (runner exit $rc)"
  grep -vE '^(case|op|summary|#)' "$log" | tail -20
  exit 1
fi
echo "ok: $n quantization cases pass on $device"
