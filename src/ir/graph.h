/* Internal view of the graph IR: nodes, values, attributes. Everything in
 * src/ uses these structs; the public API (include/rlx.h) keeps them opaque. */
#ifndef RLX_IR_GRAPH_H
#define RLX_IR_GRAPH_H

#include "rlx.h"
#include "base/error.h"

typedef enum rlx_op {
#define OP(e, text, min_in, max_in, n_out, attrs, flags) RLX_OP_##e,
#include "ir/ops.def"
#undef OP
  RLX_OP_COUNT
} rlx_op;

typedef enum rlx_attr_id {
#define ATTR(e, text, kind, field) RLX_ATTR_##e,
#include "ir/attrs.def"
#undef ATTR
  RLX_ATTR_COUNT
} rlx_attr_id;
#define ATTR_BIT(e) (1ull << RLX_ATTR_##e)

enum {
  OPF_LEAF = 1u << 0,        /* Input / Param / Constant: no inputs, persistent */
  OPF_VIEW = 1u << 1,        /* output aliases input 0's bytes (no kernel) */
  OPF_ELEMENTWISE = 1u << 2, /* out[i] depends only on inputs at i (after broadcast) */
  OPF_DECLARED = 1u << 3,    /* output type comes from attrs.type, checked not inferred */
};

typedef struct rlx_op_info {
  const char* text;
  int32_t min_inputs, max_inputs, n_outputs;
  uint64_t attrs; /* ATTR_BIT mask */
  uint32_t flags; /* OPF_* */
} rlx_op_info;

/* Table indexed by rlx_op (defined in graph.c from ops.def). */
extern const rlx_op_info rlx_op_table[RLX_OP_COUNT];

/* A tensor type: dtype + shape (dims may be symbolic, see rlx_dim). */
typedef struct rlx_type {
  rlx_dtype dtype;
  int32_t rank;
  rlx_dim shape[RLX_MAX_RANK];
} rlx_type;

/* An attribute list of ints (pool kernel / strides / dilations, begin and
 * end pads of every dim). */
#define RLX_INTS_MAX (2 * RLX_MAX_RANK)
typedef struct rlx_ints {
  int32_t n;
  int64_t v[RLX_INTS_MAX];
} rlx_ints;

/* An attribute list of floats (Resize scales per dim, roi starts then ends). */
typedef struct rlx_floats {
  int32_t n;
  float v[RLX_INTS_MAX];
} rlx_floats;

/* All attributes any op can carry; each op uses the subset named in ops.def.
 * Unused fields are zero. */
