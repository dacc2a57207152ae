/* Finite-difference checks of the vision backward ops on the CPU reference
 * in f64: for random geometries, L = sum(forward(x, w) * dy) and the
 * analytic gradients (ConvBackwardWeight for w, ConvTranspose of dy with
 * rlx_conv_input_grad_output_padding for x, a Reduce of dy for the bias,
 * PoolBackward for x) are compared with central differences of L over
 * every input element. Geometries: 1-3 spatial dims, strides, asymmetric
 * pads, dilation, groups, depthwise, channels first / last / last with OHWI
 * weights; pooling max and average with count_include_pad, ceil_mode,
 * dilation and global windows. Plus the builders' error messages. */
#include <math.h>

#include "harness.h"
#include "ir/conv_geometry.h"

#define MAX_INS 4
#define TRY(expr)                      \
  do {                                 \
    rlx_status try_ = (expr);          \
    if (try_ != RLX_OK) return try_;   \
  } while (0)
#define MAX_GRADS 3

/* A graph with f64 inputs in0.. and outputs [L, grad...]; grad_of[i] is
 * the input each gradient output differentiates. */
typedef struct problem {
  rlx_graph* g;
  int n_in;
  rlx_tensor in[MAX_INS];
  rlx_dim shape[MAX_INS][RLX_MAX_RANK];
  int32_t rank[MAX_INS];
  int n_grads;
  int grad_of[MAX_GRADS];
} problem;

static rlx_tensor add_input(problem* p, const rlx_dim* shape, int32_t rank) {
  char name[16];
  snprintf(name, sizeof name, "in%d", p->n_in);
  rlx_tensor t = RLX_NONE;
  rlx_graph_add_input(p->g, name, RLX_F64, shape, rank, &t);
  memcpy(p->shape[p->n_in], shape, sizeof(rlx_dim) * (size_t)rank);
  p->rank[p->n_in] = rank;
  p->in[p->n_in++] = t;
  return t;
}

static int64_t numel(const rlx_dim* s, int32_t rank) {
  int64_t n = 1;
  for (int32_t d = 0; d < rank; d++) n *= s[d];
  return n;
}

/* An input shaped like tensor t (dy for the forward's output). */
static rlx_tensor input_like(problem* p, rlx_tensor t) {
  rlx_dim s[RLX_MAX_RANK];
  int32_t r = 0;
  rlx_dtype dt;
  rlx_graph_tensor_type(p->g, t, &dt, &r, s);
  return add_input(p, s, r);
}

/* L = sum(y * dy) as output 0, then the gradients. */
static rlx_status finish(problem* p, rlx_tensor y, rlx_tensor dy, const rlx_tensor* grads) {
  rlx_tensor prod, outs[1 + MAX_GRADS];
  TRY(rlx_graph_add_binary(p->g, RLX_BIN_MUL, y, dy, &prod));
  TRY(rlx_graph_add_reduce(p->g, RLX_RED_SUM, prod, NULL, 0, 0, &outs[0]));
  for (int i = 0; i < p->n_grads; i++) outs[1 + i] = grads[i];
  return rlx_graph_set_outputs(p->g, outs, 1 + p->n_grads);
}

static rlx_status set_inputs(rlx_exec* e, const problem* p, double* const* data) {
  for (int i = 0; i < p->n_in; i++) {
    char name[16];
    snprintf(name, sizeof name, "in%d", i);
    size_t bytes = sizeof(double) * (size_t)numel(p->shape[i], p->rank[i]);
    TRY(rlx_exec_set_input(e, name, RLX_F64, p->shape[i], p->rank[i], data[i], bytes));
  }
  return RLX_OK;
}

static double loss_at(rlx_exec* e, const problem* p, double* const* data, rlx_status* st) {
  double l = NAN;
  *st = set_inputs(e, p, data);
  if (*st == RLX_OK) *st = rlx_exec_run(e);
  if (*st == RLX_OK) *st = rlx_exec_read_output(e, 0, RLX_F64, &l, sizeof l);
  return l;
}

/* Every element of every differentiated input: central difference of L
 * against the analytic gradient. L is piecewise linear in each input
 * (bilinear forms, averages, maxima away from ties), so the difference is
 * exact up to rounding. Returns the worst error relative to 1 + |grad|. */
