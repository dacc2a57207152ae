/* Scalar math written once for C and CUDA: activations, elementwise binary
 * and compare ops, integer arithmetic with the reference's wrap-around and
 * division rules, saturating float -> int casts.
 *
 * The CPU reference (src/backends/cpu/ref.c) is the oracle every backend is
 * tested against; its scalar definitions live here so that the CPU fast
 * paths and the CUDA kernels (kernels/common.cuh) compute exactly the same
 * formulas instead of keeping copies that drift. Shader backends cannot
 * include C: their math stays in GLSL/WGSL, but the op codes they switch on
 * are generated from include/rlx.h at build time (scripts/gen_shader_constants.c).
 *
 * In src/base/ (not backends/) because ir/dtype.c's casts use the saturation
 * rule too and base is the layer everything may include. Only `static
 * inline` functions: no symbols, usable from any translation unit. */
#ifndef RLX_BASE_SCALAR_MATH_H
#define RLX_BASE_SCALAR_MATH_H

#include <stdint.h>

#include "rlx.h"

#ifdef __CUDACC__
#define RLX_HD static __host__ __device__ __forceinline__
#else
#include <math.h>
#define RLX_HD static inline
#endif

/* Round half to even without depending on the current rounding mode (rint
 * would follow fesetround). */
RLX_HD double rlx_round_half_even(double x) {
  if (!isfinite(x)) return x;
  double r = floor(x), diff = x - r;
  if (diff > 0.5) return r + 1.0;
  if (diff < 0.5) return r;
  return fmod(r, 2.0) == 0.0 ? r : r + 1.0;
}

/* The reference's activations, in double. */
RLX_HD double rlx_act_f64(int act, double x) {
  switch (act) {
    case RLX_ACT_NONE: return x;
    case RLX_ACT_RELU: return x < 0 ? 0.0 : x; /* NaN passes through */
    case RLX_ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case RLX_ACT_TANH: return tanh(x);
    case RLX_ACT_EXP: return exp(x);
    case RLX_ACT_LOG: return log(x);
    case RLX_ACT_SQRT: return sqrt(x);
    case RLX_ACT_RSQRT: return 1.0 / sqrt(x);
    case RLX_ACT_NEG: return -x;
    case RLX_ACT_ABS: return fabs(x);
    case RLX_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case RLX_ACT_GELU_APPROX: {
      const double k = 0.79788456080286535588; /* sqrt(2/pi) */
      return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    }
    case RLX_ACT_SILU: return x / (1.0 + exp(-x));
    case RLX_ACT_ROUND: return rlx_round_half_even(x);
    case RLX_ACT_SIN: return sin(x);
    case RLX_ACT_COS: return cos(x);
    case RLX_ACT_TAN: return tan(x);
    case RLX_ACT_ATAN: return atan(x);
    default: return NAN;
  }
}

/* The same definitions in float with float libm: the f32 compute paths (CPU
 * fast kernels, CUDA f32 kernels), within the f32 tolerance of the oracle. */
RLX_HD float rlx_act_f32(int act, float x) {
  switch (act) {
    case RLX_ACT_NONE: return x;
    case RLX_ACT_RELU: return x < 0.0f ? 0.0f : x;
    case RLX_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case RLX_ACT_TANH: return tanhf(x);
    case RLX_ACT_EXP: return expf(x);
    case RLX_ACT_LOG: return logf(x);
    case RLX_ACT_SQRT: return sqrtf(x);
    case RLX_ACT_RSQRT: return 1.0f / sqrtf(x);
    case RLX_ACT_NEG: return -x;
    case RLX_ACT_ABS: return fabsf(x);
    case RLX_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case RLX_ACT_GELU_APPROX:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case RLX_ACT_SILU: return x / (1.0f + expf(-x));
    case RLX_ACT_ROUND: return rintf(x); /* default rounding: half to even */
    case RLX_ACT_SIN: return sinf(x);
    case RLX_ACT_COS: return cosf(x);
    case RLX_ACT_TAN: return tanf(x);
    case RLX_ACT_ATAN: return atanf(x);
    default: return NAN;
  }
}

