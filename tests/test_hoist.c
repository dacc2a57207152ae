/* Hoisting param-only work out of the run (src/passes/hoist.c): on every
 * available device (or the one named on the command line) a BatchNorm
 * folded into a Conv and a param-only matmul / transpose / cast chain give
 * the outputs of RLX_NO_HOIST=1 with fewer steps and no param-only node
 * left in the run graph; re-setting a param re-evaluates what was hoisted;
 * clones and the compile cache keep their params apart; a Sample over
 * params stays in the run; a broadcast that would grow memory stays; a
 * hoisted node may read a value kept in the run; an unset param fails the
 * run as before; an active extent runs over the hoisted graph; bindings
 * that alternate keep their hoisted values right. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/graph.h"
#include "runtime/executable.h"

static const char* dev = "cpu";

enum { N = 2, C = 3, OC = 4, H = 6, W = 5, K = 3, F = 8 };

/* Returns `fail` (the caller's CHECK on it fails) when a builder call fails. */
#define OR_FAIL(g, fail, expr)                                          \
  do {                                                                  \
    if ((expr) != RLX_OK) {                                             \
      fprintf(stderr, "%s: %s\n", #expr, rlx_graph_last_error(g));      \
      rlx_graph_destroy(g);                                             \
      return fail;                                                      \
    }                                                                   \
  } while (0)

/* ------------------------------------------------------------ graphs */

/* x f32[N,C,H,W] -> Conv (params w, b; 3x3, pad 1) -> BatchNorm (params
 * gamma, beta, mean, var) -> relu: the BatchNorm folds into the Conv with
 * per-channel ops over params only. */
static rlx_graph* conv_bn_graph(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[4] = {N, C, H, W}, ws[4] = {OC, C, K, K}, cs[1] = {OC};
  rlx_tensor x, w, b, ga, be, mu, var, y, z, out;
  int64_t pads[4] = {1, 1, 1, 1};
  OR_FAIL(g, NULL, rlx_graph_add_input(g, "x", RLX_F32, xs, 4, &x));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "w", RLX_F32, ws, 4, &w));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "b", RLX_F32, cs, 1, &b));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "gamma", RLX_F32, cs, 1, &ga));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "beta", RLX_F32, cs, 1, &be));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "mean", RLX_F32, cs, 1, &mu));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "var", RLX_F32, cs, 1, &var));
  OR_FAIL(g, NULL, rlx_graph_add_conv(g, x, w, b, RLX_NONE, 2, NULL, pads, NULL, 1, RLX_ACT_NONE,
                                      RLX_CONV_CHANNELS_FIRST, &y));
  OR_FAIL(g, NULL, rlx_graph_add_batch_norm(g, y, ga, be, mu, var, 1e-5f, &z));
  OR_FAIL(g, NULL, rlx_graph_add_activation(g, RLX_ACT_RELU, z, &out));
  OR_FAIL(g, NULL, rlx_graph_set_outputs(g, &out, 1));
  return g;
}

/* y = x @ f32(f16(transpose(p @ q))) + b: x f32[rows,F] (rows < 0: symbol
 * "n"), params p, q f32[F,F] and b f32[F]. */
static rlx_graph* chain_graph(int64_t rows) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim rd = rows;
  if (rows < 0) OR_FAIL(g, NULL, rlx_graph_symbol(g, "n", &rd));
  rlx_dim xs[2] = {rd, F}, ps[2] = {F, F}, bs[1] = {F};
  int32_t perm[2] = {1, 0};
  rlx_tensor x, p, q, b, pq, t, h, f, y, out;
  OR_FAIL(g, NULL, rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "p", RLX_F32, ps, 2, &p));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "q", RLX_F32, ps, 2, &q));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "b", RLX_F32, bs, 1, &b));
  OR_FAIL(g, NULL, rlx_graph_add_matmul(g, p, q, 0, 0, &pq));
  OR_FAIL(g, NULL, rlx_graph_add_transpose(g, pq, perm, 2, &t));
  OR_FAIL(g, NULL, rlx_graph_add_cast(g, t, RLX_F16, &h));
  OR_FAIL(g, NULL, rlx_graph_add_cast(g, h, RLX_F32, &f));
  OR_FAIL(g, NULL, rlx_graph_add_matmul(g, x, f, 0, 0, &y));
  OR_FAIL(g, NULL, rlx_graph_add_binary(g, RLX_BIN_ADD, y, b, &out));
  OR_FAIL(g, NULL, rlx_graph_set_outputs(g, &out, 1));
  return g;
}

