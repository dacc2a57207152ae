/* CPU fast path of DequantMatMul (y = x . W^T, W quantized row by row).
 *
 * Decode (M <= RLX_DQ_GEMV_ROWS rows of x): a fused-dequant GEMV, threaded
 * over W's rows; Q8_0, Q4_0, Q4_K and Q6_K dot their blocks straight from the
 * codes (AVX2 + FMA where the CPU has it), every other scheme dequantizes
 * one row into the thread's buffer (quant.h) and dots it. A Q4_0 / Q8_0 W
 * the backend stores rows-interleaved (repack.c) is dotted 8 rows at a time
 * against x in 24-bit block fixed point (packed_* below). Prefill: W is
 * dequantized a tile of rows at a time (threaded) and each tile feeds the
 * blocked SGEMM. Never a full f32 copy of W. Accumulation in f32, so
 * results differ from the double reference by rounding only (parity
 * tolerance 1e-5). The transposed role (the gradient) and f64 decline to
 * the reference. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "ir/dtype.h"
#include "ir/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DQ_X86 1
#endif

#define RLX_DQ_GEMV_ROWS 8 /* rows of x up to which the GEMV beats tiles + SGEMM */
#define RLX_DQ_TILE 64     /* W rows dequantized per SGEMM tile */

typedef struct dq_job {
  const rlx_step* s;
  const uint8_t* arena;
  const float* x; /* [M, K] f32 */
  float* y;       /* [M, N] f32, or the tile [rows, K] when dequantizing */
  int64_t n0;     /* first W row of the tile */
  int simd;
  const float* xsum; /* Q4_K: sums of x's runs of 32, [M, K / 32] */
  const rlx_cpu_packed* packed; /* W stored rows-interleaved (repack.c), else NULL */
  const struct limb_x* lx;      /* x for the packed kernel, else NULL */
  float fp8[256];    /* FP8 schemes: each code's value */
  atomic_int failed; /* a GEMV worker could not allocate its row buffer */
} dq_job;

/* ------------------------------------------------------------------ scalar blocks */

static float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; l++) acc[l] += a[i + l] * b[i + l];
  float t = 0.0f;
  for (; i < n; i++) t += a[i] * b[i];
  for (int l = 0; l < 8; l++) t += acc[l];
  return t;
}

#ifdef DQ_X86
__attribute__((target("avx2,fma"))) static float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/* 8 signed bytes -> 8 floats. */
__attribute__((target("avx2,fma"))) static __m256 i8x8(__m128i b) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

__attribute__((target("avx2,fma"))) static float dot_avx2(const float* a, const float* b,
                                                          int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float t = hsum8(acc);
  for (; i < n; i++) t += a[i] * b[i];
  return t;
}

/* sum over Q8_0 blocks of d * (q . x) */
__attribute__((target("avx2,fma"))) static float row_q8_0_avx2(const uint8_t* w, const float* x,
                                                               const float* xsum, int64_t K) {
  (void)xsum;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < K / 32; b++, w += 34, x += 32) {
    __m256 d = _mm256_set1_ps(rlx_quant_f16(w));
    __m256 s = _mm256_mul_ps(i8x8(_mm_loadl_epi64((const __m128i*)(w + 2))), _mm256_loadu_ps(x));
    for (int i = 1; i < 4; i++)
      s = _mm256_fmadd_ps(i8x8(_mm_loadl_epi64((const __m128i*)(w + 2 + 8 * i))),
                          _mm256_loadu_ps(x + 8 * i), s);
    acc = _mm256_fmadd_ps(d, s, acc);
  }
  return hsum8(acc);
}

/* 16 bytes of nibbles: low nibbles (elements 0..15) and high (16..31), minus `off`. */
__attribute__((target("avx2,fma"))) static void nibbles(const uint8_t* q, int off, __m128i* lo,
                                                       __m128i* hi) {
  __m128i b = _mm_loadu_si128((const __m128i*)q), m = _mm_set1_epi8(15);
  __m128i o = _mm_set1_epi8((char)off);
  *lo = _mm_sub_epi8(_mm_and_si128(b, m), o);
  *hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), m), o);
}

