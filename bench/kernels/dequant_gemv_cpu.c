/* Kernel lab: CPU DequantMatMul decode GEMV (src/backends/cpu/fast_quant.c),
 * y = x . W^T for one row of x, W in Q4_0 rows (the CPU target of issue 17:
 * q4_0 decode >= llama.cpp's CPU library).
 *
 * Variants:
 *   0  production: W stored rows-interleaved in place (src/backends/cpu/
 *      repack.c) and rlx_cpu_fast_dequant_matmul's packed GEMV: a 32-bit
 *      lane per row, 8 rows x 4 elements per VPDPBUSD against x in 24-bit
 *      block fixed point as three int8 limbs (f32-accurate); AVX-512 VNNI
 *   1  the plain layout's row dots (production before; RLX_CPU_NO_REPACK):
 *      one W row at a time, a SIMD lane per element, nibbles widened to
 *      f32 and FMA'd with x, horizontal sums per row
 *   2  rows interleaved x16, f32: each nibble becomes its float (c - 8) by
 *      a 16-entry table lookup (VPERMPS reads only the index's low 4 bits,
 *      so a shift selects the nibble) and is FMA'd with x broadcast
 *   3  rows interleaved x8, x quantized to 8 bits per block of 32 (what
 *      llama.cpp does: ~0.4% of each block's largest |x| per element; its
 *      error is reported, not held to the f32 tolerance)
 * The interleaved layouts of variants 2 and 3 are repack.c's with groups of
 * 16 / 8 rows: per block, the rows' f16 scales, then 4-byte chunks c = 0..3
 * of every row (chunk c holds elements 4c..4c+3 in its low nibbles and
 * 16+4c..16+4c+3 in its high ones).
 *
 *   lab_dequant_gemv_cpu [--check] [--threads T] [--reps R] [K N]
 *
 * Default K = 4096, N = 14336 (Llama-3-8B's FFN), one x row, all cores.
 * --check: small odd shapes, correctness only (ctest lab_dequant_gemv_cpu_check).
 * Exit 1 when a variant held to the f32 tolerance (0-2) exceeds it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "ir/quant.h"
#include "lab.h"
#include "passes/lower.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define LAB_X86 1
#endif

#define TOL 1e-5
#define QB 18 /* bytes of a Q4_0 block: f16 d, 16 bytes of nibbles */

typedef struct problem {
  int64_t K, N, nb;   /* nb = K / 32 blocks per row */
  uint8_t* arena;     /* [x f32 K][y f32 N][W N x nb x 18] for variant 0 */
  float *x, *y;
  uint8_t* w;
  uint8_t *w8, *w16;  /* interleaved by 8 / 16 rows (N padded with zero rows) */
  int64_t n8, n16;    /* padded row counts */
  int8_t* xq8;        /* [K] 8-bit x */
  float* xq8s;        /* [nb] its scales */
  int32_t* xq8sum;    /* [nb] 8 * sum of xq8 over the block */
  double* ref;
  float* deq;         /* one dequantized row (reference) */
} problem;

/* ------------------------------------------------------------------ data */

static void fill_w(uint8_t* w, int64_t n_blocks, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
  for (int64_t b = 0; b < n_blocks; b++) {
    uint8_t* blk = w + b * QB;
    for (int i = 2; i < QB; i++) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      blk[i] = (uint8_t)(s >> 24);
    }
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    /* d: a normal half in [2^-9, 2^-5): exponent 6..9 (biased 15), random mantissa */
    uint16_t h = (uint16_t)((6 + ((s >> 40) & 3)) << 10 | ((s >> 20) & 1023));
    memcpy(blk, &h, 2);
  }
}

/* Rows r0 .. r0 + R - 1 of w into the interleaved group layout (zero rows
 * past N). */
static void interleave(const problem* p, int R, uint8_t* dst, int64_t r0) {
  for (int64_t b = 0; b < p->nb; b++) {
    uint8_t* g = dst + (r0 / R * p->nb + b) * (int64_t)(R * QB);
    for (int r = 0; r < R; r++) {
      const uint8_t* src = r0 + r < p->N ? p->w + ((r0 + r) * p->nb + b) * QB : NULL;
      uint16_t zero = 0;
      memcpy(g + 2 * r, src ? src : (const uint8_t*)&zero, 2);
      for (int c = 0; c < 4; c++)
        for (int i = 0; i < 4; i++) g[2 * R + c * 4 * R + 4 * r + i] = src ? src[2 + 4 * c + i] : 0x88;
    }
  }
}

