/* CPU reference kernels, part A (views, layout, elementwise, reductions, row
 * ops) through the public API, checked against naive loops written here.
 *
 * Every case runs twice: once through rlx_exec_run, and once more by hand
 * over the same compiled step list on an arena filled with 0xFF bytes (NaN
 * for floats, -1 for ints), so an element a kernel forgets to write cannot
 * pass by being zero. The two runs must agree bit for bit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "harness.h"
#include "ir/dtype.h"
#include "runtime/executable.h"

/* ------------------------------------------------------------------ running */

#define MAX_OUTS 2

typedef struct tin {
  const char* name;
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  const void* data;
} tin;

typedef struct touts {
  int n;
  int64_t numel[MAX_OUTS];
  rlx_dtype dt[MAX_OUTS];
  double* v[MAX_OUTS];
  uint8_t* raw[MAX_OUTS];
} touts;

static void touts_free(touts* o) {
  for (int i = 0; i < MAX_OUTS; i++) {
    free(o->v[i]);
    free(o->raw[i]);
  }
  memset(o, 0, sizeof *o);
}

static int64_t shape_numel(const int64_t* shape, int32_t rank) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; d++) n *= shape[d];
  return n;
}

static size_t tin_bytes(const tin* t) {
  return (size_t)shape_numel(t->shape, t->rank) * rlx_dtype_size(t->dt);
}

static rlx_status set_inputs(rlx_exec* e, const tin* ins, int n_in) {
  for (int i = 0; i < n_in; i++) {
    rlx_status s = rlx_exec_set_input(e, ins[i].name, ins[i].dt, ins[i].shape, ins[i].rank,
                                      ins[i].data, tin_bytes(&ins[i]));
    if (s != RLX_OK) return s;
  }
  return RLX_OK;
}

/* Replays e's compiled steps on a 0xFF-poisoned arena and checks that every
 * output comes out byte-identical to the public run. */
static int poisoned_replay(rlx_exec* e, const tin* ins, int n_in, const touts* want) {
  const rlx_graph* g = NULL;
  const rlx_step_list* steps = NULL;
  const rlx_plan* plan = NULL;
  if (rlx_exec_graph(e, &g) != RLX_OK || rlx_exec_steps(e, &steps, &plan) != RLX_OK) {
    fprintf(stderr, "no compiled steps to replay\n");
    return 0;
  }
  uint8_t* arena = malloc(plan->arena_bytes + 64);
  if (!arena) return 0;
  memset(arena, 0xFF, plan->arena_bytes + 64);
  for (int32_t ni = 0; ni < g->n_nodes; ni++) {
    const rlx_node* n = &g->nodes[ni];
    uint64_t off = plan->offset[n->out[0]];
    if (n->op == RLX_OP_CONSTANT) memcpy(arena + off, n->a.data, n->a.data_bytes);
    if (n->op != RLX_OP_INPUT) continue;
    for (int i = 0; i < n_in; i++)
      if (!strcmp(ins[i].name, n->a.name)) memcpy(arena + off, ins[i].data, tin_bytes(&ins[i]));
  }
  rlx_run_ctx ctx = {0, g, plan, NULL};
  rlx_error err = {{0}};
  int ok = 1;
  for (int32_t i = 0; i < steps->n && ok; i++) {
    if (rlx_ref_run_step(arena, &steps->steps[i], &ctx, &err) != RLX_OK) {
      fprintf(stderr, "poisoned replay, step %d: %s\n", i, err.msg);
      ok = 0;
    }
  }
  for (int o = 0; o < want->n && ok; o++) {
    const uint8_t* got = arena + plan->offset[g->outputs[o]];
    size_t bytes = (size_t)want->numel[o] * rlx_dtype_size(want->dt[o]);
    for (size_t b = 0; b < bytes; b++) {
      if (got[b] != want->raw[o][b]) {
        fprintf(stderr, "poisoned replay differs: output %d byte %zu (0x%02x vs 0x%02x)\n", o, b,
                got[b], want->raw[o][b]);
        ok = 0;
        break;
      }
    }
  }
  free(arena);
  return ok;
}

static int read_outputs(rlx_exec* e, touts* out) {
  out->n = rlx_exec_output_count(e);
  if (out->n > MAX_OUTS) return 0;
  for (int o = 0; o < out->n; o++) {
    int32_t rank;
    int64_t shape[RLX_MAX_RANK];
    if (rlx_exec_output_type(e, o, &out->dt[o], &rank, shape) != RLX_OK) return 0;
    out->numel[o] = shape_numel(shape, rank);
    size_t bytes = (size_t)out->numel[o] * rlx_dtype_size(out->dt[o]);
    out->raw[o] = malloc(bytes + 1);
    out->v[o] = malloc(sizeof(double) * (size_t)(out->numel[o] + 1));
    if (!out->raw[o] || !out->v[o]) return 0;
    memset(out->raw[o], 0xFF, bytes + 1);
    if (rlx_exec_read_output(e, o, out->dt[o], out->raw[o], bytes) != RLX_OK) {
      fprintf(stderr, "read_output %d: %s\n", o, rlx_exec_last_error(e));
      return 0;
    }
    for (int64_t i = 0; i < out->numel[o]; i++)
      out->v[o][i] = rlx_load_f64(out->raw[o], out->dt[o], i);
  }
  return 1;
}

/* Compiles g for the CPU reference, runs it on `ins`, reads every output
 * (as doubles in out->v) and replays it poisoned. Returns 1 on success. */
static int run_graph(rlx_graph* g, const tin* ins, int n_in, touts* out) {
  memset(out, 0, sizeof *out);
  rlx_compile_options opt;
  rlx_compile_options_init(&opt);
  opt.reference = 1;
  rlx_exec* e = NULL;
  if (rlx_compile(g, "cpu", &opt, &e) != RLX_OK) {
    fprintf(stderr, "compile: %s\n", rlx_graph_last_error(g));
    return 0;
  }
  int ok = set_inputs(e, ins, n_in) == RLX_OK && rlx_exec_run(e) == RLX_OK;
  if (!ok) fprintf(stderr, "run: %s\n", rlx_exec_last_error(e));
  ok = ok && read_outputs(e, out) && poisoned_replay(e, ins, n_in, out);
  rlx_exec_destroy(e);
  return ok;
}

/* Element-wise comparison with |got - want| <= tol * max(1, |want|); NaN
 * must match NaN. Prints the first mismatch. */
static int close_to(const double* got, const double* want, int64_t n, double tol,
                    const char* what) {
  for (int64_t i = 0; i < n; i++) {
    double g = got[i], w = want[i];
    if (isnan(w) && isnan(g)) continue;
    if (isinf(w) && g == w) continue;
    double lim = tol * (fabs(w) > 1 ? fabs(w) : 1);
    if (!(fabs(g - w) <= lim)) {
      fprintf(stderr, "%s: element %lld: got %.9g want %.9g\n", what, (long long)i, g, w);
      return 0;
    }
  }
  return 1;
}

