/* ONNX quantization ops: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and
 * QLinearConv (opsets 10..21).
 *
 * Element math (ONNX's definitions):
 *   quantize    y = saturate(round_half_even(x / scale) + zero_point)
 *               float8 y: cast(x / scale + zero_point), round to nearest
 *               even, saturating (saturate = 1; 0 is refused)
 *   dequantize  y = (x - zero_point) * scale, in f32, then scale's dtype
 *   integer matmul / conv: sum of (a - a_zero) * (b - b_zero) as int32
 *   QLinear*    y = saturate(round(acc * (a_scale * b_scale / y_scale)) + y_zero)
 * scale and zero_point are per tensor (a scalar), per axis (1-D along
 * `axis`) or blocked (opset 21 block_size: x's rank, ceil(D / block) along
 * axis, each value repeated block times).
 *
 * Exactness of the integer products. rlx has no integer matmul or conv, so
 * the products run on float ops over the integer values: f32 holds every
 * integer of magnitude <= 2^24, and each product of two 8-bit operands
 * (zero point removed, |v| <= 255) is one; a dot product of K such terms
 * with |a| <= A, |b| <= B is exact in any summation order when K * A * B <=
 * 2^24 (every partial sum is bounded by that). Longer reductions are cut
 * into chunks that meet the bound, each chunk's result rounded to i32 and
 * the chunks summed in i32: the result is exact for every size (the int32
 * sum wraps, as ONNX allows). A constant right-hand matrix of
 * MatMulInteger / QLinearMatMul is kept as Int8Block rows of a
 * DequantMatMul (scale 1, its zero points as the asymmetric scheme's), with
 * the same chunking; so does the constant weight of MatMul / Gemm reading a
 * DequantizeLinear (QDQ models). RLX_ONNX_NO_DEQUANT_MATMUL keeps both on
 * float ops (for backends whose DequantMatMul is the host fallback).
 *
 * Dtypes: quantized u8, i8, u16, i16 (and i32 for DequantizeLinear's
 * input), the four float8 types for Quantize/DequantizeLinear; int4 / uint4
 * have no rlx dtype and are refused, naming the op and the dtype. */
#ifdef RLX_HAVE_ONNX

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/scalar_math.h"
#include "io/onnx_helpers.h"
#include "ir/graph.h"

#define EXACT_F32 16777216.0 /* 2^24 */

/* ------------------------------------------------------------------ dtypes */

/* Range of an integer quantized dtype; 0 when dt is not one. */
static int int_range(rlx_dtype dt, double* lo, double* hi) {
  switch (dt) {
    case RLX_U8: *lo = 0, *hi = 255; return 1;
    case RLX_I8: *lo = -128, *hi = 127; return 1;
    case RLX_U16: *lo = 0, *hi = 65535; return 1;
    case RLX_I16: *lo = -32768, *hi = 32767; return 1;
    default: return 0;
  }
}

/* ONNX codes of the 4-bit types (onnx.proto 1.16+). */
static const char* four_bit_name(int64_t code) {
  return code == 21 ? "uint4" : code == 22 ? "int4" : code == 23 ? "float4e2m1" : NULL;
}

/* The quantized dtype of QuantizeLinear's output: the zero point's, else
 * output_dtype (opset 21), else u8. */
static rlx_status quant_out_dtype(rlx_ox_ctx* c, rlx_dtype* out) {
  int64_t code;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "output_dtype", 0, &code));
  int from_attr = code != 0 ? onnx_to_dtype(code) : -1;
  if (code != 0 && from_attr < 0)
    return rlx_ox_unsupported(c, "output_dtype %s (ONNX type %lld) is not supported",
                              four_bit_name(code) ? four_bit_name(code) : "?", (long long)code);
  *out = RLX_U8;
  if (rlx_ox_has(c, 2)) {
    rlx_type tz;
    RLX_RETURN_IF_ERROR(rlx_ox_type(c, 2, &tz));
    if (from_attr >= 0 && (rlx_dtype)from_attr != tz.dtype)
      return rlx_ox_invalid(c, "output_dtype %s differs from the zero point's %s",
                            rlx_dtype_name((rlx_dtype)from_attr), rlx_dtype_name(tz.dtype));
    *out = tz.dtype;
  } else if (from_attr >= 0) {
    *out = (rlx_dtype)from_attr;
  }
  double lo, hi;
  if (!int_range(*out, &lo, &hi) && !rlx_dtype_is_f8(*out))
    return rlx_ox_unsupported(c, "quantized dtype %s is not supported (u8, i8, u16, i16, "
                              "float8)", rlx_dtype_name(*out));
  return RLX_OK;
}

/* ------------------------------------------------------------------ scale / zero-point layout */

/* The node's axis (opset 13+) and block_size (opset 21) for an x of rank
 * r; axis -1 when out of range, refused only where a per-axis or blocked
 * parameter needs it (a per-tensor node ignores the default axis 1 even for
 * a 1-D x). */
static rlx_status quant_axis(rlx_ox_ctx* c, int32_t rank, int32_t* axis, int64_t* block) {
  int64_t ax, bs;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 1, &ax));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "block_size", 0, &bs));
  if (bs < 0) return rlx_ox_invalid(c, "block_size %lld is negative", (long long)bs);
  *block = bs;
  *axis = ax >= -rank && ax < rank ? (int32_t)(ax < 0 ? ax + rank : ax) : -1;
  return RLX_OK;
}

static int is_one_element(const rlx_type* t) {
  for (int32_t i = 0; i < t->rank; i++)
    if (t->shape[i] != 1) return 0;
  return 1;
}

/* Blocked layout: p has x's rank, ceil(D / block) along axis; each value is
 * repeated block times along axis and the tail cut to D. */
