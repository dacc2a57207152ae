/* CPU fast paths (threads.c, gemm.c, blas.c, fast.c) against independent
 * oracles:
 *  - the thread pool: every index covered exactly once, chunks >= grain;
 *  - rlx_cpu_sgemm / rlx_cpu_blas_sgemm: a naive double loop, every
 *    transpose, leading dims wider than the matrix (the padding must stay
 *    untouched), NaN-poisoned outputs (so reading C before writing it shows);
 *  - rlx_cpu_fast_step: step by step against rlx_ref_run_step on the real
 *    lowering of graphs built through the public API. Each step of a kind the
 *    fast paths cover must be taken (return 1) and match the reference
 *    (relative L2 <= 1e-5 for f32); the arenas are resynchronised after each
 *    step so errors never compound;
 *  - end to end: a small transformer block compiled with reference = 1 and
 *    reference = 0 gives the same outputs. */
#include <math.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"
#include "harness.h"
#include "ir/graph.h"
#include "runtime/executable.h"

#define F32_TOL 1e-5

extern char** environ;

/* ------------------------------------------------------------------ pool */

typedef struct cover_ctx {
  int* hits;
  int64_t grain, n;
  atomic_int bad_chunks;
  atomic_int chunks;
  rlx_cpu_pool* pool;
  int nested;
} cover_ctx;

static void nested_noop(void* ctx, int64_t b, int64_t e) {
  int* hits = ctx;
  for (int64_t i = b; i < e; i++) hits[i]++;
}

static void cover_fn(void* vctx, int64_t begin, int64_t end) {
  cover_ctx* c = vctx;
  atomic_fetch_add(&c->chunks, 1);
  if (end - begin < c->grain && c->n >= 2 * c->grain) atomic_fetch_add(&c->bad_chunks, 1);
  for (int64_t i = begin; i < end; i++) c->hits[i]++;
  if (c->nested) {
    /* A nested call must run inline (not deadlock) and still cover. */
    int local[8] = {0};
    rlx_cpu_parallel_for(c->pool, 8, 1, nested_noop, local);
    for (int i = 0; i < 8; i++)
      if (local[i] != 1) atomic_fetch_add(&c->bad_chunks, 1);
  }
}

TEST(pool_covers_every_index_once) {
  static const int threads[] = {1, 2, 3, 5};
  static const int64_t ns[] = {1, 2, 3, 7, 64, 1000, 100003};
  static const int64_t grains[] = {1, 3, 64, 5000};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
    rlx_cpu_pool* p = NULL;
    CHECK(rlx_cpu_pool_create(threads[t], &p) == RLX_OK && p);
    CHECK(rlx_cpu_pool_threads(p) == threads[t]);
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
      for (size_t g = 0; g < sizeof grains / sizeof *grains; g++)
        for (int nested = 0; nested < 2; nested++) {
          cover_ctx c;
          memset(&c, 0, sizeof c);
          c.hits = calloc((size_t)ns[i], sizeof(int));
          CHECK(c.hits);
          c.grain = grains[g];
          c.n = ns[i];
          c.pool = p;
          c.nested = nested;
          rlx_cpu_parallel_for(p, ns[i], grains[g], cover_fn, &c);
          int ok = 1;
          for (int64_t k = 0; k < ns[i]; k++) ok &= c.hits[k] == 1;
          free(c.hits);
          CHECK_MSG(ok, "threads %d n %lld grain %lld", threads[t], (long long)ns[i],
                    (long long)grains[g]);
          CHECK(atomic_load(&c.bad_chunks) == 0);
          CHECK(atomic_load(&c.chunks) <= threads[t]);
          if (ns[i] < 2 * grains[g]) CHECK(atomic_load(&c.chunks) == 1);
        }
    rlx_cpu_pool_destroy(p);
  }
  rlx_cpu_pool_destroy(NULL);
  /* No pool: runs inline. */
  int hits[10] = {0};
  rlx_cpu_parallel_for(NULL, 10, 1, nested_noop, hits);
  for (int i = 0; i < 10; i++) CHECK(hits[i] == 1);
}

/* ------------------------------------------------------------------ sgemm */

typedef void (*gemm_fn)(rlx_cpu_pool* p, int ta, int tb, int64_t M, int64_t N, int64_t K,
                        const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                        int64_t ldc);

static void blas_as_gemm(rlx_cpu_pool* p, int ta, int tb, int64_t M, int64_t N, int64_t K,
                         const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                         int64_t ldc) {
  (void)p;
  rlx_cpu_blas_sgemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
}

#define PAD_SENTINEL 12345.0f

