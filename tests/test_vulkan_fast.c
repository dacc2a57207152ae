/* Vulkan's vectorised kernels and arena windows, against the CPU backend:
 *  - eltwise_vec: dense / scalar / leading- and trailing-broadcast inputs,
 *    float casts, raw same-dtype copies (4-, 2- and 8-byte elements), a
 *    partial last quad, f16 and bf16 storage;
 *  - rows: softmax / log-softmax / LayerNorm / RmsNorm (plain and fused
 *    residual + bias writing the sum), rows held in registers and rows long
 *    enough to be streamed, f16 storage;
 *  - windows: with RLX_VK_MAX_BINDING forcing a window smaller than the
 *    arena (and RLX_VK_SET_SPAN several descriptor sets), steps run through
 *    windows placed by their dynamic offsets, steps whose operands lie too
 *    far apart through the staging buffer, and a step whose own bytes exceed
 *    a window on the host fallback;
 *  - chunks: with RLX_VK_MAX_CHUNK forcing an arena of several buffers,
 *    tensors straddling a chunk boundary (inputs uploaded, outputs
 *    downloaded, steps staged with copies split per chunk), steps inside
 *    one chunk through windows, and the host fallback's transfers.
 * Each case also checks, through the backend's stats, that the kernel under
 * test is the one that ran. Skipped (exit 0, "SKIP") without Vulkan. */
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
  printf("SKIP vulkan (not built)\n");
  return 0;
}

#ifdef RLX_HAVE_VULKAN
typedef struct input_spec {
  const char* name;
  int32_t rank;
  rlx_dim shape[4];
} input_spec;

/* Stats of a fresh Vulkan backend exec over e's steps. */
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

static double* read_all(rlx_exec* e, int32_t i, int64_t* n_out) {
  int32_t rank;
  int64_t shape[RLX_MAX_RANK], n = 1;
  if (rlx_exec_output_type(e, i, NULL, &rank, shape) != RLX_OK) return NULL;
  for (int32_t d = 0; d < rank; d++) n *= shape[d];
  double* out = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (out && rlx_exec_read_output(e, i, RLX_F64, out, sizeof(double) * (size_t)n) != RLX_OK) {
    free(out);
    return NULL;
  }
  *n_out = n;
  return out;
}

/* Runs g on Vulkan and the CPU with the same random inputs; every output
 * must agree within tol (relative L2). Returns the Vulkan stats through st,
 * or 0 on any failure (reported). */
static int run_and_compare(rlx_graph* g, const input_spec* ins, int n_ins, double tol,
                           rlx_vk_stats* st) {
  rlx_exec *v = NULL, *c = NULL;
  int ok = rlx_compile(g, "vulkan", NULL, &v) == RLX_OK && rlx_compile(g, "cpu", NULL, &c) == RLX_OK;
  if (!ok) fprintf(stderr, "compile: %s\n", rlx_graph_last_error(g));
  for (int k = 0; ok && k < n_ins; k++) {
    int64_t n = 1;
    for (int32_t d = 0; d < ins[k].rank; d++) n *= ins[k].shape[d];
    float* data = malloc(sizeof(float) * (size_t)n);
    ok = data != NULL;
    if (ok) test_fill_f32(data, n, -3, 3);
    rlx_exec* both[2] = {v, c};
    for (int b = 0; ok && b < 2; b++) {
      ok = rlx_exec_set_input(both[b], ins[k].name, RLX_F32, ins[k].shape, ins[k].rank, data,
                              sizeof(float) * (size_t)n) == RLX_OK;
      if (!ok) fprintf(stderr, "set_input %s: %s\n", ins[k].name, rlx_exec_last_error(both[b]));
    }
    free(data);
  }
  if (ok && (rlx_exec_run(v) != RLX_OK || rlx_exec_run(c) != RLX_OK)) {
    fprintf(stderr, "run: %s / %s\n", rlx_exec_last_error(v), rlx_exec_last_error(c));
    ok = 0;
  }
  int32_t n_out = ok ? rlx_exec_output_count(v) : 0;
  for (int32_t i = 0; ok && i < n_out; i++) {
    int64_t na = 0, nb = 0;
    double *x = read_all(v, i, &na), *y = read_all(c, i, &nb);
    ok = x && y && na == nb;
    double err = ok ? test_rel_l2(x, y, na) : INFINITY;
    if (err > tol) {
      fprintf(stderr, "output %d: rel L2 %g > %g\n", i, err, tol);
      ok = 0;
    }
    free(x);
    free(y);
  }
  if (ok) ok = record_stats(v, st);
  rlx_exec_destroy(v);
  rlx_exec_destroy(c);
  return ok;
}
#endif