typedef struct rlx_node_attrs {
  int32_t kind;     /* Binary: rlx_binary_op; Compare: rlx_compare_op;
                       Activation: rlx_activation; Reduce: rlx_reduce_op */
  char* name;       /* Input/Param name (owned by the graph) */
  void* data;       /* Constant bytes (owned by the graph) */
  size_t data_bytes;
  int32_t perm[RLX_MAX_RANK];
  int32_t axis;
  int64_t start, len;
  uint32_t axes;    /* bitmask of (non-negative) axes */
  int32_t keep_dim, exclusive, reverse, largest;
  int64_t k;
  int32_t transpose_a, transpose_b;
  int32_t act;      /* rlx_activation */
  float eps;
  int32_t num_heads, num_kv_heads, head_dim, layout, mask, window;
  float score_scale, softcap;
  int32_t n_rot, style;
  int32_t top_k;
  float top_p, temperature;
  /* Pool: kernel/strides/dilations per spatial dim; pads: begins of every
   * padded dim, then ends (ONNX order). Pad uses pads over every dim. */
  int32_t pool, pad_mode, d2s_mode; /* rlx_pool_kind, rlx_pad_mode, rlx_d2s_mode */
  rlx_ints kernel, strides, pads, dilations;
  int32_t ceil_mode, count_include_pad, block;
  float value;
  /* Resize: output sizes of every dim, the ONNX scale of every dim (the
   * coordinate transform divides by it), roi (starts, then ends) for
   * tf_crop_and_resize; `value` is the extrapolation value. */
  int32_t resize_mode, coord_mode, nearest_mode, exclude_outside;
  float cubic_a;
  rlx_ints sizes;
  rlx_floats scales, roi;
  /* GridSample: resize_mode (nearest / linear / cubic), grid_padding,
   * align_corners. RoiAlign: pool (max / avg), sizes = [out_h, out_w],
   * sampling_ratio, spatial_scale, align_corners = half-pixel offset. */
  int32_t grid_padding, align_corners, sampling_ratio;
  float spatial_scale;
  /* Conv / ConvTranspose / Im2Col (strides, pads, dilations above) */
  int32_t groups, conv_layout; /* conv_layout: rlx_conv_layout */
  rlx_ints output_padding;
  /* GroupNorm: groups (above) of channels; LRN: window size across
   * channels and y = x / (bias + alpha / size * sum of squares)^beta. */
  int32_t size;
  float alpha, beta, bias;
  /* CrossEntropy: the target value that counts for nothing, label
   * smoothing in [0, 1]. SGD / Adam: constants by rlx_opt_slot. */
  int64_t ignore_index;
  float label_smoothing;
  rlx_floats opt;
  /* DequantMatMul: rlx_quant_scheme (its group is `block`). */
  int32_t quant_scheme;
  /* Declared output type for OPF_DECLARED ops (Input, Param, Constant,
   * Reshape, Cast, Expand); ignored otherwise. */
  rlx_type type;
} rlx_node_attrs;

/* Conv layouts (rlx_conv_layout): whether x, residual and y are
 * [N, spatial..., C], and the axis of w holding spatial dim i (w is
 * [O, I, k...] except channels_last_ohwi's [O, k..., I]) and the input
 * channels (i = -1). */
static inline int rlx_conv_layout_is_last(int32_t layout) {
  return layout == RLX_CONV_CHANNELS_LAST || layout == RLX_CONV_CHANNELS_LAST_OHWI;
}
static inline int32_t rlx_conv_w_axis(int32_t layout, int32_t ns, int32_t i) {
  if (layout == RLX_CONV_CHANNELS_LAST_OHWI) return i < 0 ? ns + 1 : 1 + i;
  return i < 0 ? 1 : 2 + i;
}

/* Resize: at most this many dims change (the kernels' per-dim tables). */
#define RLX_RESIZE_MAX_DIMS 3

/* Whether Resize dim d (input size in, output size out) samples anything
 * but the identity: a size change, a scale other than 1, or a crop. */
static inline int rlx_resize_dim_moves(const rlx_node_attrs* a, int32_t d, int64_t in,
                                       int64_t out) {
  int32_t r = a->scales.n;
  int crop = a->coord_mode == RLX_COORD_TF_CROP_AND_RESIZE &&
             (a->roi.v[d] != 0.0f || a->roi.v[r + d] != 1.0f);
  float s = a->scales.v[d];
  return in != out || (s != 0.0f && s != 1.0f) || crop;
}

/* Slots of the optimizer updates' `opt` attribute. */
enum rlx_opt_slot {
  RLX_OPT_SGD_MOMENTUM = 0, RLX_OPT_SGD_DAMPENING = 1, RLX_OPT_SGD_WEIGHT_DECAY = 2,
  RLX_OPT_SGD_NESTEROV = 3, RLX_OPT_SGD_COUNT = 4,
  RLX_OPT_ADAM_BETA1 = 0, RLX_OPT_ADAM_BETA2 = 1, RLX_OPT_ADAM_EPS = 2,
  RLX_OPT_ADAM_WEIGHT_DECAY = 3, RLX_OPT_ADAM_DECOUPLED = 4, RLX_OPT_ADAM_COUNT = 5,
};

#define RLX_MAX_OUTPUTS 3 /* LayerNormBackward, AttentionBackward: three gradients */

