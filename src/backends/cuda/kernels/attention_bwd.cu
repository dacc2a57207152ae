/* Attention backward, flash style: one launch per phase of the step list
 * (op = RLX_ATTN_BWD_*, lower.h), f32 arithmetic for every storage dtype,
 * deterministic (no atomics: each output row has exactly one writer and
 * sums in a fixed order).
 *
 * rlx_attn_bwd_rows: one warp per query row (b, h, i), 4 rows per block.
 *   STATS: lse over the keys (lane j scores keys j, j + 32, ... with an
 *          online max/sum, then a warp merge) and D = d_out . out -> stats;
 *   DQ:    the row's stats again, then per 32-key chunk each lane's dS is
 *          broadcast by shuffles and dq[d] += dS k[d] over lanes' dims.
 * rlx_attn_bwd_keys: one warp per key row (b, kvh, j), 4 per block.
 *   DV:    per 32-query chunk (over the kv head's query heads) lane i's
 *          P = exp(s - lse_i); dv[d] += P d_out_i[d];
 *   DK:    dS = P (d_out_i . v_j - D_i) ds/ddot; dk[d] += dS q_i[d].
 * The row being scored (q for query warps, k and v for key warps) sits in
 * shared memory; head dims up to 256 (8 dims per lane). The dq row's stats
 * live in dq's bytes between STATS and DQ (the lowering's choice), so DQ
 * recomputes them rather than read what it overwrites.
 *
 * This is the portable kernel: SIMT dot products per lane; the
 * tensor-core FlashAttention-2 tiling is future work. */
#include "attention_common.cuh"

#define WARPS 4
#define MAXD 256

RLXK_DEV int64_t q_at(const rlxk_attn& a, int64_t b, int64_t h, int64_t i) {
  return b * a.q_sb + i * a.q_ss + h * a.q_sh;
}
RLXK_DEV int64_t k_at(const rlxk_attn& a, int64_t b, int64_t g, int64_t j) {
  return b * a.k_sb + j * a.k_ss + g * a.k_sh;
}
RLXK_DEV int64_t v_at(const rlxk_attn& a, int64_t b, int64_t g, int64_t j) {
  return b * a.v_sb + j * a.v_ss + g * a.v_sh;
}
RLXK_DEV int64_t do_at(const rlxk_attn_bwd& p, int64_t b, int64_t h, int64_t i) {
  return b * p.do_sb + i * p.do_ss + h * p.do_sh;
}

/* Score (as the forward: masked_score) and d score / d dot. */
RLXK_DEV float score_grad(const rlxk_attn& a, const char* mask, float dot, int64_t b, int64_t h,
                          int64_t i, int64_t j, float* dsc) {
  *dsc = a.scale;
  if (a.softcap > 0.0f) {
    float t = tanhf(dot * a.scale / a.softcap);
    *dsc = a.scale * (1.0f - t * t);
  }
  return masked_score(a, mask, dot, b, h, i, j);
}

/* Dot of the shared row `row` with n elements of src at base. */
RLXK_DEV float dot_row(const float* row, const char* src, int dt, int64_t base, int64_t n) {
  float s = 0.0f;
  for (int64_t d = 0; d < n; d++) s = fmaf(row[d], ld_f32(src, dt, base + d), s);
  return s;
}

/* Query rows [*lo, *hi) that can see key j under a causal or sliding mask
 * (all rows otherwise): the key-row warps skip the rest. */
RLXK_DEV void query_range(const rlxk_attn& a, int64_t j, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = a.Sq;
  if (a.mask != RLX_MASK_CAUSAL && a.mask != RLX_MASK_SLIDING) return;
  int64_t first = j - (a.Sk - a.Sq); /* visible iff i >= first */
  *lo = first > 0 ? first : 0;
  if (a.mask == RLX_MASK_SLIDING && first + a.window < *hi) *hi = first + a.window;
  if (*hi < *lo) *hi = *lo;
}

RLXK_DEV float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

