/* ONNX op -> rlx IR mapping, one mapper per ONNX op type (table at the end).
 *
 * Each mapper reads its node through the rlx_ox_* accessors (io/onnx.h) and
 * builds IR nodes with the public builders. ONNX ops the IR lacks are built
 * from exact compositions (Floor from a truncating cast and a compare,
 * Softplus from relu/abs/exp/log, GatherElements from a flat Gather); an op
 * or attribute without one is refused as unsupported rather than
 * approximated. Opset differences are handled where the operand moved from
 * an attribute to an input (axes, split, starts/ends, min/max, K). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx.h"
#include "io/onnx_helpers.h"
#include "base/scalar_math.h"
#include "ir/dtype.h"

#ifdef RLX_HAVE_ONNX

/* ------------------------------------------------------------------ elementwise */

/* Before opset 7 binary ops broadcast only when asked (broadcast = 1), with
 * b's dims matched against a's from `axis` on (or as a suffix). */
static rlx_status legacy_broadcast(rlx_ox_ctx* c, rlx_tensor a, rlx_tensor* b) {
  int64_t bc, axis;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "broadcast", 0, &bc));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", INT64_MIN, &axis));
  rlx_type ta = type_of(c, a), tb = type_of(c, *b);
  if (!bc) {
    if (!rlx_type_equal(&ta, &tb) && !(ta.rank == tb.rank))
      return rlx_ox_invalid(c, "shapes differ and broadcast is 0");
    return RLX_OK;
  }
  if (axis == INT64_MIN) return RLX_OK; /* suffix matching = NumPy's right alignment */
  int32_t ax;
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, ta.rank, &ax));
  if (ax + tb.rank > ta.rank) return rlx_ox_invalid(c, "b does not fit a at axis %d", (int)ax);
  rlx_dim shape[RLX_MAX_RANK];
  for (int32_t d = 0; d < ta.rank; d++)
    shape[d] = d >= ax && d < ax + tb.rank ? tb.shape[d - ax] : 1;
  return reshape(c, *b, shape, ta.rank, b);
}

static rlx_status map_binary(rlx_ox_ctx* c) {
  rlx_tensor a, b, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &a));
  RLX_RETURN_IF_ERROR(in(c, 1, &b));
  if (rlx_ox_opset(c) < 7) {
    rlx_ox_attr_ignore(c, "consumed_inputs"); /* an allocation hint of opset 1 */
    RLX_RETURN_IF_ERROR(legacy_broadcast(c, a, &b));
  }
  rlx_binary_op op = (rlx_binary_op)rlx_ox_arg(c);
  rlx_dtype da = type_of(c, a).dtype, db = type_of(c, b).dtype;
  if (op == RLX_BIN_POW && da != db) { /* Pow allows a different exponent type */
    RLX_RETURN_IF_ERROR(cast(c, b, da, &b));
  } else if (da == RLX_BOOL) {
    return rlx_ox_unsupported(c, "bool operands are not supported");
  }
  RLX_RETURN_IF_ERROR(bin(c, op, a, b, &y));
  return rlx_ox_set(c, 0, y);
}

/* Max, Min, Sum, Mean: any number of inputs, broadcast together. */
static rlx_status map_variadic(rlx_ox_ctx* c) {
  int32_t arg = rlx_ox_arg(c);
  rlx_binary_op op = arg < 0 ? RLX_BIN_ADD : (rlx_binary_op)arg;
  rlx_tensor acc, x;
  RLX_RETURN_IF_ERROR(in(c, 0, &acc));
  for (int32_t i = 1; i < rlx_ox_n_in(c); i++) {
    RLX_RETURN_IF_ERROR(in(c, i, &x));
    RLX_RETURN_IF_ERROR(bin(c, op, acc, x, &acc));
  }
  if (arg < 0 && rlx_ox_n_in(c) > 1) { /* Mean */
    RLX_RETURN_IF_ERROR(need_float(c, acc, "Mean"));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_DIV, acc, (double)rlx_ox_n_in(c), &acc));
  }
  return rlx_ox_set(c, 0, acc);
}

static rlx_status map_activation(rlx_ox_ctx* c) {
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_activation k = (rlx_activation)rlx_ox_arg(c);
  rlx_dtype d = type_of(c, x).dtype;
  int int_ok = k == RLX_ACT_NEG || k == RLX_ACT_ABS || k == RLX_ACT_RELU;
  if (!rlx_dtype_is_float(d) && !(int_ok && rlx_dtype_is_int(d)))
    return rlx_ox_unsupported(c, "dtype %s is not supported", rlx_dtype_name(d));
  int is_unsigned = d == RLX_U8 || d == RLX_U16 || d == RLX_U32 || d == RLX_U64;
  if (is_unsigned && (k == RLX_ACT_ABS || k == RLX_ACT_RELU)) return rlx_ox_set(c, 0, x);
  RLX_RETURN_IF_ERROR(act(c, k, x, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_reciprocal(rlx_ox_ctx* c) {
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "Reciprocal"));
  RLX_RETURN_IF_ERROR(s_bin(c, RLX_BIN_DIV, 1.0, x, &y));
  return rlx_ox_set(c, 0, y);
}

/* erf(y) = 2 * Phi(sqrt2 * y) - 1 and gelu(z) = z * Phi(z): so
 * erf(y) = 2 * gelu(z) / z - 1 with z = sqrt2 * y (and erf(0) = 0). Evaluated
 * in f64, where the cancellation near 0 costs nothing at f32 output precision. */
static rlx_status map_erf(rlx_ox_ctx* c) {
  rlx_tensor x, z, gz, r, is0, zero;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "Erf"));
  rlx_dtype d = type_of(c, x).dtype;
  RLX_RETURN_IF_ERROR(cast(c, x, RLX_F64, &z));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, z, 1.41421356237309504880, &z));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_GELU, z, &gz));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, gz, z, &r));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, r, 2.0, &r));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_SUB, r, 1.0, &r));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_EQ, z, 0.0, &is0));
  RLX_RETURN_IF_ERROR(scalar(c, RLX_F64, 0.0, &zero));
  RLX_RETURN_IF_ERROR(where(c, is0, zero, r, &r));
  RLX_RETURN_IF_ERROR(cast(c, r, d, &r));
  return rlx_ox_set(c, 0, r);
}

/* 2^(mantissa bits): every float at or above it in magnitude is an integer. */
static double integral_bound(rlx_dtype d) {
  switch (d) {
    case RLX_F64: return 4503599627370496.0; /* 2^52 */
    case RLX_F16: return 1024.0;
    case RLX_BF16: return 128.0;
    default: return 8388608.0; /* 2^23 */
  }
}

/* Floor / Ceil, exactly: t = trunc(x) by a cast through i64, then step by
 * one where t overshot; magnitudes past the mantissa (and inf, NaN) pass through. */
static rlx_status map_floor_ceil(rlx_ox_ctx* c) {
  int ceil_op = rlx_ox_arg(c);
  rlx_tensor x, t, stepped, over, small, ax, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_dtype d = type_of(c, x).dtype;
  if (rlx_dtype_is_int(d)) return rlx_ox_set(c, 0, x);
  RLX_RETURN_IF_ERROR(need_float(c, x, rlx_ox_op_type(c)));
  RLX_RETURN_IF_ERROR(cast(c, x, RLX_I64, &t));
  G(rlx_graph_add_cast(GRAPH, t, d, &t));
  RLX_RETURN_IF_ERROR(cmp(c, ceil_op ? RLX_CMP_LT : RLX_CMP_GT, t, x, &over));
  RLX_RETURN_IF_ERROR(bin_s(c, ceil_op ? RLX_BIN_ADD : RLX_BIN_SUB, t, 1.0, &stepped));
  RLX_RETURN_IF_ERROR(where(c, over, stepped, t, &t));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_ABS, x, &ax));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, ax, integral_bound(d), &small));
  RLX_RETURN_IF_ERROR(where(c, small, t, x, &y));
  return rlx_ox_set(c, 0, y);
}

