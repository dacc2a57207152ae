/* The row-wise backward ops (LayerNorm, RmsNorm, Softmax, LogSoftmax, Rope
 * and Cumsum backward) checked against central finite differences of their
 * forwards, in f64 on the CPU reference: the math is proven here on its
 * own, independently of autodiff. For a forward y = f(inputs) the scalar
 * L = sum(y * w) with fixed random weights w has dL/dy = w, so each
 * backward op fed dy = w must give dL/d(input) = (L(+h) - L(-h)) / 2h for
 * every element of every differentiated input. Also: text round trips of
 * the new ops and their shape rules' refusals. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MAX_INPUTS 4
#define FD_STEP 1e-6
#define FD_TOL 1e-6 /* |fd - analytic| <= FD_TOL * (1 + |analytic|) */

/* One named f64 input: its shape and data. */
typedef struct fd_input {
  const char* name;
  int32_t rank;
  rlx_dim shape[4];
  double* data;
  int64_t n;
} fd_input;

/* A problem: the forward graph (inputs in[], one output y), the backward
 * graph (the inputs it declares plus "dy"; its outputs are the gradients),
 * and which backward output is the gradient of which input. */
typedef struct fd_problem {
  fd_input in[MAX_INPUTS];
  int n_in;
  rlx_graph* fwd;
  rlx_graph* bwd;
  int uses[MAX_INPUTS]; /* bwd declares input i */
  int grad_of[MAX_INPUTS]; /* bwd output holding dL/d in[i], or -1 */
  double* w;            /* the loss weights = dy */
  int64_t n_out;
  rlx_dim out_shape[4];
  int32_t out_rank;
} fd_problem;

static int64_t numel(const rlx_dim* s, int32_t rank) {
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++) n *= s[i];
  return n;
}

/* Adds input i (random data in [lo, hi]) to the problem. */
static void add_input(fd_problem* p, const char* name, const rlx_dim* shape, int32_t rank,
                      double lo, double hi) {
  fd_input* in = &p->in[p->n_in++];
  in->name = name;
  in->rank = rank;
  memcpy(in->shape, shape, sizeof(rlx_dim) * (size_t)rank);
  in->n = numel(shape, rank);
  in->data = malloc(sizeof(double) * (size_t)(in->n > 0 ? in->n : 1));
  for (int64_t k = 0; k < in->n; k++) in->data[k] = test_rand_uniform(lo, hi);
}

static rlx_tensor declare(rlx_graph* g, const fd_input* in) {
  rlx_tensor t = RLX_NONE;
  rlx_graph_add_input(g, in->name, RLX_F64, in->shape, in->rank, &t);
  return t;
}

static void problem_init(fd_problem* p) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < MAX_INPUTS; i++) p->grad_of[i] = -1;
  rlx_graph_create(&p->fwd);
  rlx_graph_create(&p->bwd);
}

/* The forward's output shape fixes w (random in [-1, 1]). */
static void set_output_shape(fd_problem* p, const rlx_dim* shape, int32_t rank) {
  p->out_rank = rank;
  memcpy(p->out_shape, shape, sizeof(rlx_dim) * (size_t)rank);
  p->n_out = numel(shape, rank);
  p->w = malloc(sizeof(double) * (size_t)p->n_out);
  for (int64_t k = 0; k < p->n_out; k++) p->w[k] = test_rand_uniform(-1.0, 1.0);
}

static void problem_free(fd_problem* p) {
  for (int i = 0; i < p->n_in; i++) free(p->in[i].data);
  free(p->w);
  rlx_graph_destroy(p->fwd);
  rlx_graph_destroy(p->bwd);
}

static rlx_exec* compile_reference(rlx_graph* g) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = 1;
  return test_compile_on(g, "cpu", &o);
}

static rlx_status set_in(rlx_exec* e, const char* name, const double* data, const rlx_dim* shape,
                         int32_t rank) {
  return rlx_exec_set_input(e, name, RLX_F64, shape, rank, data,
                            sizeof(double) * (size_t)numel(shape, rank));
}

