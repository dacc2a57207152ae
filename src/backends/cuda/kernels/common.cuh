/* Device helpers shared by every kernel family: dtype loads/stores with the
 * CPU reference's exact conversion rules (src/ir/dtype.c), the scalar ops
 * (ref.c), warp/block reductions and run-time error reporting. */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "rlx.h"
#include "base/scalar_math.h"
#include "params.h"

#define RLXK_DEV __device__ __forceinline__

RLXK_DEV const char* at(const char* arena, uint64_t off) { return arena + off; }
RLXK_DEV char* atw(char* arena, uint64_t off) { return arena + off; }

RLXK_DEV bool is_intlike(int t) {
  return t == RLX_I8 || t == RLX_U8 || t == RLX_I32 || t == RLX_I64 || t == RLX_BOOL ||
         t == RLX_I16 || t == RLX_U16 || t == RLX_U32 || t == RLX_U64;
}

RLXK_DEV bool is_f8(int t) { return rlx_dtype_is_f8((rlx_dtype)t); }

/* ------------------------------------------------------------ loads */

RLXK_DEV double ld_f64(const char* b, int t, int64_t i) {
  switch (t) {
    case RLX_F32: return ((const float*)b)[i];
    case RLX_F16: return __half2float(((const __half*)b)[i]);
    case RLX_BF16: return __bfloat162float(((const __nv_bfloat16*)b)[i]);
    case RLX_F64: return ((const double*)b)[i];
    case RLX_I8: return ((const int8_t*)b)[i];
    case RLX_U8: return ((const uint8_t*)b)[i];
    case RLX_I32: return ((const int32_t*)b)[i];
    case RLX_I64: return (double)((const int64_t*)b)[i];
    case RLX_BOOL: return ((const uint8_t*)b)[i] != 0;
    case RLX_I16: return ((const int16_t*)b)[i];
    case RLX_U16: return ((const uint16_t*)b)[i];
    case RLX_U32: return ((const uint32_t*)b)[i];
    case RLX_U64: return (double)((const uint64_t*)b)[i];
    case RLX_F8E4M3FN: case RLX_F8E5M2: case RLX_F8E4M3FNUZ: case RLX_F8E5M2FNUZ:
      return rlx_f8_decode((rlx_dtype)t, ((const uint8_t*)b)[i]);
    default: return 0;
  }
}

/* Float compute types: f64 values narrow to float (used where the kernels
 * compute in f32: attention, norms, rope). */
RLXK_DEV float ld_f32(const char* b, int t, int64_t i) {
  switch (t) {
    case RLX_F32: return ((const float*)b)[i];
    case RLX_F16: return __half2float(((const __half*)b)[i]);
    case RLX_BF16: return __bfloat162float(((const __nv_bfloat16*)b)[i]);
    default: return (float)ld_f64(b, t, i);
  }
}

RLXK_DEV int64_t ld_i64(const char* b, int t, int64_t i) {
  switch (t) {
    case RLX_I8: return ((const int8_t*)b)[i];
    case RLX_U8: case RLX_BOOL: return ((const uint8_t*)b)[i];
    case RLX_I32: return ((const int32_t*)b)[i];
    case RLX_I64: return ((const int64_t*)b)[i];
    case RLX_I16: return ((const int16_t*)b)[i];
    case RLX_U16: return ((const uint16_t*)b)[i];
    case RLX_U32: return ((const uint32_t*)b)[i];
    case RLX_U64: return (int64_t)((const uint64_t*)b)[i];
    default: return rlx_saturate_i64(ld_f64(b, t, i), RLX_I64_LO, RLX_I64_HI);
  }
}

/* ------------------------------------------------------------ stores */

