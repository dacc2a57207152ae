/* Per-step traces (RLX_TRACE, rlx_exec_set_trace) on every available
 * device: the file is parsed with a real JSON parser (tests/trace_check.py
 * under Debian's /usr/bin/python3) and holds one event per step per run. A
 * device that is not available is reported as skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define RUNS 3
/* The ops of the compiled graph (after fusion) the events may name. */
#define OPS "matmul,tanh,mul,add,softmax,fused_matmul_bias_act,elementwise_region"

static char g_dir[64];

/* y = softmax(tanh(x @ w) * x2 + 1) labelled "probs": a GEMM, an
 * elementwise chain (fused on most backends) and a row op, small enough
 * for every backend. */
static rlx_graph* small_graph(void) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim xs[2] = {4, 8}, ws[2] = {8, 16}, ys[2] = {4, 16};
  rlx_tensor x, w, x2, m, t, p, one, y, z;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_param(g, "w", RLX_F32, ws, 2, &w);
  rlx_graph_add_input(g, "x2", RLX_F32, ys, 2, &x2);
  rlx_graph_add_matmul(g, x, w, 0, 0, &m);
  rlx_graph_add_activation(g, RLX_ACT_TANH, m, &t);
  rlx_graph_add_binary(g, RLX_BIN_MUL, t, x2, &p);
  float v = 1.0f;
  rlx_dim none[1] = {0};
  rlx_graph_add_constant(g, RLX_F32, none, 0, &v, sizeof v, &one);
  rlx_graph_add_binary(g, RLX_BIN_ADD, p, one, &y);
  rlx_graph_add_softmax(g, y, 1, &z);
  rlx_graph_set_name(g, z, "probs");
  rlx_graph_set_outputs(g, &z, 1);
  return g;
}

static int feed_and_run(rlx_exec* e, int runs) {
  float x[32], w[128], x2[64];
  test_fill_f32(x, 32, -1, 1);
  test_fill_f32(w, 128, -1, 1);
  test_fill_f32(x2, 64, -1, 1);
  rlx_dim xs[2] = {4, 8}, ys[2] = {4, 16};
  if (rlx_exec_set_param(e, "w", RLX_F32, w, sizeof w)) return 0;
  if (rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof x)) return 0;
  if (rlx_exec_set_input(e, "x2", RLX_F32, ys, 2, x2, sizeof x2)) return 0;
  for (int r = 0; r < runs; r++)
    if (rlx_exec_run(e)) return 0;
  return 1;
}

static int32_t steps_of(const rlx_exec* e) {
  rlx_memory_stats st;
  return rlx_exec_memory_stats(e, &st) == RLX_OK ? st.launches : -1;
}

/* Occurrences of needle in the file (a parser-free cross-check). */
static int count_in_file(const char* path, const char* needle) {
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  int count = 0;
  for (const char* p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) count++;
  return count;
}

/* trace_check.py on path; 1 when it passes (or when there is no python3,
 * after the C count above). */
static int parses(const char* path, const char* cat, int32_t steps, int runs, int execs,
                  const char* label, const char* timing) {
  if (access("/usr/bin/python3", X_OK) != 0) {
    printf("  (no /usr/bin/python3: JSON not parsed, events counted only)\n");
    return 1;
  }
  char extra[256] = "", cmd[1024];
  if (label) snprintf(extra, sizeof extra, " --label '%s'", label);
  if (timing) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --timing '%s'", timing);
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 tests/trace_check.py '%s' --cat %s --steps %d --runs %d --execs %d "
           "--ops " OPS "%s",
           path, cat, steps, runs, execs, extra);
  return system(cmd) == 0;
}

static int device_available(const char* name, const char** detail) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) == RLX_OK && !strcmp(info.name, name)) {
      *detail = info.detail;
      return info.available;
    }
  }
  *detail = "not listed";
  return 0;
}

/* How each device times its steps (trace_check.py --timing): WebGPU's
 * timestamps need allow_unsafe_apis, which RLX_TRACE turns on, so the
 * ctest registration with it set says what to expect there. */
static const char* expected_timing(const char* device) {
  if (!strcmp(device, "cpu")) return "wall clock";
  if (!strcmp(device, "vulkan")) return "timestamp queries";
  if (!strcmp(device, "cuda")) return "CUDA events";
  return getenv("RLX_TEST_TRACE_TIMING");
}