/* ------------------------------------------------------------------ index helpers */

static void unravel(int64_t i, const int64_t* shape, int32_t rank, int64_t* idx) {
  for (int32_t d = rank - 1; d >= 0; d--) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
}

static int64_t ravel(const int64_t* idx, const int64_t* shape, int32_t rank) {
  int64_t i = 0;
  for (int32_t d = 0; d < rank; d++) i = i * shape[d] + idx[d];
  return i;
}

/* NumPy: the element of an input of `shape` (rank r, right-aligned) that
 * output index `oidx` (rank orank) reads. */
static int64_t bcast_src(const int64_t* oidx, int32_t orank, const int64_t* shape, int32_t r) {
  int64_t idx[RLX_MAX_RANK];
  for (int32_t d = 0; d < r; d++) {
    int64_t od = oidx[orank - r + d];
    idx[d] = shape[d] == 1 ? 0 : od;
  }
  return ravel(idx, shape, r);
}

static void random_shape(int32_t rank, int64_t lo, int64_t hi, int64_t* shape) {
  for (int32_t d = 0; d < rank; d++) shape[d] = test_rand_int(lo, hi);
}

static float* random_f32(int64_t n, double lo, double hi) {
  float* x = malloc(sizeof(float) * (size_t)(n ? n : 1));
  test_fill_f32(x, n, lo, hi);
  return x;
}

static tin make_in(const char* name, rlx_dtype dt, const int64_t* shape, int32_t rank,
                   const void* data) {
  tin t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.dt = dt;
  t.rank = rank;
  for (int32_t d = 0; d < rank; d++) t.shape[d] = shape[d];
  t.data = data;
  return t;
}

#define NEW_GRAPH(g) \
  rlx_graph* g = NULL; \
  CHECK(rlx_graph_create(&g) == RLX_OK)

/* ------------------------------------------------------------------ elementwise */

typedef struct shape_pair {
  int32_t ra, rb;
  int64_t a[4], b[4];
} shape_pair;

static const shape_pair k_bcast_pairs[] = {
    {2, 2, {3, 4}, {3, 4}},       {2, 1, {3, 4}, {4}},          {2, 2, {3, 1}, {1, 4}},
    {3, 2, {2, 3, 4}, {3, 1}},    {1, 2, {1}, {2, 3}},          {0, 2, {0}, {2, 3}},
    {3, 3, {5, 1, 3}, {1, 4, 1}}, {4, 3, {2, 1, 3, 1}, {4, 1, 5}}, {2, 0, {3, 5}, {0}},
    {1, 1, {1}, {7}},
};

static double ref_binary(int op, double a, double b) {
  switch (op) {
    case RLX_BIN_ADD: return a + b;
    case RLX_BIN_SUB: return a - b;
    case RLX_BIN_MUL: return a * b;
    case RLX_BIN_DIV: return a / b;
    case RLX_BIN_MAX: return a >= b ? a : b;
    case RLX_BIN_MIN: return a <= b ? a : b;
    default: return pow(a, b);
  }
}

static void broadcast_shape(const shape_pair* p, int32_t* orank, int64_t* oshape) {
  *orank = p->ra > p->rb ? p->ra : p->rb;
  for (int32_t d = 0; d < *orank; d++) {
    int32_t da = d - (*orank - p->ra), db = d - (*orank - p->rb);
    int64_t sa = da >= 0 ? p->a[da] : 1, sb = db >= 0 ? p->b[db] : 1;
    oshape[d] = sa > sb ? sa : sb;
  }
}

TEST(binary_broadcast_f32) {
  test_seed(1);
  for (size_t pi = 0; pi < sizeof k_bcast_pairs / sizeof *k_bcast_pairs; pi++) {
    const shape_pair* p = &k_bcast_pairs[pi];
    int32_t orank;
    int64_t oshape[RLX_MAX_RANK], idx[RLX_MAX_RANK];
    broadcast_shape(p, &orank, oshape);
    int64_t na = shape_numel(p->a, p->ra), nb = shape_numel(p->b, p->rb);
    int64_t no = shape_numel(oshape, orank);
    for (int op = 0; op < RLX_BIN_COUNT; op++) {
      /* Positive bases keep Pow real; both signs elsewhere. */
      float* a = random_f32(na, op == RLX_BIN_POW ? 0.5 : -2, 2);
      float* b = random_f32(nb, op == RLX_BIN_POW ? -1.5 : -2, 2);
      NEW_GRAPH(g);
      rlx_tensor ta, tb, tc;
      CHECK(rlx_graph_add_input(g, "a", RLX_F32, p->a, p->ra, &ta) == RLX_OK);
      CHECK(rlx_graph_add_input(g, "b", RLX_F32, p->b, p->rb, &tb) == RLX_OK);
      CHECK_OK_G(g, rlx_graph_add_binary(g, (rlx_binary_op)op, ta, tb, &tc));
      CHECK(rlx_graph_set_outputs(g, &tc, 1) == RLX_OK);
      tin ins[2] = {make_in("a", RLX_F32, p->a, p->ra, a), make_in("b", RLX_F32, p->b, p->rb, b)};
      touts out;
      CHECK_MSG(run_graph(g, ins, 2, &out), "pair %zu op %d", pi, op);
      CHECK(out.numel[0] == no);
      double* want = malloc(sizeof(double) * (size_t)no);
      for (int64_t i = 0; i < no; i++) {
        unravel(i, oshape, orank, idx);
        want[i] = (float)ref_binary(op, a[bcast_src(idx, orank, p->a, p->ra)],
                                    b[bcast_src(idx, orank, p->b, p->rb)]);
      }
      int ok = close_to(out.v[0], want, no, 1e-6, "binary");
      free(want);
      free(a);
      free(b);
      touts_free(&out);
      rlx_graph_destroy(g);
      CHECK_MSG(ok, "pair %zu op %d", pi, op);
    }
  }
}