RLXK_DEV void st_f64(char* b, int t, int64_t i, double v) {
  switch (t) {
    case RLX_F32: ((float*)b)[i] = (float)v; break;
    /* Half stores round through f32 first, exactly as the reference does. */
    case RLX_F16: ((__half*)b)[i] = __float2half_rn((float)v); break;
    case RLX_BF16: ((__nv_bfloat16*)b)[i] = __float2bfloat16_rn((float)v); break;
    case RLX_F64: ((double*)b)[i] = v; break;
    case RLX_I8: ((int8_t*)b)[i] = (int8_t)rlx_saturate_i64(v, -128, 127); break;
    case RLX_U8: ((uint8_t*)b)[i] = (uint8_t)rlx_saturate_i64(v, 0, 255); break;
    case RLX_I32: ((int32_t*)b)[i] = (int32_t)rlx_saturate_i64(v, -2147483648.0, 2147483647.0); break;
    case RLX_I64:
      ((int64_t*)b)[i] = rlx_saturate_i64(v, RLX_I64_LO, RLX_I64_HI);
      break;
    case RLX_BOOL: ((uint8_t*)b)[i] = v != 0; break;
    case RLX_I16: ((int16_t*)b)[i] = (int16_t)rlx_saturate_i64(v, -32768, 32767); break;
    case RLX_U16: ((uint16_t*)b)[i] = (uint16_t)rlx_saturate_i64(v, 0, 65535); break;
    case RLX_U32: ((uint32_t*)b)[i] = (uint32_t)rlx_saturate_i64(v, 0, 4294967295.0); break;
    case RLX_U64: ((uint64_t*)b)[i] = rlx_saturate_u64(v); break;
    case RLX_F8E4M3FN: case RLX_F8E5M2: case RLX_F8E4M3FNUZ: case RLX_F8E5M2FNUZ:
      ((uint8_t*)b)[i] = rlx_f8_encode((rlx_dtype)t, v, 1);
      break;
    default: break;
  }
}

RLXK_DEV void st_f32(char* b, int t, int64_t i, float v) {
  switch (t) {
    case RLX_F32: ((float*)b)[i] = v; break;
    case RLX_F16: ((__half*)b)[i] = __float2half_rn(v); break;
    case RLX_BF16: ((__nv_bfloat16*)b)[i] = __float2bfloat16_rn(v); break;
    default: st_f64(b, t, i, (double)v); break;
  }
}

RLXK_DEV void st_i64(char* b, int t, int64_t i, int64_t v) {
  switch (t) {
    case RLX_I8: ((int8_t*)b)[i] = (int8_t)v; break;
    case RLX_U8: ((uint8_t*)b)[i] = (uint8_t)v; break;
    case RLX_BOOL: ((uint8_t*)b)[i] = v != 0; break;
    case RLX_I32: ((int32_t*)b)[i] = (int32_t)v; break;
    case RLX_I64: ((int64_t*)b)[i] = v; break;
    case RLX_I16: ((int16_t*)b)[i] = (int16_t)v; break;
    case RLX_U16: ((uint16_t*)b)[i] = (uint16_t)v; break;
    case RLX_U32: ((uint32_t*)b)[i] = (uint32_t)v; break;
    case RLX_U64: ((uint64_t*)b)[i] = (uint64_t)v; break;
    default: st_f64(b, t, i, (double)v); break;
  }
}

RLXK_DEV int dtype_size(int t) {
  switch (t) {
    case RLX_F32: case RLX_I32: case RLX_U32: return 4;
    case RLX_F16: case RLX_BF16: case RLX_I16: case RLX_U16: return 2;
    case RLX_F64: case RLX_I64: case RLX_U64: return 8;
    default: return 1; /* i8 u8 bool and the float8 types */
  }
}

/* One element of any dtype, converted as the reference's copy_element. */
RLXK_DEV void copy_elem(char* o, int ot, int64_t oi, const char* s, int stt, int64_t si) {
  if (ot == stt) {
    switch (dtype_size(ot)) {
      case 8: ((uint64_t*)o)[oi] = ((const uint64_t*)s)[si]; break;
      case 4: ((uint32_t*)o)[oi] = ((const uint32_t*)s)[si]; break;
      case 2: ((uint16_t*)o)[oi] = ((const uint16_t*)s)[si]; break;
      default: ((uint8_t*)o)[oi] = ((const uint8_t*)s)[si]; break;
    }
  } else if (is_intlike(ot) && is_intlike(stt)) {
    st_i64(o, ot, oi, ld_i64(s, stt, si));
  } else {
    st_f64(o, ot, oi, ld_f64(s, stt, si));
  }
}

