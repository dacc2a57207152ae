/* CPU fast paths: threaded, vectorised f32 kernels for the steps that
 * dominate inference (matmul, elementwise, softmax, norms, attention). Each
 * either takes a step completely (returns 1) or declines it before writing
 * anything (returns 0) and the reference kernel runs instead. Every path is
 * tested against the reference (tests/test_cpu_fast.c).
 *
 * SIMD: kernels are written once with GCC vector extensions (16-float
 * vectors) in always-inline "_impl" functions, then compiled three times by
 * SIMD_VARIANTS: for AVX-512, for AVX2 and for the baseline, the widest
 * chosen at run time. No global -march flags are needed. */

/* Functions returning a 64-byte vector warn that their ABI differs without
 * AVX-512; all such helpers are static and always inlined, so no ABI is
 * involved. Vector parameters are passed by pointer for the same reason. */
#pragma GCC diagnostic ignored "-Wpsabi"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "base/scalar_math.h"

/* ------------------------------------------------------------ vector basics */

#define VL 16
typedef float vf __attribute__((vector_size(VL * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(VL * sizeof(int32_t))));
#define FAST_INLINE static inline __attribute__((always_inline))

/* The SIMD variants let a*b+c become one FMA (GCC builds ISO C with
 * contraction off; clang contracts within an expression by default): one
 * rounding instead of two, and faster. */
#if defined(__clang__)
#define FAST_TARGET(isa) __attribute__((target(isa)))
#else
#define FAST_TARGET(isa) __attribute__((target(isa), optimize("fp-contract=fast")))
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(RLX_NO_SIMD)
#define SIMD_VARIANTS(name, params, args)                                          \
  FAST_TARGET("avx512f") static void name##_avx512 params { name##_impl args; }    \
  FAST_TARGET("avx2,fma") static void name##_avx2 params { name##_impl args; }     \
  static void name##_base params { name##_impl args; }                                  \
  static void name params {                                                             \
    int level_ = rlx_cpu_simd_level();                                                  \
    if (level_ == 2)                                                                    \
      name##_avx512 args;                                                               \
    else if (level_ == 1)                                                               \
      name##_avx2 args;                                                                 \
    else                                                                                \
      name##_base args;                                                                 \
  }
#else
#define SIMD_VARIANTS(name, params, args) \
  static void name params { name##_impl args; }
#endif

FAST_INLINE vf vload(const float* p) {
  vf v;
  memcpy(&v, p, sizeof v);
  return v;
}
FAST_INLINE void vstore(float* p, const vf* v) { memcpy(p, v, sizeof *v); }
/* The first n (< VL) lanes from p, the rest zero. */
FAST_INLINE vf vload_part(const float* p, int64_t n) {
  vf v = {0};
  memcpy(&v, p, (size_t)n * sizeof(float));
  return v;
}
FAST_INLINE void vstore_part(float* p, const vf* v, int64_t n) {
  memcpy(p, v, (size_t)n * sizeof(float));
}
FAST_INLINE vf vsplat(float x) {
  vf v = {0};
  return v + x;
}
/* Lane masks (-1 / 0) are computed arithmetically, from sign bits, not with
 * vector comparisons: GCC 12 scalarises a 16-lane comparison whose mask is
 * used more than once, which made exp ten times slower. */
/* -1 where x has its sign bit set (negative, -0, NaN with sign). */
FAST_INLINE vi vsign_mask(const vf* x) { return (vi)*x >> 31; }
/* -1 where a < b, for ordered a, b (equal zeros may go either way). */
FAST_INLINE vi vless_mask(const vf* a, const vf* b) {
  vf d = *a - *b;
  return vsign_mask(&d);
}
/* -1 in NaN lanes: |bits| above the infinity pattern. */
FAST_INLINE vi visnan(const vf* x) {
  vi mag = (vi)*x & 0x7fffffff;
  return (0x7f800000 - mag) >> 31;
}
/* m ? a : b per lane (m lanes are 0 or -1, as comparisons produce). */
FAST_INLINE vf vselect(const vi* m, const vf* a, const vf* b) {
  return (vf)(((vi)*a & *m) | ((vi)*b & ~*m));
}
FAST_INLINE float vhmax(const vf* v) {
  float m = (*v)[0];
  for (int i = 1; i < VL; i++) m = (*v)[i] > m ? (*v)[i] : m;
  return m;
}
FAST_INLINE double vhsum_f64(const vf* v) {
  double s = 0.0;
  for (int i = 0; i < VL; i++) s += (double)(*v)[i];
  return s;
}

/* exp(x) to ~1 ulp: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2
 * is exact), a degree-7 Taylor polynomial for e^r, and 2^n applied as two
 * normal-range factors so results down to the denormals come out right.
 * -inf and anything below -104 give exactly 0, overflow gives inf, NaN stays
 * NaN. */
FAST_INLINE vf vexp(const vf* px) {
  vf x = *px;
  vi is_nan = visnan(&x);
  vf lo = vsplat(-104.0f), hi = vsplat(88.8f), zero = vsplat(0.0f);
  vi under = vless_mask(&x, &lo);
  vi over = vless_mask(&hi, &x);
  vf xc = vselect(&over, &hi, &x);
  vi bad = under | is_nan;
  xc = vselect(&bad, &zero, &xc);
  const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  vf n = (xc * 1.44269504088896341f + magic) - magic;
  vf r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  vf p = vsplat(1.0f / 5040.0f);
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  vi ni = __builtin_convertvector(n, vi);
  vi h = ni >> 1;
  vf s1 = (vf)((h + 127) << 23), s2 = (vf)((ni - h + 127) << 23);
  vf y = p * s1 * s2;
  y = vselect(&under, &zero, &y);
  return vselect(&is_nan, &x, &y);
}

/* tanh(x) = sign(x) (1 - 2 / (e^{2|x|} + 1)); near 0 that cancels, so small
 * |x| uses the odd Taylor series instead. */
FAST_INLINE vf vtanh(const vf* px) {
  vf x = *px;
  vi neg = vsign_mask(&x);
  vf ax = -x;
  ax = vselect(&neg, &ax, &x);
  vf t = ax + ax;
  vf e = vexp(&t);
  vf big = 1.0f - 2.0f / (e + 1.0f);
  vf x2 = ax * ax;
  vf small = ax + ax * x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f)));
  vf small_edge = vsplat(0.125f);
  vi is_small = vless_mask(&ax, &small_edge);
  vf y = vselect(&is_small, &small, &big);
  vf ny = -y;
  y = vselect(&neg, &ny, &y);
  vi is_nan = visnan(&x);
  return vselect(&is_nan, &x, &y);
}

/* GELU(x) = x/2 (1 + erf(x/sqrt2)) = x/2 erfc(-x/sqrt2), with erfc(z) for
 * z >= 0 from the Chebyshev fit erfc(z) = t exp(-z^2 + P(t)), t = 1/(1+z/2)
 * (Numerical Recipes' erfcc, fractional error < 1.2e-7 everywhere). For
 * x >= 0 the factor is 2 - erfc, for x < 0 it is erfc: no cancellation on
 * either side, unlike 1 + erf. */
FAST_INLINE vf vgelu_erf(const vf* px) {
  vf x = *px;
  vi neg = vsign_mask(&x);
  vf z = x * 0.70710678118654752f;
  vf nz = -z;
  z = vselect(&neg, &nz, &z);
  vf t = 1.0f / (1.0f + 0.5f * z);
  vf poly = -0.82215223f + t * 0.17087277f;
  poly = 1.48851587f + t * poly;
  poly = -1.13520398f + t * poly;
  poly = 0.27886807f + t * poly;
  poly = -0.18628806f + t * poly;
  poly = 0.09678418f + t * poly;
  poly = 0.37409196f + t * poly;
  poly = 1.00002368f + t * poly;
  poly = -1.26551223f + t * poly;
  vf arg = poly - z * z;
  vf erfc = t * vexp(&arg);
  vf two_minus = 2.0f - erfc;
  vf factor = vselect(&neg, &erfc, &two_minus);
  vf y = 0.5f * x * factor;
  vi is_nan = visnan(&x);
  return vselect(&is_nan, &x, &y);
}

