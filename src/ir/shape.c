/* Shape rules: for every op, the output type(s) from the input types and
 * attributes, with verification of ranks, dims, dtypes and attributes.
 * Attributes are normalised in place (negative axes, defaults), so every
 * later pass sees one canonical form. Errors name the op and the next node
 * id through rlx_graph_fail_op. */
#include "ir/graph.h"
#include "base/scalar_math.h"
#include "ir/quant.h"
#include "ir/region.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Far beyond any device, small enough that numel * 8 bytes never overflows. */
#define MAX_ELEMENTS ((int64_t)1 << 56)

typedef struct infer_ctx {
  rlx_graph* g;
  rlx_op op;
  rlx_node_attrs* a;
  const rlx_tensor* in;
  int32_t n_in;
  const rlx_type* t[RLX_MAX_INPUTS]; /* NULL for an absent optional input */
  rlx_type* out;
} infer_ctx;

#define FAIL(c, ...) rlx_graph_fail_op((c)->g, (c)->op, (c)->a->kind, __VA_ARGS__)
#define TSTR(c, type, buf) rlx_type_str((c)->g, (type), (buf), sizeof(buf))
#define DSTR(c, d, buf) dim_str((c)->g, (d), (buf), sizeof(buf))

static const char* dim_str(const rlx_graph* g, rlx_dim d, char* buf, size_t cap) {
  if (d >= 0)
    snprintf(buf, cap, "%lld", (long long)d);
  else if (-(d + 1) < g->n_symbols)
    snprintf(buf, cap, "%s", g->symbols[-(d + 1)]);
  else
    snprintf(buf, cap, "?");
  return buf;
}

/* ------------------------------------------------------------------ inputs */

static int input_is_optional(rlx_op op, int32_t i) {
  switch (op) {
    case RLX_OP_FUSED_MATMUL_BIAS_ACT: return i == 2;
    case RLX_OP_LAYER_NORM: return i >= 1;
    case RLX_OP_RMS_NORM: return i == 1;
    case RLX_OP_FUSED_RESIDUAL_LAYER_NORM: return i >= 2;
    case RLX_OP_FUSED_RESIDUAL_RMS_NORM: return i >= 2;
    case RLX_OP_ATTENTION: return i == 3;
    case RLX_OP_ATTENTION_BACKWARD: return i == 3;
    case RLX_OP_CONV:
    case RLX_OP_CONV_TRANSPOSE: return i >= 2; /* bias, residual */
    case RLX_OP_GROUP_NORM:
    case RLX_OP_CHANNEL_NORM:
    case RLX_OP_BATCH_NORM: return i == 1 || i == 2;
    case RLX_OP_LAYER_NORM_BACKWARD:
    case RLX_OP_RMS_NORM_BACKWARD: return i == 1; /* gamma */
    case RLX_OP_SGD_UPDATE: return i == 2; /* no momentum buffer */
    case RLX_OP_DEQUANT_MATMUL: return i >= 2; /* scale, aux: per scheme */
    case RLX_OP_DEQUANT_GROUPED_MATMUL: return i >= 3;
    default: return 0;
  }
}

static rlx_status check_inputs(infer_ctx* c) {
  const rlx_op_info* info = &rlx_op_table[c->op];
  if (c->n_in < info->min_inputs || c->n_in > info->max_inputs || (c->n_in > 0 && !c->in)) {
    if (info->min_inputs == info->max_inputs)
      return FAIL(c, "takes %d inputs, got %d", (int)info->min_inputs, (int)c->n_in);
    return FAIL(c, "takes %d..%d inputs, got %d", (int)info->min_inputs, (int)info->max_inputs,
                (int)c->n_in);
  }
  for (int32_t i = 0; i < c->n_in; i++) {
    rlx_tensor x = c->in[i];
    if (x == RLX_NONE && input_is_optional(c->op, i)) {
      c->t[i] = NULL;
    } else if (x == RLX_NONE) {
      return FAIL(c, "input %d is required (got none)", (int)i);
    } else if (x < 0 || x >= c->g->n_values) {
      return FAIL(c, "input %d is tensor %%%d, which does not exist", (int)i, (int)x);
    } else {
      c->t[i] = &c->g->values[x].type;
    }
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ helpers */

static int valid_dtype(rlx_dtype d) { return (unsigned)d < RLX_DTYPE_COUNT; }

static int valid_dim(const rlx_graph* g, rlx_dim d) {
  return d >= 0 || -(d + 1) < g->n_symbols;
}

/* Static element count stays far from overflow (symbols count as 1; they are
 * checked again when a binding specializes the graph). */
static rlx_status check_size(infer_ctx* c, const rlx_type* t, const char* what) {
  int64_t n = 1;
  char buf[160];
  for (int32_t i = 0; i < t->rank; i++) {
    if (t->shape[i] <= 0) continue;
    if (n > MAX_ELEMENTS / t->shape[i])
      return FAIL(c, "%s %s has too many elements", what, TSTR(c, t, buf));
    n *= t->shape[i];
  }
  return RLX_OK;
}

/* A declared type: valid dtype, rank 0..8, dims sizes or known symbols. */
static rlx_status check_type(infer_ctx* c, const rlx_type* t, const char* what) {
  if (!valid_dtype(t->dtype)) return FAIL(c, "%s dtype %d is not a dtype", what, (int)t->dtype);
  if (t->rank < 0 || t->rank > RLX_MAX_RANK)
    return FAIL(c, "%s rank %d is outside 0..%d", what, (int)t->rank, RLX_MAX_RANK);
  for (int32_t i = 0; i < t->rank; i++)
    if (!valid_dim(c->g, t->shape[i]))
      return FAIL(c, "%s dim %d is %lld, not a size or a symbol of this graph", what, (int)i,
                  (long long)t->shape[i]);
  return check_size(c, t, what);
}

/* Normalises a possibly negative axis of a rank-`rank` tensor. */
static rlx_status norm_axis(infer_ctx* c, int32_t* axis, int32_t rank) {
  if (*axis < -rank || *axis >= rank)
    return FAIL(c, "axis %d is out of range for rank %d", (int)*axis, (int)rank);
  if (*axis < 0) *axis += rank;
  return RLX_OK;
}

static void norm_flag(int32_t* flag) { *flag = *flag != 0; }

static rlx_status need_rank_at_least(infer_ctx* c, int32_t i, int32_t rank, const char* what) {
  char buf[160];
  if (c->t[i]->rank < rank)
    return FAIL(c, "%s must have rank >= %d, got %s", what, (int)rank, TSTR(c, c->t[i], buf));
  return RLX_OK;
}

static rlx_status need_float(infer_ctx* c, int32_t i, const char* what) {
  char buf[160];
  if (!rlx_dtype_is_float(c->t[i]->dtype))
    return FAIL(c, "%s must be a float dtype, got %s", what, TSTR(c, c->t[i], buf));
  return RLX_OK;
}

static rlx_status need_same_dtype(infer_ctx* c, int32_t i, int32_t j, const char* what_i,
                                  const char* what_j) {
  char b1[160], b2[160];
  if (c->t[i]->dtype != c->t[j]->dtype)
    return FAIL(c, "dtypes differ: %s is %s, %s is %s", what_i, TSTR(c, c->t[i], b1), what_j,
                TSTR(c, c->t[j], b2));
  return RLX_OK;
}

/* Optional per-feature vector (bias, gamma, beta): shape [dim], x's dtype. */
static rlx_status need_vector(infer_ctx* c, int32_t i, rlx_dim dim, const char* what) {
  const rlx_type* t = c->t[i];
  char b1[160], b2[64];
  if (!t) return RLX_OK;
  if (t->rank != 1 || t->shape[0] != dim || t->dtype != c->t[0]->dtype)
    return FAIL(c, "%s must be %s[%s], got %s", what, rlx_dtype_name(c->t[0]->dtype),
                DSTR(c, dim, b2), TSTR(c, t, b1));
  return RLX_OK;
}

/* NumPy broadcast of two dims; 0 when they are incompatible. A static 1
 * broadcasts against anything, including a symbol. Two different symbolic
 * dims give max(a, b) (right when one is 1, and a mismatch fails when the
 * graph is specialised); a symbol against a static size n > 1 fails as
 * before (the symbol would have to be 1 or n). */
static int broadcast_dim(rlx_graph* g, rlx_dim a, rlx_dim b, rlx_dim* out) {
  if (a == b || b == 1) *out = a;
  else if (a == 1) *out = b;
  else if (a < 0 && b < 0) return rlx_graph_dim_expr(g, RLX_DIM_MAX, a, b, out) == RLX_OK;
  else return 0;
  return 1;
}

/* out = broadcast(out, t), right-aligned. */
static rlx_status broadcast_into(infer_ctx* c, rlx_type* out, const rlx_type* t,
                                 const char* what) {
  char b1[160], b2[160];
  rlx_type r = *out;
  r.rank = out->rank > t->rank ? out->rank : t->rank;
  for (int32_t i = 1; i <= r.rank; i++) {
    rlx_dim da = i <= out->rank ? out->shape[out->rank - i] : 1;
    rlx_dim db = i <= t->rank ? t->shape[t->rank - i] : 1;
    if (!broadcast_dim(c->g, da, db, &r.shape[r.rank - i]))
      return FAIL(c, "%s do not broadcast: %s vs %s", what, TSTR(c, out, b1), TSTR(c, t, b2));
  }
  *out = r;
  return RLX_OK;
}

/* ------------------------------------------------------------------ leaves, views */

static int is_named_leaf(rlx_op op) { return op == RLX_OP_INPUT || op == RLX_OP_PARAM; }

static rlx_status infer_leaf(infer_ctx* c) {
  rlx_node_attrs* a = c->a;
  RLX_RETURN_IF_ERROR(check_type(c, &a->type, "type"));
  if (is_named_leaf(c->op)) {
    if (!a->name || !a->name[0]) return FAIL(c, "needs a non-empty name");
    for (int32_t i = 0; i < c->g->n_nodes; i++) {
      const rlx_node* n = &c->g->nodes[i];
      if (is_named_leaf(n->op) && n->a.name && strcmp(n->a.name, a->name) == 0) {
        char buf[96];
        return FAIL(c, "name '%s' is already used by %s", a->name,
                    rlx_node_str(c->g, i, buf, sizeof buf));
      }
    }
  } else {
    char buf[160];
    int64_t bytes = rlx_type_bytes(&a->type);
    if (bytes < 0) return FAIL(c, "constant type %s must be static", TSTR(c, &a->type, buf));
    if ((uint64_t)bytes != (uint64_t)a->data_bytes)
      return FAIL(c, "data has %zu bytes, %s needs %lld", a->data_bytes,
                  TSTR(c, &a->type, buf), (long long)bytes);
    if (bytes > 0 && !a->data) return FAIL(c, "data is NULL");
  }
  c->out[0] = a->type;
  return RLX_OK;
}

static rlx_status infer_reshape(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  const rlx_type* to = &c->a->type;
  char b1[160], b2[160];
  RLX_RETURN_IF_ERROR(check_type(c, to, "target"));
  if (to->dtype != x->dtype)
    return FAIL(c, "target dtype %s differs from input %s (use cast)",
                rlx_dtype_name(to->dtype), TSTR(c, x, b1));
  /* Products through dim expressions (B*T = B x T); an undecidable count
   * (a sum or quotient among the factors) is checked when specialised. */
  if (rlx_dims_same_count(c->g, x->shape, x->rank, to->shape, to->rank) == 0)
    return FAIL(c, "element counts differ: %s to %s", TSTR(c, x, b1), TSTR(c, to, b2));
  c->out[0] = *to;
  return RLX_OK;
}

static rlx_status infer_cast(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  rlx_type* to = &c->a->type;
  char b1[160], b2[160];
  if (!valid_dtype(to->dtype)) return FAIL(c, "dtype %d is not a dtype", (int)to->dtype);
  rlx_type want = *x;
  want.dtype = to->dtype;
  if (!rlx_type_equal(&want, to))
    return FAIL(c, "declared type %s does not keep the input shape %s", TSTR(c, to, b1),
                TSTR(c, x, b2));
  c->out[0] = want;
  return RLX_OK;
}

/* ------------------------------------------------------------------ layout */

static rlx_status infer_transpose(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  int32_t* perm = c->a->perm;
  uint32_t seen = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    if (perm[i] < 0 || perm[i] >= x->rank || (seen & (1u << perm[i])))
      return FAIL(c, "perm is not a permutation of 0..%d (entry %d is %d)", (int)x->rank - 1,
                  (int)i, (int)perm[i]);
    seen |= 1u << perm[i];
  }
  for (int32_t i = x->rank; i < RLX_MAX_RANK; i++) perm[i] = 0;
  c->out[0] = *x;
  for (int32_t i = 0; i < x->rank; i++) c->out[0].shape[i] = x->shape[perm[i]];
  return RLX_OK;
}

static rlx_status infer_narrow(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  rlx_node_attrs* a = c->a;
  char buf[160];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "input"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &a->axis, x->rank));
  rlx_dim dim = x->shape[a->axis];
  /* start and len may be symbolic dims (bound when specialised), e.g. an
   * ONNX Slice up to a symbolic end; static ones are checked now. */
  if (!valid_dim(c->g, a->start) || !valid_dim(c->g, a->len))
    return FAIL(c, "start %lld and len %lld must be >= 0 or symbols", (long long)a->start,
                (long long)a->len);
  if (dim < 0 || a->start < 0 || a->len < 0) {
    c->out[0] = *x;
    c->out[0].shape[a->axis] = a->len;
    return RLX_OK;
  }
  if (a->start > dim || a->len > dim - a->start)
    return FAIL(c, "[%lld, %lld + %lld) is outside axis %d of %s", (long long)a->start,
                (long long)a->start, (long long)a->len, (int)a->axis, TSTR(c, x, buf));
  c->out[0] = *x;
  c->out[0].shape[a->axis] = a->len;
  return RLX_OK;
}

