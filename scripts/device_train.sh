#!/usr/bin/env bash
# Training on the GPU machine (issue 15), one device call: correctness of
# every training piece on cuda / vulkan / webgpu, then the PERF.md training
# rows beside PyTorch in the same call.
#
#   here:   BINS="$(scripts/device_train.sh bins)" scripts/device_gpu_all.sh pack
#   device: run with carry [build-gpu-carry]:  OUT=$OUT scripts/device_train.sh
#
# Stages (each can be skipped): TESTS (test_train, test_train_fixtures,
# test_train_ops, the parity suite incl. the Tier 2 cases, 1 round), BENCH
# (bench/train_gpt2.c f32 / bf16 / tf32 on cuda, a small config on vulkan
# and webgpu; attention fwd+bwd; bench/train_resnet50.c B32 224 f32 / tf32
# / bf16 on cuda, NCHW and channels_last, and f32 on vulkan / webgpu;
# SKIP_RESNET=1 leaves ResNet out), PEERS (bench/train_torch.py: the same
# rows in PyTorch with max_memory_allocated; PEERS_COMPILE=1 adds
# torch.compile, which takes minutes).
# $OUT gets log.txt, train.jsonl (rlx rows), torch.jsonl (PyTorch rows).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = bins ]; then
  echo "test_parity test_fusion test_train test_train_fixtures test_train_ops test_contract test_cuda test_trace train_gpt2 train_resnet50 bench_gpu vision_backward rlx"
  exit 0
fi
CARRY="${CARRY:-build-gpu-carry}"
OUT="${OUT:-bench/results/device-run-train}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
stage() { echo; echo "== $* ($(date +%T))"; }
T=/tmp/rlxtrain
B=$T/bin
BACKENDS="${BACKENDS:-cuda vulkan webgpu}"

stage "machine"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true
[ -f "$CARRY/bin.tar.xz" ] || { echo "no $CARRY/bin.tar.xz (see the header)"; exit 1; }
# shellcheck source=scripts/device_env.sh
source scripts/device_env.sh

# run_tests BIN TIMEOUT: BIN once per backend, its last line and FAIL/SKIP lines.
run_tests() {
  local bin=$1 limit=$2 d
  [ -x "$B/$bin" ] || { echo "$bin: not carried"; return 0; }
  for d in $BACKENDS; do
    timeout "$limit" "$B/$bin" "$d" > "$T/${bin}_$d.txt" 2>&1
    echo "$bin $d exit $?: $(tail -1 "$T/${bin}_$d.txt")"
    grep -E "FAIL|SKIP" "$T/${bin}_$d.txt" | head -12
  done
}

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  stage "training tests per backend"
  run_tests test_train_ops 120
  run_tests test_train 240
  run_tests test_train_fixtures 240
  run_tests test_contract 120
  run_tests test_fusion 120
  if [[ " $BACKENDS " == *" cuda "* ]] && [ -x "$B/test_cuda" ]; then
    timeout 240 "$B/test_cuda" > "$T/test_cuda.txt" 2>&1
    echo "test_cuda exit $?: $(tail -1 "$T/test_cuda.txt")"
    grep -E "FAIL" "$T/test_cuda.txt" | head -12
  fi
  stage "op parity vs the CPU reference (Tier 2 cases included)"
  for d in $BACKENDS; do
    RLX_PARITY_ROUNDS=${RLX_PARITY_ROUNDS:-1} timeout 300 $B/test_parity "$d" > "$T/parity_$d.txt" 2>&1
    echo "parity $d exit $?: $(grep -E "PASS|passed" "$T/parity_$d.txt" | tail -1)"
    grep -E "^FAIL" "$T/parity_$d.txt" | head -20
  done
fi

