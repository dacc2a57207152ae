/* BatchNorm folded into the preceding Conv (src/passes/bn_fold.c): the
 * folded graph has no BatchNorm left and gives the numbers of the unfolded
 * Conv + BatchNorm; pairs that must not fold (activation, residual, a
 * second reader, channels-last) keep their BatchNorm. Conv epilogue
 * fusion (same file): Add + activation absorbed into the Conv. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/graph.h"
#include "passes/bn_fold.h"

/* Helpers that return a value report a failing call and give up with
 * `fail` (the caller's CHECK on that value fails the test). */
#define OR_RETURN(fail, msg, expr)                                  \
  do {                                                              \
    if ((expr) != RLX_OK) {                                         \
      fprintf(stderr, "%s: %s\n", #expr, msg);                       \
      return fail;                                                  \
    }                                                               \
  } while (0)

enum { N = 2, C = 3, OC = 4, H = 6, W = 5, K = 3 };

static rlx_tensor constant(rlx_graph* g, const rlx_dim* shape, int rank, double lo, double hi) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  float* v = malloc(sizeof(float) * (size_t)n);
  test_fill_f32(v, n, lo, hi);
  rlx_tensor t = RLX_NONE;
  if (v) rlx_graph_add_constant(g, RLX_F32, shape, rank, v, sizeof(float) * (size_t)n, &t);
  free(v);
  return t; /* RLX_NONE on failure: the node using it fails */
}

typedef struct pair_opts {
  rlx_activation act;
  int residual, export_conv, channels_last, with_bias, with_affine;
} pair_opts;

/* x -> Conv (3x3, pad 1, stride 1) -> BatchNorm; the BatchNorm's output
 * (and with export_conv the Conv's too) are the graph's outputs. */
static rlx_graph* conv_bn_graph(const pair_opts* o) {
  rlx_graph* g = NULL;
  OR_RETURN(NULL, "graph", rlx_graph_create(&g));
  rlx_dim xs[4] = {N, C, H, W}, ws[4] = {OC, C, K, K}, cs[1] = {OC};
  if (o->channels_last) xs[1] = H, xs[2] = W, xs[3] = C;
  rlx_tensor x, y, outs[2];
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_add_input(g, "x", RLX_F32, xs, 4, &x));
  rlx_tensor w = constant(g, ws, 4, -1, 1), b = o->with_bias ? constant(g, cs, 1, -1, 1) : RLX_NONE;
  rlx_tensor res = RLX_NONE;
  if (o->residual) {
    rlx_dim ys[4] = {N, OC, H, W};
    res = constant(g, ys, 4, -1, 1);
  }
  int64_t pads[4] = {1, 1, 1, 1};
  rlx_conv_layout layout = o->channels_last ? RLX_CONV_CHANNELS_LAST : RLX_CONV_CHANNELS_FIRST;
  OR_RETURN(NULL, rlx_graph_last_error(g),
            rlx_graph_add_conv(g, x, w, b, res, 2, NULL, pads, NULL, 1, o->act, layout, &y));
  rlx_tensor gamma = o->with_affine ? constant(g, cs, 1, 0.5, 2) : RLX_NONE;
  rlx_tensor beta = o->with_affine ? constant(g, cs, 1, -1, 1) : RLX_NONE;
  rlx_tensor mean = constant(g, cs, 1, -0.5, 0.5), var = constant(g, cs, 1, 0.2, 2);
  OR_RETURN(NULL, rlx_graph_last_error(g),
            rlx_graph_add_batch_norm(g, y, gamma, beta, mean, var, 1e-3f, &outs[0]));
  outs[1] = y;
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_set_outputs(g, outs, o->export_conv ? 2 : 1));
  return g;
}

static int count_op(const rlx_graph* g, rlx_op op) {
  int n = 0;
  for (int32_t i = 0; i < g->n_nodes; i++) n += g->nodes[i].op == op;
  return n;
}

