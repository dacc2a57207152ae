/* Blocked, packed, SIMD f32 GEMM (the BLIS/Goto structure).
 *
 * C[M,N] = A[M,K] * B[K,N], row-major, either operand possibly transposed.
 * Loops, outermost first:
 *   jc over N in NC columns   (a KC x NC panel of B is packed: lives in L2/L3)
 *   pc over K in KC           (the first K block overwrites C, later ones add)
 *   ic over M in MC rows      (an MC x KC block of A is packed: lives in L2)
 *   jr over NR columns, ir over MR rows: the micro-kernel, MR x NR
 *     accumulators in registers, one broadcast of A and NR/16 loads of B per
 *     FMA row.
 * Packing copies panels into contiguous, aligned buffers with zero padding,
 * so the micro-kernel never sees an edge or a transpose; partial tiles are
 * computed into a small scratch tile and copied out.
 *
 * The SIMD kernels are compiled per function with target attributes and
 * chosen at run time (__builtin_cpu_supports), so one binary runs anywhere;
 * -DRLX_NO_SIMD builds only the portable kernels (to test them).
 * Threads take disjoint rectangles of C (split along the longer of M and N),
 * each packing its own panels: no synchronisation inside the GEMM.
 * With at most SMALL_M rows (or columns) the product is a few matrix-vector
 * products: B is streamed once without packing (see "few rows" below). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "backends/cpu/cpu.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(RLX_NO_SIMD)
#include <immintrin.h>
#define RLX_GEMM_X86 1
#endif

typedef void (*ukernel_fn)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                           int accumulate);

typedef struct gemm_kernel {
  int mr, nr;          /* register tile */
  int64_t mc, kc, nc;  /* cache blocks (mc a multiple of mr, nc of nr) */
  ukernel_fn fn;
} gemm_kernel;

/* ------------------------------------------------------------ micro-kernels */

/* Portable fallback: a 4x8 tile the compiler can keep in registers (and
 * vectorise with SSE on x86-64). */
#define SCALAR_MR 4
#define SCALAR_NR 8
static void ukernel_scalar(int64_t kc, const float* a, const float* b, float* c, int64_t ldc,
                           int accumulate) {
  float acc[SCALAR_MR][SCALAR_NR] = {{0}};
  for (int64_t k = 0; k < kc; k++) {
    for (int i = 0; i < SCALAR_MR; i++)
      for (int j = 0; j < SCALAR_NR; j++) acc[i][j] += a[i] * b[j];
    a += SCALAR_MR;
    b += SCALAR_NR;
  }
  for (int i = 0; i < SCALAR_MR; i++)
    for (int j = 0; j < SCALAR_NR; j++)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}

#ifdef RLX_GEMM_X86
/* AVX-512: 12 rows x 32 columns = 24 zmm accumulators, 2 loads of B and 12
 * broadcasts of A per k step (the broadcasts fold into the FMAs as memory
 * operands), leaving registers for the B vectors. */
#ifndef AVX512_MR
#define AVX512_MR 12
#define AVX512_NV 2
#endif

#define AVX512_NR (16 * AVX512_NV)
#ifndef AVX512_PF_A
#define AVX512_PF_A 192
#endif
__attribute__((target("avx512f"))) static void ukernel_avx512(int64_t kc, const float* a,
                                                              const float* b, float* c,
                                                              int64_t ldc, int accumulate) {
  __m512 acc[AVX512_MR][AVX512_NV];
#pragma GCC unroll 16
  for (int i = 0; i < AVX512_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < AVX512_NV; j++) acc[i][j] = _mm512_setzero_ps();
  /* The C tile is touched only at the end: start fetching it now. */
#pragma GCC unroll 16
  for (int i = 0; i < AVX512_MR; i++) {
    _mm_prefetch((const char*)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char*)(c + i * ldc + AVX512_NR - 1), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < kc; k++) {
    __m512 bv[AVX512_NV];
    /* A streams from L2; B stays in L1 across the row panels. */
    _mm_prefetch((const char*)(a + AVX512_PF_A), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int j = 0; j < AVX512_NV; j++) bv[j] = _mm512_load_ps(b + 16 * j);
#pragma GCC unroll 16
    for (int i = 0; i < AVX512_MR; i++) {
      __m512 av = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
      for (int j = 0; j < AVX512_NV; j++) acc[i][j] = _mm512_fmadd_ps(av, bv[j], acc[i][j]);
    }
    a += AVX512_MR;
    b += AVX512_NR;
  }
#pragma GCC unroll 16
  for (int i = 0; i < AVX512_MR; i++) {
#pragma GCC unroll 4
    for (int j = 0; j < AVX512_NV; j++) {
      float* p = c + i * ldc + 16 * j;
      __m512 v = acc[i][j];
      if (accumulate) v = _mm512_add_ps(v, _mm512_loadu_ps(p));
      _mm512_storeu_ps(p, v);
    }
  }
}

