/* ONNX import: a ModelProto, parsed by the protobuf-c code that protoc-c
 * generates at build time from Debian's onnx.proto, becomes an rlx graph.
 *
 * Walk: initializers become known values (params when used as tensors),
 * graph inputs become inputs (symbolic dims become symbols), then each node
 * goes through its mapper in onnx_ops.c. A node whose inputs are all known
 * is evaluated at import time (constant folding): the mapper builds it into
 * a scratch graph that runs once on the CPU reference, so shape chains
 * (Shape -> Gather -> Concat -> Reshape) become constants with the same
 * kernels the model would use. */
#include "io/onnx.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/file.h"
#include "ir/dtype.h"
#include "backends/cpu/cpu.h" /* rlx_ref_run_step: folding evaluates with the oracle */
#include "passes/fold.h"

/* ------------------------------------------------------------------ host tensors */

int64_t rlx_host_numel(const rlx_host_tensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) n *= t->shape[i];
  return n;
}

/* Bound on one host tensor: far above any test model, far below overflow. */
#define MAX_HOST_BYTES ((int64_t)1 << 40)

rlx_status rlx_host_alloc(rlx_host_tensor* t, rlx_dtype dtype, int32_t rank,
                          const int64_t* shape, rlx_error* err) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > RLX_MAX_RANK)
    return rlx_fail(err, RLX_UNIMPLEMENTED, "rank %d exceeds the maximum %d", (int)rank,
                    RLX_MAX_RANK);
  int64_t n = (int64_t)rlx_dtype_size(dtype);
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] < 0) return rlx_fail(err, RLX_INVALID_ARGUMENT, "negative dim %lld",
                                      (long long)shape[i]);
    if (shape[i] && n > MAX_HOST_BYTES / shape[i])
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "tensor is too large");
    n *= shape[i];
  }
  t->dtype = dtype;
  t->rank = rank;
  if (rank) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)rank);
  t->bytes = (size_t)n;
  if (n > 0) {
    t->data = calloc(1, (size_t)n);
    if (!t->data) return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  return RLX_OK;
}

void rlx_host_free(rlx_host_tensor* t) {
  if (!t) return;
  free(t->data);
  t->data = NULL;
  t->bytes = 0;
}


rlx_status rlx_onnx_read_file(const char* path, void** out_buf, size_t* out_n, rlx_error* err) {
  return rlx_file_read_all(path, "ONNX file", RLX_ONNX_MAX_FILE_BYTES, out_buf, out_n, err);
}

void rlx_onnx_model_destroy(rlx_onnx_model* m) {
  if (!m) return;
  rlx_graph_destroy(m->graph);
  for (int32_t i = 0; i < m->n_params; i++) {
    free(m->params[i].name);
    rlx_host_free(&m->params[i].value);
  }
  for (int32_t i = 0; i < m->n_inputs; i++) free(m->inputs[i]);
  free(m->params);
  free(m->inputs);
  free(m->input_frozen);
  free(m->input_in_graph);
  free(m->input_read);
  free(m);
}

rlx_status rlx_onnx_model_set_params(const rlx_onnx_model* m, rlx_exec* e, rlx_error* err) {
  for (int32_t i = 0; i < m->n_params; i++) {
    const rlx_onnx_param* p = &m->params[i];
    rlx_status s = rlx_exec_set_param(e, p->name, p->value.dtype, p->value.data, p->value.bytes);
    if (s != RLX_OK)
      return rlx_fail(err, s, "setting param '%s': %s", p->name, rlx_exec_last_error(e));
  }
  return RLX_OK;
}

/* Splits "dir/model.onnx" into its folder ("dir", or "." without one). */
static char* folder_of(const char* path) {
  const char* slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 1;
  char* dir = malloc(n + 1);
  if (!dir) return NULL;
  if (slash) memcpy(dir, path, n);
  else dir[0] = '.';
  dir[n] = '\0';
  if (n == 0) { /* "/model.onnx" */
    dir[0] = '/';
    dir[1] = '\0';
  }
  return dir;
}

rlx_status rlx_onnx_import_file(const char* path, const rlx_onnx_options* opt,
                                rlx_onnx_model** out_model, rlx_error* err) {
#ifndef RLX_HAVE_ONNX
  return rlx_onnx_import(NULL, 0, opt, out_model, err); /* "not built", before touching the file */
#endif
  void* buf = NULL;
  size_t n = 0;
  RLX_RETURN_IF_ERROR(rlx_onnx_read_file(path, &buf, &n, err));
  rlx_onnx_options o;
  memset(&o, 0, sizeof o);
  if (opt) o = *opt;
  char* dir = NULL;
  if (!o.base_dir) {
    dir = folder_of(path);
    if (!dir) {
      free(buf);
      return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    }
    o.base_dir = dir;
  }
  rlx_status s = rlx_onnx_import(buf, n, &o, out_model, err);
  free(buf);
  free(dir);
  return s;
}

#ifndef RLX_HAVE_ONNX

/* ------------------------------------------------------------------ not built */

#define NOT_BUILT "ONNX import not built (needs protobuf-c and onnx.proto at build time)"

rlx_status rlx_onnx_decode_tensor(const void* buf, size_t n, rlx_host_tensor* out,
                                  char* out_name, size_t name_cap, rlx_error* err) {
  (void)buf; (void)n; (void)out_name; (void)name_cap;
  memset(out, 0, sizeof *out);
  return rlx_fail(err, RLX_UNIMPLEMENTED, NOT_BUILT);
}

rlx_status rlx_onnx_import(const void* buf, size_t n, const rlx_onnx_options* opt,
                           rlx_onnx_model** out_model, rlx_error* err) {
  (void)buf; (void)n; (void)opt;
  if (out_model) *out_model = NULL;
  return rlx_fail(err, RLX_UNIMPLEMENTED, NOT_BUILT);
}

#else /* RLX_HAVE_ONNX */

#include "onnx.pb-c.h"

static rlx_status host_copy(rlx_host_tensor* dst, const rlx_host_tensor* src, rlx_error* err) {
  RLX_RETURN_IF_ERROR(rlx_host_alloc(dst, src->dtype, src->rank, src->shape, err));
  if (src->bytes) memcpy(dst->data, src->data, src->bytes);
  return RLX_OK;
}

/* ------------------------------------------------------------------ TensorProto */

/* ONNX TensorProto.DataType -> rlx dtype; -1 for types the IR lacks. */
static int dtype_from_onnx(int32_t t) {
  switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return RLX_F32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return RLX_U8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: return RLX_I8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return RLX_I32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return RLX_I64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return RLX_BOOL;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return RLX_F16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return RLX_F64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return RLX_BF16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: return RLX_I16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return RLX_U16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return RLX_U32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return RLX_U64;
    default: return rlx_onnx_f8_dtype(t);
  }
}

static const char* onnx_dtype_name(int32_t t) {
  static const char* const names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",      "UINT16",
                                      "INT16",     "INT32",  "INT64",     "STRING",    "BOOL",
                                      "FLOAT16",   "DOUBLE", "UINT32",    "UINT64",    "COMPLEX64",
                                      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ",
                                      "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",
                                      "INT4",      "FLOAT4E2M1"};
  return t >= 0 && t < (int32_t)(sizeof names / sizeof names[0]) ? names[t] : "unknown";
}

/* Checks a relative external-data location stays inside the model folder. */
static int safe_location(const char* loc) {
  if (!loc || !*loc || loc[0] == '/') return 0;
  for (const char* p = loc; *p; p++)
    if (p[0] == '.' && p[1] == '.' && (p == loc || p[-1] == '/') && (p[2] == '/' || !p[2]))
      return 0;
  return 1;
}

/* The external-data entries of a tensor, checked: location (relative, inside
 * the model folder), offset, length (must equal bytes when given). *out_path
 * is malloc'd. */
static rlx_status external_path(const Onnx__TensorProto* tp, const char* base_dir, int64_t bytes,
                                char** out_path, long long* out_offset, rlx_error* err) {
  const char* loc = NULL;
  long long offset = 0, length = -1;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const Onnx__StringStringEntryProto* kv = tp->external_data[i];
    if (!kv || !kv->key || !kv->value) continue;
    if (strcmp(kv->key, "location") == 0) loc = kv->value;
    else if (strcmp(kv->key, "offset") == 0) offset = strtoll(kv->value, NULL, 10);
    else if (strcmp(kv->key, "length") == 0) length = strtoll(kv->value, NULL, 10);
  }
  const char* name = tp->name ? tp->name : "";
  if (!base_dir) return rlx_fail(err, RLX_UNIMPLEMENTED,
                                 "tensor '%s': external data needs the model's folder", name);
  if (!safe_location(loc))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "tensor '%s': external data location '%s' must be a relative path inside "
                    "the model's folder", name, loc ? loc : "(none)");
  if (offset < 0 || (length >= 0 && length != bytes))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "tensor '%s': external data offset %lld / length %lld do not fit %lld bytes",
                    name, offset, length, (long long)bytes);
  size_t plen = strlen(base_dir) + strlen(loc) + 2;
  char* path = malloc(plen);
  if (!path) return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  snprintf(path, plen, "%s/%s", base_dir, loc);
  *out_path = path;
  *out_offset = offset;
  return RLX_OK;
}

