/*
 * rlx — an ML compiler and runtime.
 *
 * Usage:
 *
 *   rlx_graph* g = NULL;
 *   rlx_graph_create(&g);
 *   int64_t xs[2] = {4, 8}, ws[2] = {8, 16};
 *   rlx_tensor x, w, y, z;
 *   rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
 *   rlx_graph_add_param(g, "w", RLX_F32, ws, 2, &w);
 *   rlx_graph_add_matmul(g, x, w, 0, 0, &y);
 *   rlx_graph_add_activation(g, RLX_ACT_RELU, y, &z);
 *   rlx_graph_set_outputs(g, &z, 1);
 *
 *   rlx_exec* e = NULL;
 *   if (rlx_compile(g, "cpu", NULL, &e) != RLX_OK) puts(rlx_graph_last_error(g));
 *   rlx_exec_set_param(e, "w", RLX_F32, w_data, sizeof w_data);
 *   rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x_data, sizeof x_data);
 *   rlx_exec_run(e);
 *   rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out);
 *   rlx_exec_destroy(e);
 *   rlx_graph_destroy(g);
 *
 * Every function returns an rlx_status; on failure the object that failed
 * (graph or executable) holds a message naming the node, op and shape, read
 * with rlx_graph_last_error / rlx_exec_last_error. Bad input never aborts and
 * leaves the object usable.
 */
#ifndef RLX_H
#define RLX_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ version */

/* The release this header belongs to: the one place the version is written
 * (CMakeLists.txt reads these lines for project(), the shared library's
 * SONAME, rlx.pc and rlxConfigVersion.cmake, and refuses to configure when
 * the string disagrees with the numbers). */
#define RLX_VERSION_MAJOR 0
#define RLX_VERSION_MINOR 13
#define RLX_VERSION_PATCH 0
#define RLX_VERSION_STRING "0.13.0"

/* RLX_API marks the functions of this header: the library is compiled with
 * -fvisibility=hidden, so they are the only symbols librlx.so exports (its
 * internal helpers and the generated ONNX protobuf reader stay private). */
#ifndef RLX_API
#if defined(__GNUC__) && !defined(_WIN32)
#define RLX_API __attribute__((visibility("default")))
#else
#define RLX_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Version of the library actually linked ("0.13.0"), which may differ from
 * RLX_VERSION_STRING of the header a program was compiled with. */
RLX_API const char* rlx_version(void);

/* ------------------------------------------------------------------ status */

typedef enum rlx_status {
  RLX_OK = 0,
  RLX_INVALID_ARGUMENT = 1,  /* bad graph, shape, attribute, name, size */
  RLX_NOT_FOUND = 2,         /* unknown input/param/device name */
  RLX_UNIMPLEMENTED = 3,     /* op/dtype not supported (strict mode, importer) */
  RLX_UNAVAILABLE = 4,       /* backend cannot start (no driver/device) */
  RLX_RESOURCE_EXHAUSTED = 5,/* out of host or device memory */
  RLX_OUT_OF_RANGE = 6,      /* index outside its dimension at run time */
  RLX_FAILED_PRECONDITION = 7,/* call order: e.g. reading an unselected output */
  RLX_INTERNAL = 8,          /* a bug in rlx or a driver failure */
} rlx_status;

/* Name of a status code ("INVALID_ARGUMENT"). */
RLX_API const char* rlx_status_name(rlx_status s);

/* ------------------------------------------------------------------ dtypes */

typedef enum rlx_dtype {
  RLX_F32 = 0,
  RLX_F16 = 1,
  RLX_BF16 = 2,
  RLX_F64 = 3,
  RLX_I8 = 4,
  RLX_U8 = 5,
  RLX_I32 = 6,
  RLX_I64 = 7,
  RLX_BOOL = 8, /* one byte per element, 0 or 1 */
  RLX_I16 = 9,
  RLX_U16 = 10,
  RLX_U32 = 11,
  RLX_U64 = 12,
  /* The float8 formats of ONNX (and of torch / ml_dtypes under the same
   * names), one byte per element. They are storage types: Cast and data
   * movement (reshape, transpose, concat, gather, where, ...) accept them;
   * compute ops refuse them (cast to f16/bf16/f32 first).
   *   f8e4m3fn:   1-4-3, bias 7, no inf, NaN = S.1111.111, max 448.
   *   f8e5m2:     1-5-2, bias 15, IEEE-like with inf, max 57344.
   *   f8e4m3fnuz: 1-4-3, bias 8, one NaN (0x80), no -0, no inf, max 240.
   *   f8e5m2fnuz: 1-5-2, bias 16, one NaN (0x80), no -0, no inf, max 57344.
   * Conversions into them round to nearest even and saturate out-of-range
   * values to +-max (ONNX Cast's default saturate=1); see rlx_dtype_convert. */
  RLX_F8E4M3FN = 13,
  RLX_F8E5M2 = 14,
  RLX_F8E4M3FNUZ = 15,
  RLX_F8E5M2FNUZ = 16,
  RLX_DTYPE_COUNT
} rlx_dtype;

/* Bytes per element of a dtype. */
RLX_API size_t rlx_dtype_size(rlx_dtype t);
/* Lower-case name ("f32", "bf16", "bool"); "?" for an invalid value. */
RLX_API const char* rlx_dtype_name(rlx_dtype t);
/* 1 for f32, f16, bf16, f64 and the float8 types; 0 otherwise (integers,
 * bool, invalid). */
RLX_API int32_t rlx_dtype_is_float(rlx_dtype t);
/* Converts n elements of src_dtype at src into dst_dtype at dst (the rules
 * of Cast: float -> integer truncates toward zero and saturates, NaN -> 0;
 * integer -> integer wraps (keeps the low bits, as C and numpy astype);
 * anything -> bool is != 0; into a float8 type: round to nearest even,
 * finite out-of-range values and inf saturate to +-max, except that f8e5m2
 * keeps inf (ONNX Cast with saturate=1), NaN -> that format's NaN). The buffers must not overlap. INVALID_ARGUMENT
 * for an invalid dtype, n < 0, or a NULL buffer with n > 0. */
RLX_API rlx_status rlx_dtype_convert(void* dst, rlx_dtype dst_dtype, const void* src,
                                     rlx_dtype src_dtype, int64_t n);

/* ------------------------------------------------------------------ graph */

#define RLX_MAX_RANK 8
#define RLX_MAX_INPUTS 64 /* most inputs a node may have (Concat) */

typedef struct rlx_graph rlx_graph;
/* A tensor inside one graph: the id of a value some node produces. */
typedef int32_t rlx_tensor;
#define RLX_NONE ((rlx_tensor)-1) /* an absent optional input */

/* Dims: a value >= 0 is a static size; a value < 0 is a symbolic dim,
 * encoded as -(index + 1) into the graph's table of symbolic dims. An entry
 * of that table is a named leaf symbol (rlx_graph_symbol) or an expression
 * over two dims (rlx_graph_dim_expr), e.g. B*T from a reshape. */
typedef int64_t rlx_dim;

/* Operators of dim expressions. Sizes are >= 0; FLOOR_DIV and CEIL_DIV
 * round toward -inf / +inf; a result below 0 is an error when bound. */
typedef enum rlx_dim_op {
  RLX_DIM_ADD = 1,
  RLX_DIM_SUB = 2,
  RLX_DIM_MUL = 3,
  RLX_DIM_FLOOR_DIV = 4,
  RLX_DIM_CEIL_DIV = 5,
  RLX_DIM_MOD = 6,
  RLX_DIM_MIN = 7,
  RLX_DIM_MAX = 8,
} rlx_dim_op;

RLX_API rlx_status rlx_graph_create(rlx_graph** out_graph);
RLX_API void rlx_graph_destroy(rlx_graph* g);
/* Message of the last failed call on this graph ("" if none). */
RLX_API const char* rlx_graph_last_error(const rlx_graph* g);

/* Returns the dim code of the named symbol, creating it on first use. */
RLX_API rlx_status rlx_graph_symbol(rlx_graph* g, const char* name, rlx_dim* out_dim);
/* *out_dim = a op b. Static operands fold to a static dim; otherwise the
 * expression is simplified (x*1, x+0, x*0, (x*c)/c, constant folding,
 * commutative operands ordered) and interned, so expressions equal by
 * construction get the same code. A static result below 0 or a division by 0
 * is INVALID_ARGUMENT. Expressions are bound from their leaf symbols. */
RLX_API rlx_status rlx_graph_dim_expr(rlx_graph* g, rlx_dim_op op, rlx_dim a, rlx_dim b,
                                      rlx_dim* out_dim);

/* Shape/dtype queries on a tensor. out_shape has room for RLX_MAX_RANK. */
RLX_API rlx_status rlx_graph_tensor_type(const rlx_graph* g, rlx_tensor t, rlx_dtype* out_dtype,
                                         int32_t* out_rank, rlx_dim* out_shape);
RLX_API int32_t rlx_graph_node_count(const rlx_graph* g);

/* --- what a graph takes and gives: inputs, params, outputs, symbols */

/* One graph input, param or output. A symbolic dim is reported as its dim
 * code (< 0, as rlx_graph_symbol returns it) in shape[d], with the symbol's
 * name in dim_names[d]; a static dim has dim_names[d] == NULL. The strings
 * belong to the graph: valid until the graph is changed or destroyed. */
typedef struct rlx_value_info {
  const char* name;  /* input/param name; an output's label (rlx_graph_set_name) or NULL */
  rlx_tensor tensor; /* the value in the graph */
  rlx_dtype dtype;
  int32_t rank;
  rlx_dim shape[RLX_MAX_RANK];
  const char* dim_names[RLX_MAX_RANK];
} rlx_value_info;

/* Inputs and params are counted in the order they were added; outputs in
 * the order of rlx_graph_set_outputs. A count on a NULL graph is 0. */
RLX_API int32_t rlx_graph_input_count(const rlx_graph* g);
RLX_API int32_t rlx_graph_param_count(const rlx_graph* g);
RLX_API int32_t rlx_graph_output_count(const rlx_graph* g);
/* Fills *out_info for input/param/output `index`; RLX_OUT_OF_RANGE (message
 * on the graph) when index is outside [0, count), INVALID_ARGUMENT for a NULL
 * graph or out_info. */
RLX_API rlx_status rlx_graph_get_input(const rlx_graph* g, int32_t index, rlx_value_info* out_info);
RLX_API rlx_status rlx_graph_get_param(const rlx_graph* g, int32_t index, rlx_value_info* out_info);
RLX_API rlx_status rlx_graph_get_output(const rlx_graph* g, int32_t index,
                                        rlx_value_info* out_info);
/* Number of symbolic dims (leaf symbols and expressions: the codes -1 ..
 * -count), made by rlx_graph_symbol / rlx_graph_dim_expr or the loaders. */
RLX_API int32_t rlx_graph_symbol_count(const rlx_graph* g);
/* Name of the symbol behind a symbolic dim code (dim < 0): a leaf's name, or
 * an expression's printable form ("B*T", "cdiv(T,2)"); NOT_FOUND when the
 * graph has no such symbol, INVALID_ARGUMENT for a static dim. */
RLX_API rlx_status rlx_graph_symbol_name(const rlx_graph* g, rlx_dim dim, const char** out_name);

/* Names the node that produces t (used in errors, dot and text output). */
RLX_API rlx_status rlx_graph_set_name(rlx_graph* g, rlx_tensor t, const char* name);

/* Declares the ordered graph outputs. */
RLX_API rlx_status rlx_graph_set_outputs(rlx_graph* g, const rlx_tensor* outputs, int32_t n);

/* --- leaves */
RLX_API rlx_status rlx_graph_add_input(rlx_graph* g, const char* name, rlx_dtype dtype,
                                       const rlx_dim* shape, int32_t rank, rlx_tensor* out);
RLX_API rlx_status rlx_graph_add_param(rlx_graph* g, const char* name, rlx_dtype dtype,
                                       const rlx_dim* shape, int32_t rank, rlx_tensor* out);
/* Copies `bytes` bytes of data (must equal the static element count × size). */
RLX_API rlx_status rlx_graph_add_constant(rlx_graph* g, rlx_dtype dtype, const rlx_dim* shape,
                                          int32_t rank, const void* data, size_t bytes,
                                          rlx_tensor* out);

/* --- views */
/* Reshape to `shape` (same element count; one dim may be -1 ... see below).
 * To infer one dim pass RLX_DIM_INFER for it. */
#define RLX_DIM_INFER INT64_MIN
RLX_API rlx_status rlx_graph_add_reshape(rlx_graph* g, rlx_tensor x, const rlx_dim* shape,
                                         int32_t rank, rlx_tensor* out);
RLX_API rlx_status rlx_graph_add_cast(rlx_graph* g, rlx_tensor x, rlx_dtype dtype, rlx_tensor* out);
RLX_API rlx_status rlx_graph_add_stop_gradient(rlx_graph* g, rlx_tensor x, rlx_tensor* out);

/* --- layout */
RLX_API rlx_status rlx_graph_add_transpose(rlx_graph* g, rlx_tensor x, const int32_t* perm,
                                           int32_t rank, rlx_tensor* out);
/* x[..., start:start+len, ...] along axis. */
RLX_API rlx_status rlx_graph_add_narrow(rlx_graph* g, rlx_tensor x, int32_t axis, int64_t start,
                                        int64_t len, rlx_tensor* out);
RLX_API rlx_status rlx_graph_add_concat(rlx_graph* g, const rlx_tensor* xs, int32_t n, int32_t axis,
                                        rlx_tensor* out);
/* NumPy broadcast of x to `shape` (rank >= x's rank). */
RLX_API rlx_status rlx_graph_add_expand(rlx_graph* g, rlx_tensor x, const rlx_dim* shape,
                                        int32_t rank, rlx_tensor* out);
