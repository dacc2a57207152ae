/* DequantMatMul (rlxk_dqmm): y = x . W^T with W stored quantized row by row
 * (src/ir/quant.h is the one definition of every scheme; the scale and
 * bit-field helpers come from there). Kernels:
 *
 * - rlx_dqmm_xlimbs + rlx_dqmm_gemv_<scheme>_s1: decode (one x row, GGUF
 *   schemes), the default. x is written once as limbs (24-bit block fixed
 *   point in three int8 limbs); each block takes 2-4 W rows and splits K
 *   among its warps; lanes dot raw codes with the limbs by dp4a (exact in
 *   int32, f32 accuracy). Geometry in dqmm_geom.h.
 * - rlx_dqmm_gemv_<scheme>_m1: decode with an f32 decode of W
 *   (RLX_CUDA_DQMM_F32_GEMV; _l1 before session 22, now in the lab). Each warp
 *   streams DQ_R1 W rows in chunks of 1024 elements with 16-byte cp.async
 *   copies into shared memory (two chunks in flight), and each lane decodes
 *   one 32-element sub-block of each row in registers against its 32 x
 *   values, loaded once for the R rows. Bandwidth bound: W is read once.
 * - rlx_dqmm_gemv_<scheme>_m8: 2..8 x rows, one W row per warp (register
 *   prefetch of the next chunk, x re-read per row: slow, see the lab).
 * - rlx_dqmm_mma_f16 / _bf16: prefill with half x, mma.sync m16n8k16 on 64 x
 *   64 tiles, each W tile dequantized into shared memory (never the whole
 *   weight).
 * - rlx_dqmm_panel_f32 / _f16 / _bf16: prefill (more x rows than the
 *   GEMV's, forward role): W dequantized a panel of rows at a time into a
 *   per-stream buffer that cuBLASLt multiplies x by (cuda_launch.c).
 * - rlx_dqmm_tiled: everything else (f32 prefill, the own schemes, the
 *   transposed role dx = dy . W): 64 x 64 output tiles; each 32-deep K step
 *   dequantizes its W tile into shared memory and runs f32 FMAs on it.
 *
 * The GEMV's algebra: a sub-block's weights are w_j = a * c_j + b with small
 * integer codes c_j (a, b per run of 16 for the K-quants whose scales are
 * per 16), so sum_j x_j w_j = a * sum_j x_j c_j + b * sum_j x_j. Codes
 * become floats without an int->float convert: 0x4B000000 | c is the float
 * 2^23 + c exactly (c < 2^23), one subtraction removes 2^23 and the
 * scheme's offset. Accumulation is f32 throughout. */
#include "common.cuh"
#include "ir/quant.h"
#include "attention_mma.cuh" /* ldmatrix, mma.sync m16n8k16, pack2 */
#include "dqmm_geom.h"       /* the GEMV's geometry, shared with its launch */

#define DQ_CHUNK RLX_DQMM_CHUNK /* elements of a W row per warp step: 32 sub-blocks of 32 */
#define DQ_MR 8       /* most x rows the GEMV takes */

/* ------------------------------------------------------------------ helpers */

/* 2^23 + c as a float, minus (2^23 + off): c - off exactly. */
RLXK_DEV float code_f(uint32_t c, float off) {
  return __uint_as_float(0x4B000000u | c) - (8388608.0f + off);
}

/* Byte b (0..3) of v as a float code minus off. */
RLXK_DEV float byte_f(uint32_t v, int b, float off) {
  return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7540u | (unsigned)b)) - (8388608.0f + off);
}

/* Four bytes of v (each a code) into q[0..3]. */
RLXK_DEV void bytes_f(uint32_t v, float off, float* q) {
#pragma unroll
  for (int b = 0; b < 4; b++) q[b] = byte_f(v, b, off);
}

/* The u32 at s + pos in shared memory, any alignment (two aligned loads +
 * a funnel shift; may read 3 bytes either side, which the callers' buffers
 * hold). The address is split so that with pos a constant the aligned
 * word's address is (a word address per class of pos % 4, computed once
 * per block) + (pos & ~3), folded into the load's offset: through the
 * generic pointer each load did its own 64-bit address math and
 * misalignment (~10 instructions a word in the SASS). a4: the caller
 * knows s + pos is 4-byte aligned (a constant after inlining): one load. */
RLXK_DEV uint32_t sm_u32(const uint8_t* s, int pos, bool a4 = false) {
  if (a4) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"((uint32_t)__cvta_generic_to_shared(s) + (uint32_t)pos));
    return v;
  }
  const uint32_t r = (uint32_t)__cvta_generic_to_shared(s) + (uint32_t)(pos & 3);
  const uint32_t w = (r & ~3u) + (uint32_t)(pos & ~3);
  uint32_t lo, hi;
  asm volatile("ld.shared.u32 %0, [%2];\n\tld.shared.u32 %1, [%2+4];" : "=r"(lo), "=r"(hi) : "r"(w));
  return __funnelshift_r(lo, hi, (r & 3u) * 8u);
}

RLXK_DEV float sm_f16(const uint8_t* s, int pos) {
  return __half2float(__ushort_as_half((unsigned short)(s[pos] | s[pos + 1] << 8)));
}

/* Bit i (0..3 of the nibble n) to bit 4 of byte i: the fifth bits of four codes. */
RLXK_DEV uint32_t spread4(uint32_t n) { return ((n * 0x00204081u) & 0x01010101u) << 4; }

/* ------------------------------------------------------------------ scheme table */

/* Per GGUF scheme: elements and bytes of a block (quant.c's table; kept
 * here as constants so the kernels specialise on them), whether it has a
 * min (w = a * q + b with b != 0) and the offset its codes are stored
 * with (w = a * (code - OFF)). */
template <int S> struct gguf;
template <> struct gguf<RLX_QUANT_Q4_0> { enum { E = 32, B = 18, MIN = 0, OFF = 8 }; };
template <> struct gguf<RLX_QUANT_Q4_1> { enum { E = 32, B = 20, MIN = 1, OFF = 0 }; };
template <> struct gguf<RLX_QUANT_Q5_0> { enum { E = 32, B = 22, MIN = 0, OFF = 16 }; };
template <> struct gguf<RLX_QUANT_Q5_1> { enum { E = 32, B = 24, MIN = 1, OFF = 0 }; };
template <> struct gguf<RLX_QUANT_Q8_0> { enum { E = 32, B = 34, MIN = 0, OFF = 0 }; };
template <> struct gguf<RLX_QUANT_Q2_K> { enum { E = 256, B = 84, MIN = 1, OFF = 0 }; };
template <> struct gguf<RLX_QUANT_Q3_K> { enum { E = 256, B = 110, MIN = 0, OFF = 4 }; };
template <> struct gguf<RLX_QUANT_Q4_K> { enum { E = 256, B = 144, MIN = 1, OFF = 0 }; };
template <> struct gguf<RLX_QUANT_Q5_K> { enum { E = 256, B = 176, MIN = 1, OFF = 0 }; };
template <> struct gguf<RLX_QUANT_Q6_K> { enum { E = 256, B = 210, MIN = 0, OFF = 32 }; };

/* ------------------------------------------------------------------ integer codes */

/* One 32-element sub-block as raw codes for the limb GEMV: q[t] holds the
 * codes of elements 4t .. 4t + 3 as bytes (signed for Q8_0, else small
 * unsigned values, < 64, so also valid as signed bytes), and w_j = a[j /
 * 16] * code_j + b[j / 16]: decode_sub's weights with the offset folded
 * into b (b - a * off; off * a is exact: off is 0, 4, 8, 16 or 32). */
template <int S>
RLXK_DEV void codes_sub(const uint8_t* blk, int i, uint32_t* q, float* a, float* b, bool a4 = false);

