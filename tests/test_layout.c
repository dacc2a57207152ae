/* The channels-last layout pass (src/passes/layout.c, compile option
 * channels_last): small convolution networks built NCHW give the same
 * outputs compiled with and without the option on every device asked for
 * (default: cpu, plus vulkan and cuda where available; `test_layout
 * webgpu` for WebGPU), and the rewritten graph has the expected number of
 * activation Transposes, no channels-first Conv and channels-last Pools.
 * Also: the channels_last_ohwi conv layout and channels-last Pool directly
 * against their NCHW forms, and their text round trip. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/graph.h"
#include "passes/bn_fold.h"
#include "passes/layout.h"

enum { N = 2, C = 4, H = 9, W = 7 };

static rlx_tensor constant(rlx_graph* g, const rlx_dim* shape, int rank, double lo, double hi) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  float* v = malloc(sizeof(float) * (size_t)n + 1);
  test_fill_f32(v, n, lo, hi);
  rlx_tensor t = RLX_NONE;
  if (v) rlx_graph_add_constant(g, RLX_F32, shape, rank, v, sizeof(float) * (size_t)n, &t);
  free(v);
  return t; /* RLX_NONE on failure: the node using it fails */
}

/* A k x k conv (pad k/2, stride s) of x to oc channels, with a bias. */
static rlx_tensor conv(rlx_graph* g, rlx_tensor x, int64_t oc, int64_t k, int64_t s,
                       int32_t groups, rlx_tensor residual) {
  const rlx_type* t = rlx_tensor_type(g, x);
  rlx_dim ws[4] = {oc, t->shape[1] / groups, k, k}, bs[1] = {oc};
  int64_t pads[4] = {k / 2, k / 2, k / 2, k / 2}, st[2] = {s, s};
  rlx_tensor w = constant(g, ws, 4, -0.5, 0.5), b = constant(g, bs, 1, -0.5, 0.5), y = RLX_NONE;
  rlx_graph_add_conv(g, x, w, b, residual, 2, st, pads, NULL, groups, RLX_ACT_NONE,
                     RLX_CONV_CHANNELS_FIRST, &y);
  return y;
}

static rlx_tensor relu(rlx_graph* g, rlx_tensor x) {
  rlx_tensor y = RLX_NONE;
  rlx_graph_add_activation(g, RLX_ACT_RELU, x, &y);
  return y;
}

static rlx_tensor binary(rlx_graph* g, rlx_binary_op op, rlx_tensor a, rlx_tensor b) {
  rlx_tensor y = RLX_NONE;
  rlx_graph_add_binary(g, op, a, b, &y);
  return y;
}

/* ---- the networks: each returns its graph's input x [N, C, H, W] set up */

/* conv -> relu -> maxpool 3x3/2 -> conv 1x1 -> avgpool 2x2 (ceil) */
static void net_conv_relu_pool(rlx_graph* g, rlx_tensor x) {
  rlx_tensor y = relu(g, conv(g, x, 8, 3, 1, 1, RLX_NONE)), p, q;
  int64_t k[2] = {3, 3}, s[2] = {2, 2}, pads[4] = {1, 1, 1, 1}, k2[2] = {2, 2};
  rlx_graph_add_pool(g, y, RLX_POOL_MAX, 2, k, s, pads, NULL, 0, 0, &p);
  rlx_graph_add_pool(g, conv(g, p, 6, 1, 1, 1, RLX_NONE), RLX_POOL_AVG, 2, k2, k2, NULL, NULL,
                     1, 0, &q);
  rlx_graph_set_outputs(g, &q, 1);
}

/* Two residual blocks: relu(conv(relu(conv(x))) + x), the second with a
 * strided projection shortcut; the Add and ReLU are separate nodes. */
static void net_residual(rlx_graph* g, rlx_tensor x) {
  rlx_tensor a = relu(g, conv(g, x, C, 3, 1, 1, RLX_NONE));
  rlx_tensor b = relu(g, binary(g, RLX_BIN_ADD, conv(g, a, C, 3, 1, 1, RLX_NONE), x));
  rlx_tensor c = relu(g, conv(g, b, 8, 3, 2, 1, RLX_NONE));
  rlx_tensor d = relu(g, binary(g, RLX_BIN_ADD, conv(g, b, 8, 1, 2, 1, RLX_NONE),
                                conv(g, c, 8, 3, 1, 1, RLX_NONE)));
  rlx_graph_set_outputs(g, &d, 1);
}

