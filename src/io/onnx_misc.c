/* ONNX ops mapped by index arithmetic or at import time (table at the end):
 * the scatter/gather family (ScatterElements, ScatterND, GatherND) onto
 * GATHER / SCATTER_ADD, Einsum onto transposes, diagonal gathers, reduces and
 * batched matmuls, Det by the Leibniz expansion, ReverseSequence as a
 * GatherElements, BitShift onto integer pow/mul/div, and the ops whose output
 * SHAPE depends on input values (Unique, NonZero, Compress): those are
 * computed on the host from known inputs; when such an input derives from a
 * graph input, rlx_ox_need_known reports it through the importer's
 * needed-input mechanism (rlx_onnx_options.needs_input), so `rlx run` and the
 * conformance runner freeze it and import again. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx.h"
#include "io/onnx_helpers.h"
#include "ir/dtype.h"

#ifdef RLX_HAVE_ONNX

/* ------------------------------------------------------------------ shared */

static rlx_status host_i64(rlx_ox_ctx* c, int64_t n, int64_t** out) {
  RLX_RETURN_IF_ERROR(check_table(c, n, sizeof(int64_t)));
  *out = calloc((size_t)(n ? n : 1), sizeof(int64_t));
  if (!*out) return rlx_ox_invalid(c, "out of host memory");
  return RLX_OK;
}

static int static_type(const rlx_type* t) { return rlx_type_numel(t) >= 0; }

static rlx_status need_static_type(rlx_ox_ctx* c, const rlx_type* t, const char* what) {
  if (!static_type(t)) return rlx_ox_unsupported(c, "%s has symbolic dims", what);
  return RLX_OK;
}

/* A tensor of x's shape and dtype filled with v. */
static rlx_status filled_like(rlx_ox_ctx* c, rlx_tensor x, double v, rlx_tensor* out) {
  rlx_type t = type_of(c, x);
  rlx_tensor s;
  RLX_RETURN_IF_ERROR(scalar(c, t.dtype, v, &s));
  G(rlx_graph_add_expand(GRAPH, s, t.shape, t.rank, out));
  return RLX_OK;
}

/* i64 indices with negatives wrapped by the per-position axis sizes `dims`
 * (a tensor broadcasting against idx). */
static rlx_status wrap_negative(rlx_ox_ctx* c, rlx_tensor idx, rlx_tensor dims, rlx_tensor* out) {
  rlx_tensor neg, wrapped;
  RLX_RETURN_IF_ERROR(cast(c, idx, RLX_I64, &idx));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_LT, idx, 0.0, &neg));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, idx, dims, &wrapped));
  return where(c, neg, wrapped, idx, out);
}

/* ------------------------------------------------------------------ scatter */

enum { SCAT_NONE, SCAT_ADD, SCAT_MUL, SCAT_MAX, SCAT_MIN };

static rlx_status scatter_reduction(rlx_ox_ctx* c, int* out) {
  char r[16];
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "reduction", "none", r, sizeof r));
  static const char* const names[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (strcmp(r, names[i]) == 0) {
      *out = i;
      return RLX_OK;
    }
  return rlx_ox_invalid(c, "unknown reduction '%s'", r);
}

/* One layer of updates in which each destination is written at most once
 * (positions outside the layer carry mask 0 and update 0, so they add
 * nothing): hit = scatter_add(0, idx, mask) > 0 marks the destinations,
 * vals = scatter_add(0, idx, upd) holds the update exactly (0 + u = u), and
 * the reduction combines it with the current value there. */
static rlx_status scatter_layer(rlx_ox_ctx* c, rlx_tensor acc, rlx_tensor idx, rlx_tensor upd,
                                rlx_tensor ones, int32_t axis, int red, rlx_tensor* out) {
  rlx_tensor zeros, cnt, hit, vals, merged;
  RLX_RETURN_IF_ERROR(filled_like(c, acc, 0.0, &zeros));
  G(rlx_graph_add_scatter_add(GRAPH, zeros, idx, ones, axis, &cnt));
  RLX_RETURN_IF_ERROR(cmp_s(c, RLX_CMP_GT, cnt, 0.0, &hit));
  G(rlx_graph_add_scatter_add(GRAPH, zeros, idx, upd, axis, &vals));
  static const rlx_binary_op op_of[] = {RLX_BIN_ADD, RLX_BIN_ADD, RLX_BIN_MUL, RLX_BIN_MAX,
                                        RLX_BIN_MIN};
  if (red == SCAT_NONE) merged = vals;
  else RLX_RETURN_IF_ERROR(bin(c, op_of[red], acc, vals, &merged));
  return where(c, hit, merged, acc, out);
}

/* ScatterElements core over a torch-style index tensor (idx has upd's
 * shape, already wrapped to [0, dim)). occ (may be NULL) gives, per index
 * element, how many earlier elements (row-major) hit the same destination:
 * layers of equal occ are applied in order, which makes every reduction exact
 * with duplicates (reduction none: plan_layers keeps only the last write, as
 * the ONNX reference ends up with). Without occ (indices unknown at import) add is one
 * SCATTER_ADD, none assumes distinct indices (ONNX leaves duplicates
 * undefined there), and mul/max/min need the indices known. */
static rlx_status scatter_core(rlx_ox_ctx* c, rlx_tensor data, rlx_tensor idx, rlx_tensor upd,
                               int32_t axis, int red, const int64_t* occ, int64_t layers,
                               rlx_tensor* out) {
  if (red == SCAT_ADD) {
    G(rlx_graph_add_scatter_add(GRAPH, data, idx, upd, axis, out));
    return RLX_OK;
  }
  rlx_tensor ones, acc = data;
  RLX_RETURN_IF_ERROR(filled_like(c, upd, 1.0, &ones));
  if (!occ) return scatter_layer(c, data, idx, upd, ones, axis, red, out);
  rlx_type tu = type_of(c, upd);
  int64_t n = rlx_type_numel(&tu);
  uint8_t* m = malloc((size_t)(n ? n : 1));
  if (!m) return rlx_ox_invalid(c, "out of host memory");
  rlx_status s = RLX_OK;
  for (int64_t k = 0; k < layers && s == RLX_OK; k++) {
    for (int64_t p = 0; p < n; p++) m[p] = occ[p] == k;
    rlx_tensor mask, zero, u, o;
    s = constant(c, RLX_BOOL, tu.rank, tu.shape, m, (size_t)n, &mask);
    if (s == RLX_OK) s = scalar(c, tu.dtype, 0.0, &zero);
    if (s == RLX_OK) s = where(c, mask, upd, zero, &u);
    if (s == RLX_OK) s = where(c, mask, ones, zero, &o);
    if (s == RLX_OK) s = scatter_layer(c, acc, idx, u, o, axis, red, &acc);
  }
  free(m);
  RLX_RETURN_IF_ERROR(s);
  *out = acc;
  return RLX_OK;
}

