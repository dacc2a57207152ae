// Shared by every rlx Vulkan shader: the arena (one storage buffer seen as
// 8/16/32/64-bit words), the step's parameter record, dtype loads/stores that
// match the CPU reference bit for bit (round-to-nearest-even f16/bf16, the
// reference's saturating float->int stores), and small helpers.
//
// Addresses are byte offsets into the arena held in 32-bit uints: the host
// refuses arenas a single binding cannot address, and element offsets use
// wrapping uint arithmetic, so negative (reversed) strides come out right.
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_16bit_storage : require

#include "rlx_constants.glsl" // generated: op codes, kernel kinds, dtypes
#include "layout.h"

layout(std430, set = 0, binding = 0) buffer Arena8 { uint8_t a8[]; };
layout(std430, set = 0, binding = 0) buffer Arena16 { uint16_t a16[]; };
layout(std430, set = 0, binding = 0) buffer Arena32 { uint a32[]; };
layout(std430, set = 0, binding = 0) buffer Arena64 { uint64_t a64[]; };
layout(std430, set = 0, binding = 1) readonly buffer Params { int prm[]; };
layout(std430, set = 0, binding = 2) buffer RunState { uint run[]; };
layout(push_constant) uniform PushConstants { uint base; } pc;

int P(int i) { return prm[pc.base + uint(i)]; }
uint PU(int i) { return uint(prm[pc.base + uint(i)]); }
float PF(int i) { return intBitsToFloat(prm[pc.base + uint(i)]); }
int PX(int i) { return P(RLXVK_X + i); }

int vw(int slot, int field) { return P(RLXVK_VIEW0 + slot * RLXVK_VIEW_WORDS + field); }
uint v_off(int slot) { return uint(vw(slot, RLXVK_V_OFFSET)); }
uint v_dt(int slot) { return uint(vw(slot, RLXVK_V_DTYPE)); }
int v_rank(int slot) { return vw(slot, RLXVK_V_RANK); }
int v_shape(int slot, int d) { return vw(slot, RLXVK_V_SHAPE + d); }
int v_stride(int slot, int d) { return vw(slot, RLXVK_V_STRIDE + d); }

// Linear work-item index over a 2-D grid of workgroups (the host splits
// large counts over y to stay under maxComputeWorkGroupCount[0]).
uint group_linear() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

#define NAN_F uintBitsToFloat(0x7fc00000u)
#define INF_F uintBitsToFloat(0x7f800000u)

// Integers and bool: i8 u8 i32 i64 bool i16 u16 u32 u64 (codes 4..12); the
// float8 codes (13..16) come after them.
bool is_intlike(uint dt) { return dt >= RLXVK_I8 && dt <= RLX_U64; }
bool is_f8(uint dt) { return dt >= RLX_F8E4M3FN; }

uint dt_size(uint dt) {
  if (dt == RLXVK_F16 || dt == RLXVK_BF16 || dt == RLX_I16 || dt == RLX_U16) return 2u;
  if (dt == RLXVK_F64 || dt == RLXVK_I64 || dt == RLX_U64) return 8u;
  if (dt == RLXVK_I8 || dt == RLXVK_U8 || dt == RLXVK_BOOL || is_f8(dt)) return 1u;
  return 4u;
}

// ------------------------------------------------------------ float8
// The reference's codec (base/scalar_math.h rlx_f8_decode / rlx_f8_encode)
// on f32 values: every float8 value is an f32, and the sources that reach
// here (f32, f16, bf16, integers up to float8's range) are exact in f32, so
// rounding once here equals the reference's rounding from double. f64
// sources go to the host (rlx_vk_supports_node).
int f8_man_bits(uint dt) { return dt == RLX_F8E5M2 || dt == RLX_F8E5M2FNUZ ? 2 : 3; }
int f8_bias(uint dt) {
  return dt == RLX_F8E4M3FN ? 7 : dt == RLX_F8E5M2 ? 15 : dt == RLX_F8E4M3FNUZ ? 8 : 16;
}
bool f8_fnuz(uint dt) { return dt == RLX_F8E4M3FNUZ || dt == RLX_F8E5M2FNUZ; }
uint f8_max_code(uint dt) {
  return dt == RLX_F8E4M3FN ? 0x7Eu : dt == RLX_F8E5M2 ? 0x7Bu : 0x7Fu;
}