/* Depthwise conv, per-channel scale [1, C, 1, 1] and shift [C, 1, 1], a
 * scalar clamp-like tail (min with 6 as a one-element tensor), pointwise. */
static void net_depthwise(rlx_graph* g, rlx_tensor x) {
  rlx_dim s4[4] = {1, C, 1, 1}, s3[3] = {C, 1, 1}, one[1] = {1};
  rlx_tensor y = conv(g, x, C, 3, 1, C, RLX_NONE);
  y = binary(g, RLX_BIN_MUL, y, constant(g, s4, 4, 0.5, 2));
  y = binary(g, RLX_BIN_ADD, constant(g, s3, 3, -1, 1), y);
  y = binary(g, RLX_BIN_MIN, relu(g, y), constant(g, one, 1, 0.5, 0.6));
  y = conv(g, y, 2 * C, 1, 1, 1, RLX_NONE);
  y = binary(g, RLX_BIN_SUB, y, constant(g, one, 0, 0.1, 0.2)); /* rank-0 scalar */
  rlx_graph_set_outputs(g, &y, 1);
}

/* conv -> relu -> global average pool (Pool) -> flatten -> gemm, and the
 * same head through ReduceMean over H, W without keep_dim. */
static void net_gap_head(rlx_graph* g, rlx_tensor x) {
  rlx_tensor y = relu(g, conv(g, x, 8, 3, 2, 1, RLX_NONE)), p, f, o[2], m;
  const rlx_type* t = rlx_tensor_type(g, y);
  int64_t k[2] = {t->shape[2], t->shape[3]};
  rlx_graph_add_pool(g, y, RLX_POOL_AVG, 2, k, NULL, NULL, NULL, 0, 0, &p);
  rlx_dim fs[2] = {N, 8}, ws[2] = {8, 5}, bs[1] = {5};
  rlx_graph_add_reshape(g, p, fs, 2, &f);
  rlx_tensor w = constant(g, ws, 2, -1, 1), b = constant(g, bs, 1, -1, 1);
  rlx_graph_add_fused_matmul_bias_act(g, f, w, b, 0, 0, RLX_ACT_NONE, &o[0]);
  int32_t axes[2] = {2, 3};
  rlx_graph_add_reduce(g, RLX_RED_MEAN, y, axes, 2, 0, &m);
  rlx_graph_add_matmul(g, m, w, 0, 0, &o[1]);
  rlx_graph_set_outputs(g, o, 2);
}

/* A conv whose output is also a graph output and feeds a softmax over the
 * channels (a consumer that needs NCHW). */
static void net_exported_conv(rlx_graph* g, rlx_tensor x) {
  rlx_tensor a = conv(g, x, 6, 3, 1, 1, RLX_NONE), o[3];
  o[0] = a;
  o[1] = relu(g, conv(g, relu(g, a), 6, 3, 1, 1, RLX_NONE));
  rlx_graph_add_softmax(g, a, 1, &o[2]);
  rlx_graph_set_outputs(g, o, 3);
}

/* ConvTranspose (stride 2, output padding 1) -> relu -> conv */
static void net_conv_transpose(rlx_graph* g, rlx_tensor x) {
  rlx_dim ws[4] = {C, 3, 3, 3}, bs[1] = {3};
  int64_t st[2] = {2, 2}, pads[4] = {1, 1, 1, 1}, op[2] = {1, 1};
  rlx_tensor y;
  rlx_graph_add_conv_transpose(g, x, constant(g, ws, 4, -0.5, 0.5), constant(g, bs, 1, -1, 1),
                               RLX_NONE, 2, st, pads, NULL, op, 1, RLX_ACT_NONE,
                               RLX_CONV_CHANNELS_FIRST, &y);
  y = conv(g, relu(g, y), 4, 3, 1, 1, RLX_NONE);
  rlx_graph_set_outputs(g, &y, 1);
}

/* Squeeze-and-excitation: y * sigmoid(conv(relu(conv(avgpool(y))))) (a
 * carried [N, C, 1, 1] broadcast over a carried [N, C, H, W]), plus the
 * channel mean of x ([N, 1, H, W], not carried: reshaped in). */