/* chain_graph over symbol "n" plus an unused input "z" f32[n-2]: the
 * expression must not reach the derived graph, which binds no symbol. */
static rlx_graph* chain_expr_graph(void) {
  rlx_graph* g = chain_graph(-1);
  if (!g) return NULL;
  rlx_dim n, two = 2, d;
  rlx_tensor z;
  OR_FAIL(g, NULL, rlx_graph_symbol(g, "n", &n));
  OR_FAIL(g, NULL, rlx_graph_dim_expr(g, RLX_DIM_SUB, n, two, &d));
  OR_FAIL(g, NULL, rlx_graph_add_input(g, "z", RLX_F32, &d, 1, &z));
  return g;
}

/* y = f32(sample(p * 2)) + x: p f32[2,F] param, x f32[2] input. */
static rlx_graph* sample_graph(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim ps[2] = {2, F}, xs[1] = {2}, one[1] = {1};
  float two = 2.0f;
  rlx_tensor p, x, c, l, s, sf, out;
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "p", RLX_F32, ps, 2, &p));
  OR_FAIL(g, NULL, rlx_graph_add_input(g, "x", RLX_F32, xs, 1, &x));
  OR_FAIL(g, NULL, rlx_graph_add_constant(g, RLX_F32, one, 1, &two, sizeof two, &c));
  OR_FAIL(g, NULL, rlx_graph_add_binary(g, RLX_BIN_MUL, p, c, &l));
  OR_FAIL(g, NULL, rlx_graph_add_sample(g, l, 0, 1.0f, 1.0f, &s));
  OR_FAIL(g, NULL, rlx_graph_add_cast(g, s, RLX_F32, &sf));
  OR_FAIL(g, NULL, rlx_graph_add_binary(g, RLX_BIN_ADD, sf, x, &out));
  OR_FAIL(g, NULL, rlx_graph_set_outputs(g, &out, 1));
  return g;
}

/* y = x + exp(expand(b)): b f32[F] grows to [16,F] before any work, so
 * hoisting the exp would hold 16 times b's bytes. */
static rlx_graph* broadcast_graph(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[2] = {16, F}, bs[1] = {F};
  rlx_tensor x, b, e, a, out;
  OR_FAIL(g, NULL, rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "b", RLX_F32, bs, 1, &b));
  OR_FAIL(g, NULL, rlx_graph_add_expand(g, b, xs, 2, &e));
  OR_FAIL(g, NULL, rlx_graph_add_activation(g, RLX_ACT_EXP, e, &a));
  OR_FAIL(g, NULL, rlx_graph_add_binary(g, RLX_BIN_ADD, x, a, &out));
  OR_FAIL(g, NULL, rlx_graph_set_outputs(g, &out, 1));
  return g;
}

/* Outputs y0 = exp(expand(b)) [16,F] and y1 = x + sum over rows of y0:
 * the sum is hoisted although it reads y0, which stays in the run (a graph
 * output); the derived graph computes y0 again. */
static rlx_graph* kept_operand_graph(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim es[2] = {16, F}, bs[1] = {F};
  int32_t axis0[1] = {0};
  rlx_tensor x, b, e, a, r, outs[2];
  OR_FAIL(g, NULL, rlx_graph_add_input(g, "x", RLX_F32, bs, 1, &x));
  OR_FAIL(g, NULL, rlx_graph_add_param(g, "b", RLX_F32, bs, 1, &b));
  OR_FAIL(g, NULL, rlx_graph_add_expand(g, b, es, 2, &e));
  OR_FAIL(g, NULL, rlx_graph_add_activation(g, RLX_ACT_EXP, e, &a));
  OR_FAIL(g, NULL, rlx_graph_add_reduce(g, RLX_RED_SUM, a, axis0, 1, 0, &r));
  OR_FAIL(g, NULL, rlx_graph_add_binary(g, RLX_BIN_ADD, x, r, &outs[1]));
  outs[0] = a;
  OR_FAIL(g, NULL, rlx_graph_set_outputs(g, outs, 2));
  return g;
}

