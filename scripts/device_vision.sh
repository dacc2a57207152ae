#!/usr/bin/env bash
# Real vision models on the GPU machine (issue 14, items 5 and 6), in one
# device call:
#   architectures checked against torchvision (parameter counts) ->
#   scripts/gen_vision_models.py at 224x224, batch 1 and 32 (that machine's
#   torch) -> tests/test_vision_models.c on cuda, vulkan and webgpu ->
#   ResNet-18/50 compiled in bf16 (--precision bf16) against PyTorch's f32
#   outputs -> tests/test_precision.c per backend -> ResNet-50 forward B32
#   224 through `rlx bench` on each backend (f32, TF32, bf16: the f32 model
#   compiled with --precision bf16) beside PyTorch (bench/peers_vision.py:
#   f32 with TF32 off, TF32, bf16 autocast, the model cast to bf16; NCHW and
#   channels_last) -> $OUT/vision_h200.md. rlx's channels_last column is the
#   same NCHW export compiled with --channels-last (the layout pass);
#   tests/test_layout.c and the models also run that way on CL_BACKENDS.
#
# The binaries are built HERE (nvcc, glslc) and travel in a carried folder
# with Debian's libvulkan and libprotobuf-c and the Dawn package, as for
# scripts/device_gpu_all.sh (whose scripts/device_env.sh sets them up there):
#
#   scripts/device_vision.sh pack        # here: build + fill $CARRY
#   device run, carry [$CARRY]:  scripts/device_vision.sh
#   then copy $OUT/vision_h200.md into bench/results/.
#
# $OUT: log.txt, tests.txt (every model/device line), bench_rlx.jsonl,
# peers_vision.json, vision_h200.md. Environment: CARRY (default
# build-vision-carry), BUILD (pack; default build-gpu), BACKENDS (default
# "cuda vulkan webgpu"), BATCHES (default 1,32), MODELS (default all),
# XFAIL (models expected to fail, default none: every failure is shown),
# BF16_MODELS (compiled in bf16 too; default resnet18,resnet50),
# SKIP_PEERS=1 (no PyTorch timing), TEST_TIMEOUT / BENCH_TIMEOUT (seconds per
# test / bench process: 500 / 200), BENCH_MODEL (the model `rlx bench`
# times, default resnet50: unet shows Vulkan's multi-allocation arena);
# CL_BACKENDS (backends that also run the models and test_layout with
# --channels-last, default "cuda"); pack: NO_CUDA=1 packs a build without
# CUDA (its cuda rows then SKIP).
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY="${CARRY:-build-vision-carry}"
BUILD="${BUILD:-build-gpu}"
BINS="rlx test_vision_models test_precision test_layout"

