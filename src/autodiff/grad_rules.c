/* Gradient rules of the views, layout ops, elementwise ops and reductions,
 * and the table of every op's rule. Each rule computes the vector-Jacobian
 * product of one op from forward ops (grad.h says what a rule receives). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/grad.h"

#define RLX_GRAD_PI 3.14159265358979323846 /* M_PI is not C11 */

#define T(t) rlx_tensor_type(c->g, (t))
#define TRY RLX_RETURN_IF_ERROR

/* ------------------------------------------------------------------ views and layout */

static RLX_GRAD_RULE(grad_reshape) {
  rlx_type xt = *T(n->in[0]);
  return rlx_graph_add_reshape(c->g, dy[0], xt.shape, xt.rank, &dx[0]);
}

static RLX_GRAD_RULE(grad_cast) {
  return rlx_graph_add_cast(c->g, dy[0], T(n->in[0])->dtype, &dx[0]);
}

static RLX_GRAD_RULE(grad_transpose) {
  int32_t inv[RLX_MAX_RANK], r = T(n->in[0])->rank;
  for (int32_t d = 0; d < r; d++) inv[n->a.perm[d]] = d;
  return rlx_graph_add_transpose(c->g, dy[0], inv, r, &dx[0]);
}

/* Zeros of x's type with dim `axis` set to len (len 0: nothing). */
static rlx_status zeros_slab(rlx_graph* g, const rlx_type* x, int32_t axis, rlx_dim len,
                             rlx_tensor* out) {
  rlx_type t = *x;
  t.shape[axis] = len;
  *out = RLX_NONE;
  if (len == 0) return RLX_OK;
  return rlx_grad_zeros(g, &t, out);
}

/* Narrow's adjoint: dy between zero slabs before and after the window
 * (start and len may be symbolic: the slabs' sizes are dim expressions). */
static RLX_GRAD_RULE(grad_narrow) {
  rlx_type xt = *T(n->in[0]);
  int32_t axis = n->a.axis;
  rlx_dim end, after;
  TRY(rlx_graph_dim_expr(c->g, RLX_DIM_ADD, n->a.start, n->a.len, &end));
  TRY(rlx_graph_dim_expr(c->g, RLX_DIM_SUB, xt.shape[axis], end, &after));
  rlx_tensor parts[3], z;
  int32_t k = 0;
  TRY(zeros_slab(c->g, &xt, axis, n->a.start, &z));
  if (z != RLX_NONE) parts[k++] = z;
  parts[k++] = dy[0];
  TRY(zeros_slab(c->g, &xt, axis, after, &z));
  if (z != RLX_NONE) parts[k++] = z;
  if (k > 1) TRY(rlx_graph_add_concat(c->g, parts, k, axis, &dx[0]));
  else dx[0] = dy[0];
  /* symbolic sizes add up to x's dim without the simplifier seeing it
   * (B+1 + (B+2 - (B+1))): the view restates x's shape */
  if (rlx_type_equal(T(dx[0]), &xt)) return RLX_OK;
  return rlx_graph_add_reshape(c->g, dx[0], xt.shape, xt.rank, &dx[0]);
}

/* Concat's adjoint: each input's window of dy (offsets are dim
 * expressions, so symbolic lengths work). */
static RLX_GRAD_RULE(grad_concat) {
  int32_t axis = n->a.axis;
  rlx_dim at = 0;
  for (int32_t i = 0; i < n->n_in; i++) {
    rlx_dim len = T(n->in[i])->shape[axis];
    if (rlx_grad_wants(c, n, i)) TRY(rlx_graph_add_narrow(c->g, dy[0], axis, at, len, &dx[i]));
    TRY(rlx_graph_dim_expr(c->g, RLX_DIM_ADD, at, len, &at));
  }
  return RLX_OK;
}

static RLX_GRAD_RULE(grad_expand) {
  return rlx_grad_unbroadcast(c->g, dy[0], T(n->in[0]), &dx[0]);
}

static RLX_GRAD_RULE(grad_reverse) {
  int32_t axes[RLX_MAX_RANK], k = 0;
  for (int32_t d = 0; d < RLX_MAX_RANK; d++)
    if (n->a.axes & (1u << d)) axes[k++] = d;
  return rlx_graph_add_reverse(c->g, dy[0], axes, k, &dx[0]);
}

static RLX_GRAD_RULE(grad_gather) {
  return rlx_graph_add_gather_backward(c->g, dy[0], n->in[1], n->a.axis,
                                       T(n->in[0])->shape[n->a.axis], &dx[0]);
}

/* take_along_axis(t, idx, axis) for idx shaped like the result (the
 * transpose of scatter_add with respect to src): a one-hot of idx against
 * every position of t's axis selects the element, and a sum removes the
 * one-hot dim. t's other dims are narrowed to idx's. Static axis size. */
