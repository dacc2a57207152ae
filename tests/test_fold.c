/* Constant folding (src/passes/fold.c): values computed from constants only
 * are evaluated on the CPU reference without the runtime, bit for bit as a
 * CPU reference executable computes them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "backends/cpu/cpu.h"
#include "passes/fold.h"

/* Output i of g run by a CPU reference executable into a malloc'd buffer. */
static void* run_reference(rlx_graph* g, int32_t i, size_t* out_bytes) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = 1;
  o.threads = 1;
  rlx_exec* e = test_compile_on(g, "cpu", &o);
  if (!e) return NULL;
  void* buf = NULL;
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  if (rlx_exec_run(e) == RLX_OK && rlx_exec_output_type(e, i, &dt, &rank, shape) == RLX_OK) {
    size_t n = rlx_dtype_size(dt);
    for (int32_t d = 0; d < rank; d++) n *= (size_t)shape[d];
    buf = malloc(n ? n : 1);
    if (buf && rlx_exec_read_output(e, i, dt, buf, n) != RLX_OK) {
      free(buf);
      buf = NULL;
    }
    *out_bytes = n;
  }
  if (!buf) fprintf(stderr, "run_reference: %s\n", rlx_exec_last_error(e));
  rlx_exec_destroy(e);
  return buf;
}

static rlx_tensor add_const_f32(rlx_graph* g, const rlx_dim* shape, int32_t rank, int64_t n) {
  float* v = malloc(sizeof(float) * (size_t)n);
  test_fill_f32(v, n, -2, 2);
  rlx_tensor t = RLX_NONE;
  rlx_graph_add_constant(g, RLX_F32, shape, rank, v, sizeof(float) * (size_t)n, &t);
  free(v);
  return t;
}

/* softmax(a @ b + c) and sum(exp(a)) over constants a [3,5], b [5,4], c [4]. */
static rlx_graph* constant_graph(void) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim as[2] = {3, 5}, bs[2] = {5, 4}, cs[1] = {4};
  test_seed(7);
  rlx_tensor a = add_const_f32(g, as, 2, 15), b = add_const_f32(g, bs, 2, 20);
  rlx_tensor c = add_const_f32(g, cs, 1, 4), y, z, ea, s;
  int32_t axes[1] = {1};
  int ok = rlx_graph_add_fused_matmul_bias_act(g, a, b, c, 0, 0, RLX_ACT_NONE, &y) == RLX_OK &&
           rlx_graph_add_softmax(g, y, 1, &z) == RLX_OK &&
           rlx_graph_add_activation(g, RLX_ACT_EXP, a, &ea) == RLX_OK &&
           rlx_graph_add_reduce(g, RLX_RED_SUM, ea, axes, 1, 0, &s) == RLX_OK;
  rlx_tensor outs[2] = {z, s};
  if (!ok || rlx_graph_set_outputs(g, outs, 2) != RLX_OK) {
    fprintf(stderr, "constant_graph: %s\n", rlx_graph_last_error(g));
    rlx_graph_destroy(g);
    return NULL;
  }
  return g;
}

TEST(evaluate_matches_cpu_reference_exactly) {
  rlx_graph* g = constant_graph();
  CHECK(g);
  rlx_fold_value v[2];
  CHECK_OK_G(g, rlx_fold_evaluate(g, rlx_ref_run_step, v));
  CHECK(v[0].type.dtype == RLX_F32 && v[0].type.rank == 2 && v[0].type.shape[0] == 3 &&
        v[0].type.shape[1] == 4 && v[0].bytes == 48);
  CHECK(v[1].type.rank == 1 && v[1].type.shape[0] == 3 && v[1].bytes == 12);
  for (int32_t i = 0; i < 2; i++) {
    size_t n = 0;
    void* want = run_reference(g, i, &n);
    CHECK(want && n == v[i].bytes);
    int same = memcmp(want, v[i].data, n) == 0;
    free(want);
    CHECK_MSG(same, "output %d differs from the CPU reference executable", (int)i);
  }
  /* softmax rows sum to 1: the values are real, not zeros. */
  const float* z = v[0].data;
  CHECK(fabs(z[0] + z[1] + z[2] + z[3] - 1.0) < 1e-5 && z[0] > 0);
  rlx_fold_value_free(&v[0]);
  rlx_fold_value_free(&v[1]);
  rlx_graph_destroy(g);
}

