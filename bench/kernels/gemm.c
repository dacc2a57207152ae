/* Kernel lab: CPU f32 GEMM (src/backends/cpu/gemm.c), C = A·B with either
 * operand transposed.
 *
 * Variants: 0 is production (rlx_cpu_sgemm: the widest kernel this CPU runs,
 * with its cache blocks); the others are the same blocked GEMM with another
 * register-tile kernel (scalar 4x8, AVX2 6x16, AVX-512 12x32) or other cache
 * blocks (mc rows of A, kc depth, nc columns of B per packed panel). They
 * replace the MC/KC/NC/AVX2 environment knobs that -DRLX_GEMM_TUNE builds of
 * gemm.c used to read. A blocking that wins here on the machines that
 * matter goes into gemm.c's kernel_at table.
 *
 *   lab_gemm [--check] [--threads T] [--reps R] [M N K]
 *
 * Default: 1024^3, all cores, 5 timed runs per variant. --check: small odd
 * shapes and every transpose, one run each, correctness only. Every variant
 * is compared with a double-precision loop; the exit status is 1 when any
 * exceeds the f32 tolerance. Nothing here asserts a time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "lab.h"

#define TOL 1e-5

typedef struct variant {
  int production;
  rlx_cpu_gemm_blocking b;
} variant;

static const variant variants[] = {
    {1, {0, 0, 0, 0}},
    {0, {0, 64, 256, 1024}},    /* the scalar kernel's own blocks */
    {0, {1, 96, 256, 1024}},    /* AVX2's own blocks (the old AVX2=1 knob) */
    {0, {1, 144, 256, 2048}},   /* AVX2 with AVX-512's blocks */
    {0, {2, 144, 256, 2048}},   /* AVX-512's own blocks */
    {0, {2, 96, 256, 2048}},
    {0, {2, 192, 256, 2048}},
    {0, {2, 144, 128, 2048}},
    {0, {2, 144, 512, 2048}},
    {0, {2, 144, 256, 1024}},
    {0, {2, 144, 256, 4096}},
};
enum { N_VARIANTS = sizeof variants / sizeof variants[0] };

typedef struct problem {
  int64_t M, N, K;
  int a_trans, b_trans;
  float *A, *B, *C;
  double* ref;
} problem;

static const char* simd_name(int level) {
  return level == 2 ? "avx512" : level == 1 ? "avx2" : "scalar";
}

static void describe(const variant* v, char* buf, size_t cap) {
  rlx_cpu_gemm_blocking b = v->production ? rlx_cpu_gemm_default_blocking() : v->b;
  snprintf(buf, cap, "%s%s mc=%lld kc=%lld nc=%lld", v->production ? "production " : "",
           simd_name(b.simd), (long long)b.mc, (long long)b.kc, (long long)b.nc);
}

/* Element (m, k) of A and (k, n) of B as stored (row-major, maybe transposed). */
static float a_at(const problem* p, int64_t m, int64_t k) {
  return p->a_trans ? p->A[k * p->M + m] : p->A[m * p->K + k];
}
static float b_at(const problem* p, int64_t k, int64_t n) {
  return p->b_trans ? p->B[n * p->K + k] : p->B[k * p->N + n];
}

static int problem_init(problem* p, int64_t M, int64_t N, int64_t K, int at, int bt) {
  *p = (problem){M, N, K, at, bt, NULL, NULL, NULL, NULL};
  p->A = malloc(sizeof(float) * (size_t)(M * K));
  p->B = malloc(sizeof(float) * (size_t)(K * N));
  p->C = malloc(sizeof(float) * (size_t)(M * N));
  p->ref = malloc(sizeof(double) * (size_t)(M * N));
  if (!p->A || !p->B || !p->C || !p->ref) return 0;
  lab_fill(p->A, M * K, 1);
  lab_fill(p->B, K * N, 2);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)a_at(p, m, k) * (double)b_at(p, k, n);
      p->ref[m * N + n] = s;
    }
  return 1;
}

static void problem_free(problem* p) {
  free(p->A);
  free(p->B);
  free(p->C);
  free(p->ref);
}

