/* The public API that lets programs (tools/, bench/, users) work without
 * private headers: listing a graph's inputs, params, outputs and symbols,
 * Graphviz output, dtype conversion, .npy files, ONNX loading that names the
 * input it needs, and device timing. Real values and error cases. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* x: f32[batch,4], ids: i64[3], w: f32[4,5], b: f32[5];
 * outputs: h = relu(x @ w + b) labelled "h", then argmax(ids) unlabelled. */
static rlx_graph* small_graph(void) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim batch;
  rlx_tensor x, ids, w, b, h, am;
  int ok = rlx_graph_symbol(g, "batch", &batch) == RLX_OK;
  rlx_dim xs[2] = {batch, 4}, is[1] = {3}, ws[2] = {4, 5}, bs[1] = {5};
  ok = ok && rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x) == RLX_OK;
  ok = ok && rlx_graph_add_param(g, "w", RLX_F32, ws, 2, &w) == RLX_OK;
  ok = ok && rlx_graph_add_input(g, "ids", RLX_I64, is, 1, &ids) == RLX_OK;
  ok = ok && rlx_graph_add_param(g, "b", RLX_F32, bs, 1, &b) == RLX_OK;
  ok = ok && rlx_graph_add_fused_matmul_bias_act(g, x, w, b, 0, 0, RLX_ACT_RELU, &h) == RLX_OK;
  ok = ok && rlx_graph_set_name(g, h, "h") == RLX_OK;
  ok = ok && rlx_graph_add_argmax(g, ids, 0, 0, &am) == RLX_OK;
  rlx_tensor outs[2] = {h, am};
  ok = ok && rlx_graph_set_outputs(g, outs, 2) == RLX_OK;
  if (!ok) {
    fprintf(stderr, "small_graph: %s\n", rlx_graph_last_error(g));
    rlx_graph_destroy(g);
    return NULL;
  }
  return g;
}

TEST(graph_lists_inputs_params_outputs) {
  rlx_graph* g = small_graph();
  CHECK(g);
  CHECK(rlx_graph_input_count(g) == 2);
  CHECK(rlx_graph_param_count(g) == 2);
  CHECK(rlx_graph_output_count(g) == 2);
  CHECK(rlx_graph_symbol_count(g) == 1);
  rlx_value_info in;
  CHECK_OK_G(g, rlx_graph_get_input(g, 0, &in));
  CHECK(strcmp(in.name, "x") == 0 && in.dtype == RLX_F32 && in.rank == 2);
  CHECK(in.shape[0] == -1 && strcmp(in.dim_names[0], "batch") == 0);
  CHECK(in.shape[1] == 4 && in.dim_names[1] == NULL);
  CHECK_OK_G(g, rlx_graph_get_input(g, 1, &in));
  CHECK(strcmp(in.name, "ids") == 0 && in.dtype == RLX_I64 && in.rank == 1 && in.shape[0] == 3);
  rlx_value_info p;
  CHECK_OK_G(g, rlx_graph_get_param(g, 0, &p));
  CHECK(strcmp(p.name, "w") == 0 && p.rank == 2 && p.shape[0] == 4 && p.shape[1] == 5);
  CHECK_OK_G(g, rlx_graph_get_param(g, 1, &p));
  CHECK(strcmp(p.name, "b") == 0 && p.rank == 1 && p.shape[0] == 5 && p.dtype == RLX_F32);
  rlx_value_info o;
  CHECK_OK_G(g, rlx_graph_get_output(g, 0, &o));
  CHECK(o.name && strcmp(o.name, "h") == 0 && o.dtype == RLX_F32 && o.rank == 2);
  CHECK(o.shape[0] == -1 && strcmp(o.dim_names[0], "batch") == 0 && o.shape[1] == 5);
  rlx_dtype dt;
  int32_t rank;
  rlx_dim shape[RLX_MAX_RANK];
  CHECK_OK_G(g, rlx_graph_tensor_type(g, o.tensor, &dt, &rank, shape));
  CHECK(dt == RLX_F32 && rank == 2 && shape[1] == 5);
  CHECK_OK_G(g, rlx_graph_get_output(g, 1, &o));
  CHECK(o.name == NULL && o.dtype == RLX_I64 && o.rank == 0);
  const char* sym = NULL;
  CHECK_OK_G(g, rlx_graph_symbol_name(g, -1, &sym));
  CHECK(sym && strcmp(sym, "batch") == 0);
  rlx_graph_destroy(g);
}