/* Float binary ops. Max / min follow torch.maximum / minimum: NaN in either
 * operand gives NaN. */
RLX_HD double rlx_binary_f64(int op, double a, double b) {
  switch (op) {
    case RLX_BIN_ADD: return a + b;
    case RLX_BIN_SUB: return a - b;
    case RLX_BIN_MUL: return a * b;
    case RLX_BIN_DIV: return a / b;
    case RLX_BIN_MAX: return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b);
    case RLX_BIN_MIN: return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b);
    case RLX_BIN_POW: return pow(a, b);
    default: return NAN;
  }
}

RLX_HD float rlx_binary_f32(int op, float a, float b) {
  switch (op) {
    case RLX_BIN_ADD: return a + b;
    case RLX_BIN_SUB: return a - b;
    case RLX_BIN_MUL: return a * b;
    case RLX_BIN_DIV: return a / b;
    case RLX_BIN_MAX: return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b);
    case RLX_BIN_MIN: return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b);
    case RLX_BIN_POW: return powf(a, b);
    default: return NAN;
  }
}

/* Integer ops run in int64 with wrap-around, computed unsigned so signed
 * overflow is never undefined. Negative exponents give 0 except for bases
 * 1 and -1 (the only integers whose inverse is an integer). */
RLX_HD int64_t rlx_int_pow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)a;
  while (b) {
    if (b & 1) r *= base;
    base *= base;
    b >>= 1;
  }
  return (int64_t)r;
}

/* Activations with an exact integer form: on integer dtypes these run in
 * int64 (wrapping negation) instead of through float. */
RLX_HD int rlx_act_has_int_form(int act) {
  return act == RLX_ACT_NEG || act == RLX_ACT_ABS || act == RLX_ACT_RELU || act == RLX_ACT_ROUND;
}

RLX_HD int64_t rlx_act_i64(int act, int64_t x) {
  switch (act) {
    case RLX_ACT_NEG: return (int64_t)(0 - (uint64_t)x);
    case RLX_ACT_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case RLX_ACT_RELU: return x < 0 ? 0 : x;
    default: return x; /* RLX_ACT_ROUND: integers are already whole */
  }
}

/* Division truncates toward zero; x / 0 = 0 (no trap, as no GPU traps). */
RLX_HD int64_t rlx_int_binary(int op, int64_t a, int64_t b) {
  switch (op) {
    case RLX_BIN_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case RLX_BIN_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case RLX_BIN_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case RLX_BIN_DIV:
      if (b == 0) return 0;
      if (b == -1) return (int64_t)(0 - (uint64_t)a); /* INT64_MIN / -1 wraps */
      return a / b;
    case RLX_BIN_MAX: return a > b ? a : b;
    case RLX_BIN_MIN: return a < b ? a : b;
    case RLX_BIN_POW: return rlx_int_pow(a, b);
    default: return 0;
  }
}

/* u64 travels in the same int64 slots as the other integers (its bits), so
 * add, sub, mul, neg and the bit pattern of pow wrap identically; only the
 * ops that read magnitude or order differ, and take these forms. Flipping
 * the sign bit maps unsigned order onto signed order. */
#define RLX_U64_FLIP ((int64_t)(UINT64_C(1) << 63))
RLX_HD int64_t rlx_u64_binary(int op, int64_t a, int64_t b) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
    case RLX_BIN_DIV: return ub == 0 ? 0 : (int64_t)(ua / ub);
    case RLX_BIN_MAX: return (int64_t)(ua > ub ? ua : ub);
    case RLX_BIN_MIN: return (int64_t)(ua < ub ? ua : ub);
    case RLX_BIN_POW: {
      uint64_t r = 1;
      for (; ub; ub >>= 1, ua *= ua)
        if (ub & 1) r *= ua;
      return (int64_t)r;
    }
    default: return rlx_int_binary(op, a, b);
  }
}

