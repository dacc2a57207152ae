#!/usr/bin/env bash
# ResNet-50 B32 224 probes on the GPU machine, in one device call: where the
# forward's time goes per mode and what each switch changes (the numbers
# behind issue 14's TF32 / bf16 rows), after a kernel change:
#   pool parity on cuda -> rlx bench of ResNet-50 on cuda in tf32 / bf16,
#   NCHW / --channels-last, with RLX_NO_CONV_FUSION=1 and
#   RLX_CUDNN_HEURISTIC=1 variants and a kernel profile (RLX_CUDA_PROFILE)
#   -> Vulkan / WebGPU f32 with the native conv kernels and with the
#   decomposition they replaced -> $OUT/probe.jsonl.
#
#   here:   scripts/device_vision.sh pack      (rlx + tests, build-vision-carry)
#           BINS=test_parity scripts/device_gpu_all.sh pack   (build-gpu-carry)
#   device: carry [build-vision-carry, build-gpu-carry]: scripts/device_resnet_probe.sh
# Environment: BACKENDS (default "cuda vulkan webgpu"), BENCH_TIMEOUT (s, 120),
# PEERS=0 (no PyTorch rows), VULKAN_UNET=1 (U-Net B32 on Vulkan).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-bench/results/device-run-probe}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
T=/tmp/rlxprobe
export CARRY=build-vision-carry # read by device_env.sh
# shellcheck source=scripts/device_env.sh
source scripts/device_env.sh
B=$T/bin
[ -f build-gpu-carry/bin.tar.xz ] && tar -C "$T" -xJf build-gpu-carry/bin.tar.xz
BACKENDS="${BACKENDS:-cuda vulkan webgpu}"
VM=/tmp/rlxprobe_models
R=$VM/resnet50
timeout 300 python3 scripts/gen_vision_models.py --out "$VM" --size full --batches 1,32 \
  --models resnet50 || { echo "generator failed"; exit 1; }

echo "== pool parity (cuda)"
if [ -x "$B/test_parity" ]; then
  for d in $BACKENDS; do
    RLX_PARITY_ONLY=pool timeout 120 "$B/test_parity" "$d" 2>&1 | grep -E "^(PASS|FAIL)" | head -5
  done
fi

# bench LABEL DEVICE [ENV=VALUE ...] -- [rlx bench options]
bench() {
  local label=$1 dev=$2
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local line
  line=$(env "${envs[@]}" RLX_DISPATCH_REPORT=1 timeout "${BENCH_TIMEOUT:-120}" "$B/rlx" bench \
           "$R/model.onnx" --device "$dev" --input "input=$R/input_b32.npy" --warmup 5 --iters 20 \
           -o json "$@" 2>"$T/err.txt")
  if [ -n "$line" ]; then
    echo "$line" | python3 -c "import json,sys; r=json.load(sys.stdin); r['label']='$label'; print(json.dumps(r))" \
      >> "$OUT/probe.jsonl"
    printf '%-44s %8.3f ms\n' "$label" "$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')"
  else
    echo "$label: error: $(tail -c 300 "$T/err.txt" | tr '\n' ' ')"
  fi
}

: > "$OUT/probe.jsonl"
if [[ " $BACKENDS " == *" cuda "* ]]; then
  echo "== cuda"
  bench "cuda f32 nchw" cuda --
  bench "cuda tf32 nchw" cuda -- --tf32
  bench "cuda tf32 channels_last" cuda -- --tf32 --channels-last
  bench "cuda bf16 nchw" cuda -- --precision bf16
  bench "cuda bf16 channels_last" cuda -- --precision bf16 --channels-last
  bench "cuda bf16 channels_last no-fusion" cuda RLX_NO_CONV_FUSION=1 -- --precision bf16 --channels-last
  bench "cuda bf16 channels_last heuristic" cuda RLX_CUDNN_HEURISTIC=1 -- --precision bf16 --channels-last
  bench "cuda tf32 channels_last heuristic" cuda RLX_CUDNN_HEURISTIC=1 -- --tf32 --channels-last
  for m in "tf32 --tf32" "bf16 --precision bf16"; do
    set -- $m
    name=$1
    shift
    echo "-- profile $name channels_last"
    RLX_CUDA_PROFILE=1 RLX_CUDA_GRAPHS=0 timeout 120 "$B/rlx" bench "$R/model.onnx" --device cuda "$@" \
      --channels-last --input "input=$R/input_b32.npy" --warmup 2 --iters 5 2>&1 |
      grep -E "profile|  rlx_|cuDNN|cublas" | head -20
  done
fi
if [ "${PEERS:-1}" = 1 ] && [[ " $BACKENDS " == *" cuda "* ]]; then
  echo "== PyTorch (same call)"
  timeout 200 python3 bench/peers_vision.py --batch 32 --json "$OUT/peers_vision.json" 2>&1 | grep "torch resnet50"
fi
# VULKAN_UNET=1: U-Net at B1 and B32 224 on Vulkan (its B32 arena passes the
# 4 GiB maxMemoryAllocationSize: the chunked arena).
if [ "${VULKAN_UNET:-0}" = 1 ]; then
  echo "== vulkan unet B1, B32"
  timeout 120 python3 scripts/gen_vision_models.py --out "$VM" --size full --batches 1,32 --models unet >/dev/null
  RLX_DISPATCH_REPORT=1 timeout 240 "$B/test_vision_models" vulkan --dir "$VM" --batches 1,32 --models unet 2>&1 |
    grep -E "B=|PASS|FAIL|arena" | head -12
fi
for d in vulkan webgpu; do
  [[ " $BACKENDS " == *" $d "* ]] || continue
  echo "== $d"
  bench "$d f32 nchw (native conv)" "$d" --
  if [ "$d" = vulkan ]; then bench "vulkan f32 nchw (decomposed conv)" vulkan RLX_VK_CONV=decompose --
  else bench "webgpu f32 nchw (decomposed conv)" webgpu RLX_WG_DECOMPOSE_CONV=1 --; fi
done
echo "== done"
