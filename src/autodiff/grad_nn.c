/* Gradient rules of contractions, normalisations, the transformer ops and
 * the vision ops. Where rlx.h declares a backward op (attention, layer and
 * rms norm, rope, conv weight, pool) the rule emits it; the channel-wise
 * norms, BatchNorm and LRN compose their gradients from forward ops. */
#include <stdlib.h>
#include <string.h>

#include "autodiff/grad.h"
#include "base/scalar_math.h"

#define T(t) rlx_tensor_type(c->g, (t))
#define TRY RLX_RETURN_IF_ERROR

static rlx_status mul(rlx_graph* g, rlx_tensor a, rlx_tensor b, rlx_tensor* o) {
  return rlx_graph_add_binary(g, RLX_BIN_MUL, a, b, o);
}
static rlx_status sub(rlx_graph* g, rlx_tensor a, rlx_tensor b, rlx_tensor* o) {
  return rlx_graph_add_binary(g, RLX_BIN_SUB, a, b, o);
}

/* ------------------------------------------------------------------ matmul */

/* t viewed as [rows, last dim]: every leading dim folded into the rows. */
static rlx_status fold_rows(rlx_graph* g, rlx_tensor t, rlx_tensor* out) {
  rlx_type ty = *rlx_tensor_type(g, t);
  rlx_dim rows = 1, shape[2];
  for (int32_t d = 0; d < ty.rank - 1; d++)
    RLX_RETURN_IF_ERROR(rlx_graph_dim_expr(g, RLX_DIM_MUL, rows, ty.shape[d], &rows));
  shape[0] = rows;
  shape[1] = ty.shape[ty.rank - 1];
  return rlx_graph_add_reshape(g, t, shape, 2, out);
}

/* The gradient of a 2-D B shared by every batch of A (a [.., M, K] @ [K, N]
 * weight, the linear layers' case): the batch dims fold into M, so it is
 * one [K, rows] x [rows, N] product instead of a batched product summed over
 * the batch afterwards (which also held the per-batch partial products). */
static rlx_status shared_weight_grad(rlx_grad_ctx* c, const rlx_node* n, rlx_tensor a,
                                     rlx_tensor d, rlx_tensor* db) {
  rlx_tensor a2, d2;
  TRY(fold_rows(c->g, a, &a2));
  TRY(fold_rows(c->g, d, &d2));
  if (!n->a.transpose_b) return rlx_graph_add_matmul(c->g, a2, d2, 1, 0, db); /* A^T dC */
  return rlx_graph_add_matmul(c->g, d2, a2, 1, 0, db);                          /* dC^T A */
}

/* C = op(A) op(B): d op(A) = dC op(B)^T, d op(B) = op(A)^T dC, each
 * written so the transpose flags give the stored operand directly; batch
 * dims that broadcast are summed back. */
static rlx_status matmul_parts(rlx_grad_ctx* c, const rlx_node* n, rlx_tensor a, rlx_tensor b,
                               rlx_tensor d, rlx_tensor* da, rlx_tensor* db) {
  int32_t ta = n->a.transpose_a, tb = n->a.transpose_b;
  rlx_tensor t;
  if (rlx_grad_wants(c, n, 0)) {
    if (!ta) TRY(rlx_graph_add_matmul(c->g, d, b, 0, !tb, &t));
    else TRY(rlx_graph_add_matmul(c->g, b, d, tb, 1, &t));
    TRY(rlx_grad_unbroadcast(c->g, t, T(a), da));
  }
  if (rlx_grad_wants(c, n, 1) && T(b)->rank == 2 && T(a)->rank > 2 && !ta)
    return shared_weight_grad(c, n, a, d, db);
  if (rlx_grad_wants(c, n, 1)) {
    if (!tb) TRY(rlx_graph_add_matmul(c->g, a, d, !ta, 0, &t));
    else TRY(rlx_graph_add_matmul(c->g, d, a, 1, ta, &t));
    TRY(rlx_grad_unbroadcast(c->g, t, T(b), db));
  }
  return RLX_OK;
}

RLX_GRAD_RULE(rlx_grad_matmul) {
  return matmul_parts(c, n, n->in[0], n->in[1], dy[0], &dx[0], &dx[1]);
}

/* Activations whose slope follows from their output alone (relu: y > 0
 * exactly where x > 0; sigmoid, tanh, exp: functions of y), so a fused op
 * need not recompute its pre-activation for them. */
static int slope_from_output(int32_t act) {
  return act == RLX_ACT_RELU || act == RLX_ACT_SIGMOID || act == RLX_ACT_TANH ||
         act == RLX_ACT_EXP;
}

/* act(a @ b + bias): the pre-activation is recomputed for the slope
 * unless the output gives it. */