float f8_to_f32(uint dt, uint b) {
  int mb = f8_man_bits(dt), bias = f8_bias(dt);
  uint mag = b & 0x7Fu;
  int e = int(mag >> uint(mb)), m = int(mag & ((1u << uint(mb)) - 1u));
  if (f8_fnuz(dt) && b == 0x80u) return NAN_F;
  if (dt == RLX_F8E4M3FN && mag == 0x7Fu) return NAN_F;
  if (dt == RLX_F8E5M2 && e == 31) return m != 0 ? NAN_F : ((b & 0x80u) != 0u ? -INF_F : INF_F);
  float v = e == 0 ? ldexp(float(m), 1 - bias - mb) : ldexp(float(m + (1 << mb)), e - bias - mb);
  return (b & 0x80u) != 0u ? -v : v;
}

// Round to nearest even; saturating to +-max as ONNX Cast's saturate=1
// (e5m2 keeps inf); NaN -> the format's NaN; fnuz has no -0.
uint f32_to_f8(uint dt, float x) {
  uint nan_code = f8_fnuz(dt) ? 0x80u : 0x7Fu, maxc = f8_max_code(dt);
  if (isnan(x)) return nan_code;
  uint sign = (floatBitsToUint(x) >> 31) != 0u ? 0x80u : 0u;
  float a = abs(x);
  if (isinf(a)) return dt == RLX_F8E5M2 ? sign | 0x7Cu : sign | maxc;
  if (a == 0.0) return f8_fnuz(dt) ? 0u : sign;
  int mb = f8_man_bits(dt), bias = f8_bias(dt), emin = 1 - bias;
  int ex = max(int((floatBitsToUint(a) >> 23) & 0xffu) - 127, emin); // a's exponent (subnormal f32 -> emin)
  float scaled = ldexp(a, mb - ex);                 // exact: a power-of-two scaling
  float q = floor(scaled), diff = scaled - q;
  if (diff > 0.5 || (diff == 0.5 && mod(q, 2.0) == 1.0)) q += 1.0;
  float code = float((ex + bias) << mb) + q - float(1 << mb);
  if (code > float(maxc)) return sign | maxc;
  if (code == 0.0 && f8_fnuz(dt)) return 0u;
  return sign | uint(code);
}

// ------------------------------------------------------------ conversions

float f16_to_f32(uint h) { return unpackHalf2x16(h & 0xffffu).x; }

// Round to nearest even, as rlx_f32_to_f16 (driver conversions may not).
uint f32_to_f16(float f) {
  uint u = floatBitsToUint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a < 0x38800000u) { // f16 subnormal or zero: units of 2^-24
    int e = int(a >> 23);
    if (e < 102) return sign;
    uint full = (a & 0x7fffffu) | 0x800000u;
    uint shift = uint(126 - e);
    uint q = full >> shift, rem = full & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) q++;
    return sign | q;
  }
  uint r = a + 0xfffu + ((a >> 13) & 1u);
  r -= 0x38000000u;
  return sign | (r >> 13);
}

float bf16_to_f32(uint h) { return uintBitsToFloat((h & 0xffffu) << 16); }

uint f32_to_bf16(float f) {
  uint u = floatBitsToUint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}