/* Occurrence ranks from known destination offsets (one per index element). */
static rlx_status occurrences(rlx_ox_ctx* c, const int64_t* dest, int64_t n, int64_t n_dest,
                              int64_t* occ, int64_t* layers) {
  int64_t* seen;
  RLX_RETURN_IF_ERROR(host_i64(c, n_dest, &seen));
  *layers = 0;
  for (int64_t p = 0; p < n; p++) {
    if (dest[p] < 0 || dest[p] >= n_dest) {
      free(seen);
      return rlx_ox_invalid(c, "index %lld is out of range", (long long)p);
    }
    occ[p] = seen[dest[p]]++;
    if (occ[p] + 1 > *layers) *layers = occ[p] + 1;
  }
  free(seen);
  return RLX_OK;
}

/* Each layer costs a few nodes: a pile of duplicates would make a huge
 * graph, so mul/max/min take up to this many writes per destination. */
#define SCATTER_MAX_LAYERS 64

/* Turns occurrence ranks into the layering a reduction needs: NULL when
 * every destination is written once (one plain layer); for none only the
 * last write per destination matters (rank 0, the others -1: one masked
 * layer). */
static rlx_status plan_layers(rlx_ox_ctx* c, int red, const int64_t* dest, int64_t n,
                              int64_t n_dest, int64_t** occ, int64_t* layers) {
  if (*layers <= 1) {
    free(*occ);
    *occ = NULL;
    return RLX_OK;
  }
  if (red != SCAT_NONE) {
    if (*layers > SCATTER_MAX_LAYERS)
      return rlx_ox_unsupported(c, "%lld writes to one destination (at most %d)",
                                (long long)*layers, SCATTER_MAX_LAYERS);
    return RLX_OK;
  }
  int64_t* total;
  RLX_RETURN_IF_ERROR(host_i64(c, n_dest, &total));
  for (int64_t p = 0; p < n; p++) total[dest[p]]++;
  for (int64_t p = 0; p < n; p++) (*occ)[p] = (*occ)[p] == total[dest[p]] - 1 ? 0 : -1;
  free(total);
  *layers = 1;
  return RLX_OK;
}

/* Destination offsets of known ScatterElements indices. */
static rlx_status elements_dest(rlx_ox_ctx* c, const rlx_host_tensor* k, const rlx_type* td,
                                int32_t axis, int64_t* dest) {
  int64_t stride[RLX_MAX_RANK];
  for (int32_t d = td->rank - 1, s = 1; d >= 0; d--) {
    stride[d] = s;
    s *= td->shape[d];
  }
  int64_t n = rlx_host_numel(k);
  for (int64_t p = 0; p < n; p++) {
    int64_t rem = p, o = 0;
    for (int32_t d = k->rank - 1; d >= 0; d--) {
      int64_t coord = rem % k->shape[d];
      rem /= k->shape[d];
      if (d == axis) {
        coord = rlx_load_i64(k->data, k->dtype, p);
        if (coord < 0) coord += td->shape[d];
        if (coord < 0 || coord >= td->shape[d]) return rlx_ox_invalid(c, "index out of range");
      }
      o += coord * stride[d];
    }
    dest[p] = o;
  }
  return RLX_OK;
}

static rlx_status map_scatter_elements(rlx_ox_ctx* c) {
  int64_t axis;
  int red = SCAT_NONE;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 0, &axis));
  if (strcmp(rlx_ox_op_type(c), "Scatter") != 0) RLX_RETURN_IF_ERROR(scatter_reduction(c, &red));
  rlx_tensor data, idx, upd, dim, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &data));
  RLX_RETURN_IF_ERROR(in(c, 1, &idx));
  RLX_RETURN_IF_ERROR(in(c, 2, &upd));
  rlx_type td = type_of(c, data), ti = type_of(c, idx);
  int32_t ax;
  RLX_RETURN_IF_ERROR(norm_axis(c, axis, td.rank, &ax));
  RLX_RETURN_IF_ERROR(need_static_type(c, &td, "data"));
  RLX_RETURN_IF_ERROR(need_static_type(c, &ti, "indices"));
  RLX_RETURN_IF_ERROR(scalar(c, RLX_I64, (double)td.shape[ax], &dim));
  RLX_RETURN_IF_ERROR(wrap_negative(c, idx, dim, &idx));
  const rlx_host_tensor* k = rlx_ox_known(c, 1);
  if (!k && red != SCAT_ADD && red != SCAT_NONE)
    RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 1, "indices (for a mul/max/min reduction)", &k));
  if (!k || red == SCAT_ADD) {
    RLX_RETURN_IF_ERROR(scatter_core(c, data, idx, upd, ax, red, NULL, 0, &y));
    return rlx_ox_set(c, 0, y);
  }
  int64_t n = rlx_host_numel(k), layers = 0, *dest, *occ = NULL;
  RLX_RETURN_IF_ERROR(host_i64(c, n, &dest));
  rlx_status s = host_i64(c, n, &occ);
  if (s == RLX_OK) s = elements_dest(c, k, &td, ax, dest);
  if (s == RLX_OK) s = occurrences(c, dest, n, rlx_type_numel(&td), occ, &layers);
  if (s == RLX_OK) s = plan_layers(c, red, dest, n, rlx_type_numel(&td), &occ, &layers);
  if (s == RLX_OK) s = scatter_core(c, data, idx, upd, ax, red, occ, layers, &y);
  free(dest);
  free(occ);
  RLX_RETURN_IF_ERROR(s);
  return rlx_ox_set(c, 0, y);
}

/* Flat row index of the last-axis tuples of idx (i64 [..., k]) into the
 * leading k dims of `dims` (negatives wrapped): sum_j idx[..., j] * stride_j,
 * shape idx[:-1]. */
static rlx_status tuple_rows(rlx_ox_ctx* c, rlx_tensor idx, const rlx_dim* dims, int32_t k,
                             rlx_tensor* out) {
  int64_t sizes[RLX_MAX_RANK], stride[RLX_MAX_RANK];
  for (int32_t j = k - 1, s = 1; j >= 0; j--) {
    sizes[j] = dims[j];
    stride[j] = s;
    s *= dims[j];
  }
  rlx_tensor dimt, stridet, prod;
  RLX_RETURN_IF_ERROR(const_i64(c, sizes, k, &dimt));
  RLX_RETURN_IF_ERROR(const_i64(c, stride, k, &stridet));
  RLX_RETURN_IF_ERROR(wrap_negative(c, idx, dimt, &idx));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, idx, stridet, &prod));
  int32_t last = type_of(c, prod).rank - 1;
  return reduce(c, RLX_RED_SUM, prod, &last, 1, 0, out);
}

