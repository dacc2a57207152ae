/* The training API (rlx_trainer, src/runtime/train.c) on every available
 * device (or the one named on the command line): linear regression with
 * SGD reaches the exact solution; SGD with momentum / Nesterov, Adam,
 * AdamW and clipping by global norm match PyTorch's numbers for a 2-layer
 * MLP (tests/train/expected.h, from tests/train/expected.py); four
 * accumulated micro-batches equal one batch four times as large; a
 * checkpoint resumes bit for bit on the CPU; frozen params stay as set;
 * loss scaling (static and dynamic, with a skipped overflowing step);
 * bf16 mixed precision still learns; and bad calls return messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "train/expected.h"

static const char* dev = "cpu";

#define TRY(expr)                       \
  do {                                  \
    rlx_status s_ = (expr);             \
    if (s_ != RLX_OK) return s_;        \
  } while (0)
#define CHECK_OK_T(t, expr) CHECK_MSG((expr) == RLX_OK, "%s", rlx_trainer_last_error(t))

/* ------------------------------------------------------------ models */

/* loss = mse(relu(x @ w1 + b1) @ w2 + b2, y) for `rows` rows. */
static rlx_graph* mlp_graph(int64_t rows, rlx_tensor* loss) {
  rlx_graph* g = NULL;
  if (rlx_graph_create(&g) != RLX_OK) return NULL;
  rlx_dim xs[2] = {rows, TX_D}, ys[2] = {rows, TX_O}, w1s[2] = {TX_D, TX_H}, w2s[2] = {TX_H, TX_O};
  rlx_dim b1s[1] = {TX_H}, b2s[1] = {TX_O};
  rlx_tensor x, y, w1, b1, w2, b2, h, o;
  int ok = rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x) == RLX_OK &&
           rlx_graph_add_input(g, "y", RLX_F32, ys, 2, &y) == RLX_OK &&
           rlx_graph_add_param(g, "w1", RLX_F32, w1s, 2, &w1) == RLX_OK &&
           rlx_graph_add_param(g, "b1", RLX_F32, b1s, 1, &b1) == RLX_OK &&
           rlx_graph_add_param(g, "w2", RLX_F32, w2s, 2, &w2) == RLX_OK &&
           rlx_graph_add_param(g, "b2", RLX_F32, b2s, 1, &b2) == RLX_OK &&
           rlx_graph_add_matmul(g, x, w1, 0, 0, &h) == RLX_OK &&
           rlx_graph_add_binary(g, RLX_BIN_ADD, h, b1, &h) == RLX_OK &&
           rlx_graph_add_activation(g, RLX_ACT_RELU, h, &h) == RLX_OK &&
           rlx_graph_add_matmul(g, h, w2, 0, 0, &o) == RLX_OK &&
           rlx_graph_add_binary(g, RLX_BIN_ADD, o, b2, &o) == RLX_OK &&
           rlx_graph_add_mse_loss(g, o, y, loss) == RLX_OK &&
           rlx_graph_set_outputs(g, loss, 1) == RLX_OK;
  if (!ok) {
    fprintf(stderr, "mlp_graph: %s\n", rlx_graph_last_error(g));
    rlx_graph_destroy(g);
    return NULL;
  }
  return g;
}

static const char* const mlp_names[4] = {"w1", "b1", "w2", "b2"};
static const int64_t mlp_sizes[4] = {TX_D * TX_H, TX_H, TX_H * TX_O, TX_O};
static const double* const mlp_init[4] = {tx_init_w1, tx_init_b1, tx_init_w2, tx_init_b2};