/* One GEMM against a double loop; returns 0 and reports on mismatch. */
static int check_gemm(gemm_fn fn, rlx_cpu_pool* pool, int ta, int tb, int64_t M, int64_t N,
                      int64_t K) {
  int64_t extra = test_rand_int(0, 5);
  int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
  int64_t b_rows = tb ? N : K, b_cols = tb ? K : N;
  int64_t lda = a_cols + extra, ldb = b_cols + test_rand_int(0, 3), ldc = N + test_rand_int(0, 4);
  float* A = malloc((size_t)(a_rows * lda + 1) * sizeof(float));
  float* B = malloc((size_t)(b_rows * ldb + 1) * sizeof(float));
  float* C = malloc((size_t)(M * ldc + 1) * sizeof(float));
  double* got = malloc((size_t)(M * N + 1) * sizeof(double));
  double* want = malloc((size_t)(M * N + 1) * sizeof(double));
  int ok = A && B && C && got && want;
  if (ok) {
    test_fill_f32(A, a_rows * lda, -1.0, 1.0);
    test_fill_f32(B, b_rows * ldb, -1.0, 1.0);
    for (int64_t m = 0; m < M; m++)
      for (int64_t j = 0; j < ldc; j++) C[m * ldc + j] = j < N ? NAN : PAD_SENTINEL;
    fn(pool, ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double s = 0.0;
        for (int64_t k = 0; k < K; k++) {
          double a = ta ? A[k * lda + m] : A[m * lda + k];
          double b = tb ? B[n * ldb + k] : B[k * ldb + n];
          s += a * b;
        }
        want[m * N + n] = s;
        got[m * N + n] = C[m * ldc + n];
      }
    for (int64_t m = 0; m < M; m++)
      for (int64_t j = N; j < ldc; j++) ok &= C[m * ldc + j] == PAD_SENTINEL;
    double err = test_rel_l2(got, want, M * N);
    if (K == 0) err = test_max_abs(got, want, M * N);
    if (!ok || !(err <= F32_TOL)) {
      fprintf(stderr, "gemm ta=%d tb=%d M=%lld N=%lld K=%lld: rel err %g, padding %s\n", ta, tb,
              (long long)M, (long long)N, (long long)K, err, ok ? "kept" : "overwritten");
      ok = 0;
    }
  }
  free(A);
  free(B);
  free(C);
  free(got);
  free(want);
  return ok;
}

static int gemm_suite(gemm_fn fn, rlx_cpu_pool* pool, int random_cases) {
  static const int64_t dims[] = {1, 2, 3, 5, 11, 16, 17, 31, 32, 33, 47, 64, 97};
  const int nd = (int)(sizeof dims / sizeof *dims);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      if (!check_gemm(fn, pool, ta, tb, 1, 1, 1)) return 0;
      if (!check_gemm(fn, pool, ta, tb, 4, 5, 0)) return 0; /* K = 0: zeros */
      for (int c = 0; c < random_cases; c++) {
        int64_t M = dims[test_rand_int(0, nd - 1)], N = dims[test_rand_int(0, nd - 1)];
        int64_t K = dims[test_rand_int(0, nd - 1)];
        if (!check_gemm(fn, pool, ta, tb, M, N, K)) return 0;
      }
      /* A few rows (the decode path), long and short rows of B. */
      for (int64_t M = 1; M <= 6; M++) {
        if (!check_gemm(fn, pool, ta, tb, M, 1000, 77)) return 0;
        if (!check_gemm(fn, pool, ta, tb, M, 37, 1029)) return 0;
        /* ... and a few columns (the transposed form of the same loops). */
        if (!check_gemm(fn, pool, ta, tb, 1000, M, 77)) return 0;
        if (!check_gemm(fn, pool, ta, tb, 37, M, 1029)) return 0;
      }
      /* Crosses every cache block boundary (MC, KC, NC) with ragged edges. */
      if (!check_gemm(fn, pool, ta, tb, 301, 2101, 263)) return 0;
      if (!check_gemm(fn, pool, ta, tb, 157, 67, 777)) return 0;
    }
  return 1;
}

TEST(sgemm_matches_double_loop) {
  test_seed(11);
  CHECK(gemm_suite(rlx_cpu_sgemm, NULL, 12));
  rlx_cpu_pool* p = NULL;
  CHECK(rlx_cpu_pool_create(2, &p) == RLX_OK);
  int ok = gemm_suite(rlx_cpu_sgemm, p, 12);
  /* Tall and wide: the two ways threads split C. */
  ok = ok && check_gemm(rlx_cpu_sgemm, p, 0, 0, 700, 40, 90);
  ok = ok && check_gemm(rlx_cpu_sgemm, p, 1, 1, 40, 700, 90);
  rlx_cpu_pool_destroy(p);
  CHECK(ok);
}

TEST(blas_sgemm_matches_double_loop) {
  if (!rlx_cpu_blas_available()) {
    printf("SKIP blas_sgemm_matches_double_loop (no OpenBLAS)\n");
    return;
  }
  test_seed(12);
  CHECK(gemm_suite(blas_as_gemm, NULL, 4));
}

/* ------------------------------------------------------------------ steps */

static int fast_kind(rlx_kernel k) {
  return k == RLX_K_MATMUL || k == RLX_K_BINARY || k == RLX_K_UNARY || k == RLX_K_SOFTMAX ||
         k == RLX_K_NORM || k == RLX_K_ATTENTION || k == RLX_K_CONV;
}

typedef struct step_stats {
  int fast;       /* steps the fast path took */
  int declined;   /* steps of a fast kind it declined */
  int in_place;   /* elementwise steps whose out is one of their inputs */
} step_stats;

/* range < 0: multiples of 0.5 in [range, -range], so that sums and products
 * are exact in f32 and a kernel's output is compared without the GEMM's
 * rounding (what ill-conditioned activations such as rsqrt near 0 would
 * magnify). */
/* When set, ~2% of the arena holds special values (NaN, +-inf, +-0, huge,
 * denormal) so NaN propagation and overflow paths are compared too. */
static int fill_specials;

static float special_value(void) {
  static const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f,
                                   3e38f, -3e38f, 1e-40f, -1e-40f};
  return specials[test_rand_int(0, (int64_t)(sizeof specials / sizeof *specials) - 1)];
}