RLX_GRAD_RULE(rlx_grad_fused_matmul_bias_act) {
  rlx_tensor z, dz = dy[0];
  if (slope_from_output(n->a.act)) {
    TRY(rlx_grad_activation(c->g, (rlx_activation)n->a.act, n->out[0], n->out[0], dy[0], &dz));
  } else if (n->a.act != RLX_ACT_NONE) {
    TRY(rlx_graph_add_fused_matmul_bias_act(c->g, n->in[0], n->in[1], n->in[2],
                                            n->a.transpose_a, n->a.transpose_b, RLX_ACT_NONE, &z));
    TRY(rlx_grad_activation(c->g, (rlx_activation)n->a.act, z, n->out[0], dy[0], &dz));
  }
  if (rlx_grad_wants(c, n, 2)) TRY(rlx_grad_unbroadcast(c->g, dz, T(n->in[2]), &dx[2]));
  return matmul_parts(c, n, n->in[0], n->in[1], dz, &dx[0], &dx[1]);
}

/* ------------------------------------------------------------------ row norms */

RLX_GRAD_RULE(rlx_grad_layer_norm) {
  rlx_tensor ddx, dg, db;
  TRY(rlx_graph_add_layer_norm_backward(c->g, n->in[0], n->in[1], dy[0], n->a.axis, n->a.eps,
                                        &ddx, &dg, &db));
  dx[0] = ddx;
  if (n->in[1] != RLX_NONE) dx[1] = dg;
  if (n->n_in > 2 && n->in[2] != RLX_NONE) dx[2] = db;
  return RLX_OK;
}

RLX_GRAD_RULE(rlx_grad_rms_norm) {
  rlx_tensor ddx, dg;
  TRY(rlx_graph_add_rms_norm_backward(c->g, n->in[0], n->in[1], dy[0], n->a.eps, &ddx, &dg));
  dx[0] = ddx;
  if (n->in[1] != RLX_NONE) dx[1] = dg;
  return RLX_OK;
}

/* sum = x + residual (+ bias), norm = norm(sum): both outputs may carry a
 * cotangent; the sum's total flows to x, residual and bias. */
static rlx_status residual_norm(rlx_grad_ctx* c, const rlx_node* n, const rlx_tensor* dy,
                                rlx_tensor* dx, int layer) {
  rlx_tensor dsum = dy[1], sum = n->out[1], gamma = n->in[3];
  if (dy[0] != RLX_NONE) {
    rlx_tensor ds, dg, db = RLX_NONE;
    int32_t last = T(sum)->rank - 1;
    if (layer)
      TRY(rlx_graph_add_layer_norm_backward(c->g, sum, gamma, dy[0], last, n->a.eps, &ds, &dg,
                                            &db));
    else
      TRY(rlx_graph_add_rms_norm_backward(c->g, sum, gamma, dy[0], n->a.eps, &ds, &dg));
    if (gamma != RLX_NONE) dx[3] = dg;
    if (layer && n->in[4] != RLX_NONE) dx[4] = db;
    if (dsum == RLX_NONE) dsum = ds;
    else TRY(rlx_graph_add_binary(c->g, RLX_BIN_ADD, dsum, ds, &dsum));
  }
  if (dsum == RLX_NONE) return RLX_OK;
  dx[0] = dsum;
  dx[1] = dsum;
  if (rlx_grad_wants(c, n, 2)) TRY(rlx_grad_unbroadcast(c->g, dsum, T(n->in[2]), &dx[2]));
  return RLX_OK;
}

RLX_GRAD_RULE(rlx_grad_fused_residual_layer_norm) { return residual_norm(c, n, dy, dx, 1); }
RLX_GRAD_RULE(rlx_grad_fused_residual_rms_norm) { return residual_norm(c, n, dy, dx, 0); }

/* ------------------------------------------------------------------ transformer */

/* [B, S, H, D] (BSHD) or [B, H, S, D] -> [B, Hkv, H / Hkv, S, D]. */
static rlx_status heads_grouped(rlx_graph* g, rlx_tensor t, int32_t layout, int64_t hkv,
                                rlx_tensor* out) {
  static const int32_t bshd_to_bhsd[4] = {0, 2, 1, 3};
  if (layout == RLX_LAYOUT_BSHD) TRY(rlx_graph_add_transpose(g, t, bshd_to_bhsd, 4, &t));
  rlx_type tt = *rlx_tensor_type(g, t);
  rlx_dim shape[5] = {tt.shape[0], hkv, RLX_DIM_INFER, tt.shape[2], tt.shape[3]};
  return rlx_graph_add_reshape(g, t, shape, 5, out);
}

/* Attention with an additive bias, rebuilt from matmuls and a softmax
 * (the S x S scores materialised: only when the bias itself needs a
 * gradient) on views of q, k, v and the bias, differentiated by a nested
 * rlx_graph_grad seeded with dy. */
