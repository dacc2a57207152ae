/* Add -> LayerNorm / RmsNorm fused into the residual-norm ops (see
 * fuse_residual_norm.h). */
#include "passes/fuse_residual_norm.h"

#include <stdlib.h>

#include "ir/dtype.h"
#include "passes/bn_fold.h"

static int same_type(const rlx_type* a, const rlx_type* b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int32_t d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* A norm over the last dim of its first input. */
static int last_dim_norm(const rlx_graph* g, const rlx_node* n) {
  if (n->op == RLX_OP_RMS_NORM) return 1;
  if (n->op != RLX_OP_LAYER_NORM) return 0;
  int32_t rank = rlx_tensor_type(g, n->in[0])->rank;
  return n->a.axis == -1 || n->a.axis == rank - 1;
}

/* The Add feeding norm n that may fuse with it (-1: none): x + r of one
 * float type, neither operand broadcast. */
static int32_t fusable_add(const rlx_graph* g, const int32_t* producer, const rlx_node* n) {
  if (!last_dim_norm(g, n)) return -1;
  int32_t p = producer[n->in[0]];
  if (p < 0) return -1;
  const rlx_node* add = &g->nodes[p];
  if (add->op != RLX_OP_BINARY || add->a.kind != RLX_BIN_ADD) return -1;
  const rlx_type* st = rlx_tensor_type(g, add->out[0]);
  if (!rlx_dtype_is_float(st->dtype) || st->rank < 1) return -1;
  if (!same_type(rlx_tensor_type(g, add->in[0]), st) || !same_type(rlx_tensor_type(g, add->in[1]), st))
    return -1;
  return p;
}

/* Where the fused node can stand: the Add's index when the norm's other
 * inputs (gamma, beta) exist by then, else the norm's index when no node
 * between the two reads the sum; -1: neither. */
static int32_t fused_position(const rlx_graph* g, const int32_t* producer, int32_t p, int32_t ni) {
  const rlx_node* n = &g->nodes[ni];
  int early = 1;
  for (int32_t k = 1; k < n->n_in; k++)
    if (n->in[k] >= 0 && producer[n->in[k]] > p) early = 0;
  if (early) return p;
  rlx_tensor sum = g->nodes[p].out[0];
  for (int32_t i = p + 1; i < ni; i++)
    for (int32_t k = 0; k < g->nodes[i].n_in; k++)
      if (g->nodes[i].in[k] == sum) return -1;
  return ni;
}

/* The fused node for Add p and norm ni; maps both nodes' outputs. */
static rlx_status emit_fused(rlx_graph* dst, const rlx_graph* g, rlx_tensor* map, int32_t p, int32_t ni) {
  const rlx_node *add = &g->nodes[p], *n = &g->nodes[ni];
  rlx_tensor gamma = n->n_in > 1 && n->in[1] >= 0 ? map[n->in[1]] : RLX_NONE;
  rlx_tensor norm, sum;
  if (n->op == RLX_OP_LAYER_NORM) {
    rlx_tensor beta = n->n_in > 2 && n->in[2] >= 0 ? map[n->in[2]] : RLX_NONE;
    RLX_RETURN_IF_ERROR(rlx_graph_add_fused_residual_layer_norm(
        dst, map[add->in[0]], map[add->in[1]], RLX_NONE, gamma, beta, n->a.eps, &norm, &sum));
  } else {
    RLX_RETURN_IF_ERROR(rlx_graph_add_fused_residual_rms_norm(
        dst, map[add->in[0]], map[add->in[1]], RLX_NONE, gamma, n->a.eps, &norm, &sum));
  }
  map[n->out[0]] = norm;
  map[add->out[0]] = sum;
  if (n->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(dst, norm, n->label));
  if (add->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(dst, sum, add->label));
  return RLX_OK;
}

/* at[i]: the partner whose fused node is emitted at node i (-1: none);
 * gone[i]: node i is absorbed and emitted elsewhere or not at all. */
static rlx_status rewrite(const rlx_graph* g, rlx_graph* dst, rlx_tensor* map, const int32_t* at,
                          const int32_t* partner, const uint8_t* gone) {
  RLX_RETURN_IF_ERROR(rlx_graph_copy_dims(dst, g));
  for (int32_t i = 0; i < g->n_nodes; i++) {
    if (at[i] >= 0) {
      int32_t add = g->nodes[i].op == RLX_OP_BINARY ? i : partner[i];
      int32_t norm = add == i ? partner[i] : i;
      RLX_RETURN_IF_ERROR(emit_fused(dst, g, map, add, norm));
    } else if (!gone[i]) {
      RLX_RETURN_IF_ERROR(rlx_copy_node(dst, &g->nodes[i], map));
    }
  }
  return rlx_copy_outputs(g, dst, map);
}

rlx_status rlx_fuse_residual_norms(rlx_graph* g, rlx_graph** out, int32_t* out_fused) {
  if (!g || !out) return RLX_INVALID_ARGUMENT;
  *out = NULL;
  size_t nn = (size_t)g->n_nodes + 1;
  int32_t* producer = rlx_value_producers(g);
  int32_t *at = malloc(sizeof(int32_t) * nn), *partner = malloc(sizeof(int32_t) * nn);
  uint8_t* gone = calloc(nn, 1);
  rlx_tensor* map = malloc(sizeof(rlx_tensor) * ((size_t)g->n_values + 1));
  rlx_status s = producer && at && partner && gone && map ? RLX_OK : RLX_RESOURCE_EXHAUSTED;
  int32_t fused = 0;
  for (int32_t i = 0; s == RLX_OK && i < g->n_nodes; i++) at[i] = partner[i] = -1;
  for (int32_t i = 0; s == RLX_OK && i < g->n_nodes; i++) {
    int32_t p = fusable_add(g, producer, &g->nodes[i]);
    if (p < 0 || partner[p] >= 0) continue; /* an Add feeds one fused norm */
    int32_t pos = fused_position(g, producer, p, i);
    if (pos < 0) continue;
    partner[p] = i;
    partner[i] = p;
    gone[p] = gone[i] = 1;
    at[pos] = 1;
    fused++;
  }
  if (s == RLX_OK) s = rlx_graph_create(out);
  if (s == RLX_OK) s = rewrite(g, *out, map, at, partner, gone);
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "residual-norm fusion: %s",
             *out && (*out)->err.msg[0] ? (*out)->err.msg : "out of host memory");
    rlx_graph_destroy(*out);
    *out = NULL;
  } else if (out_fused) {
    *out_fused = fused;
  }
  free(producer);
  free(at);
  free(partner);
  free(gone);
  free(map);
  return s;
}