RLX_API rlx_status rlx_graph_add_reverse(rlx_graph* g, rlx_tensor x, const int32_t* axes,
                                         int32_t n_axes, rlx_tensor* out);
/* out = x.shape[:axis] + idx.shape + x.shape[axis+1:]; idx is i32/i64,
 * negative indices count from the end; out of range is a run-time error. */
RLX_API rlx_status rlx_graph_add_gather(rlx_graph* g, rlx_tensor x, rlx_tensor idx, int32_t axis,
                                        rlx_tensor* out);
/* out = base; out[..idx[p]..] += src[p] along axis (torch.scatter_add):
 * idx and src have the same shape and rank as base. */
RLX_API rlx_status rlx_graph_add_scatter_add(rlx_graph* g, rlx_tensor base, rlx_tensor idx,
                                             rlx_tensor src, int32_t axis, rlx_tensor* out);

/* --- elementwise */
typedef enum rlx_binary_op {
  RLX_BIN_ADD, RLX_BIN_SUB, RLX_BIN_MUL, RLX_BIN_DIV, RLX_BIN_MAX, RLX_BIN_MIN, RLX_BIN_POW,
  RLX_BIN_COUNT
} rlx_binary_op;
typedef enum rlx_compare_op {
  RLX_CMP_EQ, RLX_CMP_NE, RLX_CMP_LT, RLX_CMP_LE, RLX_CMP_GT, RLX_CMP_GE, RLX_CMP_COUNT
} rlx_compare_op;
typedef enum rlx_activation {
  RLX_ACT_NONE, /* identity: only meaningful in FusedMatMulBiasAct */
  RLX_ACT_RELU, RLX_ACT_SIGMOID, RLX_ACT_TANH, RLX_ACT_EXP, RLX_ACT_LOG, RLX_ACT_SQRT,
  RLX_ACT_RSQRT, RLX_ACT_NEG, RLX_ACT_ABS, RLX_ACT_GELU, RLX_ACT_GELU_APPROX, RLX_ACT_SILU,
  RLX_ACT_ROUND, RLX_ACT_SIN, RLX_ACT_COS, RLX_ACT_TAN, RLX_ACT_ATAN,
  RLX_ACT_COUNT
} rlx_activation;

/* NumPy broadcasting; both operands share a dtype. */
RLX_API rlx_status rlx_graph_add_binary(rlx_graph* g, rlx_binary_op op, rlx_tensor a, rlx_tensor b,
                                        rlx_tensor* out);
/* Result dtype is bool. */
RLX_API rlx_status rlx_graph_add_compare(rlx_graph* g, rlx_compare_op op, rlx_tensor a,
                                         rlx_tensor b, rlx_tensor* out);
/* cond is bool; x and y share a dtype; all three broadcast. */
RLX_API rlx_status rlx_graph_add_where(rlx_graph* g, rlx_tensor cond, rlx_tensor x, rlx_tensor y,
                                       rlx_tensor* out);
RLX_API rlx_status rlx_graph_add_activation(rlx_graph* g, rlx_activation act, rlx_tensor x,
                                            rlx_tensor* out);

/* --- contraction */
/* a: [..., M, K] (or [..., K, M] with transpose_a), b: [..., K, N] (or
 * [..., N, K] with transpose_b); batch dims broadcast. Rank >= 2. */
RLX_API rlx_status rlx_graph_add_matmul(rlx_graph* g, rlx_tensor a, rlx_tensor b,
                                        int32_t transpose_a, int32_t transpose_b, rlx_tensor* out);
/* act(a @ b + bias); bias is [N] or RLX_NONE; act may be RLX_ACT_NONE. */
RLX_API rlx_status rlx_graph_add_fused_matmul_bias_act(rlx_graph* g, rlx_tensor a, rlx_tensor b,
                                                       rlx_tensor bias, int32_t transpose_a,
                                                       int32_t transpose_b, rlx_activation act,
                                                       rlx_tensor* out);

/* --- reduction */
typedef enum rlx_reduce_op {
  RLX_RED_SUM, RLX_RED_MEAN, RLX_RED_MAX, RLX_RED_MIN, RLX_RED_PROD, RLX_RED_COUNT
} rlx_reduce_op;
/* Reduces over `axes` (n_axes == 0 means all axes). */
RLX_API rlx_status rlx_graph_add_reduce(rlx_graph* g, rlx_reduce_op op, rlx_tensor x,
                                        const int32_t* axes, int32_t n_axes, int32_t keep_dim,
                                        rlx_tensor* out);
/* Result i64; ties resolve to the first index. */
RLX_API rlx_status rlx_graph_add_argmax(rlx_graph* g, rlx_tensor x, int32_t axis, int32_t keep_dim,
                                        rlx_tensor* out);
RLX_API rlx_status rlx_graph_add_argmin(rlx_graph* g, rlx_tensor x, int32_t axis, int32_t keep_dim,
                                        rlx_tensor* out);
RLX_API rlx_status rlx_graph_add_softmax(rlx_graph* g, rlx_tensor x, int32_t axis, rlx_tensor* out);
RLX_API rlx_status rlx_graph_add_log_softmax(rlx_graph* g, rlx_tensor x, int32_t axis,
                                             rlx_tensor* out);
/* Inclusive (or exclusive) prefix sum along axis, optionally from the end. */
RLX_API rlx_status rlx_graph_add_cumsum(rlx_graph* g, rlx_tensor x, int32_t axis, int32_t exclusive,
                                        int32_t reverse, rlx_tensor* out);
/* k largest (or smallest) along axis, sorted; indices are i64. Ties keep the
 * lower index first. */
RLX_API rlx_status rlx_graph_add_topk(rlx_graph* g, rlx_tensor x, int64_t k, int32_t axis,
                                      int32_t largest, rlx_tensor* out_values,
                                      rlx_tensor* out_indices);

/* --- normalization */
/* Normalizes over dims [axis, rank); gamma/beta have shape x.shape[axis:] or
 * are RLX_NONE. */
RLX_API rlx_status rlx_graph_add_layer_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                            rlx_tensor beta, int32_t axis, float eps,
                                            rlx_tensor* out);
/* x / sqrt(mean(x^2 over the last dim) + eps) * gamma; gamma may be RLX_NONE. */
RLX_API rlx_status rlx_graph_add_rms_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma, float eps,
                                          rlx_tensor* out);
/* sum = x + residual (+ bias); out_norm = layer_norm(sum) over the last dim. */
RLX_API rlx_status rlx_graph_add_fused_residual_layer_norm(rlx_graph* g, rlx_tensor x,
                                                           rlx_tensor residual, rlx_tensor bias,
                                                           rlx_tensor gamma, rlx_tensor beta,
                                                           float eps, rlx_tensor* out_norm,
                                                           rlx_tensor* out_sum);
RLX_API rlx_status rlx_graph_add_fused_residual_rms_norm(rlx_graph* g, rlx_tensor x,
                                                         rlx_tensor residual, rlx_tensor bias,
                                                         rlx_tensor gamma, float eps,
                                                         rlx_tensor* out_norm, rlx_tensor* out_sum);

/* --- transformer */
typedef enum rlx_layout { RLX_LAYOUT_BSHD = 0, RLX_LAYOUT_BHSD = 1 } rlx_layout;
typedef enum rlx_mask_kind {
  RLX_MASK_NONE = 0,
  RLX_MASK_CAUSAL = 1,  /* query i sees keys <= i + Sk - Sq */
  RLX_MASK_CUSTOM = 2,  /* mask tensor: > 0.5 keeps, else -inf; broadcast to [B,H,Sq,Sk] */
  RLX_MASK_SLIDING = 3, /* causal and key >= query_pos - window + 1 */
  RLX_MASK_BIAS = 4,    /* additive tensor broadcast to [B,H,Sq,Sk] */
} rlx_mask_kind;

typedef struct rlx_attention_desc {
  int32_t num_heads;
  int32_t num_kv_heads; /* 0 = num_heads; must divide num_heads */
  int32_t head_dim;
  rlx_layout layout;    /* q: [B,Sq,H,D] (BSHD) or [B,H,Sq,D]; k/v likewise with Hkv, Sk */
  rlx_mask_kind mask;
  int32_t window;       /* SlidingWindow size (keys within w of the query) */
  float score_scale;    /* 0 = 1/sqrt(head_dim) */
  float softcap;        /* 0 = off; else s = cap * tanh(s / cap) */
} rlx_attention_desc;

/* Output has q's shape and layout. mask is RLX_NONE unless the kind needs one. */
RLX_API rlx_status rlx_graph_add_attention(rlx_graph* g, rlx_tensor q, rlx_tensor k, rlx_tensor v,
                                           rlx_tensor mask, const rlx_attention_desc* desc,
                                           rlx_tensor* out);

typedef enum rlx_rope_style { RLX_ROPE_NEOX = 0, RLX_ROPE_GPTJ = 1 } rlx_rope_style;
/* x: [B, S, H, head_dim] (BSHD) or [B, H, S, head_dim] (BHSD); cos/sin:
 * [S, n_rot/2] or [B*S, n_rot/2]. Only the first n_rot dims of each head rotate. */
RLX_API rlx_status rlx_graph_add_rope(rlx_graph* g, rlx_tensor x, rlx_tensor cos_t,
                                      rlx_tensor sin_t, int32_t head_dim, int32_t n_rot,
                                      rlx_rope_style style, rlx_layout layout, rlx_tensor* out);

/* --- vision (Tier 3) */
typedef enum rlx_pool_kind {
  RLX_POOL_MAX = 0,
  RLX_POOL_AVG = 1,
  /* i64: the row-major flat index into x of each window's first maximum
   * (ONNX MaxPool's Indices with storage_order 0) */
  RLX_POOL_ARGMAX = 2,
} rlx_pool_kind;
/* Max / average pooling of x [N, C, spatial...] over n_spatial (1..3) dims.
 * kernel[n_spatial] >= 1; strides and dilations (NULL = all 1);
 * pads[2 * n_spatial]: the begin pads of each spatial dim, then the end pads
 * (NULL = none). Output size per dim: floor (ceil if ceil_mode) of
 * (in + begin + end - dilation * (kernel - 1) - 1) / stride + 1, where a
 * ceil-mode window that would start in the end padding is dropped. Padding
 * is never the maximum; an average divides by the taps inside the input, or
 * with count_include_pad by the taps inside input + pads. Global pooling is
 * kernel = the spatial dims. (Inside compiled graphs the channels_last
 * pass also pools [N, spatial..., C]: the node's conv_layout attribute.) */
RLX_API rlx_status rlx_graph_add_pool(rlx_graph* g, rlx_tensor x, rlx_pool_kind kind,
                                      int32_t n_spatial, const int64_t* kernel,
                                      const int64_t* strides, const int64_t* pads,
                                      const int64_t* dilations, int32_t ceil_mode,
                                      int32_t count_include_pad, rlx_tensor* out);

typedef enum rlx_pad_mode {
  RLX_PAD_CONSTANT = 0, /* value */
  RLX_PAD_REFLECT = 1,  /* mirror without repeating the edge (abc|ba) */
  RLX_PAD_EDGE = 2,     /* repeat the edge element */
  RLX_PAD_WRAP = 3,     /* continue periodically (abc|ab) */
} rlx_pad_mode;
/* pads[2 * rank]: the begin pads of every dim, then the end pads (ONNX
 * order); a negative pad crops. value is the constant-mode fill (converted
 * to x's dtype). Reflect / edge / wrap need a non-empty dim where they pad. */
RLX_API rlx_status rlx_graph_add_pad(rlx_graph* g, rlx_tensor x, rlx_pad_mode mode,
                                     const int64_t* pads, float value, rlx_tensor* out);

typedef enum rlx_d2s_mode {
  RLX_D2S_DCR = 0, /* channel = (bh * block + bw) * C_out + c */
  RLX_D2S_CRD = 1, /* channel = (c * block + bh) * block + bw (pixel_shuffle) */
} rlx_d2s_mode;
/* [N, C*b*b, H, W] -> [N, C, H*b, W*b] */
RLX_API rlx_status rlx_graph_add_depth_to_space(rlx_graph* g, rlx_tensor x, int32_t block,
                                                rlx_d2s_mode mode, rlx_tensor* out);
/* [N, C, H*b, W*b] -> [N, C*b*b, H, W], channel (bh * b + bw) * C + c (the
 * inverse of DCR depth_to_space) */
RLX_API rlx_status rlx_graph_add_space_to_depth(rlx_graph* g, rlx_tensor x, int32_t block,
                                                rlx_tensor* out);

typedef enum rlx_resize_mode {
  RLX_RESIZE_NEAREST = 0, /* one source element, rounded per rlx_resize_nearest */
  RLX_RESIZE_LINEAR = 1,  /* n-linear over the resized dims */
  RLX_RESIZE_CUBIC = 2,   /* Keys cubic with coefficient cubic_a */
} rlx_resize_mode;
/* How output coordinate o of a dim maps to input coordinate x (ONNX
 * coordinate_transformation_mode); scale is the dim's scale, in / out its
 * sizes. */
