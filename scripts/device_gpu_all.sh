#!/usr/bin/env bash
# Vulkan and WebGPU on the GPU machine beside the CUDA backend and PyTorch,
# in one device call (issues 5 and 6; PERF.md's op rows):
#   loader/ICD setup -> test_cuda, test_vulkan, test_webgpu ->
#   op parity vs the CPU reference for cuda, vulkan, webgpu (3 rounds) ->
#   op benchmarks (bench_gpu) for cuda, vulkan, webgpu -> PyTorch peers ->
#   bench/results/vulkan_h100.md and webgpu_h100.md (ratio tables).
#
# The GPU machine has no Vulkan loader and no glslc, so the binaries are built
# HERE (glslc embeds the SPIR-V; nvcc the CUDA fatbins) and travel in a carried
# folder together with Debian's libvulkan.so.1 and the Dawn package:
#
#   scripts/device_gpu_all.sh pack      # here: build + fill $CARRY (default build-gpu-carry)
#   device run, carry [$CARRY]:  scripts/device_gpu_all.sh
#   then copy $OUT/{vulkan,webgpu}_h100.md and the jsonl files into bench/results/.
#
# The loader/ICD/Dawn/cuBLASLt setup on the device is scripts/device_env.sh
# (shared with scripts/device_onnx.sh, the ONNX conformance run).
#
# $OUT gets at most 8 files (the device tool's limit): log.txt, parity.txt,
# bench_{cuda,vulkan,webgpu}.jsonl, peers_torch.json, vulkan_h100.md,
# webgpu_h100.md. SKIP_PEERS=1 leaves PyTorch out; PEERS_GPT2=1 keeps the
# GPT-2 part of peers_torch.py (not needed for these tables; it takes minutes).
# BACKENDS="vulkan webgpu" narrows tests, parity and benches to those
# backends; BENCH_ONLY=REGEX keeps the bench rows whose name matches;
# SKIP_PARITY=1 leaves the parity stage out (quick perf checks).
# RLX_BENCH_WARMUP_MS (default 500): every bench row, on every backend, keeps
# running for that long before timing; without it the NVIDIA Vulkan driver's
# first runs in a fresh process were bimodal (f32 GEMM 3.8 or 11.8 ms, add
# 0.32 or 0.68 ms) while clocks ramped up.
export RLX_BENCH_WARMUP_MS="${RLX_BENCH_WARMUP_MS:-500}"
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY="${CARRY:-build-gpu-carry}"
BUILD="${BUILD:-build-gpu}"
BINS="${BINS:-test_parity test_contract test_compile_cache test_oom test_vulkan test_webgpu test_cuda test_cuda_conv bench_gpu conv_cuda lab_gemv test_hoist test_train_ops test_train test_train_fixtures}" # BINS=... packs fewer (quick checks)