static rlx_status infer_concat(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "input 0"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &a->axis, x->rank));
  c->out[0] = *x;
  if (c->n_in == 1) return RLX_OK;
  rlx_dim total = 0;
  for (int32_t i = 0; i < c->n_in; i++) {
    const rlx_type* t = c->t[i];
    int ok = t->dtype == x->dtype && t->rank == x->rank;
    for (int32_t d = 0; ok && d < x->rank; d++)
      ok = d == a->axis || t->shape[d] == x->shape[d];
    if (!ok)
      return FAIL(c, "input %d is %s, input 0 is %s: dtype, rank and dims other than axis %d "
                  "must match", (int)i, TSTR(c, t, b1), TSTR(c, x, b2), (int)a->axis);
    /* A symbolic axis gives a sum (T + T, T + 1); static sizes stay static:
     * each < 2^56, at most 64 of them. */
    if (rlx_graph_dim_expr(c->g, RLX_DIM_ADD, total, t->shape[a->axis], &total) != RLX_OK)
      return FAIL(c, "input %d is %s: %s", (int)i, TSTR(c, t, b1), c->g->err.msg);
  }
  c->out[0].shape[a->axis] = total;
  return RLX_OK;
}

static rlx_status infer_expand(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  const rlx_type* to = &c->a->type;
  char b1[160], b2[160];
  RLX_RETURN_IF_ERROR(check_type(c, to, "target"));
  if (to->dtype != x->dtype || to->rank < x->rank)
    return FAIL(c, "cannot expand %s to %s", TSTR(c, x, b1), TSTR(c, to, b2));
  for (int32_t i = 1; i <= x->rank; i++) {
    rlx_dim d = x->shape[x->rank - i];
    rlx_dim t = to->shape[to->rank - i];
    /* A dim expression (B*T, min(T,32)) may equal anything: checked when specialised. */
    int undecided = rlx_dim_is_expr(c->g, d) || rlx_dim_is_expr(c->g, t);
    if (d != 1 && d != t && !undecided)
      return FAIL(c, "cannot expand %s to %s: dim %d is neither 1 nor equal", TSTR(c, x, b1),
                  TSTR(c, to, b2), (int)(x->rank - i));
  }
  c->out[0] = *to;
  return RLX_OK;
}

static rlx_status infer_reverse(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  uint32_t all = x->rank >= 32 ? 0xffffffffu : (1u << x->rank) - 1u;
  if (c->a->axes & ~all)
    return FAIL(c, "axes mask 0x%x names axes beyond rank %d", (unsigned)c->a->axes,
                (int)x->rank);
  c->out[0] = *x;
  return RLX_OK;
}

static int is_index_dtype(rlx_dtype d) { return d == RLX_I32 || d == RLX_I64; }

static rlx_status infer_gather(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  const rlx_type* idx = c->t[1];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "data"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &a->axis, x->rank));
  if (!is_index_dtype(idx->dtype))
    return FAIL(c, "indices must be i32 or i64, got %s", TSTR(c, idx, b1));
  int32_t rank = x->rank - 1 + idx->rank;
  if (rank > RLX_MAX_RANK)
    return FAIL(c, "result rank %d exceeds %d (data %s, indices %s)", (int)rank, RLX_MAX_RANK,
                TSTR(c, x, b1), TSTR(c, idx, b2));
  rlx_type* o = &c->out[0];
  o->dtype = x->dtype;
  o->rank = 0;
  for (int32_t i = 0; i < a->axis; i++) o->shape[o->rank++] = x->shape[i];
  for (int32_t i = 0; i < idx->rank; i++) o->shape[o->rank++] = idx->shape[i];
  for (int32_t i = a->axis + 1; i < x->rank; i++) o->shape[o->rank++] = x->shape[i];
  return RLX_OK;
}

static rlx_status infer_scatter_add(infer_ctx* c) {
  const rlx_type *base = c->t[0], *idx = c->t[1], *src = c->t[2];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "base"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &a->axis, base->rank));
  if (!is_index_dtype(idx->dtype) || idx->rank != base->rank)
    return FAIL(c, "indices must be i32/i64 of base's rank: base %s, indices %s",
                TSTR(c, base, b1), TSTR(c, idx, b2));
  rlx_type want = *idx;
  want.dtype = base->dtype;
  if (!rlx_type_equal(&want, src))
    return FAIL(c, "src %s must have the indices' shape and base's dtype (%s)",
                TSTR(c, src, b1), TSTR(c, &want, b2));
  for (int32_t d = 0; d < base->rank; d++) {
    rlx_dim di = idx->shape[d], db = base->shape[d];
    if (d == a->axis || di == db || (di >= 0 && db >= 0 && di <= db)) continue;
    return FAIL(c, "indices %s exceed base %s on dim %d", TSTR(c, idx, b1), TSTR(c, base, b2),
                (int)d);
  }
  c->out[0] = *base;
  return RLX_OK;
}

/* ------------------------------------------------------------------ elementwise */

static rlx_status infer_binary(infer_ctx* c) {
  int32_t k = c->a->kind;
  char buf[160];
  if (k < 0 || k >= RLX_BIN_COUNT) return FAIL(c, "binary kind %d is out of range", (int)k);
  RLX_RETURN_IF_ERROR(need_same_dtype(c, 0, 1, "a", "b"));
  /* On bool only the logical readings make sense: mul = and, max = or, min = and. */
  if (c->t[0]->dtype == RLX_BOOL && k != RLX_BIN_MUL && k != RLX_BIN_MAX && k != RLX_BIN_MIN)
    return FAIL(c, "not defined on bool (a is %s)", TSTR(c, c->t[0], buf));
  c->out[0] = *c->t[0];
  return broadcast_into(c, &c->out[0], c->t[1], "operands");
}

static rlx_status infer_compare(infer_ctx* c) {
  int32_t k = c->a->kind;
  if (k < 0 || k >= RLX_CMP_COUNT) return FAIL(c, "compare kind %d is out of range", (int)k);
  RLX_RETURN_IF_ERROR(need_same_dtype(c, 0, 1, "a", "b"));
  c->out[0] = *c->t[0];
  RLX_RETURN_IF_ERROR(broadcast_into(c, &c->out[0], c->t[1], "operands"));
  c->out[0].dtype = RLX_BOOL;
  return RLX_OK;
}

static rlx_status infer_where(infer_ctx* c) {
  char buf[160];
  if (c->t[0]->dtype != RLX_BOOL)
    return FAIL(c, "cond must be bool, got %s", TSTR(c, c->t[0], buf));
  RLX_RETURN_IF_ERROR(need_same_dtype(c, 1, 2, "x", "y"));
  c->out[0] = *c->t[0];
  RLX_RETURN_IF_ERROR(broadcast_into(c, &c->out[0], c->t[1], "cond and x"));
  RLX_RETURN_IF_ERROR(broadcast_into(c, &c->out[0], c->t[2], "cond, x and y"));
  c->out[0].dtype = c->t[1]->dtype;
  return RLX_OK;
}

static rlx_status infer_activation(infer_ctx* c) {
  int32_t k = c->a->kind;
  rlx_dtype d = c->t[0]->dtype;
  char buf[160];
  if (k <= RLX_ACT_NONE || k >= RLX_ACT_COUNT)
    return FAIL(c, "activation kind %d is out of range", (int)k);
  int int_ok = k == RLX_ACT_NEG || k == RLX_ACT_ABS || k == RLX_ACT_RELU;
  if (!rlx_dtype_is_float(d) && !(int_ok && rlx_dtype_is_int(d)))
    return FAIL(c, "input must be a float%s dtype, got %s", int_ok ? " or integer" : "",
                TSTR(c, c->t[0], buf));
  c->out[0] = *c->t[0];
  return RLX_OK;
}

/* The program is validated here, so a node added by a builder, a pass or a
 * parsed text file is always well formed (region.h). The output is the
 * broadcast of every input in the region's dtype. */
static rlx_status infer_elementwise_region(infer_ctx* c) {
  rlx_dtype dt[RLX_REGION_MAX_INPUTS];
  char msg[256];
  for (int32_t i = 0; i < c->n_in && i < RLX_REGION_MAX_INPUTS; i++) dt[i] = c->t[i]->dtype;
  rlx_region_program p;
  if (rlx_region_decode(c->a->data, c->a->data_bytes, dt, c->n_in, &p, msg, sizeof msg))
    return FAIL(c, "%s", msg);
  c->out[0] = *c->t[0];
  for (int32_t i = 1; i < c->n_in; i++)
    RLX_RETURN_IF_ERROR(broadcast_into(c, &c->out[0], c->t[i], "inputs"));
  c->out[0].dtype = (rlx_dtype)p.dtype;
  return RLX_OK;
}

/* ------------------------------------------------------------------ contraction */

static rlx_status infer_matmul(infer_ctx* c) {
  const rlx_type *a = c->t[0], *b = c->t[1];
  rlx_node_attrs* at = c->a;
  char b1[160], b2[160];
  norm_flag(&at->transpose_a);
  norm_flag(&at->transpose_b);
  if (a->rank < 2 || b->rank < 2)
    return FAIL(c, "operands need rank >= 2: a is %s, b is %s", TSTR(c, a, b1), TSTR(c, b, b2));
  if (!rlx_dtype_is_float(a->dtype) || a->dtype != b->dtype)
    return FAIL(c, "operands need one float dtype: a is %s, b is %s", TSTR(c, a, b1),
                TSTR(c, b, b2));
  rlx_dim m = a->shape[a->rank - 2 + at->transpose_a];
  rlx_dim ka = a->shape[a->rank - 1 - at->transpose_a];
  rlx_dim kb = b->shape[b->rank - 2 + at->transpose_b];
  rlx_dim n = b->shape[b->rank - 1 - at->transpose_b];
  if (ka != kb)
    return FAIL(c, "inner dims differ: a is %s, b is %s%s", TSTR(c, a, b1), TSTR(c, b, b2),
                at->transpose_a || at->transpose_b ? " (after transposes)" : "");
  /* Batch dims broadcast like NumPy. */
  rlx_type ba = *a, bb = *b;
  ba.rank -= 2;
  bb.rank -= 2;
  RLX_RETURN_IF_ERROR(broadcast_into(c, &ba, &bb, "batch dims"));
  rlx_type* o = &c->out[0];
  *o = ba;
  o->shape[o->rank++] = m;
  o->shape[o->rank++] = n;
  if (c->op == RLX_OP_FUSED_MATMUL_BIAS_ACT) {
    if (at->act < RLX_ACT_NONE || at->act >= RLX_ACT_COUNT)
      return FAIL(c, "activation %d is out of range", (int)at->act);
    RLX_RETURN_IF_ERROR(need_vector(c, 2, n, "bias"));
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ reduction */

static rlx_status infer_reduce(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  rlx_node_attrs* a = c->a;
  char buf[160];
  if (a->kind < 0 || a->kind >= RLX_RED_COUNT)
    return FAIL(c, "reduce kind %d is out of range", (int)a->kind);
  uint32_t all = x->rank >= 32 ? 0xffffffffu : (1u << x->rank) - 1u;
  if (a->axes & ~all)
    return FAIL(c, "axes mask 0x%x names axes beyond rank %d", (unsigned)a->axes, (int)x->rank);
  if (a->kind == RLX_RED_MEAN && !rlx_dtype_is_float(x->dtype))
    return FAIL(c, "mean needs a float dtype, got %s", TSTR(c, x, buf));
  if (x->dtype == RLX_BOOL && a->kind != RLX_RED_MAX && a->kind != RLX_RED_MIN)
    return FAIL(c, "not defined on bool (input %s)", TSTR(c, x, buf));
  norm_flag(&a->keep_dim);
  rlx_type* o = &c->out[0];
  o->dtype = x->dtype;
  o->rank = 0;
  for (int32_t i = 0; i < x->rank; i++) {
    if (!(a->axes & (1u << i))) o->shape[o->rank++] = x->shape[i];
    else if (a->keep_dim) o->shape[o->rank++] = 1;
  }
  return RLX_OK;
}

static rlx_status infer_arg_reduce(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  rlx_node_attrs* a = c->a;
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "input"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &a->axis, x->rank));
  norm_flag(&a->keep_dim);
  rlx_type* o = &c->out[0];
  *o = *x;
  o->dtype = RLX_I64;
  if (a->keep_dim) {
    o->shape[a->axis] = 1;
  } else {
    for (int32_t i = a->axis; i + 1 < x->rank; i++) o->shape[i] = x->shape[i + 1];
    o->rank--;
  }
  return RLX_OK;
}

