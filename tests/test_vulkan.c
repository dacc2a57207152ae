/* Vulkan backend specifics (the op-by-op numerics are test_parity's job):
 * barriers derived from byte ranges, command buffers resubmitted across
 * runs, handles fed device-to-device (whole output and one row), active
 * extent (a second recording, cached), selective readback, per-run seed,
 * run-time index errors that leave the executable usable, the host
 * fallback, and arenas too large for one binding. Every result is compared
 * with the CPU backend on the same inputs.
 *
 * Skipped (exit 0, "SKIP") when the backend is not built or cannot start. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "runtime/executable.h"
#ifdef RLX_HAVE_VULKAN
#include "backends/vulkan/vk_backend.h"
#endif

static int vulkan_available(void) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    rlx_device_get(i, &info);
    if (strcmp(info.name, "vulkan") == 0) {
      if (!info.available) printf("SKIP vulkan (%s)\n", info.detail);
      return info.available;
    }
  }
  return 0;
}

#ifdef RLX_HAVE_VULKAN
/* Records the steps of e's current binding in a fresh Vulkan backend exec
 * and returns its stats (barriers, dispatches, host steps). */
static int record_stats(rlx_exec* e, rlx_vk_stats* st) {
  const rlx_step_list* steps = NULL;
  const rlx_plan* plan = NULL;
  if (rlx_exec_steps(e, &steps, &plan) != RLX_OK || !steps) return 0;
  rlx_error err;
  rlx_backend_exec* be = NULL;
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  if (rlx_backend_vulkan.create(steps, plan->arena_bytes, &o, &err, &be) != RLX_OK) {
    fprintf(stderr, "create: %s\n", err.msg);
    return 0;
  }
  rlx_vk_exec_stats(be, st);
  rlx_backend_vulkan.destroy(be);
  return 1;
}
#endif

/* Three independent unary ops need no barrier between them; the add that
 * consumes two of them needs exactly one. */
TEST(barriers_follow_byte_ranges) {
#ifdef RLX_HAVE_VULKAN
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {5, 7};
  rlx_tensor x, y, z, a, b, c, d;
  rlx_graph_add_input(g, "x", RLX_F32, s, 2, &x);
  rlx_graph_add_input(g, "y", RLX_F32, s, 2, &y);
  rlx_graph_add_input(g, "z", RLX_F32, s, 2, &z);
  rlx_graph_add_activation(g, RLX_ACT_RELU, x, &a);
  rlx_graph_add_activation(g, RLX_ACT_TANH, y, &b);
  rlx_graph_add_activation(g, RLX_ACT_EXP, z, &c);
  rlx_graph_add_binary(g, RLX_BIN_ADD, a, b, &d);
  rlx_tensor outs[2] = {c, d};
  rlx_graph_set_outputs(g, outs, 2);
  rlx_exec* e = test_compile_on(g, "vulkan", NULL);
  CHECK(e != NULL);
  rlx_vk_stats st;
  CHECK(record_stats(e, &st));
  CHECK_MSG(st.dispatches == 4, "dispatches %d", st.dispatches);
  CHECK_MSG(st.barriers == 1, "barriers %d", st.barriers);
  CHECK(st.segments == 1 && st.host_steps == 0);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
#endif
}

/* A chain of in-order dependent steps gets a barrier before each consumer. */
TEST(chain_gets_a_barrier_per_dependency) {
#ifdef RLX_HAVE_VULKAN
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {33};
  rlx_tensor x, t;
  rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x);
  t = x;
  for (int i = 0; i < 4; i++) rlx_graph_add_activation(g, RLX_ACT_SIN, t, &t);
  rlx_graph_set_outputs(g, &t, 1);
  rlx_exec* e = test_compile_on(g, "vulkan", NULL);
  CHECK(e != NULL);
  rlx_vk_stats st;
  CHECK(record_stats(e, &st));
  CHECK_MSG(st.dispatches == 4 && st.barriers == 3, "dispatches %d barriers %d", st.dispatches,
            st.barriers);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
#endif
}

