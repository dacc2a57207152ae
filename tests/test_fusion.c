/* Elementwise fusion (src/passes/fuse_elementwise.c) and the
 * ElementwiseRegion op (src/ir/region.h):
 *  - the pass's structure on small graphs: what joins a region and what must
 *    not (an intermediate read outside, a graph output inside the chain, a
 *    different shape), immediates, the 32-instruction / 16-input limits;
 *  - graphs with chains (a GELU derivative as autodiff writes it, bias +
 *    residual, broadcast scalars and rows, mixed dtypes through casts)
 *    compiled with and without fusion (RLX_NO_FUSION) on every device asked
 *    for: the same bits on the CPU (fast paths and reference), within the
 *    dtype's tolerance elsewhere; fused counts in the dispatch report;
 *  - the program validator: every malformed program refused with a message,
 *    and byte-level mutations of a valid one refused or run safely;
 *  - the fused graph's text round trip.
 * argv: devices (default: cpu, and vulkan, cuda where available). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "backends/cuda/cuda_nvrtc.h"
#include "ir/graph.h"
#include "ir/region.h"
#include "passes/fuse_elementwise.h"
#include "passes/lower.h"
#include "runtime/executable.h"

static const char* devices[8];
static int n_devices;

/* ------------------------------------------------------------ graph helpers */

static rlx_tensor input(rlx_graph* g, const char* name, rlx_dtype t, const rlx_dim* s, int r) {
  rlx_tensor x = RLX_NONE;
  rlx_graph_add_input(g, name, t, s, r, &x);
  return x;
}

static rlx_tensor scalar(rlx_graph* g, float v) {
  rlx_tensor c = RLX_NONE;
  rlx_graph_add_constant(g, RLX_F32, NULL, 0, &v, sizeof v, &c);
  return c;
}

static rlx_tensor bin(rlx_graph* g, rlx_binary_op op, rlx_tensor a, rlx_tensor b) {
  rlx_tensor y = RLX_NONE;
  rlx_graph_add_binary(g, op, a, b, &y);
  return y;
}

static rlx_tensor act(rlx_graph* g, rlx_activation k, rlx_tensor x) {
  rlx_tensor y = RLX_NONE;
  rlx_graph_add_activation(g, k, x, &y);
  return y;
}

/* dGELU(x) * dy for the tanh form, written op by op as a gradient rule
 * would: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3)). */
static rlx_tensor gelu_backward(rlx_graph* g, rlx_tensor x, rlx_tensor dy) {
  rlx_tensor half = scalar(g, 0.5f), one = scalar(g, 1.0f), k = scalar(g, 0.7978845608f);
  rlx_tensor c = scalar(g, 0.044715f), c3 = scalar(g, 0.134145f);
  rlx_tensor x2 = bin(g, RLX_BIN_MUL, x, x), x3 = bin(g, RLX_BIN_MUL, x2, x);
  rlx_tensor inner = bin(g, RLX_BIN_MUL, k, bin(g, RLX_BIN_ADD, x, bin(g, RLX_BIN_MUL, c, x3)));
  rlx_tensor t = act(g, RLX_ACT_TANH, inner);
  rlx_tensor left = bin(g, RLX_BIN_MUL, half, bin(g, RLX_BIN_ADD, one, t));
  rlx_tensor sech2 = bin(g, RLX_BIN_SUB, one, bin(g, RLX_BIN_MUL, t, t));
  rlx_tensor poly = bin(g, RLX_BIN_ADD, one, bin(g, RLX_BIN_MUL, c3, x2));
  rlx_tensor right = bin(g, RLX_BIN_MUL, bin(g, RLX_BIN_MUL, half, x),
                         bin(g, RLX_BIN_MUL, sech2, bin(g, RLX_BIN_MUL, k, poly)));
  return bin(g, RLX_BIN_MUL, bin(g, RLX_BIN_ADD, left, right), dy);
}

/* ------------------------------------------------------------ the pass itself */

typedef struct fuse_result {
  int32_t regions, fused, region_nodes, max_inputs, max_instrs, max_live;
} fuse_result;