/* Integer Div truncates toward zero; x / 0 is 0; Max/Min propagate NaN. */
TEST(binary_int_and_nan) {
  int64_t s[1] = {8};
  int32_t a[8] = {7, -7, 7, -7, 5, -9, 100, 3};
  int32_t b[8] = {2, 2, -2, -2, 0, 4, -7, 3};
  int32_t want_div[8] = {3, -3, -3, 3, 0, -2, -14, 1};
  NEW_GRAPH(g);
  rlx_tensor ta, tb, td, tmx, tmn;
  CHECK(rlx_graph_add_input(g, "a", RLX_I32, s, 1, &ta) == RLX_OK);
  CHECK(rlx_graph_add_input(g, "b", RLX_I32, s, 1, &tb) == RLX_OK);
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_DIV, ta, tb, &td));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_MAX, ta, tb, &tmx));
  rlx_tensor outs[2] = {td, tmx};
  CHECK(rlx_graph_set_outputs(g, outs, 2) == RLX_OK);
  tin ins[2] = {make_in("a", RLX_I32, s, 1, a), make_in("b", RLX_I32, s, 1, b)};
  touts out;
  CHECK(run_graph(g, ins, 2, &out));
  for (int i = 0; i < 8; i++) {
    CHECK_MSG(out.v[0][i] == want_div[i], "div %d: %g", i, out.v[0][i]);
    CHECK(out.v[1][i] == (a[i] > b[i] ? a[i] : b[i]));
  }
  touts_free(&out);
  rlx_graph_destroy(g);

  float x[4] = {1.f, NAN, -2.f, NAN}, y[4] = {NAN, 3.f, -1.f, NAN};
  int64_t s4[1] = {4};
  NEW_GRAPH(h);
  CHECK(rlx_graph_add_input(h, "x", RLX_F32, s4, 1, &ta) == RLX_OK);
  CHECK(rlx_graph_add_input(h, "y", RLX_F32, s4, 1, &tb) == RLX_OK);
  CHECK_OK_G(h, rlx_graph_add_binary(h, RLX_BIN_MAX, ta, tb, &tmx));
  CHECK_OK_G(h, rlx_graph_add_binary(h, RLX_BIN_MIN, ta, tb, &tmn));
  rlx_tensor o2[2] = {tmx, tmn};
  CHECK(rlx_graph_set_outputs(h, o2, 2) == RLX_OK);
  tin in2[2] = {make_in("x", RLX_F32, s4, 1, x), make_in("y", RLX_F32, s4, 1, y)};
  CHECK(run_graph(h, in2, 2, &out));
  CHECK(isnan(out.v[0][0]) && isnan(out.v[0][1]) && out.v[0][2] == -1 && isnan(out.v[0][3]));
  CHECK(isnan(out.v[1][0]) && isnan(out.v[1][1]) && out.v[1][2] == -2 && isnan(out.v[1][3]));
  touts_free(&out);
  rlx_graph_destroy(h);
}

static int ref_compare(int op, double a, double b) {
  switch (op) {
    case RLX_CMP_EQ: return a == b;
    case RLX_CMP_NE: return a != b;
    case RLX_CMP_LT: return a < b;
    case RLX_CMP_LE: return a <= b;
    case RLX_CMP_GT: return a > b;
    default: return a >= b;
  }
}

TEST(compare_and_where_broadcast) {
  test_seed(2);
  for (size_t pi = 0; pi < sizeof k_bcast_pairs / sizeof *k_bcast_pairs; pi++) {
    const shape_pair* p = &k_bcast_pairs[pi];
    int32_t orank;
    int64_t oshape[RLX_MAX_RANK], idx[RLX_MAX_RANK];
    broadcast_shape(p, &orank, oshape);
    int64_t na = shape_numel(p->a, p->ra), nb = shape_numel(p->b, p->rb);
    int64_t no = shape_numel(oshape, orank);
    /* Small integers as floats so equality happens often. */
    float* a = random_f32(na, -3, 3);
    float* b = random_f32(nb, -3, 3);
    for (int64_t i = 0; i < na; i++) a[i] = (float)floor(a[i]) + 0.5f;
    for (int64_t i = 0; i < nb; i++) b[i] = (float)floor(b[i]) + 0.5f;
    for (int op = 0; op < RLX_CMP_COUNT; op++) {
      NEW_GRAPH(g);
      rlx_tensor ta, tb, tc, tw;
      CHECK(rlx_graph_add_input(g, "a", RLX_F32, p->a, p->ra, &ta) == RLX_OK);
      CHECK(rlx_graph_add_input(g, "b", RLX_F32, p->b, p->rb, &tb) == RLX_OK);
      CHECK_OK_G(g, rlx_graph_add_compare(g, (rlx_compare_op)op, ta, tb, &tc));
      /* where(cond, a, b) with all three broadcast. */
      CHECK_OK_G(g, rlx_graph_add_where(g, tc, ta, tb, &tw));
      rlx_tensor outs[2] = {tc, tw};
      CHECK(rlx_graph_set_outputs(g, outs, 2) == RLX_OK);
      tin ins[2] = {make_in("a", RLX_F32, p->a, p->ra, a), make_in("b", RLX_F32, p->b, p->rb, b)};
      touts out;
      CHECK_MSG(run_graph(g, ins, 2, &out), "pair %zu op %d", pi, op);
      CHECK(out.dt[0] == RLX_BOOL && out.numel[0] == no && out.numel[1] == no);
      for (int64_t i = 0; i < no; i++) {
        unravel(i, oshape, orank, idx);
        double va = a[bcast_src(idx, orank, p->a, p->ra)];
        double vb = b[bcast_src(idx, orank, p->b, p->rb)];
        int c = ref_compare(op, va, vb);
        CHECK_MSG(out.v[0][i] == c, "pair %zu op %d elem %lld", pi, op, (long long)i);
        CHECK_MSG(out.v[1][i] == (c ? va : vb), "where pair %zu elem %lld", pi, (long long)i);
      }
      touts_free(&out);
      rlx_graph_destroy(g);
    }
    free(a);
    free(b);
  }
}

static double ref_act(int act, double x) {
  const double pi = 3.14159265358979323846;
  switch (act) {
    case RLX_ACT_RELU: return x > 0 ? x : 0;
    case RLX_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case RLX_ACT_TANH: return tanh(x);
    case RLX_ACT_EXP: return exp(x);
    case RLX_ACT_LOG: return log(x);
    case RLX_ACT_SQRT: return sqrt(x);
    case RLX_ACT_RSQRT: return 1 / sqrt(x);
    case RLX_ACT_NEG: return -x;
    case RLX_ACT_ABS: return x < 0 ? -x : x;
    case RLX_ACT_GELU: return x * 0.5 * erfc(-x / sqrt(2.0));
    case RLX_ACT_GELU_APPROX:
      return 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * pow(x, 3))));
    case RLX_ACT_SILU: return x * (1 / (1 + exp(-x)));
    case RLX_ACT_ROUND: return nearbyint(x); /* default mode: half to even */
    case RLX_ACT_SIN: return sin(x);
    case RLX_ACT_COS: return cos(x);
    case RLX_ACT_TAN: return tan(x);
    default: return atan(x);
  }
}

TEST(activations_all) {
  test_seed(3);
  int64_t s[2] = {7, 9};
  int64_t n = 63;
  for (int act = RLX_ACT_RELU; act < RLX_ACT_COUNT; act++) {
    int positive = act == RLX_ACT_LOG || act == RLX_ACT_SQRT || act == RLX_ACT_RSQRT;
    float* x = random_f32(n, positive ? 0.1 : -4, 4);
    if (act == RLX_ACT_ROUND) { /* exact halves exercise half-to-even */
      const float halves[8] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 3.5f, -3.49f};
      memcpy(x, halves, sizeof halves);
    }
    NEW_GRAPH(g);
    rlx_tensor tx, ty;
    CHECK(rlx_graph_add_input(g, "x", RLX_F32, s, 2, &tx) == RLX_OK);
    CHECK_OK_G(g, rlx_graph_add_activation(g, (rlx_activation)act, tx, &ty));
    CHECK(rlx_graph_set_outputs(g, &ty, 1) == RLX_OK);
    tin ins[1] = {make_in("x", RLX_F32, s, 2, x)};
    touts out;
    CHECK_MSG(run_graph(g, ins, 1, &out), "act %d", act);
    double want[63];
    for (int64_t i = 0; i < n; i++) want[i] = (float)ref_act(act, x[i]);
    int ok = close_to(out.v[0], want, n, 2e-7, "activation");
    if (act == RLX_ACT_ROUND) ok = ok && out.v[0][0] == 0 && out.v[0][1] == 2 && out.v[0][2] == 2 &&
                                  out.v[0][5] == -2 && out.v[0][7] == -3;
    touts_free(&out);
    rlx_graph_destroy(g);
    free(x);
    CHECK_MSG(ok, "act %d", act);
  }
}