/* ------------------------------------------------------------ helpers */

/* Compiles g (not consumed) with hoisting on or off. */
static rlx_exec* compile_with(rlx_graph* g, int hoist, const rlx_compile_options* o) {
  if (hoist) unsetenv("RLX_NO_HOIST");
  else setenv("RLX_NO_HOIST", "1", 1);
  rlx_exec* e = test_compile_on(g, dev, o);
  unsetenv("RLX_NO_HOIST");
  return e;
}

/* Sets every param of e to values drawn from `seed` (var positive). */
static rlx_status fill_params(rlx_exec* e, uint64_t seed) {
  test_seed(seed);
  for (int32_t i = 0; i < rlx_exec_param_count(e); i++) {
    rlx_value_info info;
    RLX_RETURN_IF_ERROR(rlx_exec_get_param(e, i, &info));
    int64_t n = 1;
    for (int32_t d = 0; d < info.rank; d++) n *= info.shape[d];
    float* v = malloc(sizeof(float) * (size_t)n);
    if (!v) return RLX_RESOURCE_EXHAUSTED;
    int positive = strcmp(info.name, "var") == 0;
    test_fill_f32(v, n, positive ? 0.5 : -1, positive ? 2 : 1);
    rlx_status s = rlx_exec_set_param(e, info.name, RLX_F32, v, sizeof(float) * (size_t)n);
    free(v);
    RLX_RETURN_IF_ERROR(s);
  }
  return RLX_OK;
}

/* Sets input "x" of e (its static shape) to values drawn from `seed`. */
static rlx_status fill_x(rlx_exec* e, uint64_t seed, const rlx_dim* shape, int32_t rank) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; d++) n *= shape[d];
  float* v = malloc(sizeof(float) * (size_t)n);
  if (!v) return RLX_RESOURCE_EXHAUSTED;
  test_seed(seed);
  test_fill_f32(v, n, -1, 1);
  rlx_status s = rlx_exec_set_input(e, "x", RLX_F32, shape, rank, v, sizeof(float) * (size_t)n);
  free(v);
  return s;
}

/* The "hoisted: N values" count of e's dispatch report (-1: no such line). */
static int hoisted_values(const rlx_exec* e) {
  char* text = NULL;
  if (rlx_exec_report(e, &text) != RLX_OK) return -1;
  const char* at = strstr(text, "hoisted: ");
  int n = -1;
  if (at && sscanf(at, "hoisted: %d values", &n) != 1) n = -1;
  rlx_free(text);
  return n;
}

static int32_t launches(const rlx_exec* e) {
  rlx_memory_stats m;
  return rlx_exec_memory_stats(e, &m) == RLX_OK ? m.launches : -1;
}

/* Nodes of e's run graph that do work (not leaves, not views) on values
 * computed from params and constants alone, leaving out those the memory
 * rule or a graph output keeps there (the caller says how many). */
static int param_only_nodes(const rlx_exec* e) {
  const rlx_graph* g = NULL;
  if (rlx_exec_graph(e, &g) != RLX_OK) return -1;
  uint8_t* only = calloc((size_t)g->n_values + 1, 1);
  if (!only) return -1;
  int count = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    int all = n->op == RLX_OP_PARAM || n->op == RLX_OP_CONSTANT;
    if (!(rlx_op_table[n->op].flags & OPF_LEAF)) {
      all = n->n_in > 0;
      for (int32_t k = 0; k < n->n_in; k++)
        if (n->in[k] >= 0 && !only[n->in[k]]) all = 0;
      if (all && !(rlx_op_table[n->op].flags & OPF_VIEW)) count++;
    }
    for (int32_t o = 0; o < n->n_out; o++) only[n->out[o]] = (uint8_t)all;
  }
  free(only);
  return count;
}

