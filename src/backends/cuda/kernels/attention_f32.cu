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

/* x = hi + lo without a conversion instruction: hi is x rounded to
 * tf32 (round to nearest, ties away: the carry of bit 12 into the kept
 * bits, as cvt.rna), lo = x - hi exactly in f32, and the tensor core reads
 * only lo's top 10 significand bits (the rest of an operand's low 13 bits
 * are ignored), so lo is truncated there: x - (hi + lo') < 2^-21 |x|.
 * Integer and FP32 ops only: cvt.rna runs at a quarter of their rate, and
 * the backward splits every streamed operand once per warp. */
RLXK_DEV void split_tf32_fast(float x, uint32_t& hi, uint32_t& lo) {
  hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
  lo = __float_as_uint(x - __uint_as_float(hi));
}

template <bool FAST>
RLXK_DEV void split_any(float x, uint32_t& hi, uint32_t& lo) {
  if (FAST)
    split_tf32_fast(x, hi, lo);
  else
    split_tf32(x, hi, lo);
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
template <int D, bool FAST = false>
RLXK_DEV void tc_scores(const float* Qw, const float* Ks, float s[8][4]) {
  constexpr int LD = D + 4;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll 2
  for (int k0 = 0; k0 < D; k0 += 8) {
    uint32_t ah[4], al[4];
    split_any<FAST>(Qw[g * LD + k0 + t], ah[0], al[0]);
    split_any<FAST>(Qw[(g + 8) * LD + k0 + t], ah[1], al[1]);
    split_any<FAST>(Qw[g * LD + k0 + t + 4], ah[2], al[2]);
    split_any<FAST>(Qw[(g + 8) * LD + k0 + t + 4], ah[3], al[3]);
#pragma unroll
    for (int n = 0; n < 8; n++) {
      uint32_t bh[2], bl[2];
      split_any<FAST>(Ks[(8 * n + g) * LD + k0 + t], bh[0], bl[0]);
      split_any<FAST>(Ks[(8 * n + g) * LD + k0 + t + 4], bh[1], bl[1]);
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
template <int D, bool FAST = false>
RLXK_DEV void tc_pv(const float s[8][4], const float* Vs, float acc[D / 8][4]) {
  constexpr int LD = D + 4;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  uint32_t ph[8][4], pl[8][4];
#pragma unroll
  for (int j = 0; j < 8; j++) {
    split_any<FAST>(s[j][0], ph[j][0], pl[j][0]);
    split_any<FAST>(s[j][2], ph[j][1], pl[j][1]);
    split_any<FAST>(s[j][1], ph[j][2], pl[j][2]);
    split_any<FAST>(s[j][3], ph[j][3], pl[j][3]);
  }
  const float* v0 = Vs + 2 * t * LD + g;
#pragma unroll
  for (int n = 0; n < D / 8; n++) {
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 8; j++) {
      uint32_t bh[2], bl[2];
      split_any<FAST>(v0[8 * j * LD + 8 * n], bh[0], bl[0]);
      split_any<FAST>(v0[(8 * j + 1) * LD + 8 * n], bh[1], bl[1]);
      mma_3xtf32(part, ph[j], pl[j], bh, bl);
    }
#pragma unroll
    for (int e = 0; e < 4; e++) acc[n][e] += part[e];
  }
}

template <int D, bool FAST = false>
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
      tc_scores<D, FAST>(Qw, Kt, s);
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
      tc_pv<D, FAST>(s, Vt, acc);
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

/* The f32 attention backward on tensor cores, split-precision TF32
 * (3xTF32, as the forward above): the phases of attention_bwd_tiled.cu
 * (op = RLX_ATTN_BWD_*, lower.h), the same stats layout and the structure
 * of the f16 / bf16 kernels (attention_bwd_mma.cu). Per (query i, key j):
 *
 *   S = Q K^T,  P = exp(score(S) - lse),  dP = dO V^T,
 *   dS = P (dP - D) dscore/ds,  dV = P^T dO,  dK = dS^T Q,  dQ = dS K.
 *
 * Blocks of 4 warps own 64-row tiles, a warp 16 rows, and stream the other
 * side's 64-row tiles through two cp.async stages in shared memory (row
 * stride D + 4: every fragment read of 32 lanes hits 32 banks). S and dP
 * are 16 x 64 score tiles over D (tc_scores' fragment layout); dV, dK and
 * dQ take the score tile itself as the A operand with the keys of each
 * 8-wide chunk permuted (tc_pv's layout). Operands split by
 * split_tf32_fast; each output tile's sum over one 64-row tile is formed
 * in fresh accumulators and added to the running total in plain f32, so
 * the tensor core's truncating accumulation never carries the whole loop.
 *
 * rlx_attn_bwd_f32tc_q*: a block per (b, h, 64-query tile), last first.
 *   STATS: lse (online max / sum over the visible key tiles) and D =
 *          d_out . out -> stats[2r], stats[2r + 1], and the float2 copy in
 *          scratch when stats_copy;
 *   DQ:    lse and D from that copy (else recomputed), then per key tile
 *          S, dP, dS and dq += dS K.
 * rlx_attn_bwd_f32tc_k*: a block per (b, kv head, 64-key tile), key tile 0
 *   first, over the query tiles of every query head of the GQA group that
 *   the mask lets see it: DV dv += P^T dO; DK dk += dS^T Q; fused (the DV
 *   launch, p.fused) both, dk to g2.
 *
 * Deterministic: one writer per output element (its warp), fixed order,
 * no atomics. Tiles whose every pair is visible take one FMA and exp2 per
 * element; the others score each element through masked_score (every
 * mask kind, softcap); causal / sliding tiles nobody sees are never loaded.
 *
 * Accuracy (lab_attention_f32_bwd, bench/kernels/attention_f32_bwd.cu,
 * H200, causal, same data): relative L2 error of dq / dk / dv against a
 * double reference, SIMT tiled kernels vs these:
 *   B8 H16 S1024 D64   3.8e-7 / 7.8e-7 / 7.7e-7  vs  8.2e-7 / 1.0e-6 / 6.5e-7
 *   B2 H16 S2048 D128  4.6e-7 / 1.1e-6 / 1.1e-6  vs  1.3e-6 / 1.6e-6 / 7.1e-7
 * (max_rel_err 1.5e-6 vs 1.8e-6, 2.2e-6 vs 2.7e-6); rounding lo with
 * cvt.rna too (lab variant 2) gives the same errors and is 16% slower.
 * Time there (STATS + DV/DK + DQ): 3.05 -> 2.58 ms (STATS 0.75 -> 0.46,
 * DV+DK 1.31 -> 1.13, DQ 0.99 -> 0.99) and 6.10 -> 4.94 ms; with few
 * blocks the 4-warp blocks lose (B2 H3 S333 D128 0.30 -> 0.47 ms, B1 H3
 * S200 D64 0.14 -> 0.21 ms). */
namespace {

constexpr int kBwWarps = 4;
constexpr int kBwThreads = 32 * kBwWarps;
constexpr int kBwTile = 64;
constexpr float kLog2e = 1.4426950408889634f;

/* 8 bytes global -> shared (both 8-byte aligned), zero-filled when !valid. */
RLXK_DEV void cp_async8(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 8 : 0));
}

/* s[n][e] = row g + 8 (e >> 1) of the warp's 16 rows A (row stride D + 4)
 * dotted with row 8 n + 2 t + (e & 1) of the 64-row tile B. */
template <int D, bool FAST>
RLXK_DEV void bw_dots(float s[8][4], const float* A, const float* B) {
  tc_scores<D, FAST>(A, B, s);
}

/* acc (16 x D: n-tile n is columns 8n..8n+7) += W X, W the warp's 16 x 64
 * weights in bw_dots' layout, X a 64-row tile. Column chunks of 64 sum
 * the tile in fresh accumulators (the A fragments are split once per chunk). */
template <int D, bool FAST>
RLXK_DEV void bw_accumulate(float acc[D / 8][4], const float w[8][4], const float* X) {
  constexpr int LD = D + 4;
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float* x0 = X + 2 * t * LD + g;
#pragma unroll
  for (int c = 0; c < D / 64; c++) {
    float part[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++) part[n][0] = part[n][1] = part[n][2] = part[n][3] = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      uint32_t ah[4], al[4];
      split_any<FAST>(w[j][0], ah[0], al[0]);
      split_any<FAST>(w[j][2], ah[1], al[1]);
      split_any<FAST>(w[j][1], ah[2], al[2]);
      split_any<FAST>(w[j][3], ah[3], al[3]);
#pragma unroll
      for (int n = 0; n < 8; n++) {
        uint32_t bh[2], bl[2];
        split_any<FAST>(x0[8 * j * LD + 64 * c + 8 * n], bh[0], bl[0]);
        split_any<FAST>(x0[(8 * j + 1) * LD + 64 * c + 8 * n], bh[1], bl[1]);
        mma_3xtf32(part[n], ah, al, bh, bl);
      }
    }
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[8 * c + n][e] += part[n][e];
  }
}

/* Dots s (rows row0 + g + 8 (e >> 1), columns col0 + 8 n + 2 t + (e & 1);
 * kKeyRows: rows are keys and columns queries, else the reverse) become
 * P = exp(score - lse) (0 where masked) and, with grads, dp becomes
 * dS = P (dP - D) dscore/ds. stat(n, e, &lse, &D) gives the element's
 * query stats. open: every pair visible and in range (attn_tile_open). */
template <bool kKeyRows, class Stat>
RLXK_DEV void bw_probs(const rlxk_attn& a, const char* mask, int64_t b, int64_t h, int64_t row0,
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
template <int D>
RLXK_DEV void bw_store_rows(const float acc[D / 8][4], char* out, int dt, int64_t base, int64_t rs,
                            int64_t r0, int64_t rows) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    int64_t row = r0 + g + 8 * r;
    if (row >= rows) continue;
#pragma unroll
    for (int n = 0; n < D / 8; n++) {
      int64_t at = base + row * rs + n * 8 + 2 * t;
      float x = acc[n][2 * r], y = acc[n][2 * r + 1];
      float* dst = (float*)out + at;
      if (dt == RLX_F32 && ((uintptr_t)dst & 7u) == 0) {
        *(float2*)dst = make_float2(x, y);
      } else {
        st_f32(out, dt, at, x);
        st_f32(out, dt, at + 1, y);
      }
    }
  }
}