/* AVX2 + FMA: 6 rows x 16 columns = 12 ymm accumulators (of 16 registers). */
#define AVX2_MR 6
#define AVX2_NV 2
#define AVX2_NR (8 * AVX2_NV)
__attribute__((target("avx2,fma"))) static void ukernel_avx2(int64_t kc, const float* a,
                                                             const float* b, float* c,
                                                             int64_t ldc, int accumulate) {
  __m256 acc[AVX2_MR][AVX2_NV];
#pragma GCC unroll 8
  for (int i = 0; i < AVX2_MR; i++)
#pragma GCC unroll 4
    for (int j = 0; j < AVX2_NV; j++) acc[i][j] = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; k++) {
    __m256 bv[AVX2_NV];
#pragma GCC unroll 4
    for (int j = 0; j < AVX2_NV; j++) bv[j] = _mm256_load_ps(b + 8 * j);
#pragma GCC unroll 8
    for (int i = 0; i < AVX2_MR; i++) {
      __m256 av = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 4
      for (int j = 0; j < AVX2_NV; j++) acc[i][j] = _mm256_fmadd_ps(av, bv[j], acc[i][j]);
    }
    a += AVX2_MR;
    b += AVX2_NR;
  }
#pragma GCC unroll 8
  for (int i = 0; i < AVX2_MR; i++) {
#pragma GCC unroll 4
    for (int j = 0; j < AVX2_NV; j++) {
      float* p = c + i * ldc + 8 * j;
      __m256 v = acc[i][j];
      if (accumulate) v = _mm256_add_ps(v, _mm256_loadu_ps(p));
      _mm256_storeu_ps(p, v);
    }
  }
}
#endif

static pthread_once_t simd_once = PTHREAD_ONCE_INIT;
static int simd_level_value; /* written once under simd_once */

static void simd_detect(void) {
  int level = 0;
#ifdef RLX_GEMM_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) level = 1;
  if (level == 1 && __builtin_cpu_supports("avx512f")) level = 2;
#endif
  if (rlx_env_is(RLX_ENV_CPU_SIMD, "avx2") && level > 1) level = 1;
  if (rlx_env_is(RLX_ENV_CPU_SIMD, "none")) level = 0;
  simd_level_value = level;
}

int rlx_cpu_simd_level(void) {
  pthread_once(&simd_once, simd_detect);
  return simd_level_value;
}

/* The kernel of each SIMD level with its cache blocks (other blockings are
 * measured in bench/kernels/gemm.c); NULL where this build has none. */
static const gemm_kernel* kernel_at(int level) {
  static const gemm_kernel scalar = {SCALAR_MR, SCALAR_NR, 64, 256, 1024, ukernel_scalar};
#ifdef RLX_GEMM_X86
  static const gemm_kernel avx512 = {AVX512_MR, AVX512_NR, 144, 256, 2048, ukernel_avx512};
  static const gemm_kernel avx2 = {AVX2_MR, AVX2_NR, 96, 256, 1024, ukernel_avx2};
  if (level == 2) return &avx512;
  if (level == 1) return &avx2;
#endif
  return level == 0 ? &scalar : NULL;
}

/* The widest kernel this CPU runs. */
static const gemm_kernel* choose_kernel(void) { return kernel_at(rlx_cpu_simd_level()); }

