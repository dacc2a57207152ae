/* Attention backward, tiled (FlashAttention-2 structure) for D == Dv in
 * {64, 128}: the same phases as attention_bwd.cu (op = RLX_ATTN_BWD_*,
 * lower.h), but blocks own 64-row tiles and every product is a 64 x 64 x D
 * shared-memory register tile instead of a warp-per-row dot product.
 * f32 arithmetic for every storage dtype (operands convert on load);
 * deterministic: each output element has exactly one writer and sums in a
 * fixed order (no atomics).
 *
 * rlx_attn_bwd_q*: one block per (b, h, 64-query tile).
 *   STATS: lse of each row (online max / sum over the visible key tiles)
 *          and D = d_out . out -> stats[2r], stats[2r + 1];
 *          With stats_copy STATS also leaves a float2 (lse, D) per row in
 *          scratch (a.partial);
 *   DQ:    lse and D from that copy, else the same lse pass again (the
 *          stats live in dq's bytes, which this phase overwrites: other
 *          blocks' dq rows may cover this block's stats), then per key
 *          tile S, P = exp(S - lse), dP = dO V^T, dS = P (dP - D) ds/ddot
 *          and dq += dS K.
 * rlx_attn_bwd_k*: one block per (b, kv head, 64-key tile); loops over the
 *   query tiles of every query head of the GQA group that the mask lets see
 *   the key tile, reading lse / D from the stats:
 *   DV:    dv += P^T dO;
 *   DK:    dk += dS^T Q;
 *   fused (the DV launch, p.fused): both from one P / dS per tile pair,
 *          dk to g2 (the DK step then launches nothing).
 *
 * 256 threads as 16 x 16 (ty, tx). Score tiles: thread owns rows ty + 16r
 * and columns tx + 16c (r, c < 4); row reductions are shuffles within the
 * half-warp that shares ty. Output tiles: rows ty + 16r, columns
 * 64 jj + 4 tx .. + 3. Tiles are row-major in shared memory with row
 * stride D + 4, so float4 reads of 8 lanes on different rows hit distinct
 * banks. Masks, scale and softcap go through masked_score (every mask
 * kind); fully masked tiles (causal / sliding) are never visited. */
#include "attention_common.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kTile = 64;        /* query rows and key rows per tile */
constexpr int kLdp = kTile + 4;  /* P / dS row stride: rows ty, ty + 1 four banks apart */

/* Rows [r0, r0 + 64) of an operand (row r's element c at base + r*rs + c,
 * dtype dt) as f32 into a tile of row stride D + 4; rows past `rows` are 0. */
template <int D>
RLXK_DEV void load_tile(float* dst, const char* src, int dt, int64_t base, int64_t rs, int64_t r0,
                        int64_t rows) {
  const float* f = (const float*)src + base;
  if (dt == RLX_F32 && rs % 4 == 0 && ((uintptr_t)f & 15) == 0) { /* rows of 16-byte vectors */
    for (int idx = threadIdx.x; idx < kTile * D / 4; idx += kThreads) {
      int r = idx / (D / 4), c = 4 * (idx % (D / 4));
      float4 x = r0 + r < rows ? *(const float4*)(f + (r0 + r) * rs + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      *(float4*)(dst + r * (D + 4) + c) = x;
    }
    return;
  }
  for (int idx = threadIdx.x; idx < kTile * D; idx += kThreads) {
    int r = idx / D, c = idx % D;
    dst[r * (D + 4) + c] = r0 + r < rows ? ld_f32(src, dt, base + (r0 + r) * rs + c) : 0.0f;
  }
}

/* acc[r][c] = A[ty + 16r] . B[tx + 16c] (two tiles of row stride D + 4). */
template <int D>
RLXK_DEV void tile_dots(const float* A, const float* B, float acc[4][4]) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int c = 0; c < 4; c++) acc[r][c] = 0.0f;
#pragma unroll 4
  for (int d = 0; d < D; d += 4) {
    float4 a[4], b[4];
#pragma unroll
    for (int r = 0; r < 4; r++) a[r] = *(const float4*)(A + (ty + 16 * r) * (D + 4) + d);
#pragma unroll
    for (int c = 0; c < 4; c++) b[c] = *(const float4*)(B + (tx + 16 * c) * (D + 4) + d);
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        float t = fmaf(a[r].x, b[c].x, acc[r][c]);
        t = fmaf(a[r].y, b[c].y, t);
        t = fmaf(a[r].z, b[c].z, t);
        acc[r][c] = fmaf(a[r].w, b[c].w, t);
      }
  }
}

