/* WebGPU backend specifics (op-by-op numerics are test_parity's job; what
 * every device promises, test_contract's): arena binding windows and staged
 * steps (run this binary with RLX_WG_MAX_BINDING=4096 to force them:
 * ctest's webgpu_windowed), sub-word (f16 / bool) stores, the fast kernels,
 * special values in softmax rows, GEMV shapes, the tiled matmul and the
 * wide-head flash attention. Every result is compared with the CPU backend
 * on the same inputs.
 *
 * Exit 77 (ctest SKIP) when the backend is not built or cannot start. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/executable.h"
#ifdef RLX_HAVE_WEBGPU
#include "backends/webgpu/wg_backend.h"
#endif

static int webgpu_available(void) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    rlx_device_get(i, &info);
    if (strcmp(info.name, "webgpu") == 0) {
      if (!info.available) printf("SKIP webgpu (%s)\n", info.detail);
      else printf("webgpu: %s\n", info.detail);
      return info.available;
    }
  }
  return 0;
}

#ifdef RLX_HAVE_WEBGPU
/* Encodes e's current steps in a fresh WebGPU backend exec and returns its
 * counters (window, staged and host steps). */
static int record_stats(rlx_exec* e, rlx_wg_stats* st) {
  const rlx_step_list* steps = NULL;
  const rlx_plan* plan = NULL;
  if (rlx_exec_steps(e, &steps, &plan) != RLX_OK || !steps) return 0;
  rlx_error err;
  memset(&err, 0, sizeof err);
  rlx_backend_exec* be = NULL;
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  if (rlx_backend_webgpu.create(steps, plan->arena_bytes, &o, &err, &be) != RLX_OK) {
    fprintf(stderr, "create: %s\n", err.msg);
    return 0;
  }
  rlx_wg_exec_stats(be, st);
  rlx_backend_webgpu.destroy(be);
  return 1;
}
#endif

/* A chain over 1 KiB tensors whose arena spans many 4 KiB windows; the add
 * of the first and a late value reads bytes too far apart for one window
 * (staged when the window is forced small). Matches the CPU either way. */
TEST(windows_and_staging_match_cpu) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {256};
  rlx_tensor x, t[8], y;
  rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x);
  t[0] = x;
  for (int i = 1; i < 8; i++)
    rlx_graph_add_activation(g, i % 2 ? RLX_ACT_TANH : RLX_ACT_SIN, t[i - 1], &t[i]);
  rlx_graph_add_binary(g, RLX_BIN_ADD, x, t[7], &y);
  /* every value an output: all stay live, so the arena spans many windows */
  rlx_tensor outs[8] = {y, t[1], t[2], t[3], t[4], t[5], t[6], t[7]};
  rlx_graph_set_outputs(g, outs, 8);
  rlx_exec *w = test_compile_on(g, "webgpu", NULL), *c = test_compile_on(g, "cpu", NULL);
  CHECK(w && c);
  float xd[256];
  test_seed(11);
  test_fill_f32(xd, 256, -2, 2);
  rlx_exec* both[2] = {w, c};
  for (int k = 0; k < 2; k++) {
    CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, s, 1, xd, sizeof xd));
    CHECK_OK_E(both[k], rlx_exec_run(both[k]));
  }
  for (int32_t i = 0; i < 8; i++) CHECK(test_outputs_match(w, c, i, 1e-5));
#ifdef RLX_HAVE_WEBGPU
  rlx_wg_stats st;
  CHECK(record_stats(w, &st));
  CHECK_MSG(st.host_steps == 0, "host steps %llu", (unsigned long long)st.host_steps);
  const char* forced = getenv("RLX_WG_MAX_BINDING");
  if (forced && atoll(forced) == 4096) {
    CHECK_MSG(st.window_bytes == 4096 && st.arena_bytes > 4096, "window %llu arena %llu",
              (unsigned long long)st.window_bytes, (unsigned long long)st.arena_bytes);
    CHECK_MSG(st.staged_steps >= 1, "staged %llu", (unsigned long long)st.staged_steps);
    printf("  windowed: arena %llu bytes, window %llu, %llu staged step(s)\n",
           (unsigned long long)st.arena_bytes, (unsigned long long)st.window_bytes,
           (unsigned long long)st.staged_steps);
  } else {
    CHECK(st.window_bytes == st.arena_bytes && st.staged_steps == 0);
  }