/* "tensor 'name': external data file", how the file helper's messages start. */
static void external_what(const Onnx__TensorProto* tp, char* what, size_t cap) {
  snprintf(what, cap, "tensor '%.100s': external data file", tp->name ? tp->name : "");
}

/* The external file must be a regular file holding offset + bytes, checked
 * before anything is allocated. */
static rlx_status check_external(const Onnx__TensorProto* tp, const char* base_dir,
                                 int64_t bytes, rlx_error* err) {
  char* path = NULL;
  long long offset = 0;
  RLX_RETURN_IF_ERROR(external_path(tp, base_dir, bytes, &path, &offset, err));
  char what[160];
  external_what(tp, what, sizeof what);
  rlx_status s = rlx_file_check_range(path, what, offset, bytes, err);
  free(path);
  return s;
}

static rlx_status read_external(const Onnx__TensorProto* tp, const char* base_dir,
                                rlx_host_tensor* t, rlx_error* err) {
  char* path = NULL;
  long long offset = 0;
  RLX_RETURN_IF_ERROR(external_path(tp, base_dir, (int64_t)t->bytes, &path, &offset, err));
  char what[160];
  external_what(tp, what, sizeof what);
  rlx_status s = rlx_file_read_range(path, what, offset, (int64_t)t->bytes, t->data, err);
  free(path);
  return s;
}

/* Number of values in the typed field (float_data, int32_data, ...) that
 * holds a tensor of dtype dt. */
static size_t typed_count(const Onnx__TensorProto* tp, rlx_dtype dt) {
  switch (dt) {
    case RLX_F32: return tp->n_float_data;
    case RLX_F64: return tp->n_double_data;
    case RLX_I64: return tp->n_int64_data;
    case RLX_U32: case RLX_U64: return tp->n_uint64_data; /* as onnx.proto stores them */
    default: return tp->n_int32_data;
  }
}

/* Copies typed-field data into t (its count was checked). */
static rlx_status read_typed(const Onnx__TensorProto* tp, rlx_host_tensor* t, rlx_error* err) {
  (void)err;
  int64_t n = rlx_host_numel(t);
  for (int64_t i = 0; i < n; i++) {
    switch (t->dtype) {
      case RLX_F32: ((float*)t->data)[i] = tp->float_data[i]; break;
      case RLX_F64: ((double*)t->data)[i] = tp->double_data[i]; break;
      case RLX_I64: ((int64_t*)t->data)[i] = tp->int64_data[i]; break;
      case RLX_F16: case RLX_BF16:
        ((uint16_t*)t->data)[i] = (uint16_t)tp->int32_data[i]; /* bit patterns */
        break;
      case RLX_U32: ((uint32_t*)t->data)[i] = (uint32_t)tp->uint64_data[i]; break;
      case RLX_U64: ((uint64_t*)t->data)[i] = tp->uint64_data[i]; break;
      case RLX_F8E4M3FN: case RLX_F8E5M2: case RLX_F8E4M3FNUZ: case RLX_F8E5M2FNUZ:
        ((uint8_t*)t->data)[i] = (uint8_t)tp->int32_data[i]; /* bit patterns */
        break;
      case RLX_BOOL: ((uint8_t*)t->data)[i] = tp->int32_data[i] != 0; break;
      default: rlx_store_i64(t->data, t->dtype, i, tp->int32_data[i]); break;
    }
  }
  return RLX_OK;
}

static rlx_status tensor_from_proto(const Onnx__TensorProto* tp, const char* base_dir,
                                    rlx_host_tensor* out, rlx_error* err) {
  memset(out, 0, sizeof *out);
  const char* name = tp->name ? tp->name : "";
  int dt = dtype_from_onnx(tp->data_type);
  if (dt < 0)
    return rlx_fail(err, RLX_UNIMPLEMENTED, "tensor '%s': data type %s (%d) is not supported",
                    name, onnx_dtype_name(tp->data_type), (int)tp->data_type);
  if (tp->n_dims > RLX_MAX_RANK)
    return rlx_fail(err, RLX_UNIMPLEMENTED, "tensor '%s': rank %zu exceeds %d", name,
                    tp->n_dims, RLX_MAX_RANK);
  if (tp->segment)
    return rlx_fail(err, RLX_UNIMPLEMENTED, "tensor '%s': segmented tensors are not supported",
                    name);
  /* Size the tensor and check the data covers it before allocating, so a
   * forged shape cannot ask for more memory than the file holds. */
  int64_t numel = 1, size = (int64_t)rlx_dtype_size((rlx_dtype)dt);
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0 || (tp->dims[i] && numel > (MAX_HOST_BYTES / size) / tp->dims[i]))
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "tensor '%s': dim %zu is %lld (negative or too "
                      "large)", name, i, (long long)tp->dims[i]);
    numel *= tp->dims[i];
  }
  int external = tp->has_data_location &&
                 tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  if (!external && tp->has_raw_data && tp->raw_data.len != (size_t)(numel * size))
    return rlx_fail(err, RLX_INVALID_ARGUMENT,
                    "tensor '%s' has %zu bytes of raw data, its type needs %lld", name,
                    tp->raw_data.len, (long long)(numel * size));
  if (!external && !tp->has_raw_data && typed_count(tp, (rlx_dtype)dt) != (size_t)numel)
    return rlx_fail(err, RLX_INVALID_ARGUMENT, "tensor '%s' has %zu values, its shape needs %lld",
                    name, typed_count(tp, (rlx_dtype)dt), (long long)numel);
  if (external) RLX_RETURN_IF_ERROR(check_external(tp, base_dir, numel * size, err));
  rlx_status s = rlx_host_alloc(out, (rlx_dtype)dt, (int32_t)tp->n_dims, tp->dims, err);
  if (s != RLX_OK) return s;
  if (external) {
    s = read_external(tp, base_dir, out, err);
  } else if (tp->has_raw_data) {
    if (out->bytes) /* little-endian in the file and on every supported host */
      memcpy(out->data, tp->raw_data.data, out->bytes);
  } else {
    s = read_typed(tp, out, err);
  }
  if (s == RLX_OK && out->dtype == RLX_BOOL) /* raw bytes other than 0/1 would break kernels */
    for (size_t i = 0; i < out->bytes; i++) ((uint8_t*)out->data)[i] = ((uint8_t*)out->data)[i] != 0;
  if (s != RLX_OK) rlx_host_free(out);
  return s;
}

rlx_status rlx_onnx_decode_tensor(const void* buf, size_t n, rlx_host_tensor* out,
                                  char* out_name, size_t name_cap, rlx_error* err) {
  memset(out, 0, sizeof *out);
  if (out_name && name_cap) out_name[0] = '\0';
  RLX_RETURN_IF_ERROR(rlx_onnx_check_depth(buf, n, &onnx__tensor_proto__descriptor, err));
  Onnx__TensorProto* tp = onnx__tensor_proto__unpack(NULL, n, buf);
  if (!tp) return rlx_fail(err, RLX_INVALID_ARGUMENT, "not a TensorProto (protobuf parse failed)");
  if (out_name && name_cap && tp->name) snprintf(out_name, name_cap, "%s", tp->name);
  rlx_status s = tensor_from_proto(tp, NULL, out, err);
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return s;
}

/* ------------------------------------------------------------------ values */

/* One ONNX value (by name): a tensor of the main graph, a known value, or both. */
typedef struct ival {
  char* name;
  rlx_tensor t;         /* in the graph being built; RLX_NONE until needed */
  rlx_host_tensor* k;   /* known at import time, or NULL */
  rlx_ox_sv* sv;        /* a shape value with symbolic elements, or NULL */
  int is_param;         /* an initializer: becomes a param when used as a tensor */
  int is_input;         /* a graph input (run-time value) */
  int32_t root_input;   /* index of the graph input this run-time value derives from, or -1 */
  void* note;           /* a mapper's note for later readers (rlx_ox_set_note), or NULL */
} ival;

typedef struct importer {
  rlx_graph* main;      /* the graph being built */
  rlx_graph* g;         /* where nodes go now: main, or a scratch graph while folding */
  ival* vals;
  int32_t n_vals, cap_vals;
  int32_t* slots;       /* open-addressing hash: value index or -1 */
  uint32_t n_slots;
  int64_t opset;
  const rlx_onnx_options* opt;
  rlx_error* err;
  int32_t* param_vals;  /* values materialized as params, in creation order */
  int32_t n_param_vals, cap_param_vals;
  int32_t n_fresh;      /* symbols made for unnamed dims */
  int64_t computed_bytes; /* known values computed so far (see RLX_ONNX_MAX_FOLD_BYTES) */
  int64_t fold_budget;    /* their limit, RLX_ONNX_FOLD_BUDGET */
  int over_budget;        /* set when a node crossed it: the import fails */
} importer;

#define MAX_NODE_IO 64

