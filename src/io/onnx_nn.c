/* ONNX ops built from compositions of Tier 1 IR ops beyond the Tier 1 list:
 * hyperbolic and inverse trigonometric functions, integer Mod, the NLL and
 * softmax cross-entropy losses, MeanVarianceNormalization, global pooling, OneHot,
 * EyeLike, Pad with a run-time fill, and Conv (windows gathered by index tables, then a
 * matmul). Each is exact up to the rounding of the ops it is built from; see
 * onnx_ops.c for the Tier 1 table. MaxPool / AveragePool / the global pools,
 * Pad (constant, reflect, edge, wrap), DepthToSpace, SpaceToDepth,
 * BatchNormalization (inference; training mode adds batch moments and the
 * running updates), InstanceNormalization (GroupNorm with groups = C) and
 * LRN map onto their IR ops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx.h"
#include "io/onnx_helpers.h"
#include "ir/dtype.h"

#ifdef RLX_HAVE_ONNX

/* Hyperbolic and inverse trigonometric functions from exp/log/sqrt/atan,
 * evaluated in f64 (the identities are exact; f64 keeps their cancellations
 * far below f32 output precision). */
static rlx_status map_trig_f64(rlx_ox_ctx* c) {
  const char* op = rlx_ox_op_type(c);
  rlx_tensor x, a, b, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, op));
  rlx_dtype d = type_of(c, x).dtype;
  RLX_RETURN_IF_ERROR(cast(c, x, RLX_F64, &x));
  if (strcmp(op, "Sinh") == 0 || strcmp(op, "Cosh") == 0) {
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_EXP, x, &a));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_NEG, x, &b));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_EXP, b, &b));
    RLX_RETURN_IF_ERROR(bin(c, op[0] == 'S' ? RLX_BIN_SUB : RLX_BIN_ADD, a, b, &y));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, y, 0.5, &y));
  } else if (strcmp(op, "Asinh") == 0) { /* sign(x) log(|x| + sqrt(x^2 + 1)) */
    rlx_tensor ax, sgn_neg;
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_ABS, x, &ax));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, x, x, &a));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, a, 1.0, &a));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_SQRT, a, &a));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, ax, a, &a));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_LOG, a, &y));
    RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, x, 0.0, &sgn_neg));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_NEG, y, &b));
    RLX_RETURN_IF_ERROR(where(c, sgn_neg, b, y, &y));
  } else if (strcmp(op, "Acosh") == 0) { /* log(x + sqrt(x^2 - 1)) */
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, x, x, &a));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_SUB, a, 1.0, &a));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_SQRT, a, &a));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, x, a, &a));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_LOG, a, &y));
  } else if (strcmp(op, "Atanh") == 0) { /* 0.5 log((1 + x) / (1 - x)) */
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, x, 1.0, &a));
    RLX_RETURN_IF_ERROR(s_bin(c, RLX_BIN_SUB, 1.0, x, &b));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, a, b, &a));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_LOG, a, &y));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, y, 0.5, &y));
  } else { /* Asin = atan(x / sqrt(1 - x^2)); Acos = pi/2 - Asin */
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, x, x, &a));
    RLX_RETURN_IF_ERROR(s_bin(c, RLX_BIN_SUB, 1.0, a, &a));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_SQRT, a, &a));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, x, a, &a));
    RLX_RETURN_IF_ERROR(act(c, RLX_ACT_ATAN, a, &y));
    if (strcmp(op, "Acos") == 0)
      RLX_RETURN_IF_ERROR(s_bin(c, RLX_BIN_SUB, 1.57079632679489661923, y, &y));
  }
  RLX_RETURN_IF_ERROR(cast(c, y, d, &y));
  return rlx_ox_set(c, 0, y);
}

/* Integer Mod: C remainder r = a - (a / b) * b (fmod = 1), or with the
 * divisor's sign (fmod = 0: r + b where r != 0 and sign(r) != sign(b)). */
/* C fmod on floats: r = a - trunc(a / b) * b, in f64 (trunc by the
 * truncating cast to i64). For f16/bf16/f32 operands whose quotient is
 * below 2^24 in magnitude each step is exact in f64 (the product of the
 * truncated quotient and b fits 53 bits; the difference is the exact
 * result, representable in the operand type). A quotient rounded up across
 * an integer leaves r with the wrong sign; one correction by |b| toward a's
 * sign repairs that (f64 operands, large quotients). Beyond 2^62 the cast
 * saturates and the result is not fmod's: the mapping is exact over the
 * range models use, not over every float. */
static rlx_status float_fmod(rlx_ox_ctx* c, rlx_tensor a, rlx_tensor b, rlx_tensor* out) {
  rlx_dtype dt = type_of(c, a).dtype;
  rlx_tensor q, n, r, rneg, aneg, differ, nz, f, babs, bneg, step, fixed;
  RLX_RETURN_IF_ERROR(cast(c, a, RLX_F64, &a));
  RLX_RETURN_IF_ERROR(cast(c, b, RLX_F64, &b));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, a, b, &q));
  RLX_RETURN_IF_ERROR(cast(c, q, RLX_I64, &n));
  RLX_RETURN_IF_ERROR(cast(c, n, RLX_F64, &n));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, n, b, &n));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, a, n, &r));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, r, 0.0, &rneg));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, a, 0.0, &aneg));
  RLX_RETURN_IF_ERROR(cmp(c, RLX_CMP_NE, rneg, aneg, &differ));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_NE, r, 0.0, &nz));
  RLX_RETURN_IF_ERROR(bool_const(c, 0, &f));
  RLX_RETURN_IF_ERROR(where(c, nz, differ, f, &differ));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_ABS, b, &babs));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_NEG, babs, &bneg));
  RLX_RETURN_IF_ERROR(where(c, aneg, bneg, babs, &step));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, r, step, &fixed));
  RLX_RETURN_IF_ERROR(where(c, differ, fixed, r, &r));
  return cast(c, r, dt, out);
}

static rlx_status map_mod(rlx_ox_ctx* c) {
  int64_t fmod_mode;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "fmod", 0, &fmod_mode));
  rlx_tensor a, b, q, r;
  RLX_RETURN_IF_ERROR(in(c, 0, &a));
  RLX_RETURN_IF_ERROR(in(c, 1, &b));
  if (!rlx_dtype_is_int(type_of(c, a).dtype)) {
    if (!fmod_mode) return rlx_ox_invalid(c, "floating-point Mod needs fmod = 1");
    RLX_RETURN_IF_ERROR(float_fmod(c, a, b, &r));
    return rlx_ox_set(c, 0, r);
  }
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, a, b, &q));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, q, b, &q));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, a, q, &r));
  if (!fmod_mode) {
    rlx_tensor rneg, bneg, differ, nz, f, fixed;
    RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, r, 0.0, &rneg));
    RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, b, 0.0, &bneg));
    RLX_RETURN_IF_ERROR(cmp(c, RLX_CMP_NE, rneg, bneg, &differ));
    RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_NE, r, 0.0, &nz));
    RLX_RETURN_IF_ERROR(bool_const(c, 0, &f));
    RLX_RETURN_IF_ERROR(where(c, nz, differ, f, &differ));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, r, b, &fixed));
    RLX_RETURN_IF_ERROR(where(c, differ, fixed, r, &r));
  }
  return rlx_ox_set(c, 0, r);
}

/* Per-channel input i as a [C] vector of x's dtype for an [N, C, ...] x. */
static rlx_status channel_vector(rlx_ox_ctx* c, int32_t i, const rlx_type* tx, rlx_tensor* out) {
  RLX_RETURN_IF_ERROR(in(c, i, out));
  rlx_type t = type_of(c, *out);
  if (t.rank != 1 || tx->rank < 2 || t.shape[0] != tx->shape[1])
    return rlx_ox_invalid(c, "input %d must be [C] for an [N, C, ...] input", (int)i);
  return t.dtype == tx->dtype ? RLX_OK : cast(c, *out, tx->dtype, out);
}

/* Mean and (biased) variance over axes, kept as size-1 dims. */
static rlx_status moments(rlx_ox_ctx* c, rlx_tensor x, const int32_t* axes, int32_t n,
                          rlx_tensor* mean, rlx_tensor* var) {
  rlx_tensor d;
  RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_MEAN, x, axes, n, 1, mean));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, x, *mean, &d));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, d, d, &d));
  return reduce(c, RLX_RED_MEAN, d, axes, n, 1, var);
}

