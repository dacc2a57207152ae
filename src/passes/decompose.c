/* Decompose pass (see decompose.h for the rules). */
#include "passes/decompose.h"

#include <stdlib.h>
#include <string.h>

#include "ir/dtype.h"
#include "ir/region.h"

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

/* Scalar constant of dtype dt (made in f32, cast when dt differs). */
static rlx_status add_scalar(rewriter* r, float v, rlx_dtype dt, rlx_tensor* out) {
  RLX_RETURN_IF_ERROR(rlx_graph_add_constant(r->dst, RLX_F32, NULL, 0, &v, sizeof v, out));
  return dt == RLX_F32 ? RLX_OK : rlx_graph_add_cast(r->dst, *out, dt, out);
}

/* x [N, C, spatial...] as [N, 1, C, spatial...] (channels become Pool's
 * first spatial dim); beyond rank 4 the (static) spatial dims are merged
 * into one, as Pool takes at most 3 spatial dims. Returns the new rank. */
static int32_t lrn_window_shape(const rlx_type* t, rlx_dim* shape) {
  shape[0] = t->shape[0];
  shape[1] = 1;
  shape[2] = t->shape[1];
  if (t->rank <= 4) {
    for (int32_t d = 2; d < t->rank; d++) shape[d + 1] = t->shape[d];
    return t->rank + 1;
  }
  shape[3] = 1;
  for (int32_t d = 2; d < t->rank; d++) shape[3] *= t->shape[d];
  return 4;
}

/* LRN -> x*x, reshaped by lrn_window_shape, an average Pool over `size`
 * channels counting the zero pads (= sum / size), then
 * x / (bias + alpha * avg)^beta. ONNX's window: (size-1)/2 channels
 * before, the rest after. */
static rlx_status rule_lrn(rewriter* r, const rlx_node* n) {
  const rlx_type* t = rlx_tensor_type(r->src, n->in[0]);
  rlx_tensor x = mapped(r, n->in[0]), sq, win, k;
  RLX_RETURN_IF_ERROR(add_binary(r, RLX_BIN_MUL, x, x, &sq));
  rlx_dim shape[RLX_MAX_RANK];
  int32_t rank = lrn_window_shape(t, shape);
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(r->dst, sq, shape, rank, &win));
  int32_t ns = rank - 2;
  int64_t kernel[3] = {n->a.size, 1, 1}, pads[6] = {0};
  pads[0] = (n->a.size - 1) / 2;
  pads[ns] = n->a.size - 1 - pads[0];
  RLX_RETURN_IF_ERROR(
      rlx_graph_add_pool(r->dst, win, RLX_POOL_AVG, ns, kernel, NULL, pads, NULL, 0, 1, &win));
  RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(r->dst, win, t->shape, t->rank, &win));
  RLX_RETURN_IF_ERROR(add_scalar(r, n->a.alpha, t->dtype, &k));
  RLX_RETURN_IF_ERROR(add_binary(r, RLX_BIN_MUL, win, k, &win));
  RLX_RETURN_IF_ERROR(add_scalar(r, n->a.bias, t->dtype, &k));
  RLX_RETURN_IF_ERROR(add_binary(r, RLX_BIN_ADD, win, k, &win));
  RLX_RETURN_IF_ERROR(add_scalar(r, n->a.beta, t->dtype, &k));
  RLX_RETURN_IF_ERROR(add_binary(r, RLX_BIN_POW, win, k, &win));
  return add_binary(r, RLX_BIN_DIV, x, win, &r->map[n->out[0]]);
}

static int is_row_op(rlx_op op) {
  return op == RLX_OP_SOFTMAX || op == RLX_OP_LOG_SOFTMAX || op == RLX_OP_CUMSUM ||
         op == RLX_OP_ARGMAX || op == RLX_OP_ARGMIN || op == RLX_OP_TOPK;
}

/* ------------------------------------------------------------------ convolution */

/* Node builders for the convolution rules: each emits one node into dst. */
static rlx_status reshape_to(rewriter* r, rlx_tensor x, int32_t rank, const rlx_dim* shape,
                             rlx_tensor* out) {
  rlx_node_attrs at = {0};
  at.type = *rlx_tensor_type(r->dst, x);
  at.type.rank = rank;
  for (int32_t d = 0; d < RLX_MAX_RANK; d++) at.type.shape[d] = d < rank ? shape[d] : 0;
  return add(r, RLX_OP_RESHAPE, &at, &x, 1, out);
}

