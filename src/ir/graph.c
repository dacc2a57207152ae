/* Graph storage, the op table, and the public builders. Every builder fills
 * an rlx_node_attrs and goes through rlx_graph_add_node, so the shape rules in
 * shape.c are the single place where a node is verified. */
#include "ir/graph.h"
#include "ir/names.h"

#include "base/scalar_math.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const rlx_op_info rlx_op_table[RLX_OP_COUNT] = {
#define OP(e, text, min_in, max_in, n_out, attrs, flags) \
  [RLX_OP_##e] = {text, min_in, max_in, n_out, attrs, flags},
#include "ir/ops.def"
#undef OP
};

/* ------------------------------------------------------------------ names */

const char* rlx_op_name(rlx_op op, int32_t kind) {
  if ((unsigned)op >= RLX_OP_COUNT) return "?";
  switch (op) {
    case RLX_OP_BINARY:
      return (unsigned)kind < RLX_BIN_COUNT ? rlx_binary_names[kind] : rlx_op_table[op].text;
    case RLX_OP_COMPARE:
      return (unsigned)kind < RLX_CMP_COUNT ? rlx_compare_names[kind] : rlx_op_table[op].text;
    case RLX_OP_ACTIVATION:
      return (unsigned)kind < RLX_ACT_COUNT ? rlx_activation_names[kind] : rlx_op_table[op].text;
    case RLX_OP_REDUCE:
      return (unsigned)kind < RLX_RED_COUNT ? rlx_reduce_names[kind] : rlx_op_table[op].text;
    default:
      return rlx_op_table[op].text;
  }
}

rlx_status rlx_graph_fail_op(rlx_graph* g, rlx_op op, int32_t kind, const char* fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "%s %%%d: %s", rlx_op_name(op, kind),
                  (int)g->n_nodes, msg);
}

/* ------------------------------------------------------------------ types */

int rlx_dtype_is_float(rlx_dtype t) {
  return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16 || t == RLX_F64 || rlx_dtype_is_f8(t);
}

int rlx_dtype_is_int(rlx_dtype t) {
  return t == RLX_I8 || t == RLX_U8 || t == RLX_I32 || t == RLX_I64 || t == RLX_I16 ||
         t == RLX_U16 || t == RLX_U32 || t == RLX_U64;
}

int rlx_dtype_is_compute_float(rlx_dtype t) { return rlx_dtype_is_float(t) && !rlx_dtype_is_f8(t); }

int64_t rlx_type_numel(const rlx_type* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->rank; i++) {
    if (t->shape[i] < 0) return -1;
    if (t->shape[i] != 0 && n > INT64_MAX / t->shape[i]) return -1; /* never in a graph */
    n *= t->shape[i];
  }
  return n;
}

int64_t rlx_type_bytes(const rlx_type* t) {
  int64_t n = rlx_type_numel(t);
  int64_t size = (int64_t)rlx_dtype_size(t->dtype);
  if (n < 0 || (size && n > INT64_MAX / size)) return -1;
  return n * size;
}

int rlx_type_equal(const rlx_type* a, const rlx_type* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int32_t i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

const char* rlx_type_str(const rlx_graph* g, const rlx_type* t, char* buf, size_t cap) {
  if (!cap) return buf;
  size_t at = 0;
  int n = snprintf(buf, cap, "%s[", rlx_dtype_name(t->dtype));
  at = n > 0 ? (size_t)n : 0;
  for (int32_t i = 0; i < t->rank && i < RLX_MAX_RANK && at < cap; i++) {
    rlx_dim d = t->shape[i];
    const char* sep = i ? "," : "";
    int64_t sym = d < 0 ? -(d + 1) : 0; /* no overflow, even for RLX_DIM_INFER */
    if (d >= 0)
      n = snprintf(buf + at, cap - at, "%s%lld", sep, (long long)d);
    else if (g && sym < g->n_symbols)
      n = snprintf(buf + at, cap - at, "%s%s", sep, g->symbols[sym]);
    else
      n = snprintf(buf + at, cap - at, "%s?", sep);
    at += n > 0 ? (size_t)n : 0;
  }
  if (at < cap) snprintf(buf + at, cap - at, "]");
  return buf;
}

const char* rlx_node_str(const rlx_graph* g, int32_t node, char* buf, size_t cap) {
  if (!g || node < 0 || node >= g->n_nodes) {
    snprintf(buf, cap, "%%%d (?)", (int)node);
    return buf;
  }
  const rlx_node* n = &g->nodes[node];
  const char* name = rlx_op_name(n->op, n->a.kind);
  if (n->label)
    snprintf(buf, cap, "%%%d (%s '%s')", (int)node, name, n->label);
  else
    snprintf(buf, cap, "%%%d (%s)", (int)node, name);
  return buf;
}

/* ------------------------------------------------------------------ graph */

static char* dup_string(const char* s) {
  size_t n = strlen(s) + 1;
  char* p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

static void free_attrs(rlx_node_attrs* a) {
  free(a->name);
  free(a->data);
  a->name = NULL;
  a->data = NULL;
}

rlx_status rlx_graph_create(rlx_graph** out_graph) {
  if (!out_graph) return RLX_INVALID_ARGUMENT;
  *out_graph = calloc(1, sizeof(rlx_graph));
  return *out_graph ? RLX_OK : RLX_RESOURCE_EXHAUSTED;
}

void rlx_graph_destroy(rlx_graph* g) {
  if (!g) return;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    free_attrs(&g->nodes[i].a);
    free(g->nodes[i].label);
  }
  for (int32_t i = 0; i < g->n_symbols; i++) free(g->symbols[i]);
  free(g->nodes);
  free(g->values);
  free(g->symbols);
  free(g->dim_defs);
  free(g->outputs);
  rlx_rebuild_hook_unref(g->rebuild);
  free(g);
}

void rlx_rebuild_hook_ref(rlx_rebuild_hook* h) {
  if (h) __atomic_add_fetch(&h->refs, 1, __ATOMIC_RELAXED);
}

void rlx_rebuild_hook_unref(rlx_rebuild_hook* h) {
  if (h && __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0) h->destroy(h);
}

int rlx_graph_has_deferred(const rlx_graph* g) {
  for (int32_t i = 0; g && i < g->n_nodes; i++)
    if (g->nodes[i].op == RLX_OP_DEFERRED) return 1;
  return 0;
}

const char* rlx_graph_last_error(const rlx_graph* g) { return g ? g->err.msg : "no graph"; }

int32_t rlx_graph_node_count(const rlx_graph* g) { return g ? g->n_nodes : 0; }

/* Grows *arr (elements of `size` bytes) so index `need - 1` fits. */
static int grow(void** arr, int32_t* cap, int32_t need, size_t size) {
  if (need <= *cap) return 1;
  int32_t ncap = *cap ? *cap : 16;
  while (ncap < need) {
    if (ncap > INT32_MAX / 2) return 0;
    ncap *= 2;
  }
  void* p = realloc(*arr, (size_t)ncap * size);
  if (!p) return 0;
  *arr = p;
  *cap = ncap;
  return 1;
}

/* Symbol names become tokens of the text format, so they are identifiers. */
static int is_identifier(const char* s) {
  if (!s || !*s) return 0;
  for (const char* p = s; *p; p++) {
    int alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_';
    int digit = *p >= '0' && *p <= '9';
    if (!alpha && !(digit && p != s)) return 0;
  }
  return 1;
}

rlx_status rlx_graph_symbol(rlx_graph* g, const char* name, rlx_dim* out_dim) {
  if (!g || !out_dim) return RLX_INVALID_ARGUMENT;
  if (!is_identifier(name))
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                    "symbol name '%s' is not an identifier ([A-Za-z_][A-Za-z0-9_]*)",
                    name ? name : "(null)");
  for (int32_t i = 0; i < g->n_symbols; i++) {
    if (g->dim_defs[i].op == 0 && strcmp(g->symbols[i], name) == 0) {
      *out_dim = -(rlx_dim)i - 1;
      return RLX_OK;
    }
  }
  return rlx_graph_add_leaf_symbol(g, name, out_dim);
}