static fuse_result fuse_live(rlx_graph* g, rlx_graph** out, int32_t max_live) {
  fuse_result r;
  memset(&r, 0, sizeof r);
  int32_t fused[RLX_OP_COUNT] = {0};
  rlx_fuse_options o = {1, NULL, NULL, max_live};
  rlx_graph* f = NULL;
  if (rlx_fuse_elementwise(g, &o, &f, fused, &r.regions) != RLX_OK) {
    printf("  fusion failed: %s\n", rlx_graph_last_error(g));
    r.regions = -1;
    return r;
  }
  for (int op = 0; op < RLX_OP_COUNT; op++) r.fused += fused[op];
  for (int32_t i = 0; i < f->n_nodes; i++) {
    const rlx_node* n = &f->nodes[i];
    if (n->op != RLX_OP_ELEMENTWISE_REGION) continue;
    r.region_nodes++;
    if (n->n_in > r.max_inputs) r.max_inputs = n->n_in;
    int32_t instrs = (int32_t)((n->a.data_bytes - RLX_REGION_HEADER) / RLX_REGION_INSTR_BYTES);
    if (instrs > r.max_instrs) r.max_instrs = instrs;
    rlx_region_program p;
    char msg[256];
    if (rlx_region_decode(n->a.data, n->a.data_bytes, NULL, n->n_in, &p, msg, sizeof msg) == RLX_OK &&
        rlx_region_max_live(&p) > r.max_live)
      r.max_live = rlx_region_max_live(&p);
  }
  if (out) *out = f;
  else rlx_graph_destroy(f);
  return r;
}

static fuse_result fuse(rlx_graph* g, rlx_graph** out) { return fuse_live(g, out, 0); }

TEST(gelu_backward_is_one_region) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {8, 12};
  rlx_tensor y = gelu_backward(g, input(g, "x", RLX_F32, s, 2), input(g, "dy", RLX_F32, s, 2));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  rlx_graph* f = NULL;
  fuse_result r = fuse(g, &f);
  CHECK_MSG(r.regions == 1 && r.region_nodes == 1, "%d regions", r.regions);
  CHECK_MSG(r.fused == 18 && r.max_inputs == 2, "fused %d, inputs %d", r.fused, r.max_inputs);
  /* the five scalar constants became immediates and left the graph */
  int constants = 0;
  for (int32_t i = 0; f && i < f->n_nodes; i++) constants += f->nodes[i].op == RLX_OP_CONSTANT;
  CHECK_MSG(constants == 0, "%d constants left", constants);
  rlx_graph_destroy(f);
  rlx_graph_destroy(g);
}

/* A chain whose only leaves are constants (a hoisted params graph has
 * them) has no input: it is constant folding's work, never a region (the
 * op takes 1..16 inputs); it still runs, unfused, everywhere. */
TEST(constants_only_chain_is_not_a_region) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_tensor y = act(g, RLX_ACT_EXP, bin(g, RLX_BIN_ADD, bin(g, RLX_BIN_MUL, scalar(g, 0.5f),
                                                              scalar(g, 3.0f)), scalar(g, -1.0f)));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  fuse_result r = fuse(g, NULL);
  CHECK_MSG(r.regions == 0 && r.fused == 0, "%d regions, %d fused", r.regions, r.fused);
  for (int d = 0; d < n_devices; d++) {
    rlx_exec* e = test_compile_on(g, devices[d], NULL);
    CHECK_MSG(e && rlx_exec_run(e) == RLX_OK, "%s: %s", devices[d], e ? rlx_exec_last_error(e) : "compile");
    int64_t n = 0;
    double* v = test_read_output_f64(e, 0, &n);
    CHECK(v && n == 1);
    CHECK_MSG(fabs(v[0] - exp(0.5)) < 1e-6, "%s: %g", devices[d], v[0]);
    free(v);
    rlx_exec_destroy(e);
  }
  rlx_graph_destroy(g);
}

/* t = tanh(x + b) is read by a reduce as well as by the chain after it:
 * it ends one region and is an input of the next. */
TEST(outside_reader_is_not_absorbed) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {4, 6}, bs[1] = {6};
  rlx_tensor x = input(g, "x", RLX_F32, s, 2), b = input(g, "b", RLX_F32, bs, 1), sum;
  rlx_tensor t = act(g, RLX_ACT_TANH, bin(g, RLX_BIN_ADD, x, b));
  rlx_tensor y = act(g, RLX_ACT_SIGMOID, bin(g, RLX_BIN_MUL, t, x));
  int32_t axes[1] = {1};
  rlx_graph_add_reduce(g, RLX_RED_SUM, t, axes, 1, 0, &sum);
  rlx_tensor outs[2] = {y, sum};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  rlx_graph* f = NULL;
  fuse_result r = fuse(g, &f);
  CHECK_MSG(r.regions == 2 && r.fused == 4, "%d regions, %d fused", r.regions, r.fused);
  /* the second region reads t, the first region's output */
  int ok = 0;
  for (int32_t i = 0; f && i < f->n_nodes; i++) {
    const rlx_node* n = &f->nodes[i];
    if (n->op != RLX_OP_ELEMENTWISE_REGION) continue;
    for (int32_t k = 0; k < n->n_in; k++)
      ok |= rlx_producer(f, n->in[k])->op == RLX_OP_ELEMENTWISE_REGION;
  }
  CHECK(ok);
  rlx_graph_destroy(f);
  rlx_graph_destroy(g);
}

