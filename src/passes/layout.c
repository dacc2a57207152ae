/* Channels-last layout pass (see layout.h). */
#include "passes/layout.h"

#include <stdlib.h>
#include <string.h>

#include "passes/bn_fold.h"

typedef struct layouter {
  const rlx_graph* src;
  rlx_graph* dst;
  rlx_tensor* first; /* src value -> dst value in the src layout (RLX_NONE: not made yet) */
  rlx_tensor* last;  /* src value -> dst value channels-last (RLX_NONE: none) */
  rlx_tensor* ohwi;  /* src weight -> its [OC, k..., C/g] transpose (RLX_NONE: none) */
  int32_t transposes;
} layouter;

static const rlx_type* src_type(const layouter* L, rlx_tensor v) {
  return rlx_tensor_type(L->src, v);
}

/* Channels-first <-> channels-last of a rank-r value, as a Transpose or,
 * where the moved axes hold a single run of bytes (spatial dims all 1 or one
 * channel), as a Reshape to the permuted shape. */
static rlx_status relayout(layouter* L, rlx_tensor x, int to_last, rlx_tensor* out) {
  const rlx_type* t = rlx_tensor_type(L->dst, x);
  int32_t r = t->rank, perm[RLX_MAX_RANK];
  perm[0] = 0;
  for (int32_t d = 1; d < r; d++) /* [N, C, sp...] <-> [N, sp..., C] */
    perm[d] = to_last ? (d == r - 1 ? 1 : d + 1) : (d == 1 ? r - 1 : d - 1);
  int one_run = 1;
  int32_t ch = to_last ? 1 : r - 1;
  for (int32_t d = 1; d < r; d++)
    if (d != ch && t->shape[d] != 1) one_run = 0;
  if (t->shape[ch] == 1) one_run = 1;
  if (one_run) {
    rlx_dim shape[RLX_MAX_RANK];
    for (int32_t d = 0; d < r; d++) shape[d] = t->shape[perm[d]];
    return rlx_graph_add_reshape(L->dst, x, shape, r, out);
  }
  L->transposes++;
  return rlx_graph_add_transpose(L->dst, x, perm, r, out);
}

/* Labels the dst value made for src value v with its producer's label. */
static rlx_status label_like(layouter* L, rlx_tensor v, rlx_tensor made) {
  const rlx_node* n = &L->src->nodes[L->src->values[v].node];
  return n->label && n->out[0] == v ? rlx_graph_set_name(L->dst, made, n->label) : RLX_OK;
}

/* v in its source layout (made from the channels-last version once). */
static rlx_status as_first(layouter* L, rlx_tensor v, rlx_tensor* out) {
  if (v < 0) { *out = RLX_NONE; return RLX_OK; }
  if (L->first[v] == RLX_NONE) {
    RLX_RETURN_IF_ERROR(relayout(L, L->last[v], 0, &L->first[v]));
    RLX_RETURN_IF_ERROR(label_like(L, v, L->first[v]));
  }
  *out = L->first[v];
  return RLX_OK;
}

/* v channels-last (made from the source layout once). */
static rlx_status as_last(layouter* L, rlx_tensor v, rlx_tensor* out) {
  if (L->last[v] == RLX_NONE) RLX_RETURN_IF_ERROR(relayout(L, L->first[v], 1, &L->last[v]));
  *out = L->last[v];
  return RLX_OK;
}

static int same_shape(const rlx_type* a, const rlx_type* b) {
  if (a->rank != b->rank) return 0;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* Every node not rewritten: copied with its inputs in the source layout. */
static rlx_status copy_first(layouter* L, const rlx_node* n) {
  rlx_tensor in[RLX_MAX_INPUTS], out[RLX_MAX_OUTPUTS];
  for (int32_t i = 0; i < n->n_in; i++) RLX_RETURN_IF_ERROR(as_first(L, n->in[i], &in[i]));
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(L->dst, n->op, &n->a, in, n->n_in, out));
  for (int32_t i = 0; i < n->n_out; i++) L->first[n->out[i]] = out[i];
  if (n->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(L->dst, out[0], n->label));
  return RLX_OK;
}

/* Emits n with attributes a and dst inputs in[]; its output is carried. */
static rlx_status emit_last(layouter* L, const rlx_node* n, const rlx_node_attrs* a,
                            const rlx_tensor* in, int32_t n_in) {
  rlx_tensor y;
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(L->dst, n->op, a, in, n_in, &y));
  L->last[n->out[0]] = y;
  return n->label ? rlx_graph_set_name(L->dst, y, n->label) : RLX_OK;
}