// f64 bits <-> f32 with integer math (no shaderFloat64 needed), RNE.
float f64_to_f32(uint64_t b) {
  uint sign = uint(b >> 63) << 31;
  int e = int(uint(b >> 52) & 0x7ffu);
  uint64_t m = b & 0xfffffffffffffUL;
  if (e == 0x7ff) return uintBitsToFloat(sign | 0x7f800000u | (m != 0UL ? 0x400000u : 0u));
  if (e == 0) return uintBitsToFloat(sign);
  int ef = e - 1023 + 127;
  if (ef >= 255) return uintBitsToFloat(sign | 0x7f800000u);
  uint64_t full = m | (1UL << 52);
  int shift = 29;
  uint expbits = uint(ef) << 23;
  if (ef <= 0) { // subnormal f32
    shift = 29 + 1 - ef;
    if (shift > 54) return uintBitsToFloat(sign);
    expbits = 0u;
    m = full;
  }
  uint64_t q = m >> uint(shift), rem = m & ((1UL << uint(shift)) - 1UL), half_ = 1UL << uint(shift - 1);
  uint r = expbits + uint(q);
  if (rem > half_ || (rem == half_ && (q & 1UL) != 0UL)) r += 1u;
  return uintBitsToFloat(sign | r);
}

uint64_t f32_to_f64(float f) {
  uint u = floatBitsToUint(f);
  uint64_t sign = uint64_t(u >> 31) << 63;
  uint e = (u >> 23) & 0xffu, m = u & 0x7fffffu;
  if (e == 255u) return sign | (0x7ffUL << 52) | (uint64_t(m) << 29);
  if (e == 0u) {
    if (m == 0u) return sign;
    int ee = 1 - 127;
    while ((m & 0x800000u) == 0u) { m <<= 1; ee--; }
    m &= 0x7fffffu;
    return sign | (uint64_t(ee + 1023) << 52) | (uint64_t(m) << 29);
  }
  return sign | (uint64_t(int(e) - 127 + 1023) << 52) | (uint64_t(m) << 29);
}

// f64 bits -> int64, truncation toward zero, saturating (rlx_store_f64's rule).
int64_t f64bits_to_i64(uint64_t b) {
  int e = int(uint(b >> 52) & 0x7ffu);
  bool neg = (b >> 63) != 0UL;
  uint64_t m = (b & 0xfffffffffffffUL) | (1UL << 52);
  if (e == 0x7ff && (b & 0xfffffffffffffUL) != 0UL) return 0L; // NaN
  if (e < 1023) return 0L;
  if (e >= 1023 + 63) return neg ? int64_t(0x8000000000000000UL) : 9223372036854774784L;
  int sh = e - 1023 - 52;
  uint64_t v = sh >= 0 ? m << uint(sh) : m >> uint(-sh);
  return neg ? -int64_t(v) : int64_t(v);
}

// ------------------------------------------------------------ raw access

uint ld_u8(uint b) { return uint(a8[b]); }
uint ld_u16(uint b) { return uint(a16[b >> 1]); }
uint ld_u32(uint b) { return a32[b >> 2]; }
uint64_t ld_u64(uint b) { return a64[b >> 3]; }

uint addr(uint off, int idx, uint dt) { return off + uint(idx) * dt_size(dt); }

// Raw bits of an element (up to 64), for same-dtype copies.
uint64_t ld_bits(uint dt, uint off, int idx) {
  uint b = addr(off, idx, dt), es = dt_size(dt);
  if (es == 1u) return uint64_t(ld_u8(b));
  if (es == 2u) return uint64_t(ld_u16(b));
  if (es == 4u) return uint64_t(ld_u32(b));
  return ld_u64(b);
}

void st_bits(uint dt, uint off, int idx, uint64_t v) {
  uint b = addr(off, idx, dt), es = dt_size(dt);
  if (es == 1u) a8[b] = uint8_t(uint(v));
  else if (es == 2u) a16[b >> 1] = uint16_t(uint(v));
  else if (es == 4u) a32[b >> 2] = uint(v);
  else a64[b >> 3] = v;
}

// ------------------------------------------------------------ typed access