/* y = softmax(x W + b): rerun with fresh inputs each time (the recorded
 * command buffer is resubmitted), read only output 1 of two. */
TEST(resubmit_and_selective_readback) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim xs[2] = {6, 13}, ws[2] = {13, 9}, bs[1] = {9};
  rlx_tensor x, w, b, h, y;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_param(g, "w", RLX_F32, ws, 2, &w);
  rlx_graph_add_param(g, "b", RLX_F32, bs, 1, &b);
  rlx_graph_add_fused_matmul_bias_act(g, x, w, b, 0, 0, RLX_ACT_GELU, &h);
  rlx_graph_add_softmax(g, h, -1, &y);
  rlx_tensor outs[2] = {h, y};
  rlx_graph_set_outputs(g, outs, 2);
  rlx_exec *v = test_compile_on(g, "vulkan", NULL), *c = test_compile_on(g, "cpu", NULL);
  CHECK(v && c);
  float xd[6 * 13], wd[13 * 9], bd[9];
  test_seed(7);
  test_fill_f32(wd, 13 * 9, -1, 1);
  test_fill_f32(bd, 9, -1, 1);
  rlx_exec* both[2] = {v, c};
  for (int k = 0; k < 2; k++) {
    CHECK_OK_E(both[k], rlx_exec_set_param(both[k], "w", RLX_F32, wd, sizeof wd));
    CHECK_OK_E(both[k], rlx_exec_set_param(both[k], "b", RLX_F32, bd, sizeof bd));
  }
  int32_t sel = 1;
  CHECK_OK_E(v, rlx_exec_select_outputs(v, &sel, 1));
  for (int run = 0; run < 3; run++) {
    test_fill_f32(xd, 6 * 13, -2, 2);
    for (int k = 0; k < 2; k++) {
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, xs, 2, xd, sizeof xd));
      CHECK_OK_E(both[k], rlx_exec_run(both[k]));
    }
    CHECK(test_outputs_match(v, c, 1, 1e-5));
  }
  float tmp[6 * 9];
  CHECK(rlx_exec_read_output(v, 0, RLX_F32, tmp, sizeof tmp) == RLX_FAILED_PRECONDITION);
  rlx_exec_destroy(v);
  rlx_exec_destroy(c);
  rlx_graph_destroy(g);
}

/* A KV-cache style handle: state' = state * 0.5 + x fed back on the device
 * each run, and one row of a [3, 4] output fed into a [4] input. */
TEST(feeds_device_to_device) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s4[1] = {4}, s34[2] = {3, 4};
  rlx_tensor st, x, half, h, y, r, big;
  float half_f = 0.5f;
  rlx_dim one[1] = {1};
  rlx_graph_add_input(g, "state", RLX_F32, s4, 1, &st);
  rlx_graph_add_input(g, "x", RLX_F32, s4, 1, &x);
  rlx_graph_add_input(g, "row", RLX_F32, s4, 1, &r);
  rlx_graph_add_constant(g, RLX_F32, one, 1, &half_f, 4, &half);
  rlx_graph_add_binary(g, RLX_BIN_MUL, st, half, &h);
  rlx_graph_add_binary(g, RLX_BIN_ADD, h, x, &y);
  rlx_tensor rr;
  rlx_graph_add_activation(g, RLX_ACT_NEG, r, &rr);
  rlx_graph_add_expand(g, rr, s34, 2, &big);
  rlx_tensor outs[2] = {y, big};
  rlx_graph_set_outputs(g, outs, 2);
  rlx_exec *v = test_compile_on(g, "vulkan", NULL), *c = test_compile_on(g, "cpu", NULL);
  CHECK(v && c);
  float st0[4] = {1, 2, 3, 4}, x0[4] = {0.25f, -1, 3, 0.5f}, row0[4] = {5, 6, 7, 8};
  rlx_exec* both[2] = {v, c};
  for (int k = 0; k < 2; k++) {
    CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "state", RLX_F32, s4, 1, st0, 16));
    CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, s4, 1, x0, 16));
    CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "row", RLX_F32, s4, 1, row0, 16));
    CHECK_OK_E(both[k], rlx_exec_feed(both[k], "state", 0, -1));
    CHECK_OK_E(both[k], rlx_exec_feed(both[k], "row", 1, 1));
    for (int i = 0; i < 4; i++) CHECK_OK_E(both[k], rlx_exec_run(both[k]));
  }
  CHECK(test_outputs_match(v, c, 0, 0));
  CHECK(test_outputs_match(v, c, 1, 0));
  float row[4];
  CHECK_OK_E(v, rlx_exec_read_output_row(v, 1, 2, RLX_F32, row, 16));
  for (int i = 0; i < 4; i++) CHECK(row[i] == row0[i]); /* negated an even number of times */
  rlx_exec_destroy(v);
  rlx_exec_destroy(c);
  rlx_graph_destroy(g);
}

