/* Device out of memory is an error, never a crash (SPEC §5 "Errors").
 *
 *   test_oom DEVICE     DEVICE is cuda, vulkan or webgpu on a GPU machine
 *
 * 1. A graph whose arena alone is larger than any device's memory
 *    (~192 GiB) fails to compile (or to run) with RLX_RESOURCE_EXHAUSTED.
 * 2. Executables of 2 GiB each (under Vulkan's usual 4 GiB
 *    maxMemoryAllocationSize) are compiled and run until the device is full:
 *    the first one that does not fit fails with RLX_RESOURCE_EXHAUSTED, and
 *    every one compiled before it still runs and gives the right answer.
 * 3. After all are destroyed, a fresh executable compiles and runs correctly:
 *    the process and the device stay usable.
 *
 * Without a device argument, on "cpu" (host memory overcommits: a failed
 * allocation is not reliably observable), or when the device is software
 * (lavapipe allocates host memory) or unavailable, it exits 77 (ctest SKIP).
 * scripts/device_gpu_all.sh runs it on the GPU machine for each backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlx.h"

enum { COLS = 1024, MAX_EXECS = 128, GIB_PER_EXEC = 2 };

/* y[r] = sum over COLS of (x + x), x broadcast to [rows, COLS]: the arena
 * holds one [rows, COLS] f32 tensor (the add may overwrite the expand). */
static rlx_status build_graph(int64_t rows, rlx_graph** out) {
  rlx_graph* g = NULL;
  rlx_status s = rlx_graph_create(&g);
  rlx_tensor x, a, b, y;
  const rlx_dim one[2] = {1, 1}, full[2] = {rows, COLS};
  const int32_t axis = 1;
  if (!s) s = rlx_graph_add_input(g, "x", RLX_F32, one, 2, &x);
  if (!s) s = rlx_graph_add_expand(g, x, full, 2, &a);
  if (!s) s = rlx_graph_add_binary(g, RLX_BIN_ADD, a, a, &b);
  if (!s) s = rlx_graph_add_reduce(g, RLX_RED_SUM, b, &axis, 1, 0, &y);
  if (!s) s = rlx_graph_set_outputs(g, &y, 1);
  if (s) {
    fprintf(stderr, "building the graph: %s\n", g ? rlx_graph_last_error(g) : "no graph");
    rlx_graph_destroy(g);
    return s;
  }
  *out = g;
  return RLX_OK;
}

/* Runs e with x = 0.5 and checks the first and last row sums (= COLS). */
static int run_and_check(rlx_exec* e, int64_t rows, const char* what) {
  const float x = 0.5f;
  const int64_t shape[2] = {1, 1};
  rlx_status s = rlx_exec_set_input(e, "x", RLX_F32, shape, 2, &x, sizeof x);
  if (!s) s = rlx_exec_run(e);
  if (s) {
    printf("FAIL %s: run: %s\n", what, rlx_exec_last_error(e));
    return 1;
  }
  float first = 0, last = 0;
  s = rlx_exec_read_output_row(e, 0, 0, RLX_F32, &first, sizeof first);
  if (!s) s = rlx_exec_read_output_row(e, 0, rows - 1, RLX_F32, &last, sizeof last);
  if (s || first != COLS || last != COLS) {
    printf("FAIL %s: rows 0 and %lld are %g and %g, want %d (%s)\n", what, (long long)rows,
           first, last, COLS, s ? rlx_exec_last_error(e) : "wrong values");
    return 1;
  }
  return 0;
}

/* 1: one graph larger than the device. */
static int huge_graph(const char* device) {
  const int64_t rows = 48LL << 20; /* 48 Mi rows x 1024 x 4 B = 192 GiB */
  rlx_graph* g = NULL;
  if (build_graph(rows, &g)) return 1;
  rlx_exec* e = NULL;
  rlx_status s = rlx_compile(g, device, NULL, &e);
  const char* msg = rlx_graph_last_error(g);
  if (s == RLX_OK) {
    const float x = 0.5f;
    const int64_t shape[2] = {1, 1};
    s = rlx_exec_set_input(e, "x", RLX_F32, shape, 2, &x, sizeof x);
    if (!s) s = rlx_exec_run(e);
    msg = rlx_exec_last_error(e);
  }
  int bad = s != RLX_RESOURCE_EXHAUSTED;
  printf("%s huge graph (192 GiB arena): %s (status %d) %s\n", bad ? "FAIL" : "ok", msg, (int)s,
         bad ? "- want RESOURCE_EXHAUSTED" : "");
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return bad;
}