/* a = x + b is a graph output: the chain after it starts a new region and
 * the single op stays as it is. */
TEST(graph_output_inside_chain) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {3, 5};
  rlx_tensor x = input(g, "x", RLX_F32, s, 2), b = input(g, "b", RLX_F32, s, 2);
  rlx_tensor a = bin(g, RLX_BIN_ADD, x, b);
  rlx_tensor y = bin(g, RLX_BIN_MUL, act(g, RLX_ACT_EXP, a), x);
  rlx_tensor outs[2] = {a, y};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  rlx_graph* f = NULL;
  fuse_result r = fuse(g, &f);
  CHECK_MSG(r.regions == 1 && r.fused == 2, "%d regions, %d fused", r.regions, r.fused);
  int adds = 0;
  for (int32_t i = 0; f && i < f->n_nodes; i++) adds += f->nodes[i].op == RLX_OP_BINARY;
  CHECK(adds == 1);
  rlx_graph_destroy(f);
  rlx_graph_destroy(g);
}

/* A broadcast-shaped intermediate (b * 2 over [N]) does not join the
 * region over [M, N]: it is an input; a lone op is no region. */
TEST(shapes_and_singletons) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {4, 6}, bs[1] = {6};
  rlx_tensor x = input(g, "x", RLX_F32, s, 2), b = input(g, "b", RLX_F32, bs, 1);
  rlx_tensor b2 = bin(g, RLX_BIN_MUL, b, scalar(g, 2.0f));
  rlx_tensor y = act(g, RLX_ACT_RELU, bin(g, RLX_BIN_ADD, x, b2));
  rlx_tensor z = act(g, RLX_ACT_NEG, x); /* alone */
  rlx_tensor outs[2] = {y, z};
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  fuse_result r = fuse(g, NULL);
  CHECK_MSG(r.regions == 1 && r.fused == 2 && r.max_inputs == 2, "%d regions, %d fused",
            r.regions, r.fused);
  rlx_graph_destroy(g);
}

/* 40 chained ops over 20 inputs: split so no region passes the limits. */
TEST(limits_split_long_chains) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {33};
  rlx_tensor acc = input(g, "x0", RLX_F32, s, 1);
  for (int i = 1; i < 40; i++) {
    char name[8];
    snprintf(name, sizeof name, "x%d", i % 20);
    rlx_tensor x = i < 20 ? input(g, name, RLX_F32, s, 1) : RLX_NONE;
    if (x == RLX_NONE) acc = act(g, RLX_ACT_TANH, acc);
    else acc = bin(g, RLX_BIN_ADD, acc, x);
  }
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &acc, 1));
  fuse_result r = fuse(g, NULL);
  CHECK_MSG(r.regions >= 2 && r.fused == 39, "%d regions, %d fused", r.regions, r.fused);
  CHECK_MSG(r.max_inputs <= RLX_REGION_MAX_INPUTS && r.max_instrs <= RLX_REGION_MAX_INSTRS,
            "inputs %d, instructions %d", r.max_inputs, r.max_instrs);
  rlx_graph_destroy(g);
}

/* Registers a program needs, as the CUDA interpreter allocates them; the
 * pass keeps regions within a register budget by leaving producers out. */
