/* GPU op benchmarks through the rlx API (PERF.md's op rows), one JSON line
 * per measurement: GEMM f32 / tf32 / bf16 (and the own fallback kernel),
 * GEMV, add, softmax, layernorm, rmsnorm, causal attention f32 and bf16
 * (forward, backward, forward + backward: `bench_gpu cuda sdpa`).
 *
 * Each workload is one small graph compiled for the device; inputs are set
 * once with random data (never zeros, larger than L2 where the workload is),
 * then rlx_exec_run is timed (it synchronises): 5 warm-up runs, median and
 * p10/p90 of 30. With RLX_CUDA_TIMING=1 the CUDA backend also reports each
 * run's device time from CUDA events ("device_ms"), the number comparable to
 * PyTorch's event timings; "ms" is the wall time of rlx_exec_run. Each
 * workload's result is checked against the CPU backend on a smaller shape
 * of the same graph in the same run ("check_rel_l2"). Nothing asserts a time.
 *
 *   bench_gpu [device] [filter]     device default cuda; filter: substring */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

#define WARMUP 5
#define ITERS 30

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + 1e-6 * (double)t.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rand_float(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  double u = (double)(rng >> 11) * (1.0 / 9007199254740992.0);
  return (float)(u * 2.0 - 1.0) + 1e-3f;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* A workload: builds its graph at a scale (1 = the benchmark size, 0 = a
 * small shape for the correctness check). */
typedef struct workload {
  const char* name;
  void (*build)(rlx_graph* g, int full);
  double (*work)(void); /* FLOPs or bytes of the full size */
  const char* unit;     /* "flops" or "bytes" */
  int tf32, no_lt;
} workload;

/* ------------------------------------------------------------ graphs */

/* The inputs of the graph built last (build functions go through in()). */
static const char* input_name[8];
static rlx_tensor input_t[8];
static int n_inputs;

static rlx_tensor in(rlx_graph* g, const char* name, rlx_dtype t, int64_t a, int64_t b, int64_t c,
                     int64_t d, int rank) {
  rlx_dim s[4] = {a, b, c, d};
  rlx_tensor x = RLX_NONE;
  rlx_graph_add_input(g, name, t, s, rank, &x);
  if (n_inputs < 8) {
    input_name[n_inputs] = name;
    input_t[n_inputs++] = x;
  }
  return x;
}

static void out1(rlx_graph* g, rlx_tensor t) { rlx_graph_set_outputs(g, &t, 1); }

static void g_gemm_t(rlx_graph* g, int64_t n, rlx_dtype t, int tb) {
  rlx_tensor a = in(g, "a", t, n, n, 0, 0, 2), b = in(g, "b", t, n, n, 0, 0, 2), y;
  rlx_graph_add_matmul(g, a, b, 0, tb, &y);
  out1(g, y);
}
static void g_gemm(rlx_graph* g, int64_t n, rlx_dtype t) {
  rlx_tensor a = in(g, "a", t, n, n, 0, 0, 2), b = in(g, "b", t, n, n, 0, 0, 2), y;
  rlx_graph_add_matmul(g, a, b, 0, 0, &y);
  out1(g, y);
}
static void b_gemm_f32(rlx_graph* g, int full) { g_gemm(g, full ? 4096 : 256, RLX_F32); }
static void b_gemm_bf16(rlx_graph* g, int full) { g_gemm(g, full ? 4096 : 256, RLX_BF16); }
static void b_gemm_f16(rlx_graph* g, int full) { g_gemm(g, full ? 4096 : 256, RLX_F16); }
static void b_gemm_f16_bt(rlx_graph* g, int full) { g_gemm_t(g, full ? 4096 : 256, RLX_F16, 1); }
static void b_gemm_bf16_8k(rlx_graph* g, int full) { g_gemm(g, full ? 8192 : 256, RLX_BF16); }
static double w_gemm4k(void) { return 2.0 * 4096.0 * 4096.0 * 4096.0; }
static double w_gemm8k(void) { return 2.0 * 8192.0 * 8192.0 * 8192.0; }

static void b_gemv(rlx_graph* g, int full) {
  int64_t n = full ? 4096 : 512;
  rlx_tensor a = in(g, "a", RLX_F32, 1, n, 0, 0, 2), b = in(g, "b", RLX_F32, n, n, 0, 0, 2), y;
  rlx_graph_add_matmul(g, a, b, 0, 0, &y);
  out1(g, y);
}
static double w_gemv(void) { return 4.0 * (4096.0 * 4096.0 + 2 * 4096.0); }

/* Issue 17's decode GEMV: y[1, 4096] = x[1, 14336] . W with W [14336, 4096]
 * (ggml's MUL_MAT m=4096 n=1 k=14336: the same bytes), through MatMul. */
static void g_gemv_llm(rlx_graph* g, int full, rlx_dtype t) {
  int64_t K = full ? 14336 : 512, N = full ? 4096 : 256;
  rlx_tensor a = in(g, "a", t, 1, K, 0, 0, 2), b = in(g, "b", t, K, N, 0, 0, 2), y;
  rlx_graph_add_matmul(g, a, b, 0, 0, &y);
  out1(g, y);
}
static void b_gemv_llm_f32(rlx_graph* g, int full) { g_gemv_llm(g, full, RLX_F32); }
static void b_gemv_llm_f16(rlx_graph* g, int full) { g_gemv_llm(g, full, RLX_F16); }
static double w_gemv_llm_f32(void) { return 4.0 * (14336.0 * 4096.0 + 14336.0 + 4096.0); }
static double w_gemv_llm_f16(void) { return 2.0 * (14336.0 * 4096.0 + 14336.0 + 4096.0); }

static void b_add(rlx_graph* g, int full) {
  int64_t n = full ? (1 << 26) : 4099;
  rlx_tensor a = in(g, "a", RLX_F32, n, 0, 0, 0, 1), b = in(g, "b", RLX_F32, n, 0, 0, 0, 1), y;
  rlx_graph_add_binary(g, RLX_BIN_ADD, a, b, &y);
  out1(g, y);
}
static double w_add(void) { return 3.0 * 4.0 * (double)(1 << 26); }
/* 4096 elements: the time is the backend's fixed cost of one synchronising run. */
static void b_add_small(rlx_graph* g, int full) {
  (void)full;
  rlx_tensor a = in(g, "a", RLX_F32, 4096, 0, 0, 0, 1), b = in(g, "b", RLX_F32, 4096, 0, 0, 0, 1), y;
  rlx_graph_add_binary(g, RLX_BIN_ADD, a, b, &y);
  out1(g, y);
}
static double w_add_small(void) { return 3.0 * 4.0 * 4096.0; }

static int64_t rows(int full) { return full ? 16384 : 64; }
static double w_rows(void) { return 2.0 * 4.0 * 16384.0 * 4096.0; }

static void b_softmax(rlx_graph* g, int full) {
  rlx_tensor x = in(g, "x", RLX_F32, rows(full), 4096, 0, 0, 2), y;
  rlx_graph_add_softmax(g, x, -1, &y);
  out1(g, y);
}
static void b_layernorm(rlx_graph* g, int full) {
  rlx_tensor x = in(g, "x", RLX_F32, rows(full), 4096, 0, 0, 2), w = in(g, "w", RLX_F32, 4096, 0, 0, 0, 1),
             b = in(g, "b", RLX_F32, 4096, 0, 0, 0, 1), y;
  rlx_graph_add_layer_norm(g, x, w, b, -1, 1e-5f, &y);
  out1(g, y);
}
static void b_rmsnorm(rlx_graph* g, int full) {
  rlx_tensor x = in(g, "x", RLX_F32, rows(full), 4096, 0, 0, 2), w = in(g, "w", RLX_F32, 4096, 0, 0, 0, 1), y;
  rlx_graph_add_rms_norm(g, x, w, 1e-6f, &y);
  out1(g, y);
}

static void g_attn(rlx_graph* g, int64_t B, int64_t H, int64_t S, int64_t D, rlx_dtype t) {
  rlx_tensor q = in(g, "q", t, B, H, S, D, 4), k = in(g, "k", t, B, H, S, D, 4),
             v = in(g, "v", t, B, H, S, D, 4), y;
  rlx_attention_desc d = {(int32_t)H, (int32_t)H, (int32_t)D, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0};
  rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &y);
  out1(g, y);
}
static void b_attn_f32(rlx_graph* g, int full) { g_attn(g, full ? 8 : 1, full ? 16 : 2, full ? 1024 : 100, 64, RLX_F32); }
static void b_attn_bf16(rlx_graph* g, int full) { g_attn(g, full ? 8 : 1, full ? 16 : 2, full ? 1024 : 100, 64, RLX_BF16); }
static void b_attn_f32_long(rlx_graph* g, int full) { g_attn(g, full ? 4 : 1, full ? 32 : 2, full ? 4096 : 100, 128, RLX_F32); }
static double w_attn(void) { return 4.0 * 8 * 16 * 1024.0 * 1024.0 * 64 / 2; }
static double w_attn_long(void) { return 4.0 * 4 * 32 * 4096.0 * 4096.0 * 128 / 2; }

