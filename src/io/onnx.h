/* ONNX import, internal interface.
 *
 * Two audiences:
 *  - the CLI and the conformance runner, which load a model once, set its
 *    initializers, and may give some graph inputs a value at import time
 *    ("freeze" them: a Reshape target or Slice bounds fed as graph inputs,
 *    as the ONNX node tests do, must be known when the graph is built);
 *  - onnx_ops.c, the per-op mapping table, which sees one ONNX node through
 *    the rlx_ox_* accessors below and never touches protobuf structs.
 *
 * Built only with protobuf-c (RLX_HAVE_ONNX); without it the model functions
 * return RLX_UNIMPLEMENTED "ONNX import not built". */
#ifndef RLX_IO_ONNX_H
#define RLX_IO_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "ir/graph.h"
#include "rlx.h"
#include "base/error.h"

/* ------------------------------------------------------------------ host tensors */

/* A tensor held on the host with a static shape; data is malloc'd (may be
 * NULL only when bytes == 0). */
typedef struct rlx_host_tensor {
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;
  size_t bytes;
} rlx_host_tensor;

int64_t rlx_host_numel(const rlx_host_tensor* t);

/* Most bytes the importer computes at import time for one node (folding,
 * ConstantOfShape, Range): beyond it a node is built into the graph, or
 * refused when its value must be known. */
#define RLX_ONNX_MAX_FOLD_BYTES ((int64_t)256 << 20)
/* All nodes together: the values computed at import time stay alive until
 * the import ends (known values, and the Constants made of them), so a tiny
 * model of many nodes each under the cap above could still take gigabytes.
 * Their total is held under RLX_ONNX_FOLD_BUDGET (base/env.def, default 1
 * GiB); the node that crosses it fails the import with RESOURCE_EXHAUSTED.
 * A Constant node's value (data the file itself holds) does not count. */
/* Allocates zeroed data for (dtype, rank, shape); RESOURCE_EXHAUSTED or
 * INVALID_ARGUMENT (too large) on failure, with the message in err. */
rlx_status rlx_host_alloc(rlx_host_tensor* t, rlx_dtype dtype, int32_t rank,
                          const int64_t* shape, rlx_error* err);
void rlx_host_free(rlx_host_tensor* t);

/* Decodes one serialized TensorProto (a .pb file of the ONNX test data).
 * out_name (may be NULL) receives the tensor's name, truncated to name_cap. */
rlx_status rlx_onnx_decode_tensor(const void* buf, size_t n, rlx_host_tensor* out,
                                  char* out_name, size_t name_cap, rlx_error* err);

/* ------------------------------------------------------------------ models */

typedef struct rlx_onnx_options {
  /* Graph inputs given a value now: they become constants, not inputs. */
  const char* const* frozen_names;
  const rlx_host_tensor* frozen_values;
  int32_t n_frozen;
  /* Folder that external-data locations are relative to (the model's
   * folder); NULL refuses external data. */
  const char* base_dir;
  /* Out: when the import fails because a value that must be known at
   * import time derives from a graph input that is not frozen, that input's
   * name (the caller may freeze it and import again). May be NULL. */
  char* needs_input;
  size_t needs_input_cap;
  /* Import only the interface: every graph input, every initializer as a
   * param, and one Deferred node per output (declared dtype and rank, dims
   * symbols), for a model whose body needs input values (value_inputs.c). */
  int deferred;
} rlx_onnx_options;

typedef struct rlx_onnx_param {
  char* name;
  rlx_host_tensor value;
} rlx_onnx_param;

typedef struct rlx_onnx_model {
  rlx_graph* graph;
  rlx_onnx_param* params; /* the initializers the graph uses as params */
  int32_t n_params;
  char** inputs;          /* ONNX graph inputs in file order, initializers excluded */
  int32_t* input_frozen;  /* 1 where that input was frozen (a constant now) */
  int32_t* input_in_graph; /* 1 where the graph has an input of that name (every
                              input not frozen, read by some node or not) */
  int32_t* input_read;    /* 1 where some node reads that input or it is an output */
  int32_t n_inputs;
  int64_t opset;          /* default-domain opset */
} rlx_onnx_model;

rlx_status rlx_onnx_import(const void* buf, size_t n, const rlx_onnx_options* opt,
                           rlx_onnx_model** out_model, rlx_error* err);
/* Reads the file and imports it; base_dir defaults to the file's folder. */
rlx_status rlx_onnx_import_file(const char* path, const rlx_onnx_options* opt,
                                rlx_onnx_model** out_model, rlx_error* err);
/* Copies every param value into e. */
rlx_status rlx_onnx_model_set_params(const rlx_onnx_model* m, rlx_exec* e, rlx_error* err);
void rlx_onnx_model_destroy(rlx_onnx_model* m);