/* L = sum(y * w) of the forward at the problem's current input data. */
static int loss_at(const fd_problem* p, rlx_exec* fwd, double* loss) {
  for (int i = 0; i < p->n_in; i++)
    if (set_in(fwd, p->in[i].name, p->in[i].data, p->in[i].shape, p->in[i].rank) != RLX_OK)
      return 0;
  if (rlx_exec_run(fwd) != RLX_OK) return 0;
  int64_t n = 0;
  double* y = test_read_output_f64(fwd, 0, &n);
  if (!y || n != p->n_out) { free(y); return 0; }
  double acc = 0.0;
  for (int64_t k = 0; k < n; k++) acc += y[k] * p->w[k];
  free(y);
  *loss = acc;
  return 1;
}

/* Compares backward output grad_of[i] with central differences of L. */
static int check_input_grad(fd_problem* p, rlx_exec* fwd, rlx_exec* bwd, int i, const char* what) {
  int64_t n = 0;
  double* an = test_read_output_f64(bwd, p->grad_of[i], &n);
  fd_input* in = &p->in[i];
  int ok = an && n == in->n;
  if (!ok) fprintf(stderr, "%s: gradient of %s has %lld elements, want %lld\n", what, in->name,
                   (long long)n, (long long)in->n);
  for (int64_t k = 0; ok && k < in->n; k++) {
    double keep = in->data[k], lp = 0, lm = 0;
    in->data[k] = keep + FD_STEP;
    ok = loss_at(p, fwd, &lp);
    in->data[k] = keep - FD_STEP;
    ok = ok && loss_at(p, fwd, &lm);
    in->data[k] = keep;
    double fd = (lp - lm) / (2.0 * FD_STEP);
    if (ok && !(fabs(fd - an[k]) <= FD_TOL * (1.0 + fabs(an[k])))) {
      fprintf(stderr, "%s: d/d %s[%lld]: backward %.12g, finite difference %.12g\n", what,
              in->name, (long long)k, an[k], fd);
      ok = 0;
    }
  }
  free(an);
  return ok;
}

/* Runs the backward once at the base point, then checks every gradient. */
static int check_problem(fd_problem* p, const char* what) {
  rlx_exec* fwd = compile_reference(p->fwd);
  rlx_exec* bwd = compile_reference(p->bwd);
  int ok = fwd && bwd;
  for (int i = 0; ok && i < p->n_in; i++)
    if (p->uses[i])
      ok = set_in(bwd, p->in[i].name, p->in[i].data, p->in[i].shape, p->in[i].rank) == RLX_OK;
  ok = ok && set_in(bwd, "dy", p->w, p->out_shape, p->out_rank) == RLX_OK;
  ok = ok && rlx_exec_run(bwd) == RLX_OK;
  if (!ok && bwd) fprintf(stderr, "%s: %s\n", what, rlx_exec_last_error(bwd));
  for (int i = 0; ok && i < p->n_in; i++)
    if (p->grad_of[i] >= 0) ok = check_input_grad(p, fwd, bwd, i, what);
  rlx_exec_destroy(fwd);
  rlx_exec_destroy(bwd);
  return ok;
}

/* Declares input i in the backward graph. */
static rlx_tensor bwd_input(fd_problem* p, int i) {
  p->uses[i] = 1;
  return declare(p->bwd, &p->in[i]);
}

static rlx_tensor bwd_dy(fd_problem* p) {
  fd_input dy = {"dy", p->out_rank, {0}, NULL, p->n_out};
  memcpy(dy.shape, p->out_shape, sizeof dy.shape);
  return declare(p->bwd, &dy);
}

/* ------------------------------------------------------------ norms */

/* LayerNorm over [axis, 3) of x [2, 3, 5] (with_gamma 0: the forward's
 * gamma is a ones-valued point the backward is told is absent, so d_gamma
 * is still checked, at gamma = 1). */