static void to_f32(float* dst, const double* src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

static rlx_status set_f64(rlx_trainer* t, const char* name, const double* v, int64_t n) {
  float buf[64];
  to_f32(buf, v, n);
  return rlx_trainer_set_param(t, name, RLX_F32, buf, sizeof(float) * (size_t)n);
}

static rlx_status set_mlp_params(rlx_trainer* t) {
  for (int k = 0; k < 4; k++) TRY(set_f64(t, mlp_names[k], mlp_init[k], mlp_sizes[k]));
  return RLX_OK;
}

/* Rows [first, first + rows) of the header's x and y as the batch. */
static rlx_status set_batch(rlx_trainer* t, int64_t first, int64_t rows) {
  float x[TX_N * TX_D], y[TX_N * TX_O];
  to_f32(x, tx_x + first * TX_D, rows * TX_D);
  to_f32(y, tx_y + first * TX_O, rows * TX_O);
  rlx_dim xs[2] = {rows, TX_D}, ys[2] = {rows, TX_O};
  TRY(rlx_trainer_set_input(t, "x", RLX_F32, xs, 2, x, sizeof(float) * (size_t)(rows * TX_D)));
  return rlx_trainer_set_input(t, "y", RLX_F32, ys, 2, y, sizeof(float) * (size_t)(rows * TX_O));
}

/* A trainer of the MLP over `rows` rows with params set; NULL on failure. */
static rlx_trainer* mlp_trainer(int64_t rows, const rlx_train_options* o,
                                const rlx_compile_options* c) {
  rlx_tensor loss;
  rlx_graph* g = mlp_graph(rows, &loss);
  if (!g) return NULL;
  rlx_trainer* t = NULL;
  if (rlx_train_compile(g, loss, dev, c, o, &t) != RLX_OK)
    fprintf(stderr, "train_compile: %s\n", rlx_graph_last_error(g));
  rlx_graph_destroy(g);
  if (t && set_mlp_params(t) != RLX_OK) {
    fprintf(stderr, "set params: %s\n", rlx_trainer_last_error(t));
    rlx_trainer_destroy(t);
    return NULL;
  }
  return t;
}

static int read_f32(rlx_trainer* t, const char* name, float* dst, int64_t n) {
  if (rlx_trainer_read_param(t, name, RLX_F32, dst, sizeof(float) * (size_t)n) == RLX_OK) return 1;
  fprintf(stderr, "read_param %s: %s\n", name, rlx_trainer_last_error(t));
  return 0;
}

/* Largest |a - b| / (1 + |b|) of param `name` against expected values. */
static double param_error(rlx_trainer* t, const char* name, const double* want, int64_t n) {
  float got[64];
  if (!read_f32(t, name, got, n)) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double w = (double)(float)want[i]; /* unchanged params compare exactly */
    double e = fabs((double)got[i] - w) / (1.0 + fabs(w));
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

/* ------------------------------------------------------------ linear regression */

enum { LR_ROWS = 16 };

/* y = x @ [2, -3] + 0.5 exactly; loss = mean((x @ w + b - y)^2). */
TEST(linear_regression_sgd_reaches_the_solution) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim xs[2] = {LR_ROWS, 2}, ys[2] = {LR_ROWS, 1}, ws[2] = {2, 1}, bs[1] = {1};
  rlx_tensor x, y, w, b, p, loss;
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x));
  CHECK_OK_G(g, rlx_graph_add_input(g, "y", RLX_F32, ys, 2, &y));
  CHECK_OK_G(g, rlx_graph_add_param(g, "w", RLX_F32, ws, 2, &w));
  CHECK_OK_G(g, rlx_graph_add_param(g, "b", RLX_F32, bs, 1, &b));
  CHECK_OK_G(g, rlx_graph_add_matmul(g, x, w, 0, 0, &p));
  CHECK_OK_G(g, rlx_graph_add_binary(g, RLX_BIN_ADD, p, b, &p));
  CHECK_OK_G(g, rlx_graph_add_mse_loss(g, p, y, &loss));
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_SGD);
  o.lr = 0.2f;
  rlx_trainer* t = NULL;
  CHECK_OK_G(g, rlx_train_compile(g, loss, dev, NULL, &o, &t));
  rlx_graph_destroy(g);
  float xv[LR_ROWS * 2], yv[LR_ROWS], zero[2] = {0, 0};
  test_seed(7);
  test_fill_f32(xv, LR_ROWS * 2, -1, 1);
  for (int i = 0; i < LR_ROWS; i++) yv[i] = 2.0f * xv[2 * i] - 3.0f * xv[2 * i + 1] + 0.5f;
  CHECK_OK_T(t, rlx_trainer_set_input(t, "x", RLX_F32, xs, 2, xv, sizeof xv));
  CHECK_OK_T(t, rlx_trainer_set_input(t, "y", RLX_F32, ys, 2, yv, sizeof yv));
  CHECK_OK_T(t, rlx_trainer_set_param(t, "w", RLX_F32, zero, 2 * sizeof(float)));
  CHECK_OK_T(t, rlx_trainer_set_param(t, "b", RLX_F32, zero, sizeof(float)));
  float first = 0, last = 0;
  for (int s = 0; s < 600; s++) CHECK_OK_T(t, rlx_trainer_step(t, s ? &last : &first));
  float wv[2], bv[1];
  CHECK(read_f32(t, "w", wv, 2) && read_f32(t, "b", bv, 1));
  CHECK_MSG(fabsf(wv[0] - 2) < 1e-4f && fabsf(wv[1] + 3) < 1e-4f && fabsf(bv[0] - 0.5f) < 1e-4f,
            "w = [%g, %g], b = %g", wv[0], wv[1], bv[0]);
  CHECK_MSG(first > 1 && last < 1e-8f, "loss %g -> %g", first, last);
  CHECK(rlx_trainer_step_count(t) == 600);
  CHECK(rlx_exec_output_count(rlx_trainer_exec(t)) >= 1);
  rlx_trainer_destroy(t);
}

/* ------------------------------------------------------------ PyTorch's numbers */

typedef struct torch_case {
  const char* name;
  rlx_optimizer opt;
  float lr, momentum, weight_decay, clip;
  int nesterov;
  const double* loss;
  const double* params[4];
} torch_case;