/* Compiled at n = 8, run at 3, 5, 8 and 3 again; every run matches the CPU. */
TEST(active_extent_recordings) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim n;
  rlx_graph_symbol(g, "n", &n);
  rlx_dim xs[2] = {n, 6};
  rlx_tensor x, y, z;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_log_softmax(g, x, -1, &y);
  int32_t axes[1] = {1};
  rlx_graph_add_reduce(g, RLX_RED_MAX, y, axes, 1, 0, &z);
  rlx_tensor outs[2] = {y, z};
  rlx_graph_set_outputs(g, outs, 2);
  const char* names[1] = {"n"};
  int64_t sizes[1] = {8};
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.symbol_names = names;
  o.symbol_sizes = sizes;
  o.n_symbols = 1;
  o.extent_symbol = "n";
  rlx_exec *v = test_compile_on(g, "vulkan", &o), *c = test_compile_on(g, "cpu", &o);
  CHECK(v && c);
  const int64_t extents[4] = {3, 5, 8, 3};
  float xd[8 * 6];
  for (int t = 0; t < 4; t++) {
    int64_t m = extents[t];
    test_fill_f32(xd, m * 6, -3, 3);
    rlx_dim s[2] = {m, 6};
    rlx_exec* both[2] = {v, c};
    for (int k = 0; k < 2; k++) {
      CHECK_OK_E(both[k], rlx_exec_set_active_extent(both[k], m));
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, s, 2, xd, sizeof(float) * (size_t)(m * 6)));
      CHECK_OK_E(both[k], rlx_exec_run(both[k]));
    }
    int64_t shape[8];
    int32_t rank;
    CHECK_OK_E(v, rlx_exec_output_type(v, 1, NULL, &rank, shape));
    CHECK(rank == 1 && shape[0] == m);
    CHECK(test_outputs_match(v, c, 0, 1e-5));
    CHECK(test_outputs_match(v, c, 1, 1e-5));
  }
  rlx_exec_destroy(v);
  rlx_exec_destroy(c);
  rlx_graph_destroy(g);
}

/* Same seed, same tokens as the CPU; a new seed per run without recompiling. */
TEST(sample_seed_per_run) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {16, 50};
  rlx_tensor x, y;
  rlx_graph_add_input(g, "logits", RLX_F32, s, 2, &x);
  rlx_graph_add_sample(g, x, 10, 0.9f, 0.8f, &y);
  rlx_graph_set_outputs(g, &y, 1);
  rlx_exec *v = test_compile_on(g, "vulkan", NULL), *c = test_compile_on(g, "cpu", NULL);
  CHECK(v && c);
  float xd[16 * 50];
  test_seed(3);
  test_fill_f32(xd, 16 * 50, -2, 2);
  int differs = 0;
  int64_t first[16];
  for (uint64_t seed = 1; seed <= 4; seed++) {
    int64_t tv[16], tc[16];
    rlx_exec* both[2] = {v, c};
    for (int k = 0; k < 2; k++) {
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "logits", RLX_F32, s, 2, xd, sizeof xd));
      CHECK_OK_E(both[k], rlx_exec_set_seed(both[k], seed * 7919));
      CHECK_OK_E(both[k], rlx_exec_run(both[k]));
    }
    CHECK_OK_E(v, rlx_exec_read_output(v, 0, RLX_I64, tv, sizeof tv));
    CHECK_OK_E(c, rlx_exec_read_output(c, 0, RLX_I64, tc, sizeof tc));
    for (int r = 0; r < 16; r++) CHECK_MSG(tv[r] == tc[r], "seed %d row %d: %lld vs %lld", (int)seed, r, (long long)tv[r], (long long)tc[r]);
    if (seed == 1) memcpy(first, tv, sizeof first);
    else differs |= memcmp(first, tv, sizeof first) != 0;
  }
  CHECK(differs);
  rlx_exec_destroy(v);
  rlx_exec_destroy(c);
  rlx_graph_destroy(g);
}

