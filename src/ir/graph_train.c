/* Builders of the training ops (include/rlx.h, "training (Tier 2)"):
 * losses, the embedding (Gather) backward and the optimizer updates. Shape
 * rules are in shape.c; MSE is a composition and has no op of its own. */
#include <string.h>

#include "ir/graph.h"

/* Adds node op and hands out its first n outputs (NULL pointers skipped). */
static rlx_status add_outputs(rlx_graph* g, rlx_op op, const rlx_node_attrs* a,
                              const rlx_tensor* in, int32_t n_in, rlx_tensor** outs, int32_t n) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_tensor got[RLX_MAX_OUTPUTS] = {RLX_NONE, RLX_NONE, RLX_NONE};
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(g, op, a, in, n_in, got));
  for (int32_t i = 0; i < n; i++)
    if (outs[i]) *outs[i] = got[i];
  return RLX_OK;
}

static rlx_status ce_attrs(rlx_graph* g, int64_t ignore_index, float ls, rlx_node_attrs* a) {
  if (!g) return RLX_INVALID_ARGUMENT;
  memset(a, 0, sizeof *a);
  a->ignore_index = ignore_index;
  a->label_smoothing = ls;
  return RLX_OK;
}

rlx_status rlx_graph_add_cross_entropy(rlx_graph* g, rlx_tensor logits, rlx_tensor targets,
                                       int64_t ignore_index, float label_smoothing,
                                       rlx_tensor* out) {
  rlx_node_attrs a;
  RLX_RETURN_IF_ERROR(ce_attrs(g, ignore_index, label_smoothing, &a));
  rlx_tensor in[2] = {logits, targets};
  rlx_tensor* outs[1] = {out};
  return add_outputs(g, RLX_OP_CROSS_ENTROPY, &a, in, 2, outs, 1);
}

rlx_status rlx_graph_add_cross_entropy_backward(rlx_graph* g, rlx_tensor logits,
                                                rlx_tensor targets, rlx_tensor d_loss,
                                                int64_t ignore_index, float label_smoothing,
                                                rlx_tensor* out) {
  rlx_node_attrs a;
  RLX_RETURN_IF_ERROR(ce_attrs(g, ignore_index, label_smoothing, &a));
  rlx_tensor in[3] = {logits, targets, d_loss};
  rlx_tensor* outs[1] = {out};
  return add_outputs(g, RLX_OP_CROSS_ENTROPY_BACKWARD, &a, in, 3, outs, 1);
}

/* mean((a - b)^2): Binary and Reduce, so autodiff needs no rule of its own. */
rlx_status rlx_graph_add_mse_loss(rlx_graph* g, rlx_tensor a, rlx_tensor b, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_tensor diff, sq;
  RLX_RETURN_IF_ERROR(rlx_graph_add_binary(g, RLX_BIN_SUB, a, b, &diff));
  RLX_RETURN_IF_ERROR(rlx_graph_add_binary(g, RLX_BIN_MUL, diff, diff, &sq));
  return rlx_graph_add_reduce(g, RLX_RED_MEAN, sq, NULL, 0, 0, out);
}

/* dx's type: dy's dtype, dy's shape with idx's dims at axis replaced by
 * axis_size. */
static rlx_status gather_backward_type(rlx_graph* g, rlx_tensor dy, rlx_tensor idx,
                                       int32_t axis, rlx_dim axis_size, rlx_type* t) {
  if (dy < 0 || dy >= g->n_values || idx < 0 || idx >= g->n_values)
    return rlx_graph_fail_op(g, RLX_OP_GATHER_BACKWARD, 0, "dy %%%d or indices %%%d does not exist",
                             (int)dy, (int)idx);
  const rlx_type *dyt = &g->values[dy].type, *it = &g->values[idx].type;
  int32_t dr = dyt->rank, ir = it->rank;
  int32_t rank = dr - ir + 1;
  if (rank < 1 || rank > RLX_MAX_RANK || axis < -rank || axis >= rank)
    return rlx_graph_fail_op(g, RLX_OP_GATHER_BACKWARD, 0,
                             "axis %d does not fit dy of rank %d gathered with indices of rank %d",
                             (int)axis, (int)dr, (int)ir);
  if (axis < 0) axis += rank;
  memset(t, 0, sizeof *t);
  t->dtype = dyt->dtype;
  t->rank = rank;
  for (int32_t d = 0; d < rank; d++)
    t->shape[d] = d < axis ? dyt->shape[d] : d == axis ? axis_size : dyt->shape[d + ir - 1];
  return RLX_OK;
}

