/* Reduced-precision compilation (rlx_compile_options.precision,
 * src/passes/precision.c): an MLP, a small conv net (conv + batch norm +
 * relu + pool + residual + gemm), a small transformer block and an MLP of
 * quantized weights (DequantMatMul), built in
 * f32, compiled with bf16 and f16 on a device, against the same graph in
 * f32 on the CPU reference:
 *   - the outputs agree within a tolerance derived from the dtype's unit
 *     roundoff (relative L2),
 *   - the interface (input, param and output dtypes) is still f32,
 *   - the compiled graph really computes in the reduced dtype (its matmul
 *     and conv nodes, read from rlx_exec_print_dot),
 * plus the pass's rules on the graph itself (what stays f32, integer
 * values untouched, constants converted) and option errors.
 *
 *   test_precision [DEVICE]   (cpu by default; exit 77 = SKIP when the
 *                              device is not built or cannot start)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/dtype.h"
#include "ir/graph.h"
#include "passes/precision.h"

static const char* dev = "cpu";

/* Unit roundoff of the reduced dtypes: 2^-8 (bf16, 8 significant bits)
 * and 2^-11 (f16). Each layer rounds the values it stores once (its
 * kernels accumulate in f32), and the models here stack up to a dozen such
 * roundings on paths that partly cancel: 2.5 units (bf16 9.8e-3, under
 * 1e-2; f16 1.2e-3) holds them with a margin (measured on the CPU: 5e-3,
 * 3.8e-3, 7.7e-3 for the MLP, conv net and transformer in bf16). */
static double tolerance(rlx_precision p) {
  double u = p == RLX_PRECISION_BF16 ? 1.0 / 256 : 1.0 / 2048;
  return 2.5 * u;
}

/* ------------------------------------------------------------ models */

#define TRY(g, expr)                                                   \
  do {                                                                 \
    if ((expr) != RLX_OK) {                                            \
      fprintf(stderr, "%s: %s\n", #expr, rlx_graph_last_error(g));     \
      rlx_graph_destroy(g);                                            \
      return NULL;                                                     \
    }                                                                  \
  } while (0)

/* x [8, 32] -> gemm 64 + gelu -> gemm 16 -> softmax. */
static rlx_graph* mlp_graph(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[2] = {8, 32}, w1s[2] = {32, 64}, b1s[1] = {64}, w2s[2] = {64, 16}, b2s[1] = {16};
  rlx_tensor x, w1, b1, w2, b2, h, y;
  TRY(g, rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x));
  TRY(g, rlx_graph_add_param(g, "w1", RLX_F32, w1s, 2, &w1));
  TRY(g, rlx_graph_add_param(g, "b1", RLX_F32, b1s, 1, &b1));
  TRY(g, rlx_graph_add_param(g, "w2", RLX_F32, w2s, 2, &w2));
  TRY(g, rlx_graph_add_param(g, "b2", RLX_F32, b2s, 1, &b2));
  TRY(g, rlx_graph_add_matmul(g, x, w1, 0, 0, &h));
  TRY(g, rlx_graph_add_binary(g, RLX_BIN_ADD, h, b1, &h));
  TRY(g, rlx_graph_add_activation(g, RLX_ACT_GELU, h, &h));
  TRY(g, rlx_graph_add_matmul(g, h, w2, 0, 0, &y));
  TRY(g, rlx_graph_add_binary(g, RLX_BIN_ADD, y, b2, &y));
  TRY(g, rlx_graph_add_softmax(g, y, 1, &y));
  TRY(g, rlx_graph_set_outputs(g, &y, 1));
  return g;
}

/* x [24, 256] -> DequantMatMul q4_k 64 + gelu -> DequantMatMul int8_asym
 * 16 (f32 scales, which stay f32). No softmax: the random blocks make
 * logits in the hundreds, where a softmax turns one rounding into a
 * large relative change. 24 rows: past the decode
 * GEMV, so CUDA multiplies dequantized panels on tensor cores. */