/* x in 8 bits per block of 32 (variant 3). */
static void prepare_x(problem* p) {
  for (int64_t b = 0; b < p->nb; b++) {
    const float* x = p->x + 32 * b;
    float amax = 0.0f;
    for (int i = 0; i < 32; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    p->xq8s[b] = amax / 127.0f;
    double inv8 = amax > 0 ? 127.0 / amax : 0.0;
    int32_t s8 = 0;
    for (int i = 0; i < 32; i++) {
      double v = (double)x[i] * inv8;
      int32_t q = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
      q = q > 127 ? 127 : q < -127 ? -127 : q;
      p->xq8[32 * b + i] = (int8_t)q;
      s8 += q;
    }
    p->xq8sum[b] = 8 * s8;
  }
}

static void problem_free(problem* p) {
  free(p->arena);
  free(p->w8);
  free(p->w16);
  free(p->xq8);
  free(p->xq8s);
  free(p->xq8sum);
  free(p->ref);
  free(p->deq);
}

static int problem_init(problem* p, int64_t K, int64_t N) {
  memset(p, 0, sizeof *p);
  p->K = K, p->N = N, p->nb = K / 32;
  p->n8 = (N + 7) / 8 * 8, p->n16 = (N + 15) / 16 * 16;
  size_t wbytes = (size_t)(N * p->nb * QB);
  p->arena = aligned_alloc(64, (sizeof(float) * (size_t)(K + N) + wbytes + 63) / 64 * 64);
  p->w8 = malloc((size_t)(p->n8 * p->nb * QB));
  p->w16 = malloc((size_t)(p->n16 * p->nb * QB));
  p->xq8 = malloc((size_t)K);
  p->xq8s = malloc(sizeof(float) * (size_t)p->nb);
  p->xq8sum = malloc(sizeof(int32_t) * (size_t)p->nb);
  p->ref = malloc(sizeof(double) * (size_t)N);
  p->deq = malloc(sizeof(float) * (size_t)K);
  if (!p->arena || !p->w8 || !p->w16 || !p->xq8 || !p->xq8s || !p->xq8sum || !p->ref || !p->deq)
    return 0;
  p->x = (float*)p->arena;
  p->y = p->x + K;
  p->w = (uint8_t*)(p->y + N);
  lab_fill(p->x, K, 3);
  fill_w(p->w, N * p->nb, 4);
  for (int64_t r = 0; r < p->n8; r += 8) interleave(p, 8, p->w8, r);
  for (int64_t r = 0; r < p->n16; r += 16) interleave(p, 16, p->w16, r);
  prepare_x(p);
  for (int64_t n = 0; n < N; n++) { /* W dequantized by quant.h, dotted in double */
    for (int64_t b = 0; b < p->nb; b++)
      rlx_dequant_group(RLX_QUANT_Q4_0, p->w + (n * p->nb + b) * QB, 32, 1.0f, 0, p->deq + 32 * b);
    double s = 0.0;
    for (int64_t k = 0; k < K; k++) s += (double)p->deq[k] * (double)p->x[k];
    p->ref[n] = s;
  }
  return 1;
}

/* ------------------------------------------------------------------ variants 0, 1 */

/* The library's fast path on the arena's W, as it is stored (packed in
 * place by repack.c for variant 0: pack_w). 0 when it declines. */
static int run_library(rlx_cpu_fast* f, const problem* p) {
  rlx_step s;
  memset(&s, 0, sizeof s);
  s.kernel = RLX_K_DEQUANT_MATMUL;
  s.n_in = 2, s.n_out = 1;
  s.in[0] = (rlx_view){0, RLX_F32, 2, {1, p->K}, {p->K, 1}};
  s.in[1] = (rlx_view){(uint64_t)(p->w - p->arena), RLX_U8, 2, {p->N, p->nb * QB}, {p->nb * QB, 1}};
  s.out[0] = (rlx_view){(uint64_t)((uint8_t*)p->y - p->arena), RLX_F32, 2, {1, p->N}, {p->N, 1}};
  s.in[2].rank = s.in[3].rank = -1;
  s.p.dqmm = (rlx_dqmm_params){1, p->N, p->K, p->nb * QB, RLX_QUANT_Q4_0, 32, 0, 0, 0};
  return rlx_cpu_fast_dequant_matmul(f, p->arena, &s);
}

/* Variant 0's storage: the arena's W interleaved in place as the CPU
 * backend stores it (pack 1; 0 when this CPU lacks the packed kernel or N
 * < 8), or back to plain (pack 0). */
static int pack_w(rlx_cpu_fast* f, problem* p, int pack, rlx_cpu_packed* w) {
  if (pack) {
    *w = (rlx_cpu_packed){(uint64_t)(p->w - p->arena), p->N, p->nb * QB, RLX_QUANT_Q4_0, 0};
    if (!rlx_cpu_repack_available() || p->N < 8 || !(f->pack_tmp = malloc((size_t)(8 * w->row_bytes))))
      return 0;
    rlx_cpu_repack_set(p->arena, w, 1, f->pack_tmp);
    f->packed = w, f->n_packed = 1;
  } else if (f->packed) {
    rlx_cpu_repack_set(p->arena, w, 0, f->pack_tmp);
    free(f->pack_tmp);
    f->packed = NULL, f->n_packed = 0, f->pack_tmp = NULL;
  }
  return 1;
}

/* ------------------------------------------------------------------ variants 1-3 */

#ifdef LAB_X86
#define LAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

/* Variant 2: 16 rows. Table of (c - 8) for nibble c. */
LAB_AVX512 static void rows16_f32(const problem* p, const uint8_t* g, int64_t n0, float* y) {
  const __m512 lut = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < p->nb; b++, g += 16 * QB) {
    const float* x = p->x + 32 * b;
    __m512 t = _mm512_setzero_ps();
    for (int c = 0; c < 4; c++) {
      __m512i v = _mm512_loadu_si512(g + 32 + 64 * c);
      for (int i = 0; i < 4; i++) { /* element 4c + i (low nibble), 16 + 4c + i (high) */
        __m512i lo = _mm512_srli_epi32(v, 8 * i), hi = _mm512_srli_epi32(v, 8 * i + 4);
        t = _mm512_fmadd_ps(_mm512_permutexvar_ps(lo, lut), _mm512_set1_ps(x[4 * c + i]), t);
        t = _mm512_fmadd_ps(_mm512_permutexvar_ps(hi, lut), _mm512_set1_ps(x[16 + 4 * c + i]), t);
      }
    }
    __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)g));
    acc = _mm512_fmadd_ps(t, d, acc);
  }
  float out[16];
  _mm512_storeu_ps(out, acc);
  for (int r = 0; r < 16 && n0 + r < p->N; r++) y[n0 + r] = out[r];
}