/* 16 bytes (elements) dotted with 16 floats. */
__attribute__((target("avx2,fma"))) static __m256 dot16(__m128i q, const float* x, __m256 acc) {
  acc = _mm256_fmadd_ps(i8x8(q), _mm256_loadu_ps(x), acc);
  return _mm256_fmadd_ps(i8x8(_mm_srli_si128(q, 8)), _mm256_loadu_ps(x + 8), acc);
}

__attribute__((target("avx2,fma"))) static float row_q4_0_avx2(const uint8_t* w, const float* x,
                                                               const float* xsum, int64_t K) {
  (void)xsum;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < K / 32; b++, w += 18, x += 32) {
    __m128i lo, hi;
    nibbles(w + 2, 8, &lo, &hi);
    __m256 s = dot16(hi, x + 16, dot16(lo, x, _mm256_setzero_ps()));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(rlx_quant_f16(w)), s, acc);
  }
  return hsum8(acc);
}

/* Q4_K: per 32 elements (d * sc) * (q . x) - (dmin * m) * sum(x), the
 * sums of x's runs of 32 computed once per call (xsum). */
__attribute__((target("avx2,fma"))) static float row_q4_k_avx2(const uint8_t* w, const float* x,
                                                               const float* xsum, int64_t K) {
  __m256 acc = _mm256_setzero_ps();
  float mins = 0.0f;
  for (int64_t b = 0; b < K / 256; b++, w += 144, x += 256, xsum += 8) {
    float d = rlx_quant_f16(w), dmin = rlx_quant_f16(w + 2);
    for (int c = 0; c < 4; c++) { /* 32 bytes: sub-block 2c in the low nibbles, 2c + 1 high */
      const uint8_t* q = w + 16 + 32 * c;
      const float* xs = x + 64 * c;
      __m128i lo0, hi0, lo1, hi1;
      nibbles(q, 0, &lo0, &hi0); /* bytes 0..15 of the run */
      nibbles(q + 16, 0, &lo1, &hi1);
      int sc0, m0, sc1, m1;
      rlx_quant_k4_scale_min(w + 4, 2 * c, &sc0, &m0);
      rlx_quant_k4_scale_min(w + 4, 2 * c + 1, &sc1, &m1);
      __m256 s0 = dot16(lo1, xs + 16, dot16(lo0, xs, _mm256_setzero_ps()));
      __m256 s1 = dot16(hi1, xs + 48, dot16(hi0, xs + 32, _mm256_setzero_ps()));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc0), s0, acc);
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc1), s1, acc);
      mins += dmin * (float)m0 * xsum[2 * c] + dmin * (float)m1 * xsum[2 * c + 1];
    }
  }
  return hsum8(acc) - mins;
}

/* Bytes of v shifted right by n bits (n < 8; the bits that enter from the
 * neighbour byte are masked off by the callers). */
__attribute__((target("avx2,fma"))) static __m128i shr_bytes(__m128i v, int n) {
  return _mm_srl_epi16(v, _mm_cvtsi32_si128(n));
}

/* Q6_K: per run of 16 (d * sc) * (q . x), q = low nibble | high 2 bits << 4,
 * minus 32 (layout in quant.h). */