static rlx_graph* quant_mlp_graph(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[2] = {24, 256};
  rlx_tensor x, w1, s1, z1, w2, s2, z2, h, y;
  TRY(g, rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x));
  TRY(g, test_quant_const(g, RLX_QUANT_Q4_K, 64, 256, 5, &w1, &s1, &z1));
  TRY(g, test_quant_const(g, RLX_QUANT_INT8_ASYM, 16, 64, 6, &w2, &s2, &z2));
  TRY(g, rlx_graph_dequant_matmul(g, x, w1, s1, z1, RLX_QUANT_Q4_K, 0, &h));
  TRY(g, rlx_graph_add_activation(g, RLX_ACT_GELU, h, &h));
  TRY(g, rlx_graph_dequant_matmul(g, h, w2, s2, z2, RLX_QUANT_INT8_ASYM, 32, &y));
  TRY(g, rlx_graph_set_outputs(g, &y, 1));
  return g;
}

/* Conv 3x3 (pad 1) + BatchNorm params named prefix_{w,b,gamma,beta,mean,var}. */
static rlx_status conv_bn(rlx_graph* g, const char* prefix, rlx_tensor x, int64_t c, int64_t oc,
                          rlx_tensor* out) {
  char name[64];
  rlx_dim ws[4] = {oc, c, 3, 3}, cs[1] = {oc};
  rlx_tensor w, b, p[4];
  static const char* const stats[4] = {"gamma", "beta", "mean", "var"};
  snprintf(name, sizeof name, "%s_w", prefix);
  RLX_RETURN_IF_ERROR(rlx_graph_add_param(g, name, RLX_F32, ws, 4, &w));
  snprintf(name, sizeof name, "%s_b", prefix);
  RLX_RETURN_IF_ERROR(rlx_graph_add_param(g, name, RLX_F32, cs, 1, &b));
  for (int i = 0; i < 4; i++) {
    snprintf(name, sizeof name, "%s_%s", prefix, stats[i]);
    RLX_RETURN_IF_ERROR(rlx_graph_add_param(g, name, RLX_F32, cs, 1, &p[i]));
  }
  int64_t pads[4] = {1, 1, 1, 1};
  RLX_RETURN_IF_ERROR(rlx_graph_add_conv(g, x, w, b, RLX_NONE, 2, NULL, pads, NULL, 1,
                                         RLX_ACT_NONE, RLX_CONV_CHANNELS_FIRST, out));
  return rlx_graph_add_batch_norm(g, *out, p[0], p[1], p[2], p[3], 1e-5f, out);
}

/* x [2, 3, 12, 12] -> conv+bn+relu -> max pool 2 -> conv+bn + residual ->
 * relu -> global average pool -> reshape [2, 8] -> gemm 10. */
static rlx_graph* convnet_graph(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[4] = {2, 3, 12, 12}, fs[2] = {8, 10}, fbs[1] = {10}, flat[2] = {2, 8};
  rlx_tensor x, h, r, fw, fb, y;
  int64_t k2[2] = {2, 2}, k6[2] = {6, 6};
  TRY(g, rlx_graph_add_input(g, "x", RLX_F32, xs, 4, &x));
  TRY(g, conv_bn(g, "c1", x, 3, 8, &h));
  TRY(g, rlx_graph_add_activation(g, RLX_ACT_RELU, h, &h));
  TRY(g, rlx_graph_add_pool(g, h, RLX_POOL_MAX, 2, k2, k2, NULL, NULL, 0, 0, &h));
  TRY(g, conv_bn(g, "c2", h, 8, 8, &r));
  TRY(g, rlx_graph_add_binary(g, RLX_BIN_ADD, r, h, &h));
  TRY(g, rlx_graph_add_activation(g, RLX_ACT_RELU, h, &h));
  TRY(g, rlx_graph_add_pool(g, h, RLX_POOL_AVG, 2, k6, k6, NULL, NULL, 0, 0, &h));
  TRY(g, rlx_graph_add_reshape(g, h, flat, 2, &h));
  TRY(g, rlx_graph_add_param(g, "fc_w", RLX_F32, fs, 2, &fw));
  TRY(g, rlx_graph_add_param(g, "fc_b", RLX_F32, fbs, 1, &fb));
  TRY(g, rlx_graph_add_fused_matmul_bias_act(g, h, fw, fb, 0, 0, RLX_ACT_NONE, &y));
  TRY(g, rlx_graph_set_outputs(g, &y, 1));
  return g;
}

enum { TB = 2, TS = 8, TD = 32, TH = 4, THD = 8, TF = 64 };

