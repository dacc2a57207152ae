/* What the LLM oracle tests (test_llm.c: safetensors + config.json,
 * test_llm_gguf.c: GGUF) share: running the Python generator, reading its
 * .npy files, the error measure and one forward run per device. Header-only
 * (static functions), included by those two tests. */
#ifndef RLX_TESTS_LLM_COMMON_H
#define RLX_TESTS_LLM_COMMON_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/npy.h"
#include "rlx.h"

#define LLM_TOLERANCE 1e-4 /* max |rlx - torch| / max |torch|, f32 compute */

/* Runs `python3 SCRIPT DIR` (Debian's python, which has torch; RLX_TEST_PYTHON
 * names another, e.g. the GPU machine's, whose /usr/bin/python3 has no numpy);
 * its exit code. */
static int llm_generate(const char* script, const char* dir) {
  const char* py = getenv("RLX_TEST_PYTHON");
  if (!py || !*py) py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s '%s'", py, script, dir);
  fflush(stdout);
  int st = system(cmd);
  return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

typedef struct npy_array {
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;
  size_t bytes;
} npy_array;

static int load_npy(const char* case_dir, const char* name, npy_array* a) {
  char path[1100];
  snprintf(path, sizeof path, "%s/%s", case_dir, name);
  rlx_error err;
  memset(a, 0, sizeof *a);
  if (rlx_npy_read(path, &err, &a->dtype, &a->rank, a->shape, &a->data, &a->bytes) == RLX_OK)
    return 1;
  fprintf(stderr, "%s\n", err.msg);
  return 0;
}

/* max |got - want| / max |want| */
static double relative_error(const float* got, const float* want, size_t n) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - want[i]);
    if (!(d <= diff)) diff = d; /* NaN sticks */
    if (fabs(want[i]) > scale) scale = fabs(want[i]);
  }
  return diff / (scale > 0 ? scale : 1.0);
}

/* Runs the model on device; 0 = skipped (device unavailable), 1 = ran. */
static int run_on(rlx_llm* m, const char* device, const npy_array* ids, float* logits,
                  size_t bytes) {
  rlx_exec* e = NULL;
  rlx_status s = rlx_compile(rlx_llm_graph(m), device, NULL, &e);
  if (s == RLX_UNAVAILABLE || s == RLX_UNIMPLEMENTED) {
    printf("  %-8s skipped: %s\n", device, rlx_graph_last_error(rlx_llm_graph(m)));
    return 0;
  }
  if (s != RLX_OK) {
    fprintf(stderr, "compile on %s: %s\n", device, rlx_graph_last_error(rlx_llm_graph(m)));
    return -1;
  }
  int64_t T = ids->shape[1];
  int64_t positions[64];
  for (int64_t t = 0; t < T; t++) positions[t] = t;
  int ok = rlx_llm_set_params(m, e) == RLX_OK;
  if (!ok) fprintf(stderr, "set params: %s\n", rlx_llm_last_error(m));
  ok = ok && rlx_exec_set_input(e, "input_ids", RLX_I64, ids->shape, 2, ids->data,
                                ids->bytes) == RLX_OK;
  ok = ok && rlx_exec_set_input(e, "positions", RLX_I64, &T, 1, positions,
                                (size_t)T * sizeof(int64_t)) == RLX_OK;
  ok = ok && rlx_exec_run(e) == RLX_OK;
  ok = ok && rlx_exec_read_output(e, 0, RLX_F32, logits, bytes) == RLX_OK;
  if (!ok) fprintf(stderr, "%s: %s\n", device, rlx_exec_last_error(e));
  rlx_exec_destroy(e);
  return ok ? 1 : -1;
}

static const char* k_all_devices[] = {"cpu", "cuda", "vulkan", "webgpu"};
static const char** g_devices = k_all_devices; /* argv may name others */
static int g_n_devices = 4;

/* Loads model (a folder or a GGUF file), runs it on every device and
 * compares its logits with dir/logits.npy (ids from dir/input_ids.npy). */
static void llm_check_case(const char* dir, const char* model, const char* name) {
  npy_array ids, want;
  CHECK(load_npy(dir, "input_ids.npy", &ids));
  int have_want = load_npy(dir, "logits.npy", &want);
  if (!have_want) free(ids.data);
  CHECK(have_want);
  rlx_llm* m = NULL;
  char* why = NULL;
  rlx_status s = rlx_llm_load(model, NULL, &m, &why);
  int loaded = s == RLX_OK;
  if (!loaded) fprintf(stderr, "%s: %s\n", name, why ? why : "");
  rlx_free(why);
  float* got = loaded ? malloc(want.bytes) : NULL;
  int failures = 0, ran = 0;
  for (int d = 0; got && d < g_n_devices; d++) {
    int r = run_on(m, g_devices[d], &ids, got, want.bytes);
    if (r < 0) failures++;
    if (r <= 0) continue;
    ran++;
    double err = relative_error(got, want.data, want.bytes / sizeof(float));
    printf("  %-8s %-20s logits rel err %.3g\n", g_devices[d], name, err);
    if (!(err < LLM_TOLERANCE)) failures++;
  }
  free(got);
  free(ids.data);
  free(want.data);
  rlx_llm_destroy(m);
  CHECK(loaded);
  CHECK(ran > 0 || g_devices != k_all_devices); /* the CPU always runs */
  CHECK(failures == 0);
}

#endif