static void fill_arena(uint8_t* a, uint64_t bytes, double range) {
  uint64_t n = bytes / 4;
  for (uint64_t i = 0; i < n; i++) {
    float v = range > 0 ? (float)test_rand_uniform(-range, range)
                        : (float)(0.5 * (double)test_rand_int((int64_t)(2 * range),
                                                              (int64_t)(-2 * range)));
    if (fill_specials && test_rand_int(0, 49) == 0) v = special_value();
    memcpy(a + 4 * i, &v, 4);
  }
  for (uint64_t i = n * 4; i < bytes; i++) a[i] = (uint8_t)test_rand_u64();
}

/* Bool tensors hold 0/1 bytes. */
static void fix_bools(uint8_t* a, const rlx_graph* g, const rlx_plan* plan) {
  for (int32_t v = 0; v < g->n_values && v < plan->n_values; v++) {
    if (g->values[v].type.dtype != RLX_BOOL) continue;
    for (uint64_t i = 0; i < plan->bytes[v]; i++) a[plan->offset[v] + i] = test_rand_u64() & 1;
  }
}

static double range_rel_err(const uint8_t* got, const uint8_t* want, const rlx_range* r) {
  int64_t n = (int64_t)((r->end - r->begin) / 4);
  double* x = malloc((size_t)(n + 1) * sizeof(double));
  double* y = malloc((size_t)(n + 1) * sizeof(double));
  if (!x || !y) {
    free(x);
    free(y);
    return INFINITY;
  }
  for (int64_t i = 0; i < n; i++) {
    float a, b;
    memcpy(&a, got + r->begin + 4 * i, 4);
    memcpy(&b, want + r->begin + 4 * i, 4);
    x[i] = a;
    y[i] = b;
  }
  double e = test_rel_l2(x, y, n);
  free(x);
  free(y);
  return e;
}

/* Runs every step of g's lowering with the reference on one arena and, for
 * fast kinds, the fast path on a copy; compares each fast step's writes. */
static int compare_steps(rlx_graph* g, int threads, double range, step_stats* st) {
  memset(st, 0, sizeof *st);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = 1;
  rlx_exec* e = NULL;
  if (rlx_compile(g, "cpu", &o, &e) != RLX_OK) {
    fprintf(stderr, "compile: %s\n", rlx_graph_last_error(g));
    return 0;
  }
  const rlx_step_list* steps = NULL;
  const rlx_plan* plan = NULL;
  const rlx_graph* lg = NULL;
  int ok = rlx_exec_steps(e, &steps, &plan) == RLX_OK && rlx_exec_graph(e, &lg) == RLX_OK &&
           steps && plan && lg;
  uint64_t bytes = ok ? plan->arena_bytes + 64 : 64;
  uint8_t* ref = malloc((size_t)bytes);
  uint8_t* fast = malloc((size_t)bytes);
  rlx_cpu_fast f = {.pool = NULL, .use_blas = 0};
  ok = ok && ref && fast && rlx_cpu_pool_create(threads, &f.pool) == RLX_OK;
  if (ok) {
    fill_arena(ref, bytes, range);
    fix_bools(ref, lg, plan);
    memcpy(fast, ref, (size_t)bytes);
  }
  rlx_run_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.seed = 1;
  ctx.graph = lg;
  ctx.plan = plan;
  rlx_error err;
  for (int32_t i = 0; ok && i < steps->n; i++) {
    const rlx_step* s = &steps->steps[i];
    if (rlx_ref_run_step(ref, s, &ctx, &err) != RLX_OK) {
      fprintf(stderr, "reference step %d: %s\n", i, err.msg);
      ok = 0;
      break;
    }
    int took = fast_kind(s->kernel) && rlx_cpu_fast_step(&f, fast, s);
    if (!took) {
      if (fast_kind(s->kernel)) st->declined++;
      rlx_ref_run_step(fast, s, &ctx, &err);
      continue;
    }
    st->fast++;
    if ((s->kernel == RLX_K_BINARY || s->kernel == RLX_K_UNARY))
      for (int32_t k = 0; k < s->n_in; k++)
        if (s->in[k].offset == s->out[0].offset) st->in_place++;
    for (int32_t w = 0; w < s->n_writes; w++) {
      double e2 = range_rel_err(fast, ref, &s->writes[w]);
      if (!(e2 <= F32_TOL)) {
        fprintf(stderr, "step %d (%s op %d, node %d) write %d: rel err %g\n", i,
                rlx_kernel_name(s->kernel), s->op, s->node, w, e2);
        ok = 0;
      }
      /* Resynchronise so the next step starts from identical inputs. */
      memcpy(fast + s->writes[w].begin, ref + s->writes[w].begin,
             (size_t)(s->writes[w].end - s->writes[w].begin));
    }
  }
  rlx_cpu_pool_destroy(f.pool);
  free(ref);
  free(fast);
  rlx_exec_destroy(e);
  return ok;
}

/* Every fast-kind step taken, and at least `min_fast` of them. */
#define CHECK_STEPS(g, threads, range, min_fast)                                           \
  do {                                                                                     \
    step_stats st_;                                                                        \
    CHECK(compare_steps((g), (threads), (range), &st_));                                   \
    CHECK_MSG(st_.declined == 0, "%d fast-kind steps declined", st_.declined);             \
    CHECK_MSG(st_.fast >= (min_fast), "only %d fast steps", st_.fast);                     \
  } while (0)

static rlx_tensor in_f32(rlx_graph* g, const char* name, int32_t rank, const int64_t* shape) {
  rlx_tensor t = RLX_NONE;
  rlx_graph_add_input(g, name, RLX_F32, shape, rank, &t);
  return t;
}

/* ---- matmul */

typedef struct mm_shape {
  int32_t ra, rb;
  int64_t a[4], b[4];
  int ta, tb;
} mm_shape;

