/* rlx_graph_grad: the reverse sweep. Marks the values a gradient flows
 * into (float values that depend on a wrt), seeds the loss, then visits the
 * nodes from the loss back to the first, calling each node's rule
 * (rlx_grad_rules) and summing the cotangents a value receives from its
 * consumers. Rules append ordinary forward ops to the same graph. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff/grad.h"

int rlx_grad_wants(const rlx_grad_ctx* c, const rlx_node* n, int32_t i) {
  rlx_tensor t = n->in[i];
  return t >= 0 && t < c->n_values && c->needs[t];
}

rlx_status rlx_grad_none(rlx_grad_ctx* c, const rlx_node* n, const rlx_tensor* dy,
                         rlx_tensor* dx) {
  (void)c;
  (void)n;
  (void)dy;
  (void)dx;
  return RLX_OK;
}

rlx_status rlx_grad_scalar(rlx_graph* g, rlx_dtype dt, double v, rlx_tensor* out) {
  unsigned char bytes[8] = {0};
  RLX_RETURN_IF_ERROR(rlx_dtype_convert(bytes, dt, &v, RLX_F64, 1));
  return rlx_graph_add_constant(g, dt, NULL, 0, bytes, rlx_dtype_size(dt), out);
}

rlx_status rlx_grad_zeros(rlx_graph* g, const rlx_type* type, rlx_tensor* out) {
  rlx_type t = *type; /* type may point into g->values, which grows below */
  rlx_tensor z;
  RLX_RETURN_IF_ERROR(rlx_grad_scalar(g, t.dtype, 0.0, &z));
  if (t.rank == 0) {
    *out = z;
    return RLX_OK;
  }
  return rlx_graph_add_expand(g, z, t.shape, t.rank, out);
}

rlx_status rlx_grad_sum_keep(rlx_graph* g, rlx_tensor t, uint32_t axes, rlx_tensor* out) {
  int32_t list[RLX_MAX_RANK], n = 0;
  for (int32_t d = 0; d < RLX_MAX_RANK; d++)
    if (axes & (1u << d)) list[n++] = d;
  if (n == 0) {
    *out = t;
    return RLX_OK;
  }
  return rlx_graph_add_reduce(g, RLX_RED_SUM, t, list, n, 1, out);
}

rlx_status rlx_grad_unbroadcast(rlx_graph* g, rlx_tensor t, const rlx_type* to_type,
                                rlx_tensor* out) {
  rlx_type from = *rlx_tensor_type(g, t), want = *to_type; /* copies: g->values grows */
  const rlx_type* to = &want;
  if (rlx_type_equal(&from, to)) {
    *out = t;
    return RLX_OK;
  }
  int32_t lead = from.rank - to->rank;
  if (lead < 0)
    return rlx_fail(&g->err, RLX_INTERNAL, "gradient of rank %d cannot reduce to rank %d",
                    (int)from.rank, (int)to->rank);
  int32_t axes[RLX_MAX_RANK], n = 0;
  for (int32_t d = 0; d < from.rank; d++)
    if (d < lead || (to->shape[d - lead] == 1 && from.shape[d] != 1)) axes[n++] = d;
  rlx_tensor s = t;
  if (n > 0) RLX_RETURN_IF_ERROR(rlx_graph_add_reduce(g, RLX_RED_SUM, t, axes, n, 0, &s));
  const rlx_type* st = rlx_tensor_type(g, s);
  if (rlx_type_equal(st, to)) {
    *out = s;
    return RLX_OK;
  }
  return rlx_graph_add_reshape(g, s, to->shape, to->rank, out);
}

rlx_status rlx_grad_bin_scalar(rlx_graph* g, rlx_binary_op op, rlx_tensor a, double b,
                               rlx_tensor* out) {
  rlx_tensor s;
  RLX_RETURN_IF_ERROR(rlx_grad_scalar(g, rlx_tensor_type(g, a)->dtype, b, &s));
  return rlx_graph_add_binary(g, op, a, s, out);
}

