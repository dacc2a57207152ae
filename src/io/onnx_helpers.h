/* Builders shared by the ONNX op mappers (onnx_ops.c, onnx_nn.c): thin
 * wrappers over the graph builders whose errors name the ONNX node, and the
 * small checks every mapper makes. Static inline: one copy per mapper file. */
#ifndef RLX_IO_ONNX_HELPERS_H
#define RLX_IO_ONNX_HELPERS_H
#ifdef RLX_HAVE_ONNX

#include <string.h>

#include "io/onnx.h"
#include "ir/dtype.h"

/* Wraps a builder call: on failure the error names the ONNX node. */
#define G(expr) RLX_RETURN_IF_ERROR(rlx_ox_check(c, (expr)))
#define GRAPH rlx_ox_graph(c)

/* ------------------------------------------------------------------ helpers */

static inline rlx_type type_of(rlx_ox_ctx* c, rlx_tensor t) { return *rlx_tensor_type(GRAPH, t); }

static inline rlx_status in(rlx_ox_ctx* c, int32_t i, rlx_tensor* out) { return rlx_ox_in(c, i, out); }

/* A rank-0 constant of dtype dt. */
static inline rlx_status scalar(rlx_ox_ctx* c, rlx_dtype dt, double v, rlx_tensor* out) {
  unsigned char buf[8] = {0};
  rlx_store_f64(buf, dt, 0, v);
  G(rlx_graph_add_constant(GRAPH, dt, NULL, 0, buf, rlx_dtype_size(dt), out));
  return RLX_OK;
}

static inline rlx_status bin(rlx_ox_ctx* c, rlx_binary_op op, rlx_tensor a, rlx_tensor b,
                      rlx_tensor* out) {
  G(rlx_graph_add_binary(GRAPH, op, a, b, out));
  return RLX_OK;
}

/* a op v, with v a scalar of a's dtype. */
static inline rlx_status bin_s(rlx_ox_ctx* c, rlx_binary_op op, rlx_tensor a, double v,
                        rlx_tensor* out) {
  rlx_tensor s;
  RLX_RETURN_IF_ERROR(scalar(c, type_of(c, a).dtype, v, &s));
  return bin(c, op, a, s, out);
}

/* v op a. */
static inline rlx_status s_bin(rlx_ox_ctx* c, rlx_binary_op op, double v, rlx_tensor a,
                        rlx_tensor* out) {
  rlx_tensor s;
  RLX_RETURN_IF_ERROR(scalar(c, type_of(c, a).dtype, v, &s));
  return bin(c, op, s, a, out);
}

static inline rlx_status act(rlx_ox_ctx* c, rlx_activation k, rlx_tensor x, rlx_tensor* out) {
  G(rlx_graph_add_activation(GRAPH, k, x, out));
  return RLX_OK;
}

static inline rlx_status cmp(rlx_ox_ctx* c, rlx_compare_op op, rlx_tensor a, rlx_tensor b,
                      rlx_tensor* out) {
  G(rlx_graph_add_compare(GRAPH, op, a, b, out));
  return RLX_OK;
}

static inline rlx_status cmp_s(rlx_ox_ctx* c, rlx_compare_op op, rlx_tensor a, double v,
                        rlx_tensor* out) {
  rlx_tensor s;
  RLX_RETURN_IF_ERROR(scalar(c, type_of(c, a).dtype, v, &s));
  return cmp(c, op, a, s, out);
}

static inline rlx_status where(rlx_ox_ctx* c, rlx_tensor cond, rlx_tensor x, rlx_tensor y,
                        rlx_tensor* out) {
  G(rlx_graph_add_where(GRAPH, cond, x, y, out));
  return RLX_OK;
}

static inline rlx_status cast(rlx_ox_ctx* c, rlx_tensor x, rlx_dtype dt, rlx_tensor* out) {
  if (type_of(c, x).dtype == dt) {
    *out = x;
    return RLX_OK;
  }
  G(rlx_graph_add_cast(GRAPH, x, dt, out));
  return RLX_OK;
}

static inline rlx_status reshape(rlx_ox_ctx* c, rlx_tensor x, const rlx_dim* shape, int32_t rank,
                          rlx_tensor* out) {
  rlx_type t = type_of(c, x);
  if (t.rank == rank && memcmp(t.shape, shape, sizeof(rlx_dim) * (size_t)rank) == 0) {
    *out = x;
    return RLX_OK;
  }
  G(rlx_graph_add_reshape(GRAPH, x, shape, rank, out));
  return RLX_OK;
}

/* Broadcasts x to a shape (no-op when it has it). */
static inline rlx_status expand_to(rlx_ox_ctx* c, rlx_tensor x, const rlx_dim* shape, int32_t rank,
                            rlx_tensor* out) {
  rlx_type t = type_of(c, x);
  if (t.rank == rank && memcmp(t.shape, shape, sizeof(rlx_dim) * (size_t)rank) == 0) {
    *out = x;
    return RLX_OK;
  }
  G(rlx_graph_add_expand(GRAPH, x, shape, rank, out));
  return RLX_OK;
}

/* A constant from host data of (dtype, rank, shape). */
static inline rlx_status constant(rlx_ox_ctx* c, rlx_dtype dt, int32_t rank, const int64_t* shape,
                           const void* data, size_t bytes, rlx_tensor* out) {
  G(rlx_graph_add_constant(GRAPH, dt, shape, rank, data, bytes, out));
  return RLX_OK;
}

