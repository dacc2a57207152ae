/* Shape-valued graph inputs handled at run time through the library API:
 * rlx_onnx_load imports a model whose Reshape target, Slice bounds, TopK k or
 * Tile repeats are graph inputs (the ONNX node test data), rlx_compile
 * compiles it, and each rlx_exec_run builds (once per distinct value) and
 * runs the model for the values set. Each model runs at two values of its
 * shape inputs, taken from two test cases with the same interface, against
 * the expected outputs of the case the values come from; then again at the
 * first value, which must reuse the first build (no import).
 *
 * argv[1]: the device (default cpu); 77 (skipped) when it is unavailable,
 * when ONNX import is not built or libonnx-testdata is missing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "runtime/value_inputs.h"

#define NODE "/usr/share/libonnx-testdata/data/node/"
#define MAX_IO 8

static const char* device = "cpu";

typedef struct tensor {
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;
  size_t bytes;
} tensor;

static int read_pb(const char* kase, const char* kind, int k, tensor* t) {
  char path[512];
  snprintf(path, sizeof path, NODE "%s/test_data_set_0/%s_%d.pb", kase, kind, k);
  memset(t, 0, sizeof *t);
  if (access(path, R_OK) != 0) return 0;
  return rlx_onnx_read_tensor(path, &t->dtype, &t->rank, t->shape, &t->data, &t->bytes, NULL) ==
         RLX_OK;
}

/* Sets every input of the exec from case `kase` (input_k.pb in order). */
static void set_inputs(rlx_exec* e, const char* kase) {
  int32_t n = rlx_exec_input_count(e);
  for (int32_t k = 0; k < n; k++) {
    rlx_value_info info;
    tensor t;
    CHECK_OK_E(e, rlx_exec_get_input(e, k, &info));
    CHECK_MSG(read_pb(kase, "input", k, &t), "%s: input_%d.pb", kase, (int)k);
    CHECK_OK_E(e, rlx_exec_set_input(e, info.name, t.dtype, t.shape, t.rank, t.data, t.bytes));
    rlx_free(t.data);
  }
}

/* Output k equals `want` in dtype, shape and bytes. */
static void check_output(rlx_exec* e, int32_t k, const tensor* want, const char* what) {
  rlx_dtype dt;
  int32_t rank = -1;
  int64_t shape[RLX_MAX_RANK];
  CHECK_OK_E(e, rlx_exec_output_type(e, k, &dt, &rank, shape));
  CHECK_MSG(dt == want->dtype && rank == want->rank, "%s output %d: dtype/rank %d/%d, want %d/%d",
            what, (int)k, (int)dt, (int)rank, (int)want->dtype, (int)want->rank);
  if (rank != want->rank) return;
  CHECK_MSG(memcmp(shape, want->shape, sizeof(int64_t) * (size_t)rank) == 0, "%s output %d: shape",
            what, (int)k);
  void* got = malloc(want->bytes + 1);
  CHECK_OK_E(e, rlx_exec_read_output(e, k, want->dtype, got, want->bytes));
  int same = 1;
  if (want->dtype == RLX_F32) { /* GPU kernels may round differently */
    const float *a = got, *b = want->data;
    for (size_t i = 0; i < want->bytes / 4; i++) same &= a[i] - b[i] < 1e-5f && b[i] - a[i] < 1e-5f;
  } else {
    same = memcmp(got, want->data, want->bytes) == 0;
  }
  CHECK_MSG(same, "%s output %d: values differ", what, (int)k);
  free(got);
}

/* Runs e with the inputs of `kase` and compares with its outputs. */
static void run_case(rlx_exec* e, const char* kase) {
  set_inputs(e, kase);
  CHECK_OK_E(e, rlx_exec_run(e));
  for (int32_t k = 0; k < rlx_exec_output_count(e); k++) {
    tensor want;
    CHECK_MSG(read_pb(kase, "output", k, &want), "%s: output_%d.pb", kase, (int)k);
    check_output(e, k, &want, kase);
    rlx_free(want.data);
  }
}