/* ------------------------------------------------------------------ packing */

typedef struct gemm_args {
  int a_trans, b_trans;
  int64_t M, N, K;
  const float* A;
  int64_t lda;
  const float* B;
  int64_t ldb;
  float* C;
  int64_t ldc;
} gemm_args;

/* Element (m, k) of A and (k, n) of B, honouring the transposes. */
static inline const float* a_at(const gemm_args* g, int64_t m, int64_t k) {
  return g->a_trans ? g->A + k * g->lda + m : g->A + m * g->lda + k;
}
static inline const float* b_at(const gemm_args* g, int64_t k, int64_t n) {
  return g->b_trans ? g->B + n * g->ldb + k : g->B + k * g->ldb + n;
}

/* dst[k * ldd + r] = src[r * lds + k] for r < rows, k < kc; rows [rows, ldd)
 * of each dst group are zero. The transposing half of packing: A stored
 * [M, K] and B stored [N, K] both need it. */
static void pack_transposed(const float* src, int64_t lds, int64_t rows, int64_t kc, float* dst,
                            int64_t ldd) {
  int64_t r = 0;
#ifdef RLX_GEMM_X86
  /* 4x4 blocks through SSE registers (baseline on x86-64): 8 memory
   * operations per 16 elements instead of 32. */
  for (; r + 4 <= rows; r += 4) {
    const float* s0 = src + r * lds;
    const float* s1 = s0 + lds;
    const float* s2 = s1 + lds;
    const float* s3 = s2 + lds;
    int64_t k = 0;
    for (; k + 4 <= kc; k += 4) {
      __m128 x0 = _mm_loadu_ps(s0 + k), x1 = _mm_loadu_ps(s1 + k);
      __m128 x2 = _mm_loadu_ps(s2 + k), x3 = _mm_loadu_ps(s3 + k);
      _MM_TRANSPOSE4_PS(x0, x1, x2, x3);
      float* d = dst + k * ldd + r;
      _mm_storeu_ps(d, x0);
      _mm_storeu_ps(d + ldd, x1);
      _mm_storeu_ps(d + 2 * ldd, x2);
      _mm_storeu_ps(d + 3 * ldd, x3);
    }
    for (; k < kc; k++) {
      float* d = dst + k * ldd + r;
      d[0] = s0[k];
      d[1] = s1[k];
      d[2] = s2[k];
      d[3] = s3[k];
    }
  }
#endif
  for (; r < rows; r++) {
    const float* s = src + r * lds;
    for (int64_t k = 0; k < kc; k++) dst[k * ldd + r] = s[k];
  }
  if (rows < ldd)
    for (int64_t k = 0; k < kc; k++)
      for (int64_t i = rows; i < ldd; i++) dst[k * ldd + i] = 0.0f;
}

/* dst[k * ldd + j] = src[k * lds + j] for j < cols, zero for j in [cols, ldd). */
static void pack_direct(const float* src, int64_t lds, int64_t cols, int64_t kc, float* dst,
                        int64_t ldd) {
  for (int64_t k = 0; k < kc; k++) {
    const float* s = src + k * lds;
    float* d = dst + k * ldd;
    for (int64_t j = 0; j < cols; j++) d[j] = s[j];
    for (int64_t j = cols; j < ldd; j++) d[j] = 0.0f;
  }
}

/* Packs rows [m0, m0+mc) x cols [k0, k0+kc) of A as panels of mr rows:
 * panel p holds, for each k, its mr values of A[m][k] contiguously. Rows past
 * the edge are zero. */
static void pack_a(const gemm_args* g, int mr, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                   float* dst) {
  for (int64_t p = 0; p < mc; p += mr) {
    int64_t rows = mc - p < mr ? mc - p : mr;
    const float* src = a_at(g, m0 + p, k0);
    if (g->a_trans)
      pack_direct(src, g->lda, rows, kc, dst, mr); /* A stored [K, M] */
    else
      pack_transposed(src, g->lda, rows, kc, dst, mr);
    dst += kc * mr;
  }
}