TEST(fast_matmul_steps) {
  test_seed(21);
  static const mm_shape cases[] = {
      {2, 2, {1, 1}, {1, 1}, 0, 0},
      {2, 2, {7, 13}, {13, 5}, 0, 0},
      {2, 2, {13, 7}, {13, 5}, 1, 0},
      {2, 2, {7, 13}, {5, 13}, 0, 1},
      {2, 2, {13, 7}, {5, 13}, 1, 1},
      {2, 2, {1, 37}, {37, 29}, 0, 0},   /* a row vector (decode) */
      {2, 2, {1, 37}, {29, 37}, 0, 1},
      {2, 2, {45, 1}, {1, 31}, 0, 0},    /* K = 1: outer product */
      {3, 2, {3, 17, 19}, {19, 23}, 0, 0},
      {4, 3, {2, 3, 9, 11}, {3, 11, 6}, 0, 0},
      {4, 4, {2, 1, 9, 11}, {1, 3, 6, 9}, 1, 1},
      {3, 3, {5, 64, 33}, {5, 33, 70}, 0, 0},
      {2, 2, {130, 67}, {67, 101}, 0, 0},
  };
  for (int threads = 1; threads <= 2; threads++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      const mm_shape* m = &cases[c];
      rlx_graph* g = NULL;
      CHECK(rlx_graph_create(&g) == RLX_OK);
      rlx_tensor a = in_f32(g, "a", m->ra, m->a), b = in_f32(g, "b", m->rb, m->b), y;
      CHECK_OK_G(g, rlx_graph_add_matmul(g, a, b, m->ta, m->tb, &y));
      CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
      CHECK_STEPS(g, threads, 1.0, 1);
      rlx_graph_destroy(g);
    }
}

TEST(fast_matmul_bias_act_steps) {
  test_seed(22);
  for (int act = RLX_ACT_NONE; act < RLX_ACT_COUNT; act++) {
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      int64_t M = test_rand_int(1, 40), K = test_rand_int(1, 50), N = test_rand_int(1, 70);
      int tb = (int)test_rand_int(0, 1);
      int64_t as[2] = {M, K}, bs[2] = {tb ? N : K, tb ? K : N}, cs[1] = {N};
      rlx_graph* g = NULL;
      CHECK(rlx_graph_create(&g) == RLX_OK);
      rlx_tensor a = in_f32(g, "a", 2, as), b = in_f32(g, "b", 2, bs);
      rlx_tensor bias = with_bias ? in_f32(g, "bias", 1, cs) : RLX_NONE, y;
      CHECK_OK_G(g, rlx_graph_add_fused_matmul_bias_act(g, a, b, bias, 0, tb,
                                                        (rlx_activation)act, &y));
      CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
      /* Exact inputs: the result isolates the epilogue (bias, activation). */
      CHECK_STEPS(g, 2, -1.0, 1);
      /* General inputs, for the activations that do not magnify rounding. */
      if (act != RLX_ACT_LOG && act != RLX_ACT_RSQRT && act != RLX_ACT_TAN && act != RLX_ACT_ROUND)
        CHECK_STEPS(g, 2, 1.0, 1);
      rlx_graph_destroy(g);
    }
  }
}

/* ---- elementwise */

TEST(fast_binary_steps) {
  test_seed(31);
  /* out [5, 7, 19]; b broadcast in every supported pattern. */
  static const int64_t a_shape[3] = {5, 7, 19};
  static const struct {
    int32_t rank;
    int64_t shape[3];
  } b_shapes[] = {
      {3, {5, 7, 19}}, {1, {19}}, {1, {1}}, {2, {7, 19}}, {3, {5, 1, 19}},
      {3, {5, 7, 1}},  {2, {7, 1}}, {3, {1, 7, 1}},
  };
  for (int op = 0; op < RLX_BIN_COUNT; op++)
    for (size_t bi = 0; bi < sizeof b_shapes / sizeof *b_shapes; bi++)
      for (int swap = 0; swap < 2; swap++) {
        rlx_graph* g = NULL;
        CHECK(rlx_graph_create(&g) == RLX_OK);
        rlx_tensor a = in_f32(g, "a", 3, a_shape);
        rlx_tensor b = in_f32(g, "b", b_shapes[bi].rank, b_shapes[bi].shape), y;
        if (op == RLX_BIN_POW) { /* positive bases: real powers, not NaN */
          rlx_tensor ea, eb;
          CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_EXP, a, &ea));
          CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_EXP, b, &eb));
          a = ea, b = eb;
        }
        CHECK_OK_G(g, rlx_graph_add_binary(g, (rlx_binary_op)op, swap ? b : a, swap ? a : b, &y));
        CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
        CHECK_STEPS(g, 2, 3.0, 1);
        fill_specials = 1;
        CHECK_STEPS(g, 2, 3.0, 1);
        fill_specials = 0;
        rlx_graph_destroy(g);
      }
}

TEST(fast_unary_steps) {
  test_seed(32);
  static const int64_t sizes[] = {1, 15, 16, 17, 100, 70001};
  for (int act = RLX_ACT_RELU; act < RLX_ACT_COUNT; act++)
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
      for (int wide = 0; wide < 2; wide++) {
        if (sizes[si] > 1000 && wide) continue;
        rlx_graph* g = NULL;
        CHECK(rlx_graph_create(&g) == RLX_OK);
        int64_t shape[2] = {1, sizes[si]};
        rlx_tensor x = in_f32(g, "x", 2, shape), y;
        CHECK_OK_G(g, rlx_graph_add_activation(g, (rlx_activation)act, x, &y));
        CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
        /* wide: values up to +-120 exercise exp overflow/underflow, tanh
         * saturation, log/sqrt of negatives (NaN on both sides). */
        CHECK_STEPS(g, 2, wide ? 120.0 : 2.0, 1);
        fill_specials = 1;
        CHECK_STEPS(g, 2, 2.0, 1);
        fill_specials = 0;
        rlx_graph_destroy(g);
      }
}