/* Attention backward (the training step's): bwd alone from given out and
 * d_out, or the forward and its backward in one graph (dq, dk, dv out). */
static void g_attn_bwd(rlx_graph* g, int64_t B, int64_t H, int64_t S, int64_t D, rlx_dtype t,
                       int with_forward) {
  rlx_tensor q = in(g, "q", t, B, H, S, D, 4), k = in(g, "k", t, B, H, S, D, 4),
             v = in(g, "v", t, B, H, S, D, 4), dy = in(g, "dy", t, B, H, S, D, 4), y, grads[3];
  rlx_attention_desc d = {(int32_t)H, (int32_t)H, (int32_t)D, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0};
  if (with_forward)
    rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &y);
  else
    y = in(g, "y", t, B, H, S, D, 4);
  rlx_graph_add_attention_backward(g, q, k, v, RLX_NONE, y, dy, &d, &grads[0], &grads[1], &grads[2]);
  rlx_graph_set_outputs(g, grads, 3);
}
static void b_attn_bwd_f32(rlx_graph* g, int full) { g_attn_bwd(g, full ? 8 : 1, full ? 16 : 2, full ? 1024 : 100, 64, RLX_F32, 0); }
static void b_attn_bwd_bf16(rlx_graph* g, int full) { g_attn_bwd(g, full ? 8 : 1, full ? 16 : 2, full ? 1024 : 100, 64, RLX_BF16, 0); }
static void b_attn_fb_f32(rlx_graph* g, int full) { g_attn_bwd(g, full ? 8 : 1, full ? 16 : 2, full ? 1024 : 100, 64, RLX_F32, 1); }
static void b_attn_fb_bf16(rlx_graph* g, int full) { g_attn_bwd(g, full ? 8 : 1, full ? 16 : 2, full ? 1024 : 100, 64, RLX_BF16, 1); }
/* FlashAttention-2's accounting: the backward is 2.5 forwards. */
static double w_attn_bwd(void) { return 2.5 * w_attn(); }
static double w_attn_fb(void) { return 3.5 * w_attn(); }