TEST(register_budget) {
  rlx_region_program p;
  memset(&p, 0, sizeof p);
  p.dtype = RLX_F32;
  p.n_inputs = 2;
  /* t0 = tanh(in0), t1 = sigmoid(in1), t2 = t0 * 2, t3 = t2 + t1 */
  p.code[0] = (rlx_region_instr){RLX_RI_UNARY, RLX_ACT_TANH, 0, 0};
  p.code[1] = (rlx_region_instr){RLX_RI_UNARY, RLX_ACT_SIGMOID, 1, 0};
  p.code[2] = (rlx_region_instr){RLX_RI_CONST, 0, 0, 0};
  p.code[3] = (rlx_region_instr){RLX_RI_BINARY, RLX_BIN_MUL, 2, 4};
  p.code[4] = (rlx_region_instr){RLX_RI_BINARY, RLX_BIN_ADD, 5, 3};
  p.n_instrs = 5;
  CHECK_MSG(rlx_region_max_live(&p) == 2, "%d", rlx_region_max_live(&p)); /* t0, t1 */
  p.code[0] = (rlx_region_instr){RLX_RI_CONST, 0, 0, 0};
  p.n_instrs = 1;
  p.n_inputs = 0;
  CHECK(rlx_region_max_live(&p) == 1); /* a constant output takes one */
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {8, 12};
  rlx_tensor y = gelu_backward(g, input(g, "x", RLX_F32, s, 2), input(g, "dy", RLX_F32, s, 2));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  fuse_result wide = fuse(g, NULL), tight = fuse_live(g, NULL, 3);
  CHECK_MSG(wide.regions == 1 && wide.max_live > 3, "%d regions, %d live", wide.regions,
            wide.max_live);
  CHECK_MSG(tight.regions >= 2 && tight.max_live <= 3 && tight.fused >= 10,
            "%d regions, %d live, %d fused", tight.regions, tight.max_live, tight.fused);
  rlx_graph_destroy(g);
}

/* The pass is linear in the graph: 400 GELU-derivative blocks chained
 * through a reduce each (about 10k nodes) fuse into 400 regions; the time
 * is printed (the compile-time budget is checked on the GPU machine). */
TEST(pass_scales_linearly) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {4, 8};
  rlx_tensor x = input(g, "x", RLX_F32, s, 2), dy = input(g, "dy", RLX_F32, s, 2), r;
  int32_t axes[1] = {1};
  for (int b = 0; b < 400; b++) {
    rlx_tensor y = gelu_backward(g, x, dy);
    rlx_graph_add_reduce(g, RLX_RED_MAX, y, axes, 1, 1, &r);
    x = bin(g, RLX_BIN_SUB, y, r); /* the next block reads y outside its region */
  }
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &x, 1));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  fuse_result r2 = fuse(g, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
  printf("  %d nodes -> %d regions in %.1f ms\n", g->n_nodes, r2.regions, ms);
  CHECK_MSG(r2.regions == 400, "%d regions", r2.regions);
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------ fused vs unfused */

typedef rlx_graph* (*graph_fn)(void);

static rlx_graph* g_gelu_backward(void) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {37, 129};
  rlx_tensor y = gelu_backward(g, input(g, "x", RLX_F32, s, 2), input(g, "dy", RLX_F32, s, 2));
  rlx_graph_set_outputs(g, &y, 1);
  return g;
}

/* gelu(x + bias) + residual, and the sum also an output */
static rlx_graph* g_bias_residual(void) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[3] = {3, 17, 64}, bs[1] = {64};
  rlx_tensor x = input(g, "x", RLX_F32, s, 3), b = input(g, "bias", RLX_F32, bs, 1);
  rlx_tensor res = input(g, "res", RLX_F32, s, 3);
  rlx_tensor h = act(g, RLX_ACT_GELU_APPROX, bin(g, RLX_BIN_ADD, x, b));
  rlx_tensor y = bin(g, RLX_BIN_ADD, h, res), z = act(g, RLX_ACT_SILU, y);
  rlx_tensor outs[2] = {y, bin(g, RLX_BIN_MUL, z, scalar(g, 0.25f))};
  rlx_graph_set_outputs(g, outs, 2);
  return g;
}

/* scalar input, a column [M, 1] and a row [N], max / min / div / pow */
static rlx_graph* g_broadcasts(void) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {19, 33}, col[2] = {19, 1}, row[1] = {33}, one[1] = {1};
  rlx_tensor x = input(g, "x", RLX_F32, s, 2), c = input(g, "col", RLX_F32, col, 2);
  rlx_tensor r = input(g, "row", RLX_F32, row, 1), k = input(g, "k", RLX_F32, one, 1);
  rlx_tensor a = bin(g, RLX_BIN_MAX, bin(g, RLX_BIN_MUL, x, k), c);
  rlx_tensor d = bin(g, RLX_BIN_DIV, a, bin(g, RLX_BIN_ADD, act(g, RLX_ACT_ABS, r), scalar(g, 1)));
  rlx_tensor p = bin(g, RLX_BIN_POW, act(g, RLX_ACT_SIGMOID, d), scalar(g, 1.5f));
  rlx_tensor y = bin(g, RLX_BIN_MIN, p, act(g, RLX_ACT_EXP, bin(g, RLX_BIN_SUB, x, r)));
  rlx_graph_set_outputs(g, &y, 1);
  return g;
}

