/* Flash-attention forward: one block per (batch, head, 64-query tile); key
 * tiles of 64 stream through shared memory with an online softmax, so the
 * Sq x Sk score matrix never exists in memory. Any strides (BSHD, BHSD,
 * packed QKV), GQA/MQA, every mask kind, score scale and logit softcap. Math
 * in f32 whatever the storage dtype.
 *
 * 256 threads as a 16 x 16 grid; thread (ty, tx) owns query rows ty*4..+3
 * and, per tile, keys tx*4..+3 of the scores and output columns
 * jj*64 + tx*4..+3 (jj < DT/64). A row's 64 scores live in the 16 lanes of
 * one half-warp, so row max/sum are 4 shuffles. */
#include "attention_common.cuh"

#define BQ 64
#define BK 64
#define LDT (BQ + 4) /* row length of the transposed tiles (16-byte aligned) */

/* f32 rows of exactly DT floats at 16-byte aligned addresses: each thread
 * issues four independent 16-byte loads before storing any (the generic
 * loop's one-float loads leave the load latency exposed on every tile).
 * TRANS: dst[d * LDT + r] (threads walk rows, so the transposed stores are
 * conflict-free); else dst[r * (DT + 4) + d]. Returns false when the
 * operand does not qualify. */
template <int DT, bool TRANS>
RLXK_DEV bool load_tile_f32x4(float* dst, const char* src, int dt, int64_t base, int64_t rstride,
                              int64_t r0, int64_t rows, int64_t dims) {
  const float* f = (const float*)src + base;
  /* d128 sits at the 128-register line that keeps 2 blocks per SM: the
   * extra live registers here made it spill, so it keeps the generic loop. */
  if (DT == 128 || dt != RLX_F32 || dims != DT || rstride % 4 != 0 || ((uintptr_t)f & 15u) != 0) return false;
  constexpr int per = 64 * DT / 4 / 256; /* float4s per thread (256 threads) */
  constexpr int chunk = 4;
  for (int i0 = 0; i0 < per; i0 += chunk) {
    float4 v[chunk];
    int rr[chunk], cc[chunk];
#pragma unroll
    for (int i = 0; i < chunk; i++) {
      int idx = threadIdx.x + (i0 + i) * 256;
      rr[i] = TRANS ? idx % 64 : idx / (DT / 4);
      cc[i] = TRANS ? idx / 64 : idx % (DT / 4);
      v[i] = r0 + rr[i] < rows ? *(const float4*)(f + (r0 + rr[i]) * rstride + cc[i] * 4)
                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int i = 0; i < chunk; i++) {
      if (TRANS) {
        float* d = dst + cc[i] * 4 * LDT + rr[i];
        d[0] = v[i].x;
        d[LDT] = v[i].y;
        d[2 * LDT] = v[i].z;
        d[3 * LDT] = v[i].w;
      } else {
        *(float4*)&dst[rr[i] * (DT + 4) + cc[i] * 4] = v[i];
      }
    }
  }
  return true;
}

/* Loads rows [r0, r0 + 64) x dims [0, DT) of a strided operand, transposed
 * (dst[d * LDT + r]); zero outside [0, rows) x [0, dims). */
template <int DT>
RLXK_DEV void load_transposed(float* dst, const char* src, int dt, int64_t base, int64_t rstride,
                              int64_t r0, int64_t rows, int64_t dims) {
  if (load_tile_f32x4<DT, true>(dst, src, dt, base, rstride, r0, rows, dims)) return;
  for (int idx = threadIdx.x; idx < 64 * DT; idx += blockDim.x) {
    int r = idx / DT, d = idx % DT;
    float v = 0.0f;
    if (r0 + r < rows && d < dims) v = ld_f32(src, dt, base + (r0 + r) * rstride + d);
    dst[d * LDT + r] = v;
  }
}

/* Row-major tile: dst[r * (DT + 4) + d]. */
template <int DT>
RLXK_DEV void load_rows(float* dst, const char* src, int dt, int64_t base, int64_t rstride,
                        int64_t r0, int64_t rows, int64_t dims) {
  if (load_tile_f32x4<DT, false>(dst, src, dt, base, rstride, r0, rows, dims)) return;
  for (int idx = threadIdx.x; idx < 64 * DT; idx += blockDim.x) {
    int r = idx / DT, d = idx % DT;
    float v = 0.0f;
    if (r0 + r < rows && d < dims) v = ld_f32(src, dt, base + (r0 + r) * rstride + d);
    dst[r * (DT + 4) + d] = v;
  }
}

/* SPLIT: the block handles one of k_split slices of the key tiles and writes
 * its unnormalised partial (row max, row sum, accumulator) for
 * rlx_attn_combine; few query tiles (decode) then still fill the GPU. */