static rlx_status blocked_param(rlx_ox_ctx* c, rlx_tensor p, const rlx_type* tx, int32_t axis,
                                int64_t block, const char* what, rlx_tensor* out) {
  rlx_type tp = type_of(c, p);
  RLX_RETURN_IF_ERROR(need_static(c, tx, axis, what));
  int64_t D = tx->shape[axis], nb = (D + block - 1) / block;
  if (tp.rank != tx->rank || tp.rank + 1 > RLX_MAX_RANK)
    return rlx_ox_invalid(c, "%s must have x's rank %d for block_size %lld", what,
                          (int)tx->rank, (long long)block);
  for (int32_t i = 0; i < tp.rank; i++)
    if (tp.shape[i] != (i == axis ? nb : tx->shape[i]))
      return rlx_ox_invalid(c, "%s dim %d is %lld; block_size %lld over x needs %lld", what,
                            (int)i, (long long)tp.shape[i], (long long)block,
                            (long long)(i == axis ? nb : tx->shape[i]));
  if (nb == 1) block = D; /* one block spans x: no wider repeat than D (block may be huge) */
  rlx_dim split[RLX_MAX_RANK], wide[RLX_MAX_RANK], merged[RLX_MAX_RANK];
  for (int32_t i = 0, j = 0; i < tp.rank; i++) {
    split[j] = wide[j] = tp.shape[i];
    merged[i] = i == axis ? nb * block : tp.shape[i];
    j++;
    if (i == axis) split[j] = 1, wide[j] = block, j++;
  }
  rlx_tensor t;
  RLX_RETURN_IF_ERROR(reshape(c, p, split, tp.rank + 1, &t));
  RLX_RETURN_IF_ERROR(expand_to(c, t, wide, tp.rank + 1, &t));
  RLX_RETURN_IF_ERROR(reshape(c, t, merged, tp.rank, &t));
  if (nb * block != D) G(rlx_graph_add_narrow(GRAPH, t, axis, 0, D, &t));
  *out = t;
  return RLX_OK;
}

/* A scale or zero point laid out to broadcast against x (see the top). */
static rlx_status layout_param(rlx_ox_ctx* c, rlx_tensor p, const rlx_type* tx, int32_t axis,
                               int64_t block, const char* what, rlx_tensor* out) {
  rlx_type tp = type_of(c, p);
  *out = p;
  int per_tensor = tp.rank == 0 || (tp.rank == 1 && is_one_element(&tp));
  if (axis < 0 && (block > 0 || !per_tensor))
    return rlx_ox_invalid(c, "axis is out of range for x's rank %d", (int)tx->rank);
  if (block > 0) return blocked_param(c, p, tx, axis, block, what, out);
  if (per_tensor) return RLX_OK;
  if (tp.rank != 1)
    return rlx_ox_invalid(c, "%s must be a scalar or 1-D (per axis); it has rank %d", what,
                          (int)tp.rank);
  RLX_RETURN_IF_ERROR(need_static(c, tx, axis, what));
  if (tp.shape[0] != tx->shape[axis])
    return rlx_ox_invalid(c, "%s has %lld elements; x's dim %d is %lld", what,
                          (long long)tp.shape[0], (int)axis, (long long)tx->shape[axis]);
  rlx_dim shape[RLX_MAX_RANK];
  for (int32_t i = 0; i < tx->rank; i++) shape[i] = i == axis ? tp.shape[0] : 1;
  return reshape(c, p, shape, tx->rank, out);
}

/* Input i (scale or zero point) laid out against x; RLX_NONE when absent. */
static rlx_status param_in(rlx_ox_ctx* c, int32_t i, const rlx_type* tx, int32_t axis,
                           int64_t block, const char* what, rlx_tensor* out) {
  *out = RLX_NONE;
  if (!rlx_ox_has(c, i)) return RLX_OK;
  rlx_tensor p;
  RLX_RETURN_IF_ERROR(in(c, i, &p));
  return layout_param(c, p, tx, axis, block, what, out);
}

/* ------------------------------------------------------------------ element math */

/* Round half to even, add the zero point, clamp to dt's range, cast to dt
 * (integers); float8: add the zero point and cast (round to nearest even,
 * saturating). q holds x / scale in f32 (or f64). */
static rlx_status requantize(rlx_ox_ctx* c, rlx_tensor q, rlx_tensor zero, rlx_dtype dt,
                             rlx_tensor* y) {
  rlx_dtype wd = type_of(c, q).dtype;
  double lo = 0, hi = 0;
  int is_int = int_range(dt, &lo, &hi);
  if (is_int) RLX_RETURN_IF_ERROR(act(c, RLX_ACT_ROUND, q, &q));
  if (zero != RLX_NONE) {
    rlx_tensor z;
    RLX_RETURN_IF_ERROR(cast(c, zero, wd, &z));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, q, z, &q));
  }
  if (is_int) {
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MAX, q, lo, &q));
    RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MIN, q, hi, &q));
  }
  return cast(c, q, dt, y);
}

/* x / scale in x's dtype (as ONNX's reference divides), then widened to f32
 * (f64 stays f64) for the rounding and the zero point. */
static rlx_status divide_by_scale(rlx_ox_ctx* c, rlx_tensor x, rlx_tensor scale, rlx_tensor* q) {
  rlx_dtype xd = type_of(c, x).dtype;
  rlx_tensor s;
  RLX_RETURN_IF_ERROR(cast(c, scale, xd, &s));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, x, s, q));
  return cast(c, *q, xd == RLX_F64 ? RLX_F64 : RLX_F32, q);
}

/* (x - zero) * scale computed in f32 (f64 for an f64 scale), given in
 * scale's dtype. */
static rlx_status dequantize(rlx_ox_ctx* c, rlx_tensor x, rlx_tensor scale, rlx_tensor zero,
                             rlx_tensor* y) {
  rlx_dtype sd = type_of(c, scale).dtype, wd = sd == RLX_F64 ? RLX_F64 : RLX_F32;
  rlx_tensor v, z, s;
  RLX_RETURN_IF_ERROR(cast(c, x, wd, &v));
  if (zero != RLX_NONE) {
    RLX_RETURN_IF_ERROR(cast(c, zero, wd, &z));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, v, z, &v));
  }
  RLX_RETURN_IF_ERROR(cast(c, scale, wd, &s));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, v, s, &v));
  return cast(c, v, sd, y);
}

/* ------------------------------------------------------------------ Quantize / Dequantize */