rlx_status rlx_grad_mask(rlx_graph* g, rlx_tensor cond, rlx_tensor a, rlx_tensor* out) {
  rlx_tensor z;
  RLX_RETURN_IF_ERROR(rlx_grad_scalar(g, rlx_tensor_type(g, a)->dtype, 0.0, &z));
  RLX_RETURN_IF_ERROR(rlx_graph_add_where(g, cond, a, z, out));
  /* where broadcasts: keep a's shape when cond is the larger operand */
  return rlx_grad_unbroadcast(g, *out, rlx_tensor_type(g, a), out);
}

/* ------------------------------------------------------------------ the sweep */

/* The cotangent of a Narrow's window, held back until its source value's
 * cotangent is needed: windows of one value along one axis (the q / k / v
 * slices of a packed projection) then become one Concat of their
 * cotangents and zero gaps, instead of each a zero-padded copy of the whole
 * value, summed. */
typedef struct narrow_piece {
  rlx_tensor dy;
  int64_t start, len;
  int32_t axis;
  int32_t next; /* the value's next piece (-1: none) */
} narrow_piece;

typedef struct sweep {
  rlx_grad_ctx c;
  uint8_t* needs;
  uint8_t* live;  /* per node of the forward graph: an ancestor of the loss */
  rlx_tensor* ct; /* per forward value: its summed cotangent (RLX_NONE: zero) */
  int32_t n_nodes;
  int32_t* first_piece; /* per forward value: its held Narrow windows (-1: none) */
  narrow_piece* pieces;
  int32_t n_pieces, cap_pieces;
} sweep;

/* A value a gradient can flow into: float, and computed from a wrt. */
static void mark_needs(sweep* s, const rlx_tensor* wrt, int32_t n_wrt) {
  rlx_graph* g = s->c.g;
  for (int32_t i = 0; i < n_wrt; i++) s->needs[wrt[i]] = 1;
  for (int32_t k = 0; k < s->n_nodes; k++) {
    const rlx_node* n = &g->nodes[k];
    if (rlx_grad_rules[n->op] == rlx_grad_none) continue;
    int any = 0;
    for (int32_t i = 0; i < n->n_in; i++) any |= n->in[i] >= 0 && s->needs[n->in[i]];
    if (!any) continue;
    for (int32_t o = 0; o < n->n_out; o++)
      if (rlx_dtype_is_float(g->values[n->out[o]].type.dtype)) s->needs[n->out[o]] = 1;
  }
}

static void mark_live(sweep* s, rlx_tensor loss) {
  rlx_graph* g = s->c.g;
  s->live[g->values[loss].node] = 1;
  for (int32_t k = s->n_nodes - 1; k >= 0; k--) {
    if (!s->live[k]) continue;
    const rlx_node* n = &g->nodes[k];
    for (int32_t i = 0; i < n->n_in; i++)
      if (n->in[i] >= 0) s->live[g->values[n->in[i]].node] = 1;
  }
}

/* ct[t] += d (a new Add node when t already has a cotangent). */
static rlx_status accumulate(sweep* s, rlx_tensor t, rlx_tensor d) {
  rlx_graph* g = s->c.g;
  const rlx_type* want = &g->values[t].type;
  const rlx_type* got = rlx_tensor_type(g, d);
  if (!rlx_type_equal(want, got)) {
    char b1[160], b2[160];
    return rlx_fail(&g->err, RLX_INTERNAL, "gradient %s does not match its value %s",
                    rlx_type_str(g, got, b1, sizeof b1), rlx_type_str(g, want, b2, sizeof b2));
  }
  if (s->ct[t] == RLX_NONE) {
    s->ct[t] = d;
    return RLX_OK;
  }
  return rlx_graph_add_binary(g, RLX_BIN_ADD, s->ct[t], d, &s->ct[t]);
}