/* Output 0 of g on the CPU reference for a fixed x. */
static double* run_output0(rlx_graph* g, const float* x, int channels_last, int64_t* n) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = 1;
  rlx_exec* e = test_compile_on(g, "cpu", &o);
  if (!e) return NULL;
  rlx_dim xs[4] = {N, C, H, W};
  if (channels_last) xs[1] = H, xs[2] = W, xs[3] = C;
  double* out = NULL;
  if (rlx_exec_set_input(e, "x", RLX_F32, xs, 4, x, sizeof(float) * N * C * H * W) == RLX_OK &&
      rlx_exec_run(e) == RLX_OK)
    out = test_read_output_f64(e, 0, n);
  else
    fprintf(stderr, "run: %s\n", rlx_exec_last_error(e));
  rlx_exec_destroy(e);
  return out;
}

static void check_folds(int with_bias, int with_affine) {
  pair_opts o = {RLX_ACT_NONE, 0, 0, 0, with_bias, with_affine};
  test_seed(11);
  rlx_graph* g = conv_bn_graph(&o);
  test_seed(11);
  o.export_conv = 1; /* the Conv output read twice: BatchNorm stays */
  rlx_graph* ref = conv_bn_graph(&o);
  CHECK(g && ref);
  rlx_graph* folded = NULL;
  int32_t n_folded = -1;
  CHECK_OK_G(g, rlx_fold_batch_norm(g, &folded, &n_folded));
  CHECK(n_folded == 1 && folded && count_op(folded, RLX_OP_BATCH_NORM) == 0 &&
        count_op(folded, RLX_OP_CONV) == 1);
  float x[N * C * H * W];
  test_fill_f32(x, N * C * H * W, -2, 2);
  int64_t n1 = 0, n2 = 0;
  double* got = run_output0(g, x, 0, &n1);
  double* want = run_output0(ref, x, 0, &n2);
  CHECK(got && want && n1 == N * OC * H * W && n1 == n2);
  if (got && want && n1 == n2) {
    double err = test_rel_l2(got, want, n1);
    CHECK_MSG(err <= 1e-5, "bias=%d affine=%d: folded vs unfolded rel err %g", with_bias,
              with_affine, err);
  }
  free(got);
  free(want);
  rlx_graph_destroy(folded);
  rlx_graph_destroy(ref);
  rlx_graph_destroy(g);
}

TEST(conv_bn_folds_to_one_conv) {
  for (int bias = 0; bias < 2; bias++)
    for (int affine = 0; affine < 2; affine++) check_folds(bias, affine);
}

static void check_kept(pair_opts o, const char* why) {
  test_seed(5);
  rlx_graph* g = conv_bn_graph(&o);
  CHECK(g);
  rlx_graph* out = NULL;
  int32_t n_folded = -1;
  CHECK_OK_G(g, rlx_fold_batch_norm(g, &out, &n_folded));
  CHECK_MSG(n_folded == 0 && out && count_op(out, RLX_OP_BATCH_NORM) == 1, "%s: folded", why);
  rlx_graph_destroy(out);
  rlx_graph_destroy(g);
}

TEST(unfoldable_pairs_keep_their_batch_norm) {
  check_kept((pair_opts){RLX_ACT_RELU, 0, 0, 0, 1, 1}, "activation");
  check_kept((pair_opts){RLX_ACT_NONE, 1, 0, 0, 1, 1}, "residual");
  check_kept((pair_opts){RLX_ACT_NONE, 0, 1, 0, 1, 1}, "second reader");
}

TEST(null_arguments) {
  rlx_graph* out = NULL;
  CHECK(rlx_fold_batch_norm(NULL, &out, NULL) == RLX_INVALID_ARGUMENT);
}

/* x -> Conv a (+ bias) and Conv b; out = relu(a + b) (or relu(a + r) with r
 * a constant when !two_convs); export_conv also exports a (and b), which
 * keeps every node apart. */