static rlx_status map_quantize_linear(rlx_ox_ctx* c) {
  int64_t sat;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "saturate", 1, &sat));
  rlx_dtype dt = RLX_U8;
  RLX_RETURN_IF_ERROR(quant_out_dtype(c, &dt));
  if (sat == 0 && rlx_dtype_is_f8(dt))
    return rlx_ox_unsupported(c, "saturate=0 into %s (only the default saturate=1)",
                              rlx_dtype_name(dt));
  rlx_tensor x, scale, zero, q, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  if (!rlx_dtype_is_float(tx.dtype) || rlx_dtype_is_f8(tx.dtype))
    return rlx_ox_unsupported(c, "input x of dtype %s is not supported (f32, f16, bf16, f64)",
                              rlx_dtype_name(tx.dtype));
  int32_t axis = -1;
  int64_t block = 0;
  RLX_RETURN_IF_ERROR(quant_axis(c, tx.rank, &axis, &block));
  RLX_RETURN_IF_ERROR(param_in(c, 1, &tx, axis, block, "y_scale", &scale));
  RLX_RETURN_IF_ERROR(param_in(c, 2, &tx, axis, block, "y_zero_point", &zero));
  if (!rlx_dtype_is_float(type_of(c, scale).dtype))
    return rlx_ox_invalid(c, "y_scale must be a float tensor");
  RLX_RETURN_IF_ERROR(divide_by_scale(c, x, scale, &q));
  RLX_RETURN_IF_ERROR(requantize(c, q, zero, dt, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ constant weights for MatMul / Gemm */

/* DequantizeLinear's note on a constant 2-D weight W (rlx_ox_set_note): W
 * as ONNX holds it, so a MatMul or Gemm reading it can build one
 * DequantMatMul with W's rows along its N as Int8Block rows (row_form)
 * and W never exists in f32. One malloc block; the arrays follow the
 * header. */
typedef struct qweight {
  rlx_dtype dtype;  /* u8 or i8 */
  int64_t shape[2]; /* W's */
  int32_t axis;     /* the per-axis or block axis; -1 per tensor */
  int64_t block;    /* 0: per axis */
  int64_t n_params; /* scale (and zero point) elements */
  uint8_t* codes;   /* W's bytes, row major */
  float* scale;     /* ONNX's layout */
  uint8_t* zero;    /* ONNX's layout (bytes), or NULL */
} qweight;

/* The note when x (input 0) is a known 2-D u8 / i8 with a known f32 scale
 * (and zero point) per tensor, per axis or blocked; else no note. */
static void note_constant_weight(rlx_ox_ctx* c, int32_t axis, int64_t block) {
  if (rlx_env_flag(RLX_ENV_ONNX_NO_DEQUANT_MATMUL)) return;
  const rlx_host_tensor *x = rlx_ox_known(c, 0), *s = rlx_ox_known(c, 1);
  const rlx_host_tensor* z = rlx_ox_has(c, 2) ? rlx_ox_known(c, 2) : NULL;
  if (!x || !s || (rlx_ox_has(c, 2) && !z) || x->rank != 2 || s->dtype != RLX_F32 ||
      (x->dtype != RLX_U8 && x->dtype != RLX_I8) || (z && z->dtype != x->dtype) ||
      x->shape[0] < 1 || x->shape[1] < 1)
    return;
  int64_t ns = rlx_host_numel(s);
  if (ns == 1 && block == 0) axis = -1;
  else if (axis < 0 || (block == 0 && s->rank != 1) || (block > 0 && s->rank != 2))
    return; /* the mapper has refused or laid these out; no note for odd forms */
  if (z && rlx_host_numel(z) != ns) return;
  size_t head = (sizeof(qweight) + 15) / 16 * 16, nw = (size_t)(x->shape[0] * x->shape[1]);
  size_t sc_at = head + (nw + 3) / 4 * 4, z_at = sc_at + sizeof(float) * (size_t)ns;
  qweight* q = malloc(z_at + (z ? (size_t)ns : 0));
  if (!q) return; /* no note: the consumer takes the f32 weight */
  q->dtype = x->dtype;
  q->shape[0] = x->shape[0], q->shape[1] = x->shape[1];
  q->axis = axis, q->block = block, q->n_params = ns;
  q->codes = (uint8_t*)q + head;
  q->scale = (float*)((uint8_t*)q + sc_at);
  q->zero = z ? (uint8_t*)q + z_at : NULL;
  memcpy(q->codes, x->data, nw);
  memcpy(q->scale, s->data, sizeof(float) * (size_t)ns);
  if (z) memcpy(q->zero, z->data, (size_t)ns);
  rlx_ox_set_note(c, 0, q);
}

/* W's rows along n_axis as DequantMatMul operands: w u8 [N, K] codes (int8
 * shifted by 128 in the asymmetric scheme), scale / zero [N, K / group].
 * Representable when the scale is per tensor, per axis along n_axis, or in
 * blocks along the other axis that divide K. */
typedef struct qrows {
  int64_t N, K, group, groups;
  int sym;
  uint8_t *w, *zero;
  float* scale;
} qrows;

static void qrows_free(qrows* r) {
  free(r->w);
  free(r->scale);
  free(r->zero);
}

/* Index of element (n, k)'s parameter in ONNX's layout. */
static int64_t param_index(const qweight* q, int32_t n_axis, int64_t n, int64_t k) {
  if (q->axis < 0) return 0;
  if (q->block == 0) return n;
  int64_t j = k / q->block, nb = (q->shape[1 - n_axis] + q->block - 1) / q->block;
  return n_axis == 1 ? j * q->shape[1] + n : n * nb + j;
}

static int row_form(const qweight* q, int32_t n_axis, qrows* r) {
  memset(r, 0, sizeof *r);
  int32_t k_axis = 1 - n_axis;
  r->N = q->shape[n_axis], r->K = q->shape[k_axis];
  int per_n = q->axis == n_axis && q->block == 0 && q->n_params == r->N;
  int blocked = q->axis == k_axis && q->block > 0 && r->K % q->block == 0 &&
                q->n_params == r->N * (r->K / q->block);
  if (q->axis >= 0 && !per_n && !blocked) return 0;
  r->group = blocked ? q->block : r->K;
  if (r->group > (1 << 20)) return 0; /* DequantMatMul's largest group */
  r->groups = r->K / r->group;
  int shift = q->dtype == RLX_I8 ? 128 : 0;
  r->sym = q->dtype == RLX_I8;
  for (int64_t i = 0; q->zero && i < q->n_params; i++) r->sym = r->sym && q->zero[i] == 0;
  size_t ng = (size_t)(r->N * r->groups);
  r->w = malloc((size_t)(r->N * r->K));
  r->scale = malloc(sizeof(float) * ng);
  r->zero = r->sym ? NULL : malloc(ng);
  if (!r->w || !r->scale || (!r->sym && !r->zero)) {
    qrows_free(r);
    return 0;
  }
  int64_t C = q->shape[1];
  for (int64_t n = 0; n < r->N; n++)
    for (int64_t k = 0; k < r->K; k++) {
      uint8_t b = q->codes[n_axis == 1 ? k * C + n : n * C + k];
      r->w[n * r->K + k] = r->sym ? b : (uint8_t)(b + shift); /* mod 256: int8 + 128 */
    }
  for (int64_t n = 0; n < r->N; n++)
    for (int64_t g = 0; g < r->groups; g++) {
      int64_t at = param_index(q, n_axis, n, g * r->group);
      r->scale[n * r->groups + g] = q->scale[at];
      if (r->zero) r->zero[n * r->groups + g] = (uint8_t)((q->zero ? q->zero[at] : 0) + shift);
    }
  return 1;
}

/* a . W (W's rows along n_axis are the output columns) as one
 * DequantMatMul when input bi carries a DequantizeLinear note that fits
 * and a is f32 with K in its last dim; *handled = 0 otherwise. */
rlx_status rlx_ox_quant_product(rlx_ox_ctx* c, rlx_tensor a, int32_t bi, int32_t n_axis,
                                rlx_tensor* y, int* handled) {
  const qweight* q = rlx_ox_note(c, bi);
  *handled = 0;
  rlx_type ta = type_of(c, a);
  if (!q || ta.dtype != RLX_F32 || ta.rank < 1 || ta.shape[ta.rank - 1] != q->shape[1 - n_axis])
    return RLX_OK;
  qrows r;
  if (!row_form(q, n_axis, &r)) return RLX_OK;
  int64_t ws[2] = {r.N, r.K}, ss[2] = {r.N, r.groups};
  size_t ng = (size_t)(r.N * r.groups);
  rlx_tensor w, scale, zero = RLX_NONE;
  rlx_status s = constant(c, RLX_U8, 2, ws, r.w, (size_t)(r.N * r.K), &w);
  if (s == RLX_OK) s = constant(c, RLX_F32, 2, ss, r.scale, sizeof(float) * ng, &scale);
  if (s == RLX_OK && r.zero) s = constant(c, RLX_U8, 2, ss, r.zero, ng, &zero);
  if (s == RLX_OK)
    s = rlx_ox_check(c, rlx_graph_dequant_matmul(GRAPH, a, w, scale, zero,
                                                 r.sym ? RLX_QUANT_INT8_SYM : RLX_QUANT_INT8_ASYM,
                                                 (int32_t)r.group, y));
  qrows_free(&r);
  *handled = s == RLX_OK;
  return s;
}

/* MatMul(A, B) with B a DequantizeLinear'd constant [K, N]: DequantMatMul
 * (a 1-D A gives [N], as NumPy). */
rlx_status rlx_ox_quant_matmul(rlx_ox_ctx* c, int* handled) {
  rlx_type ta;
  *handled = 0;
  if (!rlx_ox_note(c, 1) || rlx_ox_type(c, 0, &ta) != RLX_OK || ta.dtype != RLX_F32) return RLX_OK;
  rlx_tensor a, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &a));
  RLX_RETURN_IF_ERROR(rlx_ox_quant_product(c, a, 1, 1, &y, handled));
  return *handled ? rlx_ox_set(c, 0, y) : RLX_OK;
}