/* An out-of-range gather index fails the run naming the node; a good index
 * afterwards runs fine on the same executable. */
TEST(bad_index_is_an_error_not_a_crash) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim ds[2] = {5, 3}, is[1] = {2};
  rlx_tensor d, i, y;
  rlx_graph_add_input(g, "data", RLX_F32, ds, 2, &d);
  rlx_graph_add_input(g, "idx", RLX_I64, is, 1, &i);
  rlx_graph_add_gather(g, d, i, 0, &y);
  rlx_graph_set_name(g, y, "lookup");
  rlx_graph_set_outputs(g, &y, 1);
  rlx_exec* v = test_compile_on(g, "vulkan", NULL);
  CHECK(v != NULL);
  float dd[15];
  for (int k = 0; k < 15; k++) dd[k] = (float)k;
  int64_t bad[2] = {1, 5}, good[2] = {-1, 2};
  CHECK_OK_E(v, rlx_exec_set_input(v, "data", RLX_F32, ds, 2, dd, sizeof dd));
  CHECK_OK_E(v, rlx_exec_set_input(v, "idx", RLX_I64, is, 1, bad, sizeof bad));
  CHECK(rlx_exec_run(v) == RLX_OUT_OF_RANGE);
  CHECK_MSG(strstr(rlx_exec_last_error(v), "lookup") && strstr(rlx_exec_last_error(v), "5"), "%s",
            rlx_exec_last_error(v));
  CHECK_OK_E(v, rlx_exec_set_input(v, "idx", RLX_I64, is, 1, good, sizeof good));
  CHECK_OK_E(v, rlx_exec_run(v));
  float out[6];
  CHECK_OK_E(v, rlx_exec_read_output(v, 0, RLX_F32, out, sizeof out));
  for (int k = 0; k < 3; k++) CHECK(out[k] == dd[12 + k] && out[3 + k] == dd[6 + k]);
  rlx_exec_destroy(v);
  rlx_graph_destroy(g);
}

/* f64 arithmetic has no shader: it runs on the host fallback between two
 * GPU segments and still matches the CPU. */
TEST(host_fallback_between_segments) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {4, 9};
  rlx_tensor x, t, x64, m, back, y;
  rlx_graph_add_input(g, "x", RLX_F32, s, 2, &x);
  rlx_graph_add_activation(g, RLX_ACT_TANH, x, &t);
  rlx_graph_add_cast(g, t, RLX_F64, &x64);
  rlx_graph_add_binary(g, RLX_BIN_MUL, x64, x64, &m);
  rlx_graph_add_cast(g, m, RLX_F32, &back);
  rlx_graph_add_softmax(g, back, -1, &y);
  rlx_graph_set_outputs(g, &y, 1);
  rlx_exec *v = test_compile_on(g, "vulkan", NULL), *c = test_compile_on(g, "cpu", NULL);
  CHECK(v && c);
  float xd[36];
  test_fill_f32(xd, 36, -2, 2);
  rlx_exec* both[2] = {v, c};
  for (int k = 0; k < 2; k++) {
    CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, s, 2, xd, sizeof xd));
    CHECK_OK_E(both[k], rlx_exec_run(both[k]));
    CHECK_OK_E(both[k], rlx_exec_run(both[k]));
  }
  CHECK(test_outputs_match(v, c, 0, 1e-6));
  const rlx_step_list* steps = NULL;
  const rlx_plan* plan = NULL;
  CHECK_OK_E(v, rlx_exec_steps(v, &steps, &plan));
  int host = 0;
  for (int32_t k = 0; k < steps->n; k++) host += steps->steps[k].kernel == RLX_K_HOST;
  CHECK(host == 1);