/* ------------------------------------------------------------------ layout */

/* Runs a single-input f32 graph built by `build` and compares with `want`
 * exactly (layout ops move bits). */
static int check_layout(rlx_graph* g, rlx_tensor y, const float* x, const int64_t* shape,
                        int32_t rank, const double* want, int64_t n, const char* what) {
  if (rlx_graph_set_outputs(g, &y, 1) != RLX_OK) return 0;
  tin ins[1] = {make_in("x", RLX_F32, shape, rank, x)};
  touts out;
  int ok = run_graph(g, ins, 1, &out) && out.numel[0] == n && close_to(out.v[0], want, n, 0, what);
  touts_free(&out);
  return ok;
}

TEST(transpose_random) {
  test_seed(4);
  for (int iter = 0; iter < 24; iter++) {
    int32_t rank = (int32_t)test_rand_int(1, 5);
    int64_t shape[RLX_MAX_RANK], oshape[RLX_MAX_RANK], idx[RLX_MAX_RANK], sidx[RLX_MAX_RANK];
    random_shape(rank, 1, 5, shape);
    int32_t perm[RLX_MAX_RANK];
    for (int32_t d = 0; d < rank; d++) perm[d] = d;
    for (int32_t d = rank - 1; d > 0; d--) { /* Fisher-Yates */
      int32_t j = (int32_t)test_rand_int(0, d), t = perm[d];
      perm[d] = perm[j];
      perm[j] = t;
    }
    for (int32_t d = 0; d < rank; d++) oshape[d] = shape[perm[d]];
    int64_t n = shape_numel(shape, rank);
    float* x = random_f32(n, -5, 5);
    double* want = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
      unravel(i, oshape, rank, idx);
      for (int32_t d = 0; d < rank; d++) sidx[perm[d]] = idx[d];
      want[i] = x[ravel(sidx, shape, rank)];
    }
    NEW_GRAPH(g);
    rlx_tensor tx, ty;
    CHECK(rlx_graph_add_input(g, "x", RLX_F32, shape, rank, &tx) == RLX_OK);
    CHECK_OK_G(g, rlx_graph_add_transpose(g, tx, perm, rank, &ty));
    int ok = check_layout(g, ty, x, shape, rank, want, n, "transpose");
    free(x);
    free(want);
    rlx_graph_destroy(g);
    CHECK_MSG(ok, "iter %d rank %d", iter, rank);
  }
}

TEST(narrow_expand_reverse_random) {
  test_seed(5);
  for (int iter = 0; iter < 30; iter++) {
    int32_t rank = (int32_t)test_rand_int(1, 4);
    int64_t shape[RLX_MAX_RANK], oshape[RLX_MAX_RANK], idx[RLX_MAX_RANK];
    random_shape(rank, 1, 6, shape);
    int64_t n = shape_numel(shape, rank);
    float* x = random_f32(n, -5, 5);
    int kind = iter % 3;
    NEW_GRAPH(g);
    rlx_tensor tx, ty;
    CHECK(rlx_graph_add_input(g, "x", RLX_F32, shape, rank, &tx) == RLX_OK);
    int32_t orank = rank;
    memcpy(oshape, shape, sizeof shape);
    int32_t axis = (int32_t)test_rand_int(0, rank - 1);
    int64_t start = 0;
    uint32_t rev = 0;
    if (kind == 0) {
      start = test_rand_int(0, shape[axis] - 1);
      oshape[axis] = test_rand_int(1, shape[axis] - start);
      CHECK_OK_G(g, rlx_graph_add_narrow(g, tx, axis - rank /* negative axis */, start,
                                         oshape[axis], &ty));
    } else if (kind == 1) {
      /* Expand: size-1 dims grow, one new leading dim. */
      orank = rank + 1;
      oshape[0] = 3;
      for (int32_t d = 0; d < rank; d++) oshape[d + 1] = shape[d];
      CHECK(rlx_graph_add_reshape(g, tx, shape, rank, &tx) == RLX_OK); /* a view first */
      oshape[axis + 1] = shape[axis] == 1 ? 4 : shape[axis];
      CHECK_OK_G(g, rlx_graph_add_expand(g, tx, oshape, orank, &ty));
    } else {
      int32_t axes[RLX_MAX_RANK], na = 0;
      for (int32_t d = 0; d < rank; d++)
        if (test_rand_int(0, 1)) { axes[na++] = d; rev |= 1u << d; }
      CHECK_OK_G(g, rlx_graph_add_reverse(g, tx, axes, na, &ty));
    }
    int64_t no = shape_numel(oshape, orank);
    double* want = malloc(sizeof(double) * (size_t)no);
    for (int64_t i = 0; i < no; i++) {
      unravel(i, oshape, orank, idx);
      if (kind == 0) idx[axis] += start;
      if (kind == 1) {
        want[i] = x[bcast_src(idx, orank, shape, rank)];
        continue;
      }
      for (int32_t d = 0; d < rank; d++)
        if (rev & (1u << d)) idx[d] = shape[d] - 1 - idx[d];
      want[i] = x[ravel(idx, shape, rank)];
    }
    int ok = check_layout(g, ty, x, shape, rank, want, no, "narrow/expand/reverse");
    free(x);
    free(want);
    rlx_graph_destroy(g);
    CHECK_MSG(ok, "iter %d kind %d", iter, kind);
  }
}