static rlx_status attention_bias_grad(rlx_grad_ctx* c, const rlx_node* n, rlx_tensor dy,
                                      rlx_tensor* dx) {
  static const int32_t bhsd_to_bshd[4] = {0, 2, 1, 3};
  rlx_graph* g = c->g;
  const rlx_node_attrs* a = &n->a;
  rlx_tensor v4[4], q, k, v, sc, bias, o, grads[4];
  for (int32_t i = 0; i < 4; i++) {
    rlx_type t = *T(n->in[i]);
    TRY(rlx_graph_add_reshape(g, n->in[i], t.shape, t.rank, &v4[i]));
  }
  rlx_type qt = *T(n->in[0]);
  int64_t B = qt.shape[0], H = a->num_heads, hkv = a->num_kv_heads;
  int32_t s_ax = a->layout == RLX_LAYOUT_BSHD ? 1 : 2;
  rlx_dim Sq = qt.shape[s_ax], Sk = T(n->in[1])->shape[s_ax];
  TRY(heads_grouped(g, v4[0], a->layout, hkv, &q));
  TRY(heads_grouped(g, v4[1], a->layout, hkv, &k));
  TRY(heads_grouped(g, v4[2], a->layout, hkv, &v));
  TRY(rlx_graph_add_matmul(g, q, k, 0, 1, &sc)); /* [B, Hkv, G, Sq, Sk] */
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, sc, (double)a->score_scale, &sc));
  if (a->softcap > 0.0f) {
    TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, sc, 1.0 / (double)a->softcap, &sc));
    TRY(rlx_graph_add_activation(g, RLX_ACT_TANH, sc, &sc));
    TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, sc, (double)a->softcap, &sc));
  }
  rlx_dim full[4] = {B, H, Sq, Sk}, grouped[5] = {B, hkv, H / hkv, Sq, Sk};
  TRY(rlx_graph_add_expand(g, v4[3], full, 4, &bias));
  TRY(rlx_graph_add_reshape(g, bias, grouped, 5, &bias));
  TRY(rlx_graph_add_binary(g, RLX_BIN_ADD, sc, bias, &sc));
  TRY(rlx_graph_add_softmax(g, sc, 4, &sc));
  TRY(rlx_graph_add_matmul(g, sc, v, 0, 0, &o)); /* [B, Hkv, G, Sq, D] */
  rlx_dim bhsd[4] = {B, H, Sq, a->head_dim};
  TRY(rlx_graph_add_reshape(g, o, bhsd, 4, &o));
  if (a->layout == RLX_LAYOUT_BSHD) TRY(rlx_graph_add_transpose(g, o, bhsd_to_bshd, 4, &o));
  TRY(rlx_graph_grad(g, o, v4, 4, dy, grads));
  for (int32_t i = 0; i < 4; i++)
    if (rlx_grad_wants(c, n, i)) dx[i] = grads[i];
  return RLX_OK;
}

/* The flash-style AttentionBackward for q, k, v. A custom mask only keeps
 * or drops scores (> 0.5): piecewise constant, zero gradient. An additive
 * bias that needs a gradient takes the decomposition above. */
RLX_GRAD_RULE(rlx_grad_attention) {
  if (rlx_grad_wants(c, n, 3) && n->a.mask == RLX_MASK_BIAS)
    return attention_bias_grad(c, n, dy[0], dx);
  rlx_attention_desc d = {n->a.num_heads, n->a.num_kv_heads, n->a.head_dim,
                          (rlx_layout)n->a.layout, (rlx_mask_kind)n->a.mask, n->a.window,
                          n->a.score_scale, n->a.softcap};
  return rlx_graph_add_attention_backward(c->g, n->in[0], n->in[1], n->in[2], n->in[3],
                                          n->out[0], dy[0], &d, &dx[0], &dx[1], &dx[2]);
}

RLX_GRAD_RULE(rlx_grad_rope) {
  if (rlx_grad_wants(c, n, 1) || rlx_grad_wants(c, n, 2))
    return rlx_fail(&c->g->err, RLX_UNIMPLEMENTED,
                    "rope's cos / sin tables have no gradient (wrap them in stop_gradient)");
  return rlx_graph_add_rope_backward(c->g, dy[0], n->in[1], n->in[2], n->a.head_dim, n->a.n_rot,
                                     (rlx_rope_style)n->a.style, (rlx_layout)n->a.layout, &dx[0]);
}

/* ------------------------------------------------------------------ vision */

static const int64_t* ints_or_null(const rlx_ints* v) { return v->n ? v->v : NULL; }

/* Permutations between channels last [N, spatial..., C] and channels
 * first [N, C, spatial...] for a rank-r tensor. */
static void to_first(int32_t r, int32_t* perm) {
  perm[0] = 0;
  perm[1] = r - 1;
  for (int32_t d = 2; d < r; d++) perm[d] = d - 1;
}
static void to_last(int32_t r, int32_t* perm) {
  perm[0] = 0;
  for (int32_t d = 1; d < r - 1; d++) perm[d] = d + 1;
  perm[r - 1] = 1;
}

/* Pool: pool_backward works channels first, so a channels-last pool (the
 * layout pass's) has x and dy transposed there and dx transposed back. */
