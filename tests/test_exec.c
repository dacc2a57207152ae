/* Executable API semantics: errors leave the executable usable, params and
 * inputs are checked, symbolic bindings recompile (cached), active extent,
 * feeds (whole output and one row), selective readback, output dtypes,
 * clone, per-run seed, report and memory stats, and the decompose pass. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "passes/decompose.h"

static rlx_compile_options ref_options(void) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  return o;
}

/* y = relu(x + b), x: f32[2,3] input, b: f32[3] param */
static rlx_graph* bias_relu_graph(void) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim xs[2] = {2, 3}, bs[1] = {3};
  rlx_tensor x, b, s, y;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_param(g, "b", RLX_F32, bs, 1, &b);
  rlx_graph_add_binary(g, RLX_BIN_ADD, x, b, &s);
  rlx_graph_add_activation(g, RLX_ACT_RELU, s, &y);
  rlx_graph_set_outputs(g, &y, 1);
  return g;
}

TEST(unknown_and_unbuilt_devices) {
  rlx_graph* g = bias_relu_graph();
  rlx_exec* e = NULL;
  CHECK(rlx_compile(g, "tpu", NULL, &e) == RLX_NOT_FOUND);
  CHECK(strstr(rlx_graph_last_error(g), "tpu") != NULL);
  CHECK(e == NULL);
  rlx_device_info info;
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    CHECK(rlx_device_get(i, &info) == RLX_OK);
    if (strcmp(info.name, "cpu") == 0) CHECK(info.available);
    if (!info.available) {
      rlx_status s = rlx_compile(g, info.name, NULL, &e);
      CHECK(s != RLX_OK && e == NULL);
      CHECK(strstr(rlx_graph_last_error(g), info.name) != NULL);
    }
  }
  rlx_graph_destroy(g);
}

