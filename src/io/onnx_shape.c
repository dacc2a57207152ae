/* Shape values: the shape arithmetic of exported models, on symbolic dims.
 *
 * torch.onnx.export with dynamic axes writes Shape -> Gather -> Unsqueeze ->
 * Concat -> Reshape chains (and Div, Mul, Equal, Where on them). With static
 * shapes the importer folds them into constants; with a symbolic dim (B, T)
 * this layer carries them as rlx_ox_sv, small int lists whose elements are
 * rlx_dims, building dim expressions (B*T, T-1) in the graph's table. The
 * consumers (Reshape, Expand, ConstantOfShape, Slice, Range) then take the
 * symbolic sizes, so the model imports once and runs at any size. A node
 * this layer cannot compute (a shape value used as data) runs its ordinary
 * mapper, which gets the shape value as a tensor (rlx_ox_sv_tensor). */
#include <stdlib.h>
#include <string.h>

#include "io/onnx.h"
#include "io/onnx_helpers.h"
#include "ir/dtype.h"
#include "ir/graph.h"

#ifdef RLX_HAVE_ONNX

/* ------------------------------------------------------------------ tensors from shape values */

/* A symbolic dim d as data: f32 ones expanded to [d] and summed, cast to
 * int64. Exact (d < 2^24), and once the graph is specialised the expand has a
 * static size, so constant folding turns the chain into a constant: no op
 * that holds dims is needed. */
static rlx_status dim_tensor(rlx_graph* g, rlx_dim d, rlx_tensor* out) {
  float one = 1.0f;
  rlx_dim shape1 = 1;
  rlx_tensor t;
  RLX_RETURN_IF_ERROR(rlx_graph_add_constant(g, RLX_F32, &shape1, 1, &one, sizeof one, &t));
  RLX_RETURN_IF_ERROR(rlx_graph_add_expand(g, t, &d, 1, &t));
  int32_t axis = 0;
  RLX_RETURN_IF_ERROR(rlx_graph_add_reduce(g, RLX_RED_SUM, t, &axis, 1, 1, &t));
  return rlx_graph_add_cast(g, t, RLX_I64, out);
}

rlx_status rlx_ox_sv_tensor(rlx_graph* g, const rlx_ox_sv* sv, rlx_tensor* out) {
  rlx_tensor parts[RLX_OX_SV_MAX] = {0};
  if (sv->n < 1 || sv->n > RLX_OX_SV_MAX)
    return rlx_fail(&g->err, RLX_INTERNAL, "shape value has %d elements", (int)sv->n);
  for (int32_t i = 0; i < sv->n; i++) {
    if (sv->sym[i]) {
      RLX_RETURN_IF_ERROR(dim_tensor(g, sv->v[i], &parts[i]));
    } else {
      rlx_dim one = 1;
      RLX_RETURN_IF_ERROR(rlx_graph_add_constant(g, RLX_I64, &one, 1, &sv->v[i], sizeof(int64_t),
                                                 &parts[i]));
    }
  }
  rlx_tensor t = parts[0];
  if (sv->n > 1) RLX_RETURN_IF_ERROR(rlx_graph_add_concat(g, parts, sv->n, 0, &t));
  if (sv->rank == 0) RLX_RETURN_IF_ERROR(rlx_graph_add_reshape(g, t, NULL, 0, &t));
  if (sv->dtype != RLX_I64) RLX_RETURN_IF_ERROR(rlx_graph_add_cast(g, t, sv->dtype, &t));
  *out = t;
  return RLX_OK;
}

rlx_status rlx_ox_iota(rlx_graph* g, rlx_dim n, rlx_tensor* out) {
  float one = 1.0f;
  rlx_dim shape1 = 1;
  rlx_tensor t;
  RLX_RETURN_IF_ERROR(rlx_graph_add_constant(g, RLX_F32, &shape1, 1, &one, sizeof one, &t));
  RLX_RETURN_IF_ERROR(rlx_graph_add_expand(g, t, &n, 1, &t));
  return rlx_graph_add_cumsum(g, t, 0, 1, 0, out);
}