static int64_t dims_product(const rlx_dim* d, int32_t from, int32_t to) {
  int64_t p = 1;
  for (int32_t i = from; i < to; i++) p *= d[i];
  return p;
}

/* ScatterND as a ScatterElements along axis 0 of data viewed as [P, R]:
 * each index tuple names one row (P = the indexed dims, R = the rest). */
static rlx_status map_scatter_nd(rlx_ox_ctx* c) {
  int red = SCAT_NONE;
  RLX_RETURN_IF_ERROR(scatter_reduction(c, &red));
  rlx_tensor data, idx, upd, rows, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &data));
  RLX_RETURN_IF_ERROR(in(c, 1, &idx));
  RLX_RETURN_IF_ERROR(in(c, 2, &upd));
  rlx_type td = type_of(c, data), ti = type_of(c, idx);
  RLX_RETURN_IF_ERROR(need_static_type(c, &td, "data"));
  RLX_RETURN_IF_ERROR(need_static_type(c, &ti, "indices"));
  int32_t k = ti.rank ? (int32_t)ti.shape[ti.rank - 1] : 0;
  if (ti.rank < 1 || k < 1 || k > td.rank)
    return rlx_ox_invalid(c, "indices' last dim must be in [1, data rank]");
  int64_t m = dims_product(ti.shape, 0, ti.rank - 1), P = dims_product(td.shape, 0, k);
  int64_t R = dims_product(td.shape, k, td.rank);
  rlx_dim flat[2] = {P, R}, ushape[2] = {m, R}, ishape[2] = {m, 1};
  RLX_RETURN_IF_ERROR(tuple_rows(c, idx, td.shape, k, &rows));
  RLX_RETURN_IF_ERROR(reshape(c, rows, ishape, 2, &rows));
  G(rlx_graph_add_expand(GRAPH, rows, ushape, 2, &rows));
  RLX_RETURN_IF_ERROR(reshape(c, data, flat, 2, &data));
  RLX_RETURN_IF_ERROR(reshape(c, upd, ushape, 2, &upd));
  const rlx_host_tensor* kn = rlx_ox_known(c, 1);
  if (!kn && red != SCAT_ADD && red != SCAT_NONE)
    RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 1, "indices (for a mul/max/min reduction)", &kn));
  int64_t *dest = NULL, *occ = NULL, layers = 0;
  rlx_status s = RLX_OK;
  if (kn && red != SCAT_ADD) { /* per-row occurrence ranks, spread over the row */
    s = host_i64(c, m, &dest);
    if (s == RLX_OK) s = host_i64(c, m * R, &occ);
    for (int64_t r = 0; s == RLX_OK && r < m; r++)
      for (int64_t j = 0, st = 1; j < k; j++) {
        int32_t jj = k - 1 - j;
        int64_t v = rlx_load_i64(kn->data, kn->dtype, r * k + jj);
        dest[r] += (v < 0 ? v + td.shape[jj] : v) * st;
        st *= td.shape[jj];
      }
    if (s == RLX_OK) s = occurrences(c, dest, m, P, occ, &layers);
    if (s == RLX_OK) s = plan_layers(c, red, dest, m, P, &occ, &layers);
    for (int64_t r = m - 1; s == RLX_OK && occ && r >= 0; r--)
      for (int64_t q = R - 1; q >= 0; q--) occ[r * R + q] = occ[r];
  }
  if (s == RLX_OK) s = scatter_core(c, data, rows, upd, 0, red, occ, layers, &y);
  free(dest);
  free(occ);
  RLX_RETURN_IF_ERROR(s);
  RLX_RETURN_IF_ERROR(reshape(c, y, td.shape, td.rank, &y));
  return rlx_ox_set(c, 0, y);
}

/* GatherND: data viewed as [B * P, rest...] (B the batch dims, P the indexed
 * dims), one Gather along axis 0 of row = b * P + tuple row. */