static int has_op(const rlx_exec* e, rlx_op op) {
  const rlx_graph* g = NULL;
  if (rlx_exec_graph(e, &g) != RLX_OK) return 0;
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == op) return 1;
  return 0;
}

static const double tol = 1e-4;

/* ------------------------------------------------------------ tests */

static const rlx_dim conv_x[4] = {N, C, H, W};

TEST(bn_fold_hoisted_matches_unhoisted) {
  rlx_graph* g = conv_bn_graph();
  CHECK(g);
  rlx_exec *a = compile_with(g, 1, NULL), *b = compile_with(g, 0, NULL);
  rlx_graph_destroy(g);
  CHECK(a && b);
  CHECK_OK_E(a, fill_params(a, 7));
  CHECK_OK_E(b, fill_params(b, 7));
  CHECK_OK_E(a, fill_x(a, 8, conv_x, 4));
  CHECK_OK_E(b, fill_x(b, 8, conv_x, 4));
  CHECK_OK_E(a, rlx_exec_run(a));
  CHECK_OK_E(b, rlx_exec_run(b));
  CHECK(test_outputs_match(a, b, 0, tol));
  CHECK_MSG(hoisted_values(a) >= 2, "%d hoisted", hoisted_values(a)); /* w' and b' */
  CHECK(hoisted_values(b) == -1); /* the report says "off" */
  CHECK_MSG(param_only_nodes(a) == 0, "%d param-only nodes", param_only_nodes(a));
  CHECK(param_only_nodes(b) > 0);
  CHECK_MSG(launches(a) < launches(b), "%d vs %d launches", launches(a), launches(b));
  /* The param listing is the user's: no hoisted leaf in it. */
  CHECK(rlx_exec_param_count(a) == 6);
  for (int32_t i = 0; i < rlx_exec_param_count(a); i++) {
    rlx_value_info info;
    CHECK_OK_E(a, rlx_exec_get_param(a, i, &info));
    CHECK(strncmp(info.name, "hoisted", 7) != 0);
  }
  /* New params: the hoisted values follow (a second run, then a third). */
  for (uint64_t seed = 20; seed < 22; seed++) {
    float gamma[OC];
    test_seed(seed);
    test_fill_f32(gamma, OC, -2, 2);
    CHECK_OK_E(a, rlx_exec_set_param(a, "gamma", RLX_F32, gamma, sizeof gamma));
    CHECK_OK_E(b, rlx_exec_set_param(b, "gamma", RLX_F32, gamma, sizeof gamma));
    CHECK_OK_E(a, rlx_exec_run(a));
    CHECK_OK_E(b, rlx_exec_run(b));
    CHECK(test_outputs_match(a, b, 0, tol));
  }
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
}

TEST(chain_hoisted_matches_unhoisted) {
  rlx_graph* g = chain_graph(4);
  CHECK(g);
  rlx_exec *a = compile_with(g, 1, NULL), *b = compile_with(g, 0, NULL);
  rlx_graph_destroy(g);
  CHECK(a && b);
  rlx_dim xs[2] = {4, F};
  CHECK_OK_E(a, fill_params(a, 3));
  CHECK_OK_E(b, fill_params(b, 3));
  CHECK_OK_E(a, fill_x(a, 4, xs, 2));
  CHECK_OK_E(b, fill_x(b, 4, xs, 2));
  CHECK_OK_E(a, rlx_exec_run(a));
  CHECK_OK_E(b, rlx_exec_run(b));
  CHECK(test_outputs_match(a, b, 0, tol));
  CHECK_MSG(hoisted_values(a) == 1, "%d hoisted", hoisted_values(a)); /* the whole chain */
  CHECK(param_only_nodes(a) == 0);
  CHECK(!has_op(a, RLX_OP_CAST));
  CHECK(has_op(b, RLX_OP_CAST));
  CHECK(launches(a) < launches(b));
  /* q changes: the product is computed again. */
  CHECK_OK_E(a, fill_params(a, 11));
  CHECK_OK_E(b, fill_params(b, 11));
  CHECK_OK_E(a, rlx_exec_run(a));
  CHECK_OK_E(b, rlx_exec_run(b));
  CHECK(test_outputs_match(a, b, 0, tol));
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
}