#endif
  rlx_exec_destroy(w);
  rlx_exec_destroy(c);
  rlx_graph_destroy(g);
}

/* Sub-word stores from neighbouring invocations into one word: f16 and
 * bool outputs of odd length, bit-exact with the CPU. */
TEST(subword_stores) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {3, 37};
  rlx_tensor x, xh, sq, m, back;
  rlx_graph_add_input(g, "x", RLX_F32, s, 2, &x);
  rlx_graph_add_cast(g, x, RLX_F16, &xh);
  rlx_graph_add_binary(g, RLX_BIN_MUL, xh, xh, &sq);
  rlx_graph_add_compare(g, RLX_CMP_GT, xh, sq, &m);
  rlx_graph_add_cast(g, sq, RLX_F32, &back);
  rlx_tensor outs[3] = {back, m, sq};
  rlx_graph_set_outputs(g, outs, 3);
  rlx_exec *w = test_compile_on(g, "webgpu", NULL), *c = test_compile_on(g, "cpu", NULL);
  CHECK(w && c);
  float xd[3 * 37];
  test_seed(9);
  test_fill_f32(xd, 3 * 37, -2, 2);
  rlx_exec* both[2] = {w, c};
  for (int k = 0; k < 2; k++) {
    CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, s, 2, xd, sizeof xd));
    CHECK_OK_E(both[k], rlx_exec_run(both[k]));
  }
  CHECK(test_outputs_match(w, c, 0, 0));
  uint8_t mw[3 * 37], mc[3 * 37];
  uint16_t hw[3 * 37], hc[3 * 37];
  CHECK_OK_E(w, rlx_exec_read_output(w, 1, RLX_BOOL, mw, sizeof mw));
  CHECK_OK_E(c, rlx_exec_read_output(c, 1, RLX_BOOL, mc, sizeof mc));
  CHECK(memcmp(mw, mc, sizeof mw) == 0);
  CHECK_OK_E(w, rlx_exec_read_output(w, 2, RLX_F16, hw, sizeof hw));
  CHECK_OK_E(c, rlx_exec_read_output(c, 2, RLX_F16, hc, sizeof hc));
  CHECK(memcmp(hw, hc, sizeof hw) == 0);
  /* one row of a bool output: an unaligned download */
  uint8_t row[37];
  CHECK_OK_E(w, rlx_exec_read_output_row(w, 1, 1, RLX_BOOL, row, sizeof row));
  CHECK(memcmp(row, mc + 37, 37) == 0);
  rlx_exec_destroy(w);
  rlx_exec_destroy(c);
  rlx_graph_destroy(g);
}

/* Shapes that reach the fast kernels (vec4 elementwise, register rows of
 * <= 4096 and of 4097..8192 elements, GEMV, tiled GEMM): each must match
 * the CPU, and with the fast paths enabled every step must have taken one. */