static void net_squeeze_excite(rlx_graph* g, rlx_tensor x) {
  rlx_tensor y = relu(g, conv(g, x, 8, 3, 1, 1, RLX_NONE)), p, s, m;
  int64_t k[2] = {H, W};
  rlx_graph_add_pool(g, y, RLX_POOL_AVG, 2, k, NULL, NULL, NULL, 0, 0, &p);
  s = conv(g, relu(g, conv(g, p, 2, 1, 1, 1, RLX_NONE)), 8, 1, 1, 1, RLX_NONE);
  rlx_graph_add_activation(g, RLX_ACT_SIGMOID, s, &s);
  int32_t axes[1] = {1};
  rlx_graph_add_reduce(g, RLX_RED_MEAN, x, axes, 1, 1, &m);
  y = binary(g, RLX_BIN_ADD, binary(g, RLX_BIN_MUL, y, s), m);
  rlx_graph_set_outputs(g, &y, 1);
}

typedef struct net {
  const char* name;
  void (*build)(rlx_graph* g, rlx_tensor x);
  int transposes; /* activation Transposes the pass inserts */
} net;

static const net nets[] = {
    {"conv_relu_pool", net_conv_relu_pool, 2},
    {"residual", net_residual, 2},
    {"depthwise", net_depthwise, 2},
    {"gap_head", net_gap_head, 1}, /* in; out through Reshapes ([N, 1, 1, C]) */
    {"exported_conv", net_exported_conv, 3},
    {"conv_transpose", net_conv_transpose, 2},
    {"squeeze_excite", net_squeeze_excite, 2},
};

static rlx_graph* build_net(const net* t) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[4] = {N, C, H, W};
  rlx_tensor x;
  test_seed(7);
  if (rlx_graph_add_input(g, "x", RLX_F32, xs, 4, &x) == RLX_OK) t->build(g, x);
  if (g->n_outputs == 0) { /* a builder call failed: its message is on g */
    fprintf(stderr, "%s: %s\n", t->name, rlx_graph_last_error(g));
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

/* The rewritten graph: the expected activation Transposes, one weight
 * Transpose per Conv, no channels-first conv or pool left. */
TEST(pass_structure) {
  for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
    rlx_graph* g = build_net(&nets[i]);
    CHECK_MSG(g, "%s", nets[i].name);
    rlx_graph* out = NULL;
    int32_t tr = -1;
    CHECK_OK_G(g, rlx_layout_channels_last(g, &out, &tr));
    int convs = count_op(g, RLX_OP_CONV), first = 0;
    for (int32_t k = 0; k < out->n_nodes; k++) {
      const rlx_node* n = &out->nodes[k];
      int conv_like = n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_TRANSPOSE || n->op == RLX_OP_POOL;
      first += conv_like && n->a.conv_layout == RLX_CONV_CHANNELS_FIRST;
    }
    int transposes = count_op(out, RLX_OP_TRANSPOSE);
    CHECK_MSG(tr == nets[i].transposes && transposes == tr + convs && first == 0 &&
                  out->n_outputs == g->n_outputs,
              "%s: %d activation transposes (want %d), %d in all (want %d), %d channels-first left",
              nets[i].name, (int)tr, nets[i].transposes, transposes, nets[i].transposes + convs,
              first);
    for (int32_t o = 0; o < g->n_outputs; o++)
      CHECK(rlx_type_equal(rlx_tensor_type(g, g->outputs[o]), rlx_tensor_type(out, out->outputs[o])));
    rlx_graph_destroy(out);
    rlx_graph_destroy(g);
  }
}

/* Every output of net t on device, compiled with channels_last = cl. */
static double* run_net(const net* t, const char* device, int cl, int reference, int32_t out_i,
                       int64_t* n) {
  rlx_graph* g = build_net(t);
  if (!g) return NULL;
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.channels_last = cl;
  o.reference = reference;
  rlx_exec* e = test_compile_on(g, device, &o);
  rlx_graph_destroy(g);
  if (!e) return NULL;
  float x[N * C * H * W];
  test_seed(99);
  test_fill_f32(x, N * C * H * W, -2, 2);
  rlx_dim xs[4] = {N, C, H, W};
  double* out = NULL;
  if (rlx_exec_set_input(e, "x", RLX_F32, xs, 4, x, sizeof x) == RLX_OK && rlx_exec_run(e) == RLX_OK)
    out = test_read_output_f64(e, out_i, n);
  else
    fprintf(stderr, "%s on %s: %s\n", t->name, device, rlx_exec_last_error(e));
  rlx_exec_destroy(e);
  return out;
}

static int device_available(const char* name) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info d;
    if (rlx_device_get(i, &d) == RLX_OK && strcmp(d.name, name) == 0) return d.available;
  }
  return 0;
}

static const char* devices[8];
static int n_devices;

/* Each net's outputs with the option equal those without it (the CPU
 * reference without it is the oracle), on every device. */
