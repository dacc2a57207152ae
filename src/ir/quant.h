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
  int16_t f16[2];      /* byte offsets of a GGUF block's f16 scale fields (d, m / dmin); -1 none */
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
  for (int j = 0; j < 16; j++) {
    float lo = d * (float)(b[4 + j] & 15), hi = d * (float)(b[4 + j] >> 4);
    out[j] = lo + m;
    out[j + 16] = hi + m;
  }
}

RLX_HD uint32_t rlx_quant_u32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q5_0 / Q5_1: the 5-bit codes of the 32 elements (qh bit j is element j's
 * fifth bit). */
RLX_HD void rlx_quant_q5_codes(uint32_t qh, const uint8_t* qs, int* q) {
  for (int j = 0; j < 16; j++) {
    q[j] = (qs[j] & 15) | (int)((qh >> j) & 1) << 4;
    q[j + 16] = (qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
  }
}

RLX_HD void rlx_dequant_q5_0(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b);
  int q[32];
  rlx_quant_q5_codes(rlx_quant_u32(b + 2), b + 6, q);
  for (int j = 0; j < 32; j++) out[j] = d * (float)(q[j] - 16);
}

RLX_HD void rlx_dequant_q5_1(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b), m = rlx_quant_f16(b + 2);
  int q[32];
  rlx_quant_q5_codes(rlx_quant_u32(b + 4), b + 8, q);
  for (int j = 0; j < 32; j++) {
    float t = d * (float)q[j];
    out[j] = t + m;
  }
}

RLX_HD void rlx_dequant_q8_0(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b);
  for (int j = 0; j < 32; j++) out[j] = (float)(int8_t)b[2 + j] * d;
}

/* The K-quants walk their elements as e = 128 h + 32 s + 16 half + j: the
 * 2-bit fields of Q2_K / Q3_K (and Q6_K's high bits) are bits 2s of byte
 * 32 h + 16 half + j, and each run of 16 shares one scale (sub-block e / 16). */

RLX_HD void rlx_dequant_q2_k(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b + 80), dmin = rlx_quant_f16(b + 82);
  for (int h = 0; h < 2; h++)
    for (int s = 0; s < 4; s++)
      for (int half = 0; half < 2; half++) {
        int sc = b[8 * h + 2 * s + half];
        float dl = d * (float)(sc & 15), ml = dmin * (float)(sc >> 4);
        const uint8_t* q = b + 16 + 32 * h + 16 * half;
        float* o = out + 128 * h + 32 * s + 16 * half;
        for (int j = 0; j < 16; j++) {
          float t = dl * (float)((q[j] >> (2 * s)) & 3);
          o[j] = t - ml;
        }
      }
}

/* Q3_K's 6-bit scale i (0..15), minus 32. */
RLX_HD int rlx_quant_q3k_scale(const uint8_t* s, int i) {
  int lo = (s[i % 8] >> (4 * (i / 8))) & 15, hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (lo | hi << 4) - 32;
}

/* Q3_K: the third bit of element e is bit e / 32 of hmask[e % 32]; clear
 * means minus 4. */