float ld_f(uint dt, uint off, int idx) {
  uint b = addr(off, idx, dt);
  switch (dt) {
    case RLXVK_F32: return uintBitsToFloat(ld_u32(b));
    case RLXVK_F16: return f16_to_f32(ld_u16(b));
    case RLXVK_BF16: return bf16_to_f32(ld_u16(b));
    case RLXVK_F64: return f64_to_f32(ld_u64(b));
    case RLXVK_I8: return float(int(ld_u8(b) << 24) >> 24);
    case RLXVK_U8: return float(ld_u8(b));
    case RLXVK_I32: return float(int(ld_u32(b)));
    case RLXVK_I64: return float(int64_t(ld_u64(b)));
    case RLXVK_BOOL: return ld_u8(b) != 0u ? 1.0 : 0.0;
    case RLX_I16: return float(int(ld_u16(b) << 16) >> 16);
    case RLX_U16: return float(ld_u16(b));
    case RLX_U32: return float(ld_u32(b));
    case RLX_U64: return float(ld_u64(b));
  }
  if (is_f8(dt)) return f8_to_f32(dt, ld_u8(b));
  return 0.0;
}

int64_t ld_i(uint dt, uint off, int idx) {
  uint b = addr(off, idx, dt);
  switch (dt) {
    case RLXVK_I8: return int64_t(int(ld_u8(b) << 24) >> 24);
    case RLXVK_U8: return int64_t(ld_u8(b));
    case RLXVK_BOOL: return ld_u8(b) != 0u ? 1L : 0L;
    case RLXVK_I32: return int64_t(int(ld_u32(b)));
    case RLXVK_I64: return int64_t(ld_u64(b));
    case RLXVK_F64: return f64bits_to_i64(ld_u64(b));
    case RLX_I16: return int64_t(int(ld_u16(b) << 16) >> 16);
    case RLX_U16: return int64_t(ld_u16(b));
    case RLX_U32: return int64_t(ld_u32(b));
    case RLX_U64: return int64_t(ld_u64(b)); // the bits, as the reference
  }
  return f64bits_to_i64(f32_to_f64(ld_f(dt, off, idx)));
}

// Saturating truncation of a float into [lo, hi] (NaN -> 0), as the reference.
int64_t sat_f(float v, float lo, float hi, int64_t ilo, int64_t ihi) {
  if (isnan(v)) return 0L;
  if (v <= lo) return ilo;
  if (v >= hi) return ihi;
  return int64_t(v);
}

void st_f(uint dt, uint off, int idx, float v) {
  uint b = addr(off, idx, dt);
  switch (dt) {
    case RLXVK_F32: a32[b >> 2] = floatBitsToUint(v); break;
    case RLXVK_F16: a16[b >> 1] = uint16_t(f32_to_f16(v)); break;
    case RLXVK_BF16: a16[b >> 1] = uint16_t(f32_to_bf16(v)); break;
    case RLXVK_F64: a64[b >> 3] = f32_to_f64(v); break;
    case RLXVK_I8: a8[b] = uint8_t(uint(int(sat_f(v, -128.0, 127.0, -128L, 127L)))); break;
    case RLXVK_U8: a8[b] = uint8_t(uint(int(sat_f(v, 0.0, 255.0, 0L, 255L)))); break;
    case RLXVK_I32:
      a32[b >> 2] = uint(int(sat_f(v, -2147483648.0, 2147483647.0, -2147483648L, 2147483647L)));
      break;
    case RLXVK_I64:
      a64[b >> 3] = uint64_t(sat_f(v, -9223372036854775808.0, 9223372036854774784.0,
                                   int64_t(0x8000000000000000UL), 9223372036854774784L));
      break;
    case RLXVK_BOOL: a8[b] = uint8_t(v != 0.0 || isnan(v) ? 1u : 0u); break;
    case RLX_I16: a16[b >> 1] = uint16_t(uint(int(sat_f(v, -32768.0, 32767.0, -32768L, 32767L)))); break;
    case RLX_U16: a16[b >> 1] = uint16_t(uint(sat_f(v, 0.0, 65535.0, 0L, 65535L))); break;
    case RLX_U32: a32[b >> 2] = uint(sat_f(v, 0.0, 4294967295.0, 0L, 4294967295L)); break;
    case RLX_U64:
      a64[b >> 3] = isnan(v) || v <= 0.0 ? 0UL : v >= 18446744073709551616.0 ? 0xffffffffffffffffUL
                                                                          : uint64_t(v);
      break;
  }
  if (is_f8(dt)) a8[b] = uint8_t(f32_to_f8(dt, v));
}