static int valid_tensor(const rlx_graph* g, rlx_tensor t) { return t >= 0 && t < g->n_values; }

rlx_status rlx_graph_tensor_type(const rlx_graph* g, rlx_tensor t, rlx_dtype* out_dtype,
                                 int32_t* out_rank, rlx_dim* out_shape) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (!valid_tensor(g, t))
    return rlx_fail((rlx_error*)&g->err, RLX_INVALID_ARGUMENT,
                    "tensor %%%d does not exist (graph has %d values)", (int)t,
                    (int)g->n_values);
  const rlx_type* ty = &g->values[t].type;
  if (out_dtype) *out_dtype = ty->dtype;
  if (out_rank) *out_rank = ty->rank;
  if (out_shape) memcpy(out_shape, ty->shape, sizeof(rlx_dim) * (size_t)ty->rank);
  return RLX_OK;
}

rlx_status rlx_graph_set_name(rlx_graph* g, rlx_tensor t, const char* name) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (!valid_tensor(g, t))
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "set_name: tensor %%%d does not exist",
                    (int)t);
  char* copy = NULL;
  if (name) {
    copy = dup_string(name);
    RLX_CHECK_ALLOC(&g->err, copy);
  }
  rlx_node* n = &g->nodes[g->values[t].node];
  free(n->label);
  n->label = copy;
  return RLX_OK;
}

rlx_status rlx_graph_set_outputs(rlx_graph* g, const rlx_tensor* outputs, int32_t n) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (n < 0 || (n > 0 && !outputs))
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "set_outputs: bad output list (n=%d)",
                    (int)n);
  for (int32_t i = 0; i < n; i++)
    if (!valid_tensor(g, outputs[i]))
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                      "set_outputs: output %d is tensor %%%d, which does not exist", (int)i,
                      (int)outputs[i]);
  rlx_tensor* copy = NULL;
  if (n > 0) {
    copy = malloc(sizeof(rlx_tensor) * (size_t)n);
    RLX_CHECK_ALLOC(&g->err, copy);
    memcpy(copy, outputs, sizeof(rlx_tensor) * (size_t)n);
  }
  free(g->outputs);
  g->outputs = copy;
  g->n_outputs = n;
  return RLX_OK;
}

/* Keeps only the attributes the op carries, so two nodes that mean the same
 * thing compare (and hash, and print) the same. */
static void canonical_attrs(rlx_op op, const rlx_node_attrs* src, rlx_node_attrs* dst) {
  uint64_t mask = rlx_op_table[op].attrs;
  memset(dst, 0, sizeof *dst);
#define ATTR(e, text, kind, field) \
  if (mask & ATTR_BIT(e)) memcpy(&dst->field, &src->field, sizeof src->field);
#include "ir/attrs.def"
#undef ATTR
  if (mask & ATTR_BIT(DATA)) dst->data_bytes = src->data_bytes;
  if (op == RLX_OP_BINARY || op == RLX_OP_COMPARE || op == RLX_OP_ACTIVATION ||
      op == RLX_OP_REDUCE)
    dst->kind = src->kind;
  if (rlx_op_table[op].flags & OPF_DECLARED) dst->type = src->type;
}

/* Duplicates the owned parts (name, data) of a canonical attrs in place. */
static rlx_status own_attrs(rlx_graph* g, rlx_node_attrs* a) {
  const char* name = a->name;
  const void* data = a->data;
  a->name = NULL;
  a->data = NULL;
  if (name) {
    a->name = dup_string(name);
    RLX_CHECK_ALLOC(&g->err, a->name);
  }
  if (data && a->data_bytes) {
    a->data = malloc(a->data_bytes);
    if (!a->data) {
      free_attrs(a);
      return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
    }
    memcpy(a->data, data, a->data_bytes);
  }
  return RLX_OK;
}

rlx_status rlx_graph_add_node(rlx_graph* g, rlx_op op, const rlx_node_attrs* attrs,
                              const rlx_tensor* in, int32_t n_in, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if ((unsigned)op >= RLX_OP_COUNT)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "op code %d is not an op", (int)op);
  rlx_node_attrs zero = {0}, work;
  canonical_attrs(op, attrs ? attrs : &zero, &work);
  rlx_type types[RLX_MAX_OUTPUTS];
  memset(types, 0, sizeof types);
  RLX_RETURN_IF_ERROR(rlx_infer_node(g, op, &work, in, n_in, types));

  int32_t n_out = rlx_op_table[op].n_outputs;
  if (!grow((void**)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(rlx_node)) ||
      !grow((void**)&g->values, &g->cap_values, g->n_values + n_out, sizeof(rlx_value)))
    return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  RLX_RETURN_IF_ERROR(own_attrs(g, &work));

  rlx_node* node = &g->nodes[g->n_nodes];
  memset(node, 0, sizeof *node);
  node->op = op;
  node->a = work;
  node->n_in = n_in;
  if (n_in > 0) memcpy(node->in, in, sizeof(rlx_tensor) * (size_t)n_in);
  node->n_out = n_out;
  for (int32_t i = 0; i < n_out; i++) {
    rlx_value* v = &g->values[g->n_values];
    v->node = g->n_nodes;
    v->index = i;
    v->type = types[i];
    node->out[i] = g->n_values++;
    if (out) out[i] = node->out[i];
  }
  g->n_nodes++;
  return RLX_OK;
}

