/* AttentionBackward on the CPU reference, proven against finite differences
 * of the forward in f64 (independently of autodiff): for L = sum(out * W),
 * dq, dk, dv of rlx_graph_add_attention_backward(..., out, d_out = W) must
 * match (L(x + h) - L(x - h)) / 2h for every element of q, k and v. Every
 * mask kind, GQA, both layouts, softcap, score scale, Sq != Sk, a head dim
 * too small to hold the stats (the one-step lowering), then f32 / f16 / bf16
 * against the f64 gradients. Plus the builder's shape checks. */
#include <math.h>

#include "harness.h"

typedef struct acase {
  const char* name;
  int B, H, Hkv, Sq, Sk, D, Dv;
  rlx_layout layout;
  rlx_mask_kind mask;
  int window;
  float scale, softcap;
  int mask_rank; /* custom / bias mask: 2 = [Sq, Sk], 4 = [B, H, Sq, Sk] */
} acase;

static const acase k_cases[] = {
    {"none_bshd", 1, 2, 2, 3, 3, 4, 4, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0, 0, 0},
    {"causal_gqa_bhsd", 2, 4, 2, 3, 5, 4, 4, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0, 0},
    {"causal_sq_gt_sk", 1, 2, 1, 5, 3, 4, 3, RLX_LAYOUT_BSHD, RLX_MASK_CAUSAL, 0, 0, 0, 0},
    {"sliding_softcap", 1, 2, 2, 4, 6, 4, 4, RLX_LAYOUT_BSHD, RLX_MASK_SLIDING, 2, 0, 2.0f, 0},
    {"custom_mask", 2, 2, 1, 3, 4, 4, 5, RLX_LAYOUT_BHSD, RLX_MASK_CUSTOM, 0, 0, 0, 4},
    {"bias_scale_softcap", 1, 3, 1, 4, 4, 6, 4, RLX_LAYOUT_BSHD, RLX_MASK_BIAS, 0, 0.7f, 1.5f, 2},
    {"full_lowering_d1", 1, 2, 1, 3, 4, 1, 2, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL, 0, 0, 0, 0},
};

static void shape_of(const acase* c, int heads, int seq, int dim, int64_t* s) {
  s[0] = c->B;
  s[1] = c->layout == RLX_LAYOUT_BSHD ? seq : heads;
  s[2] = c->layout == RLX_LAYOUT_BSHD ? heads : seq;
  s[3] = dim;
}

#define TRY(expr)                    \
  do {                               \
    rlx_status st_ = (expr);         \
    if (st_ != RLX_OK) return st_;   \
  } while (0)

enum { T_Q, T_K, T_V, T_MASK, T_W, T_COUNT };

typedef struct built {
  rlx_graph* g;
  rlx_exec* e;
  int64_t n[T_COUNT];
  double* data[T_COUNT]; /* host values, f64 */
} built;

static int64_t numel(const int64_t* s, int r) {
  int64_t n = 1;
  for (int i = 0; i < r; i++) n *= s[i];
  return n;
}

static const char* const k_names[T_COUNT] = {"q", "k", "v", "mask", "w"};

