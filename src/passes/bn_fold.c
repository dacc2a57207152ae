/* BatchNorm folded into the preceding Conv (see bn_fold.h). */
#include "passes/bn_fold.h"

#include <stdlib.h>
#include <string.h>

typedef struct folder {
  rlx_graph* src;
  rlx_graph* dst;
  rlx_tensor* map;   /* src value -> dst value */
  int32_t* partner;  /* conv node -> its BatchNorm node, BatchNorm -> its conv; -1: none */
} folder;

static rlx_tensor mapped(const folder* f, rlx_tensor t) { return t < 0 ? RLX_NONE : f->map[t]; }

rlx_status rlx_copy_node(rlx_graph* dst, const rlx_node* n, rlx_tensor* map) {
  rlx_tensor in[RLX_MAX_INPUTS], out[RLX_MAX_OUTPUTS];
  for (int32_t i = 0; i < n->n_in; i++) in[i] = n->in[i] < 0 ? RLX_NONE : map[n->in[i]];
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(dst, n->op, &n->a, in, n->n_in, out));
  for (int32_t i = 0; i < n->n_out; i++) map[n->out[i]] = out[i];
  if (n->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(dst, out[0], n->label));
  return RLX_OK;
}

rlx_status rlx_copy_outputs(const rlx_graph* g, rlx_graph* dst, const rlx_tensor* map) {
  rlx_tensor* outs = malloc(sizeof(rlx_tensor) * (size_t)(g->n_outputs + 1));
  if (!outs) return RLX_RESOURCE_EXHAUSTED;
  for (int32_t i = 0; i < g->n_outputs; i++) outs[i] = map[g->outputs[i]];
  rlx_status s = rlx_graph_set_outputs(dst, outs, g->n_outputs);
  free(outs);
  return s;
}

/* How many node inputs and graph outputs read each value. */
int32_t* rlx_reader_counts(const rlx_graph* g) {
  int32_t* n = calloc((size_t)g->n_values + 1, sizeof *n);
  if (!n) return NULL;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t k = 0; k < g->nodes[i].n_in; k++)
      if (g->nodes[i].in[k] >= 0) n[g->nodes[i].in[k]]++;
  for (int32_t i = 0; i < g->n_outputs; i++) n[g->outputs[i]]++;
  return n;
}

/* The node producing each value (-1: none). */
int32_t* rlx_value_producers(const rlx_graph* g) {
  int32_t* p = malloc(sizeof(int32_t) * ((size_t)g->n_values + 1));
  if (!p) return NULL;
  for (int32_t v = 0; v < g->n_values; v++) p[v] = -1;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t k = 0; k < g->nodes[i].n_out; k++) p[g->nodes[i].out[k]] = i;
  return p;
}

static int foldable_conv(const rlx_node* c) {
  return c->op == RLX_OP_CONV && c->a.act == RLX_ACT_NONE &&
         c->a.conv_layout == RLX_CONV_CHANNELS_FIRST && (c->n_in < 4 || c->in[3] == RLX_NONE);
}

/* Pairs every foldable Conv -> BatchNorm in f->partner. */
static rlx_status find_pairs(folder* f, int32_t* n_pairs) {
  const rlx_graph* g = f->src;
  int32_t *readers = rlx_reader_counts(g), *producer = rlx_value_producers(g);
  if (!readers || !producer) {
    free(readers);
    free(producer);
    return RLX_RESOURCE_EXHAUSTED;
  }
  *n_pairs = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* bn = &g->nodes[i];
    if (bn->op != RLX_OP_BATCH_NORM || readers[bn->in[0]] != 1) continue;
    int32_t ci = producer[bn->in[0]];
    if (ci < 0 || !foldable_conv(&g->nodes[ci])) continue;
    f->partner[ci] = i;
    f->partner[i] = ci;
    (*n_pairs)++;
  }
  free(readers);
  free(producer);
  return RLX_OK;
}

static rlx_status binary(folder* f, rlx_binary_op op, rlx_tensor a, rlx_tensor b, rlx_tensor* out) {
  return rlx_graph_add_binary(f->dst, op, a, b, out);
}

static rlx_status scalar(folder* f, float v, rlx_dtype dt, rlx_tensor* out) {
  RLX_RETURN_IF_ERROR(rlx_graph_add_constant(f->dst, RLX_F32, NULL, 0, &v, sizeof v, out));
  return dt == RLX_F32 ? RLX_OK : rlx_graph_add_cast(f->dst, *out, dt, out);
}