/* ------------------------------------------------------------------ inputs */

/* Input i as a shape value: a shape value, or a known int scalar / list. */
static int sv_operand(rlx_ox_ctx* c, int32_t i, rlx_ox_sv* out) {
  const rlx_ox_sv* sv = rlx_ox_sv_in(c, i);
  if (sv) {
    *out = *sv;
    return 1;
  }
  const rlx_host_tensor* k = rlx_ox_known(c, i);
  if (!k || k->rank > 1 || !rlx_dtype_is_int(k->dtype)) return 0;
  int64_t n = rlx_host_numel(k);
  if (n > RLX_OX_SV_MAX) return 0;
  memset(out, 0, sizeof *out);
  out->dtype = k->dtype;
  out->rank = k->rank;
  out->n = (int32_t)n;
  for (int64_t j = 0; j < n; j++) out->v[j] = rlx_load_i64(k->data, k->dtype, j);
  return 1;
}

/* Shape value of x's dims [start, end). */
static void sv_of_dims(const rlx_dim* dims, int32_t n, rlx_ox_sv* out) {
  memset(out, 0, sizeof *out);
  out->dtype = RLX_I64;
  out->rank = 1;
  out->n = n;
  for (int32_t i = 0; i < n; i++) {
    out->v[i] = dims[i];
    out->sym[i] = dims[i] < 0;
  }
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ------------------------------------------------------------------ ops */

static rlx_status sv_shape(rlx_ox_ctx* c, int* handled) {
  rlx_type t;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, 0, &t));
  int64_t start, end;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "start", 0, &start));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "end", t.rank, &end));
  if (start < 0) start += t.rank;
  if (end < 0) end += t.rank;
  start = clamp64(start, 0, t.rank);
  end = clamp64(end, start, t.rank);
  rlx_ox_sv sv;
  sv_of_dims(t.shape + start, (int32_t)(end - start), &sv);
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &sv);
}

static rlx_status sv_size(rlx_ox_ctx* c, int* handled) {
  rlx_type t;
  RLX_RETURN_IF_ERROR(rlx_ox_type(c, 0, &t));
  rlx_dim n = 1;
  for (int32_t i = 0; i < t.rank; i++) G(rlx_graph_dim_expr(GRAPH, RLX_DIM_MUL, n, t.shape[i], &n));
  rlx_ox_sv sv;
  sv_of_dims(&n, 1, &sv);
  sv.rank = 0;
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &sv);
}

static rlx_status sv_gather(rlx_ox_ctx* c, int* handled) {
  int64_t axis;
  rlx_ox_sv x, idx, out;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 0, &axis));
  if (!rlx_ox_sv_in(c, 0) || !sv_operand(c, 1, &idx) || idx.rank > 1) return RLX_OK;
  sv_operand(c, 0, &x);
  if (x.rank != 1 || (axis != 0 && axis != -1)) return RLX_OK;
  out = x;
  out.rank = idx.rank;
  out.n = idx.n;
  for (int32_t i = 0; i < idx.n; i++) {
    int64_t j = idx.v[i] < 0 ? idx.v[i] + x.n : idx.v[i];
    if (idx.sym[i] || j < 0 || j >= x.n) return rlx_ox_invalid(c, "index %lld is out of range",
                                                               (long long)idx.v[i]);
    out.v[i] = x.v[j];
    out.sym[i] = x.sym[j];
  }
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &out);
}

/* Unsqueeze / Squeeze / Reshape / Flatten of a shape value: only the rank
 * changes (0 <-> 1), the elements stay. */