/* Graph: params q, k, v, (mask), w; outputs out, dq, dk, dv. */
static rlx_status build(const acase* c, rlx_dtype t, built* b) {
  memset(b, 0, sizeof *b);
  int64_t shp[T_COUNT][4];
  int rank[T_COUNT] = {4, 4, 4, c->mask_rank, 4};
  shape_of(c, c->H, c->Sq, c->D, shp[T_Q]);
  shape_of(c, c->Hkv, c->Sk, c->D, shp[T_K]);
  shape_of(c, c->Hkv, c->Sk, c->Dv, shp[T_V]);
  shape_of(c, c->H, c->Sq, c->Dv, shp[T_W]);
  int64_t ms[4] = {c->B, c->H, c->Sq, c->Sk};
  for (int i = 0; i < c->mask_rank; i++) shp[T_MASK][i] = ms[4 - c->mask_rank + i];
  TRY(rlx_graph_create(&b->g));
  rlx_tensor x[T_COUNT] = {RLX_NONE, RLX_NONE, RLX_NONE, RLX_NONE, RLX_NONE};
  for (int i = 0; i < T_COUNT; i++) {
    if (i == T_MASK && c->mask_rank == 0) continue;
    b->n[i] = numel(shp[i], rank[i]);
    b->data[i] = malloc(sizeof(double) * (size_t)b->n[i]);
    for (int64_t j = 0; j < b->n[i]; j++)
      b->data[i][j] = i == T_MASK && c->mask == RLX_MASK_CUSTOM
                          ? (test_rand_uniform(0, 1) < 0.7 ? 1.0 : 0.0)
                          : test_rand_uniform(-1, 1);
    TRY(rlx_graph_add_param(b->g, k_names[i], t, shp[i], rank[i], &x[i]));
  }
  rlx_attention_desc d = {c->H, c->Hkv, c->D, c->layout, c->mask, c->window, c->scale,
                          c->softcap};
  rlx_tensor y[4];
  TRY(rlx_graph_add_attention(b->g, x[T_Q], x[T_K], x[T_V], x[T_MASK], &d, &y[0]));
  TRY(rlx_graph_add_attention_backward(b->g, x[T_Q], x[T_K], x[T_V], x[T_MASK],
                                                       y[0], x[T_W], &d, &y[1], &y[2], &y[3]));
  TRY(rlx_graph_set_outputs(b->g, y, 4));
  return rlx_compile(b->g, "cpu", NULL, &b->e);
}

static rlx_status upload(built* b, rlx_dtype t, int i) {
  if (!b->data[i]) return RLX_OK;
  size_t n = (size_t)b->n[i];
  if (t == RLX_F64) return rlx_exec_set_param(b->e, k_names[i], RLX_F64, b->data[i], n * 8);
  float* f = malloc(n * sizeof *f);
  for (size_t j = 0; j < n; j++) f[j] = (float)b->data[i][j];
  rlx_status s = rlx_exec_set_param(b->e, k_names[i], RLX_F32, f, n * sizeof *f);
  free(f);
  return s;
}

static void drop(built* b) {
  rlx_exec_destroy(b->e);
  rlx_graph_destroy(b->g);
  for (int i = 0; i < T_COUNT; i++) free(b->data[i]);
}

/* L = sum(out * W) at the current values. */
static double loss(built* b) {
  if (rlx_exec_run(b->e) != RLX_OK) return NAN;
  int64_t n = 0;
  double* out = test_read_output_f64(b->e, 0, &n);
  double l = 0;
  for (int64_t j = 0; out && j < n; j++) l += out[j] * b->data[T_W][j];
  free(out);
  return out ? l : NAN;
}

/* Largest |analytic - numeric| over tensor `ti`, relative to max(1, |numeric|). */
static double fd_error(built* b, int ti, const double* grad) {
  const double h = 1e-6;
  double worst = 0;
  for (int64_t j = 0; j < b->n[ti]; j++) {
    double x0 = b->data[ti][j];
    b->data[ti][j] = x0 + h;
    upload(b, RLX_F64, ti);
    double lp = loss(b);
    b->data[ti][j] = x0 - h;
    upload(b, RLX_F64, ti);
    double lm = loss(b);
    b->data[ti][j] = x0;
    double num = (lp - lm) / (2 * h), err = fabs(grad[j] - num) / fmax(1.0, fabs(num));
    if (!(err <= worst)) worst = err; /* NaN sticks */
  }
  upload(b, RLX_F64, ti);
  return worst;
}

TEST(finite_differences_f64) {
  for (size_t ci = 0; ci < sizeof k_cases / sizeof *k_cases; ci++) {
    const acase* c = &k_cases[ci];
    test_seed(100 + ci);
    built b;
    rlx_status st = build(c, RLX_F64, &b);
    CHECK_MSG(st == RLX_OK, "%s: %s", c->name, rlx_graph_last_error(b.g));
    for (int i = 0; i < T_COUNT; i++) CHECK_OK_E(b.e, upload(&b, RLX_F64, i));
    CHECK_OK_E(b.e, rlx_exec_run(b.e));
    double* grads[3];
    int64_t n;
    for (int i = 0; i < 3; i++) grads[i] = test_read_output_f64(b.e, 1 + i, &n);
    double worst = 0, nonzero = 0;
    for (int i = 0; i < 3; i++) {
      double err = fd_error(&b, i, grads[i]);
      if (!(err <= worst)) worst = err;
      for (int64_t j = 0; j < b.n[i]; j++) nonzero += fabs(grads[i][j]);
      free(grads[i]);
    }
    drop(&b);
    printf("  %-20s max fd error %.2e\n", c->name, worst);
    CHECK_MSG(worst < 1e-6, "%s: gradient differs from finite differences by %g", c->name, worst);
    CHECK_MSG(nonzero > 0, "%s: every gradient is zero", c->name);
  }
}