static rlx_status linear(rlx_graph* g, const char* name, rlx_tensor x, int64_t in, int64_t out_dim,
                         rlx_tensor* out) {
  char n[64];
  rlx_dim ws[2] = {in, out_dim}, bs[1] = {out_dim};
  rlx_tensor w, b;
  snprintf(n, sizeof n, "%s_w", name);
  RLX_RETURN_IF_ERROR(rlx_graph_add_param(g, n, RLX_F32, ws, 2, &w));
  snprintf(n, sizeof n, "%s_b", name);
  RLX_RETURN_IF_ERROR(rlx_graph_add_param(g, n, RLX_F32, bs, 1, &b));
  return rlx_graph_add_fused_matmul_bias_act(g, x, w, b, 0, 0, RLX_ACT_NONE, out);
}

static rlx_status layer_norm(rlx_graph* g, const char* name, rlx_tensor x, rlx_tensor* out) {
  char n[64];
  rlx_dim s[1] = {TD};
  rlx_tensor gamma, beta;
  snprintf(n, sizeof n, "%s_gamma", name);
  RLX_RETURN_IF_ERROR(rlx_graph_add_param(g, n, RLX_F32, s, 1, &gamma));
  snprintf(n, sizeof n, "%s_beta", name);
  RLX_RETURN_IF_ERROR(rlx_graph_add_param(g, n, RLX_F32, s, 1, &beta));
  return rlx_graph_add_layer_norm(g, x, gamma, beta, 2, 1e-5f, out);
}

/* Pre-LN block: x + proj(causal attention(ln1(x))), then + mlp(ln2(.)). */
static rlx_graph* transformer_graph(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[3] = {TB, TS, TD}, heads[4] = {TB, TS, TH, THD};
  rlx_tensor x, h, q, k, v, a, y;
  TRY(g, rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x));
  TRY(g, layer_norm(g, "ln1", x, &h));
  TRY(g, linear(g, "q", h, TD, TD, &q));
  TRY(g, linear(g, "k", h, TD, TD, &k));
  TRY(g, linear(g, "v", h, TD, TD, &v));
  TRY(g, rlx_graph_add_reshape(g, q, heads, 4, &q));
  TRY(g, rlx_graph_add_reshape(g, k, heads, 4, &k));
  TRY(g, rlx_graph_add_reshape(g, v, heads, 4, &v));
  rlx_attention_desc d = {TH, TH, THD, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0.0f, 0.0f};
  TRY(g, rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &a));
  TRY(g, rlx_graph_add_reshape(g, a, xs, 3, &a));
  TRY(g, linear(g, "proj", a, TD, TD, &a));
  TRY(g, rlx_graph_add_binary(g, RLX_BIN_ADD, x, a, &y));
  TRY(g, layer_norm(g, "ln2", y, &h));
  TRY(g, linear(g, "fc1", h, TD, TF, &h));
  TRY(g, rlx_graph_add_activation(g, RLX_ACT_GELU, h, &h));
  TRY(g, linear(g, "fc2", h, TF, TD, &h));
  TRY(g, rlx_graph_add_binary(g, RLX_BIN_ADD, y, h, &y));
  TRY(g, rlx_graph_set_outputs(g, &y, 1));
  return g;
}

/* ------------------------------------------------------------ running */

static int ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Deterministic data per slot: variances in [0.5, 1.5], gamma near 1,
 * everything else uniform in [-0.5, 0.5] (inputs [-1, 1]). */
static rlx_status fill_slot(rlx_exec* e, const rlx_value_info* info, int is_param) {
  int64_t n = 1;
  for (int32_t d = 0; d < info->rank; d++) n *= info->shape[d];
  float* v = malloc(sizeof(float) * (size_t)n);
  if (!v) return RLX_RESOURCE_EXHAUSTED;
  uint64_t seed = 1469598103934665603ull;
  for (const char* p = info->name; *p; p++) seed = (seed ^ (uint8_t)*p) * 1099511628211ull;
  test_seed(seed);
  if (ends_with(info->name, "_var")) test_fill_f32(v, n, 0.5, 1.5);
  else if (ends_with(info->name, "_gamma")) test_fill_f32(v, n, 0.8, 1.2);
  else test_fill_f32(v, n, is_param ? -0.5 : -1.0, is_param ? 0.5 : 1.0);
  size_t bytes = sizeof(float) * (size_t)n;
  rlx_status s = is_param ? rlx_exec_set_param(e, info->name, RLX_F32, v, bytes)
                          : rlx_exec_set_input(e, info->name, RLX_F32, info->shape, info->rank,
                                               v, bytes);
  free(v);
  return s;
}