typedef enum rlx_resize_coord {
  RLX_COORD_HALF_PIXEL = 0,           /* (o + 0.5) / scale - 0.5 */
  RLX_COORD_HALF_PIXEL_SYMMETRIC = 1, /* half_pixel about the centre of the input */
  RLX_COORD_PYTORCH_HALF_PIXEL = 2,   /* half_pixel, 0 when out == 1 */
  RLX_COORD_ALIGN_CORNERS = 3,        /* o * (in - 1) / (out - 1), 0 when out == 1 */
  RLX_COORD_ASYMMETRIC = 4,           /* o / scale */
  RLX_COORD_TF_HALF_PIXEL_FOR_NN = 5, /* (o + 0.5) / scale */
  RLX_COORD_TF_CROP_AND_RESIZE = 6,   /* within roi; outside the input: extrapolation */
} rlx_resize_coord;
typedef enum rlx_resize_nearest {
  RLX_NEAREST_ROUND_PREFER_FLOOR = 0,
  RLX_NEAREST_ROUND_PREFER_CEIL = 1,
  RLX_NEAREST_FLOOR = 2,
  RLX_NEAREST_CEIL = 3,
} rlx_resize_nearest;
/* Resize x to sizes[rank] (every dim; unchanged dims repeat x's size).
 * scales[rank] is the scale the coordinate transform divides by (NULL, or
 * an entry 0: sizes / x's sizes in double, as when ONNX gives sizes). roi[2 * rank] (starts, then
 * ends, as fractions of the input) is read by tf_crop_and_resize only (NULL:
 * 0 .. 1), which writes extrapolation_value where a coordinate falls outside
 * the input. Cubic: cubic_a is the kernel's coefficient (ONNX -0.75, PyTorch
 * -0.75), exclude_outside drops taps outside the input and renormalises.
 * Source indices clamp to the input (edge). Float x, or any dtype for
 * nearest; at most 3 dims may be resized. */
RLX_API rlx_status rlx_graph_add_resize(rlx_graph* g, rlx_tensor x, const int64_t* sizes,
                                        rlx_resize_mode mode, rlx_resize_coord coord,
                                        rlx_resize_nearest nearest, float cubic_a,
                                        int32_t exclude_outside, const float* scales,
                                        const float* roi, float extrapolation_value,
                                        rlx_tensor* out);

typedef enum rlx_grid_padding {
  RLX_GRID_ZEROS = 0,      /* taps outside the input read 0 */
  RLX_GRID_BORDER = 1,     /* coordinates clamp to the input */
  RLX_GRID_REFLECTION = 2, /* coordinates reflect at the border */
} rlx_grid_padding;
/* GridSample (PyTorch grid_sample, ONNX GridSample-16): x [N, C, H, W],
 * grid [N, Ho, Wo, 2] of (x, y) in [-1, 1] -> [N, C, Ho, Wo]. mode nearest
 * (round half to even), linear (bilinear) or cubic (bicubic, a = -0.75);
 * align_corners maps -1 / 1 to the corner pixels' centres instead of their
 * outer edges. Float x and grid. */
RLX_API rlx_status rlx_graph_add_grid_sample(rlx_graph* g, rlx_tensor x, rlx_tensor grid,
                                             rlx_resize_mode mode, rlx_grid_padding padding,
                                             int32_t align_corners, rlx_tensor* out);
/* RoiAlign (ONNX RoiAlign-16): x [N, C, H, W], rois [R, 4] (x1, y1, x2, y2
 * in input pixels / spatial_scale), batch_indices [R] (int) ->
 * [R, C, out_h, out_w]: each bin averages (or takes the max of the
 * weighted corners of) sampling_ratio^2 bilinear samples (0: ceil of the
 * bin size). half_pixel shifts the roi by -0.5 pixel (ONNX half_pixel,
 * torchvision aligned=True); without it a roi is at least 1 x 1. */
RLX_API rlx_status rlx_graph_add_roi_align(rlx_graph* g, rlx_tensor x, rlx_tensor rois,
                                           rlx_tensor batch_indices, rlx_pool_kind mode,
                                           int64_t out_h, int64_t out_w, int32_t sampling_ratio,
                                           float spatial_scale, int32_t half_pixel,
                                           rlx_tensor* out);
typedef enum rlx_conv_layout {
  RLX_CONV_CHANNELS_FIRST = 0, /* x, residual, y: [N, C, spatial...] (NCHW) */
  RLX_CONV_CHANNELS_LAST = 1,  /* x, residual, y: [N, spatial..., C] (NHWC) */
  /* Channels last with the weight in the same order: Conv's w is
   * [OC, k..., C/groups] (OHWI), so cuDNN's NHWC kernels read it as it is
   * (no per-run reorder). Conv only; the channels_last compile option's
   * layout pass emits it where the backend takes it. */
  RLX_CONV_CHANNELS_LAST_OHWI = 2,
} rlx_conv_layout;
/* Convolution over n_spatial (1..3) dims, y = act(conv(x, w) + bias +
 * residual) (cuDNN's ConvBiasActivation order: the residual is added before
 * the activation). w is [OC, C/groups, k...] (channels_last_ohwi: [OC,
 * k..., C/groups]); bias [OC] and residual (shaped like y) may be
 * RLX_NONE; act may be RLX_ACT_NONE.
 * strides / dilations[n_spatial] (NULL = all 1); pads[2 * n_spatial]: the
 * begin pads of each spatial dim, then the end pads (NULL = none). Output
 * size per dim: (in + begin + end - dilation * (k - 1) - 1) / stride + 1,
 * floored, which must be >= 1. C and OC must divide by groups (groups = C
 * is depthwise). */
RLX_API rlx_status rlx_graph_add_conv(rlx_graph* g, rlx_tensor x, rlx_tensor w, rlx_tensor bias,
                                      rlx_tensor residual, int32_t n_spatial,
                                      const int64_t* strides, const int64_t* pads,
                                      const int64_t* dilations, int32_t groups,
                                      rlx_activation act, rlx_conv_layout layout,
                                      rlx_tensor* out);
/* Transposed convolution (the gradient of conv with respect to its input),
 * w [C, OC/groups, k...] (ONNX / PyTorch layout), other arguments as in
 * rlx_graph_add_conv plus output_padding[n_spatial] (NULL = none; each <
 * max(stride, dilation)). Output size per dim: (in - 1) * stride - begin -
 * end + dilation * (k - 1) + output_padding + 1. */
RLX_API rlx_status rlx_graph_add_conv_transpose(rlx_graph* g, rlx_tensor x, rlx_tensor w,
                                                rlx_tensor bias, rlx_tensor residual,
                                                int32_t n_spatial, const int64_t* strides,
                                                const int64_t* pads, const int64_t* dilations,
                                                const int64_t* output_padding, int32_t groups,
                                                rlx_activation act, rlx_conv_layout layout,
                                                rlx_tensor* out);
/* The sliding windows of x as columns (PyTorch's unfold): channels first,
 * x [N, C, spatial...] -> [N, C * prod(kernel), prod(out)], row (c, k...),
 * column the output position in row-major order; channels last, x [N,
 * spatial..., C] -> [N, prod(out), prod(kernel) * C], column (k..., c).
 * kernel[n_spatial] >= 1; strides, pads, dilations as in rlx_graph_add_conv;
 * padding reads zero. */
RLX_API rlx_status rlx_graph_add_im2col(rlx_graph* g, rlx_tensor x, int32_t n_spatial,
                                        const int64_t* kernel, const int64_t* strides,
                                        const int64_t* pads, const int64_t* dilations,
                                        rlx_conv_layout layout, rlx_tensor* out);
/* --- channel-wise normalisations of x [N, C, spatial...] (per-channel
 * gamma, beta, mean, var are [C]; gamma/beta may be RLX_NONE: 1 / 0) */
/* GroupNorm: the C channels split into `groups` groups of C / groups; each
 * (sample, group) is normalised over its channels and spatial positions
 * (biased variance). InstanceNorm is groups = C. */
RLX_API rlx_status rlx_graph_add_group_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                            rlx_tensor beta, int32_t groups, float eps,
                                            rlx_tensor* out);
/* LayerNorm2d (ConvNeXt): every (sample, position) normalised over C. */
RLX_API rlx_status rlx_graph_add_channel_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                              rlx_tensor beta, float eps, rlx_tensor* out);
/* BatchNorm, inference: (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]. */
RLX_API rlx_status rlx_graph_add_batch_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                            rlx_tensor beta, rlx_tensor mean, rlx_tensor var,
                                            float eps, rlx_tensor* out);
/* Local response norm across channels (ONNX LRN): the sum of squares over
 * channels [c - (size-1)/2, c + size/2] (clipped); y = x / (bias + alpha /
 * size * sum)^beta. Beyond rank 4 the spatial dims must be static. */
RLX_API rlx_status rlx_graph_add_lrn(rlx_graph* g, rlx_tensor x, int32_t size, float alpha,
                                     float beta, float bias, rlx_tensor* out);

/* --- generation */
/* logits [..., V] -> i64 [...]. top_k = 0 means all, top_p = 1 means off,
 * temperature <= 0 means greedy. The seed is given per run. */
RLX_API rlx_status rlx_graph_add_sample(rlx_graph* g, rlx_tensor logits, int32_t top_k, float top_p,
                                        float temperature, rlx_tensor* out);

/* --- training (Tier 2): backward ops, losses, optimizer updates.
 * Each is an IR op with a shape rule, a CPU reference and native kernels;
 * rlx_graph_grad (below) emits them, and graphs may also use them directly.
 * Float dtypes only; gradients have the dtype of what they differentiate. */

/* Attention backward, flash style (the S x S scores are recomputed in
 * tiles, never stored): given the forward's q, k, v, mask (as in
 * rlx_graph_add_attention, same desc), its output `out` and the output's
 * gradient d_out, writes dq (q's shape), dk and dv (k's / v's shape; with
 * GQA each kv head sums the gradients of the query heads that share it). */
RLX_API rlx_status rlx_graph_add_attention_backward(rlx_graph* g, rlx_tensor q, rlx_tensor k,
                                                    rlx_tensor v, rlx_tensor mask, rlx_tensor out,
                                                    rlx_tensor d_out,
                                                    const rlx_attention_desc* desc,
                                                    rlx_tensor* out_dq, rlx_tensor* out_dk,
                                                    rlx_tensor* out_dv);
/* LayerNorm backward (forward: rlx_graph_add_layer_norm(x, gamma, beta,
 * axis, eps)): dx (x's shape), d_gamma and d_beta (shape x.shape[axis:],
 * the sums over the leading dims). gamma may be RLX_NONE (ones); the
 * d_gamma / d_beta outputs exist either way. */
RLX_API rlx_status rlx_graph_add_layer_norm_backward(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                                     rlx_tensor dy, int32_t axis, float eps,
                                                     rlx_tensor* out_dx, rlx_tensor* out_dgamma,
                                                     rlx_tensor* out_dbeta);
/* RmsNorm backward (forward over the last dim): dx and d_gamma ([D]; exists
 * when gamma is RLX_NONE too). */
RLX_API rlx_status rlx_graph_add_rms_norm_backward(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                                   rlx_tensor dy, float eps, rlx_tensor* out_dx,
                                                   rlx_tensor* out_dgamma);
/* Softmax backward from the forward's output y along axis:
 * dx = y * (dy - sum(dy * y)); with log_softmax = 1, y is LogSoftmax's
 * output and dx = dy - exp(y) * sum(dy). */
RLX_API rlx_status rlx_graph_add_softmax_backward(rlx_graph* g, rlx_tensor y, rlx_tensor dy,
                                                  int32_t axis, int32_t log_softmax,
                                                  rlx_tensor* out);
/* Rope backward: the inverse rotation of dy (same tables and attributes as
 * the forward rlx_graph_add_rope). */
RLX_API rlx_status rlx_graph_add_rope_backward(rlx_graph* g, rlx_tensor dy, rlx_tensor cos_t,
                                               rlx_tensor sin_t, int32_t head_dim, int32_t n_rot,
                                               rlx_rope_style style, rlx_layout layout,
                                               rlx_tensor* out);
/* Gather backward (forward: rlx_graph_add_gather(x, idx, axis)): dx of x's
 * shape, x.shape[axis] = axis_size, zero except dx[.., idx[p], ..] summed
 * over every p that gathered it. Deterministic: the sums are taken in
 * position order on every backend (no atomics), so repeated runs give the
 * same bits. Out-of-range indices fail the run (RLX_OUT_OF_RANGE). */
RLX_API rlx_status rlx_graph_add_gather_backward(rlx_graph* g, rlx_tensor dy, rlx_tensor idx,
                                                 int32_t axis, rlx_dim axis_size,
                                                 rlx_tensor* out);
/* Cumsum backward: the cumsum of dy in the opposite direction (same axis
 * and exclusive flag as the forward, reverse flipped). */
RLX_API rlx_status rlx_graph_add_cumsum_backward(rlx_graph* g, rlx_tensor dy, int32_t axis,
                                                 int32_t exclusive, int32_t reverse,
                                                 rlx_tensor* out);
/* Conv backward with respect to the weight: d_w ([OC, C/groups, k...], or
 * OHWI for RLX_CONV_CHANNELS_LAST_OHWI) from the forward's input x and the
 * gradient dy of its pre-activation output; the other arguments are the
 * forward's (rlx_graph_add_conv). The input gradient is
 * rlx_graph_add_conv_transpose of dy, the bias gradient a Reduce of dy. */
RLX_API rlx_status rlx_graph_add_conv_backward_weight(rlx_graph* g, rlx_tensor x, rlx_tensor dy,
                                                      rlx_tensor w, int32_t n_spatial,
                                                      const int64_t* strides, const int64_t* pads,
                                                      const int64_t* dilations, int32_t groups,
                                                      rlx_conv_layout layout, rlx_tensor* out);
/* Pool backward (RLX_POOL_MAX or RLX_POOL_AVG; the forward's x and
 * arguments, dy shaped like its output) -> dx of x's shape. Max routes each
 * window's gradient to its first maximum (rlx_graph_add_pool's argmax);
 * an average spreads it over the taps it divided by. Deterministic (each
 * dx element sums the windows that cover it, no atomics). */