__attribute__((target("avx2,fma"))) static float row_q6_k_avx2(const uint8_t* w, const float* x,
                                                               const float* xsum, int64_t K) {
  (void)xsum;
  __m256 acc = _mm256_setzero_ps();
  const __m128i m4 = _mm_set1_epi8(15), m2 = _mm_set1_epi8(3), o32 = _mm_set1_epi8(32);
  for (int64_t b = 0; b < K / 256; b++, w += 210, x += 256) {
    float d = rlx_quant_f16(w + 208);
    for (int h = 0; h < 2; h++)
      for (int s = 0; s < 4; s++)
        for (int half = 0; half < 2; half++) {
          __m128i lo = _mm_loadu_si128((const __m128i*)(w + 64 * h + 32 * (s % 2) + 16 * half));
          __m128i hi = _mm_loadu_si128((const __m128i*)(w + 128 + 32 * h + 16 * half));
          lo = _mm_and_si128(shr_bytes(lo, 4 * (s / 2)), m4);
          hi = _mm_slli_epi16(_mm_and_si128(shr_bytes(hi, 2 * s), m2), 4);
          __m128i q = _mm_sub_epi8(_mm_or_si128(lo, hi), o32);
          __m256 dq = dot16(q, x + 128 * h + 32 * s + 16 * half, _mm256_setzero_ps());
          float sc = d * (float)(int8_t)w[192 + 8 * h + 2 * s + half];
          acc = _mm256_fmadd_ps(_mm256_set1_ps(sc), dq, acc);
        }
  }
  return hsum8(acc);
}
#endif

/* ------------------------------------------------------------------ rows interleaved */

/* x for the packed kernel: each run of 32 values (one block) in 24-bit
 * fixed point, x_i = s_b X_i + e_i with s_b = max|x| / DQ_XMAX and |e_i| <=
 * s_b / 2 (2^-24 of the run's largest |x|, below the rounding of an f32
 * product), X_i = 65536 L2_i + 256 L1_i + L0_i with each limb in [-128,
 * 127]. A block's dot with a row of unsigned codes c_i standing for
 * c_i - o (Q4_0: nibbles, o = 8; Q8_0: int8 codes with their sign bit
 * flipped, o = 128) is then
 *   sum_i (c_i - o) x_i = s_b sum_k 256^(2-k) (sum_i c_i Lk_i - o sum_i Lk_i),
 * each inner sum exact in int32 (|.| <= 32 * 255 * 128), and VPDPBUSD
 * forms it for 8 rows (the lanes) x 4 elements at once. Rounding only
 * where the f32 path rounds: combining the limbs in float, scaling by d
 * s_b and accumulating the blocks. */
#define DQ_XMAX (127 * 65536 + 127 * 256 + 127)

typedef struct limb_x {
  int8_t* limbs; /* [M, K / 32, 3, 32]: L2, L1, L0 of each block */
  int32_t* lsum; /* [M, K / 32, 3]: each limb's sum over the block */
  float* scale;  /* [M, K / 32]: s_b */
} limb_x;

static void limb_x_free(limb_x* lx) {
  free(lx->limbs);
  free(lx->lsum);
  free(lx->scale);
}

/* One block of x into limbs; 0 when a value is not finite. */
static int limb_block(const float* x, int8_t* l, int32_t* lsum, float* scale) {
  float amax = 0.0f;
  for (int i = 0; i < 32; i++) {
    if (!(x[i] - x[i] == 0.0f)) return 0; /* NaN or infinity */
    float a = x[i] < 0 ? -x[i] : x[i];
    amax = a > amax ? a : amax;
  }
  *scale = amax / (float)DQ_XMAX;
  double inv = amax > 0.0f ? (double)DQ_XMAX / (double)amax : 0.0;
  int32_t sum[3] = {0, 0, 0};
  for (int i = 0; i < 32; i++) {
    double v = (double)x[i] * inv;
    int32_t X = (int32_t)(v < 0 ? v - 0.5 : v + 0.5);
    X = X > DQ_XMAX ? DQ_XMAX : X < -DQ_XMAX ? -DQ_XMAX : X;
    int32_t l0 = ((X + 128) & 255) - 128, x1 = (X - l0) / 256;
    int32_t l1 = ((x1 + 128) & 255) - 128, l2 = (x1 - l1) / 256;
    l[i] = (int8_t)l2, l[32 + i] = (int8_t)l1, l[64 + i] = (int8_t)l0;
    sum[0] += l2, sum[1] += l1, sum[2] += l0;
  }
  for (int k = 0; k < 3; k++) lsum[k] = sum[k];
  return 1;
}

