/* Builders of the vision backward ops (include/rlx.h, "training (Tier 2)"):
 * ConvBackwardWeight and PoolBackward. Their shape rules are in shape.c;
 * conv_geometry.h says how autodiff forms the input gradient of Conv as a
 * ConvTranspose of dy. */
#include "ir/graph.h"

/* Copies n ints into an attribute list, `fill` where src is NULL. */
static void fill_ints(rlx_ints* dst, const int64_t* src, int32_t n, int64_t fill) {
  dst->n = n;
  for (int32_t i = 0; i < n; i++) dst->v[i] = src ? src[i] : fill;
}

static rlx_status add_one(rlx_graph* g, rlx_op op, const rlx_node_attrs* a, const rlx_tensor* in,
                          int32_t n_in, rlx_tensor* out) {
  rlx_tensor tmp[RLX_MAX_OUTPUTS] = {0};
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(g, op, a, in, n_in, tmp));
  if (out) *out = tmp[0];
  return RLX_OK;
}

static int is_tensor(const rlx_graph* g, rlx_tensor t) { return t >= 0 && t < g->n_values; }

rlx_status rlx_graph_add_conv_backward_weight(rlx_graph* g, rlx_tensor x, rlx_tensor dy,
                                              rlx_tensor w, int32_t n_spatial,
                                              const int64_t* strides, const int64_t* pads,
                                              const int64_t* dilations, int32_t groups,
                                              rlx_conv_layout layout, rlx_tensor* out) {
  const rlx_op op = RLX_OP_CONV_BACKWARD_WEIGHT;
  if (!g) return RLX_INVALID_ARGUMENT;
  if (n_spatial < 1 || n_spatial > 3)
    return rlx_graph_fail_op(g, op, 0, "n_spatial %d is not 1, 2 or 3", (int)n_spatial);
  /* w is read for its kernel sizes only: the node does not take it as an
   * input, so the gradient does not keep the weight alive. */
  if (!is_tensor(g, w)) return rlx_graph_fail_op(g, op, 0, "w %d is not a tensor of this graph", (int)w);
  const rlx_type* wt = &g->values[w].type;
  if (wt->rank != n_spatial + 2)
    return rlx_graph_fail_op(g, op, 0, "w has rank %d; %d spatial dims need %d", (int)wt->rank,
                             (int)n_spatial, (int)(n_spatial + 2));
  rlx_node_attrs a = {0};
  a.kernel.n = n_spatial;
  for (int32_t i = 0; i < n_spatial; i++) a.kernel.v[i] = wt->shape[rlx_conv_w_axis(layout, n_spatial, i)];
  fill_ints(&a.strides, strides, n_spatial, 1);
  fill_ints(&a.pads, pads, 2 * n_spatial, 0);
  fill_ints(&a.dilations, dilations, n_spatial, 1);
  a.groups = groups;
  a.conv_layout = (int32_t)layout;
  rlx_tensor in[2] = {x, dy};
  rlx_type dw[RLX_MAX_OUTPUTS];
  RLX_RETURN_IF_ERROR(rlx_infer_node(g, op, &a, in, 2, dw)); /* before adding: no stray node */
  if (!rlx_type_equal(&dw[0], wt)) {
    char b1[160], b2[160];
    return rlx_graph_fail_op(g, op, 0, "w %s is not the weight of this conv (d_w would be %s)",
                             rlx_type_str(g, wt, b1, sizeof b1),
                             rlx_type_str(g, &dw[0], b2, sizeof b2));
  }
  return add_one(g, op, &a, in, 2, out);
}

rlx_status rlx_graph_add_pool_backward(rlx_graph* g, rlx_tensor x, rlx_tensor dy,
                                       rlx_pool_kind kind, int32_t n_spatial,
                                       const int64_t* kernel, const int64_t* strides,
                                       const int64_t* pads, const int64_t* dilations,
                                       int32_t ceil_mode, int32_t count_include_pad,
                                       rlx_tensor* out) {
  const rlx_op op = RLX_OP_POOL_BACKWARD;
  if (!g) return RLX_INVALID_ARGUMENT;
  if (n_spatial < 1 || n_spatial > 3)
    return rlx_graph_fail_op(g, op, 0, "n_spatial %d is not 1, 2 or 3", (int)n_spatial);
  if (!kernel) return rlx_graph_fail_op(g, op, 0, "kernel is NULL");
  rlx_node_attrs a = {0};
  a.pool = (int32_t)kind;
  fill_ints(&a.kernel, kernel, n_spatial, 1);
  fill_ints(&a.strides, strides, n_spatial, 1);
  fill_ints(&a.pads, pads, 2 * n_spatial, 0);
  fill_ints(&a.dilations, dilations, n_spatial, 1);
  a.ceil_mode = ceil_mode;
  a.count_include_pad = count_include_pad;
  rlx_tensor in[2] = {x, dy};
  return add_one(g, op, &a, in, 2, out);
}