static rlx_status map_dequantize_linear(rlx_ox_ctx* c) {
  rlx_tensor x, scale, zero, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  rlx_type tx = type_of(c, x);
  double lo, hi;
  if (!int_range(tx.dtype, &lo, &hi) && tx.dtype != RLX_I32 && !rlx_dtype_is_f8(tx.dtype))
    return rlx_ox_unsupported(c, "quantized input of dtype %s is not supported (u8, i8, u16, "
                              "i16, i32, float8)", rlx_dtype_name(tx.dtype));
  int32_t axis = -1;
  int64_t block = 0;
  RLX_RETURN_IF_ERROR(quant_axis(c, tx.rank, &axis, &block));
  RLX_RETURN_IF_ERROR(param_in(c, 1, &tx, axis, block, "x_scale", &scale));
  RLX_RETURN_IF_ERROR(param_in(c, 2, &tx, axis, block, "x_zero_point", &zero));
  rlx_dtype sd = type_of(c, scale).dtype;
  if (!rlx_dtype_is_float(sd) || rlx_dtype_is_f8(sd))
    return rlx_ox_invalid(c, "x_scale of dtype %s must be f32, f16 or bf16", rlx_dtype_name(sd));
  if (zero != RLX_NONE && type_of(c, zero).dtype != tx.dtype)
    return rlx_ox_invalid(c, "x_zero_point's dtype %s differs from x's %s",
                          rlx_dtype_name(type_of(c, zero).dtype), rlx_dtype_name(tx.dtype));
  RLX_RETURN_IF_ERROR(dequantize(c, x, scale, zero, &y));
  note_constant_weight(c, axis, block);
  return rlx_ox_set(c, 0, y);
}

/* DynamicQuantizeLinear (u8): the range [min(x, 0), max(x, 0)] over all of
 * x gives scale = range / 255 and zero = round(clip(0 - min / scale, 0,
 * 255)), in ONNX's function body's order; y = quantize(x, scale, zero). */
static rlx_status map_dynamic_quantize_linear(rlx_ox_ctx* c) {
  rlx_tensor x, lo, hi, scale, zero, q, y, zero_u8;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  if (type_of(c, x).dtype != RLX_F32)
    return rlx_ox_unsupported(c, "input of dtype %s (f32 only)",
                              rlx_dtype_name(type_of(c, x).dtype));
  RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_MIN, x, NULL, 0, 0, &lo));
  RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_MAX, x, NULL, 0, 0, &hi));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MIN, lo, 0.0, &lo));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MAX, hi, 0.0, &hi));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, hi, lo, &scale));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_DIV, scale, 255.0, &scale));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, lo, scale, &zero));
  RLX_RETURN_IF_ERROR(s_bin(c, RLX_BIN_SUB, 0.0, zero, &zero));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MAX, zero, 0.0, &zero));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_MIN, zero, 255.0, &zero));
  RLX_RETURN_IF_ERROR(act(c, RLX_ACT_ROUND, zero, &zero));
  RLX_RETURN_IF_ERROR(cast(c, zero, RLX_U8, &zero_u8));
  RLX_RETURN_IF_ERROR(divide_by_scale(c, x, scale, &q));
  RLX_RETURN_IF_ERROR(requantize(c, q, zero, RLX_U8, &y));
  RLX_RETURN_IF_ERROR(rlx_ox_set(c, 0, y));
  if (rlx_ox_wants(c, 1)) RLX_RETURN_IF_ERROR(rlx_ox_set(c, 1, scale));
  if (rlx_ox_wants(c, 2)) RLX_RETURN_IF_ERROR(rlx_ox_set(c, 2, zero_u8));
  return RLX_OK;
}