static double check_problem(problem* p, const char* what) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = 1;
  rlx_exec* e = test_compile_on(p->g, "cpu", &o);
  if (!e) return INFINITY;
  double* data[MAX_INS];
  for (int i = 0; i < p->n_in; i++) {
    int64_t n = numel(p->shape[i], p->rank[i]);
    data[i] = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t k = 0; k < n; k++) data[i][k] = test_rand_uniform(-1.0, 1.0);
  }
  rlx_status st;
  double worst = 0.0;
  double* grads[MAX_GRADS] = {NULL};
  loss_at(e, p, data, &st);
  for (int gi = 0; gi < p->n_grads && st == RLX_OK; gi++) { /* before any perturbed run */
    int which = p->grad_of[gi];
    int64_t got = 0;
    grads[gi] = test_read_output_f64(e, 1 + gi, &got);
    if (!grads[gi] || got != numel(p->shape[which], p->rank[which])) {
      fprintf(stderr, "%s: gradient %d has %lld elements, not input %d's\n", what, gi,
              (long long)got, which);
      worst = INFINITY;
      st = RLX_INTERNAL;
    }
  }
  for (int gi = 0; gi < p->n_grads && st == RLX_OK; gi++) {
    int which = p->grad_of[gi];
    int64_t n = numel(p->shape[which], p->rank[which]);
    const double* grad = grads[gi];
    const double h = 1e-4;
    for (int64_t k = 0; k < n && st == RLX_OK; k++) {
      double keep = data[which][k];
      data[which][k] = keep + h;
      double lp = loss_at(e, p, data, &st);
      data[which][k] = keep - h;
      double lm = loss_at(e, p, data, &st);
      data[which][k] = keep;
      double fd = (lp - lm) / (2 * h), err = fabs(fd - grad[k]) / (1.0 + fabs(grad[k]));
      if (err > worst) worst = err;
      if (err > 1e-7)
        fprintf(stderr, "%s: d/d in%d[%lld]: analytic %.12g, finite difference %.12g\n", what,
                which, (long long)k, grad[k], fd);
    }
  }
  for (int gi = 0; gi < p->n_grads; gi++) free(grads[gi]);
  if (st != RLX_OK) {
    fprintf(stderr, "%s: %s\n", what, rlx_exec_last_error(e));
    worst = INFINITY;
  }
  for (int i = 0; i < p->n_in; i++) free(data[i]);
  rlx_exec_destroy(e);
  return worst;
}

/* ------------------------------------------------------------------ conv */

typedef struct conv_case {
  int ns, flavor;      /* flavor: 0 strided, 1 pads + dilation, 2 groups, 3 depthwise */
  rlx_conv_layout lay;
} conv_case;

/* The gradients of conv(x, w) + bias in the geometry of cc: d_w, d_x
 * (conv_transpose of dy; OHWI weights transposed to OIHW first), d_bias. */