TEST(fast_kernels_match_cpu) {
  const int64_t widths[3] = {2048, 5120, 8192};
  for (int w = 0; w < 3; w++) {
    const int64_t W = widths[w], R = 3, N = 160;
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_dim sx[2] = {R, W}, sg[1] = {W}, sv[2] = {1, W}, sw[2] = {W, N};
    rlx_tensor x, gam, bet, v, wt, y[6];
    rlx_graph_add_input(g, "x", RLX_F32, sx, 2, &x);
    rlx_graph_add_input(g, "g", RLX_F32, sg, 1, &gam);
    rlx_graph_add_input(g, "b", RLX_F32, sg, 1, &bet);
    rlx_graph_add_input(g, "v", RLX_F32, sv, 2, &v);
    rlx_graph_add_input(g, "w", RLX_F32, sw, 2, &wt);
    rlx_graph_add_softmax(g, x, -1, &y[0]);
    rlx_graph_add_log_softmax(g, x, -1, &y[1]);
    rlx_graph_add_layer_norm(g, x, gam, bet, -1, 1e-5f, &y[2]);
    rlx_graph_add_rms_norm(g, x, gam, 1e-5f, &y[3]);
    rlx_graph_add_binary(g, RLX_BIN_MUL, x, gam, &y[4]);
    rlx_graph_add_matmul(g, v, wt, 0, 0, &y[5]);
    rlx_graph_set_outputs(g, y, 6);
    rlx_exec *gpu = test_compile_on(g, "webgpu", NULL), *cpu = test_compile_on(g, "cpu", NULL);
    CHECK(gpu && cpu);
    float* xd = malloc(sizeof(float) * (size_t)(R * W + 3 * W + W * N));
    float *gd = xd + R * W, *bd = gd + W, *vd = bd + W, *wd = vd + W;
    test_seed(21 + w);
    test_fill_f32(xd, R * W + 3 * W + W * N, -3, 3);
    rlx_exec* both[2] = {gpu, cpu};
    for (int k = 0; k < 2 && gpu && cpu; k++) {
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, sx, 2, xd, sizeof(float) * (size_t)(R * W)));
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "g", RLX_F32, sg, 1, gd, sizeof(float) * (size_t)W));
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "b", RLX_F32, sg, 1, bd, sizeof(float) * (size_t)W));
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "v", RLX_F32, sv, 2, vd, sizeof(float) * (size_t)W));
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "w", RLX_F32, sw, 2, wd, sizeof(float) * (size_t)(W * N)));
      CHECK_OK_E(both[k], rlx_exec_run(both[k]));
    }
    for (int32_t i = 0; i < 6 && gpu && cpu; i++)
      CHECK_MSG(test_outputs_match(gpu, cpu, i, 1e-5), "width %lld output %d", (long long)W, i);
#ifdef RLX_HAVE_WEBGPU
    rlx_wg_stats st;
    memset(&st, 0, sizeof st);
    CHECK(gpu && record_stats(gpu, &st));
    const char* off = getenv("RLX_WG_NO_FAST");
    if (getenv("RLX_WG_MAX_BINDING")) {
      /* small forced windows: these tensors are staged or on the host */
    } else if (!(off && *off == '1')) {
      CHECK_MSG(st.fast_steps >= 6, "width %lld: %llu fast steps of 6", (long long)W,
                (unsigned long long)st.fast_steps);
    } else {
      CHECK(st.fast_steps == 0);
    }
#endif
    free(xd);
    rlx_exec_destroy(gpu);
    rlx_exec_destroy(cpu);
    rlx_graph_destroy(g);
  }
}

/* Softmax / log-softmax rows on the fast row kernels (rows of <= 4096 and
 * of 4097..8192 elements) with the values their exp and max shortcuts must
 * get right: large magnitudes, a +inf, a NaN, a row of -inf, a row mostly
 * -inf (whole invocations see only -inf). NaN where the CPU has NaN, the
 * rest within f32 rounding of the CPU. */