static rlx_status take_along_axis(rlx_graph* g, rlx_tensor t, rlx_tensor idx, int32_t axis,
                                  rlx_tensor* out) {
  rlx_type tt = *rlx_tensor_type(g, t), it = *rlx_tensor_type(g, idx);
  int64_t na = tt.shape[axis];
  if (na < 0)
    return rlx_fail(&g->err, RLX_UNIMPLEMENTED, "scatter_add's src gradient needs a static axis");
  for (int32_t d = 0; d < tt.rank; d++)
    if (d != axis && tt.shape[d] != it.shape[d])
      TRY(rlx_graph_add_narrow(g, t, d, 0, it.shape[d], &t));
  /* t with its axis moved last and a 1 in its place: [.., 1, .., na] */
  int32_t perm[RLX_MAX_RANK], r = tt.rank;
  rlx_dim shape[RLX_MAX_RANK];
  for (int32_t d = 0, k = 0; d < r; d++)
    if (d != axis) perm[k++] = d;
  perm[r - 1] = axis;
  TRY(rlx_graph_add_transpose(g, t, perm, r, &t));
  for (int32_t d = 0; d < r; d++) shape[d] = d == axis ? 1 : it.shape[d];
  shape[r] = na;
  TRY(rlx_graph_add_reshape(g, t, shape, r + 1, &t));
  /* idx (negative counts from the end) as [..idx.., 1] against 0..na-1 */
  rlx_tensor pos, ie, neg, wrapped, hot, zero;
  int64_t* iota = malloc(sizeof(int64_t) * (size_t)(na > 0 ? na : 1));
  RLX_CHECK_ALLOC(&g->err, iota);
  for (int64_t i = 0; i < na; i++) iota[i] = i;
  rlx_dim nas = na;
  rlx_status st = rlx_graph_add_constant(g, RLX_I64, &nas, 1, iota, sizeof(int64_t) * (size_t)na,
                                         &pos);
  free(iota);
  TRY(st);
  TRY(rlx_graph_add_cast(g, idx, RLX_I64, &ie));
  TRY(rlx_grad_scalar(g, RLX_I64, 0, &zero));
  TRY(rlx_graph_add_compare(g, RLX_CMP_LT, ie, zero, &neg));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, ie, (double)na, &wrapped));
  TRY(rlx_graph_add_where(g, neg, wrapped, ie, &ie));
  for (int32_t d = 0; d < r; d++) shape[d] = it.shape[d];
  shape[r] = 1;
  TRY(rlx_graph_add_reshape(g, ie, shape, r + 1, &ie));
  TRY(rlx_graph_add_compare(g, RLX_CMP_EQ, ie, pos, &hot));
  rlx_tensor picked, z;
  TRY(rlx_grad_scalar(g, tt.dtype, 0.0, &z));
  TRY(rlx_graph_add_where(g, hot, t, z, &picked));
  int32_t last = r;
  return rlx_graph_add_reduce(g, RLX_RED_SUM, picked, &last, 1, 0, out);
}

static RLX_GRAD_RULE(grad_scatter_add) {
  if (rlx_grad_wants(c, n, 0)) dx[0] = dy[0];
  if (rlx_grad_wants(c, n, 2)) TRY(take_along_axis(c->g, dy[0], n->in[1], n->a.axis, &dx[2]));
  return RLX_OK;
}

/* ------------------------------------------------------------------ elementwise */

/* d(a op b)/da * dy and d/db * dy at the broadcast shape (y = a op b). */
static rlx_status binary_parts(rlx_graph* g, const rlx_node* n, rlx_tensor dy, rlx_tensor* da,
                               rlx_tensor* db) {
  rlx_tensor a = n->in[0], b = n->in[1], y = n->out[0], t, m;
  switch ((rlx_binary_op)n->a.kind) {
    case RLX_BIN_ADD: *da = dy; *db = dy; return RLX_OK;
    case RLX_BIN_SUB:
      *da = dy;
      return rlx_graph_add_activation(g, RLX_ACT_NEG, dy, db);
    case RLX_BIN_MUL:
      TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, dy, b, da));
      return rlx_graph_add_binary(g, RLX_BIN_MUL, dy, a, db);
    case RLX_BIN_DIV: /* d/db (a / b) = -y / b */
      TRY(rlx_graph_add_binary(g, RLX_BIN_DIV, dy, b, da));
      TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, *da, y, &t));
      return rlx_graph_add_activation(g, RLX_ACT_NEG, t, db);
    case RLX_BIN_MAX: case RLX_BIN_MIN: /* to the side the forward chose (ties: b) */
      TRY(rlx_graph_add_compare(g, n->a.kind == RLX_BIN_MAX ? RLX_CMP_GT : RLX_CMP_LT, a, b, &m));
      TRY(rlx_grad_zeros(g, rlx_tensor_type(g, dy), &t));
      TRY(rlx_graph_add_where(g, m, dy, t, da));
      return rlx_graph_add_where(g, m, t, dy, db);
    case RLX_BIN_POW: { /* b a^(b-1) and y log(a) (0 where a <= 0) */
      rlx_tensor bm1, p, pos, la, z;
      TRY(rlx_grad_bin_scalar(g, RLX_BIN_SUB, b, 1.0, &bm1));
      TRY(rlx_graph_add_binary(g, RLX_BIN_POW, a, bm1, &p));
      TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, p, b, &p));
      TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, dy, p, da));
      TRY(rlx_grad_scalar(g, rlx_tensor_type(g, a)->dtype, 0.0, &z));
      TRY(rlx_graph_add_compare(g, RLX_CMP_GT, a, z, &pos));
      TRY(rlx_graph_add_activation(g, RLX_ACT_LOG, a, &la));
      TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, la, y, &la));
      TRY(rlx_graph_add_binary(g, RLX_BIN_MUL, dy, la, &t));
      TRY(rlx_grad_zeros(g, rlx_tensor_type(g, t), &z));
      return rlx_graph_add_where(g, pos, t, z, db);
    }
    default: return rlx_fail(&g->err, RLX_INTERNAL, "binary kind %d", (int)n->a.kind);
  }
}

