/* Training ops beyond the parity suite: shape-rule errors, hand-computed
 * cross-entropy values (ignore_index, label smoothing, every target ignored
 * = NaN), bad targets and indices failing the run with OUT_OF_RANGE, and
 * runs repeating bit for bit, on every available device.
 *
 *   test_train_ops [device ...]     default: cpu vulkan webgpu cuda */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static int available(const char* name) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) != RLX_OK || strcmp(info.name, name) != 0) continue;
    if (!info.available) printf("SKIP %s (%s)\n", name, info.detail);
    return info.available;
  }
  return 0;
}

/* ------------------------------------------------------------ shape rules */

static int fails_naming(rlx_graph* g, rlx_status s, const char* a, const char* b) {
  const char* msg = rlx_graph_last_error(g);
  int ok = s != RLX_OK && strstr(msg, a) && strstr(msg, b);
  if (!ok) fprintf(stderr, "status %d, message: %s\n", (int)s, msg);
  return ok;
}

TEST(shape_rules_name_the_problem) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim ls[2] = {4, 5}, ts[1] = {4}, bad_ts[1] = {3}, hs[1] = {RLX_HYPER_COUNT}, h3[1] = {3};
  rlx_tensor x, t, tf, tb, h, hbad, out, o2;
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_F32, ls, 2, &x));
  CHECK_OK_G(g, rlx_graph_add_input(g, "t", RLX_I64, ts, 1, &t));
  CHECK_OK_G(g, rlx_graph_add_input(g, "tf", RLX_F32, ts, 1, &tf));
  CHECK_OK_G(g, rlx_graph_add_input(g, "tb", RLX_I32, bad_ts, 1, &tb));
  CHECK_OK_G(g, rlx_graph_add_input(g, "h", RLX_F32, hs, 1, &h));
  CHECK_OK_G(g, rlx_graph_add_input(g, "hbad", RLX_F32, h3, 1, &hbad));
  CHECK(fails_naming(g, rlx_graph_add_cross_entropy(g, x, tf, -100, 0, &out), "cross_entropy", "targets"));
  CHECK(fails_naming(g, rlx_graph_add_cross_entropy(g, x, tb, -100, 0, &out), "cross_entropy", "targets"));
  CHECK(fails_naming(g, rlx_graph_add_cross_entropy(g, x, t, -100, 1.5f, &out), "cross_entropy",
                     "label_smoothing"));
  CHECK(fails_naming(g, rlx_graph_add_cross_entropy_backward(g, x, t, x, -100, 0, &out),
                     "cross_entropy_backward", "d_loss"));
  CHECK(fails_naming(g, rlx_graph_add_gather_backward(g, x, t, 3, 9, &out), "gather_backward",
                     "axis"));
  rlx_sgd_desc sd = {0.9f, 0, 0, 0};
  CHECK(fails_naming(g, rlx_graph_add_sgd_update(g, x, x, RLX_NONE, h, &sd, &out, &o2),
                     "sgd_update", "momentum buffer"));
  CHECK(fails_naming(g, rlx_graph_add_sgd_update(g, x, t, RLX_NONE, h, &(rlx_sgd_desc){0}, &out, &o2),
                     "sgd_update", "grad"));
  rlx_sgd_desc damped = {0.9f, 0.1f, 0, 1};
  CHECK(fails_naming(g, rlx_graph_add_sgd_update(g, x, x, x, h, &damped, &out, &o2), "sgd_update",
                     "nesterov"));
  rlx_adam_desc ad = {0.9f, 0.999f, 1e-8f, 0, 0};
  rlx_tensor o3;
  CHECK(fails_naming(g, rlx_graph_add_adam_update(g, x, x, x, x, hbad, &ad, &out, &o2, &o3),
                     "adam_update", "hyper"));
  ad.beta2 = 1.0f;
  CHECK(fails_naming(g, rlx_graph_add_adam_update(g, x, x, x, x, h, &ad, &out, &o2, &o3),
                     "adam_update", "betas"));
  CHECK(fails_naming(g, rlx_graph_add_sgd_update(g, x, x, RLX_NONE, h, NULL, &out, &o2), "sgd_update",
                     "NULL"));
  rlx_graph_destroy(g);
}

