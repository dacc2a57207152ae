/* Gradient rules of the Tier 2 (training) ops where they are cheap: the
 * loss (CrossEntropy, through its backward op) and the backward ops that
 * are linear in their cotangent input (cumsum, gather, rope, softmax,
 * conv weight, average pool), so a gradient of a gradient works through
 * them. The norm and attention backward ops, max-pool backward, the
 * cross-entropy backward and the optimizer updates have no rule (second
 * order through them is not supported; grad fails naming the op). */
#include "autodiff/grad.h"

#define T(t) rlx_tensor_type(c->g, (t))
#define TRY RLX_RETURN_IF_ERROR

RLX_GRAD_RULE(rlx_grad_cross_entropy) {
  if (dy[1] != RLX_NONE)
    return rlx_fail(&c->g->err, RLX_UNIMPLEMENTED,
                    "cross_entropy's second output (per-position partial sums) has no gradient");
  return rlx_graph_add_cross_entropy_backward(c->g, n->in[0], n->in[1], dy[0], n->a.ignore_index,
                                              n->a.label_smoothing, &dx[0]);
}

/* cumsum_backward(dy) = cumsum(dy) the other way; its adjoint is cumsum
 * the first way, i.e. cumsum_backward with reverse flipped again. */
RLX_GRAD_RULE(rlx_grad_cumsum_backward) {
  return rlx_graph_add_cumsum_backward(c->g, dy[0], n->a.axis, n->a.exclusive, !n->a.reverse,
                                       &dx[0]);
}

/* gather_backward scatters dy rows to idx; its adjoint gathers them. */
RLX_GRAD_RULE(rlx_grad_gather_backward) {
  return rlx_graph_add_gather(c->g, dy[0], n->in[1], n->a.axis, &dx[0]);
}

/* rope_backward rotates by -angle; the transpose of that is rope itself. */
RLX_GRAD_RULE(rlx_grad_rope_backward) {
  if (rlx_grad_wants(c, n, 1) || rlx_grad_wants(c, n, 2))
    return rlx_fail(&c->g->err, RLX_UNIMPLEMENTED,
                    "rope's cos / sin tables have no gradient (wrap them in stop_gradient)");
  return rlx_graph_add_rope(c->g, dy[0], n->in[1], n->in[2], n->a.head_dim, n->a.n_rot,
                            (rlx_rope_style)n->a.style, (rlx_layout)n->a.layout, &dx[0]);
}

/* Sum over the op's axis, kept. */
static rlx_status axis_sum(rlx_graph* g, rlx_tensor t, int32_t axis, rlx_tensor* out) {
  return rlx_graph_add_reduce(g, RLX_RED_SUM, t, &axis, 1, 1, out);
}

/* softmax: dx = y (dy - S), S = sum(dy y). The Jacobian in dy is
 * symmetric, so d_dy = softmax_backward(y, g); d_y = g (dy - S) - dy sum(g y).
 * log_softmax: dx = dy - exp(y) sum(dy): d_dy = g - sum(g exp(y)),
 * d_y = -g exp(y) sum(dy). */
RLX_GRAD_RULE(rlx_grad_softmax_backward) {
  rlx_graph* g = c->g;
  rlx_tensor y = n->in[0], d = n->in[1], G = dy[0], s, t, u, e;
  int32_t ax = n->a.axis;
  int log = n->op == RLX_OP_LOG_SOFTMAX_BACKWARD;
  if (!log) {
    if (rlx_grad_wants(c, n, 1)) TRY(rlx_graph_add_softmax_backward(g, y, G, ax, 0, &dx[1]));
    if (!rlx_grad_wants(c, n, 0)) return RLX_OK;
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, d, y, &s));
    TRY(axis_sum(g, s, ax, &s));
    TRY(rlx_graph_add_binary(g, RLX_BIN_SUB, d, s, &t));
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, G, t, &t));
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, G, y, &u));
    TRY(axis_sum(g, u, ax, &u));
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, d, u, &u));
    return rlx_graph_add_binary(g, RLX_BIN_SUB, t, u, &dx[0]);
  }
  TRY(rlx_graph_add_activation(g, RLX_ACT_EXP, y, &e));
  if (rlx_grad_wants(c, n, 1)) {
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, G, e, &t));
    TRY(axis_sum(g, t, ax, &t));
    TRY(rlx_graph_add_binary(g, RLX_BIN_SUB, G, t, &dx[1]));
  }
  if (rlx_grad_wants(c, n, 0)) {
    TRY(axis_sum(g, d, ax, &s));
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, G, e, &t));
    TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, t, s, &t));
    TRY(rlx_graph_add_activation(g, RLX_ACT_NEG, t, &dx[0]));
  }
  return RLX_OK;
}