/* Packs rows [k0, k0+kc) x cols [n0, n0+nc) of B as panels of nr columns:
 * panel p holds, for each k, its nr values of B[k][n] contiguously. */
static void pack_b(const gemm_args* g, int nr, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                   float* dst) {
  for (int64_t p = 0; p < nc; p += nr) {
    int64_t cols = nc - p < nr ? nc - p : nr;
    const float* src = b_at(g, k0, n0 + p);
    if (g->b_trans)
      pack_transposed(src, g->ldb, cols, kc, dst, nr); /* B stored [N, K] */
    else
      pack_direct(src, g->ldb, cols, kc, dst, nr);
    dst += kc * nr;
  }
}

/* ------------------------------------------------------------------ driver */

/* A partial tile: run the kernel into an aligned scratch tile, then copy the
 * valid rows x cols out. */
static void edge_tile(const gemm_kernel* kr, int64_t kc, const float* ap, const float* bp,
                      float* c, int64_t ldc, int64_t rows, int64_t cols, int accumulate,
                      float* tile) {
  kr->fn(kc, ap, bp, tile, kr->nr, 0);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + tile[i * kr->nr + j] : tile[i * kr->nr + j];
}

/* One MC x NC block of C against packed A (mc x kc) and B (kc x nc). */
static void macro_kernel(const gemm_kernel* kr, int64_t mc, int64_t nc, int64_t kc,
                         const float* apack, const float* bpack, float* c, int64_t ldc,
                         int accumulate, float* tile) {
  for (int64_t jr = 0; jr < nc; jr += kr->nr) {
    int64_t cols = nc - jr < kr->nr ? nc - jr : kr->nr;
    const float* bp = bpack + jr * kc;
    for (int64_t ir = 0; ir < mc; ir += kr->mr) {
      int64_t rows = mc - ir < kr->mr ? mc - ir : kr->mr;
      const float* ap = apack + ir * kc;
      float* ct = c + ir * ldc + jr;
      if (rows == kr->mr && cols == kr->nr)
        kr->fn(kc, ap, bp, ct, ldc, accumulate);
      else
        edge_tile(kr, kc, ap, bp, ct, ldc, rows, cols, accumulate, tile);
    }
  }
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Simple loops for when the pack buffers cannot be allocated: slow but
 * correct, and needing no memory. */
static void gemm_naive(const gemm_args* g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t m = m0; m < m1; m++)
    for (int64_t n = n0; n < n1; n++) {
      double s = 0.0;
      for (int64_t k = 0; k < g->K; k++) s += (double)*a_at(g, m, k) * (double)*b_at(g, k, n);
      g->C[m * g->ldc + n] = (float)s;
    }
}

/* C[m0:m1, n0:n1] on the calling thread. */
static void gemm_block(const gemm_kernel* kr, const gemm_args* g, int64_t m0, int64_t m1,
                       int64_t n0, int64_t n1) {
  int64_t M = m1 - m0, N = n1 - n0;
  if (M <= 0 || N <= 0) return;
  if (g->K == 0) {
    for (int64_t m = m0; m < m1; m++) memset(g->C + m * g->ldc + n0, 0, (size_t)N * sizeof(float));
    return;
  }
  int64_t kc_max = min64(kr->kc, g->K);
  int64_t mc_max = min64(kr->mc, round_up(M, kr->mr));
  int64_t nc_max = min64(kr->nc, round_up(N, kr->nr));
  size_t a_bytes = (size_t)(round_up(mc_max, kr->mr) * kc_max) * sizeof(float);
  size_t b_bytes = (size_t)(round_up(nc_max, kr->nr) * kc_max) * sizeof(float);
  size_t t_bytes = (size_t)(kr->mr * kr->nr) * sizeof(float);
  float* apack = aligned_alloc(64, round_up((int64_t)a_bytes, 64));
  float* bpack = aligned_alloc(64, round_up((int64_t)b_bytes, 64));
  float* tile = aligned_alloc(64, round_up((int64_t)t_bytes, 64));
  if (!apack || !bpack || !tile) {
    free(apack);
    free(bpack);
    free(tile);
    gemm_naive(g, m0, m1, n0, n1);
    return;
  }
  for (int64_t jc = n0; jc < n1; jc += kr->nc) {
    int64_t nc = min64(kr->nc, n1 - jc);
    for (int64_t pc = 0; pc < g->K; pc += kr->kc) {
      int64_t kc = min64(kr->kc, g->K - pc);
      pack_b(g, kr->nr, pc, kc, jc, nc, bpack);
      for (int64_t ic = m0; ic < m1; ic += kr->mc) {
        int64_t mc = min64(kr->mc, m1 - ic);
        pack_a(g, kr->mr, ic, mc, pc, kc, apack);
        macro_kernel(kr, mc, nc, kc, apack, bpack, g->C + ic * g->ldc + jc, g->ldc, pc > 0,
                     tile);
      }
    }
  }
  free(apack);
  free(bpack);
  free(tile);
}

