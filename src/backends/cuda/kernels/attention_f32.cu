/* Exact f32 flash-attention forward (SIMT FMA, no TF32) for contiguous-row
 * f32 Q, K, V with D == Dv in {64, 128}: rows 16-byte aligned, so K/V tiles
 * arrive by cp.async while the previous phase computes.
 *
 * 256 threads as 16 x 16; thread (ty, tx) owns query rows ty + 16*i
 * (i < RT), keys tx + 16*c of each 64-key tile (c < 4) and output columns
 * jj*64 + tx*4 .. +3 (RT = 8: 128-row blocks).
 * A row's scores live in the 16 lanes of a half-warp, so row max / sum are
 * 4 shuffles. Q, K, V and P tiles are row-major in
 * shared memory; every inner step reads 16-byte vectors (K rows at a
 * stride of 4 banks mod 32, so the 8 lanes of a phase never collide) and
 * does 8-16 FMAs per vector read. Per tile: V(j) loads during Q·K^T(j),
 * K(j+1) during P·V(j). Masks as attention.cu; fully masked key tiles are
 * never visited, and each warp skips tiles none of its rows see. */
#include "attention_common.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kKeys = 64;       /* key rows per tile */
constexpr int kPStride = 80;    /* P row stride: rows ty and ty+1 land 16 banks apart */

RLXK_DEV uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

RLXK_DEV void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
RLXK_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
RLXK_DEV void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* Rows [r0, r0 + NR) x D floats into a tile of row stride D + 4; rows past
 * `rows` read as zero. */
template <int NR, int D>
RLXK_DEV void load_rows(float* dst, const float* src, int64_t rstride, int64_t r0, int64_t rows) {
  constexpr int chunks = D / 4;
#pragma unroll
  for (int idx = threadIdx.x; idx < NR * chunks; idx += kThreads) {
    int r = idx / chunks, c = idx % chunks;
    bool valid = r0 + r < rows;
    cp_async16(dst + r * (D + 4) + c * 4, src + (valid ? (r0 + r) * rstride : 0) + c * 4, valid);
  }
}