/* acc[r][jj] += sum_k W(ty + 16r, k) X[k][64 jj + 4 tx .. + 3], with W the
 * 64 x 64 tile Ps read as Ps[k][row] (kTrans: P^T) or Ps[row][k]. */
template <int D, bool kTrans>
RLXK_DEV void tile_accumulate(const float* Ps, const float* X, float4 acc[4][D / 64]) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll 4
  for (int k = 0; k < kTile; k++) {
    float w[4];
#pragma unroll
    for (int r = 0; r < 4; r++) w[r] = kTrans ? Ps[k * kLdp + ty + 16 * r] : Ps[(ty + 16 * r) * kLdp + k];
#pragma unroll
    for (int jj = 0; jj < D / 64; jj++) {
      float4 x = *(const float4*)(X + k * (D + 4) + 64 * jj + 4 * tx);
#pragma unroll
      for (int r = 0; r < 4; r++) {
        acc[r][jj].x = fmaf(w[r], x.x, acc[r][jj].x);
        acc[r][jj].y = fmaf(w[r], x.y, acc[r][jj].y);
        acc[r][jj].z = fmaf(w[r], x.z, acc[r][jj].z);
        acc[r][jj].w = fmaf(w[r], x.w, acc[r][jj].w);
      }
    }
  }
}

/* Turns the dots s (rows i0 + ty + 16r, keys j0 + tx + 16c) into P =
 * exp(score - lse) (0 where masked) and, with grads, dp (= dO . v) into
 * dS = P (dP - D) ds/ddot. lse_s / del_s hold the tile rows' lse and D.
 * open: every pair of the tile is visible and there is no softcap, so the
 * score is dot * scale and the slope is scale (no per-element mask). */
RLXK_DEV void probs_and_grads(const rlxk_attn& a, const char* mask, int64_t b, int64_t h, int64_t i0,
                              int64_t j0, const float* lse_s, const float* del_s, float s[4][4],
                              float dp[4][4], bool grads, bool open) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int r = 0; r < 4; r++) {
    const float lse = lse_s[ty + 16 * r], del = del_s[ty + 16 * r];
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const float dot = s[r][c];
      float pr, slope = a.scale;
      if (open) {
        pr = lse == -INFINITY ? 0.0f : __expf(fmaf(dot, a.scale, -lse));
      } else {
        float sc = masked_score(a, mask, dot, b, h, i0 + ty + 16 * r, j0 + tx + 16 * c);
        pr = (sc == -INFINITY || lse == -INFINITY) ? 0.0f : __expf(sc - lse);
        if (grads) slope = score_slope(a, dot);
      }
      s[r][c] = pr;
      if (grads) dp[r][c] = pr * (dp[r][c] - del) * slope;
    }
  }
}

/* Stores the thread's 4 x 4 part of a 64 x 64 score-shaped tile to T. */
RLXK_DEV void put_scores(float* T, const float v[4][4]) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int c = 0; c < 4; c++) T[(ty + 16 * r) * kLdp + tx + 16 * c] = v[r][c];
}

/* Writes the 64 x D output tile acc (rows r0 + ty + 16r below `rows`) to g
 * at base + row * rs + column. */
template <int D>
RLXK_DEV void store_tile(char* g, int dt, int64_t base, int64_t rs, int64_t r0, int64_t rows,
                         float4 acc[4][D / 64]) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
#pragma unroll
  for (int r = 0; r < 4; r++) {
    int64_t row = r0 + ty + 16 * r;
    if (row >= rows) continue;
#pragma unroll
    for (int jj = 0; jj < D / 64; jj++) {
      int64_t at = base + row * rs + 64 * jj + 4 * tx;
      st_f32(g, dt, at, acc[r][jj].x);
      st_f32(g, dt, at + 1, acc[r][jj].y);
      st_f32(g, dt, at + 2, acc[r][jj].z);
      st_f32(g, dt, at + 3, acc[r][jj].w);
    }
  }
}