TEST(params_inputs_checked_and_exec_stays_usable) {
  rlx_graph* g = bias_relu_graph();
  rlx_exec* e = NULL;
  rlx_compile_options o = ref_options();
  CHECK_OK_G(g, rlx_compile(g, "cpu", &o, &e));
  float x[6] = {-1, 2, -3, 4, -5, 6}, b[3] = {0.5f, -0.5f, 1}, y[6];
  rlx_dim xs[2] = {2, 3}, bad[2] = {3, 2}, bsh[1] = {3};
  CHECK(rlx_exec_run(e) == RLX_FAILED_PRECONDITION); /* nothing set */
  CHECK(rlx_exec_set_param(e, "nope", RLX_F32, b, sizeof b) == RLX_NOT_FOUND);
  CHECK(strstr(rlx_exec_last_error(e), "nope") != NULL);
  CHECK(rlx_exec_set_param(e, "b", RLX_F32, b, 8) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_exec_set_param(e, "b", RLX_I32, b, sizeof b) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_exec_set_param(e, "x", RLX_F32, b, sizeof b) == RLX_NOT_FOUND);
  CHECK(rlx_exec_set_input(e, "b", RLX_F32, bsh, 1, b, sizeof b) == RLX_NOT_FOUND);
  CHECK(rlx_exec_set_input(e, "x", RLX_F32, bad, 2, x, sizeof x) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_exec_set_input(e, "x", RLX_F64, xs, 2, x, sizeof x) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof x - 4) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_exec_set_input(e, "x", RLX_F32, xs, 1, x, sizeof x) == RLX_INVALID_ARGUMENT);
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof x));
  CHECK(rlx_exec_run(e) == RLX_FAILED_PRECONDITION); /* param not set */
  CHECK(strstr(rlx_exec_last_error(e), "'b'") != NULL);
  CHECK_OK_E(e, rlx_exec_set_param(e, "b", RLX_F32, b, sizeof b));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, y, sizeof y));
  for (int i = 0; i < 6; i++) CHECK(y[i] == fmaxf(x[i] + b[i % 3], 0));
  /* reading: too small, bad dtype, bad index */
  CHECK(rlx_exec_read_output(e, 0, RLX_F32, y, sizeof y - 1) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_exec_read_output(e, 0, RLX_I32, y, sizeof y) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_exec_read_output(e, 1, RLX_F32, y, sizeof y) == RLX_INVALID_ARGUMENT);
  /* output dtype conversion: f32 read as f64 and f16 */
  double yd[6];
  uint16_t yh[6];
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F64, yd, sizeof yd));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F16, yh, sizeof yh));
  for (int i = 0; i < 6; i++) CHECK(yd[i] == (double)y[i]);
  /* a second run after new input reuses the params */
  x[0] = 10;
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof x));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, y, sizeof y));
  CHECK(y[0] == 10.5f);
  /* selective readback */
  int32_t none = 0;
  CHECK_OK_E(e, rlx_exec_select_outputs(e, &none, 0));
  CHECK(rlx_exec_read_output(e, 0, RLX_F32, y, sizeof y) == RLX_FAILED_PRECONDITION);
  CHECK_OK_E(e, rlx_exec_select_outputs(e, NULL, -1));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, y, sizeof y));
  /* param given as f32 into an f16 param converts; as f16 bits is exact */
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(half_params_convert) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {4};
  rlx_tensor w, c;
  rlx_graph_add_param(g, "w", RLX_F16, s, 1, &w);
  rlx_graph_add_cast(g, w, RLX_F32, &c);
  rlx_graph_set_outputs(g, &c, 1);
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  float wf[4] = {1.5f, -2.25f, 1000.0f, 0.1f}, out[4];
  CHECK_OK_E(e, rlx_exec_set_param(e, "w", RLX_F32, wf, sizeof wf));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out));
  CHECK(out[0] == 1.5f && out[1] == -2.25f && out[2] == 1000.0f && fabsf(out[3] - 0.1f) < 1e-4f);
  uint16_t bits[4] = {0x3c00, 0xc000, 0x0000, 0x3800}; /* 1, -2, 0, 0.5 */
  CHECK_OK_E(e, rlx_exec_set_param(e, "w", RLX_F16, bits, sizeof bits));
  CHECK(rlx_exec_set_param(e, "w", RLX_BF16, bits, sizeof bits) == RLX_INVALID_ARGUMENT);
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out));
  CHECK(out[0] == 1 && out[1] == -2 && out[2] == 0 && out[3] == 0.5f);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* y = x * 2 with x: [batch, 3]; two bindings, cached */
TEST(symbolic_binding_recompiles) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim batch;
  CHECK_OK_G(g, rlx_graph_symbol(g, "batch", &batch));
  rlx_dim xs[2] = {batch, 3}, one[1] = {1};
  rlx_tensor x, x2, two, y, m;
  float two_f = 2;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_input(g, "x2", RLX_F32, xs, 2, &x2);
  rlx_graph_add_constant(g, RLX_F32, one, 1, &two_f, sizeof two_f, &two);
  rlx_graph_add_binary(g, RLX_BIN_MUL, x, two, &y);
  rlx_graph_add_binary(g, RLX_BIN_ADD, y, x2, &m);
  rlx_graph_set_outputs(g, &m, 1);
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  for (int round = 0; round < 3; round++) {
    int64_t b = round == 1 ? 5 : 2;
    float x_data[15], out[15];
    test_fill_f32(x_data, 15, -1, 1);
    rlx_dim s[2] = {b, 3};
    CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s, 2, x_data, (size_t)b * 12));
    CHECK_OK_E(e, rlx_exec_set_input(e, "x2", RLX_F32, s, 2, x_data, (size_t)b * 12));
    CHECK_OK_E(e, rlx_exec_run(e));
    int64_t shape[8];
    int32_t rank;
    CHECK_OK_E(e, rlx_exec_output_type(e, 0, NULL, &rank, shape));
    CHECK(rank == 2 && shape[0] == b && shape[1] == 3);
    CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, (size_t)b * 12));
    for (int i = 0; i < b * 3; i++) CHECK(out[i] == x_data[i] * 3);
  }
  /* inconsistent binding: x has batch 2, x2 batch 5 */
  float d[15] = {1};
  rlx_dim s2[2] = {2, 3}, s5[2] = {5, 3};
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s2, 2, d, 24));
  CHECK_OK_E(e, rlx_exec_set_input(e, "x2", RLX_F32, s5, 2, d, 60));
  CHECK(rlx_exec_run(e) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_exec_last_error(e), "batch") != NULL);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* Compiled at n = 8 rows, run at 3: y = softmax(x, axis=-1) * 1 row-wise */