static const torch_case torch_cases[] = {
    {"sgd_momentum", RLX_OPTIMIZER_SGD, 0.1f, 0.9f, 0.01f, 0, 0, tx_sgd_momentum_loss,
     {tx_sgd_momentum_w1, tx_sgd_momentum_b1, tx_sgd_momentum_w2, tx_sgd_momentum_b2}},
    {"sgd_nesterov", RLX_OPTIMIZER_SGD, 0.1f, 0.9f, 0, 0, 1, tx_sgd_nesterov_loss,
     {tx_sgd_nesterov_w1, tx_sgd_nesterov_b1, tx_sgd_nesterov_w2, tx_sgd_nesterov_b2}},
    {"adam", RLX_OPTIMIZER_ADAM, 0.01f, 0, 0.01f, 0, 0, tx_adam_loss,
     {tx_adam_w1, tx_adam_b1, tx_adam_w2, tx_adam_b2}},
    {"adamw", RLX_OPTIMIZER_ADAMW, 0.01f, 0, 0.1f, 0, 0, tx_adamw_loss,
     {tx_adamw_w1, tx_adamw_b1, tx_adamw_w2, tx_adamw_b2}},
    {"sgd_clip", RLX_OPTIMIZER_SGD, 0.5f, 0, 0, 0.05f, 0, tx_sgd_clip_loss,
     {tx_sgd_clip_w1, tx_sgd_clip_b1, tx_sgd_clip_w2, tx_sgd_clip_b2}},
};

static void case_options(const torch_case* c, rlx_train_options* o) {
  rlx_train_options_init(o, c->opt);
  o->lr = c->lr;
  o->clip_norm = c->clip;
  if (c->opt == RLX_OPTIMIZER_SGD) {
    o->sgd.momentum = c->momentum;
    o->sgd.weight_decay = c->weight_decay;
    o->sgd.nesterov = c->nesterov;
  } else {
    o->adam.weight_decay = c->weight_decay;
  }
}

TEST(optimizers_match_pytorch) {
  for (size_t k = 0; k < sizeof torch_cases / sizeof torch_cases[0]; k++) {
    const torch_case* c = &torch_cases[k];
    rlx_train_options o;
    case_options(c, &o);
    rlx_trainer* t = mlp_trainer(TX_N, &o, NULL);
    CHECK_MSG(t, "%s: no trainer", c->name);
    CHECK_OK_T(t, set_batch(t, 0, TX_N));
    for (int s = 0; s < TX_STEPS; s++) {
      float loss = 0;
      CHECK_OK_T(t, rlx_trainer_step(t, &loss));
      CHECK_MSG(fabs(loss - c->loss[s]) <= 1e-5 * (1 + fabs(c->loss[s])),
                "%s step %d: loss %.8g, torch %.8g", c->name, s, loss, c->loss[s]);
    }
    for (int p = 0; p < 4; p++) {
      double e = param_error(t, mlp_names[p], c->params[p], mlp_sizes[p]);
      CHECK_MSG(e < 2e-5, "%s: %s differs from torch by %g", c->name, mlp_names[p], e);
    }
    rlx_trainer_destroy(t);
  }
}

/* Static loss scaling changes nothing but rounding: the scale is divided
 * back out before the update. */
TEST(static_loss_scale_is_transparent) {
  const torch_case* c = &torch_cases[2]; /* adam */
  rlx_train_options o;
  case_options(c, &o);
  o.loss_scale = 1024.0f;
  o.keep_grads = 1;
  rlx_trainer* t = mlp_trainer(TX_N, &o, NULL);
  CHECK(t);
  CHECK_OK_T(t, set_batch(t, 0, TX_N));
  for (int s = 0; s < TX_STEPS; s++) CHECK_OK_T(t, rlx_trainer_step(t, NULL));
  for (int p = 0; p < 4; p++) {
    double e = param_error(t, mlp_names[p], c->params[p], mlp_sizes[p]);
    CHECK_MSG(e < 2e-5, "%s differs from torch by %g", mlp_names[p], e);
  }
  float grad[TX_H * TX_O];
  CHECK_OK_T(t, rlx_trainer_read_grad(t, "w2", RLX_F32, grad, sizeof grad));
  for (int i = 0; i < TX_H * TX_O; i++) CHECK(isfinite(grad[i]) && fabsf(grad[i]) < 10);
  rlx_trainer_destroy(t);
}

/* A scale so large the gradients overflow: the step is skipped (params and
 * count unchanged) and the scale halves until the steps go through. */