struct rlx_ox_ctx {
  importer* I;
  const Onnx__NodeProto* p;
  const rlx_ox_op* op;
  int32_t n_in;
  ival* in[MAX_NODE_IO];  /* NULL for an absent optional input */
  ival fold_in[MAX_NODE_IO]; /* while folding: the known inputs, uncached in the scratch graph */
  int folding;
  int32_t n_out;
  rlx_tensor out_t[MAX_NODE_IO];
  rlx_host_tensor* out_k[MAX_NODE_IO];
  rlx_ox_sv* out_sv[MAX_NODE_IO];
  int out_set[MAX_NODE_IO];
  void* out_note[MAX_NODE_IO];
  uint8_t* attr_used;
  int32_t first_node;     /* graph node count before the mapper ran */
};

static uint32_t hash_name(const char* s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static int32_t find_val(const importer* I, const char* name) {
  if (!I->n_slots) return -1;
  for (uint32_t h = hash_name(name) & (I->n_slots - 1);; h = (h + 1) & (I->n_slots - 1)) {
    int32_t v = I->slots[h];
    if (v < 0) return -1;
    if (strcmp(I->vals[v].name, name) == 0) return v;
  }
}

static rlx_status rehash(importer* I, uint32_t n_slots) {
  int32_t* slots = malloc(sizeof(int32_t) * n_slots);
  if (!slots) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (uint32_t i = 0; i < n_slots; i++) slots[i] = -1;
  for (int32_t v = 0; v < I->n_vals; v++) {
    uint32_t h = hash_name(I->vals[v].name) & (n_slots - 1);
    while (slots[h] >= 0) h = (h + 1) & (n_slots - 1);
    slots[h] = v;
  }
  free(I->slots);
  I->slots = slots;
  I->n_slots = n_slots;
  return RLX_OK;
}

/* Adds a value named `name` (which must be new); returns its index in *out. */
static rlx_status add_val(importer* I, const char* name, int32_t* out) {
  if (find_val(I, name) >= 0)
    return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "value '%s' is defined twice", name);
  if (I->n_vals == I->cap_vals) {
    int32_t cap = I->cap_vals ? I->cap_vals * 2 : 64;
    ival* p = realloc(I->vals, sizeof(ival) * (size_t)cap);
    if (!p) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    I->vals = p;
    I->cap_vals = cap;
  }
  ival* v = &I->vals[I->n_vals];
  memset(v, 0, sizeof *v);
  v->t = RLX_NONE;
  v->root_input = -1;
  v->name = malloc(strlen(name) + 1);
  if (!v->name) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  strcpy(v->name, name);
  *out = I->n_vals++;
  if ((uint32_t)I->n_vals * 2 > I->n_slots)
    return rehash(I, I->n_slots ? I->n_slots * 2 : 128);
  uint32_t h = hash_name(name) & (I->n_slots - 1);
  while (I->slots[h] >= 0) h = (h + 1) & (I->n_slots - 1);
  I->slots[h] = *out;
  return RLX_OK;
}

static void free_known(rlx_host_tensor* k) {
  if (!k) return;
  rlx_host_free(k);
  free(k);
}

static void importer_free(importer* I) {
  for (int32_t i = 0; i < I->n_vals; i++) {
    free(I->vals[i].name);
    free_known(I->vals[i].k);
    free(I->vals[i].sv);
    free(I->vals[i].note);
  }
  free(I->vals);
  free(I->slots);
  free(I->param_vals);
  rlx_graph_destroy(I->main);
}

/* Makes the tensor for a value in graph g: a param for an initializer in the
 * main graph, a constant otherwise. */
static rlx_status materialize(importer* I, ival* v, int is_main) {
  if (v->t != RLX_NONE) return RLX_OK;
  if (v->sv) {
    rlx_status s = rlx_ox_sv_tensor(I->g, v->sv, &v->t);
    if (s != RLX_OK)
      return rlx_fail(I->err, s, "value '%s': %s", v->name, rlx_graph_last_error(I->g));
    return RLX_OK;
  }
  if (!v->k) return rlx_fail(I->err, RLX_INTERNAL, "value '%s' has no tensor", v->name);
  rlx_status s;
  if (v->is_param && is_main) {
    if (I->n_param_vals == I->cap_param_vals) {
      int32_t cap = I->cap_param_vals ? I->cap_param_vals * 2 : 16;
      int32_t* p = realloc(I->param_vals, sizeof(int32_t) * (size_t)cap);
      if (!p) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
      I->param_vals = p;
      I->cap_param_vals = cap;
    }
    s = rlx_graph_add_param(I->g, v->name, v->k->dtype, v->k->shape, v->k->rank, &v->t);
    if (s == RLX_OK) I->param_vals[I->n_param_vals++] = (int32_t)(v - I->vals);
  } else {
    s = rlx_graph_add_constant(I->g, v->k->dtype, v->k->shape, v->k->rank, v->k->data,
                               v->k->bytes, &v->t);
    if (s == RLX_OK && is_main) rlx_graph_set_name(I->g, v->t, v->name);
  }
  if (s != RLX_OK)
    return rlx_fail(I->err, s, "value '%s': %s", v->name, rlx_graph_last_error(I->g));
  return RLX_OK;
}

/* ------------------------------------------------------------------ mapper accessors */

static const char* node_name(const rlx_ox_ctx* c) {
  if (c->p->name && c->p->name[0]) return c->p->name;
  if (c->p->n_output && c->p->output[0] && c->p->output[0][0]) return c->p->output[0];
  return "?";
}

static rlx_status ctx_fail(rlx_ox_ctx* c, rlx_status s, const char* fmt, va_list ap) {
  char msg[800];
  vsnprintf(msg, sizeof msg, fmt, ap);
  return rlx_fail(c->I->err, s, "ONNX %s node '%s': %s", c->p->op_type, node_name(c), msg);
}

rlx_status rlx_ox_unsupported(rlx_ox_ctx* c, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rlx_status s = ctx_fail(c, RLX_UNIMPLEMENTED, fmt, ap);
  va_end(ap);
  return s;
}

rlx_status rlx_ox_invalid(rlx_ox_ctx* c, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  rlx_status s = ctx_fail(c, RLX_INVALID_ARGUMENT, fmt, ap);
  va_end(ap);
  return s;
}

rlx_status rlx_ox_check(rlx_ox_ctx* c, rlx_status s) {
  if (s == RLX_OK) return s;
  char msg[sizeof c->I->err->msg];
  snprintf(msg, sizeof msg, "%s", rlx_graph_last_error(c->I->g));
  return rlx_fail(c->I->err, s, "ONNX %s node '%s': %s", c->p->op_type, node_name(c), msg);
}

rlx_graph* rlx_ox_graph(rlx_ox_ctx* c) { return c->I->g; }
int64_t rlx_ox_opset(const rlx_ox_ctx* c) { return c->I->opset; }
int32_t rlx_ox_arg(const rlx_ox_ctx* c) { return c->op->arg; }
const char* rlx_ox_op_type(const rlx_ox_ctx* c) { return c->p->op_type; }
int32_t rlx_ox_n_in(const rlx_ox_ctx* c) { return c->n_in; }
int rlx_ox_has(const rlx_ox_ctx* c, int32_t i) { return i >= 0 && i < c->n_in && c->in[i]; }

const rlx_host_tensor* rlx_ox_known(const rlx_ox_ctx* c, int32_t i) {
  return rlx_ox_has(c, i) ? c->in[i]->k : NULL;
}

const void* rlx_ox_note(const rlx_ox_ctx* c, int32_t i) {
  return rlx_ox_has(c, i) ? c->in[i]->note : NULL;
}

void rlx_ox_set_note(rlx_ox_ctx* c, int32_t i, void* note) {
  if (i < 0 || i >= c->n_out) {
    free(note);
    return;
  }
  free(c->out_note[i]);
  c->out_note[i] = note;
}

rlx_status rlx_ox_in(rlx_ox_ctx* c, int32_t i, rlx_tensor* out) {
  if (!rlx_ox_has(c, i)) return rlx_ox_invalid(c, "input %d is missing", (int)i);
  RLX_RETURN_IF_ERROR(materialize(c->I, c->in[i], !c->folding));
  *out = c->in[i]->t;
  return RLX_OK;
}

rlx_status rlx_ox_type(rlx_ox_ctx* c, int32_t i, rlx_type* out) {
  if (!rlx_ox_has(c, i)) return rlx_ox_invalid(c, "input %d is missing", (int)i);
  const ival* v = c->in[i];
  memset(out, 0, sizeof *out);
  if (v->t != RLX_NONE) {
    *out = *rlx_tensor_type(c->I->g, v->t);
    return RLX_OK;
  }
  if (v->sv) {
    out->dtype = v->sv->dtype;
    out->rank = v->sv->rank;
    out->shape[0] = v->sv->n;
    return RLX_OK;
  }
  out->dtype = v->k->dtype;
  out->rank = v->k->rank;
  memcpy(out->shape, v->k->shape, sizeof(int64_t) * (size_t)v->k->rank);
  return RLX_OK;
}

const rlx_ox_sv* rlx_ox_sv_in(const rlx_ox_ctx* c, int32_t i) {
  return rlx_ox_has(c, i) ? c->in[i]->sv : NULL;
}