/* Compiles g on device at precision p, fills every param and input, runs;
 * NULL (message printed) on failure. */
static rlx_exec* compile_and_run(rlx_graph* g, const char* device, rlx_precision p) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.precision = p;
  rlx_exec* e = test_compile_on(g, device, &o);
  if (!e) return NULL;
  rlx_status s = RLX_OK;
  for (int32_t i = 0; s == RLX_OK && i < rlx_exec_param_count(e); i++) {
    rlx_value_info info;
    s = rlx_exec_get_param(e, i, &info);
    if (s == RLX_OK) s = fill_slot(e, &info, 1);
  }
  for (int32_t i = 0; s == RLX_OK && i < rlx_exec_input_count(e); i++) {
    rlx_value_info info;
    s = rlx_exec_get_input(e, i, &info);
    if (s == RLX_OK) s = fill_slot(e, &info, 0);
  }
  if (s == RLX_OK) s = rlx_exec_run(e);
  if (s != RLX_OK) {
    fprintf(stderr, "%s: %s\n", device, rlx_exec_last_error(e));
    rlx_exec_destroy(e);
    return NULL;
  }
  return e;
}

/* Every input, param and output of e is f32, as in the source graph. */
static int interface_is_f32(const rlx_exec* e) {
  rlx_value_info info;
  for (int32_t i = 0; i < rlx_exec_param_count(e); i++)
    if (rlx_exec_get_param(e, i, &info) != RLX_OK || info.dtype != RLX_F32) return 0;
  for (int32_t i = 0; i < rlx_exec_input_count(e); i++)
    if (rlx_exec_get_input(e, i, &info) != RLX_OK || info.dtype != RLX_F32) return 0;
  for (int32_t i = 0; i < rlx_exec_output_count(e); i++) {
    rlx_dtype dt;
    int32_t rank;
    int64_t shape[RLX_MAX_RANK];
    if (rlx_exec_output_type(e, i, &dt, &rank, shape) != RLX_OK || dt != RLX_F32) return 0;
  }
  return 1;
}

/* How many matmul / conv nodes of e's compiled graph (its Graphviz text)
 * produce `want` (": bf16[" or ": f16["); -1 when one produces anything
 * else, or on error. */
static int heavy_nodes_in(const rlx_exec* e, const char* want, int verbose) {
  char* dot = NULL;
  if (rlx_exec_print_dot(e, "precision", &dot) != RLX_OK) return -1;
  static const char* const heavy[] = {"label=\"matmul", "label=\"fused_matmul", "label=\"conv",
                                      "label=\"dequant_matmul"};
  int count = 0;
  for (char* line = strtok(dot, "\n"); line; line = strtok(NULL, "\n")) {
    int is_heavy = 0;
    for (size_t k = 0; k < sizeof heavy / sizeof heavy[0]; k++) is_heavy |= !!strstr(line, heavy[k]);
    if (!is_heavy) continue;
    if (!strstr(line, want)) {
      if (verbose) fprintf(stderr, "not reduced: %s\n", line);
      count = -1;
      break;
    }
    count++;
  }
  rlx_free(dot);
  return count;
}

typedef rlx_graph* (*model_fn)(void);

/* The model at precision p on dev against f32 on the CPU reference. */
static void check_model(const char* name, model_fn build, rlx_precision p) {
  rlx_graph* g = build();
  CHECK(g != NULL);
  rlx_exec* ref = compile_and_run(g, "cpu", RLX_PRECISION_DEFAULT);
  rlx_exec* got = compile_and_run(g, dev, p);
  int64_t n_ref = 0, n_got = 0;
  double* want = ref ? test_read_output_f64(ref, 0, &n_ref) : NULL;
  double* have = got ? test_read_output_f64(got, 0, &n_got) : NULL;
  double err = want && have && n_ref == n_got ? test_rel_l2(have, want, n_ref) : INFINITY;
  const char* pattern = p == RLX_PRECISION_BF16 ? ": bf16[" : ": f16[";
  int heavy = got ? heavy_nodes_in(got, pattern, 1) : -1;
  int f32_interface = got && interface_is_f32(got);
  printf("  %-12s %-4s on %-6s rel L2 %.3g (tol %.3g), %d matmul/conv nodes reduced\n", name,
         p == RLX_PRECISION_BF16 ? "bf16" : "f16", dev, err, tolerance(p), heavy);
  free(want);
  free(have);
  rlx_exec_destroy(ref);
  rlx_exec_destroy(got);
  rlx_graph_destroy(g);
  CHECK_MSG(err < tolerance(p), "%s: rel L2 %g", name, err);
  /* not exact either: the reduced dtype really was used */
  CHECK_MSG(err > 1e-7, "%s: rel L2 %g: computed in f32?", name, err);
  CHECK(f32_interface);
  CHECK_MSG(heavy > 0, "%s: %d reduced matmul/conv nodes", name, heavy);
}