RLX_API rlx_status rlx_graph_add_pool_backward(rlx_graph* g, rlx_tensor x, rlx_tensor dy,
                                               rlx_pool_kind kind, int32_t n_spatial,
                                               const int64_t* kernel, const int64_t* strides,
                                               const int64_t* pads, const int64_t* dilations,
                                               int32_t ceil_mode, int32_t count_include_pad,
                                               rlx_tensor* out);
/* Cross-entropy from logits [..., V] and integer targets [...] (i32/i64):
 * the mean over positions whose target != ignore_index of
 * -((1 - ls) * log_softmax(logits)[target] + ls / V * sum(log_softmax)),
 * ls = label_smoothing in [0, 1] (PyTorch's F.cross_entropy with
 * reduction='mean'). A scalar (shape [], logits' dtype); 0/0 = NaN when
 * every target is ignored, as PyTorch. Targets outside [0, V) that are not
 * ignore_index fail the run (RLX_OUT_OF_RANGE). */
RLX_API rlx_status rlx_graph_add_cross_entropy(rlx_graph* g, rlx_tensor logits, rlx_tensor targets,
                                               int64_t ignore_index, float label_smoothing,
                                               rlx_tensor* out);
/* Its backward: d_logits = d_loss * (softmax(logits) - smoothed one-hot)
 * / count, zero on ignored rows; d_loss is a scalar of the logits'
 * dtype, or f32 beside f16 / bf16 logits (mixed precision keeps the loss's
 * gradient in f32); d_logits has the logits' dtype. */
RLX_API rlx_status rlx_graph_add_cross_entropy_backward(rlx_graph* g, rlx_tensor logits,
                                                        rlx_tensor targets, rlx_tensor d_loss,
                                                        int64_t ignore_index,
                                                        float label_smoothing, rlx_tensor* out);
/* Mean squared error: mean((a - b)^2) over every element, a scalar. A
 * composition of Binary and Reduce (its gradient follows from theirs). */
RLX_API rlx_status rlx_graph_add_mse_loss(rlx_graph* g, rlx_tensor a, rlx_tensor b,
                                          rlx_tensor* out);

/* Optimizer updates: one fused elementwise kernel per param tensor whose
 * outputs are planned in the bytes of the param and state they replace
 * (the trainer feeds them back as device state). `hyper` is an f32 tensor
 * [RLX_HYPER_COUNT] read on the device at every run, so a learning-rate
 * schedule or clipping never recompiles. The update is applied to the
 * gradient g_eff = grad * hyper[GRAD_SCALE]; with hyper[APPLY] == 0 every
 * output equals its input (an accumulation micro-step). */
enum {
  RLX_HYPER_LR = 0,
  RLX_HYPER_GRAD_SCALE = 1, /* clipping coefficient / (loss scale * accumulation steps) */
  RLX_HYPER_STEP = 2,       /* t of the update being made (1, 2, ...): Adam's bias correction */
  RLX_HYPER_APPLY = 3,      /* 1: update; 0: leave params and state as they are */
  RLX_HYPER_COUNT = 4,
};
typedef struct rlx_sgd_desc {
  float momentum;     /* 0: no momentum buffer is read or written */
  float dampening;
  float weight_decay; /* L2: g_eff += weight_decay * p */
  int32_t nesterov;
} rlx_sgd_desc;
/* PyTorch's SGD: buf = momentum * buf + (1 - dampening) * g_eff (buf = g_eff
 * at step 1); p -= lr * (nesterov ? g_eff + momentum * buf : buf).
 * momentum_buf may be RLX_NONE when momentum == 0 (then *out_buf = RLX_NONE). */
RLX_API rlx_status rlx_graph_add_sgd_update(rlx_graph* g, rlx_tensor p, rlx_tensor grad,
                                            rlx_tensor momentum_buf, rlx_tensor hyper,
                                            const rlx_sgd_desc* desc, rlx_tensor* out_p,
                                            rlx_tensor* out_buf);
typedef struct rlx_adam_desc {
  float beta1, beta2, eps;
  float weight_decay;
  int32_t decoupled;  /* 1: AdamW (p *= 1 - lr * wd); 0: Adam (g_eff += wd * p) */
} rlx_adam_desc;
/* PyTorch's Adam / AdamW: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). */
RLX_API rlx_status rlx_graph_add_adam_update(rlx_graph* g, rlx_tensor p, rlx_tensor grad,
                                             rlx_tensor m, rlx_tensor v, rlx_tensor hyper,
                                             const rlx_adam_desc* desc, rlx_tensor* out_p,
                                             rlx_tensor* out_m, rlx_tensor* out_v);

/* Reverse-mode autodiff: appends to g the nodes that compute the gradient
 * of `loss` with respect to each wrt[i] (inputs, params or any value) and
 * returns them in out_grads[i] (same shape and dtype as wrt[i]). The loss
 * is seeded with `seed` (its shape; RLX_NONE: ones). A wrt the loss does
 * not depend on gets a zero tensor. Fails naming the op when a node on the
 * path has no gradient rule (integer-valued ops, ArgMax, Sample, ...
 * contribute none and stop the path, as StopGradient does). */
RLX_API rlx_status rlx_graph_grad(rlx_graph* g, rlx_tensor loss, const rlx_tensor* wrt,
                                  int32_t n_wrt, rlx_tensor seed, rlx_tensor* out_grads);

/* --- text format */
/* Prints the graph; *out_text is malloc'd, free with rlx_free. */
RLX_API rlx_status rlx_graph_print(const rlx_graph* g, char** out_text);
/* Parses text into a new graph. On error returns the status and, if
 * out_error is not NULL, a malloc'd message "line:col: what" (rlx_free it). */
RLX_API rlx_status rlx_graph_parse(const char* text, rlx_graph** out_graph, char** out_error);
/* Reads the text file at path and parses it (as rlx_graph_parse). Only a
 * regular file is read: a FIFO, device or directory is INVALID_ARGUMENT at
 * once; a file that cannot be opened is NOT_FOUND with the OS's reason. */
RLX_API rlx_status rlx_graph_load(const char* path, rlx_graph** out_graph, char** out_error);
RLX_API void rlx_free(void* p);
/* A Graphviz digraph of the graph (render with `dot -Tsvg`): one box per
 * node with its op, label and output type; leaves and graph outputs drawn
 * apart. title may be NULL. *out_text is malloc'd (rlx_free). */
RLX_API rlx_status rlx_graph_print_dot(const rlx_graph* g, const char* title, char** out_text);

/* --- NumPy .npy files (versions 1-3, little-endian, C order; <f4 <f2 <f8 |i1
 * |u1 <i2 <u2 <i4 <u4 <i8 <u8 |b1). bf16 and the float8 types have no numpy
 * dtype: rlx_npy_save refuses them and rlx_npy_load never returns them, so
 * a save/load round trip is exact for every dtype it accepts. To keep one,
 * save it as f32 (rlx_dtype_convert) or save its bits as u16 / u8 (same
 * bytes; numpy users view them with ml_dtypes.bfloat16 / float8_*). */
/* Reads a whole .npy file. out_shape has room for RLX_MAX_RANK dims;
 * *out_data is malloc'd (rlx_free it; never NULL, even for no elements) and
 * holds *out_bytes bytes. On failure nothing is allocated and, if out_error
 * is not NULL, it receives a malloc'd message naming the file (rlx_free). */
RLX_API rlx_status rlx_npy_load(const char* path, rlx_dtype* out_dtype, int32_t* out_rank,
                                int64_t* out_shape, void** out_data, size_t* out_bytes,
                                char** out_error);
/* Writes a version 1.0 .npy file. Dims must be static and bytes must equal
 * numel x dtype size. out_error as in rlx_npy_load. */
RLX_API rlx_status rlx_npy_save(const char* path, rlx_dtype dtype, int32_t rank,
                                const int64_t* shape, const void* data, size_t bytes,
                                char** out_error);

/* --- ONNX import (built when protobuf-c is found; otherwise these return
 * RLX_UNIMPLEMENTED with "ONNX import not built") */
/* Imports an ONNX model (opsets 7..22 for the ops that map onto the IR).
 * Initializers become params named as in the file (rlx_onnx_set_params
 * copies their values into an executable), graph inputs become inputs,
 * symbolic dims become symbols; shape computations on constants (Shape ->
 * Gather -> Concat -> Reshape) are folded at import. An op, attribute or dtype
 * the importer does not support returns RLX_UNIMPLEMENTED; a malformed file
 * RLX_INVALID_ARGUMENT; RLX_FAILED_PRECONDITION when a value that must be
 * known at import time (a Reshape target, Slice bounds) is fed as a graph
 * input (`rlx run` accepts it with --input and freezes it).
 * If out_error is not NULL it receives a malloc'd message naming the op type,
 * node and problem (rlx_free it). */
RLX_API rlx_status rlx_onnx_load(const char* path, rlx_graph** out_graph, char** out_error);
/* Sets on e every param that rlx_onnx_load made from the initializers of the
 * ONNX file at path (the file is read again). */
struct rlx_exec;
RLX_API rlx_status rlx_onnx_set_params(struct rlx_exec* e, const char* path, char** out_error);
/* A graph input given its value at import time: it becomes a constant of the
 * graph (for inputs that must be known when the graph is built, such as a
 * Reshape target or Slice bounds; compile once per value, as with any
 * static-shape compiler). data holds bytes bytes of dtype, row-major. */
typedef struct rlx_onnx_frozen_input {
  const char* name;
  rlx_dtype dtype;
  int32_t rank;
  const int64_t* shape;
  const void* data;
  size_t bytes;
} rlx_onnx_frozen_input;
/* rlx_onnx_load / rlx_onnx_set_params with some graph inputs frozen. */
RLX_API rlx_status rlx_onnx_load_frozen(const char* path, const rlx_onnx_frozen_input* frozen,
                                        int32_t n_frozen, rlx_graph** out_graph, char** out_error);
RLX_API rlx_status rlx_onnx_set_params_frozen(struct rlx_exec* e, const char* path,
                                              const rlx_onnx_frozen_input* frozen, int32_t n_frozen,
                                              char** out_error);
/* rlx_onnx_load_frozen that also names what is missing: when the import
 * fails with RLX_FAILED_PRECONDITION because a value needed at import time
 * derives from a graph input that is not frozen, *out_needed_input receives
 * that input's name (malloc'd, rlx_free), else NULL; a caller may freeze it
 * and load again (as `rlx run --input` does). */
RLX_API rlx_status rlx_onnx_load_frozen_ex(const char* path, const rlx_onnx_frozen_input* frozen,
                                           int32_t n_frozen, rlx_graph** out_graph,
                                           char** out_needed_input, char** out_error);
/* Reads an ONNX TensorProto file (.pb, as in the ONNX test data). out_shape
 * has room for RLX_MAX_RANK dims; *out_data is malloc'd (rlx_free it; never
 * NULL) and holds *out_bytes bytes. */
RLX_API rlx_status rlx_onnx_read_tensor(const char* path, rlx_dtype* out_dtype, int32_t* out_rank,
                                        int64_t* out_shape, void** out_data, size_t* out_bytes,
                                        char** out_error);

/* ------------------------------------------------------------------ devices */

/* Probing a device starts its driver (Vulkan loader, Mesa, Dawn), which may
 * write warnings straight to file descriptor 2; rlx itself writes to stderr
 * only when an RLX_* diagnostic switch asks for it (docs/ENV.md). */
typedef struct rlx_device_info {
  const char* name;   /* "cpu", "cuda", "vulkan", "webgpu" */
  int32_t available;
  const char* detail; /* "available: ..." or "not built" or "unavailable: <reason>" */
  int32_t software;   /* 1: an emulated device (lavapipe, Dawn on lavapipe):
                         usable, but "best" ranks it below the CPU backend */
} rlx_device_info;

RLX_API int32_t rlx_device_count(void);
RLX_API rlx_status rlx_device_get(int32_t index, rlx_device_info* out_info);
/* "best" picks the first available of cuda, vulkan, webgpu, cpu. */
RLX_API rlx_status rlx_device_resolve(const char* name, const char** out_name);

/* How a device would run the ops of a graph, from its backend's static
 * support rule: no device is started, so the answer also holds for a backend
 * that is built in but has no device here. One entry per op kind present in
 * the graph (inputs, params and constants left out). A `deferred` node (the
 * part of an imported model built when its shape-valued inputs arrive)
 * counts under none of native / decomposed / host / views. */
typedef struct rlx_op_support {
  const char* op;     /* op name as the text format writes it (static string) */
  int32_t nodes;      /* nodes of this kind */
  int32_t native;     /* run by a device kernel */
  int32_t decomposed; /* rewritten into other ops before lowering */
  int32_t decomposed_host; /* of those, how many have a part on the host fallback */
  int32_t host;       /* run by the host (CPU) fallback */
  int32_t views;      /* zero-copy views (no kernel anywhere) */
} rlx_op_support;
/* Fills out[0 .. min(cap, kinds)) and sets *out_n to the number of op kinds.
 * device NULL fills only op and nodes. RLX_NOT_FOUND for an unknown device,
 * RLX_UNIMPLEMENTED for a backend not built into this library (message on
 * the graph either way). */
RLX_API rlx_status rlx_graph_op_support(const rlx_graph* g, const char* device, rlx_op_support* out,
                                        int32_t cap, int32_t* out_n);

/* ------------------------------------------------------------------ compile / run */

typedef struct rlx_exec rlx_exec;

/* Compute precision of an f32 graph (rlx_compile_options.precision). */
typedef enum rlx_precision {
  RLX_PRECISION_DEFAULT = 0, /* as the graph says */
  RLX_PRECISION_BF16 = 1,
  RLX_PRECISION_F16 = 2,
} rlx_precision;