static RLX_GRAD_RULE(grad_binary) {
  rlx_tensor da, db;
  TRY(binary_parts(c->g, n, dy[0], &da, &db));
  if (rlx_grad_wants(c, n, 0)) TRY(rlx_grad_unbroadcast(c->g, da, T(n->in[0]), &dx[0]));
  if (rlx_grad_wants(c, n, 1)) TRY(rlx_grad_unbroadcast(c->g, db, T(n->in[1]), &dx[1]));
  return RLX_OK;
}

static RLX_GRAD_RULE(grad_where) {
  rlx_tensor z, d;
  TRY(rlx_grad_zeros(c->g, T(dy[0]), &z));
  if (rlx_grad_wants(c, n, 1)) {
    TRY(rlx_graph_add_where(c->g, n->in[0], dy[0], z, &d));
    TRY(rlx_grad_unbroadcast(c->g, d, T(n->in[1]), &dx[1]));
  }
  if (rlx_grad_wants(c, n, 2)) {
    TRY(rlx_graph_add_where(c->g, n->in[0], z, dy[0], &d));
    TRY(rlx_grad_unbroadcast(c->g, d, T(n->in[2]), &dx[2]));
  }
  return RLX_OK;
}

/* Shorthands for the activation derivatives below. */
static rlx_status mul(rlx_graph* g, rlx_tensor a, rlx_tensor b, rlx_tensor* o) {
  return rlx_graph_add_binary(g, RLX_BIN_MUL, a, b, o);
}
static rlx_status act(rlx_graph* g, rlx_activation k, rlx_tensor a, rlx_tensor* o) {
  return rlx_graph_add_activation(g, k, a, o);
}

/* GELU (erf): Phi(x) + x phi(x); Phi = y / x, 1/2 at x = 0 (no erf op). */
static rlx_status gelu_slope(rlx_graph* g, rlx_tensor x, rlx_tensor y, rlx_tensor* out) {
  rlx_tensor z, half, is0, phi_c, e, xp;
  rlx_dtype dt = rlx_tensor_type(g, x)->dtype;
  TRY(rlx_grad_scalar(g, dt, 0.0, &z));
  TRY(rlx_grad_scalar(g, dt, 0.5, &half));
  TRY(rlx_graph_add_compare(g, RLX_CMP_EQ, x, z, &is0));
  TRY(rlx_graph_add_binary(g, RLX_BIN_DIV, y, x, &phi_c));
  TRY(rlx_graph_add_where(g, is0, half, phi_c, &phi_c));
  TRY(mul(g, x, x, &e));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, e, -0.5, &e));
  TRY(act(g, RLX_ACT_EXP, e, &e));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, e, 1.0 / sqrt(2.0 * RLX_GRAD_PI), &e));
  TRY(mul(g, x, e, &xp));
  return rlx_graph_add_binary(g, RLX_BIN_ADD, phi_c, xp, out);
}

/* GELU (tanh): 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 k x^2), t = tanh(u),
 * u = c (x + k x^3), c = sqrt(2 / pi), k = 0.044715. */