static rlx_status build_conv(problem* p, const conv_case* cc) {
  int ns = cc->ns, last = cc->lay != RLX_CONV_CHANNELS_FIRST, ohwi = cc->lay == RLX_CONV_CHANNELS_LAST_OHWI;
  int64_t k[3], st[3], dil[3], pads[6], in[3];
  for (int i = 0; i < ns; i++) {
    k[i] = test_rand_int(1, 3);
    st[i] = cc->flavor == 0 ? 2 : test_rand_int(1, 2);
    dil[i] = cc->flavor == 1 ? test_rand_int(1, 2) : 1;
    pads[i] = cc->flavor == 1 ? test_rand_int(0, k[i] - 1) : 0;
    pads[ns + i] = cc->flavor == 1 ? test_rand_int(0, k[i]) : 0;
    in[i] = test_rand_int(1, ns == 3 ? 3 : 5) + dil[i] * (k[i] - 1);
  }
  int64_t groups = cc->flavor == 2 ? 2 : 1, N = test_rand_int(1, 2);
  int64_t C = groups * test_rand_int(1, 2), OC = groups * test_rand_int(1, 2);
  if (cc->flavor == 3) { C = test_rand_int(2, 3); groups = C; OC = C * test_rand_int(1, 2); }
  rlx_dim xs[5], ws[5], bs[1] = {OC};
  xs[0] = N;
  xs[last ? ns + 1 : 1] = C;
  ws[0] = OC;
  ws[ohwi ? ns + 1 : 1] = C / groups;
  for (int i = 0; i < ns; i++) {
    xs[last ? 1 + i : 2 + i] = in[i];
    ws[ohwi ? 1 + i : 2 + i] = k[i];
  }
  rlx_graph* g = p->g;
  rlx_tensor x = add_input(p, xs, ns + 2), w = add_input(p, ws, ns + 2), b = add_input(p, bs, 1);
  rlx_tensor y, grads[3];
  TRY(rlx_graph_add_conv(g, x, w, b, RLX_NONE, ns, st, pads, dil, (int32_t)groups,
                                         RLX_ACT_NONE, cc->lay, &y));
  rlx_tensor dy = input_like(p, y);
  TRY(rlx_graph_add_conv_backward_weight(g, x, dy, w, ns, st, pads, dil,
                                                         (int32_t)groups, cc->lay, &grads[0]));
  /* d_x: ConvTranspose of dy, its output_padding restoring x's size */
  rlx_dim ys[5];
  int32_t yr = 0;
  rlx_dtype yt;
  TRY(rlx_graph_tensor_type(g, dy, &yt, &yr, ys));
  int64_t out[3], opad[3];
  for (int i = 0; i < ns; i++) out[i] = ys[last ? 1 + i : 2 + i];
  if (rlx_conv_input_grad_output_padding(ns, in, out, k, st, pads, dil, opad) != 0)
    return RLX_INTERNAL;
  rlx_tensor wt = w;
  rlx_conv_layout tlay = cc->lay;
  if (ohwi) { /* [OC, k..., Cg] -> [OC, Cg, k...] */
    int32_t perm[5] = {0, ns + 1};
    for (int i = 0; i < ns; i++) perm[2 + i] = 1 + i;
    TRY(rlx_graph_add_transpose(g, w, perm, ns + 2, &wt));
    tlay = RLX_CONV_CHANNELS_LAST;
  }
  TRY(rlx_graph_add_conv_transpose(g, dy, wt, RLX_NONE, RLX_NONE, ns, st, pads, dil,
                                                   opad, (int32_t)groups, RLX_ACT_NONE, tlay,
                                                   &grads[1]));
  /* d_bias: dy summed over N and the spatial dims */
  int32_t axes[4] = {0}, n_axes = 1;
  for (int i = 0; i < ns; i++) axes[n_axes++] = last ? 1 + i : 2 + i;
  TRY(rlx_graph_add_reduce(g, RLX_RED_SUM, dy, axes, n_axes, 0, &grads[2]));
  p->n_grads = 3;
  p->grad_of[0] = 1;
  p->grad_of[1] = 0;
  p->grad_of[2] = 2;
  return finish(p, y, dy, grads);
}

TEST(conv_gradients_match_finite_differences) {
  static const rlx_conv_layout lays[3] = {RLX_CONV_CHANNELS_FIRST, RLX_CONV_CHANNELS_LAST,
                                          RLX_CONV_CHANNELS_LAST_OHWI};
  int cases = 0;
  for (int ns = 1; ns <= 3; ns++)
    for (int flavor = 0; flavor < 4; flavor++)
      for (int li = 0; li < 3; li++) {
        conv_case cc = {ns, flavor, lays[li]};
        test_seed((uint64_t)(ns * 100 + flavor * 10 + li + 1));
        problem p = {0};
        rlx_graph_create(&p.g);
        char what[64];
        snprintf(what, sizeof what, "conv ns=%d flavor=%d layout=%d", ns, flavor, (int)lays[li]);
        rlx_status st = build_conv(&p, &cc);
        if (st != RLX_OK) fprintf(stderr, "%s: %s\n", what, rlx_graph_last_error(p.g));
        double worst = st == RLX_OK ? check_problem(&p, what) : INFINITY;
        rlx_graph_destroy(p.g);
        CHECK_MSG(worst <= 1e-7, "%s: worst relative error %.3g", what, worst);
        cases++;
      }
  CHECK(cases == 36);
}