static int layer_norm_case(int32_t axis, int with_gamma) {
  fd_problem p;
  problem_init(&p);
  rlx_dim xs[3] = {2, 3, 5};
  int32_t pr = 3 - axis;
  add_input(&p, "x", xs, 3, -2.0, 2.0);
  add_input(&p, "gamma", xs + axis, pr, 0.5, 1.5);
  add_input(&p, "beta", xs + axis, pr, -0.5, 0.5);
  if (!with_gamma)
    for (int64_t k = 0; k < p.in[1].n; k++) p.in[1].data[k] = 1.0;
  set_output_shape(&p, xs, 3);
  rlx_tensor x = declare(p.fwd, &p.in[0]), g = declare(p.fwd, &p.in[1]), b = declare(p.fwd, &p.in[2]);
  rlx_tensor y, o[3];
  rlx_graph_add_layer_norm(p.fwd, x, g, b, axis, 1e-5f, &y);
  rlx_graph_set_outputs(p.fwd, &y, 1);
  rlx_tensor bx = bwd_input(&p, 0), bg = with_gamma ? bwd_input(&p, 1) : RLX_NONE;
  int ok = rlx_graph_add_layer_norm_backward(p.bwd, bx, bg, bwd_dy(&p), axis, 1e-5f, &o[0], &o[1],
                                             &o[2]) == RLX_OK;
  if (!ok) fprintf(stderr, "%s\n", rlx_graph_last_error(p.bwd));
  rlx_graph_set_outputs(p.bwd, o, 3);
  p.grad_of[0] = 0, p.grad_of[1] = 1, p.grad_of[2] = 2;
  char what[64];
  snprintf(what, sizeof what, "layer_norm axis %d gamma %d", (int)axis, with_gamma);
  ok = ok && check_problem(&p, what);
  problem_free(&p);
  return ok;
}

TEST(layer_norm_backward_matches_finite_differences) {
  for (int32_t axis = 0; axis < 3; axis++)
    for (int with_gamma = 0; with_gamma < 2; with_gamma++) CHECK(layer_norm_case(axis, with_gamma));
}

static int rms_norm_case(int with_gamma) {
  fd_problem p;
  problem_init(&p);
  rlx_dim xs[3] = {3, 2, 7};
  add_input(&p, "x", xs, 3, -2.0, 2.0);
  add_input(&p, "gamma", xs + 2, 1, 0.5, 1.5);
  if (!with_gamma)
    for (int64_t k = 0; k < p.in[1].n; k++) p.in[1].data[k] = 1.0;
  set_output_shape(&p, xs, 3);
  rlx_tensor x = declare(p.fwd, &p.in[0]), g = declare(p.fwd, &p.in[1]), y, o[2];
  rlx_graph_add_rms_norm(p.fwd, x, g, 1e-6f, &y);
  rlx_graph_set_outputs(p.fwd, &y, 1);
  rlx_tensor bx = bwd_input(&p, 0), bg = with_gamma ? bwd_input(&p, 1) : RLX_NONE;
  int ok = rlx_graph_add_rms_norm_backward(p.bwd, bx, bg, bwd_dy(&p), 1e-6f, &o[0], &o[1]) == RLX_OK;
  rlx_graph_set_outputs(p.bwd, o, 2);
  p.grad_of[0] = 0, p.grad_of[1] = 1;
  ok = ok && check_problem(&p, with_gamma ? "rms_norm gamma" : "rms_norm no gamma");
  problem_free(&p);
  return ok;
}

TEST(rms_norm_backward_matches_finite_differences) {
  CHECK(rms_norm_case(1));
  CHECK(rms_norm_case(0));
}

/* ------------------------------------------------------------ softmax */

/* The backward graph recomputes y = forward(x) and feeds it to the op. */
static int softmax_case(int32_t axis, int log_softmax) {
  fd_problem p;
  problem_init(&p);
  rlx_dim xs[3] = {2, 5, 3};
  add_input(&p, "x", xs, 3, -3.0, 3.0);
  set_output_shape(&p, xs, 3);
  rlx_tensor x = declare(p.fwd, &p.in[0]), y, by, dx;
  if (log_softmax) rlx_graph_add_log_softmax(p.fwd, x, axis, &y);
  else rlx_graph_add_softmax(p.fwd, x, axis, &y);
  rlx_graph_set_outputs(p.fwd, &y, 1);
  rlx_tensor bx = bwd_input(&p, 0);
  if (log_softmax) rlx_graph_add_log_softmax(p.bwd, bx, axis, &by);
  else rlx_graph_add_softmax(p.bwd, bx, axis, &by);
  int ok = rlx_graph_add_softmax_backward(p.bwd, by, bwd_dy(&p), axis, log_softmax, &dx) == RLX_OK;
  rlx_graph_set_outputs(p.bwd, &dx, 1);
  p.grad_of[0] = 0;
  ok = ok && check_problem(&p, log_softmax ? "log_softmax" : "softmax");
  problem_free(&p);
  return ok;
}