TEST(active_extent) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim n;
  rlx_graph_symbol(g, "n", &n);
  rlx_dim xs[2] = {n, 4};
  rlx_tensor x, y;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_softmax(g, x, -1, &y);
  rlx_graph_set_outputs(g, &y, 1);
  const char* names[1] = {"n"};
  int64_t sizes[1] = {8};
  rlx_compile_options o = ref_options();
  o.symbol_names = names;
  o.symbol_sizes = sizes;
  o.n_symbols = 1;
  o.extent_symbol = "n";
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", &o, &e));
  CHECK(rlx_exec_set_active_extent(e, 9) == RLX_INVALID_ARGUMENT);
  CHECK_OK_E(e, rlx_exec_set_active_extent(e, 3));
  float x_data[12], out[12];
  test_fill_f32(x_data, 12, -2, 2);
  rlx_dim s3[2] = {3, 4};
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s3, 2, x_data, sizeof x_data));
  CHECK_OK_E(e, rlx_exec_run(e));
  int64_t shape[8];
  int32_t rank;
  CHECK_OK_E(e, rlx_exec_output_type(e, 0, NULL, &rank, shape));
  CHECK(rank == 2 && shape[0] == 3);
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out));
  for (int r = 0; r < 3; r++) {
    double m = -INFINITY, sum = 0;
    for (int c = 0; c < 4; c++) m = fmax(m, x_data[r * 4 + c]);
    for (int c = 0; c < 4; c++) sum += exp(x_data[r * 4 + c] - m);
    for (int c = 0; c < 4; c++) CHECK(fabs(out[r * 4 + c] - exp(x_data[r * 4 + c] - m) / sum) < 1e-6);
  }
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  /* the extent symbol may not appear in a later dim */
  rlx_graph_create(&g);
  rlx_graph_symbol(g, "n", &n);
  rlx_dim bad[2] = {2, n};
  rlx_graph_add_input(g, "x", RLX_F32, bad, 2, &x);
  rlx_graph_add_activation(g, RLX_ACT_EXP, x, &y);
  rlx_graph_set_outputs(g, &y, 1);
  CHECK(rlx_compile(g, "cpu", &o, &e) == RLX_INVALID_ARGUMENT);
  rlx_graph_destroy(g);
}

/* state' = state + 1 fed back on the device; and a row feed. */
TEST(feeds_whole_and_row) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s4[1] = {4}, s34[2] = {3, 4}, one[1] = {1};
  rlx_tensor st, r, c, y, big;
  float one_f = 1;
  rlx_graph_add_input(g, "state", RLX_F32, s4, 1, &st);
  rlx_graph_add_input(g, "row", RLX_F32, s4, 1, &r);
  rlx_graph_add_constant(g, RLX_F32, one, 1, &one_f, 4, &c);
  rlx_graph_add_binary(g, RLX_BIN_ADD, st, c, &y);
  rlx_graph_add_expand(g, r, s34, 2, &big); /* [3,4]: every row = row */
  rlx_tensor outs[2] = {y, big};
  rlx_graph_set_outputs(g, outs, 2);
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  float st0[4] = {1, 2, 3, 4}, row0[4] = {5, 6, 7, 8}, out[12];
  CHECK_OK_E(e, rlx_exec_set_input(e, "state", RLX_F32, s4, 1, st0, 16));
  CHECK_OK_E(e, rlx_exec_set_input(e, "row", RLX_F32, s4, 1, row0, 16));
  CHECK(rlx_exec_feed(e, "nope", 0, -1) == RLX_NOT_FOUND);
  CHECK(rlx_exec_feed(e, "state", 7, -1) == RLX_INVALID_ARGUMENT);
  CHECK_OK_E(e, rlx_exec_feed(e, "state", 0, -1));
  CHECK_OK_E(e, rlx_exec_feed(e, "row", 1, 2));
  for (int i = 0; i < 3; i++) CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, 16));
  for (int i = 0; i < 4; i++) CHECK(out[i] == st0[i] + 3);
  CHECK_OK_E(e, rlx_exec_read_output_row(e, 1, 2, RLX_F32, out, 16));
  for (int i = 0; i < 4; i++) CHECK(out[i] == row0[i]);
  CHECK(rlx_exec_read_output_row(e, 1, 3, RLX_F32, out, 16) == RLX_OUT_OF_RANGE);
  /* setting the input again overrides the fed value */
  CHECK_OK_E(e, rlx_exec_set_input(e, "state", RLX_F32, s4, 1, st0, 16));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, 16));
  for (int i = 0; i < 4; i++) CHECK(out[i] == st0[i] + 1);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* Device state: cache' = Where(pos == arange, row, cache) kept in the
 * cache's own bytes (no copy, smaller arena); a reader of the old cache after
 * the update keeps the pair from aliasing (still correct); clone keeps it. */