RLX_GRAD_RULE(rlx_grad_pool) {
  const rlx_node_attrs* a = &n->a;
  if (a->pool == RLX_POOL_ARGMAX) return RLX_OK; /* integer output */
  rlx_tensor x = n->in[0], d = dy[0];
  int32_t r = T(x)->rank, perm[RLX_MAX_RANK];
  int last = rlx_conv_layout_is_last(a->conv_layout);
  if (last) {
    to_first(r, perm);
    TRY(rlx_graph_add_transpose(c->g, x, perm, r, &x));
    TRY(rlx_graph_add_transpose(c->g, d, perm, r, &d));
  }
  TRY(rlx_graph_add_pool_backward(c->g, x, d, (rlx_pool_kind)a->pool, a->kernel.n, a->kernel.v,
                                  ints_or_null(&a->strides), ints_or_null(&a->pads),
                                  ints_or_null(&a->dilations), a->ceil_mode,
                                  a->count_include_pad, &dx[0]));
  if (!last) return RLX_OK;
  to_last(r, perm);
  return rlx_graph_add_transpose(c->g, dx[0], perm, r, &dx[0]);
}

/* output_padding that makes the transposed conv of a conv's output `out`
 * come back to `in` along every spatial dim (all static). */
static rlx_status conv_output_padding(rlx_graph* g, const rlx_node* n, const rlx_type* x,
                                      const rlx_type* y, const rlx_type* w, int64_t* op) {
  int32_t ns = n->a.strides.n, last = rlx_conv_layout_is_last(n->a.conv_layout);
  for (int32_t i = 0; i < ns; i++) {
    int64_t in = x->shape[(last ? 1 : 2) + i], out = y->shape[(last ? 1 : 2) + i];
    int64_t k = w->shape[rlx_conv_w_axis(n->a.conv_layout, ns, i)];
    if (in < 0 || out < 0 || k < 0)
      return rlx_fail(&g->err, RLX_UNIMPLEMENTED, "conv gradient needs static spatial dims");
    int64_t s = n->a.strides.v[i], d = n->a.dilations.v[i];
    op[i] = in - ((out - 1) * s - n->a.pads.v[i] - n->a.pads.v[ns + i] + d * (k - 1) + 1);
  }
  return RLX_OK;
}

/* dz, the cotangent before the activation (recomputing the forward
 * without it when the output does not give the slope). */
static rlx_status conv_dz(rlx_grad_ctx* c, const rlx_node* n, rlx_tensor dy, rlx_tensor* dz) {
  if (n->a.act == RLX_ACT_NONE) {
    *dz = dy;
    return RLX_OK;
  }
  if (slope_from_output(n->a.act))
    return rlx_grad_activation(c->g, (rlx_activation)n->a.act, n->out[0], n->out[0], dy, dz);
  rlx_node_attrs a = n->a;
  a.act = RLX_ACT_NONE;
  rlx_tensor z;
  TRY(rlx_graph_add_node(c->g, n->op, &a, n->in, n->n_in, &z));
  return rlx_grad_activation(c->g, (rlx_activation)n->a.act, z, n->out[0], dy, dz);
}

/* Bias (sum over all but the channel axis) and residual gradients. */
static rlx_status conv_bias_residual(rlx_grad_ctx* c, const rlx_node* n, rlx_tensor dz,
                                     rlx_tensor* dx) {
  const rlx_type* zt = T(dz);
  if (n->n_in > 2 && rlx_grad_wants(c, n, 2)) {
    int32_t ch = rlx_conv_layout_is_last(n->a.conv_layout) ? zt->rank - 1 : 1, axes[RLX_MAX_RANK];
    int32_t k = 0;
    for (int32_t d = 0; d < zt->rank; d++)
      if (d != ch) axes[k++] = d;
    TRY(rlx_graph_add_reduce(c->g, RLX_RED_SUM, dz, axes, k, 0, &dx[2]));
  }
  if (n->n_in > 3 && rlx_grad_wants(c, n, 3)) dx[3] = dz;
  return RLX_OK;
}

RLX_GRAD_RULE(rlx_grad_conv) {
  rlx_tensor dz, w = n->in[1];
  int32_t ns = n->a.strides.n, layout = n->a.conv_layout;
  TRY(conv_dz(c, n, dy[0], &dz));
  if (rlx_grad_wants(c, n, 0)) {
    int64_t op[3];
    TRY(conv_output_padding(c->g, n, T(n->in[0]), T(n->out[0]), T(w), op));
    if (layout == RLX_CONV_CHANNELS_LAST_OHWI) { /* ConvTranspose reads [C, OC/g, k...] */
      int32_t perm[RLX_MAX_RANK] = {0, ns + 1};
      for (int32_t i = 0; i < ns; i++) perm[2 + i] = 1 + i;
      TRY(rlx_graph_add_transpose(c->g, w, perm, ns + 2, &w));
      layout = RLX_CONV_CHANNELS_LAST;
    }
    TRY(rlx_graph_add_conv_transpose(c->g, dz, w, RLX_NONE, RLX_NONE, ns, n->a.strides.v,
                                     n->a.pads.v, n->a.dilations.v, op, n->a.groups,
                                     RLX_ACT_NONE, (rlx_conv_layout)layout, &dx[0]));
  }
  if (rlx_grad_wants(c, n, 1))
    TRY(rlx_graph_add_conv_backward_weight(c->g, n->in[0], dz, n->in[1], ns, n->a.strides.v,
                                           n->a.pads.v, n->a.dilations.v, n->a.groups,
                                           (rlx_conv_layout)n->a.conv_layout, &dx[1]));
  return conv_bias_residual(c, n, dz, dx);
}