/* The output_padding rule on sizes worked by hand: in 6, k 3, stride 2 ->
 * out 2, the last input position read by no window (op 1); in 7 + begin
 * pad 1, k 2, stride 3 -> out 3, every position read (op 0). */
TEST(conv_input_grad_output_padding_by_hand) {
  int64_t in[2] = {6, 7}, out[2] = {2, 3}, k[2] = {3, 2}, st[2] = {2, 3}, pads[4] = {0, 1, 0, 0};
  int64_t op[2] = {-1, -1};
  CHECK(rlx_conv_input_grad_output_padding(2, in, out, k, st, pads, NULL, op) == 0);
  CHECK(op[0] == 1 && op[1] == 0); /* (6 - 2 - 1) % 2, (7 + 1 - 1 - 1) % 3 */
  int64_t bad_out[2] = {3, 3};
  CHECK(rlx_conv_input_grad_output_padding(2, in, bad_out, k, st, pads, NULL, op) == -1);
}

/* ------------------------------------------------------------------ pool */

/* flavor: 0 strided, 1 asymmetric pads + count_include_pad, 2 ceil_mode +
 * dilation, 3 global, 4 ceil_mode + pads + count_include_pad. */
static rlx_status build_pool(problem* p, rlx_pool_kind kind, int ns, int flavor) {
  int64_t k[3], st[3], pads[6], dil[3];
  int ceil = flavor == 2 || flavor == 4, cip = flavor == 1 || flavor == 4;
  rlx_dim xs[5] = {test_rand_int(1, 2), test_rand_int(1, 2)};
  for (int i = 0; i < ns; i++) {
    k[i] = test_rand_int(2, 3);
    st[i] = test_rand_int(1, 3);
    dil[i] = flavor == 2 ? test_rand_int(1, 2) : 1;
    pads[i] = flavor == 1 || flavor == 4 ? test_rand_int(0, k[i] - 1) : 0;
    pads[ns + i] = flavor == 1 || flavor == 4 ? test_rand_int(0, k[i] - 1) : 0;
    xs[2 + i] = test_rand_int(1, ns == 3 ? 3 : 6) + dil[i] * (k[i] - 1);
    if (flavor == 3) { k[i] = xs[2 + i]; st[i] = 1; }
  }
  rlx_tensor x = add_input(p, xs, 2 + ns), y, dx;
  TRY(rlx_graph_add_pool(p->g, x, kind, ns, k, st, pads, dil, ceil, cip, &y));
  rlx_tensor dy = input_like(p, y);
  TRY(rlx_graph_add_pool_backward(p->g, x, dy, kind, ns, k, st, pads, dil, ceil,
                                                  cip, &dx));
  p->n_grads = 1;
  p->grad_of[0] = 0;
  return finish(p, y, dy, &dx);
}

TEST(pool_gradients_match_finite_differences) {
  int cases = 0;
  for (int kind = 0; kind < 2; kind++)
    for (int ns = 1; ns <= 3; ns++)
      for (int flavor = 0; flavor < 5; flavor++) {
        test_seed((uint64_t)(kind * 1000 + ns * 100 + flavor + 7));
        problem p = {0};
        rlx_graph_create(&p.g);
        char what[64];
        snprintf(what, sizeof what, "pool %s ns=%d flavor=%d", kind ? "avg" : "max", ns, flavor);
        rlx_status st = build_pool(&p, (rlx_pool_kind)kind, ns, flavor);
        if (st != RLX_OK) fprintf(stderr, "%s: %s\n", what, rlx_graph_last_error(p.g));
        double worst = st == RLX_OK ? check_problem(&p, what) : INFINITY;
        rlx_graph_destroy(p.g);
        CHECK_MSG(worst <= 1e-7, "%s: worst relative error %.3g", what, worst);
        cases++;
      }
  CHECK(cases == 30);
}