/* Variant 3: 8 rows, x in 8 bits: one VPDPBUSD per 4-byte chunk half. */
LAB_AVX512 static void rows8_q8(const problem* p, const uint8_t* g, int64_t n0, float* y) {
  const __m256i m = _mm256_set1_epi8(15);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < p->nb; b++, g += 8 * QB) {
    const int8_t* q = p->xq8 + 32 * b;
    __m256i s = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
      __m256i v = _mm256_loadu_si256((const __m256i*)(g + 16 + 32 * c));
      int32_t xl, xh;
      memcpy(&xl, q + 4 * c, 4);
      memcpy(&xh, q + 16 + 4 * c, 4);
      s = _mm256_dpbusd_epi32(s, _mm256_and_si256(v, m), _mm256_set1_epi32(xl));
      s = _mm256_dpbusd_epi32(s, _mm256_and_si256(_mm256_srli_epi16(v, 4), m), _mm256_set1_epi32(xh));
    }
    __m256 t = _mm256_cvtepi32_ps(_mm256_sub_epi32(s, _mm256_set1_epi32(p->xq8sum[b])));
    __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)g));
    acc = _mm256_fmadd_ps(t, _mm256_mul_ps(d, _mm256_set1_ps(p->xq8s[b])), acc);
  }
  float out[8];
  _mm256_storeu_ps(out, acc);
  for (int r = 0; r < 8 && n0 + r < p->N; r++) y[n0 + r] = out[r];
}

static int have_avx512_vnni(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}
#endif

typedef struct job {
  const problem* p;
  int v;
} job;