/* The transposed conv's input gradient is the conv of dz with the same
 * weight; its weight gradient is conv_backward_weight with the roles of
 * input and output swapped. */
RLX_GRAD_RULE(rlx_grad_conv_transpose) {
  rlx_tensor dz;
  int32_t ns = n->a.strides.n;
  rlx_conv_layout layout = (rlx_conv_layout)n->a.conv_layout;
  TRY(conv_dz(c, n, dy[0], &dz));
  if (rlx_grad_wants(c, n, 0))
    TRY(rlx_graph_add_conv(c->g, dz, n->in[1], RLX_NONE, RLX_NONE, ns, n->a.strides.v,
                           n->a.pads.v, n->a.dilations.v, n->a.groups, RLX_ACT_NONE, layout,
                           &dx[0]));
  if (rlx_grad_wants(c, n, 1))
    TRY(rlx_graph_add_conv_backward_weight(c->g, dz, n->in[0], n->in[1], ns, n->a.strides.v,
                                           n->a.pads.v, n->a.dilations.v, n->a.groups, layout,
                                           &dx[1]));
  return conv_bias_residual(c, n, dz, dx);
}

/* The one-hot weights [C*K, 1, k...] of Im2Col as a grouped conv: row
 * c*K + j picks kernel tap j of channel c. */
static rlx_status im2col_weights(rlx_graph* g, rlx_dtype dt, int64_t C, const rlx_ints* kernel,
                                 rlx_tensor* w) {
  int64_t K = 1;
  for (int32_t i = 0; i < kernel->n; i++) K *= kernel->v[i];
  size_t count = (size_t)(C * K * K), esize = rlx_dtype_size(dt);
  unsigned char* bytes = calloc(count ? count : 1, esize);
  RLX_CHECK_ALLOC(&g->err, bytes);
  double one = 1.0;
  for (int64_t ch = 0; ch < C; ch++)
    for (int64_t j = 0; j < K; j++)
      rlx_dtype_convert(bytes + ((size_t)((ch * K + j) * K + j)) * esize, dt, &one, RLX_F64, 1);
  rlx_dim wshape[RLX_MAX_RANK] = {C * K, 1};
  for (int32_t i = 0; i < kernel->n; i++) wshape[2 + i] = kernel->v[i];
  rlx_status st = rlx_graph_add_constant(g, dt, wshape, kernel->n + 2, bytes, count * esize, w);
  free(bytes);
  return st;
}

/* Im2Col is a grouped conv (groups = C) with one-hot weights, so its
 * adjoint is the transposed conv with those weights: each column adds
 * back onto the pixels it read. Channels last ([N, L, K*C], column (k, c))
 * is brought to the channels-first rows (c, k) first and dx transposed
 * back. */
RLX_GRAD_RULE(rlx_grad_im2col) {
  rlx_type xt = *T(n->in[0]);
  const rlx_node_attrs* a = &n->a;
  int32_t ns = a->kernel.n, r = xt.rank, last = rlx_conv_layout_is_last(a->conv_layout);
  int64_t C = xt.shape[last ? r - 1 : 1], K = 1, op[3];
  rlx_dim shape[RLX_MAX_RANK];
  for (int32_t i = 0; i < ns; i++) K *= a->kernel.v[i];
  shape[0] = xt.shape[0];
  for (int32_t i = 0; i < ns; i++) {
    int64_t in = xt.shape[(last ? 1 : 2) + i], k = a->kernel.v[i], s = a->strides.v[i];
    int64_t d = a->dilations.v[i], pb = a->pads.v[i], pe = a->pads.v[ns + i];
    if (in < 0 || C < 0)
      return rlx_fail(&c->g->err, RLX_UNIMPLEMENTED, "im2col gradient needs static dims");
    int64_t out = (in + pb + pe - d * (k - 1) - 1) / s + 1;
    op[i] = in - ((out - 1) * s - pb - pe + d * (k - 1) + 1);
    shape[1 + i] = out; /* [N, out..., K, C] while channels last */
  }
  rlx_tensor w, cols = dy[0];
  if (last) { /* [N, L, K*C] -> [N, out..., K, C] -> [N, C, K, out...] */
    int32_t perm[RLX_MAX_RANK] = {0, ns + 2, ns + 1};
    shape[ns + 1] = K;
    shape[ns + 2] = C;
    for (int32_t i = 0; i < ns; i++) perm[3 + i] = 1 + i;
    TRY(rlx_graph_add_reshape(c->g, cols, shape, ns + 3, &cols));
    TRY(rlx_graph_add_transpose(c->g, cols, perm, ns + 3, &cols));
  }
  for (int32_t i = ns - 1; i >= 0; i--) shape[2 + i] = shape[1 + i];
  shape[1] = C * K;
  TRY(im2col_weights(c->g, xt.dtype, C, &a->kernel, &w));
  TRY(rlx_graph_add_reshape(c->g, cols, shape, ns + 2, &cols));
  TRY(rlx_graph_add_conv_transpose(c->g, cols, w, RLX_NONE, RLX_NONE, ns, a->strides.v,
                                   a->pads.v, a->dilations.v, op, (int32_t)C, RLX_ACT_NONE,
                                   RLX_CONV_CHANNELS_FIRST, &dx[0]));
  if (!last) return RLX_OK;
  int32_t perm[RLX_MAX_RANK];
  to_last(r, perm);
  return rlx_graph_add_transpose(c->g, dx[0], perm, r, &dx[0]);
}