static rlx_status sv_rerank(rlx_ox_ctx* c, int* handled) {
  rlx_ox_sv x;
  if (!rlx_ox_sv_in(c, 0)) return RLX_OK;
  sv_operand(c, 0, &x);
  const char* op = rlx_ox_op_type(c);
  int32_t rank;
  if (strcmp(op, "Unsqueeze") == 0) {
    if (x.rank != 0) return RLX_OK;
    rank = 1;
  } else if (strcmp(op, "Squeeze") == 0) {
    if (x.rank != 1 || x.n != 1) return RLX_OK;
    rank = 0;
  } else { /* Reshape: a target of [] , [1], [n] or [-1] */
    int64_t shape[2];
    int32_t n;
    const rlx_host_tensor* k = rlx_ox_known(c, 1);
    if (!k || rlx_host_numel(k) > 1) return RLX_OK;
    RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "shape", shape, 2, &n));
    if (n > 1 || (n == 1 && shape[0] != -1 && shape[0] != x.n) || (n == 0 && x.n != 1))
      return RLX_OK;
    rlx_ox_attr_ignore(c, "allowzero");
    rank = n;
  }
  if (strcmp(op, "Reshape") != 0) {
    /* the axes (attribute or input) can only be 0 here: rank 0 <-> 1 */
    rlx_ox_attr_ignore(c, "axes");
  }
  x.rank = rank;
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &x);
}

static rlx_status sv_concat(rlx_ox_ctx* c, int* handled) {
  rlx_ox_sv out, part;
  int64_t axis;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 0, &axis));
  if (axis != 0 && axis != -1) return RLX_OK;
  memset(&out, 0, sizeof out);
  out.rank = 1;
  for (int32_t i = 0; i < rlx_ox_n_in(c); i++) {
    if (!sv_operand(c, i, &part) || part.rank != 1 || out.n + part.n > RLX_OX_SV_MAX) return RLX_OK;
    if (i == 0) out.dtype = part.dtype;
    memcpy(out.v + out.n, part.v, sizeof(int64_t) * (size_t)part.n);
    memcpy(out.sym + out.n, part.sym, (size_t)part.n);
    out.n += part.n;
  }
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &out);
}

static rlx_status sv_cast(rlx_ox_ctx* c, int* handled) {
  rlx_ox_sv x;
  int64_t to;
  if (!rlx_ox_sv_in(c, 0)) return RLX_OK;
  sv_operand(c, 0, &x);
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "to", 0, &to));
  /* Only int -> int keeps a shape value; a float shape is data (the mapper). */
  rlx_dtype dt = to == 7 ? RLX_I64 : to == 6 ? RLX_I32 : RLX_DTYPE_COUNT;
  if (dt == RLX_DTYPE_COUNT) return RLX_OK;
  x.dtype = dt;
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &x);
}

static rlx_status sv_identity(rlx_ox_ctx* c, int* handled) {
  rlx_ox_sv x;
  if (!rlx_ox_sv_in(c, 0)) return RLX_OK;
  sv_operand(c, 0, &x);
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &x);
}

static rlx_status sv_slice(rlx_ox_ctx* c, int* handled) {
  rlx_ox_sv x;
  int64_t st[1], en[1], ax[1] = {0}, step[1] = {1};
  int32_t n;
  if (!rlx_ox_sv_in(c, 0) || rlx_ox_opset(c) < 10) return RLX_OK;
  sv_operand(c, 0, &x);
  for (int32_t i = 1; i < rlx_ox_n_in(c); i++)
    if (rlx_ox_has(c, i) && !rlx_ox_known(c, i)) return RLX_OK;
  RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 1, "starts", st, 1, &n));
  RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 2, "ends", en, 1, &n));
  if (rlx_ox_has(c, 3)) RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 3, "axes", ax, 1, &n));
  if (rlx_ox_has(c, 4)) RLX_RETURN_IF_ERROR(rlx_ox_known_ints(c, 4, "steps", step, 1, &n));
  if (x.rank != 1 || (ax[0] != 0 && ax[0] != -1) || step[0] != 1) return RLX_OK;
  int64_t s = st[0] < 0 ? st[0] + x.n : st[0], e = en[0] < 0 ? en[0] + x.n : en[0];
  s = clamp64(s, 0, x.n);
  e = clamp64(e, s, x.n);
  rlx_ox_sv out = x;
  out.n = (int32_t)(e - s);
  memmove(out.v, x.v + s, sizeof(int64_t) * (size_t)out.n);
  memmove(out.sym, x.sym + s, (size_t)out.n);
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &out);
}