/* Elementwise steps of every shape class the vectorised kernel takes. */
TEST(eltwise_vec_matches_cpu) {
#ifdef RLX_HAVE_VULKAN
  for (int cs = 0; cs < 10; cs++) {
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    input_spec in[2] = {{"a", 2, {37, 64}}, {"b", 2, {37, 64}}};
    int n_in = 2, want_vec = 1;
    double tol = 1e-6;
    rlx_tensor a, b, y, t, u;
    switch (cs) {
      case 0: break;                                   /* dense + dense */
      case 1: in[1] = (input_spec){"b", 1, {64}}; break; /* i % 64 */
      case 2: in[1] = (input_spec){"b", 2, {37, 1}}; break; /* i / 64 */
      case 3: in[1] = (input_spec){"b", 1, {1}}; break;     /* scalar */
      case 4: in[0] = (input_spec){"a", 1, {4099}}; in[1] = in[0]; in[1].name = "b"; break; /* tail */
      default: break;
    }
    rlx_graph_add_input(g, in[0].name, RLX_F32, in[0].shape, in[0].rank, &a);
    rlx_graph_add_input(g, in[1].name, RLX_F32, in[1].shape, in[1].rank, &b);
    if (cs <= 4) {
      rlx_graph_add_binary(g, cs == 2 ? RLX_BIN_SUB : RLX_BIN_MUL, a, b, &t);
      rlx_graph_add_activation(g, RLX_ACT_GELU, t, &y);
      want_vec = 2;
    } else if (cs <= 6) { /* f16 / bf16 storage: casts, add, silu, cast back */
      rlx_dtype h = cs == 5 ? RLX_F16 : RLX_BF16;
      rlx_graph_add_cast(g, a, h, &t);
      rlx_graph_add_cast(g, b, h, &u);
      rlx_graph_add_binary(g, RLX_BIN_ADD, t, u, &t);
      rlx_graph_add_activation(g, RLX_ACT_SILU, t, &t);
      rlx_graph_add_cast(g, t, RLX_F32, &y);
      tol = 1e-2;
      want_vec = 5;
    } else if (cs == 7) { /* raw copies: rows expanded, a column expanded, f16 rows */
      rlx_dim big[2] = {37, 64}, rowsz[2] = {1, 64}, colsz[2] = {37, 1};
      rlx_tensor r, c2, h, hr, s1, s2;
      rlx_graph_add_narrow(g, b, 0, 5, 1, &r);
      rlx_graph_add_reshape(g, r, rowsz, 2, &r);
      rlx_graph_add_expand(g, r, big, 2, &s1);
      rlx_graph_add_narrow(g, a, 1, 3, 1, &c2);
      rlx_graph_add_reshape(g, c2, colsz, 2, &c2);
      rlx_graph_add_expand(g, c2, big, 2, &s2);
      rlx_graph_add_cast(g, r, RLX_F16, &h);
      rlx_graph_add_expand(g, h, big, 2, &hr);
      rlx_graph_add_cast(g, hr, RLX_F32, &hr);
      rlx_tensor outs[3] = {s1, s2, hr};
      rlx_graph_set_outputs(g, outs, 3);
      tol = 1e-3;
      want_vec = 3;
      y = RLX_NONE;
    } else if (cs == 9) { /* a column expanded 13 wide: quads straddle values (raw copy refused) */
      rlx_dim wide[2] = {37, 13};
      rlx_graph_add_narrow(g, a, 1, 3, 1, &t);
      rlx_graph_add_expand(g, t, wide, 2, &y);
      want_vec = 0;
    } else { /* i64 raw copy (8-byte words) through casts */
      rlx_dim big[2] = {37, 64}, rowsz[2] = {1, 64};
      rlx_tensor i, r, e;
      rlx_graph_add_cast(g, b, RLX_I64, &i);
      rlx_graph_add_narrow(g, i, 0, 0, 1, &r);
      rlx_graph_add_reshape(g, r, rowsz, 2, &r);
      rlx_graph_add_expand(g, r, big, 2, &e);
      rlx_graph_add_cast(g, e, RLX_F32, &y);
      want_vec = 1;
    }
    if (y != RLX_NONE) rlx_graph_set_outputs(g, &y, 1);
    rlx_vk_stats st;
    int ok = run_and_compare(g, in, n_in, tol, &st);
    CHECK_MSG(ok, "case %d", cs);
    CHECK_MSG(st.vec_steps >= want_vec, "case %d: %d vectorised steps, want %d", cs, st.vec_steps,
              want_vec);
    rlx_graph_destroy(g);
  }
#endif
}