static rlx_status infer_softmax(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "input"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "input"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &c->a->axis, c->t[0]->rank));
  c->out[0] = *c->t[0];
  return RLX_OK;
}

static rlx_status need_numeric(infer_ctx* c, int32_t i, const char* what) {
  char buf[160];
  if (c->t[i]->dtype == RLX_BOOL) return FAIL(c, "%s must not be bool (%s)", what,
                                              TSTR(c, c->t[i], buf));
  return RLX_OK;
}

static rlx_status infer_cumsum(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "input"));
  RLX_RETURN_IF_ERROR(need_numeric(c, 0, "input"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &c->a->axis, c->t[0]->rank));
  norm_flag(&c->a->exclusive);
  norm_flag(&c->a->reverse);
  c->out[0] = *c->t[0];
  return RLX_OK;
}

static rlx_status infer_topk(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  rlx_node_attrs* a = c->a;
  char buf[160];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "input"));
  RLX_RETURN_IF_ERROR(need_numeric(c, 0, "input"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &a->axis, x->rank));
  norm_flag(&a->largest);
  rlx_dim dim = x->shape[a->axis];
  /* A symbolic dim is checked when the graph is specialized. */
  if (a->k < 1 || (dim >= 0 && a->k > dim))
    return FAIL(c, "k = %lld must be in 1..dim (axis %d of %s)", (long long)a->k,
                (int)a->axis, TSTR(c, x, buf));
  c->out[0] = *x;
  c->out[0].shape[a->axis] = a->k;
  c->out[1] = c->out[0];
  c->out[1].dtype = RLX_I64;
  return RLX_OK;
}

/* ------------------------------------------------------------------ normalization */

static rlx_status check_eps(infer_ctx* c) {
  if (!(c->a->eps >= 0.0f) || isinf(c->a->eps))
    return FAIL(c, "eps %g must be finite and >= 0", (double)c->a->eps);
  return RLX_OK;
}

static rlx_status infer_layer_norm(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160], b3[160];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "input"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "input"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &a->axis, x->rank));
  RLX_RETURN_IF_ERROR(check_eps(c));
  rlx_type want = {x->dtype, x->rank - a->axis, {0}};
  memcpy(want.shape, x->shape + a->axis, sizeof(rlx_dim) * (size_t)want.rank);
  for (int32_t i = 1; i <= 2; i++)
    if (c->t[i] && !rlx_type_equal(c->t[i], &want))
      return FAIL(c, "%s must be %s (input %s from axis %d), got %s", i == 1 ? "gamma" : "beta",
                  TSTR(c, &want, b1), TSTR(c, x, b2), (int)a->axis, TSTR(c, c->t[i], b3));
  c->out[0] = *x;
  return RLX_OK;
}

/* Channel-wise norms (GroupNorm, LayerNorm2d, BatchNorm, LRN): x is
 * [N, C, spatial...]; per-channel inputs from 1 on are [C] vectors. */
static rlx_status infer_channel_norm(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 2, "input [N, C, ...]"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "input"));
  if (c->op != RLX_OP_LRN) RLX_RETURN_IF_ERROR(check_eps(c));
  static const char* names[] = {"x", "gamma", "beta", "mean", "var"};
  rlx_dim ch = c->t[0]->shape[1];
  for (int32_t i = 1; i < c->n_in && i < 5; i++)
    RLX_RETURN_IF_ERROR(need_vector(c, i, ch, names[i]));
  if (c->op == RLX_OP_GROUP_NORM) {
    int32_t g = c->a->groups;
    if (g < 1) return FAIL(c, "groups %d must be >= 1", (int)g);
    if (ch >= 0 && ch % g != 0)
      return FAIL(c, "channels %lld are not divisible by groups %d", (long long)ch, (int)g);
  }
  if (c->op == RLX_OP_LRN) {
    const rlx_node_attrs* a = c->a;
    if (a->size < 1) return FAIL(c, "size %d must be >= 1", (int)a->size);
    for (int32_t d = 2; c->t[0]->rank > 4 && d < c->t[0]->rank; d++)
      if (c->t[0]->shape[d] < 0)
        return FAIL(c, "a rank %d input needs static spatial dims (they are merged)",
                    (int)c->t[0]->rank);
    if (!isfinite(a->alpha) || !isfinite(a->beta) || !isfinite(a->bias))
      return FAIL(c, "alpha, beta and bias must be finite (got %g, %g, %g)", (double)a->alpha,
                  (double)a->beta, (double)a->bias);
  }
  c->out[0] = *c->t[0];
  return RLX_OK;
}

static rlx_status infer_rms_norm(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "input"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "input"));
  RLX_RETURN_IF_ERROR(check_eps(c));
  RLX_RETURN_IF_ERROR(need_vector(c, 1, c->t[0]->shape[c->t[0]->rank - 1], "gamma"));
  c->out[0] = *c->t[0];
  return RLX_OK;
}

static rlx_status infer_fused_residual_norm(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  char b1[160], b2[160];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "x"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "x"));
  RLX_RETURN_IF_ERROR(check_eps(c));
  if (!rlx_type_equal(x, c->t[1]))
    return FAIL(c, "x %s and residual %s must have one type", TSTR(c, x, b1),
                TSTR(c, c->t[1], b2));
  static const char* const names[] = {"x", "residual", "bias", "gamma", "beta"};
  rlx_dim last = x->shape[x->rank - 1];
  for (int32_t i = 2; i < c->n_in; i++) RLX_RETURN_IF_ERROR(need_vector(c, i, last, names[i]));
  c->out[0] = *x;
  c->out[1] = *x;
  return RLX_OK;
}

/* ------------------------------------------------------------------ transformer */

/* Positions of S, H, D in a rank-4 tensor for a layout. */
static void layout_axes(int32_t layout, int32_t* s, int32_t* h) {
  *s = layout == RLX_LAYOUT_BSHD ? 1 : 2;
  *h = layout == RLX_LAYOUT_BSHD ? 2 : 1;
}

static rlx_status check_attention_attrs(infer_ctx* c) {
  rlx_node_attrs* a = c->a;
  if (a->layout != RLX_LAYOUT_BSHD && a->layout != RLX_LAYOUT_BHSD)
    return FAIL(c, "layout %d is not bshd or bhsd", (int)a->layout);
  if (a->num_heads < 1 || a->head_dim < 1)
    return FAIL(c, "num_heads %d and head_dim %d must be >= 1", (int)a->num_heads,
                (int)a->head_dim);
  if (a->num_kv_heads == 0) a->num_kv_heads = a->num_heads;
  if (a->num_kv_heads < 1 || a->num_heads % a->num_kv_heads != 0)
    return FAIL(c, "num_kv_heads %d must divide num_heads %d", (int)a->num_kv_heads,
                (int)a->num_heads);
  if (a->mask < RLX_MASK_NONE || a->mask > RLX_MASK_BIAS)
    return FAIL(c, "mask kind %d is out of range", (int)a->mask);
  if (a->mask == RLX_MASK_SLIDING && a->window < 1)
    return FAIL(c, "sliding window %d must be >= 1", (int)a->window);
  if (a->mask != RLX_MASK_SLIDING) a->window = 0; /* meaningless otherwise */
  if (a->score_scale == 0.0f) a->score_scale = 1.0f / sqrtf((float)a->head_dim);
  if (!isfinite(a->score_scale)) return FAIL(c, "score_scale must be finite");
  if (!(a->softcap >= 0.0f) || isinf(a->softcap))
    return FAIL(c, "softcap %g must be finite and >= 0", (double)a->softcap);
  return RLX_OK;
}

/* The mask broadcasts (right-aligned) to [B, H, Sq, Sk]. */
static rlx_status check_attention_mask(infer_ctx* c, const rlx_type* scores) {
  const rlx_type* m = c->t[3];
  int needs = c->a->mask == RLX_MASK_CUSTOM || c->a->mask == RLX_MASK_BIAS;
  char b1[160], b2[160];
  if (!needs) {
    if (m) return FAIL(c, "mask kind %d takes no mask tensor", (int)c->a->mask);
    return RLX_OK;
  }
  if (!m) return FAIL(c, "mask kind %s needs a mask tensor",
                      c->a->mask == RLX_MASK_CUSTOM ? "custom" : "bias");
  int dtype_ok = rlx_dtype_is_float(m->dtype) ||
                 (c->a->mask == RLX_MASK_CUSTOM && m->dtype == RLX_BOOL);
  int ok = dtype_ok && m->rank <= 4;
  for (int32_t i = 1; ok && i <= m->rank; i++) {
    rlx_dim d = m->shape[m->rank - i];
    ok = d == 1 || d == scores->shape[4 - i];
  }
  if (!ok)
    return FAIL(c, "mask %s must be float%s and broadcast to scores %s", TSTR(c, m, b1),
                c->a->mask == RLX_MASK_CUSTOM ? " or bool" : "", TSTR(c, scores, b2));
  return RLX_OK;
}

static rlx_status infer_attention(infer_ctx* c) {
  const rlx_type *q = c->t[0], *k = c->t[1], *v = c->t[2];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160], b3[160];
  RLX_RETURN_IF_ERROR(check_attention_attrs(c));
  if (q->rank != 4 || k->rank != 4 || v->rank != 4)
    return FAIL(c, "q, k, v must have rank 4: q %s, k %s, v %s", TSTR(c, q, b1), TSTR(c, k, b2),
                TSTR(c, v, b3));
  if (!rlx_dtype_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
    return FAIL(c, "q, k, v need one float dtype: q %s, k %s, v %s", TSTR(c, q, b1),
                TSTR(c, k, b2), TSTR(c, v, b3));
  int32_t s, h;
  layout_axes(a->layout, &s, &h);
  const char* lay = a->layout == RLX_LAYOUT_BSHD ? "bshd" : "bhsd";
  if (q->shape[h] != a->num_heads || q->shape[3] != a->head_dim)
    return FAIL(c, "q %s (%s) must have %d heads of dim %d", TSTR(c, q, b1), lay,
                (int)a->num_heads, (int)a->head_dim);
  if (k->shape[0] != q->shape[0] || k->shape[h] != a->num_kv_heads ||
      k->shape[3] != a->head_dim)
    return FAIL(c, "k %s (%s) must have q's batch, %d kv heads of dim %d (q %s)",
                TSTR(c, k, b1), lay, (int)a->num_kv_heads, (int)a->head_dim, TSTR(c, q, b2));
  if (v->shape[0] != k->shape[0] || v->shape[h] != k->shape[h] || v->shape[s] != k->shape[s])
    return FAIL(c, "v %s must match k %s in batch, heads and sequence (%s)", TSTR(c, v, b1),
                TSTR(c, k, b2), lay);
  rlx_type scores = {q->dtype, 4, {q->shape[0], a->num_heads, q->shape[s], k->shape[s]}};
  RLX_RETURN_IF_ERROR(check_attention_mask(c, &scores));
  c->out[0] = *q;
  c->out[0].shape[3] = v->shape[3];
  return RLX_OK;
}

/* The forward's checks, then out and d_out shaped like the forward's
 * output; dq, dk, dv take q's, k's and v's types. */
static rlx_status infer_attention_backward(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(infer_attention(c));
  const rlx_type *o = c->t[4], *d_o = c->t[5];
  char b1[160], b2[160], b3[160];
  if (!rlx_type_equal(o, &c->out[0]) || !rlx_type_equal(d_o, &c->out[0]))
    return FAIL(c, "out %s and d_out %s must both be the forward's output type %s",
                TSTR(c, o, b1), TSTR(c, d_o, b2), TSTR(c, &c->out[0], b3));
  c->out[0] = *c->t[0];
  c->out[1] = *c->t[1];
  c->out[2] = *c->t[2];
  return RLX_OK;
}