/* ------------------------------------------------------------------ exact integer products */

/* Largest |v - zero| of an 8-bit operand: from the known zero points, else
 * the worst over the dtype's range. */
static double operand_bound(rlx_ox_ctx* c, rlx_dtype dt, int32_t zero_input) {
  double lo = 0, hi = 0, zlo, zhi;
  int_range(dt, &lo, &hi);
  zlo = zhi = 0;
  if (rlx_ox_has(c, zero_input)) {
    const rlx_host_tensor* z = rlx_ox_known(c, zero_input);
    zlo = lo, zhi = hi;
    if (z && rlx_host_numel(z) > 0) {
      zlo = zhi = (double)rlx_load_i64(z->data, z->dtype, 0);
      for (int64_t i = 1; i < rlx_host_numel(z); i++) {
        double v = (double)rlx_load_i64(z->data, z->dtype, i);
        zlo = v < zlo ? v : zlo;
        zhi = v > zhi ? v : zhi;
      }
    }
  }
  return fmax(hi - zlo, zhi - lo);
}

/* Terms per chunk so that a chunk's dot product stays exact in f32. */
static int64_t exact_chunk(double term_bound) {
  if (term_bound < 1.0) return (int64_t)EXACT_F32; /* all-zero operands */
  return (int64_t)floor(EXACT_F32 / term_bound);
}

/* A 1-D zero point or scale of a row operand (per row: M elements) laid
 * out as [M, 1]; anything else broadcasts as it is. */
static rlx_status per_row(rlx_ox_ctx* c, rlx_tensor p, rlx_tensor* out) {
  rlx_type t = type_of(c, p);
  *out = p;
  if (t.rank != 1 || t.shape[0] == 1) return RLX_OK;
  rlx_dim col[2] = {t.shape[0], 1};
  return reshape(c, p, col, 2, out);
}

/* The 8-bit operand input i as f32 minus its zero point (input zi; laid
 * out per row when row is set). */
static rlx_status centered(rlx_ox_ctx* c, int32_t i, int32_t zi, int row, const char* what,
                           rlx_tensor* out) {
  rlx_tensor v, z;
  RLX_RETURN_IF_ERROR(in(c, i, &v));
  rlx_dtype d = type_of(c, v).dtype;
  if (d != RLX_U8 && d != RLX_I8)
    return rlx_ox_unsupported(c, "%s of dtype %s is not supported (u8, i8)", what,
                              rlx_dtype_name(d));
  RLX_RETURN_IF_ERROR(cast(c, v, RLX_F32, out));
  if (!rlx_ox_has(c, zi)) return RLX_OK;
  RLX_RETURN_IF_ERROR(in(c, zi, &z));
  if (type_of(c, z).dtype != d)
    return rlx_ox_invalid(c, "%s's zero point has dtype %s, not %s", what,
                          rlx_dtype_name(type_of(c, z).dtype), rlx_dtype_name(d));
  RLX_RETURN_IF_ERROR(cast(c, z, RLX_F32, &z));
  if (row) RLX_RETURN_IF_ERROR(per_row(c, z, &z));
  return bin(c, RLX_BIN_SUB, *out, z, out);
}

/* Exact a [..., M, K] . b [..., K, N] of integer-valued f32 operands whose
 * terms are bounded by term_bound, as i32 (see the top): K is cut into C
 * chunks of kc (zero padded), laid out as a batch dim, multiplied in one
 * batched matmul, rounded to i32 and summed over the chunks in i32. */
static rlx_status exact_matmul(rlx_ox_ctx* c, rlx_tensor a, rlx_tensor b, double term_bound,
                               rlx_tensor* y) {
  rlx_type ta = type_of(c, a), tb = type_of(c, b);
  int32_t ra = ta.rank, rb = tb.rank;
  RLX_RETURN_IF_ERROR(need_static(c, &ta, ra - 1, "the reduced dim K"));
  int64_t K = ta.shape[ra - 1], kmax = exact_chunk(term_bound);
  if (K <= kmax) {
    G(rlx_graph_add_matmul(GRAPH, a, b, 0, 0, y));
    return cast(c, *y, RLX_I32, y);
  }
  if (ra + 1 > RLX_MAX_RANK || rb + 1 > RLX_MAX_RANK)
    return rlx_ox_unsupported(c, "rank %d operands with K = %lld need a chunk dim beyond rank %d",
                              (int)(ra > rb ? ra : rb), (long long)K, RLX_MAX_RANK);
  int64_t n_chunks = (K + kmax - 1) / kmax, kc = (K + n_chunks - 1) / n_chunks;
  int64_t pad = n_chunks * kc - K, pads[2 * RLX_MAX_RANK] = {0};
  if (pad) {
    pads[2 * ra - 1] = pad;
    G(rlx_graph_add_pad(GRAPH, a, RLX_PAD_CONSTANT, pads, 0.0f, &a));
    memset(pads, 0, sizeof pads);
    pads[rb + rb - 2] = pad; /* end pad of dim rb - 2 */
    G(rlx_graph_add_pad(GRAPH, b, RLX_PAD_CONSTANT, pads, 0.0f, &b));
  }
  rlx_dim sa[RLX_MAX_RANK], sb[RLX_MAX_RANK];
  int32_t perm[RLX_MAX_RANK];
  memcpy(sa, ta.shape, sizeof(rlx_dim) * (size_t)ra);
  sa[ra - 1] = n_chunks, sa[ra] = kc; /* [..., M, C, kc] */
  for (int32_t i = 0; i <= ra; i++) perm[i] = i;
  perm[ra - 2] = ra - 1, perm[ra - 1] = ra - 2; /* [..., C, M, kc] */
  memcpy(sb, tb.shape, sizeof(rlx_dim) * (size_t)rb);
  sb[rb - 2] = n_chunks, sb[rb - 1] = kc, sb[rb] = tb.shape[rb - 1]; /* [..., C, kc, N] */
  RLX_RETURN_IF_ERROR(reshape(c, a, sa, ra + 1, &a));
  G(rlx_graph_add_transpose(GRAPH, a, perm, ra + 1, &a));
  RLX_RETURN_IF_ERROR(reshape(c, b, sb, rb + 1, &b));
  G(rlx_graph_add_matmul(GRAPH, a, b, 0, 0, y));
  RLX_RETURN_IF_ERROR(cast(c, *y, RLX_I32, y));
  int32_t chunk_axis = type_of(c, *y).rank - 3;
  return reduce(c, RLX_RED_SUM, *y, &chunk_axis, 1, 0, y);
}