/* running = running * momentum + current * (1 - momentum), all [C]. */
static rlx_status running_update(rlx_ox_ctx* c, rlx_tensor running, rlx_tensor current,
                                 float momentum, rlx_tensor* out) {
  rlx_tensor a, b;
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, running, momentum, &a));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, current, 1.0 - (double)momentum, &b));
  return bin(c, RLX_BIN_ADD, a, b, out);
}

/* BatchNormalization training_mode = 1: normalised with the batch's
 * statistics over every axis but C (biased variance), plus the momentum
 * updates of the running mean and variance (outputs 1 and 2). */
static rlx_status batch_norm_training(rlx_ox_ctx* c, rlx_tensor x, const rlx_type* tx,
                                      rlx_tensor scale, rlx_tensor bias, rlx_tensor mean,
                                      rlx_tensor var, float eps, float momentum) {
  int32_t axes[RLX_MAX_RANK], n = 0;
  for (int32_t d = 0; d < tx->rank; d++)
    if (d != 1) axes[n++] = d;
  rlx_tensor bmean, bvar, y;
  RLX_RETURN_IF_ERROR(moments(c, x, axes, n, &bmean, &bvar));
  rlx_dim cs[1] = {tx->shape[1]};
  RLX_RETURN_IF_ERROR(reshape(c, bmean, cs, 1, &bmean));
  RLX_RETURN_IF_ERROR(reshape(c, bvar, cs, 1, &bvar));
  G(rlx_graph_add_batch_norm(GRAPH, x, scale, bias, bmean, bvar, eps, &y));
  RLX_RETURN_IF_ERROR(rlx_ox_set(c, 0, y));
  if (rlx_ox_wants(c, 1)) {
    RLX_RETURN_IF_ERROR(running_update(c, mean, bmean, momentum, &y));
    RLX_RETURN_IF_ERROR(rlx_ox_set(c, 1, y));
  }
  if (rlx_ox_wants(c, 2)) {
    RLX_RETURN_IF_ERROR(running_update(c, var, bvar, momentum, &y));
    RLX_RETURN_IF_ERROR(rlx_ox_set(c, 2, y));
  }
  return RLX_OK;
}

/* BatchNormalization: the BATCH_NORM op with the running statistics
 * (inference), or the batch's own (training_mode = 1, opset 14+). */
static rlx_status map_batch_norm(rlx_ox_ctx* c) {
  float eps, momentum;
  int64_t training = 0, spatial = 1, is_test;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "epsilon", 1e-5f, &eps));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "momentum", 0.9f, &momentum)); /* training only */
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "training_mode", 0, &training));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "spatial", 1, &spatial));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "is_test", 1, &is_test));
  rlx_ox_attr_ignore(c, "consumed_inputs");
  if (!training && (!is_test || rlx_ox_wants(c, 1) || rlx_ox_wants(c, 2)))
    return rlx_ox_unsupported(c, "pre-opset-14 training outputs (saved mean / variance)");
  if (rlx_ox_wants(c, 3) || rlx_ox_wants(c, 4))
    return rlx_ox_unsupported(c, "saved mean / variance outputs");
  if (!spatial) return rlx_ox_unsupported(c, "spatial = 0");
  rlx_tensor x, scale, bias, mean, var, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "BatchNormalization"));
  rlx_type tx = type_of(c, x);
  if (tx.rank < 2) return rlx_ox_invalid(c, "input must be [N, C, ...]");
  RLX_RETURN_IF_ERROR(channel_vector(c, 1, &tx, &scale));
  RLX_RETURN_IF_ERROR(channel_vector(c, 2, &tx, &bias));
  RLX_RETURN_IF_ERROR(channel_vector(c, 3, &tx, &mean));
  RLX_RETURN_IF_ERROR(channel_vector(c, 4, &tx, &var));
  if (training) return batch_norm_training(c, x, &tx, scale, bias, mean, var, eps, momentum);
  G(rlx_graph_add_batch_norm(GRAPH, x, scale, bias, mean, var, eps, &y));
  return rlx_ox_set(c, 0, y);
}

/* InstanceNormalization: GROUP_NORM with one group per channel. */
static rlx_status map_instance_norm(rlx_ox_ctx* c) {
  float eps;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "epsilon", 1e-5f, &eps));
  rlx_tensor x, scale, bias, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "InstanceNormalization"));
  rlx_type tx = type_of(c, x);
  if (tx.rank < 3) return rlx_ox_invalid(c, "input must be [N, C, D...]");
  if (tx.shape[1] < 1 || tx.shape[1] > INT32_MAX)
    return rlx_ox_unsupported(c, "a symbolic or huge channel count");
  RLX_RETURN_IF_ERROR(channel_vector(c, 1, &tx, &scale));
  RLX_RETURN_IF_ERROR(channel_vector(c, 2, &tx, &bias));
  G(rlx_graph_add_group_norm(GRAPH, x, scale, bias, (int32_t)tx.shape[1], eps, &y));
  return rlx_ox_set(c, 0, y);
}

/* MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over axes. */
static rlx_status map_mvn(rlx_ox_ctx* c) {
  int64_t raw[RLX_MAX_RANK] = {0, 2, 3};
  int32_t nraw;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "axes", raw, RLX_MAX_RANK, &nraw));
  if (nraw < 0) nraw = 3, raw[0] = 0, raw[1] = 2, raw[2] = 3;
  rlx_tensor x, mean, var, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "MeanVarianceNormalization"));
  int32_t axes[RLX_MAX_RANK], rank = type_of(c, x).rank;
  for (int32_t i = 0; i < nraw; i++) RLX_RETURN_IF_ERROR(norm_axis(c, raw[i], rank, &axes[i]));
  RLX_RETURN_IF_ERROR(moments(c, x, axes, nraw, &mean, &var));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, x, mean, &y));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_SQRT, var, &var));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, var, 1e-9, &var));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, y, var, &y));
  return rlx_ox_set(c, 0, y);
}

/* GlobalAveragePool / GlobalMaxPool: the Pool op with the whole spatial
 * extent as its window; a reduction over the spatial axes where they are
 * symbolic (the same values, any size). */
static rlx_status map_global_pool(rlx_ox_ctx* c) {
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, rlx_ox_op_type(c)));
  rlx_type tx = type_of(c, x);
  if (tx.rank < 3) return rlx_ox_invalid(c, "input must be [N, C, D...]");
  int32_t axes[RLX_MAX_RANK], n = 0, is_static = 1;
  int64_t kernel[RLX_MAX_RANK];
  for (int32_t d = 2; d < tx.rank; d++) {
    kernel[n] = tx.shape[d];
    if (tx.shape[d] < 1) is_static = 0;
    axes[n++] = d;
  }
  if (is_static && n <= 3) {
    G(rlx_graph_add_pool(GRAPH, x, rlx_ox_arg(c) ? RLX_POOL_MAX : RLX_POOL_AVG, n, kernel, NULL,
                         NULL, NULL, 0, 0, &y));
  } else {
    RLX_RETURN_IF_ERROR(reduce(c, rlx_ox_arg(c) ? RLX_RED_MAX : RLX_RED_MEAN, x, axes, n, 1, &y));
  }
  return rlx_ox_set(c, 0, y);
}

