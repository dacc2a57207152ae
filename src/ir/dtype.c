#include "ir/dtype.h"

#include <math.h>
#include <string.h>

#include "base/scalar_math.h"
#include "ir/graph.h"

size_t rlx_dtype_size(rlx_dtype t) {
  switch (t) {
    case RLX_F32: case RLX_I32: case RLX_U32: return 4;
    case RLX_F16: case RLX_BF16: case RLX_I16: case RLX_U16: return 2;
    case RLX_F64: case RLX_I64: case RLX_U64: return 8;
    case RLX_I8: case RLX_U8: case RLX_BOOL: return 1;
    case RLX_F8E4M3FN: case RLX_F8E5M2: case RLX_F8E4M3FNUZ: case RLX_F8E5M2FNUZ: return 1;
    default: return 0;
  }
}

const char* rlx_dtype_name(rlx_dtype t) {
  static const char* names[RLX_DTYPE_COUNT] = {
      "f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool",
      "i16", "u16", "u32", "u64", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz"};
  return (unsigned)t < RLX_DTYPE_COUNT ? names[t] : "?";
}

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float rlx_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
  if (exp == 0) {                                                      /* zero / subnormal */
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t rlx_f32_to_f16(float f) {
  uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds past max: inf */
  if (a < 0x38800000u) {                                   /* subnormal or zero in f16 */
    /* value = a_float; f16 subnormal unit is 2^-24: round to nearest even */
    float v = bits_f32(a) * 16777216.0f;                   /* / 2^-24 */
    uint32_t m = (uint32_t)lrintf(v);                      /* default rounding: even */
    return (uint16_t)(sign | m);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);              /* round to nearest even */
  r -= 0x38000000u;                                         /* rebias 127 -> 15 */
  return (uint16_t)(sign | (r >> 13));
}

float rlx_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t rlx_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

double rlx_load_f64(const void* base, rlx_dtype t, int64_t i) {
  switch (t) {
    case RLX_F32: return ((const float*)base)[i];
    case RLX_F16: return rlx_f16_to_f32(((const uint16_t*)base)[i]);
    case RLX_BF16: return rlx_bf16_to_f32(((const uint16_t*)base)[i]);
    case RLX_F64: return ((const double*)base)[i];
    case RLX_I8: return ((const int8_t*)base)[i];
    case RLX_U8: return ((const uint8_t*)base)[i];
    case RLX_I32: return ((const int32_t*)base)[i];
    case RLX_I64: return (double)((const int64_t*)base)[i];
    case RLX_BOOL: return ((const uint8_t*)base)[i] != 0;
    case RLX_I16: return ((const int16_t*)base)[i];
    case RLX_U16: return ((const uint16_t*)base)[i];
    case RLX_U32: return ((const uint32_t*)base)[i];
    case RLX_U64: return (double)((const uint64_t*)base)[i];
    case RLX_F8E4M3FN: case RLX_F8E5M2: case RLX_F8E4M3FNUZ: case RLX_F8E5M2FNUZ:
      return rlx_f8_decode(t, ((const uint8_t*)base)[i]);
    default: return 0;
  }
}

void rlx_store_f64(void* base, rlx_dtype t, int64_t i, double v) {
  switch (t) {
    case RLX_F32: ((float*)base)[i] = (float)v; break;
    case RLX_F16: ((uint16_t*)base)[i] = rlx_f32_to_f16((float)v); break;
    case RLX_BF16: ((uint16_t*)base)[i] = rlx_f32_to_bf16((float)v); break;
    case RLX_F64: ((double*)base)[i] = v; break;
    case RLX_I8: ((int8_t*)base)[i] = (int8_t)rlx_saturate_i64(v, -128, 127); break;
    case RLX_U8: ((uint8_t*)base)[i] = (uint8_t)rlx_saturate_i64(v, 0, 255); break;
    case RLX_I32: ((int32_t*)base)[i] = (int32_t)rlx_saturate_i64(v, -2147483648.0, 2147483647.0); break;
    case RLX_I64:
      ((int64_t*)base)[i] = rlx_saturate_i64(v, RLX_I64_LO, RLX_I64_HI);
      break;
    case RLX_BOOL: ((uint8_t*)base)[i] = v != 0; break;
    case RLX_I16: ((int16_t*)base)[i] = (int16_t)rlx_saturate_i64(v, -32768, 32767); break;
    case RLX_U16: ((uint16_t*)base)[i] = (uint16_t)rlx_saturate_i64(v, 0, 65535); break;
    case RLX_U32: ((uint32_t*)base)[i] = (uint32_t)rlx_saturate_i64(v, 0, 4294967295.0); break;
    case RLX_U64: ((uint64_t*)base)[i] = rlx_saturate_u64(v); break;
    case RLX_F8E4M3FN: case RLX_F8E5M2: case RLX_F8E4M3FNUZ: case RLX_F8E5M2FNUZ:
      ((uint8_t*)base)[i] = rlx_f8_encode(t, v, 1);
      break;
    default: break;
  }
}

int64_t rlx_load_i64(const void* base, rlx_dtype t, int64_t i) {
  switch (t) {
    case RLX_I8: return ((const int8_t*)base)[i];
    case RLX_U8: case RLX_BOOL: return ((const uint8_t*)base)[i];
    case RLX_I32: return ((const int32_t*)base)[i];
    case RLX_I64: return ((const int64_t*)base)[i];
    case RLX_I16: return ((const int16_t*)base)[i];
    case RLX_U16: return ((const uint16_t*)base)[i];
    case RLX_U32: return ((const uint32_t*)base)[i];
    case RLX_U64: return (int64_t)((const uint64_t*)base)[i]; /* the bits: integer math wraps */
    default: return rlx_saturate_i64(rlx_load_f64(base, t, i), RLX_I64_LO, RLX_I64_HI);
  }
}

void rlx_store_i64(void* base, rlx_dtype t, int64_t i, int64_t v) {
  switch (t) {
    case RLX_I8: ((int8_t*)base)[i] = (int8_t)v; break;
    case RLX_U8: ((uint8_t*)base)[i] = (uint8_t)v; break;
    case RLX_BOOL: ((uint8_t*)base)[i] = v != 0; break;
    case RLX_I32: ((int32_t*)base)[i] = (int32_t)v; break;
    case RLX_I64: ((int64_t*)base)[i] = v; break;
    case RLX_I16: ((int16_t*)base)[i] = (int16_t)v; break;
    case RLX_U16: ((uint16_t*)base)[i] = (uint16_t)v; break;
    case RLX_U32: ((uint32_t*)base)[i] = (uint32_t)v; break;
    case RLX_U64: ((uint64_t*)base)[i] = (uint64_t)v; break;
    default: rlx_store_f64(base, t, i, (double)v); break;
  }
}

static int is_intlike(rlx_dtype t) { return rlx_dtype_is_int(t) || t == RLX_BOOL; }

void rlx_convert(void* dst, rlx_dtype dt, const void* src, rlx_dtype st, int64_t n) {
  if (dt == st) {
    memcpy(dst, src, (size_t)n * rlx_dtype_size(dt));
    return;
  }
  if (is_intlike(dt) && is_intlike(st)) {
    for (int64_t i = 0; i < n; i++) rlx_store_i64(dst, dt, i, rlx_load_i64(src, st, i));
    return;
  }
  for (int64_t i = 0; i < n; i++) rlx_store_f64(dst, dt, i, rlx_load_f64(src, st, i));
}

rlx_status rlx_dtype_convert(void* dst, rlx_dtype dst_dtype, const void* src,
                             rlx_dtype src_dtype, int64_t n) {
  if ((unsigned)dst_dtype >= RLX_DTYPE_COUNT || (unsigned)src_dtype >= RLX_DTYPE_COUNT || n < 0 ||
      (n > 0 && (!dst || !src)))
    return RLX_INVALID_ARGUMENT;
  if (n > 0) rlx_convert(dst, dst_dtype, src, src_dtype, n);
  return RLX_OK;
}