void st_i(uint dt, uint off, int idx, int64_t v) {
  uint b = addr(off, idx, dt);
  switch (dt) {
    case RLXVK_I8: case RLXVK_U8: a8[b] = uint8_t(uint(v)); break;
    case RLXVK_BOOL: a8[b] = uint8_t(v != 0L ? 1u : 0u); break;
    case RLXVK_I32: a32[b >> 2] = uint(v); break;
    case RLXVK_I64: a64[b >> 3] = uint64_t(v); break;
    case RLX_I16: case RLX_U16: a16[b >> 1] = uint16_t(uint(v)); break;
    case RLX_U32: a32[b >> 2] = uint(v); break;
    case RLX_U64: a64[b >> 3] = uint64_t(v); break;
    default: st_f(dt, off, idx, float(v)); break;
  }
}

// Element conversion as the reference's copy_element: same dtype -> bits;
// int <-> int exactly; otherwise through float.
void copy_elem(uint odt, uint ooff, int oi, uint idt, uint ioff, int ii) {
  if (odt == idt) st_bits(odt, ooff, oi, ld_bits(idt, ioff, ii));
  else if (is_intlike(odt) && is_intlike(idt)) st_i(odt, ooff, oi, ld_i(idt, ioff, ii));
  else if (idt == RLXVK_F64 && is_intlike(odt)) st_i(odt, ooff, oi, ld_i(idt, ioff, ii));
  else st_f(odt, ooff, oi, ld_f(idt, ioff, ii));
}

// ------------------------------------------------------------ view helpers

// Element offset (in elements) of the linear index i of a dense walk over
// `shape_slot`'s shape, for view `slot`'s strides.
int view_elem(int shape_slot, int slot, uint i) {
  int rank = v_rank(shape_slot);
  int off = 0;
  for (int d = rank - 1; d >= 0; d--) {
    uint n = uint(v_shape(shape_slot, d));
    uint q = i / n;
    off += int(i - q * n) * v_stride(slot, d);
    i = q;
  }
  return off;
}

// Records the first run-time error (an index out of range) for the host.
void report_bad_index(int64_t value, int64_t len) {
  if (atomicCompSwap(run[RLXVK_RUN_ERR], 0u, 1u) == 0u) {
    run[RLXVK_RUN_ERR_STEP] = uint(P(RLXVK_STEP));
    run[RLXVK_RUN_ERR_VAL_LO] = uint(uint64_t(value));
    run[RLXVK_RUN_ERR_VAL_HI] = uint(uint64_t(value) >> 32);
    run[RLXVK_RUN_ERR_LEN] = uint(len);
  }
}

// ------------------------------------------------------------ math

// erf with |relative error| < 1.2e-7 (Numerical Recipes' erfc Chebyshev fit).
float erf_f(float x) {
  float z = abs(x);
  float t = 1.0 / (1.0 + 0.5 * z);
  float r = t * exp(-z * z - 1.26551223 +
                    t * (1.00002368 +
                    t * (0.37409196 +
                    t * (0.09678418 +
                    t * (-0.18628806 +
                    t * (0.27886807 +
                    t * (-1.13520398 +
                    t * (1.48851587 +
                    t * (-0.82215223 + t * 0.17087277)))))))));
  float e = 1.0 - r;
  return x >= 0.0 ? e : -e;
}

// tanh without cancellation near 0 or overflow for large |x|.
float tanh_f(float x) {
  float a = abs(x);
  if (a > 15.0) return sign(x);
  if (a < 0.01) { float x2 = x * x; return x * (1.0 - x2 * (1.0 / 3.0 - x2 * (2.0 / 15.0))); }
  float e = exp(-2.0 * a);
  float t = (1.0 - e) / (1.0 + e);
  return x < 0.0 ? -t : t;
}