/* 2 + 3: fill the device with 2 GiB executables, then free them and run again. */
static int fill_device(const char* device) {
  const int64_t rows = 1LL << 19; /* 512 Ki rows x 1024 x 4 B = 2 GiB */
  rlx_graph* g = NULL;
  if (build_graph(rows, &g)) return 1;
  rlx_exec* execs[MAX_EXECS] = {0};
  int n = 0, fails = 0;
  rlx_status s = RLX_OK;
  while (n < MAX_EXECS) {
    s = rlx_compile(g, device, NULL, &execs[n]);
    if (s == RLX_OK) {
      /* A backend may allocate lazily: running proves the memory is there. */
      char what[64];
      snprintf(what, sizeof what, "executable %d", n);
      const float x = 0.5f;
      const int64_t shape[2] = {1, 1};
      s = rlx_exec_set_input(execs[n], "x", RLX_F32, shape, 2, &x, sizeof x);
      if (!s) s = rlx_exec_run(execs[n]);
      if (s) {
        printf("%s %s: run: %s (status %d)\n", s == RLX_RESOURCE_EXHAUSTED ? "ok" : "FAIL", what,
               rlx_exec_last_error(execs[n]), (int)s);
        fails += s != RLX_RESOURCE_EXHAUSTED;
        rlx_exec_destroy(execs[n]);
        execs[n] = NULL;
        break;
      }
      n++;
      continue;
    }
    printf("%s compile %d after %d GiB: %s (status %d)\n",
           s == RLX_RESOURCE_EXHAUSTED ? "ok" : "FAIL", n, GIB_PER_EXEC * n, rlx_graph_last_error(g), (int)s);
    fails += s != RLX_RESOURCE_EXHAUSTED;
    break;
  }
  if (n == MAX_EXECS) {
    printf("FAIL %d executables of 2 GiB all fit: the device never ran out\n", n);
    fails++;
  }
  /* Those that fit still work next to the failed allocation. */
  for (int i = 0; i < n; i++) {
    char what[64];
    snprintf(what, sizeof what, "executable %d after the failure", i);
    fails += run_and_check(execs[i], rows, what);
  }
  printf("%d executables (%d GiB) ran before the device was full\n", n, GIB_PER_EXEC * n);
  for (int i = 0; i < n; i++) rlx_exec_destroy(execs[i]);
  /* 3: everything freed, the device takes a new executable. */
  rlx_exec* again = NULL;
  s = rlx_compile(g, device, NULL, &again);
  if (s) {
    printf("FAIL compile after freeing: %s\n", rlx_graph_last_error(g));
    fails++;
  } else {
    fails += run_and_check(again, rows, "executable compiled after freeing");
    if (!fails) printf("ok a fresh 2 GiB executable compiles and runs after the failures\n");
  }
  rlx_exec_destroy(again);
  rlx_graph_destroy(g);
  return fails;
}

static int device_is_gpu(const char* device) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) || strcmp(info.name, device) != 0) continue;
    if (!info.available) {
      printf("SKIP %s: %s\n", device, info.detail);
      return 0;
    }
    if (strstr(info.detail, "llvmpipe") || strstr(info.detail, "lavapipe") ||
        strstr(info.detail, "software")) {
      printf("SKIP %s is a software device (%s): its memory is host memory\n", device, info.detail);
      return 0;
    }
    return 1;
  }
  printf("SKIP unknown device %s\n", device);
  return 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IONBF, 0); /* a hang or a kill still shows how far it got */
  if (argc < 2 || strcmp(argv[1], "cpu") == 0) {
    printf("SKIP test_oom needs a GPU device argument (cuda, vulkan, webgpu); "
           "scripts/device_gpu_all.sh runs it on the GPU machine\n");
    return 77;
  }
  const char* device = argv[1];
  if (!device_is_gpu(device)) return 77;
  int fails = huge_graph(device);
  fails += fill_device(device);
  printf("%s: %s\n", device, fails ? "FAILED" : "all out-of-memory checks passed");
  return fails ? 1 : 0;
}
