/* Dynamic shapes through ONNX import: GPT- and Llama-style models exported
 * by torch.onnx.export with dynamic batch (B) and sequence (T) axes
 * (scripts/gen_dynamic_models.py) import ONCE, compile ONCE, and run at
 * several (B, T) against torch's outputs, on the device named by argv[1]
 * (default cpu). The device absent = SKIP (77). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define DIR "tests/data/dynamic/"
/* Relative L2 error, as the fixture tests: f32 models, reordered sums. */
#define TOL 1e-4

static const char* dev = "cpu";
static const char* const models[] = {"gpt", "llama"};
static const int sizes[][2] = {{1, 5}, {2, 7}, {3, 16}};

typedef struct npy {
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;
  size_t bytes;
} npy;

static int load(const char* path, npy* out) {
  char* err = NULL;
  if (rlx_npy_load(path, &out->dtype, &out->rank, out->shape, &out->data, &out->bytes, &err) ==
      RLX_OK)
    return 1;
  fprintf(stderr, "%s\n", err ? err : path);
  rlx_free(err);
  return 0;
}

static double rel_l2(const float* got, const float* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - want[i];
    num += d * d;
    den += (double)want[i] * want[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Runs the compiled model at one (B, T) and compares with torch. */
static int run_size(rlx_exec* e, const char* model, int b, int t) {
  char path[256];
  npy ids = {0}, want = {0};
  int ok = 0;
  snprintf(path, sizeof path, DIR "%s_ids_%dx%d.npy", model, b, t);
  if (!load(path, &ids)) return 0;
  snprintf(path, sizeof path, DIR "%s_out_%dx%d.npy", model, b, t);
  if (!load(path, &want)) goto done;
  if (rlx_exec_set_input(e, "ids", ids.dtype, ids.shape, ids.rank, ids.data, ids.bytes) != RLX_OK ||
      rlx_exec_run(e) != RLX_OK) {
    fprintf(stderr, "%s %dx%d on %s: %s\n", model, b, t, dev, rlx_exec_last_error(e));
    goto done;
  }
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  if (rlx_exec_output_type(e, 0, &dt, &rank, shape) != RLX_OK || rank != want.rank ||
      memcmp(shape, want.shape, sizeof(int64_t) * (size_t)rank) != 0) {
    fprintf(stderr, "%s %dx%d: output shape differs from torch's\n", model, b, t);
    goto done;
  }
  float* got = malloc(want.bytes);
  if (got && rlx_exec_read_output(e, 0, RLX_F32, got, want.bytes) == RLX_OK) {
    double rel = rel_l2(got, want.data, want.bytes / sizeof(float));
    printf("  %s %dx%d on %s: relative L2 %.3g\n", model, b, t, dev, rel);
    ok = rel <= TOL;
  }
  free(got);
done:
  rlx_free(ids.data);
  rlx_free(want.data);
  return ok;
}

static void check_model(const char* model) {
  char path[256];
  snprintf(path, sizeof path, DIR "%s.onnx", model);
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  char* err = NULL;
  rlx_status s = rlx_onnx_load(path, &g, &err);
  if (s != RLX_OK) fprintf(stderr, "%s: %s\n", path, err ? err : "?");
  rlx_free(err);
  CHECK(s == RLX_OK);
  /* One import: the input keeps its symbolic dims. */
  rlx_value_info in;
  CHECK(rlx_graph_get_input(g, 0, &in) == RLX_OK);
  CHECK(in.rank == 2 && in.shape[0] < 0 && in.shape[1] < 0);
  CHECK(strcmp(in.dim_names[0], "B") == 0 && strcmp(in.dim_names[1], "T") == 0);
  s = rlx_compile(g, dev, NULL, &e);
  if (s != RLX_OK) fprintf(stderr, "compile %s: %s\n", model, rlx_graph_last_error(g));
  rlx_graph_destroy(g);
  CHECK(s == RLX_OK);
  s = rlx_onnx_set_params(e, path, &err);
  if (s != RLX_OK) fprintf(stderr, "params %s: %s\n", model, err ? err : "?");
  rlx_free(err);
  int ok = s == RLX_OK;
  /* One compile, every size; then the first size again (a cached variant). */
  for (size_t i = 0; ok && i <= sizeof sizes / sizeof sizes[0]; i++) {
    size_t k = i % (sizeof sizes / sizeof sizes[0]);
    ok = run_size(e, model, sizes[k][0], sizes[k][1]);
  }
  rlx_exec_destroy(e);
  CHECK(ok);
}

TEST(gpt_dynamic) { check_model(models[0]); }
TEST(llama_dynamic) { check_model(models[1]); }

/* A size whose input dims disagree with what the graph was exported for is
 * an error naming it, not a crash. */
TEST(bad_input_rank_is_an_error) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  char* err = NULL;
  CHECK(rlx_onnx_load(DIR "gpt.onnx", &g, &err) == RLX_OK);
  rlx_status s = rlx_compile(g, dev, NULL, &e);
  rlx_graph_destroy(g);
  CHECK(s == RLX_OK);
  int64_t ids[6] = {0}, shape[3] = {1, 2, 3};
  CHECK(rlx_exec_set_input(e, "ids", RLX_I64, shape, 3, ids, sizeof ids) != RLX_OK);
  CHECK(strstr(rlx_exec_last_error(e), "ids"));
  rlx_exec_destroy(e);
}

static int device_available(const char* name) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) != RLX_OK || strcmp(info.name, name) != 0) continue;
    if (!info.available) printf("SKIP %s (%s)\n", name, info.detail);
    return info.available ? 1 : 0;
  }
  printf("FAIL no device named '%s'\n", name);
  return -1;
}

int main(int argc, char** argv) {
  if (argc > 1) dev = argv[1];
  int avail = device_available(dev);
  if (avail < 0) return 1;
  if (avail == 0) return 77;
  rlx_graph* probe = NULL;
  char* err = NULL;
  if (rlx_onnx_load(DIR "gpt.onnx", &probe, &err) == RLX_UNIMPLEMENTED) {
    printf("SKIP ONNX import not built\n");
    rlx_free(err);
    return 77;
  }
  rlx_graph_destroy(probe);
  rlx_free(err);
  RUN(gpt_dynamic);
  RUN(llama_dynamic);
  RUN(bad_input_rank_is_an_error);
  return test_summary();
}