static rlx_status infer_rope(infer_ctx* c) {
  const rlx_type *x = c->t[0], *cs = c->t[1], *sn = c->t[2];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160];
  if (a->layout != RLX_LAYOUT_BSHD && a->layout != RLX_LAYOUT_BHSD)
    return FAIL(c, "layout %d is not bshd or bhsd", (int)a->layout);
  if (a->style != RLX_ROPE_NEOX && a->style != RLX_ROPE_GPTJ)
    return FAIL(c, "style %d is not neox or gptj", (int)a->style);
  if (x->rank != 4 || !rlx_dtype_is_float(x->dtype) || x->shape[3] != a->head_dim)
    return FAIL(c, "x %s must be a rank-4 float tensor with last dim head_dim = %d",
                TSTR(c, x, b1), (int)a->head_dim);
  if (a->n_rot < 2 || a->n_rot % 2 || a->n_rot > a->head_dim)
    return FAIL(c, "n_rot %d must be even and in 2..head_dim (%d)", (int)a->n_rot,
                (int)a->head_dim);
  if (!rlx_type_equal(cs, sn) || !rlx_dtype_is_float(cs->dtype) || cs->rank != 2 ||
      cs->shape[1] != a->n_rot / 2)
    return FAIL(c, "cos %s and sin %s must be one float type [rows, %d]", TSTR(c, cs, b1),
                TSTR(c, sn, b2), (int)(a->n_rot / 2));
  int32_t s, h;
  layout_axes(a->layout, &s, &h);
  rlx_dim batch = x->shape[0], seq = x->shape[s], rows = cs->shape[0];
  int per_token = batch > 0 && seq >= 0 && seq <= INT64_MAX / batch && rows == batch * seq;
  if (rows != seq && !per_token)
    return FAIL(c, "cos/sin have %s rows; x %s needs S or B*S rows", DSTR(c, rows, b1),
                TSTR(c, x, b2));
  c->out[0] = *x;
  return RLX_OK;
}

/* ------------------------------------------------------------------ row-wise backward */

/* Input i (a gradient) must have exactly the type of input 0. */
static rlx_status need_same_type(infer_ctx* c, int32_t i, const char* what, const char* like) {
  char b1[160], b2[160];
  if (!rlx_type_equal(c->t[i], c->t[0]))
    return FAIL(c, "%s %s must have %s's type %s", what, TSTR(c, c->t[i], b1), like,
                TSTR(c, c->t[0], b2));
  return RLX_OK;
}

/* x, gamma, dy -> dx (x's type), d_gamma and d_beta (x.shape[axis:]). */
static rlx_status infer_layer_norm_backward(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160], b3[160];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "x"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "x"));
  RLX_RETURN_IF_ERROR(norm_axis(c, &a->axis, x->rank));
  RLX_RETURN_IF_ERROR(check_eps(c));
  RLX_RETURN_IF_ERROR(need_same_type(c, 2, "dy", "x"));
  rlx_type want = {x->dtype, x->rank - a->axis, {0}};
  memcpy(want.shape, x->shape + a->axis, sizeof(rlx_dim) * (size_t)want.rank);
  if (c->t[1] && !rlx_type_equal(c->t[1], &want))
    return FAIL(c, "gamma must be %s (x %s from axis %d), got %s", TSTR(c, &want, b1),
                TSTR(c, x, b2), (int)a->axis, TSTR(c, c->t[1], b3));
  c->out[0] = *x;
  c->out[1] = want;
  c->out[2] = want;
  return RLX_OK;
}

/* x, gamma, dy -> dx (x's type), d_gamma ([last dim]). */
static rlx_status infer_rms_norm_backward(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "x"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "x"));
  RLX_RETURN_IF_ERROR(check_eps(c));
  RLX_RETURN_IF_ERROR(need_same_type(c, 2, "dy", "x"));
  rlx_dim last = x->shape[x->rank - 1];
  RLX_RETURN_IF_ERROR(need_vector(c, 1, last, "gamma"));
  c->out[0] = *x;
  rlx_type dg = {x->dtype, 1, {last}};
  c->out[1] = dg;
  return RLX_OK;
}

/* y, dy -> dx along axis. */
static rlx_status infer_softmax_backward(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(infer_softmax(c));
  return need_same_type(c, 1, "dy", "y");
}

/* Float only: a gradient (the forward also takes integers). */
static rlx_status infer_cumsum_backward(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(need_float(c, 0, "dy"));
  return infer_cumsum(c);
}

static rlx_status infer_sample(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  rlx_node_attrs* a = c->a;
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "logits"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "logits"));
  if (a->top_k < 0) return FAIL(c, "top_k %d must be >= 0", (int)a->top_k);
  if (!(a->top_p > 0.0f && a->top_p <= 1.0f))
    return FAIL(c, "top_p %g must be in (0, 1]", (double)a->top_p);
  if (isnan(a->temperature)) return FAIL(c, "temperature is NaN");
  c->out[0] = *x;
  c->out[0].dtype = RLX_I64;
  c->out[0].rank--;
  return RLX_OK;
}

/* ------------------------------------------------------------------ vision */

/* One pooled dim's output size (see rlx_graph_add_pool), or -1 if the window
 * does not fit. */
static int64_t pool_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                            int32_t ceil_mode) {
  int64_t span = in + pb + pe - d * (k - 1) - 1;
  if (span < 0) return -1;
  int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  /* A ceil-mode window must start inside the input or its begin padding. */
  if (ceil_mode && (out - 1) * s >= in + pb) out--;
  return out;
}

/* pool_out_dim over a symbolic input size, as a dim expression: floor (or
 * ceil) of span / s, plus one; in ceil mode the last window must still
 * start before in + pb, so at most cdiv(in + pb, s) windows. */
static int pool_out_symbolic(rlx_graph* g, rlx_dim in, int64_t k, int64_t s, int64_t d,
                             int64_t pb, int64_t pe, int32_t ceil_mode, rlx_dim* out) {
  int64_t shift = pb + pe - d * (k - 1) - 1; /* span = in + shift */
  rlx_dim span, q, starts;
  int ok = rlx_graph_dim_expr(g, shift >= 0 ? RLX_DIM_ADD : RLX_DIM_SUB, in,
                              shift >= 0 ? shift : -shift, &span) == RLX_OK &&
           rlx_graph_dim_expr(g, ceil_mode ? RLX_DIM_CEIL_DIV : RLX_DIM_FLOOR_DIV, span, s,
                              &q) == RLX_OK &&
           rlx_graph_dim_expr(g, RLX_DIM_ADD, q, 1, out) == RLX_OK;
  if (ok && ceil_mode)
    ok = rlx_graph_dim_expr(g, RLX_DIM_ADD, in, pb, &starts) == RLX_OK &&
         rlx_graph_dim_expr(g, RLX_DIM_CEIL_DIV, starts, s, &starts) == RLX_OK &&
         rlx_graph_dim_expr(g, RLX_DIM_MIN, *out, starts, out) == RLX_OK;
  return ok;
}

static rlx_status check_pool_lists(infer_ctx* c, int32_t ns) {
  const rlx_node_attrs* a = c->a;
  if (a->kernel.n != ns || a->strides.n != ns || a->dilations.n != ns || a->pads.n != 2 * ns)
    return FAIL(c, "kernel, strides, dilations need %d entries and pads %d (got %d, %d, %d, %d)",
                (int)ns, (int)(2 * ns), (int)a->kernel.n, (int)a->strides.n,
                (int)a->dilations.n, (int)a->pads.n);
  for (int32_t i = 0; i < ns; i++) {
    if (a->kernel.v[i] < 1 || a->strides.v[i] < 1 || a->dilations.v[i] < 1)
      return FAIL(c, "spatial dim %d: kernel %lld, stride %lld and dilation %lld must be >= 1",
                  (int)i, (long long)a->kernel.v[i], (long long)a->strides.v[i],
                  (long long)a->dilations.v[i]);
    if (a->pads.v[i] < 0 || a->pads.v[ns + i] < 0)
      return FAIL(c, "spatial dim %d: pads %lld, %lld must be >= 0", (int)i,
                  (long long)a->pads.v[i], (long long)a->pads.v[ns + i]);
  }
  return RLX_OK;
}

static rlx_status infer_pool(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  const rlx_node_attrs* a = c->a;
  char b1[160];
  if (a->pool != RLX_POOL_MAX && a->pool != RLX_POOL_AVG && a->pool != RLX_POOL_ARGMAX)
    return FAIL(c, "pool kind %d is not max, avg or argmax", (int)a->pool);
  int32_t ns = a->kernel.n;
  if (ns < 1 || ns > 3) return FAIL(c, "%d spatial dims; pooling takes 1, 2 or 3", (int)ns);
  if (x->rank != ns + 2 || !rlx_dtype_is_float(x->dtype))
    return FAIL(c, "x %s must be a float tensor [N, C, %d spatial dims]", TSTR(c, x, b1), (int)ns);
  RLX_RETURN_IF_ERROR(check_pool_lists(c, ns));
  /* channels last: [N, spatial..., C]; argmax's indices are NCHW ones */
  int last = a->conv_layout == RLX_CONV_CHANNELS_LAST;
  if (a->conv_layout != RLX_CONV_CHANNELS_FIRST && (!last || a->pool == RLX_POOL_ARGMAX))
    return FAIL(c, "layout %d: pooling is channels_first, or channels_last for max and avg",
                (int)a->conv_layout);
  c->out[0] = *x;
  for (int32_t i = 0; i < ns; i++) {
    int32_t ax = last ? 1 + i : 2 + i;
    rlx_dim in = x->shape[ax];
    if (in < 0) { /* the window's fit is checked when specialised */
      if (!pool_out_symbolic(c->g, in, a->kernel.v[i], a->strides.v[i], a->dilations.v[i],
                             a->pads.v[i], a->pads.v[ns + i], a->ceil_mode, &c->out[0].shape[ax]))
        return FAIL(c, "spatial dim %d of x %s: %s", (int)i, TSTR(c, x, b1), c->g->err.msg);
      continue;
    }
    int64_t o = pool_out_dim(in, a->kernel.v[i], a->strides.v[i], a->dilations.v[i],
                             a->pads.v[i], a->pads.v[ns + i], a->ceil_mode);
    if (o < 1)
      return FAIL(c, "spatial dim %d: a window of %lld (dilation %lld) does not fit %lld + pads",
                  (int)i, (long long)a->kernel.v[i], (long long)a->dilations.v[i], (long long)in);
    c->out[0].shape[ax] = o;
  }
  if (a->pool == RLX_POOL_ARGMAX) c->out[0].dtype = RLX_I64;
  return RLX_OK;
}