template <int D>
RLXK_DEV void zero_acc(float4 acc[4][D / 64]) {
#pragma unroll
  for (int r = 0; r < 4; r++)
#pragma unroll
    for (int jj = 0; jj < D / 64; jj++) acc[r][jj] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

/* Each tile row's logsumexp over the keys [k_first, k_end) -> lse_s (the
 * query tile is in Qs; Ks is clobbered). */
template <int D>
RLXK_DEV void row_lse(const rlxk_attn& a, const char* k, const char* mask, int64_t b, int64_t h,
                      int64_t kvh, int64_t i0, int64_t k_first, int64_t k_end, const float* Qs,
                      float* Ks, float* lse_s) {
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float m[4], l[4];
#pragma unroll
  for (int r = 0; r < 4; r++) m[r] = -INFINITY, l[r] = 0.0f;
  for (int64_t j0 = k_first; j0 < k_end; j0 += kTile) {
    __syncthreads(); /* the previous tile's readers are done */
    load_tile<D>(Ks, k, a.kdt, b * a.k_sb + kvh * a.k_sh, a.k_ss, j0, a.Sk);
    __syncthreads();
    float s[4][4];
    tile_dots<D>(Qs, Ks, s);
#pragma unroll
    for (int r = 0; r < 4; r++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        float sc = masked_score(a, mask, s[r][c], b, h, i0 + ty + 16 * r, j0 + tx + 16 * c);
        if (sc == -INFINITY) continue;
        if (sc > m[r]) {
          l[r] = (m[r] == -INFINITY ? 0.0f : l[r] * __expf(m[r] - sc)) + 1.0f;
          m[r] = sc;
        } else {
          l[r] += __expf(sc - m[r]);
        }
      }
  }
  /* Merge the 16 lanes of the half-warp that share the row. */
#pragma unroll
  for (int r = 0; r < 4; r++) {
    for (int o = 8; o > 0; o >>= 1) {
      float m2 = __shfl_xor_sync(0xffffffffu, m[r], o), l2 = __shfl_xor_sync(0xffffffffu, l[r], o);
      float mm = fmaxf(m[r], m2);
      if (mm == -INFINITY) continue; /* both empty */
      l[r] = (m[r] == -INFINITY ? 0.0f : l[r] * __expf(m[r] - mm)) +
             (m2 == -INFINITY ? 0.0f : l2 * __expf(m2 - mm));
      m[r] = mm;
    }
    if (tx == 0) lse_s[ty + 16 * r] = m[r] == -INFINITY ? -INFINITY : m[r] + logf(l[r]);
  }
}

/* D = d_out . out of each tile row (dO tile in Os) -> del_s; a warp per 8 rows. */
template <int D>
RLXK_DEV void row_deltas(const rlxk_attn_bwd& p, const char* out, int64_t b, int64_t h, int64_t i0,
                         const float* Os, float* del_s) {
  const rlxk_attn& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int t = warp * 8; t < warp * 8 + 8; t++) {
    int64_t i = i0 + t;
    float sum = 0.0f;
    if (i < a.Sq) {
      int64_t oo = b * a.o_sb + i * a.o_ss + h * a.o_sh;
      for (int d = lane; d < D; d += 32) sum = fmaf(Os[t * (D + 4) + d], ld_f32(out, p.xdt, oo + d), sum);
    }
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) del_s[t] = sum;
  }
}

/* The tile rows' (lse, D) from STATS' float2 copy in scratch (stats_copy). */
RLXK_DEV void read_stats_copy(const rlxk_attn& a, int64_t row_base, int64_t i0, float* lse_s, float* del_s) {
  const float2* copy = (const float2*)a.partial;
  for (int t = threadIdx.x; t < kTile; t += kThreads) {
    float2 x = i0 + t < a.Sq ? copy[row_base + i0 + t] : make_float2(-INFINITY, 0.0f);
    lse_s[t] = x.x, del_s[t] = x.y;
  }
}