/* Threads split C into `parts` rectangles along its longer side, in whole
 * register tiles. */
typedef struct gemm_job {
  const gemm_kernel* kr;
  const gemm_args* g;
  int split_n;
  int64_t unit; /* mr or nr */
} gemm_job;

static void gemm_part(void* ctx, int64_t begin, int64_t end) {
  const gemm_job* j = ctx;
  const gemm_args* g = j->g;
  int64_t lo = begin * j->unit, hi = end * j->unit;
  if (j->split_n) {
    gemm_block(j->kr, g, 0, g->M, lo, min64(hi, g->N));
  } else {
    gemm_block(j->kr, g, lo, min64(hi, g->M), 0, g->N);
  }
}

/* ------------------------------------------------------------ few rows */

/* With a handful of rows (decode: one token per sequence) packing B would
 * cost as much as the product and the register tile would be mostly empty.
 * These loops stream B once instead, for up to SMALL_M rows at a time, with
 * 16-float GCC vectors compiled per SIMD level like the micro-kernels. */
#define SMALL_M 4
#define SMALL_NB 512 /* columns per block: SMALL_M x SMALL_NB sums stay in L1 */

/* Functions returning 64-byte vectors are static and always inlined: no ABI. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float gv16 __attribute__((vector_size(64)));
#define GV_INLINE static inline __attribute__((always_inline))

GV_INLINE gv16 gv_load(const float* p) {
  gv16 v;
  memcpy(&v, p, sizeof v);
  return v;
}
GV_INLINE void gv_store(float* p, const gv16* v) { memcpy(p, v, sizeof *v); }

/* Rows of A to multiply (pointers to K contiguous values each); their
 * results go to c[r][n * c_cs]. */
typedef struct small_rows {
  const float* a[SMALL_M];
  int64_t n_rows;
  int64_t c_cs;
} small_rows;

/* C[r, n0:n1] = sum_k a_r[k] * B[k, n] with B stored [K, N]. */
GV_INLINE void small_bn_impl(const gemm_args* g, const small_rows* R, float* const* c, int64_t n0,
                             int64_t n1) {
  float acc[SMALL_M][SMALL_NB] __attribute__((aligned(64)));
  for (int64_t nb = n0; nb < n1; nb += SMALL_NB) {
    int64_t w = n1 - nb < SMALL_NB ? n1 - nb : SMALL_NB, wv = w / 16 * 16;
    for (int64_t r = 0; r < R->n_rows; r++) memset(acc[r], 0, (size_t)w * sizeof(float));
    for (int64_t k = 0; k < g->K; k++) {
      const float* b = g->B + k * g->ldb + nb;
      for (int64_t r = 0; r < R->n_rows; r++) {
        float a = R->a[r][k];
        float* ar = acc[r];
        for (int64_t j = 0; j < wv; j += 16) {
          gv16 v = gv_load(ar + j) + a * gv_load(b + j);
          gv_store(ar + j, &v);
        }
        for (int64_t j = wv; j < w; j++) ar[j] += a * b[j];
      }
    }
    for (int64_t r = 0; r < R->n_rows; r++) {
      if (R->c_cs == 1) {
        memcpy(c[r] + nb, acc[r], (size_t)w * sizeof(float));
      } else {
        for (int64_t j = 0; j < w; j++) c[r][(nb + j) * R->c_cs] = acc[r][j];
      }
    }
  }
}