TEST(mlp_bf16) { check_model("mlp", mlp_graph, RLX_PRECISION_BF16); }
TEST(mlp_f16) { check_model("mlp", mlp_graph, RLX_PRECISION_F16); }
TEST(convnet_bf16) { check_model("convnet", convnet_graph, RLX_PRECISION_BF16); }
TEST(convnet_f16) { check_model("convnet", convnet_graph, RLX_PRECISION_F16); }
TEST(transformer_bf16) { check_model("transformer", transformer_graph, RLX_PRECISION_BF16); }
TEST(transformer_f16) { check_model("transformer", transformer_graph, RLX_PRECISION_F16); }
TEST(quant_mlp_bf16) { check_model("quant mlp", quant_mlp_graph, RLX_PRECISION_BF16); }
TEST(quant_mlp_f16) { check_model("quant mlp", quant_mlp_graph, RLX_PRECISION_F16); }

/* The default precision changes nothing: same numbers as the reference
 * run, no reduced values in the compiled graph. */
TEST(default_precision_is_f32) {
  rlx_graph* g = mlp_graph();
  CHECK(g != NULL);
  rlx_exec* e = compile_and_run(g, dev, RLX_PRECISION_DEFAULT);
  int bf = e ? heavy_nodes_in(e, ": bf16[", 0) : 0;
  int f32 = e ? heavy_nodes_in(e, ": f32[", 1) : 0;
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  CHECK(e != NULL);
  CHECK(bf == -1 && f32 > 0);
}

TEST(bad_precision_is_an_error) {
  rlx_graph* g = mlp_graph();
  CHECK(g != NULL);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  CHECK(o.precision == RLX_PRECISION_DEFAULT);
  o.precision = 7;
  rlx_exec* e = NULL;
  rlx_status s = rlx_compile(g, dev, &o, &e);
  int named = strstr(rlx_graph_last_error(g), "precision") != NULL;
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  CHECK(s == RLX_INVALID_ARGUMENT && e == NULL);
  CHECK(named);
}

/* ------------------------------------------------------------ the pass's rules */

static const rlx_node* producer_of(const rlx_graph* g, rlx_tensor v) {
  return &g->nodes[g->values[v].node];
}

/* i32 positions -> cast f32 -> * 0.5 (index arithmetic: stays f32) -> + x
 * (an activation: reduced); a param * 0.5 (parameter preprocessing: stays
 * f32, cast where x * it reads it); argmax (kept f32) of the sum; a Cast to
 * i32 written in the model keeps its dtype. */