/* sign(x) = (x > 0) - (x < 0); NaN stays NaN. */
static rlx_status map_sign(rlx_ox_ctx* c) {
  rlx_tensor x, pos, neg, y, nan;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_dtype d = type_of(c, x).dtype;
  if (d == RLX_BOOL) return rlx_ox_unsupported(c, "bool input");
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_GT, x, 0.0, &pos));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, x, 0.0, &neg));
  RLX_RETURN_IF_ERROR(cast(c, pos, d, &pos));
  RLX_RETURN_IF_ERROR(cast(c, neg, d, &neg));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, pos, neg, &y));
  if (rlx_dtype_is_float(d)) {
    RLX_RETURN_IF_ERROR(cmp(c, RLX_CMP_NE, x, x, &nan));
    RLX_RETURN_IF_ERROR(where(c, nan, x, y, &y));
  }
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_isnan(rlx_ox_ctx* c) {
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "IsNaN"));
  RLX_RETURN_IF_ERROR(cmp(c, RLX_CMP_NE, x, x, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_isinf(rlx_ox_ctx* c) {
  int64_t pos, neg;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "detect_positive", 1, &pos));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "detect_negative", 1, &neg));
  rlx_tensor x, p, n, y, f;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "IsInf"));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_EQ, x, INFINITY, &p));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_EQ, x, -INFINITY, &n));
  RLX_RETURN_IF_ERROR(constant(c, RLX_BOOL, 0, NULL, "\0", 1, &f));
  if (!pos) p = f;
  if (!neg) n = f;
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MAX, p, n, &y)); /* or */
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_compare(rlx_ox_ctx* c) {
  rlx_tensor a, b, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &a));
  RLX_RETURN_IF_ERROR(in(c, 1, &b));
  RLX_RETURN_IF_ERROR(cmp(c, (rlx_compare_op)rlx_ox_arg(c), a, b, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status need_bool(rlx_ox_ctx* c, rlx_tensor x) {
  if (type_of(c, x).dtype != RLX_BOOL)
    return rlx_ox_unsupported(c, "non-bool operands are not supported (bitwise ops)");
  return RLX_OK;
}

/* Not / And / Or / Xor on bool: exact where/compare compositions. */
static rlx_status map_logic(rlx_ox_ctx* c) {
  const char* op = rlx_ox_op_type(c);
  rlx_tensor a, b = RLX_NONE, t, f, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &a));
  RLX_RETURN_IF_ERROR(need_bool(c, a));
  if (strcmp(op, "Not") != 0) {
    RLX_RETURN_IF_ERROR(in(c, 1, &b));
    RLX_RETURN_IF_ERROR(need_bool(c, b));
  }
  RLX_RETURN_IF_ERROR(bool_const(c, 1, &t));
  RLX_RETURN_IF_ERROR(bool_const(c, 0, &f));
  if (strcmp(op, "Not") == 0) RLX_RETURN_IF_ERROR(where(c, a, f, t, &y));
  else if (strcmp(op, "And") == 0) RLX_RETURN_IF_ERROR(where(c, a, b, f, &y));
  else if (strcmp(op, "Or") == 0) RLX_RETURN_IF_ERROR(where(c, a, t, b, &y));
  else RLX_RETURN_IF_ERROR(cmp(c, RLX_CMP_NE, a, b, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_where(rlx_ox_ctx* c) {
  rlx_tensor cond, x, y, out;
  RLX_RETURN_IF_ERROR(in(c, 0, &cond));
  RLX_RETURN_IF_ERROR(in(c, 1, &x));
  RLX_RETURN_IF_ERROR(in(c, 2, &y));
  RLX_RETURN_IF_ERROR(where(c, cond, x, y, &out));
  return rlx_ox_set(c, 0, out);
}

/* Cast's saturate attribute only matters for float8 targets (ONNX ignores
 * it otherwise). rlx's cast always saturates (ONNX's default, the form
 * quantized models use); saturate=0 turns out-of-range values into NaN (inf
 * for e5m2) and is refused by name rather than run with the wrong rule. */
static rlx_status check_saturate(rlx_ox_ctx* c, rlx_dtype to) {
  int64_t sat;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "saturate", 1, &sat));
  if (sat == 0 && rlx_dtype_is_f8(to))
    return rlx_ox_unsupported(c, "saturate=0 into %s (only the default saturate=1)",
                              rlx_dtype_name(to));
  return RLX_OK;
}

static rlx_status map_cast(rlx_ox_ctx* c) {
  int64_t to;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "to", -1, &to));
  int dt = onnx_to_dtype(to);
  if (dt < 0) return rlx_ox_unsupported(c, "cast to ONNX data type %lld", (long long)to);
  RLX_RETURN_IF_ERROR(check_saturate(c, (rlx_dtype)dt));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(cast(c, x, (rlx_dtype)dt, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_cast_like(rlx_ox_ctx* c) {
  rlx_type like;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, 1, &like));
  RLX_RETURN_IF_ERROR(check_saturate(c, like.dtype));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(cast(c, x, like.dtype, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ activations by composition */

/* Clip: max(x, min) then min(., max); bounds from attributes (opset < 11) or inputs. */
static rlx_status map_clip(rlx_ox_ctx* c) {
  rlx_tensor x, lo = RLX_NONE, hi = RLX_NONE;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  if (rlx_ox_opset(c) < 11) {
    float fmin, fmax;
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "min", -INFINITY, &fmin));
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "max", INFINITY, &fmax));
    if (!isinf(fmin)) RLX_RETURN_IF_ERROR(scalar(c, type_of(c, x).dtype, fmin, &lo));
    if (!isinf(fmax)) RLX_RETURN_IF_ERROR(scalar(c, type_of(c, x).dtype, fmax, &hi));
  } else {
    if (rlx_ox_has(c, 1)) RLX_RETURN_IF_ERROR(in(c, 1, &lo));
    if (rlx_ox_has(c, 2)) RLX_RETURN_IF_ERROR(in(c, 2, &hi));
  }
  if (lo != RLX_NONE) RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MAX, x, lo, &x));
  if (hi != RLX_NONE) RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MIN, x, hi, &x));
  return rlx_ox_set(c, 0, x);
}

/* max(0, min(1, alpha * x + beta)) */
static rlx_status hard_sigmoid(rlx_ox_ctx* c, rlx_tensor x, double alpha, double beta,
                               rlx_tensor* out) {
  rlx_tensor y;
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, x, alpha, &y));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, y, beta, &y));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MIN, y, 1.0, &y));
  return bin_s(c, RLX_BIN_MAX, y, 0.0, out);
}

/* softplus(x) = log(1 + exp(x)) = relu(x) + log(1 + exp(-|x|)): no overflow. */
static rlx_status softplus(rlx_ox_ctx* c, rlx_tensor x, rlx_tensor* out) {
  rlx_tensor r, a;
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_RELU, x, &r));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_ABS, x, &a));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_NEG, a, &a));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_EXP, a, &a));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, a, 1.0, &a));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_LOG, a, &a));
  return bin(c, RLX_BIN_ADD, r, a, out);
}

/* The activations ONNX defines with attributes, each an exact composition. */
static rlx_status map_composite_act(rlx_ox_ctx* c) {
  const char* op = rlx_ox_op_type(c);
  rlx_tensor x, y, neg, t, e;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, op));
  float alpha, beta, gamma;
  if (strcmp(op, "HardSigmoid") == 0) {
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "alpha", 0.2f, &alpha));
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "beta", 0.5f, &beta));
    RLX_RETURN_IF_ERROR(hard_sigmoid(c, x, alpha, beta, &y));
  } else if (strcmp(op, "HardSwish") == 0) {
    RLX_RETURN_IF_ERROR(hard_sigmoid(c, x, 1.0 / 6.0, 0.5, &y));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, x, y, &y));
  } else if (strcmp(op, "LeakyRelu") == 0) {
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "alpha", 0.01f, &alpha));
    RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, x, 0.0, &neg));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, x, alpha, &t));
    RLX_RETURN_IF_ERROR(where(c, neg, t, x, &y));
  } else if (strcmp(op, "Elu") == 0 || strcmp(op, "Selu") == 0 || strcmp(op, "Celu") == 0) {
    int selu = op[0] == 'S', celu = op[0] == 'C';
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "alpha", selu ? 1.67326319217681884765625f : 1.0f,
                                          &alpha));
    gamma = 1.0f;
    if (selu) RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "gamma", 1.05070102214813232421875f,
                                                    &gamma));
    /* x <= 0: alpha * (exp(x / a) - 1) with a = alpha for Celu, 1 otherwise */
    RLX_RETURN_IF_ERROR(cmp_s(c, selu ? RLX_CMP_LE : RLX_CMP_LT, x, 0.0, &neg));
    e = x;
    if (celu) RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_DIV, x, alpha, &e));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_EXP, e, &e));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_SUB, e, 1.0, &e));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, e, alpha, &e));
    RLX_RETURN_IF_ERROR(where(c, neg, e, x, &y));
    if (selu) RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, y, gamma, &y));
  } else if (strcmp(op, "Softplus") == 0) {
    RLX_RETURN_IF_ERROR(softplus(c, x, &y));
  } else if (strcmp(op, "Softsign") == 0) {
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_ABS, x, &t));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, t, 1.0, &t));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, x, t, &y));
  } else if (strcmp(op, "Mish") == 0) {
    RLX_RETURN_IF_ERROR(softplus(c, x, &t));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_TANH, t, &t));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, x, t, &y));
  } else if (strcmp(op, "ThresholdedRelu") == 0) {
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "alpha", 1.0f, &alpha));
    RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_GT, x, alpha, &neg));
    RLX_RETURN_IF_ERROR(scalar(c, type_of(c, x).dtype, 0.0, &t));
    RLX_RETURN_IF_ERROR(where(c, neg, x, t, &y));
  } else { /* Shrink */
    float bias, lambd;
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "bias", 0.0f, &bias));
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "lambd", 0.5f, &lambd));
    rlx_tensor lo, hi, zero, xp, xm;
    RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, x, -lambd, &lo));
    RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_GT, x, lambd, &hi));
    RLX_RETURN_IF_ERROR(scalar(c, type_of(c, x).dtype, 0.0, &zero));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, x, bias, &xp));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_SUB, x, bias, &xm));
    RLX_RETURN_IF_ERROR(where(c, hi, xm, zero, &y));
    RLX_RETURN_IF_ERROR(where(c, lo, xp, y, &y));
  }
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_prelu(rlx_ox_ctx* c) {
  rlx_tensor x, slope, neg, t, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(in(c, 1, &slope));
  rlx_type tx = type_of(c, x), ts = type_of(c, slope);
  if (rlx_ox_opset(c) < 7 && ts.rank == 1 && tx.rank >= 2 && ts.shape[0] == tx.shape[1] &&
      ts.shape[0] != 1) { /* opset 6: one slope per channel (axis 1) */
    rlx_dim shape[RLX_MAX_RANK];
    for (int32_t d = 0; d < tx.rank - 1; d++) shape[d] = d == 0 ? ts.shape[0] : 1;
    RLX_RETURN_IF_ERROR(reshape(c, slope, shape, tx.rank - 1, &slope));
  }
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, x, 0.0, &neg));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, x, slope, &t));
  RLX_RETURN_IF_ERROR(where(c, neg, t, x, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_gelu(rlx_ox_ctx* c) {
  char approx[16];
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "approximate", "none", approx, sizeof approx));
  rlx_activation k;
  if (strcmp(approx, "none") == 0) k = RLX_ACT_GELU;
  else if (strcmp(approx, "tanh") == 0) k = RLX_ACT_GELU_APPROX;
  else return rlx_ox_unsupported(c, "approximate = '%s'", approx);
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "Gelu"));
  RLX_RETURN_IF_ERROR(act(c, k, x, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ contraction */

static rlx_status map_matmul(rlx_ox_ctx* c) {
  int quantized = 0;
  RLX_RETURN_IF_ERROR(rlx_ox_quant_matmul(c, &quantized));
  if (quantized) return RLX_OK;
  rlx_tensor a, b, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &a));
  RLX_RETURN_IF_ERROR(in(c, 1, &b));
  RLX_RETURN_IF_ERROR(need_float(c, a, "MatMul"));
  rlx_type ta = type_of(c, a), tb = type_of(c, b);
  if (ta.rank < 1 || tb.rank < 1) return rlx_ox_invalid(c, "operands must have rank >= 1");
  /* NumPy: a 1-D left operand is a row, a 1-D right operand a column; the
   * added dim is removed from the result. */
  if (ta.rank == 1) {
    rlx_dim row[2] = {1, ta.shape[0]};
    RLX_RETURN_IF_ERROR(reshape(c, a, row, 2, &a));
  }
  if (tb.rank == 1) {
    rlx_dim col[2] = {tb.shape[0], 1};
    RLX_RETURN_IF_ERROR(reshape(c, b, col, 2, &b));
  }
  G(rlx_graph_add_matmul(GRAPH, a, b, 0, 0, &y));
  if (ta.rank == 1 || tb.rank == 1) {
    rlx_type ty = type_of(c, y);
    rlx_dim shape[RLX_MAX_RANK];
    int32_t r = 0;
    for (int32_t i = 0; i < ty.rank; i++) {
      if (ta.rank == 1 && i == ty.rank - 2) continue;
      if (tb.rank == 1 && i == ty.rank - 1) continue;
      shape[r++] = ty.shape[i];
    }
    RLX_RETURN_IF_ERROR(reshape(c, y, shape, r, &y));
  }
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_gemm(rlx_ox_ctx* c) {
  float alpha, beta;
  int64_t ta, tb;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "alpha", 1.0f, &alpha));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "beta", 1.0f, &beta));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "transA", 0, &ta));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "transB", 0, &tb));
  if (rlx_ox_opset(c) < 7) {
    int64_t bc;
    RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "broadcast", 0, &bc));
  }
  rlx_tensor a, b, y, bias;
  int quantized = 0;
  RLX_RETURN_IF_ERROR(in(c, 0, &a));
  RLX_RETURN_IF_ERROR(need_float(c, a, "Gemm"));
  if (type_of(c, a).rank == 2 && !ta) /* B a DequantizeLinear'd constant: onnx_quant.c */
    RLX_RETURN_IF_ERROR(rlx_ox_quant_product(c, a, 1, tb ? 0 : 1, &y, &quantized));
  if (!quantized) {
    RLX_RETURN_IF_ERROR(in(c, 1, &b));
    if (type_of(c, a).rank != 2 || type_of(c, b).rank != 2)
      return rlx_ox_invalid(c, "A and B must be 2-D");
    G(rlx_graph_add_matmul(GRAPH, a, b, ta != 0, tb != 0, &y));
  }
  if (alpha != 1.0f) RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, y, alpha, &y));
  if (rlx_ox_has(c, 2) && beta != 0.0f) {
    RLX_RETURN_IF_ERROR(in(c, 2, &bias));
    if (beta != 1.0f) RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, bias, beta, &bias));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, y, bias, &y));
  }
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ reductions */