template <int D, int RT>
__device__ void flash_f32(char* arena, const rlxk_attn& p) {
  constexpr int BQ = 16 * RT, NJ = D / 64, LDQ = D + 4;
  extern __shared__ float4 smem4[];
  float* Qs = (float*)smem4;       /* [BQ][LDQ] */
  float* Ks = Qs + BQ * LDQ;       /* [64][LDQ] */
  float* Vs = Ks + kKeys * LDQ;    /* [64][LDQ] */
  float* Ps = Vs + kKeys * LDQ;    /* [BQ][kPStride] */

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16, warp = threadIdx.x / 32;
  /* Longest causal rows first, across all heads. */
  const int64_t BH = p.B * p.H, blk = blockIdx.x;
  const int64_t tile = p.q_tiles - 1 - blk / BH, bh = blk % BH;
  const int64_t h = bh % p.H, b = bh / p.H, kvh = h / (p.H / p.Hkv);
  const int64_t q0 = tile * BQ;
  const float* q = (const float*)at(arena, p.qoff) + b * p.q_sb + h * p.q_sh;
  const float* k = (const float*)at(arena, p.koff) + b * p.k_sb + kvh * p.k_sh;
  const float* v = (const float*)at(arena, p.voff) + b * p.v_sb + kvh * p.v_sh;
  const char* mask = at(arena, p.moff);

  int64_t k_begin, k_end;
  attn_key_range(p, q0, BQ, &k_begin, &k_end);
  const int64_t k_first = (k_begin / kKeys) * kKeys;
  /* This warp's rows: ty in {2w, 2w+1}, i.e. rows 2w + 16i + {0,1}. Their
   * visible keys bound the tiles it must compute (causal / sliding). */
  int64_t w_begin = 0, w_end = p.Sk;
  if (p.mask == RLX_MASK_CAUSAL || p.mask == RLX_MASK_SLIDING) {
    int64_t lo = q0 + 2 * warp, hi = q0 + 2 * warp + 16 * (RT - 1) + 1, unused;
    attn_key_range(p, lo, 1, &w_begin, &unused);
    attn_key_range(p, hi, 1, &unused, &w_end);
  }

  load_rows<BQ, D>(Qs, q, p.q_ss, q0, p.Sq);
  if (k_first < k_end) load_rows<kKeys, D>(Ks, k, p.k_ss, k_first, p.Sk);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  float m[RT], l[RT], acc[RT][NJ][4];
#pragma unroll
  for (int i = 0; i < RT; i++) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int jj = 0; jj < NJ; jj++) acc[i][jj][0] = acc[i][jj][1] = acc[i][jj][2] = acc[i][jj][3] = 0.0f;
  }

  for (int64_t k0 = k_first; k0 < k_end; k0 += kKeys) {
    load_rows<kKeys, D>(Vs, v, p.v_ss, k0, p.Sk);
    cp_async_commit();
    const bool live = k0 < w_end && k0 + kKeys > w_begin;
    float s[RT][4];
    if (live) {
#pragma unroll
      for (int i = 0; i < RT; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll 1
      for (int d = 0; d < D; d += 4) {
        float4 kv[4];
#pragma unroll
        for (int c = 0; c < 4; c++) kv[c] = *(const float4*)&Ks[(tx + 16 * c) * LDQ + d];
#pragma unroll
        for (int i = 0; i < RT; i++) {
          float4 qv = *(const float4*)&Qs[(ty + 16 * i) * LDQ + d];
#pragma unroll
          for (int c = 0; c < 4; c++) {
            s[i][c] = fmaf(qv.x, kv[c].x, s[i][c]);
            s[i][c] = fmaf(qv.y, kv[c].y, s[i][c]);
            s[i][c] = fmaf(qv.z, kv[c].z, s[i][c]);
            s[i][c] = fmaf(qv.w, kv[c].w, s[i][c]);
          }
        }
      }
      /* Online softmax, row by row; per-element masking only where needed. */
      const bool open = attn_tile_open(p, q0, BQ, k0, kKeys) && p.softcap == 0.0f;
#pragma unroll
      for (int i = 0; i < RT; i++) {
        const int64_t qi = q0 + ty + 16 * i;
        float tmax = -INFINITY;
#pragma unroll
        for (int c = 0; c < 4; c++) {
          s[i][c] = open ? s[i][c] * p.scale : masked_score(p, mask, s[i][c], b, h, qi, k0 + tx + 16 * c);
          tmax = fmaxf(tmax, s[i][c]);
        }
#pragma unroll
        for (int o = 1; o < 16; o <<= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o));
        const float m_new = fmaxf(m[i], tmax);
        float alpha = 1.0f, rs = 0.0f;
        if (m_new == -INFINITY) {
#pragma unroll
          for (int c = 0; c < 4; c++) s[i][c] = 0.0f;
        } else {
          alpha = expf(m[i] - m_new); /* 0 when the old max was -inf */
#pragma unroll
          for (int c = 0; c < 4; c++) {
            s[i][c] = expf(s[i][c] - m_new);
            rs += s[i][c];
          }
          m[i] = m_new;
        }
        l[i] = l[i] * alpha + rs;
#pragma unroll
        for (int jj = 0; jj < NJ; jj++)
#pragma unroll
          for (int e = 0; e < 4; e++) acc[i][jj][e] *= alpha;
#pragma unroll
        for (int c = 0; c < 4; c++) Ps[(ty + 16 * i) * kPStride + tx + 16 * c] = s[i][c];
      }
    }
    cp_async_wait_all(); /* V(k0) landed */
    __syncthreads();     /* P and V visible; nobody reads K any more */
    if (k0 + kKeys < k_end) load_rows<kKeys, D>(Ks, k, p.k_ss, k0 + kKeys, p.Sk);
    cp_async_commit();
    if (live) {
#pragma unroll 1
      for (int c = 0; c < kKeys; c += 4) {
        float4 vv[4][NJ];
#pragma unroll
        for (int e = 0; e < 4; e++)
#pragma unroll
          for (int jj = 0; jj < NJ; jj++) vv[e][jj] = *(const float4*)&Vs[(c + e) * LDQ + jj * 64 + tx * 4];
#pragma unroll
        for (int i = 0; i < RT; i++) {
          float4 pv = *(const float4*)&Ps[(ty + 16 * i) * kPStride + c];
          float pe[4] = {pv.x, pv.y, pv.z, pv.w};
#pragma unroll
          for (int e = 0; e < 4; e++)
#pragma unroll
            for (int jj = 0; jj < NJ; jj++) {
              acc[i][jj][0] = fmaf(pe[e], vv[e][jj].x, acc[i][jj][0]);
              acc[i][jj][1] = fmaf(pe[e], vv[e][jj].y, acc[i][jj][1]);
              acc[i][jj][2] = fmaf(pe[e], vv[e][jj].z, acc[i][jj][2]);
              acc[i][jj][3] = fmaf(pe[e], vv[e][jj].w, acc[i][jj][3]);
            }
        }
      }
    }
    cp_async_wait_all(); /* K(k0 + 64) landed */
    __syncthreads();     /* K visible; nobody reads P / V any more */
  }

  char* o = atw(arena, p.ooff);