/* Traces RUNS runs on `device` through rlx_exec_set_trace and checks the file. */
static void trace_on(const char* device) {
  const char* detail = NULL;
  if (!device_available(device, &detail)) {
    printf("SKIP trace on %s (%s)\n", device, detail);
    return;
  }
  char path[128];
  snprintf(path, sizeof path, "%s/%s.json", g_dir, device);
  rlx_graph* g = small_graph();
  rlx_exec* e = test_compile_on(g, device, NULL);
  CHECK(e);
  CHECK_OK_E(e, rlx_exec_set_trace(e, path));
  CHECK_MSG(feed_and_run(e, RUNS), "%s", rlx_exec_last_error(e));
  int32_t steps = steps_of(e);
  rlx_exec_destroy(e); /* writes the file */
  rlx_graph_destroy(g);
  CHECK(steps > 0);
  CHECK_MSG(count_in_file(path, "\"ph\":\"X\"") == steps * RUNS, "%s: expected %d events", path,
            steps * RUNS);
  CHECK_MSG(parses(path, device, steps, RUNS, 1, NULL, expected_timing(device)), "%s", path);
}

TEST(trace_cpu) { trace_on("cpu"); }
TEST(trace_vulkan) { trace_on("vulkan"); }
TEST(trace_webgpu) { trace_on("webgpu"); }
TEST(trace_cuda) { trace_on("cuda"); }

/* RLX_TRACE: two executables (and a clone) share one file, which stays
 * valid JSON after the first is destroyed and is complete after the last. */
TEST(trace_env_shared_file) {
  char path[128];
  snprintf(path, sizeof path, "%s/env.json", g_dir);
  setenv("RLX_TRACE", path, 1);
  rlx_graph* g = small_graph();
  rlx_exec* a = test_compile_on(g, "cpu", NULL);
  rlx_exec* b = test_compile_on(g, "cpu", NULL);
  unsetenv("RLX_TRACE");
  CHECK(a && b);
  rlx_exec* c = NULL;
  CHECK_OK_E(a, rlx_exec_clone(a, &c));
  CHECK(feed_and_run(a, 2) && feed_and_run(b, 2) && feed_and_run(c, 2));
  int32_t steps = steps_of(a);
  rlx_exec_destroy(a);
  rlx_exec_destroy(c);
  /* b still traces: the file is not written yet beyond its empty start */
  CHECK(count_in_file(path, "traceEvents") == 1);
  rlx_exec_destroy(b);
  rlx_graph_destroy(g);
  CHECK(parses(path, "cpu", steps, 2, 3, "probs", "wall clock"));
}

/* Tracing off again, and an unwritable path named in the error. */
TEST(trace_off_and_bad_path) {
  char path[128];
  snprintf(path, sizeof path, "%s/off.json", g_dir);
  rlx_graph* g = small_graph();
  rlx_exec* e = test_compile_on(g, "cpu", NULL);
  CHECK(e);
  CHECK_OK_E(e, rlx_exec_set_trace(e, path));
  CHECK(feed_and_run(e, 1));
  CHECK_OK_E(e, rlx_exec_set_trace(e, NULL)); /* the last reference: written now */
  CHECK(feed_and_run(e, 1));
  CHECK(count_in_file(path, "\"ph\":\"X\"") == steps_of(e));
  CHECK(rlx_exec_set_trace(e, "/nonexistent-dir/t.json") == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_exec_last_error(e), "/nonexistent-dir/t.json") != NULL);
  CHECK(rlx_exec_set_trace(NULL, path) == RLX_INVALID_ARGUMENT);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

int main(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/rlx_trace_XXXXXX");
  if (!mkdtemp(g_dir)) {
    perror("mkdtemp");
    return 1;
  }
  test_seed(7);
  RUN(trace_cpu);
  RUN(trace_vulkan);
  RUN(trace_webgpu);
  RUN(trace_cuda);
  RUN(trace_env_shared_file);
  RUN(trace_off_and_bad_path);
  int rc = test_summary();
  if (rc == 0 && !getenv("RLX_TEST_KEEP")) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
  }
  return rc;
}