enum { RED_L1 = 10, RED_L2, RED_LOG_SUM, RED_LOG_SUM_EXP, RED_SUM_SQUARE };

/* Axes from the input (ReduceSum from opset 13, the others from 18) or the
 * attribute. *n = 0 with *all = 1 means every axis. */
static rlx_status reduce_axes(rlx_ox_ctx* c, int32_t rank, int32_t* axes, int32_t* n,
                              int* noop) {
  int64_t raw[RLX_MAX_RANK];
  int32_t nraw = -1;
  int64_t noop_empty;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "noop_with_empty_axes", 0, &noop_empty));
  if (rlx_ox_has(c, 1)) RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "axes", raw, RLX_MAX_RANK, &nraw));
  else RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "axes", raw, RLX_MAX_RANK, &nraw));
  *noop = nraw <= 0 && noop_empty;
  *n = 0;
  uint32_t seen = 0;
  for (int32_t i = 0; i < nraw; i++) {
    int32_t a;
    RLX_RETURN_IF_ERROR(norm_axis(c, raw[i], rank, &a));
    if (seen & (1u << a)) return rlx_ox_invalid(c, "axis %d is repeated", (int)a);
    seen |= 1u << a;
    axes[(*n)++] = a;
  }
  return RLX_OK;
}

static rlx_status map_reduce(rlx_ox_ctx* c) {
  int32_t kind = rlx_ox_arg(c);
  int64_t keep;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "keepdims", 1, &keep));
  rlx_tensor x, y, m;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  int32_t axes[RLX_MAX_RANK], n;
  int noop;
  RLX_RETURN_IF_ERROR(reduce_axes(c, tx.rank, axes, &n, &noop));
  if (noop || tx.rank == 0) return rlx_ox_set(c, 0, x);
  if (tx.dtype == RLX_BOOL) return rlx_ox_unsupported(c, "bool input");
  if (kind == RLX_RED_MEAN || kind >= RED_L1) RLX_RETURN_IF_ERROR(need_float(c, x, rlx_ox_op_type(c)));
  switch (kind) {
    case RED_L1:
      RLX_RETURN_IF_ERROR(act(c, RLX_ACT_ABS, x, &x));
      RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_SUM, x, axes, n, keep != 0, &y));
      break;
    case RED_L2: case RED_SUM_SQUARE:
      RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, x, x, &x));
      RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_SUM, x, axes, n, keep != 0, &y));
      if (kind == RED_L2) RLX_RETURN_IF_ERROR(act(c, RLX_ACT_SQRT, y, &y));
      break;
    case RED_LOG_SUM:
      RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_SUM, x, axes, n, keep != 0, &y));
      RLX_RETURN_IF_ERROR(act(c, RLX_ACT_LOG, y, &y));
      break;
    case RED_LOG_SUM_EXP: /* max + log(sum(exp(x - max))), reduced with keep, then shaped */
      RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_MAX, x, axes, n, 1, &m));
      RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, x, m, &y));
      RLX_RETURN_IF_ERROR(act(c, RLX_ACT_EXP, y, &y));
      RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_SUM, y, axes, n, 1, &y));
      RLX_RETURN_IF_ERROR(act(c, RLX_ACT_LOG, y, &y));
      RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, y, m, &y));
      if (!keep) RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_MAX, y, axes, n, 0, &y)); /* drop 1-dims */
      break;
    default:
      RLX_RETURN_IF_ERROR(reduce(c, (rlx_reduce_op)kind, x, axes, n, keep != 0, &y));
  }
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_arg(rlx_ox_ctx* c) {
  int64_t axis, keep, last;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 0, &axis));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "keepdims", 1, &keep));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "select_last_index", 0, &last));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  int32_t ax;
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, tx.rank, &ax));
  if (tx.dtype == RLX_BOOL) return rlx_ox_unsupported(c, "bool input");
  int is_max = rlx_ox_arg(c);
  if (last) { /* last index = dim - 1 - (first index in the reversed axis) */
    RLX_RETURN_IF_ERROR(need_static(c, &tx, ax, "select_last_index"));
    G(rlx_graph_add_reverse(GRAPH, x, &ax, 1, &x));
  }
  if (is_max) G(rlx_graph_add_argmax(GRAPH, x, ax, keep != 0, &y));
  else G(rlx_graph_add_argmin(GRAPH, x, ax, keep != 0, &y));
  if (last) RLX_RETURN_IF_ERROR(s_bin(c, RLX_BIN_SUB, (double)(tx.shape[ax] - 1), y, &y));
  return rlx_ox_set(c, 0, y);
}

/* [d0..dn) -> [prod(d0..axis), prod(axis..dn)], as ONNX's 2-D coercion. */
static rlx_status flatten_2d(rlx_ox_ctx* c, rlx_tensor x, int32_t axis, rlx_tensor* out) {
  rlx_type t = type_of(c, x);
  rlx_dim shape[2] = {1, 1};
  int sym[2] = {0, 0};
  for (int32_t i = 0; i < t.rank; i++) {
    int side = i >= axis;
    if (t.shape[i] < 0) sym[side]++;
    else shape[side] *= t.shape[i];
  }
  if (sym[0] && sym[1]) return rlx_ox_unsupported(c, "flattening symbolic dims on both sides");
  if (sym[0] || sym[1]) shape[sym[0] ? 0 : 1] = RLX_DIM_INFER;
  if (sym[0] == 1 && t.rank > 0 && axis == 1) shape[0] = t.shape[0];
  return reshape(c, x, shape, 2, out);
}

/* Softmax / LogSoftmax / Hardmax. Before opset 13 the input is coerced to
 * 2-D at axis (default 1) and normalised over the whole trailing block. */