/* Holds back the cotangent of Narrow node n when its window is static. */
static int hold_narrow(sweep* s, const rlx_node* n, rlx_tensor dy, rlx_status* st) {
  const rlx_type* xt = &s->c.g->values[n->in[0]].type;
  if (n->op != RLX_OP_NARROW || dy == RLX_NONE || n->a.start < 0 || n->a.len < 0 ||
      xt->shape[n->a.axis] < 0 || !rlx_grad_wants(&s->c, n, 0))
    return 0;
  if (s->n_pieces == s->cap_pieces) {
    int32_t cap = s->cap_pieces ? 2 * s->cap_pieces : 64;
    narrow_piece* p = realloc(s->pieces, sizeof *p * (size_t)cap);
    if (!p) {
      *st = rlx_fail(&s->c.g->err, RLX_RESOURCE_EXHAUSTED, "grad: out of host memory");
      return 1;
    }
    s->pieces = p;
    s->cap_pieces = cap;
  }
  rlx_tensor x = n->in[0];
  s->pieces[s->n_pieces] = (narrow_piece){dy, n->a.start, n->a.len, n->a.axis, s->first_piece[x]};
  s->first_piece[x] = s->n_pieces++;
  *st = RLX_OK;
  return 1;
}

/* One cotangent of x's type from windows sorted by start, disjoint, all
 * along `axis`: their cotangents with zero slabs in the gaps, concatenated. */
static rlx_status windows_concat(sweep* s, rlx_tensor x, const narrow_piece* const* w, int32_t n,
                                 rlx_tensor* out) {
  rlx_graph* g = s->c.g;
  rlx_type xt = g->values[x].type;
  int32_t axis = w[0]->axis, k = 0;
  rlx_tensor parts[RLX_MAX_INPUTS];
  int64_t at = 0;
  for (int32_t i = 0; i <= n; i++) {
    int64_t next = i < n ? w[i]->start : xt.shape[axis];
    if (next > at) { /* a gap no window covers */
      rlx_type z = xt;
      z.shape[axis] = next - at;
      RLX_RETURN_IF_ERROR(rlx_grad_zeros(g, &z, &parts[k++]));
    }
    if (i < n) {
      parts[k++] = w[i]->dy;
      at = w[i]->start + w[i]->len;
    }
  }
  if (k == 1) {
    *out = parts[0];
    return RLX_OK;
  }
  return rlx_graph_add_concat(g, parts, k, axis, out);
}

/* Turns x's held windows into cotangent contributions: one Concat when
 * they share an axis and do not overlap (at most RLX_MAX_INPUTS / 2 of
 * them), else one zero-padded Concat each. */
static rlx_status release_windows(sweep* s, rlx_tensor x) {
  enum { MAX_WINDOWS = RLX_MAX_INPUTS / 2 - 1 };
  const narrow_piece* w[MAX_WINDOWS];
  int32_t n = 0, together = 1;
  for (int32_t p = s->first_piece[x]; p >= 0; p = s->pieces[p].next) {
    if (n == MAX_WINDOWS) {
      together = 0;
      break;
    }
    const narrow_piece* q = &s->pieces[p];
    int32_t j = n++; /* insertion sort by start */
    while (j > 0 && w[j - 1]->start > q->start) {
      w[j] = w[j - 1];
      j--;
    }
    w[j] = q;
    together &= q->axis == s->pieces[s->first_piece[x]].axis;
  }
  for (int32_t i = 1; i < n && together; i++)
    together = w[i - 1]->start + w[i - 1]->len <= w[i]->start;
  rlx_tensor d;
  if (together && n > 0) {
    RLX_RETURN_IF_ERROR(windows_concat(s, x, w, n, &d));
    RLX_RETURN_IF_ERROR(accumulate(s, x, d));
  } else {
    for (int32_t p = s->first_piece[x]; p >= 0; p = s->pieces[p].next) {
      const narrow_piece* one = &s->pieces[p];
      RLX_RETURN_IF_ERROR(windows_concat(s, x, &one, 1, &d));
      RLX_RETURN_IF_ERROR(accumulate(s, x, d));
    }
  }
  s->first_piece[x] = -1;
  return RLX_OK;
}