TEST(dynamic_loss_scale_skips_overflow) {
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_SGD);
  o.lr = 0.1f;
  o.loss_scale = 1e38f;
  o.dynamic_loss_scale = 1;
  rlx_trainer* t = mlp_trainer(TX_N, &o, NULL);
  CHECK(t);
  CHECK_OK_T(t, set_batch(t, 0, TX_N));
  float loss = 0, w1[TX_D * TX_H];
  CHECK_OK_T(t, rlx_trainer_step(t, &loss));
  CHECK(isfinite(loss));
  CHECK(rlx_trainer_step_count(t) == 0);
  CHECK(param_error(t, "w1", tx_init_w1, TX_D * TX_H) == 0);
  int steps = 1;
  while (rlx_trainer_step_count(t) == 0 && steps < 200) {
    CHECK_OK_T(t, rlx_trainer_step(t, NULL));
    steps++;
  }
  CHECK_MSG(rlx_trainer_step_count(t) == 1 && steps > 5, "%d steps, %lld updates", steps,
            (long long)rlx_trainer_step_count(t));
  CHECK(read_f32(t, "w1", w1, TX_D * TX_H));
  for (int i = 0; i < TX_D * TX_H; i++) CHECK(isfinite(w1[i]));
  CHECK(param_error(t, "w1", tx_init_w1, TX_D * TX_H) > 0);
  rlx_trainer_destroy(t);
}

/* ------------------------------------------------------------ accumulation */

/* Four micro-batches of 2 rows, accumulated, equal one step on all 8 rows:
 * params unchanged until the 4th micro-step, then the same update; the
 * kept gradient is the sum of the four micro-batch gradients. */
TEST(accumulation_equals_a_larger_batch) {
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_ADAM);
  o.lr = 0.01f;
  o.keep_grads = 1;
  rlx_trainer* big = mlp_trainer(TX_N, &o, NULL);
  o.accumulate = 4;
  rlx_trainer* acc = mlp_trainer(TX_N / 4, &o, NULL);
  CHECK(big && acc);
  CHECK_OK_T(big, set_batch(big, 0, TX_N));
  CHECK_OK_T(big, rlx_trainer_step(big, NULL));
  for (int m = 0; m < 4; m++) {
    CHECK_OK_T(acc, set_batch(acc, m * (TX_N / 4), TX_N / 4));
    CHECK_OK_T(acc, rlx_trainer_step(acc, NULL));
    CHECK(rlx_trainer_step_count(acc) == (m == 3));
    if (m < 3) CHECK(param_error(acc, "w2", tx_init_w2, TX_H * TX_O) == 0);
  }
  for (int p = 0; p < 4; p++) {
    float want[64], got[64];
    int64_t n = mlp_sizes[p];
    CHECK(read_f32(big, mlp_names[p], want, n) && read_f32(acc, mlp_names[p], got, n));
    for (int64_t i = 0; i < n; i++)
      CHECK_MSG(fabsf(got[i] - want[i]) < 1e-6f, "%s[%lld]: %g vs %g", mlp_names[p], (long long)i,
                got[i], want[i]);
    CHECK_OK_T(big,
               rlx_trainer_read_grad(big, mlp_names[p], RLX_F32, want, sizeof(float) * (size_t)n));
    CHECK_OK_T(acc,
               rlx_trainer_read_grad(acc, mlp_names[p], RLX_F32, got, sizeof(float) * (size_t)n));
    for (int64_t i = 0; i < n; i++)
      CHECK_MSG(fabsf(got[i] - 4 * want[i]) < 1e-5f * (1 + fabsf(want[i])),
                "grad %s[%lld]: %g vs 4 x %g", mlp_names[p], (long long)i, got[i], want[i]);
  }
  rlx_trainer_destroy(big);
  rlx_trainer_destroy(acc);
}

/* ------------------------------------------------------------ checkpoints */

static void temp_dir(char* out, size_t cap) {
  snprintf(out, cap, "/tmp/rlx_test_train_%d_XXXXXX", (int)getpid());
  if (!mkdtemp(out)) out[0] = '\0';
}