/* C[r, n] = a_r . B[n, :] with B stored [N, K] (a Linear layer's weight). */
GV_INLINE void small_bt_impl(const gemm_args* g, const small_rows* R, float* const* c, int64_t n0,
                             int64_t n1) {
  int64_t K = g->K, kv = K / 32 * 32;
  for (int64_t n = n0; n < n1; n++) {
    const float* b = g->B + n * g->ldb;
    for (int64_t r = 0; r < R->n_rows; r++) {
      const float* a = R->a[r];
      gv16 s0 = {0}, s1 = {0};
      for (int64_t k = 0; k < kv; k += 32) {
        s0 += gv_load(a + k) * gv_load(b + k);
        s1 += gv_load(a + k + 16) * gv_load(b + k + 16);
      }
      s0 += s1;
      float t = 0.0f;
      for (int i = 0; i < 16; i++) t += s0[i];
      for (int64_t k = kv; k < K; k++) t += a[k] * b[k];
      c[r][n * R->c_cs] = t;
    }
  }
}

GV_INLINE void small_cols_impl(const gemm_args* g, const small_rows* R, float* const* c,
                               int64_t n0, int64_t n1) {
  if (g->b_trans)
    small_bt_impl(g, R, c, n0, n1);
  else
    small_bn_impl(g, R, c, n0, n1);
}

#ifdef RLX_GEMM_X86
/* Let a*b+c contract to FMA (GCC's ISO C mode does not by default). */
#if defined(__clang__)
#define SMALL_TARGET(isa) __attribute__((target(isa)))
#else
#define SMALL_TARGET(isa) __attribute__((target(isa), optimize("fp-contract=fast")))
#endif
SMALL_TARGET("avx512f") static void small_cols_avx512(const gemm_args* g,
                                                                 const small_rows* R,
                                                                 float* const* c, int64_t n0,
                                                                 int64_t n1) {
  small_cols_impl(g, R, c, n0, n1);
}
SMALL_TARGET("avx2,fma") static void small_cols_avx2(const gemm_args* g,
                                                                const small_rows* R,
                                                                float* const* c, int64_t n0,
                                                                int64_t n1) {
  small_cols_impl(g, R, c, n0, n1);
}
#endif
static void small_cols_base(const gemm_args* g, const small_rows* R, float* const* c, int64_t n0,
                            int64_t n1) {
  small_cols_impl(g, R, c, n0, n1);
}

static void small_cols(const gemm_args* g, const small_rows* R, float* const* c, int64_t n0,
                       int64_t n1) {
#ifdef RLX_GEMM_X86
  int level = rlx_cpu_simd_level();
  if (level == 2) {
    small_cols_avx512(g, R, c, n0, n1);
    return;
  }
  if (level == 1) {
    small_cols_avx2(g, R, c, n0, n1);
    return;
  }
#endif
  small_cols_base(g, R, c, n0, n1);
}

typedef struct small_job {
  const gemm_args* g;
  small_rows rows;
  float* c[SMALL_M];
} small_job;

static void small_part(void* ctx, int64_t begin, int64_t end) {
  const small_job* j = ctx;
  small_cols(j->g, &j->rows, j->c, begin, end);
}

/* C = A B for M <= SMALL_M (any transposes), threaded over columns; C's
 * columns are c_cs apart. Returns 0 when a transposed A cannot be gathered
 * (no memory). */