static const workload WORK[] = {
    {"gemm f32 4096x4096x4096", b_gemm_f32, w_gemm4k, "flops", 0, 0},
    {"gemm f32-tf32 4096x4096x4096", b_gemm_f32, w_gemm4k, "flops", 1, 0},
    {"gemm f32 own-kernel 4096x4096x4096", b_gemm_f32, w_gemm4k, "flops", 0, 1},
    {"gemm bf16 4096x4096x4096", b_gemm_bf16, w_gemm4k, "flops", 0, 0},
    {"gemm f16 4096x4096x4096", b_gemm_f16, w_gemm4k, "flops", 0, 0},
    {"gemm f16 4096x4096x4096 transposed B", b_gemm_f16_bt, w_gemm4k, "flops", 0, 0},
    {"gemm bf16 8192x8192x8192", b_gemm_bf16_8k, w_gemm8k, "flops", 0, 0},
    {"gemv f32 1x4096x4096", b_gemv, w_gemv, "bytes", 0, 0},
    {"add f32 64M", b_add, w_add, "bytes", 0, 0},
    {"add f32 4K (run overhead)", b_add_small, w_add_small, "bytes", 0, 0},
    {"softmax f32 16384x4096", b_softmax, w_rows, "bytes", 0, 0},
    {"layernorm f32 16384x4096", b_layernorm, w_rows, "bytes", 0, 0},
    {"rmsnorm f32 16384x4096", b_rmsnorm, w_rows, "bytes", 0, 0},
    {"sdpa causal f32 B8 H16 S1024 D64", b_attn_f32, w_attn, "flops", 0, 0},
    {"sdpa causal bf16 B8 H16 S1024 D64", b_attn_bf16, w_attn, "flops", 0, 0},
    {"sdpa causal f32 B4 H32 S4096 D128", b_attn_f32_long, w_attn_long, "flops", 0, 0},
    {"sdpa bwd causal f32 B8 H16 S1024 D64", b_attn_bwd_f32, w_attn_bwd, "flops", 0, 0},
    {"sdpa bwd causal bf16 B8 H16 S1024 D64", b_attn_bwd_bf16, w_attn_bwd, "flops", 0, 0},
    {"sdpa fwd+bwd causal f32 B8 H16 S1024 D64", b_attn_fb_f32, w_attn_fb, "flops", 0, 0},
    {"sdpa fwd+bwd causal bf16 B8 H16 S1024 D64", b_attn_fb_bf16, w_attn_fb, "flops", 0, 0},
    {"gemv llm f32 1x14336x4096", b_gemv_llm_f32, w_gemv_llm_f32, "bytes", 0, 0},
    {"gemv llm f16 1x14336x4096", b_gemv_llm_f16, w_gemv_llm_f16, "bytes", 0, 0},
};