/* x [M, K] into limbs; 0 (nothing to free) when a value is not finite or
 * there is no memory: the packed rows are then dequantized and dotted. */
static int limb_x_prepare(const float* x, int64_t M, int64_t K, limb_x* lx) {
  int64_t blocks = M * K / 32;
  lx->limbs = malloc((size_t)(blocks * 96));
  lx->lsum = malloc(sizeof(int32_t) * (size_t)(blocks * 3 + 1));
  lx->scale = malloc(sizeof(float) * (size_t)(blocks + 1));
  int ok = lx->limbs && lx->lsum && lx->scale;
  for (int64_t b = 0; ok && b < blocks; b++) /* runs never cross a row: 32 | K */
    ok = limb_block(x + 32 * b, lx->limbs + 96 * b, lx->lsum + 3 * b, lx->scale + b);
  if (!ok) limb_x_free(lx);
  return ok;
}

/* Bytes of a Q4_0 / Q8_0 block: f16 d, then the codes. */
static int64_t packed_block_bytes(int32_t scheme) { return scheme == RLX_QUANT_Q4_0 ? 18 : 34; }

/* Row n (in a full group) of a packed W, dequantized as quant.h does: each
 * block put back in its plain bytes first. */
static void packed_row(const uint8_t* w, int32_t scheme, int64_t nb, int64_t n, float* row) {
  int64_t bb = packed_block_bytes(scheme);
  const uint8_t* grp = w + (n / 8) * nb * 8 * bb;
  int r = (int)(n % 8);
  for (int64_t b = 0; b < nb; b++, grp += 8 * bb) {
    uint8_t plain[34];
    memcpy(plain, grp + 2 * r, 2);
    for (int c = 0; c < (bb - 2) / 4; c++) memcpy(plain + 2 + 4 * c, grp + 16 + 32 * c + 4 * r, 4);
    if (scheme == RLX_QUANT_Q4_0) rlx_dequant_q4_0(plain, row + 32 * b);
    else rlx_dequant_q8_0(plain, row + 32 * b);
  }
}

#ifdef DQ_X86
#define DQ_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

/* One limb's codes . x: 4 code bytes of each of the 8 rows (v) against x
 * elements e .. e + 3 of limb row l (broadcast). */
DQ_VNNI static __m256i limb_dot(__m256i acc, __m256i v, const int8_t* l) {
  int32_t x4;
  memcpy(&x4, l, 4);
  return _mm256_dpbusd_epi32(acc, v, _mm256_set1_epi32(x4));
}

/* acc + the block's d_r s_b sum_i (c_i - o) x_i for the 8 rows, from the
 * limb sums s[k] = sum_i c_i Lk_i. */
DQ_VNNI static __m256 limb_block_sum(__m256 acc, const __m256i s[3], const int32_t* lsum,
                                     int32_t o, const uint8_t* d16, float scale) {
  __m256 f[3];
  for (int k = 0; k < 3; k++)
    f[k] = _mm256_cvtepi32_ps(_mm256_sub_epi32(s[k], _mm256_set1_epi32(o * lsum[k])));
  __m256 t = _mm256_fmadd_ps(f[0], _mm256_set1_ps(65536.0f),
                             _mm256_fmadd_ps(f[1], _mm256_set1_ps(256.0f), f[2]));
  __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)d16));
  return _mm256_fmadd_ps(t, _mm256_mul_ps(d, _mm256_set1_ps(scale)), acc);
}