rlx_status rlx_ox_dims_in(rlx_ox_ctx* c, int32_t i, const char* what, int64_t* out,
                          uint8_t* sym, int32_t cap, int32_t* out_n) {
  const rlx_ox_sv* sv = rlx_ox_sv_in(c, i);
  if (!sv) {
    RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, i, what, out, cap, out_n));
    memset(sym, 0, (size_t)*out_n);
    return RLX_OK;
  }
  if (sv->n > cap) return rlx_ox_unsupported(c, "%s has %d entries (at most %d)", what,
                                             (int)sv->n, (int)cap);
  memcpy(out, sv->v, sizeof(int64_t) * (size_t)sv->n);
  memcpy(sym, sv->sym, (size_t)sv->n);
  *out_n = sv->n;
  return RLX_OK;
}

rlx_status rlx_ox_set_sv(rlx_ox_ctx* c, int32_t i, const rlx_ox_sv* sv) {
  if (i < 0 || i >= c->n_out) return RLX_OK;
  int symbolic = 0;
  for (int32_t k = 0; k < sv->n; k++) symbolic |= sv->sym[k];
  if (!symbolic) {
    rlx_host_tensor h;
    int64_t n = sv->n;
    RLX_RETURN_IF_ERROR(rlx_host_alloc(&h, sv->dtype, sv->rank, &n, c->I->err));
    for (int32_t k = 0; k < sv->n; k++) rlx_store_i64(h.data, sv->dtype, k, sv->v[k]);
    return rlx_ox_set_known(c, i, &h);
  }
  rlx_ox_sv* copy = malloc(sizeof *copy);
  if (!copy) return rlx_fail(c->I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  *copy = *sv;
  free(c->out_sv[i]);
  c->out_sv[i] = copy;
  c->out_t[i] = RLX_NONE;
  c->out_set[i] = 1;
  return RLX_OK;
}

rlx_status rlx_ox_need_known(rlx_ox_ctx* c, int32_t i, const char* what,
                             const rlx_host_tensor** out) {
  if (!rlx_ox_has(c, i)) return rlx_ox_invalid(c, "%s (input %d) is missing", what, (int)i);
  const ival* v = c->in[i];
  if (v->k) {
    *out = v->k;
    return RLX_OK;
  }
  importer* I = c->I;
  if (v->root_input >= 0) {
    const char* root = I->vals[v->root_input].name;
    if (I->opt && I->opt->needs_input && I->opt->needs_input_cap)
      snprintf(I->opt->needs_input, I->opt->needs_input_cap, "%s", root);
    return rlx_fail(I->err, RLX_FAILED_PRECONDITION,
                    "ONNX %s node '%s': %s '%s' must be known at import time, but it derives "
                    "from graph input '%s' (give that input a value when importing)",
                    c->p->op_type, node_name(c), what, v->name, root);
  }
  return rlx_ox_unsupported(c, "%s '%s' must be known at import time", what, v->name);
}

rlx_status rlx_ox_known_ints(rlx_ox_ctx* c, int32_t i, const char* what, int64_t* out,
                             int32_t cap, int32_t* out_n) {
  const rlx_host_tensor* k;
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, i, what, &k));
  if (k->dtype != RLX_I64 && k->dtype != RLX_I32)
    return rlx_ox_invalid(c, "%s must be int32 or int64, got %s", what, rlx_dtype_name(k->dtype));
  int64_t n = rlx_host_numel(k);
  if (k->rank > 1) return rlx_ox_invalid(c, "%s must be a scalar or a 1-D list", what);
  if (n > cap) return rlx_ox_unsupported(c, "%s has %lld entries (at most %d)", what,
                                         (long long)n, (int)cap);
  for (int64_t j = 0; j < n; j++) out[j] = rlx_load_i64(k->data, k->dtype, j);
  *out_n = (int32_t)n;
  return RLX_OK;
}

int32_t rlx_ox_n_out(const rlx_ox_ctx* c) { return c->n_out; }

int rlx_ox_wants(const rlx_ox_ctx* c, int32_t i) {
  return i >= 0 && i < c->n_out && c->p->output[i] && c->p->output[i][0];
}

rlx_status rlx_ox_set(rlx_ox_ctx* c, int32_t i, rlx_tensor t) {
  if (i < 0 || i >= c->n_out) return RLX_OK; /* an optional output the model does not list */
  c->out_t[i] = t;
  c->out_set[i] = 1;
  return RLX_OK;
}

/* Counts a value computed at import time against the total budget. */
static rlx_status charge_computed(rlx_ox_ctx* c, const rlx_host_tensor* t) {
  importer* I = c->I;
  if (c->p->n_input == 0) return RLX_OK; /* a Constant: the file's own data */
  I->computed_bytes += (int64_t)t->bytes;
  if (I->computed_bytes <= I->fold_budget) return RLX_OK;
  I->over_budget = 1;
  return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED,
                  "ONNX %s node '%s': values computed at import time reach %lld bytes, over the "
                  "budget of %lld bytes (RLX_ONNX_FOLD_BUDGET)",
                  c->p->op_type ? c->p->op_type : "?", node_name(c),
                  (long long)I->computed_bytes, (long long)I->fold_budget);
}