/* Conv w [OC, C/g, k...] -> [OC, k..., C/g], once per weight. */
static rlx_status weight_ohwi(layouter* L, rlx_tensor w, rlx_tensor* out) {
  if (L->ohwi[w] == RLX_NONE) {
    rlx_tensor wf;
    RLX_RETURN_IF_ERROR(as_first(L, w, &wf));
    int32_t r = src_type(L, w)->rank, perm[RLX_MAX_RANK];
    perm[0] = 0;
    for (int32_t d = 1; d < r; d++) perm[d] = d == r - 1 ? 1 : d + 1;
    RLX_RETURN_IF_ERROR(rlx_graph_add_transpose(L->dst, wf, perm, r, &L->ohwi[w]));
  }
  *out = L->ohwi[w];
  return RLX_OK;
}

static rlx_status conv_last(layouter* L, const rlx_node* n) {
  rlx_node_attrs a = n->a;
  rlx_tensor in[4] = {RLX_NONE, RLX_NONE, RLX_NONE, RLX_NONE};
  RLX_RETURN_IF_ERROR(as_last(L, n->in[0], &in[0]));
  if (n->op == RLX_OP_CONV) {
    a.conv_layout = RLX_CONV_CHANNELS_LAST_OHWI;
    RLX_RETURN_IF_ERROR(weight_ohwi(L, n->in[1], &in[1]));
  } else {
    a.conv_layout = RLX_CONV_CHANNELS_LAST;
    RLX_RETURN_IF_ERROR(as_first(L, n->in[1], &in[1]));
  }
  if (n->n_in > 2) RLX_RETURN_IF_ERROR(as_first(L, n->in[2], &in[2]));
  if (n->n_in > 3 && n->in[3] >= 0) RLX_RETURN_IF_ERROR(as_last(L, n->in[3], &in[3]));
  return emit_last(L, n, &a, in, n->n_in);
}

/* Whether o (rank <= r, right-aligned against [N, C, spatial...]) varies at
 * most along the channels: then *c = its channel count (C or 1). */
static int per_channel(const rlx_type* o, int32_t r, rlx_dim C, rlx_dim* c) {
  if (o->rank > r) return 0;
  *c = 1;
  for (int32_t j = 0; j < o->rank; j++) {
    int32_t axis = r - o->rank + j;
    rlx_dim s = o->shape[j];
    if (axis == 1 && (s == C || s == 1)) *c = s;
    else if (s != 1) return 0;
  }
  return 1;
}

/* The other operand of a carried Binary, channels-last (*ok = 0 when it
 * cannot be): a carried value or one of the same rank as it is (a Transpose,
 * or a Reshape where that is the same bytes), a per-channel one reshaped. */
static rlx_status other_last(layouter* L, rlx_tensor o, const rlx_type* y, int* ok,
                             rlx_tensor* out) {
  const rlx_type* t = src_type(L, o);
  rlx_dim c;
  *ok = 1;
  /* the same rank: permuted like the carried operand, it broadcasts alike */
  if (L->last[o] != RLX_NONE || t->rank == y->rank) return as_last(L, o, out);
  if (!per_channel(t, y->rank, y->shape[1], &c)) {
    *ok = 0;
    return RLX_OK;
  }
  RLX_RETURN_IF_ERROR(as_first(L, o, out));
  if (c == 1) return RLX_OK; /* one element: broadcasts the same in any layout */
  rlx_dim shape[RLX_MAX_RANK];
  for (int32_t d = 0; d < y->rank; d++) shape[d] = d == y->rank - 1 ? c : 1;
  return rlx_graph_add_reshape(L->dst, *out, shape, y->rank, out);
}

/* Binary with a carried operand shaped like the output: stays carried when
 * the other operand can be given channels-last (*done). */
static rlx_status binary_last(layouter* L, const rlx_node* n, int* done) {
  const rlx_type* y = src_type(L, n->out[0]);
  *done = 0;
  int32_t k = -1;
  for (int32_t i = 0; i < 2 && k < 0; i++)
    if (L->last[n->in[i]] != RLX_NONE && same_shape(src_type(L, n->in[i]), y)) k = i;
  if (k < 0 || y->rank < 3) return RLX_OK;
  rlx_tensor in[2];
  int ok = 0;
  RLX_RETURN_IF_ERROR(other_last(L, n->in[1 - k], y, &ok, &in[1 - k]));
  if (!ok) return RLX_OK;
  in[k] = L->last[n->in[k]];
  *done = 1;
  return emit_last(L, n, &n->a, in, 2);
}