static rlx_status gelu_tanh_slope(rlx_graph* g, rlx_tensor x, rlx_tensor* out) {
  const double cc = sqrt(2.0 / RLX_GRAD_PI), k = 0.044715;
  rlx_tensor x2, u, t, a, b, du;
  TRY(mul(g, x, x, &x2));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, x2, k, &u));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, u, 1.0, &u));
  TRY(mul(g, u, x, &u));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, u, cc, &u));
  TRY(act(g, RLX_ACT_TANH, u, &t));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, t, 1.0, &a));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, a, 0.5, &a));
  TRY(mul(g, t, t, &b));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, b, -1.0, &b));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, b, 1.0, &b));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, x2, 3.0 * k, &du));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, du, 1.0, &du));
  TRY(rlx_grad_bin_scalar(g, RLX_BIN_MUL, du, 0.5 * cc, &du));
  TRY(mul(g, du, x, &du));
  TRY(mul(g, du, b, &b));
  return rlx_graph_add_binary(g, RLX_BIN_ADD, a, b, out);
}

/* dy/dx of y = act(x), from x and y; *out = RLX_NONE for a zero slope. */
static rlx_status act_slope(rlx_graph* g, rlx_activation k, rlx_tensor x, rlx_tensor y,
                            rlx_tensor* out) {
  rlx_tensor t, u;
  *out = RLX_NONE;
  switch (k) {
    case RLX_ACT_NONE: case RLX_ACT_NEG: case RLX_ACT_ROUND:
    case RLX_ACT_RELU: case RLX_ACT_ABS: return RLX_OK; /* handled by the caller */
    case RLX_ACT_SIGMOID: /* y (1 - y) */
      TRY(rlx_grad_bin_scalar(g, RLX_BIN_SUB, y, 1.0, &t));
      TRY(mul(g, t, y, &t));
      return act(g, RLX_ACT_NEG, t, out);
    case RLX_ACT_TANH: /* 1 - y^2 */
      TRY(mul(g, y, y, &t));
      TRY(act(g, RLX_ACT_NEG, t, &t));
      return rlx_grad_bin_scalar(g, RLX_BIN_ADD, t, 1.0, out);
    case RLX_ACT_EXP: *out = y; return RLX_OK;
    case RLX_ACT_LOG: /* 1 / x */
      TRY(rlx_grad_scalar(g, rlx_tensor_type(g, x)->dtype, 1.0, &t));
      return rlx_graph_add_binary(g, RLX_BIN_DIV, t, x, out);
    case RLX_ACT_SQRT: /* 0.5 / y */
      TRY(rlx_grad_scalar(g, rlx_tensor_type(g, x)->dtype, 0.5, &t));
      return rlx_graph_add_binary(g, RLX_BIN_DIV, t, y, out);
    case RLX_ACT_RSQRT: /* -0.5 y / x */
      TRY(rlx_graph_add_binary(g, RLX_BIN_DIV, y, x, &t));
      return rlx_grad_bin_scalar(g, RLX_BIN_MUL, t, -0.5, out);
    case RLX_ACT_GELU: return gelu_slope(g, x, y, out);
    case RLX_ACT_GELU_APPROX: return gelu_tanh_slope(g, x, out);
    case RLX_ACT_SILU: /* s (1 + x (1 - s)) */
      TRY(act(g, RLX_ACT_SIGMOID, x, &t));
      TRY(rlx_grad_bin_scalar(g, RLX_BIN_SUB, t, 1.0, &u));
      TRY(mul(g, u, x, &u));
      TRY(act(g, RLX_ACT_NEG, u, &u));
      TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, u, 1.0, &u));
      return mul(g, t, u, out);
    case RLX_ACT_SIN: return act(g, RLX_ACT_COS, x, out);
    case RLX_ACT_COS:
      TRY(act(g, RLX_ACT_SIN, x, &t));
      return act(g, RLX_ACT_NEG, t, out);
    case RLX_ACT_TAN: /* 1 + y^2 */
      TRY(mul(g, y, y, &t));
      return rlx_grad_bin_scalar(g, RLX_BIN_ADD, t, 1.0, out);
    case RLX_ACT_ATAN: /* 1 / (1 + x^2) */
      TRY(mul(g, x, x, &t));
      TRY(rlx_grad_bin_scalar(g, RLX_BIN_ADD, t, 1.0, &t));
      TRY(rlx_grad_scalar(g, rlx_tensor_type(g, x)->dtype, 1.0, &u));
      return rlx_graph_add_binary(g, RLX_BIN_DIV, u, t, out);
    default: return rlx_fail(&g->err, RLX_INTERNAL, "activation %d", (int)k);
  }
}