/* *out_exec compiled on `device` from case kase's model (NULL on failure). */
static void load_and_compile(const char* kase, rlx_graph** out_graph, rlx_exec** out_exec) {
  char path[512];
  char* err = NULL;
  snprintf(path, sizeof path, NODE "%s/model.onnx", kase);
  *out_exec = NULL;
  rlx_status s = rlx_onnx_load(path, out_graph, &err);
  if (s != RLX_OK) fprintf(stderr, "%s: %s\n", kase, err ? err : "");
  rlx_free(err);
  CHECK_MSG(s == RLX_OK, "%s: import failed", kase);
  s = rlx_compile(*out_graph, device, NULL, out_exec);
  CHECK_MSG(s == RLX_OK, "%s: %s", kase, rlx_graph_last_error(*out_graph));
}

/* Model of case a, run at the values of a, then b, then a again (reused). */
static void two_values(const char* a, const char* b) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  load_and_compile(a, &g, &e);
  if (!e) {
    rlx_graph_destroy(g);
    return;
  }
  run_case(e, a);
  const rlx_vi* vi = rlx_exec_value_inputs(e);
  CHECK_MSG(vi != NULL, "%s: not a value-input executable", a);
  int64_t builds = rlx_vi_build_count(vi);
  run_case(e, b);
  CHECK(rlx_vi_build_count(vi) == builds + 1);
  run_case(e, a);
  CHECK_MSG(rlx_vi_build_count(vi) == builds + 1, "%s: same value imported again", a);
  CHECK(rlx_vi_variant_count(vi) == 2);
  /* a second executable of the same graph finds the build for a value in
   * the compile cache (keyed by the built graph's text) */
  rlx_exec* again = NULL;
  CHECK_OK_G(g, rlx_compile(g, device, NULL, &again));
  run_case(again, b);
  char* report = NULL;
  CHECK_OK_E(again, rlx_exec_report(again, &report));
  CHECK_MSG(report && strstr(report, "reused from the compile cache"), "%s", report ? report : "");
  rlx_free(report);
  rlx_exec_destroy(again);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(reshape_target) {
  two_values("test_reshape_reordered_all_dims", "test_reshape_reordered_last_dims");
  two_values("test_reshape_extended_dims", "test_reshape_zero_and_negative_dim");
}

TEST(slice_bounds) {
  two_values("test_slice_end_out_of_bounds", "test_slice_neg");
  two_values("test_slice_default_steps", "test_slice_negative_axes");
}

/* The graph declares the inputs with the file's dtypes and shapes, and the
 * outputs with the file's dtypes. */
TEST(declared_interface) {
  char* err = NULL;
  rlx_graph* g = NULL;
  rlx_status s = rlx_onnx_load(NODE "test_top_k/model.onnx", &g, &err);
  if (s != RLX_OK) fprintf(stderr, "test_top_k: %s\n", err ? err : "");
  rlx_free(err);
  CHECK(s == RLX_OK);
  CHECK(rlx_graph_input_count(g) == 2 && rlx_graph_output_count(g) == 2);
  rlx_value_info x, k;
  CHECK_OK_G(g, rlx_graph_get_input(g, 0, &x));
  CHECK_OK_G(g, rlx_graph_get_input(g, 1, &k));
  CHECK(x.dtype == RLX_F32 && x.rank == 2 && x.shape[0] == 3 && x.shape[1] == 4);
  CHECK(k.dtype == RLX_I64 && k.rank == 1 && k.shape[0] == 1);
  char* text = NULL;
  CHECK_OK_G(g, rlx_graph_print(g, &text));
  CHECK(text && strstr(text, "deferred") != NULL);
  /* a graph parsed back from text has no way to build its body */
  rlx_graph* back = NULL;
  if (text && rlx_graph_parse(text, &back, NULL) == RLX_OK) {
    rlx_exec* e = NULL;
    CHECK(rlx_compile(back, device, NULL, &e) == RLX_INVALID_ARGUMENT);
    CHECK(strstr(rlx_graph_last_error(back), "deferred") != NULL);
    rlx_graph_destroy(back);
  }
  rlx_free(text);
  rlx_graph_destroy(g);
}