static rlx_status transpose_to(rewriter* r, rlx_tensor x, const int32_t* perm, rlx_tensor* out) {
  rlx_node_attrs at = {0};
  int32_t rank = rlx_tensor_type(r->dst, x)->rank;
  for (int32_t d = 0; d < rank; d++) at.perm[d] = perm[d];
  return add(r, RLX_OP_TRANSPOSE, &at, &x, 1, out);
}

/* Zero padding of every dim: pads[2 * rank], begins then ends (negative crops). */
static rlx_status zero_pad(rewriter* r, rlx_tensor x, const int64_t* pads, rlx_tensor* out) {
  int32_t rank = rlx_tensor_type(r->dst, x)->rank;
  int any = 0;
  for (int32_t d = 0; d < 2 * rank; d++) any |= pads[d] != 0;
  if (!any) { *out = x; return RLX_OK; }
  rlx_node_attrs at = {0};
  at.pad_mode = RLX_PAD_CONSTANT;
  at.pads.n = 2 * rank;
  memcpy(at.pads.v, pads, sizeof(int64_t) * (size_t)(2 * rank));
  return add(r, RLX_OP_PAD, &at, &x, 1, out);
}

/* A convolution's description, independent of the node it came from (the
 * ConvTranspose rule builds a Conv of its own). */
typedef struct conv_spec {
  int32_t ns, last, act;       /* spatial dims, channels last, activation */
  int32_t w_ohwi;              /* w is [OC, k..., C/g] (channels_last_ohwi) */
  int64_t groups, C, OC, K;    /* K: taps per channel */
  int64_t kernel[3], stride[3], dilation[3], pad[3], pad_end[3];
} conv_spec;

static int32_t spatial_axis(const conv_spec* c, int32_t i) { return c->last ? 1 + i : 2 + i; }
static int32_t channel_axis(const conv_spec* c) { return c->last ? c->ns + 1 : 1; }

static void spec_of(const rlx_graph* g, const rlx_node* n, conv_spec* c) {
  const rlx_type* w = rlx_tensor_type(g, n->in[1]);
  memset(c, 0, sizeof *c);
  c->ns = n->a.strides.n;
  c->last = rlx_conv_layout_is_last(n->a.conv_layout);
  c->w_ohwi = n->a.conv_layout == RLX_CONV_CHANNELS_LAST_OHWI;
  c->act = n->a.act;
  c->groups = n->a.groups;
  c->C = rlx_tensor_type(g, n->in[0])->shape[channel_axis(c)];
  c->OC = rlx_tensor_type(g, n->out[0])->shape[channel_axis(c)];
  c->K = 1;
  for (int32_t i = 0; i < c->ns; i++) {
    c->kernel[i] = w->shape[rlx_conv_w_axis(n->a.conv_layout, c->ns, i)];
    c->K *= c->kernel[i];
    c->stride[i] = n->a.strides.v[i];
    c->dilation[i] = n->a.dilations.v[i];
    c->pad[i] = n->a.pads.v[i];
    c->pad_end[i] = n->a.pads.v[c->ns + i];
  }
}

/* Pad (zeros, spatial dims only) then an unpadded Im2Col. */
static rlx_status conv_columns(rewriter* r, const conv_spec* c, rlx_tensor x, rlx_tensor* col) {
  int32_t rank = c->ns + 2;
  int64_t pads[2 * RLX_MAX_RANK] = {0};
  for (int32_t i = 0; i < c->ns; i++) {
    pads[spatial_axis(c, i)] = c->pad[i];
    pads[rank + spatial_axis(c, i)] = c->pad_end[i];
  }
  RLX_RETURN_IF_ERROR(zero_pad(r, x, pads, &x));
  rlx_node_attrs at = {0};
  at.kernel.n = at.strides.n = at.dilations.n = c->ns;
  at.pads.n = 2 * c->ns;
  for (int32_t i = 0; i < c->ns; i++) {
    at.kernel.v[i] = c->kernel[i];
    at.strides.v[i] = c->stride[i];
    at.dilations.v[i] = c->dilation[i];
  }
  at.conv_layout = c->last ? RLX_CONV_CHANNELS_LAST : RLX_CONV_CHANNELS_FIRST;
  return add(r, RLX_OP_IM2COL, &at, &x, 1, col);
}

