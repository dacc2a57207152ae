#!/usr/bin/env bash
# The CUDA backend's proof on the GPU machine, in one call (see PERF.md):
#   build (nvcc kernels for sm_80/sm_90 + PTX) -> rlx devices -> test_cuda ->
#   f16/bf16 tensor-core attention vs the CPU reference -> op parity CUDA vs the CPU reference -> compute-sanitizer memcheck on the
#   parity suite -> op benchmarks and GPT-2 124M (forward B4 T1024, decode
#   step with KV cache) -> PyTorch peers in the same call -> ratios table.
# Outputs go to $OUT (or bench/results/device-run when $OUT is unset):
#   log.txt, parity.txt, sanitizer.txt, bench_gpu.jsonl, lab_gemv.txt, gpt2.jsonl,
#   peers_torch.json, cuda_h100.md (copy the last into bench/results/).
#   SKIP_PEERS=1 / SKIP_SANITIZER=1 leave those stages out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-bench/results/device-run}"
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
jobs=$(nproc)
stage() { echo; echo "== $* ($(date +%T))"; }

stage "machine"
nvidia-smi -L || true
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv || true
export PATH=/usr/local/cuda/bin:$PATH
nvcc --version | tail -2
# cuBLASLt: the toolkit's, else the one PyTorch ships.
for d in /usr/local/cuda/lib64 $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"
done

stage "build"
cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DRLX_WERROR=OFF >/dev/null || exit 1
cmake --build build-cuda -j"$jobs" --target rlx test_cuda test_contract test_parity test_exec bench_gpu gpt2 lab_gemv 2>&1 | grep -E "error|warning|nvcc" || true
[ -x build-cuda/test_parity ] || { echo "build failed"; exit 1; }
build-cuda/rlx devices

stage "test_cuda"
timeout 180 build-cuda/test_cuda

stage "backend contract on cuda (tests/test_contract.c)"
timeout 180 build-cuda/test_contract cuda

stage "test_exec on the default device (cpu) still passes"
timeout 120 build-cuda/test_exec | tail -2