rlx_status rlx_ox_set_known(rlx_ox_ctx* c, int32_t i, rlx_host_tensor* t) {
  if (i < 0 || i >= c->n_out) {
    rlx_host_free(t);
    return RLX_OK;
  }
  rlx_status s = charge_computed(c, t);
  if (s != RLX_OK) {
    rlx_host_free(t);
    return s;
  }
  rlx_host_tensor* k = malloc(sizeof *k);
  if (!k) {
    rlx_host_free(t);
    return rlx_fail(c->I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  *k = *t;
  memset(t, 0, sizeof *t);
  free_known(c->out_k[i]);
  c->out_k[i] = k;
  c->out_t[i] = RLX_NONE;
  c->out_set[i] = 1;
  return RLX_OK;
}

/* ------------------------------------------------------------------ attributes */

static const Onnx__AttributeProto* find_attr(rlx_ox_ctx* c, const char* name) {
  for (size_t i = 0; i < c->p->n_attribute; i++) {
    const Onnx__AttributeProto* a = c->p->attribute[i];
    if (a && a->name && strcmp(a->name, name) == 0) {
      c->attr_used[i] = 1;
      return a;
    }
  }
  return NULL;
}

/* The attribute's type, also for IR v1 files that leave `type` unset. */
static int attr_type(const Onnx__AttributeProto* a) {
  if (a->has_type) return a->type;
  if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static rlx_status attr_wrong_type(rlx_ox_ctx* c, const Onnx__AttributeProto* a,
                                  const char* want) {
  return rlx_ox_invalid(c, "attribute '%s' must be %s (type code %d)", a->name, want,
                        attr_type(a));
}

int rlx_ox_attr_has(rlx_ox_ctx* c, const char* name) {
  for (size_t i = 0; i < c->p->n_attribute; i++) {
    const Onnx__AttributeProto* a = c->p->attribute[i];
    if (a && a->name && strcmp(a->name, name) == 0) return 1;
  }
  return 0;
}

void rlx_ox_attr_ignore(rlx_ox_ctx* c, const char* name) { (void)find_attr(c, name); }

rlx_status rlx_ox_attr_int(rlx_ox_ctx* c, const char* name, int64_t def, int64_t* out) {
  const Onnx__AttributeProto* a = find_attr(c, name);
  *out = def;
  if (!a) return RLX_OK;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
    return attr_wrong_type(c, a, "an int");
  *out = a->i;
  return RLX_OK;
}

rlx_status rlx_ox_attr_float(rlx_ox_ctx* c, const char* name, float def, float* out) {
  const Onnx__AttributeProto* a = find_attr(c, name);
  *out = def;
  if (!a) return RLX_OK;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
    return attr_wrong_type(c, a, "a float");
  *out = a->f;
  return RLX_OK;
}

rlx_status rlx_ox_attr_string(rlx_ox_ctx* c, const char* name, const char* def, char* out,
                              size_t cap) {
  const Onnx__AttributeProto* a = find_attr(c, name);
  if (!a) {
    snprintf(out, cap, "%s", def);
    return RLX_OK;
  }
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
    return attr_wrong_type(c, a, "a string");
  size_t n = a->s.len < cap - 1 ? a->s.len : cap - 1;
  if (n) memcpy(out, a->s.data, n);
  out[n] = '\0';
  return RLX_OK;
}

rlx_status rlx_ox_attr_ints(rlx_ox_ctx* c, const char* name, int64_t* out, int32_t cap,
                            int32_t* out_n) {
  const Onnx__AttributeProto* a = find_attr(c, name);
  *out_n = -1;
  if (!a) return RLX_OK;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
    return attr_wrong_type(c, a, "a list of ints");
  if (a->n_ints > (size_t)cap)
    return rlx_ox_unsupported(c, "attribute '%s' has %zu entries (at most %d)", name, a->n_ints,
                              (int)cap);
  if (a->n_ints) memcpy(out, a->ints, sizeof(int64_t) * a->n_ints);
  *out_n = (int32_t)a->n_ints;
  return RLX_OK;
}

rlx_status rlx_ox_attr_floats(rlx_ox_ctx* c, const char* name, float* out, int32_t cap,
                              int32_t* out_n) {
  const Onnx__AttributeProto* a = find_attr(c, name);
  *out_n = -1;
  if (!a) return RLX_OK;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS)
    return attr_wrong_type(c, a, "a list of floats");
  if (a->n_floats > (size_t)cap)
    return rlx_ox_unsupported(c, "attribute '%s' has %zu entries (at most %d)", name,
                              a->n_floats, (int)cap);
  if (a->n_floats) memcpy(out, a->floats, sizeof(float) * a->n_floats);
  *out_n = (int32_t)a->n_floats;
  return RLX_OK;
}

rlx_status rlx_ox_attr_tensor(rlx_ox_ctx* c, const char* name, rlx_host_tensor* out,
                              int* present) {
  const Onnx__AttributeProto* a = find_attr(c, name);
  memset(out, 0, sizeof *out);
  *present = 0;
  if (!a) return RLX_OK;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR || !a->t)
    return attr_wrong_type(c, a, "a tensor");
  rlx_status s = tensor_from_proto(a->t, c->I->opt ? c->I->opt->base_dir : NULL, out, c->I->err);
  if (s != RLX_OK) {
    char msg[sizeof c->I->err->msg];
    snprintf(msg, sizeof msg, "%s", c->I->err->msg);
    return rlx_fail(c->I->err, s, "ONNX %s node '%s': attribute '%s': %s", c->p->op_type,
                    node_name(c), name, msg);
  }
  *present = 1;
  return RLX_OK;
}

/* ------------------------------------------------------------------ nodes */

static void ctx_reset_outputs(rlx_ox_ctx* c) {
  for (int32_t i = 0; i < c->n_out; i++) {
    if (c->out_k[i] && c->p->n_input) c->I->computed_bytes -= (int64_t)c->out_k[i]->bytes;
    free_known(c->out_k[i]);
    c->out_k[i] = NULL;
    free(c->out_sv[i]);
    c->out_sv[i] = NULL;
    free(c->out_note[i]);
    c->out_note[i] = NULL;
    c->out_t[i] = RLX_NONE;
    c->out_set[i] = 0;
  }
  memset(c->attr_used, 0, c->p->n_attribute ? c->p->n_attribute : 1);
}

/* Runs the mapper, then checks it read every attribute and set every output. */
static rlx_status run_mapper(rlx_ox_ctx* c) {
  c->first_node = c->I->g->n_nodes;
  RLX_RETURN_IF_ERROR(c->op->map(c));
  for (size_t i = 0; i < c->p->n_attribute; i++) {
    const Onnx__AttributeProto* a = c->p->attribute[i];
    if (!c->attr_used[i])
      return rlx_ox_unsupported(c, "attribute '%s' is not supported",
                                a && a->name ? a->name : "?");
  }
  for (int32_t i = 0; i < c->n_out; i++)
    if (rlx_ox_wants(c, i) && !c->out_set[i])
      return rlx_ox_unsupported(c, "output %d ('%s') is not supported", (int)i, c->p->output[i]);
  return RLX_OK;
}

/* Known value of a scratch-graph tensor whose producer is a Constant node. */
static int constant_data(const rlx_graph* g, rlx_tensor t, const void** data, size_t* bytes) {
  const rlx_node* n = rlx_producer(g, t);
  if (n->op != RLX_OP_CONSTANT) return 0;
  *data = n->a.data;
  *bytes = n->a.data_bytes;
  return 1;
}

/* Evaluates the scratch graph's tensor outputs with the constant-folding
 * pass (the CPU reference kernels, without compiling an executable) and
 * turns them into known values. */
static rlx_status evaluate_scratch(rlx_ox_ctx* c, rlx_graph* g2) {
  rlx_tensor outs[MAX_NODE_IO];
  int32_t which[MAX_NODE_IO], n = 0;
  rlx_error* err = c->I->err;
  int64_t total = 0;
  for (int32_t v = 0; v < g2->n_values; v++) {
    int64_t b = rlx_type_bytes(&g2->values[v].type);
    if (b < 0 || (total += b) > RLX_ONNX_MAX_FOLD_BYTES)
      return rlx_fail(err, RLX_UNAVAILABLE, "too large to evaluate at import time");
  }
  for (int32_t i = 0; i < c->n_out; i++) {
    if (!c->out_set[i] || c->out_k[i]) continue;
    rlx_tensor t = c->out_t[i];
    const rlx_type* ty = rlx_tensor_type(g2, t);
    rlx_host_tensor h;
    const void* data = NULL;
    size_t bytes = 0;
    if (rlx_type_numel(ty) == 0 || constant_data(g2, t, &data, &bytes)) {
      RLX_RETURN_IF_ERROR(rlx_host_alloc(&h, ty->dtype, ty->rank, ty->shape, err));
      if (h.bytes) memcpy(h.data, data, h.bytes);
      RLX_RETURN_IF_ERROR(rlx_ox_set_known(c, i, &h));
      continue;
    }
    outs[n] = t;
    which[n++] = i;
  }
  if (n == 0) return RLX_OK;
  RLX_RETURN_IF_ERROR(rlx_ox_check(c, rlx_graph_set_outputs(g2, outs, n)));
  rlx_fold_value vals[MAX_NODE_IO];
  rlx_status s = rlx_fold_evaluate(g2, rlx_ref_run_step, vals);
  if (s != RLX_OK) {
    if (s == RLX_RESOURCE_EXHAUSTED) return rlx_fail(err, s, "%s", g2->err.msg);
    return rlx_fail(err, s, "ONNX %s node '%s': evaluating at import time: %s", c->p->op_type,
                    node_name(c), g2->err.msg);
  }
  for (int32_t j = 0; j < n; j++) {
    rlx_host_tensor h;
    const rlx_type* ty = &vals[j].type;
    if (s == RLX_OK) s = rlx_host_alloc(&h, ty->dtype, ty->rank, ty->shape, err);
    if (s == RLX_OK) {
      if (h.bytes) memcpy(h.data, vals[j].data, h.bytes);
      s = rlx_ox_set_known(c, which[j], &h);
    }
    rlx_fold_value_free(&vals[j]);
  }
  return s;
}

/* Evaluates a node whose inputs are all known. A failure to run it (not to
 * map it) is reported as RLX_UNAVAILABLE so the caller can build it into the
 * main graph instead. */
static rlx_status fold_node(rlx_ox_ctx* c) {
  importer* I = c->I;
  rlx_graph* g2 = NULL;
  RLX_RETURN_IF_ERROR(rlx_graph_create(&g2));
  ival* saved[MAX_NODE_IO];
  for (int32_t i = 0; i < c->n_in; i++) {
    saved[i] = c->in[i];
    if (!c->in[i]) continue;
    c->fold_in[i] = *c->in[i];
    c->fold_in[i].t = RLX_NONE;
    c->fold_in[i].is_param = 0;
    c->in[i] = &c->fold_in[i];
  }
  I->g = g2;
  c->folding = 1;
  rlx_status s = run_mapper(c);
  if (s == RLX_OK && evaluate_scratch(c, g2) != RLX_OK)
    s = I->over_budget ? RLX_RESOURCE_EXHAUSTED : RLX_UNAVAILABLE;
  I->g = I->main;
  c->folding = 0;
  for (int32_t i = 0; i < c->n_in; i++) c->in[i] = saved[i];
  rlx_graph_destroy(g2);
  return s;
}

/* Root graph input of a run-time value derived from the node's inputs. */
static int32_t root_of(const rlx_ox_ctx* c) {
  for (int32_t i = 0; i < c->n_in; i++)
    if (c->in[i] && !c->in[i]->k && c->in[i]->root_input >= 0) return c->in[i]->root_input;
  return -1;
}

static rlx_status register_outputs(rlx_ox_ctx* c) {
  importer* I = c->I;
  int32_t root = root_of(c);
  for (int32_t i = 0; i < c->n_out; i++) {
    if (!rlx_ox_wants(c, i)) continue;
    int32_t v;
    RLX_RETURN_IF_ERROR(add_val(I, c->p->output[i], &v));
    ival* x = &I->vals[v];
    x->k = c->out_k[i];
    c->out_k[i] = NULL;
    x->sv = c->out_sv[i];
    c->out_sv[i] = NULL;
    x->note = c->out_note[i];
    c->out_note[i] = NULL;
    x->t = x->k || x->sv ? RLX_NONE : c->out_t[i];
    x->root_input = x->k ? -1 : root;
    /* Label the node this ONNX node made, for errors and `rlx dot`. */
    if (x->t != RLX_NONE && I->g->values[x->t].node >= c->first_node &&
        !(rlx_op_table[rlx_producer(I->g, x->t)->op].flags & OPF_LEAF))
      rlx_graph_set_name(I->g, x->t, x->name);
  }
  return RLX_OK;
}

static int is_default_domain(const char* d) {
  return !d || !d[0] || strcmp(d, "ai.onnx") == 0;
}

static rlx_status import_node(importer* I, const Onnx__NodeProto* p, int32_t index) {
  rlx_ox_ctx* c = calloc(1, sizeof *c);
  if (!c) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  c->I = I;
  c->p = p;
  rlx_status s = RLX_OK;
  const char* op_type = p->op_type ? p->op_type : "";
  const char* name = p->name && p->name[0] ? p->name : (p->n_output && p->output[0] ? p->output[0] : "?");
  if (!is_default_domain(p->domain))
    s = rlx_fail(I->err, RLX_UNIMPLEMENTED, "ONNX %s node '%s': domain '%s' is not supported",
                 op_type, name, p->domain);
  else if (!(c->op = rlx_ox_find_op(op_type)))
    s = rlx_fail(I->err, RLX_UNIMPLEMENTED, "ONNX op type '%s' (node %d '%s') is not supported",
                 op_type, (int)index, name);
  else if (p->n_input > MAX_NODE_IO || p->n_output > MAX_NODE_IO)
    s = rlx_fail(I->err, RLX_UNIMPLEMENTED, "ONNX %s node '%s': more than %d inputs or outputs",
                 op_type, name, MAX_NODE_IO);
  if (s == RLX_OK && !(c->attr_used = calloc(p->n_attribute ? p->n_attribute : 1, 1)))
    s = rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  int all_known = 1, n_present = 0;
  for (size_t i = 0; s == RLX_OK && i < p->n_input; i++) {
    const char* in = p->input[i];
    c->n_in = (int32_t)i + 1;
    if (!in || !in[0]) continue; /* an absent optional input */
    int32_t v = find_val(I, in);
    if (v < 0) {
      s = rlx_fail(I->err, RLX_INVALID_ARGUMENT,
                   "ONNX %s node '%s': input '%s' is not a graph input, initializer or earlier "
                   "node's output", op_type, name, in);
      break;
    }
    c->in[i] = &I->vals[v];
    n_present++;
    all_known &= c->in[i]->k != NULL;
  }
  c->n_out = (int32_t)p->n_output;
  for (int32_t i = 0; i < c->n_out; i++) c->out_t[i] = RLX_NONE;
  if (s == RLX_OK && all_known && n_present > 0 && !c->op->nofold) {
    s = fold_node(c);
    if (s == RLX_UNAVAILABLE) { /* could not evaluate: build it into the graph instead */
      ctx_reset_outputs(c);
      s = run_mapper(c);
    }
  } else if (s == RLX_OK) {
    int handled = 0;
    s = rlx_ox_shape_value(c, &handled);
    if (s == RLX_OK && !handled) {
      ctx_reset_outputs(c);
      s = run_mapper(c);
    }
  }
  if (s == RLX_OK) s = register_outputs(c);
  for (int32_t i = 0; i < c->n_out; i++) {
    free_known(c->out_k[i]);
    free(c->out_sv[i]);
    free(c->out_note[i]);
  }
  free(c->attr_used);
  free(c);
  return s;
}

/* ------------------------------------------------------------------ graph inputs */

/* Symbol names must be identifiers: other characters become '_'. */
static rlx_status dim_symbol(importer* I, const char* param, rlx_dim* out) {
  char name[128];
  if (param && param[0]) {
    size_t n = 0;
    if (param[0] >= '0' && param[0] <= '9') name[n++] = '_';
    for (const char* p = param; *p && n + 1 < sizeof name; p++) {
      int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9');
      name[n++] = ok ? *p : '_';
    }
    name[n] = '\0';
  } else {
    snprintf(name, sizeof name, "unk_%d", (int)I->n_fresh++);
  }
  rlx_status s = rlx_graph_symbol(I->main, name, out);
  if (s != RLX_OK) return rlx_fail(I->err, s, "%s", rlx_graph_last_error(I->main));
  return RLX_OK;
}

static rlx_status add_graph_input(importer* I, const Onnx__ValueInfoProto* vi, int32_t v) {
  const char* name = vi->name;
  const Onnx__TypeProto* tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
    return rlx_fail(I->err, RLX_UNIMPLEMENTED,
                    "ONNX graph input '%s': only tensor inputs are supported", name);
  const Onnx__TypeProto__Tensor* tt = tp->tensor_type;
  int dt = dtype_from_onnx(tt->elem_type);
  if (dt < 0)
    return rlx_fail(I->err, RLX_UNIMPLEMENTED, "ONNX graph input '%s': data type %s is not "
                    "supported", name, onnx_dtype_name(tt->elem_type));
  if (!tt->shape)
    return rlx_fail(I->err, RLX_UNIMPLEMENTED, "ONNX graph input '%s': unknown rank", name);
  if (tt->shape->n_dim > RLX_MAX_RANK)
    return rlx_fail(I->err, RLX_UNIMPLEMENTED, "ONNX graph input '%s': rank %zu exceeds %d",
                    name, tt->shape->n_dim, RLX_MAX_RANK);
  rlx_dim shape[RLX_MAX_RANK];
  for (size_t i = 0; i < tt->shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension* d = tt->shape->dim[i];
    if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (d->dim_value < 0)
        return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX graph input '%s': dim %zu is %lld",
                        name, i, (long long)d->dim_value);
      shape[i] = d->dim_value;
    } else {
      const char* param =
          d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? d->dim_param
                                                                                   : NULL;
      RLX_RETURN_IF_ERROR(dim_symbol(I, param, &shape[i]));
    }
  }
  /* Every declared input joins the graph, in file order, even one that
   * only Shape, Size or CastLike's `like` reads (folded away) or that no
   * node reads: callers set every input the model declares, and each is
   * checked against its declared dtype and rank. */
  ival* x = &I->vals[v];
  rlx_status s = rlx_graph_add_input(I->main, name, (rlx_dtype)dt, shape,
                                     (int32_t)tt->shape->n_dim, &x->t);
  if (s != RLX_OK)
    return rlx_fail(I->err, s, "ONNX graph input '%s': %s", name, rlx_graph_last_error(I->main));
  x->is_input = 1;
  x->root_input = v;
  return RLX_OK;
}