TEST(pass_rules) {
  rlx_graph *g = NULL, *lo = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim s[1] = {8};
  rlx_tensor pos, x, w, half, p, y, am, yi, z, outs[4];
  float h = 0.5f;
  int ok = rlx_graph_add_input(g, "pos", RLX_I32, s, 1, &pos) == RLX_OK &&
           rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x) == RLX_OK &&
           rlx_graph_add_param(g, "w", RLX_F32, s, 1, &w) == RLX_OK &&
           rlx_graph_add_constant(g, RLX_F32, NULL, 0, &h, sizeof h, &half) == RLX_OK &&
           rlx_graph_add_cast(g, pos, RLX_F32, &p) == RLX_OK &&
           rlx_graph_add_binary(g, RLX_BIN_MUL, p, half, &p) == RLX_OK &&
           rlx_graph_add_binary(g, RLX_BIN_ADD, p, x, &y) == RLX_OK &&
           rlx_graph_add_argmax(g, y, 0, 0, &am) == RLX_OK &&
           rlx_graph_add_cast(g, y, RLX_I32, &yi) == RLX_OK &&
           rlx_graph_add_binary(g, RLX_BIN_MUL, w, half, &w) == RLX_OK &&
           rlx_graph_add_binary(g, RLX_BIN_MUL, x, w, &z) == RLX_OK;
  outs[0] = y, outs[1] = am, outs[2] = yi, outs[3] = z;
  ok = ok && rlx_graph_set_outputs(g, outs, 4) == RLX_OK;
  int32_t lowered = 0;
  ok = ok && rlx_lower_precision(g, RLX_BF16, &lo, &lowered) == RLX_OK;
  CHECK_MSG(ok, "%s", rlx_graph_last_error(g));
  int mul_f32 = 0, mul_bf16 = 0, add_bf16 = 0, argmax_f32 = 0, w_cast = 0;
  for (int32_t i = 0; i < lo->n_nodes; i++) {
    const rlx_node* n = &lo->nodes[i];
    rlx_dtype out = lo->values[n->out[0]].type.dtype;
    rlx_dtype in0 = n->n_in ? lo->values[n->in[0]].type.dtype : out;
    if (n->op == RLX_OP_BINARY && n->a.kind == RLX_BIN_MUL) {
      mul_f32 += out == RLX_F32;
      mul_bf16 += out == RLX_BF16;
      /* x * w: w's f32 product cast to bf16 */
      if (out == RLX_BF16) w_cast = producer_of(lo, n->in[1])->op == RLX_OP_CAST;
    }
    if (n->op == RLX_OP_BINARY && n->a.kind == RLX_BIN_ADD) add_bf16 = out == RLX_BF16;
    if (n->op == RLX_OP_ARGMAX) argmax_f32 = in0 == RLX_F32;
  }
  /* outputs: f32 (cast back), i64, i32 as declared */
  rlx_dtype o0 = lo->values[lo->outputs[0]].type.dtype, o1 = lo->values[lo->outputs[1]].type.dtype;
  rlx_dtype o2 = lo->values[lo->outputs[2]].type.dtype;
  int out0_cast = producer_of(lo, lo->outputs[0])->op == RLX_OP_CAST;
  rlx_graph_destroy(lo);
  rlx_graph_destroy(g);
  CHECK(mul_f32 == 2 && mul_bf16 == 1 && w_cast);
  CHECK(add_bf16 && argmax_f32);
  CHECK(o0 == RLX_F32 && out0_cast && o1 == RLX_I64 && o2 == RLX_I32);
  CHECK(lowered == 2); /* the add and x * w */
}

/* An f32 constant read by a reduced node is converted at compile time
 * (no Cast of it at run time); an f16 graph is left alone. */
TEST(pass_constants_and_other_floats) {
  rlx_graph *g = NULL, *lo = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim s[1] = {4};
  float c[4] = {1.0f, 1.0f / 3, 3.0e38f, -2.5f};
  rlx_tensor x, k, y, xh, yh, outs[2];
  int ok = rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x) == RLX_OK &&
           rlx_graph_add_input(g, "xh", RLX_F16, s, 1, &xh) == RLX_OK &&
           rlx_graph_add_constant(g, RLX_F32, s, 1, c, sizeof c, &k) == RLX_OK &&
           rlx_graph_add_binary(g, RLX_BIN_MUL, x, k, &y) == RLX_OK &&
           rlx_graph_add_activation(g, RLX_ACT_EXP, xh, &yh) == RLX_OK;
  outs[0] = y, outs[1] = yh;
  ok = ok && rlx_graph_set_outputs(g, outs, 2) == RLX_OK &&
       rlx_lower_precision(g, RLX_F16, &lo, NULL) == RLX_OK;
  CHECK_MSG(ok, "%s", rlx_graph_last_error(g));
  const rlx_node* mul = NULL;
  const rlx_node* exp_node = NULL;
  for (int32_t i = 0; i < lo->n_nodes; i++) {
    if (lo->nodes[i].op == RLX_OP_BINARY) mul = &lo->nodes[i];
    if (lo->nodes[i].op == RLX_OP_ACTIVATION) exp_node = &lo->nodes[i];
  }
  int const_f16 = 0, converted = 0, exp_f16_input = 0;
  if (mul && exp_node) {
    const rlx_node* kn = producer_of(lo, mul->in[1]);
    const_f16 = kn->op == RLX_OP_CONSTANT && kn->a.type.dtype == RLX_F16;
    const uint16_t* h = const_f16 ? kn->a.data : NULL;
    /* 1/3 rounded once to f16 (0.33325195), 3e38 beyond f16's range: inf */
    converted = h && rlx_f16_to_f32(h[1]) == 0.33325195f && isinf(rlx_f16_to_f32(h[2])) &&
                rlx_f16_to_f32(h[3]) == -2.5f;
    exp_f16_input = producer_of(lo, exp_node->in[0])->op == RLX_OP_INPUT;
  }
  rlx_graph_destroy(lo);
  rlx_graph_destroy(g);
  CHECK(mul && exp_node);
  CHECK(const_f16);
  CHECK(converted);
  CHECK(exp_f16_input);
}