rlx_status rlx_grad_activation(rlx_graph* g, rlx_activation k, rlx_tensor x, rlx_tensor y,
                               rlx_tensor dy, rlx_tensor* out) {
  rlx_tensor z, m, s;
  switch (k) {
    case RLX_ACT_NONE: *out = dy; return RLX_OK;
    case RLX_ACT_NEG: return act(g, RLX_ACT_NEG, dy, out);
    case RLX_ACT_ROUND: return rlx_grad_zeros(g, rlx_tensor_type(g, x), out);
    case RLX_ACT_RELU: case RLX_ACT_ABS: /* sign(x) for abs, with sign(0) = 0 */
      TRY(rlx_grad_scalar(g, rlx_tensor_type(g, x)->dtype, 0.0, &z));
      TRY(rlx_graph_add_compare(g, RLX_CMP_GT, x, z, &m));
      TRY(rlx_grad_mask(g, m, dy, &s));
      if (k == RLX_ACT_RELU) {
        *out = s;
        return RLX_OK;
      }
      TRY(rlx_graph_add_compare(g, RLX_CMP_LT, x, z, &m));
      TRY(rlx_grad_mask(g, m, dy, &z));
      return rlx_graph_add_binary(g, RLX_BIN_SUB, s, z, out);
    default:
      TRY(act_slope(g, k, x, y, &s));
      return mul(g, dy, s, out);
  }
}

static RLX_GRAD_RULE(grad_activation) {
  if (n->a.kind == RLX_ACT_ROUND) return RLX_OK; /* piecewise constant: zero */
  return rlx_grad_activation(c->g, (rlx_activation)n->a.kind, n->in[0], n->out[0], dy[0],
                             &dx[0]);
}

/* ------------------------------------------------------------------ reductions */

/* dy of a Reduce brought back to x's shape (the reduced dims re-inserted
 * as 1 when keep_dim was off, then broadcast). */
static rlx_status reduce_spread(rlx_graph* g, const rlx_node* n, rlx_tensor t, int keep,
                                rlx_tensor* out) {
  rlx_type xt = *rlx_tensor_type(g, n->in[0]);
  rlx_dim shape[RLX_MAX_RANK];
  uint32_t axes = n->a.axes ? n->a.axes : (1u << xt.rank) - 1;
  for (int32_t d = 0; d < xt.rank; d++) shape[d] = (axes & (1u << d)) ? 1 : xt.shape[d];
  if (!n->a.keep_dim || !rlx_type_equal(rlx_tensor_type(g, t), &xt))
    TRY(rlx_graph_add_reshape(g, t, shape, xt.rank, &t));
  if (keep) {
    *out = t;
    return RLX_OK;
  }
  return rlx_graph_add_expand(g, t, xt.shape, xt.rank, out);
}

/* Elements a Reduce over n's axes combined; -1 when a reduced dim is
 * symbolic. */
static double reduce_count(rlx_graph* g, const rlx_node* n) {
  const rlx_type* xt = rlx_tensor_type(g, n->in[0]);
  uint32_t axes = n->a.axes ? n->a.axes : (1u << xt->rank) - 1;
  double count = 1;
  for (int32_t d = 0; d < xt->rank; d++) {
    if (!(axes & (1u << d))) continue;
    if (xt->shape[d] < 0) return -1;
    count *= (double)xt->shape[d];
  }
  return count;
}

/* mean: dy spread over the reduced elements, divided by their count (a
 * run-time sum of ones when a reduced dim is symbolic). */
static rlx_status grad_mean(rlx_graph* g, const rlx_node* n, rlx_tensor dy, rlx_tensor* dx) {
  rlx_tensor s, one, cnt;
  double count = reduce_count(g, n);
  TRY(reduce_spread(g, n, dy, 0, &s));
  if (count >= 0) return rlx_grad_bin_scalar(g, RLX_BIN_MUL, s, 1.0 / count, dx);
  rlx_type xt = *rlx_tensor_type(g, n->in[0]);
  TRY(rlx_grad_scalar(g, xt.dtype, 1.0, &one));
  TRY(rlx_graph_add_expand(g, one, xt.shape, xt.rank, &one));
  TRY(rlx_grad_sum_keep(g, one, n->a.axes ? n->a.axes : (1u << xt.rank) - 1, &cnt));
  return rlx_graph_add_binary(g, RLX_BIN_DIV, s, cnt, dx);
}

/* max / min: PyTorch's amax / amin convention, the gradient split evenly
 * between the elements equal to the result. */
static rlx_status grad_extreme(rlx_graph* g, const rlx_node* n, rlx_tensor dy, rlx_tensor* dx) {
  rlx_tensor y, hit, cnt, share;
  rlx_type xt = *rlx_tensor_type(g, n->in[0]);
  TRY(reduce_spread(g, n, n->out[0], 0, &y));
  TRY(rlx_graph_add_compare(g, RLX_CMP_EQ, n->in[0], y, &hit));
  TRY(rlx_graph_add_cast(g, hit, xt.dtype, &cnt));
  uint32_t axes = n->a.axes ? n->a.axes : (1u << xt.rank) - 1;
  TRY(rlx_grad_sum_keep(g, cnt, axes, &cnt));
  TRY(reduce_spread(g, n, dy, 1, &share));
  TRY(rlx_graph_add_binary(g, RLX_BIN_DIV, share, cnt, &share));
  TRY(rlx_graph_add_expand(g, share, xt.shape, xt.rank, &share));
  return rlx_grad_mask(g, hit, share, dx);
}