TEST(softmax_rows_special_values) {
  const int64_t widths[2] = {2048, 5120};
  for (int w = 0; w < 2; w++) {
    const int64_t W = widths[w], R = 6;
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_dim sx[2] = {R, W};
    rlx_tensor x, y[2];
    rlx_graph_add_input(g, "x", RLX_F32, sx, 2, &x);
    rlx_graph_add_softmax(g, x, -1, &y[0]);
    rlx_graph_add_log_softmax(g, x, -1, &y[1]);
    rlx_graph_set_outputs(g, y, 2);
    rlx_exec *gpu = test_compile_on(g, "webgpu", NULL), *cpu = test_compile_on(g, "cpu", NULL);
    CHECK(gpu && cpu);
    float* xd = malloc(sizeof(float) * (size_t)(R * W));
    CHECK(xd != NULL);
    test_seed(40 + w);
    test_fill_f32(xd, R * W, -3, 3);
    float* r = xd + W;
    for (int64_t i = 0; i < W; i++) r[i] *= 30.0f; /* row 1: exp down to e^-180 */
    xd[2 * W + W / 3] = INFINITY;                   /* row 2: NaN everywhere */
    xd[3 * W + W / 2] = NAN;                        /* row 3: NaN everywhere */
    for (int64_t i = 0; i < W; i++) xd[4 * W + i] = -INFINITY; /* row 4: NaN */
    for (int64_t i = 0; i < W * 3 / 4; i++) xd[5 * W + i] = -INFINITY; /* row 5: masked */
    rlx_exec* both[2] = {gpu, cpu};
    for (int k = 0; k < 2; k++) {
      size_t bytes = sizeof(float) * (size_t)(R * W);
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, sx, 2, xd, bytes));
      CHECK_OK_E(both[k], rlx_exec_run(both[k]));
    }
    for (int32_t i = 0; i < 2; i++)
      CHECK_MSG(test_outputs_match(gpu, cpu, i, 1e-5), "width %lld output %d", (long long)W, i);
    free(xd);
    rlx_exec_destroy(gpu);
    rlx_exec_destroy(cpu);
    rlx_graph_destroy(g);
  }
}

/* GEMV (M <= 4 rows, f32, B[K, N]) at shapes that leave partial trips and a
 * partial last workgroup, M = 1 and 3, activations loaded as quads (K % 4
 * == 0) or one by one (K = 1001): matches the CPU. */
TEST(gemv_shapes_match_cpu) {
  const int64_t Ms[2] = {1, 3}, Ks[3] = {1000, 1001, 4096}, N = 200;
  for (int c = 0; c < 6; c++) {
    const int64_t M = Ms[c & 1], K = Ks[c >> 1];
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_dim sa[2] = {M, K}, sb[2] = {K, N};
    rlx_tensor a, b, y;
    rlx_graph_add_input(g, "a", RLX_F32, sa, 2, &a);
    rlx_graph_add_input(g, "b", RLX_F32, sb, 2, &b);
    rlx_graph_add_matmul(g, a, b, 0, 0, &y);
    rlx_graph_set_outputs(g, &y, 1);
    rlx_exec *gpu = test_compile_on(g, "webgpu", NULL), *cpu = test_compile_on(g, "cpu", NULL);
    CHECK(gpu && cpu);
    float* d = malloc(sizeof(float) * (size_t)(M * K + K * N));
    CHECK(d != NULL);
    test_seed(60 + c);
    test_fill_f32(d, M * K + K * N, -2, 2);
    rlx_exec* both[2] = {gpu, cpu};
    for (int k = 0; k < 2; k++) {
      size_t na = sizeof(float) * (size_t)(M * K), nb = sizeof(float) * (size_t)(K * N);
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "a", RLX_F32, sa, 2, d, na));
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "b", RLX_F32, sb, 2, d + M * K, nb));
      CHECK_OK_E(both[k], rlx_exec_run(both[k]));
    }
    CHECK_MSG(test_outputs_match(gpu, cpu, 0, 1e-5), "M %lld K %lld", (long long)M, (long long)K);
    free(d);
    rlx_exec_destroy(gpu);
    rlx_exec_destroy(cpu);
    rlx_graph_destroy(g);
  }
}

#ifdef RLX_HAVE_WEBGPU
#include "backends/webgpu/wg_internal.h"
#endif

/* One tiled-GEMM shape: A [batch?, M, K] (or [K, M] with ta), stored with
 * `pad` extra columns and narrowed from column `start` (a strided view),
 * B [batch?, K, N] (or [N, K] with tb), optional bias + ReLU. */
typedef struct mm_shape {
  int64_t M, N, K, batch, pad, start;
  int ta, tb, fused;
} mm_shape;