/* Scalar ops (activations, binary, compare, integer ops, saturating casts)
 * are the reference's own definitions: base/scalar_math.h, called as
 * rlx_act_f32, rlx_binary_f64, rlx_int_binary, ... */

/* ------------------------------------------------------------ reductions */

/* Max that keeps NaN once seen (the reference's softmax/reduce rule). */
RLXK_DEV float nanmax_f(float a, float b) { return (isnan(a) || a > b) ? a : b; }

template <typename T>
RLXK_DEV T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

RLXK_DEV float warp_max_nan(float v) {
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = (isnan(w) || w > v) ? w : v;
  }
  return v;
}

/* Block-wide sum; `shared` holds 32 slots. Every thread gets the result. */
template <typename T>
RLXK_DEV T block_sum(T v, T* shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T r = lane < nw ? shared[lane] : (T)0;
  if (warp == 0) {
    r = warp_sum(r);
    if (lane == 0) shared[0] = r;
  }
  __syncthreads();
  return shared[0];
}

RLXK_DEV float block_max_nan(float v, float* shared) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_max_nan(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float r = lane < nw ? shared[lane] : -INFINITY;
  if (warp == 0) {
    r = warp_max_nan(r);
    if (lane == 0) shared[0] = r;
  }
  __syncthreads();
  return shared[0];
}

/* ------------------------------------------------------------ errors */

RLXK_DEV void report_error(rlxk_state* st, int step, int code, int64_t a, int64_t b) {
  unsigned long long key = ((unsigned long long)(step + 1) << 8) | (unsigned long long)code;
  if (atomicCAS(&st->err_key, 0ull, key) == 0ull) {
    st->err_a = a;
    st->err_b = b;
  }
}

RLXK_DEV int64_t grid_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
RLXK_DEV int64_t grid_stride() { return (int64_t)gridDim.x * blockDim.x; }

/* ------------------------------------------------------------ 4-element float vectors */

/* Four consecutive elements of an f32 / f16 / bf16 view as f32 (step1:
 * element i..i+3, 4-element aligned; else element i for all four lanes),
 * and the store of four f32 values rounding to nearest even for halves, as
 * the reference's stores do. Used by the elementwise views path and the
 * region interpreter. */
RLXK_DEV float4 ld4_f32(const char* b, int t, int32_t i, bool step1) {
  if (!step1) {
    float x = ld_f32(b, t, i);
    return make_float4(x, x, x, x);
  }
  if (t == RLX_F32) return *(const float4*)((const float*)b + i);
  uint2 u = *(const uint2*)(b + 2 * (int64_t)i); /* 4 halves: element i in the low bits */
  if (t == RLX_BF16)
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u),
                       __uint_as_float(u.y << 16), __uint_as_float(u.y & 0xffff0000u));
  float2 lo = __half22float2(*(const __half2*)&u.x), hi = __half22float2(*(const __half2*)&u.y);
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

RLXK_DEV void st4_f32(char* b, int t, int32_t i, float4 v) {
  if (t == RLX_F32) {
    *(float4*)((float*)b + i) = v;
    return;
  }
  uint2 u;
  if (t == RLX_BF16) {
    __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    u.x = *(const uint32_t*)&lo;
    u.y = *(const uint32_t*)&hi;
  } else {
    __half2 lo = __floats2half2_rn(v.x, v.y), hi = __floats2half2_rn(v.z, v.w);
    u.x = *(const uint32_t*)&lo;
    u.y = *(const uint32_t*)&hi;
  }
  *(uint2*)(b + 2 * (int64_t)i) = u;
}
