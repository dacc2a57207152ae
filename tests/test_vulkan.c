/* Vulkan backend specifics (the op-by-op numerics are test_parity's job;
 * what every device promises, test_contract's): barriers derived from byte
 * ranges, command-buffer segments around a host step, half storage through
 * a chain, matmuls past one tile, and arenas too large for one allocation.
 * Every result is compared with the CPU backend on the same inputs.
 *
 * Exit 77 (ctest SKIP, "SKIP vulkan (...)") when the backend is not built or
 * cannot start. */
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

/* f64 arithmetic has no shader: it runs on the host fallback, which splits
 * the recording into two GPU segments, and still matches the CPU. */
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

/* An arena beyond the device's memory (8 TiB here: more than any device
 * has) is a clear compile error, not an allocation that takes the host's
 * memory. Arenas beyond one binding run through windows, beyond one
 * allocation through chunks (test_vulkan_fast.c). */
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

int main(void) {
  if (!vulkan_available()) return 77;
  RUN(barriers_follow_byte_ranges);
  RUN(chain_gets_a_barrier_per_dependency);
  RUN(host_fallback_between_segments);
  RUN(half_storage_chain);
  RUN(matmul_multi_tile);
  RUN(oversized_arena_is_refused);
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