static void remove_dir(const char* dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* Bytes of param `name` equal in a and b. */
static int same_bits(rlx_trainer* a, rlx_trainer* b, const char* name, int64_t n) {
  float x[64], y[64];
  if (!read_f32(a, name, x, n) || !read_f32(b, name, y, n)) return 0;
  if (!strcmp(dev, "cpu")) return memcmp(x, y, sizeof(float) * (size_t)n) == 0;
  for (int64_t i = 0; i < n; i++)
    if (fabsf(x[i] - y[i]) > 1e-6f) return 0;
  return 1;
}

/* Train 7 micro-steps straight vs 3, save, a new trainer loads, 4 more:
 * the same bits (accumulation cut in the middle, Adam's state, step t). */
TEST(checkpoint_resumes_bit_exact) {
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_ADAMW);
  o.lr = 0.02f;
  o.accumulate = 2;
  o.clip_norm = 0.5f;
  rlx_trainer* straight = mlp_trainer(TX_N / 2, &o, NULL);
  rlx_trainer* first = mlp_trainer(TX_N / 2, &o, NULL);
  rlx_trainer* resumed = mlp_trainer(TX_N / 2, &o, NULL);
  CHECK(straight && first && resumed);
  char dir[128];
  temp_dir(dir, sizeof dir);
  CHECK(dir[0]);
  for (int s = 0; s < 7; s++) {
    CHECK_OK_T(straight, set_batch(straight, (s % 2) * (TX_N / 2), TX_N / 2));
    CHECK_OK_T(straight, rlx_trainer_step(straight, NULL));
  }
  for (int s = 0; s < 3; s++) {
    CHECK_OK_T(first, set_batch(first, (s % 2) * (TX_N / 2), TX_N / 2));
    CHECK_OK_T(first, rlx_trainer_step(first, NULL));
  }
  CHECK_OK_T(first, rlx_trainer_save(first, dir));
  CHECK_OK_T(resumed, rlx_trainer_load(resumed, dir));
  CHECK(rlx_trainer_step_count(resumed) == 1);
  for (int s = 3; s < 7; s++) {
    CHECK_OK_T(resumed, set_batch(resumed, (s % 2) * (TX_N / 2), TX_N / 2));
    CHECK_OK_T(resumed, rlx_trainer_step(resumed, NULL));
  }
  CHECK(rlx_trainer_step_count(resumed) == rlx_trainer_step_count(straight));
  for (int p = 0; p < 4; p++)
    CHECK_MSG(same_bits(straight, resumed, mlp_names[p], mlp_sizes[p]), "%s differs after resume",
              mlp_names[p]);
  /* a trainer of another optimizer or shape is told what differs */
  rlx_train_options sgd;
  rlx_train_options_init(&sgd, RLX_OPTIMIZER_SGD);
  rlx_trainer* other = mlp_trainer(TX_N / 2, &sgd, NULL);
  CHECK(other);
  CHECK(rlx_trainer_load(other, dir) != RLX_OK);
  CHECK_MSG(strstr(rlx_trainer_last_error(other), "adamw"), "%s", rlx_trainer_last_error(other));
  rlx_trainer_destroy(other);
  o.accumulate = 1;
  other = mlp_trainer(TX_N / 2, &o, NULL);
  CHECK(other);
  CHECK(rlx_trainer_load(other, dir) != RLX_OK);
  CHECK_MSG(strstr(rlx_trainer_last_error(other), "grad_acc"), "%s", rlx_trainer_last_error(other));
  CHECK(rlx_trainer_load(other, "/nonexistent/rlx_ckpt") == RLX_NOT_FOUND);
  rlx_trainer_destroy(other);
  remove_dir(dir);
  rlx_trainer_destroy(straight);
  rlx_trainer_destroy(first);
  rlx_trainer_destroy(resumed);
}

/* A model in bf16 (params and state too): the checkpoint keeps the bits
 * (written as u16, the manifest says bf16) and read_param converts. */
TEST(bf16_params_checkpoint_round_trip) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim xs[2] = {4, 2}, ws[2] = {2, 1};
  rlx_tensor x, y, w, p, loss;
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_BF16, xs, 2, &x));
  CHECK_OK_G(g, rlx_graph_add_input(g, "y", RLX_BF16, xs, 1, &y));
  CHECK_OK_G(g, rlx_graph_add_param(g, "w", RLX_BF16, ws, 2, &w));
  CHECK_OK_G(g, rlx_graph_add_matmul(g, x, w, 0, 0, &p));
  CHECK_OK_G(g, rlx_graph_add_reshape(g, p, xs, 1, &p));
  CHECK_OK_G(g, rlx_graph_add_mse_loss(g, p, y, &loss));
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_ADAM);
  o.lr = 0.05f;
  rlx_trainer *a = NULL, *b = NULL;
  CHECK_OK_G(g, rlx_train_compile(g, loss, dev, NULL, &o, &a));
  CHECK_OK_G(g, rlx_train_compile(g, loss, dev, NULL, &o, &b));
  rlx_graph_destroy(g);
  float xf[8] = {1, 0, 0, 1, 1, 1, 0.5f, -1}, yf[4] = {1, -1, 0, 1.5f}, wf[2] = {0.25f, 0.5f};
  uint16_t xb[8], yb[4];
  CHECK(rlx_dtype_convert(xb, RLX_BF16, xf, RLX_F32, 8) == RLX_OK);
  CHECK(rlx_dtype_convert(yb, RLX_BF16, yf, RLX_F32, 4) == RLX_OK);
  CHECK_OK_T(a, rlx_trainer_set_input(a, "x", RLX_BF16, xs, 2, xb, sizeof xb));
  CHECK_OK_T(a, rlx_trainer_set_input(a, "y", RLX_BF16, xs, 1, yb, sizeof yb));
  CHECK_OK_T(a, rlx_trainer_set_param(a, "w", RLX_F32, wf, sizeof wf));
  float first = 0, last = 0;
  for (int s = 0; s < 20; s++) CHECK_OK_T(a, rlx_trainer_step(a, s ? &last : &first));
  CHECK_MSG(last < first, "loss %g -> %g", first, last);
  char dir[128];
  temp_dir(dir, sizeof dir);
  CHECK(dir[0]);
  CHECK_OK_T(a, rlx_trainer_save(a, dir));
  CHECK_OK_T(b, rlx_trainer_load(b, dir));
  uint16_t wa[2], wb[2];
  CHECK_OK_T(a, rlx_trainer_read_param(a, "w", RLX_BF16, wa, sizeof wa));
  CHECK_OK_T(b, rlx_trainer_read_param(b, "w", RLX_BF16, wb, sizeof wb));
  CHECK(memcmp(wa, wb, sizeof wa) == 0);
  CHECK(rlx_trainer_step_count(b) == 20);
  remove_dir(dir);
  rlx_trainer_destroy(a);
  rlx_trainer_destroy(b);
}