TEST(fast_elementwise_in_place_and_strided) {
  test_seed(33);
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  int64_t xs[3] = {6, 9, 35}, bs[1] = {35};
  rlx_tensor x = in_f32(g, "x", 3, xs), b = in_f32(g, "b", 1, bs), t1, t2, t3, t4, tt, y;
  /* t1 dies at t2, t2 at t3...: the planner may run these in place. */
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_MUL, x, x, &t1));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_SIGMOID, t1, &t2));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, t2, b, &t3));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_NEG, t3, &t4));
  /* A transposed operand: a strided inner dim. */
  int32_t perm[3] = {0, 2, 1};
  CHECK_OK_G(g, rlx_graph_add_transpose(g, t4, perm, 3, &tt));
  rlx_tensor xt;
  CHECK_OK_G(g, rlx_graph_add_transpose(g, x, perm, 3, &xt));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_SUB, tt, xt, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  step_stats st;
  CHECK(compare_steps(g, 2, 2.0, &st));
  CHECK(st.declined == 0 && st.fast >= 5);
  printf("  in-place elementwise steps: %d\n", st.in_place);
  rlx_graph_destroy(g);
}

/* ---- softmax / norms */

TEST(fast_softmax_steps) {
  test_seed(41);
  static const int64_t cols[] = {1, 5, 16, 17, 100, 1000, 4099};
  for (int log_sm = 0; log_sm < 2; log_sm++)
    for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) {
      rlx_graph* g = NULL;
      CHECK(rlx_graph_create(&g) == RLX_OK);
      int64_t shape[3] = {3, cols[c] > 1000 ? 2 : 11, cols[c]};
      rlx_tensor x = in_f32(g, "x", 3, shape), y;
      if (log_sm)
        CHECK_OK_G(g, rlx_graph_add_log_softmax(g, x, -1, &y));
      else
        CHECK_OK_G(g, rlx_graph_add_softmax(g, x, 2, &y));
      CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
      CHECK_STEPS(g, 2, 30.0, 1);
      fill_specials = 1;
      CHECK_STEPS(g, 2, 30.0, 1);
      fill_specials = 0;
      rlx_graph_destroy(g);
    }
}

TEST(fast_norm_steps) {
  test_seed(42);
  static const int64_t cols[] = {1, 7, 16, 33, 768};
  for (size_t c = 0; c < sizeof cols / sizeof *cols; c++) {
    int64_t xs[3] = {4, 5, cols[c]}, gs[1] = {cols[c]}, gs2[2] = {5, cols[c]};
    for (int variant = 0; variant < 9; variant++) {
      rlx_graph* g = NULL;
      CHECK(rlx_graph_create(&g) == RLX_OK);
      rlx_tensor x = in_f32(g, "x", 3, xs), y, sum = RLX_NONE;
      rlx_tensor gamma = in_f32(g, "gamma", 1, gs), beta = in_f32(g, "beta", 1, gs);
      switch (variant) {
        case 0: CHECK_OK_G(g, rlx_graph_add_layer_norm(g, x, gamma, beta, 2, 1e-5f, &y)); break;
        case 1: CHECK_OK_G(g, rlx_graph_add_layer_norm(g, x, RLX_NONE, RLX_NONE, 2, 1e-3f, &y)); break;
        case 2: {
          rlx_tensor g2 = in_f32(g, "g2", 2, gs2);
          CHECK_OK_G(g, rlx_graph_add_layer_norm(g, x, g2, RLX_NONE, 1, 1e-5f, &y));
          break;
        }
        case 3: CHECK_OK_G(g, rlx_graph_add_rms_norm(g, x, gamma, 1e-6f, &y)); break;
        case 4: CHECK_OK_G(g, rlx_graph_add_rms_norm(g, x, RLX_NONE, 1e-6f, &y)); break;
        default: {
          rlx_tensor r = in_f32(g, "r", 3, xs);
          rlx_tensor bias = (variant & 1) ? in_f32(g, "bias", 1, gs) : RLX_NONE;
          if (variant < 7)
            CHECK_OK_G(g, rlx_graph_add_fused_residual_layer_norm(g, x, r, bias, gamma, beta,
                                                                  1e-5f, &y, &sum));
          else
            CHECK_OK_G(g, rlx_graph_add_fused_residual_rms_norm(g, x, r, bias, gamma, 1e-5f, &y,
                                                                &sum));
          break;
        }
      }
      rlx_tensor outs[2] = {y, sum};
      CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, sum == RLX_NONE ? 1 : 2));
      CHECK_STEPS(g, 2, 2.0, 1);
      rlx_graph_destroy(g);
    }
  }
}

/* ---- attention */

typedef struct attn_case {
  int64_t B, H, Hkv, Sq, Sk, D;
  rlx_layout layout;
  rlx_mask_kind mask;
  int32_t window;
  float softcap;
  int full_mask; /* mask tensor [B, H, Sq, Sk] instead of [Sq, Sk] */
  rlx_dtype mask_dtype;
} attn_case;