TEST(softmax_backward_matches_finite_differences) {
  for (int32_t axis = 0; axis < 3; axis++) {
    CHECK(softmax_case(axis, 0));
    CHECK(softmax_case(axis, 1));
  }
}

/* ------------------------------------------------------------ rope */

/* style, layout, partial rotary and per-token tables as in the forward. */
static int rope_case(rlx_rope_style style, rlx_layout layout, int32_t n_rot, int per_token) {
  fd_problem p;
  problem_init(&p);
  const int64_t B = 2, S = 3, H = 2, D = 6;
  rlx_dim xs[4] = {B, S, H, D};
  if (layout == RLX_LAYOUT_BHSD) xs[1] = H, xs[2] = S;
  rlx_dim ts[2] = {per_token ? B * S : S, n_rot / 2};
  add_input(&p, "x", xs, 4, -2.0, 2.0);
  add_input(&p, "cos", ts, 2, -1.0, 1.0);
  add_input(&p, "sin", ts, 2, -1.0, 1.0);
  set_output_shape(&p, xs, 4);
  rlx_tensor x = declare(p.fwd, &p.in[0]), c = declare(p.fwd, &p.in[1]), s = declare(p.fwd, &p.in[2]);
  rlx_tensor y, dx;
  rlx_graph_add_rope(p.fwd, x, c, s, (int32_t)D, n_rot, style, layout, &y);
  rlx_graph_set_outputs(p.fwd, &y, 1);
  rlx_tensor bc = bwd_input(&p, 1), bs = bwd_input(&p, 2);
  int ok = rlx_graph_add_rope_backward(p.bwd, bwd_dy(&p), bc, bs, (int32_t)D, n_rot, style, layout,
                                       &dx) == RLX_OK;
  if (!ok) fprintf(stderr, "%s\n", rlx_graph_last_error(p.bwd));
  rlx_graph_set_outputs(p.bwd, &dx, 1);
  p.grad_of[0] = 0;
  char what[64];
  snprintf(what, sizeof what, "rope style %d layout %d n_rot %d per_token %d", (int)style,
           (int)layout, (int)n_rot, per_token);
  ok = ok && check_problem(&p, what);
  problem_free(&p);
  return ok;
}

TEST(rope_backward_matches_finite_differences) {
  for (int v = 0; v < 16; v++)
    CHECK(rope_case((rlx_rope_style)(v & 1), (v & 2) ? RLX_LAYOUT_BHSD : RLX_LAYOUT_BSHD,
                    (v & 4) ? 4 : 6, (v >> 3) & 1));
}

/* ------------------------------------------------------------ cumsum */

static int cumsum_case(int32_t axis, int exclusive, int reverse) {
  fd_problem p;
  problem_init(&p);
  rlx_dim xs[3] = {3, 4, 2};
  add_input(&p, "x", xs, 3, -2.0, 2.0);
  set_output_shape(&p, xs, 3);
  rlx_tensor x = declare(p.fwd, &p.in[0]), y, dx;
  rlx_graph_add_cumsum(p.fwd, x, axis, exclusive, reverse, &y);
  rlx_graph_set_outputs(p.fwd, &y, 1);
  int ok = rlx_graph_add_cumsum_backward(p.bwd, bwd_dy(&p), axis, exclusive, reverse, &dx) == RLX_OK;
  rlx_graph_set_outputs(p.bwd, &dx, 1);
  p.grad_of[0] = 0;
  ok = ok && check_problem(&p, "cumsum");
  problem_free(&p);
  return ok;
}

TEST(cumsum_backward_matches_finite_differences) {
  for (int32_t axis = 0; axis < 3; axis++)
    for (int v = 0; v < 4; v++) CHECK(cumsum_case(axis, v & 1, v >> 1));
}

/* ------------------------------------------------------------ IR */