/* Unsigned values are never negative: abs and relu keep them. */
RLX_HD int64_t rlx_act_u64(int act, int64_t x) {
  return act == RLX_ACT_NEG ? (int64_t)(0 - (uint64_t)x) : x;
}

/* Pad: the input coordinate a padded coordinate i outside [0, n) reads for
 * mode RLX_PAD_REFLECT (mirror without repeating the edge, period
 * 2 (n - 1)), RLX_PAD_EDGE (clamp) or RLX_PAD_WRAP (period n). Remainders
 * are taken of non-negative values only, as the GLSL twin must (% of a
 * negative int is undefined there); reflection is symmetric about 0. */
RLX_HD int64_t rlx_pad_fold(int mode, int64_t i, int64_t n) {
  if (mode == RLX_PAD_EDGE) return i < 0 ? 0 : (i >= n ? n - 1 : i);
  if (mode == RLX_PAD_WRAP) return i >= 0 ? i % n : n - 1 - (-i - 1) % n;
  if (n == 1) return 0;
  int64_t period = 2 * (n - 1), m = (i < 0 ? -i : i) % period;
  return m < n ? m : period - m;
}

/* Resize: the input coordinate of output coordinate o along a dim of
 * input size in and output size out (ONNX coordinate_transformation_mode;
 * scale as given, or out / in). The resized length is in * scale before
 * flooring, as in the ONNX reference (align_corners with a given scale
 * divides by it, not by out - 1). In double, as the reference computes. */
RLX_HD double rlx_resize_source(int coord, int64_t o, double scale, int64_t in, int64_t out,
                               double roi_start, double roi_end) {
  double x = (double)o, len = scale * (double)in;
  switch (coord) {
    case RLX_COORD_HALF_PIXEL_SYMMETRIC: {
      double adjust = (double)out / len;
      double offset = (double)in / 2.0 * (1.0 - adjust);
      return offset + (x + 0.5) / scale - 0.5;
    }
    case RLX_COORD_PYTORCH_HALF_PIXEL: return len > 1.0 ? (x + 0.5) / scale - 0.5 : 0.0;
    case RLX_COORD_ALIGN_CORNERS: return len > 1.0 ? x * (double)(in - 1) / (len - 1.0) : 0.0;
    case RLX_COORD_ASYMMETRIC: return x / scale;
    case RLX_COORD_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / scale;
    case RLX_COORD_TF_CROP_AND_RESIZE:
      if (len > 1.0)
        return roi_start * (double)(in - 1) +
               x * (roi_end - roi_start) * (double)(in - 1) / (len - 1.0);
      return 0.5 * (roi_start + roi_end) * (double)(in - 1);
    default: return (x + 0.5) / scale - 0.5; /* half_pixel */
  }
}

/* Nearest resize: the rounded coordinate (not yet clamped). */
RLX_HD double rlx_resize_round(int nearest, double x) {
  double f = floor(x);
  switch (nearest) {
    case RLX_NEAREST_ROUND_PREFER_CEIL: return floor(x + 0.5);
    case RLX_NEAREST_FLOOR: return f;
    case RLX_NEAREST_CEIL: return ceil(x);
    default: return x - f == 0.5 ? f : floor(x + 0.5); /* round_prefer_floor */
  }
}

/* Keys cubic weight of a tap at distance t (0 <= |t| < 2) with coefficient a. */
RLX_HD double rlx_cubic_weight(double a, double t) {
  t = t < 0 ? -t : t;
  if (t <= 1.0) return ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
  if (t < 2.0) return ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a;
  return 0.0;
}

/* Resize taps of input coordinate x along a dim of size in: writes up to
 * 4 source indices (clamped to the input: edge) and their weights, returns
 * how many. mode is an rlx_resize_mode; exclude_outside drops cubic taps
 * outside the input and renormalises the rest. */