/* ------------------------------------------------------------ values and errors */

/* logits in0 f32[3, 4], targets in1 i64[3]; outputs: loss, d_logits (d_loss 2). */
static rlx_graph* ce_graph_new(int64_t ignore, float ls) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[2] = {3, 4}, ts[1] = {3};
  rlx_tensor x, t, d, loss, dx;
  float two = 2.0f;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_input(g, "t", RLX_I64, ts, 1, &t);
  rlx_graph_add_constant(g, RLX_F32, NULL, 0, &two, sizeof two, &d);
  rlx_graph_add_cross_entropy(g, x, t, ignore, ls, &loss);
  rlx_graph_add_cross_entropy_backward(g, x, t, d, ignore, ls, &dx);
  rlx_tensor outs[2] = {loss, dx};
  if (rlx_graph_set_outputs(g, outs, 2) != RLX_OK) {
    rlx_graph_destroy(g);
    return NULL;
  }
  return g;
}

/* Row 0 uniform logits (log 4 for any target), row 1 ignored, row 2 logits
 * (log 3, 0, 0, 0) with target 0: -log(3 / 6) = log 2. */
static const float k_logits[12] = {0, 0, 0, 0, 5, -1, 2, 7, 0, 0, 0, 0};

static rlx_status run_ce(rlx_exec* e, const int64_t* t, double* loss, double* dx) {
  rlx_dim xs[2] = {3, 4}, ts[1] = {3};
  float x[12];
  memcpy(x, k_logits, sizeof x);
  x[8] = logf(3.0f);
  rlx_status s = rlx_exec_set_input(e, "x", RLX_F32, xs, 2, x, sizeof x);
  if (s == RLX_OK) s = rlx_exec_set_input(e, "t", RLX_I64, ts, 1, t, sizeof(int64_t) * 3);
  if (s == RLX_OK) s = rlx_exec_run(e);
  if (s == RLX_OK) s = rlx_exec_read_output(e, 0, RLX_F64, loss, sizeof(double));
  if (s == RLX_OK) s = rlx_exec_read_output(e, 1, RLX_F64, dx, sizeof(double) * 12);
  return s;
}