template <int OFF, int QS, bool MIN>
RLXK_DEV void codes_q4(const uint8_t* blk, uint32_t* q, float* a, float* b, bool a4) {
  float d = sm_f16(blk, 0);
  a[0] = a[1] = d;
  b[0] = b[1] = MIN ? sm_f16(blk, 2) : -(float)OFF * d;
#pragma unroll
  for (int t = 0; t < 4; t++) {
    uint32_t v = sm_u32(blk, QS + 4 * t, a4);
    q[t] = v & 0x0F0F0F0Fu;
    q[4 + t] = (v >> 4) & 0x0F0F0F0Fu;
  }
}
template <> RLXK_DEV void codes_sub<RLX_QUANT_Q4_0>(const uint8_t* blk, int, uint32_t* q, float* a, float* b, bool a4) {
  codes_q4<8, 2, false>(blk, q, a, b, a4);
}
template <> RLXK_DEV void codes_sub<RLX_QUANT_Q4_1>(const uint8_t* blk, int, uint32_t* q, float* a, float* b, bool a4) {
  codes_q4<0, 4, true>(blk, q, a, b, a4);
}

template <int OFF, int QH, bool MIN>
RLXK_DEV void codes_q5(const uint8_t* blk, uint32_t* q, float* a, float* b, bool a4) {
  float d = sm_f16(blk, 0);
  a[0] = a[1] = d;
  b[0] = b[1] = MIN ? sm_f16(blk, 2) : -(float)OFF * d;
  uint32_t qh = sm_u32(blk, QH, a4);
#pragma unroll
  for (int t = 0; t < 4; t++) {
    uint32_t v = sm_u32(blk, QH + 4 + 4 * t, a4);
    q[t] = (v & 0x0F0F0F0Fu) | spread4((qh >> (4 * t)) & 15u);
    q[4 + t] = ((v >> 4) & 0x0F0F0F0Fu) | spread4((qh >> (16 + 4 * t)) & 15u);
  }
}
template <> RLXK_DEV void codes_sub<RLX_QUANT_Q5_0>(const uint8_t* blk, int, uint32_t* q, float* a, float* b, bool a4) {
  codes_q5<16, 2, false>(blk, q, a, b, a4);
}
template <> RLXK_DEV void codes_sub<RLX_QUANT_Q5_1>(const uint8_t* blk, int, uint32_t* q, float* a, float* b, bool a4) {
  codes_q5<0, 4, true>(blk, q, a, b, a4);
}

template <> RLXK_DEV void codes_sub<RLX_QUANT_Q8_0>(const uint8_t* blk, int, uint32_t* q, float* a, float* b, bool a4) {
  a[0] = a[1] = sm_f16(blk, 0);
  b[0] = b[1] = 0.0f;
#pragma unroll
  for (int t = 0; t < 8; t++) q[t] = sm_u32(blk, 2 + 4 * t, a4);
}

template <> RLXK_DEV void codes_sub<RLX_QUANT_Q2_K>(const uint8_t* blk, int i, uint32_t* q, float* a, float* b, bool a4) {
  int h = i / 4, s = i % 4;
  float d = sm_f16(blk, 80), dmin = sm_f16(blk, 82);
#pragma unroll
  for (int half = 0; half < 2; half++) {
    int sc = blk[8 * h + 2 * s + half];
    a[half] = __fmul_rn(d, (float)(sc & 15));
    b[half] = -__fmul_rn(dmin, (float)(sc >> 4));
  }
#pragma unroll
  for (int t = 0; t < 8; t++) q[t] = (sm_u32(blk, 16 + 32 * h + 4 * t, a4) >> (2 * s)) & 0x03030303u;
}

template <> RLXK_DEV void codes_sub<RLX_QUANT_Q3_K>(const uint8_t* blk, int i, uint32_t* q, float* a, float* b, bool a4) {
  int h = i / 4, s = i % 4;
  float d = sm_f16(blk, 108);
#pragma unroll
  for (int half = 0; half < 2; half++) {
    a[half] = __fmul_rn(d, (float)rlx_quant_q3k_scale(blk + 96, 8 * h + 2 * s + half));
    b[half] = -4.0f * a[half];
  }
#pragma unroll
  for (int t = 0; t < 8; t++) {
    uint32_t lo = (sm_u32(blk, 32 + 32 * h + 4 * t, a4) >> (2 * s)) & 0x03030303u;
    uint32_t hi = ((sm_u32(blk, 4 * t, a4) >> (4 * h + s)) & 0x01010101u) << 2;
    q[t] = lo | hi;
  }
}

template <int S>
RLXK_DEV void codes_k45(const uint8_t* blk, int i, uint32_t* q, float* a, float* b, bool a4) {
  int sc, m;
  rlx_quant_k4_scale_min(blk + 4, i, &sc, &m);
  a[0] = a[1] = __fmul_rn(sm_f16(blk, 0), (float)sc);
  b[0] = b[1] = -__fmul_rn(sm_f16(blk, 2), (float)m);
  const int qs = S == RLX_QUANT_Q4_K ? 16 : 48;
#pragma unroll
  for (int t = 0; t < 8; t++) {
    uint32_t v = (sm_u32(blk, qs + 32 * (i / 2) + 4 * t, a4) >> (4 * (i % 2))) & 0x0F0F0F0Fu;
    if (S == RLX_QUANT_Q5_K) v |= ((sm_u32(blk, 16 + 4 * t, a4) >> i) & 0x01010101u) << 4;
    q[t] = v;
  }
}
template <> RLXK_DEV void codes_sub<RLX_QUANT_Q4_K>(const uint8_t* blk, int i, uint32_t* q, float* a, float* b, bool a4) {
  codes_k45<RLX_QUANT_Q4_K>(blk, i, q, a, b, a4);
}
template <> RLXK_DEV void codes_sub<RLX_QUANT_Q5_K>(const uint8_t* blk, int i, uint32_t* q, float* a, float* b, bool a4) {
  codes_k45<RLX_QUANT_Q5_K>(blk, i, q, a, b, a4);
}

template <> RLXK_DEV void codes_sub<RLX_QUANT_Q6_K>(const uint8_t* blk, int i, uint32_t* q, float* a, float* b, bool a4) {
  int h = i / 4, s = i % 4;
  float d = sm_f16(blk, 208);
#pragma unroll
  for (int half = 0; half < 2; half++) {
    a[half] = __fmul_rn(d, (float)(int8_t)blk[192 + 8 * h + 2 * s + half]);
    b[half] = -32.0f * a[half];
  }
#pragma unroll
  for (int t = 0; t < 8; t++) {
    uint32_t lo = (sm_u32(blk, 64 * h + 32 * (s % 2) + 4 * t, a4) >> (4 * (s / 2))) & 0x0F0F0F0Fu;
    uint32_t hi = ((sm_u32(blk, 128 + 32 * h + 4 * t, a4) >> (2 * s)) & 0x03030303u) << 4;
    q[t] = lo | hi;
  }
}

/* One 32-element sub-block as float codes for the f32 decode (the GEMV
 * _m1 / _m8, the panels): c[j] = code_j - OFF exactly (Q8_0's signed
 * bytes: (q ^ 0x80) - 128) and w_j = a[j / 16] * c[j] + b[j / 16], b
 * being the scheme's min (0 for the schemes with an offset). Codes become
 * floats without an int->float convert (byte_f). blk: the block's bytes
 * (shared memory, any alignment); i: the sub-block within it (0..7 for
 * K-quants). */
template <int S>
RLXK_DEV void decode_sub(const uint8_t* blk, int i, float* c, float* a, float* b) {
  uint32_t q[8];
  codes_sub<S>(blk, i, q, a, b);
  const bool sgn = S == RLX_QUANT_Q8_0;
#pragma unroll
  for (int t = 0; t < 8; t++) bytes_f(sgn ? q[t] ^ 0x80808080u : q[t], sgn ? 128.0f : (float)gguf<S>::OFF, c + 4 * t);
  if (gguf<S>::OFF) b[0] = b[1] = 0.0f; /* codes_sub folded -OFF * a into b */
}

/* Sum of the four signed byte products of a and b, plus c (b's bytes
 * signed / unsigned). */