/* ------------------------------------------------------------------ channel-wise norms */

/* [C] -> [C, 1, ...] so it broadcasts along axis 1 of a rank-r tensor. */
static rlx_status per_channel(rlx_graph* g, rlx_tensor v, int32_t r, rlx_tensor* out) {
  rlx_dim shape[RLX_MAX_RANK];
  shape[0] = rlx_tensor_type(g, v)->shape[0];
  for (int32_t d = 1; d < r - 1; d++) shape[d] = 1;
  return rlx_graph_add_reshape(g, v, shape, r - 1, out);
}

/* Sum over every axis but 1 -> [C]. */
static rlx_status channel_sum(rlx_graph* g, rlx_tensor t, rlx_tensor* out) {
  int32_t r = rlx_tensor_type(g, t)->rank, axes[RLX_MAX_RANK], k = 0;
  for (int32_t d = 0; d < r; d++)
    if (d != 1) axes[k++] = d;
  return rlx_graph_add_reduce(g, RLX_RED_SUM, t, axes, k, 0, out);
}

/* Normalisation over `axes` of x (mean 0, biased variance 1) and its
 * backward: dx = rstd (dxh - mean(dxh) - xh mean(dxh xh)). */
static rlx_status normalize_backward(rlx_graph* g, rlx_tensor x, uint32_t axes, float eps,
                                     rlx_tensor dxh, rlx_tensor* xh, rlx_tensor* dx) {
  int32_t list[RLX_MAX_RANK], k = 0;
  for (int32_t d = 0; d < RLX_MAX_RANK; d++)
    if (axes & (1u << d)) list[k++] = d;
  rlx_tensor mean, xc, var, rstd, m1, m2, t;
  TRY(rlx_graph_add_reduce(g, RLX_RED_MEAN, x, list, k, 1, &mean));
  TRY(sub(g, x, mean, &xc));
  TRY(mul(g, xc, xc, &var));
  TRY(rlx_graph_add_reduce(g, RLX_RED_MEAN, var, list, k, 1, &var));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, var, (double)eps, &var));
  TRY(rlx_graph_add_activation(g, RLX_ACT_RSQRT, var, &rstd));
  TRY(mul(g, xc, rstd, xh));
  TRY(rlx_graph_add_reduce(g, RLX_RED_MEAN, dxh, list, k, 1, &m1));
  TRY(mul(g, dxh, *xh, &m2));
  TRY(rlx_graph_add_reduce(g, RLX_RED_MEAN, m2, list, k, 1, &m2));
  TRY(mul(g, *xh, m2, &m2));
  TRY(sub(g, dxh, m1, &t));
  TRY(sub(g, t, m2, &t));
  return mul(g, t, rstd, dx);
}

/* The affine part y = xh * gamma + beta of a channel-wise norm: d_gamma,
 * d_beta, and d_xh = dy * gamma. */
static rlx_status channel_affine(rlx_grad_ctx* c, const rlx_node* n, rlx_tensor dy,
                                 rlx_tensor* dxh) {
  int32_t r = T(dy)->rank;
  *dxh = dy;
  if (n->n_in > 1 && n->in[1] != RLX_NONE) {
    rlx_tensor gc;
    TRY(per_channel(c->g, n->in[1], r, &gc));
    TRY(mul(c->g, dy, gc, dxh));
  }
  return RLX_OK;
}

static rlx_status channel_affine_params(rlx_grad_ctx* c, const rlx_node* n, rlx_tensor dy,
                                        rlx_tensor xh, rlx_tensor* dx) {
  rlx_tensor t;
  if (n->n_in > 1 && rlx_grad_wants(c, n, 1)) {
    TRY(mul(c->g, dy, xh, &t));
    TRY(channel_sum(c->g, t, &dx[1]));
  }
  if (n->n_in > 2 && rlx_grad_wants(c, n, 2)) TRY(channel_sum(c->g, dy, &dx[2]));
  return RLX_OK;
}