static rlx_status infer_pad(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  const rlx_node_attrs* a = c->a;
  char b1[160];
  int32_t r = x->rank;
  if (a->pad_mode < RLX_PAD_CONSTANT || a->pad_mode > RLX_PAD_WRAP)
    return FAIL(c, "pad mode %d is not constant, reflect, edge or wrap", (int)a->pad_mode);
  if (a->pads.n != 2 * r)
    return FAIL(c, "pads has %d entries; x %s needs %d", (int)a->pads.n, TSTR(c, x, b1), (int)(2 * r));
  c->out[0] = *x;
  for (int32_t d = 0; d < r; d++) {
    int64_t pb = a->pads.v[d], pe = a->pads.v[r + d];
    if (pb == 0 && pe == 0) continue;
    if (x->shape[d] < 0) return FAIL(c, "dim %d of x %s is symbolic and padded", (int)d, TSTR(c, x, b1));
    int64_t o = x->shape[d] + pb + pe;
    if (o < 0) return FAIL(c, "dim %d: pads %lld, %lld crop more than its %lld", (int)d,
                           (long long)pb, (long long)pe, (long long)x->shape[d]);
    if (a->pad_mode != RLX_PAD_CONSTANT && x->shape[d] == 0 && o > 0)
      return FAIL(c, "dim %d: reflect / edge / wrap padding of an empty dim", (int)d);
    c->out[0].shape[d] = o;
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ convolution */

/* strides / dilations / pads (and output_padding) of Conv, ConvTranspose
 * and Im2Col: ns entries each (pads 2 * ns), strides and dilations >= 1,
 * pads >= 0. */
static rlx_status check_conv_lists(infer_ctx* c, int32_t ns, int transpose) {
  const rlx_node_attrs* a = c->a;
  if (ns < 1 || ns > 3) return FAIL(c, "%d spatial dims (strides); convolution takes 1, 2 or 3", (int)ns);
  if (a->dilations.n != ns || a->pads.n != 2 * ns || (transpose && a->output_padding.n != ns))
    return FAIL(c, "strides, dilations%s need %d entries and pads %d (got %d, %d, %d%s)",
                transpose ? ", output_padding" : "", (int)ns, (int)(2 * ns), (int)a->strides.n,
                (int)a->dilations.n, (int)a->pads.n, transpose ? " and output_padding" : "");
  for (int32_t i = 0; i < ns; i++) {
    if (a->strides.v[i] < 1 || a->dilations.v[i] < 1)
      return FAIL(c, "spatial dim %d: stride %lld and dilation %lld must be >= 1", (int)i,
                  (long long)a->strides.v[i], (long long)a->dilations.v[i]);
    if (a->pads.v[i] < 0 || a->pads.v[ns + i] < 0)
      return FAIL(c, "spatial dim %d: pads %lld, %lld must be >= 0", (int)i,
                  (long long)a->pads.v[i], (long long)a->pads.v[ns + i]);
    if (transpose) {
      int64_t op = a->output_padding.v[i], s = a->strides.v[i], d = a->dilations.v[i];
      if (op < 0 || (op >= s && op >= d))
        return FAIL(c, "spatial dim %d: output_padding %lld must be >= 0 and below the stride %lld or the dilation %lld",
                    (int)i, (long long)op, (long long)s, (long long)d);
    }
  }
  if (a->conv_layout < RLX_CONV_CHANNELS_FIRST || a->conv_layout > RLX_CONV_CHANNELS_LAST_OHWI)
    return FAIL(c, "layout %d is not channels_first, channels_last or channels_last_ohwi",
                (int)a->conv_layout);
  return RLX_OK;
}

/* Axis of spatial dim i (and of the channels, i = -1) of a [N, C, sp...] or
 * [N, sp..., C] tensor of rank ns + 2. */
static int32_t conv_axis(int32_t layout, int32_t ns, int32_t i) {
  if (rlx_conv_layout_is_last(layout)) return i < 0 ? ns + 1 : 1 + i;
  return i < 0 ? 1 : 2 + i;
}

static int64_t conv_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                            int64_t op, int transpose) {
  if (transpose) return (in - 1) * s - pb - pe + d * (k - 1) + op + 1;
  int64_t span = in + pb + pe - d * (k - 1) - 1;
  return span < 0 ? -1 : span / s + 1;
}

/* x (float, static channels and spatial dims) and the kernel sizes of w. */
static rlx_status check_conv_x_w(infer_ctx* c, int32_t ns, const rlx_type* x, const rlx_type* w) {
  char b1[160], b2[160];
  int32_t layout = c->a->conv_layout;
  if (x->rank != ns + 2 || !rlx_dtype_is_float(x->dtype))
    return FAIL(c, "x %s must be a float tensor of rank %d (N, channels and %d spatial dims)",
                TSTR(c, x, b1), (int)(ns + 2), (int)ns);
  for (int32_t i = -1; i < ns; i++)
    if (x->shape[conv_axis(layout, ns, i)] < 0)
      return FAIL(c, "x %s: channels and spatial dims must be static", TSTR(c, x, b1));
  if (w->rank != ns + 2 || w->dtype != x->dtype)
    return FAIL(c, "w %s must be [out, in, kernel...] of rank %d with x's dtype (x %s)",
                TSTR(c, w, b1), (int)(ns + 2), TSTR(c, x, b2));
  for (int32_t i = 0; i < ns; i++)
    if (w->shape[rlx_conv_w_axis(layout, ns, i)] < 1)
      return FAIL(c, "w %s must be static with kernel sizes >= 1", TSTR(c, w, b1));
  if (w->shape[0] < 0 || w->shape[rlx_conv_w_axis(layout, ns, -1)] < 0)
    return FAIL(c, "w %s must be static", TSTR(c, w, b1));
  return RLX_OK;
}

/* Channels of y from x's channels C and w, per the group rule of each op. */
static rlx_status conv_channels(infer_ctx* c, int transpose, int64_t C, const rlx_type* w,
                                int64_t* OC) {
  char b1[160];
  int64_t g = c->a->groups, w_in = w->shape[rlx_conv_w_axis(c->a->conv_layout, w->rank - 2, -1)];
  if (g < 1) return FAIL(c, "groups %lld must be >= 1", (long long)g);
  if (C % g) return FAIL(c, "x's %lld channels do not divide into %lld groups", (long long)C, (long long)g);
  if (!transpose) {
    if (w_in * g != C)
      return FAIL(c, "w %s takes %lld input channels per group; x has %lld channels in %lld groups",
                  TSTR(c, w, b1), (long long)w_in, (long long)C, (long long)g);
    if (w->shape[0] % g)
      return FAIL(c, "w %s: %lld output channels do not divide into %lld groups", TSTR(c, w, b1),
                  (long long)w->shape[0], (long long)g);
    *OC = w->shape[0];
  } else {
    if (w->shape[0] != C)
      return FAIL(c, "w %s must be [C = %lld, OC/groups, kernel...] (ConvTranspose)", TSTR(c, w, b1),
                  (long long)C);
    *OC = w->shape[1] * g;
  }
  return RLX_OK;
}

static rlx_status check_conv_extras(infer_ctx* c, int64_t OC, const rlx_type* y) {
  char b1[160], b2[160];
  const rlx_type* bias = c->n_in > 2 ? c->t[2] : NULL;
  const rlx_type* res = c->n_in > 3 ? c->t[3] : NULL;
  if (bias && (bias->rank != 1 || bias->shape[0] != OC || bias->dtype != y->dtype))
    return FAIL(c, "bias %s must be [%lld] of the output's dtype", TSTR(c, bias, b1), (long long)OC);
  if (res && !rlx_type_equal(res, y))
    return FAIL(c, "residual %s must match the output %s", TSTR(c, res, b1), TSTR(c, y, b2));
  if (c->a->act < 0 || c->a->act >= RLX_ACT_COUNT)
    return FAIL(c, "activation %d is not an rlx_activation", (int)c->a->act);
  return RLX_OK;
}

/* Conv / ConvTranspose: y has x's layout with OC channels. */
static rlx_status infer_conv(infer_ctx* c, int transpose) {
  const rlx_type *x = c->t[0], *w = c->t[1];
  const rlx_node_attrs* a = c->a;
  int32_t ns = a->strides.n, layout = a->conv_layout;
  RLX_RETURN_IF_ERROR(check_conv_lists(c, ns, transpose));
  if (transpose && layout == RLX_CONV_CHANNELS_LAST_OHWI)
    return FAIL(c, "layout channels_last_ohwi is for Conv only");
  RLX_RETURN_IF_ERROR(check_conv_x_w(c, ns, x, w));
  int64_t OC = 0;
  RLX_RETURN_IF_ERROR(conv_channels(c, transpose, x->shape[conv_axis(layout, ns, -1)], w, &OC));
  c->out[0] = *x;
  c->out[0].shape[conv_axis(layout, ns, -1)] = OC;
  for (int32_t i = 0; i < ns; i++) {
    int32_t ax = conv_axis(layout, ns, i);
    int64_t k = w->shape[rlx_conv_w_axis(layout, ns, i)];
    int64_t o = conv_out_dim(x->shape[ax], k, a->strides.v[i], a->dilations.v[i],
                             a->pads.v[i], a->pads.v[ns + i],
                             transpose ? a->output_padding.v[i] : 0, transpose);
    if (o < 1)
      return FAIL(c, "spatial dim %d: output size %lld (input %lld, kernel %lld, dilation %lld, pads %lld, %lld) must be >= 1",
                  (int)i, (long long)o, (long long)x->shape[ax], (long long)k,
                  (long long)a->dilations.v[i], (long long)a->pads.v[i], (long long)a->pads.v[ns + i]);
    c->out[0].shape[ax] = o;
  }
  return check_conv_extras(c, OC, &c->out[0]);
}

/* Im2Col: [N, C * K, L] (channels first) or [N, L, K * C] (channels last). */
static rlx_status infer_im2col(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  const rlx_node_attrs* a = c->a;
  char b1[160];
  int32_t ns = a->kernel.n, layout = a->conv_layout;
  if (a->strides.n != ns) return FAIL(c, "kernel has %d entries, strides %d", (int)ns, (int)a->strides.n);
  RLX_RETURN_IF_ERROR(check_conv_lists(c, ns, 0));
  if (layout == RLX_CONV_CHANNELS_LAST_OHWI) return FAIL(c, "layout channels_last_ohwi is for Conv only");
  if (x->rank != ns + 2)
    return FAIL(c, "x %s must have rank %d (N, channels and %d spatial dims)", TSTR(c, x, b1),
                (int)(ns + 2), (int)ns);
  int64_t K = 1, L = 1, C = x->shape[conv_axis(layout, ns, -1)];
  if (C < 0) return FAIL(c, "x %s: channels must be static", TSTR(c, x, b1));
  for (int32_t i = 0; i < ns; i++) {
    int64_t in = x->shape[conv_axis(layout, ns, i)], k = a->kernel.v[i];
    if (in < 0) return FAIL(c, "spatial dim %d of x %s is symbolic", (int)i, TSTR(c, x, b1));
    if (k < 1) return FAIL(c, "spatial dim %d: kernel %lld must be >= 1", (int)i, (long long)k);
    int64_t o = conv_out_dim(in, k, a->strides.v[i], a->dilations.v[i], a->pads.v[i],
                             a->pads.v[ns + i], 0, 0);
    if (o < 1)
      return FAIL(c, "spatial dim %d: a window of %lld (dilation %lld) does not fit %lld + pads",
                  (int)i, (long long)k, (long long)a->dilations.v[i], (long long)in);
    K *= k;
    L *= o;
  }
  c->out[0] = *x;
  c->out[0].rank = 3;
  c->out[0].shape[1] = layout == RLX_CONV_CHANNELS_LAST ? L : C * K;
  c->out[0].shape[2] = layout == RLX_CONV_CHANNELS_LAST ? K * C : L;
  return RLX_OK;
}

/* ------------------------------------------------------------------ training, vision */

/* The weight a Conv with these attributes would take: [OC, C/groups,
 * kernel...] (channels_last_ohwi: [OC, kernel..., C/groups]) in x's dtype. */
static rlx_status conv_weight_type(infer_ctx* c, const rlx_type* x, int64_t OC, rlx_type* w) {
  const rlx_node_attrs* a = c->a;
  int32_t ns = a->kernel.n, layout = a->conv_layout;
  if (a->groups < 1) return FAIL(c, "groups %d must be >= 1", (int)a->groups);
  memset(w, 0, sizeof *w);
  w->dtype = x->dtype;
  w->rank = ns + 2;
  w->shape[0] = OC;
  w->shape[rlx_conv_w_axis(layout, ns, -1)] = x->shape[conv_axis(layout, ns, -1)] / a->groups;
  for (int32_t i = 0; i < ns; i++) w->shape[rlx_conv_w_axis(layout, ns, i)] = a->kernel.v[i];
  return RLX_OK;
}

/* ConvBackwardWeight: x and dy as the forward Conv saw them (dy shaped
 * like its output) -> d_w, the weight's type. The forward's own rule
 * checks the geometry; dy must be what it answers. */
static rlx_status infer_conv_backward_weight(infer_ctx* c) {
  const rlx_type *x = c->t[0], *dy = c->t[1];
  const rlx_node_attrs* a = c->a;
  char b1[160], b2[160];
  int32_t ns = a->kernel.n;
  if (ns < 1 || ns > 3 || a->strides.n != ns)
    return FAIL(c, "kernel has %d entries and strides %d; 1, 2 or 3 spatial dims each", (int)ns,
                (int)a->strides.n);
  if (x->rank != ns + 2 || dy->rank != ns + 2 || dy->dtype != x->dtype)
    return FAIL(c, "x %s and dy %s must have rank %d and one dtype", TSTR(c, x, b1),
                TSTR(c, dy, b2), (int)(ns + 2));
  if (a->conv_layout < RLX_CONV_CHANNELS_FIRST || a->conv_layout > RLX_CONV_CHANNELS_LAST_OHWI)
    return FAIL(c, "layout %d is not channels_first, channels_last or channels_last_ohwi",
                (int)a->conv_layout);
  int64_t OC = dy->shape[conv_axis(a->conv_layout, ns, -1)];
  if (OC < 1) return FAIL(c, "dy %s: channels must be static", TSTR(c, dy, b1));
  for (int32_t i = 0; i < ns; i++)
    if (a->kernel.v[i] < 1) return FAIL(c, "spatial dim %d: kernel %lld must be >= 1", (int)i, (long long)a->kernel.v[i]);
  rlx_type w;
  RLX_RETURN_IF_ERROR(conv_weight_type(c, x, OC, &w));
  infer_ctx fwd = *c;
  fwd.t[1] = &w;
  fwd.n_in = 2;
  RLX_RETURN_IF_ERROR(infer_conv(&fwd, 0));
  if (!rlx_type_equal(&c->out[0], dy))
    return FAIL(c, "dy %s must be the forward's output %s", TSTR(c, dy, b1),
                TSTR(c, &c->out[0], b2));
  c->out[0] = w;
  return RLX_OK;
}

/* PoolBackward (max or avg): dy shaped like the forward Pool's output ->
 * dx, x's type. */
static rlx_status infer_pool_backward(infer_ctx* c) {
  const rlx_type *x = c->t[0], *dy = c->t[1];
  char b1[160], b2[160];
  if (c->a->pool != RLX_POOL_MAX && c->a->pool != RLX_POOL_AVG)
    return FAIL(c, "pool kind %d is not max or avg", (int)c->a->pool);
  RLX_RETURN_IF_ERROR(infer_pool(c));
  if (!rlx_type_equal(&c->out[0], dy))
    return FAIL(c, "dy %s must be the forward's output %s", TSTR(c, dy, b1),
                TSTR(c, &c->out[0], b2));
  c->out[0] = *x;
  return RLX_OK;
}

/* DepthToSpace / SpaceToDepth: rank 4 with static C, H, W. */
static rlx_status infer_depth_space(infer_ctx* c, int to_space) {
  const rlx_type* x = c->t[0];
  const rlx_node_attrs* a = c->a;
  char b1[160];
  int64_t b = a->block;
  if (b < 1) return FAIL(c, "block %d must be >= 1", (int)a->block);
  if (to_space && a->d2s_mode != RLX_D2S_DCR && a->d2s_mode != RLX_D2S_CRD)
    return FAIL(c, "mode %d is not dcr or crd", (int)a->d2s_mode);
  if (x->rank != 4 || x->shape[1] < 0 || x->shape[2] < 0 || x->shape[3] < 0)
    return FAIL(c, "x %s must be [N, C, H, W] with static C, H, W", TSTR(c, x, b1));
  c->out[0] = *x;
  if (to_space) {
    if (x->shape[1] % (b * b)) return FAIL(c, "channels of x %s are not a multiple of block^2 = %lld", TSTR(c, x, b1), (long long)(b * b));
    c->out[0].shape[1] = x->shape[1] / (b * b);
    c->out[0].shape[2] = x->shape[2] * b;
    c->out[0].shape[3] = x->shape[3] * b;
  } else {
    if (x->shape[2] % b || x->shape[3] % b) return FAIL(c, "H and W of x %s are not multiples of block %lld", TSTR(c, x, b1), (long long)b);
    c->out[0].shape[1] = x->shape[1] * b * b;
    c->out[0].shape[2] = x->shape[2] / b;
    c->out[0].shape[3] = x->shape[3] / b;
  }
  return RLX_OK;
}

/* Resize: sizes of every dim (-1 keeps x's), a scale per dim, roi starts
 * and ends; dims that move must be static. */
static rlx_status infer_resize(infer_ctx* c) {
  const rlx_type* x = c->t[0];
  const rlx_node_attrs* a = c->a;
  char b1[160];
  int32_t r = x->rank;
  if (a->resize_mode < RLX_RESIZE_NEAREST || a->resize_mode > RLX_RESIZE_CUBIC)
    return FAIL(c, "mode %d is not nearest, linear or cubic", (int)a->resize_mode);
  if (a->coord_mode < RLX_COORD_HALF_PIXEL || a->coord_mode > RLX_COORD_TF_CROP_AND_RESIZE)
    return FAIL(c, "coordinate transform %d is unknown", (int)a->coord_mode);
  if (a->nearest_mode < RLX_NEAREST_ROUND_PREFER_FLOOR || a->nearest_mode > RLX_NEAREST_CEIL)
    return FAIL(c, "nearest mode %d is unknown", (int)a->nearest_mode);
  if (a->resize_mode != RLX_RESIZE_NEAREST && !rlx_dtype_is_float(x->dtype))
    return FAIL(c, "linear / cubic resize of x %s needs a float dtype", TSTR(c, x, b1));
  if (a->sizes.n != r || a->scales.n != r || a->roi.n != 2 * r)
    return FAIL(c, "x %s needs %d sizes, %d scales and %d roi entries (got %d, %d, %d)",
                TSTR(c, x, b1), (int)r, (int)r, (int)(2 * r), (int)a->sizes.n,
                (int)a->scales.n, (int)a->roi.n);
  c->out[0] = *x;
  int32_t moving = 0;
  for (int32_t d = 0; d < r; d++) {
    int64_t o = a->sizes.v[d] < 0 ? x->shape[d] : a->sizes.v[d];
    float s = a->scales.v[d];
    if (!(s >= 0.0f) || !isfinite(s))
      return FAIL(c, "scale %g of dim %d is not a positive number (or 0: out / in)", (double)s, (int)d);
    if (x->shape[d] < 0) {
      if (a->sizes.v[d] >= 0 || (s != 0.0f && s != 1.0f))
        return FAIL(c, "dim %d of x %s is symbolic and resized", (int)d, TSTR(c, x, b1));
      continue;
    }
    if (o > 0 && x->shape[d] == 0) return FAIL(c, "dim %d of x %s is empty", (int)d, TSTR(c, x, b1));
    moving += rlx_resize_dim_moves(a, d, x->shape[d], o);
    c->out[0].shape[d] = o;
  }
  if (moving > RLX_RESIZE_MAX_DIMS)
    return FAIL(c, "%d dims of x %s are resized; at most %d may be", (int)moving, TSTR(c, x, b1),
                RLX_RESIZE_MAX_DIMS);
  return RLX_OK;
}

/* GridSample: x [N, C, H, W], grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo]. */
static rlx_status infer_grid_sample(infer_ctx* c) {
  const rlx_type *x = c->t[0], *grid = c->t[1];
  const rlx_node_attrs* a = c->a;
  char b1[160], b2[160];
  if (a->resize_mode < RLX_RESIZE_NEAREST || a->resize_mode > RLX_RESIZE_CUBIC)
    return FAIL(c, "mode %d is not nearest, linear or cubic", (int)a->resize_mode);
  if (a->grid_padding < RLX_GRID_ZEROS || a->grid_padding > RLX_GRID_REFLECTION)
    return FAIL(c, "padding %d is not zeros, border or reflection", (int)a->grid_padding);
  if (x->rank != 4 || grid->rank != 4 || grid->shape[3] != 2 || !rlx_dtype_is_float(x->dtype) ||
      !rlx_dtype_is_float(grid->dtype))
    return FAIL(c, "x %s must be float [N, C, H, W] and grid %s float [N, Ho, Wo, 2]",
                TSTR(c, x, b1), TSTR(c, grid, b2));
  if (x->shape[0] != grid->shape[0])
    return FAIL(c, "x %s and grid %s differ in N", TSTR(c, x, b1), TSTR(c, grid, b2));
  c->out[0] = *x;
  c->out[0].shape[2] = grid->shape[1];
  c->out[0].shape[3] = grid->shape[2];
  return RLX_OK;
}

/* RoiAlign: x [N, C, H, W], rois [R, 4], batch_indices [R] -> [R, C, h, w]. */
static rlx_status infer_roi_align(infer_ctx* c) {
  const rlx_type *x = c->t[0], *rois = c->t[1], *bi = c->t[2];
  const rlx_node_attrs* a = c->a;
  char b1[160], b2[160], b3[160];
  if (a->pool != RLX_POOL_MAX && a->pool != RLX_POOL_AVG)
    return FAIL(c, "mode %d is not max or avg", (int)a->pool);
  if (a->sizes.n != 2 || a->sizes.v[0] < 1 || a->sizes.v[1] < 1 || a->sampling_ratio < 0)
    return FAIL(c, "sizes must be [out_h >= 1, out_w >= 1] and sampling_ratio >= 0");
  if (x->rank != 4 || !rlx_dtype_is_float(x->dtype) || rois->rank != 2 || rois->shape[1] != 4 ||
      !rlx_dtype_is_float(rois->dtype) || bi->rank != 1 || !rlx_dtype_is_int(bi->dtype) ||
      bi->shape[0] != rois->shape[0])
    return FAIL(c, "x %s must be float [N, C, H, W], rois %s float [R, 4], batch_indices %s int [R]",
                TSTR(c, x, b1), TSTR(c, rois, b2), TSTR(c, bi, b3));
  c->out[0] = *x;
  c->out[0].shape[0] = rois->shape[0];
  c->out[0].shape[2] = a->sizes.v[0];
  c->out[0].shape[3] = a->sizes.v[1];
  return RLX_OK;
}

/* ------------------------------------------------------------------ dispatch */

/* Ops that only move or convert elements: the float8 storage types pass
 * through them bit-exactly. Every other op computes, and has no float8
 * arithmetic (scaled float8 matmul belongs to quantization): it refuses them
 * by name instead of computing in a format with 2-3 mantissa bits. */
static int moves_data(rlx_op op) {
  switch (op) {
    case RLX_OP_INPUT: case RLX_OP_PARAM: case RLX_OP_CONSTANT: case RLX_OP_RESHAPE:
    case RLX_OP_CAST: case RLX_OP_STOP_GRADIENT: case RLX_OP_TRANSPOSE: case RLX_OP_NARROW:
    case RLX_OP_CONCAT: case RLX_OP_EXPAND: case RLX_OP_REVERSE: case RLX_OP_GATHER:
    case RLX_OP_WHERE:
      return 1;
    default: return 0;
  }
}

static rlx_status refuse_f8_compute(infer_ctx* c) {
  char buf[160];
  if (moves_data(c->op)) return RLX_OK;
  for (int32_t i = 0; i < c->n_in; i++)
    if (c->t[i] && rlx_dtype_is_f8(c->t[i]->dtype))
      return FAIL(c, "input %d is %s: float8 is a storage type here (only cast and data "
                  "movement take it); cast to f16, bf16 or f32 first", (int)i,
                  TSTR(c, c->t[i], buf));
  return RLX_OK;
}

/* u64 order matters to max/min reductions, arg-reductions and top-k; their
 * kernels order integers as signed int64, so u64 values from 2^63 up would
 * sort wrong. Refused by name until they grow an unsigned order (binary
 * max/min/div and compares have it: base/scalar_math.h). */
static rlx_status refuse_u64_order(infer_ctx* c) {
  int ordered = c->op == RLX_OP_ARGMAX || c->op == RLX_OP_ARGMIN || c->op == RLX_OP_TOPK ||
                (c->op == RLX_OP_REDUCE &&
                 (c->a->kind == RLX_RED_MAX || c->a->kind == RLX_RED_MIN));
  if (ordered && c->n_in > 0 && c->t[0] && c->t[0]->dtype == RLX_U64)
    return FAIL(c, "not implemented for u64 (an unsigned order); cast to i64 or f64 first");
  return RLX_OK;
}

/* ------------------------------------------------------------------ training */

/* Logits [..., V] (float) and targets [...] (i32/i64) with the same leading dims. */
static rlx_status check_logits_targets(infer_ctx* c) {
  const rlx_type *x = c->t[0], *t = c->t[1];
  char b1[160], b2[160];
  RLX_RETURN_IF_ERROR(need_rank_at_least(c, 0, 1, "logits"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "logits"));
  int same = is_index_dtype(t->dtype) && t->rank == x->rank - 1;
  for (int32_t d = 0; same && d < t->rank; d++) same = t->shape[d] == x->shape[d];
  if (!same)
    return FAIL(c, "targets must be i32/i64 shaped like logits without the class axis: "
                "logits %s, targets %s", TSTR(c, x, b1), TSTR(c, t, b2));
  float ls = c->a->label_smoothing;
  if (!(ls >= 0.0f && ls <= 1.0f))
    return FAIL(c, "label_smoothing %g is outside [0, 1]", (double)ls);
  return RLX_OK;
}

static rlx_status infer_cross_entropy(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(check_logits_targets(c));
  const rlx_type* x = c->t[0];
  c->out[0].dtype = x->dtype;
  c->out[0].rank = 0;
  /* the per-position partials: loss, counted */
  rlx_type* part = &c->out[1];
  *part = *c->t[1];
  part->dtype = x->dtype == RLX_F64 ? RLX_F64 : RLX_F32;
  part->shape[part->rank++] = 2;
  return RLX_OK;
}

static rlx_status infer_cross_entropy_backward(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(check_logits_targets(c));
  const rlx_type* d = c->t[2];
  char buf[160];
  /* f32 beside f16 / bf16 logits: mixed precision keeps the loss's
   * gradient in f32 while the logits and their gradient are halves */
  int half = c->t[0]->dtype == RLX_F16 || c->t[0]->dtype == RLX_BF16;
  if (d->rank != 0 || (d->dtype != c->t[0]->dtype && !(half && d->dtype == RLX_F32)))
    return FAIL(c, "d_loss must be a scalar of the logits' dtype (%s)%s, got %s",
                rlx_dtype_name(c->t[0]->dtype), half ? " or f32" : "", TSTR(c, d, buf));
  c->out[0] = *c->t[0];
  return RLX_OK;
}

/* dy = dx.shape[:axis] + idx.shape + dx.shape[axis+1:], dx declared. */
static rlx_status infer_gather_backward(infer_ctx* c) {
  const rlx_type *dy = c->t[0], *idx = c->t[1];
  const rlx_type* dx = &c->a->type;
  char b1[160], b2[160], b3[160];
  RLX_RETURN_IF_ERROR(check_type(c, dx, "dx type"));
  RLX_RETURN_IF_ERROR(need_float(c, 0, "dy"));
  if (!is_index_dtype(idx->dtype))
    return FAIL(c, "indices must be i32 or i64, got %s", TSTR(c, idx, b1));
  if (dx->rank < 1) return FAIL(c, "dx must have rank >= 1");
  RLX_RETURN_IF_ERROR(norm_axis(c, &c->a->axis, dx->rank));
  int32_t ax = c->a->axis;
  int ok = dx->dtype == dy->dtype && dy->rank == dx->rank - 1 + idx->rank;
  for (int32_t d = 0; ok && d < dy->rank; d++) {
    rlx_dim want = d < ax ? dx->shape[d]
                   : d < ax + idx->rank ? idx->shape[d - ax] : dx->shape[d - idx->rank + 1];
    ok = dy->shape[d] == want;
  }
  if (!ok)
    return FAIL(c, "dy %s is not gather(%s, indices %s, axis %d)'s output", TSTR(c, dy, b1),
                TSTR(c, dx, b2), TSTR(c, idx, b3), (int)ax);
  c->out[0] = *dx;
  return RLX_OK;
}

/* Input i has p's shape and a float dtype (it may differ from p's: bf16
 * grads with f32 params or state). */
static rlx_status need_like_param(infer_ctx* c, int32_t i, const char* what) {
  const rlx_type *p = c->t[0], *t = c->t[i];
  char b1[160], b2[160];
  int same = rlx_dtype_is_compute_float(t->dtype) && t->rank == p->rank;
  for (int32_t d = 0; same && d < p->rank; d++) same = t->shape[d] == p->shape[d];
  if (!same)
    return FAIL(c, "%s must be a float tensor shaped like the param: param %s, %s %s", what,
                TSTR(c, p, b1), what, TSTR(c, t, b2));
  return RLX_OK;
}

static rlx_status check_update(infer_ctx* c, int32_t hyper_slot, int32_t n_opt) {
  const rlx_type* h = c->t[hyper_slot];
  char buf[160];
  if (!rlx_dtype_is_compute_float(c->t[0]->dtype))
    return FAIL(c, "param must be a float dtype, got %s", TSTR(c, c->t[0], buf));
  RLX_RETURN_IF_ERROR(need_like_param(c, 1, "grad"));
  if (h->dtype != RLX_F32 || h->rank != 1 || h->shape[0] != RLX_HYPER_COUNT)
    return FAIL(c, "hyper must be f32[%d], got %s", RLX_HYPER_COUNT, TSTR(c, h, buf));
  if (c->a->opt.n != n_opt)
    return FAIL(c, "opt holds %d constants, needs %d", (int)c->a->opt.n, (int)n_opt);
  for (int32_t i = 0; i < n_opt; i++)
    if (!isfinite(c->a->opt.v[i])) return FAIL(c, "opt constant %d is not finite", (int)i);
  return RLX_OK;
}

static rlx_status infer_sgd_update(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(check_update(c, 3, RLX_OPT_SGD_COUNT));
  float momentum = c->a->opt.v[RLX_OPT_SGD_MOMENTUM];
  if (momentum < 0.0f) return FAIL(c, "momentum %g is negative", (double)momentum);
  if (momentum != 0.0f && !c->t[2]) return FAIL(c, "momentum %g needs a momentum buffer", (double)momentum);
  /* PyTorch's rule: Nesterov needs momentum and no dampening */
  if (c->a->opt.v[RLX_OPT_SGD_NESTEROV] != 0.0f &&
      (momentum == 0.0f || c->a->opt.v[RLX_OPT_SGD_DAMPENING] != 0.0f))
    return FAIL(c, "nesterov needs momentum > 0 and dampening 0");
  if (c->t[2]) RLX_RETURN_IF_ERROR(need_like_param(c, 2, "momentum buffer"));
  c->out[0] = *c->t[0];
  if (c->t[2]) {
    c->out[1] = *c->t[2];
  } else { /* no buffer: an empty output, never read */
    c->out[1].dtype = c->t[0]->dtype;
    c->out[1].rank = 1;
    c->out[1].shape[0] = 0;
  }
  return RLX_OK;
}

static rlx_status infer_adam_update(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(check_update(c, 4, RLX_OPT_ADAM_COUNT));
  RLX_RETURN_IF_ERROR(need_like_param(c, 2, "m"));
  RLX_RETURN_IF_ERROR(need_like_param(c, 3, "v"));
  const float* o = c->a->opt.v;
  if (!(o[RLX_OPT_ADAM_BETA1] >= 0.0f && o[RLX_OPT_ADAM_BETA1] < 1.0f &&
        o[RLX_OPT_ADAM_BETA2] >= 0.0f && o[RLX_OPT_ADAM_BETA2] < 1.0f))
    return FAIL(c, "betas (%g, %g) must be in [0, 1)", (double)o[RLX_OPT_ADAM_BETA1],
                (double)o[RLX_OPT_ADAM_BETA2]);
  c->out[0] = *c->t[0];
  c->out[1] = *c->t[2];
  c->out[2] = *c->t[3];
  return RLX_OK;
}

/* ------------------------------------------------------------------ quantized matmul */

/* Input i of a DequantMatMul: present exactly when the scheme reads it,
 * with dtype ok(dtype) and shape [N, groups] (NVFP4's global: one f32). */
static rlx_status dqmm_side_input(infer_ctx* c, int32_t i, int wanted, const char* what,
                                  int (*ok)(rlx_dtype), const char* dtypes, rlx_dim N,
                                  rlx_dim groups) {
  const rlx_type* t = i < c->n_in ? c->t[i] : NULL;
  const char* scheme = rlx_quant_names[c->a->quant_scheme];
  char b1[160];
  if (!wanted && t)
    return FAIL(c, "%s takes no %s (input %d must be absent)", scheme, what, (int)i);
  if (!wanted) return RLX_OK;
  if (!t) return FAIL(c, "%s needs %s (input %d)", scheme, what, (int)i);
  if (!ok(t->dtype)) return FAIL(c, "%s %s must be %s", what, TSTR(c, t, b1), dtypes);
  if (groups == 0) { /* one element */
    for (int32_t d = 0; d < t->rank; d++)
      if (t->shape[d] != 1) return FAIL(c, "%s %s must have one element", what, TSTR(c, t, b1));
    return RLX_OK;
  }
  if (t->rank != 2 || t->shape[0] != N || t->shape[1] != groups)
    return FAIL(c, "%s %s must be [%lld, %lld] (N, K / group)", what, TSTR(c, t, b1),
                (long long)N, (long long)groups);
  return RLX_OK;
}

static int dq_is_half_or_f32(rlx_dtype d) { return d == RLX_F32 || d == RLX_F16 || d == RLX_BF16; }
static int dq_is_u8(rlx_dtype d) { return d == RLX_U8; }
static int dq_is_f32(rlx_dtype d) { return d == RLX_F32; }

/* K of a DequantMatMul: x's last dim, or (the transposed role) the one
 * w's row bytes hold; w's row bytes must be what K takes. */
static rlx_status dqmm_k(infer_ctx* c, const rlx_type* x, const rlx_type* w, rlx_dim* K) {
  const rlx_node_attrs* a = c->a;
  char b1[160], msg[160];
  int64_t rb = 0, gb = rlx_quant_group_bytes(a->quant_scheme, a->block);
  if (rlx_quant_check(a->quant_scheme, a->block, a->block, NULL, msg, sizeof msg))
    return FAIL(c, "%s", msg);
  *K = a->transpose_b ? x->shape[x->rank - 1] : w->shape[1] / gb * a->block;
  if (rlx_quant_check(a->quant_scheme, *K, a->block, &rb, msg, sizeof msg))
    return FAIL(c, "%s", msg);
  if (rb != w->shape[1])
    return FAIL(c, "w %s has %lld bytes per row; %s with K = %lld needs %lld", TSTR(c, w, b1),
                (long long)w->shape[1], rlx_quant_names[a->quant_scheme], (long long)*K,
                (long long)rb);
  return RLX_OK;
}

/* DequantMatMul (rlx.h, ops.def): y = x . W^T, or x . W in the gradient's
 * role (transpose_b = 0). */
static rlx_status infer_dequant_matmul(infer_ctx* c) {
  const rlx_type *x = c->t[0], *w = c->t[1];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160];
  norm_flag(&a->transpose_b);
  if (a->quant_scheme < 0 || a->quant_scheme >= RLX_QUANT_COUNT)
    return FAIL(c, "scheme %d is not a quantization scheme", (int)a->quant_scheme);
  a->block = rlx_quant_group(a->quant_scheme, a->block);
  if (x->rank < 1 || x->shape[x->rank - 1] < 0 ||
      !(dq_is_half_or_f32(x->dtype) || x->dtype == RLX_F64))
    return FAIL(c, "x %s must be f32, f16, bf16 or f64 with a static last dim", TSTR(c, x, b1));
  if (w->dtype != RLX_U8 || w->rank != 2 || w->shape[0] < 1 || w->shape[1] < 1)
    return FAIL(c, "w %s must be u8 [N, row_bytes] with static dims (raw quantized rows)",
                TSTR(c, w, b1));
  rlx_dim K = 0, N = w->shape[0];
  RLX_RETURN_IF_ERROR(dqmm_k(c, x, w, &K));
  if (!a->transpose_b && x->shape[x->rank - 1] != N)
    return FAIL(c, "x %s must end in N = %lld (w %s) in the transposed role", TSTR(c, x, b1),
                (long long)N, TSTR(c, w, b2));
  int32_t in = rlx_quant_table[a->quant_scheme].inputs;
  int fp4 = in == RLX_QI_SCALE_GLOBAL;
  RLX_RETURN_IF_ERROR(dqmm_side_input(c, 2, in != RLX_QI_NONE, "scale",
                                      fp4 ? dq_is_u8 : dq_is_half_or_f32,
                                      fp4 ? "u8 (E4M3 codes)" : "f32, f16 or bf16", N,
                                      K / a->block));
  RLX_RETURN_IF_ERROR(dqmm_side_input(c, 3, in == RLX_QI_SCALE_ZERO || fp4,
                                      fp4 ? "a global scale" : "zero points",
                                      fp4 ? dq_is_f32 : dq_is_u8, fp4 ? "f32" : "u8", N,
                                      fp4 ? 0 : K / a->block));
  c->out[0] = *x;
  c->out[0].shape[x->rank - 1] = a->transpose_b ? N : K;
  return RLX_OK;
}