static rlx_graph* kv_graph(int read_old_after) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim cs[3] = {5, 2, 3}, rs[3] = {1, 2, 3}, ps[1] = {1}, as[1] = {5}, ats[3] = {5, 1, 1};
  int64_t ar[5] = {0, 1, 2, 3, 4};
  rlx_tensor cache, row, pos, arange, eq, at, upd, sum;
  rlx_graph_add_input(g, "cache", RLX_F32, cs, 3, &cache);
  rlx_graph_add_input(g, "row", RLX_F32, rs, 3, &row);
  rlx_graph_add_input(g, "pos", RLX_I64, ps, 1, &pos);
  rlx_graph_add_constant(g, RLX_I64, as, 1, ar, sizeof ar, &arange);
  rlx_graph_add_compare(g, RLX_CMP_EQ, arange, pos, &eq);
  rlx_graph_add_reshape(g, eq, ats, 3, &at);
  rlx_graph_add_where(g, at, row, cache, &upd);
  /* sum of the updated cache, or of the old one read after the update */
  rlx_graph_add_reduce(g, RLX_RED_SUM, read_old_after ? cache : upd, NULL, 0, 0, &sum);
  rlx_tensor outs[2] = {upd, sum};
  rlx_graph_set_outputs(g, outs, 2);
  return g;
}

static void kv_check_runs(rlx_exec* e, int read_old_after) {
  float cache[30], out[30], sum = 0;
  rlx_dim cs[3] = {5, 2, 3}, rs[3] = {1, 2, 3}, ps[1] = {1};
  for (int i = 0; i < 30; i++) cache[i] = (float)test_rand_uniform(-1, 1);
  CHECK_OK_E(e, rlx_exec_set_input(e, "cache", RLX_F32, cs, 3, cache, sizeof cache));
  for (int64_t p = 0; p < 5; p++) {
    float row[6], old = 0;
    for (int j = 0; j < 6; j++) row[j] = (float)(p * 10 + j);
    for (int i = 0; i < 30; i++) old += cache[i];
    memcpy(cache + 6 * p, row, sizeof row);
    CHECK_OK_E(e, rlx_exec_set_input(e, "row", RLX_F32, rs, 3, row, sizeof row));
    CHECK_OK_E(e, rlx_exec_set_input(e, "pos", RLX_I64, ps, 1, &p, sizeof p));
    CHECK_OK_E(e, rlx_exec_run(e));
    CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out));
    for (int i = 0; i < 30; i++) CHECK_MSG(out[i] == cache[i], "pos %lld elem %d: %g vs %g", (long long)p, i, out[i], cache[i]);
    CHECK_OK_E(e, rlx_exec_read_output(e, 1, RLX_F32, &sum, sizeof sum));
    float want = 0;
    for (int i = 0; i < 30; i++) want += cache[i];
    if (read_old_after) want = old;
    CHECK_MSG(fabsf(sum - want) < 1e-4f, "pos %lld: sum %g, want %g", (long long)p, sum, want);
  }
}