/* OneHot: where(indices[..., None, ...] == iota(depth), on, off). */
static rlx_status map_one_hot(rlx_ox_ctx* c) {
  int64_t axis;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", -1, &axis));
  const rlx_host_tensor* kd;
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 1, "depth", &kd));
  if (rlx_host_numel(kd) != 1) return rlx_ox_invalid(c, "depth must hold one value");
  int64_t depth = (int64_t)rlx_load_f64(kd->data, kd->dtype, 0);
  rlx_tensor idx, vals, on, off, y, neg, wrapped, iota;
  RLX_RETURN_IF_ERROR(in(c, 0, &idx));
  RLX_RETURN_IF_ERROR(in(c, 2, &vals));
  rlx_type ti = type_of(c, idx);
  int32_t rank = ti.rank + 1, ax;
  if (rank > RLX_MAX_RANK) return rlx_ox_unsupported(c, "rank %d", (int)rank);
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, rank, &ax));
  RLX_RETURN_IF_ERROR(check_table(c, depth, sizeof(int64_t)));
  if (depth < 1) return rlx_ox_invalid(c, "depth %lld", (long long)depth);
  RLX_RETURN_IF_ERROR(cast(c, idx, RLX_I64, &idx)); /* float indices truncate toward zero */
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, idx, 0.0, &neg));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_ADD, idx, (double)depth, &wrapped));
  RLX_RETURN_IF_ERROR(where(c, neg, wrapped, idx, &idx));
  rlx_dim ushape[RLX_MAX_RANK], ishape[RLX_MAX_RANK];
  for (int32_t d = 0, j = 0; d < rank; d++) {
    ushape[d] = d == ax ? 1 : ti.shape[j++];
    ishape[d] = d == ax ? depth : 1;
  }
  RLX_RETURN_IF_ERROR(reshape(c, idx, ushape, rank, &idx));
  int64_t* v = malloc(sizeof(int64_t) * (size_t)depth);
  if (!v) return rlx_ox_invalid(c, "out of host memory");
  for (int64_t i = 0; i < depth; i++) v[i] = i;
  rlx_status s = constant(c, RLX_I64, rank, ishape, v, sizeof(int64_t) * (size_t)depth, &iota);
  free(v);
  RLX_RETURN_IF_ERROR(s);
  G(rlx_graph_add_narrow(GRAPH, vals, 0, 0, 1, &off));
  G(rlx_graph_add_narrow(GRAPH, vals, 0, 1, 1, &on));
  rlx_dim none[1] = {0};
  RLX_RETURN_IF_ERROR(reshape(c, off, none, 0, &off));
  RLX_RETURN_IF_ERROR(reshape(c, on, none, 0, &on));
  RLX_RETURN_IF_ERROR(cmp(c, RLX_CMP_EQ, idx, iota, &y));
  RLX_RETURN_IF_ERROR(where(c, y, on, off, &y));
  return rlx_ox_set(c, 0, y);
}

/* DepthToSpace (DCR / CRD) and SpaceToDepth onto their IR ops. */
static rlx_status map_depth_space(rlx_ox_ctx* c) {
  int to_space = rlx_ox_arg(c);
  int64_t b;
  char mode[8] = "DCR";
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "blocksize", 0, &b));
  if (to_space) RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "mode", "DCR", mode, sizeof mode));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type t = type_of(c, x);
  if (t.rank != 4 || b < 1 || b > (1 << 20))
    return rlx_ox_invalid(c, "input must be 4-D and blocksize in 1..2^20");
  for (int32_t d = 1; d < 4; d++) RLX_RETURN_IF_ERROR(need_static(c, &t, d, rlx_ox_op_type(c)));
  if (to_space) {
    int crd = strcmp(mode, "CRD") == 0;
    if (!crd && strcmp(mode, "DCR")) return rlx_ox_unsupported(c, "mode '%s'", mode);
    G(rlx_graph_add_depth_to_space(GRAPH, x, (int32_t)b, crd ? RLX_D2S_CRD : RLX_D2S_DCR, &y));
  } else {
    G(rlx_graph_add_space_to_depth(GRAPH, x, (int32_t)b, &y));
  }
  return rlx_ox_set(c, 0, y);
}

/* EyeLike: a constant of the input's (static 2-D) shape with ones on diagonal k. */
static rlx_status map_eye_like(rlx_ox_ctx* c) {
  int64_t k, dt_code;
  rlx_type t;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, 0, &t));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "k", 0, &k));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "dtype", -1, &dt_code));
  int dt = dt_code < 0 ? (int)t.dtype : onnx_to_dtype(dt_code);
  if (dt < 0) return rlx_ox_unsupported(c, "dtype %lld", (long long)dt_code);
  if (t.rank != 2 || t.shape[0] < 0 || t.shape[1] < 0)
    return rlx_ox_unsupported(c, "input must be 2-D with static dims");
  if (t.shape[1] && t.shape[0] > RLX_ONNX_MAX_FOLD_BYTES / 8 / t.shape[1])
    return rlx_ox_unsupported(c, "too large");
  rlx_host_tensor h;
  rlx_error e;
  if (rlx_host_alloc(&h, (rlx_dtype)dt, 2, t.shape, &e) != RLX_OK)
    return rlx_ox_invalid(c, "%s", e.msg);
  for (int64_t i = 0; i < t.shape[0]; i++) {
    int64_t j = i + k;
    if (j >= 0 && j < t.shape[1]) rlx_store_f64(h.data, (rlx_dtype)dt, i * t.shape[1] + j, 1.0);
  }
  return rlx_ox_set_known(c, 0, &h);
}


/* Index of position i (may lie outside [0, d)) under edge / reflect / wrap padding. */
static int64_t pad_index(int64_t i, int64_t d, int mode) {
  if (mode == 0) return i < 0 ? 0 : i >= d ? d - 1 : i; /* edge */
  if (mode == 2) return ((i % d) + d) % d;               /* wrap */
  if (d == 1) return 0;                                  /* reflect */
  int64_t period = 2 * (d - 1), r = ((i % period) + period) % period;
  return r < d ? r : period - r;
}

/* Pad one axis by (before, after) >= 0. */
static rlx_status pad_axis(rlx_ox_ctx* c, rlx_tensor* x, int32_t ax, int64_t before, int64_t after,
                           int mode, rlx_tensor value) {
  rlx_type t = type_of(c, *x);
  RLX_RETURN_IF_ERROR(need_static(c, &t, ax, "Pad"));
  int64_t d = t.shape[ax];
  if (mode < 0) { /* constant: concat value blocks */
    rlx_tensor parts[3];
    int32_t n = 0;
    for (int side = 0; side < 2; side++) {
      int64_t len = side ? after : before;
      if (side) parts[n++] = *x;
      if (!len) continue;
      rlx_type bt = t;
      bt.shape[ax] = len;
      RLX_RETURN_IF_ERROR(expand_to(c, value, bt.shape, bt.rank, &parts[n++]));
    }
    if (n > 1) G(rlx_graph_add_concat(GRAPH, parts, n, ax, x));
    return RLX_OK;
  }
  if (d == 0) return rlx_ox_invalid(c, "cannot pad an empty axis by %s", mode ? "reflection" : "edge");
  int64_t len = before + d + after;
  RLX_RETURN_IF_ERROR(check_table(c, len, sizeof(int64_t)));
  int64_t* idx = malloc(sizeof(int64_t) * (size_t)len);
  if (!idx) return rlx_ox_invalid(c, "out of host memory");
  for (int64_t i = 0; i < len; i++) idx[i] = pad_index(i - before, d, mode);
  rlx_tensor it;
  rlx_status s = const_i64(c, idx, len, &it);
  free(idx);
  RLX_RETURN_IF_ERROR(s);
  G(rlx_graph_add_gather(GRAPH, *x, it, ax, x));
  return RLX_OK;
}

/* Pad as a composition (narrow, concat, gather): a constant value only
 * known at run time. */