/* Merges lane partials (m, l) of an online softmax into the row's lse. */
RLXK_DEV float warp_lse(float m, float l) {
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);
    float mm = fmaxf(m, m2);
    if (mm == -INFINITY) continue; /* both empty */
    l = (m == -INFINITY ? 0.0f : l * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : l2 * __expf(m2 - mm));
    m = mm;
  }
  return m == -INFINITY ? -INFINITY : m + logf(l);
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
    rlx_attn_bwd_rows(char* arena, rlxk_attn_bwd p, rlxk_state* st) {
  (void)st;
  __shared__ float qs[WARPS][MAXD], dos[WARPS][MAXD];
  const rlxk_attn& a = p.a;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t row = (int64_t)blockIdx.x * WARPS + warp, rows = a.B * a.H * a.Sq;
  if (row >= rows) return; /* whole warps: no block-wide barrier below */
  int64_t i = row % a.Sq, h = (row / a.Sq) % a.H, b = row / (a.Sq * a.H);
  int64_t kvh = h / (a.H / a.Hkv);
  const char *q = arena + a.qoff, *k = arena + a.koff, *v = arena + a.voff;
  const char *mask = arena + a.moff, *d_out = arena + p.dooff, *out = arena + p.xoff;
  for (int64_t d = lane; d < a.D; d += 32) qs[warp][d] = ld_f32(q, a.qdt, q_at(a, b, h, i) + d);
  for (int64_t d = lane; d < a.Dv; d += 32) dos[warp][d] = ld_f32(d_out, p.dodt, do_at(p, b, h, i) + d);
  __syncwarp();
  float m = -INFINITY, l = 0.0f, dsc = 0.0f;
  int64_t k_lo, k_hi; /* keys the row can see (causal / sliding); all otherwise */
  attn_key_range(a, i, 1, &k_lo, &k_hi);
  for (int64_t j = k_lo + lane; j < k_hi; j += 32) {
    float s = score_grad(a, mask, dot_row(qs[warp], k, a.kdt, k_at(a, b, kvh, j), a.D), b, h, i, j, &dsc);
    if (s == -INFINITY) continue;
    if (s > m) {
      l = (m == -INFINITY ? 0.0f : l * __expf(m - s)) + 1.0f;
      m = s;
    } else {
      l += __expf(s - m);
    }
  }
  float lse = warp_lse(m, l);
  int64_t oo = b * a.o_sb + i * a.o_ss + h * a.o_sh;
  float delta = 0.0f;
  for (int64_t d = lane; d < a.Dv; d += 32) delta = fmaf(dos[warp][d], ld_f32(out, p.xdt, oo + d), delta);
  delta = warp_sum(delta);
  char* g = arena + p.goff;
  if (p.op == RLXK_ATTN_BWD_STATS) {
    if (lane == 0) {
      st_f32(g, p.gdt, 2 * row, lse);
      st_f32(g, p.gdt, 2 * row + 1, delta);
    }
    return;
  }
  float acc[MAXD / 32];
#pragma unroll
  for (int t = 0; t < MAXD / 32; t++) acc[t] = 0.0f;
  for (int64_t j0 = k_lo; j0 < k_hi && lse != -INFINITY; j0 += 32) {
    int64_t j = j0 + lane;
    float ds = 0.0f;
    if (j < k_hi) {
      float s = score_grad(a, mask, dot_row(qs[warp], k, a.kdt, k_at(a, b, kvh, j), a.D), b, h, i, j, &dsc);
      if (s != -INFINITY) {
        float pr = __expf(s - lse), dp = dot_row(dos[warp], v, a.vdt, v_at(a, b, kvh, j), a.Dv);
        ds = pr * (dp - delta) * dsc;
      }
    }
    int n = k_hi - j0 < 32 ? (int)(k_hi - j0) : 32;
    for (int jj = 0; jj < n; jj++) {
      float w = __shfl_sync(0xffffffffu, ds, jj);
      if (w == 0.0f) continue; /* uniform across the warp */
      int64_t ko = k_at(a, b, kvh, j0 + jj);
#pragma unroll
      for (int t = 0; t < MAXD / 32; t++) {
        int64_t d = lane + 32 * t;
        if (d < a.D) acc[t] = fmaf(w, ld_f32(k, a.kdt, ko + d), acc[t]);
      }
    }
  }
  int64_t go = b * p.g_sb + i * p.g_ss + h * p.g_sh;
#pragma unroll
  for (int t = 0; t < MAXD / 32; t++) {
    int64_t d = lane + 32 * t;
    if (d < a.D) st_f32(g, p.gdt, go + d, acc[t]);
  }
}