/* Reads a whole model file (malloc'd; free()): a regular file of at most
 * RLX_ONNX_MAX_FILE_BYTES (protobuf's own 2 GiB limit); a FIFO, device or
 * directory is refused before any read (see base/file.h). */
#define RLX_ONNX_MAX_FILE_BYTES ((int64_t)2 << 30)
rlx_status rlx_onnx_read_file(const char* path, void** out_buf, size_t* out_n, rlx_error* err);

/* Deepest nesting of protobuf messages accepted (the model itself is level
 * 1). protobuf-c unpacks recursively, one stack frame chain per level, so
 * depth is checked first, without recursion (onnx_depth.c). 100 is
 * protobuf's own default recursion limit; a real model uses about 7 levels
 * plus 3 per nested subgraph. */
#define RLX_ONNX_MAX_DEPTH 100
struct ProtobufCMessageDescriptor;
/* INVALID_ARGUMENT naming the limit when the message serialized in buf
 * (of type root) nests deeper than RLX_ONNX_MAX_DEPTH. */
rlx_status rlx_onnx_check_depth(const void* buf, size_t n,
                                const struct ProtobufCMessageDescriptor* root, rlx_error* err);

/* ------------------------------------------------------------------ op mappers */

/* One ONNX node being imported. Inputs are ONNX values: known at import time
 * (initializers, Constant outputs, folded results) and/or tensors of the
 * graph being built. Every attribute the mapper reads is marked used; an
 * attribute left unread at the end is an "unsupported attribute" error. */
typedef struct rlx_ox_ctx rlx_ox_ctx;

typedef rlx_status (*rlx_ox_map_fn)(rlx_ox_ctx* c);
typedef struct rlx_ox_op {
  const char* op_type;
  rlx_ox_map_fn map;
  int32_t arg;    /* passed to the mapper (rlx_ox_arg): the IR sub-kind */
  int32_t nofold; /* never evaluate at import time, even on known inputs */
} rlx_ox_op;

/* The op table (onnx_ops.c). NULL when op_type has no mapping. */
const rlx_ox_op* rlx_ox_find_op(const char* op_type);

rlx_graph* rlx_ox_graph(rlx_ox_ctx* c); /* the graph to add nodes to */
int64_t rlx_ox_opset(const rlx_ox_ctx* c);
int32_t rlx_ox_arg(const rlx_ox_ctx* c);
const char* rlx_ox_op_type(const rlx_ox_ctx* c);

int32_t rlx_ox_n_in(const rlx_ox_ctx* c);
int rlx_ox_has(const rlx_ox_ctx* c, int32_t i); /* input i listed and non-empty */
/* Known value of input i, or NULL. */
const rlx_host_tensor* rlx_ox_known(const rlx_ox_ctx* c, int32_t i);
/* Input i as a tensor of the graph (a known value becomes a constant or param). */
rlx_status rlx_ox_in(rlx_ox_ctx* c, int32_t i, rlx_tensor* out);
/* Type of input i without materializing it. */
rlx_status rlx_ox_type(rlx_ox_ctx* c, int32_t i, rlx_type* out);
/* Input i must be known at import time: an error otherwise (naming the graph
 * input it derives from, so a caller can freeze it). `what` names the operand. */
rlx_status rlx_ox_need_known(rlx_ox_ctx* c, int32_t i, const char* what,
                             const rlx_host_tensor** out);
/* Notes: a mapper may leave a malloc'd block on output i (ownership moves
 * to the importer, which free()s it when the import ends) for the mappers
 * that read that value later: DequantizeLinear of a constant weight leaves
 * its quantized form, so a MatMul reading it builds a DequantMatMul instead
 * of materializing the f32 weight (onnx_quant.c). NULL when none. */
void rlx_ox_set_note(rlx_ox_ctx* c, int32_t i, void* note);
const void* rlx_ox_note(const rlx_ox_ctx* c, int32_t i);
/* Known integer input as a list (a scalar is a list of one). */
rlx_status rlx_ox_known_ints(rlx_ox_ctx* c, int32_t i, const char* what, int64_t* out,
                             int32_t cap, int32_t* out_n);

/* A shape value: a small int tensor (rank 0 or 1) computed from shapes at
 * import time whose elements may be symbolic dims (Shape of a [B,T] input
 * is [B,T]). Carried through the shape arithmetic of exported models
 * (Gather, Concat, Mul...) by onnx_shape.c so Reshape, Expand, Slice... get
 * symbolic sizes; a value whose elements are all static is a known value. */
#define RLX_OX_SV_MAX 16
typedef struct rlx_ox_sv {
  rlx_dtype dtype;
  int32_t rank; /* 0 or 1 */
  int32_t n;
  int64_t v[RLX_OX_SV_MAX]; /* a plain integer, or an rlx_dim code where sym[i] */
  uint8_t sym[RLX_OX_SV_MAX];
} rlx_ox_sv;