typedef struct rlx_compile_options {
  int32_t strict;       /* 1: an op the backend cannot run natively is an error */
  int32_t allow_tf32;   /* GPU backends: TF32 matmul only when set */
  int32_t threads;      /* CPU threads; 0 = all cores */
  int32_t use_blas;     /* CPU: -1 auto (OpenBLAS if present), 0 never, 1 require */
  int32_t reference;    /* CPU: 1 = reference kernels only (no fast paths) */
  int32_t debug_nans;   /* 1: after each step check float outputs; the run fails
                           naming the first node whose output holds NaN/Inf */
  /* Symbol bindings: names[i] = sizes[i]. Symbols not bound here are bound
   * from the shapes given to rlx_exec_set_input at run time. */
  const char* const* symbol_names;
  const int64_t* symbol_sizes;
  int32_t n_symbols;
  /* Name of a symbol compiled at its bound size as an upper bound, which
   * rlx_exec_set_active_extent may shrink per run. It may only appear as dim 0. */
  const char* extent_symbol;
  /* Device state ("KV handles", e.g. a KV cache): after every run, output
   * state_outputs[i] becomes the value of input state_inputs[i] on the
   * device, as rlx_exec_feed(e, name, output, -1) would copy it (same dtype
   * and bytes). Declared here, the memory planner may keep that output in
   * the input's own bytes (when its producer is elementwise over the input
   * and nothing reads the input afterwards), so no copy is made, and an
   * update that rewrites a few rows of a large cache (Where(at_pos, row,
   * cache)) costs O(rows) on backends that skip unchanged elements. Such an
   * input cannot be re-fed with rlx_exec_feed. The state survives a run at
   * another binding of the symbols (it is copied into that binding's arena,
   * through the host, once per switch) while its shape does not change. */
  const char* const* state_inputs;
  const int32_t* state_outputs;
  int32_t n_states;
  /* rlx_precision: DEFAULT computes in the graph's own dtypes; BF16 / F16
   * compute the graph's f32 values in bf16 / f16 (kernels still accumulate
   * in f32). The interface does not change: f32 inputs, params and outputs
   * stay f32 (cast on entry and exit). Which ops stay f32, and why, is in
   * src/passes/precision.h. */
  int32_t precision;
  /* 1: convolution networks built channels-first (NCHW, as exported ONNX
   * models are) run channels-last inside: a compile pass turns Conv chains
   * and the ops between them (activations, per-channel and residual
   * arithmetic, pooling, spatial means) to NHWC, with one Transpose where
   * such a chain begins and one back where an NCHW consumer needs it.
   * Results equal the NCHW graph's up to f32 rounding order; inputs and
   * outputs keep their shapes. Faster where the convolutions are (cuDNN's
   * tensor-core kernels). */
  int32_t channels_last;
} rlx_compile_options;

/* Fills defaults. */
RLX_API void rlx_compile_options_init(rlx_compile_options* o);

/* device: "cpu", "cuda", "vulkan", "webgpu" or "best". options may be NULL.
 * On failure the message is on the graph. The graph is copied: it may be
 * changed or destroyed afterwards. Compiling an identical graph again reuses
 * the first compile's work (see rlx_compile_cache_clear). */
RLX_API rlx_status rlx_compile(rlx_graph* g, const char* device, const rlx_compile_options* options,
                               rlx_exec** out_exec);
RLX_API void rlx_exec_destroy(rlx_exec* e);
RLX_API const char* rlx_exec_last_error(const rlx_exec* e);
/* A new executable sharing e's compiled code (the specialised graph, memory
 * plan and step list of every binding compiled so far; nothing is compiled
 * again) with its own device arena. The params' values are copied; inputs,
 * feeds other than the device state, the output selection, the seed and the
 * active extent start afresh, as after rlx_compile. The two are independent
 * at run time: either may be run, changed or destroyed (in any order, from
 * different threads) without affecting the other. On failure the message is
 * on e. */
RLX_API rlx_status rlx_exec_clone(const rlx_exec* e, rlx_exec** out_exec);
/* rlx_compile keeps what it compiled in a process-wide cache (bounded by
 * RLX_COMPILE_CACHE entries, 64 by default, 0 turns it off, and
 * RLX_COMPILE_CACHE_BYTES host bytes), so compiling an identical graph again
 * for the same device, strict mode and device-state pairs (also per binding
 * of its symbols) reuses the specialised graph, plan and steps; each
 * executable still has its own arena and backend state. Identical means the
 * same structure, types, attributes, names and constant values (compared in
 * full, not by a hash). This drops the cache's entries; executables that
 * use them keep working. */
RLX_API void rlx_compile_cache_clear(void);

/* Params: src_dtype is the dtype of `data`; it must equal the param's dtype, or
 * be f32 (converted to the param's float dtype). bytes must match exactly. */
RLX_API rlx_status rlx_exec_set_param(rlx_exec* e, const char* name, rlx_dtype src_dtype,
                                      const void* data, size_t bytes);
/* Inputs: dtype must equal the input's; shape must match (symbolic dims are
 * bound by it). The data is copied. */
RLX_API rlx_status rlx_exec_set_input(rlx_exec* e, const char* name, rlx_dtype dtype,
                                      const rlx_dim* shape, int32_t rank, const void* data,
                                      size_t bytes);
RLX_API rlx_status rlx_exec_set_seed(rlx_exec* e, uint64_t seed);
/* Runs the leading dim of `extent_symbol` tensors at n <= the compiled bound. */
RLX_API rlx_status rlx_exec_set_active_extent(rlx_exec* e, int64_t n);
/* After every run, copy output `output_index` (or its row `row` along dim 0
 * when row >= 0) into input `input_name`, on the device. */
RLX_API rlx_status rlx_exec_feed(rlx_exec* e, const char* input_name, int32_t output_index,
                                 int64_t row);
/* Only these outputs are read back after a run (n = -1: all). */
RLX_API rlx_status rlx_exec_select_outputs(rlx_exec* e, const int32_t* indices, int32_t n);
RLX_API rlx_status rlx_exec_run(rlx_exec* e);

RLX_API int32_t rlx_exec_output_count(const rlx_exec* e);
/* Shape after the last run (or as compiled before any run). */
RLX_API rlx_status rlx_exec_output_type(const rlx_exec* e, int32_t index, rlx_dtype* out_dtype,
                                        int32_t* out_rank, int64_t* out_shape);
/* Copies output `index` converted to `dtype` (same dtype, or any float dtype
 * from a float output); bytes must be at least the converted size. */
RLX_API rlx_status rlx_exec_read_output(const rlx_exec* e, int32_t index, rlx_dtype dtype,
                                        void* dst, size_t bytes);
/* The graph's inputs and params as compiled (see rlx_graph_get_input); the
 * strings belong to the executable. */
RLX_API int32_t rlx_exec_input_count(const rlx_exec* e);
RLX_API rlx_status rlx_exec_get_input(const rlx_exec* e, int32_t index, rlx_value_info* out_info);
RLX_API int32_t rlx_exec_param_count(const rlx_exec* e);
RLX_API rlx_status rlx_exec_get_param(const rlx_exec* e, int32_t index, rlx_value_info* out_info);
/* Graphviz view (as rlx_graph_print_dot) of the graph after the compiler's
 * passes (decomposition, fusion) at the current binding;
 * RLX_FAILED_PRECONDITION while a symbol is still unbound. */
RLX_API rlx_status rlx_exec_print_dot(const rlx_exec* e, const char* title, char** out_text);
/* Device milliseconds of the last rlx_exec_run on the calling thread, where
 * the backend measures them (CUDA with RLX_CUDA_TIMING=1 at compile time:
 * CUDA events around the run's device work); -1 when none was measured.
 * RLX_UNIMPLEMENTED (*out_ms = -1) on backends that never measure. For
 * benchmarks. */
RLX_API rlx_status rlx_exec_last_device_ms(const rlx_exec* e, double* out_ms);
/* Per-step trace: every later run of e adds one Chrome trace-event ("ph"
 * "X", microseconds) per step to `path`, which Perfetto and chrome://tracing
 * load: name "<op> (<kernel or variant>)", cat the backend, args the step
 * index, node, output shape and dtype. Executables tracing to one path
 * share it (one process row each); the file is rewritten whole when the
 * last of them is destroyed and at exit. NULL or "" stops tracing. Steps
 * are timed on the device where the backend can (CUDA events, Vulkan and
 * WebGPU timestamps), so tracing slows runs (CUDA runs without its graph).
 * The RLX_TRACE environment variable does the same for every executable
 * (the builds behind an executable with input-valued shapes, and trainers,
 * trace through it only). RLX_INVALID_ARGUMENT if the file cannot be
 * written. */
RLX_API rlx_status rlx_exec_set_trace(rlx_exec* e, const char* path);

/* Copies row `row` (along dim 0) of output `index`. */
RLX_API rlx_status rlx_exec_read_output_row(const rlx_exec* e, int32_t index, int64_t row,
                                            rlx_dtype dtype, void* dst, size_t bytes);

/* Dispatch report: per op kind native / fused / decomposed / host fallback
 * counts, arena bytes, sum of tensor bytes, peak-live lower bound, launch
 * count. *out_text is malloc'd (rlx_free). */
RLX_API rlx_status rlx_exec_report(const rlx_exec* e, char** out_text);

typedef struct rlx_memory_stats {
  uint64_t arena_bytes;
  uint64_t tensor_bytes;     /* sum of all planned tensor bytes */
  uint64_t peak_live_bytes;  /* lower bound: max bytes live at one schedule position */
  int32_t launches;          /* steps per run */
  /* device memory the backend holds beside the arena for the programs
   * built so far: scratch, library workspaces (cuBLASLt, cuDNN), GEMM
   * padding buffers (the CUDA backend counts these; the others report 0) */
  uint64_t backend_bytes;
} rlx_memory_stats;
RLX_API rlx_status rlx_exec_memory_stats(const rlx_exec* e, rlx_memory_stats* out_stats);

/* ------------------------------------------------------------------ training */

/* A training step compiled once: forward, backward (rlx_graph_grad) and the
 * optimizer update in one executable, whose trainable params and optimizer
 * state live on the device between steps. */
typedef struct rlx_trainer rlx_trainer;

typedef enum rlx_optimizer {
  RLX_OPTIMIZER_SGD = 0,
  RLX_OPTIMIZER_ADAM = 1,
  RLX_OPTIMIZER_ADAMW = 2,
} rlx_optimizer;

typedef struct rlx_train_options {
  rlx_optimizer optimizer;
  float lr;
  rlx_sgd_desc sgd;   /* SGD's momentum, dampening, weight decay, nesterov */
  rlx_adam_desc adam; /* Adam / AdamW's betas, eps, weight decay */
  float clip_norm;    /* > 0: scale gradients so their global L2 norm is <= clip_norm */
  int32_t accumulate; /* micro-steps per update (>= 1): gradients are summed and
                         averaged, params change on every accumulate-th step */
  /* f16 training: the loss is multiplied by loss_scale before backward and the
   * gradients divided by it (0 = 1). With dynamic_loss_scale a step whose
   * gradients hold Inf/NaN is skipped and the scale halves; it doubles after
   * 2000 good steps. */
  float loss_scale;
  int32_t dynamic_loss_scale;
  /* Params that stay fixed (not trained; plain params of the executable). */
  const char* const* frozen;
  int32_t n_frozen;
  /* 1: the gradients are outputs read with rlx_trainer_read_grad (tests). */
  int32_t keep_grads;
} rlx_train_options;

/* PyTorch's defaults for the optimizer: lr 1e-3 (SGD 1e-2), betas 0.9 /
 * 0.999, eps 1e-8, weight decay 0 (AdamW 0.01), no clipping, accumulate 1. */
RLX_API void rlx_train_options_init(rlx_train_options* o, rlx_optimizer optimizer);
/* Compiles the training step of `loss` (a scalar float value of g) on
 * device. Every float param of g not in frozen is trained. copt may be NULL;
 * copt->precision bf16 / f16 computes forward and backward in that dtype
 * with f32 master weights and optimizer state. The message of a failure is
 * on g. */
RLX_API rlx_status rlx_train_compile(rlx_graph* g, rlx_tensor loss, const char* device,
                                     const rlx_compile_options* copt,
                                     const rlx_train_options* topt, rlx_trainer** out);
RLX_API void rlx_trainer_destroy(rlx_trainer* t);
RLX_API const char* rlx_trainer_last_error(const rlx_trainer* t);
/* Sets (initial value, or a value loaded elsewhere) or reads a param,
 * trained or frozen, as rlx_exec_set_param does. A read gives the value
 * after the last step. */
RLX_API rlx_status rlx_trainer_set_param(rlx_trainer* t, const char* name, rlx_dtype src_dtype,
                                         const void* data, size_t bytes);
RLX_API rlx_status rlx_trainer_read_param(rlx_trainer* t, const char* name, rlx_dtype dtype,
                                          void* dst, size_t bytes);
/* Inputs of the step (the batch), as rlx_exec_set_input. */
RLX_API rlx_status rlx_trainer_set_input(rlx_trainer* t, const char* name, rlx_dtype dtype,
                                         const rlx_dim* shape, int32_t rank, const void* data,
                                         size_t bytes);
/* Learning rate of the next steps (a schedule changes it between steps). */
RLX_API rlx_status rlx_trainer_set_lr(rlx_trainer* t, float lr);
/* One step: forward, backward, and the update (every accumulate-th call).
 * *out_loss (may be NULL) is the loss of this step's forward pass, before
 * its update. */