static rlx_status build_attention(rlx_graph* g, const attn_case* c, rlx_tensor* out) {
  int bshd = c->layout == RLX_LAYOUT_BSHD;
  int64_t qs[4] = {c->B, bshd ? c->Sq : c->H, bshd ? c->H : c->Sq, c->D};
  int64_t ks[4] = {c->B, bshd ? c->Sk : c->Hkv, bshd ? c->Hkv : c->Sk, c->D};
  rlx_tensor q = in_f32(g, "q", 4, qs), k = in_f32(g, "k", 4, ks), v = in_f32(g, "v", 4, ks);
  rlx_tensor mask = RLX_NONE;
  if (c->mask == RLX_MASK_CUSTOM || c->mask == RLX_MASK_BIAS) {
    int64_t full[4] = {c->B, c->H, c->Sq, c->Sk}, small[2] = {c->Sq, c->Sk};
    rlx_status s = rlx_graph_add_input(g, "mask", c->mask_dtype, c->full_mask ? full : small,
                                       c->full_mask ? 4 : 2, &mask);
    if (s != RLX_OK) return s;
  }
  rlx_attention_desc d;
  memset(&d, 0, sizeof d);
  d.num_heads = (int32_t)c->H;
  d.num_kv_heads = (int32_t)c->Hkv;
  d.head_dim = (int32_t)c->D;
  d.layout = c->layout;
  d.mask = c->mask;
  d.window = c->window;
  d.softcap = c->softcap;
  return rlx_graph_add_attention(g, q, k, v, mask, &d, out);
}

TEST(fast_attention_steps) {
  test_seed(51);
  static const attn_case cases[] = {
      {2, 4, 4, 13, 13, 16, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0, 0, RLX_F32},
      {2, 4, 4, 13, 13, 16, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0, RLX_F32},
      {1, 4, 2, 20, 37, 8, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0, RLX_F32},
      {2, 4, 1, 1, 41, 64, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0, RLX_F32}, /* decode, MQA */
      {1, 2, 2, 37, 20, 24, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0, RLX_F32}, /* rows see nothing */
      {2, 3, 3, 33, 33, 80, RLX_LAYOUT_BHSD, RLX_MASK_SLIDING, 5, 0, 0, RLX_F32},
      {1, 2, 1, 19, 40, 16, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING, 9, 0, 0, RLX_F32},
      {2, 2, 2, 17, 23, 32, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 0, RLX_BOOL},
      {2, 2, 2, 17, 23, 32, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0, 1, RLX_BOOL},
      {2, 2, 1, 9, 30, 16, RLX_LAYOUT_BSHD, RLX_MASK_CUSTOM, 0, 0, 0, RLX_F32},
      {2, 4, 2, 9, 30, 16, RLX_LAYOUT_BSHD, RLX_MASK_BIAS, 0, 0, 1, RLX_F32},
      {1, 2, 2, 16, 16, 16, RLX_LAYOUT_BHSD, RLX_MASK_BIAS, 0, 0, 0, RLX_F32},
      {2, 2, 2, 21, 21, 48, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 5.0f, 0, RLX_F32}, /* softcap */
      {1, 1, 1, 3, 1, 1, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0, 0, RLX_F32},
      {1, 2, 2, 70, 70, 128, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0, RLX_F32},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    rlx_graph* g = NULL;
    CHECK(rlx_graph_create(&g) == RLX_OK);
    rlx_tensor y;
    CHECK_OK_G(g, build_attention(g, &cases[i], &y));
    CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
    /* Scores of magnitude ~D: the softmax is peaked, as trained models' are. */
    CHECK_STEPS(g, 2, 1.5, 1);
    rlx_graph_destroy(g);
  }
}

/* ------------------------------------------------------------------ end to end */

/* x -> LN -> qkv (fused bias) -> attention -> proj + residual -> RMS -> MLP. */
static rlx_status build_block(rlx_graph* g, int64_t B, int64_t S, int64_t H, int64_t Dh,
                              rlx_tensor* out) {
  int64_t C = H * Dh;
  int64_t xs[3] = {B, S, C}, cs[1] = {C}, ws[2] = {C, C}, w4[2] = {C, 4 * C}, w4b[2] = {4 * C, C};
  int64_t b4[1] = {4 * C};
  rlx_tensor x = in_f32(g, "x", 3, xs), ln_g = in_f32(g, "ln_g", 1, cs), ln_b = in_f32(g, "ln_b", 1, cs);
  rlx_tensor wq = in_f32(g, "wq", 2, ws), wk = in_f32(g, "wk", 2, ws), wv = in_f32(g, "wv", 2, ws);
  rlx_tensor bq = in_f32(g, "bq", 1, cs), wo = in_f32(g, "wo", 2, ws);
  rlx_tensor w1 = in_f32(g, "w1", 2, w4), b1 = in_f32(g, "b1", 1, b4), w2 = in_f32(g, "w2", 2, w4b);
  rlx_tensor h, q, k, v, a, o, r, n, sum, m1, m2, y;
  int64_t hs[4] = {B, S, H, Dh};
  rlx_status s;
#define T(expr) if ((s = (expr)) != RLX_OK) return s
  T(rlx_graph_add_layer_norm(g, x, ln_g, ln_b, 2, 1e-5f, &h));
  T(rlx_graph_add_fused_matmul_bias_act(g, h, wq, bq, 0, 0, RLX_ACT_NONE, &q));
  T(rlx_graph_add_matmul(g, h, wk, 0, 1, &k));
  T(rlx_graph_add_matmul(g, h, wv, 0, 0, &v));
  T(rlx_graph_add_reshape(g, q, hs, 4, &q));
  T(rlx_graph_add_reshape(g, k, hs, 4, &k));
  T(rlx_graph_add_reshape(g, v, hs, 4, &v));
  rlx_attention_desc d;
  memset(&d, 0, sizeof d);
  d.num_heads = (int32_t)H;
  d.head_dim = (int32_t)Dh;
  d.layout = RLX_LAYOUT_BSHD;
  d.mask = RLX_MASK_CAUSAL;
  T(rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &a));
  T(rlx_graph_add_reshape(g, a, xs, 3, &a));
  T(rlx_graph_add_matmul(g, a, wo, 0, 0, &o));
  T(rlx_graph_add_fused_residual_rms_norm(g, o, x, RLX_NONE, ln_g, 1e-6f, &n, &sum));
  T(rlx_graph_add_fused_matmul_bias_act(g, n, w1, b1, 0, 0, RLX_ACT_GELU_APPROX, &m1));
  T(rlx_graph_add_matmul(g, m1, w2, 0, 0, &m2));
  T(rlx_graph_add_binary(g, RLX_BIN_ADD, m2, sum, &r));
  T(rlx_graph_add_softmax(g, r, -1, &y));