typedef struct mm_data {
  rlx_dim as[3], bs[3], ns[1];
  int rank;
  int64_t na, nb;
  float* d; /* a, then b, then bias */
} mm_data;

static rlx_graph* mm_graph(const mm_shape* c, mm_data* m) {
  int64_t rows = c->ta ? c->K : c->M, cols = c->ta ? c->M : c->K;
  int64_t brows = c->tb ? c->N : c->K, bcols = c->tb ? c->K : c->N;
  int o = c->batch > 1 ? 0 : 1; /* rank 2: drop the batch dim */
  m->rank = 3 - o;
  for (int i = o; i < 3; i++) {
    const rlx_dim a[3] = {c->batch, rows, cols + c->pad}, b[3] = {c->batch, brows, bcols};
    m->as[i - o] = a[i];
    m->bs[i - o] = b[i];
  }
  m->ns[0] = c->N;
  m->na = c->batch * rows * (cols + c->pad);
  m->nb = c->batch * brows * bcols;
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_tensor a, b, bias, y;
  rlx_graph_add_input(g, "a", RLX_F32, m->as, m->rank, &a);
  rlx_graph_add_input(g, "b", RLX_F32, m->bs, m->rank, &b);
  if (c->pad) rlx_graph_add_narrow(g, a, m->rank - 1, c->start, cols, &a);
  if (c->fused) {
    rlx_graph_add_input(g, "bias", RLX_F32, m->ns, 1, &bias);
    rlx_graph_add_fused_matmul_bias_act(g, a, b, bias, c->ta, c->tb, RLX_ACT_RELU, &y);
  } else {
    rlx_graph_add_matmul(g, a, b, c->ta, c->tb, &y);
  }
  rlx_graph_set_outputs(g, &y, 1);
  return g;
}

/* Runs e on m's data and returns its output as doubles (NULL on failure). */
static double* mm_run(rlx_exec* e, const mm_shape* c, const mm_data* m, int64_t* n) {
  if (!e) return NULL;
  size_t fa = sizeof(float) * (size_t)m->na, fb = sizeof(float) * (size_t)m->nb;
  if (rlx_exec_set_input(e, "a", RLX_F32, m->as, m->rank, m->d, fa) != RLX_OK ||
      rlx_exec_set_input(e, "b", RLX_F32, m->bs, m->rank, m->d + m->na, fb) != RLX_OK ||
      (c->fused && rlx_exec_set_input(e, "bias", RLX_F32, m->ns, 1, m->d + m->na + m->nb,
                                      sizeof(float) * (size_t)c->N) != RLX_OK) ||
      rlx_exec_run(e) != RLX_OK) {
    fprintf(stderr, "matmul run: %s\n", rlx_exec_last_error(e));
    return NULL;
  }
  return test_read_output_f64(e, 0, n);
}

/* The generic 16x16 kernel (fast paths off while it is compiled and run). */
static double* mm_run_generic(rlx_graph* g, const mm_shape* c, const mm_data* m, int64_t* n) {
  const char* was = getenv("RLX_WG_NO_FAST");
  char keep[16];
  snprintf(keep, sizeof keep, "%s", was ? was : "");
  setenv("RLX_WG_NO_FAST", "1", 1);
  rlx_exec* e = test_compile_on(g, "webgpu", NULL);
  double* out = mm_run(e, c, m, n);
  rlx_exec_destroy(e);
  if (was) setenv("RLX_WG_NO_FAST", keep, 1);
  else unsetenv("RLX_WG_NO_FAST");
  return out;
}