static rlx_status map_pad_composed(rlx_ox_ctx* c) {
  char mode_s[16];
  int64_t pads[2 * RLX_MAX_RANK], axes_raw[RLX_MAX_RANK];
  int32_t np = -1, na = -1;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "mode", "constant", mode_s, sizeof mode_s));
  int mode = strcmp(mode_s, "constant") == 0 ? -1 : strcmp(mode_s, "edge") == 0 ? 0
           : strcmp(mode_s, "reflect") == 0 ? 1 : strcmp(mode_s, "wrap") == 0 ? 2 : -2;
  if (mode == -2) return rlx_ox_unsupported(c, "mode '%s'", mode_s);
  rlx_tensor x, value = RLX_NONE;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  if (rlx_ox_opset(c) < 11) {
    float v;
    RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "pads", pads, 2 * RLX_MAX_RANK, &np));
    RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "value", 0.0f, &v));
    RLX_RETURN_IF_ERROR(scalar(c, tx.dtype, v, &value));
  } else {
    RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "pads", pads, 2 * RLX_MAX_RANK, &np));
    if (rlx_ox_has(c, 2)) RLX_RETURN_IF_ERROR(in(c, 2, &value));
    else RLX_RETURN_IF_ERROR(scalar(c, tx.dtype, 0.0, &value));
    rlx_dim none[1] = {0};
    if (type_of(c, value).rank) RLX_RETURN_IF_ERROR(reshape(c, value, none, 0, &value));
    if (rlx_ox_has(c, 3)) RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 3, "axes", axes_raw, RLX_MAX_RANK, &na));
  }
  int32_t n_axes = na >= 0 ? na : tx.rank, axes[RLX_MAX_RANK];
  if (np != 2 * n_axes) return rlx_ox_invalid(c, "pads has %d entries for %d axes", (int)np,
                                              (int)n_axes);
  for (int32_t i = 0; i < n_axes; i++)
    RLX_RETURN_IF_ERROR(norm_axis(c, na >= 0 ? axes_raw[i] : i, tx.rank, &axes[i]));
  for (int32_t i = 0; i < n_axes; i++) { /* negative pads crop first */
    int64_t b = pads[i], e = pads[i + n_axes];
    rlx_type t = type_of(c, x);
    if (b >= 0 && e >= 0) continue;
    RLX_RETURN_IF_ERROR(need_static(c, &t, axes[i], "Pad"));
    int64_t cb = b < 0 ? -b : 0, ce = e < 0 ? -e : 0, d = t.shape[axes[i]];
    if (cb + ce > d) return rlx_ox_invalid(c, "negative pads exceed the axis");
    G(rlx_graph_add_narrow(GRAPH, x, axes[i], cb, d - cb - ce, &x));
  }
  for (int32_t i = 0; i < n_axes; i++) {
    int64_t b = pads[i] > 0 ? pads[i] : 0, e = pads[i + n_axes] > 0 ? pads[i + n_axes] : 0;
    if (b > RLX_ONNX_MAX_FOLD_BYTES || e > RLX_ONNX_MAX_FOLD_BYTES)
      return rlx_ox_unsupported(c, "pad of %lld", (long long)(b > e ? b : e));
    if (b || e) RLX_RETURN_IF_ERROR(pad_axis(c, &x, axes[i], b, e, mode, value));
  }
  return rlx_ox_set(c, 0, x);
}

/* The constant fill as a float when it is known and exact in f32; 0 when
 * it is neither (the composition then handles it). */
static int pad_fill(rlx_ox_ctx* c, rlx_dtype dtype, float* out) {
  *out = 0.0f;
  if (rlx_ox_opset(c) < 11) return rlx_ox_attr_float(c, "value", 0.0f, out) == RLX_OK;
  if (!rlx_ox_has(c, 2)) return 1;
  const rlx_host_tensor* v = rlx_ox_known(c, 2);
  if (!v || rlx_host_numel(v) != 1) return 0;
  double d = rlx_load_f64(v->data, v->dtype, 0);
  *out = (float)d;
  /* f32 and narrower outputs round the fill no further than f32 does */
  int narrow = dtype == RLX_F32 || dtype == RLX_F16 || dtype == RLX_BF16;
  return (double)*out == d || isnan(d) || narrow;
}

/* Pad onto the Pad op (constant, reflect, edge, wrap; negative pads crop). */
static rlx_status map_pad(rlx_ox_ctx* c) {
  char mode_s[16];
  int64_t raw[2 * RLX_MAX_RANK], axes_raw[RLX_MAX_RANK], pads[2 * RLX_MAX_RANK] = {0};
  int32_t np = -1, na = -1;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "mode", "constant", mode_s, sizeof mode_s));
  int mode = strcmp(mode_s, "constant") == 0 ? RLX_PAD_CONSTANT
           : strcmp(mode_s, "reflect") == 0  ? RLX_PAD_REFLECT
           : strcmp(mode_s, "edge") == 0     ? RLX_PAD_EDGE
           : strcmp(mode_s, "wrap") == 0     ? RLX_PAD_WRAP : -1;
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  float value;
  if (mode < 0 || !pad_fill(c, tx.dtype, &value)) return map_pad_composed(c);
  if (rlx_ox_opset(c) < 11) {
    RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "pads", raw, 2 * RLX_MAX_RANK, &np));
  } else {
    RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "pads", raw, 2 * RLX_MAX_RANK, &np));
    if (rlx_ox_has(c, 3)) RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 3, "axes", axes_raw, RLX_MAX_RANK, &na));
  }
  int32_t n_axes = na >= 0 ? na : tx.rank;
  if (np != 2 * n_axes) return rlx_ox_invalid(c, "pads has %d entries for %d axes", (int)np, (int)n_axes);
  for (int32_t i = 0; i < n_axes; i++) {
    int32_t ax;
    RLX_RETURN_IF_ERROR(norm_axis(c, na >= 0 ? axes_raw[i] : i, tx.rank, &ax));
    if (raw[i] > RLX_ONNX_MAX_FOLD_BYTES || raw[i + n_axes] > RLX_ONNX_MAX_FOLD_BYTES)
      return rlx_ox_unsupported(c, "pad of %lld", (long long)(raw[i] > raw[i + n_axes] ? raw[i] : raw[i + n_axes]));
    pads[ax] = raw[i];
    pads[tx.rank + ax] = raw[i + n_axes];
  }
  G(rlx_graph_add_pad(GRAPH, x, (rlx_pad_mode)mode, pads, value, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ convolution and pooling */

/* Sliding-window geometry of Conv and the pools over n spatial dims, from
 * kernel, strides, dilations, pads / auto_pad (and ceil_mode for pools).
 * pad_end is what the windows actually reach past the input (explicit end
 * padding, or more under ceil_mode). */
typedef struct window {
  int32_t n;
  int64_t in[3], k[3], stride[3], dil[3], pad_begin[3], pad_end[3], out[3];
} window;

static rlx_status window_geometry(rlx_ox_ctx* c, const rlx_type* tx, const int64_t* kernel,
                                  int ceil_mode, window* w) {
  memset(w, 0, sizeof *w);
  w->n = tx->rank - 2;
  if (w->n < 1 || w->n > 3) return rlx_ox_unsupported(c, "%d spatial dims (1..3)", (int)w->n);
  int64_t strides[3], dil[3], pads[6];
  int32_t ns, nd, np;
  char auto_pad[16];
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "strides", strides, 3, &ns));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "dilations", dil, 3, &nd));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "pads", pads, 6, &np));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "auto_pad", "NOTSET", auto_pad, sizeof auto_pad));
  if ((ns >= 0 && ns != w->n) || (nd >= 0 && nd != w->n) || (np >= 0 && np != 2 * w->n))
    return rlx_ox_invalid(c, "strides, dilations and pads must match %d spatial dims", (int)w->n);
  int same_upper = strcmp(auto_pad, "SAME_UPPER") == 0, same_lower = strcmp(auto_pad, "SAME_LOWER") == 0;
  int valid = strcmp(auto_pad, "VALID") == 0;
  if (!same_upper && !same_lower && !valid && strcmp(auto_pad, "NOTSET") != 0)
    return rlx_ox_invalid(c, "auto_pad '%s'", auto_pad);
  for (int32_t i = 0; i < w->n; i++) {
    RLX_RETURN_IF_ERROR(need_static(c, tx, 2 + i, rlx_ox_op_type(c)));
    int64_t in = tx->shape[2 + i], k = kernel[i], st = ns >= 0 ? strides[i] : 1,
            dl = nd >= 0 ? dil[i] : 1, pb = np >= 0 ? pads[i] : 0, pe = np >= 0 ? pads[i + w->n] : 0;
    if (k < 1 || st < 1 || dl < 1 || pb < 0 || pe < 0 || k > (1 << 20) || st > (1 << 20) ||
        dl > (1 << 20) || pb > (1 << 20) || pe > (1 << 20))
      return rlx_ox_invalid(c, "kernel, strides, dilations or pads out of range");
    int64_t span = (k - 1) * dl + 1, out;
    if (same_upper || same_lower) {
      out = (in + st - 1) / st;
      int64_t total = (out - 1) * st + span - in;
      if (total < 0) total = 0;
      pb = same_upper ? total / 2 : total - total / 2;
      pe = total - pb;
    } else if (valid) {
      pb = pe = 0;
      out = in >= span ? (in - span) / st + 1 : 0;
    } else {
      int64_t room = in + pb + pe - span;
      out = room < 0 ? 0 : (ceil_mode ? (room + st - 1) / st : room / st) + 1;
      if (ceil_mode && out > 0 && (out - 1) * st >= in + pb) out--; /* last window starts inside */
    }
    if (out < 1) return rlx_ox_invalid(c, "spatial dim %d: the window does not fit", (int)i);
    int64_t reach = (out - 1) * st + span - in - pb; /* what the last window needs past the end */
    w->in[i] = in;
    w->k[i] = k;
    w->stride[i] = st;
    w->dil[i] = dl;
    w->pad_begin[i] = pb;
    w->pad_end[i] = reach > 0 ? reach : 0;
    w->out[i] = out;
    (void)pe;
  }
  return RLX_OK;
}