#pragma unroll
  for (int i = 0; i < RT; i++) {
    float tot = l[i];
#pragma unroll
    for (int off = 1; off < 16; off <<= 1) tot += __shfl_xor_sync(0xffffffffu, tot, off);
    const int64_t qi = q0 + ty + 16 * i;
    if (qi >= p.Sq) continue;
    const float inv = tot > 0.0f ? 1.0f / tot : 0.0f;
    const int64_t ob = b * p.o_sb + qi * p.o_ss + h * p.o_sh;
#pragma unroll
    for (int jj = 0; jj < NJ; jj++) {
      const int64_t col = jj * 64 + tx * 4;
      float4 r = make_float4(acc[i][jj][0] * inv, acc[i][jj][1] * inv, acc[i][jj][2] * inv, acc[i][jj][3] * inv);
      float* dst = (float*)o + ob + col;
      if (p.odt == RLX_F32 && ((uintptr_t)dst & 15u) == 0) {
        *(float4*)dst = r;
      } else {
        st_f32(o, p.odt, ob + col, r.x);
        st_f32(o, p.odt, ob + col + 1, r.y);
        st_f32(o, p.odt, ob + col + 2, r.z);
        st_f32(o, p.odt, ob + col + 3, r.w);
      }
    }
  }
}

} // namespace

#define FLASH_F32(name, d, rt, min_blocks)                                                       \
  extern "C" __global__ void __launch_bounds__(kThreads, min_blocks) name(char* a, rlxk_attn p, \
                                                                          rlxk_state* s) {     \
    flash_f32<d, rt>(a, p);                                                                      \
  }
FLASH_F32(rlx_attn_f32_d64, 64, 8, 2)
FLASH_F32(rlx_attn_f32_d128r8, 128, 8, 1)

/* The same f32 attention forward on tensor cores, split-precision TF32
 * ("3xTF32"): every f32 operand x is split as x = hi + lo with hi =
 * tf32(x) and lo = tf32(x - hi), and each product is summed as
 * lo*hi' + hi*lo' + hi*hi' by mma.sync m16n8k8 .tf32 with f32 accumulation.
 * hi + lo carries ~22 of f32's 24 significand bits and only lo*lo' (~2^-22
 * relative) is dropped, so the result's error against a double reference
 * is of the order of the SIMT kernel's: lab_attention_f32 (bench/kernels/
 * attention_f32.cu) on the H200, causal, relative L2 error SIMT / 3xTF32:
 * B8 H16 S1024 D64 2.2e-7 / 3.7e-7, B4 H32 S4096 D128 4.1e-7 / 4.8e-7
 * (max_rel_err 1.3e-7 / 1.8e-7, 1.5e-7 / 3.5e-7); plain one-pass TF32
 * (~1e-3) would not be f32. Time there: 0.78 -> 0.68 ms, 19.4 -> 16.8 ms.
 *
 * 8 warps, 128 query rows per block (16 per warp); K / V tiles of 64 keys
 * in two cp.async stages. S = Q K^T per warp is 16 x 64 (8 n-tiles of 8
 * keys) over D/8 k-steps; softmax on the accumulator fragments (a row's 64
 * scores live in its lane quad: max / sum are 2 shuffles); O += P V uses
 * the S accumulators as the A operand with the keys of each 8-key chunk
 * permuted (A column t <-> key 2t, column t + 4 <-> key 2t + 1; V's rows
 * are read in the same order), so P never goes through shared memory.
 * Tiles are row-major with row stride D + 4: every fragment read of 32
 * lanes hits 32 distinct banks. Masks as the SIMT kernel. */
namespace {

constexpr int kTcWarps = 8;
constexpr int kTcRows = 16 * kTcWarps;

RLXK_DEV uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

/* x = hi + lo, both tf32. */
RLXK_DEV void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = to_tf32(x);
  lo = to_tf32(x - __uint_as_float(hi));
}