/* Softmax / norms over long rows: in registers (<= 8192) and streamed. */
TEST(rows_match_cpu) {
#ifdef RLX_HAVE_VULKAN
  const int64_t cols_of[] = {1024, 4096, 12288};
  for (int cs = 0; cs < 10; cs++) {
    int64_t cols = cols_of[cs % 3];
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    input_spec in[4] = {{"x", 2, {6, cols}}, {"r", 2, {6, cols}}, {"w", 1, {cols}}, {"b", 1, {cols}}};
    rlx_tensor x, r, w, b, y, s;
    for (int k = 0; k < 4; k++) rlx_graph_add_input(g, in[k].name, RLX_F32, in[k].shape, in[k].rank, k == 0 ? &x : k == 1 ? &r : k == 2 ? &w : &b);
    double tol = 1e-5;
    int n_out = 1;
    switch (cs) {
      case 0: case 1: case 2: rlx_graph_add_softmax(g, x, -1, &y); break;
      case 3: rlx_graph_add_log_softmax(g, x, -1, &y); break;
      case 4: rlx_graph_add_layer_norm(g, x, w, b, -1, 1e-5f, &y); break;
      case 5: rlx_graph_add_rms_norm(g, x, w, 1e-6f, &y); break;
      case 6: rlx_graph_add_layer_norm(g, x, RLX_NONE, RLX_NONE, -1, 1e-5f, &y); break;
      case 7: rlx_graph_add_fused_residual_layer_norm(g, x, r, b, w, b, 1e-5f, &y, &s); n_out = 2; break;
      case 8: rlx_graph_add_fused_residual_rms_norm(g, x, r, RLX_NONE, w, 1e-6f, &y, &s); n_out = 2; break;
      default: { /* f16 storage */
        rlx_tensor h;
        rlx_graph_add_cast(g, x, RLX_F16, &h);
        rlx_graph_add_softmax(g, h, -1, &h);
        rlx_graph_add_cast(g, h, RLX_F32, &y);
        tol = 2e-3;
      }
    }
    rlx_tensor outs[2] = {y, s};
    rlx_graph_set_outputs(g, outs, n_out);
    rlx_vk_stats st;
    int ok = run_and_compare(g, in, 4, tol, &st);
    CHECK_MSG(ok, "case %d cols %lld", cs, (long long)cols);
    CHECK_MSG(st.vec_steps >= 1, "case %d: %d vectorised steps", cs, st.vec_steps);
    rlx_graph_destroy(g);
  }
#endif
}

/* A window smaller than the arena: steps placed by their dynamic offsets
 * (over several descriptor sets), steps whose operands lie too far apart
 * run through the staging buffer, a reduction over more bytes than one
 * window on the host fallback; results equal to the CPU's. */
TEST(windowed_arena_matches_cpu) {
#ifdef RLX_HAVE_VULKAN
  setenv("RLX_VK_MAX_BINDING", "12288", 1);
  setenv("RLX_VK_SET_SPAN", "16384", 1);
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  input_spec in[3] = {{"a", 2, {16, 64}}, {"b", 2, {16, 64}}, {"c", 2, {16, 64}}};
  rlx_tensor a, b, c, t1, t2, t3, t4, cat, y;
  rlx_graph_add_input(g, "a", RLX_F32, in[0].shape, 2, &a);
  rlx_graph_add_input(g, "b", RLX_F32, in[1].shape, 2, &b);
  rlx_graph_add_input(g, "c", RLX_F32, in[2].shape, 2, &c);
  rlx_graph_add_binary(g, RLX_BIN_ADD, a, b, &t1);
  rlx_graph_add_activation(g, RLX_ACT_TANH, t1, &t2);
  rlx_graph_add_binary(g, RLX_BIN_MUL, t2, c, &t3);
  rlx_graph_add_softmax(g, t3, -1, &t4);
  rlx_tensor parts[4] = {t1, t2, t3, t4};
  rlx_graph_add_concat(g, parts, 4, 0, &cat); /* 16 KiB: more than one window */
  rlx_graph_add_reduce(g, RLX_RED_SUM, cat, (const int32_t[]){1}, 1, 0, &y);
  rlx_tensor outs[2] = {t4, y};
  rlx_graph_set_outputs(g, outs, 2);
  rlx_vk_stats st;
  int ok = run_and_compare(g, in, 3, 1e-5, &st);
  unsetenv("RLX_VK_MAX_BINDING");
  unsetenv("RLX_VK_SET_SPAN");
  CHECK(ok);
  CHECK_MSG(st.window_bytes == 12288, "window %llu", (unsigned long long)st.window_bytes);
  CHECK_MSG(st.window_host_steps >= 1, "window host steps %d", st.window_host_steps);
  CHECK_MSG(st.staged_steps >= 1, "staged steps %d", st.staged_steps);
  CHECK_MSG(st.dispatches >= 6, "dispatches %d", st.dispatches);
  rlx_graph_destroy(g);
#endif
}