/* A clone shares the compiled part but evaluates its own params; a second
 * compile from the cache does too. */
TEST(clones_and_cache_keep_params_apart) {
  rlx_graph* g = conv_bn_graph();
  CHECK(g);
  rlx_exec *a = compile_with(g, 1, NULL), *ref = compile_with(g, 0, NULL);
  rlx_exec* cached = compile_with(g, 1, NULL);
  rlx_graph_destroy(g);
  CHECK(a && ref && cached);
  CHECK_OK_E(a, fill_params(a, 1));
  CHECK_OK_E(a, fill_x(a, 2, conv_x, 4));
  CHECK_OK_E(a, rlx_exec_run(a));
  rlx_exec* c = NULL;
  CHECK_OK_E(a, rlx_exec_clone(a, &c));
  CHECK_OK_E(c, fill_params(c, 5)); /* the clone's own params */
  CHECK_OK_E(c, fill_x(c, 2, conv_x, 4));
  CHECK_OK_E(c, rlx_exec_run(c));
  CHECK_OK_E(a, rlx_exec_run(a));
  /* each against the unhoisted executable with its params */
  CHECK_OK_E(ref, fill_x(ref, 2, conv_x, 4));
  CHECK_OK_E(ref, fill_params(ref, 1));
  CHECK_OK_E(ref, rlx_exec_run(ref));
  CHECK(test_outputs_match(a, ref, 0, tol));
  CHECK_OK_E(ref, fill_params(ref, 5));
  CHECK_OK_E(ref, rlx_exec_run(ref));
  CHECK(test_outputs_match(c, ref, 0, tol));
  int64_t na = 0, nc = 0; /* the params differ: so do the outputs */
  double *ya = test_read_output_f64(a, 0, &na), *yc = test_read_output_f64(c, 0, &nc);
  int differ = ya && yc && na == nc && test_max_abs(ya, yc, na) > 1e-3;
  free(ya);
  free(yc);
  CHECK(differ);
  /* the compile cache's copy, with params of its own */
  char* text = NULL;
  CHECK_OK_E(cached, rlx_exec_report(cached, &text));
  int from_cache = strstr(text, "reused from the compile cache") != NULL;
  rlx_free(text);
  CHECK(from_cache || getenv("RLX_COMPILE_CACHE"));
  CHECK_OK_E(cached, fill_params(cached, 5));
  CHECK_OK_E(cached, fill_x(cached, 2, conv_x, 4));
  CHECK_OK_E(cached, rlx_exec_run(cached));
  CHECK(test_outputs_match(cached, ref, 0, tol));
  rlx_exec_destroy(a); /* the clone outlives its original */
  CHECK_OK_E(c, rlx_exec_run(c));
  CHECK(test_outputs_match(c, ref, 0, tol));
  rlx_exec_destroy(c);
  rlx_exec_destroy(cached);
  rlx_exec_destroy(ref);
}

TEST(sample_over_params_stays_in_the_run) {
  rlx_graph* g = sample_graph();
  CHECK(g);
  rlx_exec* a = compile_with(g, 1, NULL);
  rlx_graph_destroy(g);
  CHECK(a);
  CHECK(has_op(a, RLX_OP_SAMPLE));
  CHECK(hoisted_values(a) == 1); /* p * 2, which Sample reads */
  rlx_dim xs[1] = {2};
  CHECK_OK_E(a, fill_params(a, 9));
  CHECK_OK_E(a, fill_x(a, 9, xs, 1));
  CHECK_OK_E(a, rlx_exec_run(a));
  rlx_exec_destroy(a);
}