RLX_HD int rlx_resize_taps(int mode, int nearest, double cubic_a, int exclude_outside, double x,
                           int64_t in, int64_t* idx, double* w) {
  double f = floor(x);
  int64_t base = (int64_t)f;
  int n = 0;
  if (mode == RLX_RESIZE_NEAREST) {
    base = (int64_t)rlx_resize_round(nearest, x);
    idx[0] = base;
    w[0] = 1.0;
    n = 1;
  } else if (mode == RLX_RESIZE_LINEAR) {
    idx[0] = base;
    idx[1] = base + 1;
    w[0] = 1.0 - (x - f);
    w[1] = x - f;
    n = 2;
  } else {
    double sum = 0.0;
    for (int k = 0; k < 4; k++) {
      idx[k] = base - 1 + k;
      w[k] = rlx_cubic_weight(cubic_a, x - (double)idx[k]);
      if (exclude_outside && (idx[k] < 0 || idx[k] >= in)) w[k] = 0.0;
      sum += w[k];
    }
    if (exclude_outside && sum != 0.0)
      for (int k = 0; k < 4; k++) w[k] /= sum;
    n = 4;
  }
  for (int k = 0; k < n; k++) idx[k] = idx[k] < 0 ? 0 : (idx[k] >= in ? in - 1 : idx[k]);
  return n;
}

/* Comparisons: NaN compares unequal to everything (IEEE). */
RLX_HD int rlx_compare_f64(int op, double a, double b) {
  switch (op) {
    case RLX_CMP_EQ: return a == b;
    case RLX_CMP_NE: return a != b;
    case RLX_CMP_LT: return a < b;
    case RLX_CMP_LE: return a <= b;
    case RLX_CMP_GT: return a > b;
    case RLX_CMP_GE: return a >= b;
    default: return 0;
  }
}

RLX_HD int rlx_compare_i64(int op, int64_t a, int64_t b) {
  switch (op) {
    case RLX_CMP_EQ: return a == b;
    case RLX_CMP_NE: return a != b;
    case RLX_CMP_LT: return a < b;
    case RLX_CMP_LE: return a <= b;
    case RLX_CMP_GT: return a > b;
    case RLX_CMP_GE: return a >= b;
    default: return 0;
  }
}

RLX_HD int rlx_compare_u64(int op, int64_t a, int64_t b) {
  return rlx_compare_i64(op, a ^ RLX_U64_FLIP, b ^ RLX_U64_FLIP);
}

/* Float -> integer cast of the reference: NaN -> 0, out of range clamps to
 * [lo, hi], otherwise truncation toward zero (as C casts and numpy astype).
 * hi for i64 is the largest double below 2^63. */
#define RLX_I64_LO (-9223372036854775808.0)
#define RLX_I64_HI 9223372036854774784.0
RLX_HD int64_t rlx_saturate_i64(double v, double lo, double hi) {
  if (isnan(v)) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return (int64_t)hi;
  return (int64_t)v;
}

/* ------------------------------------------------------------------ float8
 * The four float8 formats of ONNX (TensorProto FLOAT8E4M3FN, FLOAT8E5M2,
 * FLOAT8E4M3FNUZ, FLOAT8E5M2FNUZ), described by their field widths and
 * special values so one encoder and one decoder serve all four (and the
 * CUDA kernels, which include this header).
 *   fn   (e4m3fn): no inf; S.1111.111 is NaN, so the top code 0x7E = 448.
 *   ieee (e5m2):   exponent all ones is inf (mantissa 0) or NaN.
 *   fnuz (both):   0x80 ("negative zero") is the only NaN; no -0, no inf;
 *                  bias one above the IEEE bias, so every other code is finite. */
enum { RLX_F8_FN = 0, RLX_F8_IEEE = 1, RLX_F8_FNUZ = 2 };

typedef struct rlx_f8_format {
  int man_bits, bias, kind;
  int max_code; /* largest finite magnitude code (sign bit clear) */
} rlx_f8_format;