static rlx_status map_softmax(rlx_ox_ctx* c) {
  int old = rlx_ox_opset(c) < 13;
  int64_t axis;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", old ? 1 : -1, &axis));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, rlx_ox_op_type(c)));
  rlx_type tx = type_of(c, x);
  int32_t ax = 0;
  if (old) { /* the 2-D coercion also accepts axis == rank */
    if (tx.rank == 0 || axis < -tx.rank || axis > tx.rank)
      return rlx_ox_invalid(c, "axis %lld is out of range for rank %d", (long long)axis,
                            (int)tx.rank);
    ax = (int32_t)(axis < 0 ? axis + tx.rank : axis);
  } else {
    RLX_RETURN_IF_ERROR(norm_axis(c, axis, tx.rank, &ax));
  }
  rlx_tensor work = x;
  int32_t wax = ax;
  if (old && ax != tx.rank - 1) {
    RLX_RETURN_IF_ERROR(flatten_2d(c, x, ax, &work));
    wax = 1;
  }
  int kind = rlx_ox_arg(c);
  if (kind == 0) G(rlx_graph_add_softmax(GRAPH, work, wax, &y));
  else if (kind == 1) G(rlx_graph_add_log_softmax(GRAPH, work, wax, &y));
  else { /* Hardmax: one-hot of the first maximum */
    rlx_type tw = type_of(c, work);
    RLX_RETURN_IF_ERROR(need_static(c, &tw, wax, "Hardmax"));
    int64_t n = tw.shape[wax];
    RLX_RETURN_IF_ERROR(check_table(c, n, sizeof(int64_t)));
    int64_t* iota = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
    if (!iota) return rlx_ox_invalid(c, "out of host memory");
    for (int64_t i = 0; i < n; i++) iota[i] = i;
    rlx_dim ishape[RLX_MAX_RANK];
    for (int32_t i = 0; i < tw.rank; i++) ishape[i] = i == wax ? n : 1;
    rlx_tensor idx, am;
    rlx_status s = constant(c, RLX_I64, tw.rank, ishape, iota, sizeof(int64_t) * (size_t)n, &idx);
    free(iota);
    RLX_RETURN_IF_ERROR(s);
    G(rlx_graph_add_argmax(GRAPH, work, wax, 1, &am));
    RLX_RETURN_IF_ERROR(cmp(c, RLX_CMP_EQ, am, idx, &y));
    RLX_RETURN_IF_ERROR(cast(c, y, tw.dtype, &y));
  }
  if (work != x) RLX_RETURN_IF_ERROR(reshape(c, y, tx.shape, tx.rank, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_cumsum(rlx_ox_ctx* c) {
  int64_t excl, rev, axis;
  int32_t n, ax;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "exclusive", 0, &excl));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "reverse", 0, &rev));
  RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "axis", &axis, 1, &n));
  if (n != 1) return rlx_ox_invalid(c, "axis must hold one value");
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, type_of(c, x).rank, &ax));
  G(rlx_graph_add_cumsum(GRAPH, x, ax, excl != 0, rev != 0, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_topk(rlx_ox_ctx* c) {
  int64_t axis, largest, sorted, k;
  int32_t n, ax;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", -1, &axis));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "largest", 1, &largest));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "sorted", 1, &sorted)); /* we always sort */
  if (rlx_ox_opset(c) < 10) {
    RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "k", -1, &k));
  } else {
    RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "K", &k, 1, &n));
    if (n != 1) return rlx_ox_invalid(c, "K must hold one value");
  }
  rlx_tensor x, out[2];
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, type_of(c, x).rank, &ax));
  if (k < 1) return rlx_ox_unsupported(c, "k = %lld (k must be >= 1)", (long long)k);
  G(rlx_graph_add_topk(GRAPH, x, k, ax, largest != 0, &out[0], &out[1]));
  RLX_RETURN_IF_ERROR(rlx_ox_set(c, 0, out[0]));
  return rlx_ox_set(c, 1, out[1]);
}

/* ------------------------------------------------------------------ normalization */

/* gamma/beta broadcast to x.shape[axis:] (the IR wants that exact shape). */
static rlx_status norm_param(rlx_ox_ctx* c, int32_t i, const rlx_type* tx, int32_t axis,
                             rlx_tensor* out) {
  *out = RLX_NONE;
  if (!rlx_ox_has(c, i)) return RLX_OK;
  RLX_RETURN_IF_ERROR(in(c, i, out));
  rlx_type tp = type_of(c, *out);
  rlx_type want = {tx->dtype, tx->rank - axis, {0}};
  memcpy(want.shape, tx->shape + axis, sizeof(rlx_dim) * (size_t)want.rank);
  if (tp.dtype != tx->dtype) RLX_RETURN_IF_ERROR(cast(c, *out, tx->dtype, out));
  if (tp.rank > want.rank) { /* leading 1s */
    for (int32_t d = 0; d < tp.rank - want.rank; d++)
      if (tp.shape[d] != 1) return rlx_ox_invalid(c, "scale/bias do not broadcast");
    RLX_RETURN_IF_ERROR(reshape(c, *out, tp.shape + (tp.rank - want.rank), want.rank, out));
    tp = type_of(c, *out);
  }
  if (!rlx_type_equal(&tp, &want)) G(rlx_graph_add_expand(GRAPH, *out, want.shape, want.rank, out));
  return RLX_OK;
}

static rlx_status map_layer_norm(rlx_ox_ctx* c) {
  int64_t axis, stash;
  float eps;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", -1, &axis));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "epsilon", 1e-5f, &eps));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "stash_type", 1, &stash));
  rlx_tensor x, gamma, beta, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "LayerNormalization"));
  rlx_type tx = type_of(c, x);
  int32_t ax;
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, tx.rank, &ax));
  RLX_RETURN_IF_ERROR(norm_param(c, 1, &tx, ax, &gamma));
  RLX_RETURN_IF_ERROR(norm_param(c, 2, &tx, ax, &beta));
  G(rlx_graph_add_layer_norm(GRAPH, x, gamma, beta, ax, eps, &y));
  RLX_RETURN_IF_ERROR(rlx_ox_set(c, 0, y));
  if (!rlx_ox_wants(c, 1) && !rlx_ox_wants(c, 2)) return RLX_OK;
  /* Mean and 1/sqrt(var + eps) over the normalized axes, kept as size-1 dims. */
  int32_t axes[RLX_MAX_RANK], n = 0;
  for (int32_t d = ax; d < tx.rank; d++) axes[n++] = d;
  rlx_tensor mean, dev, var, inv;
  RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_MEAN, x, axes, n, 1, &mean));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, x, mean, &dev));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, dev, dev, &dev));
  RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_MEAN, dev, axes, n, 1, &var));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, var, eps, &var));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_RSQRT, var, &inv));
  RLX_RETURN_IF_ERROR(rlx_ox_set(c, 1, mean));
  return rlx_ox_set(c, 2, inv);
}

/* ------------------------------------------------------------------ layout */

static rlx_status map_transpose(rlx_ox_ctx* c) {
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  int32_t rank = type_of(c, x).rank, np;
  int64_t perm64[RLX_MAX_RANK];
  int32_t perm[RLX_MAX_RANK];
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "perm", perm64, RLX_MAX_RANK, &np));
  if (np >= 0 && np != rank) return rlx_ox_invalid(c, "perm has %d entries for rank %d", (int)np,
                                                   (int)rank);
  for (int32_t i = 0; i < rank; i++) perm[i] = np < 0 ? rank - 1 - i : (int32_t)perm64[i];
  for (int32_t i = 0; i < rank; i++)
    if (np >= 0 && (perm64[i] < 0 || perm64[i] >= rank))
      return rlx_ox_invalid(c, "perm entry %lld is out of range", (long long)perm64[i]);
  G(rlx_graph_add_transpose(GRAPH, x, perm, rank, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_reshape(rlx_ox_ctx* c) {
  int64_t shape[RLX_MAX_RANK], allowzero;
  uint8_t sym[RLX_MAX_RANK] = {0};
  int32_t n;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "allowzero", 0, &allowzero));
  if (rlx_ox_opset(c) < 5) RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "shape", shape, RLX_MAX_RANK, &n));
  else RLX_RETURN_IF_ERROR(rlx_ox_dims_in(c, 1, "shape", shape, sym, RLX_MAX_RANK, &n));
  if (n < 0) return rlx_ox_invalid(c, "no shape");
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  rlx_dim to[RLX_MAX_RANK];
  for (int32_t i = 0; i < n; i++) {
    if (sym[i]) {
      to[i] = shape[i]; /* a symbolic dim of a shape value */
    } else if (shape[i] == 0 && !allowzero) {
      if (i >= tx.rank) return rlx_ox_invalid(c, "shape entry %d is 0 beyond the input's rank",
                                              (int)i);
      to[i] = tx.shape[i];
    } else if (shape[i] == -1) {
      to[i] = RLX_DIM_INFER;
    } else if (shape[i] < 0) {
      return rlx_ox_invalid(c, "shape entry %d is %lld", (int)i, (long long)shape[i]);
    } else {
      to[i] = shape[i];
    }
  }
  RLX_RETURN_IF_ERROR(reshape(c, x, to, n, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_flatten(rlx_ox_ctx* c) {
  int64_t axis;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 1, &axis));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  int32_t rank = type_of(c, x).rank;
  if (axis < -rank || axis > rank) return rlx_ox_invalid(c, "axis %lld out of range",
                                                         (long long)axis);
  RLX_RETURN_IF_ERROR(flatten_2d(c, x, (int32_t)(axis < 0 ? axis + rank : axis), &y));
  return rlx_ox_set(c, 0, y);
}

/* Axes from the attribute (before opset 13) or the optional input. */
static rlx_status axes_operand(rlx_ox_ctx* c, int32_t input, int64_t* axes, int32_t* n) {
  if (rlx_ox_opset(c) < 13) return rlx_ox_attr_ints(c, "axes", axes, RLX_MAX_RANK, n);
  *n = -1;
  if (!rlx_ox_has(c, input)) return RLX_OK;
  return rlx_ox_known_ints(c, input, "axes", axes, RLX_MAX_RANK, n);
}