RLX_API rlx_status rlx_trainer_step(rlx_trainer* t, float* out_loss);
/* Updates made so far (the optimizer's t). */
RLX_API int64_t rlx_trainer_step_count(const rlx_trainer* t);
/* With keep_grads: the gradient of a trained param from the last step
 * (unscaled, before clipping, summed over an accumulation's micro-steps). */
RLX_API rlx_status rlx_trainer_read_grad(rlx_trainer* t, const char* name, rlx_dtype dtype,
                                         void* dst, size_t bytes);
/* Checkpoint: writes every param (trained and frozen), the optimizer state
 * and the step count into directory dir (created if missing) as .npy files
 * plus a small text manifest; load restores them into a trainer compiled
 * from the same graph and options, so training resumes where it stopped
 * (bit-exact on the CPU). */
RLX_API rlx_status rlx_trainer_save(rlx_trainer* t, const char* dir);
RLX_API rlx_status rlx_trainer_load(rlx_trainer* t, const char* dir);
/* The executable that runs the step (for rlx_exec_report, memory stats,
 * timing); it belongs to the trainer. */
RLX_API rlx_exec* rlx_trainer_exec(rlx_trainer* t);

/* ------------------------------------------------------------------ quantized matmul (Tier 4)
 * DequantMatMul: y[..., N] = x[..., K] . W^T, where W [N, K] is stored
 * quantized row by row along K (the GGUF / ggml layout: each of the N rows
 * is K / block blocks, or K / group groups with scales kept apart). W is
 * never materialised in f32: kernels dequantize a block at a time.
 *
 * Inputs (rlx_graph_dequant_matmul):
 *   x      f32, f16, bf16 or f64 [..., K]; y has x's dtype, [..., N].
 *   w      u8 [N, row_bytes]: the raw bytes (set as a param with
 *          rlx_exec_set_param(e, name, RLX_U8, bytes, N * row_bytes)).
 *          row_bytes = K / block * block_bytes (rlx_quant_row_bytes).
 *   scale  the schemes with scales kept apart: [N, K / group] f32, f16 or
 *          bf16 (NVFP4: u8 [N, K / 16], E4M3 bits); RLX_NONE for GGUF.
 *   aux    zero points of the asymmetric schemes (u8 [N, K / group]); the
 *          global scale of NVFP4 (f32, one element); else RLX_NONE.
 * group: elements per scale group; 0 takes the scheme's block (GGUF: 32 or
 * 256, fixed; NVFP4: 16, fixed; the others need a group dividing K, even
 * for Int4Block).
 * Element values (q the stored code of element k, g = k / group):
 *   GGUF Q*_0/1, Q*_K: exactly as ggml's dequantization (bit for bit equal
 *     to gguf-py's numpy reference, f32);
 *   INT8_SYM: q int8, w = q * scale[n, g];  INT8_ASYM: q u8, w = (q -
 *     zero[n, g]) * scale[n, g];
 *   INT4_SYM / INT4_ASYM: two codes per byte, element 2i in the low
 *     nibble; SYM q is a signed nibble (-8..7), ASYM q is 0..15 minus the
 *     zero point (0..15);
 *   FP8_E4M3 / FP8_E5M2: w = fp8(q) * scale[n, g] (e4m3fn / e5m2 codes);
 *   NVFP4: E2M1 codes (low nibble first), w = e2m1(q) * (e4m3(scale[n,
 *     k / 16]) * global), the product in f32.
 * The dot products accumulate in f32 or wider. Gradient: dx = dy . W
 * (a DequantMatMul in the transposed role); w and its scales get none.
 * The CPU has a fused-dequant GEMV for decode (few rows of x) and
 * dequantized tiles into its SGEMM for prefill; Vulkan and WebGPU run
 * every scheme natively (a fused-dequant GEMV for up to 4 rows of x,
 * shared-memory tiles of dequantized W above that, the transposed role);
 * CUDA has a fused-dequant GEMV for up to 8 rows of the GGUF schemes,
 * tensor-core tiles for half x and f32 tiles for the rest (f64 x runs on
 * the host fallback: the dispatch report's host column). */
typedef enum rlx_quant_scheme {
  RLX_QUANT_Q4_0 = 0,
  RLX_QUANT_Q4_1 = 1,
  RLX_QUANT_Q5_0 = 2,
  RLX_QUANT_Q5_1 = 3,
  RLX_QUANT_Q8_0 = 4,
  RLX_QUANT_Q2_K = 5,
  RLX_QUANT_Q3_K = 6,
  RLX_QUANT_Q4_K = 7,
  RLX_QUANT_Q5_K = 8,
  RLX_QUANT_Q6_K = 9,
  RLX_QUANT_INT8_SYM = 10,
  RLX_QUANT_INT8_ASYM = 11,
  RLX_QUANT_INT4_SYM = 12,
  RLX_QUANT_INT4_ASYM = 13,
  RLX_QUANT_FP8_E4M3 = 14,
  RLX_QUANT_FP8_E5M2 = 15,
  RLX_QUANT_NVFP4 = 16,
  RLX_QUANT_COUNT
} rlx_quant_scheme;

/* The scheme's text name ("q4_k", "int8_sym", "nvfp4"; NULL if out of
 * range) and, by name, the scheme (RLX_NOT_FOUND otherwise). */
RLX_API const char* rlx_quant_scheme_name(rlx_quant_scheme scheme);
RLX_API rlx_status rlx_quant_scheme_from_name(const char* name, rlx_quant_scheme* out);
/* Bytes of one stored row of K elements (group as in the builder; 0 the
 * scheme's block). INVALID_ARGUMENT when K or the group does not fit the
 * scheme; out_error (may be NULL) gets the message. */
RLX_API rlx_status rlx_quant_row_bytes(rlx_quant_scheme scheme, int64_t K, int32_t group,
                                       int64_t* out_bytes, char* out_error, size_t error_cap);
RLX_API rlx_status rlx_graph_dequant_matmul(rlx_graph* g, rlx_tensor x, rlx_tensor w,
                                            rlx_tensor scale, rlx_tensor aux,
                                            rlx_quant_scheme scheme, int32_t group,
                                            rlx_tensor* out);
/* Quantizes f32 rows w [N, K] into a scheme with scales kept apart (INT8,
 * INT4, FP8, NVFP4): w_out gets N * row_bytes bytes, scale_out N * K /
 * group f32 values (NVFP4: u8 E4M3 codes, N * K / 16), zero_out (ASYM
 * schemes, else NULL) N * K / group u8 zero points, global_out (NVFP4,
 * else NULL) one f32. Per group: SYM scale = max|w| / qmax (127, 7; FP8
 * 448, 57344) and q = round half even(w / scale) clamped (FP8: encoded,
 * saturating); ASYM over [min(w, 0), max(w, 0)]: scale = range / (255,
 * 15), zero = round(-min / scale), q = round(w / scale) + zero clamped;
 * NVFP4 global = max|w| / (448 * 6), each 16's scale the E4M3 code of
 * max|w| / 6 / global, codes the nearest E2M1 value (ties to the even
 * code). All arithmetic in f32. A zero group gets scale 0, codes 0. */
RLX_API rlx_status rlx_quantize_rows(rlx_quant_scheme scheme, int32_t group, const float* w,
                                     int64_t N, int64_t K, void* w_out, void* scale_out,
                                     uint8_t* zero_out, float* global_out);

/* ------------------------------------------------------------------ grouped matmul (Tier 4, MoE)
 * GroupedMatMul: a matmul whose weight is picked per row from E experts.
 *   x    [..., K] float.
 *   w    [E, N, K] with transpose_b = 1 (each expert a Linear weight
 *        [out, in], as Hugging Face and GGUF store experts: no transposed
 *        copy needed), or [E, K, N] with transpose_b = 0; x's dtype.
 *   idx  i32 / i64 expert of each row: shaped like x's leading dims, or
 *        those dims plus [k] so that k experts read the same row of x
 *        (top-k routing: x [T, K], idx [T, k] -> y [T, k, N]).
 * y = idx's shape + [N]: y[r] = x[row of r] . W[idx[r]] (W[e] as [K, N]).
 * An index outside [0, E) fails the run (OUT_OF_RANGE). Gradients: dx
 * (the same op over dy with transpose_b flipped, summed over the k that
 * share a row) and dw (one-hot over the experts, then a MatMul); idx has
 * none (an integer choice).
 * DequantGroupedMatMul: the same with w stored quantized as DequantMatMul
 * stores it, per expert: w u8 [E, N, row_bytes] (rows along K), scale /
 * aux [E, N, K / group] (NVFP4's global scale: one f32 for all experts),
 * scheme and group as in rlx_graph_dequant_matmul (GGUF's *_exps tensors
 * are exactly this layout). Gradient: dx only, like DequantMatMul. */
RLX_API rlx_status rlx_graph_grouped_matmul(rlx_graph* g, rlx_tensor x, rlx_tensor w,
                                            rlx_tensor idx, int32_t transpose_b,
                                            rlx_tensor* out);
RLX_API rlx_status rlx_graph_dequant_grouped_matmul(rlx_graph* g, rlx_tensor x, rlx_tensor w,
                                                    rlx_tensor idx, rlx_tensor scale,
                                                    rlx_tensor aux, rlx_quant_scheme scheme,
                                                    int32_t group, rlx_tensor* out);

/* ------------------------------------------------------------------ safetensors */

/* Hugging Face safetensors checkpoints, memory-mapped: a .safetensors file,
 * a model.safetensors.index.json (its weight_map names the shard file of
 * every tensor; the shards lie beside it), or a folder holding either (the
 * index file if present, else model.safetensors, else every *.safetensors
 * file in it). The header is checked in full before any tensor is given
 * out: dtypes, shapes, data_offsets inside the data region, not
 * overlapping, and bytes == element count x dtype size. A bad file is an
 * error naming the file, the tensor and what is wrong; never a crash.
 * dtypes: F64 F32 F16 BF16 I64 I32 I16 I8 U64 U32 U16 U8 BOOL F8_E4M3
 * (f8e4m3fn) F8_E5M2 (f8e5m2); others are RLX_UNIMPLEMENTED. */
typedef struct rlx_safetensors rlx_safetensors;

typedef struct rlx_safetensors_tensor {
  const char* name;   /* as in the header (valid until close) */
  rlx_dtype dtype;
  int32_t rank;       /* 0 for a scalar */
  int64_t shape[RLX_MAX_RANK];
  uint64_t bytes;     /* element count x dtype size */
  /* bytes of data in the mapping, little-endian, row-major. Not aligned to
   * the dtype in general (the header length decides): copy, do not cast. */
  const void* data;
  int32_t shard;      /* which file holds it (rlx_safetensors_shard_path) */
} rlx_safetensors_tensor;

/* Opens path (file, index file or folder, see above). On failure *out is
 * NULL and, if out_error is not NULL, it receives a malloc'd message
 * (rlx_free): NOT_FOUND for a missing file, INVALID_ARGUMENT for a
 * malformed one, UNIMPLEMENTED for an unknown dtype or a rank over
 * RLX_MAX_RANK, and UNIMPLEMENTED when the library was built without
 * json-c. */
RLX_API rlx_status rlx_safetensors_open(const char* path, rlx_safetensors** out,
                                        char** out_error);
/* Unmaps the files; the names, metadata and data pointers die with it. */
RLX_API void rlx_safetensors_close(rlx_safetensors* st);
/* Message of the last failed call on st ("" if none). */
RLX_API const char* rlx_safetensors_last_error(const rlx_safetensors* st);
/* Tensors of every shard, in the order of their files' headers (shards in
 * the order of the index's first mention). 0 for NULL. */
RLX_API int32_t rlx_safetensors_count(const rlx_safetensors* st);
/* Fills *out for tensor index; OUT_OF_RANGE outside [0, count). */
RLX_API rlx_status rlx_safetensors_get(const rlx_safetensors* st, int32_t index,
                                       rlx_safetensors_tensor* out);
/* By name across every shard (a name held twice is refused at open);
 * NOT_FOUND (message on st) when no tensor has that name. */
RLX_API rlx_status rlx_safetensors_find(const rlx_safetensors* st, const char* name,
                                        rlx_safetensors_tensor* out);
/* The __metadata__ pairs of every shard, in file order (a value that is
 * not a JSON string is given as its JSON text). */
RLX_API int32_t rlx_safetensors_metadata_count(const rlx_safetensors* st);
RLX_API rlx_status rlx_safetensors_metadata(const rlx_safetensors* st, int32_t index,
                                            const char** out_key, const char** out_value);
/* The files opened: 1 for a single file. */
RLX_API int32_t rlx_safetensors_shard_count(const rlx_safetensors* st);
RLX_API const char* rlx_safetensors_shard_path(const rlx_safetensors* st, int32_t shard);

/* ------------------------------------------------------------------ LLMs from config.json */

/* Decoder-only transformer LLMs from a Hugging Face checkpoint folder
 * (config.json + safetensors, see rlx_safetensors_open): the forward graph
 * built with the graph API above, its params named as the checkpoint's
 * tensors. Architectures: Llama (1/2/3: GQA, rope_scaling "linear" and
 * "llama3"), Qwen2 (q/k/v biases), Qwen3 (q_norm / k_norm over each head),
 * Mistral (sliding-window attention), GPT-2 (HF Conv1D weights [in, out]
 * used as stored; names with or without the "transformer." prefix) and
 * Gemma-2 (embedding times sqrt(hidden_size), rounded to the checkpoint's
 * torch_dtype as HF does; RmsNorm weights w applied as 1 + w). */