TEST(device_state_in_place) {
  const char* names[1] = {"cache"};
  const char* bad_name[1] = {"nope"};
  int32_t outs[1] = {0}, sum_out[1] = {1};
  for (int read_old = 0; read_old < 2; read_old++) {
    rlx_graph* g = kv_graph(read_old);
    rlx_compile_options o = ref_options();
    rlx_exec *e = NULL, *plain = NULL, *c = NULL;
    o.state_inputs = bad_name;
    o.state_outputs = outs;
    o.n_states = 1;
    CHECK(rlx_compile(g, "cpu", &o, &e) == RLX_NOT_FOUND);
    o.state_inputs = names;
    o.state_outputs = sum_out; /* a scalar into a [5,2,3] input: bytes differ at run time */
    CHECK_OK_G(g, rlx_compile(g, "cpu", &o, &e));
    rlx_exec_destroy(e);
    o.state_outputs = outs;
    CHECK_OK_G(g, rlx_compile(g, "cpu", &o, &e));
    CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &plain));
    CHECK(rlx_exec_feed(e, "cache", 0, -1) == RLX_FAILED_PRECONDITION);
    kv_check_runs(e, read_old);
    rlx_memory_stats with_state, without;
    CHECK_OK_E(e, rlx_exec_memory_stats(e, &with_state));
    CHECK_OK_E(plain, rlx_exec_memory_stats(plain, &without));
    /* in place: the updated cache needs no bytes of its own */
    if (!read_old) CHECK_MSG(with_state.arena_bytes < without.arena_bytes, "arena %llu vs %llu",
                             (unsigned long long)with_state.arena_bytes, (unsigned long long)without.arena_bytes);
    else CHECK(with_state.arena_bytes == without.arena_bytes);
    CHECK_OK_E(e, rlx_exec_clone(e, &c));
    CHECK(rlx_exec_feed(c, "cache", 0, -1) == RLX_FAILED_PRECONDITION);
    kv_check_runs(c, read_old);
    rlx_exec_destroy(c);
    rlx_exec_destroy(plain);
    rlx_exec_destroy(e);
    rlx_graph_destroy(g);
  }
}

TEST(clone_report_stats) {
  rlx_graph* g = bias_relu_graph();
  rlx_exec *e = NULL, *c = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  float x[6] = {1, 2, 3, 4, 5, 6}, b[3] = {1, 1, 1}, y1[6], y2[6];
  rlx_dim xs[2] = {2, 3};
  CHECK_OK_E(e, rlx_exec_set_param(e, "b", RLX_F32, b, sizeof b));
  CHECK_OK_E(e, rlx_exec_clone(e, &c));
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof x));
  x[0] = 100;
  CHECK_OK_E(c, rlx_exec_set_input(c, "x", RLX_F32, xs, 2, x, sizeof x));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(c, rlx_exec_run(c));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, y1, sizeof y1));
  CHECK_OK_E(c, rlx_exec_read_output(c, 0, RLX_F32, y2, sizeof y2));
  CHECK(y1[0] == 2 && y2[0] == 101 && y1[5] == 7 && y2[5] == 7);
  char* report = NULL;
  CHECK_OK_E(e, rlx_exec_report(e, &report));
  CHECK(strstr(report, "binary") != NULL && strstr(report, "arena") != NULL);
  rlx_free(report);
  rlx_memory_stats ms;
  CHECK_OK_E(e, rlx_exec_memory_stats(e, &ms));
  CHECK(ms.arena_bytes >= ms.peak_live_bytes && ms.peak_live_bytes > 0 && ms.launches >= 2);
  rlx_exec_destroy(c);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(sample_seed_per_run) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim ls[2] = {64, 10};
  rlx_tensor l, s;
  rlx_graph_add_input(g, "logits", RLX_F32, ls, 2, &l);
  rlx_graph_add_sample(g, l, 0, 1.0f, 1.0f, &s);
  rlx_graph_set_outputs(g, &s, 1);
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_compile(g, "cpu", NULL, &e));
  float logits[640];
  for (int i = 0; i < 640; i++) logits[i] = 0.1f * (float)(i % 10);
  int64_t a[64], b[64], c[64];
  CHECK_OK_E(e, rlx_exec_set_input(e, "logits", RLX_F32, ls, 2, logits, sizeof logits));
  CHECK_OK_E(e, rlx_exec_set_seed(e, 1));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_I64, a, sizeof a));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_I64, b, sizeof b));
  CHECK_OK_E(e, rlx_exec_set_seed(e, 2));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_I64, c, sizeof c));
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK(memcmp(a, c, sizeof a) != 0);
  for (int i = 0; i < 64; i++) CHECK(a[i] >= 0 && a[i] < 10);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* debug_nans names the first node whose output is not finite. */