/* Per-lane float partial sums flushed to double every BLOCK vectors: a row
 * statistic then carries at most BLOCK float roundings per lane. */
#define SUM_BLOCK 16

/* ------------------------------------------------------------ elementwise ops */

/* Float formulas of rlx_ref_activation (base/scalar_math.h). */
static float act_scalar(int act, float x) { return rlx_act_f32(act, x); }

static int act_has_vector(int act) {
  switch (act) {
    case RLX_ACT_NONE: case RLX_ACT_RELU: case RLX_ACT_SIGMOID: case RLX_ACT_TANH:
    case RLX_ACT_EXP: case RLX_ACT_SQRT: case RLX_ACT_RSQRT: case RLX_ACT_NEG:
    case RLX_ACT_ABS: case RLX_ACT_GELU: case RLX_ACT_GELU_APPROX: case RLX_ACT_SILU:
      return 1;
    default:
      return 0;
  }
}

FAST_INLINE vf act_vector(int act, const vf* px) {
  vf x = *px, zero = vsplat(0.0f);
  switch (act) {
    case RLX_ACT_RELU: {
      vi neg = vsign_mask(&x) & ~visnan(&x); /* NaN passes through */
      return vselect(&neg, &zero, &x);
    }
    case RLX_ACT_SIGMOID: {
      vf nx = -x;
      return 1.0f / (1.0f + vexp(&nx));
    }
    case RLX_ACT_TANH: return vtanh(&x);
    case RLX_ACT_EXP: return vexp(&x);
    case RLX_ACT_SQRT: {
      for (int i = 0; i < VL; i++) x[i] = sqrtf(x[i]); /* becomes vsqrtps */
      return x;
    }
    case RLX_ACT_RSQRT: {
      for (int i = 0; i < VL; i++) x[i] = 1.0f / sqrtf(x[i]);
      return x;
    }
    case RLX_ACT_NEG: return -x;
    case RLX_ACT_ABS: return (vf)((vi)x & 0x7fffffff);
    case RLX_ACT_GELU: return vgelu_erf(&x);
    case RLX_ACT_GELU_APPROX: {
      /* x/2 (1 + tanh(u)) = x / (1 + e^{-2u}): one exp, no cancellation. */
      vf u2 = -1.5957691216057307f * (x + 0.044715f * x * x * x);
      return x / (1.0f + vexp(&u2));
    }
    case RLX_ACT_SILU: {
      vf nx = -x;
      return x / (1.0f + vexp(&nx));
    }
    default: return x;
  }
}

/* o[i] = act(a[i * sa]) for i < n; o may equal a. */
FAST_INLINE void unary_run_impl(int act, float* o, const float* a, int64_t sa, int64_t n) {
  if (sa == 1 && act_has_vector(act)) {
    int64_t i = 0;
    for (; i + VL <= n; i += VL) {
      vf x = vload(a + i);
      vf y = act_vector(act, &x);
      vstore(o + i, &y);
    }
    if (i < n) {
      vf x = vload_part(a + i, n - i);
      vf y = act_vector(act, &x);
      vstore_part(o + i, &y, n - i);
    }
  } else if (sa == 0) {
    float y = act_scalar(act, a[0]);
    for (int64_t i = 0; i < n; i++) o[i] = y;
  } else {
    for (int64_t i = 0; i < n; i++) o[i] = act_scalar(act, a[i * sa]);
  }
}
SIMD_VARIANTS(unary_run, (int act, float* o, const float* a, int64_t sa, int64_t n),
              (act, o, a, sa, n))

static float binary_scalar(int op, float a, float b) { return rlx_binary_f32(op, a, b); }

FAST_INLINE vf binary_vector(int op, const vf* pa, const vf* pb) {
  vf a = *pa, b = *pb;
  switch (op) {
    case RLX_BIN_ADD: return a + b;
    case RLX_BIN_SUB: return a - b;
    case RLX_BIN_MUL: return a * b;
    case RLX_BIN_DIV: return a / b;
    case RLX_BIN_MAX:
    case RLX_BIN_MIN: {
      /* torch.maximum: NaN in either operand gives NaN (a + b carries it). */
      vi pick_a = op == RLX_BIN_MAX ? vless_mask(&b, &a) : vless_mask(&a, &b);
      vf y = vselect(&pick_a, &a, &b);
      vi nan = visnan(&a) | visnan(&b);
      vf s = a + b;
      return vselect(&nan, &s, &y);
    }
    default:
      for (int i = 0; i < VL; i++) a[i] = binary_scalar(op, a[i], b[i]);
      return a;
  }
}

/* o[i] = op(a[i * sa], b[i * sb]); o may equal a or b (same index). */
FAST_INLINE void binary_run_impl(int op, float* o, const float* a, int64_t sa, const float* b,
                                 int64_t sb, int64_t n) {
  if (op == RLX_BIN_POW || sa < 0 || sa > 1 || sb < 0 || sb > 1) {
    for (int64_t i = 0; i < n; i++) o[i] = binary_scalar(op, a[i * sa], b[i * sb]);
    return;
  }
  vf a0 = vsplat(a[0]), b0 = vsplat(b[0]);
  int64_t i = 0;
  for (; i + VL <= n; i += VL) {
    vf x = sa ? vload(a + i) : a0;
    vf y = sb ? vload(b + i) : b0;
    vf z = binary_vector(op, &x, &y);
    vstore(o + i, &z);
  }
  if (i < n) {
    vf x = sa ? vload_part(a + i, n - i) : a0;
    vf y = sb ? vload_part(b + i, n - i) : b0;
    vf z = binary_vector(op, &x, &y);
    vstore_part(o + i, &z, n - i);
  }
}
SIMD_VARIANTS(binary_run,
              (int op, float* o, const float* a, int64_t sa, const float* b, int64_t sb,
               int64_t n),
              (op, o, a, sa, b, sb, n))

/* ------------------------------------------------------------ elementwise driver */

/* The out's index space with unit dims dropped and mergeable neighbours
 * merged, so most steps become [outer, inner] with each input's inner
 * stride 0 (broadcast) or 1 (dense). */
typedef struct ew_layout {
  int32_t rank;
  int32_t n_ops; /* out + inputs */
  int64_t shape[RLX_MAX_RANK];
  int64_t stride[1 + RLX_STEP_MAX_IN][RLX_MAX_RANK];
  float* base[1 + RLX_STEP_MAX_IN];
  int64_t total;
  int kind, op;
} ew_layout;

static void ew_collapse(ew_layout* L, const rlx_view* const* views) {
  const rlx_view* out = views[0];
  L->rank = 0;
  for (int32_t d = 0; d < out->rank; d++) {
    if (out->shape[d] == 1) continue;
    int32_t r = L->rank;
    int merge = r > 0;
    for (int32_t k = 0; k < L->n_ops && merge; k++)
      merge = L->stride[k][r - 1] == views[k]->stride[d] * out->shape[d];
    if (merge) {
      L->shape[r - 1] *= out->shape[d];
      for (int32_t k = 0; k < L->n_ops; k++) L->stride[k][r - 1] = views[k]->stride[d];
    } else {
      L->shape[r] = out->shape[d];
      for (int32_t k = 0; k < L->n_ops; k++) L->stride[k][r] = views[k]->stride[d];
      L->rank++;
    }
  }
  if (L->rank == 0) { /* a scalar: one element */
    L->rank = 1;
    L->shape[0] = 1;
    for (int32_t k = 0; k < L->n_ops; k++) L->stride[k][0] = 1;
  }
}