/* ------------------------------------------------------------ main */

static int device_available(const char* name) {
  if (strcmp(name, "cpu") == 0) return 1;
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) != RLX_OK || strcmp(info.name, name) != 0) continue;
    if (!info.available) printf("SKIP %s (%s)\n", name, info.detail);
    return info.available ? 1 : 0;
  }
  printf("FAIL no device named '%s'\n", name);
  return -1;
}

/* A training step in bf16: two params (inputs, as the trainer makes them)
 * read by matmuls, their gradients, one AdamUpdate each. The updates read
 * the bf16 gradients with no cast (param and state stay f32), and the two
 * params' casts to bf16 come first, next to each other, before any matmul
 * (so CUDA runs them as one launch). */
TEST(pass_training_casts) {
  rlx_graph *g = NULL, *lo = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim xs[2] = {2, 4}, ws[2] = {4, 4}, hs[1] = {RLX_HYPER_COUNT};
  rlx_tensor x, w[2], m[2], v[2], hyper, y1, y2, xt, y1t, gw[2], outs[6];
  int ok = rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x) == RLX_OK &&
           rlx_graph_add_input(g, "hyper", RLX_F32, hs, 1, &hyper) == RLX_OK;
  const char* names[2][3] = {{"w0", "w0.m", "w0.v"}, {"w1", "w1.m", "w1.v"}};
  for (int k = 0; k < 2; k++)
    ok = ok && rlx_graph_add_input(g, names[k][0], RLX_F32, ws, 2, &w[k]) == RLX_OK &&
         rlx_graph_add_input(g, names[k][1], RLX_F32, ws, 2, &m[k]) == RLX_OK &&
         rlx_graph_add_input(g, names[k][2], RLX_F32, ws, 2, &v[k]) == RLX_OK;
  int32_t perm[2] = {1, 0};
  ok = ok && rlx_graph_add_matmul(g, x, w[0], 0, 0, &y1) == RLX_OK &&
       rlx_graph_add_matmul(g, y1, w[1], 0, 0, &y2) == RLX_OK &&
       rlx_graph_add_transpose(g, x, perm, 2, &xt) == RLX_OK &&
       rlx_graph_add_transpose(g, y1, perm, 2, &y1t) == RLX_OK &&
       rlx_graph_add_matmul(g, xt, y1, 0, 0, &gw[0]) == RLX_OK &&
       rlx_graph_add_matmul(g, y1t, y2, 0, 0, &gw[1]) == RLX_OK;
  rlx_adam_desc d = {0.9f, 0.999f, 1e-8f, 0.01f, 1};
  for (int k = 0; k < 2; k++)
    ok = ok && rlx_graph_add_adam_update(g, w[k], gw[k], m[k], v[k], hyper, &d, &outs[3 * k],
                                         &outs[3 * k + 1], &outs[3 * k + 2]) == RLX_OK;
  ok = ok && rlx_graph_set_outputs(g, outs, 6) == RLX_OK;
  ok = ok && rlx_lower_precision(g, RLX_BF16, &lo, NULL) == RLX_OK;
  CHECK_MSG(ok, "%s", rlx_graph_last_error(g));
  if (!lo) {
    rlx_graph_destroy(g);
    return;
  }
  int32_t first_matmul = -1, param_casts[2] = {-1, -1}, updates = 0, half_grads = 0;
  for (int32_t i = 0; i < lo->n_nodes; i++) {
    const rlx_node* n = &lo->nodes[i];
    if (n->op == RLX_OP_MATMUL && first_matmul < 0) first_matmul = i;
    if (n->op == RLX_OP_CAST && producer_of(lo, n->in[0])->op == RLX_OP_INPUT)
      for (int k = 0; k < 2; k++)
        if (!strcmp(producer_of(lo, n->in[0])->a.name, names[k][0])) param_casts[k] = i;
    if (n->op != RLX_OP_ADAM_UPDATE) continue;
    updates++;
    half_grads += lo->values[n->in[1]].type.dtype == RLX_BF16 &&
                  producer_of(lo, n->in[1])->op == RLX_OP_MATMUL &&
                  lo->values[n->in[0]].type.dtype == RLX_F32 &&
                  lo->values[n->in[2]].type.dtype == RLX_F32;
  }
  rlx_graph_destroy(lo);
  rlx_graph_destroy(g);
  CHECK(updates == 2 && half_grads == 2);
  CHECK(param_casts[0] >= 0 && param_casts[1] == param_casts[0] + 1);
  CHECK(first_matmul > param_casts[1]);
}

