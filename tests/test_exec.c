/* Executable API semantics that do not depend on the device: unknown and
 * unbuilt devices, half params converted, symbolic bindings recompiled
 * (cached), and the decompose pass. What every device promises (errors that
 * leave the executable usable, active extent, feeds, state, clone, seed,
 * debug_nans, report and stats) is test_contract.c, run per device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "passes/decompose.h"

TEST(unknown_and_unbuilt_devices) {
  rlx_graph* g = test_bias_relu_graph();
  rlx_exec* e = NULL;
  CHECK(rlx_compile(g, "tpu", NULL, &e) == RLX_NOT_FOUND);
  CHECK(strstr(rlx_graph_last_error(g), "tpu") != NULL);
  CHECK(e == NULL);
  rlx_device_info info;
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    CHECK(rlx_device_get(i, &info) == RLX_OK);
    if (strcmp(info.name, "cpu") == 0) CHECK(info.available);
    if (!info.available) {
      rlx_status s = rlx_compile(g, info.name, NULL, &e);
      CHECK(s != RLX_OK && e == NULL);
      CHECK(strstr(rlx_graph_last_error(g), info.name) != NULL);
    }
  }
  rlx_graph_destroy(g);
}

TEST(half_params_convert) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {4};
  rlx_tensor w, c;
  rlx_graph_add_param(g, "w", RLX_F16, s, 1, &w);
  rlx_graph_add_cast(g, w, RLX_F32, &c);
  rlx_graph_set_outputs(g, &c, 1);
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  float wf[4] = {1.5f, -2.25f, 1000.0f, 0.1f}, out[4];
  CHECK_OK_E(e, rlx_exec_set_param(e, "w", RLX_F32, wf, sizeof wf));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out));
  CHECK(out[0] == 1.5f && out[1] == -2.25f && out[2] == 1000.0f && fabsf(out[3] - 0.1f) < 1e-4f);
  uint16_t bits[4] = {0x3c00, 0xc000, 0x0000, 0x3800}; /* 1, -2, 0, 0.5 */
  CHECK_OK_E(e, rlx_exec_set_param(e, "w", RLX_F16, bits, sizeof bits));
  CHECK(rlx_exec_set_param(e, "w", RLX_BF16, bits, sizeof bits) == RLX_INVALID_ARGUMENT);
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out));
  CHECK(out[0] == 1 && out[1] == -2 && out[2] == 0 && out[3] == 0.5f);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* NULL arguments are errors with a message of their own (not the previous
 * call's), and options that promise arrays they do not pass are refused. */
TEST(null_arguments_are_errors) {
  rlx_compile_options_init(NULL); /* no crash */
  rlx_graph* g = test_bias_relu_graph();
  rlx_exec* e = NULL;
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.n_symbols = 2; /* names and sizes left NULL */
  CHECK(rlx_compile(g, "cpu", &o, &e) == RLX_INVALID_ARGUMENT && e == NULL);
  CHECK_MSG(strstr(rlx_graph_last_error(g), "n_symbols") != NULL, "%s", rlx_graph_last_error(g));
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  float b3[3] = {1, 2, 3};
  CHECK(rlx_exec_set_param(e, "nope", RLX_F32, b3, sizeof b3) == RLX_NOT_FOUND);
  /* unknown names: the message lists the valid ones */
  CHECK_MSG(strstr(rlx_exec_last_error(e), "no param named 'nope' (params: b)") != NULL, "%s",
            rlx_exec_last_error(e));
  rlx_dim x23[2] = {2, 3};
  float x6[6] = {0};
  CHECK(rlx_exec_set_input(e, "y", RLX_F32, x23, 2, x6, sizeof x6) == RLX_NOT_FOUND);
  CHECK_MSG(strstr(rlx_exec_last_error(e), "no input named 'y' (inputs: x)") != NULL, "%s",
            rlx_exec_last_error(e));
  CHECK(rlx_exec_feed(e, "q", 0, -1) == RLX_NOT_FOUND);
  CHECK_MSG(strstr(rlx_exec_last_error(e), "(inputs: x)") != NULL, "%s", rlx_exec_last_error(e));
  CHECK(rlx_exec_set_param(e, NULL, RLX_F32, b3, sizeof b3) == RLX_INVALID_ARGUMENT);
  CHECK_MSG(strstr(rlx_exec_last_error(e), "name is NULL") != NULL, "%s", rlx_exec_last_error(e));
  rlx_dim xs[2] = {2, 3};
  CHECK(rlx_exec_set_input(e, "x", RLX_F32, xs, 2, NULL, 24) == RLX_INVALID_ARGUMENT);
  CHECK_MSG(strstr(rlx_exec_last_error(e), "data is NULL") != NULL, "%s", rlx_exec_last_error(e));
  CHECK(rlx_exec_set_input(e, "x", RLX_F32, NULL, 2, b3, 12) == RLX_INVALID_ARGUMENT);
  CHECK_MSG(strstr(rlx_exec_last_error(e), "shape is NULL") != NULL, "%s", rlx_exec_last_error(e));
  float out[6];
  CHECK(rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out) == RLX_FAILED_PRECONDITION);
  CHECK_MSG(strstr(rlx_exec_last_error(e), "before any run") != NULL, "%s", rlx_exec_last_error(e));
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* y = x * 2 with x: [batch, 3]; two bindings, cached */
TEST(symbolic_binding_recompiles) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim batch;
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &batch));
  rlx_dim xs[2] = {batch, 3}, one[1] = {1};
  rlx_tensor x, x2, two, y, m;
  float two_f = 2;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_input(g, "x2", RLX_F32, xs, 2, &x2);
  rlx_graph_add_constant(g, RLX_F32, one, 1, &two_f, sizeof two_f, &two);
  rlx_graph_add_binary(g, RLX_BIN_MUL, x, two, &y);
  rlx_graph_add_binary(g, RLX_BIN_ADD, y, x2, &m);
  rlx_graph_set_outputs(g, &m, 1);
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  for (int round = 0; round < 3; round++) {
    int64_t b = round == 1 ? 5 : 2;
    float x_data[15], out[15];
    test_fill_f32(x_data, 15, -1, 1);
    rlx_dim s[2] = {b, 3};
    CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s, 2, x_data, (size_t)b * 12));
    CHECK_OK_E(e, rlx_exec_set_input(e, "x2", RLX_F32, s, 2, x_data, (size_t)b * 12));
    CHECK_OK_E(e, rlx_exec_run(e));
    int64_t shape[8];
    int32_t rank;
    CHECK_OK_E(e, rlx_exec_output_type(e, 0, NULL, &rank, shape));
    CHECK(rank == 2 && shape[0] == b && shape[1] == 3);
    CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, (size_t)b * 12));
    for (int i = 0; i < b * 3; i++) CHECK(out[i] == x_data[i] * 3);
  }
  /* inconsistent binding: x has batch 2, x2 batch 5 */
  float d[15] = {1};
  rlx_dim s2[2] = {2, 3}, s5[2] = {5, 3};
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s2, 2, d, 24));
  CHECK_OK_E(e, rlx_exec_set_input(e, "x2", RLX_F32, s5, 2, d, 60));
  CHECK(rlx_exec_run(e) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_exec_last_error(e), "batch") != NULL);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* y = x * w over a symbolic batch: bindings 2, 5, 2, 5 with w set anew
 * before some runs. Each binding's arena keeps the params it was given
 * (no upload on a mere switch), and a param set while another binding is
 * current reaches every binding's next run. */