int rlx_graph_value_is_read(const rlx_graph* g, rlx_tensor t) {
  for (int32_t j = 0; j < g->n_outputs; j++)
    if (g->outputs[j] == t) return 1;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t k = 0; k < g->nodes[i].n_in; k++)
      if (g->nodes[i].in[k] == t) return 1;
  return 0;
}

rlx_status rlx_graph_clone(const rlx_graph* g, rlx_graph** out) {
  if (!g || !out) return RLX_INVALID_ARGUMENT;
  rlx_graph* c = NULL;
  RLX_RETURN_IF_ERROR(rlx_graph_create(&c));
  int ok = grow((void**)&c->nodes, &c->cap_nodes, g->n_nodes, sizeof(rlx_node)) &&
           grow((void**)&c->values, &c->cap_values, g->n_values, sizeof(rlx_value)) &&
           rlx_graph_copy_dims(c, g) == RLX_OK;
  if (ok && g->n_outputs) {
    c->outputs = malloc(sizeof(rlx_tensor) * (size_t)g->n_outputs);
    ok = c->outputs != NULL;
  }
  for (int32_t i = 0; ok && i < g->n_nodes; i++) {
    rlx_node* n = &c->nodes[i];
    *n = g->nodes[i];
    n->label = NULL;
    ok = own_attrs(c, &n->a) == RLX_OK;
    if (!ok) break;
    c->n_nodes++; /* from here destroy frees this node's attrs */
    if (g->nodes[i].label) ok = (n->label = dup_string(g->nodes[i].label)) != NULL;
  }
  if (!ok) {
    rlx_graph_destroy(c);
    return RLX_RESOURCE_EXHAUSTED;
  }
  if (g->n_values) memcpy(c->values, g->values, sizeof(rlx_value) * (size_t)g->n_values);
  c->n_values = g->n_values;
  if (g->n_outputs) memcpy(c->outputs, g->outputs, sizeof(rlx_tensor) * (size_t)g->n_outputs);
  c->n_outputs = g->n_outputs;
  c->rebuild = g->rebuild;
  rlx_rebuild_hook_ref(c->rebuild);
  *out = c;
  return RLX_OK;
}

/* ------------------------------------------------------------------ builders */

static rlx_status add1(rlx_graph* g, rlx_op op, const rlx_node_attrs* a, const rlx_tensor* in,
                       int32_t n_in, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_tensor tmp[RLX_MAX_OUTPUTS] = {0}; /* gcc -O2 cannot see add_node fills it */
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(g, op, a, in, n_in, tmp));
  if (out) *out = tmp[0];
  return RLX_OK;
}

/* Fills t from (dtype, shape, rank); shape/rank are checked again by the
 * shape rule, this only guards the copy. */
static rlx_status declared_type(rlx_graph* g, rlx_op op, rlx_dtype dtype, const rlx_dim* shape,
                                int32_t rank, rlx_type* t) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > RLX_MAX_RANK)
    return rlx_graph_fail_op(g, op, 0, "rank %d is outside 0..%d", (int)rank, RLX_MAX_RANK);
  if (rank > 0 && !shape) return rlx_graph_fail_op(g, op, 0, "shape is NULL for rank %d", (int)rank);
  t->dtype = dtype;
  t->rank = rank;
  if (rank) memcpy(t->shape, shape, sizeof(rlx_dim) * (size_t)rank);
  return RLX_OK;
}

/* The type of an input the builder needs before the shape rule runs. */
static rlx_status input_type(rlx_graph* g, rlx_op op, int32_t kind, rlx_tensor x, rlx_type* t) {
  if (!valid_tensor(g, x))
    return rlx_graph_fail_op(g, op, kind, "input tensor %%%d does not exist", (int)x);
  *t = g->values[x].type;
  return RLX_OK;
}

static rlx_status add_leaf(rlx_graph* g, rlx_op op, const char* name, rlx_dtype dtype,
                           const rlx_dim* shape, int32_t rank, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a = {0};
  RLX_RETURN_IF_ERROR(declared_type(g, op, dtype, shape, rank, &a.type));
  a.name = (char*)name;
  return add1(g, op, &a, NULL, 0, out);
}

rlx_status rlx_graph_add_input(rlx_graph* g, const char* name, rlx_dtype dtype,
                               const rlx_dim* shape, int32_t rank, rlx_tensor* out) {
  return add_leaf(g, RLX_OP_INPUT, name, dtype, shape, rank, out);
}

rlx_status rlx_graph_add_param(rlx_graph* g, const char* name, rlx_dtype dtype,
                               const rlx_dim* shape, int32_t rank, rlx_tensor* out) {
  return add_leaf(g, RLX_OP_PARAM, name, dtype, shape, rank, out);
}

rlx_status rlx_graph_add_constant(rlx_graph* g, rlx_dtype dtype, const rlx_dim* shape,
                                  int32_t rank, const void* data, size_t bytes,
                                  rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a = {0};
  RLX_RETURN_IF_ERROR(declared_type(g, RLX_OP_CONSTANT, dtype, shape, rank, &a.type));
  a.data = (void*)data;
  a.data_bytes = bytes;
  return add1(g, RLX_OP_CONSTANT, &a, NULL, 0, out);
}

/* Solves the one RLX_DIM_INFER dim of a reshape target: x's element count
 * over the target's other dims, when their factors cancel exactly (symbols
 * and products of symbols such as B*T included). */
static rlx_status infer_reshape_dim(rlx_graph* g, const rlx_type* x, rlx_dim* shape,
                                    int32_t rank) {
  int32_t at = -1;
  for (int32_t i = 0; i < rank; i++) {
    if (shape[i] != RLX_DIM_INFER) continue;
    if (at >= 0) return rlx_graph_fail_op(g, RLX_OP_RESHAPE, 0, "more than one inferred dim");
    at = i;
  }
  if (at < 0) return RLX_OK;
  rlx_dim rest[RLX_MAX_RANK];
  int32_t n_rest = 0;
  for (int32_t i = 0; i < rank; i++) {
    if (i == at) continue;
    if (shape[i] < 0 && -(shape[i] + 1) >= g->n_symbols)
      return rlx_graph_fail_op(g, RLX_OP_RESHAPE, 0, "dim %d is %lld, not a size or symbol",
                               (int)i, (long long)shape[i]);
    rest[n_rest++] = shape[i];
  }
  char buf[128];
  if (rlx_dims_div_exact(g, x->shape, x->rank, rest, n_rest, &shape[at])) return RLX_OK;
  return rlx_graph_fail_op(g, RLX_OP_RESHAPE, 0, "cannot infer dim %d reshaping %s", (int)at,
                           rlx_type_str(g, x, buf, sizeof buf));
}

