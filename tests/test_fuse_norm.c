/* Residual-norm fusion (src/passes/fuse_residual_norm.c): Add -> LayerNorm
 * / RmsNorm becomes the fused residual norm, whose sum output serves the
 * Add's other readers; the fused graph gives the unfused numbers on the CPU
 * reference; shapes that must not fuse keep their Add; a compiled graph's
 * dispatch report counts the absorbed nodes in its "fused" column. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/graph.h"
#include "passes/fuse_residual_norm.h"

enum { B = 2, T = 3, C = 16 };

typedef struct norm_case {
  int rms;           /* RmsNorm, else LayerNorm */
  int bcast;         /* r is [C]: a broadcast, must not fuse */
  int axis;          /* LayerNorm axis */
  int late_gamma;    /* gamma computed after the Add (fused where the norm stands) */
  int reader_before; /* ... and the sum read between the Add and the norm: no fusion */
} norm_case;

static rlx_tensor constant(rlx_graph* g, const rlx_dim* shape, int rank) {
  float v[C];
  test_fill_f32(v, shape[0], 0.5, 1.5);
  rlx_tensor t = RLX_NONE;
  rlx_graph_add_constant(g, RLX_F32, shape, rank, v, sizeof(float) * (size_t)shape[0], &t);
  return t;
}

/* y = norm(x + r), z = (x + r) * (x + r) [, w = (x + r) + 1 between]. */
static rlx_graph* norm_graph(const norm_case* o) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[3] = {B, T, C}, cs[1] = {C};
  rlx_tensor x, r, s, y, z, gamma, beta, outs[3];
  rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x);
  rlx_graph_add_input(g, "r", RLX_F32, o->bcast ? cs : xs, o->bcast ? 1 : 3, &r);
  gamma = constant(g, cs, 1);
  beta = constant(g, cs, 1);
  rlx_graph_add_binary(g, RLX_BIN_ADD, x, r, &s);
  int n_out = 2;
  if (o->reader_before) rlx_graph_add_binary(g, RLX_BIN_ADD, s, beta, &outs[n_out++]);
  if (o->late_gamma) rlx_graph_add_binary(g, RLX_BIN_MUL, gamma, gamma, &gamma);
  if (o->rms) rlx_graph_add_rms_norm(g, s, gamma, 1e-5f, &y);
  else if (o->axis == 1) /* over [T, C]: no [C] affine fits */
    rlx_graph_add_layer_norm(g, s, RLX_NONE, RLX_NONE, o->axis, 1e-5f, &y);
  else rlx_graph_add_layer_norm(g, s, gamma, beta, o->axis, 1e-5f, &y);
  rlx_graph_add_binary(g, RLX_BIN_MUL, s, s, &z);
  outs[0] = y;
  outs[1] = z;
  if (rlx_graph_set_outputs(g, outs, n_out) != RLX_OK) {
    fprintf(stderr, "norm_graph: %s\n", rlx_graph_last_error(g));
    rlx_graph_destroy(g);
    return NULL;
  }
  return g;
}

static int count_op(const rlx_graph* g, rlx_op op) {
  int n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == op;
  return n;
}

/* Every output of g on the CPU reference, concatenated, the compiler's own
 * norm fusion off (so the unfused graph runs unfused). */
static double* run_graph(rlx_graph* g, const norm_case* o, int64_t* n) {
  setenv("RLX_NO_NORM_FUSION", "1", 1);
  rlx_compile_options opt;
  rlx_compile_options_init(&opt);
  opt.reference = 1;
  rlx_exec* e = test_compile_on(g, "cpu", &opt);
  unsetenv("RLX_NO_NORM_FUSION");
  if (!e) return NULL;
  float x[B * T * C], r[B * T * C];
  test_seed(11);
  test_fill_f32(x, B * T * C, -2, 2);
  test_fill_f32(r, B * T * C, -2, 2);
  rlx_dim xs[3] = {B, T, C}, cs[1] = {C};
  double* all = calloc(4 * B * T * C, sizeof *all);
  int ok = all && rlx_exec_set_input(e, "x", RLX_F32, xs, 3, x, sizeof x) == RLX_OK &&
           rlx_exec_set_input(e, "r", RLX_F32, o->bcast ? cs : xs, o->bcast ? 1 : 3, r,
                              sizeof(float) * (o->bcast ? C : B * T * C)) == RLX_OK &&
           rlx_exec_run(e) == RLX_OK;
  *n = 0;
  for (int32_t i = 0; ok && i < rlx_exec_output_count(e); i++) {
    int64_t k = 0;
    double* v = test_read_output_f64(e, i, &k);
    if (!v) ok = 0;
    else memcpy(all + *n, v, sizeof(double) * (size_t)k), *n += k;
    free(v);
  }
  rlx_exec_destroy(e);
  if (!ok) free(all);
  return ok ? all : NULL;
}