/* Explicit end pads as given (auto_pad's are in the geometry already). */
static rlx_status explicit_end_pads(rlx_ox_ctx* c, const window* w, int64_t* out) {
  int64_t pads[6];
  int32_t np;
  char auto_pad[16];
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "pads", pads, 6, &np));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "auto_pad", "NOTSET", auto_pad, sizeof auto_pad));
  for (int32_t i = 0; i < w->n; i++)
    out[i] = strcmp(auto_pad, "NOTSET") != 0 ? w->pad_end[i] : np >= 0 ? pads[i + w->n] : 0;
  return RLX_OK;
}

/* W (cast to X's dtype) and the optional bias B of Conv / ConvTranspose. */
static rlx_status conv_operands(rlx_ox_ctx* c, const rlx_type* tx, rlx_tensor* wt, rlx_tensor* bias) {
  RLX_RETURN_IF_ERROR(in(c, 1, wt));
  rlx_type tw = type_of(c, *wt);
  if (tw.rank != tx->rank) return rlx_ox_invalid(c, "W must have X's rank");
  for (int32_t i = 0; i < tw.rank; i++) RLX_RETURN_IF_ERROR(need_static(c, &tw, i, "W"));
  if (tw.dtype != tx->dtype) RLX_RETURN_IF_ERROR(cast(c, *wt, tx->dtype, wt));
  *bias = RLX_NONE;
  if (rlx_ox_has(c, 2)) {
    RLX_RETURN_IF_ERROR(in(c, 2, bias));
    if (type_of(c, *bias).dtype != tx->dtype) RLX_RETURN_IF_ERROR(cast(c, *bias, tx->dtype, bias));
  }
  return RLX_OK;
}

/* Conv of float x and wt (same dtype) with the node's geometry attributes
 * (group, kernel_shape, strides, dilations, pads, auto_pad); auto_pad is
 * resolved into explicit pads here. Conv, ConvInteger and QLinearConv
 * (onnx_quant.c) share it. */
rlx_status rlx_ox_conv_float(rlx_ox_ctx* c, rlx_tensor x, rlx_tensor wt, rlx_tensor bias,
                             rlx_tensor* y) {
  int64_t group, kshape[3];
  int32_t nk;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "group", 1, &group));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "kernel_shape", kshape, 3, &nk));
  rlx_type tx = type_of(c, x), tw = type_of(c, wt);
  if (tx.rank < 3) return rlx_ox_invalid(c, "X must have spatial dims");
  int32_t n = tx.rank - 2;
  RLX_RETURN_IF_ERROR(need_static(c, &tx, 1, rlx_ox_op_type(c)));
  if (tw.rank != tx.rank) return rlx_ox_invalid(c, "W must have X's rank");
  for (int32_t i = 0; i < tw.rank; i++) RLX_RETURN_IF_ERROR(need_static(c, &tw, i, "W"));
  if (group < 1 || group > tx.shape[1]) return rlx_ox_invalid(c, "group %lld", (long long)group);
  window w;
  RLX_RETURN_IF_ERROR(window_geometry(c, &tx, tw.shape + 2, 0, &w));
  if (nk >= 0 && (nk != n || memcmp(kshape, tw.shape + 2, sizeof(int64_t) * (size_t)n) != 0))
    return rlx_ox_invalid(c, "kernel_shape differs from W's spatial dims");
  int64_t ends[3], pads[6];
  RLX_RETURN_IF_ERROR(explicit_end_pads(c, &w, ends));
  for (int32_t i = 0; i < n; i++) {
    pads[i] = w.pad_begin[i];
    pads[n + i] = ends[i];
  }
  G(rlx_graph_add_conv(GRAPH, x, wt, bias, RLX_NONE, n, w.stride, pads, w.dil, (int32_t)group,
                       RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, y));
  return RLX_OK;
}

static rlx_status map_conv(rlx_ox_ctx* c) {
  rlx_tensor x, wt, bias, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "Conv"));
  rlx_type tx = type_of(c, x);
  if (tx.rank < 3) return rlx_ox_invalid(c, "X must have spatial dims");
  RLX_RETURN_IF_ERROR(need_static(c, &tx, 1, "Conv"));
  RLX_RETURN_IF_ERROR(conv_operands(c, &tx, &wt, &bias));
  RLX_RETURN_IF_ERROR(rlx_ox_conv_float(c, x, wt, bias, &y));
  return rlx_ox_set(c, 0, y);
}

/* ConvTranspose's begin / end pads of one spatial dim. With output_shape
 * (or SAME_*), the total is what the full output exceeds the wanted one by,
 * split as ONNX says; a negative end pad becomes extra output_padding. */
typedef struct tconv_attrs {
  int64_t kshape[3], strides[3], dil[3], pads[6], opad[3], oshape[3];
  int32_t nk, ns, nd, np, nop, nos;
  int same, same_upper;
} tconv_attrs;

static rlx_status tconv_read(rlx_ox_ctx* c, int32_t n, tconv_attrs* t) {
  char auto_pad[16];
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "kernel_shape", t->kshape, 3, &t->nk));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "strides", t->strides, 3, &t->ns));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "dilations", t->dil, 3, &t->nd));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "pads", t->pads, 6, &t->np));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "output_padding", t->opad, 3, &t->nop));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "output_shape", t->oshape, 3, &t->nos));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "auto_pad", "NOTSET", auto_pad, sizeof auto_pad));
  t->same_upper = strcmp(auto_pad, "SAME_UPPER") == 0;
  t->same = t->same_upper || strcmp(auto_pad, "SAME_LOWER") == 0;
  if (!t->same && strcmp(auto_pad, "NOTSET") != 0 && strcmp(auto_pad, "VALID") != 0)
    return rlx_ox_invalid(c, "auto_pad '%s'", auto_pad);
  if ((t->ns >= 0 && t->ns != n) || (t->nd >= 0 && t->nd != n) || (t->np >= 0 && t->np != 2 * n) ||
      (t->nop >= 0 && t->nop != n) || (t->nos >= 0 && t->nos != n) || (t->nk >= 0 && t->nk != n))
    return rlx_ox_invalid(c, "attribute lengths do not match %d spatial dims", (int)n);
  return RLX_OK;
}

static rlx_status map_conv_transpose(rlx_ox_ctx* c) {
  int64_t group;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "group", 1, &group));
  rlx_tensor x, wt, bias, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "ConvTranspose"));
  rlx_type tx = type_of(c, x);
  int32_t n = tx.rank - 2;
  if (n < 1 || n > 3) return rlx_ox_unsupported(c, "%d spatial dims", (int)n);
  for (int32_t i = 1; i < tx.rank; i++) RLX_RETURN_IF_ERROR(need_static(c, &tx, i, "ConvTranspose"));
  RLX_RETURN_IF_ERROR(conv_operands(c, &tx, &wt, &bias));
  rlx_type tw = type_of(c, wt);
  tconv_attrs t;
  RLX_RETURN_IF_ERROR(tconv_read(c, n, &t));
  int64_t st[3], dl[3], op[3], pads[6];
  for (int32_t i = 0; i < n; i++) {
    int64_t in = tx.shape[2 + i], k = tw.shape[2 + i];
    st[i] = t.ns >= 0 ? t.strides[i] : 1;
    dl[i] = t.nd >= 0 ? t.dil[i] : 1;
    op[i] = t.nop >= 0 ? t.opad[i] : 0;
    if (st[i] < 1 || dl[i] < 1 || op[i] < 0 || st[i] > 4096 || dl[i] > 4096 || op[i] > 4096)
      return rlx_ox_invalid(c, "strides, dilations or output_padding out of range");
    if (t.nk >= 0 && t.kshape[i] != k) return rlx_ox_invalid(c, "kernel_shape differs from W's");
    int64_t pb = t.np >= 0 ? t.pads[i] : 0, pe = t.np >= 0 ? t.pads[i + n] : 0;
    if (t.nos >= 0 || t.same) {
      int64_t full = st[i] * (in - 1) + op[i] + (k - 1) * dl[i] + 1;
      int64_t want = t.nos >= 0 ? t.oshape[i] : in * st[i], total = full - want;
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); /* floor, as ONNX's // */
      pb = t.same_upper ? half : total - half;
      pe = total - pb;
    }
    if (pe < 0) { op[i] -= pe; pe = 0; }
    if (pb < 0) return rlx_ox_unsupported(c, "an output_shape wider at the start (pad %lld)", (long long)pb);
    pads[i] = pb;
    pads[n + i] = pe;
  }
  G(rlx_graph_add_conv_transpose(GRAPH, x, wt, bias, RLX_NONE, n, st, pads, dl, op, (int32_t)group,
                                 RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &y));
  return rlx_ox_set(c, 0, y);
}

