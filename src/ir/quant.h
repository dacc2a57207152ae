/* DequantMatMul's quantization schemes, once: the table of what each scheme
 * stores (rlx_quant_table, quant.c) and the dequantization of one block /
 * group of a row as plain C. The CPU reference and the CPU fast paths call
 * these functions; GPU kernels mirror them line by line (the header is
 * RLX_HD, so CUDA may include it as is).
 *
 * Layouts (byte offsets inside one stored block; f16 fields little-endian;
 * element e of the block):
 *   Q4_0 (32 / 18 B): d f16 @0, qs[16] @2; e < 16 low nibble of qs[e],
 *     else high nibble of qs[e - 16]; w = d * (q - 8).
 *   Q4_1 (32 / 20 B): d @0, m @2, qs[16] @4; w = d * q + m.
 *   Q5_0 (32 / 22 B): d @0, qh u32 @2, qs[16] @6; the fifth bit of element
 *     e is bit e of qh; w = d * (q - 16).
 *   Q5_1 (32 / 24 B): d @0, m @2, qh @4, qs @8; w = d * q + m.
 *   Q8_0 (32 / 34 B): d @0, int8 qs[32] @2; w = q * d.
 *   Q2_K (256 / 84 B): scales[16] @0 (low nibble scale, high nibble min of
 *     each 16), qs[64] @16, d @80, dmin @82; 2-bit code of e: bits 2s of
 *     qs[32h + j] (h = e / 128, s = e % 128 / 32, j = e % 32);
 *     w = (d * sc) * q - dmin * m.
 *   Q3_K (256 / 110 B): hmask[32] @0, qs[64] @32, scales[12] @96, d @108;
 *     low 2 bits as Q2_K, the third bit is bit e / 32 of hmask[e % 32]
 *     (set: no offset, clear: minus 4); 6-bit scales (low nibbles in
 *     bytes 0..7, high 2-bit pairs in bytes 8..11) minus 32; w = (d * sc) * q.
 *   Q4_K (256 / 144 B): d @0, dmin @2, scales[12] @4 (eight 6-bit scales and
 *     mins of 32 elements), qs[128] @16; code of e: nibble (e / 32) % 2 of
 *     qs[32 (e / 64) + e % 32]; w = (d * sc) * q - dmin * m.
 *   Q5_K (256 / 176 B): as Q4_K with qh[32] @16, qs @48; fifth bit e / 32
 *     of qh[e % 32].
 *   Q6_K (256 / 210 B): ql[128] @0, qh[64] @128, int8 scales[16] @192,
 *     d @208; low nibble s = e % 128 / 64 of ql[64 h + e % 64], high 2 bits
 *     2s' (s' = e % 128 / 32) of qh[32 h + e % 32]; w = (d * sc) * (q - 32).
 *   Own schemes: a group of `group` elements, codes packed from byte 0
 *     (nibbles: element 2i low), scale (and zero point) given by the caller.
 * Every product and sum is rounded to f32 in the order written (separate
 * statements, so no compiler fuses them into an FMA in ISO C; nvcc kernels
 * must use __fmul_rn / __fadd_rn): that order is what gguf-py computes, and
 * tests/test_quant.c checks the results bit for bit against it. */
#ifndef RLX_IR_QUANT_H
#define RLX_IR_QUANT_H

#include <stdint.h>

#include "base/scalar_math.h"
#include "rlx.h"

/* What a scheme reads besides w. */
enum {
  RLX_QI_NONE = 0,         /* scales inside the blocks (GGUF) */
  RLX_QI_SCALE = 1,        /* scale [N, K / group] */
  RLX_QI_SCALE_ZERO = 2,   /* scale and u8 zero points [N, K / group] */
  RLX_QI_SCALE_GLOBAL = 3, /* u8 E4M3 scales [N, K / 16] and one f32 global scale */
};

typedef struct rlx_quant_info {
  int32_t block;       /* elements per stored unit: a GGUF block, 2 per byte for nibbles, 1 */
  int32_t block_bytes; /* bytes per stored unit */
  int32_t fixed_group; /* the group the scheme always has (GGUF block, NVFP4 16); 0: chosen */
  int32_t inputs;      /* RLX_QI_* */
} rlx_quant_info;

extern const rlx_quant_info rlx_quant_table[RLX_QUANT_COUNT];
/* Text names ("q4_k", "int8_sym"): the text format, messages, rlx.h. */
extern const char* const rlx_quant_names[RLX_QUANT_COUNT];

