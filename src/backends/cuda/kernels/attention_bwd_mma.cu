/* Attention backward on tensor cores (mma.sync m16n8k16, f32 accumulation)
 * for f16 / bf16 q, k, v and d_out with D == Dv in {64, 128}: the phases of
 * attention_bwd_tiled.cu (op = RLX_ATTN_BWD_*, lower.h) and the same stats
 * layout, so the lowering is the same on every backend. Per (query i, key j):
 *
 *   s = q_i . k_j                 S  = Q K^T
 *   P = exp(score(s) - lse_i)     score: scale, softcap, mask (masked_score)
 *   dP = d_out_i . v_j            dP = dO V^T
 *   dS = P (dP - D_i) dscore/ds   D_i = d_out_i . out_i
 *   dv_j += P d_out_i             dV = P^T dO
 *   dk_j += dS q_i                dK = dS^T Q
 *   dq_i += dS k_j                dQ = dS K
 *
 * Blocks of 4 warps own 64-row tiles (query-tile kernels: 4 or 8 warps,
 * 64 or 128 rows); a warp owns 16 rows and streams the other side's tiles
 * of 64 rows through shared memory (cp.async, two stages). Products are
 * 16 x 64 score tiles over D (S, dP) and 16 x D updates over 64 (dV,
 * dK, dQ) whose A operand is the score tile itself: the f32 accumulators
 * of n-tiles 2j, 2j+1 are the A fragment of k-step j once rounded to the
 * input dtype (P and dS are rounded, as in every flash kernel; sums stay
 * f32).
 *
 * rlx_attn_bwd_mma_q_*: a block per (b, h, 64- or 128-query tile), last
 *   tile first.
 *   STATS: lse of each row (online max / sum over the visible key tiles)
 *          and D -> stats[2r], stats[2r + 1] (f32, in dq's bytes), and a
 *          float2 copy in scratch when stats_copy;
 *   DQ:    with dS tiles from the fused DV launch (p.fused in a DQ
 *          launch): dq += dS K per key tile, nothing recomputed
 *          (dq_from_ds). Else lse and D from that copy (else recomputed:
 *          dq's bytes, which this phase overwrites, hold them), then per
 *          key tile S, dP, dS and dq += dS K.
 * rlx_attn_bwd_mma_k_*: a block per (b, kv head, 64-key tile), key tile 0
 *   first; loops over the query tiles of every query head of the GQA group
 *   that the mask lets see the key tile, with lse / D from the stats:
 *   DV: dv += P^T dO;  DK: dk += dS^T Q;  fused (DV launch, p.fused): both
 *   in one pass, dk to g2 (the DK step then launches nothing), and with
 *   p.stats_copy every dS tile rounded to the input dtype into scratch
 *   for DQ (the rounded values the dk product uses).
 *
 * Deterministic: every output element has one writer (its warp) and sums
 * the tiles in a fixed order, no atomics. Tiles every pair of which is
 * visible with in-range rows take the fast exponent (scale folded into one
 * FMA); the others score each element through masked_score, the one
 * definition of the mask rule; causal / sliding tiles nobody sees are never
 * loaded, and a warp skips tiles its own 16 rows do not see. */
#include "attention_mma.cuh"

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 64; /* rows of every tile; a warp owns 16 of its block's tile */
constexpr float kLog2e = 1.4426950408889634f;

/* Rows [r0, r0 + n) x D halves of a strided operand (row stride rs) into a
 * tile of row stride LD = D + 8 (ldmatrix's 8 row reads then hit 8 distinct
 * bank groups); rows past `rows` read as zero. Every thread of the block
 * takes part (4 or 8 warps); the caller commits. */
template <int D>
RLXK_DEV void load_rows(uint16_t* dst, const uint16_t* src, int64_t rs, int64_t r0, int64_t rows, int n) {
  constexpr int chunks = D / 8; /* 16-byte pieces per row */
  for (int idx = threadIdx.x; idx < n * chunks; idx += blockDim.x) {
    int r = idx / chunks, c = idx % chunks;
    bool valid = r0 + r < rows;
    cp_async16(dst + r * (D + 8) + c * 8, src + (valid ? (r0 + r) * rs : 0) + c * 8, valid);
  }
}

/* A streamed tile: 64 rows. */
template <int D>
RLXK_DEV void load_tile(uint16_t* dst, const uint16_t* src, int64_t rs, int64_t r0, int64_t rows) {
  load_rows<D>(dst, src, rs, r0, rows, kTile);
}

/* (lse, D) of query rows [i0, i0 + 64) (stats row base + i) into dst[64][2];
 * rows past Sq read as zero (their scores are masked). */
RLXK_DEV void load_stats(float* dst, const float* stats, int64_t base, int64_t i0, int64_t Sq) {
  for (int t = threadIdx.x; t < kTile; t += kThreads) {
    bool valid = i0 + t < Sq;
    cp_async8(dst + 2 * t, stats + (valid ? 2 * (base + i0 + t) : 0), valid);
  }
}