/* Channels first: col [N, C*K, L] -> [N, G, Cg*K, L]; w [OC, Cg, k...] ->
 * [G, OCg, Cg*K]; y = w . col, [N, G, OCg, L] = [N, OC, L]. */
static rlx_status conv_matmul_first(rewriter* r, const conv_spec* c, rlx_tensor col, rlx_tensor w,
                                    rlx_tensor* y) {
  const rlx_type* ct = rlx_tensor_type(r->dst, col);
  rlx_dim N = ct->shape[0], L = ct->shape[2], G = c->groups;
  rlx_dim cs[4] = {N, G, c->C / G * c->K, L}, ws[3] = {G, c->OC / G, c->C / G * c->K};
  RLX_RETURN_IF_ERROR(reshape_to(r, col, 4, cs, &col));
  RLX_RETURN_IF_ERROR(reshape_to(r, w, 3, ws, &w));
  rlx_node_attrs at = {0};
  rlx_tensor in[2] = {w, col};
  return add(r, RLX_OP_MATMUL, &at, in, 2, y); /* [N, G, OCg, L] */
}

/* Channels last: col [N, L, K*C], row (k, g, cg) -> [N, G, L, K*Cg] (a
 * transpose of the columns only when G > 1); w [OC, Cg, k...] -> [G, OCg,
 * K*Cg] with (k, cg) order; y = col . w^T, [N, G, L, OCg] -> [N, L, OC]. */
static rlx_status conv_matmul_last(rewriter* r, const conv_spec* c, rlx_tensor col, rlx_tensor w,
                                   rlx_tensor* y) {
  const rlx_type* ct = rlx_tensor_type(r->dst, col);
  rlx_dim N = ct->shape[0], L = ct->shape[1], G = c->groups, cg = c->C / G, ocg = c->OC / G;
  rlx_dim cs[5] = {N, L, c->K, G, cg};
  RLX_RETURN_IF_ERROR(reshape_to(r, col, 5, cs, &col));
  if (G > 1) {
    int32_t perm[5] = {0, 3, 1, 2, 4};
    RLX_RETURN_IF_ERROR(transpose_to(r, col, perm, &col));
  }
  rlx_dim cs2[4] = {N, G, L, c->K * cg};
  RLX_RETURN_IF_ERROR(reshape_to(r, col, 4, cs2, &col));
  if (!c->w_ohwi) { /* w [G, OCg, Cg, k...] -> [G, OCg, k..., Cg] */
    rlx_dim ws[RLX_MAX_RANK] = {G, ocg, cg};
    int32_t perm[RLX_MAX_RANK] = {0, 1};
    for (int32_t i = 0; i < c->ns; i++) {
      ws[3 + i] = c->kernel[i];
      perm[2 + i] = 3 + i;
    }
    perm[2 + c->ns] = 2;
    RLX_RETURN_IF_ERROR(reshape_to(r, w, 3 + c->ns, ws, &w));
    RLX_RETURN_IF_ERROR(transpose_to(r, w, perm, &w));
  }
  rlx_dim ws2[3] = {G, ocg, c->K * cg};
  RLX_RETURN_IF_ERROR(reshape_to(r, w, 3, ws2, &w));
  rlx_node_attrs at = {0};
  at.transpose_b = 1;
  rlx_tensor in[2] = {col, w};
  RLX_RETURN_IF_ERROR(add(r, RLX_OP_MATMUL, &at, in, 2, y)); /* [N, G, L, OCg] */
  if (G == 1) return RLX_OK;
  int32_t back[4] = {0, 2, 1, 3};
  return transpose_to(r, *y, back, y);
}

/* y = act(conv(x, w) + bias + residual) from native ops only: [Pad] +
 * Im2Col (a strided copy) + one batched MatMul over the groups, then the
 * bias, residual and activation as elementwise ops. out_type is y's type. */