RLXK_DEV int dp4a_ss(uint32_t a, uint32_t b, int c) {
  int d;
  asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
RLXK_DEV int dp4a_su(uint32_t a, uint32_t b, int c) {
  int d;
  asm("dp4a.s32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

/* ------------------------------------------------------------------ x loads */

/* x[base .. base + 7] of dtype t as floats (base a multiple of 8). */
RLXK_DEV void load_x8(const char* x, int t, int64_t base, float* v) {
  if (t == RLX_F32) {
    const float4* p = (const float4*)((const float*)x + base);
    float4 u = __ldg(p), w = __ldg(p + 1);
    v[0] = u.x, v[1] = u.y, v[2] = u.z, v[3] = u.w, v[4] = w.x, v[5] = w.y, v[6] = w.z, v[7] = w.w;
    return;
  }
  uint4 r = __ldg((const uint4*)((const uint16_t*)x + base));
  uint32_t h[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    if (t == RLX_F16) {
      float2 f = __half22float2(*(const __half2*)&h[k]);
      v[2 * k] = f.x, v[2 * k + 1] = f.y;
    } else { /* bf16: the high half of an f32 */
      v[2 * k] = __uint_as_float(h[k] << 16);
      v[2 * k + 1] = __uint_as_float(h[k] & 0xFFFF0000u);
    }
  }
}

/* ------------------------------------------------------------------ GEMV */

/* Block: 4 warps; wpr warps share a W row (row n = blockIdx.x * 4 / wpr +
 * warp / wpr), taking its 1024-element chunks round robin; their partial
 * sums meet in shared memory. U: 16-byte units a lane loads per chunk;
 * MR: most x rows; PF: chunks of a warp in flight (1: the next one loads
 * while the current one is decoded; 2: two ahead, more registers). */
template <int S, int U, int MR, int PF>
__device__ void dqmm_gemv(char* arena, const rlxk_dqmm& p) {
  constexpr int E = gguf<S>::E, B = gguf<S>::B, SPB = E / 32; /* sub-blocks per block */
  constexpr int CB = DQ_CHUNK / E * B;                        /* bytes of a full chunk */
  __shared__ __align__(16) uint8_t stage[4][U * 512 + 16];
  __shared__ float part[4][DQ_MR];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wpr = p.wpr, rows_per_block = 4 / wpr;
  const int64_t n = (int64_t)blockIdx.x * rows_per_block + warp / wpr;
  const int slot = warp % wpr;
  const int64_t chunks = (p.K + DQ_CHUNK - 1) / DQ_CHUNK, subs = p.K / 32;
  const int M = (int)p.M;
  float acc[MR];
#pragma unroll
  for (int m = 0; m < MR; m++) acc[m] = 0.0f;
  const uint8_t* row = (const uint8_t*)at(arena, p.woff) + (n < p.N ? n : 0) * p.row_bytes;
  const char* X = at(arena, p.xoff);
  uint8_t* sm = stage[warp];
  /* the aligned 16-byte units covering chunk c's bytes, into r */
  auto fetch = [&](uint4(&r)[U], int64_t c) {
    int64_t b0 = c * CB, b1 = b0 + CB < p.row_bytes ? b0 + CB : p.row_bytes;
    uintptr_t a0 = (uintptr_t)(row + b0) & ~(uintptr_t)15;
    int64_t units = ((uintptr_t)(row + b1) - a0 + 15) / 16;
#pragma unroll
    for (int u = 0; u < U; u++) {
      int k = lane + 32 * u;
      if (k < units) r[u] = __ldg((const uint4*)a0 + k);
    }
  };
  /* chunk c, whose bytes are in r; r is refilled with chunk `next` (when
   * there is one) before the decode, so those loads are in flight meanwhile */
  auto consume = [&](uint4(&r)[U], int64_t c, int64_t next) {
    int off = (int)((uintptr_t)(row + c * CB) & 15);
#pragma unroll
    for (int u = 0; u < U; u++) ((uint4*)sm)[lane + 32 * u] = r[u];
    __syncwarp();
    if (next < chunks) fetch(r, next);
    int64_t sub = c * 32 + lane;
    if (sub < subs) {
      float q[32], a[2], b[2];
      decode_sub<S>(sm + off + lane / SPB * B, lane % SPB, q, a, b);
#pragma unroll
      for (int m = 0; m < MR; m++) {
        if (m >= M) break;
        float s[2] = {0.0f, 0.0f}, xs[2] = {0.0f, 0.0f};
#pragma unroll
        for (int g = 0; g < 4; g++) {
          float xv[8];
          load_x8(X, p.xdt, m * p.K + sub * 32 + 8 * g, xv);
#pragma unroll
          for (int j = 0; j < 8; j++) {
            s[g / 2] = fmaf(xv[j], q[8 * g + j], s[g / 2]);
            if (gguf<S>::MIN) xs[g / 2] += xv[j];
          }
        }
        float t = fmaf(a[0], s[0], a[1] * s[1]);
        if (gguf<S>::MIN) t = fmaf(b[0], xs[0], fmaf(b[1], xs[1], t));
        acc[m] += t;
      }
    }
    __syncwarp();
  };
  /* PF chunks in flight: ra (and rb) alternate */
  uint4 ra[U], rb[U];
  const int64_t step = (int64_t)wpr * PF;
  if (n < p.N) {
    if (slot < chunks) fetch(ra, slot);
    if (PF == 2 && slot + wpr < chunks) fetch(rb, slot + wpr);
    for (int64_t c = slot; c < chunks; c += step) {
      consume(ra, c, c + step);
      if (PF == 2 && c + wpr < chunks) consume(rb, c + wpr, c + wpr + step);
    }
  }
#pragma unroll
  for (int m = 0; m < MR; m++) acc[m] = warp_sum(acc[m]);
  if (lane == 0)
#pragma unroll
    for (int m = 0; m < MR; m++) part[warp][m] = acc[m];
  __syncthreads();
  if (slot != 0 || n >= p.N) return;
  char* Y = atw(arena, p.ooff);
  for (int m = lane; m < M; m += 32) {
    float v = 0.0f;
    for (int w = 0; w < wpr; w++) v += part[warp + w][m];
    st_f32(Y, p.odt, m * p.N + n, v);
  }
}

/* ------------------------------------------------------------------ GEMV, one x row */

#define DQ_R1 2    /* W rows a warp of _m1 takes at once (cuda_launch.c: RLX_DQMM_M1_ROWS) */
/* chunks of W a warp of _m1 has in flight (cp.async stages): 4, or 3 when
 * a chunk of a row is over 1 KB (q8_0), so two blocks still fit an SM
 * (cuda_launch.c: dqmm_m1_stages) */
template <int S>
__host__ __device__ constexpr int dq_stages() {
  return DQ_CHUNK / gguf<S>::E * gguf<S>::B > 1024 ? 3 : 4;
}
#define DQ_WARPS 8 /* warps of an _m1 block (256 threads; cuda_launch.c: RLX_DQMM_M1_WARPS) */

template <int N>
RLXK_DEV void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

/* x[k .. k + 3] of dtype t as a float4 (k a multiple of 4, x 16-byte aligned). */
RLXK_DEV float4 load_x4(const char* x, int t, int64_t k) {
  if (t == RLX_F32) return __ldg((const float4*)((const float*)x + k));
  uint2 r = __ldg((const uint2*)((const uint16_t*)x + k));
  if (t == RLX_F16) {
    float2 a = __half22float2(*(const __half2*)&r.x), b = __half22float2(*(const __half2*)&r.y);
    return make_float4(a.x, a.y, b.x, b.y);
  }
  return make_float4(__uint_as_float(r.x << 16), __uint_as_float(r.x & 0xFFFF0000u),
                     __uint_as_float(r.y << 16), __uint_as_float(r.y & 0xFFFF0000u));
}

/* Bytes of one W row's stage buffer: a chunk, 16-byte alignment slack and
 * sm_u32's overread. */
template <int S>
__host__ __device__ constexpr int dq_srow() {
  return RLX_DQMM_SROW(DQ_CHUNK / gguf<S>::E * gguf<S>::B);
}

/* The limb GEMV's x (_l1): per 32-element sub-block b, x_j = s_b v_j
 * with s_b a power of two (x's largest |x_j| < 2^23 s_b, so the scaling
 * is exact) and v_j = round(x_j / s_b), an integer of 24 bits held as
 * three bytes: v = 65536 hi + 256 mid + lo (hi signed, mid and lo
 * unsigned). A dot of W's integer codes with x then runs as three dp4a
 * per 4 elements, exact in int32, and is rounded only when the limbs are
 * recombined in f32: the result is as accurate as the f32 decode's (one
 * rounding of 2^-24 relative to the sub-block's largest |x_j| against
 * f32's per-product roundings). Layout per 1024-element chunk
 * (DQ_LIMB_CHUNK bytes): 6 x 32 uint4 (hi words 0-3, 4-7, then mid, then
 * lo, of sub-block l at slot g * 32 + l: conflict-free), then 32 float4
 * (s_b, sum of x over elements 0-15, over 16-31, 0). */
#define DQ_LIMB_CHUNK RLX_DQMM_LIMB_CHUNK
/* Eight consecutive lanes convert one sub-block, four elements each (a
 * float4 load; the scale and sums meet by shuffles), so a warp takes four
 * sub-blocks at a time: threads first, first + stride, ... of a call
 * (warp-uniform: every lane of a warp takes part in each pass) cover the
 * sub-blocks of `chunks` chunks, those past K zero. */
RLXK_DEV void stage_x_limbs(const char* X, int xdt, int64_t K, int64_t chunks, uint8_t* sm, int64_t first,
                             int64_t stride) {
  const int64_t subs = chunks * 32, warp0 = first - first % 32;
  const int part = (int)(first % 8); /* elements 4 part .. 4 part + 3 */
  for (int64_t base = warp0; base < subs * 8; base += stride) {
    const int64_t sb = (base + first % 32) / 8, k = sb * 32 + 4 * part;
    float4 v = sb < subs && k < K ? load_x4(X, xdt, k) : make_float4(0.f, 0.f, 0.f, 0.f);
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
    float half = (v.x + v.y) + (v.z + v.w);
#pragma unroll
    for (int o = 1; o < 8; o *= 2) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
#pragma unroll
    for (int o = 1; o < 4; o *= 2) half += __shfl_xor_sync(0xFFFFFFFFu, half, o); /* per 16 elements */
    const float other = __shfl_xor_sync(0xFFFFFFFFu, half, 4);
    const float s0 = part < 4 ? half : other, s1 = part < 4 ? other : half;
    int ex = 0;
    float scale = 1.0f;
    /* fmaxf drops NaN: a NaN element shows in the sums instead */
    const bool finite = isfinite(amax) && !isnan(s0 + s1);
    if (finite && amax > 0.0f) {
      frexpf(amax, &ex); /* amax < 2^ex */
      scale = ldexpf(1.0f, ex - 23);
    }
    const float e[4] = {v.x, v.y, v.z, v.w};
    uint32_t hi = 0, mid = 0, lo = 0;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      int q = finite ? __float2int_rn(ldexpf(e[j], 23 - ex)) : 0;
      q = q > 8388607 ? 8388607 : q < -8388608 ? -8388608 : q;
      hi |= (uint32_t)((q >> 16) & 255) << (8 * j);
      mid |= (uint32_t)((q >> 8) & 255) << (8 * j);
      lo |= (uint32_t)(q & 255) << (8 * j);
    }
    if (sb < subs) {
      uint8_t* chunk = sm + (sb / 32) * DQ_LIMB_CHUNK;
      const int l = (int)(sb % 32), g = part / 4, w = part % 4;
      ((uint32_t*)chunk)[((g)*32 + l) * 4 + w] = hi;
      ((uint32_t*)chunk)[((2 + g) * 32 + l) * 4 + w] = mid;
      ((uint32_t*)chunk)[((4 + g) * 32 + l) * 4 + w] = lo;
      /* a non-finite x makes the sub-block's sums NaN (as f32 arithmetic would) */
      if (part == 0) ((float4*)(chunk + 6 * 512))[l] = make_float4(finite ? scale : NAN, s0, s1, 0.0f);
    }
  }
}

/* Programmatic dependent launch (sm_90+; no-ops before, and when the
 * kernel was launched plainly): grid_dep_launch lets the stream's next
 * kernel, launched early, start; grid_dep_wait blocks until the previous
 * kernel has completed and its writes are visible. */
RLXK_DEV void grid_dep_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
RLXK_DEV void grid_dep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Lane l's sub-block of one limb chunk (shared or global memory): its
 * six uint4 of hi / mid / lo words and its float4 (s_b, sums). */
RLXK_DEV void load_limbs(const uint8_t* chunk, int lane, uint4* lw, float4* xf) {
  const uint4* xl = (const uint4*)chunk;
#pragma unroll
  for (int g = 0; g < 6; g++) lw[g] = xl[g * 32 + lane];
  *xf = ((const float4*)(chunk + 6 * 512))[lane];
}

/* sum_j w_j x_j over sub-block i of the block at blk (shared memory) with
 * x in limbs (lw, xf from load_limbs): per half of 16, the integer dots of
 * the codes with hi, mid and lo (three dp4a per 4 elements, exact in
 * int32), recombined as sum_j code_j v_j = 65536 hi + 256 mid + lo, then
 * a * s_b * that + b * sum_j x_j. */
template <int S>
RLXK_DEV float limb_dot(const uint8_t* blk, int i, const uint4* lw, float4 xf, bool a4 = false) {
  const uint32_t* H = (const uint32_t*)&lw[0];
  const uint32_t* Mw = (const uint32_t*)&lw[2];
  const uint32_t* L = (const uint32_t*)&lw[4];
  uint32_t q[8];
  float a[2], b[2], sh[2];
  codes_sub<S>(blk, i, q, a, b, a4);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    int hi = 0, mid = 0, lo = 0;
#pragma unroll
    for (int t = 4 * h; t < 4 * h + 4; t++) {
      hi = dp4a_ss(q[t], H[t], hi);
      mid = dp4a_su(q[t], Mw[t], mid);
      lo = dp4a_su(q[t], L[t], lo);
    }
    sh[h] = fmaf((float)hi, 65536.0f, (float)(mid * 256 + lo));
  }
  float v = xf.x * fmaf(a[0], sh[0], a[1] * sh[1]);
  return fmaf(b[0], xf.y, fmaf(b[1], xf.z, v));
}

/* cp.async of chunk c (DQ_CHUNK elements) of W rows n0 .. n0 + R - 1 (those
 * below N) into dst, row r at r * dq_srow<S>(): whole aligned 16-byte
 * units, so row r's chunk starts at byte ((W + n0 + r's chunk) & 15). */
template <int S, int R>
RLXK_DEV void stage_chunk(uint8_t* dst, const uint8_t* W, const rlxk_dqmm& p, int64_t n0, int64_t c, int lane) {
  constexpr int CB = DQ_CHUNK / gguf<S>::E * gguf<S>::B;
  const int64_t b0 = c * CB;
  const int len = p.row_bytes - b0 < CB ? (int)(p.row_bytes - b0) : CB;
#pragma unroll
  for (int r = 0; r < R; r++) {
    if (n0 + r >= p.N) break;
    const uint8_t* src = W + (n0 + r) * p.row_bytes + b0;
    const int mis = (int)((uintptr_t)src & 15);
    const uint4* a0 = (const uint4*)(src - mis);
    const int units = (mis + len + 15) >> 4;
    /* at most CB / 16 + 2 units: a fixed count of predicated copies a lane */
#pragma unroll
    for (int j = 0; j < (CB / 16 + 2 + 31) / 32; j++)
      if (lane + 32 * j < units) cp_async16(dst + r * dq_srow<S>() + 16 * (lane + 32 * j), a0 + lane + 32 * j, true);
  }
}

/* M == 1 (decode proper). The whole x row sits in shared memory as f32
 * (staged once per block, converted from f16 / bf16 exactly), stored per
 * 1024-element chunk transposed: float4 g of sub-block l at slot 32 g + l,
 * so a warp reading the 8 float4 of its lanes' sub-blocks hits every bank
 * once. Each warp then walks its items (R W rows x one chunk, its row
 * groups strided by the grid) with ST chunks of W in flight (cp.async
 * straight into the warp's stage ring, no block barrier in the loop);
 * lane l decodes sub-block l of the chunk of each of the R rows against
 * the 32 x values it read once from shared memory. A row group's sum is
 * reduced across the warp after its last chunk. Dynamic shared memory:
 * chunks * 4 KB (x) + DQ_WARPS * ST * R * dq_srow<S>() (cuda_launch.c). */
template <int S, int R, int ST, bool LIMBS>
__device__ void dqmm_gemv_xs(char* arena, const rlxk_dqmm& p) {
  constexpr int E = gguf<S>::E, B = gguf<S>::B, SPB = E / 32, CB = DQ_CHUNK / E * B;
  constexpr int SROW = dq_srow<S>(), XCB = LIMBS ? DQ_LIMB_CHUNK : DQ_CHUNK * 4;
  extern __shared__ __align__(16) uint8_t dq_dsm[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t chunks = (p.K + DQ_CHUNK - 1) / DQ_CHUNK, subs = p.K / 32;
  const int64_t groups = (p.N + R - 1) / R, gstride = (int64_t)gridDim.x * DQ_WARPS;
  const int64_t g0 = (int64_t)blockIdx.x * DQ_WARPS + warp;
  const int64_t items = g0 < groups ? (groups - 1 - g0) / gstride + 1 : 0; /* row groups */
  const int total = (int)(items * chunks), nc = (int)chunks;
  const uint8_t* W = (const uint8_t*)at(arena, p.woff);
  float4* xs = (float4*)dq_dsm;
  uint8_t* ring = dq_dsm + chunks * XCB + (size_t)warp * ST * R * SROW;
  /* item t (row group g0 + (t / chunks) * gstride, chunk t % chunks) into
   * ring slot t % ST; one commit group per call, empty past the end */
  auto issue = [&](int t) {
    if (t < total) {
      stage_chunk<S, R>(ring + (int)(t % ST) * R * SROW, W, p, (g0 + t / nc * gstride) * R, t % nc, lane);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int t = 0; t < ST - 1; t++) issue(t); /* W in flight while x is staged */
  if constexpr (LIMBS) stage_x_limbs(at(arena, p.xoff), p.xdt, p.K, chunks, dq_dsm, threadIdx.x, blockDim.x);
  else
  { /* x: 8 float4 loads of a thread in flight, then their stores (one
     * load at a time put ~14 L2 round trips before the first chunk) */
    const char* X = at(arena, p.xoff);
    const int64_t units = chunks * (DQ_CHUNK / 4);
    for (int64_t u0 = threadIdx.x; u0 < units; u0 += 8 * (int64_t)blockDim.x) {
      float4 v[8];
#pragma unroll
      for (int i = 0; i < 8; i++) {
        int64_t k = 4 * (u0 + i * (int64_t)blockDim.x);
        v[i] = k < p.K ? load_x4(X, p.xdt, k) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int i = 0; i < 8; i++) {
        int64_t u = u0 + i * (int64_t)blockDim.x, c = u / (DQ_CHUNK / 4), q = u % (DQ_CHUNK / 4);
        if (u < units) xs[c * (DQ_CHUNK / 4) + (q % 8) * 32 + q / 8] = v[i];
      }
    }
  }
  __syncthreads();
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = 0.0f;
  for (int t = 0; t < total; t++) {
    issue(t + ST - 1);
    cp_async_wait<ST - 1>(); /* item t's group is complete */
    __syncwarp();
    const int64_t n0 = (g0 + t / nc * gstride) * R, c = t % nc, sub = c * 32 + lane;
    const uint8_t* st = ring + (int)(t % ST) * R * SROW;
    if (LIMBS && sub < subs) {
      uint4 lw[6];
      float4 xf;
      load_limbs(dq_dsm + c * DQ_LIMB_CHUNK, lane, lw, &xf);
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (n0 + r >= p.N) break;
        int off = (int)((uintptr_t)(W + (n0 + r) * p.row_bytes + c * CB) & 15);
        acc[r] += limb_dot<S>(st + r * SROW + off + lane / SPB * B, lane % SPB, lw, xf);
      }
    } else if (!LIMBS && sub < subs) {
      float xv[32];
#pragma unroll
      for (int g = 0; g < 8; g++) {
        float4 v = xs[c * (DQ_CHUNK / 4) + g * 32 + lane];
        xv[4 * g] = v.x, xv[4 * g + 1] = v.y, xv[4 * g + 2] = v.z, xv[4 * g + 3] = v.w;
      }
      float xsum[2] = {0.0f, 0.0f};
      if (gguf<S>::MIN)
#pragma unroll
        for (int j = 0; j < 32; j++) xsum[j / 16] += xv[j];
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (n0 + r >= p.N) break;
        int off = (int)((uintptr_t)(W + (n0 + r) * p.row_bytes + c * CB) & 15);
        float q[32], a[2], bb[2];
        decode_sub<S>(st + r * SROW + off + lane / SPB * B, lane % SPB, q, a, bb);
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int j = 0; j < 16; j++) s0 = fmaf(xv[j], q[j], s0);
#pragma unroll
        for (int j = 16; j < 32; j++) s1 = fmaf(xv[j], q[j], s1);
        float v = fmaf(a[0], s0, a[1] * s1);
        if (gguf<S>::MIN) v = fmaf(bb[0], xsum[0], fmaf(bb[1], xsum[1], v));
        acc[r] += v;
      }
    }
    __syncwarp(); /* slot t % ST is refilled by the next issue */
    if (c == chunks - 1) {
#pragma unroll
      for (int r = 0; r < R; r++) {
        float v = warp_sum(acc[r]);
        if (lane == 0 && n0 + r < p.N) st_f32(atw(arena, p.ooff), p.odt, n0 + r, v);
        acc[r] = 0.0f;
      }
    }
  }
  cp_async_wait<0>();
}