/* Groups [begin, end) of rows of variant v. */
static void group_range(void* ctx, int64_t begin, int64_t end) {
  const job* j = ctx;
  const problem* p = j->p;
#ifdef LAB_X86
  int R = j->v == 2 ? 16 : 8;
  const uint8_t* base = j->v == 2 ? p->w16 : p->w8;
  for (int64_t gi = begin; gi < end; gi++) {
    const uint8_t* g = base + gi * p->nb * R * QB;
    if (j->v == 2) rows16_f32(p, g, gi * R, p->y);
    else rows8_q8(p, g, gi * R, p->y);
  }
#else
  (void)p, (void)begin, (void)end;
#endif
}

static const char* const names[] = {
    "production: rows x8 in place, x as 3 int8 limbs (VNNI)",
    "plain layout row dots, x f32 (RLX_CPU_NO_REPACK)",
    "rows interleaved x16, nibble table + f32 FMA",
    "rows interleaved x8, x in 8 bits (VNNI, inexact)",
};
enum { N_VARIANTS = 4 };

/* One run of variant v; 0 when this CPU lacks it. */
static int run(rlx_cpu_fast* f, int v, problem* p) {
  if (v <= 1) return run_library(f, p);
#ifdef LAB_X86
  if (!have_avx512_vnni()) return 0;
  job j = {p, v};
  int64_t groups = (v == 2 ? p->n16 : p->n8) / (v == 2 ? 16 : 8);
  rlx_cpu_parallel_for(f->pool, groups, 8, group_range, &j);
  return 1;
#else
  return 0;
#endif
}

static int measure(rlx_cpu_fast* f, int v, problem* p, int reps) {
  char what[96];
  snprintf(what, sizeof what, "%s%s", names[v], reps == 0 ? " (check)" : "");
  memset(p->y, 0xff, sizeof(float) * (size_t)p->N);
  rlx_cpu_packed w;
  if ((v == 0 && !pack_w(f, p, 1, &w)) || !run(f, v, p)) {
    pack_w(f, p, 0, &w);
    lab_skip(v, what, "this CPU lacks AVX-512 VNNI, N < 8, or the fast path declined");
    return 1;
  }
  double err = lab_max_rel_err(p->y, p->ref, p->N);
  double ms[64];
  int n = reps > 64 ? 64 : reps;
  for (int r = 0; r < n; r++) {
    double t0 = lab_now_ms();
    run(f, v, p);
    ms[r] = lab_now_ms() - t0;
  }
  if (v == 0) pack_w(f, p, 0, &w);
  /* rate: GB/s of W (the bytes that must stream) */
  lab_report(v, what, err, n ? lab_median(ms, n) : 0.0, (double)(p->N * p->nb * QB));
  return v == 3 || err <= TOL;
}

int main(int argc, char** argv) {
  int check = 0, threads = 0, reps = 20;
  int64_t dims[2] = {4096, 14336};
  int nd = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--check") == 0) check = 1;
    else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    else if (nd < 2 && atoll(argv[i]) > 0 && (nd == 1 || atoll(argv[i]) % 32 == 0))
      dims[nd++] = atoll(argv[i]);
    else {
      fprintf(stderr, "usage: %s [--check] [--threads T] [--reps R] [K N] (K a multiple of 32)\n",
              argv[0]);
      return 2;
    }
  }
  rlx_cpu_fast f = {0};
  if (rlx_cpu_pool_create(threads, &f.pool) != RLX_OK) return 2;
  printf("lab dequant_gemv_cpu: Q4_0, one x row, %d threads, tolerance %.0e (variant 3: reported only)\n",
         rlx_cpu_pool_threads(f.pool), TOL);
  lab_header("GB/s of W");
  static const int64_t shapes[][2] = {{32, 1}, {96, 13}, {256, 37}, {2048, 67}};
  int n_shapes = check ? (int)(sizeof shapes / sizeof shapes[0]) : 1;
  int ok = 1, oom = 0;
  for (int s = 0; s < n_shapes && !oom; s++) {
    problem p;
    oom = check ? !problem_init(&p, shapes[s][0], shapes[s][1]) : !problem_init(&p, dims[0], dims[1]);
    for (int v = 0; v < N_VARIANTS && !oom; v++) ok &= measure(&f, v, &p, check ? 0 : reps);
    problem_free(&p);
  }
  rlx_cpu_pool_destroy(f.pool);
  if (oom) fprintf(stderr, "out of memory\n");
  if (!ok) printf("FAIL: a variant exceeded the tolerance\n");
  return oom ? 2 : !ok;
}