static int run(rlx_cpu_pool* pool, const variant* v, const problem* p) {
  int64_t lda = p->a_trans ? p->M : p->K, ldb = p->b_trans ? p->K : p->N;
  if (v->production) {
    rlx_cpu_sgemm(pool, p->a_trans, p->b_trans, p->M, p->N, p->K, p->A, lda, p->B, ldb, p->C,
                  p->N);
    return 1;
  }
  return rlx_cpu_sgemm_blocked(pool, &v->b, p->a_trans, p->b_trans, p->M, p->N, p->K, p->A, lda,
                               p->B, ldb, p->C, p->N);
}

/* Runs variant i on p: validates the first run, times `reps` more. Returns
 * 0 when it was wrong. */
static int measure(rlx_cpu_pool* pool, int i, const problem* p, int reps) {
  char what[96];
  describe(&variants[i], what, sizeof what);
  if (reps == 0) {
    char shape[48];
    snprintf(shape, sizeof shape, " %lldx%lldx%lld%s%s", (long long)p->M, (long long)p->N,
             (long long)p->K, p->a_trans ? " At" : "", p->b_trans ? " Bt" : "");
    strncat(what, shape, sizeof what - strlen(what) - 1);
  }
  memset(p->C, 0xff, sizeof(float) * (size_t)(p->M * p->N)); /* NaN: unwritten shows */
  double t0 = lab_now_ms();
  if (!run(pool, &variants[i], p)) {
    lab_skip(i, what, "this CPU or build lacks the kernel");
    return 1;
  }
  double ms[64];
  ms[0] = lab_now_ms() - t0;
  double err = lab_max_rel_err(p->C, p->ref, p->M * p->N);
  int n = reps > 64 ? 64 : reps;
  for (int r = 0; r < n; r++) {
    t0 = lab_now_ms();
    run(pool, &variants[i], p);
    ms[r] = lab_now_ms() - t0;
  }
  lab_report(i, what, err, lab_median(ms, n > 0 ? n : 1), 2.0 * (double)p->M * (double)p->N * (double)p->K);
  return err <= TOL;
}

int main(int argc, char** argv) {
  int check = 0, threads = 0, reps = 5;
  int64_t dims[3] = {1024, 1024, 1024};
  int nd = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--check") == 0) check = 1;
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    else if (nd < 3 && atoll(argv[i]) > 0) dims[nd++] = atoll(argv[i]);
    else {
      fprintf(stderr, "usage: %s [--check] [--threads T] [--reps R] [M N K]\n", argv[0]);
      return 2;
    }
  }
  rlx_cpu_pool* pool = NULL;
  if (rlx_cpu_pool_create(threads, &pool) != RLX_OK) return 2;
  printf("lab gemm: f32, %d threads, CPU SIMD level %s, tolerance %.0e\n", rlx_cpu_pool_threads(pool),
         simd_name(rlx_cpu_simd_level()), TOL);
  lab_header("GFLOP/s");
  int ok = 1, oom = 0;
  /* odd sizes against every tile edge; the transposed packings */
  static const int64_t shapes[][5] = {{67, 129, 300, 0, 0}, {130, 67, 257, 1, 0},
                                      {256, 255, 513, 0, 1}, {37, 300, 64, 1, 1}};
  int n_shapes = check ? (int)(sizeof shapes / sizeof shapes[0]) : 1;
  for (int s = 0; s < n_shapes && !oom; s++) {
    const int64_t* sh = shapes[s];
    problem p;
    oom = check ? !problem_init(&p, sh[0], sh[1], sh[2], (int)sh[3], (int)sh[4])
                : !problem_init(&p, dims[0], dims[1], dims[2], 0, 0);
    for (int i = 0; i < N_VARIANTS && !oom; i++) ok &= measure(pool, i, &p, check ? 0 : reps);
    problem_free(&p);
  }
  rlx_cpu_pool_destroy(pool);
  if (oom) fprintf(stderr, "out of memory\n");
  if (!ok) printf("FAIL: a variant exceeded the tolerance\n");
  return oom ? 2 : !ok;
}