TEST(graph_list_errors) {
  rlx_graph* g = small_graph();
  CHECK(g);
  rlx_value_info info;
  CHECK(rlx_graph_get_input(g, 2, &info) == RLX_OUT_OF_RANGE);
  CHECK(strstr(rlx_graph_last_error(g), "input index 2") != NULL);
  CHECK(rlx_graph_get_input(g, -1, &info) == RLX_OUT_OF_RANGE);
  CHECK(rlx_graph_get_param(g, 2, &info) == RLX_OUT_OF_RANGE);
  CHECK(strstr(rlx_graph_last_error(g), "param index 2") != NULL);
  CHECK(rlx_graph_get_output(g, 5, &info) == RLX_OUT_OF_RANGE);
  CHECK(strstr(rlx_graph_last_error(g), "output index 5") != NULL);
  CHECK(rlx_graph_get_input(g, 0, NULL) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_graph_get_param(NULL, 0, &info) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_graph_get_output(g, 0, NULL) == RLX_INVALID_ARGUMENT);
  const char* sym = "unchanged";
  CHECK(rlx_graph_symbol_name(g, -2, &sym) == RLX_NOT_FOUND && sym == NULL);
  CHECK(strstr(rlx_graph_last_error(g), "1 symbols") != NULL);
  CHECK(rlx_graph_symbol_name(g, 3, &sym) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_graph_symbol_name(g, -1, NULL) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_graph_input_count(NULL) == 0 && rlx_graph_output_count(NULL) == 0);
  CHECK(rlx_graph_param_count(NULL) == 0 && rlx_graph_symbol_count(NULL) == 0);
  rlx_graph_destroy(g);
}