/* The 8 rows of packed Q4_0 group grp dotted with limb row (l, lsum, scale). */
DQ_VNNI static void packed_group_q4_0(const uint8_t* grp, int64_t nb, const int8_t* l,
                                      const int32_t* lsum, const float* scale, float out[8]) {
  const __m256i m = _mm256_set1_epi8(15);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++, grp += 8 * 18, l += 96, lsum += 3) {
    __m256i s[3] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int c = 0; c < 4; c++) { /* elements 4c.. (low nibbles), 16 + 4c.. (high) */
      __m256i v = _mm256_loadu_si256((const __m256i*)(grp + 16 + 32 * c));
      __m256i lo = _mm256_and_si256(v, m), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
      for (int k = 0; k < 3; k++) {
        s[k] = limb_dot(s[k], lo, l + 32 * k + 4 * c);
        s[k] = limb_dot(s[k], hi, l + 32 * k + 16 + 4 * c);
      }
    }
    acc = limb_block_sum(acc, s, lsum, 8, grp, scale[b]);
  }
  _mm256_storeu_ps(out, acc);
}

/* The same for Q8_0: codes q_i in int8, read as q_i + 128 (sign bit flipped). */
DQ_VNNI static void packed_group_q8_0(const uint8_t* grp, int64_t nb, const int8_t* l,
                                      const int32_t* lsum, const float* scale, float out[8]) {
  const __m256i flip = _mm256_set1_epi8((char)0x80);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++, grp += 8 * 34, l += 96, lsum += 3) {
    __m256i s[3] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int c = 0; c < 8; c++) { /* elements 4c .. 4c + 3 */
      __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(grp + 16 + 32 * c)), flip);
      for (int k = 0; k < 3; k++) s[k] = limb_dot(s[k], v, l + 32 * k + 4 * c);
    }
    acc = limb_block_sum(acc, s, lsum, 128, grp, scale[b]);
  }
  _mm256_storeu_ps(out, acc);
}
#endif

/* GEMV groups [begin, end) of 8 packed rows against every row of x. */
static void packed_range(void* ctx, int64_t begin, int64_t end) {
  const dq_job* j = ctx;
#ifdef DQ_X86
  const rlx_dqmm_params* p = &j->s->p.dqmm;
  const uint8_t* w = j->arena + j->s->in[1].offset;
  int64_t nb = p->K / 32, group_bytes = nb * 8 * packed_block_bytes(p->scheme);
  for (int64_t g = begin; g < end; g++)
    for (int64_t m = 0; m < p->M; m++) {
      float out[8];
      const int8_t* l = j->lx->limbs + m * nb * 96;
      const int32_t* ls = j->lx->lsum + m * nb * 3;
      const float* sc = j->lx->scale + m * nb;
      if (p->scheme == RLX_QUANT_Q4_0) packed_group_q4_0(w + g * group_bytes, nb, l, ls, sc, out);
      else packed_group_q8_0(w + g * group_bytes, nb, l, ls, sc, out);
      memcpy(j->y + m * p->N + 8 * g, out, sizeof out);
    }
#else
  (void)j, (void)begin, (void)end; /* repack.c never packs off x86 */
#endif
}

/* The fused row dot of the schemes that have one on this CPU; 0: none. */
typedef float (*row_dot_fn)(const uint8_t*, const float*, const float*, int64_t);
static row_dot_fn fused_row_dot(int32_t scheme, int simd) {
#ifdef DQ_X86
  if (simd >= 1) {
    if (scheme == RLX_QUANT_Q8_0) return row_q8_0_avx2;
    if (scheme == RLX_QUANT_Q4_0) return row_q4_0_avx2;
    if (scheme == RLX_QUANT_Q4_K) return row_q4_k_avx2;
    if (scheme == RLX_QUANT_Q6_K) return row_q6_k_avx2;
  }
#endif
  (void)scheme, (void)simd;
  return NULL;
}

static float dot_any(int simd, const float* a, const float* b, int64_t n) {
#ifdef DQ_X86
  if (simd >= 1) return dot_avx2(a, b, n);
#endif
  (void)simd;
  return dot_f32(a, b, n);
}