/* ------------------------------------------------------------------ grouped matmul (MoE) */

/* idx of a GroupedMatMul: i32 / i64 shaped like x's leading dims, or those
 * dims plus one (k experts per row of x). */
static rlx_status gmm_idx(infer_ctx* c, const rlx_type* x, const rlx_type* idx) {
  char b1[160], b2[160];
  int32_t lead = x->rank - 1;
  int ok = is_index_dtype(idx->dtype) && (idx->rank == lead || idx->rank == lead + 1);
  for (int32_t d = 0; ok && d < lead; d++) ok = idx->shape[d] == x->shape[d];
  if (!ok)
    return FAIL(c, "idx %s must be i32 / i64 shaped like x %s without its last dim (or with "
                "one more dim: k experts per row)", TSTR(c, idx, b1), TSTR(c, x, b2));
  if (idx->rank + 1 > RLX_MAX_RANK) return FAIL(c, "idx %s has too many dims", TSTR(c, idx, b1));
  return RLX_OK;
}

/* GroupedMatMul (ops.def): w [E, N, K] (transpose_b) or [E, K, N]. */
static rlx_status infer_grouped_matmul(infer_ctx* c) {
  const rlx_type *x = c->t[0], *w = c->t[1], *idx = c->t[2];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160];
  norm_flag(&a->transpose_b);
  if (x->rank < 1 || !rlx_dtype_is_float(x->dtype))
    return FAIL(c, "x %s must be a float tensor of rank >= 1", TSTR(c, x, b1));
  if (w->rank != 3 || w->dtype != x->dtype)
    return FAIL(c, "w %s must be [E, %s] of x's dtype (x %s)", TSTR(c, w, b1),
                a->transpose_b ? "N, K" : "K, N", TSTR(c, x, b2));
  rlx_dim K = a->transpose_b ? w->shape[2] : w->shape[1];
  if (x->shape[x->rank - 1] != K)
    return FAIL(c, "x %s must end in K, the contracted dim of w %s", TSTR(c, x, b1),
                TSTR(c, w, b2));
  RLX_RETURN_IF_ERROR(gmm_idx(c, x, idx));
  rlx_type* o = &c->out[0];
  *o = *idx;
  o->dtype = x->dtype;
  o->shape[o->rank++] = a->transpose_b ? w->shape[1] : w->shape[2];
  return RLX_OK;
}