/* _s1, the decode GEMV (M == 1): W's rows split among the blocks, R rows
 * each, and their K among the block's warps. x comes as limbs (above),
 * written once per GEMV by rlx_dqmm_xlimbs into the per-stream buffer
 * p.panel (chunk c at c * DQ_LIMB_CHUNK, as in shared memory), and read
 * from there through L1 by every warp that needs it: x is 3.5 bytes an
 * element, read once per chunk for R rows. Warp w takes chunks w, w +
 * warps, ...: a few each (cuda_launch.c sizes the block so), all in flight
 * at once (RLX_DQMM_S1_STAGES), so no warp walks a long chain of W round trips
 * (what held _l1, a warp per row group over all of K, at ~2x ggml). Lane
 * l dots sub-block l of its chunk of each row. The warps' partial sums
 * meet in shared memory in a fixed order. Dynamic shared memory: warps x
 * RLX_DQMM_S1_STAGES x R x dq_srow<S>() (dqmm_geom.h rlx_dqmm_s1_smem). */
template <int S, int R>
__device__ void dqmm_gemv_split(char* arena, const rlxk_dqmm& p) {
  constexpr int SPB = gguf<S>::E / 32, B = gguf<S>::B, CB = DQ_CHUNK / gguf<S>::E * B, ST = RLX_DQMM_S1_STAGES;
  constexpr int SROW = dq_srow<S>();
  extern __shared__ __align__(16) uint8_t dq_dsm[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  /* K < 2^31 elements (the launch's limits): chunk counts fit int32 */
  const int chunks = (int)((p.K + DQ_CHUNK - 1) / DQ_CHUNK), subs = (int)(p.K / 32);
  const int64_t n0 = (int64_t)blockIdx.x * R;
  const int mine = warp < chunks ? (chunks - 1 - warp) / warps + 1 : 0;
  const uint8_t* W = (const uint8_t*)at(arena, p.woff);
  const uint8_t* XL = (const uint8_t*)p.panel;
  uint8_t* ring = dq_dsm + (size_t)warp * ST * R * SROW;
  auto issue = [&](int t) { /* this warp's t-th chunk into slot t % ST */
    if (t < mine) stage_chunk<S, R>(ring + (t % ST) * R * SROW, W, p, n0, warp + t * warps, lane);
    cp_async_commit();
  };
#pragma unroll
  for (int t = 0; t < ST - 1; t++) issue(t);
  grid_dep_wait(); /* launched early (cuda.c launch_kernel): XLIMBS's limbs are complete past here */
  float acc[R];
  int mis[R]; /* each row's start & 15: a chunk's bytes sit at (mis + c * CB) & 15 in its stage */
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = 0.0f, mis[r] = (int)((uintptr_t)(W + (n0 + r) * p.row_bytes) & 15);
  for (int t = 0; t < mine; t++) {
    issue(t + ST - 1);
    const int c = warp + t * warps, sub = c * 32 + lane;
    uint4 lw[6];
    float4 xf;
    if (sub < subs) load_limbs(XL + (size_t)c * DQ_LIMB_CHUNK, lane, lw, &xf); /* before the wait: in flight with W */
    cp_async_wait<ST - 1>();
    __syncwarp();
    const uint8_t* st = ring + (t % ST) * R * SROW;
    if (sub < subs) {
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (n0 + r >= p.N) break;
        const uint8_t* blk = st + r * SROW + ((mis[r] + c * CB) & 15) + lane / SPB * B;
        /* blocks of a multiple of 4 bytes in a 4-byte aligned row: every
         * word aligned (one load each, no funnel shift) */
        if (B % 4 == 0 && CB % 4 == 0 && (mis[r] & 3) == 0) acc[r] += limb_dot<S>(blk, lane % SPB, lw, xf, true);
        else acc[r] += limb_dot<S>(blk, lane % SPB, lw, xf, false);
      }
    }
    __syncwarp(); /* slot t % ST is refilled by the next issue */
  }
  cp_async_wait<0>();
  /* the warps' sums meet at the start of each warp's ring, done with (no
   * static shared memory: the loader's opt-in gives all of it to the
   * dynamic part) */
#pragma unroll
  for (int r = 0; r < R; r++) {
    float v = warp_sum(acc[r]);
    if (lane == 0) ((float*)ring)[r] = v;
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int r = 0; r < R; r++) {
      float v = 0.0f;
      for (int w = 0; w < warps; w++) v += ((const float*)(dq_dsm + (size_t)w * ST * R * SROW))[r]; /* one order */
      if (lane == 0 && n0 + r < p.N) st_f32(atw(arena, p.ooff), p.odt, n0 + r, v);
    }
  }
}

