/* Tensor-core flash-attention forward for f16 / bf16 Q, K, V (sm_80+ mma.sync
 * m16n8k16, f32 accumulation), head dims 64 and 128 with D == Dv.
 *
 * One block of 8 warps per (batch, head, 128-query tile); each warp owns 16
 * query rows, whose Q fragments stay in registers for the whole key loop
 * (128 rows per block halve the K/V traffic of 64-row tiles). Key/value
 * tiles of 64 rows are double-buffered in shared memory: cp.async brings K
 * and V of tile j+1 while tile j is computed, so one barrier per tile and no
 * exposed load latency. Scores and the online softmax are f32 in the log2
 * domain with the score scale folded into the exponent's FMA; P is rounded
 * to the input dtype for P·V (as every flash kernel does). Causal / sliding
 * masks skip key tiles nobody in the block sees, and each warp skips the
 * tiles its own 16 rows do not see; per-element masking (softcap, custom
 * and bias masks, edges) runs only on tiles that need it. Anything else
 * (other dtypes, head dims, unaligned strides, decode-sized query counts)
 * takes attention.cu. */
#include "attention_mma.cuh"

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kQRows = kWarps * 16; /* query rows per block */
constexpr int kKRows = 64;          /* key rows per tile */
constexpr float kLog2e = 1.4426950408889634f;

/* Rows [r0, r0 + NR) x D halves of a strided operand into a padded tile
 * (row stride LD halves); rows past `rows` read as zero. */
template <int NR, int D, int LD>
RLXK_DEV void load_tile(uint16_t* dst, const uint16_t* src, int64_t rstride, int64_t r0,
                        int64_t rows) {
  constexpr int chunks = D / 8; /* 16-byte pieces per row */
#pragma unroll
  for (int idx = threadIdx.x; idx < NR * chunks; idx += kThreads) {
    int r = idx / chunks, c = idx % chunks;
    bool valid = r0 + r < rows;
    const uint16_t* g = src + (valid ? (r0 + r) * rstride : 0) + c * 8;
    cp_async16(dst + r * LD + c * 8, g, valid);
  }
}

/* One warp's online-softmax state: 16 rows x D outputs, the rows' running
 * max (log2 domain) and sum; a row lives in one lane quad. */
template <int D>
struct WarpAcc {
  float o[D / 8][4];
  float m[2], l[2];
};

/* Scores s (n-tile n, element e: row g + 8*(e>>1), key n*8 + 2t + (e&1))
 * become probabilities: p = exp2(s * sc - m). sc is the log2-domain score
 * scale for raw dot products, 1 for scores already in that domain. */
template <int D>
RLXK_DEV void online_softmax(WarpAcc<D>& a, float s[8][4], float sc) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float mx = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; n++) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    float m_new = fmaxf(a.m[r], mx * sc), alpha = 1.0f, rs = 0.0f;
    if (m_new == -INFINITY) { /* nothing visible yet in this row */
#pragma unroll
      for (int n = 0; n < 8; n++) s[n][2 * r] = s[n][2 * r + 1] = 0.0f;
    } else {
      alpha = exp2f(a.m[r] - m_new); /* 0 when the old max was -inf */
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; e++) {
          s[n][e] = exp2f(fmaf(s[n][e], sc, -m_new));
          rs += s[n][e];
        }
      a.m[r] = m_new;
    }
    a.l[r] = a.l[r] * alpha + rs;
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
      a.o[n][2 * r] *= alpha;
      a.o[n][2 * r + 1] *= alpha;
    }
  }
}

/* One warp's 16 rows (from wq0) against the key tile at k0 held in Ks / Vs. */
template <int D, int LD, bool BF>
RLXK_DEV void warp_tile(WarpAcc<D>& a, const uint32_t qf[D / 16][4], const uint16_t* Ks,
                        const uint16_t* Vs, const rlxk_attn& p, const char* mask, int64_t b,
                        int64_t h, int64_t wq0, int64_t k0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, mi = lane >> 3, mr = lane & 7;
  float s[8][4];
#pragma unroll
  for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++)
