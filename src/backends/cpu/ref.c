/* CPU reference kernels, part A: copy/cast, elementwise, reductions, row ops,
 * gather/scatter. These are the oracle every other backend is tested
 * against, so they favour the obviously correct over the fast: generic
 * strided loops, doubles for float math, exact int64 for integer dtypes.
 *
 * Elementwise kernels visit elements in one order and, for each element,
 * read every operand before writing the output, so an input that the planner
 * placed exactly over the output (in place) is still correct. Row kernels
 * copy the row out before writing it back for the same reason. */
#include "backends/cpu/cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/scalar_math.h"
#include "ir/dtype.h"

/* ------------------------------------------------------------------ scalars */

/* The scalar definitions are shared with the fast paths and CUDA
 * (base/scalar_math.h); these wrappers are the reference's entry points. */
double rlx_ref_activation(int act, double x) { return rlx_act_f64(act, x); }

double rlx_ref_binary(int op, double a, double b) { return rlx_binary_f64(op, a, b); }

static uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* u = splitmix64(seed ^ splitmix64(counter)); top 53 bits / 2^53. Backends
 * reproduce exactly this to draw the same numbers. */
double rlx_rand_uniform(uint64_t seed, uint64_t counter) {
  uint64_t x = splitmix64(seed ^ splitmix64(counter));
  return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

static int is_intlike(rlx_dtype t) { return rlx_dtype_is_int(t) || t == RLX_BOOL; }

/* ------------------------------------------------------------------ strided walk */

/* Walks the out view's index space, keeping every view's element offset in
 * step (an odometer over the shape). Views are all aligned to out's shape. */
typedef struct walk {
  int32_t rank, n_views;
  int64_t shape[RLX_MAX_RANK];
  int64_t stride[RLX_STEP_MAX_IN + 1][RLX_MAX_RANK];
  int64_t idx[RLX_MAX_RANK];
  int64_t off[RLX_STEP_MAX_IN + 1]; /* element offsets, per view */
  int64_t remaining;
} walk;

static void walk_init(walk* w, const rlx_view* shape_of, const rlx_view* const* views, int n) {
  memset(w, 0, sizeof *w);
  w->rank = shape_of->rank;
  w->n_views = n;
  w->remaining = 1;
  for (int32_t d = 0; d < w->rank; d++) {
    w->shape[d] = shape_of->shape[d];
    w->remaining *= w->shape[d];
    for (int v = 0; v < n; v++) w->stride[v][d] = views[v]->stride[d];
  }
}

/* Advances to the next element; returns 0 when done. */
static int walk_next(walk* w) {
  if (--w->remaining <= 0) return 0;
  for (int32_t d = w->rank - 1; d >= 0; d--) {
    if (++w->idx[d] < w->shape[d]) {
      for (int v = 0; v < w->n_views; v++) w->off[v] += w->stride[v][d];
      return 1;
    }
    for (int v = 0; v < w->n_views; v++) w->off[v] -= w->stride[v][d] * (w->shape[d] - 1);
    w->idx[d] = 0;
  }
  return 1;
}

static uint8_t* view_base(uint8_t* arena, const rlx_view* v) { return arena + v->offset; }

static rlx_status check_aligned(const rlx_step* s, rlx_error* err) {
  for (int32_t i = 0; i < s->n_in; i++) {
    if (s->in[i].rank != s->out[0].rank)
      return rlx_fail(err, RLX_INTERNAL, "%s step of node %d: operand %d rank %d, output rank %d",
                      rlx_kernel_name(s->kernel), s->node, i, s->in[i].rank, s->out[0].rank);
    for (int32_t d = 0; d < s->out[0].rank; d++)
      if (s->in[i].shape[d] != s->out[0].shape[d])
        return rlx_fail(err, RLX_INTERNAL, "%s step of node %d: operand %d not aligned to output",
                        rlx_kernel_name(s->kernel), s->node, i);
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ elementwise */

static void copy_element(void* dst, rlx_dtype dt, int64_t di, const void* src, rlx_dtype st,
                         int64_t si) {
  if (dt == st) {
    size_t es = rlx_dtype_size(dt);
    memmove((uint8_t*)dst + di * (int64_t)es, (const uint8_t*)src + si * (int64_t)es, es);
  } else if (is_intlike(dt) && is_intlike(st)) {
    rlx_store_i64(dst, dt, di, rlx_load_i64(src, st, si));
  } else {
    rlx_store_f64(dst, dt, di, rlx_load_f64(src, st, si));
  }
}

static rlx_status run_elementwise(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_aligned(s, err));
  const rlx_view* views[RLX_STEP_MAX_IN + 1];
  views[0] = &s->out[0];
  for (int32_t i = 0; i < s->n_in; i++) views[i + 1] = &s->in[i];
  walk w;
  walk_init(&w, &s->out[0], views, s->n_in + 1);
  if (w.remaining == 0) return RLX_OK;
  uint8_t* o = view_base(arena, &s->out[0]);
  rlx_dtype ot = s->out[0].dtype;
  const uint8_t* a = s->n_in > 0 ? view_base(arena, &s->in[0]) : NULL;
  const uint8_t* b = s->n_in > 1 ? view_base(arena, &s->in[1]) : NULL;
  const uint8_t* c = s->n_in > 2 ? view_base(arena, &s->in[2]) : NULL;
  rlx_dtype at = s->in[0].dtype, bt = s->n_in > 1 ? s->in[1].dtype : at;
  int ints = is_intlike(at);
  do {
    int64_t oi = w.off[0], ai = w.off[1], bi = w.off[2], ci = w.off[3];
    switch (s->kernel) {
      case RLX_K_COPY: copy_element(o, ot, oi, a, at, ai); break;
      case RLX_K_BINARY:
        if (at == RLX_U64)
          rlx_store_i64(o, ot, oi, rlx_u64_binary(s->op, rlx_load_i64(a, at, ai),
                                                  rlx_load_i64(b, bt, bi)));
        else if (ints) rlx_store_i64(o, ot, oi, rlx_int_binary(s->op, rlx_load_i64(a, at, ai),
                                                      rlx_load_i64(b, bt, bi)));
        else rlx_store_f64(o, ot, oi, rlx_ref_binary(s->op, rlx_load_f64(a, at, ai),
                                                    rlx_load_f64(b, bt, bi)));
        break;
      case RLX_K_COMPARE:
        if (at == RLX_U64)
          rlx_store_i64(o, ot, oi, rlx_compare_u64(s->op, rlx_load_i64(a, at, ai),
                                                   rlx_load_i64(b, bt, bi)));
        else rlx_store_i64(o, ot, oi,
                      ints ? rlx_compare_i64(s->op, rlx_load_i64(a, at, ai), rlx_load_i64(b, bt, bi))
                           : rlx_compare_f64(s->op, rlx_load_f64(a, at, ai), rlx_load_f64(b, bt, bi)));
        break;
      case RLX_K_WHERE:
        if (rlx_load_i64(a, at, ai) != 0) copy_element(o, ot, oi, b, bt, bi);
        else copy_element(o, ot, oi, c, s->in[2].dtype, ci);
        break;
      case RLX_K_UNARY: {
        if (ints && rlx_act_has_int_form(s->op)) {
          int64_t x = rlx_load_i64(a, at, ai);
          rlx_store_i64(o, ot, oi, at == RLX_U64 ? rlx_act_u64(s->op, x) : rlx_act_i64(s->op, x));
        } else {
          rlx_store_f64(o, ot, oi, rlx_ref_activation(s->op, rlx_load_f64(a, at, ai)));
        }
        break;
      }
      default: break;
    }
  } while (walk_next(&w));
  return RLX_OK;
}

/* ------------------------------------------------------------------ regions */

/* v as the dtype t stores it: what the unfused chain keeps of each
 * intermediate, so a region gives the same bits. */
static double round_to(rlx_dtype t, double v) {
  if (t == RLX_F64) return v;
  if (t == RLX_F32) return (double)(float)v;
  uint8_t cell[8];
  rlx_store_f64(cell, t, 0, v);
  return rlx_load_f64(cell, t, 0);
}

/* One instruction of a region program on the element's slot values. */
static double region_instr(const rlx_region_program* p, int32_t k, const double* slot) {
  const rlx_region_instr* in = &p->code[k];
  rlx_dtype t = (rlx_dtype)p->dtype;
  switch (in->kind) {
    case RLX_RI_UNARY: return round_to(t, rlx_ref_activation(in->op, slot[in->a]));
    case RLX_RI_BINARY: return round_to(t, rlx_ref_binary(in->op, slot[in->a], slot[in->b]));
    case RLX_RI_CAST: return round_to(t, slot[in->a]);
    default: return round_to(t, p->imm[k]);
  }
}

/* Per element: load every input (as the unfused ops would, in f64), run
 * the program, store the last result. Inputs are read before the output
 * is written, so an input planned in place over the output is fine. */
static rlx_status run_region(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  RLX_RETURN_IF_ERROR(check_aligned(s, err));
  const rlx_region_program* p = &s->p.region;
  if (p->n_inputs != s->n_in || p->n_instrs < 1 || p->n_instrs > RLX_REGION_MAX_INSTRS)
    return rlx_fail(err, RLX_INTERNAL, "region step of node %d: program does not match its %d "
                    "inputs", s->node, s->n_in);
  const rlx_view* views[RLX_STEP_MAX_IN + 1];
  views[0] = &s->out[0];
  for (int32_t i = 0; i < s->n_in; i++) views[i + 1] = &s->in[i];
  walk w;
  walk_init(&w, &s->out[0], views, s->n_in + 1);
  if (w.remaining == 0) return RLX_OK;
  uint8_t* o = view_base(arena, &s->out[0]);
  double slot[RLX_REGION_MAX_SLOTS];
  do {
    for (int32_t i = 0; i < s->n_in; i++)
      slot[i] = rlx_load_f64(view_base(arena, &s->in[i]), s->in[i].dtype, w.off[i + 1]);
    for (int32_t k = 0; k < p->n_instrs; k++) slot[p->n_inputs + k] = region_instr(p, k, slot);
    rlx_store_f64(o, s->out[0].dtype, w.off[0], slot[p->n_inputs + p->n_instrs - 1]);
  } while (walk_next(&w));
  return RLX_OK;
}

/* ------------------------------------------------------------------ numbers */

/* An element kept exactly: integers as int64, floats as double. */
typedef struct num {
  double f;
  int64_t i;
} num;

static num load_num(const void* base, rlx_dtype t, int64_t e) {
  num n;
  if (is_intlike(t)) {
    n.i = rlx_load_i64(base, t, e);
    n.f = (double)n.i;
  } else {
    n.f = rlx_load_f64(base, t, e);
    n.i = 0;
  }
  return n;
}

/* Total order with NaN above everything (numpy/torch sort order). */
static int num_cmp(num a, num b, int ints) {
  if (ints) return (a.i > b.i) - (a.i < b.i);
  int an = isnan(a.f), bn = isnan(b.f);
  if (an || bn) return an - bn;
  return (a.f > b.f) - (a.f < b.f);
}

/* ------------------------------------------------------------------ reduce */

/* Max / min over an empty set (ONNX): the identity of the operation, -inf /
 * +inf, which the saturating store turns into an integer dtype's min / max
 * (the same on every backend); bool has false / true. */
static void store_empty_extreme(uint8_t* o, rlx_dtype t, int64_t i, int32_t op) {
  if (t == RLX_BOOL) rlx_store_i64(o, t, i, op == RLX_RED_MIN);
  else rlx_store_f64(o, t, i, op == RLX_RED_MAX ? -INFINITY : INFINITY);
}

static rlx_status run_reduce(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  const rlx_reduce_params* p = &s->p.reduce;
  const rlx_view* in = &s->in[0];
  const uint8_t* x = view_base(arena, in);
  uint8_t* o = view_base(arena, &s->out[0]);
  int ints = is_intlike(in->dtype);
  int32_t nk = p->n_keep, nr = p->n_red;
  for (int64_t oi = 0; oi < p->outer; oi++) {
    int64_t base = 0, rem = oi;
    for (int32_t d = nk - 1; d >= 0; d--) {
      base += (rem % in->shape[d]) * in->stride[d];
      rem /= in->shape[d];
    }
    double acc = (s->op == RLX_RED_PROD) ? 1.0 : 0.0;
    int64_t iacc = (s->op == RLX_RED_PROD) ? 1 : 0;
    num best = {NAN, 0};
    for (int64_t r = 0; r < p->inner; r++) {
      int64_t e = base;
      rem = r;
      for (int32_t d = nk + nr - 1; d >= nk; d--) {
        e += (rem % in->shape[d]) * in->stride[d];
        rem /= in->shape[d];
      }
      num v = load_num(x, in->dtype, e);
      switch (s->op) {
        case RLX_RED_SUM: case RLX_RED_MEAN:
          acc += v.f;
          iacc = (int64_t)((uint64_t)iacc + (uint64_t)v.i);
          break;
        case RLX_RED_PROD:
          acc *= v.f;
          iacc = (int64_t)((uint64_t)iacc * (uint64_t)v.i);
          break;
        case RLX_RED_MAX: case RLX_RED_MIN:
          /* NaN propagates (torch.amax): once seen, it stays. */
          if (r == 0 || (!ints && isnan(v.f))) best = v;
          else if (ints || !isnan(best.f)) {
            int c = num_cmp(v, best, ints);
            if (s->op == RLX_RED_MAX ? c > 0 : c < 0) best = v;
          }
          break;
        default:
          return rlx_fail(err, RLX_INTERNAL, "reduce step of node %d: bad op %d", s->node, s->op);
      }
    }
    rlx_dtype ot = s->out[0].dtype;
    switch (s->op) {
      case RLX_RED_SUM: case RLX_RED_PROD:
        if (ints) rlx_store_i64(o, ot, oi, iacc);
        else rlx_store_f64(o, ot, oi, acc);
        break;
      case RLX_RED_MEAN: rlx_store_f64(o, ot, oi, p->inner ? acc / (double)p->inner : NAN); break;
      default:
        if (!p->inner) store_empty_extreme(o, ot, oi, s->op);
        else if (ints) rlx_store_i64(o, ot, oi, best.i);
        else rlx_store_f64(o, ot, oi, best.f);
        break;
    }
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ row ops */

static int64_t row_elem(const rlx_row_params* r, int64_t o, int64_t i, int64_t j) {
  return (o * r->n + i) * r->inner + j;
}

static rlx_status run_arg_reduce(uint8_t* arena, const rlx_step* s) {
  const rlx_row_params* r = &s->p.rowop.row;
  const uint8_t* x = view_base(arena, &s->in[0]);
  uint8_t* o = view_base(arena, &s->out[0]);
  rlx_dtype t = s->in[0].dtype;
  int ints = is_intlike(t);
  if (r->n <= 0) return RLX_OK; /* rejected at lowering; never read an empty row */
  for (int64_t oi = 0; oi < r->outer; oi++) {
    for (int64_t j = 0; j < r->inner; j++) {
      int64_t best_i = 0;
      num best = load_num(x, t, row_elem(r, oi, 0, j));
      for (int64_t i = 1; i < r->n && (ints || !isnan(best.f)); i++) {
        num v = load_num(x, t, row_elem(r, oi, i, j));
        int c = num_cmp(v, best, ints);
        /* First NaN wins for both argmax and argmin (numpy/torch). */
        int better = (!ints && isnan(v.f)) || (s->op == 0 ? c > 0 : c < 0);
        if (better) { best = v; best_i = i; }
      }
      rlx_store_i64(o, s->out[0].dtype, oi * r->inner + j, best_i);
    }
  }
  return RLX_OK;
}

static rlx_status alloc_row(int64_t n, size_t elem, void** out, const rlx_step* s,
                            rlx_error* err) {
  *out = malloc((size_t)(n > 0 ? n : 1) * elem);
  if (!*out)
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "%s step of node %d: out of host memory",
                    rlx_kernel_name(s->kernel), s->node);
  return RLX_OK;
}

static rlx_status run_softmax(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  const rlx_row_params* r = &s->p.rowop.row;
  const uint8_t* x = view_base(arena, &s->in[0]);
  uint8_t* o = view_base(arena, &s->out[0]);
  double* row;
  RLX_RETURN_IF_ERROR(alloc_row(r->n, sizeof *row, (void**)&row, s, err));
  for (int64_t oi = 0; oi < r->outer; oi++) {
    for (int64_t j = 0; j < r->inner; j++) {
      double m = -INFINITY, sum = 0;
      for (int64_t i = 0; i < r->n; i++) {
        row[i] = rlx_load_f64(x, s->in[0].dtype, row_elem(r, oi, i, j));
        if (isnan(row[i]) || row[i] > m) m = row[i]; /* NaN poisons the row */
      }
      for (int64_t i = 0; i < r->n; i++) sum += exp(row[i] - m);
      double log_sum = log(sum);
      for (int64_t i = 0; i < r->n; i++) {
        double y = s->op == 0 ? exp(row[i] - m) / sum : row[i] - m - log_sum;
        rlx_store_f64(o, s->out[0].dtype, row_elem(r, oi, i, j), y);
      }
    }
  }
  free(row);
  return RLX_OK;
}

static rlx_status run_cumsum(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  const rlx_row_params* r = &s->p.rowop.row;
  const uint8_t* x = view_base(arena, &s->in[0]);
  uint8_t* o = view_base(arena, &s->out[0]);
  rlx_dtype it = s->in[0].dtype, ot = s->out[0].dtype;
  int ints = is_intlike(it);
  num* row;
  RLX_RETURN_IF_ERROR(alloc_row(r->n, sizeof *row, (void**)&row, s, err));
  for (int64_t oi = 0; oi < r->outer; oi++) {
    for (int64_t j = 0; j < r->inner; j++) {
      for (int64_t i = 0; i < r->n; i++) row[i] = load_num(x, it, row_elem(r, oi, i, j));
      double acc = 0;
      uint64_t iacc = 0;
      for (int64_t step = 0; step < r->n; step++) {
        int64_t i = s->p.rowop.reverse ? r->n - 1 - step : step;
        num v = row[i];
        if (!s->p.rowop.exclusive) { acc += v.f; iacc += (uint64_t)v.i; }
        if (ints) rlx_store_i64(o, ot, row_elem(r, oi, i, j), (int64_t)iacc);
        else rlx_store_f64(o, ot, row_elem(r, oi, i, j), acc);
        if (s->p.rowop.exclusive) { acc += v.f; iacc += (uint64_t)v.i; }
      }
    }
  }
  free(row);
  return RLX_OK;
}

typedef struct topk_item {
  num v;
  int64_t index;
  int ints;
} topk_item;

/* Ascending by value, ties by lower index. */
static int topk_cmp_asc(const void* pa, const void* pb) {
  const topk_item *a = pa, *b = pb;
  int c = num_cmp(a->v, b->v, a->ints);
  return c ? c : (a->index > b->index) - (a->index < b->index);
}

/* Descending by value, ties still by lower index. */
static int topk_cmp_desc(const void* pa, const void* pb) {
  const topk_item *a = pa, *b = pb;
  int c = num_cmp(b->v, a->v, a->ints);
  return c ? c : (a->index > b->index) - (a->index < b->index);
}

static rlx_status run_topk(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  const rlx_row_params* r = &s->p.rowop.row;
  int64_t k = s->p.rowop.k;
  if (k < 0 || k > r->n)
    return rlx_fail(err, RLX_INTERNAL, "topk step of node %d: k=%lld outside [0, %lld]", s->node,
                    (long long)k, (long long)r->n);
  const uint8_t* x = view_base(arena, &s->in[0]);
  uint8_t* vals = view_base(arena, &s->out[0]);
  uint8_t* idxs = view_base(arena, &s->out[1]);
  rlx_dtype t = s->in[0].dtype;
  int ints = is_intlike(t);
  topk_item* row;
  RLX_RETURN_IF_ERROR(alloc_row(r->n, sizeof *row, (void**)&row, s, err));
  for (int64_t oi = 0; oi < r->outer; oi++) {
    for (int64_t j = 0; j < r->inner; j++) {
      for (int64_t i = 0; i < r->n; i++) {
        row[i].v = load_num(x, t, row_elem(r, oi, i, j));
        row[i].index = i;
        row[i].ints = ints;
      }
      qsort(row, (size_t)r->n, sizeof *row, s->p.rowop.largest ? topk_cmp_desc : topk_cmp_asc);
      for (int64_t q = 0; q < k; q++) {
        int64_t e = (oi * k + q) * r->inner + j;
        copy_element(vals, s->out[0].dtype, e, x, t, row_elem(r, oi, row[q].index, j));
        rlx_store_i64(idxs, s->out[1].dtype, e, row[q].index);
      }
    }
  }
  free(row);
  return RLX_OK;
}

/* ------------------------------------------------------------------ gather / scatter */

static const char* step_node_name(const rlx_step* s, const rlx_run_ctx* ctx, char* buf,
                                  size_t cap) {
  if (ctx && ctx->graph && s->node >= 0 && s->node < ctx->graph->n_nodes)
    return rlx_node_str(ctx->graph, s->node, buf, cap);
  snprintf(buf, cap, "node %d", s->node);
  return buf;
}

/* Resolves a (possibly negative) index, or fails naming the node and value. */
static rlx_status resolve_index(int64_t raw, int64_t len, const rlx_step* s,
                                const rlx_run_ctx* ctx, rlx_error* err, int64_t* out) {
  int64_t v = raw < 0 ? raw + len : raw;
  if (v < 0 || v >= len) {
    char buf[128];
    return rlx_fail(err, RLX_OUT_OF_RANGE, "%s: %s index %lld out of range for an axis of size %lld",
                    step_node_name(s, ctx, buf, sizeof buf), rlx_kernel_name(s->kernel),
                    (long long)raw, (long long)len);
  }
  *out = v;
  return RLX_OK;
}

static rlx_status run_gather(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                             rlx_error* err) {
  const rlx_gather_params* p = &s->p.gather;
  const uint8_t* data = view_base(arena, &s->in[0]);
  const uint8_t* idx = view_base(arena, &s->in[1]);
  uint8_t* o = view_base(arena, &s->out[0]);
  int64_t v = 0;
  /* Check every index before writing anything: a bad index leaves the
   * output untouched rather than half written. */
  for (int64_t q = 0; q < p->n_idx; q++)
    RLX_RETURN_IF_ERROR(resolve_index(rlx_load_i64(idx, s->in[1].dtype, q), p->axis_len, s, ctx,
                                      err, &v));
  for (int64_t oi = 0; oi < p->outer; oi++) {
    for (int64_t q = 0; q < p->n_idx; q++) {
      RLX_RETURN_IF_ERROR(resolve_index(rlx_load_i64(idx, s->in[1].dtype, q), p->axis_len, s,
                                        ctx, err, &v));
      for (int64_t j = 0; j < p->inner; j++)
        copy_element(o, s->out[0].dtype, (oi * p->n_idx + q) * p->inner + j, data,
                     s->in[0].dtype, (oi * p->axis_len + v) * p->inner + j);
    }
  }
  return RLX_OK;
}

static rlx_status run_scatter_add(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                  rlx_error* err) {
  const rlx_scatter_params* p = &s->p.scatter;
  const uint8_t* idx = view_base(arena, &s->in[0]);
  const uint8_t* src = view_base(arena, &s->in[1]);
  uint8_t* o = view_base(arena, &s->out[0]);
  rlx_dtype ot = s->out[0].dtype;
  int ints = is_intlike(ot);
  rlx_view shape = s->in[0];
  shape.rank = p->rank;
  for (int32_t d = 0; d < p->rank; d++) shape.shape[d] = p->shape[d];
  const rlx_view* views[2] = {&s->in[0], &s->in[1]};
  int64_t v = 0;
  walk w;
  for (int pass = 0; pass < 2; pass++) { /* pass 0 validates, pass 1 adds */
    walk_init(&w, &shape, views, 2);
    if (w.remaining == 0) return RLX_OK;
    do {
      RLX_RETURN_IF_ERROR(resolve_index(rlx_load_i64(idx, s->in[0].dtype, w.off[0]), p->axis_len,
                                        s, ctx, err, &v));
      if (pass == 0) continue;
      int64_t e = v * p->out_stride[p->axis];
      for (int32_t d = 0; d < p->rank; d++)
        if (d != p->axis) e += w.idx[d] * p->out_stride[d];
      if (ints)
        rlx_store_i64(o, ot, e, (int64_t)((uint64_t)rlx_load_i64(o, ot, e) +
                                          (uint64_t)rlx_load_i64(src, s->in[1].dtype, w.off[1])));
      else
        rlx_store_f64(o, ot, e, rlx_load_f64(o, ot, e) + rlx_load_f64(src, s->in[1].dtype, w.off[1]));
    } while (walk_next(&w));
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ dispatch */

rlx_status rlx_ref_basic(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                         rlx_error* err) {
  switch (s->kernel) {
    case RLX_K_COPY:
    case RLX_K_BINARY:
    case RLX_K_COMPARE:
    case RLX_K_WHERE:
    case RLX_K_UNARY: return run_elementwise(arena, s, err);
    case RLX_K_REDUCE: return run_reduce(arena, s, err);
    case RLX_K_ARG_REDUCE: return run_arg_reduce(arena, s);
    case RLX_K_SOFTMAX: return run_softmax(arena, s, err);
    case RLX_K_CUMSUM: return run_cumsum(arena, s, err);
    case RLX_K_TOPK: return run_topk(arena, s, err);
    case RLX_K_GATHER: return run_gather(arena, s, ctx, err);
    case RLX_K_SCATTER_ADD: return run_scatter_add(arena, s, ctx, err);
    case RLX_K_REGION: return run_region(arena, s, err);
    default:
      return rlx_fail(err, RLX_INTERNAL, "reference: step kind %s (node %d) is not a basic kernel",
                      rlx_kernel_name(s->kernel), s->node);
  }
}

static rlx_status host_step(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                            rlx_error* err) {
  (void)arena;
  (void)ctx;
  return rlx_fail(err, RLX_INTERNAL, "node %d: host step reached the CPU backend", s->node);
}

/* The reference's entry of each kernel kind (src/backends/kernels.def): the
 * oracle has every kind, so a kind without a row here does not compile. */
#define RLX_REF_KIND_COPY rlx_ref_basic
#define RLX_REF_KIND_BINARY rlx_ref_basic
#define RLX_REF_KIND_COMPARE rlx_ref_basic
#define RLX_REF_KIND_WHERE rlx_ref_basic
#define RLX_REF_KIND_UNARY rlx_ref_basic
#define RLX_REF_KIND_REGION rlx_ref_basic
#define RLX_REF_KIND_MATMUL rlx_ref_nn
#define RLX_REF_KIND_REDUCE rlx_ref_basic
#define RLX_REF_KIND_ARG_REDUCE rlx_ref_basic
#define RLX_REF_KIND_SOFTMAX rlx_ref_basic
#define RLX_REF_KIND_CUMSUM rlx_ref_basic
#define RLX_REF_KIND_TOPK rlx_ref_basic
#define RLX_REF_KIND_GATHER rlx_ref_basic
#define RLX_REF_KIND_SCATTER_ADD rlx_ref_basic
#define RLX_REF_KIND_NORM rlx_ref_nn
#define RLX_REF_KIND_ATTENTION rlx_ref_nn
#define RLX_REF_KIND_ROPE rlx_ref_nn
#define RLX_REF_KIND_SAMPLE rlx_ref_nn
#define RLX_REF_KIND_POOL rlx_ref_nn
#define RLX_REF_KIND_RESIZE rlx_ref_nn
#define RLX_REF_KIND_SAMPLER rlx_ref_nn
#define RLX_REF_KIND_CONV rlx_ref_nn
#define RLX_REF_KIND_GROUP_NORM rlx_ref_nn
#define RLX_REF_KIND_CONV_WGRAD rlx_ref_vision_bwd
#define RLX_REF_KIND_POOL_BACKWARD rlx_ref_vision_bwd
#define RLX_REF_KIND_HOST host_step
#define RLX_REF_KIND_ATTENTION_BWD rlx_ref_attention_bwd
#define RLX_REF_KIND_NORM_BWD rlx_ref_rows_backward
#define RLX_REF_KIND_SOFTMAX_BWD rlx_ref_rows_backward
#define RLX_REF_KIND_XENT rlx_ref_train
#define RLX_REF_KIND_GATHER_BACKWARD rlx_ref_train
#define RLX_REF_KIND_OPT_UPDATE rlx_ref_train
#define RLX_REF_KIND_DEQUANT_MATMUL rlx_ref_quant
#define RLX_REF_KIND_GROUPED_MATMUL rlx_ref_grouped

typedef rlx_status (*ref_fn)(uint8_t*, const rlx_step*, const rlx_run_ctx*, rlx_error*);
static const ref_fn k_kind_run[RLX_K_COUNT] = {
#define RLX_KERNEL(id, name, params, meaning) [RLX_K_##id] = RLX_REF_KIND_##id,
#include "backends/kernels.def"
#undef RLX_KERNEL
};

rlx_status rlx_ref_run_step(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                            rlx_error* err) {
  if ((unsigned)s->kernel >= RLX_K_COUNT)
    return rlx_fail(err, RLX_INTERNAL, "reference: node %d has unknown kernel kind %d", s->node,
                    (int)s->kernel);
  return k_kind_run[s->kernel](arena, s, ctx, err);
}