// sin / cos / tan accurate to a few ulp for moderate |x| (drivers' built-ins
// may be fast approximations: 2^-11 absolute error is conformant). Cody-Waite
// reduction by pi/2 in four parts, then Taylor polynomials on [-pi/4, pi/4].
void sincos_f(float x, out float s, out float c) {
  // precise: without it compilers may reassociate the reduction (Mesa does).
  float k = roundEven(x * 0.63661977236758134);
  precise float r = fma(-k, 1.5703125, x);   // 8-bit and 11-bit parts: exact
  r = fma(-k, 4.837512969970703125e-4, r);
  r = fma(-k, 7.549790126404332e-08, r);
  r = fma(-k, -1.7151245100058819e-15, r);
  float r2 = r * r;
  float sr = r + r * r2 * (-1.6666667163e-1 + r2 * (8.3333337680e-3 + r2 * (-1.9841270114e-4 + r2 * 2.7557314297e-6)));
  float cr = 1.0 + r2 * (-0.5 + r2 * (4.1666667908e-2 + r2 * (-1.3888889225e-3 + r2 * (2.4801587642e-5 + r2 * -2.7557314297e-7))));
  int q = int(k) & 3;
  if (q == 0) { s = sr; c = cr; }
  else if (q == 1) { s = cr; c = -sr; }
  else if (q == 2) { s = -sr; c = -cr; }
  else { s = -cr; c = sr; }
  if (isinf(x) || isnan(x)) { s = NAN_F; c = NAN_F; }
}

float activation(int act, float x) {
  float s_, c_;
  switch (act) {
    case RLX_ACT_NONE: return x;
    case RLX_ACT_RELU: return x < 0.0 ? 0.0 : x;
    case RLX_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case RLX_ACT_TANH: return tanh_f(x);
    case RLX_ACT_EXP: return exp(x);
    case RLX_ACT_LOG: return x < 0.0 ? NAN_F : (x == 0.0 ? -INF_F : log(x));
    case RLX_ACT_SQRT: return x < 0.0 ? NAN_F : sqrt(x);
    case RLX_ACT_RSQRT: return x < 0.0 ? NAN_F : (x == 0.0 ? INF_F : 1.0 / sqrt(x));
    case RLX_ACT_NEG: return -x;
    case RLX_ACT_ABS: return abs(x);
    case RLX_ACT_GELU: return 0.5 * x * (1.0 + erf_f(x * 0.70710678118654752));
    case RLX_ACT_GELU_APPROX: {
      float k = 0.79788456080286535588;
      return 0.5 * x * (1.0 + tanh_f(k * (x + 0.044715 * x * x * x)));
    }
    case RLX_ACT_SILU: return x / (1.0 + exp(-x));
    case RLX_ACT_ROUND: return roundEven(x);
    case RLX_ACT_SIN: sincos_f(x, s_, c_); return s_;
    case RLX_ACT_COS: sincos_f(x, s_, c_); return c_;
    case RLX_ACT_TAN: sincos_f(x, s_, c_); return s_ / c_;
    case RLX_ACT_ATAN: return atan(x);
  }
  return NAN_F;
}

float pow_f(float a, float b) {
  if (b == 0.0) return 1.0;
  if (isnan(a) || isnan(b)) return NAN_F;
  if (a == 1.0) return 1.0;
  if (a == 0.0) return b > 0.0 ? 0.0 : INF_F;
  float r = exp2(b * log2(abs(a)));
  if (a < 0.0) {
    if (floor(b) != b) return NAN_F;
    if (mod(b, 2.0) != 0.0) r = -r;
  }
  return r;
}

float binary_f(int op, float a, float b) {
  switch (op) {
    case RLX_BIN_ADD: return a + b;
    case RLX_BIN_SUB: return a - b;
    case RLX_BIN_MUL: return a * b;
    case RLX_BIN_DIV: return a / b;
    case RLX_BIN_MAX: return (isnan(a) || isnan(b)) ? NAN_F : (a > b ? a : b);
    case RLX_BIN_MIN: return (isnan(a) || isnan(b)) ? NAN_F : (a < b ? a : b);
    case RLX_BIN_POW: return pow_f(a, b);
  }
  return NAN_F;
}