rlx_status rlx_graph_add_reshape(rlx_graph* g, rlx_tensor x, const rlx_dim* shape,
                                 int32_t rank, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a = {0};
  rlx_type xt = {0};
  RLX_RETURN_IF_ERROR(input_type(g, RLX_OP_RESHAPE, 0, x, &xt));
  RLX_RETURN_IF_ERROR(declared_type(g, RLX_OP_RESHAPE, xt.dtype, shape, rank, &a.type));
  RLX_RETURN_IF_ERROR(infer_reshape_dim(g, &xt, a.type.shape, rank));
  return add1(g, RLX_OP_RESHAPE, &a, &x, 1, out);
}

rlx_status rlx_graph_add_cast(rlx_graph* g, rlx_tensor x, rlx_dtype dtype, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a = {0};
  RLX_RETURN_IF_ERROR(input_type(g, RLX_OP_CAST, 0, x, &a.type));
  a.type.dtype = dtype;
  return add1(g, RLX_OP_CAST, &a, &x, 1, out);
}

rlx_status rlx_graph_add_stop_gradient(rlx_graph* g, rlx_tensor x, rlx_tensor* out) {
  return add1(g, RLX_OP_STOP_GRADIENT, NULL, &x, 1, out);
}

rlx_status rlx_graph_add_transpose(rlx_graph* g, rlx_tensor x, const int32_t* perm,
                                   int32_t rank, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a = {0};
  rlx_type xt = {0};
  RLX_RETURN_IF_ERROR(input_type(g, RLX_OP_TRANSPOSE, 0, x, &xt));
  if (rank != xt.rank || (rank > 0 && !perm))
    return rlx_graph_fail_op(g, RLX_OP_TRANSPOSE, 0, "perm has %d entries for a rank-%d input",
                             (int)rank, (int)xt.rank);
  if (rank) memcpy(a.perm, perm, sizeof(int32_t) * (size_t)rank);
  return add1(g, RLX_OP_TRANSPOSE, &a, &x, 1, out);
}

rlx_status rlx_graph_add_narrow(rlx_graph* g, rlx_tensor x, int32_t axis, int64_t start,
                                int64_t len, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.axis = axis;
  a.start = start;
  a.len = len;
  return add1(g, RLX_OP_NARROW, &a, &x, 1, out);
}

rlx_status rlx_graph_add_concat(rlx_graph* g, const rlx_tensor* xs, int32_t n, int32_t axis,
                                rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (n < 1 || n > RLX_MAX_INPUTS || !xs)
    return rlx_graph_fail_op(g, RLX_OP_CONCAT, 0, "%d inputs (must be 1..%d)", (int)n,
                             RLX_MAX_INPUTS);
  rlx_node_attrs a = {0};
  a.axis = axis;
  return add1(g, RLX_OP_CONCAT, &a, xs, n, out);
}

rlx_status rlx_graph_add_expand(rlx_graph* g, rlx_tensor x, const rlx_dim* shape,
                                int32_t rank, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a = {0};
  rlx_type xt = {0};
  RLX_RETURN_IF_ERROR(input_type(g, RLX_OP_EXPAND, 0, x, &xt));
  RLX_RETURN_IF_ERROR(declared_type(g, RLX_OP_EXPAND, xt.dtype, shape, rank, &a.type));
  return add1(g, RLX_OP_EXPAND, &a, &x, 1, out);
}

/* Turns an axis list into a bitmask over a rank-`rank` input. */
static rlx_status axes_mask(rlx_graph* g, rlx_op op, int32_t kind, const int32_t* axes,
                            int32_t n_axes, int32_t rank, uint32_t* mask) {
  *mask = 0;
  if (n_axes < 0 || n_axes > RLX_MAX_RANK || (n_axes > 0 && !axes))
    return rlx_graph_fail_op(g, op, kind, "bad axis list (%d axes)", (int)n_axes);
  for (int32_t i = 0; i < n_axes; i++) {
    int32_t ax = axes[i];
    if (ax < -rank || ax >= rank)
      return rlx_graph_fail_op(g, op, kind, "axis %d is out of range for rank %d", (int)ax,
                               (int)rank);
    if (ax < 0) ax += rank;
    if (*mask & (1u << ax))
      return rlx_graph_fail_op(g, op, kind, "axis %d is listed twice", (int)ax);
    *mask |= 1u << ax;
  }
  return RLX_OK;
}

rlx_status rlx_graph_add_reverse(rlx_graph* g, rlx_tensor x, const int32_t* axes,
                                 int32_t n_axes, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a = {0};
  rlx_type xt = {0};
  RLX_RETURN_IF_ERROR(input_type(g, RLX_OP_REVERSE, 0, x, &xt));
  RLX_RETURN_IF_ERROR(axes_mask(g, RLX_OP_REVERSE, 0, axes, n_axes, xt.rank, &a.axes));
  return add1(g, RLX_OP_REVERSE, &a, &x, 1, out);
}

rlx_status rlx_graph_add_gather(rlx_graph* g, rlx_tensor x, rlx_tensor idx, int32_t axis,
                                rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.axis = axis;
  rlx_tensor in[2] = {x, idx};
  return add1(g, RLX_OP_GATHER, &a, in, 2, out);
}

rlx_status rlx_graph_add_scatter_add(rlx_graph* g, rlx_tensor base, rlx_tensor idx,
                                     rlx_tensor src, int32_t axis, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.axis = axis;
  rlx_tensor in[3] = {base, idx, src};
  return add1(g, RLX_OP_SCATTER_ADD, &a, in, 3, out);
}

rlx_status rlx_graph_add_binary(rlx_graph* g, rlx_binary_op op, rlx_tensor a, rlx_tensor b,
                                rlx_tensor* out) {
  rlx_node_attrs at = {0};
  at.kind = (int32_t)op;
  rlx_tensor in[2] = {a, b};
  return add1(g, RLX_OP_BINARY, &at, in, 2, out);
}