#ifdef RLX_HAVE_WEBGPU
/* Matmul steps of e and how many of them the encoder gives the tiled kernel. */
static void count_tiled(rlx_exec* e, int* matmuls, int* tiled) {
  const rlx_step_list* steps = NULL;
  const rlx_plan* plan = NULL;
  *matmuls = *tiled = 0;
  if (!e || rlx_exec_steps(e, &steps, &plan) != RLX_OK || !steps) return;
  uint32_t words[RLX_WG_REC_WORDS];
  for (int32_t i = 0; i < steps->n; i++) {
    if (steps->steps[i].kernel != RLX_K_MATMUL) continue;
    rlx_wg_dispatch disp;
    (*matmuls)++;
    if (rlx_wg_encode_step(&steps->steps[i], i, 0, plan->arena_bytes, 65535, words, &disp) == 0 &&
        (disp.kernel == RLX_WG_MATMUL_TILED || disp.kernel == RLX_WG_MATMUL_TILED_F32))
      (*tiled)++;
  }
}
#endif

/* The tiled result must match the CPU reference (f64 accumulation) to f32
 * rounding, equal the generic kernel bit for bit (both are one f32 fma
 * chain per output in ascending k), and come from the tiled kernel. */
static void check_tiled_matmul(const mm_shape* c) {
  mm_data m;
  rlx_graph* g = mm_graph(c, &m);
  m.d = malloc(sizeof(float) * (size_t)(m.na + m.nb + c->N));
  test_fill_f32(m.d, m.na + m.nb + c->N, -2, 2);
  rlx_compile_options ref;
  rlx_compile_options_init(&ref);
  ref.reference = 1;
  rlx_exec *gpu = test_compile_on(g, "webgpu", NULL), *cpu = test_compile_on(g, "cpu", &ref);
  int64_t n1 = 0, n2 = 0, n3 = 0;
  double *x = mm_run(gpu, c, &m, &n1), *r = mm_run(cpu, c, &m, &n2);
  double* gen = mm_run_generic(g, c, &m, &n3);
  int sizes = x && r && gen && n1 == c->batch * c->M * c->N && n2 == n1 && n3 == n1;
  CHECK_MSG(sizes && test_rel_l2(x, r, n1) <= 1e-5 && test_max_abs(x, gen, n1) == 0.0,
            "M %lld N %lld K %lld: rel L2 vs CPU %g, max |diff| vs generic %g", (long long)c->M,
            (long long)c->N, (long long)c->K, sizes ? test_rel_l2(x, r, n1) : -1.0,
            sizes ? test_max_abs(x, gen, n1) : -1.0);
#ifdef RLX_HAVE_WEBGPU
  const char* off = getenv("RLX_WG_NO_FAST");
  if (!(off && *off == '1')) {
    int matmuls, tiled;
    count_tiled(gpu, &matmuls, &tiled);
    CHECK_MSG(matmuls == 1 && tiled == 1, "M %lld N %lld K %lld: %d matmul step(s), %d tiled",
              (long long)c->M, (long long)c->N, (long long)c->K, matmuls, tiled);
  }
#endif
  free(x);
  free(r);
  free(gen);
  free(m.d);
  rlx_exec_destroy(gpu);
  rlx_exec_destroy(cpu);
  rlx_graph_destroy(g);
}

/* Tiled GEMM across its load paths: quads along k / along m / n / scalar,
 * K tails, partial tiles, batches of both operands, strided and misaligned
 * views, vec4 and scalar stores, bias + activation. */
TEST(tiled_matmul_exact) {
  const mm_shape shapes[] = {
      {200, 136, 100, 1, 0, 0, 0, 0, 0}, /* quads along k (A) and n (B), K tail of 4 */
      {130, 260, 64, 1, 0, 0, 0, 1, 0},  /* B transposed: quads along k */
      {96, 200, 52, 1, 0, 0, 1, 0, 1},   /* A transposed: quads along m; bias + ReLU */
      {70, 130, 33, 3, 0, 0, 0, 0, 1},   /* batched A and B, odd K and N: scalar loads */
      {144, 132, 40, 1, 4, 4, 0, 0, 0},  /* A rows strided 44, aligned: quads */
      {64, 96, 37, 1, 3, 1, 0, 1, 0},    /* A misaligned view, odd K: scalar loads */
      {33, 257, 17, 1, 0, 0, 0, 0, 0},   /* one row and one column past a tile */
      {256, 256, 256, 2, 0, 0, 1, 1, 0}, /* both transposed, batched, whole tiles */
  };
  test_seed(77);
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) check_tiled_matmul(&shapes[i]);
}