/* exact_matmul with NumPy's 1-D rules (a 1-D a is a row, a 1-D b a column;
 * the added dim is dropped from the result). */
static rlx_status exact_product(rlx_ox_ctx* c, rlx_tensor a, rlx_tensor b, double term_bound,
                                rlx_tensor* y) {
  rlx_type ta = type_of(c, a), tb = type_of(c, b);
  if (ta.rank < 1 || tb.rank < 1) return rlx_ox_invalid(c, "operands must have rank >= 1");
  if (ta.rank == 1) {
    rlx_dim row[2] = {1, ta.shape[0]};
    RLX_RETURN_IF_ERROR(reshape(c, a, row, 2, &a));
  }
  if (tb.rank == 1) {
    rlx_dim col[2] = {tb.shape[0], 1};
    RLX_RETURN_IF_ERROR(reshape(c, b, col, 2, &b));
  }
  RLX_RETURN_IF_ERROR(exact_matmul(c, a, b, term_bound, y));
  if (ta.rank > 1 && tb.rank > 1) return RLX_OK;
  rlx_type ty = type_of(c, *y);
  rlx_dim shape[RLX_MAX_RANK];
  int32_t r = 0;
  for (int32_t i = 0; i < ty.rank; i++) {
    if (ta.rank == 1 && i == ty.rank - 2) continue;
    if (tb.rank == 1 && i == ty.rank - 1) continue;
    shape[r++] = ty.shape[i];
  }
  return reshape(c, *y, shape, r, y);
}

/* b (input bi) is a known 2-D u8 / i8 matrix whose zero point (input zi)
 * is absent or known with 1 or N elements: DequantMatMul can hold it. */
static int known_weight(rlx_ox_ctx* c, int32_t bi, int32_t zi) {
  const rlx_host_tensor* b = rlx_ox_known(c, bi);
  if (!b || b->rank != 2 || (b->dtype != RLX_U8 && b->dtype != RLX_I8) || b->shape[0] < 1 ||
      b->shape[1] < 1)
    return 0;
  if (!rlx_ox_has(c, zi)) return 1;
  const rlx_host_tensor* z = rlx_ox_known(c, zi);
  return z && z->dtype == b->dtype && (rlx_host_numel(z) == 1 || rlx_host_numel(z) == b->shape[1]);
}

/* One chunk [k0, k0 + klen) of known_product: Int8Block rows of b^T. */
static rlx_status known_chunk(rlx_ox_ctx* c, rlx_tensor a, const rlx_host_tensor* b,
                              const int64_t* zero, int sym, int64_t k0, int64_t klen,
                              rlx_tensor* y) {
  int64_t K = b->shape[0], N = b->shape[1], shift = b->dtype == RLX_I8 ? 128 : 0;
  uint8_t* w = malloc((size_t)(N * klen));
  float* scale = malloc(sizeof(float) * (size_t)N);
  uint8_t* zp = malloc((size_t)N);
  rlx_status s = RLX_OK;
  if (!w || !scale || !zp)
    s = rlx_ox_invalid(c, "out of memory for a %lld x %lld weight", (long long)N, (long long)klen);
  for (int64_t n = 0; s == RLX_OK && n < N; n++) {
    for (int64_t k = 0; k < klen; k++) {
      int64_t q = rlx_load_i64(b->data, b->dtype, (k0 + k) * N + n);
      w[n * klen + k] = sym ? (uint8_t)(int8_t)q : (uint8_t)(q + shift);
    }
    scale[n] = 1.0f;
    zp[n] = (uint8_t)(zero[n] + shift);
  }
  int64_t ws[2] = {N, klen}, ss[2] = {N, 1};
  rlx_tensor wt, st, zt = RLX_NONE, x = a;
  if (s == RLX_OK) s = constant(c, RLX_U8, 2, ws, w, (size_t)(N * klen), &wt);
  if (s == RLX_OK) s = constant(c, RLX_F32, 2, ss, scale, sizeof(float) * (size_t)N, &st);
  if (s == RLX_OK && !sym) s = constant(c, RLX_U8, 2, ss, zp, (size_t)N, &zt);
  if (s == RLX_OK && klen != K)
    s = rlx_ox_check(c, rlx_graph_add_narrow(GRAPH, a, type_of(c, a).rank - 1, k0, klen, &x));
  if (s == RLX_OK)
    s = rlx_ox_check(c, rlx_graph_dequant_matmul(GRAPH, x, wt, st, zt,
                                                 sym ? RLX_QUANT_INT8_SYM : RLX_QUANT_INT8_ASYM,
                                                 (int32_t)klen, y));
  if (s == RLX_OK) s = cast(c, *y, RLX_I32, y);
  free(w);
  free(scale);
  free(zp);
  return s;
}

/* a (f32 [..., K], zero point removed, |a| <= a_bound) times the known b
 * [K, N] minus its known zero points, as i32, through DequantMatMul with b^T
 * as Int8Block rows, one group per row and scale 1 (int8 with all zero
 * points 0: the symmetric scheme; else the asymmetric one, u8 codes, int8
 * shifted by 128 together with its zero points). Chunked along K as
 * exact_matmul, a DequantMatMul per chunk, the chunks summed in i32. */