/* Prefixes the rule's failure with the node it was differentiating. */
static rlx_status rule_failed(sweep* s, int32_t k, rlx_status st) {
  rlx_graph* g = s->c.g;
  char what[128], msg[sizeof g->err.msg];
  rlx_node_str(g, k, what, sizeof what);
  snprintf(msg, sizeof msg, "%s", g->err.msg[0] ? g->err.msg
                                                 : "a backward op it needs is not implemented");
  return rlx_fail(&g->err, st, "gradient of %s: %s", what, msg);
}

static rlx_status visit(sweep* s, int32_t k) {
  rlx_graph* g = s->c.g;
  rlx_node n = g->nodes[k]; /* a copy: rules grow g->nodes */
  rlx_tensor dy[RLX_MAX_OUTPUTS], dx[RLX_MAX_INPUTS];
  int any_out = 0, any_in = 0;
  for (int32_t o = 0; o < n.n_out; o++) RLX_RETURN_IF_ERROR(release_windows(s, n.out[o]));
  for (int32_t o = 0; o < n.n_out; o++) {
    dy[o] = s->ct[n.out[o]];
    any_out |= dy[o] != RLX_NONE;
  }
  for (int32_t i = 0; i < n.n_in; i++) {
    dx[i] = RLX_NONE;
    any_in |= rlx_grad_wants(&s->c, &n, i);
  }
  if (!any_out || !any_in) return RLX_OK;
  rlx_status held;
  if (hold_narrow(s, &n, dy[0], &held)) return held;
  rlx_grad_rule rule = rlx_grad_rules[n.op];
  if (!rule) {
    char what[128];
    return rlx_fail(&g->err, RLX_UNIMPLEMENTED,
                    "no gradient rule for %s (it lies between the loss and a wrt)",
                    rlx_node_str(g, k, what, sizeof what));
  }
  rlx_error_clear(&g->err);
  rlx_status st = rule(&s->c, &n, dy, dx);
  if (st != RLX_OK) return rule_failed(s, k, st);
  for (int32_t i = 0; i < n.n_in; i++) {
    if (dx[i] == RLX_NONE || !rlx_grad_wants(&s->c, &n, i)) continue;
    st = accumulate(s, n.in[i], dx[i]);
    if (st != RLX_OK) return rule_failed(s, k, st);
  }
  return RLX_OK;
}

static rlx_status check_args(rlx_graph* g, rlx_tensor loss, const rlx_tensor* wrt, int32_t n_wrt,
                             rlx_tensor seed, rlx_tensor* out_grads) {
  if ((n_wrt > 0 && (!wrt || !out_grads)) || n_wrt < 0)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "grad: %d wrt values with a NULL list",
                    (int)n_wrt);
  if (loss < 0 || loss >= g->n_values)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "grad: loss %d is not a value", (int)loss);
  const rlx_type* lt = &g->values[loss].type;
  char b1[160], b2[160];
  if (!rlx_dtype_is_compute_float(lt->dtype))
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "grad: the loss %s is not a float value",
                    rlx_type_str(g, lt, b1, sizeof b1));
  for (int32_t i = 0; i < n_wrt; i++) {
    if (wrt[i] < 0 || wrt[i] >= g->n_values)
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "grad: wrt[%d] = %d is not a value", (int)i,
                      (int)wrt[i]);
    if (!rlx_dtype_is_compute_float(g->values[wrt[i]].type.dtype))
      return rlx_fail(&g->err, RLX_INVALID_ARGUMENT,
                      "grad: wrt[%d] %s is not a float value: it has no gradient", (int)i,
                      rlx_type_str(g, &g->values[wrt[i]].type, b1, sizeof b1));
  }
  if (seed == RLX_NONE) return RLX_OK;
  if (seed < 0 || seed >= g->n_values)
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "grad: seed %d is not a value", (int)seed);
  if (!rlx_type_equal(&g->values[seed].type, lt))
    return rlx_fail(&g->err, RLX_INVALID_ARGUMENT, "grad: seed %s must have the loss's type %s",
                    rlx_type_str(g, &g->values[seed].type, b1, sizeof b1),
                    rlx_type_str(g, lt, b2, sizeof b2));
  return RLX_OK;
}