static int frozen_index(const rlx_onnx_options* o, const char* name) {
  for (int32_t i = 0; o && i < o->n_frozen; i++)
    if (o->frozen_names[i] && strcmp(o->frozen_names[i], name) == 0) return i;
  return -1;
}

static rlx_status add_initializers(importer* I, const Onnx__GraphProto* gp) {
  if (gp->n_sparse_initializer)
    return rlx_fail(I->err, RLX_UNIMPLEMENTED, "ONNX sparse initializers are not supported");
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto* tp = gp->initializer[i];
    if (!tp || !tp->name || !tp->name[0])
      return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX initializer %zu has no name", i);
    int32_t v;
    RLX_RETURN_IF_ERROR(add_val(I, tp->name, &v));
    rlx_host_tensor* k = calloc(1, sizeof *k);
    if (!k) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    rlx_status s = tensor_from_proto(tp, I->opt ? I->opt->base_dir : NULL, k, I->err);
    if (s != RLX_OK) {
      free(k);
      char msg[sizeof I->err->msg];
      snprintf(msg, sizeof msg, "%s", I->err->msg);
      return rlx_fail(I->err, s, "ONNX initializer: %s", msg);
    }
    I->vals[v].k = k;
    I->vals[v].is_param = 1;
  }
  return RLX_OK;
}

static rlx_status add_inputs(importer* I, const Onnx__GraphProto* gp, rlx_onnx_model* m) {
  m->inputs = calloc(gp->n_input ? gp->n_input : 1, sizeof(char*));
  m->input_frozen = calloc(gp->n_input ? gp->n_input : 1, sizeof(int32_t));
  m->input_in_graph = calloc(gp->n_input ? gp->n_input : 1, sizeof(int32_t));
  m->input_read = calloc(gp->n_input ? gp->n_input : 1, sizeof(int32_t));
  if (!m->inputs || !m->input_frozen || !m->input_in_graph || !m->input_read)
    return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto* vi = gp->input[i];
    if (!vi || !vi->name || !vi->name[0])
      return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX graph input %zu has no name", i);
    if (find_val(I, vi->name) >= 0) continue; /* an initializer listed as input (IR < 4) */
    int32_t at = m->n_inputs;
    m->inputs[at] = malloc(strlen(vi->name) + 1);
    if (!m->inputs[at]) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    strcpy(m->inputs[at], vi->name);
    m->n_inputs++;
    int32_t v;
    RLX_RETURN_IF_ERROR(add_val(I, vi->name, &v));
    int f = frozen_index(I->opt, vi->name);
    if (f < 0) {
      RLX_RETURN_IF_ERROR(add_graph_input(I, vi, v));
      continue;
    }
    m->input_frozen[at] = 1;
    rlx_host_tensor* k = calloc(1, sizeof *k);
    if (!k) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    I->vals[v].k = k;
    RLX_RETURN_IF_ERROR(host_copy(k, &I->opt->frozen_values[f], I->err));
  }
  return RLX_OK;
}

static rlx_status set_graph_outputs(importer* I, const Onnx__GraphProto* gp) {
  if (gp->n_output == 0 || gp->n_output > 4096)
    return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX graph has %zu outputs", gp->n_output);
  rlx_tensor* outs = malloc(sizeof(rlx_tensor) * gp->n_output);
  if (!outs) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  rlx_status s = RLX_OK;
  for (size_t i = 0; s == RLX_OK && i < gp->n_output; i++) {
    const char* name = gp->output[i] && gp->output[i]->name ? gp->output[i]->name : "";
    int32_t v = find_val(I, name);
    if (v < 0) {
      s = rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX graph output '%s' is never produced", name);
      break;
    }
    s = materialize(I, &I->vals[v], 1);
    outs[i] = I->vals[v].t;
  }
  if (s == RLX_OK && rlx_graph_set_outputs(I->main, outs, (int32_t)gp->n_output) != RLX_OK)
    s = rlx_fail(I->err, RLX_INTERNAL, "%s", rlx_graph_last_error(I->main));
  free(outs);
  return s;
}

