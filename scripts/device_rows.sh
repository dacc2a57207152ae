#!/usr/bin/env bash
# The CUDA row / column kernels of issue 15 on the GPU machine, one device
# call: column reductions (rlx_reduce_cols_*), half-storage norms, the
# warp-per-row norm backward, one-pass cross-entropy and the batched
# optimizer updates (rlx_opt_multi), then the GPT-2 124M training step's
# kernel profile in f32 and bf16, with and without the update batching.
#
#   here:   BINS="$(scripts/device_rows.sh bins)" scripts/device_gpu_all.sh pack
#   device: run with carry [build-gpu-carry]:  OUT=$OUT scripts/device_rows.sh
#
# $OUT gets log.txt (the summary), parity.txt and one profile per run
# (profile_*.txt: RLX_CUDA_PROFILE's table). Rows to compare with
# bench/results/issue15_train_h200.md: rlx_reduce_*, rlx_norm_*, rlx_xent_*,
# rlx_opt_update / rlx_opt_multi.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = bins ]; then
  echo "test_parity test_train test_train_ops test_cuda_batch train_gpt2"
  exit 0
fi
CARRY="${CARRY:-build-gpu-carry}"
OUT="${OUT:-bench/results/device-run-rows}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
T=/tmp/rlxrows
B=$T/bin
[ -f "$CARRY/bin.tar.xz" ] || { echo "no $CARRY/bin.tar.xz (see the header)"; exit 1; }
# shellcheck source=scripts/device_env.sh
source scripts/device_env.sh > /dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

# profile NAME ENV... -- the train_gpt2 arguments
profile() {
  local name=$1; shift
  echo "== $name ($(date +%T))"
  env "$@" > "$OUT/profile_$name.txt" 2>&1
  echo "exit $?"
  grep -E '"name"' "$OUT/profile_$name.txt"
  grep -E "rlx_(reduce|norm|xent|opt)|profile:|error" "$OUT/profile_$name.txt" | head -30
}

echo "== tests ($(date +%T))"
for t in test_cuda_batch "test_train_ops cuda" "test_train cuda"; do
  timeout 120 $B/$t > $T/t.txt 2>&1
  echo "$t exit $?: $(tail -1 $T/t.txt)"
  grep -E "FAIL" $T/t.txt | head
done
for c in reduce norm cross_entropy update rows_backward softmax_backward; do
  RLX_PARITY_ONLY=$c RLX_PARITY_ROUNDS=2 timeout 120 $B/test_parity cuda > $T/par.txt 2>&1
  echo "parity $c exit $?: $(grep -E '^PASS|^FAIL cuda' $T/par.txt | tail -1)"
  grep -E "^FAIL" $T/par.txt | head -12
  cat $T/par.txt >> "$OUT/parity.txt"
done
echo "rlx_opt_multi in update_batch: $(RLX_CUDA_PROFILE=1 RLX_PARITY_ONLY=update_batch RLX_PARITY_ROUNDS=1 \
  timeout 60 $B/test_parity cuda 2>&1 | grep -c rlx_opt_multi) executables"

for p in f32 bf16; do
  profile "$p" RLX_CUDA_PROFILE=1 timeout 100 $B/train_gpt2 --device cuda --precision $p --steps 2 --warmup 1
  profile "${p}_nobatch" RLX_CUDA_PROFILE=1 RLX_CUDA_NO_OPT_BATCH=1 timeout 100 $B/train_gpt2 \
    --device cuda --precision $p --steps 2 --warmup 1
  echo "== timed $p ($(date +%T))"
  timeout 100 $B/train_gpt2 --device cuda --precision $p --steps 5 --warmup 2
done
echo "== done ($(date +%T))"