TEST(params_across_bindings) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim batch;
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &batch));
  rlx_dim xs[2] = {batch, 3}, ws[1] = {3};
  rlx_tensor x, w, y;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_param(g, "w", RLX_F32, ws, 1, &w);
  rlx_graph_add_binary(g, RLX_BIN_MUL, x, w, &y);
  rlx_graph_set_outputs(g, &y, 1);
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  float wv[3] = {1, 2, 3};
  int set_before[6] = {1, 0, 0, 1, 0, 1};
  for (int round = 0; round < 6; round++) {
    if (set_before[round]) {
      for (int i = 0; i < 3; i++) wv[i] += 10.0f;
      CHECK_OK_E(e, rlx_exec_set_param(e, "w", RLX_F32, wv, sizeof wv));
    }
    int64_t b = round % 2 ? 5 : 2;
    float x_data[15], out[15];
    test_fill_f32(x_data, 15, -1, 1);
    rlx_dim s[2] = {b, 3};
    CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s, 2, x_data, (size_t)b * 12));
    CHECK_OK_E(e, rlx_exec_run(e));
    CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, (size_t)b * 12));
    for (int i = 0; i < b * 3; i++) CHECK(out[i] == x_data[i] * wv[i % 3]);
  }
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* Device state written by runs at one binding is read by the next run at
 * another: acc [4] += sum over the batch of x, with acc carried over
 * switches between batch 1 and batch 3 (no host copy by the caller). */