#undef T
  *out = y;
  return RLX_OK;
}

static double* run_block(rlx_graph* g, int reference, int64_t n_out) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = reference;
  o.threads = 2;
  rlx_exec* e = NULL;
  if (rlx_compile(g, "cpu", &o, &e) != RLX_OK) {
    fprintf(stderr, "compile: %s\n", rlx_graph_last_error(g));
    return NULL;
  }
  test_seed(77); /* the same inputs for both executables */
  const rlx_graph* lg = NULL;
  rlx_exec_graph(e, &lg);
  int ok = 1;
  for (int32_t i = 0; ok && lg && i < lg->n_nodes; i++) {
    const rlx_node* nd = &lg->nodes[i];
    if (nd->op != RLX_OP_INPUT) continue;
    const rlx_type* t = rlx_tensor_type(lg, nd->out[0]);
    int64_t n = rlx_type_numel(t);
    float* buf = malloc((size_t)n * sizeof(float));
    if (!buf) return NULL;
    test_fill_f32(buf, n, -0.5, 0.5);
    ok = rlx_exec_set_input(e, nd->a.name, RLX_F32, t->shape, t->rank, buf,
                            (size_t)n * sizeof(float)) == RLX_OK;
    free(buf);
  }
  double* out = malloc((size_t)n_out * sizeof(double));
  float* f = malloc((size_t)n_out * sizeof(float));
  ok = ok && out && f && rlx_exec_run(e) == RLX_OK &&
       rlx_exec_read_output(e, 0, RLX_F32, f, (size_t)n_out * sizeof(float)) == RLX_OK;
  if (!ok) fprintf(stderr, "run: %s\n", rlx_exec_last_error(e));
  for (int64_t i = 0; ok && i < n_out; i++) out[i] = f[i];
  free(f);
  rlx_exec_destroy(e);
  if (!ok) {
    free(out);
    return NULL;
  }
  return out;
}