/* MaxPool's Indices in storage_order 1: the (n, c) plane's offset plus the
 * column-major index of the spatial position (first spatial dim fastest),
 * from the row-major index `at` (non-negative: i64 division floors). */
static rlx_status column_major_indices(rlx_ox_ctx* c, rlx_tensor at, const rlx_type* tx,
                                       int32_t ns, rlx_tensor* out) {
  int64_t plane = 1;
  for (int32_t i = 0; i < ns; i++) plane *= tx->shape[2 + i];
  rlx_tensor base, spatial, acc;
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_DIV, at, (double)plane, &base));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, base, (double)plane, &acc));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, at, acc, &spatial));
  int64_t row_stride = plane, col_stride = 1;
  for (int32_t i = 0; i < ns; i++) {
    int64_t len = tx->shape[2 + i];
    row_stride /= len;
    rlx_tensor q, coord;
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_DIV, spatial, (double)row_stride, &coord));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_DIV, coord, (double)len, &q));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, q, (double)len, &q));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, coord, q, &coord));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MUL, coord, (double)col_stride, &coord));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, acc, coord, &acc));
    col_stride *= len;
  }
  *out = acc;
  return RLX_OK;
}

/* MaxPool / AveragePool onto the Pool op. auto_pad and ceil_mode are
 * resolved by window_geometry into begin pads and the explicit end pads; the
 * op re-derives the same output size. Integer max pooling runs in a float
 * type that holds the integers exactly (f32 for 8-bit ones, f64 for wider
 * ones: a shader backend then runs it on the host) and casts back. */
static rlx_status map_pool(rlx_ox_ctx* c) {
  int is_max = rlx_ox_arg(c);
  int64_t kshape[3], ceil_mode, include_pad = 0, storage = 0;
  int32_t nk;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "kernel_shape", kshape, 3, &nk));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "ceil_mode", 0, &ceil_mode));
  if (is_max) RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "storage_order", 0, &storage));
  else RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "count_include_pad", 0, &include_pad));
  int indices = rlx_ox_wants(c, 1);
  if (indices && storage != 0 && storage != 1) return rlx_ox_invalid(c, "storage_order %lld", (long long)storage);
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  if (!is_max || tx.dtype == RLX_BOOL) RLX_RETURN_IF_ERROR(need_float(c, x, rlx_ox_op_type(c)));
  if (nk != tx.rank - 2) return rlx_ox_invalid(c, "kernel_shape must have one entry per spatial dim");
  window w;
  RLX_RETURN_IF_ERROR(window_geometry(c, &tx, kshape, ceil_mode != 0, &w));
  int64_t ends[3], pads[6];
  RLX_RETURN_IF_ERROR(explicit_end_pads(c, &w, ends));
  for (int32_t i = 0; i < w.n; i++) {
    pads[i] = w.pad_begin[i];
    pads[w.n + i] = ends[i];
  }
  int as_float = !rlx_dtype_is_float(tx.dtype);
  int narrow = tx.dtype == RLX_I8 || tx.dtype == RLX_U8;
  if (as_float) RLX_RETURN_IF_ERROR(cast(c, x, narrow ? RLX_F32 : RLX_F64, &x));
  G(rlx_graph_add_pool(GRAPH, x, is_max ? RLX_POOL_MAX : RLX_POOL_AVG, w.n, w.k, w.stride, pads,
                       w.dil, ceil_mode != 0, include_pad != 0, &y));
  rlx_type ty = type_of(c, y);
  for (int32_t i = 0; i < w.n; i++)
    if (ty.shape[2 + i] != w.out[i])
      return rlx_ox_invalid(c, "spatial dim %d: pooled size %lld, ONNX expects %lld", (int)i,
                            (long long)ty.shape[2 + i], (long long)w.out[i]);
  if (indices) {
    rlx_tensor at;
    G(rlx_graph_add_pool(GRAPH, x, RLX_POOL_ARGMAX, w.n, w.k, w.stride, pads, w.dil,
                         ceil_mode != 0, 0, &at));
    if (storage == 1) RLX_RETURN_IF_ERROR(column_major_indices(c, at, &tx, w.n, &at));
    RLX_RETURN_IF_ERROR(rlx_ox_set(c, 1, at));
  }
  if (as_float) RLX_RETURN_IF_ERROR(cast(c, y, tx.dtype, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ losses */

/* NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss (the latter on
 * log_softmax over the class axis 1): loss[n, d..] = -x[n, t[n, d..], d..] *
 * w[t], zero where t == ignore_index; reduced by none / sum / mean (mean
 * divides by the sum of the weights used). */
static rlx_status map_nll(rlx_ox_ctx* c) {
  int sce = rlx_ox_arg(c);
  char red[16];
  int64_t ii = 0;
  int has_ii = rlx_ox_attr_has(c, "ignore_index");
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "reduction", "mean", red, sizeof red));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "ignore_index", 0, &ii));
  if (strcmp(red, "none") && strcmp(red, "sum") && strcmp(red, "mean"))
    return rlx_ox_unsupported(c, "reduction '%s'", red);
  rlx_tensor x, t, w = RLX_NONE, ign = RLX_NONE, loss, wt = RLX_NONE, tu, zero;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(in(c, 1, &t));
  RLX_RETURN_IF_ERROR(need_float(c, x, rlx_ox_op_type(c)));
  rlx_type tx = type_of(c, x), tt = type_of(c, t);
  if (tx.rank < 2 || tt.rank != tx.rank - 1)
    return rlx_ox_invalid(c, "input must be [N, C, d...] and target [N, d...]");
  if (sce) {
    G(rlx_graph_add_log_softmax(GRAPH, x, 1, &x));
    if (rlx_ox_wants(c, 1)) RLX_RETURN_IF_ERROR(rlx_ox_set(c, 1, x));
  }
  RLX_RETURN_IF_ERROR(cast(c, t, RLX_I64, &t));
  if (has_ii) { /* ignored targets may lie outside [0, C): gather class 0 there instead */
    RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_EQ, t, (double)ii, &ign));
    RLX_RETURN_IF_ERROR(scalar(c, RLX_I64, 0, &zero));
    RLX_RETURN_IF_ERROR(where(c, ign, zero, t, &t));
  }
  rlx_dim ushape[RLX_MAX_RANK];
  ushape[0] = tt.shape[0];
  ushape[1] = 1;
  for (int32_t d = 1; d < tt.rank; d++) ushape[d + 1] = tt.shape[d];
  RLX_RETURN_IF_ERROR(reshape(c, t, ushape, tx.rank, &tu));
  RLX_RETURN_IF_ERROR(rlx_ox_gather_elements(c, x, tu, 1, &loss));
  RLX_RETURN_IF_ERROR(reshape(c, loss, tt.shape, tt.rank, &loss));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_NEG, loss, &loss));
  if (rlx_ox_has(c, 2)) {
    RLX_RETURN_IF_ERROR(in(c, 2, &w));
    G(rlx_graph_add_gather(GRAPH, w, t, 0, &wt));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, loss, wt, &loss));
  }
  if (has_ii) {
    rlx_tensor zf, one;
    RLX_RETURN_IF_ERROR(scalar(c, tx.dtype, 0, &zf));
    RLX_RETURN_IF_ERROR(where(c, ign, zf, loss, &loss));
    if (wt == RLX_NONE) RLX_RETURN_IF_ERROR(scalar(c, tx.dtype, 1, &one));
    RLX_RETURN_IF_ERROR(where(c, ign, zf, wt == RLX_NONE ? one : wt, &wt));
  }
  if (strcmp(red, "sum") == 0) {
    RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_SUM, loss, NULL, 0, 0, &loss));
  } else if (strcmp(red, "mean") == 0) {
    if (wt == RLX_NONE) {
      RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_MEAN, loss, NULL, 0, 0, &loss));
    } else {
      RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_SUM, loss, NULL, 0, 0, &loss));
      RLX_RETURN_IF_ERROR(expand_to(c, wt, tt.shape, tt.rank, &wt));
      RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_SUM, wt, NULL, 0, 0, &wt));
      RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, loss, wt, &loss));
    }
  }
  return rlx_ox_set(c, 0, loss);
}