rlx_status rlx_graph_add_compare(rlx_graph* g, rlx_compare_op op, rlx_tensor a, rlx_tensor b,
                                 rlx_tensor* out) {
  rlx_node_attrs at = {0};
  at.kind = (int32_t)op;
  rlx_tensor in[2] = {a, b};
  return add1(g, RLX_OP_COMPARE, &at, in, 2, out);
}

rlx_status rlx_graph_add_where(rlx_graph* g, rlx_tensor cond, rlx_tensor x, rlx_tensor y,
                               rlx_tensor* out) {
  rlx_tensor in[3] = {cond, x, y};
  return add1(g, RLX_OP_WHERE, NULL, in, 3, out);
}

rlx_status rlx_graph_add_activation(rlx_graph* g, rlx_activation act, rlx_tensor x,
                                    rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.kind = (int32_t)act;
  return add1(g, RLX_OP_ACTIVATION, &a, &x, 1, out);
}

rlx_status rlx_graph_add_matmul(rlx_graph* g, rlx_tensor a, rlx_tensor b, int32_t transpose_a,
                                int32_t transpose_b, rlx_tensor* out) {
  rlx_node_attrs at = {0};
  at.transpose_a = transpose_a;
  at.transpose_b = transpose_b;
  rlx_tensor in[2] = {a, b};
  return add1(g, RLX_OP_MATMUL, &at, in, 2, out);
}

rlx_status rlx_graph_add_fused_matmul_bias_act(rlx_graph* g, rlx_tensor a, rlx_tensor b,
                                               rlx_tensor bias, int32_t transpose_a,
                                               int32_t transpose_b, rlx_activation act,
                                               rlx_tensor* out) {
  rlx_node_attrs at = {0};
  at.transpose_a = transpose_a;
  at.transpose_b = transpose_b;
  at.act = (int32_t)act;
  rlx_tensor in[3] = {a, b, bias};
  return add1(g, RLX_OP_FUSED_MATMUL_BIAS_ACT, &at, in, 3, out);
}

rlx_status rlx_graph_add_reduce(rlx_graph* g, rlx_reduce_op op, rlx_tensor x,
                                const int32_t* axes, int32_t n_axes, int32_t keep_dim,
                                rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a = {0};
  rlx_type xt = {0};
  a.kind = (int32_t)op;
  a.keep_dim = keep_dim;
  RLX_RETURN_IF_ERROR(input_type(g, RLX_OP_REDUCE, a.kind, x, &xt));
  if (n_axes == 0)
    a.axes = xt.rank >= 32 ? 0xffffffffu : (1u << xt.rank) - 1u;
  else
    RLX_RETURN_IF_ERROR(axes_mask(g, RLX_OP_REDUCE, a.kind, axes, n_axes, xt.rank, &a.axes));
  return add1(g, RLX_OP_REDUCE, &a, &x, 1, out);
}

static rlx_status add_axis_keep(rlx_graph* g, rlx_op op, rlx_tensor x, int32_t axis,
                                int32_t keep_dim, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.axis = axis;
  a.keep_dim = keep_dim;
  return add1(g, op, &a, &x, 1, out);
}

rlx_status rlx_graph_add_argmax(rlx_graph* g, rlx_tensor x, int32_t axis, int32_t keep_dim,
                                rlx_tensor* out) {
  return add_axis_keep(g, RLX_OP_ARGMAX, x, axis, keep_dim, out);
}

rlx_status rlx_graph_add_argmin(rlx_graph* g, rlx_tensor x, int32_t axis, int32_t keep_dim,
                                rlx_tensor* out) {
  return add_axis_keep(g, RLX_OP_ARGMIN, x, axis, keep_dim, out);
}

rlx_status rlx_graph_add_softmax(rlx_graph* g, rlx_tensor x, int32_t axis, rlx_tensor* out) {
  return add_axis_keep(g, RLX_OP_SOFTMAX, x, axis, 0, out);
}

rlx_status rlx_graph_add_log_softmax(rlx_graph* g, rlx_tensor x, int32_t axis, rlx_tensor* out) {
  return add_axis_keep(g, RLX_OP_LOG_SOFTMAX, x, axis, 0, out);
}

rlx_status rlx_graph_add_cumsum(rlx_graph* g, rlx_tensor x, int32_t axis, int32_t exclusive,
                                int32_t reverse, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.axis = axis;
  a.exclusive = exclusive;
  a.reverse = reverse;
  return add1(g, RLX_OP_CUMSUM, &a, &x, 1, out);
}

rlx_status rlx_graph_add_topk(rlx_graph* g, rlx_tensor x, int64_t k, int32_t axis,
                              int32_t largest, rlx_tensor* out_values, rlx_tensor* out_indices) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a = {0};
  a.k = k;
  a.axis = axis;
  a.largest = largest;
  rlx_tensor outs[RLX_MAX_OUTPUTS];
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(g, RLX_OP_TOPK, &a, &x, 1, outs));
  if (out_values) *out_values = outs[0];
  if (out_indices) *out_indices = outs[1];
  return RLX_OK;
}

rlx_status rlx_graph_add_layer_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                    rlx_tensor beta, int32_t axis, float eps, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.axis = axis;
  a.eps = eps;
  rlx_tensor in[3] = {x, gamma, beta};
  return add1(g, RLX_OP_LAYER_NORM, &a, in, 3, out);
}

rlx_status rlx_graph_add_rms_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma, float eps,
                                  rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.eps = eps;
  rlx_tensor in[2] = {x, gamma};
  return add1(g, RLX_OP_RMS_NORM, &a, in, 2, out);
}

static rlx_status add_two_outputs(rlx_graph* g, rlx_op op, const rlx_node_attrs* a,
                                  const rlx_tensor* in, int32_t n_in, rlx_tensor* out0,
                                  rlx_tensor* out1) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_tensor outs[RLX_MAX_OUTPUTS];
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(g, op, a, in, n_in, outs));
  if (out0) *out0 = outs[0];
  if (out1) *out1 = outs[1];
  return RLX_OK;
}

rlx_status rlx_graph_add_fused_residual_layer_norm(rlx_graph* g, rlx_tensor x,
                                                   rlx_tensor residual, rlx_tensor bias,
                                                   rlx_tensor gamma, rlx_tensor beta, float eps,
                                                   rlx_tensor* out_norm, rlx_tensor* out_sum) {
  rlx_node_attrs a = {0};
  a.eps = eps;
  rlx_tensor in[5] = {x, residual, bias, gamma, beta};
  return add_two_outputs(g, RLX_OP_FUSED_RESIDUAL_LAYER_NORM, &a, in, 5, out_norm, out_sum);
}