static void ce_values_on(const char* dev) {
  rlx_graph* g = ce_graph_new(-100, 0.0f);
  CHECK(g);
  rlx_exec* e = test_compile_on(g, dev, NULL);
  CHECK(e);
  int64_t t[3] = {2, -100, 0};
  double loss, dx[12];
  CHECK_OK_E(e, run_ce(e, t, &loss, dx));
  double want = (log(4.0) + log(2.0)) / 2.0;
  CHECK_MSG(fabs(loss - want) < 1e-6, "%s: loss %.9g, want %.9g", dev, loss, want);
  /* d = 2 / 2 * (softmax - onehot): row 0 (0.25, 0.25, -0.75, 0.25), row 1 zero */
  CHECK_MSG(fabs(dx[2] + 0.75) < 1e-6 && fabs(dx[0] - 0.25) < 1e-6, "%s: dx row 0 %g %g", dev, dx[0], dx[2]);
  CHECK_MSG(dx[4] == 0 && dx[7] == 0, "%s: ignored row not zero", dev);
  CHECK_MSG(fabs(dx[8] + 0.5) < 1e-6 && fabs(dx[9] - 1.0 / 6.0) < 1e-6, "%s: dx row 2 %g %g", dev,
            dx[8], dx[9]);
  /* the same bits again */
  double loss2, dx2[12];
  CHECK_OK_E(e, run_ce(e, t, &loss2, dx2));
  CHECK_MSG(memcmp(&loss, &loss2, sizeof loss) == 0 && memcmp(dx, dx2, sizeof dx) == 0,
            "%s: a second run differs", dev);
  /* every target ignored: 0/0 */
  int64_t none[3] = {-100, -100, -100};
  CHECK_OK_E(e, run_ce(e, none, &loss, dx));
  CHECK_MSG(isnan(loss), "%s: all ignored gives %g, not NaN", dev, loss);
  /* a target outside [0, 4) fails the run, naming the op */
  int64_t bad[3] = {1, 4, 0};
  rlx_status s = run_ce(e, bad, &loss, dx);
  CHECK_MSG(s == RLX_OUT_OF_RANGE && strstr(rlx_exec_last_error(e), "cross_entropy"),
            "%s: bad target gives %d: %s", dev, (int)s, rlx_exec_last_error(e));
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* Label smoothing 0.2 on row 0 (uniform logits): the loss stays log 4
 * (every class has the same log-probability). */
static void ce_smoothing_on(const char* dev) {
  rlx_graph* g = ce_graph_new(3, 0.2f);
  CHECK(g);
  rlx_exec* e = test_compile_on(g, dev, NULL);
  CHECK(e);
  int64_t t[3] = {1, 3, 3}; /* ignore_index 3 is a valid class here */
  double loss, dx[12];
  CHECK_OK_E(e, run_ce(e, t, &loss, dx));
  CHECK_MSG(fabs(loss - log(4.0)) < 1e-6, "%s: smoothed loss %.9g", dev, loss);
  /* d = 2 * (0.25 - (0.05 + 0.8 [j == 1])) */
  CHECK_MSG(fabs(dx[1] - 2 * (0.25 - 0.85)) < 1e-6 && fabs(dx[0] - 2 * (0.25 - 0.05)) < 1e-6,
            "%s: smoothed dx %g %g", dev, dx[0], dx[1]);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

/* dy f32[4, 2] gathered rows idx {2, 0, 2, -1} of a 3-row table: dx row 2 =
 * dy0 + dy2 + dy3 (index -1 is row 2), row 0 = dy1, row 1 zero. */
static void gather_backward_on(const char* dev) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim ys[2] = {4, 2}, is[1] = {4};
  rlx_tensor dy, idx, dx;
  CHECK_OK_G(g, rlx_graph_add_input(g, "dy", RLX_F32, ys, 2, &dy));
  CHECK_OK_G(g, rlx_graph_add_input(g, "idx", RLX_I32, is, 1, &idx));
  CHECK_OK_G(g, rlx_graph_add_gather_backward(g, dy, idx, 0, 3, &dx));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &dx, 1));
  rlx_exec* e = test_compile_on(g, dev, NULL);
  CHECK(e);
  const float y[8] = {1, 2, 10, 20, 100, 200, 1000, 2000};
  int32_t ix[4] = {2, 0, 2, -1};
  float got[6];
  CHECK_OK_E(e, rlx_exec_set_input(e, "dy", RLX_F32, ys, 2, y, sizeof y));
  CHECK_OK_E(e, rlx_exec_set_input(e, "idx", RLX_I32, is, 1, ix, sizeof ix));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, got, sizeof got));
  const float want[6] = {10, 20, 0, 0, 1101, 2202};
  CHECK_MSG(memcmp(got, want, sizeof got) == 0, "%s: dx %g %g %g %g %g %g", dev, got[0], got[1],
            got[2], got[3], got[4], got[5]);
  ix[1] = 3;
  CHECK_OK_E(e, rlx_exec_set_input(e, "idx", RLX_I32, is, 1, ix, sizeof ix));
  rlx_status s = rlx_exec_run(e);
  CHECK_MSG(s == RLX_OUT_OF_RANGE, "%s: index 3 of 3 rows gives %d: %s", dev, (int)s,
            rlx_exec_last_error(e));
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

int main(int argc, char** argv) {
  static const char* defaults[] = {"cpu", "vulkan", "webgpu", "cuda"};
  const char* const* devs = argc > 1 ? (const char* const*)(argv + 1) : defaults;
  int n = argc > 1 ? argc - 1 : 4;
  RUN(shape_rules_name_the_problem);
  for (int i = 0; i < n; i++) {
    if (!available(devs[i])) continue;
    printf("device %s\n", devs[i]);
    ce_values_on(devs[i]);
    ce_smoothing_on(devs[i]);
    gather_backward_on(devs[i]);
  }
  return test_summary();
}