TEST(concat_random) {
  test_seed(6);
  for (int iter = 0; iter < 12; iter++) {
    int32_t rank = (int32_t)test_rand_int(1, 4);
    int32_t axis = (int32_t)test_rand_int(0, rank - 1);
    int n_in = (int)test_rand_int(1, 4);
    int64_t shape[RLX_MAX_RANK], oshape[RLX_MAX_RANK], idx[RLX_MAX_RANK];
    random_shape(rank, 1, 4, shape);
    memcpy(oshape, shape, sizeof shape);
    oshape[axis] = 0;
    int64_t lens[4];
    float* xs[4];
    tin ins[4];
    const char* names[4] = {"a", "b", "c", "d"};
    NEW_GRAPH(g);
    rlx_tensor ts[4], ty;
    for (int k = 0; k < n_in; k++) {
      int64_t s[RLX_MAX_RANK];
      memcpy(s, shape, sizeof s);
      s[axis] = lens[k] = test_rand_int(1, 4);
      oshape[axis] += lens[k];
      xs[k] = random_f32(shape_numel(s, rank), -5, 5);
      ins[k] = make_in(names[k], RLX_F32, s, rank, xs[k]);
      CHECK(rlx_graph_add_input(g, names[k], RLX_F32, s, rank, &ts[k]) == RLX_OK);
    }
    CHECK_OK_G(g, rlx_graph_add_concat(g, ts, n_in, axis, &ty));
    CHECK(rlx_graph_set_outputs(g, &ty, 1) == RLX_OK);
    int64_t no = shape_numel(oshape, rank);
    double* want = malloc(sizeof(double) * (size_t)no);
    for (int64_t i = 0; i < no; i++) {
      unravel(i, oshape, rank, idx);
      int k = 0;
      while (idx[axis] >= lens[k]) idx[axis] -= lens[k++];
      want[i] = xs[k][ravel(idx, ins[k].shape, rank)];
    }
    touts out;
    int ok = run_graph(g, ins, n_in, &out) && out.numel[0] == no &&
             close_to(out.v[0], want, no, 0, "concat");
    touts_free(&out);
    for (int k = 0; k < n_in; k++) free(xs[k]);
    free(want);
    rlx_graph_destroy(g);
    CHECK_MSG(ok, "iter %d", iter);
  }
}

/* ------------------------------------------------------------------ gather / scatter */

TEST(gather_axes_negative_and_out_of_range) {
  test_seed(7);
  int64_t ds[3] = {4, 5, 3}, is[2] = {2, 3};
  float* data = random_f32(60, -5, 5);
  for (int32_t axis = 0; axis < 3; axis++) {
    for (int use_i32 = 0; use_i32 < 2; use_i32++) {
      int64_t len = ds[axis];
      int64_t idx64[6];
      int32_t idx32[6];
      for (int q = 0; q < 6; q++) {
        idx64[q] = test_rand_int(-len, len - 1); /* negatives count from the end */
        idx32[q] = (int32_t)idx64[q];
      }
      rlx_dtype it = use_i32 ? RLX_I32 : RLX_I64;
      NEW_GRAPH(g);
      rlx_tensor tx, ti, ty;
      CHECK(rlx_graph_add_input(g, "x", RLX_F32, ds, 3, &tx) == RLX_OK);
      CHECK(rlx_graph_add_input(g, "i", it, is, 2, &ti) == RLX_OK);
      CHECK_OK_G(g, rlx_graph_add_gather(g, tx, ti, axis, &ty));
      CHECK(rlx_graph_set_outputs(g, &ty, 1) == RLX_OK);
      tin ins[2] = {make_in("x", RLX_F32, ds, 3, data),
                    make_in("i", it, is, 2, use_i32 ? (void*)idx32 : (void*)idx64)};
      touts out;
      CHECK(run_graph(g, ins, 2, &out));
      int64_t outer = 1, inner = 1;
      for (int32_t d = 0; d < axis; d++) outer *= ds[d];
      for (int32_t d = axis + 1; d < 3; d++) inner *= ds[d];
      CHECK(out.numel[0] == outer * 6 * inner);
      for (int64_t o = 0; o < outer; o++)
        for (int q = 0; q < 6; q++)
          for (int64_t j = 0; j < inner; j++) {
            int64_t v = idx64[q] < 0 ? idx64[q] + len : idx64[q];
            CHECK(out.v[0][(o * 6 + q) * inner + j] == data[(o * len + v) * inner + j]);
          }
      touts_free(&out);

      /* Out of range: an error naming the index; the executable still runs. */
      rlx_compile_options opt;
      rlx_compile_options_init(&opt);
      opt.reference = 1;
      rlx_exec* e = NULL;
      CHECK_OK_G(g, rlx_compile(g, "cpu", &opt, &e));
      idx64[4] = len;
      idx32[4] = (int32_t)len;
      CHECK(set_inputs(e, ins, 2) == RLX_OK);
      CHECK(rlx_exec_run(e) == RLX_OUT_OF_RANGE);
      char want_msg[32];
      snprintf(want_msg, sizeof want_msg, "index %lld", (long long)len);
      CHECK_MSG(strstr(rlx_exec_last_error(e), want_msg) != NULL, "%s", rlx_exec_last_error(e));
      idx64[4] = -len - 1;
      idx32[4] = (int32_t)(-len - 1);
      CHECK(set_inputs(e, ins, 2) == RLX_OK);
      CHECK(rlx_exec_run(e) == RLX_OUT_OF_RANGE);
      idx64[4] = idx32[4] = 0;
      CHECK(set_inputs(e, ins, 2) == RLX_OK);
      CHECK_OK_E(e, rlx_exec_run(e));
      rlx_exec_destroy(e);
      rlx_graph_destroy(g);
    }
  }
  free(data);
}

TEST(scatter_add_axes_and_out_of_range) {
  test_seed(8);
  int64_t bs[3] = {4, 3, 5};
  float* base = random_f32(60, -5, 5);
  for (int32_t axis = 0; axis < 3; axis++) {
    int64_t is[3] = {3, 2, 4}; /* idx/src window, smaller than base */
    int64_t ni = shape_numel(is, 3), idx[3];
    int64_t* index = malloc(sizeof(int64_t) * (size_t)ni);
    float* src = random_f32(ni, -5, 5);
    for (int64_t i = 0; i < ni; i++) index[i] = test_rand_int(-bs[axis], bs[axis] - 1);
    NEW_GRAPH(g);
    rlx_tensor tb, ti, ts, ty;
    CHECK(rlx_graph_add_input(g, "base", RLX_F32, bs, 3, &tb) == RLX_OK);
    CHECK(rlx_graph_add_input(g, "idx", RLX_I64, is, 3, &ti) == RLX_OK);
    CHECK(rlx_graph_add_input(g, "src", RLX_F32, is, 3, &ts) == RLX_OK);
    CHECK_OK_G(g, rlx_graph_add_scatter_add(g, tb, ti, ts, axis, &ty));
    CHECK(rlx_graph_set_outputs(g, &ty, 1) == RLX_OK);
    tin ins[3] = {make_in("base", RLX_F32, bs, 3, base), make_in("idx", RLX_I64, is, 3, index),
                  make_in("src", RLX_F32, is, 3, src)};
    double want[60];
    for (int i = 0; i < 60; i++) want[i] = base[i];
    for (int64_t i = 0; i < ni; i++) {
      unravel(i, is, 3, idx);
      idx[axis] = index[i] < 0 ? index[i] + bs[axis] : index[i];
      want[ravel(idx, bs, 3)] += src[i];
    }
    touts out;
    CHECK(run_graph(g, ins, 3, &out));
    int ok = close_to(out.v[0], want, 60, 1e-6, "scatter_add");
    touts_free(&out);
    CHECK_MSG(ok, "axis %d", axis);

    rlx_compile_options opt;
    rlx_compile_options_init(&opt);
    opt.reference = 1;
    rlx_exec* e = NULL;
    CHECK_OK_G(g, rlx_compile(g, "cpu", &opt, &e));
    int64_t saved = index[ni - 1];
    index[ni - 1] = bs[axis] + 3;
    CHECK(set_inputs(e, ins, 3) == RLX_OK);
    CHECK(rlx_exec_run(e) == RLX_OUT_OF_RANGE);
    CHECK_MSG(strstr(rlx_exec_last_error(e), "out of range") != NULL, "%s",
              rlx_exec_last_error(e));
    index[ni - 1] = saved;
    CHECK(set_inputs(e, ins, 3) == RLX_OK);
    CHECK_OK_E(e, rlx_exec_run(e));
    rlx_exec_destroy(e);
    rlx_graph_destroy(g);
    free(index);
    free(src);
  }
  free(base);
}