rlx_status rlx_graph_add_fused_residual_rms_norm(rlx_graph* g, rlx_tensor x,
                                                 rlx_tensor residual, rlx_tensor bias,
                                                 rlx_tensor gamma, float eps,
                                                 rlx_tensor* out_norm, rlx_tensor* out_sum) {
  rlx_node_attrs a = {0};
  a.eps = eps;
  rlx_tensor in[4] = {x, residual, bias, gamma};
  return add_two_outputs(g, RLX_OP_FUSED_RESIDUAL_RMS_NORM, &a, in, 4, out_norm, out_sum);
}

static rlx_node_attrs attention_attrs(const rlx_attention_desc* desc) {
  rlx_node_attrs a = {0};
  a.num_heads = desc->num_heads;
  a.num_kv_heads = desc->num_kv_heads;
  a.head_dim = desc->head_dim;
  a.layout = (int32_t)desc->layout;
  a.mask = (int32_t)desc->mask;
  a.window = desc->window;
  a.score_scale = desc->score_scale;
  a.softcap = desc->softcap;
  return a;
}

rlx_status rlx_graph_add_attention(rlx_graph* g, rlx_tensor q, rlx_tensor k, rlx_tensor v,
                                   rlx_tensor mask, const rlx_attention_desc* desc,
                                   rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (!desc) return rlx_graph_fail_op(g, RLX_OP_ATTENTION, 0, "attention desc is NULL");
  rlx_node_attrs a = attention_attrs(desc);
  rlx_tensor in[4] = {q, k, v, mask};
  return add1(g, RLX_OP_ATTENTION, &a, in, 4, out);
}

rlx_status rlx_graph_add_attention_backward(rlx_graph* g, rlx_tensor q, rlx_tensor k,
                                            rlx_tensor v, rlx_tensor mask, rlx_tensor out,
                                            rlx_tensor d_out, const rlx_attention_desc* desc,
                                            rlx_tensor* out_dq, rlx_tensor* out_dk,
                                            rlx_tensor* out_dv) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (!desc)
    return rlx_graph_fail_op(g, RLX_OP_ATTENTION_BACKWARD, 0, "attention desc is NULL");
  rlx_node_attrs a = attention_attrs(desc);
  rlx_tensor in[6] = {q, k, v, mask, out, d_out};
  rlx_tensor outs[RLX_MAX_OUTPUTS];
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(g, RLX_OP_ATTENTION_BACKWARD, &a, in, 6, outs));
  if (out_dq) *out_dq = outs[0];
  if (out_dk) *out_dk = outs[1];
  if (out_dv) *out_dv = outs[2];
  return RLX_OK;
}

rlx_status rlx_graph_add_rope(rlx_graph* g, rlx_tensor x, rlx_tensor cos_t, rlx_tensor sin_t,
                              int32_t head_dim, int32_t n_rot, rlx_rope_style style,
                              rlx_layout layout, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.head_dim = head_dim;
  a.n_rot = n_rot;
  a.style = (int32_t)style;
  a.layout = (int32_t)layout;
  rlx_tensor in[3] = {x, cos_t, sin_t};
  return add1(g, RLX_OP_ROPE, &a, in, 3, out);
}

/* Copies n ints into an attribute list, `fill` where src is NULL. */
static void set_ints(rlx_ints* dst, const int64_t* src, int32_t n, int64_t fill) {
  dst->n = n;
  for (int32_t i = 0; i < n; i++) dst->v[i] = src ? src[i] : fill;
}

rlx_status rlx_graph_add_pool(rlx_graph* g, rlx_tensor x, rlx_pool_kind kind, int32_t n_spatial,
                              const int64_t* kernel, const int64_t* strides, const int64_t* pads,
                              const int64_t* dilations, int32_t ceil_mode,
                              int32_t count_include_pad, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (n_spatial < 1 || n_spatial > 3)
    return rlx_graph_fail_op(g, RLX_OP_POOL, 0, "n_spatial %d is not 1, 2 or 3", (int)n_spatial);
  if (!kernel) return rlx_graph_fail_op(g, RLX_OP_POOL, 0, "kernel is NULL");
  rlx_node_attrs a = {0};
  a.pool = (int32_t)kind;
  set_ints(&a.kernel, kernel, n_spatial, 1);
  set_ints(&a.strides, strides, n_spatial, 1);
  set_ints(&a.pads, pads, 2 * n_spatial, 0);
  set_ints(&a.dilations, dilations, n_spatial, 1);
  a.ceil_mode = ceil_mode;
  a.count_include_pad = count_include_pad;
  return add1(g, RLX_OP_POOL, &a, &x, 1, out);
}

rlx_status rlx_graph_add_pad(rlx_graph* g, rlx_tensor x, rlx_pad_mode mode, const int64_t* pads,
                             float value, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (!pads) return rlx_graph_fail_op(g, RLX_OP_PAD, 0, "pads is NULL");
  if (x < 0 || x >= g->n_values) return rlx_graph_fail_op(g, RLX_OP_PAD, 0, "x %d is not a tensor of this graph", (int)x);
  rlx_node_attrs a = {0};
  a.pad_mode = (int32_t)mode;
  set_ints(&a.pads, pads, 2 * g->values[x].type.rank, 0);
  a.value = value;
  return add1(g, RLX_OP_PAD, &a, &x, 1, out);
}

rlx_status rlx_graph_add_depth_to_space(rlx_graph* g, rlx_tensor x, int32_t block,
                                        rlx_d2s_mode mode, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.block = block;
  a.d2s_mode = (int32_t)mode;
  return add1(g, RLX_OP_DEPTH_TO_SPACE, &a, &x, 1, out);
}

rlx_status rlx_graph_add_space_to_depth(rlx_graph* g, rlx_tensor x, int32_t block,
                                        rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.block = block;
  return add1(g, RLX_OP_SPACE_TO_DEPTH, &a, &x, 1, out);
}