/* Input i (scale / aux) of a DequantGroupedMatMul: as DequantMatMul's,
 * with the expert dim first ([E, N, groups]; NVFP4's global: one f32). */
static rlx_status dgmm_side_input(infer_ctx* c, int32_t i, int wanted, const char* what,
                                  int (*ok)(rlx_dtype), const char* dtypes, const rlx_type* w,
                                  rlx_dim groups) {
  const rlx_type* t = i < c->n_in ? c->t[i] : NULL;
  const char* scheme = rlx_quant_names[c->a->quant_scheme];
  char b1[160];
  if (!wanted && t)
    return FAIL(c, "%s takes no %s (input %d must be absent)", scheme, what, (int)i);
  if (!wanted) return RLX_OK;
  if (!t) return FAIL(c, "%s needs %s (input %d)", scheme, what, (int)i);
  if (!ok(t->dtype)) return FAIL(c, "%s %s must be %s", what, TSTR(c, t, b1), dtypes);
  if (groups == 0) {
    for (int32_t d = 0; d < t->rank; d++)
      if (t->shape[d] != 1) return FAIL(c, "%s %s must have one element", what, TSTR(c, t, b1));
    return RLX_OK;
  }
  if (t->rank != 3 || t->shape[0] != w->shape[0] || t->shape[1] != w->shape[1] ||
      t->shape[2] != groups)
    return FAIL(c, "%s %s must be [%lld, %lld, %lld] (E, rows, row elements / group)", what,
                TSTR(c, t, b1), (long long)w->shape[0], (long long)w->shape[1],
                (long long)groups);
  return RLX_OK;
}