/* prod: y / x where x != 0; at a lone zero the product of the others. */
static rlx_status grad_prod(rlx_graph* g, const rlx_node* n, rlx_tensor dy, rlx_tensor* dx) {
  rlx_tensor x = n->in[0], z, one, is0, nz, others, y, q, cnt1, r, s;
  rlx_type xt = *rlx_tensor_type(g, x);
  uint32_t axes = n->a.axes ? n->a.axes : (1u << xt.rank) - 1;
  int32_t list[RLX_MAX_RANK], k = 0;
  for (int32_t d = 0; d < xt.rank; d++)
    if (axes & (1u << d)) list[k++] = d;
  TRY(rlx_grad_scalar(g, xt.dtype, 0.0, &z));
  TRY(rlx_grad_scalar(g, xt.dtype, 1.0, &one));
  TRY(rlx_graph_add_compare(g, RLX_CMP_EQ, x, z, &is0));
  TRY(rlx_graph_add_where(g, is0, one, x, &nz));
  TRY(rlx_graph_add_reduce(g, RLX_RED_PROD, nz, list, k, 1, &others));
  TRY(rlx_graph_add_cast(g, is0, xt.dtype, &cnt1));
  TRY(rlx_graph_add_reduce(g, RLX_RED_SUM, cnt1, list, k, 1, &cnt1));
  TRY(rlx_graph_add_compare(g, RLX_CMP_EQ, cnt1, one, &cnt1));
  TRY(rlx_graph_add_where(g, cnt1, others, z, &others)); /* two zeros: 0 everywhere */
  TRY(reduce_spread(g, n, n->out[0], 0, &y));
  TRY(rlx_graph_add_binary(g, RLX_BIN_DIV, y, nz, &q));
  TRY(rlx_graph_add_expand(g, others, xt.shape, xt.rank, &others));
  TRY(rlx_graph_add_where(g, is0, others, q, &r));
  TRY(reduce_spread(g, n, dy, 0, &s));
  return rlx_graph_add_binary(g, RLX_BIN_MUL, s, r, dx);
}

static RLX_GRAD_RULE(grad_reduce) {
  switch ((rlx_reduce_op)n->a.kind) {
    case RLX_RED_SUM: return reduce_spread(c->g, n, dy[0], 0, &dx[0]);
    case RLX_RED_MEAN: return grad_mean(c->g, n, dy[0], &dx[0]);
    case RLX_RED_MAX: case RLX_RED_MIN: return grad_extreme(c->g, n, dy[0], &dx[0]);
    case RLX_RED_PROD: return grad_prod(c->g, n, dy[0], &dx[0]);
    default: return rlx_fail(&c->g->err, RLX_INTERNAL, "reduce kind %d", (int)n->a.kind);
  }
}

static RLX_GRAD_RULE(grad_softmax) {
  return rlx_graph_add_softmax_backward(c->g, n->out[0], dy[0], n->a.axis,
                                        n->op == RLX_OP_LOG_SOFTMAX, &dx[0]);
}

static RLX_GRAD_RULE(grad_cumsum) {
  return rlx_graph_add_cumsum_backward(c->g, dy[0], n->a.axis, n->a.exclusive, n->a.reverse,
                                       &dx[0]);
}

/* TopK values: dy scattered back to the chosen positions (indices have no
 * gradient). */
static RLX_GRAD_RULE(grad_topk) {
  rlx_tensor z;
  if (dy[0] == RLX_NONE) return RLX_OK;
  TRY(rlx_grad_zeros(c->g, T(n->in[0]), &z));
  return rlx_graph_add_scatter_add(c->g, z, n->out[1], dy[0], n->a.axis, &dx[0]);
}

/* ------------------------------------------------------------------ vision layout ops */

static RLX_GRAD_RULE(grad_depth_to_space) {
  if (n->a.d2s_mode == RLX_D2S_DCR)
    return rlx_graph_add_space_to_depth(c->g, dy[0], n->a.block, &dx[0]);
  /* CRD: [N, C, H*b, W*b] -> [N, C, H, b, W, b] -> [N, C, b, b, H, W] */
  rlx_type xt = *T(n->in[0]), yt = *T(n->out[0]);
  int64_t b = n->a.block;
  rlx_dim s6[6] = {yt.shape[0], yt.shape[1], xt.shape[2], b, xt.shape[3], b};
  rlx_tensor t;
  TRY(rlx_graph_add_reshape(c->g, dy[0], s6, 6, &t));
  static const int32_t perm[6] = {0, 1, 3, 5, 2, 4};
  TRY(rlx_graph_add_transpose(c->g, t, perm, 6, &t));
  return rlx_graph_add_reshape(c->g, t, xt.shape, xt.rank, &dx[0]);
}