/* a bf16 chain fed by f32 inputs through casts, its result cast back */
static rlx_graph* g_mixed_dtypes(void) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {16, 40};
  rlx_tensor x = input(g, "x", RLX_F32, s, 2), w = input(g, "w", RLX_F32, s, 2), xb, wb, y;
  rlx_graph_add_cast(g, x, RLX_BF16, &xb);
  rlx_graph_add_cast(g, w, RLX_BF16, &wb);
  rlx_tensor h = act(g, RLX_ACT_TANH, bin(g, RLX_BIN_MUL, xb, wb));
  rlx_graph_add_cast(g, bin(g, RLX_BIN_ADD, h, xb), RLX_F32, &y);
  rlx_graph_set_outputs(g, &y, 1);
  return g;
}

static const struct {
  const char* name;
  graph_fn build;
  int min_fused;      /* nodes absorbed where the backend fuses */
  double tol_gpu;     /* relative L2 on GPUs (they may fuse with other math) */
} GRAPHS[] = {
    {"gelu_backward", g_gelu_backward, 18, 1e-5},
    {"bias_residual", g_bias_residual, 4, 1e-5},
    {"broadcasts", g_broadcasts, 10, 1e-5},
    {"mixed_dtypes", g_mixed_dtypes, 4, 1e-2},
};

/* Inputs seeded per name, so the fused and unfused runs see the same data. */
static int set_inputs(rlx_exec* e, rlx_graph* g) {
  for (int32_t i = 0; i < g->n_nodes; i++) {
    const rlx_node* n = &g->nodes[i];
    if (n->op != RLX_OP_INPUT) continue;
    const rlx_type* t = &n->a.type;
    int64_t numel = rlx_type_numel(t), shape[RLX_MAX_RANK];
    for (int32_t d = 0; d < t->rank; d++) shape[d] = t->shape[d];
    float* v = malloc(sizeof(float) * (size_t)numel);
    if (!v) return 0;
    test_seed(1000 + (uint64_t)i);
    test_fill_f32(v, numel, -2.5, 2.5);
    rlx_status s = rlx_exec_set_input(e, n->a.name, RLX_F32, shape, t->rank, v,
                                      sizeof(float) * (size_t)numel);
    free(v);
    if (s != RLX_OK) return 0;
  }
  return 1;
}

/* Fused column of the dispatch report summed over ops. */
static int report_fused(rlx_exec* e) {
  char* text = NULL;
  if (rlx_exec_report(e, &text) != RLX_OK) return -1;
  int total = 0;
  for (char* line = strchr(text, '\n'); line; line = strchr(line + 1, '\n')) {
    char op[64];
    int native, fused, dec, host;
    if (sscanf(line + 1, "%63s %d %d %d %d", op, &native, &fused, &dec, &host) == 5) total += fused;
  }
  rlx_free(text);
  return total;
}

typedef struct run_out {
  int n;
  double* v[4];
  int64_t numel[4];
  int fused;
} run_out;

static void run_out_free(run_out* r) {
  for (int i = 0; i < r->n; i++) free(r->v[i]);
  memset(r, 0, sizeof *r);
}

static int run_graph(rlx_graph* g, const char* dev, int fusion, int reference, run_out* out) {
  memset(out, 0, sizeof *out);
  if (fusion) unsetenv("RLX_NO_FUSION");
  else setenv("RLX_NO_FUSION", "1", 1);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = reference;
  rlx_exec* e = test_compile_on(g, dev, &o);
  unsetenv("RLX_NO_FUSION");
  int ok = e && set_inputs(e, g) && rlx_exec_run(e) == RLX_OK;
  if (e && !ok) printf("  %s: %s\n", dev, rlx_exec_last_error(e));
  out->n = ok ? g->n_outputs : 0;
  for (int i = 0; i < out->n && i < 4; i++) {
    out->v[i] = test_read_output_f64(e, i, &out->numel[i]);
    ok &= out->v[i] != NULL;
  }
  if (ok) out->fused = report_fused(e);
  rlx_exec_destroy(e);
  return ok;
}