if [ "${1:-}" = pack ]; then
  set -e
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  grep -q RLX_HAVE_VULKAN "$BUILD/CMakeFiles/rlx_lib.dir/flags.make" || { echo "no glslc: Vulkan not built"; exit 1; }
  grep -q RLX_HAVE_CUDA "$BUILD/CMakeFiles/rlx_lib.dir/flags.make" || { echo "no nvcc: CUDA not built"; exit 1; }
  # shellcheck disable=SC2086
  cmake --build "$BUILD" -j2 --target $BINS rlx_shared
  rm -rf "$CARRY" && mkdir -p "$CARRY/bin"
  for b in $BINS; do strip -o "$CARRY/bin/$b" "$BUILD/$b"; done
  # librlx.so (CUDA built in) for the Python package's tests there
  strip -o "$CARRY/bin/librlx.so" "$BUILD/librlx.so"
  # Every binary embeds the same kernel fatbins (~25 MB each): xz -9's 64 MiB
  # window stores them once (~7 MB instead of ~65 MB at the default level).
  tar -C "$CARRY" -cf - bin | xz -9 -T2 > "$CARRY/bin.tar.xz" && rm -rf "${CARRY:?}/bin"
  cp -L /usr/lib/x86_64-linux-gnu/libvulkan.so.1 "$CARRY/"
  cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 "$CARRY/" # librlx.so needs it; the GPU machine lacks it
  cp third_party/downloads/bun-webgpu-linux-x64-*.tgz "$CARRY/dawn.tgz"
  du -sh "$CARRY"/*
  exit 0
fi

OUT="${OUT:-bench/results/device-run-gpu}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
stage() { echo; echo "== $* ($(date +%T))"; }
T=/tmp/rlxgpu
B=$T/bin

stage "machine"
nvidia-smi -L || true
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv || true

stage "unpack the carried build, loader, ICD json, Dawn"
[ -f "$CARRY/bin.tar.xz" ] || { echo "no $CARRY/bin.tar.xz: run 'scripts/device_gpu_all.sh pack' here and carry $CARRY"; exit 1; }
# shellcheck source=scripts/device_env.sh
source scripts/device_env.sh

stage "backend tests"
BACKENDS="${BACKENDS:-cuda vulkan webgpu}"
for t in $(for d in $BACKENDS; do echo test_$d; done); do
  timeout 150 $B/$t > $T/$t.txt 2>&1
  echo "$t exit $?: $(tail -1 $T/$t.txt)"
  grep -E "FAIL|SKIP" $T/$t.txt | head -10
done
# run_per_device BIN LABEL TAG: $B/BIN once per backend, its last line and
# any FAIL / SKIP lines shown, the whole output in $T/TAG_<device>.txt.
run_per_device() {
  local bin=$1 label=$2 tag=$3 d
  for d in $BACKENDS; do
    [ -x "$B/$bin" ] || return 0
    timeout 150 "$B/$bin" "$d" > "$T/${tag}_$d.txt" 2>&1
    echo "$label $d exit $?: $(tail -1 "$T/${tag}_$d.txt")"
    grep -E "FAIL|SKIP" "$T/${tag}_$d.txt" | head -10
  done
}
# The backend contract (tests/test_contract.c); clones sharing compiled code
# and the compile cache (tests/test_compile_cache.c); param-only work hoisted
# out of the run (tests/test_hoist.c: same outputs as RLX_NO_HOIST=1, fewer
# launches, params re-set, clones, cache).
run_per_device test_contract test_contract contract
run_per_device test_compile_cache test_compile_cache cache
run_per_device test_hoist test_hoist hoist
# Training ops: hand-computed cross-entropy / gather backward values, bad
# targets and indices failing with OUT_OF_RANGE, repeated runs bit-identical.
run_per_device test_train_ops test_train_ops train_ops
# The llm.c-style training fixtures (tests/test_train_fixtures.c against
# PyTorch's tests/fixtures/train: forward, every gradient, three optimizer
# steps of a GPT, an MLP and a CNN); each line's numbers are in the file.
run_per_device test_train_fixtures test_train_fixtures train_fixtures
# The Python package (python/tests, pytest) over the carried librlx.so, on
# every device (cuda included), when the machine's python has pytest + numpy.
if [ -f "$B/librlx.so" ]; then
  if python3 -c "import pytest, numpy" 2>/dev/null; then
    RLX_LIBRARY=$B/librlx.so PYTHONPATH=$PWD/python \
      timeout 300 python3 -m pytest -q \
      -p no:cacheprovider python/tests > $T/python.txt 2>&1
    echo "python tests exit $?: $(tail -1 $T/python.txt)"
    grep -E "FAILED|Error" $T/python.txt | head -10
  else
    echo "python tests: SKIP (no pytest/numpy in $(command -v python3))"
  fi
fi
# Device out of memory (tests/test_oom.c): a graph larger than the GPU, then
# the GPU filled with 4 GiB executables: RESOURCE_EXHAUSTED each time, and
# the device still runs a fresh executable afterwards.
for d in $BACKENDS; do
  [ -x $B/test_oom ] || break
  timeout 240 $B/test_oom $d > $T/oom_$d.txt 2>&1
  echo "test_oom $d exit $?:"; cat $T/oom_$d.txt | tail -8
done
# CUDA convolutions on cuDNN (tests/test_cuda_conv.c: cuDNN used, and the
# decomposition with RLX_CUDNN_LIB=/nonexistent gives the same numbers).
if [ -x $B/test_cuda_conv ] && [[ " $BACKENDS " == *" cuda "* ]]; then
  timeout 300 $B/test_cuda_conv > $T/cuda_conv.txt 2>&1
  echo "test_cuda_conv exit $?:"; tail -14 $T/cuda_conv.txt
fi
# conv2d 3x3 B32 C256 56x56 (bench/conv_cuda.c) beside PyTorch (bench/conv_torch.py).
if [ -x $B/conv_cuda ] && [ "${SKIP_CONV:-0}" != 1 ]; then
  for d in $BACKENDS; do timeout 300 $B/conv_cuda $d; done > $T/conv.jsonl 2>&1
  # WebGPU runs conv.wgsl natively; the decomposition it replaced, for the A/B
  if [[ " $BACKENDS " == *" webgpu "* ]]; then
    RLX_WG_DECOMPOSE_CONV=1 timeout 300 $B/conv_cuda webgpu 2>&1 |
      sed 's/"device": "webgpu"/"device": "webgpu-decomposed"/' >> $T/conv.jsonl
  fi
  cat $T/conv.jsonl
  # Vulkan's native conv kernels against the decomposition they replaced
  # (Pad + Im2Col + MatMul), same cases.
  if [[ " $BACKENDS " == *" vulkan "* ]]; then
    echo "vulkan conv with RLX_VK_CONV=decompose (before the native kernels):"
    RLX_VK_CONV=decompose timeout 300 $B/conv_cuda vulkan 2>&1 | grep '^{'
    echo "vulkan f16 conv with RLX_VK_CONV=scalar (conv.comp, no cooperative matrices):"
    RLX_VK_CONV=scalar timeout 300 $B/conv_cuda vulkan f16 2>&1 | grep '^{'
  fi
  python3 bench/conv_torch.py --rlx $T/conv.jsonl 2>&1 | tail -20 || true
fi
# The kernel lab's GEMV family (bench/kernels/gemv.cu): every variant checked
# against the CPU, then timed.
if [ -x $B/lab_gemv ]; then
  timeout 120 $B/lab_gemv > $T/lab_gemv.txt 2>&1
  echo "lab_gemv exit $?"; cat $T/lab_gemv.txt | tail -12
fi

stage "op parity vs the CPU reference (3 rounds each)"
: > "$OUT/parity.txt"
[ "${SKIP_PARITY:-0}" = 1 ] && BACKENDS_PARITY="" || BACKENDS_PARITY="$BACKENDS"
for d in $BACKENDS_PARITY; do
  RLX_PARITY_ROUNDS=${RLX_PARITY_ROUNDS:-3} timeout 200 $B/test_parity $d > $T/parity_$d.txt 2>&1
  echo "parity $d exit $?: $(grep -E "PASS|passed" $T/parity_$d.txt | tail -1)"
  grep -E "^FAIL" $T/parity_$d.txt | head -20
  { echo "=== $d"; cat $T/parity_$d.txt; } >> "$OUT/parity.txt"
done

# HOST_OPS=a,b: parity once more with those ops forced onto each backend's
# host fallback (download, CPU reference, upload). ONLY_TESTS=1 stops here.
if [ -n "${HOST_OPS:-}" ]; then
  stage "op parity with $HOST_OPS on the host fallback"
  RLX_CUDA_HOST_OPS=$HOST_OPS timeout 200 $B/test_parity cuda 2>&1 | grep -E "^FAIL|PASS|passed" | tail -5
  RLX_VK_HOST_OPS=$HOST_OPS timeout 200 $B/test_parity vulkan 2>&1 | grep -E "^FAIL|PASS|passed" | tail -5
fi
if [ "${ONLY_TESTS:-0}" = 1 ]; then stage "done (tests only)"; exit 0; fi

stage "op benchmarks (bench_gpu; CUDA events for cuda, synchronising wall time otherwise)"
# One process per workload: on the H100 (2026-11-22) Vulkan's add f32 64M ran
# 0.79 ms in a fresh process but 3.8 ms after the GEMM/attention rows in the
# same process (WebGPU likewise), so rows are no longer run back to back.
WORKLOADS=("gemm f32 4096x4096x4096" "gemm f32-tf32 4096x4096x4096" "gemm f32 own-kernel 4096x4096x4096"
  "gemm bf16 4096x4096x4096" "gemm f16 4096x4096x4096" "gemm bf16 8192x8192x8192" "gemv f32 1x4096x4096" "add f32 64M" "add f32 4K (run overhead)"
  "softmax f32 16384x4096" "layernorm f32 16384x4096" "rmsnorm f32 16384x4096"
  "sdpa causal f32 B8 H16 S1024 D64" "sdpa causal bf16 B8 H16 S1024 D64" "sdpa causal f32 B4 H32 S4096 D128")
for d in $BACKENDS; do
  : > "$OUT/bench_$d.jsonl"
  for w in "${WORKLOADS[@]}"; do
    [ -n "${BENCH_ONLY:-}" ] && ! [[ "$w" =~ $BENCH_ONLY ]] && continue
    case "$d:$w" in vulkan:*tf32*|vulkan:*own-kernel*|webgpu:*tf32*|webgpu:*own-kernel*) continue ;; esac
    timeout 60 $B/bench_gpu $d "$w" | tee -a "$OUT/bench_$d.jsonl"
    # A/B: a bench_gpu built from an earlier commit, carried as
    # $CARRY/bench_gpu_before, runs the same row right after (log only);
    # BEFORE_ENV holds the variables that build reads under older names.
    if [ -x "$CARRY/bench_gpu_before" ]; then
      # shellcheck disable=SC2086
      env ${BEFORE_ENV:-} timeout 60 "$CARRY/bench_gpu_before" $d "$w" | sed 's/^/BEFORE /'
    fi
  done
done

if [ "${SKIP_PEERS:-0}" != 1 ]; then
  stage "PyTorch peers (same machine, same call)"
  if [ "${PEERS_GPT2:-0}" != 1 ]; then
    # peers_torch.py's GPT-2 part is not in these tables: a stub transformers
    # module makes it skip ("gpt2 section failed") instead of taking minutes.
    mkdir -p $T/py && echo 'raise ImportError("GPT-2 peers skipped by device_gpu_all.sh")' > $T/py/transformers.py
    export PYTHONPATH="$T/py:${PYTHONPATH:-}"
  fi
  PYTHONUNBUFFERED=1 OUT="$OUT" timeout 240 python3 bench/peers_torch.py
fi

stage "ratio tables"
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def rows(p):
    try:
        return {r["name"]: r for r in (json.loads(l) for l in open(os.path.join(out, p)) if l.strip().startswith("{"))}
    except OSError:
        return {}
cu, vk, wg = rows("bench_cuda.jsonl"), rows("bench_vulkan.jsonl"), rows("bench_webgpu.jsonl")
try:
    pj = json.load(open(os.path.join(out, "peers_torch.json")))
    peers = {r["name"]: r for r in pj["rows"]}
except (OSError, ValueError, KeyError):
    pj, peers = {}, {}
dev = pj.get("device", "NVIDIA H100")

def wall(r):   # ms of one synchronising rlx_exec_run (the same clock for every backend)
    return r["ms"] if r and "error" not in r else None
def event(r):  # CUDA-event device time where the backend reports it
    return r.get("device_ms") if r and "error" not in r and r.get("device_ms", -1) > 0 else None
def rate(r):
    if not r or "error" in r: return "error: " + r["error"][:50] if r else "not run"
    return f"{r['tflops']:.1f} TFLOP/s" if "tflops" in r else f"{r['gbps']:.0f} GB/s"
def f(x): return "-" if x is None else f"{x:.4f}"
def ratio(peer_ms, ms): return "-" if not peer_ms or not ms else f"{peer_ms / ms:.2f}"

# (bench row, peer row, target as (kind, min throughput ratio))
VK = [
    ("add f32 64M", "add f32 64M (read 2, write 1)", ("cuda", 0.8)),
    ("add f32 4K (run overhead)", None, None),
    ("softmax f32 16384x4096", "softmax f32 16384x4096", ("cuda", 0.8)),
    ("layernorm f32 16384x4096", "layernorm f32 16384x4096", ("cuda", 0.8)),
    ("rmsnorm f32 16384x4096", "rmsnorm f32 16384x4096", ("cuda", 0.8)),
    ("gemm f32 4096x4096x4096", "gemm float32 4096x4096x4096", ("torch", 0.6)),
    ("gemm bf16 4096x4096x4096", "gemm bfloat16 4096x4096x4096", None),
    ("gemm bf16 8192x8192x8192", "gemm bfloat16 8192x8192x8192", None),
    ("gemv f32 1x4096x4096", "gemm float32 1x4096x4096", None),
    ("sdpa causal f32 B8 H16 S1024 D64", "sdpa causal float32 B8 H16 S1024 D64", None),
    ("sdpa causal bf16 B8 H16 S1024 D64", "sdpa causal bfloat16 B8 H16 S1024 D64", None),
    ("sdpa causal f32 B4 H32 S4096 D128", "sdpa causal float32 B4 H32 S4096 D128", None),
]

def verdict(target, vs_cuda, vs_torch):
    if not target: return "-"
    kind, need = target
    got = vs_cuda if kind == "cuda" else vs_torch
    if got == "-": return f">= {need}x {'rlx CUDA' if kind == 'cuda' else 'cuBLAS'}: n/a"
    return f">= {need}x {'rlx CUDA' if kind == 'cuda' else 'cuBLAS'}: {'met' if float(got) >= need else 'MISSED'}"

md = [f"# Vulkan backend vs the CUDA backend and PyTorch ({dev}, same call)", "",
      "rlx times: median wall time of a synchronising `rlx_exec_run` (30 runs after 5 warm-up runs and RLX_BENCH_WARMUP_MS of warm-up; "
      "output readback not included) for both rlx backends, so the Vulkan/CUDA ratio compares the same clock; "
      "the CUDA-event device time is shown beside it. PyTorch: CUDA-event median of 30 (peers_torch.py). "
      "Ratios are throughput ratios (peer ms / Vulkan ms; higher is better, 1.0 = parity). "
      "Generated by scripts/device_gpu_all.sh.", "",
      "| workload | Vulkan ms | Vulkan rate | rlx CUDA ms (events) | Vulkan / rlx CUDA | PyTorch ms | Vulkan / PyTorch | target | check rel L2 |",
      "|---|---|---|---|---|---|---|---|---|"]
for name, peer, target in VK:
    v, c, p = vk.get(name), cu.get(name), peers.get(peer)
    vc, vt = ratio(wall(c), wall(v)), ratio(p["ms"] if p else None, wall(v))
    md.append(f"| {name} | {f(wall(v))} | {rate(v)} | {f(wall(c))} ({f(event(c))}) | {vc} | "
              f"{f(p['ms']) if p else '-'} | {vt} | {verdict(target, vc, vt)} | {v.get('check_rel_l2', '-') if v else '-'} |")
p16, v16, c16 = peers.get("gemm float16 4096x4096x4096"), vk.get("gemm f16 4096x4096x4096"), cu.get("gemm f16 4096x4096x4096")
r16 = ratio(p16["ms"] if p16 else None, wall(v16))
md.append(f"| gemm f16 4096x4096x4096 (cooperative matrix) | {f(wall(v16))} | {rate(v16)} | {f(wall(c16))} ({f(event(c16))}) | "
          f"{ratio(wall(c16), wall(v16))} | {f(p16['ms']) if p16 else '-'} | {r16} | {verdict(('torch', 0.5), '-', r16)} | "
          f"{v16.get('check_rel_l2', '-') if v16 else '-'} |")
open(os.path.join(out, "vulkan_h100.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))

WG = [r[:2] for r in VK]
md = [f"# WebGPU backend (Dawn on the NVIDIA Vulkan driver) vs Vulkan and CUDA ({dev}, same call)", "",
      "Median wall time of a synchronising `rlx_exec_run` (30 runs after 5 warm-up runs and RLX_BENCH_WARMUP_MS of warm-up) for every rlx backend. "
      "Ratios are throughput ratios (other ms / WebGPU ms; higher is better). Target: >= 0.7x rlx Vulkan. "
      "Generated by scripts/device_gpu_all.sh.", "",
      "| workload | WebGPU ms | WebGPU rate | Vulkan ms | WebGPU / Vulkan | rlx CUDA ms | WebGPU / rlx CUDA | PyTorch ms | target >= 0.7x Vulkan | check rel L2 |",
      "|---|---|---|---|---|---|---|---|---|---|"]
for name, peer in WG:
    w, v, c, p = wg.get(name), vk.get(name), cu.get(name), peers.get(peer)
    wv = ratio(wall(v), wall(w))
    ok = "-" if wv == "-" else ("met" if float(wv) >= 0.7 else "MISSED")
    md.append(f"| {name} | {f(wall(w))} | {rate(w)} | {f(wall(v))} | {wv} | {f(wall(c))} | {ratio(wall(c), wall(w))} | "
              f"{f(p['ms']) if p else '-'} | {ok} | {w.get('check_rel_l2', '-') if w else '-'} |")
open(os.path.join(out, "webgpu_h100.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
PY
stage "done"
