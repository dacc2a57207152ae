/* The scheme table of DequantMatMul (quant.h), its public queries, and the
 * quantizers of the schemes whose scales are kept apart (rlx_quantize_rows,
 * rlx.h states the rules). GGUF blocks are never made here: they come from
 * GGUF files as they are. */
#include "ir/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char* const rlx_quant_names[RLX_QUANT_COUNT] = {
    "q4_0",     "q4_1",      "q5_0",     "q5_1",      "q8_0",     "q2_k",
    "q3_k",     "q4_k",      "q5_k",     "q6_k",      "int8_sym", "int8_asym",
    "int4_sym", "int4_asym", "fp8_e4m3", "fp8_e5m2", "nvfp4",
};

const rlx_quant_info rlx_quant_table[RLX_QUANT_COUNT] = {
    [RLX_QUANT_Q4_0] = {32, 18, 32, RLX_QI_NONE, {0, -1}},
    [RLX_QUANT_Q4_1] = {32, 20, 32, RLX_QI_NONE, {0, 2}},
    [RLX_QUANT_Q5_0] = {32, 22, 32, RLX_QI_NONE, {0, -1}},
    [RLX_QUANT_Q5_1] = {32, 24, 32, RLX_QI_NONE, {0, 2}},
    [RLX_QUANT_Q8_0] = {32, 34, 32, RLX_QI_NONE, {0, -1}},
    [RLX_QUANT_Q2_K] = {256, 84, 256, RLX_QI_NONE, {80, 82}},
    [RLX_QUANT_Q3_K] = {256, 110, 256, RLX_QI_NONE, {108, -1}},
    [RLX_QUANT_Q4_K] = {256, 144, 256, RLX_QI_NONE, {0, 2}},
    [RLX_QUANT_Q5_K] = {256, 176, 256, RLX_QI_NONE, {0, 2}},
    [RLX_QUANT_Q6_K] = {256, 210, 256, RLX_QI_NONE, {208, -1}},
    [RLX_QUANT_INT8_SYM] = {1, 1, 0, RLX_QI_SCALE, {-1, -1}},
    [RLX_QUANT_INT8_ASYM] = {1, 1, 0, RLX_QI_SCALE_ZERO, {-1, -1}},
    [RLX_QUANT_INT4_SYM] = {2, 1, 0, RLX_QI_SCALE, {-1, -1}},
    [RLX_QUANT_INT4_ASYM] = {2, 1, 0, RLX_QI_SCALE_ZERO, {-1, -1}},
    [RLX_QUANT_FP8_E4M3] = {1, 1, 0, RLX_QI_SCALE, {-1, -1}},
    [RLX_QUANT_FP8_E5M2] = {1, 1, 0, RLX_QI_SCALE, {-1, -1}},
    [RLX_QUANT_NVFP4] = {2, 1, 16, RLX_QI_SCALE_GLOBAL, {-1, -1}},
};

int rlx_quant_check(int32_t scheme, int64_t K, int32_t group, int64_t* row_bytes, char* msg,
                    size_t cap) {
  if (scheme < 0 || scheme >= RLX_QUANT_COUNT) {
    snprintf(msg, cap, "scheme %d is not a quantization scheme", (int)scheme);
    return 1;
  }
  const rlx_quant_info* q = &rlx_quant_table[scheme];
  int32_t g = rlx_quant_group(scheme, group);
  if (q->fixed_group && g != q->fixed_group) {
    snprintf(msg, cap, "%s has groups of %d elements, not %d", rlx_quant_names[scheme],
             (int)q->fixed_group, (int)g);
    return 1;
  }
  if (g < 1 || g % q->block != 0 || g > (1 << 20)) {
    snprintf(msg, cap, "%s needs a group of 1..%d elements%s, got %d",
             rlx_quant_names[scheme], 1 << 20, q->block == 2 ? " (even: two codes per byte)" : "",
             (int)g);
    return 1;
  }
  if (K < 1 || K % g != 0) {
    snprintf(msg, cap, "K = %lld is not a positive multiple of %s's group of %d", (long long)K,
             rlx_quant_names[scheme], (int)g);
    return 1;
  }
  if (row_bytes) *row_bytes = K / g * rlx_quant_group_bytes(scheme, g);
  return 0;
}