/* ------------------------------------------------------------ running */

/* Sets every input the last build made (in()) to random data of its dtype. */
static int set_random_inputs(rlx_graph* g, rlx_exec* e) {
  for (int k = 0; k < n_inputs; k++) {
    rlx_dtype dt;
    int32_t rank;
    rlx_dim shape[RLX_MAX_RANK];
    if (rlx_graph_tensor_type(g, input_t[k], &dt, &rank, shape) != RLX_OK) return 0;
    int64_t n = 1;
    for (int32_t d = 0; d < rank; d++) n *= shape[d];
    size_t es = rlx_dtype_size(dt);
    void* buf = malloc(es * (size_t)(n ? n : 1));
    if (!buf) return 0;
    for (int64_t j = 0; j < n; j++) {
      float f = rand_float();
      rlx_dtype_convert((char*)buf + (size_t)j * es, dt, &f, RLX_F32, 1);
    }
    rlx_status s = rlx_exec_set_input(e, input_name[k], dt, shape, rank, buf, es * (size_t)n);
    free(buf);
    if (s != RLX_OK) return 0;
  }
  return 1;
}

/* Relative L2 of output 0 between the device and the CPU at the small shape. */
static double check(const workload* w, const char* device) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  n_inputs = 0;
  w->build(g, 0);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.allow_tf32 = w->tf32;
  rlx_exec *a = NULL, *b = NULL;
  double err = INFINITY;
  if (rlx_compile(g, device, &o, &a) == RLX_OK && rlx_compile(g, "cpu", NULL, &b) == RLX_OK) {
    uint64_t saved = rng;
    set_random_inputs(g, a);
    rng = saved;
    set_random_inputs(g, b);
    int64_t shape[RLX_MAX_RANK], n = 1;
    int32_t rank;
    if (rlx_exec_run(a) == RLX_OK && rlx_exec_run(b) == RLX_OK &&
        rlx_exec_output_type(a, 0, NULL, &rank, shape) == RLX_OK) {
      for (int32_t d = 0; d < rank; d++) n *= shape[d];
      double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
      if (x && y && rlx_exec_read_output(a, 0, RLX_F64, x, sizeof(double) * (size_t)n) == RLX_OK &&
          rlx_exec_read_output(b, 0, RLX_F64, y, sizeof(double) * (size_t)n) == RLX_OK) {
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
          num += (x[i] - y[i]) * (x[i] - y[i]);
          den += y[i] * y[i];
        }
        err = sqrt(num / (den > 0 ? den : 1));
      }
      free(x);
      free(y);
    }
  }
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
  rlx_graph_destroy(g);
  return err;
}