TEST(same_outputs) {
  for (int d = 0; d < n_devices; d++) {
    const char* dev = devices[d];
    double tol = strcmp(dev, "cpu") == 0 ? 1e-5 : 1e-4; /* GPU f32 sums, TF32 off */
    for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
      rlx_graph* g = build_net(&nets[i]);
      CHECK(g);
      int32_t outs = g->n_outputs;
      rlx_graph_destroy(g);
      for (int32_t o = 0; o < outs; o++) {
        for (int ref = 0; ref < (strcmp(dev, "cpu") == 0 ? 2 : 1); ref++) {
          int64_t n1 = 0, n2 = 0;
          double* want = run_net(&nets[i], "cpu", 0, 1, o, &n1);
          double* got = run_net(&nets[i], dev, 1, ref, o, &n2);
          int ok = want && got && n1 == n2 && n1 > 0;
          double err = ok ? test_rel_l2(got, want, n1) : -1;
          free(want);
          free(got);
          CHECK_MSG(ok && err <= tol, "%s output %d on %s%s: rel err %g (n %lld vs %lld)",
                    nets[i].name, (int)o, dev, ref ? " (reference)" : "", err, (long long)n2,
                    (long long)n1);
        }
      }
    }
    printf("  %s: %zu nets match\n", dev, sizeof nets / sizeof nets[0]);
  }
}

/* The channels_last_ohwi Conv and a channels-last Pool, parsed from text,
 * against the NCHW conv / pool of the same data (Transposes around it):
 * also checks the text round trip of both. */
TEST(ohwi_conv_and_pool_text) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim xs[4] = {2, 6, 5, 3}, ws[4] = {4, 3, 2, 3}; /* x NHWC, w OHWI (k 3x2) */
  rlx_tensor x, y, p, outs[2];
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_F32, xs, 4, &x));
  test_seed(3);
  rlx_tensor w = constant(g, ws, 4, -1, 1);
  int64_t pads[4] = {1, 0, 1, 1}, st[2] = {1, 2}, k[2] = {2, 3}, pst[2] = {1, 1};
  CHECK_OK_G(g, rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 2, st, pads, NULL, 1,
                                   RLX_ACT_RELU, RLX_CONV_CHANNELS_LAST_OHWI, &y));
  const rlx_type* yt = rlx_tensor_type(g, y);
  CHECK(yt->rank == 4 && yt->shape[3] == 4);
  CHECK_OK_G(g, rlx_graph_add_pool(g, y, RLX_POOL_MAX, 2, k, pst, NULL, NULL, 0, 0, &p));
  /* the pool as built is channels-first; make it channels-last through the
   * text format (as the pass's graphs print) */
  char* printed = NULL;
  outs[0] = y;
  outs[1] = p;
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  CHECK_OK_G(g, rlx_graph_print(g, &printed));
  rlx_graph_destroy(g);
  CHECK(printed && strstr(printed, "conv_layout=channels_last_ohwi"));
  char* at = strstr(printed, "pool(");
  char* lay = at ? strstr(at, "conv_layout=channels_first") : NULL;
  CHECK(lay);
  char* type = strstr(lay, ": f32[2,6,2,2]"); /* the channels-first shape printed */
  CHECK(type);
  memcpy(type, ": f32[2,5,1,4]", strlen(": f32[2,5,1,4]"));
  size_t len = strlen(printed);
  char* edited = malloc(len + 8);
  CHECK(edited);
  size_t head = (size_t)(lay - printed) + strlen("conv_layout=");
  memcpy(edited, printed, head);
  strcpy(edited + head, "channels_last");
  strcat(edited, lay + strlen("conv_layout=channels_first"));
  rlx_free(printed);
  rlx_graph* h = NULL;
  char* perr = NULL;
  rlx_status ps = rlx_graph_parse(edited, &h, &perr);
  CHECK_MSG(ps == RLX_OK, "%s\n%s", perr ? perr : "", edited);
  free(edited);
  /* pool [2, 6, 3, 4] with window 2x3 over (H, W) channels-last: [2, 5, 1, 4] */
  const rlx_type* pt = rlx_tensor_type(h, h->outputs[1]);
  CHECK_MSG(pt->shape[0] == 2 && pt->shape[1] == 5 && pt->shape[2] == 1 && pt->shape[3] == 4,
            "pool shape [%lld,%lld,%lld,%lld]", (long long)pt->shape[0], (long long)pt->shape[1],
            (long long)pt->shape[2], (long long)pt->shape[3]);
  /* the oracle: the same conv and pool channels-first between Transposes */
  rlx_graph* r = NULL;
  CHECK(rlx_graph_create(&r) == RLX_OK);
  rlx_tensor rx, rw, ry, rp, ro[2];
  int32_t to_first[4] = {0, 3, 1, 2}, to_last[4] = {0, 2, 3, 1};
  CHECK_OK_G(r, rlx_graph_add_input(r, "x", RLX_F32, xs, 4, &rx));
  test_seed(3);
  rw = constant(r, ws, 4, -1, 1);
  CHECK_OK_G(r, rlx_graph_add_transpose(r, rx, to_first, 4, &rx));
  CHECK_OK_G(r, rlx_graph_add_transpose(r, rw, to_first, 4, &rw));
  CHECK_OK_G(r, rlx_graph_add_conv(r, rx, rw, RLX_NONE, RLX_NONE, 2, st, pads, NULL, 1,
                                   RLX_ACT_RELU, RLX_CONV_CHANNELS_FIRST, &ry));
  CHECK_OK_G(r, rlx_graph_add_pool(r, ry, RLX_POOL_MAX, 2, k, pst, NULL, NULL, 0, 0, &rp));
  CHECK_OK_G(r, rlx_graph_add_transpose(r, ry, to_last, 4, &ro[0]));
  CHECK_OK_G(r, rlx_graph_add_transpose(r, rp, to_last, 4, &ro[1]));
  CHECK_OK_G(r, rlx_graph_set_outputs(r, ro, 2));
  for (int d = 0; d < n_devices; d++) {
    rlx_exec* a = test_compile_on(h, devices[d], NULL);
    rlx_exec* b = test_compile_on(r, "cpu", NULL);
    CHECK(a && b);
    float xv[2 * 6 * 5 * 3];
    test_fill_f32(xv, 2 * 6 * 5 * 3, -1, 1);
    CHECK_OK_E(a, rlx_exec_set_input(a, "x", RLX_F32, xs, 4, xv, sizeof xv));
    CHECK_OK_E(b, rlx_exec_set_input(b, "x", RLX_F32, xs, 4, xv, sizeof xv));
    CHECK_OK_E(a, rlx_exec_run(a));
    CHECK_OK_E(b, rlx_exec_run(b));
    int ok = test_outputs_match(a, b, 0, 1e-5) && test_outputs_match(a, b, 1, 1e-5);
    rlx_exec_destroy(a);
    rlx_exec_destroy(b);
    CHECK_MSG(ok, "ohwi conv / channels-last pool on %s", devices[d]);
  }
  rlx_graph_destroy(h);
  rlx_graph_destroy(r);
}