TEST(debug_nans_names_node) {
  rlx_graph* g = NULL;
  rlx_graph_create(&g);
  rlx_dim s[1] = {5};
  rlx_tensor x, a, l, y;
  rlx_graph_add_input(g, "x", RLX_F32, s, 1, &x);
  rlx_graph_add_activation(g, RLX_ACT_EXP, x, &a);
  rlx_graph_add_activation(g, RLX_ACT_LOG, x, &l);
  rlx_graph_set_name(g, l, "the_log");
  rlx_graph_add_binary(g, RLX_BIN_ADD, a, l, &y);
  rlx_graph_set_outputs(g, &y, 1);
  float xs[5] = {1, 2, -3, 4, 5};
  for (int debug = 0; debug < 2; debug++) {
    rlx_compile_options o;
    rlx_compile_options_init(&o);
    o.debug_nans = debug;
    rlx_exec* e = NULL;
    CHECK_OK_G(g, rlx_compile(g, "cpu", &o, &e));
    CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, s, 1, xs, sizeof xs));
    rlx_status st = rlx_exec_run(e);
    if (debug) {
      CHECK(st == RLX_OUT_OF_RANGE);
      CHECK_MSG(strstr(rlx_exec_last_error(e), "the_log") != NULL, "%s", rlx_exec_last_error(e));
      CHECK(strstr(rlx_exec_last_error(e), "element 2") != NULL);
    } else {
      CHECK(st == RLX_OK);
    }
    rlx_exec_destroy(e);
  }
  rlx_graph_destroy(g);
}

static int supports_nothing(const rlx_graph* g, int32_t ni) { return 0; }

/* Runs graph g and its full decomposition on the CPU; outputs must agree. */
static double decomposed_difference(rlx_graph* g, const char* in_name, const rlx_dim* shape,
                                    int32_t rank, int32_t* rewritten) {
  int32_t counts[64] = {0};
  rlx_graph* d = NULL;
  if (rlx_decompose(g, supports_nothing, &d, counts) != RLX_OK) return INFINITY;
  *rewritten = 0;
  for (int i = 0; i < 64; i++) *rewritten += counts[i];
  rlx_graph* graphs[2] = {g, d};
  double out[2][512];
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++) n *= shape[i];
  float* x = malloc(sizeof(float) * (size_t)n);
  test_fill_f32(x, n, -2, 2);
  int64_t numel = 0;
  for (int k = 0; k < 2; k++) {
    rlx_exec* e = NULL;
    if (rlx_compile(graphs[k], "cpu", NULL, &e) != RLX_OK) { numel = -1; break; }
    rlx_exec_set_input(e, in_name, RLX_F32, shape, rank, x, sizeof(float) * (size_t)n);
    if (rlx_exec_run(e) != RLX_OK) { rlx_exec_destroy(e); numel = -1; break; }
    numel = 0;
    for (int32_t o = 0; o < rlx_exec_output_count(e); o++) {
      int64_t os[8];
      int32_t orank;
      rlx_dtype dt;
      rlx_exec_output_type(e, o, &dt, &orank, os);
      int64_t m = 1;
      for (int32_t i = 0; i < orank; i++) m *= os[i];
      if (dt == RLX_I64) {
        int64_t tmp[256];
        rlx_exec_read_output(e, o, RLX_I64, tmp, sizeof tmp);
        for (int64_t i = 0; i < m; i++) out[k][numel + i] = (double)tmp[i];
      } else {
        rlx_exec_read_output(e, o, RLX_F64, &out[k][numel], sizeof(double) * (size_t)m);
      }
      numel += m;
    }
    rlx_exec_destroy(e);
  }
  free(x);
  rlx_graph_destroy(d);
  if (numel <= 0) return INFINITY;
  return test_rel_l2(out[1], out[0], numel);
}