/* ------------------------------------------------------------------ resize, upsample */

/* A known float input as a list; 0 entries when the input is absent or
 * empty (ONNX marks an unused roi / scales that way). */
static rlx_status known_floats(rlx_ox_ctx* c, int32_t i, const char* what, float* out,
                               int32_t cap, int32_t* out_n) {
  *out_n = 0;
  if (i >= rlx_ox_n_in(c) || !rlx_ox_has(c, i)) return RLX_OK;
  const rlx_host_tensor* k;
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, i, what, &k));
  if (!rlx_dtype_is_float(k->dtype)) return rlx_ox_invalid(c, "%s must be float", what);
  int64_t n = rlx_host_numel(k);
  if (n > cap) return rlx_ox_unsupported(c, "%s has %lld entries (at most %d)", what, (long long)n, (int)cap);
  for (int64_t j = 0; j < n; j++) out[j] = (float)rlx_load_f64(k->data, k->dtype, j);
  *out_n = (int32_t)n;
  return RLX_OK;
}

static int name_index(const char* s, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

/* The Resize attributes every opset spells the same way. */
typedef struct resize_attrs {
  int mode, coord, nearest, exclude_outside;
  float cubic_a, extrapolation;
} resize_attrs;

static rlx_status resize_read_attrs(rlx_ox_ctx* c, int legacy, resize_attrs* r) {
  static const char* const modes[] = {"nearest", "linear", "cubic"};
  static const char* const coords[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                                       "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                                       "tf_crop_and_resize"};
  static const char* const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  char mode[32], coord[32], nearest[32];
  int64_t excl = 0, antialias = 0;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "mode", "nearest", mode, sizeof mode));
  if (strcmp(mode, "bilinear") == 0) strcpy(mode, "linear"); /* Upsample-7's spelling */
  r->mode = name_index(mode, modes, 3);
  if (r->mode < 0) return rlx_ox_unsupported(c, "mode '%s'", mode);
  /* Upsample and Resize-10 sample asymmetrically and take the floor. */
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "coordinate_transformation_mode",
                                         legacy ? "asymmetric" : "half_pixel", coord, sizeof coord));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "nearest_mode", legacy ? "floor" : "round_prefer_floor",
                                         nearest, sizeof nearest));
  r->coord = name_index(coord, coords, 7);
  r->nearest = name_index(nearest, nearests, 4);
  if (r->coord < 0) return rlx_ox_unsupported(c, "coordinate_transformation_mode '%s'", coord);
  if (r->nearest < 0) return rlx_ox_unsupported(c, "nearest_mode '%s'", nearest);
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "cubic_coeff_a", -0.75f, &r->cubic_a));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "extrapolation_value", 0.0f, &r->extrapolation));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "exclude_outside", 0, &excl));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "antialias", 0, &antialias));
  if (antialias) return rlx_ox_unsupported(c, "antialias");
  r->exclude_outside = excl != 0;
  return RLX_OK;
}

/* Spreads the per-axis lists of opset 18's `axes` over every dim of rank
 * r: scales default to 1, roi to 0 .. 1. */
static rlx_status resize_axes(rlx_ox_ctx* c, int32_t r, const int64_t* axes, int32_t na,
                              float* scales, int32_t* ns, int64_t* sizes, int32_t* nz,
                              float* roi, int32_t* nr) {
  float sc[RLX_MAX_RANK], ro[2 * RLX_MAX_RANK];
  int64_t sz[RLX_MAX_RANK];
  if ((*ns && *ns != na) || (*nz && *nz != na) || (*nr && *nr != 2 * na))
    return rlx_ox_invalid(c, "scales / sizes / roi do not match %d axes", (int)na);
  for (int32_t d = 0; d < r; d++) { sc[d] = 1.0f; sz[d] = -1; ro[d] = 0.0f; ro[r + d] = 1.0f; }
  for (int32_t i = 0; i < na; i++) {
    int32_t ax;
    RLX_RETURN_IF_ERROR(norm_axis(c, axes[i], r, &ax));
    if (*ns) sc[ax] = scales[i];
    if (*nz) sz[ax] = sizes[i];
    if (*nr) { ro[ax] = roi[i]; ro[r + ax] = roi[na + i]; }
  }
  memcpy(scales, sc, sizeof sc);
  memcpy(sizes, sz, sizeof sz);
  memcpy(roi, ro, sizeof ro);
  *ns = *ns ? r : 0;
  *nz = *nz ? r : 0;
  *nr = *nr ? 2 * r : 0;
  return RLX_OK;
}

/* Resize (opsets 10 .. 19) and Upsample (7, 9) onto the Resize op: scales,
 * sizes and roi must be known at import time (the output shape depends on
 * them). Output size: sizes, or floor(in * scale). */
static rlx_status map_resize(rlx_ox_ctx* c) {
  int upsample = strcmp(rlx_ox_op_type(c), "Upsample") == 0;
  int64_t opset = rlx_ox_opset(c);
  int legacy = upsample || opset < 11;
  resize_attrs ra;
  RLX_RETURN_IF_ERROR(resize_read_attrs(c, legacy, &ra));
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  int32_t r = tx.rank, ns = 0, nz = 0, nr = 0, na = -1;
  float scales[RLX_MAX_RANK], roi[2 * RLX_MAX_RANK];
  int64_t sizes[RLX_MAX_RANK], axes[RLX_MAX_RANK];
  if (upsample && opset < 9) {
    RLX_RETURN_IF_ERROR(rlx_ox_attr_floats(c, "scales", scales, RLX_MAX_RANK, &ns));
  } else if (legacy) {
    RLX_RETURN_IF_ERROR(known_floats(c, 1, "scales", scales, RLX_MAX_RANK, &ns));
  } else {
    RLX_RETURN_IF_ERROR(known_floats(c, 1, "roi", roi, 2 * RLX_MAX_RANK, &nr));
    RLX_RETURN_IF_ERROR(known_floats(c, 2, "scales", scales, RLX_MAX_RANK, &ns));
    if (rlx_ox_n_in(c) > 3 && rlx_ox_has(c, 3))
      RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 3, "sizes", sizes, RLX_MAX_RANK, &nz));
    RLX_RETURN_IF_ERROR(rlx_ox_attr_ints(c, "axes", axes, RLX_MAX_RANK, &na));
    char policy[32];
    RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "keep_aspect_ratio_policy", "stretch", policy, sizeof policy));
    if (strcmp(policy, "stretch") != 0 && nz) return rlx_ox_unsupported(c, "keep_aspect_ratio_policy '%s'", policy);
  }
  if (na >= 0) RLX_RETURN_IF_ERROR(resize_axes(c, r, axes, na, scales, &ns, sizes, &nz, roi, &nr));
  if ((ns == 0) == (nz == 0)) return rlx_ox_invalid(c, "exactly one of scales and sizes must be given");
  if ((ns && ns != r) || (nz && nz != r) || (nr && nr != 2 * r))
    return rlx_ox_invalid(c, "scales / sizes / roi do not match rank %d", (int)r);
  for (int32_t d = 0; ns && d < r; d++) {
    if (!(scales[d] > 0.0f)) return rlx_ox_invalid(c, "scale %g is not positive", (double)scales[d]);
    if (scales[d] == 1.0f) { sizes[d] = -1; continue; }
    RLX_RETURN_IF_ERROR(need_static(c, &tx, d, "Resize"));
    sizes[d] = (int64_t)floor((double)tx.shape[d] * (double)scales[d]);
  }
  G(rlx_graph_add_resize(GRAPH, x, sizes, (rlx_resize_mode)ra.mode, (rlx_resize_coord)ra.coord,
                         (rlx_resize_nearest)ra.nearest, ra.cubic_a, ra.exclude_outside,
                         ns ? scales : NULL, nr ? roi : NULL, ra.extrapolation, &y));
  return rlx_ox_set(c, 0, y);
}