#ifdef RLX_HAVE_VULKAN
  rlx_vk_stats st;
  CHECK(record_stats(v, &st));
  CHECK_MSG(st.segments == 2 && st.host_steps == 1, "segments %d host %d", st.segments, st.host_steps);
#endif
  rlx_exec_destroy(v);
  rlx_exec_destroy(c);
  rlx_graph_destroy(g);
}

/* Half-precision storage through the whole chain (f16 and bf16). */
TEST(half_storage_chain) {
  for (int v16 = 0; v16 < 2; v16++) {
    rlx_dtype t = v16 ? RLX_BF16 : RLX_F16;
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_dim xs[3] = {2, 5, 16}, ws[2] = {16, 8};
    rlx_tensor x, w, xh, wh, h, r, y;
    rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x);
    rlx_graph_add_input(g, "w", RLX_F32, ws, 2, &w);
    rlx_graph_add_cast(g, x, t, &xh);
    rlx_graph_add_cast(g, w, t, &wh);
    rlx_graph_add_matmul(g, xh, wh, 0, 0, &h);
    rlx_graph_add_activation(g, RLX_ACT_SILU, h, &r);
    rlx_graph_add_cast(g, r, RLX_F32, &y);
    rlx_graph_set_outputs(g, &y, 1);
    rlx_exec *v = test_compile_on(g, "vulkan", NULL), *c = test_compile_on(g, "cpu", NULL);
    CHECK(v && c);
    float xd[160], wd[128];
    test_fill_f32(xd, 160, -1, 1);
    test_fill_f32(wd, 128, -1, 1);
    rlx_exec* both[2] = {v, c};
    for (int k = 0; k < 2; k++) {
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, xs, 3, xd, sizeof xd));
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "w", RLX_F32, ws, 2, wd, sizeof wd));
      CHECK_OK_E(both[k], rlx_exec_run(both[k]));
    }
    CHECK(test_outputs_match(v, c, 0, 1e-2));
    rlx_exec_destroy(v);
    rlx_exec_destroy(c);
    rlx_graph_destroy(g);
  }
}

/* An arena beyond what one allocation holds (8 TiB here: more than any
 * device's maxMemoryAllocationSize or memory) is a clear compile error.
 * Arenas beyond one binding but within one allocation run through windows
 * (test_vulkan_fast.c). */
TEST(oversized_arena_is_refused) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {(rlx_dim)1 << 40}; /* 4 TiB of f32 */
  rlx_tensor x, y;
  rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x);
  rlx_graph_add_activation(g, RLX_ACT_EXP, x, &y);
  rlx_graph_set_outputs(g, &y, 1);
  rlx_exec* e = NULL;
  CHECK(rlx_compile(g, "vulkan", NULL, &e) == RLX_RESOURCE_EXHAUSTED);
  CHECK_MSG(strstr(rlx_graph_last_error(g), "arena") != NULL, "%s", rlx_graph_last_error(g));
  rlx_graph_destroy(g);
}

/* A clone owns its arena: running one does not disturb the other. */
TEST(clone_has_its_own_arena) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {10};
  rlx_tensor x, y;
  rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x);
  rlx_graph_add_activation(g, RLX_ACT_SQRT, x, &y);
  rlx_graph_set_outputs(g, &y, 1);
  rlx_exec *v = test_compile_on(g, "vulkan", NULL), *w = NULL;
  CHECK(v != NULL);
  CHECK_OK_E(v, rlx_exec_clone(v, &w));
  float a[10], b[10], oa[10], ob[10];
  for (int i = 0; i < 10; i++) { a[i] = (float)(i * i); b[i] = (float)(4 * i * i); }
  CHECK_OK_E(v, rlx_exec_set_input(v, "x", RLX_F32, s, 1, a, sizeof a));
  CHECK_OK_E(w, rlx_exec_set_input(w, "x", RLX_F32, s, 1, b, sizeof b));
  CHECK_OK_E(v, rlx_exec_run(v));
  CHECK_OK_E(w, rlx_exec_run(w));
  CHECK_OK_E(v, rlx_exec_read_output(v, 0, RLX_F32, oa, sizeof oa));
  CHECK_OK_E(w, rlx_exec_read_output(w, 0, RLX_F32, ob, sizeof ob));
  for (int i = 0; i < 10; i++) CHECK(fabsf(oa[i] - (float)i) < 1e-5f && fabsf(ob[i] - 2.0f * (float)i) < 1e-5f);
  rlx_exec_destroy(w);
  rlx_exec_destroy(v);
  rlx_graph_destroy(g);
}