/* The f64 gradients again in f32, f16 and bf16 (same random data). */
TEST(low_precision_matches_f64) {
  const rlx_dtype types[] = {RLX_F32, RLX_F16, RLX_BF16};
  const double tol[] = {1e-5, 1e-2, 4e-2};
  for (size_t ci = 0; ci < sizeof k_cases / sizeof *k_cases; ci++) {
    const acase* c = &k_cases[ci];
    test_seed(100 + ci);
    built ref;
    CHECK_MSG(build(c, RLX_F64, &ref) == RLX_OK, "%s: %s", c->name, rlx_graph_last_error(ref.g));
    for (int i = 0; i < T_COUNT; i++) CHECK_OK_E(ref.e, upload(&ref, RLX_F64, i));
    CHECK_OK_E(ref.e, rlx_exec_run(ref.e));
    for (int ti = 0; ti < 3; ti++) {
      test_seed(100 + ci);
      built b;
      CHECK_MSG(build(c, types[ti], &b) == RLX_OK, "%s: %s", c->name, rlx_graph_last_error(b.g));
      for (int i = 0; i < T_COUNT; i++) CHECK_OK_E(b.e, upload(&b, types[ti], i));
      CHECK_OK_E(b.e, rlx_exec_run(b.e));
      for (int o = 1; o < 4; o++) {
        int64_t n1, n2;
        double* want = test_read_output_f64(ref.e, o, &n1);
        double* got = test_read_output_f64(b.e, o, &n2);
        double err = want && got && n1 == n2 ? test_rel_l2(got, want, n1) : INFINITY;
        free(want);
        free(got);
        CHECK_MSG(err < tol[ti], "%s dtype %d output %d: rel l2 %g", c->name, (int)types[ti], o,
                  err);
      }
      drop(&b);
    }
    drop(&ref);
  }
}

TEST(builder_checks_shapes) {
  rlx_graph* g = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  int64_t qs[4] = {1, 3, 2, 4}, bad[4] = {1, 3, 2, 5};
  rlx_tensor q, k, v, o, dout, dq, dk, dv;
  CHECK_OK_G(g, rlx_graph_add_input(g, "q", RLX_F32, qs, 4, &q));
  CHECK_OK_G(g, rlx_graph_add_input(g, "k", RLX_F32, qs, 4, &k));
  CHECK_OK_G(g, rlx_graph_add_input(g, "v", RLX_F32, qs, 4, &v));
  CHECK_OK_G(g, rlx_graph_add_input(g, "o", RLX_F32, qs, 4, &o));
  CHECK_OK_G(g, rlx_graph_add_input(g, "bad", RLX_F32, bad, 4, &dout));
  rlx_attention_desc d = {2, 0, 4, RLX_LAYOUT_BSHD, RLX_MASK_NONE, 0, 0, 0};
  CHECK(rlx_graph_add_attention_backward(g, q, k, v, RLX_NONE, o, dout, &d, &dq, &dk, &dv) !=
        RLX_OK);
  CHECK(strstr(rlx_graph_last_error(g), "d_out") != NULL);
  CHECK(rlx_graph_add_attention_backward(g, q, k, v, RLX_NONE, o, o, NULL, &dq, &dk, &dv) !=
        RLX_OK);
  CHECK_OK_G(g, rlx_graph_add_attention_backward(g, q, k, v, RLX_NONE, o, o, &d, &dq, &dk, &dv));
  CHECK(dq != dk && dk != dv);
  rlx_graph_destroy(g);
}

int main(void) {
  RUN(builder_checks_shapes);
  RUN(finite_differences_f64);
  RUN(low_precision_matches_f64);
  return test_summary();
}