static rlx_status known_product(rlx_ox_ctx* c, rlx_tensor a, int32_t bi, int32_t zi,
                                double a_bound, rlx_tensor* y) {
  const rlx_host_tensor* b = rlx_ox_known(c, bi);
  const rlx_host_tensor* z = rlx_ox_has(c, zi) ? rlx_ox_known(c, zi) : NULL;
  int64_t K = b->shape[0], N = b->shape[1];
  rlx_type ta = type_of(c, a);
  if (ta.rank < 1 || ta.shape[ta.rank - 1] != K)
    return rlx_ox_invalid(c, "A's last dim must be B's first (%lld)", (long long)K);
  RLX_RETURN_IF_ERROR(check_table(c, N * K, 1));
  int64_t* zero = calloc((size_t)N, sizeof(int64_t));
  if (!zero) return rlx_ox_invalid(c, "out of memory");
  double b_bound = 0;
  int sym = b->dtype == RLX_I8;
  for (int64_t n = 0; n < N; n++) {
    zero[n] = z ? rlx_load_i64(z->data, z->dtype, rlx_host_numel(z) == 1 ? 0 : n) : 0;
    sym = sym && zero[n] == 0;
    for (int64_t k = 0; k < K; k++)
      b_bound = fmax(b_bound, fabs((double)(rlx_load_i64(b->data, b->dtype, k * N + n) - zero[n])));
  }
  int64_t kmax = exact_chunk(a_bound * b_bound);
  if (kmax > (1 << 20)) kmax = 1 << 20; /* DequantMatMul's largest group */
  int64_t n_chunks = (K + kmax - 1) / kmax, kc = (K + n_chunks - 1) / n_chunks;
  rlx_status s = RLX_OK;
  *y = RLX_NONE;
  for (int64_t k0 = 0; k0 < K && s == RLX_OK; k0 += kc) {
    rlx_tensor part;
    s = known_chunk(c, a, b, zero, sym, k0, K - k0 < kc ? K - k0 : kc, &part);
    if (s == RLX_OK) s = *y == RLX_NONE ? (*y = part, RLX_OK) : bin(c, RLX_BIN_ADD, *y, part, y);
  }
  free(zero);
  return s;
}

/* The i32 product of (A - a_zero) and (B - b_zero), inputs ai, azi, bi, bzi
 * (MatMulInteger's 0, 2, 1, 3; QLinearMatMul's 0, 2, 3, 5). */
static rlx_status integer_product(rlx_ox_ctx* c, int32_t ai, int32_t azi, int32_t bi,
                                  int32_t bzi, rlx_tensor* y) {
  rlx_tensor a, b;
  rlx_type ta, tb;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, ai, &ta));
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, bi, &tb));
  RLX_RETURN_IF_ERROR(centered(c, ai, azi, ta.rank >= 2, "A", &a));
  double a_bound = operand_bound(c, ta.dtype, azi);
  if (known_weight(c, bi, bzi) && !rlx_env_flag(RLX_ENV_ONNX_NO_DEQUANT_MATMUL))
    return known_product(c, a, bi, bzi, a_bound, y);
  RLX_RETURN_IF_ERROR(centered(c, bi, bzi, 0, "B", &b));
  return exact_product(c, a, b, a_bound * operand_bound(c, tb.dtype, bzi), y);
}

static rlx_status map_matmul_integer(rlx_ox_ctx* c) {
  rlx_tensor y;
  RLX_RETURN_IF_ERROR(integer_product(c, 0, 2, 1, 3, &y));
  return rlx_ox_set(c, 0, y);
}

/* acc (i32) * (a_scale * b_scale / y_scale) in f32, then requantized into
 * y_zero_point's dtype (u8 when absent). The scales broadcast against acc
 * (a per-row a_scale laid out as [M, 1] by the caller). */
static rlx_status qlinear_output(rlx_ox_ctx* c, rlx_tensor acc, rlx_tensor a_scale,
                                 rlx_tensor b_scale, int32_t ysi, int32_t yzi, rlx_tensor* y) {
  rlx_tensor ys, yz = RLX_NONE, m, v;
  rlx_dtype dt = RLX_U8;
  RLX_RETURN_IF_ERROR(in(c, ysi, &ys));
  if (rlx_ox_has(c, yzi)) {
    RLX_RETURN_IF_ERROR(in(c, yzi, &yz));
    dt = type_of(c, yz).dtype;
  }
  if (dt != RLX_U8 && dt != RLX_I8)
    return rlx_ox_unsupported(c, "output dtype %s is not supported (u8, i8)", rlx_dtype_name(dt));
  if (!is_one_element(rlx_tensor_type(GRAPH, ys)))
    return rlx_ox_invalid(c, "y_scale must be a scalar (per tensor)");
  RLX_RETURN_IF_ERROR(cast(c, a_scale, RLX_F32, &a_scale));
  RLX_RETURN_IF_ERROR(cast(c, b_scale, RLX_F32, &b_scale));
  RLX_RETURN_IF_ERROR(cast(c, ys, RLX_F32, &ys));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, a_scale, b_scale, &m));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_DIV, m, ys, &m));
  RLX_RETURN_IF_ERROR(cast(c, acc, RLX_F32, &v));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, v, m, &v));
  return requantize(c, v, yz, dt, y);
}