if [ "${1:-}" = pack ]; then
  set -e
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  flags="$BUILD/CMakeFiles/rlx_lib.dir/flags.make"
  wants="RLX_HAVE_ONNX RLX_HAVE_VULKAN RLX_HAVE_CUDA"
  # NO_CUDA=1: a build without nvcc's kernels (vulkan/webgpu only; quick)
  [ "${NO_CUDA:-0}" = 1 ] && wants="RLX_HAVE_ONNX RLX_HAVE_VULKAN"
  for want in $wants; do
    grep -q "$want" "$flags" || { echo "$want is not set in $BUILD: see cmake's output"; exit 1; }
  done
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j2 --target $BINS
  rm -rf "$CARRY" && mkdir -p "$CARRY/bin"
  for b in $BINS; do strip -o "$CARRY/bin/$b" "$BUILD/$b"; done
  tar -C "$CARRY" -cf - bin | xz -9 -T2 > "$CARRY/bin.tar.xz" && rm -rf "${CARRY:?}/bin"
  cp -L /usr/lib/x86_64-linux-gnu/libvulkan.so.1 "$CARRY/"
  cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 "$CARRY/"
  cp third_party/downloads/bun-webgpu-linux-x64-*.tgz "$CARRY/dawn.tgz"
  du -sh "$CARRY"/*
  exit 0
fi

OUT="${OUT:-bench/results/device-run-vision}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
stage() { echo; echo "== $* ($(date +%T))"; }
T=/tmp/rlxvision
B=$T/bin
VM=$T/models
BACKENDS="${BACKENDS:-cuda vulkan webgpu}"
BATCHES="${BATCHES:-1,32}"
BIG=${BATCHES##*,}
SIZE="${SIZE:-full}" # ci: 32x32 images (a quick check of this script)

stage "machine"
nvidia-smi -L || true
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))' || true

stage "unpack the carried build, loader, ICD json, Dawn"
[ -f "$CARRY/bin.tar.xz" ] || { echo "no $CARRY/bin.tar.xz: run 'scripts/device_vision.sh pack' here and carry $CARRY"; exit 1; }
# shellcheck source=scripts/device_env.sh
source scripts/device_env.sh

stage "architectures vs torchvision (parameter counts)"
python3 - <<'PY'
import sys
sys.path.insert(0, "scripts")
import torch
import gen_vision_models as g
try:
    import torchvision.models as tv
except ImportError:
    print("no torchvision: not checked")
    sys.exit(0)
ours = g.define_models(torch)
for name in ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large"]:
    a = sum(p.numel() for p in ours[name]("full").parameters())
    b = sum(p.numel() for p in getattr(tv, name)().parameters())
    print("%-20s ours %9d torchvision %9d %s" % (name, a, b, "same" if a == b else "DIFFERENT"))
PY

stage "generate ($SIZE size, batches $BATCHES)"
mkdir -p "$VM"
timeout 400 python3 scripts/gen_vision_models.py --out "$VM" --size "$SIZE" --batches "$BATCHES" \
  --models "${MODELS:-all}" || { echo "generator failed"; exit 1; }

stage "tests: import once, compile once, run at batches $BATCHES, compare with PyTorch"
: > "$OUT/tests.txt"
for d in $BACKENDS; do
  timeout "${TEST_TIMEOUT:-500}" $B/test_vision_models "$d" --dir "$VM" --batches "$BATCHES" \
    --models "${MODELS:-resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,mobilenet_v3_large,vit,unet,unet_convt}" \
    --expect-fail "${XFAIL:-}" > "$T/test_$d.txt" 2>&1
  echo "test_vision_models $d exit $?"
  grep -E "^(PASS|FAIL|XFAIL|XPASS|SKIP)|B=" "$T/test_$d.txt"
  { echo "=== $d"; cat "$T/test_$d.txt"; } >> "$OUT/tests.txt"
  # the f32 exports compiled in bf16, against PyTorch's f32 outputs (looser tolerance)
  timeout "${TEST_TIMEOUT:-500}" $B/test_vision_models "$d" --dir "$VM" --batches "$BATCHES" \
    --models "${BF16_MODELS:-resnet18,resnet50}" --precision bf16 > "$T/test_${d}_bf16.txt" 2>&1
  echo "test_vision_models $d --precision bf16 exit $?"
  grep -E "^(PASS|FAIL|XFAIL|XPASS|SKIP)|B=" "$T/test_${d}_bf16.txt"
  { echo "=== $d bf16"; cat "$T/test_${d}_bf16.txt"; } >> "$OUT/tests.txt"
done
for d in ${CL_BACKENDS-cuda}; do
  timeout "${TEST_TIMEOUT:-500}" $B/test_layout "$d" > "$T/layout_$d.txt" 2>&1
  echo "test_layout $d exit $?"
  timeout "${TEST_TIMEOUT:-500}" $B/test_vision_models "$d" --channels-last --dir "$VM" \
    --batches "$BATCHES" --models "${MODELS:-resnet18,resnet50,mobilenet_v2,mobilenet_v3_small,unet_convt}" \
    --expect-fail "${XFAIL:-}" > "$T/test_cl_$d.txt" 2>&1
  echo "test_vision_models $d --channels-last exit $?"
  grep -E "^(PASS|FAIL|XFAIL|XPASS|SKIP)|B=" "$T/layout_$d.txt" "$T/test_cl_$d.txt"
  { echo "=== $d test_layout"; cat "$T/layout_$d.txt";
    echo "=== $d channels-last"; cat "$T/test_cl_$d.txt"; } >> "$OUT/tests.txt"
done

stage "bf16 / f16 compilation of small f32 models (tests/test_precision.c)"
for d in $BACKENDS; do
  if [ -x "$B/test_precision" ]; then
    timeout "${TEST_TIMEOUT:-500}" $B/test_precision "$d" > "$T/precision_$d.txt" 2>&1
    echo "test_precision $d exit $?"
    grep -E "^(PASS|FAIL|SKIP)|rel L2|checks" "$T/precision_$d.txt"
    { echo "=== precision $d"; cat "$T/precision_$d.txt"; } >> "$OUT/tests.txt"
  fi
done

stage "${BENCH_MODEL:-resnet50} forward B$BIG ($SIZE size) through rlx bench"
: > "$OUT/bench_rlx.jsonl"
R50=$VM/${BENCH_MODEL:-resnet50}
# CUDA: f32 (exact), tf32 (--tf32), bf16 (--precision bf16) and
# tf32_nohoist (RLX_NO_HOIST=1: param-only work such as the layout pass's
# weight transposes runs in every forward again, to measure what hoisting
# saves), each NCHW and --channels-last. Vulkan / WebGPU: f32 and bf16,
# NCHW (their TF32 is f32; their channels-last conv is not native).
# MODES / LAYOUTS override both lists.
for d in $BACKENDS; do
  if [ "$d" = cuda ]; then modes="${MODES:-f32 tf32 bf16 tf32_nohoist}"; layouts="${LAYOUTS:-nchw channels_last}"
  else modes="${MODES:-f32 bf16}"; layouts="${LAYOUTS:-nchw}"; fi
  for m in $modes; do
    for lay in $layouts; do
      extra=""
      case "$m" in tf32*) extra="--tf32" ;; esac
      [ "$m" = bf16 ] && extra="--precision bf16"
      [ "$lay" = channels_last ] && extra="$extra --channels-last"
      hoist=""
      [ "${m#*_}" = nohoist ] && hoist="RLX_NO_HOIST=1"
      # shellcheck disable=SC2086
      line=$(env $hoist RLX_DISPATCH_REPORT=1 timeout "${BENCH_TIMEOUT:-200}" $B/rlx bench "$R50/model.onnx" \
               --device "$d" $extra --input "input=$R50/input_b$BIG.npy" --warmup 5 --iters 20 -o json \
               2>"$T/bench_err.txt")
      grep -E "launches per run|hoisted:" "$T/bench_err.txt" | head -2 | sed "s/^/  $d $m $lay: /"
      if [ -n "$line" ]; then
        echo "$line" | python3 -c "import json,sys; r=json.load(sys.stdin); r['backend']='$d'; r['mode']='$m'; r['layout']='$lay'; print(json.dumps(r))" \
          | tee -a "$OUT/bench_rlx.jsonl"
      else
        err=$(tail -c 300 "$T/bench_err.txt" | tr '\n"' '  ')
        echo "{\"backend\": \"$d\", \"mode\": \"$m\", \"layout\": \"$lay\", \"error\": \"$err\"}" | tee -a "$OUT/bench_rlx.jsonl"
      fi
    done
  done
done

# Where ResNet-50's time goes on CUDA in f32 and bf16 (kernel families per
# run): in bf16, the "cudnn" row against the unary kernels' launches says
# whether cuDNN took the fused bias+ReLU(+residual) call
# (cudnnConvolutionBiasActivationForward: no extra unary launches) or fell
# back to convolution + cudnnAddTensor + a ReLU kernel; the cast rows are
# the per-run input / param casts (until params are cast once per change).
if echo " $BACKENDS " | grep -q " cuda " && echo " $modes " | grep -q " bf16 "; then
  stage "CUDA kernel profile of ResNet-50 B$BIG, f32 and bf16"
  for m in f32 bf16; do
    extra=""
    [ "$m" = bf16 ] && extra="--precision bf16"
    # shellcheck disable=SC2086
    RLX_CUDA_PROFILE=1 RLX_CUDA_GRAPHS=0 timeout "${BENCH_TIMEOUT:-200}" $B/rlx bench "$R50/model.onnx" \
      --device cuda $extra --input "input=$R50/input_b$BIG.npy" --warmup 2 --iters 5 \
      > "$OUT/profile_cuda_$m.txt" 2>&1
    echo "--- $m"; grep -E "rlx cuda profile|cudnn|unary|cast|conv" "$OUT/profile_cuda_$m.txt" | head -20
  done
fi

if [ "${SKIP_PEERS:-0}" != 1 ]; then
  stage "PyTorch (same machine, same call)"
  timeout 300 python3 bench/peers_vision.py --batch "$BIG" --json "$OUT/peers_vision.json"
fi

stage "table"
python3 - "$OUT" "$BIG" "$SIZE" <<'PY'
import json, os, sys
out, big, size = sys.argv[1], sys.argv[2], sys.argv[3]
image = "224x224" if size == "full" else "32x32"
rlx = [json.loads(l) for l in open(os.path.join(out, "bench_rlx.jsonl")) if l.strip()]
try:
    peers = json.load(open(os.path.join(out, "peers_vision.json")))
except (OSError, ValueError):
    peers = {"rows": []}
torch_ms = {(r["mode"], r["layout"]): r["ms"] for r in peers["rows"]}
dev = peers.get("device", "GPU")
md = ["# ResNet-50 forward, B%s %s (%s, same call)" % (big, image, dev), "",
      "rlx: median wall time of a synchronising `rlx_exec_run` (`rlx bench`, 20 runs after 5), "
      "the model exported by scripts/gen_vision_models.py (NCHW; rlx channels_last: the same "
      "model compiled with --channels-last). PyTorch %s (%s): "
      "CUDA-event median of 30 runs, eager, cudnn.benchmark on. "
      "Generated by scripts/device_vision.sh." % (peers.get("torch", "?"), peers.get("model", "?")), "",
      "| backend / mode | NCHW ms | channels_last ms | PyTorch NCHW ms | PyTorch channels_last ms | PyTorch NCHW / rlx NCHW | PyTorch channels_last / rlx channels_last |",
      "|---|---|---|---|---|---|---|"]
def cell(r):
    if r is None:
        return "-", None
    ms = r.get("median_ms")
    return ("%.3f" % ms if ms else "error: " + r.get("error", "?")[:80]), ms
keys = []
for r in rlx:
    if (r["backend"], r["mode"]) not in keys:
        keys.append((r["backend"], r["mode"]))
for backend, mode in keys:
    by = {r.get("layout", "nchw"): r for r in rlx if r["backend"] == backend and r["mode"] == mode}
    (cn, msn), (cc, msc) = cell(by.get("nchw")), cell(by.get("channels_last"))
    tn, tc = torch_ms.get((mode, "nchw")), torch_ms.get((mode, "channels_last"))
    md.append("| rlx %s %s | %s | %s | %s | %s | %s | %s |" % (
        backend, mode, cn, cc, "%.3f" % tn if tn else "-", "%.3f" % tc if tc else "-",
        "%.2f" % (tn / msn) if tn and msn else "-", "%.2f" % (tc / msc) if tc and msc else "-"))
for mode in ("f32", "tf32", "bf16", "bf16_model"):
    tn, tc = torch_ms.get((mode, "nchw")), torch_ms.get((mode, "channels_last"))
    md.append("| PyTorch %s | %s | %s | | | | |" % (mode, "%.3f" % tn if tn else "-", "%.3f" % tc if tc else "-"))
open(os.path.join(out, "vision_h200.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
stage "done"