template <int DT, bool SPLIT>
__device__ void flash_fwd(char* arena, const rlxk_attn& p) {
  constexpr int NJ = DT / 64;
  extern __shared__ float4 smem4[];
  float* smem = (float*)smem4;
  float* Qs = smem;                                     /* [DT][LDT] */
  float* KV = Qs + DT * LDT;                            /* K: [DT][LDT]; V: [BK][DT+4] */
  float* Ps = KV + (DT * LDT > BK * (DT + 4) ? DT * LDT : BK * (DT + 4)); /* [BK][LDT] */

  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int64_t blk = blockIdx.x, split = 0;
  if (SPLIT) {
    split = blk % p.k_split;
    blk /= p.k_split;
  }
  /* Heaviest causal tiles (the last query rows) are launched first. */
  int64_t tile = p.q_tiles - 1 - blk % p.q_tiles, bh = blk / p.q_tiles;
  int64_t h = bh % p.H, b = bh / p.H, kvh = h / (p.H / p.Hkv);
  int64_t q0 = tile * BQ;
  const char* q = at(arena, p.qoff);
  const char* k = at(arena, p.koff);
  const char* v = at(arena, p.voff);
  const char* mask = at(arena, p.moff);

  load_transposed<DT>(Qs, q, p.qdt, b * p.q_sb + h * p.q_sh, p.q_ss, q0, p.Sq, p.D);

  /* Keys any row of this tile can see. */
  int64_t k_begin = 0, k_end = p.Sk;
  if (p.mask == RLX_MASK_CAUSAL || p.mask == RLX_MASK_SLIDING) {
    int64_t q_last = (q0 + BQ - 1 < p.Sq ? q0 + BQ - 1 : p.Sq - 1);
    int64_t last_key = q_last + p.Sk - p.Sq;
    k_end = last_key + 1 < p.Sk ? last_key + 1 : p.Sk;
    if (p.mask == RLX_MASK_SLIDING) {
      int64_t first = q0 + p.Sk - p.Sq - p.window + 1;
      k_begin = first > 0 ? first : 0;
    }
  }
  int64_t k_first = (k_begin / BK) * BK;
  if (SPLIT) { /* this block's slice of the key tiles */
    int64_t tiles = k_end > k_first ? (k_end - k_first + BK - 1) / BK : 0;
    int64_t per = (tiles + p.k_split - 1) / p.k_split;
    int64_t lo = k_first + split * per * BK, hi = lo + per * BK;
    k_first = lo;
    if (hi < k_end) k_end = hi;
  }

  float m[4], l[4], acc[4][NJ][4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int jj = 0; jj < NJ; jj++)
#pragma unroll
      for (int j = 0; j < 4; j++) acc[i][jj][j] = 0.0f;
  }

  for (int64_t k0 = k_first; k0 < k_end; k0 += BK) {
    __syncthreads();
    load_transposed<DT>(KV, k, p.kdt, b * p.k_sb + kvh * p.k_sh, p.k_ss, k0, p.Sk, p.D);
    __syncthreads();

    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
      for (int j = 0; j < 4; j++) s[i][j] = 0.0f;
#pragma unroll 8
    for (int d = 0; d < DT; d++) {
      float4 qa = *(const float4*)&Qs[d * LDT + ty * 4];
      float4 ka = *(const float4*)&KV[d * LDT + tx * 4];
      float qv[4] = {qa.x, qa.y, qa.z, qa.w}, kv[4] = {ka.x, ka.y, ka.z, ka.w};
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) s[i][j] = fmaf(qv[i], kv[j], s[i][j]);
    }

    /* Online softmax over this tile, row by row; per-element masking only
     * where the tile needs it. */
    const bool open = attn_tile_open(p, q0, BQ, k0, BK) && p.softcap == 0.0f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      int64_t qi = q0 + ty * 4 + i;
      float tmax = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; j++) {
        s[i][j] = open ? s[i][j] * p.scale : masked_score(p, mask, s[i][j], b, h, qi, k0 + tx * 4 + j);
        tmax = fmaxf(tmax, s[i][j]);
      }
#pragma unroll
      for (int o = 1; o < 16; o <<= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o));
      float m_new = fmaxf(m[i], tmax);
      float alpha = 1.0f, rs = 0.0f;
      if (m_new == -INFINITY) {
#pragma unroll
        for (int j = 0; j < 4; j++) s[i][j] = 0.0f;
      } else {
        alpha = m[i] == -INFINITY ? 0.0f : expf(m[i] - m_new);
#pragma unroll
        for (int j = 0; j < 4; j++) {
          s[i][j] = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - m_new);
          rs += s[i][j];
        }
        m[i] = m_new;
      }
      l[i] = l[i] * alpha + rs;
#pragma unroll
      for (int jj = 0; jj < NJ; jj++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][jj][j] *= alpha;
    }
#pragma unroll
    for (int j = 0; j < 4; j++)
      *(float4*)&Ps[(tx * 4 + j) * LDT + ty * 4] = make_float4(s[0][j], s[1][j], s[2][j], s[3][j]);
    __syncthreads();
    load_rows<DT>(KV, v, p.vdt, b * p.v_sb + kvh * p.v_sh, p.v_ss, k0, p.Sk, p.Dv);
    __syncthreads();