/* The group a node uses: `group`, or the scheme's fixed one for 0. */
static inline int32_t rlx_quant_group(int32_t scheme, int32_t group) {
  int32_t f = rlx_quant_table[scheme].fixed_group;
  return group == 0 && f ? f : group;
}
/* Bytes one group of `group` elements takes in a row. */
static inline int64_t rlx_quant_group_bytes(int32_t scheme, int32_t group) {
  const rlx_quant_info* q = &rlx_quant_table[scheme];
  return (int64_t)group / q->block * q->block_bytes;
}
static inline int rlx_quant_is_gguf(int32_t scheme) { return scheme <= RLX_QUANT_Q6_K; }

/* Checks (scheme, K, group) and gives the row's bytes; 0 on success, else
 * a message in msg. */
int rlx_quant_check(int32_t scheme, int64_t K, int32_t group, int64_t* row_bytes, char* msg,
                    size_t cap);

/* ------------------------------------------------------------------ scalars */

RLX_HD float rlx_quant_bits_f32(uint32_t bits) {
  union { uint32_t u; float f; } v;
  v.u = bits;
  return v.f;
}

/* IEEE half bits -> float, exact (subnormals, inf and NaN kept). */
RLX_HD float rlx_quant_f16(const uint8_t* p) {
  uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8;
  uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return rlx_quant_bits_f32(sign | 0x7f800000u | m << 13);
  if (e != 0) return rlx_quant_bits_f32(sign | (e + 112) << 23 | m << 13);
  if (m == 0) return rlx_quant_bits_f32(sign);
  uint32_t shift = 0;
  while (!(m & 0x400)) m <<= 1, shift++;
  return rlx_quant_bits_f32(sign | (113 - shift) << 23 | (m & 0x3ff) << 13);
}

/* E2M1 (NVFP4 element) code -> value: 0, 0.5, 1, 1.5, 2, 3, 4, 6, bit 3 the sign. */
RLX_HD float rlx_quant_e2m1(uint32_t code) {
  const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return code & 8 ? -mag[code & 7] : mag[code & 7];
}

/* NVFP4's effective scale of a 16: the E4M3 code's value times the global
 * scale, rounded to f32. */
RLX_HD float rlx_quant_nvfp4_scale(uint8_t code, float global) {
  return (float)rlx_f8_decode(RLX_F8E4M3FN, code) * global;
}

/* ------------------------------------------------------------------ GGUF blocks */

RLX_HD void rlx_dequant_q4_0(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b);
  for (int j = 0; j < 16; j++) {
    out[j] = d * (float)((b[2 + j] & 15) - 8);
    out[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
  }
}

RLX_HD void rlx_dequant_q4_1(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b), m = rlx_quant_f16(b + 2);
  for (int j = 0; j < 32; j++) {
    float t = d * (float)((b[4 + j % 16] >> (j / 16 * 4)) & 15);
    out[j] = t + m;
  }
}

RLX_HD uint32_t rlx_quant_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 5-bit code of element j of a Q5 block (qh, then 16 bytes of nibbles). */
RLX_HD int rlx_quant_q5_code(uint32_t qh, const uint8_t* qs, int j) {
  return ((qs[j % 16] >> (j / 16 * 4)) & 15) | (int)((qh >> j) & 1) << 4;
}

RLX_HD void rlx_dequant_q5_0(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b);
  uint32_t qh = rlx_quant_u32(b + 2);
  for (int j = 0; j < 32; j++) out[j] = d * (float)(rlx_quant_q5_code(qh, b + 6, j) - 16);
}

RLX_HD void rlx_dequant_q5_1(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b), m = rlx_quant_f16(b + 2);
  uint32_t qh = rlx_quant_u32(b + 4);
  for (int j = 0; j < 32; j++) {
    float t = d * (float)rlx_quant_q5_code(qh, b + 8, j);
    out[j] = t + m;
  }
}

RLX_HD void rlx_dequant_q8_0(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b);
  for (int j = 0; j < 32; j++) out[j] = (float)(int8_t)b[2 + j] * d;
}

/* The 2-bit field of element e in a K-quant's 64 bytes of 2-bit codes. */
RLX_HD int rlx_quant_k2(const uint8_t* qs, int e) {
  return (qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3;
}

RLX_HD void rlx_dequant_q2_k(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b + 80), dmin = rlx_quant_f16(b + 82);
  for (int e = 0; e < 256; e++) {
    int sc = b[e / 16];
    float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
    float t = dl * (float)rlx_quant_k2(b + 16, e);
    out[e] = t - ml;
  }
}

/* Q3_K's 6-bit scale i (0..15), minus 32. */
RLX_HD int rlx_quant_q3k_scale(const uint8_t* s, int i) {
  int lo = (s[i % 8] >> (4 * (i / 8))) & 15, hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (lo | hi << 4) - 32;
}