#pragma unroll
    for (int np = 0; np < 4; np++) {
      uint32_t kf[4];
      ldmatrix_x4(kf, Ks + (np * 16 + (mi >> 1) * 8 + mr) * LD + ks * 16 + (mi & 1) * 8);
      mma16816<BF>(s[2 * np], qf[ks], kf[0], kf[1]);
      mma16816<BF>(s[2 * np + 1], qf[ks], kf[2], kf[3]);
    }

  const float scale2 = p.scale * kLog2e;
  if (attn_tile_open(p, wq0, 16, k0, kKRows) && p.softcap == 0.0f && scale2 > 0.0f) {
    online_softmax<D>(a, s, scale2); /* scale folded into the exponent */
  } else {
    if (attn_tile_open(p, wq0, 16, k0, kKRows)) { /* softcap or a non-positive scale */
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          s[n][e] = (p.softcap > 0.0f ? p.softcap * tanhf(s[n][e] * p.scale / p.softcap)
                                      : s[n][e] * p.scale) * kLog2e;
    } else if (p.mask == RLX_MASK_CAUSAL || p.mask == RLX_MASK_NONE) {
      /* The diagonal / edge tiles: key j of row i is visible iff
       * j - i <= Sk - Sq, j < Sk and i < Sq; positions relative to the tile. */
      const int64_t lim64 = p.Sk - p.Sq + wq0 - k0;
      const int lim = p.mask == RLX_MASK_CAUSAL ? (int)min(max(lim64, (int64_t)-16), (int64_t)kKRows)
                                                : kKRows;
      const int keys = (int)min(p.Sk - k0, (int64_t)kKRows);
      const int rows = (int)min(p.Sq - wq0, (int64_t)16);
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int i = g + 8 * (e >> 1), jj = n * 8 + 2 * t + (e & 1);
          const bool vis = i < rows && jj < keys && jj - i <= lim;
          s[n][e] = vis ? (p.softcap > 0.0f ? p.softcap * tanhf(s[n][e] * p.scale / p.softcap)
                                            : s[n][e] * p.scale) * kLog2e
                        : -INFINITY;
        }
    } else {
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          s[n][e] = masked_score(p, mask, s[n][e], b, h, wq0 + g + 8 * (e >> 1),
                                 k0 + n * 8 + 2 * t + (e & 1)) * kLog2e;
    }
    online_softmax<D>(a, s, 1.0f);
  }

  /* O += P·V: the score accumulators of n-tiles 2j, 2j+1 are exactly the
   * A fragment of k-step j (keys 16j..16j+15). */
#pragma unroll
  for (int j = 0; j < 4; j++) {
    uint32_t pf[4] = {pack2<BF>(s[2 * j][0], s[2 * j][1]), pack2<BF>(s[2 * j][2], s[2 * j][3]),
                      pack2<BF>(s[2 * j + 1][0], s[2 * j + 1][1]),
                      pack2<BF>(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; dp++) {
      uint32_t vf[4];
      ldmatrix_x4_trans(vf, Vs + (j * 16 + (mi & 1) * 8 + mr) * LD + dp * 16 + (mi >> 1) * 8);
      mma16816<BF>(a.o[2 * dp], pf, vf[0], vf[1]);
      mma16816<BF>(a.o[2 * dp + 1], pf, vf[2], vf[3]);
    }
  }
}

template <int D, bool BF>
RLXK_DEV void store_rows(const WarpAcc<D>& a, char* arena, const rlxk_attn& p, int64_t b,
                         int64_t h, int64_t wq0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  char* out = atw(arena, p.ooff);
  const int same = p.odt == (BF ? RLX_BF16 : RLX_F16);
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float tot = a.l[r];
    tot += __shfl_xor_sync(0xffffffffu, tot, 1);
    tot += __shfl_xor_sync(0xffffffffu, tot, 2);
    int64_t qi = wq0 + g + 8 * r;
    if (qi >= p.Sq) continue;
    float inv = tot > 0.0f ? 1.0f / tot : 0.0f;
    int64_t ob = b * p.o_sb + qi * p.o_ss + h * p.o_sh;
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
      int64_t col = n * 8 + 2 * t;
      float x = a.o[n][2 * r] * inv, y = a.o[n][2 * r + 1] * inv;
      uint16_t* dst = (uint16_t*)out + ob + col;
      if (same && ((uintptr_t)dst & 3u) == 0) {
        *(uint32_t*)dst = pack2<BF>(x, y);
      } else {
        st_f32(out, p.odt, ob + col, x);
        st_f32(out, p.odt, ob + col + 1, y);
      }
    }
  }
}

/* Shared memory: two stages of (K tile, V tile), each 64 x LD halves; Q
 * (128 rows) first lands in stage 1 and moves to registers before stage 1
 * is reused. */