/* Layouts the shape rules refuse. */
TEST(bad_layouts) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim xs[4] = {1, 5, 5, 2}, ws[4] = {2, 2, 3, 3};
  rlx_tensor x, w, y;
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_F32, xs, 4, &x));
  w = constant(g, ws, 4, -1, 1);
  CHECK(rlx_graph_add_conv_transpose(g, x, w, RLX_NONE, RLX_NONE, 2, NULL, NULL, NULL, NULL, 1,
                                     RLX_ACT_NONE, RLX_CONV_CHANNELS_LAST_OHWI, &y) != RLX_OK);
  CHECK(strstr(rlx_graph_last_error(g), "channels_last_ohwi"));
  CHECK(rlx_graph_add_conv(g, x, w, RLX_NONE, RLX_NONE, 2, NULL, NULL, NULL, 1, RLX_ACT_NONE,
                           (rlx_conv_layout)3, &y) != RLX_OK);
  rlx_graph_destroy(g);
}

TEST(null_arguments) {
  rlx_graph* out = NULL;
  CHECK(rlx_layout_channels_last(NULL, &out, NULL) == RLX_INVALID_ARGUMENT);
}

/* argv: devices to run (default: cpu, and vulkan, cuda where available). */
int main(int argc, char** argv) {
  if (argc > 1) {
    for (int i = 1; i < argc && n_devices < 8; i++) {
      if (!device_available(argv[i])) {
        printf("SKIP %s: not available\n", argv[i]);
        return 77;
      }
      devices[n_devices++] = argv[i];
    }
  } else {
    devices[n_devices++] = "cpu";
    if (device_available("vulkan")) devices[n_devices++] = "vulkan";
    if (device_available("cuda")) devices[n_devices++] = "cuda";
  }
  RUN(pass_structure);
  RUN(same_outputs);
  RUN(ohwi_conv_and_pool_text);
  RUN(bad_layouts);
  RUN(null_arguments);
  return test_summary();
}