/* The folded Conv for BatchNorm node bi and its conv ci. */
static rlx_status emit_folded(folder* f, int32_t ci, int32_t bi) {
  const rlx_node* conv = &f->src->nodes[ci];
  const rlx_node* bn = &f->src->nodes[bi];
  const rlx_type* wt = rlx_tensor_type(f->src, conv->in[1]);
  rlx_dtype dt = rlx_tensor_type(f->src, bn->in[3])->dtype;
  rlx_tensor gamma = mapped(f, bn->in[1]), beta = mapped(f, bn->in[2]);
  rlx_tensor mean = mapped(f, bn->in[3]), var = mapped(f, bn->in[4]), eps, scale, w, b;
  RLX_RETURN_IF_ERROR(scalar(f, bn->a.eps, dt, &eps));
  RLX_RETURN_IF_ERROR(binary(f, RLX_BIN_ADD, var, eps, &scale));
  RLX_RETURN_IF_ERROR(rlx_graph_add_activation(f->dst, RLX_ACT_RSQRT, scale, &scale));
  if (gamma != RLX_NONE) RLX_RETURN_IF_ERROR(binary(f, RLX_BIN_MUL, scale, gamma, &scale));
  /* scale [OC] as [OC, 1, ...] against w [OC, C/groups, k...] */
  rlx_dim shape[RLX_MAX_RANK];
  shape[0] = wt->shape[0];
  for (int32_t d = 1; d < wt->rank; d++) shape[d] = 1;
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(f->dst, scale, shape, wt->rank, &w));
  RLX_RETURN_IF_ERROR(binary(f, RLX_BIN_MUL, mapped(f, conv->in[1]), w, &w));
  rlx_tensor bias = conv->n_in > 2 ? mapped(f, conv->in[2]) : RLX_NONE;
  if (bias != RLX_NONE) RLX_RETURN_IF_ERROR(binary(f, RLX_BIN_SUB, bias, mean, &b));
  else RLX_RETURN_IF_ERROR(rlx_graph_add_activation(f->dst, RLX_ACT_NEG, mean, &b));
  RLX_RETURN_IF_ERROR(binary(f, RLX_BIN_MUL, b, scale, &b));
  if (beta != RLX_NONE) RLX_RETURN_IF_ERROR(binary(f, RLX_BIN_ADD, b, beta, &b));
  rlx_tensor in[4] = {mapped(f, conv->in[0]), w, b, RLX_NONE}, y;
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(f->dst, RLX_OP_CONV, &conv->a, in, 4, &y));
  f->map[bn->out[0]] = y;
  if (bn->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(f->dst, y, bn->label));
  return RLX_OK;
}

static rlx_status copy_node(folder* f, const rlx_node* n) {
  return rlx_copy_node(f->dst, n, f->map);
}

/* Builds f->dst: pairs' Conv nodes are dropped (their output has no other
 * reader) and each pair's BatchNorm, where every input is mapped, becomes
 * the folded Conv. */
static rlx_status rewrite(folder* f) {
  const rlx_graph* g = f->src;
  RLX_RETURN_IF_ERROR(rlx_graph_copy_dims(f->dst, g)); /* the same dim codes */
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (f->partner[i] < 0) RLX_RETURN_IF_ERROR(copy_node(f, n));
    else if (n->op == RLX_OP_BATCH_NORM) RLX_RETURN_IF_ERROR(emit_folded(f, f->partner[i], i));
  }
  return rlx_copy_outputs(g, f->dst, f->map);
}

rlx_status rlx_fold_batch_norm(rlx_graph* g, rlx_graph** out, int32_t* out_folded) {
  if (!g || !out) return RLX_INVALID_ARGUMENT;
  folder f = {g, NULL, NULL, NULL};
  int32_t n_pairs = 0;
  f.map = malloc(sizeof(rlx_tensor) * (size_t)(g->n_values + 1));
  f.partner = malloc(sizeof(int32_t) * (size_t)(g->n_nodes + 1));
  rlx_status s = f.map && f.partner ? RLX_OK : RLX_RESOURCE_EXHAUSTED;
  for (int32_t i = 0; s == RLX_OK && i < g->n_nodes; i++) f.partner[i] = -1;
  for (int32_t i = 0; s == RLX_OK && i < g->n_values; i++) f.map[i] = RLX_NONE;
  if (s == RLX_OK) s = find_pairs(&f, &n_pairs);
  if (s == RLX_OK) s = rlx_graph_create(&f.dst);
  if (s == RLX_OK) s = rewrite(&f);
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "batch-norm fold: %s",
             f.dst && f.dst->err.msg[0] ? f.dst->err.msg : "out of host memory");
    rlx_graph_destroy(f.dst);
  } else {
    *out = f.dst;
    if (out_folded) *out_folded = n_pairs;
  }
  free(f.map);
  free(f.partner);
  return s;
}