TEST(decompose_rules_are_exact) {
  rlx_dim xs[3] = {3, 4, 5};
  /* softmax / topk / argmax / cumsum on axis 0 and 1 */
  for (int axis = 0; axis < 2; axis++) {
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_tensor x, sm, tv, ti, am, cs, outs[5];
    rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x);
    rlx_graph_add_softmax(g, x, axis, &sm);
    rlx_graph_add_topk(g, x, 2, axis, 1, &tv, &ti);
    rlx_graph_add_argmax(g, x, axis, 0, &am);
    rlx_graph_add_cumsum(g, x, axis, 1, 0, &cs);
    outs[0] = sm; outs[1] = tv; outs[2] = ti; outs[3] = am; outs[4] = cs;
    CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 5));
    int32_t rewritten = 0;
    double d = decomposed_difference(g, "x", xs, 3, &rewritten);
    CHECK_MSG(d < 1e-6, "axis %d: difference %g", axis, d);
    CHECK(rewritten == 4);
    rlx_graph_destroy(g);
  }
  /* fused matmul + bias + gelu, fused residual layer/rms norm */
  {
    rlx_graph* g = NULL;
    rlx_graph_create(&g);
    rlx_dim ws[2] = {5, 5}, bs[1] = {5};
    float w[25], bias[5], gamma[5], beta[5];
    test_fill_f32(w, 25, -1, 1);
    test_fill_f32(bias, 5, -1, 1);
    test_fill_f32(gamma, 5, 0.5, 1.5);
    test_fill_f32(beta, 5, -1, 1);
    rlx_tensor x, W, B, G, Be, y, n1, s1, n2, s2, outs[5];
    rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x);
    rlx_graph_add_constant(g, RLX_F32, ws, 2, w, sizeof w, &W);
    rlx_graph_add_constant(g, RLX_F32, bs, 1, bias, sizeof bias, &B);
    rlx_graph_add_constant(g, RLX_F32, bs, 1, gamma, sizeof gamma, &G);
    rlx_graph_add_constant(g, RLX_F32, bs, 1, beta, sizeof beta, &Be);
    CHECK_OK_G(g, rlx_graph_add_fused_matmul_bias_act(g, x, W, B, 0, 1, RLX_ACT_GELU, &y));
    CHECK_OK_G(g, rlx_graph_add_fused_residual_layer_norm(g, y, x, B, G, Be, 1e-5f, &n1, &s1));
    CHECK_OK_G(g, rlx_graph_add_fused_residual_rms_norm(g, y, x, RLX_NONE, G, 1e-6f, &n2, &s2));
    outs[0] = y; outs[1] = n1; outs[2] = s1; outs[3] = n2; outs[4] = s2;
    CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 5));
    int32_t rewritten = 0;
    double d = decomposed_difference(g, "x", xs, 3, &rewritten);
    CHECK_MSG(d < 1e-6, "fused ops: difference %g", d);
    CHECK(rewritten == 3);
    rlx_graph_destroy(g);
  }
}

int main(void) {
  test_seed(42);
  RUN(unknown_and_unbuilt_devices);
  RUN(params_inputs_checked_and_exec_stays_usable);
  RUN(half_params_convert);
  RUN(symbolic_binding_recompiles);
  RUN(active_extent);
  RUN(feeds_whole_and_row);
  RUN(device_state_in_place);
  RUN(clone_report_stats);
  RUN(sample_seed_per_run);
  RUN(decompose_rules_are_exact);
  RUN(debug_nans_names_node);
  return test_summary();
}