/* TopK at k = 3 (the case's own data) and k = 2: the two largest are the
 * first two columns of the k = 3 result (sorted, largest first). */
TEST(topk_k) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  load_and_compile("test_top_k", &g, &e);
  if (!e) {
    rlx_graph_destroy(g);
    return;
  }
  run_case(e, "test_top_k");
  /* outputs are only readable until the next run: read k = 3 first */
  tensor want[2];
  for (int k = 0; k < 2; k++) CHECK(read_pb("test_top_k", "output", k, &want[k]));
  int64_t two = 2, one = 1;
  CHECK_OK_E(e, rlx_exec_set_input(e, "k", RLX_I64, &one, 1, &two, sizeof two));
  CHECK_OK_E(e, rlx_exec_run(e));
  for (int k = 0; k < 2; k++) {
    tensor* w = &want[k];
    size_t es = w->bytes / 9; /* 3x3 elements */
    uint8_t* p = w->data;
    for (int r = 0; r < 3; r++) memmove(p + (size_t)r * 2 * es, p + (size_t)r * 3 * es, 2 * es);
    w->shape[1] = 2;
    w->bytes = 6 * es;
    check_output(e, k, w, "top_k k=2");
    rlx_free(w->data);
  }
  /* the clone runs both values with the params and builds it shares */
  rlx_exec* c = NULL;
  CHECK_OK_E(e, rlx_exec_clone(e, &c));
  if (c) {
    run_case(c, "test_top_k");
    CHECK(rlx_vi_build_count(rlx_exec_value_inputs(c)) == 0);
    rlx_exec_destroy(c);
  }
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* Tile: repeats from the case, then all ones (the output is x itself). */
TEST(tile_repeats) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  load_and_compile("test_tile", &g, &e);
  if (!e) {
    rlx_graph_destroy(g);
    return;
  }
  run_case(e, "test_tile");
  tensor x;
  CHECK(read_pb("test_tile", "input", 0, &x));
  int64_t ones[4] = {1, 1, 1, 1}, four = 4;
  CHECK_OK_E(e, rlx_exec_set_input(e, "y", RLX_I64, &four, 1, ones, sizeof ones));
  CHECK_OK_E(e, rlx_exec_run(e));
  check_output(e, 0, &x, "tile ones");
  rlx_free(x.data);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* RLX_VALUE_INPUT_VARIANTS=1: a new value evicts the old build; going back
 * builds it again and still gives the right answer. */
TEST(lru_bound) {
  setenv("RLX_VALUE_INPUT_VARIANTS", "1", 1);
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  load_and_compile("test_reshape_reordered_all_dims", &g, &e);
  unsetenv("RLX_VALUE_INPUT_VARIANTS");
  if (!e) {
    rlx_graph_destroy(g);
    return;
  }
  const rlx_vi* vi = rlx_exec_value_inputs(e);
  run_case(e, "test_reshape_reordered_all_dims");
  run_case(e, "test_reshape_negative_dim");
  run_case(e, "test_reshape_reordered_all_dims");
  CHECK(rlx_vi_variant_count(vi) == 1 && rlx_vi_build_count(vi) == 3);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* tests/data/onnx/value_params.onnx (scripts/gen_value_input_models.py):
 * y = Reshape(x W + b, shape). Expected y (row-major, any shape) for W. */
#define PARAMS_MODEL "tests/data/onnx/value_params.onnx"
static void expected_xwb(const float* x, const float* w, const float* b, float* y) {
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) {
      float acc = b[j];
      for (int k = 0; k < 3; k++) acc += x[i * 3 + k] * w[k * 4 + j];
      y[i * 4 + j] = acc;
    }
}