rlx_status rlx_graph_add_gather_backward(rlx_graph* g, rlx_tensor dy, rlx_tensor idx,
                                         int32_t axis, rlx_dim axis_size, rlx_tensor* out) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_node_attrs a;
  memset(&a, 0, sizeof a);
  a.axis = axis;
  RLX_RETURN_IF_ERROR(gather_backward_type(g, dy, idx, axis, axis_size, &a.type));
  rlx_tensor in[2] = {dy, idx};
  rlx_tensor* outs[1] = {out};
  return add_outputs(g, RLX_OP_GATHER_BACKWARD, &a, in, 2, outs, 1);
}

rlx_status rlx_graph_add_sgd_update(rlx_graph* g, rlx_tensor p, rlx_tensor grad,
                                    rlx_tensor momentum_buf, rlx_tensor hyper,
                                    const rlx_sgd_desc* desc, rlx_tensor* out_p,
                                    rlx_tensor* out_buf) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (!desc) return rlx_graph_fail_op(g, RLX_OP_SGD_UPDATE, 0, "sgd desc is NULL");
  rlx_node_attrs a;
  memset(&a, 0, sizeof a);
  a.opt.n = RLX_OPT_SGD_COUNT;
  a.opt.v[RLX_OPT_SGD_MOMENTUM] = desc->momentum;
  a.opt.v[RLX_OPT_SGD_DAMPENING] = desc->dampening;
  a.opt.v[RLX_OPT_SGD_WEIGHT_DECAY] = desc->weight_decay;
  a.opt.v[RLX_OPT_SGD_NESTEROV] = desc->nesterov ? 1.0f : 0.0f;
  rlx_tensor in[4] = {p, grad, momentum_buf, hyper};
  rlx_tensor buf = RLX_NONE;
  rlx_tensor* outs[2] = {out_p, &buf};
  RLX_RETURN_IF_ERROR(add_outputs(g, RLX_OP_SGD_UPDATE, &a, in, 4, outs, 2));
  /* without a buffer the second output is an empty placeholder */
  if (out_buf) *out_buf = momentum_buf == RLX_NONE ? RLX_NONE : buf;
  return RLX_OK;
}

rlx_status rlx_graph_add_adam_update(rlx_graph* g, rlx_tensor p, rlx_tensor grad, rlx_tensor m,
                                     rlx_tensor v, rlx_tensor hyper, const rlx_adam_desc* desc,
                                     rlx_tensor* out_p, rlx_tensor* out_m, rlx_tensor* out_v) {
  if (!g) return RLX_INVALID_ARGUMENT;
  if (!desc) return rlx_graph_fail_op(g, RLX_OP_ADAM_UPDATE, 0, "adam desc is NULL");
  rlx_node_attrs a;
  memset(&a, 0, sizeof a);
  a.opt.n = RLX_OPT_ADAM_COUNT;
  a.opt.v[RLX_OPT_ADAM_BETA1] = desc->beta1;
  a.opt.v[RLX_OPT_ADAM_BETA2] = desc->beta2;
  a.opt.v[RLX_OPT_ADAM_EPS] = desc->eps;
  a.opt.v[RLX_OPT_ADAM_WEIGHT_DECAY] = desc->weight_decay;
  a.opt.v[RLX_OPT_ADAM_DECOUPLED] = desc->decoupled ? 1.0f : 0.0f;
  rlx_tensor in[5] = {p, grad, m, v, hyper};
  rlx_tensor* outs[3] = {out_p, out_m, out_v};
  return add_outputs(g, RLX_OP_ADAM_UPDATE, &a, in, 5, outs, 3);
}