static RLX_GRAD_RULE(grad_space_to_depth) {
  return rlx_graph_add_depth_to_space(c->g, dy[0], n->a.block, RLX_D2S_DCR, &dx[0]);
}

/* ------------------------------------------------------------------ pad */

/* Adds the slab dy[from : from + len] of `axis`, reversed if asked, into
 * the x-sized gradient acc at x position at (a zero pad on both sides). */
static rlx_status fold_slab(rlx_graph* g, rlx_tensor dy, int32_t axis, int64_t from, int64_t len,
                            int rev, int64_t at, int64_t in, rlx_tensor* acc) {
  if (len <= 0) return RLX_OK;
  rlx_tensor s;
  int32_t r = rlx_tensor_type(g, dy)->rank;
  int64_t pads[2 * RLX_MAX_RANK] = {0};
  TRY(rlx_graph_add_narrow(g, dy, axis, from, len, &s));
  if (rev) TRY(rlx_graph_add_reverse(g, s, &axis, 1, &s));
  pads[axis] = at;
  pads[r + axis] = in - at - len;
  TRY(rlx_graph_add_pad(g, s, RLX_PAD_CONSTANT, pads, 0.0f, &s));
  return rlx_graph_add_binary(g, RLX_BIN_ADD, *acc, s, acc);
}

/* The adjoint of a reflect / edge / wrap pad of one dim by (b, e): the
 * middle of dy, plus each padded slab folded back onto the elements it
 * copied. Pads that reach past one period are not composed. */
static rlx_status unpad_dim(rlx_graph* g, rlx_tensor dy, int32_t mode, int32_t axis, int64_t b,
                            int64_t e, int64_t in, rlx_tensor* out) {
  int64_t limit = mode == RLX_PAD_REFLECT ? in - 1 : in;
  if (b < 0 || e < 0 || b > limit || e > limit || in < 0)
    return rlx_fail(&g->err, RLX_UNIMPLEMENTED,
                    "pad gradient: mode %d pads %lld/%lld of a dim of %lld (crops or pads past "
                    "one period have no rule)", (int)mode, (long long)b, (long long)e,
                    (long long)in);
  rlx_tensor acc;
  TRY(rlx_graph_add_narrow(g, dy, axis, b, in, &acc));
  if (mode == RLX_PAD_REFLECT) {
    TRY(fold_slab(g, dy, axis, 0, b, 1, 1, in, &acc));
    TRY(fold_slab(g, dy, axis, b + in, e, 1, in - 1 - e, in, &acc));
  } else if (mode == RLX_PAD_WRAP) {
    TRY(fold_slab(g, dy, axis, 0, b, 0, in - b, in, &acc));
    TRY(fold_slab(g, dy, axis, b + in, e, 0, 0, in, &acc));
  } else { /* edge: each slab sums onto the first / last element */
    for (int side = 0; side < 2; side++) {
      int64_t len = side ? e : b, from = side ? b + in : 0;
      if (len <= 0) continue;
      rlx_tensor s;
      int32_t r = rlx_tensor_type(g, dy)->rank;
      int64_t pads[2 * RLX_MAX_RANK] = {0};
      TRY(rlx_graph_add_narrow(g, dy, axis, from, len, &s));
      TRY(rlx_grad_sum_keep(g, s, 1u << axis, &s));
      pads[axis] = side ? in - 1 : 0;
      pads[r + axis] = side ? 0 : in - 1;
      TRY(rlx_graph_add_pad(g, s, RLX_PAD_CONSTANT, pads, 0.0f, &s));
      TRY(rlx_graph_add_binary(g, RLX_BIN_ADD, acc, s, &acc));
    }
  }
  *out = acc;
  return RLX_OK;
}

static RLX_GRAD_RULE(grad_pad) {
  rlx_type xt = *T(n->in[0]);
  int32_t r = xt.rank;
  if (n->a.pad_mode == RLX_PAD_CONSTANT) { /* crop back: the pads negated */
    int64_t neg[2 * RLX_MAX_RANK];
    for (int32_t i = 0; i < 2 * r; i++) neg[i] = -n->a.pads.v[i];
    return rlx_graph_add_pad(c->g, dy[0], RLX_PAD_CONSTANT, neg, 0.0f, &dx[0]);
  }
  /* the pad is separable: undo it one dim at a time, last dim first */
  rlx_tensor t = dy[0];
  for (int32_t d = r - 1; d >= 0; d--) {
    int64_t b = n->a.pads.v[d], e = n->a.pads.v[r + d];
    if (b == 0 && e == 0) continue;
    TRY(unpad_dim(c->g, t, n->a.pad_mode, d, b, e, xt.shape[d], &t));
  }
  dx[0] = t;
  return RLX_OK;
}