/* The A fragment of rows [r0, r0 + 16) x columns [c0, c0 + 16) of a tile. */
template <int D>
RLXK_DEV void frag_a(uint32_t f[4], const uint16_t* tile, int r0, int c0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
  ldmatrix_x4(f, tile + (r0 + (mi & 1) * 8 + mr) * (D + 8) + c0 + (mi >> 1) * 8);
}

/* B fragments of two n-tiles from a tile whose rows are n: n = rows
 * [n0, n0 + 16), k = columns [c0, c0 + 16); f[0..1] n-tile n0, f[2..3]
 * n-tile n0 + 8. */
template <int D>
RLXK_DEV void frag_b_rows(uint32_t f[4], const uint16_t* tile, int n0, int c0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
  ldmatrix_x4(f, tile + (n0 + (mi >> 1) * 8 + mr) * (D + 8) + c0 + (mi & 1) * 8);
}

/* B fragments of two n-tiles from a tile whose rows are k: k = rows
 * [k0, k0 + 16), n = columns [n0, n0 + 16) (transposing loads). */
template <int D>
RLXK_DEV void frag_b_cols(uint32_t f[4], const uint16_t* tile, int k0, int n0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
  ldmatrix_x4_trans(f, tile + (k0 + (mi & 1) * 8 + mr) * (D + 8) + n0 + (mi >> 1) * 8);
}

/* acc = rows [r0, r0 + 16) of tile A dotted with the 64 rows of tile B
 * (over D): element (n, e) is row r0 + g + 8 (e >> 1), B row 8 n + 2 t +
 * (e & 1), with g = lane / 4, t = lane % 4. */