static int gemm_small_m(rlx_cpu_pool* p, const gemm_args* g, int64_t c_cs) {
  small_job j;
  memset(&j, 0, sizeof j);
  j.g = g;
  j.rows.n_rows = g->M;
  j.rows.c_cs = c_cs;
  float* gathered = NULL;
  if (g->a_trans && g->M > 1) {
    /* Row m of a transposed A is strided: gather it once. */
    gathered = malloc((size_t)(g->M * g->K + 1) * sizeof(float));
    if (!gathered) return 0;
    for (int64_t m = 0; m < g->M; m++)
      for (int64_t k = 0; k < g->K; k++) gathered[m * g->K + k] = g->A[k * g->lda + m];
  }
  for (int64_t m = 0; m < g->M; m++) {
    if (gathered)
      j.rows.a[m] = gathered + m * g->K;
    else
      j.rows.a[m] = g->a_trans ? g->A + m : g->A + m * g->lda; /* a_trans: M == 1 */
    j.c[m] = g->C + m * g->ldc;
  }
  if (g->a_trans && g->M == 1 && g->lda != 1 && g->K > 1) {
    /* One row whose k stride is lda: gather too. */
    gathered = malloc((size_t)g->K * sizeof(float));
    if (!gathered) return 0;
    for (int64_t k = 0; k < g->K; k++) gathered[k] = g->A[k * g->lda];
    j.rows.a[0] = gathered;
  }
  /* ~16K multiply-adds per chunk before a second thread pays off. */
  int64_t grain = 16384 / (g->K * g->M + 1) + 1;
  if (!g->b_trans && grain < SMALL_NB / 4) grain = SMALL_NB / 4;
  rlx_cpu_parallel_for(p, g->N, grain, small_part, &j);
  free(gathered);
  return 1;
}

static void sgemm_with(rlx_cpu_pool* p, const gemm_kernel* kr, int a_trans, int b_trans,
                       int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                       const float* B, int64_t ldb, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  gemm_args g = {a_trans, b_trans, M, N, K, A, lda, B, ldb, C, ldc};
  if (M <= SMALL_M && K > 0 && gemm_small_m(p, &g, 1)) return;
  if (N <= SMALL_M && K > 0) {
    /* Few columns: the same loops on the transposed problem C^T = B^T A^T,
     * writing C^T's rows down C's columns. */
    gemm_args t = {!b_trans, !a_trans, N, M, K, B, ldb, A, lda, C, 1};
    if (gemm_small_m(p, &t, ldc)) return;
  }
  int threads = rlx_cpu_pool_threads(p);
  /* Below ~2 MFLOP a second thread costs more than it saves. */
  double flops = 2.0 * (double)M * (double)N * (double)K;
  if (threads <= 1 || flops < 2e6) {
    gemm_block(kr, &g, 0, M, 0, N);
    return;
  }
  gemm_job job = {kr, &g, N >= M, 0};
  job.unit = job.split_n ? kr->nr : kr->mr;
  int64_t units = ((job.split_n ? N : M) + job.unit - 1) / job.unit;
  rlx_cpu_parallel_for(p, units, 1, gemm_part, &job);
}

void rlx_cpu_sgemm(rlx_cpu_pool* p, int a_trans, int b_trans, int64_t M, int64_t N, int64_t K,
                   const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                   int64_t ldc) {
  sgemm_with(p, choose_kernel(), a_trans, b_trans, M, N, K, A, lda, B, ldb, C, ldc);
}

rlx_cpu_gemm_blocking rlx_cpu_gemm_default_blocking(void) {
  const gemm_kernel* kr = choose_kernel();
  rlx_cpu_gemm_blocking b = {rlx_cpu_simd_level(), kr->mc, kr->kc, kr->nc};
  return b;
}

int rlx_cpu_sgemm_blocked(rlx_cpu_pool* p, const rlx_cpu_gemm_blocking* blk, int a_trans,
                          int b_trans, int64_t M, int64_t N, int64_t K, const float* A,
                          int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc) {
  const gemm_kernel* base = blk->simd <= rlx_cpu_simd_level() ? kernel_at(blk->simd) : NULL;
  if (!base || blk->mc <= 0 || blk->kc <= 0 || blk->nc <= 0) return 0;
  gemm_kernel kr = *base;
  /* whole register tiles per cache block, as the packing assumes */
  kr.mc = round_up(blk->mc, kr.mr);
  kr.kc = blk->kc;
  kr.nc = round_up(blk->nc, kr.nr);
  sgemm_with(p, &kr, a_trans, b_trans, M, N, K, A, lda, B, ldb, C, ldc);
  return 1;
}