static rlx_status map_squeeze(rlx_ox_ctx* c) {
  int64_t axes[RLX_MAX_RANK];
  int32_t n;
  RLX_RETURN_IF_ERROR(axes_operand(c, 1, axes, &n));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  uint32_t drop = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t a;
    RLX_RETURN_IF_ERROR(norm_axis(c, axes[i], tx.rank, &a));
    if (tx.shape[a] != 1) return rlx_ox_invalid(c, "axis %d has size %lld, not 1", (int)a,
                                                (long long)tx.shape[a]);
    drop |= 1u << a;
  }
  if (n < 0)
    for (int32_t a = 0; a < tx.rank; a++)
      if (tx.shape[a] == 1) drop |= 1u << a;
  rlx_dim shape[RLX_MAX_RANK];
  int32_t r = 0;
  for (int32_t a = 0; a < tx.rank; a++)
    if (!(drop & (1u << a))) shape[r++] = tx.shape[a];
  RLX_RETURN_IF_ERROR(reshape(c, x, shape, r, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_unsqueeze(rlx_ox_ctx* c) {
  int64_t axes[RLX_MAX_RANK];
  int32_t n;
  RLX_RETURN_IF_ERROR(axes_operand(c, 1, axes, &n));
  if (n < 0) return rlx_ox_invalid(c, "axes are required");
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  int32_t rank = tx.rank + n;
  if (rank > RLX_MAX_RANK) return rlx_ox_unsupported(c, "result rank %d exceeds %d", (int)rank,
                                                     RLX_MAX_RANK);
  uint32_t ins = 0;
  for (int32_t i = 0; i < n; i++) {
    int32_t a;
    RLX_RETURN_IF_ERROR(norm_axis(c, axes[i], rank, &a));
    if (ins & (1u << a)) return rlx_ox_invalid(c, "axis %d is repeated", (int)a);
    ins |= 1u << a;
  }
  rlx_dim shape[RLX_MAX_RANK];
  for (int32_t a = 0, j = 0; a < rank; a++) shape[a] = (ins & (1u << a)) ? 1 : tx.shape[j++];
  RLX_RETURN_IF_ERROR(reshape(c, x, shape, rank, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_concat(rlx_ox_ctx* c) {
  int64_t axis = 0;
  if (!rlx_ox_attr_has(c, "axis") && rlx_ox_opset(c) >= 4)
    return rlx_ox_invalid(c, "attribute 'axis' is required");
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 1, &axis));
  rlx_tensor xs[RLX_MAX_INPUTS], y;
  int32_t n = 0, ax;
  rlx_type t0;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, 0, &t0));
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, t0.rank, &ax));
  /* Inputs with nothing along axis add nothing (ONNX allows them). */
  for (int32_t i = 0; i < rlx_ox_n_in(c); i++) {
    rlx_type ti;
    RLX_RETURN_IF_ERROR(rlx_ox_type(c, i, &ti));
    if (ti.rank == t0.rank && ti.shape[ax] == 0 && rlx_ox_n_in(c) > 1) continue;
    if (n == RLX_MAX_INPUTS) return rlx_ox_unsupported(c, "more than %d inputs", RLX_MAX_INPUTS);
    RLX_RETURN_IF_ERROR(in(c, i, &xs[n++]));
  }
  if (n == 0) RLX_RETURN_IF_ERROR(in(c, 0, &xs[n++]));
  if (n == 1) return rlx_ox_set(c, 0, xs[0]);
  G(rlx_graph_add_concat(GRAPH, xs, n, ax, &y));
  return rlx_ox_set(c, 0, y);
}


#define MAX_SPLIT 64

static rlx_status map_split(rlx_ox_ctx* c) {
  int64_t axis, num, sizes[MAX_SPLIT];
  int32_t n = -1, ax;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 0, &axis));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "num_outputs", 0, &num));
  if (rlx_ox_opset(c) < 13) RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "split", sizes, MAX_SPLIT, &n));
  else if (rlx_ox_has(c, 1)) RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "split", sizes, MAX_SPLIT, &n));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, tx.rank, &ax));
  RLX_RETURN_IF_ERROR(need_static(c, &tx, ax, "split axis"));
  int64_t dim = tx.shape[ax];
  int32_t parts = rlx_ox_n_out(c);
  if (parts < 1 || parts > MAX_SPLIT) return rlx_ox_unsupported(c, "%d outputs", (int)parts);
  if (n < 0) { /* equal parts; from opset 18 the last may be smaller */
    int64_t chunk = (dim + parts - 1) / parts;
    if (dim % parts && rlx_ox_opset(c) < 18)
      return rlx_ox_invalid(c, "dim %lld does not split into %d equal parts", (long long)dim,
                            (int)parts);
    for (int32_t i = 0; i < parts; i++) {
      int64_t left = dim - i * chunk;
      sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
    }
    n = parts;
  }
  if (n != parts) return rlx_ox_invalid(c, "split has %d sizes for %d outputs", (int)n, (int)parts);
  int64_t start = 0;
  for (int32_t i = 0; i < n; i++) {
    if (sizes[i] < 0 || sizes[i] > dim - start)
      return rlx_ox_invalid(c, "split sizes do not add up to dim %lld", (long long)dim);
    G(rlx_graph_add_narrow(GRAPH, x, ax, start, sizes[i], &y));
    RLX_RETURN_IF_ERROR(rlx_ox_set(c, i, y));
    start += sizes[i];
  }
  if (start != dim) return rlx_ox_invalid(c, "split sizes add up to %lld, dim is %lld",
                                          (long long)start, (long long)dim);
  return RLX_OK;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* One axis of a Slice: narrow for step 1, a gather of the picked indices otherwise. */
static rlx_status slice_axis(rlx_ox_ctx* c, rlx_tensor* x, int32_t ax, int64_t start,
                             int64_t end, int64_t step) {
  rlx_type t = type_of(c, *x);
  RLX_RETURN_IF_ERROR(need_static(c, &t, ax, "Slice"));
  int64_t dim = t.shape[ax], len;
  if (step == 0) return rlx_ox_invalid(c, "step is 0");
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = clamp64(start, 0, dim);
    end = clamp64(end, 0, dim);
    uint64_t d = end > start ? (uint64_t)(end - start) : 0, st = (uint64_t)step;
    len = (int64_t)(d / st + (d % st != 0));
  } else {
    start = clamp64(start, 0, dim - 1);
    end = clamp64(end, -1, dim - 1);
    uint64_t d = start > end ? (uint64_t)(start - end) : 0, st = (uint64_t)(-(step + 1)) + 1;
    len = (int64_t)(d / st + (d % st != 0));
  }
  if (step == 1) {
    if (start == 0 && len == dim) return RLX_OK;
    G(rlx_graph_add_narrow(GRAPH, *x, ax, start, len, x));
    return RLX_OK;
  }
  RLX_RETURN_IF_ERROR(check_table(c, len, sizeof(int64_t)));
  int64_t* idx = malloc(sizeof(int64_t) * (size_t)(len ? len : 1));
  if (!idx) return rlx_ox_invalid(c, "out of host memory");
  for (int64_t i = 0; i < len; i++) idx[i] = start + i * step;
  rlx_tensor it;
  rlx_status s = const_i64(c, idx, len, &it);
  free(idx);
  RLX_RETURN_IF_ERROR(s);
  G(rlx_graph_add_gather(GRAPH, *x, it, ax, x));
  return RLX_OK;
}

/* Bound that says "to the end" (torch writes INT64_MAX). */
#define SLICE_TO_END ((int64_t)1 << 40)

/* One axis of a Slice whose bounds or axis are symbolic (step 1 only).
 * A static end on a symbolic axis clamps (min(T, 100)); a symbolic bound is
 * not clamped: tril[:T] as min(T, 32) would make dims that no longer match
 * the T of the other operands, so it is taken as inside the axis, which
 * narrow checks when the graph is specialised. */
static rlx_status slice_axis_symbolic(rlx_ox_ctx* c, rlx_tensor* x, int32_t ax, int64_t start,
                                      int start_sym, int64_t end, int end_sym, int64_t step) {
  rlx_type t = type_of(c, *x);
  rlx_dim dim = t.shape[ax], s, e, len;
  if (step != 1) return rlx_ox_unsupported(c, "a symbolic slice with step %lld", (long long)step);
  if (start_sym) s = start;
  else if (start < 0) G(rlx_graph_dim_expr(GRAPH, RLX_DIM_SUB, dim, start < -SLICE_TO_END ? 0 : -start, &s));
  else s = dim >= 0 && start > dim ? dim : start;
  if (end_sym) e = end;
  else if (end >= SLICE_TO_END || (dim >= 0 && end > dim)) e = dim;
  else if (end < 0) G(rlx_graph_dim_expr(GRAPH, RLX_DIM_SUB, dim, -end, &e));
  else if (dim < 0) G(rlx_graph_dim_expr(GRAPH, RLX_DIM_MIN, dim, end, &e)); /* x[:, :100] */
  else e = end;
  G(rlx_graph_dim_expr(GRAPH, RLX_DIM_SUB, e, s, &len));
  if (s == 0 && len == dim) return RLX_OK;
  G(rlx_graph_add_narrow(GRAPH, *x, ax, s, len, x));
  return RLX_OK;
}