rlx_status rlx_graph_add_resize(rlx_graph* g, rlx_tensor x, const int64_t* sizes,
                                rlx_resize_mode mode, rlx_resize_coord coord,
                                rlx_resize_nearest nearest, float cubic_a,
                                int32_t exclude_outside, const float* scales, const float* roi,
                                float extrapolation_value, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (!sizes) return rlx_graph_fail_op(g, RLX_OP_RESIZE, 0, "sizes is NULL");
  if (x < 0 || x >= g->n_values)
    return rlx_graph_fail_op(g, RLX_OP_RESIZE, 0, "x %d is not a tensor of this graph", (int)x);
  const rlx_type* t = &g->values[x].type;
  rlx_node_attrs a = {0};
  a.resize_mode = (int32_t)mode;
  a.coord_mode = (int32_t)coord;
  a.nearest_mode = (int32_t)nearest;
  a.cubic_a = cubic_a;
  a.exclude_outside = exclude_outside;
  a.value = extrapolation_value;
  set_ints(&a.sizes, sizes, t->rank, -1);
  a.scales.n = t->rank;
  a.roi.n = 2 * t->rank;
  for (int32_t d = 0; d < t->rank; d++) {
    a.scales.v[d] = scales ? scales[d] : 0.0f; /* 0: out / in, in double */
    a.roi.v[d] = roi ? roi[d] : 0.0f;
    a.roi.v[t->rank + d] = roi ? roi[t->rank + d] : 1.0f;
  }
  return add1(g, RLX_OP_RESIZE, &a, &x, 1, out);
}

rlx_status rlx_graph_add_grid_sample(rlx_graph* g, rlx_tensor x, rlx_tensor grid,
                                     rlx_resize_mode mode, rlx_grid_padding padding,
                                     int32_t align_corners, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.resize_mode = (int32_t)mode;
  a.grid_padding = (int32_t)padding;
  a.align_corners = align_corners;
  rlx_tensor in[2] = {x, grid};
  return add1(g, RLX_OP_GRID_SAMPLE, &a, in, 2, out);
}

rlx_status rlx_graph_add_roi_align(rlx_graph* g, rlx_tensor x, rlx_tensor rois,
                                   rlx_tensor batch_indices, rlx_pool_kind mode, int64_t out_h,
                                   int64_t out_w, int32_t sampling_ratio, float spatial_scale,
                                   int32_t half_pixel, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.pool = (int32_t)mode;
  int64_t hw[2] = {out_h, out_w};
  set_ints(&a.sizes, hw, 2, 0);
  a.sampling_ratio = sampling_ratio;
  a.spatial_scale = spatial_scale;
  a.align_corners = half_pixel;
  rlx_tensor in[3] = {x, rois, batch_indices};
  return add1(g, RLX_OP_ROI_ALIGN, &a, in, 3, out);
}

/* The attributes Conv, ConvTranspose and Im2Col share; NULL lists take
 * their defaults (stride / dilation 1, no padding). */
static void set_conv_attrs(rlx_node_attrs* a, int32_t ns, const int64_t* strides,
                           const int64_t* pads, const int64_t* dilations, int32_t groups,
                           rlx_activation act, rlx_conv_layout layout) {
  set_ints(&a->strides, strides, ns, 1);
  set_ints(&a->pads, pads, 2 * ns, 0);
  set_ints(&a->dilations, dilations, ns, 1);
  a->groups = groups;
  a->act = (int32_t)act;
  a->conv_layout = (int32_t)layout;
}

static rlx_status check_n_spatial(rlx_graph* g, rlx_op op, int32_t n_spatial) {
  if (n_spatial < 1 || n_spatial > 3)
    return rlx_graph_fail_op(g, op, 0, "n_spatial %d is not 1, 2 or 3", (int)n_spatial);
  return RLX_OK;
}

rlx_status rlx_graph_add_conv(rlx_graph* g, rlx_tensor x, rlx_tensor w, rlx_tensor bias,
                              rlx_tensor residual, int32_t n_spatial, const int64_t* strides,
                              const int64_t* pads, const int64_t* dilations, int32_t groups,
                              rlx_activation act, rlx_conv_layout layout, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  RLX_RETURN_IF_ERROR(check_n_spatial(g, RLX_OP_CONV, n_spatial));
  rlx_node_attrs a = {0};
  set_conv_attrs(&a, n_spatial, strides, pads, dilations, groups, act, layout);
  rlx_tensor in[4] = {x, w, bias, residual};
  return add1(g, RLX_OP_CONV, &a, in, 4, out);
}

rlx_status rlx_graph_add_conv_transpose(rlx_graph* g, rlx_tensor x, rlx_tensor w, rlx_tensor bias,
                                        rlx_tensor residual, int32_t n_spatial,
                                        const int64_t* strides, const int64_t* pads,
                                        const int64_t* dilations, const int64_t* output_padding,
                                        int32_t groups, rlx_activation act,
                                        rlx_conv_layout layout, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  RLX_RETURN_IF_ERROR(check_n_spatial(g, RLX_OP_CONV_TRANSPOSE, n_spatial));
  rlx_node_attrs a = {0};
  set_conv_attrs(&a, n_spatial, strides, pads, dilations, groups, act, layout);
  set_ints(&a.output_padding, output_padding, n_spatial, 0);
  rlx_tensor in[4] = {x, w, bias, residual};
  return add1(g, RLX_OP_CONV_TRANSPOSE, &a, in, 4, out);
}

rlx_status rlx_graph_add_im2col(rlx_graph* g, rlx_tensor x, int32_t n_spatial,
                                const int64_t* kernel, const int64_t* strides, const int64_t* pads,
                                const int64_t* dilations, rlx_conv_layout layout,
                                rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  RLX_RETURN_IF_ERROR(check_n_spatial(g, RLX_OP_IM2COL, n_spatial));
  if (!kernel) return rlx_graph_fail_op(g, RLX_OP_IM2COL, 0, "kernel is NULL");
  rlx_node_attrs a = {0};
  set_conv_attrs(&a, n_spatial, strides, pads, dilations, 1, RLX_ACT_NONE, layout);
  set_ints(&a.kernel, kernel, n_spatial, 1);
  return add1(g, RLX_OP_IM2COL, &a, &x, 1, out);
}

rlx_status rlx_graph_add_group_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma, rlx_tensor beta,
                                    int32_t groups, float eps, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.groups = groups;
  a.eps = eps;
  rlx_tensor in[3] = {x, gamma, beta};
  return add1(g, RLX_OP_GROUP_NORM, &a, in, 3, out);
}

rlx_status rlx_graph_add_channel_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                      rlx_tensor beta, float eps, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.eps = eps;
  rlx_tensor in[3] = {x, gamma, beta};
  return add1(g, RLX_OP_CHANNEL_NORM, &a, in, 3, out);
}

rlx_status rlx_graph_add_batch_norm(rlx_graph* g, rlx_tensor x, rlx_tensor gamma, rlx_tensor beta,
                                    rlx_tensor mean, rlx_tensor var, float eps, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.eps = eps;
  rlx_tensor in[5] = {x, gamma, beta, mean, var};
  return add1(g, RLX_OP_BATCH_NORM, &a, in, 5, out);
}

