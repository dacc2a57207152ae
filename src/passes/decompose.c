/* Decompose pass (see decompose.h for the rules). */
#include "passes/decompose.h"

#include <stdlib.h>
#include <string.h>

typedef struct rewriter {
  rlx_graph* src;
  rlx_graph* dst;
  rlx_tensor* map; /* src value -> dst value */
} rewriter;

static rlx_tensor mapped(const rewriter* r, rlx_tensor t) { return t < 0 ? RLX_NONE : r->map[t]; }

static rlx_status add(rewriter* r, rlx_op op, const rlx_node_attrs* a, const rlx_tensor* in,
                      int32_t n_in, rlx_tensor* out) {
  return rlx_graph_add_node(r->dst, op, a, in, n_in, out);
}

static rlx_status copy_node(rewriter* r, const rlx_node* n) {
  rlx_tensor in[RLX_MAX_INPUTS], out[RLX_MAX_OUTPUTS];
  for (int32_t i = 0; i < n->n_in; i++) in[i] = mapped(r, n->in[i]);
  RLX_RETURN_IF_ERROR(add(r, n->op, &n->a, in, n->n_in, out));
  for (int32_t i = 0; i < n->n_out; i++) r->map[n->out[i]] = out[i];
  if (n->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(r->dst, out[0], n->label));
  return RLX_OK;
}

static rlx_status add_binary(rewriter* r, rlx_binary_op op, rlx_tensor a, rlx_tensor b,
                             rlx_tensor* out) {
  rlx_node_attrs at = {0};
  at.kind = op;
  rlx_tensor in[2] = {a, b};
  return add(r, RLX_OP_BINARY, &at, in, 2, out);
}

/* act(a @ b + bias) -> MatMul, Add, Activation */
static rlx_status rule_fused_matmul(rewriter* r, const rlx_node* n) {
  rlx_node_attrs at = {0};
  at.transpose_a = n->a.transpose_a;
  at.transpose_b = n->a.transpose_b;
  rlx_tensor in[2] = {mapped(r, n->in[0]), mapped(r, n->in[1])}, y;
  RLX_RETURN_IF_ERROR(add(r, RLX_OP_MATMUL, &at, in, 2, &y));
  if (n->in[2] >= 0) RLX_RETURN_IF_ERROR(add_binary(r, RLX_BIN_ADD, y, mapped(r, n->in[2]), &y));
  if (n->a.act != RLX_ACT_NONE) {
    rlx_node_attrs aa = {0};
    aa.kind = n->a.act;
    RLX_RETURN_IF_ERROR(add(r, RLX_OP_ACTIVATION, &aa, &y, 1, &y));
  }
  r->map[n->out[0]] = y;
  return RLX_OK;
}

/* norm(x + residual [+ bias]) -> Add [, Add], LayerNorm / RmsNorm over the last dim */
static rlx_status rule_fused_residual_norm(rewriter* r, const rlx_node* n) {
  int layer = n->op == RLX_OP_FUSED_RESIDUAL_LAYER_NORM;
  rlx_tensor sum;
  RLX_RETURN_IF_ERROR(add_binary(r, RLX_BIN_ADD, mapped(r, n->in[0]), mapped(r, n->in[1]), &sum));
  if (n->in[2] >= 0) RLX_RETURN_IF_ERROR(add_binary(r, RLX_BIN_ADD, sum, mapped(r, n->in[2]), &sum));
  rlx_node_attrs at = {0};
  at.eps = n->a.eps;
  rlx_tensor norm;
  if (layer) {
    at.axis = rlx_tensor_type(r->src, n->in[0])->rank - 1;
    rlx_tensor in[3] = {sum, mapped(r, n->in[3]), mapped(r, n->in[4])};
    RLX_RETURN_IF_ERROR(add(r, RLX_OP_LAYER_NORM, &at, in, 3, &norm));
  } else {
    rlx_tensor in[2] = {sum, mapped(r, n->in[3])};
    RLX_RETURN_IF_ERROR(add(r, RLX_OP_RMS_NORM, &at, in, 2, &norm));
  }
  r->map[n->out[0]] = norm;
  r->map[n->out[1]] = sum;
  return RLX_OK;
}

/* Transpose that swaps `axis` with the last axis (its own inverse). */
static rlx_status swap_last(rewriter* r, rlx_tensor x, int32_t axis, rlx_tensor* out) {
  const rlx_type* t = rlx_tensor_type(r->dst, x);
  rlx_node_attrs at = {0};
  for (int32_t d = 0; d < t->rank; d++) at.perm[d] = d;
  at.perm[axis] = t->rank - 1;
  at.perm[t->rank - 1] = axis;
  return add(r, RLX_OP_TRANSPOSE, &at, &x, 1, out);
}