static rlx_graph* conv_epilogue_graph(int two_convs, int export_conv) {
  rlx_graph* g = NULL;
  OR_RETURN(NULL, "graph", rlx_graph_create(&g));
  rlx_dim xs[4] = {N, C, H, W}, ws[4] = {OC, C, K, K}, cs[1] = {OC}, ys[4] = {N, OC, H, W};
  rlx_tensor x, a, b, s, outs[3];
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_add_input(g, "x", RLX_F32, xs, 4, &x));
  int64_t pads[4] = {1, 1, 1, 1};
  rlx_tensor w = constant(g, ws, 4, -1, 1), bias = constant(g, cs, 1, -1, 1);
  OR_RETURN(NULL, rlx_graph_last_error(g),
            rlx_graph_add_conv(g, x, w, bias, RLX_NONE, 2, NULL, pads, NULL, 1, RLX_ACT_NONE,
                               RLX_CONV_CHANNELS_FIRST, &a));
  if (two_convs) {
    rlx_tensor w2 = constant(g, ws, 4, -1, 1);
    OR_RETURN(NULL, rlx_graph_last_error(g),
              rlx_graph_add_conv(g, x, w2, RLX_NONE, RLX_NONE, 2, NULL, pads, NULL, 1,
                                 RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, &b));
  } else {
    b = constant(g, ys, 4, -1, 1);
  }
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_add_binary(g, RLX_BIN_ADD, b, a, &s));
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_add_activation(g, RLX_ACT_RELU, s, &outs[0]));
  outs[1] = a;
  outs[2] = b;
  int n_out = export_conv ? 2 + two_convs : 1;
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_set_outputs(g, outs, n_out));
  return g;
}

static void check_epilogue(int two_convs) {
  test_seed(5);
  rlx_graph* g = conv_epilogue_graph(two_convs, 0);
  test_seed(5);
  rlx_graph* ref = conv_epilogue_graph(two_convs, 1);
  rlx_graph *fused = NULL, *kept = NULL;
  int32_t n_fused = -1, n_kept = -1;
  CHECK(g && ref);
  if (!g || !ref) return;
  CHECK_OK_G(g, rlx_fuse_conv_epilogues(g, &fused, &n_fused));
  CHECK_OK_G(ref, rlx_fuse_conv_epilogues(ref, &kept, &n_kept));
  CHECK_MSG(n_fused == 1 && fused && count_op(fused, RLX_OP_BINARY) == 0 &&
                count_op(fused, RLX_OP_ACTIVATION) == 0 &&
                count_op(fused, RLX_OP_CONV) == 1 + two_convs,
            "two_convs=%d: %d fused", two_convs, (int)n_fused);
  CHECK_MSG(n_kept == 0 && kept && count_op(kept, RLX_OP_BINARY) == 1, "exported conv fused");
  float x[N * C * H * W];
  test_fill_f32(x, N * C * H * W, -2, 2);
  int64_t n1 = 0, n2 = 0;
  double* got = fused ? run_output0(fused, x, 0, &n1) : NULL;
  double* want = run_output0(ref, x, 0, &n2);
  CHECK(got && want && n1 == N * OC * H * W && n1 == n2);
  if (got && want && n1 == n2)
    CHECK_MSG(test_rel_l2(got, want, n1) <= 1e-6, "fused vs unfused rel err %g",
              test_rel_l2(got, want, n1));
  free(got);
  free(want);
  rlx_graph_destroy(fused);
  rlx_graph_destroy(kept);
  rlx_graph_destroy(ref);
  rlx_graph_destroy(g);
}

/* Conv -> Add -> Relu becomes one Conv (residual input, act relu); with two
 * Convs feeding the Add only the first absorbs it, the other's output is
 * its residual. */
TEST(conv_epilogue_fuses_residual_and_activation) {
  check_epilogue(0);
  check_epilogue(1);
}

/* x [2,3,4] @ w [4,5] + b [5] -> gelu_approx. export: 0 none, 1 the sum
 * (the activation must stay: its input has a second reader), 2 the
 * product (nothing fuses). */