/* Every new op prints, parses back and prints the same text. */
TEST(row_backward_ops_round_trip_as_text) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim xs[3] = {2, 3, 4}, gs[2] = {3, 4}, qs[4] = {1, 3, 2, 4}, ts[2] = {3, 1};
  rlx_tensor x, gm, dy, q, cs, sn, o[3];
  rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x);
  rlx_graph_add_input(g, "g", RLX_F32, gs, 2, &gm);
  rlx_graph_add_input(g, "dy", RLX_F32, xs, 3, &dy);
  rlx_graph_add_input(g, "q", RLX_F32, qs, 4, &q);
  rlx_graph_add_input(g, "cs", RLX_F32, ts, 2, &cs);
  rlx_graph_add_input(g, "sn", RLX_F32, ts, 2, &sn);
  CHECK_OK_G(g, rlx_graph_add_layer_norm_backward(g, x, gm, dy, 1, 1e-5f, &o[0], &o[1], &o[2]));
  CHECK_OK_G(g, rlx_graph_add_layer_norm_backward(g, x, RLX_NONE, dy, -1, 1e-3f, &o[0], &o[1], &o[2]));
  CHECK_OK_G(g, rlx_graph_add_rms_norm_backward(g, x, RLX_NONE, dy, 1e-6f, &o[0], &o[1]));
  CHECK_OK_G(g, rlx_graph_add_softmax_backward(g, x, dy, 1, 0, &o[0]));
  CHECK_OK_G(g, rlx_graph_add_softmax_backward(g, x, dy, -1, 1, &o[0]));
  CHECK_OK_G(g, rlx_graph_add_rope_backward(g, q, cs, sn, 4, 2, RLX_ROPE_GPTJ, RLX_LAYOUT_BSHD, &o[0]));
  CHECK_OK_G(g, rlx_graph_add_cumsum_backward(g, x, 2, 1, 1, &o[1]));
  rlx_graph_set_outputs(g, o, 2);
  char *text = NULL, *again = NULL, *err = NULL;
  rlx_graph* back = NULL;
  CHECK(rlx_graph_print(g, &text) == RLX_OK);
  int parsed = rlx_graph_parse(text, &back, &err) == RLX_OK;
  if (!parsed) fprintf(stderr, "%s\n%s\n", err ? err : "", text);
  int same = parsed && rlx_graph_print(back, &again) == RLX_OK && strcmp(text, again) == 0;
  int names = strstr(text, "layer_norm_backward") && strstr(text, "rms_norm_backward") &&
              strstr(text, "log_softmax_backward") && strstr(text, "rope_backward") &&
              strstr(text, "cumsum_backward");
  rlx_free(text);
  rlx_free(again);
  rlx_free(err);
  rlx_graph_destroy(back);
  rlx_graph_destroy(g);
  CHECK(parsed && same && names);
}

/* Shape rules refuse what the forward would refuse, naming the problem. */
TEST(row_backward_shape_rules_refuse_mismatches) {
  rlx_graph* g = NULL;
  CHECK(rlx_graph_create(&g) == RLX_OK);
  rlx_dim xs[2] = {3, 4}, other[2] = {3, 5}, gs[1] = {5};
  rlx_tensor x, dy_bad, g_bad, xi, o[3];
  rlx_graph_add_input(g, "x", RLX_F32, xs, 2, &x);
  rlx_graph_add_input(g, "dy_bad", RLX_F32, other, 2, &dy_bad);
  rlx_graph_add_input(g, "g_bad", RLX_F32, gs, 1, &g_bad);
  rlx_graph_add_input(g, "xi", RLX_I32, xs, 2, &xi);
  CHECK(rlx_graph_add_layer_norm_backward(g, x, RLX_NONE, dy_bad, -1, 1e-5f, &o[0], &o[1], &o[2]) ==
        RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "dy"));
  CHECK(rlx_graph_add_rms_norm_backward(g, x, g_bad, x, 1e-5f, &o[0], &o[1]) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "gamma"));
  CHECK(rlx_graph_add_softmax_backward(g, x, dy_bad, 0, 0, &o[0]) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_graph_add_cumsum_backward(g, xi, 0, 0, 0, &o[0]) == RLX_INVALID_ARGUMENT);
  CHECK(rlx_graph_add_cumsum_backward(g, x, 2, 0, 0, &o[0]) == RLX_INVALID_ARGUMENT);
  rlx_graph_destroy(g);
}

int main(void) {
  test_seed(15);
  RUN(layer_norm_backward_matches_finite_differences);
  RUN(rms_norm_backward_matches_finite_differences);
  RUN(softmax_backward_matches_finite_differences);
  RUN(rope_backward_matches_finite_differences);
  RUN(cumsum_backward_matches_finite_differences);
  RUN(row_backward_ops_round_trip_as_text);
  RUN(row_backward_shape_rules_refuse_mismatches);
  return test_summary();
}