/* One element of a binary op. Returns 0 when it cannot be expressed as a
 * dim (a negative operand or result of a symbolic op). */
static int element_op(rlx_graph* g, rlx_dim_op op, int64_t a, int as, int64_t b, int bs,
                      int64_t* out, uint8_t* out_sym) {
  if (!as && !bs) {
    /* Plain integers (ONNX Div truncates toward zero, sizes are >= 0). */
    switch (op) {
      case RLX_DIM_ADD: *out = a + b; break;
      case RLX_DIM_SUB: *out = a - b; break;
      case RLX_DIM_MUL: *out = a * b; break;
      case RLX_DIM_FLOOR_DIV: if (!b) return 0; *out = a / b; break;
      case RLX_DIM_MOD: if (!b) return 0; *out = a % b; break;
      case RLX_DIM_MIN: *out = a < b ? a : b; break;
      case RLX_DIM_MAX: *out = a > b ? a : b; break;
      default: return 0;
    }
    *out_sym = 0;
    return 1;
  }
  /* A negative static operand of + or - flips the op: T + (-1) = T - 1. */
  if ((op == RLX_DIM_ADD || op == RLX_DIM_SUB) && !bs && b < 0) {
    op = op == RLX_DIM_ADD ? RLX_DIM_SUB : RLX_DIM_ADD;
    b = -b;
  }
  if ((!as && a < 0) || (!bs && b < 0)) return 0;
  rlx_dim r;
  if (rlx_graph_dim_expr(g, op, a, b, &r) != RLX_OK) return 0;
  *out = r;
  *out_sym = r < 0;
  return 1;
}

static rlx_status sv_binary(rlx_ox_ctx* c, rlx_dim_op op, int* handled) {
  rlx_ox_sv a, b;
  if (!sv_operand(c, 0, &a) || !sv_operand(c, 1, &b)) return RLX_OK;
  if (a.n != b.n && a.n != 1 && b.n != 1) return RLX_OK;
  rlx_ox_sv out = a.n >= b.n ? a : b;
  out.rank = a.rank > b.rank ? a.rank : b.rank;
  out.dtype = a.dtype;
  for (int32_t i = 0; i < out.n; i++) {
    int32_t ia = a.n == 1 ? 0 : i, ib = b.n == 1 ? 0 : i;
    if (!element_op(GRAPH, op, a.v[ia], a.sym[ia], b.v[ib], b.sym[ib], &out.v[i], &out.sym[i])) {
      return RLX_OK; /* not a size computation: the mapper builds it as data */
    }
  }
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &out);
}

/* Equal on shape values, when every element is decidable: the same dim, two
 * static values, or a symbolic size (>= 0) against a negative number. */
static rlx_status sv_equal(rlx_ox_ctx* c, int* handled) {
  rlx_ox_sv a, b;
  if (!sv_operand(c, 0, &a) || !sv_operand(c, 1, &b)) return RLX_OK;
  if (a.n != b.n && a.n != 1 && b.n != 1) return RLX_OK;
  int32_t n = a.n >= b.n ? a.n : b.n, rank = a.rank > b.rank ? a.rank : b.rank;
  uint8_t eq[RLX_OX_SV_MAX];
  for (int32_t i = 0; i < n; i++) {
    int32_t ia = a.n == 1 ? 0 : i, ib = b.n == 1 ? 0 : i;
    int64_t x = a.v[ia], y = b.v[ib];
    if (a.sym[ia] == b.sym[ib] && x == y) eq[i] = 1;
    else if (!a.sym[ia] && !b.sym[ib]) eq[i] = 0;
    else if ((a.sym[ia] && !b.sym[ib] && y < 0) || (b.sym[ib] && !a.sym[ia] && x < 0)) eq[i] = 0;
    else return RLX_OK;
  }
  rlx_host_tensor h;
  rlx_error e;
  int64_t shape = n;
  if (rlx_host_alloc(&h, RLX_BOOL, rank, &shape, &e) != RLX_OK) return rlx_ox_invalid(c, "%s", e.msg);
  memcpy(h.data, eq, (size_t)n);
  *handled = 1;
  return rlx_ox_set_known(c, 0, &h);
}