stage "tensor-core attention (f16/bf16, attention_mma.cu) vs the CPU reference"
cat > "$OUT/attn_mma_check.c" <<'CSRC'
/* Tensor-core attention check (scripts/device_cuda.sh): f16/bf16 attention
 * on cuda vs the CPU reference for the shapes the mma kernel takes (D 64 and
 * 128, GQA, causal / sliding / custom / bias / none, softcap, scale, Sq != Sk,
 * both layouts). Inputs are f32, cast to the half type inside the graph. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "rlx.h"

static uint64_t rs = 88172645463325252ull;
static float urand(void) {
  rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
  return (float)((double)(rs >> 11) / 9007199254740992.0 * 4.0 - 2.0);
}

typedef struct acase {
  const char* what;
  rlx_dtype t;
  int64_t B, H, Hkv, Sq, Sk, D;
  rlx_layout layout;
  rlx_mask_kind mask;
  int32_t window;
  float scale, softcap;
} acase;

static double run_case(const acase* c) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim qs[4] = {c->B, c->Sq, c->H, c->D}, ks[4] = {c->B, c->Sk, c->Hkv, c->D}, ms[4] = {c->B, 1, c->Sq, c->Sk};
  if (c->layout == RLX_LAYOUT_BHSD) { qs[1] = c->H; qs[2] = c->Sq; ks[1] = c->Hkv; ks[2] = c->Sk; }
  rlx_tensor in[4], h[3], y, yf, mask = RLX_NONE;
  const char* names[4] = {"q", "k", "v", "m"};
  rlx_graph_add_input(g, "q", RLX_F32, qs, 4, &in[0]);
  rlx_graph_add_input(g, "k", RLX_F32, ks, 4, &in[1]);
  rlx_graph_add_input(g, "v", RLX_F32, ks, 4, &in[2]);
  int n_in = 3;
  if (c->mask == RLX_MASK_CUSTOM || c->mask == RLX_MASK_BIAS) {
    rlx_graph_add_input(g, "m", RLX_F32, ms, 4, &in[3]);
    mask = in[3];
    n_in = 4;
  }
  for (int i = 0; i < 3; i++) rlx_graph_add_cast(g, in[i], c->t, &h[i]);
  rlx_attention_desc d = {(int32_t)c->H, (int32_t)c->Hkv, (int32_t)c->D, c->layout, c->mask, c->window, c->scale, c->softcap};
  if (rlx_graph_add_attention(g, h[0], h[1], h[2], mask, &d, &y) != RLX_OK) {
    printf("%s: build: %s\n", c->what, rlx_graph_last_error(g));
    return INFINITY;
  }
  rlx_graph_add_cast(g, y, RLX_F32, &yf);
  rlx_graph_set_outputs(g, &yf, 1);
  rlx_exec *e[2] = {NULL, NULL};
  const char* dev[2] = {"cuda", "cpu"};
  for (int i = 0; i < 2; i++)
    if (rlx_compile(g, dev[i], NULL, &e[i]) != RLX_OK) {
      printf("%s: compile %s: %s\n", c->what, dev[i], rlx_graph_last_error(g));
      return INFINITY;
    }
  int64_t n_out = c->B * c->H * c->Sq * c->D;
  double* out[2];
  for (int i = 0; i < 2; i++) {
    rs = 88172645463325252ull;
    for (int k = 0; k < n_in; k++) {
      rlx_dim* s = k == 0 ? qs : k < 3 ? ks : ms;
      int64_t n = s[0] * s[1] * s[2] * s[3];
      float* x = malloc(sizeof(float) * (size_t)n);
      for (int64_t j = 0; j < n; j++) {
        x[j] = urand();
        if (k == 3 && c->mask == RLX_MASK_CUSTOM) x[j] = x[j] > -1.5f ? 1.0f : 0.0f;
      }
      rlx_exec_set_input(e[i], names[k], RLX_F32, s, 4, x, sizeof(float) * (size_t)n);
      free(x);
    }
    out[i] = malloc(sizeof(double) * (size_t)n_out);
    if (rlx_exec_run(e[i]) != RLX_OK ||
        rlx_exec_read_output(e[i], 0, RLX_F64, out[i], sizeof(double) * (size_t)n_out) != RLX_OK) {
      printf("%s: run %s: %s\n", c->what, dev[i], rlx_exec_last_error(e[i]));
      return INFINITY;
    }
  }
  double num = 0, den = 0;
  for (int64_t j = 0; j < n_out; j++) {
    double dlt = out[0][j] - out[1][j];
    num += dlt * dlt;
    den += out[1][j] * out[1][j];
  }
  for (int i = 0; i < 2; i++) { free(out[i]); rlx_exec_destroy(e[i]); }
  rlx_graph_destroy(g);
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

int main(void) {
  const acase cases[] = {
      {"bf16 causal BHSD d64", RLX_BF16, 2, 4, 4, 200, 200, 64, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"f16 causal BHSD d64 S1024", RLX_F16, 1, 4, 4, 1024, 1024, 64, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0},
      {"bf16 sliding gqa softcap BSHD d128 Sq<Sk", RLX_BF16, 1, 8, 2, 130, 203, 128, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING, 77, 0, 30.0f},
      {"f16 none scale BSHD d64 Sq 33 Sk 300", RLX_F16, 2, 3, 1, 33, 300, 64, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0.3f, 0},
      {"bf16 bias BHSD d128", RLX_BF16, 2, 2, 2, 70, 90, 128, RLX_LAYOUT_BHSD, RLX_MASK_BIAS, 0, 0, 0},
      {"bf16 custom BSHD d64 gqa", RLX_BF16, 1, 6, 3, 96, 160, 64, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 0},
      {"f16 causal BSHD d128 Sq 300 Sk 345", RLX_F16, 1, 2, 1, 300, 345, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0},
  };
  int fails = 0, n = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < n; i++) {
    double err = run_case(&cases[i]);
    int ok = err <= 2e-2;
    fails += !ok;
    printf("%s attn-mma %s: rel L2 %.3g\n", ok ? "PASS" : "FAIL", cases[i].what, err);
  }
  printf("attn-mma check: %d/%d passed\n", n - fails, n);
  return fails != 0;
}
CSRC
libs="-lpthread -lm -ldl"
cc -O2 -Iinclude "$OUT/attn_mma_check.c" build-cuda/librlx.a $libs -o build-cuda/attn_mma_check 2>/dev/null ||
  cc -O2 -Iinclude "$OUT/attn_mma_check.c" build-cuda/librlx.a $libs -lprotobuf-c -o build-cuda/attn_mma_check
timeout 120 build-cuda/attn_mma_check
echo "attn_mma_check exit $?"

stage "op parity: cuda vs the CPU reference"
RLX_PARITY_ROUNDS=${RLX_PARITY_ROUNDS:-3} timeout 240 build-cuda/test_parity cuda > "$OUT/parity.txt" 2>&1
echo "parity exit $?"
grep -E "^FAIL" "$OUT/parity.txt" | head -40
tail -3 "$OUT/parity.txt"

stage "op benchmarks (rlx, CUDA events)"
timeout 240 build-cuda/bench_gpu cuda | tee "$OUT/bench_gpu.jsonl"

stage "kernel lab: GEMV variants (bench/kernels/gemv.cu)"
timeout 120 build-cuda/lab_gemv | tee "$OUT/lab_gemv.txt"

stage "GPT-2 124M (rlx)"
timeout 240 build-cuda/gpt2 cuda | tee "$OUT/gpt2.jsonl"

if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  stage "compute-sanitizer memcheck on the parity suite (1 round)"
  RLX_PARITY_ROUNDS=1 timeout 300 compute-sanitizer --tool memcheck --leak-check no --print-limit 200 --error-exitcode 9 \
    build-cuda/test_parity cuda > "$OUT/sanitizer.txt" 2>&1
  echo "sanitizer exit $? (0 = clean, 9 = errors found, 124 = timed out)"
  grep -E "ERROR SUMMARY|Invalid|Program hit|^FAIL|PASS cuda" "$OUT/sanitizer.txt" | sort | uniq -c | head -20
fi

if [ "${SKIP_PEERS:-0}" != 1 ]; then
  stage "PyTorch peers (same machine, same call)"
  PYTHONUNBUFFERED=1 OUT="$OUT" timeout 400 python3 bench/peers_torch.py
fi

stage "ratios table"
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
def lines(p):
    try:
        return [json.loads(l) for l in open(p) if l.strip().startswith("{")]
    except OSError:
        return []
ours = {r["name"]: r for r in lines(os.path.join(out, "bench_gpu.jsonl")) + lines(os.path.join(out, "gpt2.jsonl"))}
try:
    peers = {r["name"]: r for r in json.load(open(os.path.join(out, "peers_torch.json")))["rows"]}
    meta = json.load(open(os.path.join(out, "peers_torch.json")))
except (OSError, ValueError, KeyError):
    peers, meta = {}, {}
# our name -> (peer name, target description, target as max ratio rlx/peer or None)
rows = [
    ("gemm f32 4096x4096x4096", "gemm float32 4096x4096x4096", "<= 1.05x"),
    ("gemm f32-tf32 4096x4096x4096", "gemm float32-tf32 4096x4096x4096", "<= 1.05x"),
    ("gemm f32 own-kernel 4096x4096x4096", "gemm float32 4096x4096x4096", "own kernel >= 70% of peer (<= 1.43x)"),
    ("gemm bf16 4096x4096x4096", "gemm bfloat16 4096x4096x4096", "<= 1.05x"),
    ("gemm bf16 8192x8192x8192", "gemm bfloat16 8192x8192x8192", "<= 1.05x"),
    ("gemv f32 1x4096x4096", "gemm float32 1x4096x4096", "<= 25 us"),
    ("add f32 64M", "add f32 64M (read 2, write 1)", ">= 0.97x throughput (<= 1.03x)"),
    ("softmax f32 16384x4096", "softmax f32 16384x4096", ">= 2600 GB/s"),
    ("layernorm f32 16384x4096", "layernorm f32 16384x4096", ">= 2500 GB/s"),
    ("rmsnorm f32 16384x4096", "rmsnorm f32 16384x4096", ">= 2500 GB/s"),
    ("sdpa causal f32 B8 H16 S1024 D64", "sdpa causal float32 B8 H16 S1024 D64", "<= 0.60 ms"),
    ("sdpa causal bf16 B8 H16 S1024 D64", "sdpa causal bfloat16 B8 H16 S1024 D64", "<= 0.11 ms"),
    ("sdpa causal f32 B4 H32 S4096 D128", "sdpa causal float32 B4 H32 S4096 D128", "<= 11 ms"),
    ("gpt2-124M forward f32 B4 T1024", "gpt2-124M forward float32 B4 T1024", "<= 25 ms"),
    ("gpt2-124M decode-step f32 B1 ctx~520", "gpt2-124M decode-step float32 B1 ctx~520", ">= 3000 tok/s (<= 0.333 ms)"),
]
md = ["# CUDA backend vs PyTorch, same machine, same call", "",
      f"Device: {meta.get('device', '?')}; PyTorch {meta.get('torch', '?')}. rlx times are CUDA-event "
      "device time of one rlx_exec_run (median of 30, 10 for the GPT-2 forward, 20 for decode); "
      "the wall time of the synchronising call is in the JSON (`ms`). Ratio = rlx / PyTorch "
      "(lower is better). Generated by scripts/device_cuda.sh.", "",
      "| workload | rlx ms | rate | PyTorch ms | ratio | target | check rel L2 |",
      "|---|---|---|---|---|---|---|"]
for ours_name, peer_name, target in rows:
    r, p = ours.get(ours_name), peers.get(peer_name)
    if not r or "error" in r:
        md.append(f"| {ours_name} | {'error: ' + r['error'][:60] if r else 'not run'} | | | | {target} | |")
        continue
    ms = r.get("device_ms", -1)
    ms = ms if ms and ms > 0 else r["ms"]
    rate = (f"{r['tflops']:.1f} TFLOP/s" if "tflops" in r else f"{r['gbps']:.0f} GB/s" if "gbps" in r
            else f"{r.get('tokens_per_s', 0):.0f} tok/s")
    pms = p["ms"] if p else None
    ratio = f"{ms / pms:.2f}" if pms else "-"
    md.append(f"| {ours_name} | {ms:.4f} | {rate} | {pms if pms is None else round(pms, 4)} | {ratio} | "
              f"{target} | {r.get('check_rel_l2', '-')} |")
text = "\n".join(md) + "\n"
open(os.path.join(out, "cuda_h100.md"), "w").write(text)
print(text)
PY
stage "done"