static rlx_status emit_conv(rewriter* r, const conv_spec* c, rlx_tensor x, rlx_tensor w,
                            rlx_tensor bias, rlx_tensor residual, const rlx_type* out_type,
                            rlx_tensor* out) {
  rlx_tensor col, y;
  RLX_RETURN_IF_ERROR(conv_columns(r, c, x, &col));
  if (c->last) RLX_RETURN_IF_ERROR(conv_matmul_last(r, c, col, w, &y));
  else RLX_RETURN_IF_ERROR(conv_matmul_first(r, c, col, w, &y));
  RLX_RETURN_IF_ERROR(reshape_to(r, y, out_type->rank, out_type->shape, &y));
  if (bias != RLX_NONE) {
    /* [OC] broadcasts over channels last as is; channels first needs
     * [OC, 1, ...] */
    if (!c->last) {
      rlx_dim bs[4] = {c->OC, 1, 1, 1};
      RLX_RETURN_IF_ERROR(reshape_to(r, bias, 1 + c->ns, bs, &bias));
    }
    RLX_RETURN_IF_ERROR(add_binary(r, RLX_BIN_ADD, y, bias, &y));
  }
  if (residual != RLX_NONE) RLX_RETURN_IF_ERROR(add_binary(r, RLX_BIN_ADD, y, residual, &y));
  if (c->act != RLX_ACT_NONE) {
    rlx_node_attrs aa = {0};
    aa.kind = c->act;
    RLX_RETURN_IF_ERROR(add(r, RLX_OP_ACTIVATION, &aa, &y, 1, &y));
  }
  *out = y;
  return RLX_OK;
}

static rlx_tensor optional_in(const rewriter* r, const rlx_node* n, int32_t i) {
  return i < n->n_in ? mapped(r, n->in[i]) : RLX_NONE;
}

static rlx_status rule_conv(rewriter* r, const rlx_node* n) {
  conv_spec c;
  spec_of(r->src, n, &c);
  return emit_conv(r, &c, mapped(r, n->in[0]), mapped(r, n->in[1]), optional_in(r, n, 2),
                   optional_in(r, n, 3), rlx_tensor_type(r->src, n->out[0]), &r->map[n->out[0]]);
}

/* ConvTranspose's input with stride - 1 zeros after every element of each
 * spatial dim: a size-1 dim after each spatial dim, padded at its end,
 * then merged (length in * stride; the trailing zeros are cropped by the
 * following pad). Rank 2 + 2 * ns <= RLX_MAX_RANK. */
static rlx_status insert_zeros(rewriter* r, const conv_spec* c, rlx_tensor x, rlx_tensor* out) {
  const rlx_type* t = rlx_tensor_type(r->dst, x);
  int any = 0;
  for (int32_t i = 0; i < c->ns; i++) any |= c->stride[i] > 1;
  if (!any) { *out = x; return RLX_OK; }
  rlx_dim split[RLX_MAX_RANK], merged[RLX_MAX_RANK];
  int64_t pads[2 * RLX_MAX_RANK] = {0};
  /* t points into dst's value table, which the nodes added below may move */
  int32_t rank = 0, er = c->ns + 2 + c->ns, x_rank = t->rank;
  for (int32_t d = 0; d < x_rank; d++) {
    merged[d] = t->shape[d];
    split[rank++] = t->shape[d];
    int32_t i = c->last ? d - 1 : d - 2;
    if (i < 0 || i >= c->ns) continue;
    split[rank] = 1;
    pads[er + rank] = c->stride[i] - 1;
    rank++;
    merged[d] = t->shape[d] * c->stride[i];
  }
  RLX_RETURN_IF_ERROR(reshape_to(r, x, rank, split, &x));
  RLX_RETURN_IF_ERROR(zero_pad(r, x, pads, &x));
  return reshape_to(r, x, x_rank, merged, out);
}

/* ConvTranspose's weights [C, OCg, k...] as a Conv's [OC, Cg, k...]:
 * per group swap the channel dims, and reverse the taps. */
static rlx_status transposed_weights(rewriter* r, const conv_spec* c, rlx_tensor w,
                                     rlx_tensor* out) {
  rlx_dim G = c->groups, cg = c->C / G, ocg = c->OC / G;
  rlx_dim ws[RLX_MAX_RANK] = {G, cg, ocg};
  int32_t perm[RLX_MAX_RANK] = {0, 2, 1};
  for (int32_t i = 0; i < c->ns; i++) {
    ws[3 + i] = c->kernel[i];
    perm[3 + i] = 3 + i;
  }
  RLX_RETURN_IF_ERROR(reshape_to(r, w, 3 + c->ns, ws, &w));
  RLX_RETURN_IF_ERROR(transpose_to(r, w, perm, &w));
  rlx_dim cs[RLX_MAX_RANK] = {c->OC, cg};
  for (int32_t i = 0; i < c->ns; i++) cs[2 + i] = c->kernel[i];
  RLX_RETURN_IF_ERROR(reshape_to(r, w, 2 + c->ns, cs, &w));
  rlx_node_attrs at = {0};
  for (int32_t i = 0; i < c->ns; i++) at.axes |= 1u << (2 + i);
  return add(r, RLX_OP_REVERSE, &at, &w, 1, out);
}