template <int D>
__device__ void bwd_query_tile(char* arena, const rlxk_attn_bwd& p) {
  constexpr int LD = D + 4;
  extern __shared__ float4 smem4[];
  float* Qs = (float*)smem4;       /* [64][LD] q */
  float* Os = Qs + kTile * LD;     /* [64][LD] d_out */
  float* Ks = Os + kTile * LD;     /* [64][LD] */
  float* Vs = Ks + kTile * LD;     /* [64][LD] */
  float* Ps = Vs + kTile * LD;     /* [64][kLdp] dS */
  float* lse_s = Ps + kTile * kLdp; /* [64] */
  float* del_s = lse_s + kTile;     /* [64] */
  const rlxk_attn& a = p.a;
  /* Longest causal rows first, across all heads. */
  const int64_t q_tiles = (a.Sq + kTile - 1) / kTile, BH = a.B * a.H, blk = blockIdx.x;
  const int64_t tile = q_tiles - 1 - blk / BH, bh = blk % BH;
  const int64_t h = bh % a.H, b = bh / a.H, kvh = h / (a.H / a.Hkv), i0 = tile * kTile;
  const char *q = arena + a.qoff, *k = arena + a.koff, *v = arena + a.voff;
  const char *mask = arena + a.moff, *d_out = arena + p.dooff, *out = arena + p.xoff;
  char* g = arena + p.goff;
  const int64_t row_base = (b * a.H + h) * a.Sq;
  const bool dq = p.op == RLXK_ATTN_BWD_DQ;

  load_tile<D>(Qs, q, a.qdt, b * a.q_sb + h * a.q_sh, a.q_ss, i0, a.Sq);
  load_tile<D>(Os, d_out, p.dodt, b * p.do_sb + h * p.do_sh, p.do_ss, i0, a.Sq);
  int64_t k_begin, k_end;
  attn_key_range(a, i0, kTile, &k_begin, &k_end);
  const int64_t k_first = (k_begin / kTile) * kTile;
  if (dq && p.stats_copy) {
    read_stats_copy(a, row_base, i0, lse_s, del_s);
  } else { /* DQ without the copy: dq's bytes, which it overwrites, hold the stats */
    __syncthreads();
    row_deltas<D>(p, out, b, h, i0, Os, del_s);
    row_lse<D>(a, k, mask, b, h, kvh, i0, k_first, k_end, Qs, Ks, lse_s);
  }
  __syncthreads(); /* lse_s, del_s complete */

  if (!dq) {
    for (int t = threadIdx.x; t < kTile; t += kThreads) {
      if (i0 + t >= a.Sq) continue;
      int64_t r = row_base + i0 + t;
      st_f32(g, p.gdt, 2 * r, lse_s[t]);
      st_f32(g, p.gdt, 2 * r + 1, del_s[t]);
      if (p.stats_copy) ((float2*)a.partial)[r] = make_float2(lse_s[t], del_s[t]);
    }
    return;
  }
  float4 acc[4][D / 64];
  zero_acc<D>(acc);
  for (int64_t j0 = k_first; j0 < k_end; j0 += kTile) {
    __syncthreads(); /* the previous tile's readers are done */
    load_tile<D>(Ks, k, a.kdt, b * a.k_sb + kvh * a.k_sh, a.k_ss, j0, a.Sk);
    load_tile<D>(Vs, v, a.vdt, b * a.v_sb + kvh * a.v_sh, a.v_ss, j0, a.Sk);
    __syncthreads();
    float s[4][4], dp[4][4];
    tile_dots<D>(Qs, Ks, s);
    tile_dots<D>(Os, Vs, dp);
    const bool open = attn_tile_open(a, i0, kTile, j0, kTile) && a.softcap == 0.0f;
    probs_and_grads(a, mask, b, h, i0, j0, lse_s, del_s, s, dp, true, open);
    put_scores(Ps, dp);
    __syncthreads();
    tile_accumulate<D, false>(Ps, Ks, acc); /* dq[i] += sum_j dS[i][j] k[j] */
  }
  store_tile<D>(g, p.gdt, b * p.g_sb + h * p.g_sh, p.g_ss, i0, a.Sq, acc);
}

/* DV, DK, or both (p.fused: the DV launch also writes dk to g2): P and dS
 * of each (query tile, key tile) pair are computed once for both sums. */