/* An arena of 12 KiB chunks holding 3840-byte tensors and a 15 KiB one
 * that must straddle a chunk boundary (downloaded, written by staged
 * copies, read by a reduction on the host fallback); results equal to the
 * CPU's, and the stats show the chunks, staged steps and windowed steps. */
TEST(chunked_arena_matches_cpu) {
#ifdef RLX_HAVE_VULKAN
  setenv("RLX_VK_MAX_CHUNK", "12288", 1);
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  input_spec in[3] = {{"a", 2, {16, 60}}, {"b", 2, {16, 60}}, {"c", 2, {16, 60}}};
  rlx_tensor a, b, c, t1, t2, t3, t4, cat, y, z;
  rlx_graph_add_input(g, "a", RLX_F32, in[0].shape, 2, &a);
  rlx_graph_add_input(g, "b", RLX_F32, in[1].shape, 2, &b);
  rlx_graph_add_input(g, "c", RLX_F32, in[2].shape, 2, &c);
  rlx_graph_add_binary(g, RLX_BIN_ADD, a, b, &t1);
  rlx_graph_add_activation(g, RLX_ACT_TANH, t1, &t2);
  rlx_graph_add_binary(g, RLX_BIN_MUL, t2, c, &t3);
  rlx_graph_add_softmax(g, t3, -1, &t4);
  rlx_tensor parts[4] = {t1, t2, t3, t4};
  rlx_graph_add_concat(g, parts, 4, 0, &cat); /* 15 KiB: straddles a chunk boundary */
  rlx_graph_add_reduce(g, RLX_RED_SUM, cat, (const int32_t[]){1}, 1, 0, &y);
  rlx_graph_add_activation(g, RLX_ACT_TANH, y, &z); /* 256 bytes in, out: one chunk */
  rlx_tensor outs[4] = {t4, cat, y, z};
  rlx_graph_set_outputs(g, outs, 4);
  rlx_vk_stats st;
  int ok = run_and_compare(g, in, 3, 1e-5, &st);
  unsetenv("RLX_VK_MAX_CHUNK");
  CHECK(ok);
  CHECK_MSG(st.chunks >= 2 && st.chunk_bytes == 12288, "%d chunks of %llu", st.chunks,
            (unsigned long long)st.chunk_bytes);
  CHECK_MSG(st.window_bytes == 12288, "window %llu", (unsigned long long)st.window_bytes);
  CHECK_MSG(st.staged_steps >= 1, "staged steps %d", st.staged_steps);
  CHECK_MSG(st.window_host_steps >= 1, "window host steps %d", st.window_host_steps);
  CHECK_MSG(st.dispatches > st.staged_steps, "dispatches %d, staged %d", st.dispatches,
            st.staged_steps);
  printf("  chunked arena: %d chunks of %llu bytes, %d dispatches, %d staged, %d on the host\n",
         st.chunks, (unsigned long long)st.chunk_bytes, st.dispatches, st.staged_steps,
         st.window_host_steps);
  rlx_graph_destroy(g);
#endif
}

int main(void) {
  if (!vulkan_available()) return 0;
  test_seed(7);
  RUN(eltwise_vec_matches_cpu);
  RUN(rows_match_cpu);
  RUN(windowed_arena_matches_cpu);
  RUN(chunked_arena_matches_cpu);
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