static rlx_status seed_loss(sweep* s, rlx_tensor loss, rlx_tensor seed) {
  rlx_graph* g = s->c.g;
  if (seed != RLX_NONE) {
    s->ct[loss] = seed;
    return RLX_OK;
  }
  rlx_type t = g->values[loss].type;
  rlx_tensor one;
  RLX_RETURN_IF_ERROR(rlx_grad_scalar(g, t.dtype, 1.0, &one));
  if (t.rank == 0) {
    s->ct[loss] = one;
    return RLX_OK;
  }
  return rlx_graph_add_expand(g, one, t.shape, t.rank, &s->ct[loss]);
}

static rlx_status sweep_run(sweep* s, rlx_tensor loss, const rlx_tensor* wrt, int32_t n_wrt,
                            rlx_tensor seed, rlx_tensor* out_grads) {
  rlx_graph* g = s->c.g;
  mark_needs(s, wrt, n_wrt);
  mark_live(s, loss);
  RLX_RETURN_IF_ERROR(seed_loss(s, loss, seed));
  for (int32_t k = g->values[loss].node; k >= 0; k--)
    if (s->live[k]) RLX_RETURN_IF_ERROR(visit(s, k));
  for (int32_t i = 0; i < n_wrt; i++) {
    RLX_RETURN_IF_ERROR(release_windows(s, wrt[i]));
    out_grads[i] = s->ct[wrt[i]];
    if (out_grads[i] == RLX_NONE) {
      rlx_type t = g->values[wrt[i]].type;
      RLX_RETURN_IF_ERROR(rlx_grad_zeros(g, &t, &out_grads[i]));
    }
  }
  return RLX_OK;
}

rlx_status rlx_graph_grad(rlx_graph* g, rlx_tensor loss, const rlx_tensor* wrt, int32_t n_wrt,
                          rlx_tensor seed, rlx_tensor* out_grads) {
  if (!g) return RLX_INVALID_ARGUMENT;
  RLX_RETURN_IF_ERROR(check_args(g, loss, wrt, n_wrt, seed, out_grads));
  sweep s = {0};
  s.c.g = g;
  s.c.n_values = g->n_values;
  s.n_nodes = g->n_nodes;
  s.needs = calloc((size_t)g->n_values + 1, 1);
  s.live = calloc((size_t)g->n_nodes + 1, 1);
  s.ct = malloc(sizeof(rlx_tensor) * ((size_t)g->n_values + 1));
  s.first_piece = malloc(sizeof(int32_t) * ((size_t)g->n_values + 1));
  rlx_status st = RLX_RESOURCE_EXHAUSTED;
  if (s.needs && s.live && s.ct && s.first_piece) {
    for (int32_t v = 0; v < g->n_values; v++) {
      s.ct[v] = RLX_NONE;
      s.first_piece[v] = -1;
    }
    s.c.needs = s.needs;
    st = sweep_run(&s, loss, wrt, n_wrt, seed, out_grads);
  } else {
    rlx_fail(&g->err, st, "grad: out of host memory");
  }
  free(s.needs);
  free(s.live);
  free(s.ct);
  free(s.first_piece);
  free(s.pieces);
  return st;
}