RLX_HD rlx_f8_format rlx_f8_format_of(rlx_dtype t) {
  rlx_f8_format f = {3, 7, RLX_F8_FN, 0x7E}; /* RLX_F8E4M3FN: 448 */
  if (t == RLX_F8E5M2) { f.man_bits = 2; f.bias = 15; f.kind = RLX_F8_IEEE; f.max_code = 0x7B; }
  if (t == RLX_F8E4M3FNUZ) { f.bias = 8; f.kind = RLX_F8_FNUZ; f.max_code = 0x7F; }
  if (t == RLX_F8E5M2FNUZ) { f.man_bits = 2; f.bias = 16; f.kind = RLX_F8_FNUZ; f.max_code = 0x7F; }
  return f;
}

RLX_HD int rlx_dtype_is_f8(rlx_dtype t) {
  return t == RLX_F8E4M3FN || t == RLX_F8E5M2 || t == RLX_F8E4M3FNUZ || t == RLX_F8E5M2FNUZ;
}

/* Bits -> value. Exact in double (and in float: every f8 value is an f32). */
RLX_HD double rlx_f8_decode(rlx_dtype t, uint8_t b) {
  rlx_f8_format f = rlx_f8_format_of(t);
  int sign = b >> 7, mag = b & 0x7F;
  int e = mag >> f.man_bits, m = mag & ((1 << f.man_bits) - 1);
  if (f.kind == RLX_F8_FNUZ && b == 0x80) return NAN;
  if (f.kind == RLX_F8_FN && mag == 0x7F) return NAN;
  if (f.kind == RLX_F8_IEEE && e == (1 << (7 - f.man_bits)) - 1)
    return m ? NAN : (sign ? -INFINITY : INFINITY);
  double v = e == 0 ? ldexp((double)m, 1 - f.bias - f.man_bits)
                    : ldexp((double)(m + (1 << f.man_bits)), e - f.bias - f.man_bits);
  return sign ? -v : v;
}

/* Value -> bits: round to nearest even. Out of range follows ONNX Cast's
 * table for float8 (Cast-19+): with saturate (the default) finite values
 * beyond the largest finite and +-inf become +-max, except that e5m2 keeps
 * +-inf as inf; without saturate they become NaN, except e5m2 where they
 * become +-inf. NaN maps to each format's NaN (0x7F; fnuz: 0x80). fnuz has
 * no negative zero, so -0 and negatives that round to zero give 0x00. */
RLX_HD uint8_t rlx_f8_encode(rlx_dtype t, double x, int saturate) {
  rlx_f8_format f = rlx_f8_format_of(t);
  const uint8_t nan = f.kind == RLX_F8_FNUZ ? 0x80 : 0x7F;
  if (isnan(x)) return nan;
  uint8_t sign = signbit(x) ? 0x80 : 0;
  double a = fabs(x);
  if (isinf(x)) {
    if (f.kind == RLX_F8_IEEE) return (uint8_t)(sign | 0x7C);
    return saturate ? (uint8_t)(sign | f.max_code) : nan;
  }
  if (a == 0) return f.kind == RLX_F8_FNUZ ? 0 : sign; /* frexp's exponent of 0 means nothing */
  int e2;
  frexp(a, &e2);                      /* a = frac * 2^e2, frac in [0.5, 1) */
  int exp = e2 - 1, emin = 1 - f.bias; /* unbiased exponent of a; smallest normal */
  if (exp < emin) exp = emin;          /* subnormal: the quantum stays 2^(emin - M) */
  double q = rlx_round_half_even(ldexp(a, f.man_bits - exp)); /* exact scaling */
  /* q counts quanta of 2^(exp - M), so the code is the biased exponent
   * field plus q minus the implicit leading one. At exp == emin that is q
   * itself, which also encodes subnormals (q < 2^M); a mantissa carry
   * (q == 2^(M+1)) or a subnormal rounding up to the smallest normal lands
   * on the next exponent code by plain addition. */
  double code = (double)((exp + f.bias) << f.man_bits) + q - (double)(1 << f.man_bits);
  if (code > f.max_code) {
    if (saturate) return (uint8_t)(sign | f.max_code);
    return f.kind == RLX_F8_IEEE ? (uint8_t)(sign | 0x7C) : nan;
  }
  if (code == 0 && f.kind == RLX_F8_FNUZ) return 0;
  return (uint8_t)(sign | (int)code);
}