/* ConvTranspose = Conv (stride 1, same dilation) over the zero-inserted
 * input padded by dilation * (k - 1) - pad on each side (output_padding
 * more at the end; negative pads crop), with the weights of
 * transposed_weights. Everything stays native: reshapes, Pad, Reverse,
 * and the Conv rule's Im2Col + MatMul. */
static rlx_status rule_conv_transpose(rewriter* r, const rlx_node* n) {
  conv_spec c;
  spec_of(r->src, n, &c);
  rlx_tensor x, w;
  RLX_RETURN_IF_ERROR(insert_zeros(r, &c, mapped(r, n->in[0]), &x));
  RLX_RETURN_IF_ERROR(transposed_weights(r, &c, mapped(r, n->in[1]), &w));
  int32_t rank = c.ns + 2;
  int64_t pads[2 * RLX_MAX_RANK] = {0};
  conv_spec inner = c;
  for (int32_t i = 0; i < c.ns; i++) {
    int64_t span = c.dilation[i] * (c.kernel[i] - 1);
    pads[spatial_axis(&c, i)] = span - c.pad[i];
    pads[rank + spatial_axis(&c, i)] = span - c.pad_end[i] + n->a.output_padding.v[i] - (c.stride[i] - 1);
    inner.stride[i] = 1;
    inner.pad[i] = inner.pad_end[i] = 0;
  }
  RLX_RETURN_IF_ERROR(zero_pad(r, x, pads, &x));
  return emit_conv(r, &inner, x, w, optional_in(r, n, 2), optional_in(r, n, 3),
                   rlx_tensor_type(r->src, n->out[0]), &r->map[n->out[0]]);
}

/* ConvBackwardWeight's description: C from x, OC from dy, the kernel
 * sizes from its attribute. */
static void wgrad_spec_of(const rlx_graph* g, const rlx_node* n, conv_spec* c) {
  memset(c, 0, sizeof *c);
  c->ns = n->a.kernel.n;
  c->last = rlx_conv_layout_is_last(n->a.conv_layout);
  c->w_ohwi = n->a.conv_layout == RLX_CONV_CHANNELS_LAST_OHWI;
  c->groups = n->a.groups;
  c->C = rlx_tensor_type(g, n->in[0])->shape[channel_axis(c)];
  c->OC = rlx_tensor_type(g, n->in[1])->shape[channel_axis(c)];
  c->K = 1;
  for (int32_t i = 0; i < c->ns; i++) {
    c->kernel[i] = n->a.kernel.v[i];
    c->K *= c->kernel[i];
    c->stride[i] = n->a.strides.v[i];
    c->dilation[i] = n->a.dilations.v[i];
    c->pad[i] = n->a.pads.v[i];
    c->pad_end[i] = n->a.pads.v[c->ns + i];
  }
}

/* Sum over the batch (axis 0, dropped). */
static rlx_status sum_batch(rewriter* r, rlx_tensor x, rlx_tensor* out) {
  rlx_node_attrs at = {0};
  at.kind = RLX_RED_SUM;
  at.axes = 1u;
  return add(r, RLX_OP_REDUCE, &at, &x, 1, out);
}

/* d_w per image and group as one batched MatMul of dy with the forward's
 * columns, then summed over the images:
 *   channels first: dy [N, G, OCg, L] . col [N, G, Cg*K, L]^T -> [N, G, OCg, Cg*K];
 *   channels last:  dy [N, G, L, OCg]^T . col [N, G, L, K*Cg] -> [N, G, OCg, K*Cg]
 * (tap-major, OHWI; transposed to [OC, Cg, k...] for OIHW weights). */