/* Causal attention with heads of 96 and 128 dims (two 64-row query blocks,
 * grouped KV heads), within f32 rounding of the CPU: on the 128-dim flash
 * kernel on a GPU adapter, the one-row kernel on lavapipe unless
 * RLX_WG_FLASH128=1 (the ctest entry test_webgpu_flash128; lavapipe takes
 * minutes to compile that kernel, so only that entry runs it there). */
TEST(flash_attention_wide_heads) {
  const int32_t dims[2] = {96, 128};
  const char* forced = getenv("RLX_WG_FLASH128");
  for (int t = 0; t < 2; t++) {
    const int64_t B = 1, S = 70, H = 2, D = dims[t];
    rlx_attention_desc d = {0};
    d.num_heads = (int32_t)H;
    d.num_kv_heads = 1;
    d.head_dim = (int32_t)D;
    d.layout = RLX_LAYOUT_BSHD;
    d.mask = RLX_MASK_CAUSAL;
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_dim qs[4] = {B, S, H, D}, ks[4] = {B, S, 1, D};
    rlx_tensor q, k, v, y;
    rlx_graph_add_input(g, "q", RLX_F32, qs, 4, &q);
    rlx_graph_add_input(g, "k", RLX_F32, ks, 4, &k);
    rlx_graph_add_input(g, "v", RLX_F32, ks, 4, &v);
    rlx_graph_add_attention(g, q, k, v, RLX_NONE, &d, &y);
    rlx_graph_set_outputs(g, &y, 1);
    rlx_exec *gpu = test_compile_on(g, "webgpu", NULL), *cpu = test_compile_on(g, "cpu", NULL);
    CHECK(gpu && cpu);
    const int64_t nq = B * S * H * D, nk = B * S * D;
    float* data = malloc(sizeof(float) * (size_t)(nq + 2 * nk));
    test_seed(90 + t);
    test_fill_f32(data, nq + 2 * nk, -2, 2);
    rlx_exec* both[2] = {gpu, cpu};
    for (int e = 0; e < 2 && gpu && cpu; e++) {
      CHECK_OK_E(both[e], rlx_exec_set_input(both[e], "q", RLX_F32, qs, 4, data, sizeof(float) * (size_t)nq));
      CHECK_OK_E(both[e], rlx_exec_set_input(both[e], "k", RLX_F32, ks, 4, data + nq, sizeof(float) * (size_t)nk));
      CHECK_OK_E(both[e], rlx_exec_set_input(both[e], "v", RLX_F32, ks, 4, data + nq + nk, sizeof(float) * (size_t)nk));
      CHECK_OK_E(both[e], rlx_exec_run(both[e]));
    }
    if (gpu && cpu) CHECK_MSG(test_outputs_match(gpu, cpu, 0, 1e-5), "head dim %d", dims[t]);
#ifdef RLX_HAVE_WEBGPU
    rlx_wg_stats st;
    memset(&st, 0, sizeof st);
    const char* off = getenv("RLX_WG_NO_FAST");
    CHECK(gpu && record_stats(gpu, &st));
    if (!(off && *off == '1') && !getenv("RLX_WG_MAX_BINDING") && forced && strcmp(forced, "1") == 0)
      CHECK_MSG(st.fast_steps >= 1, "head dim %d: attention not on the flash kernel", dims[t]);
#endif
    free(data);
    rlx_exec_destroy(gpu);
    rlx_exec_destroy(cpu);
    rlx_graph_destroy(g);
  }
}

int main(void) {
  if (!webgpu_available()) return 77;
  RUN(windows_and_staging_match_cpu);
  RUN(subword_stores);
  RUN(fast_kernels_match_cpu);
  RUN(softmax_rows_special_values);
  RUN(gemv_shapes_match_cpu);
  RUN(tiled_matmul_exact);
  RUN(flash_attention_wide_heads);
  return test_summary();
}