/* Float -> unsigned 64-bit cast of the reference: NaN and negatives -> 0,
 * at or above 2^64 -> UINT64_MAX, otherwise truncation. */
RLX_HD uint64_t rlx_saturate_u64(double v) {
  if (isnan(v) || v <= 0) return 0;
  if (v >= 18446744073709551616.0) return UINT64_MAX;
  return (uint64_t)v;
}

/* ------------------------------------------------------------------ GridSample, RoiAlign */

/* GridSample: grid coordinate g in [-1, 1] -> pixel coordinate along a dim of n. */
RLX_HD double rlx_grid_unnormalize(double g, int64_t n, int align) {
  return align ? (g + 1.0) / 2.0 * (double)(n - 1) : ((g + 1.0) * (double)n - 1.0) / 2.0;
}

/* Mirror of c into [lo2 / 2, hi2 / 2] (bounds given doubled, as PyTorch). */
RLX_HD double rlx_grid_reflect(double c, double lo2, double hi2) {
  if (lo2 == hi2) return 0.0;
  double lo = lo2 / 2.0, span = (hi2 - lo2) / 2.0;
  c = fabs(c - lo);
  double extra = fmod(c, span), flips = floor(c / span);
  return fmod(flips, 2.0) == 0.0 ? extra + lo : span - extra + lo;
}

/* GridSample border / reflection padding of coordinate c along a dim of n
 * (zeros padding keeps c: the tap reads 0 outside). */
RLX_HD double rlx_grid_pad_coord(double c, int64_t n, int padding, int align) {
  if (padding == RLX_GRID_ZEROS) return c;
  if (padding == RLX_GRID_REFLECTION)
    c = align ? rlx_grid_reflect(c, 0.0, 2.0 * (double)(n - 1))
              : rlx_grid_reflect(c, -1.0, 2.0 * (double)n - 1.0);
  return c < 0.0 ? 0.0 : (c > (double)(n - 1) ? (double)(n - 1) : c);
}

/* RoiAlign's bilinear sample at (yy, xx) of an H x W plane (the ONNX /
 * Caffe2 rule: outside [-1, n] it is 0; coordinates clamp to the last
 * pixel): the corner offsets y*W+x in at[4] and their weights in w[4]
 * (order y0x0, y0x1, y1x0, y1x1). Returns 0 when the point is outside. */
RLX_HD int rlx_roi_corners(double yy, double xx, int64_t H, int64_t W, int64_t at[4],
                           double w[4]) {
  if (yy < -1.0 || yy > (double)H || xx < -1.0 || xx > (double)W) return 0;
  if (yy < 0) yy = 0;
  if (xx < 0) xx = 0;
  int64_t y0 = (int64_t)yy, x0 = (int64_t)xx, y1, x1;
  if (y0 >= H - 1) { y0 = y1 = H - 1; yy = (double)y0; } else y1 = y0 + 1;
  if (x0 >= W - 1) { x0 = x1 = W - 1; xx = (double)x0; } else x1 = x0 + 1;
  double ly = yy - (double)y0, lx = xx - (double)x0, hy = 1.0 - ly, hx = 1.0 - lx;
  at[0] = y0 * W + x0; w[0] = hy * hx;
  at[1] = y0 * W + x1; w[1] = hy * lx;
  at[2] = y1 * W + x0; w[2] = ly * hx;
  at[3] = y1 * W + x1; w[3] = ly * lx;
  return 1;
}

#endif