/* The cross-entropy backward of bf16 logits reads them as they are (no
 * cast) with its f32 d_loss and yields bf16 d_logits; the forward still
 * reads f32 logits (its loss takes their dtype). The shape rule takes an
 * f32 d_loss beside half logits and refuses an f16 one beside f32. */
TEST(pass_cross_entropy_backward) {
  rlx_graph *g = NULL, *lo = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim xs[2] = {4, 8}, ws[2] = {8, 10}, ts[1] = {4};
  rlx_tensor x, w, t, seed, logits, loss, dx, outs[2], bad;
  int ok = rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x) == RLX_OK &&
           rlx_graph_add_input(g, "w", RLX_F32, ws, 2, &w) == RLX_OK &&
           rlx_graph_add_input(g, "t", RLX_I32, ts, 1, &t) == RLX_OK &&
           rlx_graph_add_input(g, "seed", RLX_F32, NULL, 0, &seed) == RLX_OK &&
           rlx_graph_add_matmul(g, x, w, 0, 0, &logits) == RLX_OK &&
           rlx_graph_add_cross_entropy(g, logits, t, -100, 0.0f, &loss) == RLX_OK &&
           rlx_graph_add_cross_entropy_backward(g, logits, t, seed, -100, 0.0f, &dx) == RLX_OK;
  outs[0] = loss, outs[1] = dx;
  ok = ok && rlx_graph_set_outputs(g, outs, 2) == RLX_OK;
  ok = ok && rlx_lower_precision(g, RLX_BF16, &lo, NULL) == RLX_OK;
  CHECK_MSG(ok, "%s", rlx_graph_last_error(g));
  int backward_half = 0, forward_f32 = 0;
  for (int32_t i = 0; lo && i < lo->n_nodes; i++) {
    const rlx_node* n = &lo->nodes[i];
    rlx_dtype in0 = n->n_in ? lo->values[n->in[0]].type.dtype : RLX_F32;
    if (n->op == RLX_OP_CROSS_ENTROPY_BACKWARD)
      backward_half = in0 == RLX_BF16 && producer_of(lo, n->in[0])->op == RLX_OP_MATMUL &&
                      lo->values[n->in[2]].type.dtype == RLX_F32 &&
                      lo->values[n->out[0]].type.dtype == RLX_BF16;
    if (n->op == RLX_OP_CROSS_ENTROPY) forward_f32 = in0 == RLX_F32;
  }
  rlx_graph_destroy(lo);
  CHECK(backward_half && forward_f32);
  rlx_tensor xh, d16;
  CHECK(rlx_graph_add_cast(g, seed, RLX_F16, &d16) == RLX_OK);
  CHECK(rlx_graph_add_cast(g, logits, RLX_BF16, &xh) == RLX_OK);
  CHECK(rlx_graph_add_cross_entropy_backward(g, xh, t, seed, -100, 0.0f, &bad) == RLX_OK);
  CHECK(rlx_graph_add_cross_entropy_backward(g, logits, t, d16, -100, 0.0f, &bad) != RLX_OK);
  CHECK(strstr(rlx_graph_last_error(g), "d_loss") != NULL);
  rlx_graph_destroy(g);
}

int main(int argc, char** argv) {
  if (argc > 1) dev = argv[1];
  int avail = device_available(dev);
  if (avail < 0) return 1;
  if (avail == 0) return 77;
  RUN(mlp_bf16);
  RUN(mlp_f16);
  RUN(convnet_bf16);
  RUN(convnet_f16);
  RUN(transformer_bf16);
  RUN(transformer_f16);
  RUN(quant_mlp_bf16);
  RUN(quant_mlp_f16);
  RUN(default_precision_is_f32);
  RUN(bad_precision_is_an_error);
  RUN(pass_rules);
  RUN(pass_constants_and_other_floats);
  RUN(pass_training_casts);
  RUN(pass_cross_entropy_backward);
  return test_summary();
}