static rlx_status map_gather_nd(rlx_ox_ctx* c) {
  int64_t bd;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "batch_dims", 0, &bd));
  rlx_tensor data, idx, rows, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &data));
  RLX_RETURN_IF_ERROR(in(c, 1, &idx));
  rlx_type td = type_of(c, data), ti = type_of(c, idx);
  RLX_RETURN_IF_ERROR(need_static_type(c, &td, "data"));
  RLX_RETURN_IF_ERROR(need_static_type(c, &ti, "indices"));
  int32_t b = (int32_t)bd, k = ti.rank ? (int32_t)ti.shape[ti.rank - 1] : 0;
  if (bd < 0 || b >= ti.rank || b >= td.rank || k < 1 || b + k > td.rank)
    return rlx_ox_invalid(c, "batch_dims %lld / index depth %d do not fit", (long long)bd, (int)k);
  for (int32_t d = 0; d < b; d++)
    if (td.shape[d] != ti.shape[d]) return rlx_ox_invalid(c, "batch dim %d differs", (int)d);
  int64_t B = dims_product(td.shape, 0, b), P = dims_product(td.shape, b, b + k);
  RLX_RETURN_IF_ERROR(tuple_rows(c, idx, td.shape + b, k, &rows));
  if (b > 0) { /* + batch offset b * P, broadcast over the non-batch index dims */
    int64_t* off;
    int64_t oshape[RLX_MAX_RANK];
    RLX_RETURN_IF_ERROR(host_i64(c, B, &off));
    for (int64_t i = 0; i < B; i++) off[i] = i * P;
    for (int32_t d = 0; d < ti.rank - 1; d++) oshape[d] = d < b ? ti.shape[d] : 1;
    rlx_tensor offt;
    rlx_status s = constant(c, RLX_I64, ti.rank - 1, oshape, off, sizeof(int64_t) * (size_t)B,
                            &offt);
    free(off);
    RLX_RETURN_IF_ERROR(s);
    RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_ADD, rows, offt, &rows));
  }
  rlx_dim flat[RLX_MAX_RANK];
  int32_t fr = 0;
  flat[fr++] = B * P;
  for (int32_t d = b + k; d < td.rank; d++) flat[fr++] = td.shape[d];
  RLX_RETURN_IF_ERROR(reshape(c, data, flat, fr, &data));
  G(rlx_graph_add_gather(GRAPH, data, rows, 0, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ einsum */

/* Labels are letters; the dims an ellipsis stands for get codes from 256 on,
 * right-aligned across operands as NumPy broadcasts them. */
#define EIN_ELL 256
typedef struct ein_term {
  int32_t lab[RLX_MAX_RANK];
  int32_t n;
} ein_term;

/* Parses one term (up to ',' / '-' / end) for a tensor of rank `rank`
 * (rank < 0: the output, whose ellipsis spans n_ell dims). */
static rlx_status ein_term_parse(rlx_ox_ctx* c, const char** p, int32_t rank, int32_t* n_ell,
                                 ein_term* t) {
  int32_t explicit_n = 0, ell_at = -1;
  const char* s = *p;
  for (const char* q = s; *q && *q != ',' && *q != '-'; q++) {
    if (*q == '.') {
      if (ell_at >= 0 || strncmp(q, "...", 3) != 0) return rlx_ox_invalid(c, "bad ellipsis");
      ell_at = explicit_n;
      q += 2;
    } else if ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')) {
      explicit_n++;
    } else {
      return rlx_ox_invalid(c, "bad character '%c' in the equation", *q);
    }
  }
  int32_t ell = rank < 0 ? *n_ell : (ell_at >= 0 ? rank - explicit_n : 0);
  if (ell < 0 || (rank >= 0 && ell_at < 0 && explicit_n != rank) || explicit_n + ell > RLX_MAX_RANK)
    return rlx_ox_invalid(c, "a term does not match its operand's rank %d", (int)rank);
  if (rank >= 0 && ell > *n_ell) *n_ell = ell;
  t->n = 0;
  for (; *s && *s != ',' && *s != '-'; s++) {
    if (*s == '.') {
      for (int32_t e = 0; e < ell; e++) t->lab[t->n++] = EIN_ELL + RLX_MAX_RANK - ell + e;
      s += 2;
    } else {
      t->lab[t->n++] = *s;
    }
  }
  *p = s;
  return RLX_OK;
}

static int ein_find(const ein_term* t, int32_t lab) {
  for (int32_t i = 0; i < t->n; i++)
    if (t->lab[i] == lab) return i;
  return -1;
}

/* Takes the diagonal of a label repeated in one operand (positions p < q):
 * both axes move last, flatten to n*n, and a Gather of i * (n + 1) keeps the
 * diagonal as the last axis. */
static rlx_status ein_diagonal(rlx_ox_ctx* c, rlx_tensor* x, ein_term* t, int32_t p, int32_t q) {
  rlx_type tx = type_of(c, *x);
  int64_t n = tx.shape[p];
  if (tx.shape[q] != n) return rlx_ox_invalid(c, "a repeated label has different sizes");
  int32_t perm[RLX_MAX_RANK], r = 0;
  rlx_dim shape[RLX_MAX_RANK];
  ein_term nt = {{0}, 0};
  for (int32_t d = 0; d < t->n; d++)
    if (d != p && d != q) {
      shape[r] = tx.shape[d];
      nt.lab[nt.n++] = t->lab[d];
      perm[r++] = d;
    }
  perm[r] = p;
  perm[r + 1] = q;
  shape[r] = n * n;
  nt.lab[nt.n++] = t->lab[p];
  int64_t* diag;
  RLX_RETURN_IF_ERROR(host_i64(c, n, &diag));
  for (int64_t i = 0; i < n; i++) diag[i] = i * (n + 1);
  rlx_tensor dt;
  rlx_status s = const_i64(c, diag, n, &dt);
  free(diag);
  RLX_RETURN_IF_ERROR(s);
  G(rlx_graph_add_transpose(GRAPH, *x, perm, t->n, x));
  RLX_RETURN_IF_ERROR(reshape(c, *x, shape, r + 1, x));
  G(rlx_graph_add_gather(GRAPH, *x, dt, r, x));
  *t = nt;
  return RLX_OK;
}

/* Removes repeated labels, then sums the labels no one else needs. */
static rlx_status ein_prepare(rlx_ox_ctx* c, rlx_tensor* x, ein_term* t, const ein_term* keep,
                              int32_t n_keep) {
  for (int found = 1; found;) {
    found = 0;
    for (int32_t p = 0; p < t->n && !found; p++)
      for (int32_t q = p + 1; q < t->n && !found; q++)
        if (t->lab[p] == t->lab[q]) {
          RLX_RETURN_IF_ERROR(ein_diagonal(c, x, t, p, q));
          found = 1;
        }
  }
  int32_t axes[RLX_MAX_RANK], n_axes = 0;
  ein_term nt = {{0}, 0};
  for (int32_t d = 0; d < t->n; d++) {
    int needed = 0;
    for (int32_t j = 0; j < n_keep; j++) needed |= ein_find(&keep[j], t->lab[d]) >= 0;
    if (needed) nt.lab[nt.n++] = t->lab[d];
    else axes[n_axes++] = d;
  }
  if (n_axes) RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_SUM, *x, axes, n_axes, 0, x));
  *t = nt;
  return RLX_OK;
}

/* Permutes x's axes into `order` (labels of t) and reshapes to `groups`
 * dims, each the product of a run of the order. */
static rlx_status ein_arrange(rlx_ox_ctx* c, rlx_tensor x, const ein_term* t, const int32_t* order,
                              const int32_t* runs, int32_t n_runs, rlx_tensor* out) {
  rlx_type tx = type_of(c, x);
  int32_t perm[RLX_MAX_RANK], identity = 1;
  rlx_dim shape[3];
  for (int32_t i = 0; i < t->n; i++) {
    perm[i] = ein_find(t, order[i]);
    identity &= perm[i] == i;
  }
  for (int32_t g = 0, i = 0; g < n_runs; g++) {
    shape[g] = 1;
    for (int32_t j = 0; j < runs[g]; j++, i++) shape[g] *= tx.shape[perm[i]];
  }
  if (!identity) G(rlx_graph_add_transpose(GRAPH, x, perm, t->n, &x));
  return reshape(c, x, shape, n_runs, out);
}

/* NumPy broadcasting of a label both operands carry: a size-1 side is
 * expanded to the other's size; other mismatches are errors. */
static rlx_status ein_broadcast(rlx_ox_ctx* c, rlx_tensor* a, const ein_term* ta, rlx_tensor* b,
                                const ein_term* tb) {
  rlx_type tya = type_of(c, *a), tyb = type_of(c, *b);
  int grow_a = 0, grow_b = 0;
  for (int32_t d = 0; d < ta->n; d++) {
    int32_t e = ein_find(tb, ta->lab[d]);
    if (e < 0 || tya.shape[d] == tyb.shape[e]) continue;
    if (tya.shape[d] == 1) {
      tya.shape[d] = tyb.shape[e];
      grow_a = 1;
    } else if (tyb.shape[e] == 1) {
      tyb.shape[e] = tya.shape[d];
      grow_b = 1;
    } else {
      return rlx_ox_invalid(c, "label sizes %lld and %lld do not broadcast",
                            (long long)tya.shape[d], (long long)tyb.shape[e]);
    }
  }
  if (grow_a) RLX_RETURN_IF_ERROR(expand_to(c, *a, tya.shape, tya.rank, a));
  if (grow_b) RLX_RETURN_IF_ERROR(expand_to(c, *b, tyb.shape, tyb.rank, b));
  return RLX_OK;
}