static rlx_graph* matmul_epilogue_graph(int export) {
  rlx_graph* g = NULL;
  OR_RETURN(NULL, "graph", rlx_graph_create(&g));
  rlx_dim xs[3] = {2, 3, 4}, ws[2] = {4, 5}, bs[1] = {5};
  rlx_tensor x, m, s, outs[2];
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x));
  rlx_tensor w = constant(g, ws, 2, -1, 1), b = constant(g, bs, 1, -1, 1);
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_add_matmul(g, x, w, 0, 0, &m));
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_add_binary(g, RLX_BIN_ADD, m, b, &s));
  OR_RETURN(NULL, rlx_graph_last_error(g),
            rlx_graph_add_activation(g, RLX_ACT_GELU_APPROX, s, &outs[0]));
  outs[1] = export == 1 ? s : m;
  OR_RETURN(NULL, rlx_graph_last_error(g), rlx_graph_set_outputs(g, outs, export ? 2 : 1));
  return g;
}

/* Output 0 of g for x [2,3,4] on the CPU reference, the compiler's own
 * matmul fusion off (so an unfused graph runs unfused). */
static double* run_matmul_graph(rlx_graph* g, const float* x, int64_t* n) {
  setenv("RLX_NO_MATMUL_FUSION", "1", 1);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = 1;
  rlx_exec* e = test_compile_on(g, "cpu", &o);
  unsetenv("RLX_NO_MATMUL_FUSION");
  if (!e) return NULL;
  rlx_dim xs[3] = {2, 3, 4};
  double* out = NULL;
  if (rlx_exec_set_input(e, "x", RLX_F32, xs, 3, x, sizeof(float) * 24) == RLX_OK &&
      rlx_exec_run(e) == RLX_OK)
    out = test_read_output_f64(e, 0, n);
  rlx_exec_destroy(e);
  return out;
}

static void check_matmul_epilogue(int export, int want_fused_ops, int want_act) {
  test_seed(7);
  rlx_graph* g = matmul_epilogue_graph(export);
  rlx_graph* fused = NULL;
  int32_t n_fused = -1;
  CHECK(g != NULL);
  if (!g) return;
  CHECK_OK_G(g, rlx_fuse_epilogues(g, RLX_EPILOGUE_MATMUL, &fused, &n_fused));
  if (!fused) {
    rlx_graph_destroy(g);
    return;
  }
  CHECK_MSG(count_op(fused, RLX_OP_FUSED_MATMUL_BIAS_ACT) == want_fused_ops &&
                count_op(fused, RLX_OP_ACTIVATION) == !want_act &&
                count_op(fused, RLX_OP_MATMUL) == !want_fused_ops,
            "export=%d: %d fused matmuls, %d activations", export,
            count_op(fused, RLX_OP_FUSED_MATMUL_BIAS_ACT), count_op(fused, RLX_OP_ACTIVATION));
  for (int32_t i = 0; i < fused->n_nodes && want_act; i++)
    if (fused->nodes[i].op == RLX_OP_FUSED_MATMUL_BIAS_ACT)
      CHECK(fused->nodes[i].a.act == RLX_ACT_GELU_APPROX);
  float x[24];
  test_fill_f32(x, 24, -2, 2);
  int64_t n1 = 0, n2 = 0;
  double* got = run_matmul_graph(fused, x, &n1);
  double* want = run_matmul_graph(g, x, &n2);
  CHECK(got && want && n1 == 30 && n1 == n2);
  if (got && want && n1 == n2)
    CHECK_MSG(test_rel_l2(got, want, n1) <= 1e-6, "fused vs unfused rel err %g",
              test_rel_l2(got, want, n1));
  free(got);
  free(want);
  rlx_graph_destroy(fused);
  rlx_graph_destroy(g);
}

/* MatMul -> bias Add -> activation becomes one FUSED_MATMUL_BIAS_ACT; a
 * sum read elsewhere keeps its activation apart; an exported product
 * fuses nothing. */
TEST(matmul_epilogue_fuses_bias_and_activation) {
  check_matmul_epilogue(0, 1, 1);
  check_matmul_epilogue(1, 1, 0);
  check_matmul_epilogue(2, 0, 0);
}

int main(void) {
  RUN(matmul_epilogue_fuses_bias_and_activation);
  RUN(conv_bn_folds_to_one_conv);
  RUN(conv_epilogue_fuses_residual_and_activation);
  RUN(unfoldable_pairs_keep_their_batch_norm);
  RUN(null_arguments);
  return test_summary();
}