if [ "${SKIP_BENCH:-0}" != 1 ]; then
  stage "rlx training benchmarks"
  : > "$OUT/train.jsonl"
  if [[ " $BACKENDS " == *" cuda "* ]]; then
    for p in f32 tf32 bf16; do
      timeout 240 $B/train_gpt2 --device cuda --precision "$p" | tee -a "$OUT/train.jsonl"
    done
    # the vocabulary padded to a multiple of 64 (llm.c's 50304): what the odd
    # leading dim of the logits still costs the GEMMs after cuda_matmul.c's
    # operand padding (diagnostic rows)
    for p in f32 bf16; do
      timeout 240 $B/train_gpt2 --device cuda --precision "$p" --vocab 50304 | tee -a "$OUT/train.jsonl"
    done
  fi
  # Vulkan / WebGPU: GPT-2 124M's step, fewer timed steps
  for d in vulkan webgpu; do
    [[ " $BACKENDS " == *" $d "* ]] || continue
    timeout 240 $B/train_gpt2 --device "$d" --precision f32 --steps 3 --warmup 1 | tee -a "$OUT/train.jsonl"
  done
  # attention forward, backward, forward + backward (bench/bench_gpu.c "sdpa" rows)
  for d in $BACKENDS; do
    RLX_CUDA_TIMING=1 timeout 200 $B/bench_gpu "$d" sdpa | tee -a "$OUT/train.jsonl"
  done
  # ResNet-50-shaped conv weight and pool gradients (bench/vision_backward.c)
  if [ -x $B/vision_backward ] && [[ " $BACKENDS " == *" cuda "* ]]; then
    timeout 200 $B/vision_backward cuda | tee -a "$OUT/train.jsonl"
  fi
  # ResNet-50 train step B32 224 (SGD momentum, BatchNorm on batch statistics)
  if [ -x $B/train_resnet50 ] && [ "${SKIP_RESNET:-0}" != 1 ]; then
    if [[ " $BACKENDS " == *" cuda "* ]]; then
      for p in f32 tf32 bf16; do
        for cl in 0 1; do
          timeout 240 $B/train_resnet50 --device cuda --precision "$p" --channels-last $cl |
            tee -a "$OUT/train.jsonl"
        done
      done
    fi
    for d in vulkan webgpu; do
      [[ " $BACKENDS " == *" $d "* ]] || continue
      timeout 240 $B/train_resnet50 --device "$d" --steps 3 --warmup 1 | tee -a "$OUT/train.jsonl"
    done
  fi
fi

if [ "${SKIP_CLI:-0}" != 1 ] && [ -x $B/rlx ]; then
  stage "rlx train --text on cuda, then rlx generate from its checkpoint"
  timeout 120 $B/rlx train --text examples/jargon.txt --device cuda --steps 400 --layers 4 \
    --heads 4 --dim 128 --context 128 --batch 32 --log $T/train.csv --save $T/ckpt 2>&1 | tail -3
  head -2 $T/train.csv; tail -1 $T/train.csv
  timeout 60 $B/rlx generate $T/ckpt --prompt "The hacker" --tokens 200 --device cuda --seed 1
  echo
fi

if [ "${PROFILE:-0}" = 1 ] && [[ " $BACKENDS " == *" cuda "* ]]; then
  stage "where the GPT-2 step's time goes (RLX_CUDA_PROFILE)"
  for p in ${PROFILE_PRECISIONS:-f32 bf16}; do
    echo "-- precision $p"
    RLX_CUDA_PROFILE=2 timeout 200 $B/train_gpt2 --device cuda --precision "$p" --steps 2 --warmup 1 2>&1 | tail -60
  done
  if [ -x $B/train_resnet50 ] && [ "${SKIP_RESNET:-0}" != 1 ]; then
    stage "where the ResNet-50 step's time goes (RLX_CUDA_PROFILE)"
    for p in ${PROFILE_PRECISIONS:-f32 bf16}; do
      echo "-- precision $p"
      RLX_CUDA_PROFILE=1 timeout 200 $B/train_resnet50 --device cuda --precision "$p" --steps 2 \
        --warmup 1 2>&1 | tail -60
    done
  fi
fi

if [ "${TRACE:-0}" = 1 ] && [ -x $B/test_trace ] && [ -x $B/rlx ]; then
  stage "per-step traces (test_trace, then GPT-2 124M forward per backend)"
  timeout 120 $B/test_trace 2>&1 | grep -E "PASS|FAIL|SKIP|trace_check|checks"
  $B/rlx example gpt --dim 768 --layers 12 --heads 12 --ctx 1024 --vocab 50257 --out $T/g2.rlx
  for d in $BACKENDS; do
    RLX_TRACE=$OUT/trace_$d.json timeout 120 $B/rlx bench $T/g2.rlx --device "$d" --random-params \
      --warmup 2 --iters 5 -o json
  done
  python3 scripts/trace_summary.py $OUT/trace_*.json
fi

if [ "${SKIP_PEERS:-0}" != 1 ]; then
  stage "PyTorch peers (same machine, same call)"
  args=()
  [ "${PEERS_COMPILE:-0}" = 1 ] && args+=(--compile)
  [ "${SKIP_RESNET:-0}" = 1 ] && args+=(--skip-resnet50)
  timeout 540 python3 bench/train_torch.py "${args[@]}" | tee "$OUT/torch.jsonl"
fi
stage "done"