RLX_HD void rlx_dequant_q3_k(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b + 108);
  for (int e = 0; e < 256; e++) {
    float dl = d * (float)rlx_quant_q3k_scale(b + 96, e / 16);
    int high = (b[e % 32] >> (e / 32)) & 1;
    int q = rlx_quant_k2(b + 32, e) - (high ? 0 : 4);
    out[e] = dl * (float)q;
  }
}

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block i (0..7). */
RLX_HD void rlx_quant_k4_scale_min(const uint8_t* s, int i, int* sc, int* m) {
  if (i < 4) {
    *sc = s[i] & 63;
    *m = s[i + 4] & 63;
  } else {
    *sc = (s[i + 4] & 15) | ((s[i - 4] >> 2) & 0x30);
    *m = (s[i + 4] >> 4) | ((s[i] >> 2) & 0x30);
  }
}

/* The low nibble of element e in Q4_K / Q5_K's 128 bytes of nibbles. */
RLX_HD int rlx_quant_k4(const uint8_t* qs, int e) {
  return (qs[32 * (e / 64) + e % 32] >> (4 * (e / 32 % 2))) & 15;
}

/* Q4_K (qh == NULL) and Q5_K. */
RLX_HD void rlx_dequant_k4_k5(const uint8_t* b, const uint8_t* qh, const uint8_t* qs,
                              float* out) {
  float d = rlx_quant_f16(b), dmin = rlx_quant_f16(b + 2);
  for (int i = 0; i < 8; i++) {
    int sc, m;
    rlx_quant_k4_scale_min(b + 4, i, &sc, &m);
    float ds = d * (float)sc, dm = dmin * (float)m;
    for (int e = 32 * i; e < 32 * i + 32; e++) {
      int q = rlx_quant_k4(qs, e) | (qh ? ((qh[e % 32] >> (e / 32)) & 1) << 4 : 0);
      float t = ds * (float)q;
      out[e] = t - dm;
    }
  }
}

RLX_HD void rlx_dequant_q6_k(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b + 208);
  for (int e = 0; e < 256; e++) {
    int h = e / 128, r = e % 128;
    int lo = (b[64 * h + e % 64] >> (4 * (r / 64))) & 15;
    int hi = (b[128 + 32 * h + e % 32] >> (2 * (r / 32))) & 3;
    float ds = d * (float)(int8_t)b[192 + e / 16];
    out[e] = ds * (float)((lo | hi << 4) - 32);
  }
}

/* ------------------------------------------------------------------ one group */

/* Dequantizes one group of `group` elements of a row, starting at its first
 * byte g: a GGUF block (scale and zero unused), or a group of the own
 * schemes with its effective scale (NVFP4: rlx_quant_nvfp4_scale) and zero
 * point (the ASYM schemes). */
RLX_HD void rlx_dequant_group(int32_t scheme, const uint8_t* g, int32_t group, float scale,
                              int32_t zero, float* out) {
  switch (scheme) {
    case RLX_QUANT_Q4_0: rlx_dequant_q4_0(g, out); return;
    case RLX_QUANT_Q4_1: rlx_dequant_q4_1(g, out); return;
    case RLX_QUANT_Q5_0: rlx_dequant_q5_0(g, out); return;
    case RLX_QUANT_Q5_1: rlx_dequant_q5_1(g, out); return;
    case RLX_QUANT_Q8_0: rlx_dequant_q8_0(g, out); return;
    case RLX_QUANT_Q2_K: rlx_dequant_q2_k(g, out); return;
    case RLX_QUANT_Q3_K: rlx_dequant_q3_k(g, out); return;
    case RLX_QUANT_Q4_K: rlx_dequant_k4_k5(g, 0, g + 16, out); return;
    case RLX_QUANT_Q5_K: rlx_dequant_k4_k5(g, g + 16, g + 48, out); return;
    case RLX_QUANT_Q6_K: rlx_dequant_q6_k(g, out); return;
    default: break;
  }
  for (int32_t i = 0; i < group; i++) {
    int32_t nib = (g[i / 2] >> (4 * (i & 1))) & 15;
    float v = 0.0f;
    switch (scheme) {
      case RLX_QUANT_INT8_SYM: v = (float)(int8_t)g[i]; break;
      case RLX_QUANT_INT8_ASYM: v = (float)((int32_t)g[i] - zero); break;
      case RLX_QUANT_INT4_SYM: v = (float)(nib >= 8 ? nib - 16 : nib); break;
      case RLX_QUANT_INT4_ASYM: v = (float)(nib - zero); break;
      case RLX_QUANT_FP8_E4M3: v = (float)rlx_f8_decode(RLX_F8E4M3FN, g[i]); break;
      case RLX_QUANT_FP8_E5M2: v = (float)rlx_f8_decode(RLX_F8E5M2, g[i]); break;
      case RLX_QUANT_NVFP4: v = rlx_quant_e2m1((uint32_t)nib); break;
      default: break;
    }
    out[i] = v * scale;
  }
}

#endif