static rlx_status rule_conv_wgrad(rewriter* r, const rlx_node* n) {
  conv_spec c;
  wgrad_spec_of(r->src, n, &c);
  rlx_tensor col, dy = mapped(r, n->in[1]), dw;
  RLX_RETURN_IF_ERROR(conv_columns(r, &c, mapped(r, n->in[0]), &col));
  const rlx_type* ct = rlx_tensor_type(r->dst, col);
  rlx_dim N = ct->shape[0], L = c.last ? ct->shape[1] : ct->shape[2], G = c.groups;
  rlx_dim cg = c.C / G, ocg = c.OC / G;
  rlx_node_attrs mm = {0};
  if (!c.last) {
    rlx_dim cs[4] = {N, G, cg * c.K, L}, ds[4] = {N, G, ocg, L};
    RLX_RETURN_IF_ERROR(reshape_to(r, col, 4, cs, &col));
    RLX_RETURN_IF_ERROR(reshape_to(r, dy, 4, ds, &dy));
    mm.transpose_b = 1;
  } else {
    rlx_dim cs[5] = {N, L, c.K, G, cg}, ds[4] = {N, L, G, ocg};
    RLX_RETURN_IF_ERROR(reshape_to(r, col, 5, cs, &col));
    RLX_RETURN_IF_ERROR(reshape_to(r, dy, 4, ds, &dy));
    if (G > 1) {
      int32_t pc[5] = {0, 3, 1, 2, 4}, pd[4] = {0, 2, 1, 3};
      RLX_RETURN_IF_ERROR(transpose_to(r, col, pc, &col));
      RLX_RETURN_IF_ERROR(transpose_to(r, dy, pd, &dy));
    }
    rlx_dim cs2[4] = {N, G, L, c.K * cg}, ds2[4] = {N, G, L, ocg};
    RLX_RETURN_IF_ERROR(reshape_to(r, col, 4, cs2, &col));
    RLX_RETURN_IF_ERROR(reshape_to(r, dy, 4, ds2, &dy));
    mm.transpose_a = 1;
  }
  rlx_tensor in[2] = {dy, col};
  RLX_RETURN_IF_ERROR(add(r, RLX_OP_MATMUL, &mm, in, 2, &dw));
  RLX_RETURN_IF_ERROR(sum_batch(r, dw, &dw));
  const rlx_type* wt = rlx_tensor_type(r->src, n->out[0]);
  if (!c.last || c.w_ohwi) return reshape_to(r, dw, wt->rank, wt->shape, &r->map[n->out[0]]);
  rlx_dim hwi[RLX_MAX_RANK] = {c.OC}; /* [OC, k..., Cg] -> [OC, Cg, k...] */
  int32_t perm[RLX_MAX_RANK] = {0, c.ns + 1};
  for (int32_t i = 0; i < c.ns; i++) {
    hwi[1 + i] = c.kernel[i];
    perm[2 + i] = 1 + i;
  }
  hwi[c.ns + 1] = cg;
  RLX_RETURN_IF_ERROR(reshape_to(r, dw, c.ns + 2, hwi, &dw));
  return transpose_to(r, dw, perm, &r->map[n->out[0]]);
}

/* Im2Col with padding -> Pad + unpadded Im2Col, on every backend: the
 * lowering of Im2Col is a single strided copy, which cannot pad. */
static int im2col_padded(const rlx_node* n) {
  if (n->op != RLX_OP_IM2COL) return 0;
  for (int32_t i = 0; i < n->a.pads.n; i++)
    if (n->a.pads.v[i]) return 1;
  return 0;
}

static rlx_status rule_im2col_pad(rewriter* r, const rlx_node* n) {
  conv_spec c;
  memset(&c, 0, sizeof c);
  c.ns = n->a.kernel.n;
  c.last = n->a.conv_layout == RLX_CONV_CHANNELS_LAST;
  for (int32_t i = 0; i < c.ns; i++) {
    c.kernel[i] = n->a.kernel.v[i];
    c.stride[i] = n->a.strides.v[i];
    c.dilation[i] = n->a.dilations.v[i];
    c.pad[i] = n->a.pads.v[i];
    c.pad_end[i] = n->a.pads.v[c.ns + i];
  }
  return conv_columns(r, &c, mapped(r, n->in[0]), &r->map[n->out[0]]);
}

/* ElementwiseRegion on a backend without its kernel -> one Binary /
 * Activation / Cast / scalar Constant per instruction (the op's own
 * definition: each result rounded to the region's dtype as it is stored),
 * and an Expand when the last result does not span every input's shape. */