static rlx_status map_slice(rlx_ox_ctx* c) {
  int64_t starts[RLX_MAX_RANK], ends[RLX_MAX_RANK], axes[RLX_MAX_RANK], steps[RLX_MAX_RANK];
  uint8_t ssym[RLX_MAX_RANK] = {0}, esym[RLX_MAX_RANK] = {0};
  int32_t ns, ne, na = -1, nt = -1;
  if (rlx_ox_opset(c) < 10) {
    RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "starts", starts, RLX_MAX_RANK, &ns));
    RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "ends", ends, RLX_MAX_RANK, &ne));
    RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "axes", axes, RLX_MAX_RANK, &na));
  } else {
    RLX_RETURN_IF_ERROR(rlx_ox_dims_in(c, 1, "starts", starts, ssym, RLX_MAX_RANK, &ns));
    RLX_RETURN_IF_ERROR(rlx_ox_dims_in(c, 2, "ends", ends, esym, RLX_MAX_RANK, &ne));
    if (rlx_ox_has(c, 3)) RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 3, "axes", axes, RLX_MAX_RANK, &na));
    if (rlx_ox_has(c, 4)) RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 4, "steps", steps, RLX_MAX_RANK, &nt));
  }
  if (ns < 0 || ns != ne || (na >= 0 && na != ns) || (nt >= 0 && nt != ns))
    return rlx_ox_invalid(c, "starts, ends, axes and steps must have one length");
  rlx_tensor x;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  int32_t rank = type_of(c, x).rank;
  uint32_t seen = 0;
  for (int32_t i = 0; i < ns; i++) {
    int32_t ax;
    RLX_RETURN_IF_ERROR(norm_axis(c, na >= 0 ? axes[i] : i, rank, &ax));
    if (seen & (1u << ax)) return rlx_ox_invalid(c, "axis %d is repeated", (int)ax);
    seen |= 1u << ax;
    int64_t step = nt >= 0 ? steps[i] : 1;
    if (ssym[i] || esym[i] || type_of(c, x).shape[ax] < 0)
      RLX_RETURN_IF_ERROR(slice_axis_symbolic(c, &x, ax, starts[i], ssym[i], ends[i], esym[i], step));
    else RLX_RETURN_IF_ERROR(slice_axis(c, &x, ax, starts[i], ends[i], step));
  }
  return rlx_ox_set(c, 0, x);
}

/* Expand: a bidirectional broadcast of x's shape with the given one. */
static rlx_status map_expand(rlx_ox_ctx* c) {
  int64_t shape[RLX_MAX_RANK];
  uint8_t sym[RLX_MAX_RANK];
  int32_t n;
  RLX_RETURN_IF_ERROR(rlx_ox_dims_in(c, 1, "shape", shape, sym, RLX_MAX_RANK, &n));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  int32_t rank = tx.rank > n ? tx.rank : n;
  rlx_dim out[RLX_MAX_RANK];
  for (int32_t i = 1; i <= rank; i++) {
    rlx_dim a = i <= tx.rank ? tx.shape[tx.rank - i] : 1;
    int64_t b = i <= n ? shape[n - i] : 1;
    int b_sym = i <= n && sym[n - i];
    if (b < 0 && !b_sym) return rlx_ox_invalid(c, "shape entry %lld", (long long)b);
    /* A symbolic entry against a static a != 1 must be 1 or a: the result is a. */
    if (b_sym) out[rank - i] = a == 1 || a < 0 ? b : a;
    else if (a == b || b == 1) out[rank - i] = a;
    else if (a == 1) out[rank - i] = b;
    else if (a < 0) return rlx_ox_unsupported(c, "expanding a symbolic dim to %lld", (long long)b);
    else return rlx_ox_invalid(c, "dim %lld does not broadcast to %lld", (long long)a, (long long)b);
  }
  if (rank == tx.rank && memcmp(out, tx.shape, sizeof(rlx_dim) * (size_t)rank) == 0)
    return rlx_ox_set(c, 0, x);
  G(rlx_graph_add_expand(GRAPH, x, out, rank, &y));
  return rlx_ox_set(c, 0, y);
}

/* Tile: per axis, concatenate `repeats` copies. */
static rlx_status map_tile(rlx_ox_ctx* c) {
  int64_t reps[RLX_MAX_RANK];
  int32_t n;
  RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "repeats", reps, RLX_MAX_RANK, &n));
  rlx_tensor x;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  if (n != type_of(c, x).rank) return rlx_ox_invalid(c, "repeats must have one entry per dim");
  for (int32_t ax = 0; ax < n; ax++) {
    if (reps[ax] < 0) return rlx_ox_invalid(c, "negative repeat");
    if (reps[ax] > 4096) return rlx_ox_unsupported(c, "repeat %lld (at most 4096)",
                                                   (long long)reps[ax]);
    if (reps[ax] == 0) {
      G(rlx_graph_add_narrow(GRAPH, x, ax, 0, 0, &x));
      continue;
    }
    rlx_tensor copies[RLX_MAX_INPUTS];
    int64_t left = reps[ax];
    rlx_tensor acc = RLX_NONE;
    while (left > 0) { /* concat at most RLX_MAX_INPUTS at a time */
      int32_t k = 0;
      if (acc != RLX_NONE) copies[k++] = acc;
      while (k < RLX_MAX_INPUTS && left > 0) {
        copies[k++] = x;
        left--;
      }
      if (k == 1) acc = copies[0];
      else G(rlx_graph_add_concat(GRAPH, copies, k, ax, &acc));
    }
    x = acc;
  }
  return rlx_ox_set(c, 0, x);
}

static rlx_status map_gather(rlx_ox_ctx* c) {
  int64_t axis;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 0, &axis));
  rlx_tensor x, idx, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(in(c, 1, &idx));
  int32_t ax;
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, type_of(c, x).rank, &ax));
  G(rlx_graph_add_gather(GRAPH, x, idx, ax, &y));
  return rlx_ox_set(c, 0, y);
}

/* GatherElements as one flat Gather: flat = idx * stride[axis] + offset,
 * where offset (a constant) holds the other coordinates' contribution. An
 * index outside its axis becomes an out-of-range flat index, so the Gather
 * reports it instead of reading a neighbour. */
rlx_status rlx_ox_gather_elements(rlx_ox_ctx* c, rlx_tensor x, rlx_tensor idx, int32_t ax,
                                  rlx_tensor* out) {
  rlx_type tx = type_of(c, x), ti = type_of(c, idx);
  if (ti.rank != tx.rank) return rlx_ox_invalid(c, "indices must have the data's rank");
  int64_t numel = rlx_type_numel(&tx), n = rlx_type_numel(&ti);
  if (numel < 0 || n < 0) return rlx_ox_unsupported(c, "symbolic shapes");
  int64_t stride[RLX_MAX_RANK];
  for (int32_t d = tx.rank - 1, s = 1; d >= 0; d--) {
    stride[d] = s;
    s *= tx.shape[d];
    if (d != ax && ti.shape[d] > tx.shape[d])
      return rlx_ox_invalid(c, "indices dim %d exceeds the data's", (int)d);
  }
  RLX_RETURN_IF_ERROR(check_table(c, n, sizeof(int64_t)));
  int64_t* off = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!off) return rlx_ox_invalid(c, "out of host memory");
  for (int64_t p = 0; p < n; p++) {
    int64_t rem = p, o = 0;
    for (int32_t d = ti.rank - 1; d >= 0; d--) {
      int64_t coord = rem % ti.shape[d];
      rem /= ti.shape[d];
      if (d != ax) o += coord * stride[d];
    }
    off[p] = o;
  }
  rlx_tensor offt, neg, wrapped, ok, hi, f, big;
  rlx_status s = constant(c, RLX_I64, ti.rank, ti.shape, off, sizeof(int64_t) * (size_t)n, &offt);
  free(off);
  RLX_RETURN_IF_ERROR(s);
  RLX_RETURN_IF_ERROR(cast(c, idx, RLX_I64, &idx));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, idx, 0.0, &neg));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, idx, (double)tx.shape[ax], &wrapped));
  RLX_RETURN_IF_ERROR(where(c, neg, wrapped, idx, &idx));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_GE, idx, 0.0, &ok));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, idx, (double)tx.shape[ax], &hi));
  RLX_RETURN_IF_ERROR(bool_const(c, 0, &f));
  RLX_RETURN_IF_ERROR(where(c, ok, hi, f, &ok));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, idx, (double)stride[ax], &idx));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, idx, offt, &idx));
  RLX_RETURN_IF_ERROR(scalar(c, RLX_I64, (double)numel, &big));
  RLX_RETURN_IF_ERROR(where(c, ok, idx, big, &idx));
  rlx_dim flat = numel;
  RLX_RETURN_IF_ERROR(reshape(c, x, &flat, 1, &x));
  G(rlx_graph_add_gather(GRAPH, x, idx, 0, out));
  return RLX_OK;
}

static rlx_status map_gather_elements(rlx_ox_ctx* c) {
  int64_t axis;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 0, &axis));
  rlx_tensor x, idx, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(in(c, 1, &idx));
  int32_t ax;
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, type_of(c, x).rank, &ax));
  RLX_RETURN_IF_ERROR(rlx_ox_gather_elements(c, x, idx, ax, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ constants and shapes */

static rlx_status map_constant(rlx_ox_ctx* c) {
  rlx_host_tensor h;
  int present;
  rlx_error e;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_tensor(c, "value", &h, &present));
  if (present) return rlx_ox_set_known(c, 0, &h);
  if (rlx_ox_attr_has(c, "value_float") || rlx_ox_attr_has(c, "value_int")) {
    float f;
    int64_t i, one = 1;
    int is_f = rlx_ox_attr_has(c, "value_float");
    if (is_f) RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "value_float", 0, &f));
    else RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "value_int", 0, &i));
    if (rlx_host_alloc(&h, is_f ? RLX_F32 : RLX_I64, 0, &one, &e) != RLX_OK)
      return rlx_ox_invalid(c, "%s", e.msg);
    if (is_f) *(float*)h.data = f;
    else *(int64_t*)h.data = i;
    return rlx_ox_set_known(c, 0, &h);
  }
  if (rlx_ox_attr_has(c, "value_floats") || rlx_ox_attr_has(c, "value_ints")) {
    int is_f = rlx_ox_attr_has(c, "value_floats");
    const int32_t cap = 1 << 16;
    void* buf = malloc((size_t)cap * 8);
    int32_t n;
    if (!buf) return rlx_ox_invalid(c, "out of host memory");
    rlx_status s = is_f ? rlx_ox_attr_floats(c, "value_floats", buf, cap, &n)
                        : rlx_ox_attr_ints(c, "value_ints", buf, cap, &n);
    int64_t shape = n;
    if (s == RLX_OK && rlx_host_alloc(&h, is_f ? RLX_F32 : RLX_I64, 1, &shape, &e) != RLX_OK)
      s = rlx_ox_invalid(c, "%s", e.msg);
    if (s == RLX_OK && h.bytes) memcpy(h.data, buf, h.bytes);
    free(buf);
    RLX_RETURN_IF_ERROR(s);
    return rlx_ox_set_known(c, 0, &h);
  }
  if (rlx_ox_attr_has(c, "sparse_value"))
    return rlx_ox_unsupported(c, "attribute 'sparse_value' is not supported");
  if (rlx_ox_attr_has(c, "value_string") || rlx_ox_attr_has(c, "value_strings"))
    return rlx_ox_unsupported(c, "string constants are not supported");
  return rlx_ox_invalid(c, "no value attribute");
}