/* Reduce over exactly the spatial axes of a carried value. */
static rlx_status reduce_last(layouter* L, const rlx_node* n, int* done) {
  int32_t r = src_type(L, n->in[0])->rank;
  uint32_t spatial = ((1u << r) - 1) & ~3u;
  *done = n->a.axes == spatial;
  if (!*done) return RLX_OK;
  rlx_node_attrs a = n->a;
  a.axes = spatial >> 1; /* axes 1 .. r-2 */
  if (n->a.keep_dim) return emit_last(L, n, &a, &L->last[n->in[0]], 1);
  /* [N, C] either way: the output is in the source layout */
  rlx_tensor* y = &L->first[n->out[0]];
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(L->dst, n->op, &a, &L->last[n->in[0]], 1, y));
  return n->label ? rlx_graph_set_name(L->dst, *y, n->label) : RLX_OK;
}

static int is_first_conv(const rlx_node* n) {
  return (n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_TRANSPOSE) &&
         n->a.conv_layout == RLX_CONV_CHANNELS_FIRST;
}

/* The rewrite of one node: carried where its kind allows, else copied. */
static rlx_status rewrite_node(layouter* L, const rlx_node* n) {
  if (is_first_conv(n)) return conv_last(L, n);
  int carried = n->n_in > 0 && n->in[0] >= 0 && L->last[n->in[0]] != RLX_NONE, done = 0;
  switch (n->op) {
    case RLX_OP_ACTIVATION:
      if (carried) return emit_last(L, n, &n->a, &L->last[n->in[0]], 1);
      break;
    case RLX_OP_BINARY:
      RLX_RETURN_IF_ERROR(binary_last(L, n, &done));
      break;
    case RLX_OP_POOL:
      if (carried && n->a.pool != RLX_POOL_ARGMAX && n->a.conv_layout == RLX_CONV_CHANNELS_FIRST) {
        rlx_node_attrs a = n->a;
        a.conv_layout = RLX_CONV_CHANNELS_LAST;
        return emit_last(L, n, &a, &L->last[n->in[0]], 1);
      }
      break;
    case RLX_OP_REDUCE:
      if (carried) RLX_RETURN_IF_ERROR(reduce_last(L, n, &done));
      break;
    default: break;
  }
  return done ? RLX_OK : copy_first(L, n);
}

static rlx_status rewrite(layouter* L) {
  const rlx_graph* g = L->src;
  RLX_RETURN_IF_ERROR(rlx_graph_copy_dims(L->dst, g)); /* the same dim codes */
  for (int32_t i = 0; i < g->n_nodes; i++) RLX_RETURN_IF_ERROR(rewrite_node(L, &g->nodes[i]));
  for (int32_t i = 0; i < g->n_outputs; i++) { /* outputs keep their layout */
    rlx_tensor v;
    RLX_RETURN_IF_ERROR(as_first(L, g->outputs[i], &v));
  }
  return rlx_copy_outputs(g, L->dst, L->first);
}

rlx_status rlx_layout_channels_last(rlx_graph* g, rlx_graph** out, int32_t* out_transposes) {
  if (!g || !out) return RLX_INVALID_ARGUMENT;
  *out = NULL;
  layouter L = {g, NULL, NULL, NULL, NULL, 0};
  size_t nv = (size_t)g->n_values + 1;
  L.first = malloc(sizeof(rlx_tensor) * nv);
  L.last = malloc(sizeof(rlx_tensor) * nv);
  L.ohwi = malloc(sizeof(rlx_tensor) * nv);
  rlx_status s = L.first && L.last && L.ohwi ? RLX_OK : RLX_RESOURCE_EXHAUSTED;
  for (int32_t v = 0; s == RLX_OK && v < g->n_values; v++)
    L.first[v] = L.last[v] = L.ohwi[v] = RLX_NONE;
  if (s == RLX_OK) s = rlx_graph_create(&L.dst);
  if (s == RLX_OK) s = rewrite(&L);
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "channels-last layout: %s",
             L.dst && L.dst->err.msg[0] ? L.dst->err.msg : "out of host memory");
    rlx_graph_destroy(L.dst);
  } else {
    *out = L.dst;
    if (out_transposes) *out_transposes = L.transposes;
  }
  free(L.first);
  free(L.last);
  free(L.ohwi);
  return s;
}