/* x (one row, p.K) as limbs into p.panel for _s1: eight threads a
 * sub-block (cuda_launch.c: rlx_dqmm_chunks(K) * 256 threads in blocks of
 * 128), the last chunk's tail zero. */
extern "C" __global__ void __launch_bounds__(128) rlx_dqmm_xlimbs(char* arena, rlxk_dqmm p, rlxk_state* st) {
  grid_dep_launch(); /* the GEMV may start its W loads now; it waits for this grid before the limbs */
  const int64_t chunks = (p.K + DQ_CHUNK - 1) / DQ_CHUNK;
  stage_x_limbs(at(arena, p.xoff), p.xdt, p.K, chunks, (uint8_t*)p.panel,
                (int64_t)blockIdx.x * blockDim.x + threadIdx.x, (int64_t)gridDim.x * blockDim.x);
}

/* _m1: one row of x (decode proper), x in shared memory, DQ_R1 W rows per
 * warp, DQ_WARPS warps a block; _m8: up to DQ_MR x rows, one W row per
 * warp. U = ceil((chunk bytes + 15) / 512). */
#define DQMM_GEMV(S, U, name)                                                            \
  extern "C" __global__ void __launch_bounds__(32 * DQ_WARPS, 2)                        \
      name##_m1(char* arena, rlxk_dqmm p, rlxk_state* st) {                              \
    dqmm_gemv_xs<S, DQ_R1, dq_stages<S>(), false>(arena, p);                                    \
  }                                                                                      \
  extern "C" __global__ void __launch_bounds__(256) name##_s1(char* arena, rlxk_dqmm p,   \
                                                              rlxk_state* st) {         \
    dqmm_gemv_split<S, RLX_DQMM_S1_ROWS(DQ_CHUNK / gguf<S>::E * gguf<S>::B)>(arena, p);                                             \
  }                                                                                      \
  extern "C" __global__ void __launch_bounds__(128) name##_m8(char* arena, rlxk_dqmm p,   \
                                                              rlxk_state* st) {         \
    dqmm_gemv<S, U, DQ_MR, 1>(arena, p);                                                    \
  }