/* d_w = corr(x, dy) is bilinear: with G the cotangent of d_w (w-shaped),
 * d_dy = conv(x, G) and d_x = conv_transpose(dy, G). */
RLX_GRAD_RULE(rlx_grad_conv_backward_weight) {
  rlx_graph* g = c->g;
  const rlx_node_attrs* a = &n->a;
  int32_t ns = a->kernel.n;
  rlx_conv_layout layout = (rlx_conv_layout)a->conv_layout;
  if (rlx_grad_wants(c, n, 1))
    TRY(rlx_graph_add_conv(g, n->in[0], dy[0], RLX_NONE, RLX_NONE, ns, a->strides.v, a->pads.v,
                           a->dilations.v, a->groups, RLX_ACT_NONE, layout, &dx[1]));
  if (!rlx_grad_wants(c, n, 0)) return RLX_OK;
  rlx_type xt = *T(n->in[0]), yt = *T(n->in[1]);
  int32_t first = rlx_conv_layout_is_last(layout) ? 1 : 2;
  int64_t op[3];
  for (int32_t i = 0; i < ns; i++) {
    int64_t in = xt.shape[first + i], out = yt.shape[first + i], k = a->kernel.v[i];
    if (in < 0 || out < 0)
      return rlx_fail(&g->err, RLX_UNIMPLEMENTED, "needs static spatial dims");
    op[i] = in - ((out - 1) * a->strides.v[i] - a->pads.v[i] - a->pads.v[ns + i] +
                  a->dilations.v[i] * (k - 1) + 1);
  }
  rlx_tensor w = dy[0];
  if (layout == RLX_CONV_CHANNELS_LAST_OHWI) {
    int32_t perm[RLX_MAX_RANK] = {0, ns + 1};
    for (int32_t i = 0; i < ns; i++) perm[2 + i] = 1 + i;
    TRY(rlx_graph_add_transpose(g, w, perm, ns + 2, &w));
    layout = RLX_CONV_CHANNELS_LAST;
  }
  return rlx_graph_add_conv_transpose(g, n->in[1], w, RLX_NONE, RLX_NONE, ns, a->strides.v,
                                      a->pads.v, a->dilations.v, op, a->groups, RLX_ACT_NONE,
                                      layout, &dx[0]);
}

/* Average pool backward is linear in dy and reads x for its shape only:
 * its adjoint is the average pool itself. Max pool backward routes by x's
 * argmax: no rule. */
RLX_GRAD_RULE(rlx_grad_pool_backward) {
  const rlx_node_attrs* a = &n->a;
  if (a->pool != RLX_POOL_AVG)
    return rlx_fail(&c->g->err, RLX_UNIMPLEMENTED,
                    "max pool_backward has no gradient rule (second order through max pooling)");
  if (!rlx_grad_wants(c, n, 1)) return RLX_OK;
  return rlx_graph_add_pool(c->g, dy[0], RLX_POOL_AVG, a->kernel.n, a->kernel.v, a->strides.v,
                            a->pads.v, a->dilations.v, a->ceil_mode, a->count_include_pad,
                            &dx[1]);
}