TEST(evaluate_refuses_inputs_and_reports_run_errors) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {4};
  rlx_tensor x, y;
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_NEG, x, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  rlx_fold_value v[1];
  CHECK(rlx_fold_evaluate(g, rlx_ref_run_step, v) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "cannot read inputs") != NULL);
  rlx_graph_destroy(g);
  /* Gather with an index out of range: the kernel's error comes back. */
  rlx_graph_create(&g);
  rlx_tensor d = add_const_f32(g, s, 1, 4), idx, out;
  int64_t bad[1] = {9};
  rlx_dim is[1] = {1};
  CHECK_OK_G(g, rlx_graph_add_constant(g, RLX_I64, is, 1, bad, sizeof bad, &idx));
  CHECK_OK_G(g, rlx_graph_add_gather(g, d, idx, 0, &out));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &out, 1));
  CHECK(rlx_fold_evaluate(g, rlx_ref_run_step, v) == RLX_OUT_OF_RANGE);
  CHECK(rlx_graph_last_error(g)[0] != '\0');
  CHECK(rlx_fold_evaluate(g, rlx_ref_run_step, NULL) == RLX_INVALID_ARGUMENT);
  rlx_graph_destroy(g);
}

/* y = x * (exp(c) + 1) + sample-free tail: the constant branch folds. */
TEST(fold_constants_pass) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {2, 3};
  test_seed(11);
  rlx_tensor x, c = add_const_f32(g, s, 2, 6), one, ec, k, y;
  float onev = 1;
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_F32, s, 2, &x));
  CHECK_OK_G(g, rlx_graph_add_constant(g, RLX_F32, NULL, 0, &onev, sizeof onev, &one));
  CHECK_OK_G(g, rlx_graph_add_activation(g, RLX_ACT_EXP, c, &ec));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, ec, one, &k));
  CHECK_OK_G(g, rlx_graph_set_name(g, k, "scale"));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_MUL, x, k, &y));
  rlx_tensor outs[2] = {y, k};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  rlx_graph* f = NULL;
  int32_t folded = -1;
  CHECK_OK_G(g, rlx_fold_constants(g, rlx_ref_run_step, (int64_t)1 << 20, &f, &folded));
  CHECK(folded == 2);
  /* input, constant "scale", mul: exp, add and the two consumed constants are gone */
  CHECK_MSG(rlx_graph_node_count(f) == 3, "%d nodes", (int)rlx_graph_node_count(f));
  CHECK(rlx_graph_input_count(f) == 1 && rlx_graph_output_count(f) == 2);
  rlx_value_info o;
  CHECK_OK_G(f, rlx_graph_get_output(f, 1, &o));
  CHECK(o.name && strcmp(o.name, "scale") == 0 && o.rank == 2);
  /* Same results as the original graph, bit for bit. */
  float xv[6] = {0.5f, -1, 2, 3, -0.25f, 1.5f};
  for (int32_t i = 0; i < 2; i++) {
    rlx_exec* a = test_compile_on(g, "cpu", NULL);
    rlx_exec* b = test_compile_on(f, "cpu", NULL);
    CHECK(a && b);
    CHECK_OK_E(a, rlx_exec_set_input(a, "x", RLX_F32, s, 2, xv, sizeof xv));
    CHECK_OK_E(b, rlx_exec_set_input(b, "x", RLX_F32, s, 2, xv, sizeof xv));
    CHECK_OK_E(a, rlx_exec_run(a));
    CHECK_OK_E(b, rlx_exec_run(b));
    float ra[6], rb[6];
    CHECK_OK_E(a, rlx_exec_read_output(a, i, RLX_F32, ra, sizeof ra));
    CHECK_OK_E(b, rlx_exec_read_output(b, i, RLX_F32, rb, sizeof rb));
    CHECK(memcmp(ra, rb, sizeof ra) == 0);
    rlx_exec_destroy(a);
    rlx_exec_destroy(b);
  }
  rlx_graph_destroy(f);
  /* Over the byte budget: nothing folds, the copy is the same graph. */
  CHECK_OK_G(g, rlx_fold_constants(g, rlx_ref_run_step, 8, &f, &folded));
  CHECK(folded == 0 && rlx_graph_node_count(f) == rlx_graph_node_count(g));
  rlx_graph_destroy(f);
  CHECK(rlx_fold_constants(g, rlx_ref_run_step, 0, NULL, NULL) == RLX_INVALID_ARGUMENT);
  rlx_graph_destroy(g);
}

/* Sample draws from a per-run seed: it must stay in the graph. */
TEST(fold_keeps_sample) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {2, 5};
  test_seed(3);
  rlx_tensor logits = add_const_f32(g, s, 2, 10), tok;
  CHECK_OK_G(g, rlx_graph_add_sample(g, logits, 0, 1.0f, 1.0f, &tok));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &tok, 1));
  rlx_graph* f = NULL;
  int32_t folded = -1;
  CHECK_OK_G(g, rlx_fold_constants(g, rlx_ref_run_step, (int64_t)1 << 20, &f, &folded));
  CHECK(folded == 0 && rlx_graph_node_count(f) == 2);
  rlx_graph_destroy(f);
  rlx_graph_destroy(g);
}

int main(void) {
  RUN(evaluate_matches_cpu_reference_exactly);
  RUN(evaluate_refuses_inputs_and_reports_run_errors);
  RUN(fold_constants_pass);
  RUN(fold_keeps_sample);
  return test_summary();
}