typedef struct rlx_node {
  rlx_op op;
  rlx_node_attrs a;
  int32_t n_in;
  rlx_tensor in[RLX_MAX_INPUTS]; /* RLX_NONE for an absent optional input */
  int32_t n_out;
  rlx_tensor out[RLX_MAX_OUTPUTS];
  char* label;                   /* optional user name (rlx_graph_set_name) */
} rlx_node;

/* ---- deferred bodies (ops.def DEFERRED; runtime/value_inputs.c)
 * An importer that cannot build a model's body until some graph inputs have
 * values (a Reshape target fed as an input) returns a graph whose outputs are
 * Deferred nodes, with a hook that builds the real graph once those values
 * are known. The hook is shared (counted) by the graph's clones. */
typedef struct rlx_rebuild_value { /* one graph input given a value */
  const char* name;
  rlx_dtype dtype;
  int32_t rank;
  const int64_t* shape;
  const void* data;
  size_t bytes;
} rlx_rebuild_value;

typedef struct rlx_rebuild_hook rlx_rebuild_hook;
struct rlx_rebuild_hook {
  int refs; /* changed with atomics (graph.c) */
  /* The real graph with `values` as constants, or FAILED_PRECONDITION with
   * *out_needed (malloc'd) naming another input that must have a value. */
  rlx_status (*build)(const rlx_rebuild_hook* h, const rlx_rebuild_value* values, int32_t n,
                      rlx_graph** out, char** out_needed, rlx_error* err);
  void (*destroy)(rlx_rebuild_hook* h); /* frees h and what it owns */
  char* first_needed; /* an input known to need a value (may be NULL) */
};
void rlx_rebuild_hook_ref(rlx_rebuild_hook* h);
void rlx_rebuild_hook_unref(rlx_rebuild_hook* h);
/* 1 when g has a Deferred node. */
int rlx_graph_has_deferred(const rlx_graph* g);

typedef struct rlx_value {
  int32_t node;  /* producer */
  int32_t index; /* which output of the producer */
  rlx_type type;
} rlx_value;

/* One entry of the symbolic dim table: a leaf symbol (op 0) or a op b. */
typedef struct rlx_dim_def {
  int32_t op; /* 0 or rlx_dim_op */
  rlx_dim a, b;
  int32_t depth; /* 0 for a leaf; bounded (RLX_DIM_MAX_DEPTH) so walks are short */
} rlx_dim_def;
#define RLX_DIM_MAX_DEPTH 64

struct rlx_graph {
  rlx_node* nodes;
  int32_t n_nodes, cap_nodes;
  rlx_value* values;
  int32_t n_values, cap_values;
  char** symbols;       /* per table entry: leaf name or printable expression */
  rlx_dim_def* dim_defs; /* per table entry (same index as symbols) */
  int32_t n_symbols, cap_symbols;
  rlx_tensor* outputs;
  int32_t n_outputs;
  rlx_error err;
  rlx_rebuild_hook* rebuild; /* builds the Deferred body (NULL: none) */
};

/* Appends a node after running the shape rule (shape.c). `in` holds n_in
 * tensors (RLX_NONE allowed where the op has optional inputs). Attrs are
 * copied; name/data are duplicated. Out tensors go to out (n_outputs of the
 * op). On error nothing is appended and g->err names the op and problem. */
rlx_status rlx_graph_add_node(rlx_graph* g, rlx_op op, const rlx_node_attrs* attrs,
                              const rlx_tensor* in, int32_t n_in, rlx_tensor* out);

/* Shape rule for one node: fills out_types[0..n_outputs). Checks ranks, dims,
 * dtypes and attributes; normalises attributes in place (negative axes made
 * non-negative, defaults filled: num_kv_heads, score_scale...). */
rlx_status rlx_infer_node(rlx_graph* g, rlx_op op, rlx_node_attrs* attrs, const rlx_tensor* in,
                          int32_t n_in, rlx_type* out_types);

static inline const rlx_type* rlx_tensor_type(const rlx_graph* g, rlx_tensor t) {
  return &g->values[t].type;
}
static inline const rlx_node* rlx_producer(const rlx_graph* g, rlx_tensor t) {
  return &g->nodes[g->values[t].node];
}