/* Contracts two prepared operands: shared labels kept for later are batch
 * dims, shared labels not kept are summed by a batched matmul
 * [Bt, M, K] x [Bt, K, N]; the result's labels are batch, a-only, b-only. */
static rlx_status ein_pair(rlx_ox_ctx* c, rlx_tensor a, const ein_term* ta, rlx_tensor b,
                           const ein_term* tb, const ein_term* keep, int32_t n_keep,
                           rlx_tensor* out, ein_term* tout) {
  int32_t bat[RLX_MAX_RANK], con[RLX_MAX_RANK], ao[RLX_MAX_RANK], bo[RLX_MAX_RANK];
  int32_t nb = 0, nc = 0, na = 0, nbo = 0;
  RLX_RETURN_IF_ERROR(ein_broadcast(c, &a, ta, &b, tb));
  rlx_type tya = type_of(c, a), tyb = type_of(c, b);
  rlx_dim oshape[RLX_MAX_RANK];
  for (int32_t d = 0; d < ta->n; d++) {
    int32_t lab = ta->lab[d], in_b = ein_find(tb, lab), kept = 0;
    for (int32_t j = 0; j < n_keep; j++) kept |= ein_find(&keep[j], lab) >= 0;
    if (in_b >= 0 && kept) bat[nb++] = lab;
    else if (in_b >= 0) con[nc++] = lab;
    else ao[na++] = lab;
  }
  for (int32_t d = 0; d < tb->n; d++)
    if (ein_find(ta, tb->lab[d]) < 0) bo[nbo++] = tb->lab[d];
  if (nb + na + nbo > RLX_MAX_RANK)
    return rlx_ox_unsupported(c, "an intermediate product of rank %d (at most %d)",
                              (int)(nb + na + nbo), RLX_MAX_RANK);
  int32_t order_a[RLX_MAX_RANK], order_b[RLX_MAX_RANK], oa = 0, ob = 0;
  tout->n = 0;
  for (int32_t i = 0; i < nb; i++) {
    order_a[oa++] = order_b[ob++] = bat[i];
    oshape[tout->n] = tya.shape[ein_find(ta, bat[i])];
    tout->lab[tout->n++] = bat[i];
  }
  for (int32_t i = 0; i < na; i++) {
    order_a[oa++] = ao[i];
    oshape[tout->n] = tya.shape[ein_find(ta, ao[i])];
    tout->lab[tout->n++] = ao[i];
  }
  for (int32_t i = 0; i < nc; i++) order_a[oa++] = order_b[ob++] = con[i];
  for (int32_t i = 0; i < nbo; i++) {
    order_b[ob++] = bo[i];
    oshape[tout->n] = tyb.shape[ein_find(tb, bo[i])];
    tout->lab[tout->n++] = bo[i];
  }
  int32_t runs_a[3] = {nb, na, nc}, runs_b[3] = {nb, nc, nbo};
  rlx_tensor a3, b3, y;
  RLX_RETURN_IF_ERROR(ein_arrange(c, a, ta, order_a, runs_a, 3, &a3));
  RLX_RETURN_IF_ERROR(ein_arrange(c, b, tb, order_b, runs_b, 3, &b3));
  G(rlx_graph_add_matmul(GRAPH, a3, b3, 0, 0, &y));
  return reshape(c, y, oshape, tout->n, out);
}

/* The implicit output: ellipsis dims, then the labels seen once, sorted. */
static void ein_implicit(const ein_term* terms, int32_t n_terms, int32_t n_ell, ein_term* out) {
  out->n = 0;
  for (int32_t e = 0; e < n_ell; e++) out->lab[out->n++] = EIN_ELL + RLX_MAX_RANK - n_ell + e;
  for (int32_t ch = 'A'; ch <= 'z'; ch++) {
    int32_t count = 0;
    for (int32_t i = 0; i < n_terms; i++)
      for (int32_t d = 0; d < terms[i].n; d++) count += terms[i].lab[d] == ch;
    if (count == 1 && out->n < RLX_MAX_RANK) out->lab[out->n++] = ch;
  }
}

#define EIN_MAX_OPERANDS 8

static rlx_status ein_parse(rlx_ox_ctx* c, const char* eq, int32_t n_in, const rlx_type* types,
                            ein_term* terms, ein_term* out) {
  char buf[256];
  size_t n = 0;
  for (const char* p = eq; *p && n + 1 < sizeof buf; p++)
    if (*p != ' ') buf[n++] = *p;
  buf[n] = 0;
  const char* p = buf;
  int32_t n_ell = 0;
  for (int32_t i = 0; i < n_in; i++) {
    RLX_RETURN_IF_ERROR(ein_term_parse(c, &p, types[i].rank, &n_ell, &terms[i]));
    if (i + 1 < n_in && *p++ != ',') return rlx_ox_invalid(c, "the equation has too few terms");
  }
  if (*p == 0) {
    ein_implicit(terms, n_in, n_ell, out);
    return RLX_OK;
  }
  if (strncmp(p, "->", 2) != 0) return rlx_ox_invalid(c, "the equation has too many terms");
  p += 2;
  RLX_RETURN_IF_ERROR(ein_term_parse(c, &p, -1, &n_ell, out));
  if (*p) return rlx_ox_invalid(c, "junk after the output term");
  for (int32_t d = 0; d < out->n; d++) {
    int seen = 0;
    for (int32_t i = 0; i < n_in; i++) seen |= ein_find(&terms[i], out->lab[d]) >= 0;
    if (!seen || ein_find(out, out->lab[d]) != d)
      return rlx_ox_invalid(c, "output label %d is not an input label or repeats", (int)d);
  }
  return RLX_OK;
}