DQMM_GEMV(RLX_QUANT_Q4_0, 2, rlx_dqmm_gemv_q4_0)
DQMM_GEMV(RLX_QUANT_Q4_1, 2, rlx_dqmm_gemv_q4_1)
DQMM_GEMV(RLX_QUANT_Q5_0, 2, rlx_dqmm_gemv_q5_0)
DQMM_GEMV(RLX_QUANT_Q5_1, 2, rlx_dqmm_gemv_q5_1)
DQMM_GEMV(RLX_QUANT_Q8_0, 3, rlx_dqmm_gemv_q8_0)
DQMM_GEMV(RLX_QUANT_Q2_K, 1, rlx_dqmm_gemv_q2_k)
DQMM_GEMV(RLX_QUANT_Q3_K, 1, rlx_dqmm_gemv_q3_k)
DQMM_GEMV(RLX_QUANT_Q4_K, 2, rlx_dqmm_gemv_q4_k)
DQMM_GEMV(RLX_QUANT_Q5_K, 2, rlx_dqmm_gemv_q5_k)
DQMM_GEMV(RLX_QUANT_Q6_K, 2, rlx_dqmm_gemv_q6_k)

/* ------------------------------------------------------------------ one element */

/* Scale and zero point of group j of row n (the own schemes). */
RLXK_DEV float own_scale(const char* arena, const rlxk_dqmm& p, int64_t n, int64_t j, int* zero) {
  int64_t idx = n * (p.K / p.group) + j;
  *zero = 0;
  if (!p.has_scale) return 1.0f;
  if (p.scheme == RLX_QUANT_NVFP4) {
    float global = p.has_aux ? ((const float*)at(arena, p.aoff))[0] : 1.0f;
    return rlx_quant_nvfp4_scale(((const uint8_t*)at(arena, p.soff))[idx], global);
  }
  if (p.has_aux) *zero = ((const uint8_t*)at(arena, p.aoff))[idx];
  return ld_f32(at(arena, p.soff), p.sdt, idx);
}