static void ew_run_piece(const ew_layout* L, float* const* p, int64_t len) {
  int32_t in = L->rank - 1;
  if (L->kind == RLX_K_UNARY)
    unary_run(L->op, p[0], p[1], L->stride[1][in], len);
  else
    binary_run(L->op, p[0], p[1], L->stride[1][in], p[2], L->stride[2][in], len);
}

/* Elements [begin, end) of the flattened out, as runs along the inner dim. */
static void ew_range(void* ctx, int64_t begin, int64_t end) {
  const ew_layout* L = ctx;
  int32_t R = L->rank;
  int64_t inner = L->shape[R - 1];
  int64_t idx[RLX_MAX_RANK];
  int64_t rem = begin;
  for (int32_t d = R - 1; d >= 0; d--) {
    idx[d] = rem % L->shape[d];
    rem /= L->shape[d];
  }
  int64_t pos = begin;
  while (pos < end) {
    float* p[1 + RLX_STEP_MAX_IN];
    for (int32_t k = 0; k < L->n_ops; k++) {
      int64_t off = 0;
      for (int32_t d = 0; d < R; d++) off += idx[d] * L->stride[k][d];
      p[k] = L->base[k] + off;
    }
    int64_t len = inner - idx[R - 1];
    if (len > end - pos) len = end - pos;
    ew_run_piece(L, p, len);
    pos += len;
    idx[R - 1] += len;
    for (int32_t d = R - 1; d > 0 && idx[d] == L->shape[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

static int all_f32(const rlx_view* v, int32_t n) {
  for (int32_t i = 0; i < n; i++)
    if (v[i].rank >= 0 && v[i].dtype != RLX_F32) return 0;
  return 1;
}

/* out must not partially overlap an input: the same view (in place) is
 * fine, anything else overlapping is left to the reference. */
static int same_view(const rlx_view* a, const rlx_view* b) {
  if (a->offset != b->offset || a->rank != b->rank) return 0;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d])) return 0;
  return 1;
}

static int overlaps(const rlx_view* a, const rlx_view* b) {
  rlx_range x = rlx_view_range(a), y = rlx_view_range(b);
  return x.begin < y.end && y.begin < x.end;
}

static int out_dense(const rlx_view* v) {
  int64_t expect = 1;
  for (int32_t d = v->rank - 1; d >= 0; d--) {
    if (v->shape[d] != 1 && v->stride[d] != expect) return 0;
    expect *= v->shape[d];
  }
  return 1;
}

static int64_t view_numel(const rlx_view* v) {
  int64_t n = 1;
  for (int32_t d = 0; d < v->rank; d++) n *= v->shape[d];
  return n;
}

#define EW_GRAIN 32768 /* elements per thread chunk */

static int fast_elementwise(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  int32_t n_in = s->kernel == RLX_K_UNARY ? 1 : 2;
  if (s->n_in != n_in || s->n_out < 1) return 0;
  if (!all_f32(s->in, n_in) || !all_f32(s->out, 1)) return 0;
  const rlx_view* out = &s->out[0];
  if (!out_dense(out)) return 0;
  const rlx_view* views[1 + 2] = {out, &s->in[0], n_in > 1 ? &s->in[1] : NULL};
  for (int32_t i = 0; i < n_in; i++) {
    if (s->in[i].rank != out->rank) return 0;
    for (int32_t d = 0; d < out->rank; d++)
      if (s->in[i].shape[d] != out->shape[d]) return 0;
    if (!same_view(out, &s->in[i]) && overlaps(out, &s->in[i])) return 0;
  }
  ew_layout L;
  memset(&L, 0, sizeof L);
  L.n_ops = 1 + n_in;
  L.kind = s->kernel;
  L.op = s->op;
  L.total = view_numel(out);
  if (L.total == 0) return 1;
  for (int32_t k = 0; k < L.n_ops; k++) L.base[k] = (float*)(arena + views[k]->offset);
  ew_collapse(&L, views);
  rlx_cpu_parallel_for(f->pool, L.total, EW_GRAIN, ew_range, &L);
  return 1;
}

/* ------------------------------------------------------------ regions */

/* An f32 ElementwiseRegion runs its program over tiles of a run: each
 * instruction is one pass of the same unary_run / binary_run the unfused
 * steps use, over the tile (results in per-instruction scratch, the last
 * one straight into the output), so the fused region gives the unfused
 * chain's bits while each intermediate stays in cache. Constants are
 * stride-0 operands, like the broadcast scalars of the unfused steps. */
#define REGION_TILE 256

typedef struct region_job {
  ew_layout L;
  const rlx_region_program* p;
  float imm[RLX_REGION_MAX_INSTRS];
} region_job;

typedef struct region_operand {
  const float* base;
  int64_t stride;
} region_operand;

static region_operand region_slot(const region_job* j, float* const* p, float (*tmp)[REGION_TILE],
                                  int32_t slot, int64_t off) {
  int32_t n_in = j->p->n_inputs;
  if (slot < n_in) {
    int64_t st = j->L.stride[1 + slot][j->L.rank - 1];
    return (region_operand){p[1 + slot] + off * st, st};
  }
  int32_t k = slot - n_in;
  if (j->p->code[k].kind == RLX_RI_CONST) return (region_operand){&j->imm[k], 0};
  return (region_operand){tmp[k], 1};
}

static void region_tile(const region_job* j, float* const* p, float (*tmp)[REGION_TILE],
                        int64_t off, int64_t n) {
  const rlx_region_program* prog = j->p;
  int32_t last = prog->n_instrs - 1;
  for (int32_t k = 0; k <= last; k++) {
    const rlx_region_instr* in = &prog->code[k];
    float* dst = k == last ? p[0] + off : tmp[k];
    region_operand a = region_slot(j, p, tmp, in->a, off);
    if (in->kind == RLX_RI_UNARY) {
      unary_run(in->op, dst, a.base, a.stride, n);
    } else if (in->kind == RLX_RI_BINARY) {
      region_operand b = region_slot(j, p, tmp, in->b, off);
      binary_run(in->op, dst, a.base, a.stride, b.base, b.stride, n);
    } else if (k == last) { /* a constant output: the broadcast immediate */
      for (int64_t i = 0; i < n; i++) dst[i] = j->imm[k];
    }
  }
}

static void region_piece(const region_job* j, float* const* p, int64_t len) {
  float tmp[RLX_REGION_MAX_INSTRS][REGION_TILE];
  for (int64_t off = 0; off < len; off += REGION_TILE)
    region_tile(j, p, tmp, off, len - off < REGION_TILE ? len - off : REGION_TILE);
}

/* Elements [begin, end) of the flattened out, as runs along the inner dim
 * (ew_range's walk). */
static void region_range(void* ctx, int64_t begin, int64_t end) {
  const region_job* j = ctx;
  const ew_layout* L = &j->L;
  int32_t R = L->rank;
  int64_t idx[RLX_MAX_RANK], rem = begin, pos = begin;
  for (int32_t d = R - 1; d >= 0; d--) {
    idx[d] = rem % L->shape[d];
    rem /= L->shape[d];
  }
  while (pos < end) {
    float* p[1 + RLX_STEP_MAX_IN];
    for (int32_t k = 0; k < L->n_ops; k++) {
      int64_t off = 0;
      for (int32_t d = 0; d < R; d++) off += idx[d] * L->stride[k][d];
      p[k] = L->base[k] + off;
    }
    int64_t len = L->shape[R - 1] - idx[R - 1];
    if (len > end - pos) len = end - pos;
    region_piece(j, p, len);
    pos += len;
    idx[R - 1] += len;
    for (int32_t d = R - 1; d > 0 && idx[d] == L->shape[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
    }
  }
}

static int fast_region(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_region_program* prog = &s->p.region;
  const rlx_view* out = &s->out[0];
  if (prog->dtype != RLX_F32 || s->n_in != prog->n_inputs || s->n_out < 1) return 0;
  if (!all_f32(s->in, s->n_in) || !all_f32(s->out, 1) || !out_dense(out)) return 0;
  const rlx_view* views[1 + RLX_STEP_MAX_IN] = {out};
  for (int32_t i = 0; i < s->n_in; i++) {
    if (s->in[i].rank != out->rank) return 0;
    for (int32_t d = 0; d < out->rank; d++)
      if (s->in[i].shape[d] != out->shape[d]) return 0;
    if (!same_view(out, &s->in[i]) && overlaps(out, &s->in[i])) return 0;
    views[1 + i] = &s->in[i];
  }
  region_job* j = calloc(1, sizeof *j);
  if (!j) return 0; /* the reference runs it */
  j->p = prog;
  for (int32_t k = 0; k < prog->n_instrs; k++) j->imm[k] = (float)prog->imm[k];
  j->L.n_ops = 1 + s->n_in;
  j->L.total = view_numel(out);
  for (int32_t k = 0; k < j->L.n_ops; k++) j->L.base[k] = (float*)(arena + views[k]->offset);
  if (j->L.total > 0) {
    ew_collapse(&j->L, views);
    rlx_cpu_parallel_for(f->pool, j->L.total, EW_GRAIN, region_range, j);
  }
  free(j);
  return 1;
}

/* ------------------------------------------------------------ softmax */

typedef struct rows_job {
  const rlx_step* s;
  uint8_t* arena;
} rows_job;

/* One row of n: softmax (op 0) or log-softmax (op 1). A NaN anywhere makes
 * the row NaN, as in the reference. */
FAST_INLINE void softmax_row_impl(int op, const float* x, float* o, int64_t n) {
  vf mx = vsplat(-INFINITY);
  vi any_nan = {0};
  int64_t i = 0;
  for (; i + VL <= n; i += VL) {
    vf v = vload(x + i);
    any_nan |= visnan(&v);
    vi gt = vless_mask(&mx, &v); /* a NaN lane may land in mx: any_nan covers it */
    mx = vselect(&gt, &v, &mx);
  }
  float m = vhmax(&mx);
  int nan_row = 0;
  for (int k = 0; k < VL; k++) nan_row |= any_nan[k] != 0;
  for (; i < n; i++) {
    if (isnan(x[i])) nan_row = 1;
    if (x[i] > m) m = x[i];
  }
  if (nan_row) m = NAN;
  double sum = 0.0;
  vf acc = vsplat(0.0f), mv = vsplat(m);
  int blk = 0;
  for (i = 0; i + VL <= n; i += VL) {
    vf t = vload(x + i) - mv;
    vf e = vexp(&t);
    if (op == 0) vstore(o + i, &e);
    acc += e;
    if (++blk == SUM_BLOCK) {
      sum += vhsum_f64(&acc);
      acc = vsplat(0.0f);
      blk = 0;
    }
  }
  if (i < n) {
    vf t = vload_part(x + i, n - i) - mv;
    vf e = vexp(&t);
    for (int64_t k = n - i; k < VL; k++) e[k] = 0.0f;
    if (op == 0) vstore_part(o + i, &e, n - i);
    acc += e;
  }
  sum += vhsum_f64(&acc);
  if (op == 0) {
    vf inv = vsplat((float)(1.0 / sum));
    for (i = 0; i + VL <= n; i += VL) {
      vf y = vload(o + i) * inv;
      vstore(o + i, &y);
    }
    for (; i < n; i++) o[i] *= inv[0];
  } else {
    vf shift = vsplat(m + (float)log(sum));
    for (i = 0; i + VL <= n; i += VL) {
      vf y = vload(x + i) - shift;
      vstore(o + i, &y);
    }
    for (; i < n; i++) o[i] = x[i] - shift[0];
  }
}

FAST_INLINE void softmax_rows_impl(const rows_job* j, int64_t begin, int64_t end) {
  const rlx_step* s = j->s;
  int64_t n = s->p.rowop.row.n;
  const float* x = (const float*)(j->arena + s->in[0].offset);
  float* o = (float*)(j->arena + s->out[0].offset);
  for (int64_t r = begin; r < end; r++) softmax_row_impl(s->op, x + r * n, o + r * n, n);
}
SIMD_VARIANTS(softmax_rows, (const rows_job* j, int64_t begin, int64_t end), (j, begin, end))

static void softmax_range(void* ctx, int64_t begin, int64_t end) {
  softmax_rows(ctx, begin, end);
}

static int64_t row_grain(int64_t cols) {
  int64_t g = EW_GRAIN / (cols > 0 ? cols : 1);
  return g > 0 ? g : 1;
}

static int fast_softmax(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_row_params* r = &s->p.rowop.row;
  if ((s->op != 0 && s->op != 1) || r->inner != 1 || r->n < 1) return 0;
  if (s->in[0].dtype != RLX_F32 || s->out[0].dtype != RLX_F32) return 0;
  /* Rows are processed whole, so in place works; partial overlap does not. */
  if (s->in[0].offset != s->out[0].offset && overlaps(&s->in[0], &s->out[0])) return 0;
  rows_job j = {s, arena};
  rlx_cpu_parallel_for(f->pool, r->outer, row_grain(r->n), softmax_range, &j);
  return 1;
}

/* ------------------------------------------------------------ norms */

enum { NORM_X, NORM_RESIDUAL, NORM_BIAS, NORM_GAMMA, NORM_BETA };

typedef struct norm_row {
  const float *x, *res, *bias, *gamma, *beta;
  float *y, *sum;
} norm_row;

/* The pre-norm value at i..i+VL: x, or x + residual (+ bias). */
FAST_INLINE vf norm_src(const norm_row* r, int64_t i, int direct) {
  vf v = vload(r->x + i);
  if (!direct) {
    v += vload(r->res + i);
    if (r->bias) v += vload(r->bias + i);
  }
  return v;
}
FAST_INLINE vf norm_src_part(const norm_row* r, int64_t i, int64_t len, int direct) {
  vf v = vload_part(r->x + i, len);
  if (!direct) {
    v += vload_part(r->res + i, len);
    if (r->bias) v += vload_part(r->bias + i, len);
  }
  return v;
}

FAST_INLINE void norm_row_impl(const rlx_norm_params* p, norm_row* r) {
  int64_t n = p->cols, i;
  /* With a residual, the sum is written first (when asked) and then read
   * back like x, so the norm sees exactly the value stored. */
  if (p->has_residual && p->writes_sum) {
    for (i = 0; i + VL <= n; i += VL) {
      vf v = norm_src(r, i, 0);
      vstore(r->sum + i, &v);
    }
    if (i < n) {
      vf v = norm_src_part(r, i, n - i, 0);
      vstore_part(r->sum + i, &v, n - i);
    }
    r->x = r->sum;
  }
  int direct = !p->has_residual || p->writes_sum;
  double mean = 0.0;
  vf acc = vsplat(0.0f);
  int blk = 0;
  if (!p->rms) {
    for (i = 0; i + VL <= n; i += VL) {
      acc += norm_src(r, i, direct);
      if (++blk == SUM_BLOCK) mean += vhsum_f64(&acc), acc = vsplat(0.0f), blk = 0;
    }
    if (i < n) acc += norm_src_part(r, i, n - i, direct);
    mean = (mean + vhsum_f64(&acc)) / (double)n;
  }
  vf mv = vsplat((float)mean);
  double ss = 0.0;
  acc = vsplat(0.0f);
  blk = 0;
  for (i = 0; i + VL <= n; i += VL) {
    vf d = norm_src(r, i, direct) - mv;
    acc += d * d;
    if (++blk == SUM_BLOCK) ss += vhsum_f64(&acc), acc = vsplat(0.0f), blk = 0;
  }
  if (i < n) {
    vf d = norm_src_part(r, i, n - i, direct) - mv;
    for (int64_t k = n - i; k < VL; k++) d[k] = 0.0f;
    acc += d * d;
  }
  ss += vhsum_f64(&acc);
  vf inv = vsplat((float)(1.0 / sqrt(ss / (double)n + (double)p->eps)));
  for (i = 0; i < n; i += VL) {
    int64_t len = n - i < VL ? n - i : VL;
    vf y = (len == VL ? norm_src(r, i, direct) : norm_src_part(r, i, len, direct)) - mv;
    y *= inv;
    if (r->gamma) y *= len == VL ? vload(r->gamma + i) : vload_part(r->gamma + i, len);
    if (r->beta) y += len == VL ? vload(r->beta + i) : vload_part(r->beta + i, len);
    if (len == VL)
      vstore(r->y + i, &y);
    else
      vstore_part(r->y + i, &y, len);
  }
}

FAST_INLINE void norm_rows_impl(const rows_job* j, int64_t begin, int64_t end) {
  const rlx_step* s = j->s;
  const rlx_norm_params* p = &s->p.norm;
  uint8_t* a = j->arena;
#define NORM_IN(k, flag) ((flag) ? (const float*)(a + s->in[k].offset) : NULL)
  const float* x = NORM_IN(NORM_X, 1);
  const float* res = NORM_IN(NORM_RESIDUAL, p->has_residual);
  const float* bias = NORM_IN(NORM_BIAS, p->has_residual && p->has_bias);
  const float* gamma = NORM_IN(NORM_GAMMA, p->has_gamma);
  const float* beta = NORM_IN(NORM_BETA, p->has_beta);
#undef NORM_IN
  float* y = (float*)(a + s->out[0].offset);
  float* sum = p->has_residual && p->writes_sum ? (float*)(a + s->out[1].offset) : NULL;
  for (int64_t row = begin; row < end; row++) {
    int64_t o = row * p->cols;
    norm_row r = {x + o, res ? res + o : NULL, bias, gamma, beta, y + o, sum ? sum + o : NULL};
    norm_row_impl(p, &r);
  }
}
SIMD_VARIANTS(norm_rows, (const rows_job* j, int64_t begin, int64_t end), (j, begin, end))

static void norm_range(void* ctx, int64_t begin, int64_t end) { norm_rows(ctx, begin, end); }

static int fast_norm(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_norm_params* p = &s->p.norm;
  if (p->rows < 0 || p->cols < 1) return 0;
  if (!all_f32(s->in, s->n_in) || !all_f32(s->out, s->n_out)) return 0;
  if (p->has_residual && s->in[NORM_RESIDUAL].rank < 0) return 0;
  if (p->has_residual && p->has_bias && s->in[NORM_BIAS].rank < 0) return 0;
  if ((p->has_gamma && s->in[NORM_GAMMA].rank < 0) || (p->has_beta && s->in[NORM_BETA].rank < 0))
    return 0;
  if (p->has_residual && p->writes_sum && s->n_out < 2) return 0;
  /* The outputs are written while inputs are still read: require them apart. */
  for (int32_t o = 0; o < s->n_out; o++)
    for (int32_t i = 0; i < s->n_in; i++)
      if (s->in[i].rank >= 0 && overlaps(&s->out[o], &s->in[i])) return 0;
  rows_job j = {s, arena};
  rlx_cpu_parallel_for(f->pool, p->rows, row_grain(p->cols), norm_range, &j);
  return 1;
}

/* ------------------------------------------------------------ channel norms */

/* f32 element of an optional per-channel input (gamma, beta, mean, var). */
static float gn_at(const rows_job* j, int32_t slot, int64_t c) {
  return ((const float*)(j->arena + j->s->in[slot].offset))[c];
}

/* Groups [begin, end) of a RLX_K_GROUP_NORM step (each group = (o, i)):
 * two passes in double over strided elements, then the affine. */
static void gnorm_range(void* ctx, int64_t begin, int64_t end) {
  const rows_job* j = ctx;
  const rlx_gnorm_params* p = &j->s->p.gnorm;
  const float* x = (const float*)(j->arena + j->s->in[RLX_GN_X].offset);
  float* y = (float*)(j->arena + j->s->out[0].offset);
  for (int64_t gi = begin; gi < end; gi++) {
    int64_t o = gi / p->inner, base = o * p->n * p->inner + gi % p->inner;
    double mean = 0.0, var = 0.0;
    if (p->has_stats) {
      mean = gn_at(j, RLX_GN_MEAN, o % p->groups);
      var = gn_at(j, RLX_GN_VAR, o % p->groups);
    } else {
      for (int64_t k = 0; k < p->n; k++) mean += x[base + k * p->inner];
      mean /= (double)p->n;
      for (int64_t k = 0; k < p->n; k++) {
        double d = x[base + k * p->inner] - mean;
        var += d * d;
      }
      var /= (double)p->n;
    }
    float inv = (float)(1.0 / sqrt(var + (double)p->eps)), m = (float)mean;
    for (int64_t k = 0; k < p->n; k++) {
      int64_t e = base + k * p->inner, c = ((o % p->groups) * p->n + k) / p->cdiv;
      float v = (x[e] - m) * inv;
      if (p->has_gamma) v *= gn_at(j, RLX_GN_GAMMA, c);
      if (p->has_beta) v += gn_at(j, RLX_GN_BETA, c);
      y[e] = v;
    }
  }
}

static int fast_group_norm(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_gnorm_params* p = &s->p.gnorm;
  if (p->n < 1 || p->inner < 1 || p->groups < 1 || p->cdiv < 1) return 0;
  for (int32_t i = 0; i < s->n_in; i++)
    if (s->in[i].rank >= 0 && (s->in[i].dtype != RLX_F32 || overlaps(&s->out[0], &s->in[i])))
      return 0;
  if (s->out[0].dtype != RLX_F32) return 0;
  rows_job j = {s, arena};
  rlx_cpu_parallel_for(f->pool, p->outer * p->inner, row_grain(p->n), gnorm_range, &j);
  return 1;
}

/* ------------------------------------------------------------ attention */

/* Flash-style: each task is (batch, head, block of ATT_QB queries); keys are
 * visited in blocks of ATT_KB (one vector of scores per query) with an online
 * softmax, so no Sq x Sk matrix exists. Each key block is transposed (K) and
 * padded (V) into the task's tile once and used by all ATT_QB queries. Tiles
 * are allocated before the threads start, one per thread, so the step can
 * still decline (to the reference) when memory is short. */
#define ATT_QB 64
#define ATT_KB VL
#define ATT_DMAX 256

typedef struct attn_tile {
  float qs[ATT_QB][ATT_DMAX];  /* the block's queries, zero padded */
  float kt[ATT_DMAX][ATT_KB];  /* K block transposed: kt[d][j] */
  float vs[ATT_KB][ATT_DMAX];  /* V block, zero padded */
  float acc[ATT_QB][ATT_DMAX]; /* unnormalised outputs */
  float m[ATT_QB], l[ATT_QB];  /* running max and sum of weights */
} attn_tile;
_Static_assert(sizeof(attn_tile) % 64 == 0, "attn_tile size must be a multiple of 64");

typedef struct attn_job {
  const rlx_attention_params* p;
  const float *q, *k, *v;
  float* o;
  const uint8_t* mask; /* in3 base, or NULL */
  rlx_dtype mask_dtype;
  int64_t n_qblocks;
  attn_tile* tiles;     /* one per chunk */
  atomic_int next_tile;
} attn_job;

/* Applies the mask kind to a block of scores for query i, keys j0..j0+VL
 * (lanes past kb are -inf). */
static void attn_mask_block(const attn_job* J, int64_t b, int64_t h, int64_t i, int64_t j0,
                            int64_t kb, float* sc) {
  const rlx_attention_params* p = J->p;
  int64_t last_visible = i + p->Sk - p->Sq;
  for (int64_t jj = 0; jj < VL; jj++) {
    int64_t j = j0 + jj;
    if (jj >= kb) {
      sc[jj] = -INFINITY;
      continue;
    }
    int64_t m_at = b * p->m_sb + h * p->m_sh + i * p->m_sq + j * p->m_sk;
    switch (p->mask) {
      case RLX_MASK_CAUSAL:
        if (j > last_visible) sc[jj] = -INFINITY;
        break;
      case RLX_MASK_SLIDING:
        if (j > last_visible || j <= last_visible - p->window) sc[jj] = -INFINITY;
        break;
      case RLX_MASK_CUSTOM: {
        int keep = J->mask_dtype == RLX_F32 ? ((const float*)J->mask)[m_at] > 0.5f
                                            : J->mask[m_at] != 0; /* bool / u8 */
        if (!keep) sc[jj] = -INFINITY;
        break;
      }
      case RLX_MASK_BIAS:
        sc[jj] += ((const float*)J->mask)[m_at];
        break;
      default:
        break;
    }
  }
}

/* Does query i need attn_mask_block for keys [j0, j0 + kb)? Not when the
 * block is full and wholly visible (the bulk of a causal row). */
static int attn_needs_mask(const rlx_attention_params* p, int64_t i, int64_t j0, int64_t kb) {
  if (kb < ATT_KB) return 1;
  int64_t last_visible = i + p->Sk - p->Sq;
  switch (p->mask) {
    case RLX_MASK_NONE: return 0;
    case RLX_MASK_CAUSAL: return j0 + kb - 1 > last_visible;
    case RLX_MASK_SLIDING: return j0 + kb - 1 > last_visible || j0 <= last_visible - p->window;
    default: return 1;
  }
}

/* The key range any query of [i0, i1) may see. */
static void attn_key_range(const rlx_attention_params* p, int64_t i0, int64_t i1, int64_t* lo,
                           int64_t* hi) {
  *lo = 0;
  *hi = p->Sk;
  if (p->mask == RLX_MASK_CAUSAL || p->mask == RLX_MASK_SLIDING) {
    int64_t last = (i1 - 1) + p->Sk - p->Sq;
    if (last + 1 < *hi) *hi = last + 1;
    if (p->mask == RLX_MASK_SLIDING) {
      int64_t first = i0 + p->Sk - p->Sq - p->window + 1;
      if (first > *lo) *lo = first;
    }
  }
}

/* Two-source lane shuffle with constant indices (0-15 from x, 16-31 from y). */
#if defined(__clang__)
#define SHUFFLE2(x, y, ...) __builtin_shufflevector((x), (y), __VA_ARGS__)
#else
#define SHUFFLE2(x, y, ...) __builtin_shuffle((x), (y), (vi){__VA_ARGS__})
#endif

/* One transpose round: swaps the off-diagonal b x b halves of each 2b x 2b
 * block, for row pairs (i, i + b). */
#define TRANSPOSE_ROUND(r, b, LO, HI)      \
  for (int i_ = 0; i_ < VL; i_++) {        \
    if (i_ & (b)) continue;                \
    vf x_ = (r)[i_], y_ = (r)[i_ + (b)];   \
    (r)[i_] = SHUFFLE2(x_, y_, LO);        \
    (r)[i_ + (b)] = SHUFFLE2(x_, y_, HI);  \
  }
#define LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define LO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define HI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define LO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define HI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define LO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define HI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31

/* In-place transpose of a 16 x 16 block held as 16 vectors, in four rounds
 * of two-source shuffles (b = 8, 4, 2, 1). */
FAST_INLINE void transpose16(vf* r) {
  TRANSPOSE_ROUND(r, 8, LO8, HI8)
  TRANSPOSE_ROUND(r, 4, LO4, HI4)
  TRANSPOSE_ROUND(r, 2, LO2, HI2)
  TRANSPOSE_ROUND(r, 1, LO1, HI1)
}

FAST_INLINE void attn_load_kv(const attn_job* J, attn_tile* t, int64_t b, int64_t kvh,
                              int64_t j0, int64_t kb, int64_t Dvp) {
  const rlx_attention_params* p = J->p;
  const float* k0 = J->k + b * p->k_sb + j0 * p->k_ss + kvh * p->k_sh;
  /* K block -> kt, 16 dims at a time through a register transpose. */
  for (int64_t dc = 0; dc < p->D; dc += VL) {
    int64_t len = p->D - dc < VL ? p->D - dc : VL;
    vf r[VL];
    for (int64_t jj = 0; jj < VL; jj++) {
      const float* kr = k0 + jj * p->k_ss + dc;
      r[jj] = jj >= kb ? vsplat(0.0f) : len == VL ? vload(kr) : vload_part(kr, len);
    }
    transpose16(r);
    for (int64_t d = 0; d < len; d++) vstore(t->kt[dc + d], &r[d]);
  }
  for (int64_t jj = 0; jj < ATT_KB; jj++) {
    if (jj < kb) {
      const float* vr = J->v + b * p->v_sb + (j0 + jj) * p->v_ss + kvh * p->v_sh;
      memcpy(t->vs[jj], vr, (size_t)p->Dv * sizeof(float));
      for (int64_t d = p->Dv; d < Dvp; d++) t->vs[jj][d] = 0.0f;
    } else {
      for (int64_t d = 0; d < Dvp; d++) t->vs[jj][d] = 0.0f;
    }
  }
}

/* Scores of 4 query rows against the key block: s[r] = q[r] . k[:, lanes]. */
FAST_INLINE void attn_scores4(const attn_tile* t, int64_t r0, int64_t D, vf* s) {
  vf s0 = vsplat(0.0f), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t d = 0; d < D; d++) {
    vf kd = vload(t->kt[d]);
    s0 += t->qs[r0][d] * kd;
    s1 += t->qs[r0 + 1][d] * kd;
    s2 += t->qs[r0 + 2][d] * kd;
    s3 += t->qs[r0 + 3][d] * kd;
  }
  s[0] = s0, s[1] = s1, s[2] = s2, s[3] = s3;
}

/* Online-softmax update of row r with its block of scores. */
FAST_INLINE void attn_update_row(attn_tile* t, int64_t r, const vf* score, int64_t Dvp) {
  vf sc = *score;
  float mrow = vhmax(&sc);
  float m_new = mrow > t->m[r] ? mrow : t->m[r];
  if (m_new == -INFINITY) return; /* nothing visible yet */
  float alpha = t->m[r] == -INFINITY ? 0.0f : expf(t->m[r] - m_new);
  vf shifted = sc - m_new;
  float w[VL] __attribute__((aligned(64)));
  vf wv = vexp(&shifted);
  vstore(w, &wv);
  float wsum = 0.0f;
  for (int k = 0; k < VL; k++) wsum += w[k];
  t->l[r] = t->l[r] * alpha + wsum;
  t->m[r] = m_new;
  for (int64_t c = 0; c < Dvp; c += VL) {
    vf a = vload(t->acc[r] + c);
    if (alpha != 1.0f) a *= alpha;
    vf a2 = vsplat(0.0f);
    for (int64_t jj = 0; jj < ATT_KB; jj += 2) {
      a += w[jj] * vload(t->vs[jj] + c);
      a2 += w[jj + 1] * vload(t->vs[jj + 1] + c);
    }
    a += a2;
    vstore(t->acc[r] + c, &a);
  }
}

/* Scale, softcap and mask one row's block of scores. */
FAST_INLINE vf attn_finish_scores(const attn_job* J, const vf* raw, int64_t b, int64_t h,
                                  int64_t i, int64_t j0, int64_t kb) {
  const rlx_attention_params* p = J->p;
  vf sc = *raw * p->scale;
  if (p->softcap > 0.0f) {
    vf u = sc / p->softcap;
    sc = p->softcap * vtanh(&u);
  }
  if (attn_needs_mask(p, i, j0, kb)) {
    float tmp[VL];
    vstore(tmp, &sc);
    attn_mask_block(J, b, h, i, j0, kb, tmp);
    sc = vload(tmp);
  }
  return sc;
}

FAST_INLINE void attn_task_impl(const attn_job* J, int64_t task, attn_tile* t) {
  const rlx_attention_params* p = J->p;
  int64_t qb = task % J->n_qblocks, bh = task / J->n_qblocks;
  int64_t h = bh % p->H, b = bh / p->H;
  int64_t kvh = h / (p->H / p->Hkv);
  int64_t i0 = qb * ATT_QB, nq = p->Sq - i0 < ATT_QB ? p->Sq - i0 : ATT_QB;
  int64_t nq4 = (nq + 3) / 4 * 4;
  int64_t Dvp = (p->Dv + VL - 1) / VL * VL;
  for (int64_t r = 0; r < nq4; r++) {
    if (r < nq) {
      const float* qr = J->q + b * p->q_sb + (i0 + r) * p->q_ss + h * p->q_sh;
      memcpy(t->qs[r], qr, (size_t)p->D * sizeof(float));
    } else {
      memset(t->qs[r], 0, (size_t)p->D * sizeof(float));
    }
    memset(t->acc[r], 0, (size_t)Dvp * sizeof(float));
    t->m[r] = -INFINITY;
    t->l[r] = 0.0f;
  }
  int64_t lo, hi;
  attn_key_range(p, i0, i0 + nq, &lo, &hi);
  for (int64_t j0 = lo; j0 < hi; j0 += ATT_KB) {
    int64_t kb = hi - j0 < ATT_KB ? hi - j0 : ATT_KB;
    /* Rows of this block that see none of these keys skip them. */
    int64_t r_first = 0;
    if (p->mask == RLX_MASK_CAUSAL || p->mask == RLX_MASK_SLIDING) {
      r_first = j0 - (i0 + p->Sk - p->Sq);
      r_first = r_first < 0 ? 0 : r_first / 4 * 4;
    }
    attn_load_kv(J, t, b, kvh, j0, kb, Dvp);
    for (int64_t r0 = r_first; r0 < nq; r0 += 4) {
      vf s[4];
      attn_scores4(t, r0, p->D, s);
      for (int64_t r = r0; r < r0 + 4 && r < nq; r++) {
        vf sc = attn_finish_scores(J, &s[r - r0], b, h, i0 + r, j0, kb);
        attn_update_row(t, r, &sc, Dvp);
      }
    }
  }
  /* A row that saw no key outputs zeros, as the reference does. */
  for (int64_t r = 0; r < nq; r++) {
    float* orow = J->o + b * p->o_sb + (i0 + r) * p->o_ss + h * p->o_sh;
    float inv = t->l[r] > 0.0f ? 1.0f / t->l[r] : 0.0f;
    for (int64_t d = 0; d < p->Dv; d++) orow[d] = t->l[r] > 0.0f ? t->acc[r][d] * inv : 0.0f;
  }
}

FAST_INLINE void attn_tasks_impl(attn_job* J, int64_t begin, int64_t end) {
  attn_tile* t = &J->tiles[atomic_fetch_add(&J->next_tile, 1)];
  for (int64_t task = begin; task < end; task++) attn_task_impl(J, task, t);
}
SIMD_VARIANTS(attn_tasks, (attn_job * J, int64_t begin, int64_t end), (J, begin, end))

static void attn_range(void* ctx, int64_t begin, int64_t end) { attn_tasks(ctx, begin, end); }

static int fast_attention(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_attention_params* p = &s->p.attn;
  if (p->D < 1 || p->D > ATT_DMAX || p->Dv < 1 || p->Dv > ATT_DMAX) return 0;
  if (p->Hkv <= 0 || p->H % p->Hkv != 0) return 0;
  if (!all_f32(s->in, 3) || s->out[0].dtype != RLX_F32) return 0;
  attn_job J;
  memset(&J, 0, sizeof J);
  J.p = p;
  J.q = (const float*)(arena + s->in[0].offset);
  J.k = (const float*)(arena + s->in[1].offset);
  J.v = (const float*)(arena + s->in[2].offset);
  J.o = (float*)(arena + s->out[0].offset);
  J.mask_dtype = RLX_F32;
  if (p->mask == RLX_MASK_CUSTOM || p->mask == RLX_MASK_BIAS) {
    if (s->n_in < 4 || s->in[3].rank < 0) return 0;
    rlx_dtype mt = s->in[3].dtype;
    int ok = p->mask == RLX_MASK_BIAS ? mt == RLX_F32
                                      : (mt == RLX_F32 || mt == RLX_BOOL || mt == RLX_U8);
    if (!ok) return 0;
    J.mask = arena + s->in[3].offset;
    J.mask_dtype = mt;
  } else if (p->mask != RLX_MASK_NONE && p->mask != RLX_MASK_CAUSAL &&
             p->mask != RLX_MASK_SLIDING) {
    return 0;
  }
  for (int32_t i = 0; i < s->n_in; i++)
    if (s->in[i].rank >= 0 && overlaps(&s->out[0], &s->in[i])) return 0;
  if (p->B == 0 || p->H == 0 || p->Sq == 0) return 1;
  J.n_qblocks = (p->Sq + ATT_QB - 1) / ATT_QB;
  int64_t tasks = p->B * p->H * J.n_qblocks;
  /* About 64K multiply-adds per chunk before a second thread pays off. */
  int64_t rows = p->Sq < ATT_QB ? p->Sq : ATT_QB;
  int64_t work = rows * (p->Sk > 0 ? p->Sk : 1) * (p->D + p->Dv);
  int64_t grain = work >= 65536 ? 1 : 65536 / work;
  int threads = rlx_cpu_pool_threads(f->pool);
  /* sizeof(attn_tile) is a multiple of 64, as aligned_alloc wants. */
  J.tiles = aligned_alloc(64, (size_t)threads * sizeof(attn_tile));
  if (!J.tiles) return 0;
  atomic_init(&J.next_tile, 0);
  rlx_cpu_parallel_for(f->pool, tasks, grain, attn_range, &J);
  free(J.tiles);
  return 1;
}

/* ------------------------------------------------------------ matmul */

typedef struct mm_job {
  rlx_cpu_fast* f;
  const rlx_step* s;
  uint8_t* arena;
  int a_trans, b_trans;
  int64_t lda, ldb;
  rlx_cpu_pool* gemm_pool; /* pool for each GEMM (NULL when the batch is threaded) */
} mm_job;

/* Bias + activation over rows of C. */
FAST_INLINE void epilogue_rows_impl(const mm_job* j, int64_t begin, int64_t end) {
  const rlx_matmul_params* p = &j->s->p.mm;
  float* c = (float*)(j->arena + j->s->out[0].offset);
  const float* bias = p->has_bias ? (const float*)(j->arena + j->s->in[2].offset) : NULL;
  int vec = act_has_vector(p->act);
  for (int64_t r = begin; r < end; r++) {
    float* row = c + r * p->N;
    int64_t i = 0;
    for (; i < p->N; i += VL) {
      int64_t len = p->N - i < VL ? p->N - i : VL;
      vf x = len == VL ? vload(row + i) : vload_part(row + i, len);
      if (bias) x += len == VL ? vload(bias + i) : vload_part(bias + i, len);
      if (vec) {
        x = act_vector(p->act, &x);
      } else {
        for (int k = 0; k < len; k++) x[k] = act_scalar(p->act, x[k]);
      }
      if (len == VL)
        vstore(row + i, &x);
      else
        vstore_part(row + i, &x, len);
    }
  }
}
SIMD_VARIANTS(epilogue_rows, (const mm_job* j, int64_t begin, int64_t end), (j, begin, end))

static void epilogue_range(void* ctx, int64_t begin, int64_t end) {
  epilogue_rows(ctx, begin, end);
}

static void mm_one(const mm_job* j, int64_t bi) {
  const rlx_matmul_params* p = &j->s->p.mm;
  int64_t rem = bi, ao = 0, bo = 0, co = 0;
  for (int32_t d = p->batch_rank - 1; d >= 0; d--) {
    int64_t idx = rem % p->batch_shape[d];
    rem /= p->batch_shape[d];
    ao += idx * p->a_bstride[d];
    bo += idx * p->b_bstride[d];
    co += idx * p->c_bstride[d];
  }
  const float* A = (const float*)(j->arena + j->s->in[0].offset) + ao;
  const float* B = (const float*)(j->arena + j->s->in[1].offset) + bo;
  float* C = (float*)(j->arena + j->s->out[0].offset) + co;
  if (j->f->use_blas)
    rlx_cpu_blas_sgemm(j->a_trans, j->b_trans, p->M, p->N, p->K, A, j->lda, B, j->ldb, C, p->c_rs);
  else
    rlx_cpu_sgemm(j->gemm_pool, j->a_trans, j->b_trans, p->M, p->N, p->K, A, j->lda, B, j->ldb, C,
                  p->c_rs);
}

static void mm_batch_range(void* ctx, int64_t begin, int64_t end) {
  for (int64_t bi = begin; bi < end; bi++) mm_one(ctx, bi);
}

/* Folds an operand's (row, col) strides into (transposed?, leading dim):
 * one of them must be 1. */
static int mm_operand(int64_t rs, int64_t cs, int64_t rows, int64_t cols, int* trans,
                      int64_t* ld) {
  if (cs == 1 || cols == 1) {
    if (rs < 0) return 0;
    *trans = 0;
    *ld = rows == 1 ? (cols > 0 ? cols : 1) : rs;
    return 1;
  }
  if (rs == 1 || rows == 1) {
    if (cs < 0) return 0;
    *trans = 1;
    *ld = cs;
    return 1;
  }
  return 0;
}

static int fast_matmul(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_matmul_params* p = &s->p.mm;
  if (s->in[0].dtype != RLX_F32 || s->in[1].dtype != RLX_F32 || s->out[0].dtype != RLX_F32)
    return 0;
  if (p->has_bias && (s->in[2].rank < 0 || s->in[2].dtype != RLX_F32)) return 0;
  if (p->c_rs != p->N || p->M < 0 || p->N < 0 || p->K < 0) return 0;
  /* The epilogue walks C as batch * M dense rows. */
  int64_t dense = p->M * p->N;
  for (int32_t d = p->batch_rank - 1; d >= 0; d--) {
    if (p->batch_shape[d] > 1 && p->c_bstride[d] != dense) return 0;
    dense *= p->batch_shape[d];
  }
  mm_job j = {f, s, arena, 0, 0, 0, 0, NULL};
  if (!mm_operand(p->a_rs, p->a_cs, p->M, p->K, &j.a_trans, &j.lda)) return 0;
  if (!mm_operand(p->b_rs, p->b_cs, p->K, p->N, &j.b_trans, &j.ldb)) return 0;
  for (int32_t i = 0; i < s->n_in; i++)
    if (s->in[i].rank >= 0 && overlaps(&s->out[0], &s->in[i])) return 0;
  if (p->M == 0 || p->N == 0 || p->batch == 0) return 1;
  int threads = rlx_cpu_pool_threads(f->pool);
  double flops = 2.0 * (double)p->M * (double)p->N * (double)p->K;
  /* Many small GEMMs (attention-style batches): one thread per GEMM. */
  if (p->batch >= threads && flops < 4e7 && !f->use_blas) {
    rlx_cpu_parallel_for(f->pool, p->batch, 1, mm_batch_range, &j);
  } else {
    j.gemm_pool = f->pool;
    for (int64_t bi = 0; bi < p->batch; bi++) mm_one(&j, bi);
  }
  if (p->has_bias || p->act != RLX_ACT_NONE) {
    rlx_cpu_parallel_for(f->pool, p->batch * p->M, row_grain(p->N), epilogue_range, &j);
  }
  return 1;
}

/* ------------------------------------------------------------ dispatch */

/* Fast path of each kernel kind (src/backends/kernels.def); NULL: the
 * reference runs every step of that kind. A fast path may still decline a
 * step (returns 0) and leave it to the reference. */
#define RLX_FAST_KIND_COPY NULL
#define RLX_FAST_KIND_BINARY fast_elementwise
#define RLX_FAST_KIND_COMPARE NULL
#define RLX_FAST_KIND_WHERE rlx_cpu_fast_where
#define RLX_FAST_KIND_UNARY fast_elementwise
#define RLX_FAST_KIND_MATMUL fast_matmul
#define RLX_FAST_KIND_REDUCE NULL
#define RLX_FAST_KIND_ARG_REDUCE NULL
#define RLX_FAST_KIND_SOFTMAX fast_softmax
#define RLX_FAST_KIND_CUMSUM NULL
#define RLX_FAST_KIND_XENT NULL
#define RLX_FAST_KIND_GATHER_BACKWARD NULL
#define RLX_FAST_KIND_OPT_UPDATE rlx_cpu_fast_opt_update
#define RLX_FAST_KIND_TOPK NULL
#define RLX_FAST_KIND_GATHER rlx_cpu_fast_gather
#define RLX_FAST_KIND_SCATTER_ADD NULL
#define RLX_FAST_KIND_NORM fast_norm
#define RLX_FAST_KIND_ATTENTION fast_attention
#define RLX_FAST_KIND_ROPE NULL
#define RLX_FAST_KIND_POOL NULL
#define RLX_FAST_KIND_RESIZE NULL
#define RLX_FAST_KIND_SAMPLER NULL
#define RLX_FAST_KIND_CONV rlx_cpu_fast_conv
#define RLX_FAST_KIND_GROUP_NORM fast_group_norm
#define RLX_FAST_KIND_CONV_WGRAD rlx_cpu_fast_conv_wgrad
#define RLX_FAST_KIND_POOL_BACKWARD rlx_cpu_fast_pool_backward
#define RLX_FAST_KIND_SAMPLE NULL
#define RLX_FAST_KIND_HOST NULL
#define RLX_FAST_KIND_ATTENTION_BWD rlx_cpu_fast_attention_bwd
#define RLX_FAST_KIND_NORM_BWD rlx_cpu_fast_rows_backward
#define RLX_FAST_KIND_SOFTMAX_BWD rlx_cpu_fast_rows_backward
#define RLX_FAST_KIND_REGION fast_region
#define RLX_FAST_KIND_DEQUANT_MATMUL rlx_cpu_fast_dequant_matmul
#define RLX_FAST_KIND_GROUPED_MATMUL rlx_cpu_fast_grouped_matmul

typedef int (*fast_fn)(rlx_cpu_fast*, uint8_t*, const rlx_step*);
static const fast_fn k_kind_fast[RLX_K_COUNT] = {
#define RLX_KERNEL(id, name, params, meaning) [RLX_K_##id] = RLX_FAST_KIND_##id,
#include "backends/kernels.def"
#undef RLX_KERNEL
};

int rlx_cpu_fast_step(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  if (!f || !arena || !s || (unsigned)s->kernel >= RLX_K_COUNT || !k_kind_fast[s->kernel]) return 0;
  return k_kind_fast[s->kernel](f, arena, s);
}