/* Moves the values of the params the graph uses into the model. */
static rlx_status collect_params(importer* I, rlx_onnx_model* m) {
  m->params = calloc(I->n_param_vals ? (size_t)I->n_param_vals : 1, sizeof(rlx_onnx_param));
  if (!m->params) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (int32_t i = 0; i < I->n_param_vals; i++) {
    ival* v = &I->vals[I->param_vals[i]];
    rlx_onnx_param* p = &m->params[m->n_params++];
    p->name = v->name;
    v->name = NULL;
    p->value = *v->k;
    free(v->k);
    v->k = NULL;
  }
  return RLX_OK;
}

static rlx_status find_opset(importer* I, const Onnx__ModelProto* mp) {
  I->opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto* o = mp->opset_import[i];
    if (o && is_default_domain(o->domain)) I->opset = o->version;
  }
  if (I->opset < 0) /* IR v1-2 files carry no opset_import: opset 1 */
    I->opset = mp->n_opset_import ? -1 : 1;
  if (I->opset < 1)
    return rlx_fail(I->err, RLX_UNIMPLEMENTED, "ONNX model imports no default-domain opset");
  if (I->opset > 22)
    return rlx_fail(I->err, RLX_UNIMPLEMENTED, "ONNX opset %lld is newer than 22",
                    (long long)I->opset);
  return RLX_OK;
}


static rlx_status import_graph(importer* I, const Onnx__ModelProto* mp, rlx_onnx_model* m) {
  const Onnx__GraphProto* gp = mp->graph;
  if (!gp) return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX model has no graph");
  RLX_RETURN_IF_ERROR(find_opset(I, mp));
  m->opset = I->opset;
  RLX_RETURN_IF_ERROR(add_initializers(I, gp));
  RLX_RETURN_IF_ERROR(add_inputs(I, gp, m));
  for (size_t i = 0; i < gp->n_node; i++) {
    if (!gp->node[i]) return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX node %zu is empty", i);
    RLX_RETURN_IF_ERROR(import_node(I, gp->node[i], (int32_t)i));
  }
  RLX_RETURN_IF_ERROR(set_graph_outputs(I, gp));
  for (int32_t i = 0; i < m->n_inputs; i++) {
    int32_t v = find_val(I, m->inputs[i]);
    m->input_in_graph[i] = v >= 0 && I->vals[v].is_input;
    m->input_read[i] = m->input_in_graph[i] && rlx_graph_value_is_read(I->main, I->vals[v].t);
  }
  return collect_params(I, m);
}

/* A graph output as a Deferred node: the file's declared dtype and rank;
 * each dim a symbol (a dim_param keeps its name; a fixed dim may change with
 * the input values, so it becomes a fresh symbol too). */
static rlx_status add_deferred_output(importer* I, const Onnx__ValueInfoProto* vi,
                                      rlx_tensor* out) {
  const char* name = vi && vi->name ? vi->name : "";
  const Onnx__TypeProto* tp = vi ? vi->type : NULL;
  const Onnx__TypeProto__Tensor* tt =
      tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
  int dt = tt ? dtype_from_onnx(tt->elem_type) : -1;
  if (!name[0] || dt < 0 || !tt->shape || tt->shape->n_dim > RLX_MAX_RANK)
    return rlx_fail(I->err, RLX_UNIMPLEMENTED,
                    "ONNX graph output '%s': its body needs input values at import time, and "
                    "without them the output needs a declared tensor dtype and rank (<= %d)",
                    name, RLX_MAX_RANK);
  rlx_node_attrs a;
  memset(&a, 0, sizeof a);
  a.name = (char*)name;
  a.type.dtype = (rlx_dtype)dt;
  a.type.rank = (int32_t)tt->shape->n_dim;
  for (size_t i = 0; i < tt->shape->n_dim; i++) {
    const Onnx__TensorShapeProto__Dimension* d = tt->shape->dim[i];
    int named = d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    RLX_RETURN_IF_ERROR(dim_symbol(I, named ? d->dim_param : NULL, &a.type.shape[i]));
  }
  if (rlx_graph_add_node(I->main, RLX_OP_DEFERRED, &a, NULL, 0, out) != RLX_OK ||
      rlx_graph_set_name(I->main, *out, name) != RLX_OK)
    return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX graph output '%s': %s", name,
                    rlx_graph_last_error(I->main));
  return RLX_OK;
}

/* The interface of a model whose body needs input values (opt->deferred). */
static rlx_status import_deferred(importer* I, const Onnx__ModelProto* mp, rlx_onnx_model* m) {
  const Onnx__GraphProto* gp = mp->graph;
  if (!gp) return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX model has no graph");
  RLX_RETURN_IF_ERROR(find_opset(I, mp));
  m->opset = I->opset;
  RLX_RETURN_IF_ERROR(add_initializers(I, gp));
  RLX_RETURN_IF_ERROR(add_inputs(I, gp, m));
  for (int32_t v = 0; v < I->n_vals; v++)
    if (I->vals[v].is_param) RLX_RETURN_IF_ERROR(materialize(I, &I->vals[v], 1));
  if (gp->n_output == 0 || gp->n_output > 4096)
    return rlx_fail(I->err, RLX_INVALID_ARGUMENT, "ONNX graph has %zu outputs", gp->n_output);
  rlx_tensor* outs = malloc(sizeof(rlx_tensor) * gp->n_output);
  if (!outs) return rlx_fail(I->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  rlx_status s = RLX_OK;
  for (size_t i = 0; s == RLX_OK && i < gp->n_output; i++)
    s = add_deferred_output(I, gp->output[i], &outs[i]);
  if (s == RLX_OK && rlx_graph_set_outputs(I->main, outs, (int32_t)gp->n_output) != RLX_OK)
    s = rlx_fail(I->err, RLX_INTERNAL, "%s", rlx_graph_last_error(I->main));
  free(outs);
  for (int32_t i = 0; s == RLX_OK && i < m->n_inputs; i++) m->input_in_graph[i] = 1;
  return s == RLX_OK ? collect_params(I, m) : s;
}

rlx_status rlx_onnx_import(const void* buf, size_t n, const rlx_onnx_options* opt,
                           rlx_onnx_model** out_model, rlx_error* err) {
  if (!out_model || (!buf && n)) return rlx_fail(err, RLX_INVALID_ARGUMENT, "bad arguments");
  *out_model = NULL;
  if (opt && opt->needs_input && opt->needs_input_cap) opt->needs_input[0] = '\0';
  RLX_RETURN_IF_ERROR(rlx_onnx_check_depth(buf, n, &onnx__model_proto__descriptor, err));
  Onnx__ModelProto* mp = onnx__model_proto__unpack(NULL, n, buf);
  if (!mp) return rlx_fail(err, RLX_INVALID_ARGUMENT, "not an ONNX model (protobuf parse failed)");
  rlx_error local;
  importer I;
  memset(&I, 0, sizeof I);
  I.opt = opt;
  I.err = err ? err : &local;
  uint64_t budget = rlx_env_size(RLX_ENV_ONNX_FOLD_BUDGET);
  I.fold_budget = budget > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)budget;
  rlx_onnx_model* m = calloc(1, sizeof *m);
  rlx_status s = m ? rlx_graph_create(&I.main) : RLX_RESOURCE_EXHAUSTED;
  if (s != RLX_OK) rlx_fail(I.err, s, "out of host memory");
  I.g = I.main;
  if (s == RLX_OK) s = opt && opt->deferred ? import_deferred(&I, mp, m) : import_graph(&I, mp, m);
  if (s == RLX_OK) {
    m->graph = I.main;
    I.main = NULL;
    *out_model = m;
  } else {
    rlx_onnx_model_destroy(m);
  }
  importer_free(&I);
  onnx__model_proto__free_unpacked(mp, NULL);
  return s;
}

#endif /* RLX_HAVE_ONNX */

/* ------------------------------------------------------------------ public API */

static char* dup_message(const char* msg) {
  size_t n = strlen(msg) + 1;
  char* p = malloc(n);
  if (p) memcpy(p, msg, n);
  return p;
}

static rlx_status report(rlx_status s, const rlx_error* err, char** out_error) {
  if (out_error) *out_error = s == RLX_OK ? NULL : dup_message(err->msg);
  return s;
}

/* Options freezing the given inputs. The host tensors borrow the caller's
 * data (the importer only reads it). */
