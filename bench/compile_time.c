/* What shared compiled code saves: the wall time of
 *   compile   rlx_compile with the compile cache off (RLX_COMPILE_CACHE=0),
 *   first     rlx_compile with the cache on, of a graph not in it (a miss:
 *             compile + key + insert),
 *   cached    rlx_compile of the same graph again (a hit),
 *   clone     rlx_exec_clone of a compiled executable whose params are all
 *             set (their bytes are shared until either executable sets them),
 * each the median of `reps` runs, for a graph in the text format (e.g. a
 * GPT-2-sized one from `rlx example gpt`). One JSON line per measurement.
 *
 *   compile_time FILE.rlx [device] [reps]     defaults: cpu, 5 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

#define MAX_REPS 64

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + 1e-6 * (double)t.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* t, int n) {
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return t[n / 2];
}

/* Times one rlx_compile; the executable is destroyed. -1 on failure. */
static double time_compile(rlx_graph* g, const char* device) {
  rlx_exec* e = NULL;
  double t0 = now_ms();
  rlx_status s = rlx_compile(g, device, NULL, &e);
  double ms = now_ms() - t0;
  if (s) fprintf(stderr, "compile failed: %s\n", rlx_graph_last_error(g));
  rlx_exec_destroy(e);
  return s ? -1 : ms;
}

/* Sets every param of e (to zeros), as a loaded model would have them. */
static rlx_status set_all_params(rlx_exec* e) {
  for (int32_t i = 0; i < rlx_exec_param_count(e); i++) {
    rlx_value_info info;
    rlx_status s = rlx_exec_get_param(e, i, &info);
    if (s) return s;
    size_t bytes = rlx_dtype_size(info.dtype);
    for (int32_t d = 0; d < info.rank; d++) bytes *= (size_t)info.shape[d];
    void* zeros = calloc(1, bytes ? bytes : 1);
    if (!zeros) return RLX_RESOURCE_EXHAUSTED;
    s = rlx_exec_set_param(e, info.name, info.dtype, zeros, bytes);
    free(zeros);
    if (s) return s;
  }
  return RLX_OK;
}

static void report(const char* what, const char* device, double* t, int n) {
  printf("{\"measure\":\"%s\",\"device\":\"%s\",\"reps\":%d,\"median_ms\":%.3f}\n", what, device,
         n, median(t, n));
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: compile_time FILE.rlx [device] [reps]\n");
    return 2;
  }
  const char* device = argc > 2 ? argv[2] : "cpu";
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  if (reps < 1 || reps > MAX_REPS) reps = 5;
  char* why = NULL;
  rlx_graph* g = NULL;
  if (rlx_graph_load(argv[1], &g, &why) != RLX_OK) {
    fprintf(stderr, "%s: %s\n", argv[1], why ? why : "cannot read");
    return 1;
  }
  double t[MAX_REPS];
  setenv("RLX_COMPILE_CACHE", "0", 1);
  for (int i = 0; i < reps; i++) if ((t[i] = time_compile(g, device)) < 0) return 1;
  report("compile", device, t, reps);
  setenv("RLX_COMPILE_CACHE", "64", 1);
  for (int i = 0; i < reps; i++) {
    rlx_compile_cache_clear();
    if ((t[i] = time_compile(g, device)) < 0) return 1;
  }
  report("first", device, t, reps);
  for (int i = 0; i < reps; i++) if ((t[i] = time_compile(g, device)) < 0) return 1;
  report("cached", device, t, reps);
  rlx_exec* e = NULL;
  if (rlx_compile(g, device, NULL, &e) != RLX_OK || set_all_params(e) != RLX_OK) return 1;
  for (int i = 0; i < reps; i++) {
    rlx_exec* c = NULL;
    double t0 = now_ms();
    if (rlx_exec_clone(e, &c) != RLX_OK) {
      fprintf(stderr, "clone failed: %s\n", rlx_exec_last_error(e));
      return 1;
    }
    t[i] = now_ms() - t0;
    rlx_exec_destroy(c);
  }
  report("clone", device, t, reps);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  return 0;
}