extern "C" __global__ void __launch_bounds__(WARPS * 32)
    rlx_attn_bwd_keys(char* arena, rlxk_attn_bwd p, rlxk_state* st) {
  (void)st;
  __shared__ float ks[WARPS][MAXD], vs[WARPS][MAXD];
  const rlxk_attn& a = p.a;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t item = (int64_t)blockIdx.x * WARPS + warp, items = a.B * a.Hkv * a.Sk;
  if (item >= items) return;
  int64_t j = item % a.Sk, kvh = (item / a.Sk) % a.Hkv, b = item / (a.Sk * a.Hkv);
  bool dk = p.op == RLXK_ATTN_BWD_DK;
  const char *q = arena + a.qoff, *k = arena + a.koff, *v = arena + a.voff;
  const char *mask = arena + a.moff, *d_out = arena + p.dooff, *stats = arena + p.xoff;
  for (int64_t d = lane; d < a.D; d += 32) ks[warp][d] = ld_f32(k, a.kdt, k_at(a, b, kvh, j) + d);
  if (dk)
    for (int64_t d = lane; d < a.Dv; d += 32) vs[warp][d] = ld_f32(v, a.vdt, v_at(a, b, kvh, j) + d);
  __syncwarp();
  int64_t width = dk ? a.D : a.Dv, group = a.H / a.Hkv;
  const char* src = dk ? q : d_out;
  int sdt = dk ? a.qdt : p.dodt;
  float acc[MAXD / 32];
#pragma unroll
  for (int t = 0; t < MAXD / 32; t++) acc[t] = 0.0f;
  int64_t q_lo, q_hi;
  query_range(a, j, &q_lo, &q_hi);
  for (int64_t h = kvh * group; h < (kvh + 1) * group; h++)
    for (int64_t i0 = q_lo; i0 < q_hi; i0 += 32) {
      int64_t i = i0 + lane;
      float w = 0.0f, dsc = 0.0f;
      if (i < q_hi) {
        int64_t r = (b * a.H + h) * a.Sq + i;
        float lse = ld_f32(stats, p.xdt, 2 * r);
        float s = lse == -INFINITY ? -INFINITY
                                   : score_grad(a, mask, dot_row(ks[warp], q, a.qdt, q_at(a, b, h, i), a.D),
                                                b, h, i, j, &dsc);
        if (s != -INFINITY) {
          w = __expf(s - lse);
          if (dk) {
            float dp = dot_row(vs[warp], d_out, p.dodt, do_at(p, b, h, i), a.Dv);
            w = w * (dp - ld_f32(stats, p.xdt, 2 * r + 1)) * dsc;
          }
        }
      }
      int n = q_hi - i0 < 32 ? (int)(q_hi - i0) : 32;
      for (int ii = 0; ii < n; ii++) {
        float wi = __shfl_sync(0xffffffffu, w, ii);
        if (wi == 0.0f) continue;
        int64_t at = dk ? q_at(a, b, h, i0 + ii) : do_at(p, b, h, i0 + ii);
#pragma unroll
        for (int t = 0; t < MAXD / 32; t++) {
          int64_t d = lane + 32 * t;
          if (d < width) acc[t] = fmaf(wi, ld_f32(src, sdt, at + d), acc[t]);
        }
      }
    }
  char* g = arena + p.goff;
  int64_t go = b * p.g_sb + j * p.g_ss + kvh * p.g_sh;
#pragma unroll
  for (int t = 0; t < MAXD / 32; t++) {
    int64_t d = lane + 32 * t;
    if (d < width) st_f32(g, p.gdt, go + d, acc[t]);
  }
}