/* ------------------------------------------------------------------ reductions */

TEST(reduce_axis_sets) {
  test_seed(9);
  int64_t s[3] = {3, 4, 5}, idx[3], oidx[3];
  const uint32_t sets[] = {1, 2, 4, 5, 6, 3, 7};
  float* x = random_f32(60, -2, 2);
  float* xp = random_f32(60, 0.8, 1.2); /* products stay moderate */
  for (size_t si = 0; si < sizeof sets / sizeof *sets; si++) {
    for (int keep = 0; keep < 2; keep++) {
      for (int op = 0; op < RLX_RED_COUNT; op++) {
        const float* in = op == RLX_RED_PROD ? xp : x;
        int32_t axes[3], na = 0;
        for (int32_t d = 0; d < 3; d++)
          if (sets[si] & (1u << d)) axes[na++] = d - (d == 2 ? 3 : 0); /* one negative axis */
        NEW_GRAPH(g);
        rlx_tensor tx, ty;
        CHECK(rlx_graph_add_input(g, "x", RLX_F32, s, 3, &tx) == RLX_OK);
        CHECK_OK_G(g, rlx_graph_add_reduce(g, (rlx_reduce_op)op, tx, axes, na, keep, &ty));
        CHECK(rlx_graph_set_outputs(g, &ty, 1) == RLX_OK);
        rlx_dtype dt;
        int32_t orank;
        rlx_dim oshape[RLX_MAX_RANK];
        CHECK(rlx_graph_tensor_type(g, ty, &dt, &orank, oshape) == RLX_OK);
        CHECK(orank == (keep ? 3 : 3 - na));
        /* Output in the kept-dims index space (size-1 in reduced dims). */
        int64_t ks[3];
        for (int32_t d = 0; d < 3; d++) ks[d] = (sets[si] & (1u << d)) ? 1 : s[d];
        double want[60], cnt = 60.0 / (double)shape_numel(ks, 3);
        for (int i = 0; i < 60; i++) want[i] = op == RLX_RED_PROD ? 1 : op == RLX_RED_MAX ? -INFINITY
                                               : op == RLX_RED_MIN ? INFINITY : 0;
        for (int64_t i = 0; i < 60; i++) {
          unravel(i, s, 3, idx);
          for (int32_t d = 0; d < 3; d++) oidx[d] = ks[d] == 1 ? 0 : idx[d];
          double* w = &want[ravel(oidx, ks, 3)];
          double v = in[i];
          if (op == RLX_RED_SUM || op == RLX_RED_MEAN) *w += v;
          else if (op == RLX_RED_PROD) *w *= v;
          else if (op == RLX_RED_MAX) *w = v > *w ? v : *w;
          else *w = v < *w ? v : *w;
        }
        int64_t no = shape_numel(ks, 3);
        for (int64_t i = 0; i < no; i++) want[i] = (float)(op == RLX_RED_MEAN ? want[i] / cnt : want[i]);
        tin ins[1] = {make_in("x", RLX_F32, s, 3, in)};
        touts out;
        CHECK(run_graph(g, ins, 1, &out));
        int ok = out.numel[0] == no && close_to(out.v[0], want, no, 1e-6, "reduce");
        touts_free(&out);
        rlx_graph_destroy(g);
        CHECK_MSG(ok, "set %u keep %d op %d", sets[si], keep, op);
      }
    }
  }
  free(x);
  free(xp);
}

TEST(argmax_argmin_ties) {
  test_seed(10);
  int64_t s[3] = {3, 6, 4}, idx[3];
  float x[72];
  for (int i = 0; i < 72; i++) x[i] = (float)test_rand_int(-2, 2); /* many ties */
  for (int32_t axis = 0; axis < 3; axis++) {
    for (int which = 0; which < 2; which++) {
      NEW_GRAPH(g);
      rlx_tensor tx, ty;
      CHECK(rlx_graph_add_input(g, "x", RLX_F32, s, 3, &tx) == RLX_OK);
      if (which == 0) CHECK_OK_G(g, rlx_graph_add_argmax(g, tx, axis, which, &ty));
      else CHECK_OK_G(g, rlx_graph_add_argmin(g, tx, axis, which, &ty));
      CHECK(rlx_graph_set_outputs(g, &ty, 1) == RLX_OK);
      tin ins[1] = {make_in("x", RLX_F32, s, 3, x)};
      touts out;
      CHECK(run_graph(g, ins, 1, &out));
      CHECK(out.dt[0] == RLX_I64 && out.numel[0] == 72 / s[axis]);
      int64_t ks[3] = {s[0], s[1], s[2]};
      ks[axis] = 1;
      for (int64_t o = 0; o < out.numel[0]; o++) {
        unravel(o, ks, 3, idx);
        int64_t best = 0;
        for (int64_t i = 0; i < s[axis]; i++) {
          idx[axis] = i;
          float v = x[ravel(idx, s, 3)];
          idx[axis] = best;
          float b = x[ravel(idx, s, 3)];
          if (which == 0 ? v > b : v < b) best = i;
        }
        CHECK_MSG(out.v[0][o] == best, "axis %d which %d out %lld: %g vs %lld", axis, which,
                  (long long)o, out.v[0][o], (long long)best);
      }
      touts_free(&out);
      rlx_graph_destroy(g);
    }
  }
}

TEST(softmax_every_axis) {
  test_seed(11);
  int64_t s[3] = {3, 4, 5}, idx[3];
  float* x = random_f32(60, -6, 6);
  for (int32_t axis = -3; axis < 3; axis++) {
    int32_t ax = axis < 0 ? axis + 3 : axis;
    for (int logv = 0; logv < 2; logv++) {
      NEW_GRAPH(g);
      rlx_tensor tx, ty;
      CHECK(rlx_graph_add_input(g, "x", RLX_F32, s, 3, &tx) == RLX_OK);
      if (logv) CHECK_OK_G(g, rlx_graph_add_log_softmax(g, tx, axis, &ty));
      else CHECK_OK_G(g, rlx_graph_add_softmax(g, tx, axis, &ty));
      CHECK(rlx_graph_set_outputs(g, &ty, 1) == RLX_OK);
      double want[60];
      for (int64_t i = 0; i < 60; i++) {
        unravel(i, s, 3, idx);
        double sum = 0;
        int64_t j[3] = {idx[0], idx[1], idx[2]};
        for (int64_t k = 0; k < s[ax]; k++) {
          j[ax] = k;
          sum += exp(x[ravel(j, s, 3)]);
        }
        want[i] = logv ? x[i] - log(sum) : exp(x[i]) / sum;
      }
      tin ins[1] = {make_in("x", RLX_F32, s, 3, x)};
      touts out;
      CHECK(run_graph(g, ins, 1, &out));
      int ok = close_to(out.v[0], want, 60, 1e-6, "softmax");
      touts_free(&out);
      rlx_graph_destroy(g);
      CHECK_MSG(ok, "axis %d log %d", axis, logv);
    }
  }
  free(x);
}