const char* rlx_quant_scheme_name(rlx_quant_scheme scheme) {
  return (unsigned)scheme < RLX_QUANT_COUNT ? rlx_quant_names[scheme] : NULL;
}

rlx_status rlx_quant_scheme_from_name(const char* name, rlx_quant_scheme* out) {
  if (!name || !out) return RLX_INVALID_ARGUMENT;
  for (int32_t s = 0; s < RLX_QUANT_COUNT; s++)
    if (strcmp(rlx_quant_names[s], name) == 0) {
      *out = (rlx_quant_scheme)s;
      return RLX_OK;
    }
  return RLX_NOT_FOUND;
}

rlx_status rlx_quant_row_bytes(rlx_quant_scheme scheme, int64_t K, int32_t group,
                               int64_t* out_bytes, char* out_error, size_t error_cap) {
  char msg[160];
  if (!out_bytes) return RLX_INVALID_ARGUMENT;
  if (rlx_quant_check((int32_t)scheme, K, group, out_bytes, msg, sizeof msg)) {
    if (out_error && error_cap) snprintf(out_error, error_cap, "%s", msg);
    return RLX_INVALID_ARGUMENT;
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ quantizers */

/* Round half to even in f32 (the current rounding mode is not trusted). */
static float round_even(float x) { return (float)rlx_round_half_even((double)x); }

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* Integer codes: SYM qmax 127 / 7, ASYM levels 255 / 15. */
static void quantize_int_group(int32_t scheme, const float* w, int32_t n, uint8_t* codes,
                               float* scale, uint8_t* zero) {
  int asym = scheme == RLX_QUANT_INT8_ASYM || scheme == RLX_QUANT_INT4_ASYM;
  int four = scheme == RLX_QUANT_INT4_SYM || scheme == RLX_QUANT_INT4_ASYM;
  float lo = 0.0f, hi = 0.0f, amax = 0.0f;
  for (int32_t i = 0; i < n; i++) {
    lo = w[i] < lo ? w[i] : lo;
    hi = w[i] > hi ? w[i] : hi;
    amax = fabsf(w[i]) > amax ? fabsf(w[i]) : amax;
  }
  float levels = four ? 15.0f : 255.0f, qmax = four ? 7.0f : 127.0f;
  float range = hi - lo;
  float s = asym ? range / levels : amax / qmax;
  float z = asym && s > 0.0f ? clampf(round_even(-lo / s), 0.0f, levels) : 0.0f;
  for (int32_t i = 0; i < n; i++) {
    float q = s > 0.0f ? round_even(w[i] / s) : 0.0f;
    q = asym ? clampf(q + z, 0.0f, levels) : clampf(q, four ? -8.0f : -127.0f, qmax);
    codes[i] = (uint8_t)(int32_t)q; /* two's complement for the signed codes */
  }
  *scale = s;
  if (zero) *zero = (uint8_t)z;
}

static void quantize_fp8_group(int32_t scheme, const float* w, int32_t n, uint8_t* codes,
                               float* scale) {
  rlx_dtype t = scheme == RLX_QUANT_FP8_E4M3 ? RLX_F8E4M3FN : RLX_F8E5M2;
  float amax = 0.0f;
  for (int32_t i = 0; i < n; i++) amax = fabsf(w[i]) > amax ? fabsf(w[i]) : amax;
  float s = amax / (t == RLX_F8E4M3FN ? 448.0f : 57344.0f);
  for (int32_t i = 0; i < n; i++) codes[i] = s > 0.0f ? rlx_f8_encode(t, w[i] / s, 1) : 0;
  *scale = s;
}

/* The E2M1 code nearest to v (ties to the even code). */
static uint8_t e2m1_code(float v) {
  float a = fabsf(v);
  uint8_t best = 0;
  for (uint8_t c = 1; c < 8; c++) {
    float d = fabsf(rlx_quant_e2m1(c) - a), db = fabsf(rlx_quant_e2m1(best) - a);
    if (d < db || (d == db && (c & 1) == 0)) best = c;
  }
  return (uint8_t)(best | (v < 0.0f && best ? 8 : 0));
}

static void quantize_nvfp4_group(const float* w, float global, uint8_t* codes, uint8_t* scale) {
  float amax = 0.0f;
  for (int32_t i = 0; i < 16; i++) amax = fabsf(w[i]) > amax ? fabsf(w[i]) : amax;
  float want = global > 0.0f ? amax / 6.0f / global : 0.0f;
  uint8_t sc = rlx_f8_encode(RLX_F8E4M3FN, want, 1);
  float s = rlx_quant_nvfp4_scale(sc, global);
  for (int32_t i = 0; i < 16; i++) codes[i] = s > 0.0f ? e2m1_code(w[i] / s) : 0;
  *scale = sc;
}

/* Packs n codes (one per byte) into the scheme's row bytes. */
static void pack_codes(int32_t scheme, const uint8_t* codes, int32_t n, uint8_t* out) {
  if (rlx_quant_table[scheme].block == 1) {
    memcpy(out, codes, (size_t)n);
    return;
  }
  for (int32_t i = 0; i < n; i += 2)
    out[i / 2] = (uint8_t)((codes[i] & 15) | (codes[i + 1] & 15) << 4);
}

rlx_status rlx_quantize_rows(rlx_quant_scheme scheme, int32_t group, const float* w, int64_t N,
                             int64_t K, void* w_out, void* scale_out, uint8_t* zero_out,
                             float* global_out) {
  char msg[160];
  int64_t row_bytes = 0;
  if (!w || !w_out || !scale_out || N < 0) return RLX_INVALID_ARGUMENT;
  if (rlx_quant_check((int32_t)scheme, K, group, &row_bytes, msg, sizeof msg) ||
      rlx_quant_is_gguf((int32_t)scheme))
    return RLX_INVALID_ARGUMENT;
  int32_t inputs = rlx_quant_table[scheme].inputs;
  if ((inputs == RLX_QI_SCALE_ZERO && !zero_out) || (inputs == RLX_QI_SCALE_GLOBAL && !global_out))
    return RLX_INVALID_ARGUMENT;
  int32_t g = rlx_quant_group((int32_t)scheme, group);
  int64_t gpr = K / g, gbytes = rlx_quant_group_bytes((int32_t)scheme, g);
  float global = 0.0f;
  if (scheme == RLX_QUANT_NVFP4) {
    for (int64_t i = 0; i < N * K; i++) global = fabsf(w[i]) > global ? fabsf(w[i]) : global;
    global = global / (448.0f * 6.0f);
    *global_out = global;
  }
  uint8_t* codes = malloc((size_t)g);
  if (!codes) return RLX_RESOURCE_EXHAUSTED;
  for (int64_t n = 0; n < N; n++)
    for (int64_t j = 0; j < gpr; j++) {
      const float* src = w + n * K + j * g;
      int64_t at = n * gpr + j;
      uint8_t* dst = (uint8_t*)w_out + n * row_bytes + j * gbytes;
      if (scheme == RLX_QUANT_NVFP4)
        quantize_nvfp4_group(src, global, codes, (uint8_t*)scale_out + at);
      else if (scheme == RLX_QUANT_FP8_E4M3 || scheme == RLX_QUANT_FP8_E5M2)
        quantize_fp8_group((int32_t)scheme, src, g, codes, (float*)scale_out + at);
      else
        quantize_int_group((int32_t)scheme, src, g, codes, (float*)scale_out + at,
                           zero_out ? zero_out + at : NULL);
      pack_codes((int32_t)scheme, codes, g, dst);
    }
  free(codes);
  return RLX_OK;
}