/* ------------------------------------------------------------ frozen params */

TEST(frozen_params_stay_unchanged) {
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_SGD);
  o.lr = 0.1f;
  const char* frozen[2] = {"w1", "b2"};
  o.frozen = frozen;
  o.n_frozen = 2;
  rlx_trainer* t = mlp_trainer(TX_N, &o, NULL);
  CHECK(t);
  CHECK_OK_T(t, set_batch(t, 0, TX_N));
  for (int s = 0; s < 3; s++) CHECK_OK_T(t, rlx_trainer_step(t, NULL));
  CHECK(param_error(t, "w1", tx_init_w1, TX_D * TX_H) == 0);
  CHECK(param_error(t, "b2", tx_init_b2, TX_O) == 0);
  CHECK(param_error(t, "w2", tx_init_w2, TX_H * TX_O) > 1e-4);
  CHECK(param_error(t, "b1", tx_init_b1, TX_H) > 0);
  /* setting a param after steps is what the next step starts from */
  CHECK_OK_T(t, set_f64(t, "w2", tx_init_w2, TX_H * TX_O));
  CHECK(param_error(t, "w2", tx_init_w2, TX_H * TX_O) == 0);
  float grad[TX_H];
  CHECK(rlx_trainer_read_grad(t, "b1", RLX_F32, grad, sizeof grad) == RLX_FAILED_PRECONDITION);
  rlx_trainer_destroy(t);
}

/* ------------------------------------------------------------ mixed precision */

/* bf16 compute with f32 master weights: the loss falls as in f32. */
TEST(bf16_mixed_precision_learns) {
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_ADAM);
  o.lr = 0.02f;
  o.clip_norm = 1.0f;
  rlx_compile_options c;
  rlx_compile_options_init(&c);
  c.precision = RLX_PRECISION_BF16;
  rlx_trainer* t = mlp_trainer(TX_N, &o, &c);
  CHECK(t);
  CHECK_OK_T(t, set_batch(t, 0, TX_N));
  float first = 0, last = 0;
  for (int s = 0; s < 60; s++) CHECK_OK_T(t, rlx_trainer_step(t, s ? &last : &first));
  CHECK_MSG(last < 0.7f * first, "loss %g -> %g", first, last);
  rlx_trainer_destroy(t);
}

/* f16 compute with dynamic loss scaling: the norm and the updates stay f32,
 * so scaled gradients train instead of overflowing the sum of squares. */
TEST(f16_dynamic_loss_scale_learns) {
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_ADAM);
  o.lr = 0.02f;
  o.dynamic_loss_scale = 1;
  rlx_compile_options c;
  rlx_compile_options_init(&c);
  c.precision = RLX_PRECISION_F16;
  rlx_trainer* t = mlp_trainer(TX_N, &o, &c);
  CHECK(t);
  CHECK_OK_T(t, set_batch(t, 0, TX_N));
  float first = 0, last = 0;
  for (int s = 0; s < 60; s++) CHECK_OK_T(t, rlx_trainer_step(t, s ? &last : &first));
  CHECK_MSG(last < 0.7f * first && rlx_trainer_step_count(t) > 40, "loss %g -> %g in %lld updates",
            first, last, (long long)rlx_trainer_step_count(t));
  rlx_trainer_destroy(t);
}

/* ------------------------------------------------------------ cross-entropy */

/* Embedding rows of token ids -> logits -> cross_entropy against the next
 * token of a fixed cycle: Adam learns it (the loss falls by half). Integer
 * inputs (ids, targets) and a gathered param on the path. */