TEST(cumsum_exclusive_reverse) {
  test_seed(12);
  int64_t s[3] = {3, 4, 5}, idx[3];
  float* x = random_f32(60, -3, 3);
  for (int32_t ax = 0; ax < 3; ax++) {
    for (int mode = 0; mode < 4; mode++) {
      int excl = mode & 1, rev = mode >> 1;
      NEW_GRAPH(g);
      rlx_tensor tx, ty;
      CHECK(rlx_graph_add_input(g, "x", RLX_F32, s, 3, &tx) == RLX_OK);
      CHECK_OK_G(g, rlx_graph_add_cumsum(g, tx, ax, excl, rev, &ty));
      CHECK(rlx_graph_set_outputs(g, &ty, 1) == RLX_OK);
      double want[60];
      for (int64_t i = 0; i < 60; i++) {
        unravel(i, s, 3, idx);
        double sum = 0;
        int64_t j[3] = {idx[0], idx[1], idx[2]};
        for (int64_t k = 0; k < s[ax]; k++) {
          int in_range = rev ? (excl ? k > idx[ax] : k >= idx[ax]) : (excl ? k < idx[ax] : k <= idx[ax]);
          j[ax] = k;
          if (in_range) sum += x[ravel(j, s, 3)];
        }
        want[i] = (float)sum;
      }
      tin ins[1] = {make_in("x", RLX_F32, s, 3, x)};
      touts out;
      CHECK(run_graph(g, ins, 1, &out));
      int ok = close_to(out.v[0], want, 60, 1e-6, "cumsum");
      touts_free(&out);
      rlx_graph_destroy(g);
      CHECK_MSG(ok, "axis %d exclusive %d reverse %d", ax, excl, rev);
    }
  }
  free(x);
}

TEST(topk_largest_smallest) {
  test_seed(13);
  int64_t s[3] = {2, 7, 3};
  float x[42];
  for (int i = 0; i < 42; i++) x[i] = (float)test_rand_int(-3, 3); /* ties */
  for (int32_t ax = 1; ax < 3; ax++) {
    for (int largest = 0; largest < 2; largest++) {
      int64_t n = s[ax], k = test_rand_int(1, n);
      NEW_GRAPH(g);
      rlx_tensor tx, tv, ti;
      CHECK(rlx_graph_add_input(g, "x", RLX_F32, s, 3, &tx) == RLX_OK);
      CHECK_OK_G(g, rlx_graph_add_topk(g, tx, k, ax, largest, &tv, &ti));
      rlx_tensor outs[2] = {tv, ti};
      CHECK(rlx_graph_set_outputs(g, outs, 2) == RLX_OK);
      tin ins[1] = {make_in("x", RLX_F32, s, 3, x)};
      touts out;
      CHECK(run_graph(g, ins, 1, &out));
      int64_t outer = ax == 1 ? 2 : 14, inner = ax == 1 ? 3 : 1;
      CHECK(out.numel[0] == outer * k * inner && out.dt[1] == RLX_I64);
      for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < inner; j++) {
          /* Selection by repeated scan: best remaining value, lowest index on ties. */
          int used[8] = {0};
          for (int64_t q = 0; q < k; q++) {
            int64_t best = -1;
            for (int64_t i = 0; i < n; i++) {
              if (used[i]) continue;
              float v = x[(o * n + i) * inner + j];
              if (best < 0) { best = i; continue; }
              float b = x[(o * n + best) * inner + j];
              if (largest ? v > b : v < b) best = i;
            }
            used[best] = 1;
            int64_t e = (o * k + q) * inner + j;
            CHECK_MSG(out.v[1][e] == best, "ax %d largest %d o %lld j %lld q %lld: idx %g want %lld",
                      ax, largest, (long long)o, (long long)j, (long long)q, out.v[1][e],
                      (long long)best);
            CHECK(out.v[0][e] == x[(o * n + best) * inner + j]);
          }
        }
      touts_free(&out);
      rlx_graph_destroy(g);
    }
  }
}

/* ------------------------------------------------------------------ casts */

static double expect_cast(double v, rlx_dtype to) {
  switch (to) {
    case RLX_F16: return rlx_f16_to_f32(rlx_f32_to_f16((float)v));
    case RLX_BF16: return rlx_bf16_to_f32(rlx_f32_to_bf16((float)v));
    case RLX_I32: return trunc(v);
    case RLX_BOOL: return v != 0;
    default: return (float)v;
  }
}

TEST(casts_between_dtypes) {
  test_seed(14);
  int64_t s[2] = {5, 7};
  float* x = random_f32(35, -40, 40);
  x[0] = 0.0f; /* bool false */
  x[1] = -0.7f; /* truncates to 0 */
  const rlx_dtype tos[4] = {RLX_F16, RLX_BF16, RLX_I32, RLX_BOOL};
  for (int t = 0; t < 4; t++) {
    NEW_GRAPH(g);
    rlx_tensor tx, tc, tb;
    CHECK(rlx_graph_add_input(g, "x", RLX_F32, s, 2, &tx) == RLX_OK);
    CHECK_OK_G(g, rlx_graph_add_cast(g, tx, tos[t], &tc));
    CHECK_OK_G(g, rlx_graph_add_cast(g, tc, RLX_F32, &tb)); /* and back */
    rlx_tensor outs[2] = {tc, tb};
    CHECK(rlx_graph_set_outputs(g, outs, 2) == RLX_OK);
    tin ins[1] = {make_in("x", RLX_F32, s, 2, x)};
    touts out;
    CHECK(run_graph(g, ins, 1, &out));
    CHECK(out.dt[0] == tos[t] && out.dt[1] == RLX_F32);
    for (int i = 0; i < 35; i++) {
      double w = expect_cast(x[i], tos[t]);
      CHECK_MSG(out.v[0][i] == w && out.v[1][i] == w, "to %s elem %d: %g / %g want %g",
                rlx_dtype_name(tos[t]), i, out.v[0][i], out.v[1][i], w);
    }
    touts_free(&out);
    rlx_graph_destroy(g);
  }
  free(x);

  /* i32 -> i64 / u8 stay exact integers; i32 -> f64. */
  int32_t iv[6] = {-70000, -1, 0, 1, 255, 2147483647};
  int64_t s6[1] = {6};
  NEW_GRAPH(h);
  rlx_tensor ti, t64, tf;
  CHECK(rlx_graph_add_input(h, "i", RLX_I32, s6, 1, &ti) == RLX_OK);
  CHECK_OK_G(h, rlx_graph_add_cast(h, ti, RLX_I64, &t64));
  CHECK_OK_G(h, rlx_graph_add_cast(h, ti, RLX_F64, &tf));
  rlx_tensor o2[2] = {t64, tf};
  CHECK(rlx_graph_set_outputs(h, o2, 2) == RLX_OK);
  tin in2[1] = {make_in("i", RLX_I32, s6, 1, iv)};
  touts out;
  CHECK(run_graph(h, in2, 1, &out));
  for (int i = 0; i < 6; i++) {
    CHECK(((const int64_t*)out.raw[0])[i] == iv[i]);
    CHECK(out.v[1][i] == iv[i]);
  }
  touts_free(&out);
  rlx_graph_destroy(h);
}