static rlx_status map_einsum(rlx_ox_ctx* c) {
  char eq[256];
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "equation", "", eq, sizeof eq));
  int32_t n_in = rlx_ox_n_in(c);
  if (n_in < 1 || n_in > EIN_MAX_OPERANDS)
    return rlx_ox_unsupported(c, "%d operands (1 to %d supported)", (int)n_in, EIN_MAX_OPERANDS);
  rlx_tensor x[EIN_MAX_OPERANDS];
  rlx_type types[EIN_MAX_OPERANDS];
  ein_term terms[EIN_MAX_OPERANDS + 1], out;
  for (int32_t i = 0; i < n_in; i++) {
    RLX_RETURN_IF_ERROR(in(c, i, &x[i]));
    types[i] = type_of(c, x[i]);
    RLX_RETURN_IF_ERROR(need_static_type(c, &types[i], "an operand"));
  }
  RLX_RETURN_IF_ERROR(ein_parse(c, eq, n_in, types, terms, &out));
  /* keep[] = the output, then the terms not yet folded in */
  ein_term keep[EIN_MAX_OPERANDS + 1];
  keep[0] = out;
  for (int32_t i = 0; i < n_in; i++) keep[i + 1] = terms[i];
  rlx_tensor acc = x[0];
  ein_term tacc = terms[0];
  /* Diagonals only: the operand itself is among keep, so nothing is summed. */
  RLX_RETURN_IF_ERROR(ein_prepare(c, &acc, &tacc, keep, n_in + 1));
  for (int32_t i = 1; i < n_in; i++) {
    ein_term later[EIN_MAX_OPERANDS + 1];
    int32_t nl = 0;
    later[nl++] = out;
    for (int32_t j = i + 1; j < n_in; j++) later[nl++] = terms[j];
    ein_term with_b[EIN_MAX_OPERANDS + 1];
    memcpy(with_b, later, sizeof(ein_term) * (size_t)nl);
    with_b[nl] = terms[i];
    ein_term tb = terms[i];
    rlx_tensor b = x[i];
    /* Sum what neither the other operand nor a later one needs, first. */
    RLX_RETURN_IF_ERROR(ein_prepare(c, &acc, &tacc, with_b, nl + 1));
    with_b[nl] = tacc;
    RLX_RETURN_IF_ERROR(ein_prepare(c, &b, &tb, with_b, nl + 1));
    ein_term tres; /* not tacc: ein_pair reads ta while it fills tout */
    RLX_RETURN_IF_ERROR(ein_pair(c, acc, &tacc, b, &tb, later, nl, &acc, &tres));
    tacc = tres;
  }
  if (n_in == 1) RLX_RETURN_IF_ERROR(ein_prepare(c, &acc, &tacc, &out, 1));
  int32_t perm[RLX_MAX_RANK], identity = 1;
  for (int32_t d = 0; d < out.n; d++) {
    perm[d] = ein_find(&tacc, out.lab[d]);
    if (perm[d] < 0) return rlx_ox_invalid(c, "output label %d is lost", (int)d);
    identity &= perm[d] == d;
  }
  if (!identity) G(rlx_graph_add_transpose(GRAPH, acc, perm, out.n, &acc));
  return rlx_ox_set(c, 0, acc);
}

/* ------------------------------------------------------------------ Det */

#define DET_MAX_N 5 /* 120 Leibniz terms; larger matrices want an LU op */

/* Next permutation in lexicographic order; 0 after the last. */
static int next_perm(int32_t* a, int32_t n) {
  int32_t i = n - 2;
  while (i >= 0 && a[i] >= a[i + 1]) i--;
  if (i < 0) return 0;
  int32_t j = n - 1;
  while (a[j] <= a[i]) j--;
  int32_t t = a[i];
  a[i] = a[j];
  a[j] = t;
  for (int32_t l = i + 1, r = n - 1; l < r; l++, r--) {
    t = a[l];
    a[l] = a[r];
    a[r] = t;
  }
  return 1;
}

static int perm_sign(const int32_t* a, int32_t n) {
  int inv = 0;
  for (int32_t i = 0; i < n; i++)
    for (int32_t j = i + 1; j < n; j++) inv += a[i] > a[j];
  return inv % 2 ? -1 : 1;
}

/* Det by the Leibniz expansion, sum over permutations s of
 * sign(s) * prod_i x[i, s(i)]: one Gather of the n! x n entries from the
 * flattened matrix, a product over the last axis, a signed sum. No division
 * or pivoting, so it is as exact as the products for the small n it takes
 * (up to 5); that covers what models use Det for without a new IR op. Half
 * types compute in f32. */