static rlx_status region_const(rewriter* r, rlx_dtype t, double v, rlx_tensor* out) {
  uint8_t cell[8];
  rlx_store_f64(cell, t, 0, v);
  rlx_node_attrs at = {0};
  at.type.dtype = t;
  at.type.rank = 0;
  at.data = cell;
  at.data_bytes = rlx_dtype_size(t);
  return add(r, RLX_OP_CONSTANT, &at, NULL, 0, out);
}

static rlx_status region_instr(rewriter* r, const rlx_node* n, const rlx_region_program* p,
                               int32_t k, const rlx_tensor* slot, rlx_tensor* out) {
  const rlx_region_instr* in = &p->code[k];
  rlx_node_attrs at = {0};
  switch (in->kind) {
    case RLX_RI_UNARY:
      at.kind = in->op;
      return add(r, RLX_OP_ACTIVATION, &at, &slot[in->a], 1, out);
    case RLX_RI_BINARY: return add_binary(r, (rlx_binary_op)in->op, slot[in->a], slot[in->b], out);
    case RLX_RI_CAST:
      at.type = *rlx_tensor_type(r->src, n->in[in->a]);
      at.type.dtype = (rlx_dtype)p->dtype;
      return add(r, RLX_OP_CAST, &at, &slot[in->a], 1, out);
    default: return region_const(r, (rlx_dtype)p->dtype, p->imm[k], out);
  }
}

static rlx_status rule_region(rewriter* r, const rlx_node* n) {
  rlx_region_program p;
  char msg[256];
  rlx_dtype dt[RLX_REGION_MAX_INPUTS];
  for (int32_t i = 0; i < n->n_in && i < RLX_REGION_MAX_INPUTS; i++)
    dt[i] = rlx_tensor_type(r->src, n->in[i])->dtype;
  if (rlx_region_decode(n->a.data, n->a.data_bytes, dt, n->n_in, &p, msg, sizeof msg))
    return rlx_fail(&r->dst->err, RLX_INVALID_ARGUMENT, "elementwise_region: %s", msg);
  rlx_tensor slot[RLX_REGION_MAX_SLOTS];
  for (int32_t i = 0; i < p.n_inputs; i++) slot[i] = mapped(r, n->in[i]);
  for (int32_t k = 0; k < p.n_instrs; k++)
    RLX_RETURN_IF_ERROR(region_instr(r, n, &p, k, slot, &slot[p.n_inputs + k]));
  rlx_tensor y = slot[p.n_inputs + p.n_instrs - 1];
  const rlx_type* want = rlx_tensor_type(r->src, n->out[0]);
  if (!rlx_type_equal(rlx_tensor_type(r->dst, y), want)) {
    rlx_node_attrs at = {0};
    at.type = *want;
    RLX_RETURN_IF_ERROR(add(r, RLX_OP_EXPAND, &at, &y, 1, &y));
  }
  r->map[n->out[0]] = y;
  if (n->label) RLX_RETURN_IF_ERROR(rlx_graph_set_name(r->dst, y, n->label));
  return RLX_OK;
}

/* Applies the rule for node n if it has one; *applied says whether it did. */
static rlx_status try_rule(rewriter* r, const rlx_node* n, int* applied) {
  *applied = 1;
  switch (n->op) {
    case RLX_OP_FUSED_MATMUL_BIAS_ACT: return rule_fused_matmul(r, n);
    case RLX_OP_FUSED_RESIDUAL_LAYER_NORM:
    case RLX_OP_FUSED_RESIDUAL_RMS_NORM: return rule_fused_residual_norm(r, n);
    case RLX_OP_CONV: return rule_conv(r, n);
    case RLX_OP_CONV_TRANSPOSE: return rule_conv_transpose(r, n);
    case RLX_OP_CONV_BACKWARD_WEIGHT: return rule_conv_wgrad(r, n);
    case RLX_OP_ELEMENTWISE_REGION: return rule_region(r, n);
    case RLX_OP_IM2COL:
      if (im2col_padded(n)) return rule_im2col_pad(r, n);
      break;
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
    /* LRN has no kernel anywhere: it is always a composition. */
    if (n->op == RLX_OP_LRN) {
      s = rule_lrn(&r, n);
      applied = s == RLX_OK;
    } else if (!supports(g, i) || im2col_padded(n)) {
      s = try_rule(&r, n, &applied);
    }
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