/* ConstantOfShape of a symbolic shape: the value expanded to it. */
static rlx_status constant_of_symbolic_shape(rlx_ox_ctx* c, const int64_t* shape, int32_t n) {
  rlx_host_tensor v;
  int present;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_tensor(c, "value", &v, &present));
  unsigned char zero[8] = {0};
  rlx_dtype dt = present ? v.dtype : RLX_F32;
  if (present && rlx_host_numel(&v) != 1) {
    rlx_host_free(&v);
    return rlx_ox_invalid(c, "value must hold one element");
  }
  rlx_dim ones[RLX_MAX_RANK];
  for (int32_t i = 0; i < n; i++) ones[i] = 1;
  rlx_tensor t;
  rlx_status s = rlx_graph_add_constant(GRAPH, dt, ones, n, present ? v.data : zero,
                                        rlx_dtype_size(dt), &t);
  rlx_host_free(&v);
  G(s);
  G(rlx_graph_add_expand(GRAPH, t, shape, n, &t));
  return rlx_ox_set(c, 0, t);
}

static rlx_status map_constant_of_shape(rlx_ox_ctx* c) {
  int64_t shape[RLX_MAX_RANK];
  uint8_t sym[RLX_MAX_RANK];
  int32_t n;
  RLX_RETURN_IF_ERROR(rlx_ox_dims_in(c, 0, "shape", shape, sym, RLX_MAX_RANK, &n));
  for (int32_t i = 0; i < n; i++)
    if (sym[i]) return constant_of_symbolic_shape(c, shape, n);
  rlx_host_tensor v, h;
  int present;
  rlx_error e;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_tensor(c, "value", &v, &present));
  if (present && rlx_host_numel(&v) != 1) {
    rlx_host_free(&v);
    return rlx_ox_invalid(c, "value must hold one element");
  }
  rlx_dtype dt = present ? v.dtype : RLX_F32;
  int64_t bytes = (int64_t)rlx_dtype_size(dt);
  for (int32_t i = 0; i < n; i++)
    if (shape[i] < 0 || (shape[i] && bytes > RLX_ONNX_MAX_FOLD_BYTES / shape[i])) {
      rlx_host_free(&v);
      return rlx_ox_unsupported(c, "shape entry %d (%lld) is negative or too large", (int)i,
                                (long long)shape[i]);
    } else {
      bytes *= shape[i];
    }
  rlx_status s = rlx_host_alloc(&h, dt, n, shape, &e);
  if (s != RLX_OK) {
    rlx_host_free(&v);
    return rlx_ox_invalid(c, "%s", e.msg);
  }
  size_t es = rlx_dtype_size(dt);
  for (size_t off = 0; present && off < h.bytes; off += es)
    memcpy((char*)h.data + off, v.data, es);
  rlx_host_free(&v);
  return rlx_ox_set_known(c, 0, &h);
}

static rlx_status map_shape(rlx_ox_ctx* c) {
  rlx_type t;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, 0, &t));
  int64_t start, end;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "start", 0, &start));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "end", t.rank, &end));
  if (start < 0) start += t.rank;
  if (end < 0) end += t.rank;
  start = clamp64(start, 0, t.rank);
  end = clamp64(end, start, t.rank);
  int64_t dims[RLX_MAX_RANK], n = end - start;
  for (int64_t i = 0; i < n; i++) {
    dims[i] = t.shape[start + i];
    if (dims[i] < 0)
      return rlx_ox_unsupported(c, "Shape of a symbolic dim (%s)",
                                rlx_ox_graph(c)->symbols[-(dims[i] + 1)]);
  }
  return known_out(c, 0, RLX_I64, 1, &n, dims);
}

static rlx_status map_size(rlx_ox_ctx* c) {
  rlx_type t;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, 0, &t));
  int64_t n = rlx_type_numel(&t);
  if (n < 0) return rlx_ox_unsupported(c, "Size of a symbolic shape");
  return known_out(c, 0, RLX_I64, 0, NULL, &n);
}

/* Range with a symbolic limit (arange(T) in exported models): start and
 * delta known, n = cdiv(limit - start, delta) a dim, values start + i*delta
 * from an iota (a cumsum over n ones; exact in f32 below 2^24). */
static rlx_status range_symbolic(rlx_ox_ctx* c) {
  const rlx_host_tensor *ks, *kd;
  int64_t limit;
  uint8_t lsym;
  int32_t n1;
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 0, "start", &ks));
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 2, "delta", &kd));
  RLX_RETURN_IF_ERROR(rlx_ox_dims_in(c, 1, "limit", &limit, &lsym, 1, &n1));
  if (rlx_host_numel(ks) != 1 || rlx_host_numel(kd) != 1 || n1 != 1)
    return rlx_ox_invalid(c, "start, limit and delta must be scalars");
  double sd = rlx_load_f64(ks->data, ks->dtype, 0), dd = rlx_load_f64(kd->data, kd->dtype, 0);
  int64_t s = (int64_t)sd, d = (int64_t)dd;
  if ((double)s != sd || (double)d != dd || d <= 0)
    return rlx_ox_unsupported(c, "a symbolic limit needs integral start and a positive integral delta");
  rlx_dim diff, n;
  G(rlx_graph_dim_expr(GRAPH, s >= 0 ? RLX_DIM_SUB : RLX_DIM_ADD, limit, s >= 0 ? s : -s, &diff));
  G(rlx_graph_dim_expr(GRAPH, RLX_DIM_CEIL_DIV, diff, d, &n));
  rlx_tensor t;
  G(rlx_ox_iota(GRAPH, n, &t));
  if (d != 1) RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, t, (double)d, &t));
  if (s != 0) RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, t, (double)s, &t));
  if (ks->dtype != RLX_F32) RLX_RETURN_IF_ERROR(cast(c, t, ks->dtype, &t));
  return rlx_ox_set(c, 0, t);
}

static rlx_status map_range(rlx_ox_ctx* c) {
  const rlx_host_tensor *ks, *kl, *kd;
  if (rlx_ox_sv_in(c, 1)) return range_symbolic(c);
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 0, "start", &ks));
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 1, "limit", &kl));
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 2, "delta", &kd));
  if (rlx_host_numel(ks) != 1 || rlx_host_numel(kl) != 1 || rlx_host_numel(kd) != 1)
    return rlx_ox_invalid(c, "start, limit and delta must be scalars");
  rlx_dtype dt = ks->dtype;
  double s = rlx_load_f64(ks->data, dt, 0), l = rlx_load_f64(kl->data, kl->dtype, 0),
         d = rlx_load_f64(kd->data, kd->dtype, 0);
  if (d == 0 || isnan(s) || isnan(l) || isnan(d)) return rlx_ox_invalid(c, "delta is 0 or NaN");
  double count = ceil((l - s) / d);
  if (count < 0) count = 0;
  if (count * (double)rlx_dtype_size(dt) > (double)RLX_ONNX_MAX_FOLD_BYTES)
    return rlx_ox_unsupported(c, "%g elements is too large", count);
  int64_t n = (int64_t)count;
  rlx_host_tensor h;
  rlx_error e;
  if (rlx_host_alloc(&h, dt, 1, &n, &e) != RLX_OK) return rlx_ox_invalid(c, "%s", e.msg);
  int64_t si = rlx_load_i64(ks->data, dt, 0), di = rlx_load_i64(kd->data, kd->dtype, 0);
  for (int64_t i = 0; i < n; i++) {
    if (rlx_dtype_is_float(dt)) rlx_store_f64(h.data, dt, i, s + (double)i * d);
    else rlx_store_i64(h.data, dt, i, si + i * di);
  }
  return rlx_ox_set_known(c, 0, &h);
}

/* Trilu over symbolic rows/cols: the mask j - i >= k (<= k) from two iotas. */
static rlx_status trilu_symbolic(rlx_ox_ctx* c, rlx_tensor x, int64_t upper, int64_t k) {
  rlx_type t = type_of(c, x);
  rlx_dim rows = t.shape[t.rank - 2], cols = t.shape[t.rank - 1];
  rlx_tensor i, j, diff, mask, zero, y;
  G(rlx_ox_iota(GRAPH, rows, &i));
  G(rlx_ox_iota(GRAPH, cols, &j));
  rlx_dim col_shape[2] = {rows, 1}, row_shape[2] = {1, cols};
  RLX_RETURN_IF_ERROR(reshape(c, i, col_shape, 2, &i));
  RLX_RETURN_IF_ERROR(reshape(c, j, row_shape, 2, &j));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, j, i, &diff));
  RLX_RETURN_IF_ERROR(cmp_s(c, upper ? RLX_CMP_GE : RLX_CMP_LE, diff, (double)k, &mask));
  RLX_RETURN_IF_ERROR(scalar(c, t.dtype, 0.0, &zero));
  RLX_RETURN_IF_ERROR(where(c, mask, x, zero, &y));
  return rlx_ox_set(c, 0, y);
}

/* Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle. */
static rlx_status map_trilu(rlx_ox_ctx* c) {
  int64_t upper, k = 0;
  int32_t n;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "upper", 1, &upper));
  if (rlx_ox_has(c, 1)) RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "k", &k, 1, &n));
  rlx_tensor x, mask, zero, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type t = type_of(c, x);
  if (t.rank < 2) return rlx_ox_invalid(c, "input must have rank >= 2");
  if (t.shape[t.rank - 2] < 0 || t.shape[t.rank - 1] < 0) return trilu_symbolic(c, x, upper, k);
  RLX_RETURN_IF_ERROR(need_static(c, &t, t.rank - 2, "Trilu"));
  RLX_RETURN_IF_ERROR(need_static(c, &t, t.rank - 1, "Trilu"));
  int64_t shape[2] = {t.shape[t.rank - 2], t.shape[t.rank - 1]};
  if (shape[1] && shape[0] > RLX_ONNX_MAX_FOLD_BYTES / shape[1])
    return rlx_ox_unsupported(c, "a %lld x %lld mask is too large", (long long)shape[0],
                              (long long)shape[1]);
  int64_t count = shape[0] * shape[1];
  uint8_t* m = malloc((size_t)(count > 0 ? count : 1));
  if (!m) return rlx_ox_invalid(c, "out of host memory");
  for (int64_t i = 0; i < shape[0]; i++)
    for (int64_t j = 0; j < shape[1]; j++)
      m[i * shape[1] + j] = upper ? (j - i >= k) : (j - i <= k);
  rlx_status s = constant(c, RLX_BOOL, 2, shape, m, (size_t)count, &mask);
  free(m);
  RLX_RETURN_IF_ERROR(s);
  RLX_RETURN_IF_ERROR(scalar(c, t.dtype, 0.0, &zero));
  RLX_RETURN_IF_ERROR(where(c, mask, x, zero, &y));
  return rlx_ox_set(c, 0, y);
}

static rlx_status map_identity(rlx_ox_ctx* c) {
  rlx_tensor x;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  return rlx_ox_set(c, 0, x);
}

/* Dropout at inference is the identity (mask all true); training mode with a
 * non-zero ratio draws random numbers and is refused. */
static rlx_status map_dropout(rlx_ox_ctx* c) {
  float ratio = 0.5f;
  int64_t training = 0, is_test;
  rlx_ox_attr_ignore(c, "seed");
  if (rlx_ox_opset(c) < 12) RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "ratio", 0.5f, &ratio));
  if (rlx_ox_opset(c) < 7) {
    RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "is_test", 0, &is_test));
    training = !is_test;
  }
  const rlx_host_tensor* k;
  if (rlx_ox_has(c, 1)) {
    RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 1, "ratio", &k));
    ratio = (float)rlx_load_f64(k->data, k->dtype, 0);
  }
  if (rlx_ox_has(c, 2)) {
    RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 2, "training_mode", &k));
    training = rlx_load_i64(k->data, k->dtype, 0) != 0;
  }
  if (training && ratio != 0.0f)
    return rlx_ox_unsupported(c, "training mode with ratio %g (random masks)", (double)ratio);
  rlx_tensor x, t, mask;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(rlx_ox_set(c, 0, x));
  if (!rlx_ox_wants(c, 1)) return RLX_OK;
  rlx_type tx = type_of(c, x);
  RLX_RETURN_IF_ERROR(bool_const(c, 1, &t));
  G(rlx_graph_add_expand(GRAPH, t, tx.shape, tx.rank, &mask));
  return rlx_ox_set(c, 1, mask);
}

/* ------------------------------------------------------------------ table */

static const rlx_ox_op ops[] = {
    {"Abs", map_activation, RLX_ACT_ABS, 0},
    {"Add", map_binary, RLX_BIN_ADD, 0},
    {"And", map_logic, 0, 0},
    {"ArgMax", map_arg, 1, 0},
    {"ArgMin", map_arg, 0, 0},
    {"Atan", map_activation, RLX_ACT_ATAN, 0},
    {"Cast", map_cast, 0, 0},
    {"CastLike", map_cast_like, 0, 0},
    {"Ceil", map_floor_ceil, 1, 0},
    {"Celu", map_composite_act, 0, 0},
    {"Clip", map_clip, 0, 0},
    {"Concat", map_concat, 0, 0},
    {"Constant", map_constant, 0, 0},
    {"ConstantOfShape", map_constant_of_shape, 0, 0},
    {"Cos", map_activation, RLX_ACT_COS, 0},
    {"CumSum", map_cumsum, 0, 0},
    {"Div", map_binary, RLX_BIN_DIV, 0},
    {"Dropout", map_dropout, 0, 0},
    {"Elu", map_composite_act, 0, 0},
    {"Equal", map_compare, RLX_CMP_EQ, 0},
    {"Erf", map_erf, 0, 0},
    {"Exp", map_activation, RLX_ACT_EXP, 0},
    {"Expand", map_expand, 0, 0},
    {"Flatten", map_flatten, 0, 0},
    {"Floor", map_floor_ceil, 0, 0},
    {"Gather", map_gather, 0, 0},
    {"GatherElements", map_gather_elements, 0, 0},
    {"Gelu", map_gelu, 0, 0},
    {"Gemm", map_gemm, 0, 0},
    {"Greater", map_compare, RLX_CMP_GT, 0},
    {"GreaterOrEqual", map_compare, RLX_CMP_GE, 0},
    {"Hardmax", map_softmax, 2, 0},
    {"HardSigmoid", map_composite_act, 0, 0},
    {"HardSwish", map_composite_act, 0, 0},
    {"Identity", map_identity, 0, 0},
    {"IsInf", map_isinf, 0, 0},
    {"IsNaN", map_isnan, 0, 0},
    {"LayerNormalization", map_layer_norm, 0, 0},
    {"LeakyRelu", map_composite_act, 0, 0},
    {"Less", map_compare, RLX_CMP_LT, 0},
    {"LessOrEqual", map_compare, RLX_CMP_LE, 0},
    {"Log", map_activation, RLX_ACT_LOG, 0},
    {"LogSoftmax", map_softmax, 1, 0},
    {"MatMul", map_matmul, 0, 0},
    {"Max", map_variadic, RLX_BIN_MAX, 0},
    {"Mean", map_variadic, -1, 0},
    {"Min", map_variadic, RLX_BIN_MIN, 0},
    {"Mish", map_composite_act, 0, 0},
    {"Mul", map_binary, RLX_BIN_MUL, 0},
    {"Neg", map_activation, RLX_ACT_NEG, 0},
    {"Not", map_logic, 0, 0},
    {"Or", map_logic, 0, 0},
    {"Pow", map_binary, RLX_BIN_POW, 0},
    {"PRelu", map_prelu, 0, 0},
    {"Range", map_range, 0, 0},
    {"Reciprocal", map_reciprocal, 0, 0},
    {"ReduceL1", map_reduce, RED_L1, 0},
    {"ReduceL2", map_reduce, RED_L2, 0},
    {"ReduceLogSum", map_reduce, RED_LOG_SUM, 0},
    {"ReduceLogSumExp", map_reduce, RED_LOG_SUM_EXP, 0},
    {"ReduceMax", map_reduce, RLX_RED_MAX, 0},
    {"ReduceMean", map_reduce, RLX_RED_MEAN, 0},
    {"ReduceMin", map_reduce, RLX_RED_MIN, 0},
    {"ReduceProd", map_reduce, RLX_RED_PROD, 0},
    {"ReduceSum", map_reduce, RLX_RED_SUM, 0},
    {"ReduceSumSquare", map_reduce, RED_SUM_SQUARE, 0},
    {"Relu", map_activation, RLX_ACT_RELU, 0},
    {"Reshape", map_reshape, 0, 0},
    {"Round", map_activation, RLX_ACT_ROUND, 0},
    {"Selu", map_composite_act, 0, 0},
    {"Shape", map_shape, 0, 0},
    {"Shrink", map_composite_act, 0, 0},
    {"Sigmoid", map_activation, RLX_ACT_SIGMOID, 0},
    {"Sign", map_sign, 0, 0},
    {"Sin", map_activation, RLX_ACT_SIN, 0},
    {"Size", map_size, 0, 0},
    {"Slice", map_slice, 0, 0},
    {"Softmax", map_softmax, 0, 0},
    {"Softplus", map_composite_act, 0, 0},
    {"Softsign", map_composite_act, 0, 0},
    {"Split", map_split, 0, 0},
    {"Sqrt", map_activation, RLX_ACT_SQRT, 0},
    {"Squeeze", map_squeeze, 0, 0},
    {"Sub", map_binary, RLX_BIN_SUB, 0},
    {"Sum", map_variadic, RLX_BIN_ADD, 0},
    {"Tan", map_activation, RLX_ACT_TAN, 0},
    {"Tanh", map_activation, RLX_ACT_TANH, 0},
    {"ThresholdedRelu", map_composite_act, 0, 0},
    {"Tile", map_tile, 0, 0},
    {"Transpose", map_transpose, 0, 0},
    {"TopK", map_topk, 0, 0},
    {"Trilu", map_trilu, 0, 0},
    {"Unsqueeze", map_unsqueeze, 0, 0},
    {"Where", map_where, 0, 0},
    {"Xor", map_logic, 0, 0},
};

const rlx_ox_op* rlx_ox_find_op(const char* op_type) {
  const rlx_ox_op* op = rlx_ox_op_in(ops, sizeof ops / sizeof ops[0], op_type);
  return op ? op : rlx_ox_find_nn_op(op_type);
}

#else
typedef int rlx_onnx_ops_not_built; /* keeps the translation unit non-empty */
#endif /* RLX_HAVE_ONNX */