template <int D, bool BF>
RLXK_DEV void dots_16x64(float acc[8][4], const uint16_t* A, int r0, const uint16_t* B) {
#pragma unroll
  for (int n = 0; n < 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++) {
    uint32_t a[4];
    frag_a<D>(a, A, r0, ks * 16);
#pragma unroll
    for (int np = 0; np < 4; np++) {
      uint32_t b[4];
      frag_b_rows<D>(b, B, np * 16, ks * 16);
      mma16816<BF>(acc[2 * np], a, b[0], b[1]);
      mma16816<BF>(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

/* dots_16x64 with the A rows' fragments already in registers. */
template <int D, bool BF>
RLXK_DEV void dots_16x64_regs(float acc[8][4], const uint32_t af[D / 16][4], const uint16_t* B) {
#pragma unroll
  for (int n = 0; n < 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
    for (int np = 0; np < 4; np++) {
      uint32_t bf[4];
      frag_b_rows<D>(bf, B, np * 16, ks * 16);
      mma16816<BF>(acc[2 * np], af[ks], bf[0], bf[1]);
      mma16816<BF>(acc[2 * np + 1], af[ks], bf[2], bf[3]);
    }
}

/* acc (16 x D, n-tile n = columns 8n..) += W X: W the 16 x 64 weights in
 * dots_16x64's layout, X a tile of 64 rows x D. */
template <int D, bool BF>
RLXK_DEV void accumulate_16xD(float acc[D / 8][4], const float w[8][4], const uint16_t* X) {
#pragma unroll
  for (int j = 0; j < 4; j++) {
    uint32_t a[4] = {pack2<BF>(w[2 * j][0], w[2 * j][1]), pack2<BF>(w[2 * j][2], w[2 * j][3]),
                     pack2<BF>(w[2 * j + 1][0], w[2 * j + 1][1]),
                     pack2<BF>(w[2 * j + 1][2], w[2 * j + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; dp++) {
      uint32_t b[4];
      frag_b_cols<D>(b, X, j * 16, dp * 16);
      mma16816<BF>(acc[2 * dp], a, b[0], b[1]);
      mma16816<BF>(acc[2 * dp + 1], a, b[2], b[3]);
    }
  }
}

/* The band of a causal / sliding / unmasked tile in tile-relative
 * positions: key kk of the tile at k0 is visible to query qq of the tile
 * at q0 iff qq < q_rows, kk < k_rows and lo < kk - qq <= hi (Sk - Sq
 * shifts the diagonal). For the tiles attn_tile_open rejects (diagonal,
 * edges): small ints instead of masked_score's 64-bit positions and mask
 * switch per element. Bounds are clamped beyond the tile's +-64 range. */
struct Band {
  int q_rows, k_rows, lo, hi;
};
RLXK_DEV bool band_mask(const rlxk_attn& a) {
  return a.softcap == 0.0f &&
         (a.mask == RLX_MASK_NONE || a.mask == RLX_MASK_CAUSAL || a.mask == RLX_MASK_SLIDING);
}
RLXK_DEV int clamp_band(int64_t x) { return (int)min(max(x, (int64_t)-129), (int64_t)129); }
RLXK_DEV Band tile_band(const rlxk_attn& a, int64_t q0, int64_t k0) {
  const int64_t diag = a.Sk - a.Sq - (k0 - q0); /* kk - qq on the causal diagonal */
  Band band;
  band.q_rows = clamp_band(a.Sq - q0);
  band.k_rows = clamp_band(a.Sk - k0);
  band.hi = a.mask == RLX_MASK_NONE ? 129 : clamp_band(diag);
  band.lo = a.mask == RLX_MASK_SLIDING ? clamp_band(diag - a.window) : -129;
  return band;
}
RLXK_DEV bool band_sees(const Band& band, int qq, int kk) {
  return qq < band.q_rows && kk < band.k_rows && kk - qq <= band.hi && kk - qq > band.lo;
}

/* Dots s (rows row0 + g + 8 (e >> 1), columns col0 + 8 n + 2 t + (e & 1);
 * kKeyRows: rows are keys and columns queries, else the reverse) become
 * P = exp(score - lse) (0 where masked) and, with grads, dp becomes
 * dS = P (dP - D) dscore/ds. stat(n, e, &lse, &D) gives the element's
 * query stats. open: every pair visible, rows in range (attn_tile_open):
 * without a softcap such tiles take one FMA and exp2 per element. The
 * branch stays outside the element loops so the hot loop's code is
 * compact (the per-element masked path is long and rarely taken). */
template <bool kKeyRows, class Stat>
RLXK_DEV void probs(const rlxk_attn& a, const char* mask, int64_t b, int64_t h, int64_t row0,
                    int64_t col0, bool open, float s[8][4], float dp[8][4], bool grads, Stat stat) {
  if (open && a.softcap == 0.0f) {
    const float scale2 = a.scale * kLog2e;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        float lse, del;
        stat(n, e, &lse, &del);
        float pr = exp2f(fmaf(s[n][e], scale2, -lse * kLog2e));
        s[n][e] = pr;
        if (grads) dp[n][e] = pr * (dp[n][e] - del) * a.scale;
      }
    return;
  }
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  if (band_mask(a)) { /* diagonal / edge tiles of the common masks: the same rule in small ints */
    const Band band = kKeyRows ? tile_band(a, col0, row0) : tile_band(a, row0, col0);
    const float scale2 = a.scale * kLog2e;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        float lse, del;
        stat(n, e, &lse, &del);
        const int r = g + 8 * (e >> 1), c = 8 * n + 2 * t + (e & 1);
        const bool vis = kKeyRows ? band_sees(band, c, r) : band_sees(band, r, c);
        float pr = vis && lse != -INFINITY ? exp2f(fmaf(s[n][e], scale2, -lse * kLog2e)) : 0.0f;
        s[n][e] = pr;
        if (grads) dp[n][e] = pr * (dp[n][e] - del) * a.scale;
      }
    return;
  }
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      float lse, del, dot = s[n][e];
      stat(n, e, &lse, &del);
      int64_t r = row0 + g + 8 * (e >> 1), c = col0 + 8 * n + 2 * t + (e & 1);
      float sc = open ? capped_score(a, dot)
                      : masked_score(a, mask, dot, b, h, kKeyRows ? c : r, kKeyRows ? r : c);
      float pr = (sc == -INFINITY || lse == -INFINITY) ? 0.0f : exp2f((sc - lse) * kLog2e);
      s[n][e] = pr;
      if (grads) dp[n][e] = pr * (dp[n][e] - del) * score_slope(a, dot);
    }
}

/* Writes a warp's 16 x D accumulators (rows r0 + g, r0 + g + 8 below
 * `rows`) to out at base + row * rs + column. */
template <int D, bool BF>
RLXK_DEV void store_rows(const float acc[D / 8][4], char* out, int dt, int64_t base, int64_t rs,
                         int64_t r0, int64_t rows) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const bool same = dt == (BF ? RLX_BF16 : RLX_F16);
#pragma unroll
  for (int r = 0; r < 2; r++) {
    int64_t row = r0 + g + 8 * r;
    if (row >= rows) continue;
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
      int64_t at = base + row * rs + n * 8 + 2 * t;
      float x = acc[n][2 * r], y = acc[n][2 * r + 1];
      uint16_t* dst = (uint16_t*)out + at;
      if (same && ((uintptr_t)dst & 3u) == 0) {
        *(uint32_t*)dst = pack2<BF>(x, y);
      } else {
        st_f32(out, dt, at, x);
        st_f32(out, dt, at + 1, y);
      }
    }
  }
}

template <int D>
RLXK_DEV void zero_acc(float acc[D / 8][4]) {
#pragma unroll
  for (int n = 0; n < D / 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

/* Streams key tiles [k_first, k_first + 64 n) (K, and a second tile that
 * second(dst, k0, j) brings with it: V, a dS tile or nothing) through two
 * stages of shared memory, calling body(k0, Ks, second's tile) per
 * tile: cp.async brings tile j + 1 while tile j is used, one barrier per
 * tile. Copies the caller issued before (its own tiles) land with tile 0. */
template <int D, class Second, class Body>
RLXK_DEV void stream_keys(uint16_t* stages, const uint16_t* k, const rlxk_attn& a, int64_t k_first,
                          int n, Second second, Body body) {
  constexpr int TILE = kTile * (D + 8);
  if (n > 0) {
    load_tile<D>(stages, k, a.k_ss, k_first, a.Sk);
    second(stages + TILE, k_first, 0);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  for (int j = 0; j < n; j++) {
    const int64_t k0 = k_first + (int64_t)j * kTile;
    uint16_t* cur = stages + (j & 1) * 2 * TILE;
    if (j + 1 < n) { /* prefetch tile j + 1 into the other stage */
      uint16_t* nxt = stages + ((j + 1) & 1) * 2 * TILE;
      load_tile<D>(nxt, k, a.k_ss, k0 + kTile, a.Sk);
      second(nxt + TILE, k0 + kTile, j + 1);
    }
    cp_async_commit();
    body(k0, cur, cur + TILE);
    cp_async_wait_all(); /* tile j + 1 landed (own copies) ... */
    __syncthreads();     /* ... everyone's, and nobody reads stage j & 1 any more */
  }
}

/* dS tiles in scratch (the fused DV launch writes them, DQ reads them):
 * 64 keys x 64 queries of the input dtype, key-major (dS^T, the layout the
 * key-tile warps hold), one per (b, h, query tile, key tile) pair at
 * ((b H + h) nq + qt) nk + kt. Tiles nobody sees are never written or read. */
constexpr int kDsTile = kTile * kTile;
constexpr int kDsLd = kTile + 8; /* shared-memory row stride of a dS tile */
RLXK_DEV uint16_t* ds_tile(const rlxk_attn& a, int64_t b, int64_t h, int64_t qt, int64_t kt) {
  const int64_t nq = (a.Sq + kTile - 1) / kTile, nk = (a.Sk + kTile - 1) / kTile;
  return (uint16_t*)a.partial + (((b * a.H + h) * nq + qt) * nk + kt) * kDsTile;
}

/* Two halves of one register (x the lower address) as floats. */
template <bool BF>
RLXK_DEV float2 unpack2(uint32_t w) {
  if constexpr (BF) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  } else {
    __half2 v = *(__half2*)&w;
    return __half22float2(v);
  }
}

/* D_i = d_out_i . out_i of the warp's rows wi0 + g and wi0 + g + 8. Lanes
 * 2r and 2r + 1 sum the two halves of row wi0 + r with all their loads in
 * flight at once (16-byte vectors when both operands are the input dtype
 * and aligned), then each lane quad picks its rows' sums: no chain of 16
 * dependent warp reductions. */
template <int D, bool BF>
RLXK_DEV void row_deltas(const rlxk_attn_bwd& p, const char* arena, int64_t b, int64_t h,
                         int64_t wi0, float del[2]) {
  const rlxk_attn& a = p.a;
  const int lane = threadIdx.x & 31, g = lane >> 2, half = lane & 1;
  const char *d_out = at(arena, p.dooff), *out = at(arena, p.xoff);
  const int64_t i = wi0 + (lane >> 1);
  float sum = 0.0f;
  if (i < a.Sq) {
    const int64_t oo = b * a.o_sb + i * a.o_ss + h * a.o_sh + half * (D / 2);
    const int64_t go = b * p.do_sb + i * p.do_ss + h * p.do_sh + half * (D / 2);
    const int same = BF ? RLX_BF16 : RLX_F16;
    const uint16_t *gv = (const uint16_t*)d_out + go, *ov = (const uint16_t*)out + oo;
    if (p.dodt == same && p.xdt == same && (((uintptr_t)gv | (uintptr_t)ov) & 15u) == 0) {
      uint4 gx[D / 16], ox[D / 16];
#pragma unroll
      for (int c = 0; c < D / 16; c++) {
        gx[c] = ((const uint4*)gv)[c];
        ox[c] = ((const uint4*)ov)[c];
      }
#pragma unroll
      for (int c = 0; c < D / 16; c++) {
        const uint32_t gw[4] = {gx[c].x, gx[c].y, gx[c].z, gx[c].w};
        const uint32_t ow[4] = {ox[c].x, ox[c].y, ox[c].z, ox[c].w};
#pragma unroll
        for (int w = 0; w < 4; w++) {
          float2 x = unpack2<BF>(gw[w]), y = unpack2<BF>(ow[w]);
          sum = fmaf(x.x, y.x, fmaf(x.y, y.y, sum));
        }
      }
    } else {
#pragma unroll 8
      for (int d = 0; d < D / 2; d++)
        sum = fmaf(ld_f32(d_out, p.dodt, go + d), ld_f32(out, p.xdt, oo + d), sum);
    }
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  del[0] = __shfl_sync(0xffffffffu, sum, 2 * g);
  del[1] = __shfl_sync(0xffffffffu, sum, 2 * (g + 8));
}

/* lse of the warp's rows (g, g + 8) over the visible key tiles: an online
 * max / sum in the log2 domain, the max shared by the row's lane quad. */
template <int D, bool BF>
RLXK_DEV void row_lse(const rlxk_attn& a, const char* mask, int64_t b, int64_t h, uint16_t* stages, const uint16_t* Qs, const uint16_t* k, int64_t k_first,
                      int n_tiles, int64_t wi0, float lse[2]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  int64_t w_begin, w_end;
  attn_key_range(a, wi0, 16, &w_begin, &w_end);
  const bool live = wi0 < a.Sq;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  /* The warp's Q fragments stay in registers for the whole key loop: one
   * ldmatrix less per four B loads (Q arrives with the caller's copies). */
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++) frag_a<D>(qf[ks], Qs, warp * 16, ks * 16);
  stream_keys<D>(stages, k, a, k_first, n_tiles, [](uint16_t*, int64_t, int) {},
                 [&](int64_t k0, const uint16_t* Ks, const uint16_t*) {
    if (!live || k0 >= w_end || k0 + kTile <= w_begin) return;
    float s[8][4];
    dots_16x64_regs<D, BF>(s, qf, Ks);
    /* Scores in the log2 domain; the branch outside the loops keeps the
     * hot (open, no softcap) loop compact. */
    if (attn_tile_open(a, wi0, 16, k0, kTile) && wi0 + 16 <= a.Sq && a.softcap == 0.0f) {
      const float scale2 = a.scale * kLog2e;
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] *= scale2;
    } else if (band_mask(a)) { /* diagonal / edge tiles of the common masks */
      const Band band = tile_band(a, wi0, k0);
      const float scale2 = a.scale * kLog2e;
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          s[n][e] = band_sees(band, g + 8 * (e >> 1), 8 * n + 2 * t + (e & 1)) ? s[n][e] * scale2
                                                                                 : -INFINITY;
    } else {
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          s[n][e] = masked_score(a, mask, s[n][e], b, h, wi0 + g + 8 * (e >> 1),
                                 k0 + 8 * n + 2 * t + (e & 1)) * kLog2e;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < 8; n++) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float m_new = fmaxf(m[r], mx);
      if (m_new == -INFINITY) continue; /* nothing visible yet in this row */
      float sum = 0.0f;
#pragma unroll
      for (int n = 0; n < 8; n++) sum += exp2f(s[n][2 * r] - m_new) + exp2f(s[n][2 * r + 1] - m_new);
      l[r] = l[r] * exp2f(m[r] - m_new) + sum; /* exp2(-inf) = 0 for the first tile */
      m[r] = m_new;
    }
  });
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float tot = l[r];
    tot += __shfl_xor_sync(0xffffffffu, tot, 1);
    tot += __shfl_xor_sync(0xffffffffu, tot, 2);
    lse[r] = m[r] == -INFINITY ? -INFINITY : (m[r] + log2f(tot)) / kLog2e;
  }
}

/* dq of the block's 64 query rows (query tile qt; 4 warps) as the sum over
 * its visible key tiles of dS K, dS from the tiles the fused DV launch left
 * in scratch (a.partial, ds_tile): no S or dP recomputed, no stats read.
 * Shared memory: two stages of (K tile, dS tile). */
template <int D, bool BF>
RLXK_DEV void dq_from_ds(char* arena, const rlxk_attn_bwd& p, uint16_t* stages, const uint16_t* k,
                         int64_t b, int64_t h, int64_t qt, int64_t k_first, int n_tiles) {
  const rlxk_attn& a = p.a;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
  const int64_t wi0 = qt * kTile + warp * 16;
  int64_t w_begin, w_end;
  attn_key_range(a, wi0, 16, &w_begin, &w_end);
  const bool live = wi0 < a.Sq;
  float acc[D / 8][4];
  zero_acc<D>(acc);
  auto load_ds = [&](uint16_t* dst, int64_t k0, int) {
    const uint16_t* src = ds_tile(a, b, h, qt, k0 / kTile);
    for (int idx = threadIdx.x; idx < kTile * (kTile / 8); idx += blockDim.x) {
      int r = idx >> 3, c = idx & 7;
      cp_async16(dst + r * kDsLd + c * 8, src + r * kTile + c * 8, true);
    }
  };
  stream_keys<D>(stages, k, a, k_first, n_tiles, load_ds,
                 [&](int64_t k0, const uint16_t* Ks, const uint16_t* Ds) {
    if (!live || k0 >= w_end || k0 + kTile <= w_begin) return;
#pragma unroll
    for (int j = 0; j < 4; j++) { /* keys 16 j .. 16 j + 15 */
      uint32_t af[4]; /* dS rows = the warp's queries: transposing loads of dS^T */
      ldmatrix_x4_trans(af, Ds + (j * 16 + (mi >> 1) * 8 + mr) * kDsLd + warp * 16 + (mi & 1) * 8);
#pragma unroll
      for (int dp = 0; dp < D / 16; dp++) {
        uint32_t bf[4];
        frag_b_cols<D>(bf, Ks, j * 16, dp * 16);
        mma16816<BF>(acc[2 * dp], af, bf[0], bf[1]);
        mma16816<BF>(acc[2 * dp + 1], af, bf[2], bf[3]);
      }
    }
  });
  if (live) store_rows<D, BF>(acc, atw(arena, p.goff), p.gdt, b * p.g_sb + h * p.g_sh, p.g_ss, wi0, a.Sq);
}

/* Shared memory: Q, dO (16 rows per warp each), then two stages of (K, V)
 * tiles of 64 rows; rows of D + 8 halves. The block has 4 or 8 warps (the
 * launch's choice, RLX_CUDA_ATTN_BWD_Q_WARPS): 8 warps own 128 query rows,
 * so each streamed key tile (and its barrier) serves twice the rows. */
template <int D, bool BF>
__device__ void bwd_queries(char* arena, const rlxk_attn_bwd& p) {
  extern __shared__ float4 smem4[];
  const int rows = 16 * (int)(blockDim.x >> 5); /* query rows of the block */
  uint16_t* Qs = (uint16_t*)smem4;
  uint16_t* Os = Qs + rows * (D + 8);
  uint16_t* stages = Os + rows * (D + 8);
  const rlxk_attn& a = p.a;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  /* Longest causal rows first, across all heads. */
  const int64_t q_tiles = (a.Sq + rows - 1) / rows, BH = a.B * a.H, blk = blockIdx.x;
  const int64_t tile = q_tiles - 1 - blk / BH, bh = blk % BH;
  const int64_t h = bh % a.H, b = bh / a.H, kvh = h / (a.H / a.Hkv), i0 = tile * rows;
  const int64_t wi0 = i0 + warp * 16;
  const uint16_t* q = (const uint16_t*)at(arena, a.qoff) + b * a.q_sb + h * a.q_sh;
  const uint16_t* d_out = (const uint16_t*)at(arena, p.dooff) + b * p.do_sb + h * p.do_sh;
  const uint16_t* k = (const uint16_t*)at(arena, a.koff) + b * a.k_sb + kvh * a.k_sh;
  const uint16_t* v = (const uint16_t*)at(arena, a.voff) + b * a.v_sb + kvh * a.v_sh;
  const char* mask = at(arena, a.moff);
  const bool dq = p.op == RLXK_ATTN_BWD_DQ;

  int64_t k_begin, k_end;
  attn_key_range(a, i0, rows, &k_begin, &k_end);
  const int64_t k_first = (k_begin / kTile) * kTile;
  const int n_tiles = k_end > k_first ? (int)((k_end - k_first + kTile - 1) / kTile) : 0;
  if (dq && p.fused) { /* dS came from the fused DV launch: dq = dS K alone */
    dq_from_ds<D, BF>(arena, p, (uint16_t*)smem4, k, b, h, tile, k_first, n_tiles);
    return;
  }
  load_rows<D>(Qs, q, a.q_ss, i0, a.Sq, rows); /* lands with the first key tile */
  if (dq) load_rows<D>(Os, d_out, p.do_ss, i0, a.Sq, rows);

  float lse[2], del[2];
  const int64_t row_base = (b * a.H + h) * a.Sq;
  if (dq && p.stats_copy) {
    const float2* copy = (const float2*)a.partial;
#pragma unroll
    for (int r = 0; r < 2; r++) {
      int64_t i = wi0 + g + 8 * r;
      float2 x = i < a.Sq ? copy[row_base + i] : make_float2(-INFINITY, 0.0f);
      lse[r] = x.x, del[r] = x.y;
    }
  } else {
    row_lse<D, BF>(a, mask, b, h, stages, Qs, k, k_first, n_tiles, wi0, lse);
    row_deltas<D, BF>(p, arena, b, h, wi0, del);
  }
  if (!dq) {
    if (t != 0) return;
    char* stats = atw(arena, p.goff);
#pragma unroll
    for (int r = 0; r < 2; r++) {
      int64_t i = wi0 + g + 8 * r;
      if (i >= a.Sq) continue;
      st_f32(stats, p.gdt, 2 * (row_base + i), lse[r]);
      st_f32(stats, p.gdt, 2 * (row_base + i) + 1, del[r]);
      if (p.stats_copy) ((float2*)a.partial)[row_base + i] = make_float2(lse[r], del[r]);
    }
    return;
  }

  int64_t w_begin, w_end;
  attn_key_range(a, wi0, 16, &w_begin, &w_end);
  const bool live = wi0 < a.Sq;
  float acc[D / 8][4];
  zero_acc<D>(acc);
  stream_keys<D>(stages, k, a, k_first, n_tiles,
                 [&](uint16_t* dst, int64_t k0, int) { load_tile<D>(dst, v, a.v_ss, k0, a.Sk); },
                 [&](int64_t k0, const uint16_t* Ks, const uint16_t* Vs) {
    if (!live || k0 >= w_end || k0 + kTile <= w_begin) return;
    float s[8][4], dp[8][4];
    dots_16x64<D, BF>(s, Qs, warp * 16, Ks); /* S = Q K^T */
    dots_16x64<D, BF>(dp, Os, warp * 16, Vs); /* dP = dO V^T */
    const bool open = attn_tile_open(a, wi0, 16, k0, kTile) && wi0 + 16 <= a.Sq;
    probs<false>(a, mask, b, h, wi0, k0, open, s, dp, true, [&](int, int e, float* l, float* d) {
      *l = lse[e >> 1];
      *d = del[e >> 1];
    });
    accumulate_16xD<D, BF>(acc, dp, Ks); /* dq += dS K */
  });
  if (live) store_rows<D, BF>(acc, atw(arena, p.goff), p.gdt, b * p.g_sb + h * p.g_sh, p.g_ss, wi0, a.Sq);
}

/* A warp's 16 rows of a dS^T tile (dst: row stride 64) from its f32
 * accumulators in dots_16x64's layout, rounded to the input dtype as the
 * dk product rounds them; ds == nullptr writes zeros. */
template <bool BF>
RLXK_DEV void store_ds(uint16_t* dst, const float (*ds)[4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 2; r++)
#pragma unroll
    for (int n = 0; n < 8; n++)
      *(uint32_t*)(dst + (g + 8 * r) * kTile + 8 * n + 2 * t) =
          ds ? pack2<BF>(ds[n][2 * r], ds[n][2 * r + 1]) : 0u;
}

/* Shared memory: K, V, then two stages of (Q, dO) tiles, 64 x (D + 8)
 * halves each, and two stages of the 64 query rows' (lse, D). */
template <int D, bool BF>
__device__ void bwd_keys(char* arena, const rlxk_attn_bwd& p) {
  constexpr int TILE = kTile * (D + 8);
  extern __shared__ float4 smem4[];
  uint16_t* Ks = (uint16_t*)smem4;
  uint16_t* Vs = Ks + TILE;
  uint16_t* stages = Vs + TILE;
  float* stats_s = (float*)(stages + 4 * TILE);
  const rlxk_attn& a = p.a;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const bool want_dv = p.op == RLXK_ATTN_BWD_DV, want_dk = p.op == RLXK_ATTN_BWD_DK || p.fused;
  const bool keep_ds = p.fused && p.stats_copy; /* dS tiles to scratch for DQ (dq_from_ds) */
  /* Key tile 0 sees the most causal rows: it goes first. */
  const int64_t BG = a.B * a.Hkv, blk = blockIdx.x, tile = blk / BG, bg = blk % BG;
  const int64_t kvh = bg % a.Hkv, b = bg / a.Hkv, j0 = tile * kTile, group = a.H / a.Hkv;
  const int64_t wj0 = j0 + warp * 16;
  const uint16_t* q = (const uint16_t*)at(arena, a.qoff) + b * a.q_sb;
  const uint16_t* d_out = (const uint16_t*)at(arena, p.dooff) + b * p.do_sb;
  const uint16_t* k = (const uint16_t*)at(arena, a.koff) + b * a.k_sb + kvh * a.k_sh;
  const uint16_t* v = (const uint16_t*)at(arena, a.voff) + b * a.v_sb + kvh * a.v_sh;
  const float* stats = (const float*)at(arena, p.xoff);
  const char* mask = at(arena, a.moff);

  load_tile<D>(Ks, k, a.k_ss, j0, a.Sk);
  if (want_dk) load_tile<D>(Vs, v, a.v_ss, j0, a.Sk);
  int64_t i_lo, i_hi;
  attn_query_range(a, j0, kTile, &i_lo, &i_hi);
  const int64_t i_first = (i_lo / kTile) * kTile;
  const int64_t n_q = i_hi > i_first ? (i_hi - i_first + kTile - 1) / kTile : 0;
  const int64_t iters = group * n_q;
  /* Iteration it: query head kvh * group + it / n_q, query tile it % n_q. */
  auto load_stage = [&](int64_t it) {
    const int64_t h = kvh * group + it / n_q, i0 = i_first + (it % n_q) * kTile;
    uint16_t* st = stages + (it & 1) * 2 * TILE;
    load_tile<D>(st, q + h * a.q_sh, a.q_ss, i0, a.Sq);
    load_tile<D>(st + TILE, d_out + h * p.do_sh, p.do_ss, i0, a.Sq);
    load_stats(stats_s + (it & 1) * 2 * kTile, stats, (b * a.H + h) * a.Sq, i0, a.Sq);
  };
  if (iters > 0) load_stage(0);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  int64_t w_lo, w_hi;
  attn_query_range(a, wj0, 16, &w_lo, &w_hi);
  const bool live = wj0 < a.Sk;
  float dv[D / 8][4], dk[D / 8][4];
  zero_acc<D>(dv);
  zero_acc<D>(dk);
  for (int64_t it = 0; it < iters; it++) {
    if (it + 1 < iters) load_stage(it + 1);
    cp_async_commit();
    const int64_t h = kvh * group + it / n_q, i0 = i_first + (it % n_q) * kTile;
    if (live && i0 < w_hi && i0 + kTile > w_lo) {
      const uint16_t* Qs = stages + (it & 1) * 2 * TILE;
      const uint16_t* Os = Qs + TILE;
      const float* St = stats_s + (it & 1) * 2 * kTile;
      float s[8][4], dp[8][4];
      dots_16x64<D, BF>(s, Ks, warp * 16, Qs); /* S^T = K Q^T */
      if (want_dk) dots_16x64<D, BF>(dp, Vs, warp * 16, Os); /* dP^T = V dO^T */
      const bool open = attn_tile_open(a, i0, kTile, wj0, 16) && i0 + kTile <= a.Sq;
      probs<true>(a, mask, b, h, wj0, i0, open, s, dp, want_dk, [&](int n, int e, float* l, float* d) {
        const float* x = St + 2 * (8 * n + 2 * t + (e & 1));
        *l = x[0];
        *d = x[1];
      });
      if (want_dv) accumulate_16xD<D, BF>(dv, s, Os); /* dv += P^T dO */
      if (want_dk) accumulate_16xD<D, BF>(dk, dp, Qs); /* dk += dS^T Q */
      if (keep_ds) store_ds<BF>(ds_tile(a, b, h, i0 / kTile, tile) + warp * 16 * kTile, dp);
    } else if (keep_ds) { /* rows nobody here sees: DQ still reads them */
      store_ds<BF>(ds_tile(a, b, h, i0 / kTile, tile) + warp * 16 * kTile, nullptr);
    }
    cp_async_wait_all(); /* stage it + 1 landed (own copies) ... */
    __syncthreads();     /* ... everyone's, and nobody reads stage it & 1 any more */
  }
  if (!live) return;
  if (want_dv) store_rows<D, BF>(dv, atw(arena, p.goff), p.gdt, b * p.g_sb + kvh * p.g_sh, p.g_ss, wj0, a.Sk);
  if (p.op == RLXK_ATTN_BWD_DK)
    store_rows<D, BF>(dk, atw(arena, p.goff), p.gdt, b * p.g_sb + kvh * p.g_sh, p.g_ss, wj0, a.Sk);
  else if (p.fused)
    store_rows<D, BF>(dk, atw(arena, p.g2off), p.g2dt, b * p.g2_sb + kvh * p.g2_sh, p.g2_ss, wj0, a.Sk);
}

}  // namespace