static rlx_status map_det(rlx_ox_ctx* c) {
  rlx_tensor x, g, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(need_float(c, x, "Det"));
  rlx_type t = type_of(c, x);
  RLX_RETURN_IF_ERROR(need_static_type(c, &t, "the input"));
  if (t.rank < 2 || t.shape[t.rank - 1] != t.shape[t.rank - 2])
    return rlx_ox_invalid(c, "the input must be [..., n, n]");
  int32_t n = (int32_t)t.shape[t.rank - 1], r = t.rank - 2;
  if (n < 1 || n > DET_MAX_N)
    return rlx_ox_unsupported(c, "%dx%d matrices (Leibniz expansion up to %d)", (int)n, (int)n,
                              DET_MAX_N);
  rlx_dtype dt = t.dtype == RLX_F64 ? RLX_F64 : RLX_F32;
  RLX_RETURN_IF_ERROR(cast(c, x, dt, &x));
  int64_t terms = 1;
  for (int32_t i = 2; i <= n; i++) terms *= i;
  int64_t idx[120 * DET_MAX_N];
  double sign[120];
  int32_t p[DET_MAX_N];
  for (int32_t i = 0; i < n; i++) p[i] = i;
  for (int64_t k = 0; k < terms; k++, next_perm(p, n)) {
    for (int32_t i = 0; i < n; i++) idx[k * n + i] = (int64_t)i * n + p[i];
    sign[k] = perm_sign(p, n);
  }
  rlx_dim flat[RLX_MAX_RANK];
  memcpy(flat, t.shape, sizeof(rlx_dim) * (size_t)r);
  flat[r] = (rlx_dim)n * n;
  int64_t ishape[2] = {terms, n};
  unsigned char sbuf[120 * 8];
  for (int64_t k = 0; k < terms; k++) rlx_store_f64(sbuf, dt, k, sign[k]);
  rlx_tensor it, st;
  int32_t last = r + 1;
  RLX_RETURN_IF_ERROR(reshape(c, x, flat, r + 1, &x));
  RLX_RETURN_IF_ERROR(constant(c, RLX_I64, 2, ishape, idx, sizeof(int64_t) * (size_t)(terms * n),
                               &it));
  RLX_RETURN_IF_ERROR(constant(c, dt, 1, &terms, sbuf, rlx_dtype_size(dt) * (size_t)terms, &st));
  G(rlx_graph_add_gather(GRAPH, x, it, r, &g));
  RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_PROD, g, &last, 1, 0, &g));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_MUL, g, st, &g));
  last = r;
  RLX_RETURN_IF_ERROR(reduce(c, RLX_RED_SUM, g, &last, 1, 0, &y));
  RLX_RETURN_IF_ERROR(cast(c, y, t.dtype, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ ReverseSequence */

/* y[t, b] = x[len[b] - 1 - t, b] for t < len[b], else x[t, b]: a
 * GatherElements along the time axis with that index table, computed in the
 * graph (sequence_lens may be a run-time input). */
static rlx_status map_reverse_sequence(rlx_ox_ctx* c) {
  int64_t ba, ta;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "batch_axis", 1, &ba));
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "time_axis", 0, &ta));
  rlx_tensor x, lens, tt, lt, rev, idx, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(in(c, 1, &lens));
  rlx_type tx = type_of(c, x);
  RLX_RETURN_IF_ERROR(need_static_type(c, &tx, "the input"));
  if (tx.rank < 2 || (ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
    return rlx_ox_invalid(c, "batch_axis/time_axis must be 0 and 1 (in either order)");
  int64_t T = tx.shape[ta], *steps;
  rlx_dim tshape[RLX_MAX_RANK], lshape[RLX_MAX_RANK];
  for (int32_t d = 0; d < tx.rank; d++) {
    tshape[d] = d == ta ? T : 1;
    lshape[d] = d == ba ? tx.shape[ba] : 1;
  }
  RLX_RETURN_IF_ERROR(host_i64(c, T, &steps));
  for (int64_t i = 0; i < T; i++) steps[i] = i;
  rlx_status s = constant(c, RLX_I64, tx.rank, tshape, steps, sizeof(int64_t) * (size_t)T, &tt);
  free(steps);
  RLX_RETURN_IF_ERROR(s);
  RLX_RETURN_IF_ERROR(cast(c, lens, RLX_I64, &lens));
  RLX_RETURN_IF_ERROR(reshape(c, lens, lshape, tx.rank, &lens));
  RLX_RETURN_IF_ERROR(cmp(c, RLX_CMP_LT, tt, lens, &lt));
  RLX_RETURN_IF_ERROR(bin(c, RLX_BIN_SUB, lens, tt, &rev));
  RLX_RETURN_IF_ERROR(bin_s(c, RLX_BIN_SUB, rev, 1.0, &rev));
  RLX_RETURN_IF_ERROR(where(c, lt, rev, tt, &idx));
  RLX_RETURN_IF_ERROR(expand_to(c, idx, tx.shape, tx.rank, &idx));
  RLX_RETURN_IF_ERROR(rlx_ox_gather_elements(c, x, idx, (int32_t)ta, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ BitShift */

/* x << s = x * 2^s and x >> s = x / 2^s on unsigned integers, with 2^s from
 * the integer pow (which wraps like the shift: a shift by the bit width or
 * more gives 0 either way, the unsigned divide by 0 being 0 in the IR). */
static rlx_status map_bitshift(rlx_ox_ctx* c) {
  char dir[16];
  RLX_RETURN_IF_ERROR(rlx_ox_attr_string(c, "direction", "", dir, sizeof dir));
  int left = strcmp(dir, "LEFT") == 0;
  if (!left && strcmp(dir, "RIGHT") != 0)
    return rlx_ox_invalid(c, "direction must be LEFT or RIGHT, got '%s'", dir);
  rlx_tensor x, s, pw, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(in(c, 1, &s));
  rlx_dtype dt = type_of(c, x).dtype;
  if (dt != RLX_U8 && dt != RLX_U16 && dt != RLX_U32 && dt != RLX_U64)
    return rlx_ox_invalid(c, "BitShift takes unsigned integers, got %s", rlx_dtype_name(dt));
  RLX_RETURN_IF_ERROR(s_bin(c, RLX_BIN_POW, 2.0, s, &pw));
  RLX_RETURN_IF_ERROR(bin(c, left ? RLX_BIN_MUL : RLX_BIN_DIV, x, pw, &y));
  return rlx_ox_set(c, 0, y);
}

/* ------------------------------------------------------------------ value-shaped ops */

/* NonZero: [rank, count] coordinates of the non-zero elements, row-major.
 * The count depends on the values, so the input must be known at import. */
static rlx_status map_nonzero(rlx_ox_ctx* c) {
  const rlx_host_tensor* k;
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 0, "the input (its non-zero count is the output's shape)",
                                        &k));
  int64_t n = rlx_host_numel(k), nz = 0, *coords;
  for (int64_t p = 0; p < n; p++) nz += rlx_load_f64(k->data, k->dtype, p) != 0;
  int32_t rank = k->rank;
  RLX_RETURN_IF_ERROR(host_i64(c, (rank ? rank : 1) * nz, &coords));
  for (int64_t p = 0, j = 0; p < n; p++) {
    if (rlx_load_f64(k->data, k->dtype, p) == 0) continue;
    int64_t rem = p;
    for (int32_t d = rank - 1; d >= 0; d--) {
      coords[d * nz + j] = rem % k->shape[d];
      rem /= k->shape[d];
    }
    j++;
  }
  int64_t shape[2] = {rank, nz};
  rlx_status s = known_out(c, 0, RLX_I64, 2, shape, coords);
  free(coords);
  return s;
}

/* Compress: the condition picks slices along axis (or elements of the
 * flattened input); the kept count is the output's shape, so the condition
 * must be known at import (the data need not be: one Gather of the kept
 * positions). */
static rlx_status map_compress(rlx_ox_ctx* c) {
  const rlx_host_tensor* k;
  rlx_tensor x, it, y;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 1, "condition (its true count is the output's shape)",
                                        &k));
  rlx_type tx = type_of(c, x);
  RLX_RETURN_IF_ERROR(need_static_type(c, &tx, "the input"));
  int32_t ax = 0;
  if (rlx_ox_attr_has(c, "axis")) {
    int64_t axis;
    RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 0, &axis));
    RLX_RETURN_IF_ERROR(norm_axis(c, axis, tx.rank, &ax));
  } else {
    rlx_dim n = rlx_type_numel(&tx);
    RLX_RETURN_IF_ERROR(reshape(c, x, &n, 1, &x));
    tx = type_of(c, x);
  }
  int64_t n = rlx_host_numel(k), len = tx.shape[ax], kept = 0, *pos;
  if (k->rank != 1) return rlx_ox_invalid(c, "condition must be 1-D");
  if (n > len) n = len; /* ONNX: a longer condition's tail is ignored */
  RLX_RETURN_IF_ERROR(host_i64(c, n, &pos));
  for (int64_t p = 0; p < n; p++)
    if (rlx_load_f64(k->data, k->dtype, p) != 0) pos[kept++] = p;
  rlx_status s = const_i64(c, pos, kept, &it);
  free(pos);
  RLX_RETURN_IF_ERROR(s);
  G(rlx_graph_add_gather(GRAPH, x, it, ax, &y));
  return rlx_ox_set(c, 0, y);
}

/* Unique over slices along an axis of a known tensor viewed as
 * [outer, len, inner] (no axis: the flattened elements). qsort has no
 * context argument, so the slices being compared are named by a
 * thread-local view. */
typedef struct slice_view {
  const rlx_host_tensor* k;
  int64_t len, inner, outer;
} slice_view;
static _Thread_local const slice_view* uniq_view;