/* GridSample (16: bilinear / nearest / bicubic; 20: linear / cubic, 2-D). */
static rlx_status map_grid_sample(rlx_ox_ctx* c) {
  static const char* const modes[] = {"nearest", "linear", "cubic"};
  static const char* const pads[] = {"zeros", "border", "reflection"};
  char mode[32], pad[32];
  int64_t align = 0;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "mode", rlx_ox_opset(c) < 20 ? "bilinear" : "linear",
                                         mode, sizeof mode));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "padding_mode", "zeros", pad, sizeof pad));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "align_corners", 0, &align));
  if (strcmp(mode, "bilinear") == 0) strcpy(mode, "linear");
  if (strcmp(mode, "bicubic") == 0) strcpy(mode, "cubic");
  int m = name_index(mode, modes, 3), p = name_index(pad, pads, 3);
  if (m < 0) return rlx_ox_unsupported(c, "mode '%s'", mode);
  if (p < 0) return rlx_ox_unsupported(c, "padding_mode '%s'", pad);
  rlx_tensor x, grid, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(in(c, 1, &grid));
  G(rlx_graph_add_grid_sample(GRAPH, x, grid, (rlx_resize_mode)m, (rlx_grid_padding)p,
                              align != 0, &y));
  return rlx_ox_set(c, 0, y);
}

/* RoiAlign (10, 16): opset 10 has no half-pixel offset. */
static rlx_status map_roi_align(rlx_ox_ctx* c) {
  char mode[16], coord[32];
  int64_t oh = 1, ow = 1, ratio = 0;
  float scale = 1.0f;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "mode", "avg", mode, sizeof mode));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "coordinate_transformation_mode",
                                         rlx_ox_opset(c) < 16 ? "output_half_pixel" : "half_pixel",
                                         coord, sizeof coord));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "output_height", 1, &oh));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "output_width", 1, &ow));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "sampling_ratio", 0, &ratio));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "spatial_scale", 1.0f, &scale));
  int max = strcmp(mode, "max") == 0, half = strcmp(coord, "half_pixel") == 0;
  if (!max && strcmp(mode, "avg") != 0) return rlx_ox_unsupported(c, "mode '%s'", mode);
  if (!half && strcmp(coord, "output_half_pixel") != 0)
    return rlx_ox_unsupported(c, "coordinate_transformation_mode '%s'", coord);
  if (ratio < 0 || ratio > INT32_MAX) return rlx_ox_invalid(c, "sampling_ratio %lld", (long long)ratio);
  rlx_tensor x, rois, bi, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(in(c, 1, &rois));
  RLX_RETURN_IF_ERROR(in(c, 2, &bi));
  G(rlx_graph_add_roi_align(GRAPH, x, rois, bi, max ? RLX_POOL_MAX : RLX_POOL_AVG, oh, ow,
                            (int32_t)ratio, scale, half, &y));
  return rlx_ox_set(c, 0, y);
}

/* GroupNormalization's scale or bias: [C] (opset 21), or [num_groups]
 * (opset 18) repeated over each group's C / num_groups channels. */
static rlx_status group_vector(rlx_ox_ctx* c, int32_t i, const rlx_type* tx, int64_t groups,
                               rlx_tensor* out) {
  RLX_RETURN_IF_ERROR(in(c, i, out));
  rlx_type t = type_of(c, *out);
  if (t.dtype != tx->dtype) RLX_RETURN_IF_ERROR(cast(c, *out, tx->dtype, out));
  if (t.rank == 1 && t.shape[0] == tx->shape[1]) return RLX_OK;
  if (t.rank != 1 || t.shape[0] != groups)
    return rlx_ox_invalid(c, "input %d must be [C] or [num_groups]", (int)i);
  rlx_dim per_group[2] = {groups, 1}, spread[2] = {groups, tx->shape[1] / groups},
          flat[1] = {tx->shape[1]};
  RLX_RETURN_IF_ERROR(reshape(c, *out, per_group, 2, out));
  RLX_RETURN_IF_ERROR(expand_to(c, *out, spread, 2, out));
  return reshape(c, *out, flat, 1, out);
}

/* GroupNormalization (opset 18 / 21): the GROUP_NORM op. */
static rlx_status map_group_norm(rlx_ox_ctx* c) {
  float eps;
  int64_t groups;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "epsilon", 1e-5f, &eps));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "num_groups", 0, &groups));
  rlx_ox_attr_ignore(c, "stash_type"); /* the kernels accumulate in f32 or wider anyway */
  rlx_tensor x, scale, bias, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "GroupNormalization"));
  rlx_type tx = type_of(c, x);
  if (tx.rank < 2) return rlx_ox_invalid(c, "input must be [N, C, ...]");
  RLX_RETURN_IF_ERROR(need_static(c, &tx, 1, "the channel dim"));
  if (groups < 1 || groups > INT32_MAX || tx.shape[1] % groups != 0)
    return rlx_ox_invalid(c, "num_groups %lld must be >= 1 and divide C = %lld",
                          (long long)groups, (long long)tx.shape[1]);
  RLX_RETURN_IF_ERROR(group_vector(c, 1, &tx, groups, &scale));
  RLX_RETURN_IF_ERROR(group_vector(c, 2, &tx, groups, &bias));
  G(rlx_graph_add_group_norm(GRAPH, x, scale, bias, (int32_t)groups, eps, &y));
  return rlx_ox_set(c, 0, y);
}

/* LRN: the IR op (across channels; decomposed into Pool and elementwise
 * ops by every backend). */
static rlx_status map_lrn(rlx_ox_ctx* c) {
  float alpha, beta, bias;
  int64_t size;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "alpha", 1e-4f, &alpha));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "beta", 0.75f, &beta));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_float(c, "bias", 1.0f, &bias));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "size", 0, &size));
  if (size < 1 || size > INT32_MAX) return rlx_ox_invalid(c, "size must be >= 1");
  rlx_tensor x, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "LRN"));
  if (type_of(c, x).rank < 2) return rlx_ox_invalid(c, "input must be [N, C, ...]");
  G(rlx_graph_add_lrn(GRAPH, x, (int32_t)size, alpha, beta, bias, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ table */

static const rlx_ox_op nn_ops[] = {
    {"AveragePool", map_pool, 0, 0},
    {"Conv", map_conv, 0, 0},
    {"ConvTranspose", map_conv_transpose, 0, 0},
    {"MaxPool", map_pool, 1, 0},
    {"Acos", map_trig_f64, 0, 0},
    {"Acosh", map_trig_f64, 0, 0},
    {"Asin", map_trig_f64, 0, 0},
    {"Asinh", map_trig_f64, 0, 0},
    {"Atanh", map_trig_f64, 0, 0},
    {"BatchNormalization", map_batch_norm, 0, 0},
    {"Cosh", map_trig_f64, 0, 0},
    {"DepthToSpace", map_depth_space, 1, 0},
    {"EyeLike", map_eye_like, 0, 0},
    {"GlobalAveragePool", map_global_pool, 0, 0},
    {"GridSample", map_grid_sample, 0, 0},
    {"GlobalMaxPool", map_global_pool, 1, 0},
    {"InstanceNormalization", map_instance_norm, 0, 0},
    {"MeanVarianceNormalization", map_mvn, 0, 0},
    {"Mod", map_mod, 0, 0},
    {"NegativeLogLikelihoodLoss", map_nll, 0, 0},
    {"OneHot", map_one_hot, 0, 0},
    {"Pad", map_pad, 0, 0},
    {"Resize", map_resize, 0, 0},
    {"RoiAlign", map_roi_align, 0, 0},
    {"Sinh", map_trig_f64, 0, 0},
    {"SoftmaxCrossEntropyLoss", map_nll, 1, 0},
    {"SpaceToDepth", map_depth_space, 0, 0},
    {"Upsample", map_resize, 0, 0},
    {"LRN", map_lrn, 0, 0},
    {"GroupNormalization", map_group_norm, 0, 0},
};

const rlx_ox_op* rlx_ox_find_nn_op(const char* op_type) {
  const rlx_ox_op* op = rlx_ox_op_in(nn_ops, sizeof nn_ops / sizeof nn_ops[0], op_type);
  return op ? op : rlx_ox_find_misc_op(op_type);
}

#else
typedef int rlx_onnx_nn_not_built; /* keeps the translation unit non-empty */
#endif /* RLX_HAVE_ONNX */