/* mma.sync needs warps to hide its latency. The query-tile kernels run 4
 * or 8 warps a block (the launch picks; 4 by default): d64 fits 128
 * registers (16 warps an SM either way), d128 up to 255. The key-tile
 * kernels run 4 warps: d64 168 registers (three blocks: their score, dP
 * and two 16 x 64 accumulator tiles), d128 two blocks of up to 255. */
#define ATTN_BWD_MMA(name, body, d, bf, max_threads, min_blocks)                          \
  extern "C" __global__ void __launch_bounds__(max_threads, min_blocks)                   \
      name(char* arena, rlxk_attn_bwd p, rlxk_state* st) {                                \
    (void)st;                                                                             \
    body<d, bf>(arena, p);                                                                \
  }
ATTN_BWD_MMA(rlx_attn_bwd_mma_q_bf16_d64, bwd_queries, 64, true, 256, 2)
ATTN_BWD_MMA(rlx_attn_bwd_mma_q_bf16_d128, bwd_queries, 128, true, 256, 1)
ATTN_BWD_MMA(rlx_attn_bwd_mma_q_f16_d64, bwd_queries, 64, false, 256, 2)
ATTN_BWD_MMA(rlx_attn_bwd_mma_q_f16_d128, bwd_queries, 128, false, 256, 1)
ATTN_BWD_MMA(rlx_attn_bwd_mma_k_bf16_d64, bwd_keys, 64, true, kThreads, 3)
ATTN_BWD_MMA(rlx_attn_bwd_mma_k_bf16_d128, bwd_keys, 128, true, kThreads, 2)
ATTN_BWD_MMA(rlx_attn_bwd_mma_k_f16_d64, bwd_keys, 64, false, kThreads, 3)
ATTN_BWD_MMA(rlx_attn_bwd_mma_k_f16_d128, bwd_keys, 128, false, kThreads, 2)