TEST(state_carried_across_bindings) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim batch;
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &batch));
  rlx_dim xs[2] = {batch, 4}, as[1] = {4};
  rlx_tensor x, acc, sum, out;
  int32_t axis0 = 0;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_input(g, "acc", RLX_F32, as, 1, &acc);
  rlx_graph_add_reduce(g, RLX_RED_SUM, x, &axis0, 1, 0, &sum);
  rlx_graph_add_binary(g, RLX_BIN_ADD, acc, sum, &out);
  rlx_graph_set_outputs(g, &out, 1);
  const char* names[1] = {"acc"};
  int32_t outs[1] = {0};
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.state_inputs = names;
  o.state_outputs = outs;
  o.n_states = 1;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", &o, &e));
  float zero[4] = {0}, want[4] = {0}, got[4];
  CHECK_OK_E(e, rlx_exec_set_input(e, "acc", RLX_F32, as, 1, zero, sizeof zero));
  int64_t batches[5] = {1, 3, 3, 1, 3};
  for (int round = 0; round < 5; round++) {
    float x_data[12];
    test_fill_f32(x_data, 12, -1, 1);
    rlx_dim s[2] = {batches[round], 4};
    for (int64_t r = 0; r < batches[round]; r++)
      for (int j = 0; j < 4; j++) want[j] += x_data[r * 4 + j];
    CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s, 2, x_data,
                                     (size_t)batches[round] * 16));
    CHECK_OK_E(e, rlx_exec_run(e));
    CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, got, sizeof got));
    for (int j = 0; j < 4; j++) CHECK(fabsf(got[j] - want[j]) < 1e-5f);
  }
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

static int supports_nothing(const rlx_graph* g, int32_t ni) { return 0; }

/* Runs graph g and its full decomposition on the CPU; outputs must agree. */
static double decomposed_difference(rlx_graph* g, const char* in_name, const rlx_dim* shape,
                                    int32_t rank, int32_t* rewritten) {
  int32_t counts[64] = {0};
  rlx_graph* d = NULL;
  if (rlx_decompose(g, supports_nothing, &d, counts) != RLX_OK) return INFINITY;
  *rewritten = 0;
  for (int i = 0; i < 64; i++) *rewritten += counts[i];
  rlx_graph* graphs[2] = {g, d};
  double out[2][512];
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++) n *= shape[i];
  float* x = malloc(sizeof(float) * (size_t)n);
  test_fill_f32(x, n, -2, 2);
  int64_t numel = 0;
  for (int k = 0; k < 2; k++) {
    rlx_exec* e = NULL;
    if (rlx_compile(graphs[k], "cpu", NULL, &e) != RLX_OK) { numel = -1; break; }
    rlx_exec_set_input(e, in_name, RLX_F32, shape, rank, x, sizeof(float) * (size_t)n);
    if (rlx_exec_run(e) != RLX_OK) { rlx_exec_destroy(e); numel = -1; break; }
    numel = 0;
    for (int32_t o = 0; o < rlx_exec_output_count(e); o++) {
      int64_t os[8];
      int32_t orank;
      rlx_dtype dt;
      rlx_exec_output_type(e, o, &dt, &orank, os);
      int64_t m = 1;
      for (int32_t i = 0; i < orank; i++) m *= os[i];
      if (dt == RLX_I64) {
        int64_t tmp[256];
        rlx_exec_read_output(e, o, RLX_I64, tmp, sizeof tmp);
        for (int64_t i = 0; i < m; i++) out[k][numel + i] = (double)tmp[i];
      } else {
        rlx_exec_read_output(e, o, RLX_F64, &out[k][numel], sizeof(double) * (size_t)m);
      }
      numel += m;
    }
    rlx_exec_destroy(e);
  }
  free(x);
  rlx_graph_destroy(d);
  if (numel <= 0) return INFINITY;
  return test_rel_l2(out[1], out[0], numel);
}