static rlx_status map_qlinear_matmul(rlx_ox_ctx* c) {
  rlx_tensor acc, as, bs, y;
  RLX_RETURN_IF_ERROR(integer_product(c, 0, 2, 3, 5, &acc));
  rlx_type ta;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, 0, &ta));
  RLX_RETURN_IF_ERROR(in(c, 1, &as));
  RLX_RETURN_IF_ERROR(in(c, 4, &bs));
  if (ta.rank >= 2) RLX_RETURN_IF_ERROR(per_row(c, as, &as));
  RLX_RETURN_IF_ERROR(qlinear_output(c, acc, as, bs, 6, 7, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ integer convolution */

/* A 1-D per-output-channel w zero point or scale [M] laid out as [M, 1, ...]
 * (rank r) for w, or [1, M, 1, ...] for y when for_y is set. */
static rlx_status per_channel(rlx_ox_ctx* c, rlx_tensor p, int32_t r, int for_y,
                              rlx_tensor* out) {
  rlx_type t = type_of(c, p);
  *out = p;
  if (t.rank != 1 || t.shape[0] == 1) return RLX_OK;
  rlx_dim shape[RLX_MAX_RANK];
  for (int32_t i = 0; i < r; i++) shape[i] = i == (for_y ? 1 : 0) ? t.shape[0] : 1;
  return reshape(c, p, shape, r, out);
}

/* conv(x - x_zero, w - w_zero) as i32 (inputs xi, xzi, wi, wzi), exact:
 * the C / group * prod(kernel) terms of each output are cut into channel
 * chunks that meet the f32 bound (group 1), each chunk's conv rounded to
 * i32 and the chunks summed in i32. */
static rlx_status integer_conv(rlx_ox_ctx* c, int32_t xi, int32_t xzi, int32_t wi, int32_t wzi,
                               rlx_tensor* y) {
  rlx_tensor x, w, wz;
  rlx_type tx, tw;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, xi, &tx));
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, wi, &tw));
  if (tx.rank < 3 || tw.rank != tx.rank) return rlx_ox_invalid(c, "x and w need spatial dims");
  RLX_RETURN_IF_ERROR(centered(c, xi, xzi, 0, "x", &x));
  RLX_RETURN_IF_ERROR(in(c, wi, &w));
  if (tw.dtype != RLX_U8 && tw.dtype != RLX_I8)
    return rlx_ox_unsupported(c, "w of dtype %s is not supported (u8, i8)",
                              rlx_dtype_name(tw.dtype));
  RLX_RETURN_IF_ERROR(cast(c, w, RLX_F32, &w));
  if (rlx_ox_has(c, wzi)) {
    RLX_RETURN_IF_ERROR(in(c, wzi, &wz));
    if (type_of(c, wz).dtype != tw.dtype)
      return rlx_ox_invalid(c, "w's zero point has dtype %s, not %s",
                            rlx_dtype_name(type_of(c, wz).dtype), rlx_dtype_name(tw.dtype));
    RLX_RETURN_IF_ERROR(cast(c, wz, RLX_F32, &wz));
    RLX_RETURN_IF_ERROR(per_channel(c, wz, tw.rank, 0, &wz));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, w, wz, &w));
  }
  for (int32_t i = 0; i < tw.rank; i++) RLX_RETURN_IF_ERROR(need_static(c, &tw, i, "w"));
  int64_t group, window = 1;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "group", 1, &group));
  for (int32_t i = 2; i < tw.rank; i++) window *= tw.shape[i];
  double bound = operand_bound(c, tx.dtype, xzi) * operand_bound(c, tw.dtype, wzi);
  int64_t per_chunk = exact_chunk(bound * (double)window), cin = tw.shape[1];
  if (per_chunk >= cin) {
    RLX_RETURN_IF_ERROR(rlx_ox_conv_float(c, x, w, RLX_NONE, y));
    return cast(c, *y, RLX_I32, y);
  }
  if (group != 1 || per_chunk < 1)
    return rlx_ox_unsupported(c, "an exact sum of %lld x %lld terms per output needs channel "
                              "chunks, done for group 1 and windows under 2^24 / %g only",
                              (long long)cin, (long long)window, bound);
  *y = RLX_NONE;
  for (int64_t c0 = 0; c0 < cin; c0 += per_chunk) {
    int64_t len = cin - c0 < per_chunk ? cin - c0 : per_chunk;
    rlx_tensor xs, ws, part;
    G(rlx_graph_add_narrow(GRAPH, x, 1, c0, len, &xs));
    G(rlx_graph_add_narrow(GRAPH, w, 1, c0, len, &ws));
    RLX_RETURN_IF_ERROR(rlx_ox_conv_float(c, xs, ws, RLX_NONE, &part));
    RLX_RETURN_IF_ERROR(cast(c, part, RLX_I32, &part));
    if (*y == RLX_NONE) *y = part;
    else RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, *y, part, y));
  }
  return RLX_OK;
}

static rlx_status map_conv_integer(rlx_ox_ctx* c) {
  rlx_tensor y;
  RLX_RETURN_IF_ERROR(integer_conv(c, 0, 2, 1, 3, &y));
  return rlx_ox_set(c, 0, y);
}

/* QLinearConv: x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero, B
 * (i32 bias [M], added to the i32 accumulator). */
static rlx_status map_qlinear_conv(rlx_ox_ctx* c) {
  rlx_tensor acc, xs, ws, bias, y;
  RLX_RETURN_IF_ERROR(integer_conv(c, 0, 2, 3, 5, &acc));
  int32_t r = type_of(c, acc).rank;
  if (rlx_ox_has(c, 8)) {
    RLX_RETURN_IF_ERROR(in(c, 8, &bias));
    if (type_of(c, bias).dtype != RLX_I32) return rlx_ox_invalid(c, "B must be int32");
    if (type_of(c, bias).rank != 1) return rlx_ox_invalid(c, "B must be 1-D [M]");
    RLX_RETURN_IF_ERROR(per_channel(c, bias, r, 1, &bias));
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, acc, bias, &acc));
  }
  RLX_RETURN_IF_ERROR(in(c, 1, &xs));
  RLX_RETURN_IF_ERROR(in(c, 4, &ws));
  if (!is_one_element(rlx_tensor_type(GRAPH, xs)))
    return rlx_ox_invalid(c, "x_scale must be a scalar (per tensor)");
  RLX_RETURN_IF_ERROR(per_channel(c, ws, r, 1, &ws));
  RLX_RETURN_IF_ERROR(qlinear_output(c, acc, xs, ws, 6, 7, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ table */

static const rlx_ox_op quant_ops[] = {
    {"ConvInteger", map_conv_integer, 0, 0},
    {"DequantizeLinear", map_dequantize_linear, 0, 0},
    {"DynamicQuantizeLinear", map_dynamic_quantize_linear, 0, 0},
    {"MatMulInteger", map_matmul_integer, 0, 0},
    {"QLinearConv", map_qlinear_conv, 0, 0},
    {"QLinearMatMul", map_qlinear_matmul, 0, 0},
    {"QuantizeLinear", map_quantize_linear, 0, 0},
};

const rlx_ox_op* rlx_ox_find_quant_op(const char* op_type) {
  return rlx_ox_op_in(quant_ops, sizeof quant_ops / sizeof quant_ops[0], op_type);
}

#else
typedef int rlx_onnx_quant_not_built; /* keeps the translation unit non-empty */
#endif /* RLX_HAVE_ONNX */
