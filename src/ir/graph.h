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
  /* Conv / ConvTranspose / Im2Col (strides, pads, dilations above) */
  int32_t groups, conv_layout; /* conv_layout: rlx_conv_layout */
  rlx_ints output_padding;
  /* Declared output type for OPF_DECLARED ops (Input, Param, Constant,
   * Reshape, Cast, Expand); ignored otherwise. */
  rlx_type type;
} rlx_node_attrs;

#define RLX_MAX_OUTPUTS 2

typedef struct rlx_node {
  rlx_op op;
  rlx_node_attrs a;
  int32_t n_in;
  rlx_tensor in[RLX_MAX_INPUTS]; /* RLX_NONE for an absent optional input */
  int32_t n_out;
  rlx_tensor out[RLX_MAX_OUTPUTS];
  char* label;                   /* optional user name (rlx_graph_set_name) */
} rlx_node;

typedef struct rlx_value {
  int32_t node;  /* producer */
  int32_t index; /* which output of the producer */
  rlx_type type;
} rlx_value;

struct rlx_graph {
  rlx_node* nodes;
  int32_t n_nodes, cap_nodes;
  rlx_value* values;
  int32_t n_values, cap_values;
  char** symbols;
  int32_t n_symbols, cap_symbols;
  rlx_tensor* outputs;
  int32_t n_outputs;
  rlx_error err;
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
/* A copy with every symbol replaced by sizes[symbol] (all >= 0) and shapes
 * re-inferred (dynamic.c). Errors go to g->err. */
rlx_status rlx_graph_specialize(rlx_graph* g, const int64_t* sizes, rlx_graph** out);

#endif