/* Shapes past one 64x64 tile, K past several slabs, a broadcast batch and
 * both operands transposed, with a bias + GELU epilogue. */
TEST(matmul_multi_tile) {
  for (int v = 0; v < 2; v++) {
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    int64_t M = 130, N = 71, K = 97;
    rlx_dim as[3] = {2, v ? K : M, v ? M : K}, bs[2] = {v ? N : K, v ? K : N}, cs[1] = {N};
    rlx_tensor a, b, bias, y;
    rlx_graph_add_input(g, "a", RLX_F32, as, 3, &a);
    rlx_graph_add_input(g, "b", RLX_F32, bs, 2, &b);
    rlx_graph_add_input(g, "bias", RLX_F32, cs, 1, &bias);
    rlx_graph_add_fused_matmul_bias_act(g, a, b, bias, v, v, RLX_ACT_GELU, &y);
    rlx_graph_set_outputs(g, &y, 1);
    rlx_exec *e = test_compile_on(g, "vulkan", NULL), *c = test_compile_on(g, "cpu", NULL);
    CHECK(e && c);
    size_t na = (size_t)(2 * M * K), nb = (size_t)(K * N);
    float *ad = malloc(na * 4), *bd = malloc(nb * 4), cd[71];
    test_fill_f32(ad, (int64_t)na, -1, 1);
    test_fill_f32(bd, (int64_t)nb, -1, 1);
    test_fill_f32(cd, N, -1, 1);
    rlx_exec* both[2] = {e, c};
    for (int k = 0; k < 2; k++) {
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "a", RLX_F32, as, 3, ad, na * 4));
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "b", RLX_F32, bs, 2, bd, nb * 4));
      CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "bias", RLX_F32, cs, 1, cd, sizeof cd));
      CHECK_OK_E(both[k], rlx_exec_run(both[k]));
    }
    free(ad);
    free(bd);
    CHECK(test_outputs_match(e, c, 0, 1e-5));
    rlx_exec_destroy(e);
    rlx_exec_destroy(c);
    rlx_graph_destroy(g);
  }
}

/* debug_nans: the run fails naming the first node whose output is not finite. */
TEST(debug_nans_names_node) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {16};
  rlx_tensor x, y, z;
  rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x);
  rlx_graph_add_activation(g, RLX_ACT_LOG, x, &y);
  rlx_graph_set_name(g, y, "the_log");
  rlx_graph_add_activation(g, RLX_ACT_EXP, y, &z);
  rlx_graph_set_outputs(g, &z, 1);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.debug_nans = 1;
  rlx_exec* e = test_compile_on(g, "vulkan", &o);
  CHECK(e);
  float xd[16];
  for (int i = 0; i < 16; i++) xd[i] = (float)(i + 1);
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s, 1, xd, sizeof xd));
  CHECK_OK_E(e, rlx_exec_run(e));
  xd[5] = -1.0f;
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s, 1, xd, sizeof xd));
  CHECK(rlx_exec_run(e) == RLX_OUT_OF_RANGE);
  CHECK_MSG(strstr(rlx_exec_last_error(e), "the_log") != NULL, "message: %s", rlx_exec_last_error(e));
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* Host count of `op` in the dispatch report, or -1. */
static int report_host_count(rlx_exec* e, const char* op) {
  char* text = NULL;
  if (rlx_exec_report(e, &text) != RLX_OK) return -1;
  int host = -1;
  for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char name[64];
    int native, fused, dec, h;
    if (sscanf(line, " %63s %d %d %d %d", name, &native, &fused, &dec, &h) == 5 &&
        strcmp(name, op) == 0)
      host = h;
  }
  free(text);
  return host;
}