TEST(cross_entropy_embedding_learns) {
  enum { V = 5, E = 4, B = 10 };
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim is[1] = {B}, es[2] = {V, E}, ws[2] = {E, V};
  rlx_tensor ids, tgt, emb, w, h, logits, loss;
  CHECK_OK_G(g, rlx_graph_add_input(g, "ids", RLX_I32, is, 1, &ids));
  CHECK_OK_G(g, rlx_graph_add_input(g, "targets", RLX_I32, is, 1, &tgt));
  CHECK_OK_G(g, rlx_graph_add_param(g, "emb", RLX_F32, es, 2, &emb));
  CHECK_OK_G(g, rlx_graph_add_param(g, "w", RLX_F32, ws, 2, &w));
  CHECK_OK_G(g, rlx_graph_add_gather(g, emb, ids, 0, &h));
  CHECK_OK_G(g, rlx_graph_add_matmul(g, h, w, 0, 0, &logits));
  CHECK_OK_G(g, rlx_graph_add_cross_entropy(g, logits, tgt, -100, 0.0f, &loss));
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_ADAMW);
  o.lr = 0.05f;
  rlx_trainer* t = NULL;
  CHECK_OK_G(g, rlx_train_compile(g, loss, dev, NULL, &o, &t));
  rlx_graph_destroy(g);
  float ev[V * E], wv[E * V];
  test_seed(3);
  test_fill_f32(ev, V * E, -0.5, 0.5);
  test_fill_f32(wv, E * V, -0.5, 0.5);
  int32_t idv[B], tv[B];
  for (int i = 0; i < B; i++) idv[i] = i % V, tv[i] = (i + 1) % V;
  CHECK_OK_T(t, rlx_trainer_set_param(t, "emb", RLX_F32, ev, sizeof ev));
  CHECK_OK_T(t, rlx_trainer_set_param(t, "w", RLX_F32, wv, sizeof wv));
  CHECK_OK_T(t, rlx_trainer_set_input(t, "ids", RLX_I32, is, 1, idv, sizeof idv));
  CHECK_OK_T(t, rlx_trainer_set_input(t, "targets", RLX_I32, is, 1, tv, sizeof tv));
  float first = 0, last = 0;
  for (int s = 0; s < 80; s++) CHECK_OK_T(t, rlx_trainer_step(t, s ? &last : &first));
  CHECK_MSG(fabsf(first - logf(V)) < 0.5f && last < 0.5f * first, "loss %g -> %g", first, last);
  rlx_trainer_destroy(t);
}

/* ------------------------------------------------------------ errors */

TEST(bad_calls_are_messages) {
  rlx_tensor loss;
  rlx_graph* g = mlp_graph(TX_N, &loss);
  CHECK(g);
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_ADAM);
  rlx_trainer* t = NULL;
  const char* unknown[1] = {"nope"};
  o.frozen = unknown;
  o.n_frozen = 1;
  CHECK(rlx_train_compile(g, loss, dev, NULL, &o, &t) == RLX_NOT_FOUND && !t);
  CHECK_MSG(strstr(rlx_graph_last_error(g), "'nope'"), "%s", rlx_graph_last_error(g));
  o.n_frozen = 0;
  rlx_graph_destroy(g);
  /* a loss that is not a scalar, or not a float */
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim s1[1] = {3};
  rlx_tensor p, m;
  CHECK_OK_G(g, rlx_graph_add_param(g, "p", RLX_F32, s1, 1, &p));
  CHECK_OK_G(g, rlx_graph_add_argmax(g, p, 0, 0, &m));
  CHECK(rlx_train_compile(g, p, dev, NULL, &o, &t) == RLX_INVALID_ARGUMENT);
  CHECK_MSG(strstr(rlx_graph_last_error(g), "scalar"), "%s", rlx_graph_last_error(g));
  CHECK(rlx_train_compile(g, m, dev, NULL, &o, &t) == RLX_INVALID_ARGUMENT);
  CHECK_MSG(strstr(rlx_graph_last_error(g), "float"), "%s", rlx_graph_last_error(g));
  rlx_tensor sum;
  CHECK_OK_G(g, rlx_graph_add_reduce(g, RLX_RED_SUM, p, NULL, 0, 0, &sum));
  o.accumulate = 0;
  CHECK(rlx_train_compile(g, sum, dev, NULL, &o, &t) == RLX_INVALID_ARGUMENT);
  CHECK_MSG(strstr(rlx_graph_last_error(g), "accumulate"), "%s", rlx_graph_last_error(g));
  CHECK(rlx_train_compile(g, 12345, dev, NULL, &o, &t) == RLX_INVALID_ARGUMENT);
  rlx_graph_destroy(g);
  /* calls on a trainer */
  rlx_train_options_init(&o, RLX_OPTIMIZER_ADAM);
  t = mlp_trainer(TX_N, &o, NULL);
  CHECK(t);
  float buf[64] = {0};
  CHECK(rlx_trainer_set_param(t, "nope", RLX_F32, buf, 4) == RLX_NOT_FOUND);
  CHECK_MSG(strstr(rlx_trainer_last_error(t), "'nope'"), "%s", rlx_trainer_last_error(t));
  CHECK(rlx_trainer_set_param(t, "b2", RLX_F32, buf, 4) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_trainer_set_input(t, "w1", RLX_F32, NULL, 0, buf, 4) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_trainer_step(t, NULL) == RLX_FAILED_PRECONDITION); /* x, y not set */
  CHECK_MSG(strstr(rlx_trainer_last_error(t), "'x'") || strstr(rlx_trainer_last_error(t), "'y'"),
            "%s", rlx_trainer_last_error(t));
  CHECK(rlx_trainer_read_grad(t, "w1", RLX_F32, buf, sizeof(float) * TX_D * TX_H) ==
        RLX_FAILED_PRECONDITION);
  CHECK(rlx_trainer_set_lr(t, -1.0f) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_trainer_read_param(t, "w1", RLX_F32, buf, 3) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_trainer_load(t, "/nonexistent/rlx_ckpt") == RLX_NOT_FOUND);
  rlx_trainer_destroy(t);
  rlx_trainer_destroy(NULL);
  CHECK(rlx_trainer_step(NULL, NULL) == RLX_INVALID_ARGUMENT);
}