/* W[n][k] in f32, rounded exactly as src/ir/quant.h's block decoders. */
RLXK_DEV float dq_elem(const char* arena, const rlxk_dqmm& p, int64_t n, int64_t k) {
  const uint8_t* row = (const uint8_t*)at(arena, p.woff) + n * p.row_bytes;
  int e = (int)(k % 256), j32 = (int)(k % 32);
  switch (p.scheme) {
    case RLX_QUANT_Q4_0: {
      const uint8_t* b = row + k / 32 * 18;
      int q = j32 < 16 ? b[2 + j32] & 15 : b[2 + j32 - 16] >> 4;
      return __fmul_rn(rlx_quant_f16(b), (float)(q - 8));
    }
    case RLX_QUANT_Q4_1: {
      const uint8_t* b = row + k / 32 * 20;
      int q = j32 < 16 ? b[4 + j32] & 15 : b[4 + j32 - 16] >> 4;
      return __fadd_rn(__fmul_rn(rlx_quant_f16(b), (float)q), rlx_quant_f16(b + 2));
    }
    case RLX_QUANT_Q5_0:
    case RLX_QUANT_Q5_1: {
      int one = p.scheme == RLX_QUANT_Q5_1;
      const uint8_t* b = row + k / 32 * (one ? 24 : 22);
      const uint8_t* qs = b + (one ? 8 : 6);
      uint32_t qh = rlx_quant_u32(b + (one ? 4 : 2));
      int q = (j32 < 16 ? qs[j32] & 15 : qs[j32 - 16] >> 4) | (int)((qh >> j32) & 1) << 4;
      if (!one) return __fmul_rn(rlx_quant_f16(b), (float)(q - 16));
      return __fadd_rn(__fmul_rn(rlx_quant_f16(b), (float)q), rlx_quant_f16(b + 2));
    }
    case RLX_QUANT_Q8_0: {
      const uint8_t* b = row + k / 32 * 34;
      return __fmul_rn((float)(int8_t)b[2 + j32], rlx_quant_f16(b));
    }
    default: break;
  }
  /* K-quants: e = 128 h + 32 s + 16 half + j */
  int h = e / 128, s = e % 128 / 32, half = e % 32 / 16, j = e % 16, i = e / 32;
  switch (p.scheme) {
    case RLX_QUANT_Q2_K: {
      const uint8_t* b = row + k / 256 * 84;
      int sc = b[8 * h + 2 * s + half];
      float dl = __fmul_rn(rlx_quant_f16(b + 80), (float)(sc & 15));
      float ml = __fmul_rn(rlx_quant_f16(b + 82), (float)(sc >> 4));
      int q = (b[16 + 32 * h + 16 * half + j] >> (2 * s)) & 3;
      return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
    case RLX_QUANT_Q3_K: {
      const uint8_t* b = row + k / 256 * 110;
      float dl = __fmul_rn(rlx_quant_f16(b + 108),
                           (float)rlx_quant_q3k_scale(b + 96, 8 * h + 2 * s + half));
      int v = ((b[32 + 32 * h + 16 * half + j] >> (2 * s)) & 3) -
              (((b[16 * half + j] >> (4 * h + s)) & 1) ? 0 : 4);
      return __fmul_rn(dl, (float)v);
    }
    case RLX_QUANT_Q4_K:
    case RLX_QUANT_Q5_K: {
      int five = p.scheme == RLX_QUANT_Q5_K;
      const uint8_t* b = row + k / 256 * (five ? 176 : 144);
      int sc, m;
      rlx_quant_k4_scale_min(b + 4, i, &sc, &m);
      float ds = __fmul_rn(rlx_quant_f16(b), (float)sc);
      float dm = __fmul_rn(rlx_quant_f16(b + 2), (float)m);
      int q = (b[(five ? 48 : 16) + 32 * (i / 2) + e % 32] >> (4 * (i % 2))) & 15;
      if (five) q |= ((b[16 + e % 32] >> i) & 1) << 4;
      return __fsub_rn(__fmul_rn(ds, (float)q), dm);
    }
    case RLX_QUANT_Q6_K: {
      const uint8_t* b = row + k / 256 * 210;
      float ds = __fmul_rn(rlx_quant_f16(b + 208), (float)(int8_t)b[192 + 8 * h + 2 * s + half]);
      int lo = (b[64 * h + 32 * (s % 2) + 16 * half + j] >> (4 * (s / 2))) & 15;
      int hi = (b[128 + 32 * h + 16 * half + j] >> (2 * s)) & 3;
      return __fmul_rn(ds, (float)((lo | hi << 4) - 32));
    }
    default: break;
  }
  int zero;
  float scale = own_scale(arena, p, n, k / p.group, &zero);
  switch (p.scheme) {
    case RLX_QUANT_INT8_SYM: return __fmul_rn((float)(int8_t)row[k], scale);
    case RLX_QUANT_INT8_ASYM: return __fmul_rn((float)((int)row[k] - zero), scale);
    case RLX_QUANT_INT4_SYM:
      return __fmul_rn((float)((((row[k / 2] >> (4 * (k & 1))) & 15) ^ 8) - 8), scale);
    case RLX_QUANT_INT4_ASYM:
      return __fmul_rn((float)((int)((row[k / 2] >> (4 * (k & 1))) & 15) - zero), scale);
    case RLX_QUANT_FP8_E4M3:
      return __fmul_rn((float)rlx_f8_decode(RLX_F8E4M3FN, row[k]), scale);
    case RLX_QUANT_FP8_E5M2: return __fmul_rn((float)rlx_f8_decode(RLX_F8E5M2, row[k]), scale);
    case RLX_QUANT_NVFP4:
      return __fmul_rn(rlx_quant_e2m1((uint32_t)(row[k / 2] >> (4 * (k & 1))) & 15), scale);
    default: return 0.0f;
  }
}

/* ------------------------------------------------------------------ tiled */

#define DT 64 /* output tile */
#define DK 32 /* reduction step */

/* y[m][j] = sum_r x[m][r] * B(r, j) over a 64 x 64 tile of y (grid: J / 64,
 * M / 64), 256 threads with 4 x 4 outputs each. Forward: j = n, r = k,
 * B(r, j) = W[n][k]; transposed role: j = k, r = n, B(r, j) = W[r][j]. */
extern "C" __global__ void __launch_bounds__(256)
    rlx_dqmm_tiled(char* arena, rlxk_dqmm p, rlxk_state* st) {
  __shared__ float As[DK][DT + 4];
  __shared__ float Bs[DK][DT + 4];
  const int64_t J = p.transposed ? p.K : p.N, R = p.transposed ? p.N : p.K;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = (int64_t)blockIdx.y * DT, j0 = (int64_t)blockIdx.x * DT;
  const char* X = at(arena, p.xoff);
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  for (int64_t r0 = 0; r0 < R; r0 += DK) {
    for (int idx = threadIdx.x; idx < DT * DK; idx += 256) {
      int mm = idx / DK, rr = idx % DK; /* x: consecutive threads walk r */
      int64_t m = m0 + mm, r = r0 + rr;
      As[rr][mm] = m < p.M && r < R ? ld_f32(X, p.xdt, m * R + r) : 0.0f;
      /* W: forward, consecutive threads walk k inside one row (its blocks);
       * transposed, they walk k (= j) of one row r */
      int jj = p.transposed ? idx % DT : idx / DK, rb = p.transposed ? idx / DT : idx % DK;
      int64_t j = j0 + jj, rw = r0 + rb;
      float w = 0.0f;
      if (j < J && rw < R) w = p.transposed ? dq_elem(arena, p, rw, j) : dq_elem(arena, p, j, rw);
      Bs[rb][jj] = w;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < DK; kk++) {
      float4 a4 = *(const float4*)&As[kk][ty * 4];
      float4 b4 = *(const float4*)&Bs[kk][tx * 4];
      float av[4] = {a4.x, a4.y, a4.z, a4.w}, bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  char* Y = atw(arena, p.ooff);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    int64_t m = m0 + ty * 4 + i;
    if (m >= p.M) continue;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      int64_t jn = j0 + tx * 4 + j;
      if (jn < J) st_f32(Y, p.odt, m * J + jn, acc[i][j]);
    }
  }
}

/* ------------------------------------------------------------------ tensor cores */

#define QM_BM 64 /* x rows of a block */
#define QM_BN 64 /* W rows of a block */
#define QM_BK 32 /* reduction step */
#define QM_LD (QM_BK + 8) /* shared row stride in halves: 80 bytes, ldmatrix rows 16-byte aligned */

/* Prefill with x in f16 / bf16 (forward role): y[m][n] = sum_k x[m][k] W[n][k]
 * on mma.sync m16n8k16 with f32 accumulation. Grid (N / 64, M / 64), 4
 * warps, each a 32 x 32 quarter of the tile. Each K step copies the x tile
 * and dequantizes the W tile (64 rows x 32 k, quant.h's rounding, then to
 * x's half type) into shared memory: W is never materialised beyond one
 * tile. */
template <bool BF>
__device__ void dqmm_mma(char* arena, const rlxk_dqmm& p) {
  __shared__ __align__(16) uint16_t As[QM_BM][QM_LD];
  __shared__ __align__(16) uint16_t Bs[QM_BN][QM_LD];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int64_t m0 = (int64_t)blockIdx.y * QM_BM, n0 = (int64_t)blockIdx.x * QM_BN;
  const uint16_t* X = (const uint16_t*)at(arena, p.xoff);
  float c[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) c[i][j][e] = 0.0f;
  const int lr = threadIdx.x / 2, lk = (threadIdx.x % 2) * 16; /* the 16 elements a thread fills */
  for (int64_t k0 = 0; k0 < p.K; k0 += QM_BK) {
    int64_t m = m0 + lr, n = n0 + lr;
#pragma unroll 4
    for (int e = 0; e < 16; e += 2) {
      int64_t k = k0 + lk + e;
      uint32_t xa = m < p.M && k < p.K ? X[m * p.K + k] : 0;
      uint32_t xb = m < p.M && k + 1 < p.K ? X[m * p.K + k + 1] : 0;
      *(uint32_t*)&As[lr][lk + e] = xa | xb << 16;
      float wa = n < p.N && k < p.K ? dq_elem(arena, p, n, k) : 0.0f;
      float wb = n < p.N && k + 1 < p.K ? dq_elem(arena, p, n, k + 1) : 0.0f;
      *(uint32_t*)&Bs[lr][lk + e] = pack2<BF>(wa, wb);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < QM_BK; kk += 16) {
      uint32_t a[2][4], b[4][2];
#pragma unroll
      for (int i = 0; i < 2; i++)
        ldmatrix_x4(a[i], &As[wm * 32 + i * 16 + lane % 16][kk + (lane / 16) * 8]);
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        uint32_t r[4];
        int q = lane / 8;
        ldmatrix_x4(r, &Bs[wn * 32 + j * 8 + lane % 8 + (q / 2) * 8][kk + (q % 2) * 8]);
        b[j][0] = r[0], b[j][1] = r[1], b[j + 1][0] = r[2], b[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) mma16816<BF>(c[i][j], a[i], b[j][0], b[j][1]);
    }
    __syncthreads();
  }
  char* Y = atw(arena, p.ooff);
#pragma unroll
  for (int i = 0; i < 2; i++)
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        int64_t m = m0 + wm * 32 + i * 16 + lane / 4 + (e / 2) * 8;
        int64_t n = n0 + wn * 32 + j * 8 + (lane % 4) * 2 + e % 2;
        if (m < p.M && n < p.N) st_f32(Y, p.odt, m * p.N + n, c[i][j][e]);
      }
}