RLX_GRAD_RULE(rlx_grad_group_norm) {
  rlx_type xt = *T(n->in[0]);
  rlx_dim gshape[3] = {xt.shape[0], n->a.groups, RLX_DIM_INFER};
  rlx_tensor dxh, xr, dxr, xh, dxg;
  TRY(channel_affine(c, n, dy[0], &dxh));
  TRY(rlx_graph_add_reshape(c->g, n->in[0], gshape, 3, &xr));
  TRY(rlx_graph_add_reshape(c->g, dxh, gshape, 3, &dxr));
  TRY(normalize_backward(c->g, xr, 1u << 2, n->a.eps, dxr, &xh, &dxg));
  TRY(rlx_graph_add_reshape(c->g, dxg, xt.shape, xt.rank, &dx[0]));
  TRY(rlx_graph_add_reshape(c->g, xh, xt.shape, xt.rank, &xh));
  return channel_affine_params(c, n, dy[0], xh, dx);
}

RLX_GRAD_RULE(rlx_grad_channel_norm) {
  rlx_tensor dxh, xh;
  TRY(channel_affine(c, n, dy[0], &dxh));
  TRY(normalize_backward(c->g, n->in[0], 1u << 1, n->a.eps, dxh, &xh, &dx[0]));
  return channel_affine_params(c, n, dy[0], xh, dx);
}

/* Inference BatchNorm is affine in x: y = (x - mean) r gamma + beta with
 * r = rsqrt(var + eps), all per channel. */
RLX_GRAD_RULE(rlx_grad_batch_norm) {
  rlx_graph* g = c->g;
  int32_t r = T(n->in[0])->rank;
  rlx_tensor gam, mean, var, rs, gr, xc, t;
  TRY(per_channel(g, n->in[1], r, &gam));
  TRY(per_channel(g, n->in[3], r, &mean));
  TRY(per_channel(g, n->in[4], r, &var));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, var, (double)n->a.eps, &rs));
  TRY(rlx_graph_add_activation(g, RLX_ACT_RSQRT, rs, &rs));
  TRY(mul(g, gam, rs, &gr));
  TRY(sub(g, n->in[0], mean, &xc));
  if (rlx_grad_wants(c, n, 0)) TRY(mul(g, dy[0], gr, &dx[0]));
  if (rlx_grad_wants(c, n, 1)) {
    TRY(mul(g, xc, rs, &t));
    TRY(mul(g, dy[0], t, &t));
    TRY(channel_sum(g, t, &dx[1]));
  }
  if (rlx_grad_wants(c, n, 2)) TRY(channel_sum(g, dy[0], &dx[2]));
  if (rlx_grad_wants(c, n, 3)) {
    TRY(mul(g, dy[0], gr, &t));
    TRY(channel_sum(g, t, &t));
    TRY(rlx_graph_add_activation(g, RLX_ACT_NEG, t, &dx[3]));
  }
  if (rlx_grad_wants(c, n, 4)) { /* -0.5 gamma r^3 sum(dy (x - mean)) */
    rlx_tensor r3;
    TRY(mul(g, dy[0], xc, &t));
    TRY(channel_sum(g, t, &t));
    TRY(mul(g, rs, rs, &r3));
    TRY(mul(g, r3, gr, &r3));
    TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, r3, -0.5, &r3));
    rlx_type vt = *T(n->in[4]);
    TRY(rlx_graph_add_reshape(g, r3, vt.shape, 1, &r3));
    TRY(mul(g, t, r3, &dx[4]));
  }
  return RLX_OK;
}

/* Sum of v [N, C, ...] over a window of channels [c - lo, c + hi], as the
 * LRN decomposition computes it: an average pool over channels counting
 * the zero pads, times the window size. */
static rlx_status channel_window_sum(rlx_graph* g, rlx_tensor v, int64_t lo, int64_t hi,
                                     rlx_tensor* out) {
  rlx_type t = *rlx_tensor_type(g, v);
  rlx_dim shape[4] = {t.shape[0], 1, t.shape[1], RLX_DIM_INFER};
  int64_t kernel[2] = {lo + hi + 1, 1}, pads[4] = {lo, 0, hi, 0};
  rlx_tensor w;
  TRY(rlx_graph_add_reshape(g, v, shape, 4, &w));
  TRY(rlx_graph_add_pool(g, w, RLX_POOL_AVG, 2, kernel, NULL, pads, NULL, 0, 1, &w));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, w, (double)(lo + hi + 1), &w));
  return rlx_graph_add_reshape(g, w, t.shape, t.rank, out);
}

/* y = x d^-beta, d = bias + alpha / size * S, S = the window sum of x^2:
 * dx = dy d^-beta - 2 x beta alpha / size * S^T(dy x d^(-beta-1)), where the
 * transposed window sum uses the mirrored window. */