TEST(broadcast_that_grows_stays_in_the_run) {
  rlx_graph* g = broadcast_graph();
  CHECK(g);
  rlx_exec *a = compile_with(g, 1, NULL), *b = compile_with(g, 0, NULL);
  rlx_graph_destroy(g);
  CHECK(a && b);
  CHECK_MSG(hoisted_values(a) == 0, "%d hoisted", hoisted_values(a));
  /* the activation stays in the run (inside a region where the backend fuses) */
  CHECK(has_op(a, RLX_OP_EXPAND) &&
        (has_op(a, RLX_OP_ACTIVATION) || has_op(a, RLX_OP_ELEMENTWISE_REGION)));
  rlx_dim xs[2] = {16, F};
  CHECK_OK_E(a, fill_params(a, 6));
  CHECK_OK_E(b, fill_params(b, 6));
  CHECK_OK_E(a, fill_x(a, 6, xs, 2));
  CHECK_OK_E(b, fill_x(b, 6, xs, 2));
  CHECK_OK_E(a, rlx_exec_run(a));
  CHECK_OK_E(b, rlx_exec_run(b));
  CHECK(test_outputs_match(a, b, 0, tol));
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
}

TEST(hoisted_node_reads_a_kept_value) {
  rlx_graph* g = kept_operand_graph();
  CHECK(g);
  rlx_exec *a = compile_with(g, 1, NULL), *b = compile_with(g, 0, NULL);
  rlx_graph_destroy(g);
  CHECK(a && b);
  CHECK_MSG(hoisted_values(a) == 1, "%d hoisted", hoisted_values(a));
  CHECK(!has_op(a, RLX_OP_REDUCE));
  rlx_dim xs[1] = {F};
  CHECK_OK_E(a, fill_params(a, 12));
  CHECK_OK_E(b, fill_params(b, 12));
  CHECK_OK_E(a, fill_x(a, 13, xs, 1));
  CHECK_OK_E(b, fill_x(b, 13, xs, 1));
  CHECK_OK_E(a, rlx_exec_run(a));
  CHECK_OK_E(b, rlx_exec_run(b));
  CHECK(test_outputs_match(a, b, 0, tol));
  CHECK(test_outputs_match(a, b, 1, tol));
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
}

TEST(unset_param_fails_as_before) {
  rlx_graph* g = conv_bn_graph();
  CHECK(g);
  rlx_exec* a = compile_with(g, 1, NULL);
  rlx_graph_destroy(g);
  CHECK(a);
  float v[OC] = {1, 1, 1, 1};
  const char* names[] = {"b", "beta", "mean", "var"}; /* w and gamma never set */
  for (int i = 0; i < 4; i++) CHECK_OK_E(a, rlx_exec_set_param(a, names[i], RLX_F32, v, sizeof v));
  CHECK_OK_E(a, fill_x(a, 1, conv_x, 4));
  CHECK(rlx_exec_run(a) == RLX_FAILED_PRECONDITION);
  CHECK_MSG(strstr(rlx_exec_last_error(a), "was not set") != NULL, "%s", rlx_exec_last_error(a));
  rlx_exec_destroy(a);
}

/* An active extent lowers the hoisted graph again at fewer rows. */
TEST(active_extent_over_hoisted_graph) {
  rlx_graph* g = chain_graph(-1);
  CHECK(g);
  const char* names[] = {"n"};
  int64_t sizes[] = {6};
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.symbol_names = names;
  o.symbol_sizes = sizes;
  o.n_symbols = 1;
  o.extent_symbol = "n";
  rlx_exec* a = compile_with(g, 1, &o);
  rlx_graph* g3 = chain_graph(3);
  rlx_exec* b = g3 ? compile_with(g3, 0, NULL) : NULL;
  rlx_graph_destroy(g);
  rlx_graph_destroy(g3);
  CHECK(a && b);
  CHECK(hoisted_values(a) == 1);
  rlx_dim xs[2] = {3, F};
  CHECK_OK_E(a, fill_params(a, 4));
  CHECK_OK_E(b, fill_params(b, 4));
  CHECK_OK_E(a, rlx_exec_set_active_extent(a, 3));
  CHECK_OK_E(a, fill_x(a, 5, xs, 2));
  CHECK_OK_E(b, fill_x(b, 5, xs, 2));
  CHECK_OK_E(a, rlx_exec_run(a));
  CHECK_OK_E(b, rlx_exec_run(b));
  CHECK(test_outputs_match(a, b, 0, tol));
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
}