/* Ops forced to the host (RLX_VK_HOST_OPS) stay exact, multi-step ones
 * (Concat: one copy per input, ScatterAdd: copy + accumulate) included, and
 * the dispatch report says so. */
TEST(forced_host_ops_and_report) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[2] = {5, 6}, is[2] = {2, 6};
  rlx_tensor x, y, cat, sm, idx, src, sc;
  rlx_graph_add_input(g, "x", RLX_F32, s, 2, &x);
  rlx_graph_add_input(g, "y", RLX_F32, s, 2, &y);
  rlx_graph_add_input(g, "src", RLX_F32, is, 2, &src);
  int64_t id[12] = {0, 1, 2, 3, 4, 0, 4, 4, 3, 1, 1, 0};
  rlx_graph_add_constant(g, RLX_I64, is, 2, id, sizeof id, &idx);
  rlx_tensor parts[3] = {x, y, x};
  rlx_graph_add_concat(g, parts, 3, 1, &cat);
  rlx_graph_add_softmax(g, cat, -1, &sm);
  rlx_graph_add_scatter_add(g, x, idx, src, 0, &sc);
  rlx_tensor outs[2] = {sm, sc};
  rlx_graph_set_outputs(g, outs, 2);
  setenv("RLX_VK_HOST_OPS", "concat,scatter_add", 1);
  rlx_exec* v = test_compile_on(g, "vulkan", NULL);
  unsetenv("RLX_VK_HOST_OPS");
  rlx_exec* c = test_compile_on(g, "cpu", NULL);
  CHECK(v && c);
  float xd[30], yd[30], sd[12];
  test_fill_f32(xd, 30, -2, 2);
  test_fill_f32(yd, 30, -2, 2);
  test_fill_f32(sd, 12, -2, 2);
  rlx_exec* both[2] = {v, c};
  for (int k = 0; k < 2; k++) {
    CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "x", RLX_F32, s, 2, xd, sizeof xd));
    CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "y", RLX_F32, s, 2, yd, sizeof yd));
    CHECK_OK_E(both[k], rlx_exec_set_input(both[k], "src", RLX_F32, is, 2, sd, sizeof sd));
    CHECK_OK_E(both[k], rlx_exec_run(both[k]));
  }
  CHECK(test_outputs_match(v, c, 0, 1e-6));
  CHECK(test_outputs_match(v, c, 1, 1e-6));
  CHECK_MSG(report_host_count(v, "concat") == 1, "concat host %d", report_host_count(v, "concat"));
  CHECK(report_host_count(v, "scatter_add") == 1);
  CHECK(report_host_count(v, "softmax") == 0);
  rlx_exec_destroy(v);
  rlx_exec_destroy(c);
  rlx_graph_destroy(g);
}

int main(void) {
  if (!vulkan_available()) return 0;
  RUN(barriers_follow_byte_ranges);
  RUN(chain_gets_a_barrier_per_dependency);
  RUN(resubmit_and_selective_readback);
  RUN(feeds_device_to_device);
  RUN(active_extent_recordings);
  RUN(sample_seed_per_run);
  RUN(bad_index_is_an_error_not_a_crash);
  RUN(host_fallback_between_segments);
  RUN(half_storage_chain);
  RUN(matmul_multi_tile);
  RUN(oversized_arena_is_refused);
  RUN(clone_has_its_own_arena);
  RUN(debug_nans_names_node);
  RUN(forced_host_ops_and_report);
#ifdef RLX_HAVE_VULKAN
  if (getenv("RLX_VK_VALIDATION")) {
    test_checks++;
    if (rlx_vk_validation_messages() != 0) {
      test_failures++;
      fprintf(stderr, "%llu Vulkan validation message(s)\n",
              (unsigned long long)rlx_vk_validation_messages());
    }
  }
#endif
  return test_summary();
}
