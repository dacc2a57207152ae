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

/* How many node inputs and graph outputs read each value. */
static int32_t* reader_counts(const rlx_graph* g) {
  int32_t* n = calloc((size_t)g->n_values + 1, sizeof *n);
  if (!n) return NULL;
  for (int32_t i = 0; i < g->n_nodes; i++)
    for (int32_t k = 0; k < g->nodes[i].n_in; k++)
      if (g->nodes[i].in[k] >= 0) n[g->nodes[i].in[k]]++;
  for (int32_t i = 0; i < g->n_outputs; i++) n[g->outputs[i]]++;
  return n;
}

/* The node producing each value (-1: none). */
static int32_t* producers(const rlx_graph* g) {
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
  int32_t *readers = reader_counts(g), *producer = producers(g);
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
  rlx_tensor in[RLX_MAX_INPUTS], out[RLX_MAX_OUTPUTS];
  for (int32_t i = 0; i < n->n_in; i++) in[i] = mapped(f, n->in[i]);
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(f->dst, n->op, &n->a, in, n->n_in, out));
  for (int32_t i = 0; i < n->n_out; i++) f->map[n->out[i]] = out[i];
  if (n->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(f->dst, out[0], n->label));
  return RLX_OK;
}

/* Builds f->dst: pairs' Conv nodes are dropped (their output has no other
 * reader) and each pair's BatchNorm, where every input is mapped, becomes
 * the folded Conv. */
static rlx_status rewrite(folder* f) {
  const rlx_graph* g = f->src;
  for (int32_t i = 0; i < g->n_symbols; i++) {
    rlx_dim d;
    RLX_RETURN_IF_ERROR(rlx_graph_symbol(f->dst, g->symbols[i], &d));
  }
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (f->partner[i] < 0) RLX_RETURN_IF_ERROR(copy_node(f, n));
    else if (n->op == RLX_OP_BATCH_NORM) RLX_RETURN_IF_ERROR(emit_folded(f, f->partner[i], i));
  }
  rlx_tensor* outs = malloc(sizeof(rlx_tensor) * (size_t)(g->n_outputs + 1));
  if (!outs) return RLX_RESOURCE_EXHAUSTED;
  for (int32_t i = 0; i < g->n_outputs; i++) outs[i] = f->map[g->outputs[i]];
  rlx_status s = rlx_graph_set_outputs(f->dst, outs, g->n_outputs);
  free(outs);
  return s;
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