/* A symbolic graph with a dim expression: run at n = 4. */
TEST(dim_expressions_stay_out_of_the_derived_graph) {
  rlx_graph* g = chain_expr_graph();
  rlx_graph* g4 = chain_graph(4);
  CHECK(g && g4);
  rlx_exec *a = compile_with(g, 1, NULL), *b = compile_with(g4, 0, NULL);
  rlx_graph_destroy(g);
  rlx_graph_destroy(g4);
  CHECK(a && b);
  rlx_dim xs[2] = {4, F};
  CHECK_OK_E(a, fill_params(a, 14));
  CHECK_OK_E(b, fill_params(b, 14));
  CHECK_OK_E(a, fill_x(a, 15, xs, 2));
  CHECK_OK_E(b, fill_x(b, 15, xs, 2));
  CHECK_OK_E(a, rlx_exec_run(a));
  CHECK_OK_E(b, rlx_exec_run(b));
  CHECK(hoisted_values(a) == 1);
  CHECK(test_outputs_match(a, b, 0, tol));
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
}

/* Two bindings of "n" alternate; a param set while the other binding is
 * current reaches the hoisted values of this one when it runs again. */
TEST(bindings_switch_and_params_follow) {
  rlx_graph* g = chain_graph(-1);
  CHECK(g);
  rlx_exec *a = compile_with(g, 1, NULL), *b = compile_with(g, 0, NULL);
  rlx_graph_destroy(g);
  CHECK(a && b);
  CHECK_OK_E(a, fill_params(a, 16));
  CHECK_OK_E(b, fill_params(b, 16));
  static const int64_t rows[] = {4, 2, 4, 2};
  for (int i = 0; i < 4; i++) {
    rlx_dim xs[2] = {rows[i], F};
    if (i == 2) { /* new params while the 2-row binding is current */
      CHECK_OK_E(a, fill_params(a, 17));
      CHECK_OK_E(b, fill_params(b, 17));
    }
    CHECK_OK_E(a, fill_x(a, 18 + (uint64_t)i, xs, 2));
    CHECK_OK_E(b, fill_x(b, 18 + (uint64_t)i, xs, 2));
    CHECK_OK_E(a, rlx_exec_run(a));
    CHECK_OK_E(b, rlx_exec_run(b));
    CHECK_MSG(test_outputs_match(a, b, 0, tol), "run %d (%lld rows)", i, (long long)rows[i]);
  }
  CHECK(hoisted_values(a) == 1);
  rlx_exec_destroy(a);
  rlx_exec_destroy(b);
}

static int device_available(const char* name) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) == RLX_OK && strcmp(info.name, name) == 0) return info.available;
  }
  return 0;
}

static void run_all(void) {
  printf("-- device %s\n", dev);
  RUN(bn_fold_hoisted_matches_unhoisted);
  RUN(chain_hoisted_matches_unhoisted);
  RUN(clones_and_cache_keep_params_apart);
  RUN(sample_over_params_stays_in_the_run);
  RUN(broadcast_that_grows_stays_in_the_run);
  RUN(hoisted_node_reads_a_kept_value);
  RUN(unset_param_fails_as_before);
  RUN(active_extent_over_hoisted_graph);
  RUN(dim_expressions_stay_out_of_the_derived_graph);
  RUN(bindings_switch_and_params_follow);
}

int main(int argc, char** argv) {
  unsetenv("RLX_NO_HOIST");
  if (argc > 1) {
    dev = argv[1];
    if (!device_available(dev)) {
      printf("SKIP: device %s unavailable\n", dev);
      return 77;
    }
    run_all();
    return test_summary();
  }
  static const char* const devices[] = {"cpu", "vulkan"};
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
    if (!device_available(devices[i])) continue;
    dev = devices[i];
    run_all();
  }
  return test_summary();
}