/* Where with a known condition picks elements of two shape values. */
static rlx_status sv_where(rlx_ox_ctx* c, int* handled) {
  const rlx_host_tensor* cond = rlx_ox_known(c, 0);
  rlx_ox_sv a, b;
  if (!cond || cond->rank > 1 || !sv_operand(c, 1, &a) || !sv_operand(c, 2, &b)) return RLX_OK;
  int32_t nc = (int32_t)rlx_host_numel(cond);
  int32_t n = nc > a.n ? nc : a.n;
  if (b.n > n) n = b.n;
  if ((nc != n && nc != 1) || (a.n != n && a.n != 1) || (b.n != n && b.n != 1)) return RLX_OK;
  rlx_ox_sv out = a;
  out.n = n;
  out.rank = cond->rank > a.rank ? cond->rank : a.rank;
  if (b.rank > out.rank) out.rank = b.rank;
  for (int32_t i = 0; i < n; i++) {
    int pick_a = rlx_load_i64(cond->data, cond->dtype, nc == 1 ? 0 : i) != 0;
    const rlx_ox_sv* s = pick_a ? &a : &b;
    int32_t j = s->n == 1 ? 0 : i;
    out.v[i] = s->v[j];
    out.sym[i] = s->sym[j];
  }
  *handled = 1;
  return rlx_ox_set_sv(c, 0, &out);
}

static int any_sv_input(const rlx_ox_ctx* c) {
  for (int32_t i = 0; i < rlx_ox_n_in(c); i++)
    if (rlx_ox_sv_in(c, i)) return 1;
  return 0;
}

static int has_symbolic_dim(rlx_ox_ctx* c) {
  rlx_type t;
  if (!rlx_ox_has(c, 0) || rlx_ox_type(c, 0, &t) != RLX_OK) return 0;
  for (int32_t i = 0; i < t.rank; i++)
    if (t.shape[i] < 0) return 1;
  return 0;
}

rlx_status rlx_ox_shape_value(rlx_ox_ctx* c, int* handled) {
  *handled = 0;
  const char* op = rlx_ox_op_type(c);
  if (strcmp(op, "Shape") == 0) return has_symbolic_dim(c) ? sv_shape(c, handled) : RLX_OK;
  if (strcmp(op, "Size") == 0) return has_symbolic_dim(c) ? sv_size(c, handled) : RLX_OK;
  if (!any_sv_input(c)) return RLX_OK;
  static const struct { const char* op; rlx_dim_op dop; } binary[] = {
      {"Add", RLX_DIM_ADD}, {"Sub", RLX_DIM_SUB}, {"Mul", RLX_DIM_MUL},
      {"Div", RLX_DIM_FLOOR_DIV}, {"Mod", RLX_DIM_MOD}, {"Min", RLX_DIM_MIN},
      {"Max", RLX_DIM_MAX}};
  for (size_t i = 0; i < sizeof binary / sizeof binary[0]; i++)
    if (strcmp(op, binary[i].op) == 0)
      return rlx_ox_n_in(c) == 2 ? sv_binary(c, binary[i].dop, handled) : RLX_OK;
  if (strcmp(op, "Gather") == 0) return sv_gather(c, handled);
  if (strcmp(op, "Unsqueeze") == 0 || strcmp(op, "Squeeze") == 0 || strcmp(op, "Reshape") == 0)
    return sv_rerank(c, handled);
  if (strcmp(op, "Concat") == 0) return sv_concat(c, handled);
  if (strcmp(op, "Cast") == 0) return sv_cast(c, handled);
  if (strcmp(op, "Identity") == 0) return sv_identity(c, handled);
  if (strcmp(op, "Slice") == 0) return sv_slice(c, handled);
  if (strcmp(op, "Equal") == 0) return sv_equal(c, handled);
  if (strcmp(op, "Where") == 0) return sv_where(c, handled);
  return RLX_OK;
}

#endif