/* ------------------------------------------------------------------ the table */

const rlx_grad_rule rlx_grad_rules[RLX_OP_COUNT] = {
    [RLX_OP_RESHAPE] = grad_reshape,
    [RLX_OP_CAST] = grad_cast,
    [RLX_OP_STOP_GRADIENT] = rlx_grad_none,
    [RLX_OP_TRANSPOSE] = grad_transpose,
    [RLX_OP_NARROW] = grad_narrow,
    [RLX_OP_CONCAT] = grad_concat,
    [RLX_OP_EXPAND] = grad_expand,
    [RLX_OP_REVERSE] = grad_reverse,
    [RLX_OP_GATHER] = grad_gather,
    [RLX_OP_SCATTER_ADD] = grad_scatter_add,
    [RLX_OP_BINARY] = grad_binary,
    [RLX_OP_COMPARE] = rlx_grad_none,
    [RLX_OP_WHERE] = grad_where,
    [RLX_OP_ACTIVATION] = grad_activation,
    [RLX_OP_MATMUL] = rlx_grad_matmul,
    [RLX_OP_FUSED_MATMUL_BIAS_ACT] = rlx_grad_fused_matmul_bias_act,
    [RLX_OP_REDUCE] = grad_reduce,
    [RLX_OP_ARGMAX] = rlx_grad_none,
    [RLX_OP_ARGMIN] = rlx_grad_none,
    [RLX_OP_SOFTMAX] = grad_softmax,
    [RLX_OP_LOG_SOFTMAX] = grad_softmax,
    [RLX_OP_CUMSUM] = grad_cumsum,
    [RLX_OP_TOPK] = grad_topk,
    [RLX_OP_LAYER_NORM] = rlx_grad_layer_norm,
    [RLX_OP_RMS_NORM] = rlx_grad_rms_norm,
    [RLX_OP_FUSED_RESIDUAL_LAYER_NORM] = rlx_grad_fused_residual_layer_norm,
    [RLX_OP_FUSED_RESIDUAL_RMS_NORM] = rlx_grad_fused_residual_rms_norm,
    [RLX_OP_ATTENTION] = rlx_grad_attention,
    [RLX_OP_ROPE] = rlx_grad_rope,
    [RLX_OP_POOL] = rlx_grad_pool,
    [RLX_OP_PAD] = grad_pad,
    [RLX_OP_DEPTH_TO_SPACE] = grad_depth_to_space,
    [RLX_OP_SPACE_TO_DEPTH] = grad_space_to_depth,
    [RLX_OP_SAMPLE] = rlx_grad_none,
    [RLX_OP_RESIZE] = rlx_grad_resize,
    [RLX_OP_GRID_SAMPLE] = rlx_grad_grid_sample,
    [RLX_OP_ROI_ALIGN] = rlx_grad_roi_align,
    [RLX_OP_CONV] = rlx_grad_conv,
    [RLX_OP_CONV_TRANSPOSE] = rlx_grad_conv_transpose,
    [RLX_OP_IM2COL] = rlx_grad_im2col,
    [RLX_OP_GROUP_NORM] = rlx_grad_group_norm,
    [RLX_OP_CHANNEL_NORM] = rlx_grad_channel_norm,
    [RLX_OP_BATCH_NORM] = rlx_grad_batch_norm,
    [RLX_OP_LRN] = rlx_grad_lrn,
    /* Tier 2 (grad_train.c): the ones linear in their cotangent input */
    [RLX_OP_CROSS_ENTROPY] = rlx_grad_cross_entropy,
    [RLX_OP_CUMSUM_BACKWARD] = rlx_grad_cumsum_backward,
    [RLX_OP_GATHER_BACKWARD] = rlx_grad_gather_backward,
    [RLX_OP_ROPE_BACKWARD] = rlx_grad_rope_backward,
    [RLX_OP_SOFTMAX_BACKWARD] = rlx_grad_softmax_backward,
    [RLX_OP_LOG_SOFTMAX_BACKWARD] = rlx_grad_softmax_backward,
    [RLX_OP_CONV_BACKWARD_WEIGHT] = rlx_grad_conv_backward_weight,
    [RLX_OP_POOL_BACKWARD] = rlx_grad_pool_backward,
    [RLX_OP_DEQUANT_MATMUL] = rlx_grad_dequant_matmul,
    [RLX_OP_GROUPED_MATMUL] = rlx_grad_grouped_matmul,
    [RLX_OP_DEQUANT_GROUPED_MATMUL] = rlx_grad_grouped_matmul,
    /* no rule (an error on a wrt's path): Deferred
     * (compiled through its rebuild hook, never differentiated); the
     * second-order cases AttentionBackward, LayerNormBackward,
     * RmsNormBackward, CrossEntropyBackward; SgdUpdate and AdamUpdate (an
     * update is not differentiated). */
};