/* ------------------------------------------------------------------ conv epilogues */

/* The single node that reads value v (graph outputs count as readers), or
 * -1. readers[] from rlx_reader_counts. */
static int32_t only_reader(const rlx_graph* g, const int32_t* readers, rlx_tensor v) {
  if (readers[v] != 1) return -1;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t k = 0; k < g->nodes[i].n_in; k++)
      if (g->nodes[i].in[k] == v) return i;
  return -1; /* read by a graph output */
}

static int same_type(const rlx_type* a, const rlx_type* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* Follows conv node ci through an optional residual Add and an optional
 * activation that no other conv has claimed (head_of[] < 0): *add_node and
 * *tail = the Add (-1: none) and the last node absorbed, *residual = the
 * Add's other operand (RLX_NONE: none), *act = the activation kind. Returns
 * 1 when something was absorbed. */
/* What an Add may bring into node c's epilogue: a conv takes a residual
 * of its output's exact type, a matmul a bias vector [N] over its last dim. */
static int epilogue_operand_fits(const rlx_node* c, const rlx_type* other, const rlx_type* yt) {
  if (c->op != RLX_OP_MATMUL) return same_type(other, yt);
  return other->rank == 1 && other->dtype == yt->dtype && other->shape[0] >= 0 &&
         other->shape[0] == yt->shape[yt->rank - 1];
}

/* Nodes an epilogue may be fused into (kinds: RLX_EPILOGUE_* bits):
 * matmuls, and convs without an activation or residual yet. */
static int takes_epilogue(const rlx_node* c, int kinds) {
  if (c->op == RLX_OP_MATMUL) return (kinds & RLX_EPILOGUE_MATMUL) != 0;
  return (kinds & RLX_EPILOGUE_CONV) && (c->op == RLX_OP_CONV || c->op == RLX_OP_CONV_TRANSPOSE) &&
         c->a.act == RLX_ACT_NONE && (c->n_in < 4 || c->in[3] == RLX_NONE);
}

static int absorb_epilogue(const rlx_graph* g, const int32_t* readers, const int32_t* head_of,
                           int32_t ci, int32_t* add_node, int32_t* tail, rlx_tensor* residual,
                           int32_t* act, int kinds) {
  const rlx_node* c = &g->nodes[ci];
  if (!takes_epilogue(c, kinds)) return 0;
  const rlx_type* yt = rlx_tensor_type(g, c->out[0]);
  rlx_tensor cur = c->out[0];
  int32_t last = ci, r = only_reader(g, readers, cur);
  *add_node = -1;
  if (r >= 0 && head_of[r] < 0 && g->nodes[r].op == RLX_OP_BINARY && g->nodes[r].a.kind == RLX_BIN_ADD) {
    const rlx_node* add = &g->nodes[r];
    rlx_tensor other = add->in[0] == cur ? add->in[1] : add->in[0];
    if (other != cur && epilogue_operand_fits(c, rlx_tensor_type(g, other), yt) &&
        same_type(rlx_tensor_type(g, add->out[0]), yt)) {
      *residual = other;
      *add_node = r;
      last = r;
      cur = add->out[0];
      r = only_reader(g, readers, cur);
    }
  }
  if (r >= 0 && head_of[r] < 0 && g->nodes[r].op == RLX_OP_ACTIVATION &&
      same_type(rlx_tensor_type(g, g->nodes[r].out[0]), yt)) {
    *act = g->nodes[r].a.kind;
    last = r;
  }
  *tail = last;
  return last != ci;
}

/* Emits conv ci with its absorbed epilogue at the position of its tail
 * node (every operand, the residual included, exists by then). */
static rlx_status emit_fused_conv(rlx_graph* dst, const rlx_graph* g, rlx_tensor* map,
                                  int32_t ci, int32_t tail, rlx_tensor residual, int32_t act) {
  const rlx_node* c = &g->nodes[ci];
  rlx_node_attrs a = c->a;
  a.act = act;
  rlx_tensor in[4] = {RLX_NONE, RLX_NONE, RLX_NONE, RLX_NONE}, y;
  for (int32_t k = 0; k < c->n_in && k < 3; k++) in[k] = c->in[k] < 0 ? RLX_NONE : map[c->in[k]];
  rlx_tensor extra = residual == RLX_NONE ? RLX_NONE : map[residual];
  if (c->op == RLX_OP_MATMUL) { /* act(a @ b + bias): the fused matmul op */
    in[2] = extra;
    RLX_RETURN_IF_ERROR(rlx_graph_add_node(dst, RLX_OP_FUSED_MATMUL_BIAS_ACT, &a, in, 3, &y));
  } else {
    in[3] = extra;
    RLX_RETURN_IF_ERROR(rlx_graph_add_node(dst, c->op, &a, in, 4, &y));
  }
  const rlx_node* t = &g->nodes[tail];
  map[t->out[0]] = y;
  if (t->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(dst, y, t->label));
  return RLX_OK;
}

/* The rewrite: absorbed nodes are skipped, each conv is emitted at its tail. */
static rlx_status fuse_into(const rlx_graph* g, rlx_graph* dst, rlx_tensor* map,
                            const int32_t* head_of, const int32_t* tail, const rlx_tensor* res,
                            const int32_t* act) {
  RLX_RETURN_IF_ERROR(rlx_graph_copy_dims(dst, g));
  for (int32_t i = 0; i < g->n_nodes; i++) {
    int32_t h = head_of[i];
    if (h < 0) RLX_RETURN_IF_ERROR(rlx_copy_node(dst, &g->nodes[i], map));
    else if (tail[h] == i) RLX_RETURN_IF_ERROR(emit_fused_conv(dst, g, map, h, i, res[h], act[h]));
  }
  return rlx_copy_outputs(g, dst, map);
}

rlx_status rlx_fuse_conv_epilogues(rlx_graph* g, rlx_graph** out, int32_t* out_fused) {
  return rlx_fuse_epilogues(g, RLX_EPILOGUE_CONV, out, out_fused);
}

rlx_status rlx_fuse_epilogues(rlx_graph* g, int kinds, rlx_graph** out, int32_t* out_fused) {
  if (!g || !out) return RLX_INVALID_ARGUMENT;
  *out = NULL;
  size_t nn = (size_t)g->n_nodes + 1;
  int32_t* readers = rlx_reader_counts(g);
  int32_t *head_of = malloc(sizeof(int32_t) * nn), *tail = malloc(sizeof(int32_t) * nn);
  int32_t* act = malloc(sizeof(int32_t) * nn);
  rlx_tensor* res = malloc(sizeof(rlx_tensor) * nn);
  rlx_tensor* map = malloc(sizeof(rlx_tensor) * ((size_t)g->n_values + 1));
  rlx_status s = readers && head_of && tail && act && res && map ? RLX_OK : RLX_RESOURCE_EXHAUSTED;
  int32_t fused = 0;
  for (int32_t i = 0; s == RLX_OK && i < g->n_nodes; i++) head_of[i] = -1;
  for (int32_t i = 0; s == RLX_OK && i < g->n_nodes; i++) {
    res[i] = RLX_NONE;
    act[i] = RLX_ACT_NONE;
    int32_t add = -1;
    if (!absorb_epilogue(g, readers, head_of, i, &add, &tail[i], &res[i], &act[i], kinds)) continue;
    fused++;
    head_of[i] = head_of[tail[i]] = i;
    if (add >= 0) head_of[add] = i;
  }
  if (s == RLX_OK) s = rlx_graph_create(out);
  if (s == RLX_OK) s = fuse_into(g, *out, map, head_of, tail, res, act);
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "epilogue fusion: %s",
             *out && (*out)->err.msg[0] ? (*out)->err.msg : "out of host memory");
    rlx_graph_destroy(*out);
    *out = NULL;
  } else if (out_fused) {
    *out_fused = fused;
  }
  free(readers);
  free(head_of);
  free(tail);
  free(act);
  free(res);
  free(map);
  return s;
}
