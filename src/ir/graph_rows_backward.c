/* Builders of the row-wise backward ops (rlx.h "training (Tier 2)"):
 * LayerNorm, RmsNorm, Softmax / LogSoftmax, Rope and Cumsum backward. Like
 * every builder they fill attributes and go through rlx_graph_add_node, so
 * the shape rules in shape.c verify the node. */
#include "ir/graph.h"

#include <string.h>

/* Adds node op and hands out its first n outputs (NULL pointers skipped). */
static rlx_status add_outputs(rlx_graph* g, rlx_op op, const rlx_node_attrs* a,
                              const rlx_tensor* in, int32_t n_in, rlx_tensor* const* outs,
                              int32_t n) {
  if (!g) return RLX_INVALID_ARGUMENT;
  rlx_tensor tmp[RLX_MAX_OUTPUTS];
  memset(tmp, 0, sizeof tmp); /* the compiler cannot see add_node fill it */
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(g, op, a, in, n_in, tmp));
  for (int32_t i = 0; i < n; i++)
    if (outs[i]) *outs[i] = tmp[i];
  return RLX_OK;
}

rlx_status rlx_graph_add_layer_norm_backward(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                                 rlx_tensor dy, int32_t axis, float eps,
                                                 rlx_tensor* out_dx, rlx_tensor* out_dgamma,
                                                 rlx_tensor* out_dbeta) {
  rlx_node_attrs a = {0};
  a.axis = axis;
  a.eps = eps;
  rlx_tensor in[3] = {x, gamma, dy};
  rlx_tensor* outs[3] = {out_dx, out_dgamma, out_dbeta};
  return add_outputs(g, RLX_OP_LAYER_NORM_BACKWARD, &a, in, 3, outs, 3);
}

rlx_status rlx_graph_add_rms_norm_backward(rlx_graph* g, rlx_tensor x, rlx_tensor gamma,
                                                   rlx_tensor dy, float eps, rlx_tensor* out_dx,
                                                   rlx_tensor* out_dgamma) {
  rlx_node_attrs a = {0};
  a.eps = eps;
  rlx_tensor in[3] = {x, gamma, dy};
  rlx_tensor* outs[2] = {out_dx, out_dgamma};
  return add_outputs(g, RLX_OP_RMS_NORM_BACKWARD, &a, in, 3, outs, 2);
}

rlx_status rlx_graph_add_softmax_backward(rlx_graph* g, rlx_tensor y, rlx_tensor dy,
                                                  int32_t axis, int32_t log_softmax,
                                                  rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.axis = axis;
  rlx_tensor in[2] = {y, dy};
  rlx_op op = log_softmax ? RLX_OP_LOG_SOFTMAX_BACKWARD : RLX_OP_SOFTMAX_BACKWARD;
  return add_outputs(g, op, &a, in, 2, &out, 1);
}

rlx_status rlx_graph_add_rope_backward(rlx_graph* g, rlx_tensor dy, rlx_tensor cos_t,
                                               rlx_tensor sin_t, int32_t head_dim, int32_t n_rot,
                                               rlx_rope_style style, rlx_layout layout,
                                               rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.head_dim = head_dim;
  a.n_rot = n_rot;
  a.style = (int32_t)style;
  a.layout = (int32_t)layout;
  rlx_tensor in[3] = {dy, cos_t, sin_t};
  return add_outputs(g, RLX_OP_ROPE_BACKWARD, &a, in, 3, &out, 1);
}

rlx_status rlx_graph_add_cumsum_backward(rlx_graph* g, rlx_tensor dy, int32_t axis,
                                                 int32_t exclusive, int32_t reverse,
                                                 rlx_tensor* out) {
  rlx_node_attrs a = {0};
  a.axis = axis;
  a.exclusive = exclusive;
  a.reverse = reverse;
  return add_outputs(g, RLX_OP_CUMSUM_BACKWARD, &a, &dy, 1, &out, 1);
}