typedef enum rlx_llm_arch {
  RLX_LLM_LLAMA = 0,
  RLX_LLM_QWEN2 = 1,
  RLX_LLM_QWEN3 = 2,
  RLX_LLM_MISTRAL = 3,
  RLX_LLM_GPT2 = 4,   /* learned positions, LayerNorm with bias, GELU-tanh MLP, fused QKV */
  RLX_LLM_GEMMA2 = 5, /* (1 + w) RmsNorms around both blocks, GELU-tanh gated MLP, softcaps,
                         sliding window on even layers */
} rlx_llm_arch;

typedef enum rlx_llm_rope_scaling {
  RLX_LLM_ROPE_NONE = 0,
  RLX_LLM_ROPE_LINEAR = 1, /* positions divided by factor */
  RLX_LLM_ROPE_LLAMA3 = 2, /* Llama 3.1's per-frequency scaling (factor, low/high freq factors,
                              original_max_position_embeddings) */
} rlx_llm_rope_scaling;

/* The model's hyperparameters, as config.json gives them (HF field names in
 * the comments); a GGUF file's "{arch}.*" metadata fills the same struct
 * (rlx_llm_load): context_length, embedding_length, feed_forward_length,
 * block_count, attention.head_count / head_count_kv / key_length /
 * layer_norm_rms_epsilon / sliding_window, rope.freq_base, rope.scaling.
 * type (none, linear) and .factor; GPT-2's attention.layer_norm_epsilon;
 * Gemma-2's attn_logit_softcapping / final_logit_softcapping /
 * attention.sliding_window_pattern; vocab_size from token_embd's shape,
 * tied when the file has no output.weight. */
typedef struct rlx_llm_config {
  rlx_llm_arch arch;            /* model_type (or architectures[0]) */
  int64_t vocab_size;           /* vocab_size */
  int64_t hidden_size;          /* hidden_size */
  int64_t intermediate_size;    /* intermediate_size (the MLP's width) */
  int32_t num_layers;           /* num_hidden_layers */
  int32_t num_heads;            /* num_attention_heads */
  int32_t num_kv_heads;         /* num_key_value_heads (default num_heads) */
  int32_t head_dim;             /* head_dim (default hidden_size / num_heads) */
  double rope_theta;            /* rope_theta (default 10000) */
  rlx_llm_rope_scaling rope_scaling; /* rope_scaling.rope_type (or .type) */
  double rope_factor;           /* rope_scaling.factor */
  double rope_low_freq_factor;  /* rope_scaling.low_freq_factor (llama3) */
  double rope_high_freq_factor; /* rope_scaling.high_freq_factor (llama3) */
  int64_t rope_original_max_positions; /* rope_scaling.original_max_position_embeddings */
  float rms_norm_eps;           /* rms_norm_eps (default 1e-6) */
  int32_t tie_word_embeddings;  /* 1: the logits use embed_tokens.weight (no lm_head.weight) */
  int32_t attention_bias;       /* 1: q/k/v_proj have biases (Qwen2 always; else attention_bias) */
  int32_t qk_norm;              /* 1: RmsNorm of each q / k head before RoPE (Qwen3) */
  int32_t sliding_window;       /* > 0: a query sees the last sliding_window keys (Mistral) */
  int64_t max_positions;        /* max_position_embeddings (GPT-2: n_positions) */
  /* Gemma-2 (0 = off for the other archs). GPT-2's LayerNorm eps is
   * rms_norm_eps (layer_norm_epsilon). */
  float attn_logit_softcap;       /* attn_logit_softcapping: s = cap * tanh(s / cap) */
  float final_logit_softcap;      /* final_logit_softcapping, on the logits */
  float query_pre_attn_scalar;    /* > 0: scores scaled by its ^-1/2 (not head_dim's) */
  int32_t sliding_window_pattern; /* > 0: layer i slides only when i % pattern < pattern - 1
                                     (Gemma-2: 2, the even layers; 1: none, as llama.cpp
                                     reads it); 0: every layer */
  float embed_scale;              /* > 0: embeddings multiplied by it (Gemma: sqrt(hidden)) */
  /* Mixture of experts (Mixtral: model_type "mixtral", arch MISTRAL; GGUF
   * {arch}.expert_count / .expert_used_count): > 0 replaces each layer's
   * MLP by num_experts SiLU-gated experts of intermediate_size, the top
   * num_experts_per_tok picked per token by a router and mixed by the
   * softmax of their router logits. 0: a dense MLP. */
  int32_t num_experts;          /* num_local_experts */
  int32_t num_experts_per_tok;  /* num_experts_per_tok (1 .. num_experts) */
} rlx_llm_config;

/* Fills *out from the text of a config.json (len bytes; need not end in
 * NUL). Unknown fields are ignored; a missing required field, a value out
 * of range, or an unsupported feature (another rope_scaling type, Qwen's
 * use_sliding_window, an activation other than silu, or gelu_new /
 * gelu_pytorch_tanh for GPT-2 and Gemma-2, Gemma-2 layer_types other than
 * sliding / full alternating) is an error naming the field. out_error as
 * in rlx_safetensors_open. */
RLX_API rlx_status rlx_llm_config_parse(const char* json_text, size_t len, rlx_llm_config* out,
                                        char** out_error);
/* The same from a config.json file, or a folder holding one. */
RLX_API rlx_status rlx_llm_config_load(const char* path, rlx_llm_config* out, char** out_error);

typedef struct rlx_llm_options {
  int64_t batch;     /* > 0: static batch size; 0: symbolic dim "B" */
  int64_t seq_len;   /* > 0: static tokens per run; 0: symbolic dim "T" */
  int64_t max_seq;   /* rows of the RoPE tables (highest position + 1); 0: the smaller of
                        max_position_embeddings and 4096 */
} rlx_llm_options;
/* Fills defaults: batch and seq_len symbolic, max_seq 0. */
RLX_API void rlx_llm_options_init(rlx_llm_options* o);

/* The forward graph of config c:
 *   inputs   "input_ids" i64 [B, T] (token ids), "positions" i64 [T] (the
 *            position of each token, 0 .. T-1 for a whole prompt; each
 *            < max_seq), shared by the batch
 *   params   the checkpoint's tensors by their HF names, f32 (half weights
 *            are converted to f32 when set), plus "rope.cos" and "rope.sin"
 *            [max_seq, head_dim / 2], which rlx_llm_rope_tables fills
 *            (not for GPT-2: its "transformer.wpe.weight" [max_positions,
 *            hidden] is gathered at the positions instead)
 *   output   logits f32 [B, T, vocab_size], causal (sliding-window when
 *            the config has one; Gemma-2: on the layers its pattern
 *            picks) over the T tokens of the run.
 * Ops: Gather (embedding), RmsNorm, MatMul (weights [out, in] used
 * transposed, as stored; GPT-2's Conv1D [in, out] untransposed), Rope
 * (NeoX halves), Attention (GQA; Gemma-2's score scale and softcap),
 * SiLU-gated MLP (GPT-2: LayerNorm and a GELU-tanh MLP with biases;
 * Gemma-2: GELU-tanh gated); with num_experts (Mixtral) the MLP is routed:
 * router MatMul, TopK, Softmax over the k, GroupedMatMul per expert (params
 * "model.layers.N.block_sparse_moe.gate.weight" and
 * ".experts.J.{w1,w3,w2}.weight"). On failure out_error names the problem. */
RLX_API rlx_status rlx_llm_build_graph(const rlx_llm_config* c, const rlx_llm_options* o,
                                       rlx_graph** out_graph, char** out_error);
/* The RoPE tables of c (theta and rope_scaling): cos and sin, each
 * [n_positions, head_dim / 2] f32 row-major, computed in double. */
RLX_API rlx_status rlx_llm_rope_tables(const rlx_llm_config* c, int64_t n_positions, float* cos_out,
                                       float* sin_out);

/* A loaded model: config, graph and the open checkpoint. */
typedef struct rlx_llm rlx_llm;
/* path: a folder holding config.json and the safetensors file(s) (one
 * model.safetensors, an index and its shards, or any *.safetensors).
 * Builds the graph (o may be NULL: defaults) and checks that the
 * checkpoint holds every param with its shape and a float dtype (f32, f16,
 * bf16, f64), naming the first that is missing or wrong.
 * path may also be a GGUF file (general.architecture llama, qwen2, qwen3,
 * gpt2 or gemma2; Mistral files say llama, Mixtral files llama with
 * expert_count: their ffn_*_exps experts feed GroupedMatMul, quantized ones
 * raw to DequantGroupedMatMul): the config from its metadata (a missing
 * or bad key is an error naming it), params named as its tensors
 * ("token_embd.weight", "blk.N.attn_q.weight", ...). A quantized Linear
 * weight (Q4_0 .. Q6_K) is a u8 [out, row_bytes] param of a DequantMatMul
 * set with the file's blocks as they are; f16 / bf16 weights and a
 * quantized token_embd (Gather reads floats) become f32 when set. Llama's
 * q / k rows, which llama.cpp's converter permutes into adjacent RoPE
 * pairs, get GPT-J Rope; Qwen keeps NeoX halves; rope_freqs.weight (Llama
 * 3.1 scaling) divides the RoPE frequencies. Gemma-2 files hold 1 + w
 * in their norm weights (llama.cpp's converter adds the 1), used as they
 * are; their score scale is llama.cpp's (1 / sqrt(head_dim); the 46-layer
 * 27B: 1 / sqrt(hidden / heads)), their softcaps and window from the
 * gemma2.* keys (defaults 50, 30, 4096). */
RLX_API rlx_status rlx_llm_load(const char* path, const rlx_llm_options* o, rlx_llm** out,
                                char** out_error);
RLX_API void rlx_llm_destroy(rlx_llm* m);
RLX_API const char* rlx_llm_last_error(const rlx_llm* m);
RLX_API const rlx_llm_config* rlx_llm_get_config(const rlx_llm* m);
/* The forward graph (belongs to m; compile it with rlx_compile). */
RLX_API rlx_graph* rlx_llm_graph(rlx_llm* m);
/* Sets every param of e (compiled from rlx_llm_graph(m)) from the
 * checkpoint, converted to f32 (a GGUF file's quantized weights as raw
 * bytes), and the RoPE tables. Message on m. */
RLX_API rlx_status rlx_llm_set_params(rlx_llm* m, rlx_exec* e);

/* --- generation with a KV cache */
/* How the next token is drawn, on the device: the repetition penalty
 * (logits of the last repeat_last_n tokens divided by repeat_penalty when
 * positive, multiplied when negative), min-p (tokens below min_p times the
 * top probability dropped), then the Sample op's top-k, top-p and
 * temperature. temperature 0 is greedy (argmax). */
typedef struct rlx_llm_sampling {
  float temperature;     /* 0: greedy */
  int32_t top_k;         /* 0: off */
  float top_p;           /* 1: off */
  float min_p;           /* 0: off */
  float repeat_penalty;  /* 1: off */
  int32_t repeat_last_n; /* tokens the penalty looks back over (input "recent") */
} rlx_llm_sampling;
/* Fills defaults: greedy, top_p 1, min_p 0, repeat_penalty 1, repeat_last_n 64. */
RLX_API void rlx_llm_sampling_init(rlx_llm_sampling* s);

/* The KV-cache form of m's model (same params as rlx_llm_graph, set by
 * rlx_llm_set_params), for every arch rlx_llm_load takes: Llama, Qwen2,
 * Qwen3, Mistral, Mixtral, GPT-2 (learned positions gathered at the
 * run's positions: rows at most max_positions, else RLX_INVALID_ARGUMENT
 * naming the limit) and Gemma-2 (the window on the layers its pattern
 * names, the others causal; softcaps, query_pre_attn_scalar, embedding
 * scale as in the full forward). One graph serves prefill and decode: a
 * run takes T new tokens (T symbolic: a prefill chunk, or 1) at positions
 * start .. start + count - 1, writes their keys / values into per-layer
 * caches and attends to every cached position up to each token's own
 * (sliding window kept). Inputs:
 *   "input_ids" i64 [1, T], "positions" i64 [T], "start" i64 [1],
 *   "count" i64 [1] (tokens of the T that are real, >= 1: a chunk may be
 *   padded), "recent" i64 [repeat_last_n] (only with a penalty; vocab_size
 *   marks an empty slot; rlx_llm_cache_run fills it),
 *   "k_cache.L" / "v_cache.L" f32 [1, rows, num_kv_heads, head_dim] for
 *   each layer L (rows = rlx_llm_cache_rows: the RoPE tables' rows,
 *   max_seq or min(max_positions, 4096)).
 * Outputs: 0 "next" i64 [1, 1] (the token drawn from the last real
 * token's logits with s, NULL: greedy), 1 .. 2 * num_layers the updated
 * caches (k_cache.0, v_cache.0, k_cache.1, ...), last "logits" f32
 * [1, T, V] when all_logits, else [1, 1, V] of the last real token.
 * Compile it with rlx_llm_cache_compile_options, so the caches stay on the
 * device between runs (also across runs at different T: the runtime
 * carries device state over a switch of binding). The caller owns the
 * graph. Message on m. */
RLX_API rlx_status rlx_llm_build_cache_graph(rlx_llm* m, const rlx_llm_sampling* s,
                                             int32_t all_logits, rlx_graph** out_graph);
/* rlx_llm_set_params in pieces, for a progress display between them: sets
 * params first .. first + count - 1 of the graph (count of them:
 * rlx_llm_weight_count; the RoPE tables with the param rope.cos);
 * *out_done / *out_total (may be NULL): the file bytes of the params up to
 * the last one set / of all of them. Message on m. */
RLX_API int32_t rlx_llm_weight_count(const rlx_llm* m);
RLX_API rlx_status rlx_llm_set_weights(rlx_llm* m, rlx_exec* e, int32_t first, int32_t count,
                                       int64_t* out_done, int64_t* out_total);