/* Bit equality of two runs' outputs (NaN equals NaN). */
static int same_bits(const run_out* a, const run_out* b) {
  if (a->n != b->n) return 0;
  for (int i = 0; i < a->n; i++) {
    if (a->numel[i] != b->numel[i]) return 0;
    for (int64_t k = 0; k < a->numel[i]; k++) {
      double x = a->v[i][k], y = b->v[i][k];
      if (x != y && !(isnan(x) && isnan(y))) {
        printf("  output %d element %lld: %.9g vs %.9g\n", i, (long long)k, x, y);
        return 0;
      }
    }
  }
  return 1;
}

static double worst_rel_l2(const run_out* a, const run_out* b) {
  double worst = a->n == b->n ? 0 : INFINITY;
  for (int i = 0; i < a->n && i < b->n; i++) {
    double e = a->numel[i] == b->numel[i] ? test_rel_l2(a->v[i], b->v[i], a->numel[i]) : INFINITY;
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

/* Where the compiler makes regions (executable.c): the CPU, and CUDA when
 * its regions run as generated code (libnvrtc loads; the interpreter is
 * slower than the unfused kernels, so without NVRTC CUDA does not fuse). */
static int fuses_on(const char* dev) {
  return !strcmp(dev, "cpu") || (!strcmp(dev, "cuda") && rlx_nvrtc_available(NULL, 0));
}

/* CUDA: the generated kernels give the interpreter's bits (RLX_CUDA_NO_NVRTC
 * fuses for the interpreter), and the generated path really ran. */
static int check_generated_vs_interpreter(rlx_graph* g, const char* name, const run_out* generated) {
  int32_t compiles = 0;
  double ms = 0;
  rlx_nvrtc_stats(&compiles, &ms);
  setenv("RLX_CUDA_NO_NVRTC", "1", 1);
  run_out interp;
  int ok = run_graph(g, "cuda", 1, 0, &interp);
  unsetenv("RLX_CUDA_NO_NVRTC");
  if (!ok) return 0;
  ok = same_bits(generated, &interp) && compiles > 0;
  printf("  %-14s cuda   generated vs interpreter: %s (%d NVRTC compiles so far, %.1f ms)\n", name,
         ok ? "same bits" : "DIFFER", (int)compiles, ms);
  run_out_free(&interp);
  return ok;
}

TEST(fused_matches_unfused_everywhere) {
  for (size_t gi = 0; gi < sizeof GRAPHS / sizeof GRAPHS[0]; gi++) {
    rlx_graph* g = GRAPHS[gi].build();
    run_out ref_unfused, ref_fused;
    CHECK(run_graph(g, "cpu", 0, 1, &ref_unfused));
    CHECK(run_graph(g, "cpu", 1, 1, &ref_fused));
    CHECK_MSG(same_bits(&ref_fused, &ref_unfused), "%s: reference fused vs unfused",
              GRAPHS[gi].name);
    for (int d = 0; d < n_devices; d++) {
      const char* dev = devices[d];
      run_out a, b;
      CHECK(run_graph(g, dev, 0, 0, &a));
      CHECK(run_graph(g, dev, 1, 0, &b));
      int cpu = !strcmp(dev, "cpu");
      double err = worst_rel_l2(&b, &ref_unfused);
      if (cpu) CHECK_MSG(same_bits(&b, &a), "%s: cpu fused vs unfused", GRAPHS[gi].name);
      else CHECK_MSG(err <= GRAPHS[gi].tol_gpu, "%s on %s: rel L2 %g", GRAPHS[gi].name, dev, err);
      CHECK_MSG(a.fused == 0, "%s on %s: %d fused with fusion off", GRAPHS[gi].name, dev, a.fused);
      if (fuses_on(dev))
        CHECK_MSG(b.fused >= GRAPHS[gi].min_fused, "%s on %s: %d fused, want >= %d",
                  GRAPHS[gi].name, dev, b.fused, GRAPHS[gi].min_fused);
      else
        CHECK_MSG(b.fused == 0, "%s on %s: fused %d without a kernel", GRAPHS[gi].name, dev, b.fused);
      printf("  %-14s %-7s fused %2d, rel L2 vs reference %.3g\n", GRAPHS[gi].name, dev, b.fused,
             err);
      if (!strcmp(dev, "cuda") && fuses_on(dev))
        CHECK_MSG(check_generated_vs_interpreter(g, GRAPHS[gi].name, &b),
                  "%s: generated region kernels vs the interpreter", GRAPHS[gi].name);
      run_out_free(&a);
      run_out_free(&b);
    }
    run_out_free(&ref_unfused);
    run_out_free(&ref_fused);
    rlx_graph_destroy(g);
  }
}

/* A region written in text (as a fused graph prints) runs on every device:
 * natively where the backend has the kernel, expanded by decompose
 * elsewhere; and the compiled (fused) graph prints and parses back. */
TEST(text_round_trip_and_expansion) {
  rlx_graph* g = g_bias_residual();
  rlx_exec* e = test_compile_on(g, "cpu", NULL);
  const rlx_graph* compiled = NULL;
  CHECK(e && rlx_exec_graph(e, &compiled) == RLX_OK && compiled);
  char *text = NULL, *again = NULL, *err = NULL;
  rlx_graph* parsed = NULL;
  CHECK(compiled && rlx_graph_print(compiled, &text) == RLX_OK);
  CHECK_MSG(text && strstr(text, "elementwise_region") != NULL, "%s", text ? text : "");
  CHECK_MSG(text && rlx_graph_parse(text, &parsed, &err) == RLX_OK, "%s", err ? err : "");
  CHECK(parsed && rlx_graph_print(parsed, &again) == RLX_OK && again && !strcmp(text, again));
  run_out want;
  CHECK(run_graph(g, "cpu", 0, 1, &want));
  for (int d = 0; parsed && d < n_devices; d++) {
    run_out got;
    CHECK(run_graph(parsed, devices[d], 0, 0, &got));
    double e2 = worst_rel_l2(&got, &want);
    CHECK_MSG(e2 <= 1e-5, "parsed region on %s: rel L2 %g", devices[d], e2);
    run_out_free(&got);
  }
  run_out_free(&want);
  rlx_free(text);
  rlx_free(again);
  rlx_free(err);
  rlx_graph_destroy(parsed);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------ the validator */

/* A valid program: in0 * in1 + 0.5, tanh. */
static size_t valid_program(uint8_t* buf) {
  rlx_region_program p;
  memset(&p, 0, sizeof p);
  p.dtype = RLX_F32;
  p.n_inputs = 2;
  p.n_instrs = 4;
  p.code[0] = (rlx_region_instr){RLX_RI_BINARY, RLX_BIN_MUL, 0, 1};
  p.code[1] = (rlx_region_instr){RLX_RI_CONST, 0, 0, 0};
  p.imm[1] = 0.5;
  p.code[2] = (rlx_region_instr){RLX_RI_BINARY, RLX_BIN_ADD, 2, 3};
  p.code[3] = (rlx_region_instr){RLX_RI_UNARY, RLX_ACT_TANH, 4, 0};
  rlx_region_encode(&p, buf);
  return rlx_region_bytes(p.n_instrs);
}

/* Adds a region node over two f32[5] inputs (the second of dtype t2). */
static rlx_status add_region(rlx_graph* g, const uint8_t* bytes, size_t n, rlx_dtype t2, int n_in) {
  rlx_dim s[1] = {5};
  char name[16];
  snprintf(name, sizeof name, "a%d", g->n_nodes);
  rlx_tensor in[3] = {input(g, name, RLX_F32, s, 1)};
  snprintf(name, sizeof name, "b%d", g->n_nodes);
  in[1] = input(g, name, t2, s, 1);
  in[2] = in[0];
  rlx_node_attrs a;
  memset(&a, 0, sizeof a);
  a.data = (void*)bytes;
  a.data_bytes = n;
  rlx_tensor y;
  return rlx_graph_add_node(g, RLX_OP_ELEMENTWISE_REGION, &a, in, n_in, &y);
}

TEST(validator_refuses_malformed_programs) {
  static const struct {
    int at;        /* byte to change (-1: none) */
    uint8_t value;
    int cut;       /* bytes dropped from the end */
    rlx_dtype t2;
    int n_in;
    const char* msg;
  } bad[] = {
      {0, 2, 0, RLX_F32, 2, "version"},
      {1, RLX_I32, 0, RLX_F32, 2, "region dtype"},
      {2, 0, 0, RLX_F32, 2, "inputs"},
      {2, 17, 0, RLX_F32, 2, "inputs"},
      {3, 0, 0, RLX_F32, 2, "instructions"},
      {3, 33, 0, RLX_F32, 2, "instructions"},
      {3, 5, 0, RLX_F32, 2, "bytes"},
      {5, 1, 0, RLX_F32, 2, "header"},
      {-1, 0, 4, RLX_F32, 2, "bytes"},
      {8, 9, 0, RLX_F32, 2, "kind"},
      {9, RLX_BIN_COUNT, 0, RLX_F32, 2, "binary op"},
      {11, 0, 0, RLX_F32, 2, "never read"}, /* in0 * in0: in1 unread */
      {11, 9, 0, RLX_F32, 2, "operand b"},
      {8 + 36 + 1, RLX_ACT_COUNT, 0, RLX_F32, 2, "activation"},
      {8 + 36 + 1, RLX_ACT_NONE, 0, RLX_F32, 2, "activation"},
      {8 + 36 + 2, 5, 0, RLX_F32, 2, "operand a"},
      {8 + 24 + 3, 4, 0, RLX_F32, 2, "operand b"},
      {8 + 12 + 2, 1, 0, RLX_F32, 2, "unused operand"},
      {8 + 4, 1, 0, RLX_F32, 2, "immediate"},
      {8 + 12 + 1, 1, 0, RLX_F32, 2, "const takes op 0"},
      {-1, 0, 0, RLX_F16, 2, "cast"},
      {-1, 0, 0, RLX_F32, 3, "node has 3"},
  };
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  uint8_t buf[512];
  size_t n = valid_program(buf);
  CHECK_OK_G(g, add_region(g, buf, n, RLX_F32, 2));
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint8_t b[512];
    memcpy(b, buf, n);
    if (bad[i].at >= 0) b[bad[i].at] = bad[i].value;
    rlx_status s = add_region(g, b, n - (size_t)bad[i].cut, bad[i].t2, bad[i].n_in);
    const char* msg = rlx_graph_last_error(g);
    CHECK_MSG(s == RLX_INVALID_ARGUMENT && strstr(msg, "elementwise_region") && strstr(msg, bad[i].msg),
              "case %zu: status %d, message '%s' (want '%s')", i, (int)s, msg, bad[i].msg);
  }
  /* a cast reads an input of another float dtype: valid */
  rlx_region_program p;
  memset(&p, 0, sizeof p);
  p.dtype = RLX_F32;
  p.n_inputs = 2;
  p.n_instrs = 2;
  p.code[0] = (rlx_region_instr){RLX_RI_CAST, 0, 1, 0};
  p.code[1] = (rlx_region_instr){RLX_RI_BINARY, RLX_BIN_ADD, 0, 2};
  rlx_region_encode(&p, buf);
  CHECK_OK_G(g, add_region(g, buf, rlx_region_bytes(2), RLX_BF16, 2));
  CHECK(add_region(g, NULL, 0, RLX_F32, 2) == RLX_INVALID_ARGUMENT);
  rlx_graph_destroy(g);
}

/* Every single-byte change of a valid program is refused or, if accepted,
 * runs on the CPU without harm (the sanitizer build checks the "harm"). */
TEST(validator_survives_mutations) {
  uint8_t buf[512];
  size_t n = valid_program(buf);
  int accepted = 0, refused = 0;
  test_seed(77);
  for (int it = 0; it < 600; it++) {
    uint8_t b[512];
    memcpy(b, buf, n);
    b[test_rand_int(0, (int64_t)n - 1)] = (uint8_t)test_rand_int(0, 255);
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    if (add_region(g, b, n, RLX_F32, 2) != RLX_OK) {
      refused++;
    } else {
      accepted++;
      rlx_tensor y = (rlx_tensor)(g->n_values - 1);
      rlx_graph_set_outputs(g, &y, 1);
      run_out r;
      CHECK(run_graph(g, "cpu", 1, it % 2, &r));
      run_out_free(&r);
    }
    rlx_graph_destroy(g);
  }
  printf("  mutations: %d accepted, %d refused\n", accepted, refused);
  CHECK(accepted > 0 && refused > 0);
}

static int device_available(const char* name) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info d;
    if (rlx_device_get(i, &d) == RLX_OK && strcmp(d.name, name) == 0) return d.available;
  }
  return 0;
}

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
  RUN(gelu_backward_is_one_region);
  RUN(outside_reader_is_not_absorbed);
  RUN(constants_only_chain_is_not_a_region);
  RUN(graph_output_inside_chain);
  RUN(shapes_and_singletons);
  RUN(limits_split_long_chains);
  RUN(register_budget);
  RUN(pass_scales_linearly);
  RUN(fused_matches_unfused_everywhere);
  RUN(text_round_trip_and_expansion);
  RUN(validator_refuses_malformed_programs);
  RUN(validator_survives_mutations);
  return test_summary();
}