static int slice_cmp(int64_t a, int64_t b) {
  const slice_view* v = uniq_view;
  int is_int = !rlx_dtype_is_float(v->k->dtype);
  for (int64_t o = 0; o < v->outer; o++)
    for (int64_t i = 0; i < v->inner; i++) {
      int64_t pa = (o * v->len + a) * v->inner + i, pb = (o * v->len + b) * v->inner + i;
      if (is_int) {
        int64_t x = rlx_load_i64(v->k->data, v->k->dtype, pa);
        int64_t y = rlx_load_i64(v->k->data, v->k->dtype, pb);
        if (x != y) return x < y ? -1 : 1;
      } else {
        double x = rlx_load_f64(v->k->data, v->k->dtype, pa);
        double y = rlx_load_f64(v->k->data, v->k->dtype, pb);
        if (x != y) return x < y ? -1 : 1;
      }
    }
  return 0;
}

/* Orders by slice value, then by position (so a group starts at its first
 * occurrence). */
static int slice_order(const void* pa, const void* pb) {
  int64_t a = *(const int64_t*)pa, b = *(const int64_t*)pb;
  int r = slice_cmp(a, b);
  return r ? r : (a > b) - (a < b);
}

static int first_order(const void* pa, const void* pb) {
  const int64_t* a = pa;
  const int64_t* b = pb;
  return (a[0] > b[0]) - (a[0] < b[0]);
}

/* Groups the sorted positions: first[g], count[g] and the group of each
 * position; with !sorted the groups are renumbered by first occurrence. */
static void unique_groups(const int64_t* order, int64_t len, int sorted, int64_t* first,
                          int64_t* count, int64_t* group, int64_t* n_groups, int64_t* pairs) {
  int64_t g = -1;
  for (int64_t i = 0; i < len; i++) {
    if (i == 0 || slice_cmp(order[i - 1], order[i]) != 0) {
      first[++g] = order[i];
      count[g] = 0;
    }
    count[g]++;
    group[order[i]] = g;
  }
  *n_groups = g + 1;
  if (sorted) return;
  for (int64_t j = 0; j < *n_groups; j++) { /* (first, count, old group) sorted by first */
    pairs[3 * j] = first[j];
    pairs[3 * j + 1] = count[j];
    pairs[3 * j + 2] = j;
  }
  qsort(pairs, (size_t)*n_groups, 3 * sizeof(int64_t), first_order);
  int64_t* renumber = pairs + 3 * *n_groups;
  for (int64_t j = 0; j < *n_groups; j++) {
    first[j] = pairs[3 * j];
    count[j] = pairs[3 * j + 1];
    renumber[pairs[3 * j + 2]] = j;
  }
  for (int64_t i = 0; i < len; i++) group[i] = renumber[group[i]];
}

static rlx_status unique_outputs(rlx_ox_ctx* c, rlx_tensor x, int32_t ax, const int64_t* first,
                                 const int64_t* count, const int64_t* group, int64_t n_groups,
                                 int64_t len) {
  rlx_tensor it, y;
  RLX_RETURN_IF_ERROR(const_i64(c, first, n_groups, &it));
  G(rlx_graph_add_gather(GRAPH, x, it, ax, &y));
  RLX_RETURN_IF_ERROR(rlx_ox_set(c, 0, y));
  if (rlx_ox_wants(c, 1)) RLX_RETURN_IF_ERROR(known_out(c, 1, RLX_I64, 1, &n_groups, first));
  if (rlx_ox_wants(c, 2)) RLX_RETURN_IF_ERROR(known_out(c, 2, RLX_I64, 1, &len, group));
  if (rlx_ox_wants(c, 3)) RLX_RETURN_IF_ERROR(known_out(c, 3, RLX_I64, 1, &n_groups, count));
  return RLX_OK;
}

/* Unique: every output's shape is the distinct count, so X must be known at
 * import; the outputs are computed on the host (Y as a Gather of the first
 * occurrences). */
static rlx_status map_unique(rlx_ox_ctx* c) {
  int64_t sorted_attr;
  RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "sorted", 1, &sorted_attr));
  const rlx_host_tensor* k;
  RLX_RETURN_IF_ERROR(rlx_ox_need_known(c, 0, "X (its distinct count is the outputs' shape)", &k));
  rlx_tensor x;
  RLX_RETURN_IF_ERROR(in(c, 0, &x));
  slice_view v = {k, rlx_host_numel(k), 1, 1};
  int32_t ax = 0;
  if (rlx_ox_attr_has(c, "axis")) {
    int64_t axis;
    RLX_RETURN_IF_ERROR(rlx_ox_attr_int(c, "axis", 0, &axis));
    RLX_RETURN_IF_ERROR(norm_axis(c, axis, k->rank, &ax));
    v.len = k->shape[ax];
    for (int32_t d = 0; d < k->rank; d++) {
      if (d < ax) v.outer *= k->shape[d];
      if (d > ax) v.inner *= k->shape[d];
    }
  } else {
    rlx_dim n = v.len;
    RLX_RETURN_IF_ERROR(reshape(c, x, &n, 1, &x));
  }
  int64_t* buf;
  RLX_RETURN_IF_ERROR(host_i64(c, 8 * v.len, &buf));
  int64_t *order = buf, *first = buf + v.len, *count = buf + 2 * v.len, *group = buf + 3 * v.len;
  int64_t n_groups = 0;
  for (int64_t i = 0; i < v.len; i++) order[i] = i;
  uniq_view = &v;
  qsort(order, (size_t)v.len, sizeof(int64_t), slice_order);
  unique_groups(order, v.len, sorted_attr != 0, first, count, group, &n_groups, buf + 4 * v.len);
  uniq_view = NULL;
  rlx_status s = unique_outputs(c, x, ax, first, count, group, n_groups, v.len);
  free(buf);
  return s;
}

/* ------------------------------------------------------------------ table */

static const rlx_ox_op misc_ops[] = {
    {"BitShift", map_bitshift, 0, 0},
    {"Compress", map_compress, 0, 0},
    {"Det", map_det, 0, 0},
    {"Einsum", map_einsum, 0, 0},
    {"GatherND", map_gather_nd, 0, 0},
    {"NonZero", map_nonzero, 0, 0},
    {"ReverseSequence", map_reverse_sequence, 0, 0},
    {"Scatter", map_scatter_elements, 0, 0},
    {"ScatterElements", map_scatter_elements, 0, 0},
    {"ScatterND", map_scatter_nd, 0, 0},
    {"Unique", map_unique, 0, 0},
};

const rlx_ox_op* rlx_ox_find_misc_op(const char* op_type) {
  const rlx_ox_op* op = rlx_ox_op_in(misc_ops, sizeof misc_ops / sizeof misc_ops[0], op_type);
  return op ? op : rlx_ox_find_quant_op(op_type);
}

#else
typedef int rlx_onnx_misc_not_built; /* keeps the translation unit non-empty */
#endif /* RLX_HAVE_ONNX */