extern "C" __global__ void __launch_bounds__(128)
    rlx_dqmm_mma_f16(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_mma<false>(arena, p);
}
extern "C" __global__ void __launch_bounds__(128)
    rlx_dqmm_mma_bf16(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_mma<true>(arena, p);
}

/* ------------------------------------------------------------------ panel */

/* Prefill (x rows > the GEMV's): W's rows n0 .. n0 + prows dequantized into
 * a panel [prows, K] of x's dtype (cuda_launch.c then has cuBLASLt multiply
 * x by it: exact f32 SGEMM for f32 x, tensor cores for f16 / bf16 x). The
 * panel is one slice of W at a time in a per-stream buffer, never a copy
 * of the whole weight. Values are rounded as quant.h's decoders round
 * (w = a * c + b, two roundings, as dq_elem), then once to the panel's
 * type. */

/* Stores 32 consecutive values of the panel (f32: 8 x 16 bytes; f16 /
 * bf16: 4 x 16 bytes). o: 64-byte aligned. */
template <int T> /* 0: f32, 1: f16, 2: bf16 */
RLXK_DEV void store32(uint64_t o, const float* w) {
  if constexpr (T == 0) {
#pragma unroll
    for (int q = 0; q < 8; q++)
      ((float4*)(uintptr_t)o)[q] = make_float4(w[4 * q], w[4 * q + 1], w[4 * q + 2], w[4 * q + 3]);
  } else {
#pragma unroll
    for (int q = 0; q < 4; q++)
      ((uint4*)(uintptr_t)o)[q] =
          make_uint4(pack2<T == 2>(w[8 * q], w[8 * q + 1]), pack2<T == 2>(w[8 * q + 2], w[8 * q + 3]),
                     pack2<T == 2>(w[8 * q + 4], w[8 * q + 5]), pack2<T == 2>(w[8 * q + 6], w[8 * q + 7]));
  }
}

#define PT_SUBS 256 /* 32-element sub-blocks a block decodes per tile: one per thread */
#define PT_SMEM (PT_SUBS * 34 + 48) /* the largest tile's bytes (Q8_0: 34 a sub-block) + slack */

/* GGUF schemes. The panel's W rows are contiguous bytes, and so are its
 * sub-blocks in (row, k) order, which is also the panel's element order:
 * sub-block t of the panel becomes elements 32 t .. 32 t + 31. Each tile
 * of PT_SUBS sub-blocks copies its blocks' bytes into shared memory with
 * aligned 16-byte loads (coalesced; the first and last may cover bytes
 * beside the tile: the arena is allocated in whole 256-byte units), then
 * each thread decodes one sub-block there (decode_sub, as the GEMV) and
 * stores its 32 values. */
template <int S, int T>
__device__ void panel_gguf(const char* arena, const rlxk_dqmm& p, uint8_t* sm) {
  constexpr int SPB = gguf<S>::E / 32, BB = gguf<S>::B;
  const int64_t total = p.prows * (p.K / 32);
  const uint8_t* W = (const uint8_t*)at(arena, p.woff) + p.n0 * p.row_bytes;
  const int es = T == 0 ? 4 : 2;
  for (int64_t t0 = (int64_t)blockIdx.x * PT_SUBS; t0 < total; t0 += (int64_t)gridDim.x * PT_SUBS) {
    int64_t t1 = t0 + PT_SUBS < total ? t0 + PT_SUBS : total;
    const uint8_t* base = W + t0 / SPB * BB;
    const uint8_t* a16 = base - ((uintptr_t)base & 15);
    int lead = (int)(base - a16), n16 = (lead + (int)((t1 - t0) / SPB) * BB + 15) / 16;
    for (int k = threadIdx.x; k < n16; k += blockDim.x)
      ((uint4*)(sm + 16))[k] = __ldg((const uint4*)a16 + k);
    __syncthreads();
    int64_t t = t0 + threadIdx.x;
    if (t < t1) {
      float c[32], a[2], b[2], w[32];
      decode_sub<S>(sm + 16 + lead + (int)((t / SPB - t0 / SPB) * BB), (int)(t % SPB), c, a, b);
#pragma unroll
      for (int j = 0; j < 32; j++) w[j] = __fadd_rn(__fmul_rn(a[j / 16], c[j]), b[j / 16]);
      store32<T>(p.panel + (uint64_t)t * 32u * (uint64_t)es, w);
    }
    __syncthreads();
  }
}

/* The own schemes (any group): each thread writes 8 consecutive k of one
 * row (K % 8 == 0) from dq_elem. */
template <int T>
__device__ void panel_elems(const char* arena, const rlxk_dqmm& p) {
  const int64_t per_row = p.K / 8, total = p.prows * per_row;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / per_row, k = (i - r * per_row) * 8;
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; e++) v[e] = dq_elem(arena, p, p.n0 + r, k + e);
    if constexpr (T == 0) {
      float4* o = (float4*)(uintptr_t)(p.panel + (uint64_t)(r * p.K + k) * 4u);
      o[0] = make_float4(v[0], v[1], v[2], v[3]);
      o[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
      uint4* o = (uint4*)(uintptr_t)(p.panel + (uint64_t)(r * p.K + k) * 2u);
      *o = make_uint4(pack2<T == 2>(v[0], v[1]), pack2<T == 2>(v[2], v[3]),
                      pack2<T == 2>(v[4], v[5]), pack2<T == 2>(v[6], v[7]));
    }
  }
}

template <int T>
__device__ void dqmm_panel(const char* arena, const rlxk_dqmm& p) {
  __shared__ __align__(16) uint8_t sm[PT_SMEM];
  switch (p.scheme) {
    case RLX_QUANT_Q4_0: return panel_gguf<RLX_QUANT_Q4_0, T>(arena, p, sm);
    case RLX_QUANT_Q4_1: return panel_gguf<RLX_QUANT_Q4_1, T>(arena, p, sm);
    case RLX_QUANT_Q5_0: return panel_gguf<RLX_QUANT_Q5_0, T>(arena, p, sm);
    case RLX_QUANT_Q5_1: return panel_gguf<RLX_QUANT_Q5_1, T>(arena, p, sm);
    case RLX_QUANT_Q8_0: return panel_gguf<RLX_QUANT_Q8_0, T>(arena, p, sm);
    case RLX_QUANT_Q2_K: return panel_gguf<RLX_QUANT_Q2_K, T>(arena, p, sm);
    case RLX_QUANT_Q3_K: return panel_gguf<RLX_QUANT_Q3_K, T>(arena, p, sm);
    case RLX_QUANT_Q4_K: return panel_gguf<RLX_QUANT_Q4_K, T>(arena, p, sm);
    case RLX_QUANT_Q5_K: return panel_gguf<RLX_QUANT_Q5_K, T>(arena, p, sm);
    case RLX_QUANT_Q6_K: return panel_gguf<RLX_QUANT_Q6_K, T>(arena, p, sm);
    default: return panel_elems<T>(arena, p);
  }
}

extern "C" __global__ void __launch_bounds__(256)
    rlx_dqmm_panel_f32(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_panel<0>(arena, p);
}
extern "C" __global__ void __launch_bounds__(256)
    rlx_dqmm_panel_f16(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_panel<1>(arena, p);
}
extern "C" __global__ void __launch_bounds__(256)
    rlx_dqmm_panel_bf16(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_panel<2>(arena, p);
}