static void run_shape(rlx_exec* e, int64_t rows, const float* want) {
  int64_t shape[2] = {rows, 8 / rows}, two = 2;
  CHECK_OK_E(e, rlx_exec_set_input(e, "shape", RLX_I64, &two, 1, shape, sizeof shape));
  CHECK_OK_E(e, rlx_exec_run(e));
  int32_t rank = 0;
  int64_t got_shape[RLX_MAX_RANK];
  CHECK_OK_E(e, rlx_exec_output_type(e, 0, NULL, &rank, got_shape));
  CHECK(rank == 2 && got_shape[0] == rows && got_shape[1] == 8 / rows);
  float got[8];
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, got, sizeof got));
  for (int i = 0; i < 8; i++) CHECK_MSG(fabsf(got[i] - want[i]) < 1e-4f, "y[%d] %g, want %g", i, got[i], want[i]);
}

/* Params from the file (rlx_onnx_set_params on the deferred graph), then a
 * param set by the user: it reaches the build that exists and the one
 * built after it. */
TEST(params_reach_every_build) {
  rlx_graph* g = NULL;
  char* err = NULL;
  rlx_status s = rlx_onnx_load(PARAMS_MODEL, &g, &err);
  if (s != RLX_OK) fprintf(stderr, "%s: %s\n", PARAMS_MODEL, err ? err : "");
  rlx_free(err);
  CHECK(s == RLX_OK);
  CHECK(rlx_graph_param_count(g) == 2);
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, device, NULL, &e));
  err = NULL;
  s = rlx_onnx_set_params(e, PARAMS_MODEL, &err);
  if (s != RLX_OK) fprintf(stderr, "set_params: %s\n", err ? err : "");
  rlx_free(err);
  CHECK(s == RLX_OK);
  float x[6] = {1, 2, 3, -1, 0.5f, 2}, w[12], b[4] = {1, -1, 2, -2}, want[8];
  for (int i = 0; i < 12; i++) w[i] = (float)i / 4;
  int64_t xs[2] = {2, 3};
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof x));
  expected_xwb(x, w, b, want);
  run_shape(e, 4, want);
  for (int i = 0; i < 12; i++) w[i] = (float)(i % 5) - 2;
  CHECK_OK_E(e, rlx_exec_set_param(e, "W", RLX_F32, w, sizeof w));
  expected_xwb(x, w, b, want);
  run_shape(e, 2, want); /* a new build: gets the new W */
  run_shape(e, 4, want); /* the first build: gets it too */
  CHECK(rlx_vi_build_count(rlx_exec_value_inputs(e)) == 2);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* A value input that was never set is named by the run's error. */
TEST(unset_value_input) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  load_and_compile("test_reshape_reordered_all_dims", &g, &e);
  if (!e) {
    rlx_graph_destroy(g);
    return;
  }
  tensor d;
  CHECK(read_pb("test_reshape_reordered_all_dims", "input", 0, &d));
  CHECK_OK_E(e, rlx_exec_set_input(e, "data", d.dtype, d.shape, d.rank, d.data, d.bytes));
  CHECK(rlx_exec_run(e) == RLX_FAILED_PRECONDITION);
  CHECK(strstr(rlx_exec_last_error(e), "'shape'") != NULL);
  CHECK(rlx_exec_output_type(e, 0, NULL, NULL, NULL) == RLX_FAILED_PRECONDITION);
  rlx_free(d.data);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

static int device_available(const char* name) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) == RLX_OK && strcmp(info.name, name) == 0) return info.available;
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1) device = argv[1];
  if (!device_available(device)) {
    printf("SKIP: device %s unavailable\n", device);
    return 77;
  }
  rlx_graph* probe = NULL;
  if (access(NODE "test_tile/model.onnx", R_OK) != 0 ||
      rlx_onnx_load(NODE "test_tile/model.onnx", &probe, NULL) == RLX_UNIMPLEMENTED) {
    printf("SKIP: ONNX import not built or libonnx-testdata missing\n");
    return 77;
  }
  rlx_graph_destroy(probe);
  RUN(declared_interface);
  RUN(reshape_target);
  RUN(slice_bounds);
  RUN(topk_k);
  RUN(tile_repeats);
  RUN(lru_bound);
  RUN(unset_value_input);
  RUN(params_reach_every_build);
  return test_summary();
}