/* Element count; -1 if any dim is symbolic. */
int64_t rlx_type_numel(const rlx_type* t);
/* Bytes; -1 if any dim is symbolic. */
int64_t rlx_type_bytes(const rlx_type* t);
int rlx_type_equal(const rlx_type* a, const rlx_type* b);
/* "f32[2,batch,16]" into buf (symbol names from g). */
const char* rlx_type_str(const rlx_graph* g, const rlx_type* t, char* buf, size_t cap);
/* "%12 (matmul 'proj')": how errors name a node. */
const char* rlx_node_str(const rlx_graph* g, int32_t node, char* buf, size_t cap);

int rlx_dtype_is_float(rlx_dtype t); /* f32 f16 bf16 f64 and the float8 types */
int rlx_dtype_is_int(rlx_dtype t);   /* i8 i16 i32 i64 u8 u16 u32 u64 (not bool) */
/* The floats compute ops take: every float but the float8 storage types. */
int rlx_dtype_is_compute_float(rlx_dtype t);

/* Op name as the text format and errors print it: the member for the
 * families ("add", "eq", "relu", "reduce_sum"), else the ops.def text. */
const char* rlx_op_name(rlx_op op, int32_t kind);
/* Sets g->err to "<op name> %<next node id>: <message>" and returns
 * RLX_INVALID_ARGUMENT: how builders and shape rules report a bad node. */
rlx_status rlx_graph_fail_op(rlx_graph* g, rlx_op op, int32_t kind, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Deep copy. */
rlx_status rlx_graph_clone(const rlx_graph* g, rlx_graph** out);
/* 1 when a node of g reads value t or t is a graph output. */
int rlx_graph_value_is_read(const rlx_graph* g, rlx_tensor t);
/* A copy with every symbol replaced by sizes[symbol] (one per dim table entry:
 * leaves >= 0; expressions are computed from them) and shapes
 * re-inferred (dynamic.c). Errors go to g->err. */
rlx_status rlx_graph_specialize(rlx_graph* g, const int64_t* sizes, rlx_graph** out);

/* 1 when dim is a symbolic expression (not static, not a leaf symbol). */
int rlx_dim_is_expr(const rlx_graph* g, rlx_dim d);
/* 1 when d is or contains (through expressions) the symbolic dim `sym`. */
int rlx_dim_mentions(const rlx_graph* g, rlx_dim d, rlx_dim sym);
/* Value of d under sizes (one per table entry, leaves filled, expressions
 * evaluated by rlx_graph_eval_dims); -1 while unbound. */
int64_t rlx_dim_value(const rlx_graph* g, rlx_dim d, const int64_t* sizes);
/* Fills sizes[] of every expression entry from the leaves (in table order:
 * operands come first). An expression over an unbound leaf stays -1; a
 * negative result or a division by 0 fails with a message naming it. */
rlx_status rlx_graph_eval_dims(const rlx_graph* g, int64_t* sizes, rlx_error* err);
/* Exact quotient of the products of two dim lists when b's factors cancel
 * in a's (B*T*32 / (B*T) = 32); 0 when they do not. */
int rlx_dims_div_exact(rlx_graph* g, const rlx_dim* a, int32_t na, const rlx_dim* b, int32_t nb,
                       rlx_dim* out);
/* Element counts of two shapes: 1 equal, 0 different, -1 undecidable until
 * bound (a factor is a sum, a quotient...). */
int rlx_dims_same_count(const rlx_graph* g, const rlx_dim* a, int32_t na, const rlx_dim* b,
                        int32_t nb);
/* Appends a leaf symbol named `name` (no lookup). */
rlx_status rlx_graph_add_leaf_symbol(rlx_graph* g, const char* name, rlx_dim* out);
/* Appends the entries of src's dim table to dst (which has none yet). */
rlx_status rlx_graph_copy_dims(rlx_graph* dst, const rlx_graph* src);

#endif