/* Row op on a non-last axis -> Transpose, op on the last axis, Transpose back.
 * ArgMax/ArgMin without keep_dim drop the axis, so they are run with
 * keep_dim and the kept size-1 dim is removed by a Reshape. */
static rlx_status rule_axis_to_last(rewriter* r, const rlx_node* n) {
  rlx_tensor x;
  int32_t axis = n->a.axis, last = rlx_tensor_type(r->src, n->in[0])->rank - 1;
  RLX_RETURN_IF_ERROR(swap_last(r, mapped(r, n->in[0]), axis, &x));
  rlx_node_attrs at = n->a;
  at.axis = last;
  int arg = n->op == RLX_OP_ARGMAX || n->op == RLX_OP_ARGMIN;
  if (arg) at.keep_dim = 1;
  rlx_tensor y[RLX_MAX_OUTPUTS];
  RLX_RETURN_IF_ERROR(add(r, n->op, &at, &x, 1, y));
  for (int32_t i = 0; i < n->n_out; i++) {
    RLX_RETURN_IF_ERROR(swap_last(r, y[i], axis, &y[i]));
    if (arg && !n->a.keep_dim) {
      rlx_node_attrs ra = {0};
      ra.type = *rlx_tensor_type(r->src, n->out[i]);
      RLX_RETURN_IF_ERROR(add(r, RLX_OP_RESHAPE, &ra, &y[i], 1, &y[i]));
    }
    r->map[n->out[i]] = y[i];
  }
  return RLX_OK;
}

static int is_row_op(rlx_op op) {
  return op == RLX_OP_SOFTMAX || op == RLX_OP_LOG_SOFTMAX || op == RLX_OP_CUMSUM ||
         op == RLX_OP_ARGMAX || op == RLX_OP_ARGMIN || op == RLX_OP_TOPK;
}

/* Applies the rule for node n if it has one; *applied says whether it did. */
static rlx_status try_rule(rewriter* r, const rlx_node* n, int* applied) {
  *applied = 1;
  switch (n->op) {
    case RLX_OP_FUSED_MATMUL_BIAS_ACT: return rule_fused_matmul(r, n);
    case RLX_OP_FUSED_RESIDUAL_LAYER_NORM:
    case RLX_OP_FUSED_RESIDUAL_RMS_NORM: return rule_fused_residual_norm(r, n);
    default: break;
  }
  if (is_row_op(n->op) && n->a.axis != rlx_tensor_type(r->src, n->in[0])->rank - 1)
    return rule_axis_to_last(r, n);
  *applied = 0;
  return RLX_OK;
}

rlx_status rlx_decompose(rlx_graph* g, rlx_supports_fn supports, rlx_graph** out,
                         int32_t* out_decomposed) {
  rewriter r = {g, NULL, NULL};
  RLX_RETURN_IF_ERROR(rlx_graph_create(&r.dst));
  rlx_status sd = rlx_graph_copy_dims(r.dst, g); /* the same table: the same dim codes */
  if (sd) { rlx_graph_destroy(r.dst); return rlx_fail(&g->err, sd, "decompose: %s", "symbol"); }
  r.map = malloc(sizeof(rlx_tensor) * (size_t)(g->n_values + 1));
  if (!r.map) {
    rlx_graph_destroy(r.dst);
    return rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  }
  rlx_status s = RLX_OK;
  for (int32_t i = 0; i < g->n_nodes && s == RLX_OK; i++) {
    const rlx_node* n = &g->nodes[i];
    int applied = 0;
    if (!supports(g, i)) s = try_rule(&r, n, &applied);
    if (s == RLX_OK && applied && out_decomposed) out_decomposed[n->op]++;
    if (s == RLX_OK && !applied) s = copy_node(&r, n);
  }
  if (s == RLX_OK) {
    rlx_tensor* outs = malloc(sizeof(rlx_tensor) * (size_t)(g->n_outputs + 1));
    if (!outs) s = RLX_RESOURCE_EXHAUSTED;
    for (int32_t i = 0; outs && i < g->n_outputs; i++) outs[i] = r.map[g->outputs[i]];
    if (outs) s = rlx_graph_set_outputs(r.dst, outs, g->n_outputs);
    free(outs);
  }
  free(r.map);
  if (s != RLX_OK) {
    rlx_fail(&g->err, s, "decompose: %s", r.dst->err.msg);
    rlx_graph_destroy(r.dst);
    return s;
  }
  *out = r.dst;
  return RLX_OK;
}