TEST(fast_matches_reference_end_to_end) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_tensor y;
  int64_t B = 2, S = 19, H = 4, Dh = 16;
  CHECK_OK_G(g, build_block(g, B, S, H, Dh, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  int64_t n = B * S * H * Dh;
  double* ref = run_block(g, 1, n);
  double* fast = run_block(g, 0, n);
  CHECK(ref && fast);
  double e = test_rel_l2(fast, ref, n);
  free(ref);
  free(fast);
  rlx_graph_destroy(g);
  CHECK_MSG(e <= F32_TOL, "end-to-end rel err %g", e);
}

/* ---- conv */

/* Forward conv steps of both layouts: 1-3-D, strides, asymmetric pads,
 * dilation, groups, depthwise, pointwise (no columns), bias, residual and
 * activation, against the reference. */
TEST(fast_conv_steps) {
  test_seed(31);
  for (int v = 0; v < 24; v++) {
    int ns = 1 + v % 3, last = (v / 3) % 2, flavor = v / 6;
    int64_t k[3], st[3], dil[3], pads[6], sp[3];
    for (int i = 0; i < ns; i++) {
      k[i] = flavor == 3 ? 1 : test_rand_int(1, 3);
      st[i] = flavor == 3 ? 1 : test_rand_int(1, 2);
      dil[i] = flavor == 1 ? test_rand_int(1, 2) : 1;
      pads[i] = flavor == 1 ? test_rand_int(0, k[i] - 1) : 0;
      pads[ns + i] = flavor == 1 ? test_rand_int(0, k[i]) : 0;
      sp[i] = test_rand_int(1, ns == 3 ? 5 : 12) + dil[i] * (k[i] - 1);
    }
    int64_t groups = flavor == 2 ? test_rand_int(1, 4) : 1, N = test_rand_int(1, 3);
    int64_t C = groups * test_rand_int(1, 5), OC = groups * test_rand_int(1, 6);
    if (flavor == 2 && v % 2) { C = groups = test_rand_int(2, 6); OC = C; } /* depthwise */
    int64_t xs[5], ws[5] = {OC, C / groups}, bs[1] = {OC};
    xs[0] = N;
    xs[last ? ns + 1 : 1] = C;
    for (int i = 0; i < ns; i++) {
      xs[last ? 1 + i : 2 + i] = sp[i];
      ws[2 + i] = k[i];
    }
    rlx_graph* g = NULL;
    CHECK(rlx_graph_create(&g) == RLX_OK);
    rlx_tensor x = in_f32(g, "x", ns + 2, xs), w = in_f32(g, "w", ns + 2, ws), y;
    rlx_tensor bias = flavor >= 2 ? in_f32(g, "bias", 1, bs) : RLX_NONE;
    rlx_conv_layout lay = last ? RLX_CONV_CHANNELS_LAST : RLX_CONV_CHANNELS_FIRST;
    CHECK_OK_G(g, rlx_graph_add_conv(g, x, w, bias, RLX_NONE, ns, st, pads, dil, (int32_t)groups,
                                     flavor >= 2 ? RLX_ACT_RELU : RLX_ACT_NONE, lay, &y));
    if (flavor == 3) { /* a residual shaped like y */
      rlx_dtype dt;
      int32_t yr;
      int64_t ys[RLX_MAX_RANK];
      CHECK(rlx_graph_tensor_type(g, y, &dt, &yr, ys) == RLX_OK);
      rlx_tensor r = in_f32(g, "r", yr, ys);
      CHECK_OK_G(g, rlx_graph_add_conv(g, x, w, bias, r, ns, st, pads, dil, (int32_t)groups,
                                       RLX_ACT_SILU, lay, &y));
    }
    CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
    CHECK_STEPS(g, 2, 1.0, 1);
    rlx_graph_destroy(g);
  }
}

/* ConvTranspose steps (GEMM + col2im) of both layouts: 1-3-D, stride with
 * output_padding, dilation, asymmetric pads, groups, bias and activation. */
TEST(fast_conv_transpose_steps) {
  test_seed(32);
  for (int v = 0; v < 12; v++) {
    int ns = 1 + v % 3, last = (v / 3) % 2, flavor = v / 6;
    int64_t k[3], st[3], dil[3], pads[6], op[3], sp[3];
    for (int i = 0; i < ns; i++) {
      k[i] = test_rand_int(1, 3);
      st[i] = test_rand_int(1, 3);
      dil[i] = flavor ? test_rand_int(1, 2) : 1;
      op[i] = test_rand_int(0, (st[i] > dil[i] ? st[i] : dil[i]) - 1);
      sp[i] = test_rand_int(1, ns == 3 ? 4 : 9);
      int64_t full = (sp[i] - 1) * st[i] + dil[i] * (k[i] - 1) + 1;
      pads[i] = flavor && full > 2 ? test_rand_int(0, 1) : 0;
      pads[ns + i] = flavor && full > 2 ? test_rand_int(0, 1) : 0;
    }
    int64_t groups = flavor ? test_rand_int(1, 3) : 1, N = test_rand_int(1, 2);
    int64_t C = groups * test_rand_int(1, 4), OC = groups * test_rand_int(1, 4);
    int64_t xs[5], ws[5] = {C, OC / groups}, bs[1] = {OC};
    xs[0] = N;
    xs[last ? ns + 1 : 1] = C;
    for (int i = 0; i < ns; i++) {
      xs[last ? 1 + i : 2 + i] = sp[i];
      ws[2 + i] = k[i];
    }
    rlx_graph* g = NULL;
    CHECK(rlx_graph_create(&g) == RLX_OK);
    rlx_tensor x = in_f32(g, "x", ns + 2, xs), w = in_f32(g, "w", ns + 2, ws), y;
    rlx_tensor bias = flavor ? in_f32(g, "bias", 1, bs) : RLX_NONE;
    CHECK_OK_G(g, rlx_graph_add_conv_transpose(
                      g, x, w, bias, RLX_NONE, ns, st, pads, dil, op, (int32_t)groups,
                      flavor ? RLX_ACT_TANH : RLX_ACT_NONE,
                      last ? RLX_CONV_CHANNELS_LAST : RLX_CONV_CHANNELS_FIRST, &y));
    CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
    CHECK_STEPS(g, 2, 1.0, 1);
    rlx_graph_destroy(g);
  }
}

/* Runs this test binary again with RLX_CPU_SIMD=level; 1 if it passed. */
static int rerun_at_level(const char* level) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return 1; /* cannot find ourselves: nothing to add */
  exe[n] = '\0';
  setenv("RLX_CPU_SIMD", level, 1);
  char* args[] = {exe, NULL};
  pid_t pid;
  int status = 0;
  fflush(stdout);
  if (posix_spawn(&pid, exe, NULL, NULL, args, environ) != 0) return 0;
  if (waitpid(pid, &status, 0) < 0) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void) {
  /* These cases check the fast path of each single-op step; fused regions
   * have their own cases in test_fusion. */
  setenv("RLX_NO_FUSION", "1", 1);
  const char* forced = getenv("RLX_CPU_SIMD");
  int level = rlx_cpu_simd_level();
  printf("SIMD level %d (%s)%s%s\n", level, level == 2 ? "avx512" : level == 1 ? "avx2" : "portable",
         forced ? ", forced by RLX_CPU_SIMD=" : "", forced ? forced : "");
  RUN(pool_covers_every_index_once);
  RUN(sgemm_matches_double_loop);
  RUN(blas_sgemm_matches_double_loop);
  RUN(fast_matmul_steps);
  RUN(fast_matmul_bias_act_steps);
  RUN(fast_binary_steps);
  RUN(fast_unary_steps);
  RUN(fast_elementwise_in_place_and_strided);
  RUN(fast_softmax_steps);
  RUN(fast_norm_steps);
  RUN(fast_attention_steps);
  RUN(fast_conv_steps);
  RUN(fast_conv_transpose_steps);
  RUN(fast_matches_reference_end_to_end);
  int failed = test_summary();
  /* Every lower SIMD level this CPU can run gets the same tests. */
  if (!forced) {
    if (level > 1 && !rerun_at_level("avx2")) failed = 1;
    if (level > 0 && !rerun_at_level("none")) failed = 1;
  }
  return failed;
}