/* Normalises an ONNX axis (negative counts from the end) for a rank. */
static inline rlx_status norm_axis(rlx_ox_ctx* c, int64_t axis, int32_t rank, int32_t* out) {
  *out = 0;
  if (axis < -rank || axis >= rank)
    return rlx_ox_invalid(c, "axis %lld is out of range for rank %d", (long long)axis, (int)rank);
  *out = (int32_t)(axis < 0 ? axis + rank : axis);
  return RLX_OK;
}

static inline rlx_status need_float(rlx_ox_ctx* c, rlx_tensor x, const char* what) {
  rlx_dtype d = type_of(c, x).dtype;
  if (!rlx_dtype_is_float(d))
    return rlx_ox_unsupported(c, "%s of dtype %s is not supported (float only)", what,
                              rlx_dtype_name(d));
  return RLX_OK;
}

static inline rlx_status need_static(rlx_ox_ctx* c, const rlx_type* t, int32_t axis, const char* what) {
  if (t->shape[axis] < 0)
    return rlx_ox_unsupported(c, "%s: dim %d is symbolic; a static size is needed", what,
                              (int)axis);
  return RLX_OK;
}

/* Host tables the importer builds (gather indices, masks) stay within the
 * folding budget: a forged shape must not make the importer allocate wildly. */
static inline rlx_status check_table(rlx_ox_ctx* c, int64_t count, size_t elem) {
  if (count < 0 || count > RLX_ONNX_MAX_FOLD_BYTES / (int64_t)elem)
    return rlx_ox_unsupported(c, "an index table of %lld entries is too large", (long long)count);
  return RLX_OK;
}

/* Host i64 vector constant. */
static inline rlx_status const_i64(rlx_ox_ctx* c, const int64_t* v, int64_t n, rlx_tensor* out) {
  return constant(c, RLX_I64, 1, &n, v, sizeof(int64_t) * (size_t)n, out);
}

/* A known value for output i, built from a static shape and a fill. */
static inline rlx_status known_out(rlx_ox_ctx* c, int32_t i, rlx_dtype dt, int32_t rank,
                            const int64_t* shape, const int64_t* values) {
  rlx_host_tensor h;
  rlx_error e;
  rlx_status s = rlx_host_alloc(&h, dt, rank, shape, &e);
  if (s != RLX_OK) return rlx_ox_invalid(c, "%s", e.msg);
  int64_t n = rlx_host_numel(&h);
  for (int64_t j = 0; values && j < n; j++) rlx_store_i64(h.data, dt, j, values[j]);
  return rlx_ox_set_known(c, i, &h);
}


static inline rlx_status bool_const(rlx_ox_ctx* c, int v, rlx_tensor* out) {
  uint8_t b = (uint8_t)(v != 0);
  return constant(c, RLX_BOOL, 0, NULL, &b, 1, out);
}

/* ONNX TensorProto.DataType code -> rlx dtype, -1 when the IR lacks it. */
static inline int onnx_to_dtype(int64_t t) {
  static const int map[] = {-1,       RLX_F32,  RLX_U8,  RLX_I8,  RLX_U16, RLX_I16, RLX_I32,
                            RLX_I64,  -1,       RLX_BOOL, RLX_F16, RLX_F64, RLX_U32, RLX_U64,
                            -1,       -1,       RLX_BF16, RLX_F8E4M3FN, RLX_F8E4M3FNUZ,
                            RLX_F8E5M2, RLX_F8E5M2FNUZ};
  return t >= 0 && t < (int64_t)(sizeof map / sizeof map[0]) ? map[t] : -1;
}

static inline rlx_status reduce(rlx_ox_ctx* c, rlx_reduce_op op, rlx_tensor x, const int32_t* axes,
                         int32_t n, int keep, rlx_tensor* out) {
  G(rlx_graph_add_reduce(GRAPH, op, x, axes, n, keep, out));
  return RLX_OK;
}

/* GatherElements as a flat gather (onnx_ops.c); NLL losses use it too. */
rlx_status rlx_ox_gather_elements(rlx_ox_ctx* c, rlx_tensor x, rlx_tensor idx, int32_t ax,
                                  rlx_tensor* out);
/* The table of onnx_nn.c (NULL when op_type is not there). */
/* The entry of table[0 .. n) for op_type, or NULL: each mapper file's lookup. */
static inline const rlx_ox_op* rlx_ox_op_in(const rlx_ox_op* table, size_t n,
                                            const char* op_type) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(table[i].op_type, op_type) == 0) return &table[i];
  return NULL;
}

const rlx_ox_op* rlx_ox_find_nn_op(const char* op_type);
/* The table of onnx_misc.c (NULL when op_type is not there). */
const rlx_ox_op* rlx_ox_find_misc_op(const char* op_type);
/* Conv of float x and w with the node's Conv attributes (onnx_nn.c). */
rlx_status rlx_ox_conv_float(rlx_ox_ctx* c, rlx_tensor x, rlx_tensor w, rlx_tensor bias,
                             rlx_tensor* y);
/* MatMul(A, B) with B a DequantizeLinear of a constant weight as one
 * DequantMatMul (onnx_quant.c); *handled = 0 leaves the node to MatMul. */
rlx_status rlx_ox_quant_matmul(rlx_ox_ctx* c, int* handled);
/* a . W for input bi a DequantizeLinear'd constant W whose dim n_axis is
 * the output's N (Gemm: 1, or 0 with transB), as one DequantMatMul;
 * *handled = 0 when bi has no such note or it does not fit. */
rlx_status rlx_ox_quant_product(rlx_ox_ctx* c, rlx_tensor a, int32_t bi, int32_t n_axis,
                                rlx_tensor* y, int* handled);
/* The table of onnx_quant.c (NULL when op_type is not there). */
const rlx_ox_op* rlx_ox_find_quant_op(const char* op_type);

#endif /* RLX_HAVE_ONNX */
#endif