RLX_GRAD_RULE(rlx_grad_lrn) {
  rlx_graph* g = c->g;
  rlx_tensor x = n->in[0], sq, d, p, p1, t;
  int64_t size = n->a.size, lo = (size - 1) / 2, hi = size - 1 - lo;
  double k = (double)n->a.alpha / (double)size;
  TRY(mul(g, x, x, &sq));
  TRY(channel_window_sum(g, sq, lo, hi, &d));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, d, k, &d));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, d, (double)n->a.bias, &d));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_POW, d, -(double)n->a.beta, &p));
  TRY(rlx_graph_add_binary(g, RLX_BIN_DIV, p, d, &p1));
  TRY(mul(g, dy[0], x, &t));
  TRY(mul(g, t, p1, &t));
  TRY(channel_window_sum(g, t, hi, lo, &t));
  TRY(mul(g, t, x, &t));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, t, -2.0 * (double)n->a.beta * k, &t));
  TRY(mul(g, dy[0], p, &p));
  return rlx_graph_add_binary(g, RLX_BIN_ADD, p, t, &dx[0]);
}

/* ------------------------------------------------------------------ resize */

/* Resize is separable and linear: y = x with each resized dim d multiplied
 * by its interpolation matrix A_d [out, in] (the taps of scalar_math.h,
 * the same the kernels use; a tf_crop_and_resize row outside the input is
 * the constant extrapolation value, so zero). The adjoint multiplies dy by
 * each A_d^T: dim d moved last, a matmul with A_d, moved back. */
static rlx_status resize_matrix(rlx_graph* g, const rlx_node_attrs* a, int32_t d, int32_t rank,
                                int64_t in, int64_t out, rlx_dtype dt, rlx_tensor* m) {
  double* w = calloc((size_t)(in * out), sizeof(double));
  void* bytes = malloc((size_t)(in * out) * rlx_dtype_size(dt));
  rlx_status st = RLX_OK;
  if (!w || !bytes) st = rlx_fail(&g->err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  double scale = a->scales.v[d] > 0.0f ? (double)a->scales.v[d] : (double)out / (double)in;
  for (int64_t o = 0; st == RLX_OK && o < out; o++) {
    double x = rlx_resize_source(a->coord_mode, o, scale, in, out, (double)a->roi.v[d],
                                 (double)a->roi.v[rank + d]);
    if (a->coord_mode == RLX_COORD_TF_CROP_AND_RESIZE && (x < 0.0 || x > (double)(in - 1)))
      continue;
    int64_t idx[4];
    double tw[4];
    int nt = rlx_resize_taps(a->resize_mode, a->nearest_mode, a->cubic_a, a->exclude_outside, x,
                             in, idx, tw);
    for (int k = 0; k < nt; k++) w[o * in + idx[k]] += tw[k];
  }
  if (st == RLX_OK) st = rlx_dtype_convert(bytes, dt, w, RLX_F64, in * out);
  rlx_dim shape[2] = {out, in};
  if (st == RLX_OK)
    st = rlx_graph_add_constant(g, dt, shape, 2, bytes, (size_t)(in * out) * rlx_dtype_size(dt), m);
  free(w);
  free(bytes);
  return st;
}

RLX_GRAD_RULE(rlx_grad_resize) {
  rlx_graph* g = c->g;
  rlx_type xt = *T(n->in[0]), yt = *T(n->out[0]);
  int32_t r = xt.rank;
  rlx_tensor t = dy[0];
  for (int32_t d = 0; d < r; d++) {
    int64_t in = xt.shape[d], out = yt.shape[d];
    if (in < 0 || out < 0)
      return rlx_fail(&g->err, RLX_UNIMPLEMENTED, "resize gradient needs static dims");
    if (!rlx_resize_dim_moves(&n->a, d, in, out)) continue;
    int32_t perm[RLX_MAX_RANK], inv[RLX_MAX_RANK];
    for (int32_t k = 0, j = 0; k < r; k++)
      if (k != d) perm[j++] = k;
    perm[r - 1] = d;
    for (int32_t k = 0; k < r; k++) inv[perm[k]] = k;
    rlx_tensor m;
    TRY(resize_matrix(g, &n->a, d, r, in, out, xt.dtype, &m));
    TRY(rlx_graph_add_transpose(g, t, perm, r, &t));
    TRY(rlx_graph_add_matmul(g, t, m, 0, 0, &t));
    TRY(rlx_graph_add_transpose(g, t, inv, r, &t));
  }
  dx[0] = t;
  return RLX_OK;
}

/* DequantMatMul: dx = dy . W (the same op in the other role: transpose_b
 * flipped, the same w, scale and aux). The quantized W and its scales get
 * no gradient (stored codes are not differentiable; scales are fixed). */
RLX_GRAD_RULE(rlx_grad_dequant_matmul) {
  if (!rlx_grad_wants(c, n, 0)) return RLX_OK;
  rlx_node_attrs a = n->a;
  a.transpose_b = !n->a.transpose_b;
  rlx_tensor in[4] = {dy[0], n->in[1], n->n_in > 2 ? n->in[2] : RLX_NONE,
                      n->n_in > 3 ? n->in[3] : RLX_NONE};
  rlx_tensor out[RLX_MAX_OUTPUTS] = {RLX_NONE};
  RLX_RETURN_IF_ERROR(rlx_graph_add_node(c->g, RLX_OP_DEQUANT_MATMUL, &a, in, 4, out));
  dx[0] = out[0];
  return RLX_OK;
}