/* ------------------------------------------------------------------ in place */

/* A chain of elementwise ops over dying intermediates: the planner may run
 * them in place; results must not change. */
TEST(elementwise_chain_in_place) {
  test_seed(15);
  int64_t s[2] = {6, 11};
  float* a = random_f32(66, -2, 2);
  float* b = random_f32(11, -2, 2);
  NEW_GRAPH(g);
  rlx_tensor ta, tb, t1, t2, t3, t4;
  CHECK(rlx_graph_add_input(g, "a", RLX_F32, s, 2, &ta) == RLX_OK);
  CHECK(rlx_graph_add_input(g, "b", RLX_F32, &s[1], 1, &tb) == RLX_OK);
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_TANH, ta, &t1));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_MUL, t1, tb, &t2));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_EXP, t2, &t3));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_SUB, t3, t3, &t4));
  rlx_tensor t5;
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, t4, t2, &t5));
  CHECK(rlx_graph_set_outputs(g, &t5, 1) == RLX_OK);
  tin ins[2] = {make_in("a", RLX_F32, s, 2, a), make_in("b", RLX_F32, &s[1], 1, b)};
  touts out;
  CHECK(run_graph(g, ins, 2, &out));
  double want[66];
  for (int i = 0; i < 66; i++) {
    float v2 = (float)((float)tanh(a[i]) * (double)b[i % 11]);
    want[i] = v2; /* exp(v2) - exp(v2) = 0 */
  }
  int ok = close_to(out.v[0], want, 66, 1e-6, "chain");
  touts_free(&out);
  rlx_graph_destroy(g);
  free(a);
  free(b);
  CHECK(ok);
}


/* ------------------------------------------------------------------ NaN and integers */

/* NaN counts as the largest value: argmax/argmin pick the first NaN, Max
 * reduces to NaN, TopK-largest puts NaN first; integer ops stay exact. */
TEST(nan_and_integer_rows) {
  int64_t s[2] = {2, 5};
  float x[10] = {1, NAN, 3, NAN, 0, -1, -4, 2, -4, 7};
  NEW_GRAPH(g);
  rlx_tensor tx, am, an, mx, tv, ti;
  CHECK(rlx_graph_add_input(g, "x", RLX_F32, s, 2, &tx) == RLX_OK);
  CHECK_OK_G(g, rlx_graph_add_argmax(g, tx, 1, 0, &am));
  CHECK_OK_G(g, rlx_graph_add_argmin(g, tx, 1, 0, &an));
  int32_t ax1 = 1;
  CHECK_OK_G(g, rlx_graph_add_reduce(g, RLX_RED_MAX, tx, &ax1, 1, 0, &mx));
  CHECK_OK_G(g, rlx_graph_add_topk(g, tx, 3, 1, 1, &tv, &ti));
  (void)tv;
  rlx_tensor outs[2] = {am, an};
  CHECK(rlx_graph_set_outputs(g, outs, 2) == RLX_OK);
  tin ins[1] = {make_in("x", RLX_F32, s, 2, x)};
  touts out;
  CHECK(run_graph(g, ins, 1, &out));
  CHECK(out.v[0][0] == 1 && out.v[0][1] == 4); /* first NaN; last row max 7 */
  CHECK(out.v[1][0] == 1 && out.v[1][1] == 1); /* first NaN; first of tied -4 */
  touts_free(&out);
  rlx_tensor o2[2] = {mx, ti};
  CHECK(rlx_graph_set_outputs(g, o2, 2) == RLX_OK);
  CHECK(run_graph(g, ins, 1, &out));
  CHECK(isnan(out.v[0][0]) && out.v[0][1] == 7);
  CHECK(out.v[1][0] == 1 && out.v[1][1] == 3 && out.v[1][2] == 2);
  CHECK(out.v[1][3] == 4 && out.v[1][4] == 2 && out.v[1][5] == 0);
  touts_free(&out);
  rlx_graph_destroy(g);

  /* i64 values beyond 2^53: sum, cumsum and max must be exact. */
  int64_t big[4] = {(1LL << 60) + 1, 3, -(1LL << 60), 5};
  int64_t s4[1] = {4};
  NEW_GRAPH(h);
  rlx_tensor tb, sum, cs;
  CHECK(rlx_graph_add_input(h, "b", RLX_I64, s4, 1, &tb) == RLX_OK);
  CHECK_OK_G(h, rlx_graph_add_reduce(h, RLX_RED_SUM, tb, NULL, 0, 0, &sum));
  CHECK_OK_G(h, rlx_graph_add_cumsum(h, tb, 0, 0, 0, &cs));
  rlx_tensor o3[2] = {sum, cs};
  CHECK(rlx_graph_set_outputs(h, o3, 2) == RLX_OK);
  tin in2[1] = {make_in("b", RLX_I64, s4, 1, big)};
  CHECK(run_graph(h, in2, 1, &out));
  const int64_t* sv = (const int64_t*)out.raw[0];
  const int64_t* cv = (const int64_t*)out.raw[1];
  CHECK(sv[0] == 9);
  CHECK(cv[0] == big[0] && cv[1] == big[0] + 3 && cv[2] == 4 && cv[3] == 9);
  touts_free(&out);
  rlx_graph_destroy(h);
}

int main(void) {
  RUN(binary_broadcast_f32);
  RUN(binary_int_and_nan);
  RUN(compare_and_where_broadcast);
  RUN(activations_all);
  RUN(transpose_random);
  RUN(narrow_expand_reverse_random);
  RUN(concat_random);
  RUN(gather_axes_negative_and_out_of_range);
  RUN(scatter_add_axes_and_out_of_range);
  RUN(reduce_axis_sets);
  RUN(argmax_argmin_ties);
  RUN(softmax_every_axis);
  RUN(cumsum_exclusive_reverse);
  RUN(topk_largest_smallest);
  RUN(casts_between_dtypes);
  RUN(elementwise_chain_in_place);
  RUN(nan_and_integer_rows);
  return test_summary();
}