template <int D, bool BF>
__device__ void flash_mma(char* arena, const rlxk_attn& p) {
  constexpr int LD = D + 8; /* padded rows: ldmatrix's 8 row reads hit 8 distinct bank groups */
  constexpr int TILE = kKRows * LD;
  extern __shared__ float4 smem4[];
  uint16_t* smem = (uint16_t*)smem4;

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, mi = lane >> 3, mr = lane & 7;
  /* Longest causal rows first across all heads: the grid walks query tiles
   * from the last, every (batch, head) at each. */
  const int64_t BH = p.B * p.H, blk = blockIdx.x;
  const int64_t tile = p.q_tiles - 1 - blk / BH, bh = blk % BH;
  const int64_t h = bh % p.H, b = bh / p.H, kvh = h / (p.H / p.Hkv);
  const int64_t q0 = tile * kQRows, wq0 = q0 + warp * 16;
  const uint16_t* q = (const uint16_t*)at(arena, p.qoff) + b * p.q_sb + h * p.q_sh;
  const uint16_t* k = (const uint16_t*)at(arena, p.koff) + b * p.k_sb + kvh * p.k_sh;
  const uint16_t* v = (const uint16_t*)at(arena, p.voff) + b * p.v_sb + kvh * p.v_sh;
  const char* mask = at(arena, p.moff);

  int64_t k_begin, k_end, w_begin, w_end;
  attn_key_range(p, q0, kQRows, &k_begin, &k_end);
  attn_key_range(p, wq0, 16, &w_begin, &w_end);
  const bool warp_live = wq0 < p.Sq;
  const int64_t k_first = (k_begin / kKRows) * kKRows;
  const int n_tiles = k_end > k_first ? (int)((k_end - k_first + kKRows - 1) / kKRows) : 0;

  load_tile<kQRows, D, LD>(smem + 2 * TILE, q, p.q_ss, q0, p.Sq);
  if (n_tiles > 0) {
    load_tile<kKRows, D, LD>(smem, k, p.k_ss, k_first, p.Sk);
    load_tile<kKRows, D, LD>(smem + TILE, v, p.v_ss, k_first, p.Sk);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  uint32_t qf[D / 16][4];
#pragma unroll
  for (int ks = 0; ks < D / 16; ks++)
    ldmatrix_x4(qf[ks], smem + 2 * TILE + (warp * 16 + (mi & 1) * 8 + mr) * LD + ks * 16 + (mi >> 1) * 8);
  __syncthreads(); /* stage 1 is free for tile 1 */

  WarpAcc<D> acc;
  acc.m[0] = acc.m[1] = -INFINITY;
  acc.l[0] = acc.l[1] = 0.0f;
#pragma unroll
  for (int n = 0; n < D / 8; n++) acc.o[n][0] = acc.o[n][1] = acc.o[n][2] = acc.o[n][3] = 0.0f;

  for (int j = 0; j < n_tiles; j++) {
    const int64_t k0 = k_first + (int64_t)j * kKRows;
    uint16_t* cur = smem + (j & 1) * 2 * TILE;
    if (j + 1 < n_tiles) { /* prefetch tile j+1 into the other stage */
      uint16_t* nxt = smem + ((j + 1) & 1) * 2 * TILE;
      load_tile<kKRows, D, LD>(nxt, k, p.k_ss, k0 + kKRows, p.Sk);
      load_tile<kKRows, D, LD>(nxt + TILE, v, p.v_ss, k0 + kKRows, p.Sk);
    }
    cp_async_commit();
    if (warp_live && k0 < w_end && k0 + kKRows > w_begin)
      warp_tile<D, LD, BF>(acc, qf, cur, cur + TILE, p, mask, b, h, wq0, k0);
    cp_async_wait_all(); /* tile j+1 landed (own copies) ... */
    __syncthreads();     /* ... everyone's, and nobody reads stage j&1 any more */
  }
  if (warp_live) store_rows<D, BF>(acc, arena, p, b, h, wq0);
}

} // namespace

/* d64: at most 128 registers so 2 blocks (16 warps) fit an SM (a little spill,
 * still faster than one spill-free block: 0.135 against 0.190 ms on the H100,
 * and than 32-key sub-tiles: 0.146 ms); d128 keeps 1. */
#define FLASH_MMA(name, d, bf, min_blocks)                                                        \
  extern "C" __global__ void __launch_bounds__(kThreads, min_blocks) name(char* a, rlxk_attn p, \
                                                                          rlxk_state* s) {     \
    flash_mma<d, bf>(a, p);                                                                       \
  }
FLASH_MMA(rlx_attn_mma_bf16_d64, 64, true, 2)
FLASH_MMA(rlx_attn_mma_bf16_d128, 128, true, 1)
FLASH_MMA(rlx_attn_mma_f16_d64, 64, false, 2)
FLASH_MMA(rlx_attn_mma_f16_d128, 128, false, 1)