RLXK_DEV void mma_tf32(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* c += a * b in 3xTF32: the small cross terms first. */
RLXK_DEV void mma_3xtf32(float c[4], const uint32_t ah[4], const uint32_t al[4], const uint32_t bh[2],
                         const uint32_t bl[2]) {
  mma_tf32(c, al, bh);
  mma_tf32(c, ah, bl);
  mma_tf32(c, ah, bh);
}

template <int NR, int D, int NT>
RLXK_DEV void load_rows_n(float* dst, const float* src, int64_t rstride, int64_t r0, int64_t rows) {
  constexpr int chunks = D / 4;
#pragma unroll
  for (int idx = threadIdx.x; idx < NR * chunks; idx += NT) {
    int r = idx / chunks, c = idx % chunks;
    bool valid = r0 + r < rows;
    cp_async16(dst + r * (D + 4) + c * 4, src + (valid ? (r0 + r) * rstride : 0) + c * 4, valid);
  }
}

/* s[n][e] = Q(rows w0 + g (+8)) . K(keys 8n + 2t (+1)): the warp's 16 x 64
 * score tile. */
template <int D>
RLXK_DEV void tc_scores(const float* Qw, const float* Ks, float s[8][4]) {
  constexpr int LD = D + 4;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll 2
  for (int k0 = 0; k0 < D; k0 += 8) {
    uint32_t ah[4], al[4];
    split_tf32(Qw[g * LD + k0 + t], ah[0], al[0]);
    split_tf32(Qw[(g + 8) * LD + k0 + t], ah[1], al[1]);
    split_tf32(Qw[g * LD + k0 + t + 4], ah[2], al[2]);
    split_tf32(Qw[(g + 8) * LD + k0 + t + 4], ah[3], al[3]);
#pragma unroll
    for (int n = 0; n < 8; n++) {
      uint32_t bh[2], bl[2];
      split_tf32(Ks[(8 * n + g) * LD + k0 + t], bh[0], bl[0]);
      split_tf32(Ks[(8 * n + g) * LD + k0 + t + 4], bh[1], bl[1]);
      mma_3xtf32(s[n], ah, al, bh, bl);
    }
  }
}

/* acc += P V for the warp's 16 rows: P from the score fragments (keys
 * permuted within each 8-key chunk, see above). Each output n-tile sums
 * the tile's 64 keys in a fresh accumulator and adds that to acc in plain
 * f32: the tensor core's accumulation is not round-to-nearest, and letting
 * it carry the whole key loop made the error grow with Sk (measured: rel
 * L2 7e-6 at Sk 4096). */
template <int D>
RLXK_DEV void tc_pv(const float s[8][4], const float* Vs, float acc[D / 8][4]) {
  constexpr int LD = D + 4;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint32_t ph[8][4], pl[8][4];
#pragma unroll
  for (int j = 0; j < 8; j++) {
    split_tf32(s[j][0], ph[j][0], pl[j][0]);
    split_tf32(s[j][2], ph[j][1], pl[j][1]);
    split_tf32(s[j][1], ph[j][2], pl[j][2]);
    split_tf32(s[j][3], ph[j][3], pl[j][3]);
  }
  const float* v0 = Vs + 2 * t * LD + g;
#pragma unroll
  for (int n = 0; n < D / 8; n++) {
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 8; j++) {
      uint32_t bh[2], bl[2];
      split_tf32(v0[8 * j * LD + 8 * n], bh[0], bl[0]);
      split_tf32(v0[(8 * j + 1) * LD + 8 * n], bh[1], bl[1]);
      mma_3xtf32(part, ph[j], pl[j], bh, bl);
    }
#pragma unroll
    for (int e = 0; e < 4; e++) acc[n][e] += part[e];
  }
}