/* Cache rows: the highest position + 1 the cache form can hold. */
RLX_API int64_t rlx_llm_cache_rows(const rlx_llm* m);
/* Sets o's device-state fields (the caches; the strings belong to m). */
RLX_API rlx_status rlx_llm_cache_compile_options(rlx_llm* m, rlx_compile_options* o);
/* Zeros every cache of e (needed once before the first run). */
RLX_API rlx_status rlx_llm_cache_reset(rlx_llm* m, rlx_exec* e);
/* One run of e (compiled from the cache graph): tokens ids[0 .. n) at
 * positions start .., padded to `chunk` tokens (chunk >= n; 0: n), recent
 * the last n_recent tokens for the penalty (ignored when the graph has
 * none). The next token is output 0 (rlx_exec_read_output). An error
 * when start + n exceeds the cache rows. Message on m. */
RLX_API rlx_status rlx_llm_cache_run(rlx_llm* m, rlx_exec* e, const int64_t* ids, int64_t n,
                                     int64_t chunk, int64_t start, const int64_t* recent,
                                     int64_t n_recent);


/* ------------------------------------------------------------------ GGUF files */

/* A GGUF model file (versions 2 and 3, little-endian), memory-mapped
 * read-only: metadata key/values, tensor infos, and pointers to each
 * tensor's bytes inside the map (quantized blocks as stored, never
 * converted). Everything is checked against the file's size at open: a
 * malformed file is RLX_INVALID_ARGUMENT (version 1, big-endian files and
 * unknown tensor types RLX_UNIMPLEMENTED) with a message naming the file,
 * the item and the problem; nothing is read outside the file afterwards.
 * As with any mapping, the file must not be truncated while it is open
 * (reading a tensor past the new end would fault). */
typedef struct rlx_gguf rlx_gguf;

/* Metadata value types, numbered as in the file. */
typedef enum rlx_gguf_type {
  RLX_GGUF_U8 = 0, RLX_GGUF_I8 = 1, RLX_GGUF_U16 = 2, RLX_GGUF_I16 = 3,
  RLX_GGUF_U32 = 4, RLX_GGUF_I32 = 5, RLX_GGUF_F32 = 6, RLX_GGUF_BOOL = 7,
  RLX_GGUF_STRING = 8, RLX_GGUF_ARRAY = 9, RLX_GGUF_U64 = 10, RLX_GGUF_I64 = 11,
  RLX_GGUF_F64 = 12
} rlx_gguf_type;

/* A string inside the map: len bytes, not NUL-terminated (valid until
 * rlx_gguf_close). */
typedef struct rlx_gguf_string {
  const char* data;
  uint64_t len;
} rlx_gguf_string;

/* One tensor. dims are in the file's order: dims[0] varies fastest (ggml's
 * ne[0]), so the row-major shape is dims reversed. type is the ggml type id
 * (0 f32, 1 f16, 2 q4_0, 8 q8_0, 12 q4_K, 30 bf16, ...). data points into the
 * map (read-only) and holds bytes bytes: for a block type, dims[0] is a
 * multiple of the block's element count and bytes = numel / block elements
 * x block bytes. offset is from the start of the file's data section. */
typedef struct rlx_gguf_tensor_info {
  const char* name;
  int32_t n_dims;
  int64_t dims[RLX_MAX_RANK];
  int64_t numel;
  uint32_t type;
  const char* type_name;
  uint64_t offset;
  uint64_t bytes;
  const void* data;
} rlx_gguf_tensor_info;

/* Opens and checks path. On failure *out is NULL and, if out_error is not
 * NULL, it receives a malloc'd message (rlx_free). */
RLX_API rlx_status rlx_gguf_open(const char* path, rlx_gguf** out, char** out_error);
RLX_API void rlx_gguf_close(rlx_gguf* g);
/* The message of the last failed call on g. */
RLX_API const char* rlx_gguf_last_error(const rlx_gguf* g);
RLX_API uint32_t rlx_gguf_version(const rlx_gguf* g);
/* general.alignment (32 when absent): every tensor offset is a multiple. */
RLX_API uint32_t rlx_gguf_alignment(const rlx_gguf* g);

/* Metadata. Keys are indexed 0..count-1 in file order. */
RLX_API int64_t rlx_gguf_kv_count(const rlx_gguf* g);
/* Index of key, or -1 when absent. */
RLX_API int64_t rlx_gguf_find_key(const rlx_gguf* g, const char* key);
RLX_API rlx_status rlx_gguf_key(const rlx_gguf* g, int64_t i, const char** out_key);
RLX_API rlx_status rlx_gguf_kv_type(const rlx_gguf* g, int64_t i, rlx_gguf_type* out_type);
/* Scalar getters: get_u64 / get_i64 take any integer type whose value fits
 * (and bool), get_f64 any number, get_bool a bool, get_string a string;
 * another type is RLX_INVALID_ARGUMENT naming the key and its type. */
RLX_API rlx_status rlx_gguf_get_u64(rlx_gguf* g, int64_t i, uint64_t* out);
RLX_API rlx_status rlx_gguf_get_i64(rlx_gguf* g, int64_t i, int64_t* out);
RLX_API rlx_status rlx_gguf_get_f64(rlx_gguf* g, int64_t i, double* out);
RLX_API rlx_status rlx_gguf_get_bool(rlx_gguf* g, int64_t i, int32_t* out);
RLX_API rlx_status rlx_gguf_get_string(rlx_gguf* g, int64_t i, rlx_gguf_string* out);
/* Arrays (of any scalar type or of strings; arrays of arrays are refused at
 * open): element type and length, then element j with the getters' rules.
 * rlx_gguf_array_data gives a numeric array's elements as stored
 * (little-endian, packed, possibly unaligned). */
RLX_API rlx_status rlx_gguf_array_info(rlx_gguf* g, int64_t i, rlx_gguf_type* out_elem_type,
                                       uint64_t* out_len);
RLX_API rlx_status rlx_gguf_array_data(rlx_gguf* g, int64_t i, const void** out_data);
RLX_API rlx_status rlx_gguf_array_u64(rlx_gguf* g, int64_t i, uint64_t j, uint64_t* out);
RLX_API rlx_status rlx_gguf_array_i64(rlx_gguf* g, int64_t i, uint64_t j, int64_t* out);
RLX_API rlx_status rlx_gguf_array_f64(rlx_gguf* g, int64_t i, uint64_t j, double* out);
RLX_API rlx_status rlx_gguf_array_bool(rlx_gguf* g, int64_t i, uint64_t j, int32_t* out);
RLX_API rlx_status rlx_gguf_array_string(rlx_gguf* g, int64_t i, uint64_t j,
                                         rlx_gguf_string* out);
RLX_API const char* rlx_gguf_type_name(rlx_gguf_type t);

/* Tensors, indexed 0..count-1 in file order. */
RLX_API int64_t rlx_gguf_tensor_count(const rlx_gguf* g);
/* Index of the tensor called name, or -1. */
RLX_API int64_t rlx_gguf_find_tensor(const rlx_gguf* g, const char* name);
RLX_API rlx_status rlx_gguf_tensor(rlx_gguf* g, int64_t i, rlx_gguf_tensor_info* out);
/* A ggml type's name ("q4_K") and block geometry (elements per block,
 * bytes per block; 1 and the element size for plain types). NULL /
 * RLX_UNIMPLEMENTED for an id this build does not know. */
RLX_API const char* rlx_ggml_type_name(uint32_t type);
RLX_API rlx_status rlx_ggml_type_block(uint32_t type, int64_t* out_block_elems,
                                       int64_t* out_block_bytes);


/* ------------------------------------------------------------------ tokenizers */

/* A tokenizer built from a GGUF file's tokenizer.ggml.* metadata (tokens,
 * scores, token_type, merges, bos / eos / unknown ids, add_bos_token,
 * add_eos_token, add_space_prefix, pre). Families:
 *   model "gpt2"   byte-level BPE; pre-tokenizers gpt-2 (also mpt, olmo,
 *                  jais, default), llama-bpe (Llama-3; also llama3,
 *                  smaug-bpe), qwen2, starcoder (also refact, command-r,
 *                  smollm). Needs a build with ICU (Unicode classes).
 *   model "llama"  SentencePiece with scores and <0xXX> byte fallback
 *                  (Llama 1/2, Mistral, Phi-3).
 * Another model or pre-tokenizer is RLX_UNIMPLEMENTED naming it. The
 * tokenizer copies what it needs: the GGUF may be closed afterwards. */
typedef struct rlx_tokenizer rlx_tokenizer;

RLX_API rlx_status rlx_tokenizer_from_gguf(rlx_gguf* g, rlx_tokenizer** out, char** out_error);
/* rlx_gguf_open + rlx_tokenizer_from_gguf + rlx_gguf_close; a folder or a
 * path ending in ".json" goes to rlx_tokenizer_from_hf instead. */
RLX_API rlx_status rlx_tokenizer_load(const char* path, rlx_tokenizer** out, char** out_error);
RLX_API void rlx_tokenizer_destroy(rlx_tokenizer* t);
RLX_API const char* rlx_tokenizer_last_error(const rlx_tokenizer* t);
/* "gpt2 (llama-bpe)", "llama (default)": model and pre-tokenizer. */
RLX_API const char* rlx_tokenizer_kind(const rlx_tokenizer* t);
RLX_API int32_t rlx_tokenizer_vocab_size(const rlx_tokenizer* t);
/* Begin / end of sequence ids, -1 when the vocab has none. */
RLX_API int32_t rlx_tokenizer_bos(const rlx_tokenizer* t);
RLX_API int32_t rlx_tokenizer_eos(const rlx_tokenizer* t);
/* The vocab's text of token id (its stored form: byte-level characters,
 * '▁' for spaces; not NUL-terminated). */
RLX_API rlx_status rlx_tokenizer_token_text(rlx_tokenizer* t, int32_t id, const char** out,
                                            size_t* out_len);

/* Encode flags. ADD_SPECIAL: BOS / EOS where the vocab asks for them.
 * PARSE_SPECIAL: control tokens written in the text ("<|eot_id|>") become
 * their ids (user-defined tokens always do); in decode, control tokens are
 * written out instead of dropped. */
enum { RLX_TOKENIZE_ADD_SPECIAL = 1, RLX_TOKENIZE_PARSE_SPECIAL = 2 };
/* Token ids of len bytes of UTF-8 text. *out_ids is malloc'd (rlx_free;
 * never NULL, even for no ids). */
RLX_API rlx_status rlx_tokenizer_encode(rlx_tokenizer* t, const char* text, size_t len,
                                        int32_t flags, int32_t** out_ids, int64_t* out_n);
/* The text of n ids, NUL-terminated and malloc'd (rlx_free); *out_len (may
 * be NULL) is its byte count. SentencePiece drops the space its prefix put
 * before the first word. An id outside the vocab is RLX_INVALID_ARGUMENT. */
RLX_API rlx_status rlx_tokenizer_decode(rlx_tokenizer* t, const int32_t* ids, int64_t n,
                                        int32_t flags, char** out_text, size_t* out_len);

/* A tokenizer from a Hugging Face checkpoint: path is its folder (reads
 * tokenizer.json, and when present tokenizer_config.json,
 * generation_config.json and chat_template.jinja) or a tokenizer.json
 * (the other files are looked for next to it). Mapped onto the families
 * above:
 *   model BPE, pre_tokenizer ByteLevel (GPT-2) or Sequence [Split(regex),
 *     ByteLevel] (Llama-3, Qwen2; the regex names the pre-tokenizer) or
 *     Sequence [Digits, ByteLevel] (StarCoder): byte-level BPE; merges as
 *     "a b" strings or ["a", "b"] pairs, rank = position.
 *   model BPE with byte_fallback, normalizer Prepend("▁") + Replace(" ",
 *     "▁") or pre_tokenizer Metaspace (split false; prepend_scheme first
 *     / always / never) (Llama-2, Mistral exported from SentencePiece):
 *     SentencePiece, a token's score = -(rank of the first merge that
 *     makes it); a token no merge makes is never merged into. Exact when
 *     the merges list every split of every token into two tokens, as the
 *     SentencePiece exports do.
 *   normalizer NFC (Qwen2) is applied to the text before encoding.
 * added_tokens: special -> control tokens, the others user-defined (their
 * lstrip / rstrip / single_word / normalized flags are not applied). BOS /
 * EOS from tokenizer_config.json (bos_token, eos_token), else
 * generation_config.json (bos_token_id, eos_token_id: its first when a
 * list, all of it in rlx_tokenizer_end_ids); add_bos_token / add_eos_token from tokenizer_config.json, else
 * from a TemplateProcessing post-processor. The chat template is
 * tokenizer_config.json's chat_template (or chat_template.jinja).
 * Other models, pre-tokenizers, regexes and normalizers are
 * RLX_UNIMPLEMENTED naming them; malformed files RLX_INVALID_ARGUMENT
 * naming the file and key. RLX_UNIMPLEMENTED in a build without json-c. */
RLX_API rlx_status rlx_tokenizer_from_hf(const char* path, rlx_tokenizer** out, char** out_error);
/* The vocab's chat template (a Jinja text: GGUF tokenizer.chat_template,
 * Hugging Face chat_template), NUL-terminated; NULL when it has none. */
RLX_API const char* rlx_tokenizer_chat_template(const rlx_tokenizer* t);
/* The ids generation should also end at (generation_config.json's
 * eos_token_id, every entry of a list, at most 8): their count, *out
 * (may be NULL) pointing into t. 0 for a GGUF vocab. */
RLX_API int32_t rlx_tokenizer_end_ids(const rlx_tokenizer* t, const int32_t** out);

#ifdef __cplusplus
}
#endif
#endif /* RLX_H */