RLX_HD void rlx_dequant_q3_k(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b + 108);
  for (int h = 0; h < 2; h++)
    for (int s = 0; s < 4; s++)
      for (int half = 0; half < 2; half++) {
        float dl = d * (float)rlx_quant_q3k_scale(b + 96, 8 * h + 2 * s + half);
        const uint8_t *q = b + 32 + 32 * h + 16 * half, *hm = b + 16 * half;
        float* o = out + 128 * h + 32 * s + 16 * half;
        int bit = 4 * h + s;
        for (int j = 0; j < 16; j++) {
          int v = ((q[j] >> (2 * s)) & 3) - (((hm[j] >> bit) & 1) ? 0 : 4);
          o[j] = dl * (float)v;
        }
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

/* Q4_K (qh == NULL) and Q5_K: sub-block i (32 elements) takes nibble i % 2
 * of qs[32 (i / 2) + j] and bit i of qh[j]. */
RLX_HD void rlx_dequant_k4_k5(const uint8_t* b, const uint8_t* qh, const uint8_t* qs,
                              float* out) {
  float d = rlx_quant_f16(b), dmin = rlx_quant_f16(b + 2);
  for (int i = 0; i < 8; i++) {
    int sc, m;
    rlx_quant_k4_scale_min(b + 4, i, &sc, &m);
    float ds = d * (float)sc, dm = dmin * (float)m;
    const uint8_t* q = qs + 32 * (i / 2);
    int shift = 4 * (i % 2);
    float* o = out + 32 * i;
    if (!qh) {
      for (int j = 0; j < 32; j++) {
        float t = ds * (float)((q[j] >> shift) & 15);
        o[j] = t - dm;
      }
      continue;
    }
    for (int j = 0; j < 32; j++) {
      float t = ds * (float)(((q[j] >> shift) & 15) | ((qh[j] >> i) & 1) << 4);
      o[j] = t - dm;
    }
  }
}

/* Q6_K: element e = 128 h + 32 s + 16 half + j has its low nibble in
 * nibble s / 2 of ql[64 h + 32 (s % 2) + 16 half + j] and its high 2 bits
 * at bits 2s of qh[32 h + 16 half + j]; int8 scale e / 16. */
RLX_HD void rlx_dequant_q6_k(const uint8_t* b, float* out) {
  float d = rlx_quant_f16(b + 208);
  for (int h = 0; h < 2; h++)
    for (int s = 0; s < 4; s++)
      for (int half = 0; half < 2; half++) {
        float ds = d * (float)(int8_t)b[192 + 8 * h + 2 * s + half];
        const uint8_t* lo = b + 64 * h + 32 * (s % 2) + 16 * half;
        const uint8_t* hi = b + 128 + 32 * h + 16 * half;
        float* o = out + 128 * h + 32 * s + 16 * half;
        for (int j = 0; j < 16; j++) {
          int q = ((lo[j] >> (4 * (s / 2))) & 15) | ((hi[j] >> (2 * s)) & 3) << 4;
          o[j] = ds * (float)(q - 32);
        }
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
  /* one loop per scheme: the switch stays out of the element loop */
  switch (scheme) {
    case RLX_QUANT_INT8_SYM:
      for (int32_t i = 0; i < group; i++) out[i] = (float)(int8_t)g[i] * scale;
      return;
    case RLX_QUANT_INT8_ASYM:
      for (int32_t i = 0; i < group; i++) out[i] = (float)((int32_t)g[i] - zero) * scale;
      return;
    case RLX_QUANT_INT4_SYM: /* a signed nibble: (n ^ 8) - 8 */
      for (int32_t i = 0; i < group; i++)
        out[i] = (float)((((g[i / 2] >> (4 * (i & 1))) & 15) ^ 8) - 8) * scale;
      return;
    case RLX_QUANT_INT4_ASYM:
      for (int32_t i = 0; i < group; i++)
        out[i] = (float)((int32_t)((g[i / 2] >> (4 * (i & 1))) & 15) - zero) * scale;
      return;
    case RLX_QUANT_FP8_E4M3:
    case RLX_QUANT_FP8_E5M2: {
      rlx_dtype t = scheme == RLX_QUANT_FP8_E4M3 ? RLX_F8E4M3FN : RLX_F8E5M2;
      for (int32_t i = 0; i < group; i++) out[i] = (float)rlx_f8_decode(t, g[i]) * scale;
      return;
    }
    case RLX_QUANT_NVFP4:
      for (int32_t i = 0; i < group; i++)
        out[i] = rlx_quant_e2m1((uint32_t)(g[i / 2] >> (4 * (i & 1))) & 15) * scale;
      return;
    default: return;
  }
}

#endif