template <int D>
RLXK_DEV void bw_zero(float acc[D / 8][4]) {
#pragma unroll
  for (int n = 0; n < D / 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

/* A 64-row tile of f32 rows (stride rs) into shared memory (stride D + 4). */
template <int D>
RLXK_DEV void bw_load_tile(float* dst, const float* src, int64_t rs, int64_t r0, int64_t rows) {
  load_rows_n<kBwTile, D, kBwThreads>(dst, src, rs, r0, rows);
}

/* Streams key tiles [k_first, k_first + 64 n) (K, and V when with_v)
 * through two stages, calling body(k0, Ks, Vs) per tile: cp.async brings
 * tile j + 1 while tile j is used. Copies issued before land with tile 0. */
template <int D, class Body>
RLXK_DEV void bw_stream_keys(float* stages, const float* k, const float* v, const rlxk_attn& a,
                             int64_t k_first, int n, bool with_v, Body body) {
  constexpr int TILE = kBwTile * (D + 4);
  if (n > 0) {
    bw_load_tile<D>(stages, k, a.k_ss, k_first, a.Sk);
    if (with_v) bw_load_tile<D>(stages + TILE, v, a.v_ss, k_first, a.Sk);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  for (int j = 0; j < n; j++) {
    const int64_t k0 = k_first + (int64_t)j * kBwTile;
    float* cur = stages + (j & 1) * 2 * TILE;
    if (j + 1 < n) {
      float* nxt = stages + ((j + 1) & 1) * 2 * TILE;
      bw_load_tile<D>(nxt, k, a.k_ss, k0 + kBwTile, a.Sk);
      if (with_v) bw_load_tile<D>(nxt + TILE, v, a.v_ss, k0 + kBwTile, a.Sk);
    }
    cp_async_commit();
    body(k0, cur, cur + TILE);
    cp_async_wait_all(); /* tile j + 1 landed (own copies) ... */
    __syncthreads();     /* ... everyone's, and nobody reads stage j & 1 any more */
  }
}

/* D_i = d_out_i . out_i of the warp's rows wi0 + g and wi0 + g + 8: lanes
 * 2r, 2r + 1 sum the two halves of row wi0 + r, then each lane quad picks
 * its rows' sums. */
template <int D>
RLXK_DEV void bw_row_deltas(const rlxk_attn_bwd& p, const char* arena, int64_t b, int64_t h, int64_t wi0,
                            float del[2]) {
  const rlxk_attn& a = p.a;
  const int lane = threadIdx.x & 31, g = lane >> 2, half = lane & 1;
  const char *d_out = at(arena, p.dooff), *out = at(arena, p.xoff);
  const int64_t i = wi0 + (lane >> 1);
  float sum = 0.0f;
  if (i < a.Sq) {
    const int64_t oo = b * a.o_sb + i * a.o_ss + h * a.o_sh + half * (D / 2);
    const int64_t go = b * p.do_sb + i * p.do_ss + h * p.do_sh + half * (D / 2);
    const float *gv = (const float*)d_out + go, *ov = (const float*)out + oo;
    if (p.dodt == RLX_F32 && p.xdt == RLX_F32 && (((uintptr_t)gv | (uintptr_t)ov) & 15u) == 0) {
      float4 gx[D / 8], ox[D / 8];
#pragma unroll
      for (int c = 0; c < D / 8; c++) gx[c] = ((const float4*)gv)[c], ox[c] = ((const float4*)ov)[c];
#pragma unroll
      for (int c = 0; c < D / 8; c++)
        sum = fmaf(gx[c].x, ox[c].x, fmaf(gx[c].y, ox[c].y, fmaf(gx[c].z, ox[c].z, fmaf(gx[c].w, ox[c].w, sum))));
    } else {
#pragma unroll 8
      for (int d = 0; d < D / 2; d++) sum = fmaf(ld_f32(d_out, p.dodt, go + d), ld_f32(out, p.xdt, oo + d), sum);
    }
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  del[0] = __shfl_sync(0xffffffffu, sum, 2 * g);
  del[1] = __shfl_sync(0xffffffffu, sum, 2 * (g + 8));
}

/* lse of the warp's rows (g, g + 8) over the visible key tiles: an online
 * max / sum in the log2 domain, the max shared by the row's lane quad. */
template <int D, bool FAST>
RLXK_DEV void bw_row_lse(const rlxk_attn& a, const char* mask, int64_t b, int64_t h, float* stages,
                         const float* Qw, const float* k, int64_t k_first, int n_tiles, int64_t wi0,
                         float lse[2]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  int64_t w_begin, w_end;
  attn_key_range(a, wi0, 16, &w_begin, &w_end);
  const bool live = wi0 < a.Sq;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  bw_stream_keys<D>(stages, k, nullptr, a, k_first, n_tiles, false, [&](int64_t k0, const float* Ks, const float*) {
    if (!live || k0 >= w_end || k0 + kBwTile <= w_begin) return;
    float s[8][4];
    bw_dots<D, FAST>(s, Qw, Ks);
    if (attn_tile_open(a, wi0, 16, k0, kBwTile) && wi0 + 16 <= a.Sq && a.softcap == 0.0f) {
      const float scale2 = a.scale * kLog2e;
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) s[n][e] *= scale2;
    } else {
#pragma unroll
      for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
          s[n][e] = masked_score(a, mask, s[n][e], b, h, wi0 + g + 8 * (e >> 1), k0 + 8 * n + 2 * t + (e & 1)) *
                    kLog2e;
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

/* Shared memory: Q, dO (64 rows each), then two stages of (K, V) tiles of
 * 64 rows; rows of D + 4 floats. */
template <int D, bool FAST>
__device__ void bw_queries(char* arena, const rlxk_attn_bwd& p) {
  constexpr int LD = D + 4;
  extern __shared__ float4 smem4[];
  float* Qs = (float*)smem4;
  float* Os = Qs + kBwTile * LD;
  float* stages = Os + kBwTile * LD;
  const rlxk_attn& a = p.a;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  /* Longest causal rows first, across all heads. */
  const int64_t q_tiles = (a.Sq + kBwTile - 1) / kBwTile, BH = a.B * a.H, blk = blockIdx.x;
  const int64_t tile = q_tiles - 1 - blk / BH, bh = blk % BH;
  const int64_t h = bh % a.H, b = bh / a.H, kvh = h / (a.H / a.Hkv), i0 = tile * kBwTile;
  const int64_t wi0 = i0 + warp * 16;
  const float* q = (const float*)at(arena, a.qoff) + b * a.q_sb + h * a.q_sh;
  const float* d_out = (const float*)at(arena, p.dooff) + b * p.do_sb + h * p.do_sh;
  const float* k = (const float*)at(arena, a.koff) + b * a.k_sb + kvh * a.k_sh;
  const float* v = (const float*)at(arena, a.voff) + b * a.v_sb + kvh * a.v_sh;
  const char* mask = at(arena, a.moff);
  const bool dq = p.op == RLXK_ATTN_BWD_DQ;

  int64_t k_begin, k_end;
  attn_key_range(a, i0, kBwTile, &k_begin, &k_end);
  const int64_t k_first = (k_begin / kBwTile) * kBwTile;
  const int n_tiles = k_end > k_first ? (int)((k_end - k_first + kBwTile - 1) / kBwTile) : 0;
  bw_load_tile<D>(Qs, q, a.q_ss, i0, a.Sq); /* lands with the first key tile */
  if (dq) bw_load_tile<D>(Os, d_out, p.do_ss, i0, a.Sq);
  const float* Qw = Qs + warp * 16 * LD;
  const float* Ow = Os + warp * 16 * LD;

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
    bw_row_lse<D, FAST>(a, mask, b, h, stages, Qw, k, k_first, n_tiles, wi0, lse);
    bw_row_deltas<D>(p, arena, b, h, wi0, del);
  }
  if (!dq) {
    if ((lane & 3) != 0) return;
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
  bw_zero<D>(acc);
  bw_stream_keys<D>(stages, k, v, a, k_first, n_tiles, true, [&](int64_t k0, const float* Ks, const float* Vs) {
    if (!live || k0 >= w_end || k0 + kBwTile <= w_begin) return;
    float s[8][4], dp[8][4];
    bw_dots<D, FAST>(s, Qw, Ks);  /* S = Q K^T */
    bw_dots<D, FAST>(dp, Ow, Vs); /* dP = dO V^T */
    const bool open = attn_tile_open(a, wi0, 16, k0, kBwTile) && wi0 + 16 <= a.Sq;
    bw_probs<false>(a, mask, b, h, wi0, k0, open, s, dp, true, [&](int, int e, float* l, float* d) {
      *l = lse[e >> 1];
      *d = del[e >> 1];
    });
    bw_accumulate<D, FAST>(acc, dp, Ks); /* dq += dS K */
  });
  if (live) bw_store_rows<D>(acc, atw(arena, p.goff), p.gdt, b * p.g_sb + h * p.g_sh, p.g_ss, wi0, a.Sq);
}

/* Shared memory: K, V, then two stages of (Q, dO) tiles (64 x (D + 4)
 * floats each) and two stages of the 64 query rows' (lse, D). */
template <int D, bool FAST>
__device__ void bw_keys(char* arena, const rlxk_attn_bwd& p) {
  constexpr int LD = D + 4, TILE = kBwTile * LD;
  extern __shared__ float4 smem4[];
  float* Ks = (float*)smem4;
  float* Vs = Ks + TILE;
  float* stages = Vs + TILE;
  float* stats_s = stages + 4 * TILE;
  const rlxk_attn& a = p.a;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const bool want_dv = p.op == RLXK_ATTN_BWD_DV, want_dk = p.op == RLXK_ATTN_BWD_DK || p.fused;
  /* Key tile 0 sees the most causal rows: it goes first. */
  const int64_t BG = a.B * a.Hkv, blk = blockIdx.x, tile = blk / BG, bg = blk % BG;
  const int64_t kvh = bg % a.Hkv, b = bg / a.Hkv, j0 = tile * kBwTile, group = a.H / a.Hkv;
  const int64_t wj0 = j0 + warp * 16;
  const float* q = (const float*)at(arena, a.qoff) + b * a.q_sb;
  const float* d_out = (const float*)at(arena, p.dooff) + b * p.do_sb;
  const float* k = (const float*)at(arena, a.koff) + b * a.k_sb + kvh * a.k_sh;
  const float* v = (const float*)at(arena, a.voff) + b * a.v_sb + kvh * a.v_sh;
  const float* stats = (const float*)at(arena, p.xoff);
  const char* mask = at(arena, a.moff);

  bw_load_tile<D>(Ks, k, a.k_ss, j0, a.Sk);
  if (want_dk) bw_load_tile<D>(Vs, v, a.v_ss, j0, a.Sk);
  int64_t i_lo, i_hi;
  attn_query_range(a, j0, kBwTile, &i_lo, &i_hi);
  const int64_t i_first = (i_lo / kBwTile) * kBwTile;
  const int64_t n_q = i_hi > i_first ? (i_hi - i_first + kBwTile - 1) / kBwTile : 0;
  const int64_t iters = group * n_q;
  /* Iteration it: query head kvh * group + it / n_q, query tile it % n_q. */
  auto load_stage = [&](int64_t it) {
    const int64_t h = kvh * group + it / n_q, i0 = i_first + (it % n_q) * kBwTile;
    float* st = stages + (it & 1) * 2 * TILE;
    bw_load_tile<D>(st, q + h * a.q_sh, a.q_ss, i0, a.Sq);
    bw_load_tile<D>(st + TILE, d_out + h * p.do_sh, p.do_ss, i0, a.Sq);
    float* ss = stats_s + (it & 1) * 2 * kBwTile;
    const int64_t base = (b * a.H + h) * a.Sq;
    for (int r = threadIdx.x; r < kBwTile; r += kBwThreads) {
      bool valid = i0 + r < a.Sq;
      cp_async8(ss + 2 * r, stats + (valid ? 2 * (base + i0 + r) : 0), valid);
    }
  };
  if (iters > 0) load_stage(0);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  int64_t w_lo, w_hi;
  attn_query_range(a, wj0, 16, &w_lo, &w_hi);
  const bool live = wj0 < a.Sk;
  const float* Kw = Ks + warp * 16 * LD;
  const float* Vw = Vs + warp * 16 * LD;
  float dv[D / 8][4], dk[D / 8][4];
  bw_zero<D>(dv);
  bw_zero<D>(dk);
  for (int64_t it = 0; it < iters; it++) {
    if (it + 1 < iters) load_stage(it + 1);
    cp_async_commit();
    const int64_t h = kvh * group + it / n_q, i0 = i_first + (it % n_q) * kBwTile;
    if (live && i0 < w_hi && i0 + kBwTile > w_lo) {
      const float* Qt = stages + (it & 1) * 2 * TILE;
      const float* Ot = Qt + TILE;
      const float* St = stats_s + (it & 1) * 2 * kBwTile;
      float s[8][4], dp[8][4];
      bw_dots<D, FAST>(s, Kw, Qt);                /* S^T = K Q^T */
      if (want_dk) bw_dots<D, FAST>(dp, Vw, Ot);  /* dP^T = V dO^T */
      const bool open = attn_tile_open(a, i0, kBwTile, wj0, 16) && i0 + kBwTile <= a.Sq;
      bw_probs<true>(a, mask, b, h, wj0, i0, open, s, dp, want_dk, [&](int n, int e, float* l, float* d) {
        const float* x = St + 2 * (8 * n + 2 * t + (e & 1));
        *l = x[0];
        *d = x[1];
      });
      if (want_dv) bw_accumulate<D, FAST>(dv, s, Ot);  /* dv += P^T dO */
      if (want_dk) bw_accumulate<D, FAST>(dk, dp, Qt); /* dk += dS^T Q */
    }
    cp_async_wait_all(); /* stage it + 1 landed (own copies) ... */
    __syncthreads();     /* ... everyone's, and nobody reads stage it & 1 any more */
  }
  if (!live) return;
  if (want_dv) bw_store_rows<D>(dv, atw(arena, p.goff), p.gdt, b * p.g_sb + kvh * p.g_sh, p.g_ss, wj0, a.Sk);
  if (p.op == RLXK_ATTN_BWD_DK)
    bw_store_rows<D>(dk, atw(arena, p.goff), p.gdt, b * p.g_sb + kvh * p.g_sh, p.g_ss, wj0, a.Sk);
  else if (p.fused)
    bw_store_rows<D>(dk, atw(arena, p.g2off), p.g2dt, b * p.g2_sb + kvh * p.g2_sh, p.g2_ss, wj0, a.Sk);
}

} // namespace

/* 4 warps a block; d64 takes two blocks an SM (104 KB of shared memory
 * each), d128 one (203 KB): up to 255 registers rather than spills. */
#define ATTN_BWD_F32TC(name, body, d, min_blocks)                                             \
  extern "C" __global__ void __launch_bounds__(kBwThreads, min_blocks)                        \
      name(char* arena, rlxk_attn_bwd p, rlxk_state* st) {                                    \
    (void)st;                                                                                 \
    body<d, true>(arena, p);                                                                  \
  }
ATTN_BWD_F32TC(rlx_attn_bwd_f32tc_q64, bw_queries, 64, 2)
ATTN_BWD_F32TC(rlx_attn_bwd_f32tc_q128, bw_queries, 128, 1)
ATTN_BWD_F32TC(rlx_attn_bwd_f32tc_k64, bw_keys, 64, 2)
ATTN_BWD_F32TC(rlx_attn_bwd_f32tc_k128, bw_keys, 128, 1)