/* The CUDA backend batches a step's per-param updates into one launch
 * (rlx_opt_multi); with RLX_CUDA_NO_OPT_BATCH each is its own launch. The
 * element math is the same, so the params must agree bit for bit (on the
 * other devices the switch changes nothing and the same holds). */
TEST(batched_updates_same_bits) {
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_ADAMW);
  o.lr = 0.02f;
  rlx_trainer* t[2] = {NULL, NULL};
  for (int k = 0; k < 2; k++) {
    if (k == 1) setenv("RLX_CUDA_NO_OPT_BATCH", "1", 1); /* part of the compile key */
    t[k] = mlp_trainer(TX_N, &o, NULL);
    CHECK(t[k]);
    for (int s = 0; s < 3 && t[k]; s++) {
      CHECK_OK_T(t[k], set_batch(t[k], 0, TX_N));
      CHECK_OK_T(t[k], rlx_trainer_step(t[k], NULL));
    }
    unsetenv("RLX_CUDA_NO_OPT_BATCH");
  }
  for (int p = 0; p < 4 && t[0] && t[1]; p++) {
    float x[64], y[64];
    CHECK(read_f32(t[0], mlp_names[p], x, mlp_sizes[p]) && read_f32(t[1], mlp_names[p], y, mlp_sizes[p]));
    CHECK_MSG(memcmp(x, y, sizeof(float) * (size_t)mlp_sizes[p]) == 0, "%s differs", mlp_names[p]);
  }
  rlx_trainer_destroy(t[0]);
  rlx_trainer_destroy(t[1]);
}

/* A param never set fails the first step with its name. */
TEST(unset_param_is_named) {
  rlx_tensor loss;
  rlx_graph* g = mlp_graph(TX_N, &loss);
  CHECK(g);
  rlx_train_options o;
  rlx_train_options_init(&o, RLX_OPTIMIZER_SGD);
  rlx_trainer* t = NULL;
  CHECK_OK_G(g, rlx_train_compile(g, loss, dev, NULL, &o, &t));
  rlx_graph_destroy(g);
  CHECK_OK_T(t, set_batch(t, 0, TX_N));
  CHECK(rlx_trainer_step(t, NULL) == RLX_FAILED_PRECONDITION);
  CHECK_MSG(strstr(rlx_trainer_last_error(t), "'w1'"), "%s", rlx_trainer_last_error(t));
  rlx_trainer_destroy(t);
}

/* ------------------------------------------------------------ main */

static int device_available(const char* name) {
  for (int32_t i = 0; i < rlx_device_count(); i++) {
    rlx_device_info info;
    if (rlx_device_get(i, &info) == RLX_OK && strcmp(info.name, name) == 0) return info.available;
  }
  return 0;
}

static void run_all(void) {
  printf("-- device %s\n", dev);
  RUN(linear_regression_sgd_reaches_the_solution);
  RUN(optimizers_match_pytorch);
  RUN(static_loss_scale_is_transparent);
  RUN(dynamic_loss_scale_skips_overflow);
  RUN(accumulation_equals_a_larger_batch);
  RUN(checkpoint_resumes_bit_exact);
  RUN(bf16_params_checkpoint_round_trip);
  RUN(frozen_params_stay_unchanged);
  RUN(bf16_mixed_precision_learns);
  RUN(f16_dynamic_loss_scale_learns);
  RUN(cross_entropy_embedding_learns);
  RUN(bad_calls_are_messages);
  RUN(unset_param_is_named);
  RUN(batched_updates_same_bits);
}

int main(int argc, char** argv) {
  if (argc > 1) {
    dev = argv[1];
    if (!device_available(dev)) {
      printf("SKIP: device %s unavailable\n", dev);
      return 77;
    }
    run_all();
    return test_summary();
  }
  run_all(); /* the CPU; ctest runs train_vulkan / train_webgpu with an argument */
  return test_summary();
}