static rlx_status frozen_options(const rlx_onnx_frozen_input* frozen, int32_t n,
                                 rlx_onnx_options* opt, const char*** names,
                                 rlx_host_tensor** values, rlx_error* err) {
  memset(opt, 0, sizeof *opt);
  *names = NULL;
  *values = NULL;
  if (n <= 0) return RLX_OK;
  if (!frozen) return rlx_fail(err, RLX_INVALID_ARGUMENT, "frozen inputs missing");
  *names = calloc((size_t)n, sizeof **names);
  *values = calloc((size_t)n, sizeof **values);
  if (!*names || !*values) return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (int32_t i = 0; i < n; i++) {
    const rlx_onnx_frozen_input* f = &frozen[i];
    if (!f->name || f->rank < 0 || f->rank > RLX_MAX_RANK || (f->rank && !f->shape) ||
        (unsigned)f->dtype >= RLX_DTYPE_COUNT || (f->bytes && !f->data))
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "frozen input %d is malformed", i);
    rlx_host_tensor* t = &(*values)[i];
    t->dtype = f->dtype;
    t->rank = f->rank;
    for (int32_t d = 0; d < f->rank; d++) t->shape[d] = f->shape[d];
    if (rlx_host_numel(t) < 0 || (size_t)rlx_host_numel(t) * rlx_dtype_size(f->dtype) != f->bytes)
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "frozen input '%s': %zu bytes do not match its shape",
                      f->name, f->bytes);
    t->data = (void*)f->data;
    t->bytes = f->bytes;
    (*names)[i] = f->name;
  }
  opt->frozen_names = *names;
  opt->frozen_values = *values;
  opt->n_frozen = n;
  return RLX_OK;
}

static rlx_status load_frozen(const char* path, const rlx_onnx_frozen_input* frozen, int32_t n,
                              rlx_graph** out_graph, rlx_exec* e, char** out_needed,
                              char** out_error);

/* The rebuild hook of a deferred ONNX graph: the model's path (made
 * absolute, so a later chdir does not lose it); the body is imported again
 * with the value inputs frozen. */
typedef struct onnx_rebuild {
  rlx_rebuild_hook base; /* first: the hook is the struct */
  char* path;
} onnx_rebuild;

static rlx_status onnx_rebuild_build(const rlx_rebuild_hook* h, const rlx_rebuild_value* values,
                                     int32_t n, rlx_graph** out, char** out_needed,
                                     rlx_error* err) {
  const onnx_rebuild* r = (const onnx_rebuild*)h;
  rlx_onnx_frozen_input* frozen = calloc((size_t)n + 1, sizeof *frozen);
  if (!frozen) return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  for (int32_t i = 0; i < n; i++)
    frozen[i] = (rlx_onnx_frozen_input){values[i].name, values[i].dtype, values[i].rank,
                                        values[i].shape, values[i].data, values[i].bytes};
  char* msg = NULL;
  rlx_status s = load_frozen(r->path, frozen, n, out, NULL, out_needed, &msg);
  if (s != RLX_OK) rlx_fail(err, s, "rebuilding %s: %s", r->path, msg ? msg : "failed");
  free(msg);
  free(frozen);
  return s;
}

static void onnx_rebuild_destroy(rlx_rebuild_hook* h) {
  onnx_rebuild* r = (onnx_rebuild*)h;
  free(r->path);
  free(r->base.first_needed);
  free(r);
}

static rlx_status attach_rebuild(rlx_graph* g, const char* path, const char* needed,
                                 rlx_error* err) {
  onnx_rebuild* r = calloc(1, sizeof *r);
  if (r) {
    r->path = realpath(path, NULL);
    if (!r->path) r->path = dup_message(path);
    r->base.first_needed = dup_message(needed);
  }
  if (!r || !r->path || !r->base.first_needed) {
    if (r) onnx_rebuild_destroy(&r->base);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  r->base.refs = 1;
  r->base.build = onnx_rebuild_build;
  r->base.destroy = onnx_rebuild_destroy;
  g->rebuild = &r->base;
  return RLX_OK;
}

/* path's interface as a deferred graph (Deferred outputs, rebuild hook);
 * `needed` names the input whose value the body needs. */
static rlx_status load_deferred(const char* path, const char* needed, rlx_onnx_model** m,
                                rlx_error* err) {
  rlx_onnx_model_destroy(*m);
  *m = NULL;
  rlx_onnx_options opt;
  memset(&opt, 0, sizeof opt);
  opt.deferred = 1;
  rlx_error why = {{0}};
  rlx_status s = rlx_onnx_import_file(path, &opt, m, &why);
  if (s == RLX_OK) s = attach_rebuild((*m)->graph, path, needed, &why);
  if (s != RLX_OK)
    return rlx_fail(err, s, "%s (and the model's interface alone: %s)", err->msg, why.msg);
  return RLX_OK;
}

/* Imports path with the given inputs frozen; the graph goes to out_graph
 * (if not NULL) and the params to e (if not NULL). */
/* When out_needed is not NULL it receives the name of the graph input the
 * import needs a value of (malloc'd), or NULL. */
static rlx_status load_frozen(const char* path, const rlx_onnx_frozen_input* frozen, int32_t n,
                              rlx_graph** out_graph, rlx_exec* e, char** out_needed,
                              char** out_error) {
  rlx_error err = {{0}};
  char needs[256] = "";
  if (out_needed) *out_needed = NULL;
  if (!path || (!out_graph && !e))
    return report(rlx_fail(&err, RLX_INVALID_ARGUMENT, "path and a graph or executable are required"),
                  &err, out_error);
  if (out_graph) *out_graph = NULL;
  rlx_onnx_options opt;
  const char** names = NULL;
  rlx_host_tensor* values = NULL;
  rlx_onnx_model* m = NULL;
  rlx_status s = frozen_options(frozen, n, &opt, &names, &values, &err);
  if (s == RLX_OK) {
    opt.needs_input = needs;
    opt.needs_input_cap = sizeof needs;
    s = rlx_onnx_import_file(path, &opt, &m, &err);
  }
  if (s == RLX_FAILED_PRECONDITION && out_needed && needs[0]) *out_needed = dup_message(needs);
  /* Nothing frozen and nobody asking what is needed: the interface now,
   * the body at run time (value_inputs.c). */
  if (s == RLX_FAILED_PRECONDITION && !out_needed && needs[0] && n <= 0)
    s = load_deferred(path, needs, &m, &err);
  if (s == RLX_OK && e) s = rlx_onnx_model_set_params(m, e, &err);
  if (s == RLX_OK && out_graph) {
    *out_graph = m->graph;
    m->graph = NULL;
  }
  rlx_onnx_model_destroy(m);
  free(names);
  free(values); /* borrowed data: not freed */
  return report(s, &err, out_error);
}

rlx_status rlx_onnx_load_frozen_ex(const char* path, const rlx_onnx_frozen_input* frozen,
                                   int32_t n_frozen, rlx_graph** out_graph,
                                   char** out_needed_input, char** out_error) {
  if (!out_graph) return load_frozen(path, NULL, 0, NULL, NULL, out_needed_input, out_error);
  return load_frozen(path, frozen, n_frozen, out_graph, NULL, out_needed_input, out_error);
}

rlx_status rlx_onnx_load(const char* path, rlx_graph** out_graph, char** out_error) {
  if (!out_graph) return load_frozen(path, NULL, 0, NULL, NULL, NULL, out_error);
  return load_frozen(path, NULL, 0, out_graph, NULL, NULL, out_error);
}

rlx_status rlx_onnx_set_params(rlx_exec* e, const char* path, char** out_error) {
  return load_frozen(path, NULL, 0, NULL, e, NULL, out_error);
}

rlx_status rlx_onnx_load_frozen(const char* path, const rlx_onnx_frozen_input* frozen,
                                int32_t n_frozen, rlx_graph** out_graph, char** out_error) {
  if (!out_graph) return load_frozen(path, NULL, 0, NULL, NULL, NULL, out_error);
  return load_frozen(path, frozen, n_frozen, out_graph, NULL, NULL, out_error);
}

rlx_status rlx_onnx_set_params_frozen(rlx_exec* e, const char* path,
                                      const rlx_onnx_frozen_input* frozen, int32_t n_frozen,
                                      char** out_error) {
  if (!e) return load_frozen(path, NULL, 0, NULL, NULL, NULL, out_error);
  return load_frozen(path, frozen, n_frozen, NULL, e, NULL, out_error);
}

rlx_status rlx_onnx_read_tensor(const char* path, rlx_dtype* out_dtype, int32_t* out_rank,
                                int64_t* out_shape, void** out_data, size_t* out_bytes,
                                char** out_error) {
  rlx_error err = {{0}};
  if (!path || !out_dtype || !out_rank || !out_shape || !out_data || !out_bytes)
    return report(rlx_fail(&err, RLX_INVALID_ARGUMENT, "all out-parameters are required"), &err,
                  out_error);
  *out_data = NULL;
  *out_bytes = 0;
  void* buf = NULL;
  size_t n = 0;
  rlx_host_tensor t;
#ifndef RLX_HAVE_ONNX
  return report(rlx_onnx_decode_tensor(NULL, 0, &t, NULL, 0, &err), &err, out_error);
#endif
  rlx_status s = rlx_onnx_read_file(path, &buf, &n, &err);
  if (s == RLX_OK) {
    s = rlx_onnx_decode_tensor(buf, n, &t, NULL, 0, &err);
    free(buf);
  }
  if (s == RLX_OK) {
    if (!t.data && !(t.data = malloc(1))) {
      s = rlx_fail(&err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    } else {
      *out_dtype = t.dtype;
      *out_rank = t.rank;
      memcpy(out_shape, t.shape, sizeof(int64_t) * (size_t)t.rank);
      *out_data = t.data;
      *out_bytes = t.bytes;
    }
  }
  return report(s, &err, out_error);
}