TEST(exec_lists_dot_and_timing) {
  rlx_graph* g = small_graph();
  CHECK(g);
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  const char* names[1] = {"batch"};
  int64_t sizes[1] = {2};
  o.symbol_names = names;
  o.symbol_sizes = sizes;
  o.n_symbols = 1;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", &o, &e));
  CHECK(rlx_exec_input_count(e) == 2 && rlx_exec_param_count(e) == 2);
  rlx_value_info info;
  CHECK_OK_E(e, rlx_exec_get_param(e, 1, &info));
  CHECK(strcmp(info.name, "b") == 0 && info.shape[0] == 5);
  CHECK_OK_E(e, rlx_exec_get_input(e, 0, &info));
  CHECK(strcmp(info.name, "x") == 0 && strcmp(info.dim_names[0], "batch") == 0);
  CHECK(rlx_exec_get_input(e, 7, &info) == RLX_OUT_OF_RANGE);
  CHECK(strstr(rlx_exec_last_error(e), "input index 7") != NULL);
  CHECK(rlx_exec_get_param(e, 0, NULL) == RLX_INVALID_ARGUMENT);
  char* dot = NULL;
  CHECK_OK_E(e, rlx_exec_print_dot(e, "after", &dot));
  CHECK(dot && strstr(dot, "digraph \"after\"") && strstr(dot, "fused_matmul_bias_act"));
  rlx_free(dot);
  CHECK(rlx_exec_print_dot(e, NULL, NULL) == RLX_INVALID_ARGUMENT);
  double ms = 0;
  CHECK(rlx_exec_last_device_ms(e, &ms) == RLX_UNIMPLEMENTED && ms == -1);
  CHECK(rlx_exec_last_device_ms(e, NULL) == RLX_INVALID_ARGUMENT);
  rlx_exec_destroy(e);
  /* Unbound symbol: nothing compiled yet, so there is no graph to draw. */
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  dot = NULL;
  CHECK(rlx_exec_print_dot(e, NULL, &dot) == RLX_FAILED_PRECONDITION && dot == NULL);
  CHECK(strstr(rlx_exec_last_error(e), "not compiled") != NULL);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(graph_print_dot) {
  rlx_graph* g = small_graph();
  CHECK(g);
  char* dot = NULL;
  CHECK_OK_G(g, rlx_graph_print_dot(g, "small", &dot));
  CHECK(dot && strncmp(dot, "digraph \"small\"", 15) == 0);
  CHECK(strstr(dot, "\"x\"") || strstr(dot, "x"));
  CHECK(strstr(dot, "argmax") != NULL);
  rlx_free(dot);
  CHECK(rlx_graph_print_dot(NULL, NULL, &dot) == RLX_INVALID_ARGUMENT && dot == NULL);
  CHECK(rlx_graph_print_dot(g, NULL, NULL) == RLX_INVALID_ARGUMENT);
  rlx_graph_destroy(g);
}

TEST(dtype_helpers) {
  CHECK(rlx_dtype_is_float(RLX_BF16) && rlx_dtype_is_float(RLX_F64));
  CHECK(!rlx_dtype_is_float(RLX_I32) && !rlx_dtype_is_float(RLX_BOOL));
  CHECK(!rlx_dtype_is_float(RLX_DTYPE_COUNT));
  float f[5] = {1.75f, -2.5f, 3e10f, NAN, -0.0f};
  int32_t i[5];
  CHECK(rlx_dtype_convert(i, RLX_I32, f, RLX_F32, 5) == RLX_OK);
  CHECK(i[0] == 1 && i[1] == -2 && i[2] == INT32_MAX && i[3] == 0 && i[4] == 0);
  uint8_t bo[5];
  CHECK(rlx_dtype_convert(bo, RLX_BOOL, f, RLX_F32, 5) == RLX_OK);
  CHECK(bo[0] == 1 && bo[1] == 1 && bo[4] == 0);
  int64_t big = ((int64_t)1 << 53) + 1, back = 0;
  double d = 0;
  CHECK(rlx_dtype_convert(&back, RLX_I64, &big, RLX_I64, 1) == RLX_OK && back == big);
  CHECK(rlx_dtype_convert(&d, RLX_F64, &big, RLX_I64, 1) == RLX_OK && d == 9007199254740992.0);
  uint16_t h;
  float one = 1.0f;
  CHECK(rlx_dtype_convert(&h, RLX_BF16, &one, RLX_F32, 1) == RLX_OK && h == 0x3f80);
  CHECK(rlx_dtype_convert(i, RLX_DTYPE_COUNT, f, RLX_F32, 1) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_dtype_convert(i, RLX_I32, f, RLX_F32, -1) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_dtype_convert(NULL, RLX_I32, f, RLX_F32, 1) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_dtype_convert(NULL, RLX_I32, NULL, RLX_F32, 0) == RLX_OK);
}

TEST(npy_save_load) {
  char path[] = "/tmp/rlx_test_api_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  int64_t shape[2] = {2, 3};
  int32_t data[6] = {1, -2, 3, -4, 5, 600000};
  char* msg = NULL;
  CHECK(rlx_npy_save(path, RLX_I32, 2, shape, data, sizeof data, &msg) == RLX_OK && !msg);
  rlx_dtype dt;
  int32_t rank;
  int64_t got_shape[RLX_MAX_RANK];
  void* got = NULL;
  size_t bytes = 0;
  CHECK_MSG(rlx_npy_load(path, &dt, &rank, got_shape, &got, &bytes, &msg) == RLX_OK, "%s", msg);
  CHECK(dt == RLX_I32 && rank == 2 && got_shape[0] == 2 && got_shape[1] == 3);
  CHECK(bytes == sizeof data && memcmp(got, data, bytes) == 0);
  rlx_free(got);
  /* Wrong byte count: refused, with a message, and the file is untouched. */
  CHECK(rlx_npy_save(path, RLX_I32, 2, shape, data, 8, &msg) == RLX_INVALID_ARGUMENT);
  CHECK(msg && strstr(msg, "8 bytes") != NULL);
  rlx_free(msg);
  msg = NULL;
  CHECK(rlx_npy_save(path, RLX_BF16, 2, shape, data, 12, &msg) == RLX_UNIMPLEMENTED);
  CHECK(msg && strstr(msg, "bf16") != NULL);
  rlx_free(msg);
  unlink(path);
  msg = NULL;
  got = NULL;
  CHECK(rlx_npy_load(path, &dt, &rank, got_shape, &got, &bytes, &msg) != RLX_OK && !got);
  CHECK(msg && strstr(msg, path) != NULL);
  rlx_free(msg);
  CHECK(rlx_npy_load(path, NULL, &rank, got_shape, &got, &bytes, NULL) == RLX_INVALID_ARGUMENT);
}

#define NODE_DIR "/usr/share/libonnx-testdata/data/node"

static int have_onnx_data(void) {
  return access(NODE_DIR "/test_tan_example/model.onnx", R_OK) == 0 &&
         access(NODE_DIR "/test_reshape_reordered_all_dims/model.onnx", R_OK) == 0;
}

TEST(onnx_model_lists) {
  rlx_graph* g = NULL;
  char* msg = NULL;
  CHECK_MSG(rlx_onnx_load(NODE_DIR "/test_tan_example/model.onnx", &g, &msg) == RLX_OK, "%s", msg);
  CHECK(rlx_graph_input_count(g) == 1 && rlx_graph_param_count(g) == 0);
  CHECK(rlx_graph_output_count(g) == 1);
  rlx_value_info info;
  CHECK_OK_G(g, rlx_graph_get_input(g, 0, &info));
  CHECK(strcmp(info.name, "x") == 0 && info.dtype == RLX_F32 && info.rank == 1 && info.shape[0] == 3);
  CHECK_OK_G(g, rlx_graph_get_output(g, 0, &info));
  CHECK(info.name && strcmp(info.name, "y") == 0 && info.dtype == RLX_F32 && info.shape[0] == 3);
  rlx_graph_destroy(g);
}

TEST(onnx_load_names_needed_input) {
  const char* model = NODE_DIR "/test_reshape_reordered_all_dims/model.onnx";
  rlx_graph* g = NULL;
  char *needs = NULL, *msg = NULL;
  CHECK(rlx_onnx_load_frozen_ex(model, NULL, 0, &g, &needs, &msg) == RLX_FAILED_PRECONDITION);
  CHECK(!g && needs && strcmp(needs, "shape") == 0 && msg && strstr(msg, "shape"));
  rlx_free(needs);
  rlx_free(msg);
  rlx_dtype dt;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  void* data = NULL;
  size_t bytes = 0;
  msg = NULL;
  CHECK_MSG(rlx_onnx_read_tensor(NODE_DIR "/test_reshape_reordered_all_dims/test_data_set_0/input_1.pb",
                                 &dt, &rank, shape, &data, &bytes, &msg) == RLX_OK, "%s", msg);
  rlx_onnx_frozen_input f = {"shape", dt, rank, shape, data, bytes};
  needs = (char*)"unchanged";
  CHECK_MSG(rlx_onnx_load_frozen_ex(model, &f, 1, &g, &needs, &msg) == RLX_OK, "%s", msg);
  CHECK(needs == NULL && g);
  CHECK(rlx_graph_input_count(g) == 1);
  rlx_value_info info;
  CHECK_OK_G(g, rlx_graph_get_input(g, 0, &info));
  CHECK(strcmp(info.name, "data") == 0 && info.rank == 3);
  CHECK_OK_G(g, rlx_graph_get_output(g, 0, &info));
  CHECK(info.rank == 3 && info.shape[0] == 4 && info.shape[1] == 2 && info.shape[2] == 3);
  rlx_free(data);
  rlx_graph_destroy(g);
}

int main(void) {
  RUN(graph_lists_inputs_params_outputs);
  RUN(graph_list_errors);
  RUN(exec_lists_dot_and_timing);
  RUN(graph_print_dot);
  RUN(dtype_helpers);
  RUN(npy_save_load);
  rlx_graph* probe = NULL;
  int onnx_built = rlx_onnx_load("/nonexistent.onnx", &probe, NULL) != RLX_UNIMPLEMENTED;
  if (onnx_built && have_onnx_data()) {
    RUN(onnx_model_lists);
    RUN(onnx_load_names_needed_input);
  } else {
    printf("SKIP onnx_model_lists, onnx_load_names_needed_input: %s\n",
           onnx_built ? "no libonnx-testdata at " NODE_DIR : "ONNX import not built");
  }
  return test_summary();
}