rlx_status rlx_graph_add_lrn(rlx_graph* g, rlx_tensor x, int32_t size, float alpha, float beta,
                             float bias, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.size = size;
  a.alpha = alpha;
  a.beta = beta;
  a.bias = bias;
  return add1(g, RLX_OP_LRN, &a, &x, 1, out);
}

rlx_status rlx_graph_add_sample(rlx_graph* g, rlx_tensor logits, int32_t top_k, float top_p,
                                float temperature, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.top_k = top_k;
  a.top_p = top_p;
  a.temperature = temperature;
  return add1(g, RLX_OP_SAMPLE, &a, &logits, 1, out);
}

/* Checks live in the shape rule (text-parsed graphs get them too). */
rlx_status rlx_graph_dequant_matmul(rlx_graph* g, rlx_tensor x, rlx_tensor w, rlx_tensor scale,
                                    rlx_tensor aux, rlx_quant_scheme scheme, int32_t group,
                                    rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.quant_scheme = (int32_t)scheme;
  a.block = group;
  a.transpose_b = 1;
  rlx_tensor in[4] = {x, w, scale, aux};
  return add1(g, RLX_OP_DEQUANT_MATMUL, &a, in, 4, out);
}

rlx_status rlx_graph_grouped_matmul(rlx_graph* g, rlx_tensor x, rlx_tensor w, rlx_tensor idx,
                                    int32_t transpose_b, rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.transpose_b = transpose_b;
  rlx_tensor in[3] = {x, w, idx};
  return add1(g, RLX_OP_GROUPED_MATMUL, &a, in, 3, out);
}

rlx_status rlx_graph_dequant_grouped_matmul(rlx_graph* g, rlx_tensor x, rlx_tensor w,
                                            rlx_tensor idx, rlx_tensor scale, rlx_tensor aux,
                                            rlx_quant_scheme scheme, int32_t group,
                                            rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.quant_scheme = (int32_t)scheme;
  a.block = group;
  a.transpose_b = 1;
  rlx_tensor in[5] = {x, w, idx, scale, aux};
  return add1(g, RLX_OP_DEQUANT_GROUPED_MATMUL, &a, in, 5, out);
}

/* ------------------------------------------------------------------ introspection */

/* The k-th leaf of op `op` in node order, or -1. Leaves are few and these
 * queries are not on a hot path, so a scan keeps the graph free of indexes
 * that every builder call would have to maintain. */
static int32_t nth_leaf(const rlx_graph* g, rlx_op op, int32_t k) {
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == op && k-- == 0) return i;
  return -1;
}

static int32_t count_leaves(const rlx_graph* g, rlx_op op) {
  int32_t n = 0;
  for (int32_t i = 0; g && i < g->n_nodes; i++) n += g->nodes[i].op == op;
  return n;
}

int32_t rlx_graph_input_count(const rlx_graph* g) { return count_leaves(g, RLX_OP_INPUT); }
int32_t rlx_graph_param_count(const rlx_graph* g) { return count_leaves(g, RLX_OP_PARAM); }
int32_t rlx_graph_output_count(const rlx_graph* g) { return g ? g->n_outputs : 0; }
int32_t rlx_graph_symbol_count(const rlx_graph* g) { return g ? g->n_symbols : 0; }

rlx_status rlx_graph_symbol_name(const rlx_graph* g, rlx_dim dim, const char** out_name) {
  if (!g || !out_name) return RLX_INVALID_ARGUMENT;
  *out_name = NULL;
  if (dim >= 0)
    return rlx_fail((rlx_error*)&g->err, RLX_INVALID_ARGUMENT,
                    "dim %lld is static, not a symbol", (long long)dim);
  int64_t idx = -(dim + 1);
  if (idx >= g->n_symbols)
    return rlx_fail((rlx_error*)&g->err, RLX_NOT_FOUND,
                    "dim code %lld names symbol %lld; the graph has %d symbols",
                    (long long)dim, (long long)idx, (int)g->n_symbols);
  *out_name = g->symbols[idx];
  return RLX_OK;
}

static void fill_info(const rlx_graph* g, rlx_tensor t, const char* name,
                      rlx_value_info* out) {
  const rlx_type* ty = &g->values[t].type;
  memset(out, 0, sizeof *out);
  out->name = name;
  out->tensor = t;
  out->dtype = ty->dtype;
  out->rank = ty->rank;
  for (int32_t d = 0; d < ty->rank; d++) {
    out->shape[d] = ty->shape[d];
    int64_t idx = -(ty->shape[d] + 1);
    if (ty->shape[d] < 0 && idx < g->n_symbols) out->dim_names[d] = g->symbols[idx];
  }
}

/* `what` ("input", "param") names the list in the range error. */
static rlx_status get_leaf(const rlx_graph* g, rlx_op op, const char* what, int32_t index,
                           rlx_value_info* out) {
  if (!g || !out) return RLX_INVALID_ARGUMENT;
  int32_t ni = index >= 0 ? nth_leaf(g, op, index) : -1;
  if (ni < 0)
    return rlx_fail((rlx_error*)&g->err, RLX_OUT_OF_RANGE, "%s index %d is out of range (the graph has %d)",
                    what, (int)index, (int)count_leaves(g, op));
  fill_info(g, g->nodes[ni].out[0], g->nodes[ni].a.name, out);
  return RLX_OK;
}

rlx_status rlx_graph_get_input(const rlx_graph* g, int32_t index, rlx_value_info* out_info) {
  return get_leaf(g, RLX_OP_INPUT, "input", index, out_info);
}

rlx_status rlx_graph_get_param(const rlx_graph* g, int32_t index, rlx_value_info* out_info) {
  return get_leaf(g, RLX_OP_PARAM, "param", index, out_info);
}

rlx_status rlx_graph_get_output(const rlx_graph* g, int32_t index, rlx_value_info* out_info) {
  if (!g || !out_info) return RLX_INVALID_ARGUMENT;
  if (index < 0 || index >= g->n_outputs)
    return rlx_fail((rlx_error*)&g->err, RLX_OUT_OF_RANGE,
                    "output index %d is out of range (the graph has %d)", (int)index,
                    (int)g->n_outputs);
  rlx_tensor t = g->outputs[index];
  const char* label = rlx_producer(g, t)->label;
  fill_info(g, t, label && label[0] ? label : NULL, out_info);
  return RLX_OK;
}