/* Row n of W into row (f32), as the reference does it. */
static void dequant_row(const dq_job* j, int64_t n, float* row) {
  const rlx_step* s = j->s;
  const rlx_dqmm_params* p = &s->p.dqmm;
  if (j->packed && n < p->N / 8 * 8) {
    packed_row(j->arena + s->in[1].offset, p->scheme, p->K / 32, n, row);
    return;
  }
  const uint8_t* w = j->arena + s->in[1].offset + n * p->row_bytes;
  int64_t gb = rlx_quant_group_bytes(p->scheme, p->group), groups = p->K / p->group;
  float global = p->has_aux && p->scheme == RLX_QUANT_NVFP4
                     ? (float)rlx_load_f64(j->arena + s->in[3].offset, RLX_F32, 0)
                     : 1.0f;
  for (int64_t g = 0; g < groups; g++) {
    float scale = 1.0f;
    int32_t zero = 0;
    int64_t at = n * groups + g;
    if (p->has_scale) {
      double sv = rlx_load_f64(j->arena + s->in[2].offset, s->in[2].dtype, at);
      scale = p->scheme == RLX_QUANT_NVFP4 ? rlx_quant_nvfp4_scale((uint8_t)sv, global) : (float)sv;
    }
    if (p->has_aux && p->scheme != RLX_QUANT_NVFP4)
      zero = (int32_t)j->arena[s->in[3].offset + at];
    if (p->scheme == RLX_QUANT_FP8_E4M3 || p->scheme == RLX_QUANT_FP8_E5M2) {
      /* the table holds (float)decode(code): the same products as quant.h's */
      const uint8_t* q = w + g * gb;
      float* o = row + g * p->group;
      for (int32_t i = 0; i < p->group; i++) o[i] = j->fp8[q[i]] * scale;
      continue;
    }
    rlx_dequant_group(p->scheme, w + g * gb, p->group, scale, zero, row + g * p->group);
  }
}

/* GEMV rows [begin, end) of W against every row of x. */
static void gemv_range(void* ctx, int64_t begin, int64_t end) {
  const dq_job* j = ctx;
  const rlx_dqmm_params* p = &j->s->p.dqmm;
  /* packed rows (a full group of an interleaved W) only dequantize */
  row_dot_fn fused = j->packed && begin < p->N / 8 * 8 ? NULL : fused_row_dot(p->scheme, j->simd);
  float* row = fused ? NULL : malloc(sizeof(float) * (size_t)p->K);
  if (!fused && !row) { /* the caller then hands the step to the reference */
    atomic_store(&((dq_job*)ctx)->failed, 1);
    return;
  }
  for (int64_t n = begin; n < end; n++) {
    const uint8_t* w = j->arena + j->s->in[1].offset + n * p->row_bytes;
    if (!fused) dequant_row(j, n, row);
    for (int64_t m = 0; m < p->M; m++) {
      const float* xs = j->xsum ? j->xsum + m * (p->K / 32) : NULL;
      j->y[m * p->N + n] = fused ? fused(w, j->x + m * p->K, xs, p->K)
                                 : dot_any(j->simd, j->x + m * p->K, row, p->K);
    }
  }
  free(row);
}

/* Rows [begin, end) of the tile starting at W row n0. */
static void tile_range(void* ctx, int64_t begin, int64_t end) {
  const dq_job* j = ctx;
  for (int64_t r = begin; r < end; r++) dequant_row(j, j->n0 + r, j->y + r * j->s->p.dqmm.K);
}

static void prefill(rlx_cpu_fast* f, dq_job* j, float* y, float* tile) {
  const rlx_dqmm_params* p = &j->s->p.dqmm;
  for (int64_t n0 = 0; n0 < p->N; n0 += RLX_DQ_TILE) {
    int64_t rows = p->N - n0 < RLX_DQ_TILE ? p->N - n0 : RLX_DQ_TILE;
    j->n0 = n0;
    j->y = tile;
    rlx_cpu_parallel_for(f->pool, rows, 4, tile_range, j);
    rlx_cpu_sgemm(f->pool, 0, 1, p->M, rows, p->K, j->x, p->K, tile, p->K, y + n0, p->N);
  }
}