template <int D>
__device__ void bwd_key_tile(char* arena, const rlxk_attn_bwd& p) {
  constexpr int LD = D + 4;
  extern __shared__ float4 smem4[];
  float* Qs = (float*)smem4;       /* [64][LD] q */
  float* Os = Qs + kTile * LD;     /* [64][LD] d_out */
  float* Ks = Os + kTile * LD;     /* [64][LD] */
  float* Vs = Ks + kTile * LD;     /* [64][LD] (dk) */
  float* Ps = Vs + kTile * LD;     /* [64 queries][kLdp keys] P */
  float* Ss = Ps + kTile * kLdp;   /* [64 queries][kLdp keys] dS */
  float* lse_s = Ss + kTile * kLdp; /* [64] */
  float* del_s = lse_s + kTile;     /* [64] */
  const rlxk_attn& a = p.a;
  const bool want_dk = p.op == RLXK_ATTN_BWD_DK || p.fused, want_dv = p.op == RLXK_ATTN_BWD_DV;
  /* Key tile 0 sees the most causal rows: it goes first. */
  const int64_t BG = a.B * a.Hkv, blk = blockIdx.x, tile = blk / BG, bg = blk % BG;
  const int64_t kvh = bg % a.Hkv, b = bg / a.Hkv, j0 = tile * kTile, group = a.H / a.Hkv;
  const char *q = arena + a.qoff, *k = arena + a.koff, *v = arena + a.voff;
  const char *mask = arena + a.moff, *d_out = arena + p.dooff, *stats = arena + p.xoff;

  load_tile<D>(Ks, k, a.kdt, b * a.k_sb + kvh * a.k_sh, a.k_ss, j0, a.Sk);
  if (want_dk) load_tile<D>(Vs, v, a.vdt, b * a.v_sb + kvh * a.v_sh, a.v_ss, j0, a.Sk);
  int64_t i_lo, i_hi;
  attn_query_range(a, j0, kTile, &i_lo, &i_hi);
  const int64_t i_first = (i_lo / kTile) * kTile;
  float4 acc_v[4][D / 64], acc_k[4][D / 64];
  zero_acc<D>(acc_v);
  zero_acc<D>(acc_k);
  for (int64_t h = kvh * group; h < (kvh + 1) * group; h++)
    for (int64_t i0 = i_first; i0 < i_hi; i0 += kTile) {
      __syncthreads(); /* the previous tile's readers are done */
      load_tile<D>(Qs, q, a.qdt, b * a.q_sb + h * a.q_sh, a.q_ss, i0, a.Sq);
      load_tile<D>(Os, d_out, p.dodt, b * p.do_sb + h * p.do_sh, p.do_ss, i0, a.Sq);
      for (int t = threadIdx.x; t < kTile; t += kThreads) {
        int64_t r = (b * a.H + h) * a.Sq + i0 + t;
        bool in = i0 + t < a.Sq;
        lse_s[t] = in ? ld_f32(stats, p.xdt, 2 * r) : -INFINITY;
        del_s[t] = in && want_dk ? ld_f32(stats, p.xdt, 2 * r + 1) : 0.0f;
      }
      __syncthreads();
      float s[4][4], dp[4][4] = {};
      tile_dots<D>(Qs, Ks, s);
      if (want_dk) tile_dots<D>(Os, Vs, dp);
      const bool open = attn_tile_open(a, i0, kTile, j0, kTile) && a.softcap == 0.0f;
      probs_and_grads(a, mask, b, h, i0, j0, lse_s, del_s, s, dp, want_dk, open);
      if (want_dv) put_scores(Ps, s);
      if (want_dk) put_scores(Ss, dp);
      __syncthreads();
      if (want_dv) tile_accumulate<D, true>(Ps, Os, acc_v); /* dv[j] += sum_i P[i][j] d_out[i] */
      if (want_dk) tile_accumulate<D, true>(Ss, Qs, acc_k); /* dk[j] += sum_i dS[i][j] q[i] */
    }
  if (want_dv) store_tile<D>(arena + p.goff, p.gdt, b * p.g_sb + kvh * p.g_sh, p.g_ss, j0, a.Sk, acc_v);
  if (p.op == RLXK_ATTN_BWD_DK)
    store_tile<D>(arena + p.goff, p.gdt, b * p.g_sb + kvh * p.g_sh, p.g_ss, j0, a.Sk, acc_k);
  else if (p.fused)
    store_tile<D>(arena + p.g2off, p.g2dt, b * p.g2_sb + kvh * p.g2_sh, p.g2_ss, j0, a.Sk, acc_k);
}

}  // namespace

/* d128 takes one block per SM anyway (153 KB of shared memory): let it use
 * up to 255 registers rather than spill; d64 fits two. */
#define ATTN_BWD_TILED(name, body, d, min_blocks)                                         \
  extern "C" __global__ void __launch_bounds__(kThreads, min_blocks)                      \
      name(char* arena, rlxk_attn_bwd p, rlxk_state* st) {                                \
    (void)st;                                                                             \
    body<d>(arena, p);                                                                    \
  }
ATTN_BWD_TILED(rlx_attn_bwd_q64, bwd_query_tile, 64, 2)
ATTN_BWD_TILED(rlx_attn_bwd_q128, bwd_query_tile, 128, 1)
ATTN_BWD_TILED(rlx_attn_bwd_k64, bwd_key_tile, 64, 2)
ATTN_BWD_TILED(rlx_attn_bwd_k128, bwd_key_tile, 128, 1)
