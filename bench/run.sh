#!/usr/bin/env bash
# CPU benchmarks, one JSON line per measurement: GEMM vs OpenBLAS (same run),
# softmax / layernorm bandwidth, and the example model's forward latency.
# OPENBLAS_CORETYPE is unset for the benchmark only (the machine sets it, and
# it slows current OpenBLAS); tests and CI never touch it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
env -u OPENBLAS_CORETYPE build/bench_cpu "$@"
build/rlx bench examples/tiny_gpt.rlx --init-params 42 --warmup 5 --iters 50 --device cpu
