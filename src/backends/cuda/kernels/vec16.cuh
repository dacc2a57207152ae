/* 16-byte vector loads and stores of float rows: W = 4 f32 or W = 8
 * f16 / bf16 elements, converted to and from f32 with the reference's
 * rounding (round to nearest even). For row kernels whose rows the host
 * found 16-byte aligned; `i` counts vectors, not elements. */
#pragma once

#include "common.cuh"

RLXK_DEV float h16_to_f32(uint16_t h, int dt) {
  return dt == RLX_BF16 ? __bfloat162float(__ushort_as_bfloat16(h)) : __half2float(__ushort_as_half(h));
}

RLXK_DEV uint16_t f32_to_h16(float v, int dt) {
  return dt == RLX_BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v))
                        : __half_as_ushort(__float2half_rn(v));
}

template <int W>
RLXK_DEV void ldv(const char* base, int64_t i, int dt, float* f) {
  if constexpr (W == 4) {
    float4 v = ((const float4*)base)[i];
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
  } else {
    uint4 raw = ((const uint4*)base)[i];
    const uint16_t* h = (const uint16_t*)&raw;
#pragma unroll
    for (int k = 0; k < 8; k++) f[k] = h16_to_f32(h[k], dt);
  }
}

template <int W>
RLXK_DEV void stv(char* base, int64_t i, int dt, const float* f) {
  if constexpr (W == 4) {
    ((float4*)base)[i] = make_float4(f[0], f[1], f[2], f[3]);
  } else {
    uint4 raw;
    uint16_t* h = (uint16_t*)&raw;
#pragma unroll
    for (int k = 0; k < 8; k++) h[k] = f32_to_h16(f[k], dt);
    ((uint4*)base)[i] = raw;
  }
}

/* f rounded to dt's precision (f32: unchanged). */
template <int W>
RLXK_DEV void roundv(float* f, int dt) {
  if constexpr (W == 8) {
#pragma unroll
    for (int k = 0; k < 8; k++) f[k] = h16_to_f32(f32_to_h16(f[k], dt), dt);
  }
}