/* DequantGroupedMatMul (ops.def): w u8 [E, rows, row_bytes], each row
 * quantized along K (transpose_b = 1: rows = N) or, in the gradient's
 * role, along the output dim (rows = the contracted dim). */
static rlx_status infer_dequant_grouped_matmul(infer_ctx* c) {
  const rlx_type *x = c->t[0], *w = c->t[1], *idx = c->t[2];
  rlx_node_attrs* a = c->a;
  char b1[160], b2[160], msg[160];
  norm_flag(&a->transpose_b);
  if (a->quant_scheme < 0 || a->quant_scheme >= RLX_QUANT_COUNT)
    return FAIL(c, "scheme %d is not a quantization scheme", (int)a->quant_scheme);
  a->block = rlx_quant_group(a->quant_scheme, a->block);
  if (x->rank < 1 || x->shape[x->rank - 1] < 0 ||
      !(dq_is_half_or_f32(x->dtype) || x->dtype == RLX_F64))
    return FAIL(c, "x %s must be f32, f16, bf16 or f64 with a static last dim", TSTR(c, x, b1));
  if (w->dtype != RLX_U8 || w->rank != 3 || w->shape[0] < 1 || w->shape[1] < 1 ||
      w->shape[2] < 1)
    return FAIL(c, "w %s must be u8 [E, rows, row_bytes] with static dims (raw quantized rows)",
                TSTR(c, w, b1));
  if (rlx_quant_check(a->quant_scheme, a->block, a->block, NULL, msg, sizeof msg))
    return FAIL(c, "%s", msg);
  int64_t gb = rlx_quant_group_bytes(a->quant_scheme, a->block), rb = 0;
  /* elements per stored row: K (transpose_b) or the output dim */
  rlx_dim row_elems = a->transpose_b ? x->shape[x->rank - 1] : w->shape[2] / gb * a->block;
  if (rlx_quant_check(a->quant_scheme, row_elems, a->block, &rb, msg, sizeof msg))
    return FAIL(c, "%s", msg);
  if (rb != w->shape[2])
    return FAIL(c, "w %s has %lld bytes per row; %s with %lld elements needs %lld",
                TSTR(c, w, b1), (long long)w->shape[2], rlx_quant_names[a->quant_scheme],
                (long long)row_elems, (long long)rb);
  if (!a->transpose_b && x->shape[x->rank - 1] != w->shape[1])
    return FAIL(c, "x %s must end in %lld (w %s) in the transposed role", TSTR(c, x, b1),
                (long long)w->shape[1], TSTR(c, w, b2));
  RLX_RETURN_IF_ERROR(gmm_idx(c, x, idx));
  int32_t in = rlx_quant_table[a->quant_scheme].inputs;
  int fp4 = in == RLX_QI_SCALE_GLOBAL;
  rlx_dim groups = row_elems / a->block;
  RLX_RETURN_IF_ERROR(dgmm_side_input(c, 3, in != RLX_QI_NONE, "scale",
                                      fp4 ? dq_is_u8 : dq_is_half_or_f32,
                                      fp4 ? "u8 (E4M3 codes)" : "f32, f16 or bf16", w, groups));
  RLX_RETURN_IF_ERROR(dgmm_side_input(c, 4, in == RLX_QI_SCALE_ZERO || fp4,
                                      fp4 ? "a global scale" : "zero points",
                                      fp4 ? dq_is_f32 : dq_is_u8, fp4 ? "f32" : "u8", w,
                                      fp4 ? 0 : groups));
  rlx_type* o = &c->out[0];
  *o = *idx;
  o->dtype = x->dtype;
  o->shape[o->rank++] = a->transpose_b ? w->shape[1] : row_elems;
  return RLX_OK;
}

/* The declared type of an output whose body is built later (ops.def). */
static rlx_status infer_deferred(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(check_type(c, &c->a->type, "type"));
  if (!c->a->name || !c->a->name[0]) return FAIL(c, "needs a non-empty name");
  c->out[0] = c->a->type;
  return RLX_OK;
}

static rlx_status infer_op(infer_ctx* c) {
  RLX_RETURN_IF_ERROR(refuse_f8_compute(c));
  RLX_RETURN_IF_ERROR(refuse_u64_order(c));
  switch (c->op) {
    case RLX_OP_INPUT: case RLX_OP_PARAM: case RLX_OP_CONSTANT: return infer_leaf(c);
    case RLX_OP_RESHAPE: return infer_reshape(c);
    case RLX_OP_CAST: return infer_cast(c);
    case RLX_OP_STOP_GRADIENT: c->out[0] = *c->t[0]; return RLX_OK;
    case RLX_OP_TRANSPOSE: return infer_transpose(c);
    case RLX_OP_NARROW: return infer_narrow(c);
    case RLX_OP_CONCAT: return infer_concat(c);
    case RLX_OP_EXPAND: return infer_expand(c);
    case RLX_OP_REVERSE: return infer_reverse(c);
    case RLX_OP_GATHER: return infer_gather(c);
    case RLX_OP_SCATTER_ADD: return infer_scatter_add(c);
    case RLX_OP_BINARY: return infer_binary(c);
    case RLX_OP_COMPARE: return infer_compare(c);
    case RLX_OP_WHERE: return infer_where(c);
    case RLX_OP_ACTIVATION: return infer_activation(c);
    case RLX_OP_MATMUL: case RLX_OP_FUSED_MATMUL_BIAS_ACT: return infer_matmul(c);
    case RLX_OP_REDUCE: return infer_reduce(c);
    case RLX_OP_ARGMAX: case RLX_OP_ARGMIN: return infer_arg_reduce(c);
    case RLX_OP_SOFTMAX: case RLX_OP_LOG_SOFTMAX: return infer_softmax(c);
    case RLX_OP_CUMSUM: return infer_cumsum(c);
    case RLX_OP_TOPK: return infer_topk(c);
    case RLX_OP_LAYER_NORM: return infer_layer_norm(c);
    case RLX_OP_RMS_NORM: return infer_rms_norm(c);
    case RLX_OP_FUSED_RESIDUAL_LAYER_NORM: case RLX_OP_FUSED_RESIDUAL_RMS_NORM:
      return infer_fused_residual_norm(c);
    case RLX_OP_ATTENTION: return infer_attention(c);
    case RLX_OP_ATTENTION_BACKWARD: return infer_attention_backward(c);
    case RLX_OP_ROPE: return infer_rope(c);
    case RLX_OP_SAMPLE: return infer_sample(c);
    case RLX_OP_POOL: return infer_pool(c);
    case RLX_OP_PAD: return infer_pad(c);
    case RLX_OP_DEPTH_TO_SPACE: return infer_depth_space(c, 1);
    case RLX_OP_SPACE_TO_DEPTH: return infer_depth_space(c, 0);
    case RLX_OP_DEFERRED: return infer_deferred(c);
    case RLX_OP_RESIZE: return infer_resize(c);
    case RLX_OP_GRID_SAMPLE: return infer_grid_sample(c);
    case RLX_OP_ROI_ALIGN: return infer_roi_align(c);
    case RLX_OP_CONV: return infer_conv(c, 0);
    case RLX_OP_CONV_TRANSPOSE: return infer_conv(c, 1);
    case RLX_OP_IM2COL: return infer_im2col(c);
    case RLX_OP_GROUP_NORM: case RLX_OP_CHANNEL_NORM: case RLX_OP_BATCH_NORM: case RLX_OP_LRN:
      return infer_channel_norm(c);
    case RLX_OP_LAYER_NORM_BACKWARD: return infer_layer_norm_backward(c);
    case RLX_OP_RMS_NORM_BACKWARD: return infer_rms_norm_backward(c);
    case RLX_OP_SOFTMAX_BACKWARD: case RLX_OP_LOG_SOFTMAX_BACKWARD:
      return infer_softmax_backward(c);
    case RLX_OP_ROPE_BACKWARD: return infer_rope(c);
    case RLX_OP_CUMSUM_BACKWARD: return infer_cumsum_backward(c);
    case RLX_OP_CROSS_ENTROPY: return infer_cross_entropy(c);
    case RLX_OP_CROSS_ENTROPY_BACKWARD: return infer_cross_entropy_backward(c);
    case RLX_OP_GATHER_BACKWARD: return infer_gather_backward(c);
    case RLX_OP_SGD_UPDATE: return infer_sgd_update(c);
    case RLX_OP_ADAM_UPDATE: return infer_adam_update(c);
    case RLX_OP_CONV_BACKWARD_WEIGHT: return infer_conv_backward_weight(c);
    case RLX_OP_POOL_BACKWARD: return infer_pool_backward(c);
    case RLX_OP_ELEMENTWISE_REGION: return infer_elementwise_region(c);
    case RLX_OP_DEQUANT_MATMUL: return infer_dequant_matmul(c);
    case RLX_OP_GROUPED_MATMUL: return infer_grouped_matmul(c);
    case RLX_OP_DEQUANT_GROUPED_MATMUL: return infer_dequant_grouped_matmul(c);
    case RLX_OP_COUNT: break;
  }
  return FAIL(c, "op %d has no shape rule", (int)c->op);
}

rlx_status rlx_infer_node(rlx_graph* g, rlx_op op, rlx_node_attrs* attrs, const rlx_tensor* in,
                          int32_t n_in, rlx_type* out_types) {
  if (!g || !attrs || !out_types) return RLX_INVALID_ARGUMENT;
  if ((unsigned)op >= RLX_OP_COUNT)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "op code %d is not an op", (int)op);
  infer_ctx c = {g, op, attrs, in, n_in, {0}, out_types};
  RLX_RETURN_IF_ERROR(check_inputs(&c));
  rlx_type outs[RLX_MAX_OUTPUTS];
  memset(outs, 0, sizeof outs);
  c.out = outs;
  rlx_type* declared = &attrs->type;
  if ((rlx_op_table[op].flags & OPF_DECLARED) && declared->rank >= 0 &&
      declared->rank <= RLX_MAX_RANK)
    for (int32_t d = declared->rank; d < RLX_MAX_RANK; d++) declared->shape[d] = 0;
  RLX_RETURN_IF_ERROR(infer_op(&c));
  for (int32_t i = 0; i < rlx_op_table[op].n_outputs; i++) {
    RLX_RETURN_IF_ERROR(check_size(&c, &outs[i], "output"));
    /* Unused dims stay zero so types compare and hash by value. */
    for (int32_t d = outs[i].rank; d < RLX_MAX_RANK; d++) outs[i].shape[d] = 0;
    out_types[i] = outs[i];
  }
  return RLX_OK;
}