int rlx_cpu_fast_dequant_matmul(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_dqmm_params* p = &s->p.dqmm;
  rlx_dtype xt = s->in[0].dtype, yt = s->out[0].dtype;
  if (p->transposed || xt != yt || !(xt == RLX_F32 || xt == RLX_F16 || xt == RLX_BF16)) return 0;
  int gemv = p->M <= RLX_DQ_GEMV_ROWS;
  size_t xn = (size_t)(p->M * p->K), yn = (size_t)(p->M * p->N);
  float* xbuf = xt == RLX_F32 ? NULL : malloc(sizeof(float) * xn);
  float* ybuf = yt == RLX_F32 ? NULL : malloc(sizeof(float) * yn);
  float* tile = gemv ? NULL : malloc(sizeof(float) * (size_t)(RLX_DQ_TILE * p->K));
  float* probe = malloc(sizeof(float) * (size_t)p->K); /* the GEMV threads' row buffers */
  float* xsum = p->scheme == RLX_QUANT_Q4_K ? malloc(sizeof(float) * (xn / 32 + 1)) : NULL;
  int ok = probe && (xt == RLX_F32 || xbuf) && (yt == RLX_F32 || ybuf) && (gemv || tile) &&
           (p->scheme != RLX_QUANT_Q4_K || xsum);
  if (ok) {
    static dq_job zero_job;
    dq_job j = zero_job;
    atomic_init(&j.failed, 0);
    j.s = s, j.arena = arena, j.simd = rlx_cpu_simd_level();
    if (xbuf) rlx_convert(xbuf, RLX_F32, arena + s->in[0].offset, xt, (int64_t)xn);
    j.x = xbuf ? xbuf : (const float*)(arena + s->in[0].offset);
    for (size_t r = 0; xsum && r < xn / 32; r++) { /* runs of 32 never cross a row: 256 | K */
      float t = 0.0f;
      for (int i = 0; i < 32; i++) t += j.x[32 * r + i];
      xsum[r] = t;
    }
    j.xsum = xsum;
    rlx_dtype f8 = p->scheme == RLX_QUANT_FP8_E4M3 ? RLX_F8E4M3FN : RLX_F8E5M2;
    for (int c = 0; c < 256; c++) j.fp8[c] = (float)rlx_f8_decode(f8, (uint8_t)c);
    float* y = ybuf ? ybuf : (float*)(arena + s->out[0].offset);
    rlx_cpu_packed* packed = rlx_cpu_packed_w(f, s->in[1].offset);
    j.packed = packed;
    limb_x lx = {NULL, NULL, NULL};
    if (gemv && packed && limb_x_prepare(j.x, p->M, p->K, &lx)) {
      j.lx = &lx, j.y = y;
      rlx_cpu_parallel_for(f->pool, p->N / 8, 2, packed_range, &j);
      gemv_range(&j, p->N / 8 * 8, p->N); /* the plain tail rows */
      ok = !atomic_load(&j.failed);
      limb_x_free(&lx);
    } else if (gemv) {
      j.y = y;
      rlx_cpu_parallel_for(f->pool, p->N, 16, gemv_range, &j);
      ok = !atomic_load(&j.failed); /* else the reference recomputes every row */
    } else {
      prefill(f, &j, y, tile);
    }
    if (ok && ybuf) rlx_convert(arena + s->out[0].offset, yt, ybuf, RLX_F32, (int64_t)yn);
  }
  rlx_cpu_packed* packed_w = rlx_cpu_packed_w(f, s->in[1].offset);
  if (!ok && packed_w) rlx_cpu_repack_set(arena, packed_w, 0, f->pack_tmp); /* the reference reads plain rows */
  free(xbuf);
  free(ybuf);
  free(tile);
  free(probe);
  free(xsum);
  return ok;
}