TEST(decompose_rules_are_exact) {
  rlx_dim xs[3] = {3, 4, 5};
  /* softmax / topk / argmax / cumsum on axis 0 and 1 */
  for (int axis = 0; axis < 2; axis++) {
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_tensor x, sm, tv, ti, am, cs, outs[5];
    rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x);
    rlx_graph_add_softmax(g, x, axis, &sm);
    rlx_graph_add_topk(g, x, 2, axis, 1, &tv, &ti);
    rlx_graph_add_argmax(g, x, axis, 0, &am);
    rlx_graph_add_cumsum(g, x, axis, 1, 0, &cs);
    outs[0] = sm; outs[1] = tv; outs[2] = ti; outs[3] = am; outs[4] = cs;
    CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 5));
    int32_t rewritten = 0;
    double d = decomposed_difference(g, "x", xs, 3, &rewritten);
    CHECK_MSG(d < 1e-6, "axis %d: difference %g", axis, d);
    CHECK(rewritten == 4);
    rlx_graph_destroy(g);
  }
  /* fused matmul + bias + gelu, fused residual layer/rms norm */
  {
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_dim ws[2] = {5, 5}, bs[1] = {5};
    float w[25], bias[5], gamma[5], beta[5];
    test_fill_f32(w, 25, -1, 1);
    test_fill_f32(bias, 5, -1, 1);
    test_fill_f32(gamma, 5, 0.5, 1.5);
    test_fill_f32(beta, 5, -1, 1);
    rlx_tensor x, W, B, G, Be, y, n1, s1, n2, s2, outs[5];
    rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x);
    rlx_graph_add_constant(g, RLX_F32, ws, 2, w, sizeof w, &W);
    rlx_graph_add_constant(g, RLX_F32, bs, 1, bias, sizeof bias, &B);
    rlx_graph_add_constant(g, RLX_F32, bs, 1, gamma, sizeof gamma, &G);
    rlx_graph_add_constant(g, RLX_F32, bs, 1, beta, sizeof beta, &Be);
    CHECK_OK_G(g, rlx_graph_add_fused_matmul_bias_act(g, x, W, B, 0, 1, RLX_ACT_GELU, &y));
    CHECK_OK_G(g, rlx_graph_add_fused_residual_layer_norm(g, y, x, B, G, Be, 1e-5f, &n1, &s1));
    CHECK_OK_G(g, rlx_graph_add_fused_residual_rms_norm(g, y, x, RLX_NONE, G, 1e-6f, &n2, &s2));
    outs[0] = y; outs[1] = n1; outs[2] = s1; outs[3] = n2; outs[4] = s2;
    CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 5));
    int32_t rewritten = 0;
    double d = decomposed_difference(g, "x", xs, 3, &rewritten);
    CHECK_MSG(d < 1e-6, "fused ops: difference %g", d);
    CHECK(rewritten == 3);
    rlx_graph_destroy(g);
  }
}

int main(void) {
  test_seed(42);
  RUN(unknown_and_unbuilt_devices);
  RUN(null_arguments_are_errors);
  RUN(half_params_convert);
  RUN(symbolic_binding_recompiles);
  RUN(params_across_bindings);
  RUN(state_carried_across_bindings);
  RUN(decompose_rules_are_exact);
  return test_summary();
}