/* Shape value of input i, or NULL (a known value or a run-time tensor). */
const rlx_ox_sv* rlx_ox_sv_in(const rlx_ox_ctx* c, int32_t i);
/* Input i as a list of sizes: a known int list, or a shape value (sym[k]
 * set where out[k] is a symbolic rlx_dim). An error otherwise, as
 * rlx_ox_known_ints. */
rlx_status rlx_ox_dims_in(rlx_ox_ctx* c, int32_t i, const char* what, int64_t* out,
                          uint8_t* sym, int32_t cap, int32_t* out_n);
/* Sets output i to a shape value; one with no symbolic element becomes a
 * known value. */
rlx_status rlx_ox_set_sv(rlx_ox_ctx* c, int32_t i, const rlx_ox_sv* sv);
/* The shape-value layer (onnx_shape.c): computes the node on shape values
 * when it can (*handled = 1); otherwise the mapper runs and shape-value
 * inputs become tensors. */
rlx_status rlx_ox_shape_value(rlx_ox_ctx* c, int* handled);
/* Builds an int64 tensor [n] (or a scalar) holding a shape value: symbolic
 * elements come from expand + reduce_sum over a dim of that size, which
 * specialization makes constant (see onnx_shape.c). */
rlx_status rlx_ox_sv_tensor(rlx_graph* g, const rlx_ox_sv* sv, rlx_tensor* out);
/* [0, 1, ..., n-1] as f32 [n] for a possibly symbolic n (cumsum over ones). */
rlx_status rlx_ox_iota(rlx_graph* g, rlx_dim n, rlx_tensor* out);

int32_t rlx_ox_n_out(const rlx_ox_ctx* c);
int rlx_ox_wants(const rlx_ox_ctx* c, int32_t i); /* output i listed and non-empty */
rlx_status rlx_ox_set(rlx_ox_ctx* c, int32_t i, rlx_tensor t);
/* Sets output i to a known value (ownership of t's data moves to the importer). */
rlx_status rlx_ox_set_known(rlx_ox_ctx* c, int32_t i, rlx_host_tensor* t);

/* Attributes. A missing attribute gives the default; a present one of the
 * wrong type is an error. */
int rlx_ox_attr_has(rlx_ox_ctx* c, const char* name);
rlx_status rlx_ox_attr_int(rlx_ox_ctx* c, const char* name, int64_t def, int64_t* out);
rlx_status rlx_ox_attr_float(rlx_ox_ctx* c, const char* name, float def, float* out);
/* Copies the string into out (NUL-terminated); def when absent. */
rlx_status rlx_ox_attr_string(rlx_ox_ctx* c, const char* name, const char* def, char* out,
                              size_t cap);
/* *out_n = -1 when absent. */
rlx_status rlx_ox_attr_ints(rlx_ox_ctx* c, const char* name, int64_t* out, int32_t cap,
                            int32_t* out_n);
rlx_status rlx_ox_attr_floats(rlx_ox_ctx* c, const char* name, float* out, int32_t cap,
                              int32_t* out_n);
/* Decodes a tensor attribute into out (caller frees); *present = 0 when absent. */
rlx_status rlx_ox_attr_tensor(rlx_ox_ctx* c, const char* name, rlx_host_tensor* out,
                              int* present);
/* Marks an attribute as understood without reading it (e.g. Dropout's seed). */
void rlx_ox_attr_ignore(rlx_ox_ctx* c, const char* name);

/* Errors naming the op type and node: UNIMPLEMENTED / INVALID_ARGUMENT. */
rlx_status rlx_ox_unsupported(rlx_ox_ctx* c, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
rlx_status rlx_ox_invalid(rlx_ox_ctx* c, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Wraps the status of a graph builder call: on failure the graph's message
 * is prefixed with the ONNX node. */
rlx_status rlx_ox_check(rlx_ox_ctx* c, rlx_status s);

/* ONNX's float8 DataType codes (onnx.proto 1.14+; Debian's older proto has
 * no names for them, so they are spelled out here). */
enum {
  RLX_ONNX_FLOAT8E4M3FN = 17,
  RLX_ONNX_FLOAT8E4M3FNUZ = 18,
  RLX_ONNX_FLOAT8E5M2 = 19,
  RLX_ONNX_FLOAT8E5M2FNUZ = 20,
};

static inline int rlx_onnx_f8_dtype(int64_t t) {
  switch (t) {
    case RLX_ONNX_FLOAT8E4M3FN: return RLX_F8E4M3FN;
    case RLX_ONNX_FLOAT8E4M3FNUZ: return RLX_F8E4M3FNUZ;
    case RLX_ONNX_FLOAT8E5M2: return RLX_F8E5M2;
    case RLX_ONNX_FLOAT8E5M2FNUZ: return RLX_F8E5M2FNUZ;
    default: return -1;
  }
}

#endif