template <int D>
__device__ void flash_f32_tc(char* arena, const rlxk_attn& p) {
  constexpr int LD = D + 4, NT = 32 * kTcWarps;
  extern __shared__ float4 smem4[];
  float* Qs = (float*)smem4;           /* [128][LD] */
  float* Ks = Qs + kTcRows * LD;       /* [2][64][LD] */
  float* Vs = Ks + 2 * kKeys * LD;     /* [2][64][LD] */

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  /* Longest causal rows first, across all heads. */
  const int64_t BH = p.B * p.H, blk = blockIdx.x;
  const int64_t tile = p.q_tiles - 1 - blk / BH, bh = blk % BH;
  const int64_t h = bh % p.H, b = bh / p.H, kvh = h / (p.H / p.Hkv);
  const int64_t q0 = tile * kTcRows, w0 = q0 + 16 * warp;
  const float* q = (const float*)at(arena, p.qoff) + b * p.q_sb + h * p.q_sh;
  const float* k = (const float*)at(arena, p.koff) + b * p.k_sb + kvh * p.k_sh;
  const float* v = (const float*)at(arena, p.voff) + b * p.v_sb + kvh * p.v_sh;
  const char* mask = at(arena, p.moff);

  int64_t k_begin, k_end, w_begin, w_end;
  attn_key_range(p, q0, kTcRows, &k_begin, &k_end);
  attn_key_range(p, w0, 16, &w_begin, &w_end); /* the keys this warp's rows see */
  const int64_t k_first = (k_begin / kKeys) * kKeys;
  const int n_tiles = k_end > k_first ? (int)((k_end - k_first + kKeys - 1) / kKeys) : 0;

  load_rows_n<kTcRows, D, NT>(Qs, q, p.q_ss, q0, p.Sq);
  if (n_tiles > 0) {
    load_rows_n<kKeys, D, NT>(Ks, k, p.k_ss, k_first, p.Sk);
    load_rows_n<kKeys, D, NT>(Vs, v, p.v_ss, k_first, p.Sk);
  }
  cp_async_commit();

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, acc[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const float* Qw = Qs + 16 * warp * LD;

  for (int it = 0; it < n_tiles; it++) {
    const int64_t k0 = k_first + (int64_t)it * kKeys;
    if (it + 1 < n_tiles) { /* the next stage loads while this one computes */
      const int st = (it + 1) & 1;
      load_rows_n<kKeys, D, NT>(Ks + st * kKeys * LD, k, p.k_ss, k0 + kKeys, p.Sk);
      load_rows_n<kKeys, D, NT>(Vs + st * kKeys * LD, v, p.v_ss, k0 + kKeys, p.Sk);
      cp_async_commit();
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    } else {
      cp_async_wait_all();
    }
    __syncthreads();
    const float* Kt = Ks + (it & 1) * kKeys * LD;
    const float* Vt = Vs + (it & 1) * kKeys * LD;
    if (k0 < w_end && k0 + kKeys > w_begin && w0 < p.Sq) {
      float s[8][4];
      tc_scores<D>(Qw, Kt, s);
      const bool open = attn_tile_open(p, w0, 16, k0, kKeys) && p.softcap == 0.0f;
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const int64_t qi = w0 + g + 8 * r;
        float tmax = -INFINITY;
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
          for (int e = 0; e < 2; e++) {
            float& x = s[n][2 * r + e];
            x = open ? x * p.scale : masked_score(p, mask, x, b, h, qi, k0 + 8 * n + 2 * t + e);
            tmax = fmaxf(tmax, x);
          }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
        const float m_new = fmaxf(m[r], tmax);
        float alpha = 1.0f, rs = 0.0f;
        if (m_new == -INFINITY) {
#pragma unroll
          for (int n = 0; n < 8; n++) s[n][2 * r] = s[n][2 * r + 1] = 0.0f;
        } else {
          alpha = expf(m[r] - m_new); /* 0 when the old max was -inf */
#pragma unroll
          for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
              float& x = s[n][2 * r + e];
              x = expf(x - m_new);
              rs += x;
            }
          m[r] = m_new;
        }
        l[r] = l[r] * alpha + rs;
#pragma unroll
        for (int n = 0; n < D / 8; n++) acc[n][2 * r] *= alpha, acc[n][2 * r + 1] *= alpha;
      }
      tc_pv<D>(s, Vt, acc);
    }
    __syncthreads(); /* this stage is free for the tile after next */
  }

  char* o = atw(arena, p.ooff);
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float tot = l[r];
    tot += __shfl_xor_sync(0xffffffffu, tot, 1);
    tot += __shfl_xor_sync(0xffffffffu, tot, 2);
    const int64_t qi = w0 + g + 8 * r;
    if (qi >= p.Sq) continue;
    const float inv = tot > 0.0f ? 1.0f / tot : 0.0f;
    const int64_t ob = b * p.o_sb + qi * p.o_ss + h * p.o_sh;
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
      const int64_t col = 8 * n + 2 * t;
      float x = acc[n][2 * r] * inv, y = acc[n][2 * r + 1] * inv;
      float* dst = (float*)o + ob + col;
      if (p.odt == RLX_F32 && ((uintptr_t)dst & 7u) == 0) {
        *(float2*)dst = make_float2(x, y);
      } else {
        st_f32(o, p.odt, ob + col, x);
        st_f32(o, p.odt, ob + col + 1, y);
      }
    }
  }
}

} // namespace

#define FLASH_F32_TC(name, d, mb)                                                                      \
  extern "C" __global__ void __launch_bounds__(32 * kTcWarps, mb) name(char* a, rlxk_attn p, rlxk_state* s) { \
    flash_f32_tc<d>(a, p);                                                                           \
  }
FLASH_F32_TC(rlx_attn_f32tc_d64, 64, 2)
FLASH_F32_TC(rlx_attn_f32tc_d128, 128, 1)