/* Device time of e's last run where the backend measures it (CUDA events
 * with RLX_CUDA_TIMING=1), else -1. */
static double device_ms(const rlx_exec* e) {
  double ms = -1;
  rlx_exec_last_device_ms(e, &ms);
  return ms;
}

static void run_workload(const workload* w, const char* device) {
  if (w->no_lt) setenv("RLX_CUDA_NO_CUBLASLT", "1", 1);
  double rel = check(w, device);
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  n_inputs = 0;
  w->build(g, 1);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.allow_tf32 = w->tf32;
  rlx_exec* e = NULL;
  if (rlx_compile(g, device, &o, &e) != RLX_OK) {
    printf("{\"name\": \"%s\", \"device\": \"%s\", \"error\": \"%s\"}\n", w->name, device,
           rlx_graph_last_error(g));
    rlx_graph_destroy(g);
    unsetenv("RLX_CUDA_NO_CUBLASLT");
    return;
  }
  unsetenv("RLX_CUDA_NO_CUBLASLT");
  set_random_inputs(g, e);
  rlx_exec_select_outputs(e, NULL, 0); /* time the compute, not the readback */
  double wall[ITERS], dev[ITERS];
  int ok = 1;
  for (int i = 0; i < WARMUP && ok; i++) ok = rlx_exec_run(e) == RLX_OK;
  /* RLX_BENCH_WARMUP_MS=t: keep warming up for t ms (clocks that ramp up
   * under load); RLX_BENCH_TRACE=1: print every timed run's wall ms. */
  const char* warm_env = getenv("RLX_BENCH_WARMUP_MS");
  double warm_until = now_ms() + (warm_env ? atof(warm_env) : 0);
  while (ok && now_ms() < warm_until) ok = rlx_exec_run(e) == RLX_OK;
  for (int i = 0; i < ITERS && ok; i++) {
    double t = now_ms();
    ok = rlx_exec_run(e) == RLX_OK;
    wall[i] = now_ms() - t;
    dev[i] = device_ms(e);
  }
  if (ok && getenv("RLX_BENCH_TRACE")) {
    printf("trace %s:", w->name);
    for (int i = 0; i < ITERS; i++) printf(" %.3f", wall[i]);
    printf("\n");
  }
  if (!ok) {
    printf("{\"name\": \"%s\", \"device\": \"%s\", \"error\": \"%s\"}\n", w->name, device,
           rlx_exec_last_error(e));
  } else {
    qsort(wall, ITERS, sizeof(double), cmp_double);
    qsort(dev, ITERS, sizeof(double), cmp_double);
    double med = dev[ITERS / 2] > 0 ? dev[ITERS / 2] : wall[ITERS / 2];
    double rate = w->work() / (med * 1e-3);
    printf("{\"name\": \"%s\", \"device\": \"%s\", \"ms\": %.5f, \"p10_ms\": %.5f, \"p90_ms\": %.5f, "
           "\"device_ms\": %.5f, \"device_p10_ms\": %.5f, \"device_p90_ms\": %.5f, \"%s\": %.4g, "
           "\"check_rel_l2\": %.3g}\n",
           w->name, device, wall[ITERS / 2], wall[ITERS / 10], wall[ITERS * 9 / 10], dev[ITERS / 2],
           dev[ITERS / 10], dev[ITERS * 9 / 10], strcmp(w->unit, "flops") == 0 ? "tflops" : "gbps",
           strcmp(w->unit, "flops") == 0 ? rate / 1e12 : rate / 1e9, rel);
  }
  fflush(stdout);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

int main(int argc, char** argv) {
  const char* device = argc > 1 ? argv[1] : "cuda";
  const char* filter = argc > 2 ? argv[2] : NULL;
  setenv("RLX_CUDA_TIMING", "1", 0);
  for (size_t i = 0; i < sizeof WORK / sizeof WORK[0]; i++)
    if (!filter || strstr(WORK[i].name, filter)) run_workload(&WORK[i], device);
  return 0;
}
