/* Public ONNX API with frozen inputs: a Reshape whose target shape is a graph
 * input is refused by rlx_onnx_load_frozen_ex without it (the value must be
 * known to build the graph; the input is named) and imports with
 * rlx_onnx_load_frozen; the result matches the ONNX
 * test data. Skips (exit 77) without libonnx-testdata or ONNX support. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define CASE "/usr/share/libonnx-testdata/data/node/test_reshape_reordered_all_dims"

typedef struct tensor {
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data;
  size_t bytes;
} tensor;

static int read_pb(const char* name, tensor* t) {
  char path[512];
  snprintf(path, sizeof path, CASE "/test_data_set_0/%s", name);
  return rlx_onnx_read_tensor(path, &t->dtype, &t->rank, t->shape, &t->data, &t->bytes, NULL) ==
         RLX_OK;
}

TEST(reshape_target_frozen) {
  rlx_graph* g = NULL;
  char* err = NULL;
  char* needs = NULL;
  /* asked what is missing, the import names the input (rlx_onnx_load
   * instead defers the body to run time: test_onnx_value_inputs.c) */
  CHECK(rlx_onnx_load_frozen_ex(CASE "/model.onnx", NULL, 0, &g, &needs, &err) ==
        RLX_FAILED_PRECONDITION);
  CHECK(err && strstr(err, "Reshape") != NULL);
  CHECK(needs && strcmp(needs, "shape") == 0);
  rlx_free(err);
  rlx_free(needs);
  err = NULL;
  tensor data, shape, want;
  CHECK(read_pb("input_0.pb", &data) && read_pb("input_1.pb", &shape) && read_pb("output_0.pb", &want));
  /* the model's graph inputs are named "data" and "shape" */
  rlx_onnx_frozen_input f = {"shape", shape.dtype, shape.rank, shape.shape, shape.data, shape.bytes};
  CHECK_MSG(rlx_onnx_load_frozen(CASE "/model.onnx", &f, 1, &g, &err) == RLX_OK, "%s", err ? err : "");
  f.bytes = 3; /* size checked */
  rlx_graph* bad = NULL;
  CHECK(rlx_onnx_load_frozen(CASE "/model.onnx", &f, 1, &bad, NULL) == RLX_INVALID_ARGUMENT);
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  CHECK_OK_E(e, rlx_exec_set_input(e, "data", data.dtype, data.shape, data.rank, data.data, data.bytes));
  CHECK_OK_E(e, rlx_exec_run(e));
  float* got = malloc(want.bytes);
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, got, want.bytes));
  CHECK(memcmp(got, want.data, want.bytes) == 0);
  int32_t rank;
  int64_t oshape[RLX_MAX_RANK];
  CHECK_OK_E(e, rlx_exec_output_type(e, 0, NULL, &rank, oshape));
  CHECK(rank == want.rank && memcmp(oshape, want.shape, sizeof(int64_t) * (size_t)rank) == 0);
  free(got);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  rlx_free(data.data);
  rlx_free(shape.data);
  rlx_free(want.data);
}

int main(void) {
  rlx_graph* probe = NULL;
  if (access(CASE "/model.onnx", R_OK) != 0 ||
      rlx_onnx_load(CASE "/model.onnx", &probe, NULL) == RLX_UNIMPLEMENTED) {
    printf("SKIP: ONNX import not built or libonnx-testdata missing\n");
    return 77;
  }
  rlx_graph_destroy(probe);
  RUN(reshape_target_frozen);
  return test_summary();
}