#pragma unroll 4
    for (int c = 0; c < BK; c++) {
      float4 pa = *(const float4*)&Ps[c * LDT + ty * 4];
      float pv[4] = {pa.x, pa.y, pa.z, pa.w};
#pragma unroll
      for (int jj = 0; jj < NJ; jj++) {
        float4 va = *(const float4*)&KV[c * (DT + 4) + jj * 64 + tx * 4];
        float vv[4] = {va.x, va.y, va.z, va.w};
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
          for (int j = 0; j < 4; j++) acc[i][jj][j] = fmaf(pv[i], vv[j], acc[i][jj][j]);
      }
    }
  }

  char* o = atw(arena, p.ooff);
  float* part = (float*)(uintptr_t)p.partial;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    float tot = l[i];
#pragma unroll
    for (int off = 1; off < 16; off <<= 1) tot += __shfl_xor_sync(0xffffffffu, tot, off);
    int64_t qi = q0 + ty * 4 + i;
    if (qi >= p.Sq) continue;
    if (SPLIT) { /* partial row: [m, l, acc[0..Dv)] */
      float* row = part + (((b * p.H + h) * p.Sq + qi) * p.k_split + split) * (p.Dv + 2);
      if (tx == 0) {
        row[0] = m[i];
        row[1] = tot;
      }
#pragma unroll
      for (int jj = 0; jj < NJ; jj++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          int64_t col = jj * 64 + tx * 4 + j;
          if (col < p.Dv) row[2 + col] = acc[i][jj][j];
        }
      continue;
    }
    float inv = tot > 0.0f ? 1.0f / tot : 0.0f;
    int64_t ob = b * p.o_sb + qi * p.o_ss + h * p.o_sh;
#pragma unroll
    for (int jj = 0; jj < NJ; jj++)
#pragma unroll
      for (int j = 0; j < 4; j++) {
        int64_t col = jj * 64 + tx * 4 + j;
        if (col < p.Dv) st_f32(o, p.odt, ob + col, acc[i][jj][j] * inv);
      }
  }
}

#define FLASH(name, dt, split) \
  extern "C" __global__ void __launch_bounds__(256) name(char* a, rlxk_attn p, rlxk_state* s) { flash_fwd<dt, split>(a, p); }
FLASH(rlx_attn_d64, 64, false)
FLASH(rlx_attn_d128, 128, false)
FLASH(rlx_attn_d256, 256, false)
FLASH(rlx_attn_d64_split, 64, true)
FLASH(rlx_attn_d128_split, 128, true)
FLASH(rlx_attn_d256_split, 256, true)

/* Merges the k_split partials of each query row: one block (128 threads)
 * per row. The slices' maxima and sums go through shared memory, then each
 * thread owns output columns and reads their k_split partials with
 * independent loads (the older one-thread-per-element form walked the
 * slices serially, latency bound at ~0.3 us a slice). */
extern "C" __global__ void __launch_bounds__(128) rlx_attn_combine(char* arena, rlxk_attn p, rlxk_state* st) {
  __shared__ float w[256], lsum[256];
  __shared__ float red[128];
  const float* part = (const float*)(uintptr_t)p.partial;
  char* o = atw(arena, p.ooff);
  const int64_t r = blockIdx.x; /* (b * H + h) * Sq + qi */
  const int64_t qi = r % p.Sq, h = (r / p.Sq) % p.H, b = r / (p.Sq * p.H);
  const int ns = p.k_split, stride = (int)(p.Dv + 2);
  const float* rows = part + r * (int64_t)ns * stride;
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < ns; s += blockDim.x) {
    w[s] = rows[(int64_t)s * stride];
    lsum[s] = rows[(int64_t)s * stride + 1];
    mx = fmaxf(mx, w[s]);
  }
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if ((int)threadIdx.x < k) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
    __syncthreads();
  }
  mx = red[0];
  __syncthreads();
  for (int s = threadIdx.x; s < ns; s += blockDim.x)
    w[s] = (mx == -INFINITY || w[s] == -INFINITY) ? 0.0f : expf(w[s] - mx);
  __syncthreads();
  float l = 0.0f;
  for (int s = 0; s < ns; s++) l = fmaf(w[s], lsum[s], l);
  float inv = l > 0.0f ? 1.0f / l : 0.0f;
  const int64_t ob = b * p.o_sb + qi * p.o_ss + h * p.o_sh;
  for (int64_t col = threadIdx.x; col < p.Dv; col += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 8
    for (int s = 0; s < ns; s++)
      if (w[s] != 0.0f) acc = fmaf(w[s], rows[(int64_t)s * stride + 2 + col], acc);
    st_f32(o, p.odt, ob + col, acc * inv);
  }
}
