/* CPU kernel benchmarks: one JSON line per measurement.
 *
 *   sgemm N^3 (N = 512, 1024, 2048), ours vs OpenBLAS in the same run, on 1
 *   thread and on all cores; softmax and layernorm over 4096 x 1024 f32 rows
 *   (the fast-path kernels, timed alone, in GB/s of bytes read + written).
 *
 * Each measurement warms up, then takes the median (and p10/p90) of many
 * timed runs on random data. OpenBLAS is loaded at run time; its thread count
 * is set through openblas_set_num_threads when the library has it. Measure
 * with OPENBLAS_CORETYPE unset (`env -u OPENBLAS_CORETYPE build/bench_cpu`):
 * a forced core type slows current OpenBLAS. Nothing here asserts a time. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Private on purpose: this program times the CPU backend's own kernels (the
 * SGEMM, the fast-path softmax/layernorm steps) in isolation against
 * OpenBLAS, below the level the public API exposes (a graph run would time
 * planning, dispatch and copies too). It is a kernel-lab program, not a user
 * of the library. */
#include "backends/cpu/cpu.h"

#define MAX_SAMPLES 400

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float rand_float(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((double)(rng >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}
static float* random_buffer(int64_t n) {
  float* p = NULL;
  if (posix_memalign((void**)&p, 64, (size_t)n * sizeof(float)) != 0) return NULL;
  for (int64_t i = 0; i < n; i++) p[i] = rand_float();
  return p;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

typedef struct stats {
  double median_ms, p10_ms, p90_ms;
} stats;

typedef void (*bench_fn)(void* ctx);

/* Warm up, then time runs until `budget_s` is spent (at least min_runs). */
static stats measure(bench_fn fn, void* ctx, int warmup, int min_runs, double budget_s) {
  double samples[MAX_SAMPLES];
  int n = 0;
  for (int i = 0; i < warmup; i++) fn(ctx);
  double start = now_s();
  while (n < MAX_SAMPLES && (n < min_runs || now_s() - start < budget_s)) {
    double t = now_s();
    fn(ctx);
    samples[n++] = (now_s() - t) * 1e3;
  }
  qsort(samples, (size_t)n, sizeof *samples, cmp_double);
  stats s = {samples[n / 2], samples[n / 10], samples[(n * 9) / 10]};
  return s;
}

/* ------------------------------------------------------------------ sgemm */

typedef struct gemm_ctx {
  rlx_cpu_pool* pool;
  int64_t m, n, k;
  float *a, *b, *c;
  int b_trans;
} gemm_ctx;

static void run_ours(void* v) {
  gemm_ctx* g = v;
  rlx_cpu_sgemm(g->pool, 0, g->b_trans, g->m, g->n, g->k, g->a, g->k, g->b,
                g->b_trans ? g->k : g->n, g->c, g->n);
}
static void run_blas(void* v) {
  gemm_ctx* g = v;
  rlx_cpu_blas_sgemm(0, g->b_trans, g->m, g->n, g->k, g->a, g->k, g->b, g->b_trans ? g->k : g->n,
                     g->c, g->n);
}

typedef void (*set_threads_fn)(int);

static set_threads_fn openblas_threads_setter(void) {
  static const char* const names[] = {"libopenblas.so.0", "libopenblas.so"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    union { void* p; set_threads_fn f; } sym;
    sym.p = dlsym(h, "openblas_set_num_threads");
    if (sym.p) return sym.f; /* the handle stays open for the process */
    dlclose(h);
  }
  return NULL;
}

static void print_stats(const char* name, int threads, stats s, const char* unit, double amount,
                        double ratio) {
  printf("{\"name\":\"%s\",\"device\":\"cpu\",\"threads\":%d,\"median_ms\":%.4f,"
         "\"p10_ms\":%.4f,\"p90_ms\":%.4f,\"%s\":%.2f",
         name, threads, s.median_ms, s.p10_ms, s.p90_ms, unit, amount / (s.median_ms * 1e-3) / 1e9);
  if (ratio > 0) printf(",\"ratio_vs_openblas\":%.3f", ratio);
  printf("}\n");
  fflush(stdout);
}

/* C[m,n] = A[m,k] B[k,n] (B stored [n,k] when b_trans: a Linear weight),
 * ours against OpenBLAS. m = 1 is the decode-time matrix-vector product,
 * reported in GB/s of weights read. */
static void bench_sgemm(const char* label, int64_t m, int64_t n, int64_t k, int b_trans,
                        int threads, set_threads_fn blas_threads) {
  gemm_ctx g = {NULL, m, n, k, random_buffer(m * k), random_buffer(k * n), random_buffer(m * n),
                b_trans};
  if (!g.a || !g.b || !g.c || rlx_cpu_pool_create(threads, &g.pool) != RLX_OK) {
    fprintf(stderr, "bench_cpu: out of memory for %s\n", label);
    free(g.a), free(g.b), free(g.c);
    return;
  }
  double flops = 2.0 * (double)m * (double)n * (double)k;
  int gemv = m == 1;
  double amount = gemv ? 4.0 * (double)n * (double)k : flops;
  double budget = flops >= 1e10 ? 1.5 : 1.0;
  int min_runs = flops >= 1e10 ? 5 : 15;
  stats ours = measure(run_ours, &g, 2, min_runs, budget);
  stats blas = {0, 0, 0};
  int have_blas = rlx_cpu_blas_available();
  if (have_blas) {
    if (blas_threads) blas_threads(threads);
    blas = measure(run_blas, &g, 2, min_runs, budget);
    /* OpenBLAS workers spin for a while after a call: let them settle so
     * they do not steal cores from the next measurement. */
    sleep_ms(300);
  }
  char name[96];
  const char* unit = gemv ? "gbps" : "gflops";
  print_stats(label, rlx_cpu_pool_threads(g.pool), ours, unit, amount,
              have_blas ? blas.median_ms / ours.median_ms : -1);
  if (have_blas) {
    snprintf(name, sizeof name, "openblas_%s", label);
    print_stats(name, threads, blas, unit, amount, -1);
  }
  rlx_cpu_pool_destroy(g.pool);
  free(g.a), free(g.b), free(g.c);
}

/* ------------------------------------------------------------------ row ops */

typedef struct step_ctx {
  rlx_cpu_fast fast;
  uint8_t* arena;
  rlx_step step;
} step_ctx;

static void run_step(void* v) {
  step_ctx* c = v;
  if (!rlx_cpu_fast_step(&c->fast, c->arena, &c->step)) {
    fprintf(stderr, "bench_cpu: the fast path declined %s\n", rlx_kernel_name(c->step.kernel));
    exit(1);
  }
}

static rlx_view dense_view(uint64_t offset, int64_t rows, int64_t cols) {
  rlx_view v;
  memset(&v, 0, sizeof v);
  v.offset = offset;
  v.dtype = RLX_F32;
  v.rank = rows > 0 ? 2 : 1;
  if (rows > 0) {
    v.shape[0] = rows, v.shape[1] = cols, v.stride[0] = cols, v.stride[1] = 1;
  } else {
    v.shape[0] = cols, v.stride[0] = 1;
  }
  return v;
}

static void bench_rows(const char* name, rlx_kernel kind, int64_t rows, int64_t cols,
                       int threads) {
  step_ctx c;
  memset(&c, 0, sizeof c);
  int64_t n = rows * cols;
  /* x | out | gamma | beta */
  c.arena = (uint8_t*)random_buffer(2 * n + 2 * cols);
  if (!c.arena || rlx_cpu_pool_create(threads, &c.fast.pool) != RLX_OK) {
    fprintf(stderr, "bench_cpu: out of memory for %s\n", name);
    free(c.arena);
    return;
  }
  rlx_step* s = &c.step;
  s->kernel = kind;
  uint64_t x_off = 0, o_off = (uint64_t)n * 4, g_off = 2 * (uint64_t)n * 4;
  if (kind == RLX_K_SOFTMAX) {
    s->n_in = 1, s->n_out = 1;
    s->in[0] = dense_view(x_off, rows, cols);
    s->out[0] = dense_view(o_off, rows, cols);
    s->p.rowop.row.outer = rows, s->p.rowop.row.n = cols, s->p.rowop.row.inner = 1;
  } else {
    s->n_in = 5, s->n_out = 1;
    s->in[0] = dense_view(x_off, rows, cols);
    s->in[1].rank = -1, s->in[2].rank = -1;
    s->in[3] = dense_view(g_off, 0, cols);
    s->in[4] = dense_view(g_off + (uint64_t)cols * 4, 0, cols);
    s->out[0] = dense_view(o_off, rows, cols);
    rlx_norm_params* p = &s->p.norm;
    p->rows = rows, p->cols = cols, p->eps = 1e-5f, p->has_gamma = 1, p->has_beta = 1;
  }
  rlx_step_derive_ranges(s);
  stats st = measure(run_step, &c, 3, 20, 1.0);
  print_stats(name, rlx_cpu_pool_threads(c.fast.pool), st, "gbps", 2.0 * (double)n * 4, -1);
  rlx_cpu_pool_destroy(c.fast.pool);
  free(c.arena);
}

int main(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int all = cores > 0 ? (int)cores : 1;
  set_threads_fn blas_threads = openblas_threads_setter();
  if (!rlx_cpu_blas_available()) fprintf(stderr, "bench_cpu: OpenBLAS not found, no ratios\n");
  if (getenv("OPENBLAS_CORETYPE"))
    fprintf(stderr, "bench_cpu: OPENBLAS_CORETYPE is set; run with `env -u OPENBLAS_CORETYPE`\n");
  static const int64_t sizes[] = {512, 1024, 2048};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    char label[64];
    int64_t n = sizes[i];
    snprintf(label, sizeof label, "sgemm_%lld", (long long)n);
    bench_sgemm(label, n, n, n, 0, 1, blas_threads);
    if (all > 1) bench_sgemm(label, n, n, n, 0, all, blas_threads);
  }
  bench_sgemm("sgemv_1x4096x4096_wt", 1, 4096, 4096, 1, all, blas_threads);
  bench_sgemm("sgemv_1x4096x4096", 1, 4096, 4096, 0, all, blas_threads);
  bench_rows("softmax_4096x1024", RLX_K_SOFTMAX, 4096, 1024, all);
  bench_rows("layernorm_4096x1024", RLX_K_NORM, 4096, 1024, all);
  if (all > 1) {
    bench_rows("softmax_4096x1024", RLX_K_SOFTMAX, 4096, 1024, 1);
    bench_rows("layernorm_4096x1024", RLX_K_NORM, 4096, 1024, 1);
  }
  return 0;
}