static void check(const norm_case* o, int want_fused, const char* what) {
  rlx_graph* g = norm_graph(o);
  rlx_graph* f = NULL;
  int32_t n_fused = -1;
  CHECK(g != NULL);
  if (!g) return;
  CHECK_OK_G(g, rlx_fuse_residual_norms(g, &f, &n_fused));
  if (!f) {
    rlx_graph_destroy(g);
    return;
  }
  rlx_op fused_op = o->rms ? RLX_OP_FUSED_RESIDUAL_RMS_NORM : RLX_OP_FUSED_RESIDUAL_LAYER_NORM;
  rlx_op norm_op = o->rms ? RLX_OP_RMS_NORM : RLX_OP_LAYER_NORM;
  CHECK_MSG(n_fused == want_fused && count_op(f, fused_op) == want_fused &&
                count_op(f, norm_op) == !want_fused,
            "%s: %d fused (want %d)", what, n_fused, want_fused);
  int64_t n1 = 0, n2 = 0;
  double *got = run_graph(f, o, &n1), *want = run_graph(g, o, &n2);
  CHECK_MSG(got && want && n1 == n2 && n1 > 0, "%s: outputs", what);
  if (got && want && n1 == n2)
    CHECK_MSG(test_rel_l2(got, want, n1) <= 1e-6, "%s: fused vs unfused rel err %g", what,
              test_rel_l2(got, want, n1));
  free(got);
  free(want);
  rlx_graph_destroy(f);
  rlx_graph_destroy(g);
}

TEST(residual_add_fuses_into_the_norm) {
  check(&(norm_case){0, 0, -1, 0, 0}, 1, "layer norm, sum read after");
  check(&(norm_case){0, 0, 2, 0, 0}, 1, "layer norm, axis 2 of 3");
  check(&(norm_case){1, 0, -1, 0, 0}, 1, "rms norm");
  check(&(norm_case){0, 0, -1, 1, 0}, 1, "gamma made after the add");
}

TEST(unfusable_shapes_keep_their_add) {
  check(&(norm_case){0, 1, -1, 0, 0}, 0, "broadcast residual");
  check(&(norm_case){0, 0, 1, 0, 0}, 0, "layer norm over the last two dims");
  check(&(norm_case){0, 0, -1, 1, 1}, 0, "late gamma and a reader between");
}

/* Compiled with the pass on: the report's layer_norm row counts 1 fused. */
TEST(dispatch_report_counts_fused_nodes) {
  norm_case o = {0, 0, -1, 0, 0};
  rlx_graph* g = norm_graph(&o);
  rlx_exec* e = g ? test_compile_on(g, "cpu", NULL) : NULL;
  char* text = NULL;
  CHECK(e != NULL);
  if (e) CHECK_OK_E(e, rlx_exec_report(e, &text));
  const char* row = text ? strstr(text, "\n  layer_norm ") : NULL;
  int native = -1, fused = -1;
  CHECK_MSG(row && sscanf(row + 14, "%d %d", &native, &fused) == 2 && fused == 1,
            "layer_norm row: %s", text ? text : "(no report)");
  rlx_free(text);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(null_arguments) {
  rlx_graph* out = NULL;
  CHECK(rlx_fuse_residual_norms(NULL, &out, NULL) == RLX_INVALID_ARGUMENT);
}

int main(void) {
  RUN(residual_add_fuses_into_the_norm);
  RUN(unfusable_shapes_keep_their_add);
  RUN(dispatch_report_counts_fused_nodes);
  RUN(null_arguments);
  return test_summary();
}