/* Max pooling's gradient goes to the FIRST maximum of a window with ties. */
TEST(pool_max_ties_route_to_first_maximum) {
  rlx_graph* g;
  CHECK_OK_G(NULL, rlx_graph_create(&g));
  rlx_dim xs[3] = {1, 1, 4}, ys[3] = {1, 1, 2};
  rlx_tensor x, dy, dx;
  CHECK_OK_G(g, rlx_graph_add_input(g, "x", RLX_F32, xs, 3, &x));
  CHECK_OK_G(g, rlx_graph_add_input(g, "dy", RLX_F32, ys, 3, &dy));
  int64_t k[1] = {3}, st[1] = {1};
  CHECK_OK_G(g, rlx_graph_add_pool_backward(g, x, dy, RLX_POOL_MAX, 1, k, st, NULL, NULL, 0, 0, &dx));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &dx, 1));
  rlx_exec* e = test_compile_on(g, "cpu", NULL);
  CHECK(e != NULL);
  float xv[4] = {2, 5, 5, 1}, gv[2] = {10, 100}, out[4];
  CHECK_OK_E(e, rlx_exec_set_input(e, "x", RLX_F32, xs, 3, xv, sizeof xv));
  CHECK_OK_E(e, rlx_exec_set_input(e, "dy", RLX_F32, ys, 3, gv, sizeof gv));
  CHECK_OK_E(e, rlx_exec_run(e));
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_F32, out, sizeof out));
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
  /* both windows [2,5,5] and [5,5,1] pick index 1 */
  CHECK(out[0] == 0 && out[1] == 110 && out[2] == 0 && out[3] == 0);
}

/* ------------------------------------------------------------------ errors */

TEST(builders_name_what_is_wrong) {
  rlx_graph* g;
  CHECK_OK_G(NULL, rlx_graph_create(&g));
  rlx_dim xs[4] = {1, 2, 5, 5}, ws[4] = {3, 2, 3, 3}, ys[4] = {1, 3, 3, 3}, bad[4] = {1, 3, 4, 3};
  rlx_tensor x, w, dy, dyb, out = RLX_NONE;
  rlx_graph_add_input(g, "x", RLX_F32, xs, 4, &x);
  rlx_graph_add_input(g, "w", RLX_F32, ws, 4, &w);
  rlx_graph_add_input(g, "dy", RLX_F32, ys, 4, &dy);
  rlx_graph_add_input(g, "dyb", RLX_F32, bad, 4, &dyb);
  int32_t before = rlx_graph_node_count(g);
  CHECK_OK_G(g, rlx_graph_add_conv_backward_weight(g, x, dy, w, 2, NULL, NULL, NULL, 1,
                                                    RLX_CONV_CHANNELS_FIRST, &out));
  CHECK(rlx_graph_add_conv_backward_weight(g, x, dyb, w, 2, NULL, NULL, NULL, 1,
                                           RLX_CONV_CHANNELS_FIRST, &out) != RLX_OK);
  CHECK(strstr(rlx_graph_last_error(g), "forward's output") != NULL);
  CHECK(rlx_graph_add_conv_backward_weight(g, x, dy, w, 4, NULL, NULL, NULL, 1,
                                           RLX_CONV_CHANNELS_FIRST, &out) == RLX_INVALID_ARGUMENT);
  CHECK(strstr(rlx_graph_last_error(g), "n_spatial") != NULL);
  int64_t k[2] = {2, 2};
  CHECK(rlx_graph_add_pool_backward(g, x, dy, RLX_POOL_MAX, 2, k, NULL, NULL, NULL, 0, 0, &out) != RLX_OK);
  CHECK(strstr(rlx_graph_last_error(g), "forward's output") != NULL);
  CHECK(rlx_graph_add_pool_backward(g, x, x, RLX_POOL_ARGMAX, 2, k, NULL, NULL, NULL, 0, 0, &out) != RLX_OK);
  CHECK(strstr(rlx_graph_last_error(g), "max or avg") != NULL);
  CHECK(rlx_graph_node_count(g) == before + 1); /* failed builders add nothing */
  rlx_graph_destroy(g);
}

int main(void) {
  RUN(conv_gradients_match_finite_differences);
  RUN(conv_input_grad_output_padding_by_hand);
  RUN(pool_gradients_match_finite_differences);
  RUN(pool_max_ties_route_to_first_maximum);
  RUN(builders_name_what_is_wrong);
  return test_summary();
}
