/* CPU reference kernels for matmul, norms, attention, RoPE and sample,
 * driven through the public API (compile for "cpu" with reference = 1) and
 * compared against naive loops written independently here.
 *
 * Every executable runs twice: first with NaN-filled inputs (which poisons
 * every output element the kernel derives from them), then with random
 * non-zero data; an element the kernel forgot to write keeps its poison. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ir/dtype.h"

/* ------------------------------------------------------------------ plumbing */

#define TRY(expr)                          \
  do {                                     \
    rlx_status try_s_ = (expr);            \
    if (try_s_ != RLX_OK) return try_s_;   \
  } while (0)

typedef struct feed_in {
  const char* name;
  rlx_dtype dtype;
  int32_t rank;
  int64_t shape[RLX_MAX_RANK];
  float* data; /* f32 values, converted to dtype when set */
} feed_in;

static int64_t numel_of(const int64_t* shape, int32_t rank) {
  int64_t n = 1;
  for (int32_t i = 0; i < rank; i++) n *= shape[i];
  return n;
}

static feed_in make_in(const char* name, rlx_dtype dt, int32_t rank, const int64_t* shape) {
  feed_in f;
  memset(&f, 0, sizeof f);
  f.name = name;
  f.dtype = dt;
  f.rank = rank;
  memcpy(f.shape, shape, (size_t)rank * sizeof *shape);
  int64_t n = numel_of(shape, rank);
  f.data = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
  test_fill_f32(f.data, n, -1.0, 1.0);
  return f;
}

/* The value the kernel actually sees after conversion to the input dtype. */
static double seen(const feed_in* f, int64_t i) {
  switch (f->dtype) {
    case RLX_F16: return rlx_f16_to_f32(rlx_f32_to_f16(f->data[i]));
    case RLX_BF16: return rlx_bf16_to_f32(rlx_f32_to_bf16(f->data[i]));
    case RLX_BOOL: return f->data[i] > 0.5f ? 1.0 : 0.0;
    default: return f->data[i];
  }
}

/* v as stored in dtype t (round to nearest even). */
static double round_dt(rlx_dtype t, double v) {
  switch (t) {
    case RLX_F32: return (float)v;
    case RLX_F16: return rlx_f16_to_f32(rlx_f32_to_f16((float)v));
    case RLX_BF16: return rlx_bf16_to_f32(rlx_f32_to_bf16((float)v));
    default: return v;
  }
}

static void free_ins(feed_in* ins, int n) {
  for (int i = 0; i < n; i++) free(ins[i].data);
}

static rlx_status add_input(rlx_graph* g, const feed_in* f, rlx_tensor* t) {
  return rlx_graph_add_input(g, f->name, f->dtype, f->shape, f->rank, t);
}

/* Sets input f (NaN / all-true when poison) converted to its dtype. */
static rlx_status set_input(rlx_exec* e, const feed_in* f, int poison) {
  int64_t n = numel_of(f->shape, f->rank);
  size_t es = rlx_dtype_size(f->dtype);
  uint8_t* buf = malloc((size_t)(n > 0 ? n : 1) * es);
  if (!buf) return RLX_RESOURCE_EXHAUSTED;
  for (int64_t i = 0; i < n; i++) {
    double v = poison ? (f->dtype == RLX_BOOL ? 1.0 : NAN) : seen(f, i);
    rlx_store_f64(buf, f->dtype, i, v);
  }
  rlx_status st = rlx_exec_set_input(e, f->name, f->dtype, f->shape, f->rank, buf, (size_t)n * es);
  free(buf);
  return st;
}

static rlx_status run_with(rlx_exec* e, const feed_in* ins, int n, int poison) {
  for (int i = 0; i < n; i++) TRY(set_input(e, &ins[i], poison));
  return rlx_exec_run(e);
}

static rlx_status compile_ref(rlx_graph* g, rlx_exec** e) {
  rlx_compile_options o;
  rlx_compile_options_init(&o);
  o.reference = 1;
  return rlx_compile(g, "cpu", &o, e);
}

/* Compiles g, runs the poison pass then the real pass. */
static rlx_status compile_and_run(rlx_graph* g, const feed_in* ins, int n, rlx_exec** e) {
  TRY(compile_ref(g, e));
  TRY(run_with(*e, ins, n, 1));
  return run_with(*e, ins, n, 0);
}

static const char* exec_or_graph_error(rlx_graph* g, rlx_exec* e) {
  return e ? rlx_exec_last_error(e) : rlx_graph_last_error(g);
}

static double* read_output(rlx_exec* e, int32_t idx, int64_t n) {
  float* f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
  double* d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
  if (!f || !d || rlx_exec_read_output(e, idx, RLX_F32, f, (size_t)n * sizeof *f) != RLX_OK) {
    free(f);
    free(d);
    return NULL;
  }
  for (int64_t i = 0; i < n; i++) d[i] = f[i];
  free(f);
  return d;
}

static int64_t tensor_numel(rlx_graph* g, rlx_tensor t, int32_t* rank, int64_t* shape) {
  rlx_dtype dt;
  if (rlx_graph_tensor_type(g, t, &dt, rank, shape) != RLX_OK) return -1;
  return numel_of(shape, *rank);
}

/* ------------------------------------------------------------------ matmul */

static double act_ref(int act, double x) {
  switch (act) {
    case RLX_ACT_RELU: return x > 0 ? x : 0;
    case RLX_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case RLX_ACT_TANH: return tanh(x);
    case RLX_ACT_EXP: return exp(x);
    case RLX_ACT_LOG: return log(x);
    case RLX_ACT_SQRT: return sqrt(x);
    case RLX_ACT_RSQRT: return 1 / sqrt(x);
    case RLX_ACT_NEG: return -x;
    case RLX_ACT_ABS: return fabs(x);
    case RLX_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case RLX_ACT_GELU_APPROX:
      return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case RLX_ACT_SILU: return x / (1 + exp(-x));
    case RLX_ACT_ROUND: return nearbyint(x);
    case RLX_ACT_SIN: return sin(x);
    case RLX_ACT_COS: return cos(x);
    case RLX_ACT_TAN: return tan(x);
    case RLX_ACT_ATAN: return atan(x);
    default: return x;
  }
}

typedef struct mm_case {
  int32_t ra, rb;
  int64_t as[RLX_MAX_RANK], bs[RLX_MAX_RANK];
  int ta, tb;
  int fused, bias, act;
  rlx_dtype dt;
} mm_case;

/* Dense offset of the operand matrix for output batch index `bidx` (rank
 * nb), broadcasting the operand's own batch dims (right-aligned). */
static int64_t batch_matrix(const int64_t* shape, int32_t rank, const int64_t* bidx, int32_t nb) {
  int32_t ob = rank - 2;
  int64_t off = 0;
  for (int32_t j = 0; j < ob; j++) {
    int64_t i = bidx[nb - ob + j];
    off = off * shape[j] + (shape[j] == 1 ? 0 : i);
  }
  return off * shape[rank - 2] * shape[rank - 1];
}

static void naive_matmul(const mm_case* c, const feed_in* A, const feed_in* B, const feed_in* bias,
                         const int64_t* cs, int32_t rc, double* out) {
  int64_t M = cs[rc - 2], N = cs[rc - 1];
  int64_t K = c->ta ? A->shape[c->ra - 2] : A->shape[c->ra - 1];
  int32_t nb = rc - 2;
  int64_t batches = numel_of(cs, nb), bidx[RLX_MAX_RANK];
  for (int64_t bt = 0; bt < batches; bt++) {
    int64_t r = bt;
    for (int32_t d = nb - 1; d >= 0; d--) bidx[d] = r % cs[d], r /= cs[d];
    int64_t ao = batch_matrix(A->shape, c->ra, bidx, nb), bo = batch_matrix(B->shape, c->rb, bidx, nb);
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) {
          double av = seen(A, ao + (c->ta ? k * M + m : m * K + k));
          double bv = seen(B, bo + (c->tb ? n * K + k : k * N + n));
          acc += av * bv;
        }
        if (bias) acc += seen(bias, n);
        if (c->fused) acc = act_ref(c->act, acc);
        out[(bt * M + m) * N + n] = acc;
      }
  }
}

static int act_needs_positive(int act) {
  return act == RLX_ACT_LOG || act == RLX_ACT_SQRT || act == RLX_ACT_RSQRT;
}

static void check_matmul(const mm_case* c) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  feed_in ins[3];
  int n_in = 2;
  ins[0] = make_in("a", c->dt, c->ra, c->as);
  ins[1] = make_in("b", c->dt, c->rb, c->bs);
  int64_t N = c->tb ? c->bs[c->rb - 2] : c->bs[c->rb - 1];
  if (c->bias) ins[n_in++] = make_in("bias", c->dt, 1, &N);
  if (act_needs_positive(c->act))
    for (int i = 0; i < n_in; i++)
      test_fill_f32(ins[i].data, numel_of(ins[i].shape, ins[i].rank), 0.1, 1.0);
  rlx_tensor t[3], y;
  for (int i = 0; i < n_in; i++) CHECK_OK_G(g, add_input(g, &ins[i], &t[i]));
  if (c->fused)
    CHECK_OK_G(g, rlx_graph_add_fused_matmul_bias_act(g, t[0], t[1], c->bias ? t[2] : RLX_NONE,
                                                      c->ta, c->tb, c->act, &y));
  else
    CHECK_OK_G(g, rlx_graph_add_matmul(g, t[0], t[1], c->ta, c->tb, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  int32_t rc;
  int64_t cs[RLX_MAX_RANK];
  int64_t n = tensor_numel(g, y, &rc, cs);
  CHECK_MSG(compile_and_run(g, ins, n_in, &e) == RLX_OK, "%s", exec_or_graph_error(g, e));
  double* got = read_output(e, 0, n);
  double* want = malloc((size_t)n * sizeof *want);
  CHECK(got && want);
  naive_matmul(c, &ins[0], &ins[1], c->bias ? &ins[2] : NULL, cs, rc, want);
  double tol = c->dt == RLX_F32 ? 1e-5 : 1e-2;
  double err = test_rel_l2(got, want, n);
  CHECK_MSG(err <= tol, "matmul act=%d ta=%d tb=%d dt=%s: rel err %g", c->act, c->ta, c->tb,
            rlx_dtype_name(c->dt), err);
  free(got);
  free(want);
  free_ins(ins, n_in);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

static mm_case mm2(int64_t a0, int64_t a1, int64_t b0, int64_t b1, int ta, int tb) {
  mm_case c;
  memset(&c, 0, sizeof c);
  c.ra = c.rb = 2;
  c.as[0] = a0, c.as[1] = a1, c.bs[0] = b0, c.bs[1] = b1;
  c.ta = ta, c.tb = tb;
  c.dt = RLX_F32;
  return c;
}

TEST(matmul_plain_and_transposed) {
  test_seed(1);
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      /* M = 5, K = 3, N = 7 stored as the transposes ask. */
      mm_case c = mm2(ta ? 3 : 5, ta ? 5 : 3, tb ? 7 : 3, tb ? 3 : 7, ta, tb);
      check_matmul(&c);
    }
  mm_case odd = mm2(13, 17, 17, 11, 0, 0);
  check_matmul(&odd);
  mm_case ones = mm2(1, 1, 1, 1, 0, 0);
  check_matmul(&ones);
  mm_case row = mm2(1, 19, 19, 1, 0, 0);
  check_matmul(&row);
  mm_case col = mm2(23, 1, 1, 29, 0, 0);
  check_matmul(&col);
}

TEST(matmul_broadcast_batch) {
  test_seed(2);
  mm_case c;
  memset(&c, 0, sizeof c);
  c.dt = RLX_F32;
  c.ra = 4, c.rb = 3;
  int64_t as[4] = {2, 1, 5, 3}, bs[3] = {4, 3, 7};
  memcpy(c.as, as, sizeof as);
  memcpy(c.bs, bs, sizeof bs);
  check_matmul(&c);
  /* Transposed operands with the broadcast on the other side. */
  int64_t as2[3] = {3, 4, 2}, bs2[4] = {2, 1, 6, 4};
  c.ra = 3, c.rb = 4, c.ta = 1, c.tb = 1;
  memcpy(c.as, as2, sizeof as2);
  memcpy(c.bs, bs2, sizeof bs2);
  check_matmul(&c); /* a: [3, K=4, M=2], b: [2,1, N=6, K=4] -> [2,3,2,6] */
  /* A 2-D operand against a batched one; size-1 batch dims on both. */
  int64_t as3[2] = {5, 3}, bs3[4] = {1, 3, 3, 2};
  c.ra = 2, c.rb = 4, c.ta = 0, c.tb = 0;
  memcpy(c.as, as3, sizeof as3);
  memcpy(c.bs, bs3, sizeof bs3);
  check_matmul(&c);
}

TEST(matmul_bias_every_activation) {
  test_seed(3);
  for (int act = RLX_ACT_NONE; act < RLX_ACT_COUNT; act++) {
    mm_case c = mm2(7, 5, 5, 3, 0, act % 2);
    if (act % 2) c.bs[0] = 3, c.bs[1] = 5;
    c.fused = 1;
    c.bias = 1;
    c.act = act;
    check_matmul(&c);
  }
  /* Fused without a bias, batched. */
  mm_case nb;
  memset(&nb, 0, sizeof nb);
  nb.dt = RLX_F32;
  nb.ra = nb.rb = 3;
  int64_t as[3] = {3, 4, 6}, bs[3] = {1, 6, 5};
  memcpy(nb.as, as, sizeof as);
  memcpy(nb.bs, bs, sizeof bs);
  nb.fused = 1;
  nb.act = RLX_ACT_GELU;
  check_matmul(&nb);
}

TEST(matmul_half_dtypes) {
  test_seed(4);
  rlx_dtype dts[2] = {RLX_F16, RLX_BF16};
  for (int i = 0; i < 2; i++) {
    mm_case c = mm2(6, 9, 9, 4, 0, 1);
    c.bs[0] = 4, c.bs[1] = 9;
    c.dt = dts[i];
    c.fused = 1, c.bias = 1, c.act = RLX_ACT_SILU;
    check_matmul(&c);
  }
}

/* ------------------------------------------------------------------ norms */

/* Normalises rows of `cols` (optional residual/bias added first; the sum is
 * returned in sum). */
static void naive_norm(int rms, const feed_in* x, const feed_in* res, const feed_in* bias,
                       const feed_in* gamma, const feed_in* beta, int64_t rows, int64_t cols,
                       double eps, double* out, double* sum) {
  double* v = malloc((size_t)cols * sizeof *v);
  for (int64_t r = 0; r < rows; r++) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; c++) {
      v[c] = seen(x, r * cols + c);
      if (res) v[c] += seen(res, r * cols + c);
      if (bias) v[c] += seen(bias, c);
      if (res) v[c] = round_dt(x->dtype, v[c]); /* the sum is stored first */
      if (sum) sum[r * cols + c] = v[c];
      mean += v[c];
    }
    mean = rms ? 0 : mean / (double)cols;
    for (int64_t c = 0; c < cols; c++) var += (v[c] - mean) * (v[c] - mean);
    var /= (double)cols;
    for (int64_t c = 0; c < cols; c++) {
      double y = (v[c] - mean) / sqrt(var + eps);
      if (gamma) y *= seen(gamma, c);
      if (beta) y += seen(beta, c);
      out[r * cols + c] = y;
    }
  }
  free(v);
}

static void check_layer_norm(int32_t axis, int with_gamma, int with_beta) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  int64_t xs[3] = {3, 4, 5};
  int32_t pos = axis < 0 ? axis + 3 : axis;
  feed_in ins[3];
  int n_in = 0;
  ins[n_in++] = make_in("x", RLX_F32, 3, xs);
  int gi = -1, bi = -1;
  if (with_gamma) gi = n_in, ins[n_in++] = make_in("gamma", RLX_F32, 3 - pos, xs + pos);
  if (with_beta) bi = n_in, ins[n_in++] = make_in("beta", RLX_F32, 3 - pos, xs + pos);
  rlx_tensor t[3], y;
  for (int i = 0; i < n_in; i++) CHECK_OK_G(g, add_input(g, &ins[i], &t[i]));
  float eps = 1e-3f;
  CHECK_OK_G(g, rlx_graph_add_layer_norm(g, t[0], gi >= 0 ? t[gi] : RLX_NONE,
                                         bi >= 0 ? t[bi] : RLX_NONE, axis, eps, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  CHECK_MSG(compile_and_run(g, ins, n_in, &e) == RLX_OK, "%s", exec_or_graph_error(g, e));
  int64_t cols = numel_of(xs + pos, 3 - pos), n = numel_of(xs, 3);
  double* got = read_output(e, 0, n);
  double want[60];
  CHECK(got);
  naive_norm(0, &ins[0], NULL, NULL, gi >= 0 ? &ins[gi] : NULL, bi >= 0 ? &ins[bi] : NULL,
             n / cols, cols, eps, want, NULL);
  double err = test_rel_l2(got, want, n);
  CHECK_MSG(err <= 1e-5, "layer_norm axis=%d gamma=%d beta=%d: rel err %g", axis, with_gamma,
            with_beta, err);
  free(got);
  free_ins(ins, n_in);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(layer_norm_axes_and_affine) {
  test_seed(5);
  for (int32_t axis = -2; axis <= -1; axis++)
    for (int gm = 0; gm < 2; gm++)
      for (int bt = 0; bt < 2; bt++) check_layer_norm(axis, gm, bt);
  check_layer_norm(0, 1, 1); /* one row over everything */
}

static void check_rms_norm(int with_gamma) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  int64_t xs[2] = {6, 7};
  feed_in ins[2];
  int n_in = 0;
  ins[n_in++] = make_in("x", RLX_F32, 2, xs);
  if (with_gamma) ins[n_in++] = make_in("gamma", RLX_F32, 1, xs + 1);
  rlx_tensor t[2], y;
  for (int i = 0; i < n_in; i++) CHECK_OK_G(g, add_input(g, &ins[i], &t[i]));
  float eps = 1e-5f;
  CHECK_OK_G(g, rlx_graph_add_rms_norm(g, t[0], with_gamma ? t[1] : RLX_NONE, eps, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  CHECK_MSG(compile_and_run(g, ins, n_in, &e) == RLX_OK, "%s", exec_or_graph_error(g, e));
  double* got = read_output(e, 0, 42);
  double want[42];
  CHECK(got);
  naive_norm(1, &ins[0], NULL, NULL, with_gamma ? &ins[1] : NULL, NULL, 6, 7, eps, want, NULL);
  double err = test_rel_l2(got, want, 42);
  CHECK_MSG(err <= 1e-5, "rms_norm gamma=%d: rel err %g", with_gamma, err);
  free(got);
  free_ins(ins, n_in);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(rms_norm) {
  test_seed(6);
  check_rms_norm(0);
  check_rms_norm(1);
}

/* big_values: x holds large f32 integers and the residual +-0.6, so the
 * stored sum loses the residual: normalising the unrounded sum would differ
 * visibly from normalising the stored one. */
static void check_fused_residual_dt(rlx_dtype dt, int big_values, int rms, int with_bias,
                                    int with_gamma, int with_beta) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  int64_t xs[3] = {2, 4, 9};
  feed_in ins[5];
  int n_in = 0, bi = -1, gi = -1, be = -1;
  ins[n_in++] = make_in("x", dt, 3, xs);
  ins[n_in++] = make_in("residual", dt, 3, xs);
  if (with_bias) bi = n_in, ins[n_in++] = make_in("bias", dt, 1, xs + 2);
  if (with_gamma) gi = n_in, ins[n_in++] = make_in("gamma", dt, 1, xs + 2);
  if (with_beta && !rms) be = n_in, ins[n_in++] = make_in("beta", dt, 1, xs + 2);
  if (big_values)
    for (int i = 0; i < 72; i++) {
      ins[0].data[i] = 16777216.0f + 2.0f * (float)(i % 9);
      ins[1].data[i] = (i % 2) ? 0.6f : -0.6f;
    }
  rlx_tensor t[5], outs[2];
  for (int i = 0; i < n_in; i++) CHECK_OK_G(g, add_input(g, &ins[i], &t[i]));
  float eps = 1e-4f;
  rlx_tensor tb = bi >= 0 ? t[bi] : RLX_NONE, tg = gi >= 0 ? t[gi] : RLX_NONE;
  if (rms)
    CHECK_OK_G(g, rlx_graph_add_fused_residual_rms_norm(g, t[0], t[1], tb, tg, eps, &outs[0],
                                                        &outs[1]));
  else
    CHECK_OK_G(g, rlx_graph_add_fused_residual_layer_norm(g, t[0], t[1], tb, tg,
                                                          be >= 0 ? t[be] : RLX_NONE, eps,
                                                          &outs[0], &outs[1]));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, outs, 2));
  CHECK_MSG(compile_and_run(g, ins, n_in, &e) == RLX_OK, "%s", exec_or_graph_error(g, e));
  double* got_n = read_output(e, 0, 72);
  double* got_s = read_output(e, 1, 72);
  double want_n[72], want_s[72];
  CHECK(got_n && got_s);
  naive_norm(rms, &ins[0], &ins[1], bi >= 0 ? &ins[bi] : NULL, gi >= 0 ? &ins[gi] : NULL,
             be >= 0 ? &ins[be] : NULL, 8, 9, eps, want_n, want_s);
  double en = test_rel_l2(got_n, want_n, 72), es = test_rel_l2(got_s, want_s, 72);
  double tol = dt == RLX_F32 ? 1e-5 : 1e-2;
  CHECK_MSG(en <= tol && es <= tol / 10, "fused residual %s rms=%d bias=%d gamma=%d beta=%d: norm %g sum %g",
            rlx_dtype_name(dt), rms, with_bias, with_gamma, with_beta, en, es);
  free(got_n);
  free(got_s);
  free_ins(ins, n_in);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(fused_residual_norms) {
  test_seed(7);
  for (int rms = 0; rms < 2; rms++)
    for (int mask = 0; mask < 8; mask++)
      check_fused_residual_dt(RLX_F32, 0, rms, mask & 1, (mask >> 1) & 1, mask >> 2);
  check_fused_residual_dt(RLX_F16, 0, 0, 1, 1, 1);
  check_fused_residual_dt(RLX_BF16, 0, 1, 1, 1, 0);
}

TEST(fused_residual_norm_normalises_stored_sum) {
  test_seed(15);
  check_fused_residual_dt(RLX_F32, 1, 0, 0, 0, 0);
  check_fused_residual_dt(RLX_F32, 1, 0, 0, 1, 1);
}

/* ------------------------------------------------------------------ attention */

typedef struct attn_case {
  int64_t B, H, Hkv, Sq, Sk, D;
  rlx_layout layout;
  rlx_mask_kind mask;
  int32_t window;
  float scale, softcap;
  int32_t m_rank; /* mask tensor shape (CUSTOM / BIAS) */
  int64_t m_shape[4];
  rlx_dtype m_dtype;
} attn_case;

static int64_t at4(rlx_layout l, int64_t S, int64_t H, int64_t D, int64_t b, int64_t s, int64_t h,
                   int64_t d) {
  return l == RLX_LAYOUT_BSHD ? ((b * S + s) * H + h) * D + d : ((b * H + h) * S + s) * D + d;
}

static void shape4(rlx_layout l, int64_t B, int64_t S, int64_t H, int64_t D, int64_t* out) {
  out[0] = B, out[3] = D;
  out[1] = l == RLX_LAYOUT_BSHD ? S : H;
  out[2] = l == RLX_LAYOUT_BSHD ? H : S;
}

/* Mask element for (b, h, i, j) broadcast right-aligned from its shape. */
static double mask_at(const attn_case* c, const feed_in* m, int64_t b, int64_t h, int64_t i,
                      int64_t j) {
  int64_t full[4] = {b, h, i, j}, off = 0;
  for (int32_t d = 0; d < c->m_rank; d++) {
    int64_t dim = c->m_shape[d], idx = full[4 - c->m_rank + d];
    off = off * dim + (dim == 1 ? 0 : idx);
  }
  return seen(m, off);
}

static void naive_attention(const attn_case* c, const feed_in* q, const feed_in* k,
                            const feed_in* v, const feed_in* m, double* out) {
  double scale = c->scale != 0 ? c->scale : 1 / sqrt((double)c->D);
  double* s = malloc((size_t)c->Sk * sizeof *s);
  int64_t group = c->H / c->Hkv;
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t i = 0; i < c->Sq; i++) {
        int64_t kh = h / group, diag = i + c->Sk - c->Sq;
        double best = -INFINITY;
        for (int64_t j = 0; j < c->Sk; j++) {
          double dot = 0;
          for (int64_t d = 0; d < c->D; d++)
            dot += seen(q, at4(c->layout, c->Sq, c->H, c->D, b, i, h, d)) *
                   seen(k, at4(c->layout, c->Sk, c->Hkv, c->D, b, j, kh, d));
          double sc = dot * scale;
          if (c->softcap > 0) sc = c->softcap * tanh(sc / c->softcap);
          int keep = 1;
          if (c->mask == RLX_MASK_CAUSAL || c->mask == RLX_MASK_SLIDING) keep = j <= diag;
          if (c->mask == RLX_MASK_SLIDING) keep = keep && j > diag - c->window;
          if (c->mask == RLX_MASK_CUSTOM) keep = mask_at(c, m, b, h, i, j) > 0.5;
          if (c->mask == RLX_MASK_BIAS) sc += mask_at(c, m, b, h, i, j);
          s[j] = keep ? sc : -INFINITY;
          if (s[j] > best) best = s[j];
        }
        double total = 0;
        for (int64_t j = 0; j < c->Sk; j++) {
          s[j] = best == -INFINITY ? 0 : exp(s[j] - best);
          total += s[j];
        }
        for (int64_t d = 0; d < c->D; d++) {
          double acc = 0;
          for (int64_t j = 0; j < c->Sk; j++)
            acc += s[j] * seen(v, at4(c->layout, c->Sk, c->Hkv, c->D, b, j, kh, d));
          out[at4(c->layout, c->Sq, c->H, c->D, b, i, h, d)] = total > 0 ? acc / total : 0;
        }
      }
  free(s);
}

static void check_attention(const attn_case* c) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  int64_t qs[4], ks[4];
  shape4(c->layout, c->B, c->Sq, c->H, c->D, qs);
  shape4(c->layout, c->B, c->Sk, c->Hkv, c->D, ks);
  feed_in ins[4];
  int n_in = 3;
  ins[0] = make_in("q", RLX_F32, 4, qs);
  ins[1] = make_in("k", RLX_F32, 4, ks);
  ins[2] = make_in("v", RLX_F32, 4, ks);
  if (c->mask == RLX_MASK_CUSTOM || c->mask == RLX_MASK_BIAS) {
    ins[n_in++] = make_in("mask", c->m_dtype, c->m_rank, c->m_shape);
    /* Custom keep-masks: mostly kept, with some fully masked rows likely. */
    if (c->mask == RLX_MASK_CUSTOM)
      for (int64_t i = 0; i < numel_of(c->m_shape, c->m_rank); i++)
        ins[3].data[i] = test_rand_uniform(0, 1) < 0.7 ? 1.0f : 0.0f;
    else
      test_fill_f32(ins[3].data, numel_of(c->m_shape, c->m_rank), -2.0, 2.0);
  }
  rlx_tensor t[4], y;
  for (int i = 0; i < n_in; i++) CHECK_OK_G(g, add_input(g, &ins[i], &t[i]));
  rlx_attention_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.num_heads = (int32_t)c->H;
  desc.num_kv_heads = (int32_t)c->Hkv;
  desc.head_dim = (int32_t)c->D;
  desc.layout = c->layout;
  desc.mask = c->mask;
  desc.window = c->window;
  desc.score_scale = c->scale;
  desc.softcap = c->softcap;
  CHECK_OK_G(g, rlx_graph_add_attention(g, t[0], t[1], t[2], n_in > 3 ? t[3] : RLX_NONE, &desc, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  CHECK_MSG(compile_and_run(g, ins, n_in, &e) == RLX_OK, "%s", exec_or_graph_error(g, e));
  int64_t n = numel_of(qs, 4);
  double* got = read_output(e, 0, n);
  double* want = malloc((size_t)n * sizeof *want);
  CHECK(got && want);
  naive_attention(c, &ins[0], &ins[1], &ins[2], n_in > 3 ? &ins[3] : NULL, want);
  double err = test_rel_l2(got, want, n);
  CHECK_MSG(err <= 1e-5, "attention layout=%d mask=%d H=%lld Hkv=%lld Sq=%lld Sk=%lld: rel err %g",
            c->layout, c->mask, (long long)c->H, (long long)c->Hkv, (long long)c->Sq,
            (long long)c->Sk, err);
  free(got);
  free(want);
  free_ins(ins, n_in);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

static attn_case attn(int64_t B, int64_t H, int64_t Hkv, int64_t Sq, int64_t Sk, int64_t D,
                      rlx_layout layout, rlx_mask_kind mask) {
  attn_case c;
  memset(&c, 0, sizeof c);
  c.B = B, c.H = H, c.Hkv = Hkv, c.Sq = Sq, c.Sk = Sk, c.D = D;
  c.layout = layout;
  c.mask = mask;
  c.m_dtype = RLX_F32;
  return c;
}

TEST(attention_layouts_and_gqa) {
  test_seed(8);
  for (int l = 0; l < 2; l++) {
    rlx_layout lay = (rlx_layout)l;
    attn_case plain = attn(2, 3, 3, 5, 5, 8, lay, RLX_MASK_NONE);
    check_attention(&plain);
    attn_case gqa = attn(2, 4, 2, 3, 7, 6, lay, RLX_MASK_CAUSAL);
    check_attention(&gqa);
    attn_case mqa = attn(1, 4, 1, 4, 6, 5, lay, RLX_MASK_NONE);
    check_attention(&mqa);
    attn_case one = attn(1, 1, 1, 1, 1, 1, lay, RLX_MASK_CAUSAL);
    check_attention(&one);
  }
}

TEST(attention_masks) {
  test_seed(9);
  for (int l = 0; l < 2; l++) {
    rlx_layout lay = (rlx_layout)l;
    attn_case causal = attn(2, 2, 2, 6, 6, 4, lay, RLX_MASK_CAUSAL);
    check_attention(&causal);
    attn_case decode = attn(2, 4, 2, 1, 9, 4, lay, RLX_MASK_CAUSAL);
    check_attention(&decode);
    /* Sq > Sk: the first queries see no key at all and must output zeros. */
    attn_case more_q = attn(1, 2, 2, 5, 3, 4, lay, RLX_MASK_CAUSAL);
    check_attention(&more_q);
    attn_case slide = attn(2, 2, 1, 6, 9, 4, lay, RLX_MASK_SLIDING);
    slide.window = 3;
    check_attention(&slide);
    attn_case custom = attn(2, 3, 3, 4, 5, 4, lay, RLX_MASK_CUSTOM);
    custom.m_rank = 2, custom.m_shape[0] = 4, custom.m_shape[1] = 5; /* over B and H */
    check_attention(&custom);
    attn_case custom_b = attn(2, 3, 1, 4, 5, 4, lay, RLX_MASK_CUSTOM);
    custom_b.m_rank = 4;
    int64_t ms[4] = {2, 1, 4, 5};
    memcpy(custom_b.m_shape, ms, sizeof ms);
    custom_b.m_dtype = RLX_BOOL;
    check_attention(&custom_b);
    attn_case bias = attn(2, 3, 3, 4, 6, 4, lay, RLX_MASK_BIAS);
    bias.m_rank = 4;
    int64_t bs[4] = {1, 3, 4, 6};
    memcpy(bias.m_shape, bs, sizeof bs);
    check_attention(&bias);
  }
}

TEST(attention_scale_and_softcap) {
  test_seed(10);
  attn_case sc = attn(2, 2, 2, 3, 4, 16, RLX_LAYOUT_BSHD, RLX_MASK_NONE);
  sc.scale = 2.5f; /* large enough that the default scale would differ visibly */
  check_attention(&sc);
  attn_case cap = attn(1, 4, 2, 5, 5, 8, RLX_LAYOUT_BHSD, RLX_MASK_CAUSAL);
  cap.scale = 3.0f;
  cap.softcap = 1.5f;
  check_attention(&cap);
  attn_case cap_bias = attn(1, 2, 2, 3, 3, 8, RLX_LAYOUT_BSHD, RLX_MASK_BIAS);
  cap_bias.softcap = 0.5f;
  cap_bias.m_rank = 2, cap_bias.m_shape[0] = 3, cap_bias.m_shape[1] = 3;
  check_attention(&cap_bias);
}

/* ------------------------------------------------------------------ rope */

typedef struct rope_case {
  int64_t B, S, H, D;
  int32_t n_rot;
  rlx_rope_style style;
  rlx_layout layout;
  int per_token;
} rope_case;

static void naive_rope(const rope_case* c, const feed_in* x, const feed_in* cs, const feed_in* sn,
                       double* out) {
  int64_t half = c->n_rot / 2;
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t s = 0; s < c->S; s++)
      for (int64_t h = 0; h < c->H; h++) {
        int64_t row = c->per_token ? b * c->S + s : s;
        int64_t base = at4(c->layout, c->S, c->H, c->D, b, s, h, 0);
        for (int64_t d = c->n_rot; d < c->D; d++) out[base + d] = seen(x, base + d);
        for (int64_t i = 0; i < half; i++) {
          int64_t a = c->style == RLX_ROPE_NEOX ? i : 2 * i;
          int64_t z = c->style == RLX_ROPE_NEOX ? i + half : 2 * i + 1;
          double co = seen(cs, row * half + i), si = seen(sn, row * half + i);
          out[base + a] = seen(x, base + a) * co - seen(x, base + z) * si;
          out[base + z] = seen(x, base + z) * co + seen(x, base + a) * si;
        }
      }
}

static void check_rope(const rope_case* c) {
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  int64_t xs[4], ts[2] = {c->per_token ? c->B * c->S : c->S, c->n_rot / 2};
  shape4(c->layout, c->B, c->S, c->H, c->D, xs);
  feed_in ins[3];
  ins[0] = make_in("x", RLX_F32, 4, xs);
  ins[1] = make_in("cos", RLX_F32, 2, ts);
  ins[2] = make_in("sin", RLX_F32, 2, ts);
  rlx_tensor t[3], y;
  for (int i = 0; i < 3; i++) CHECK_OK_G(g, add_input(g, &ins[i], &t[i]));
  CHECK_OK_G(g, rlx_graph_add_rope(g, t[0], t[1], t[2], (int32_t)c->D, c->n_rot, c->style,
                                   c->layout, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  CHECK_MSG(compile_and_run(g, ins, 3, &e) == RLX_OK, "%s", exec_or_graph_error(g, e));
  int64_t n = numel_of(xs, 4);
  double* got = read_output(e, 0, n);
  double* want = malloc((size_t)n * sizeof *want);
  CHECK(got && want);
  naive_rope(c, &ins[0], &ins[1], &ins[2], want);
  double err = test_rel_l2(got, want, n);
  CHECK_MSG(err <= 1e-6, "rope style=%d layout=%d n_rot=%d per_token=%d: rel err %g", c->style,
            c->layout, c->n_rot, c->per_token, err);
  free(got);
  free(want);
  free_ins(ins, 3);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

TEST(rope_styles_partial_per_token) {
  test_seed(11);
  for (int st = 0; st < 2; st++)
    for (int l = 0; l < 2; l++) {
      rope_case full = {2, 5, 3, 8, 8, (rlx_rope_style)st, (rlx_layout)l, 0};
      check_rope(&full);
      rope_case partial = {2, 4, 2, 10, 6, (rlx_rope_style)st, (rlx_layout)l, 0};
      check_rope(&partial);
      rope_case per_tok = {3, 4, 2, 6, 4, (rlx_rope_style)st, (rlx_layout)l, 1};
      check_rope(&per_tok);
      rope_case two = {1, 3, 1, 5, 2, (rlx_rope_style)st, (rlx_layout)l, 0};
      check_rope(&two);
    }
}

/* ------------------------------------------------------------------ sample */

typedef struct sampler {
  rlx_graph* g;
  rlx_exec* e;
  feed_in in;
  int64_t rows, vocab;
} sampler;

static rlx_status sampler_open(sampler* s, int64_t rows, int64_t vocab, int32_t top_k,
                               float top_p, float temperature) {
  memset(s, 0, sizeof *s);
  int64_t shape[2] = {rows, vocab};
  s->rows = rows, s->vocab = vocab;
  s->in = make_in("logits", RLX_F32, 2, shape);
  test_fill_f32(s->in.data, rows * vocab, -3.0, 3.0);
  TRY(rlx_graph_create(&s->g));
  rlx_tensor x, y;
  TRY(add_input(s->g, &s->in, &x));
  TRY(rlx_graph_add_sample(s->g, x, top_k, top_p, temperature, &y));
  TRY(rlx_graph_set_outputs(s->g, &y, 1));
  return compile_ref(s->g, &s->e);
}

static void sampler_close(sampler* s) {
  rlx_exec_destroy(s->e);
  rlx_graph_destroy(s->g);
  free(s->in.data);
}

/* Runs once with `seed` (after a poison run) into tokens[rows]. */
static rlx_status sampler_run(sampler* s, uint64_t seed, int64_t* tokens) {
  TRY(rlx_exec_set_seed(s->e, seed ^ 0x5a5a));
  TRY(run_with(s->e, &s->in, 1, 1));
  for (int64_t r = 0; r < s->rows; r++) tokens[r] = -7;
  TRY(rlx_exec_set_seed(s->e, seed));
  TRY(run_with(s->e, &s->in, 1, 0));
  return rlx_exec_read_output(s->e, 0, RLX_I64, tokens, (size_t)s->rows * sizeof *tokens);
}

static int64_t argmax_ref(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

static void check_argmax_like(int32_t top_k, float top_p, float temperature) {
  sampler s;
  CHECK_MSG(sampler_open(&s, 9, 37, top_k, top_p, temperature) == RLX_OK, "%s",
            exec_or_graph_error(s.g, s.e));
  int64_t tok[9];
  for (uint64_t seed = 1; seed <= 3; seed++) {
    CHECK_MSG(sampler_run(&s, seed, tok) == RLX_OK, "%s", rlx_exec_last_error(s.e));
    for (int64_t r = 0; r < 9; r++)
      CHECK_MSG(tok[r] == argmax_ref(s.in.data + r * 37, 37),
                "top_k=%d top_p=%g T=%g row %lld: got %lld", top_k, top_p, temperature,
                (long long)r, (long long)tok[r]);
  }
  sampler_close(&s);
}

TEST(sample_greedy_paths) {
  test_seed(12);
  check_argmax_like(0, 1.0f, 0.0f);   /* temperature 0: greedy */
  check_argmax_like(5, 0.9f, -1.0f);  /* negative temperature: greedy */
  check_argmax_like(1, 1.0f, 2.0f);   /* top_k 1 at any temperature */
  check_argmax_like(1, 1.0f, 0.3f);
  check_argmax_like(0, 1e-6f, 1.5f);  /* tiny nucleus keeps only the top token */
}

TEST(sample_seeds) {
  test_seed(13);
  sampler s;
  CHECK_MSG(sampler_open(&s, 64, 11, 0, 1.0f, 1.0f) == RLX_OK, "%s", exec_or_graph_error(s.g, s.e));
  int64_t a[64], b[64], c[64];
  CHECK(sampler_run(&s, 42, a) == RLX_OK);
  CHECK(sampler_run(&s, 42, b) == RLX_OK);
  CHECK(sampler_run(&s, 43, c) == RLX_OK);
  int differ = 0;
  for (int i = 0; i < 64; i++) {
    CHECK(a[i] == b[i]);
    CHECK(a[i] >= 0 && a[i] < 11);
    differ += a[i] != c[i];
  }
  CHECK_MSG(differ > 5, "seeds 42 and 43 gave %d differing tokens of 64", differ);
  sampler_close(&s);
}

/* Expected probabilities of each token under (top_k, top_p, temperature),
 * computed here independently of the kernel. */
static void sample_probs(const float* logits, int64_t v, int32_t top_k, double top_p, double temp,
                         double* prob) {
  int64_t* order = malloc((size_t)v * sizeof *order);
  double total = 0, mx = -INFINITY;
  for (int64_t i = 0; i < v; i++) mx = fmax(mx, logits[i] / temp);
  for (int64_t i = 0; i < v; i++) prob[i] = exp(logits[i] / temp - mx);
  /* Selection sort by descending probability (ties: lower index first). */
  for (int64_t i = 0; i < v; i++) order[i] = i;
  for (int64_t i = 0; i < v; i++)
    for (int64_t j = i + 1; j < v; j++)
      if (prob[order[j]] > prob[order[i]]) {
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
      }
  int64_t keep = top_k > 0 && top_k < v ? top_k : v;
  for (int64_t i = 0; i < keep; i++) total += prob[order[i]];
  double cum = 0;
  int64_t n = 0;
  while (n < keep && cum < top_p * total) cum += prob[order[n++]];
  for (int64_t i = 0; i < v; i++) {
    int in_set = 0;
    for (int64_t j = 0; j < n; j++) in_set |= order[j] == i;
    prob[i] = in_set ? prob[i] / cum : 0;
  }
  free(order);
}

/* Many identical rows: each row is an independent draw, so the token counts
 * must follow the distribution (Pearson chi-square, generous bound), and
 * tokens outside the kept set never appear. */
static void check_distribution(int32_t top_k, float top_p, float temperature) {
  enum { ROWS = 6000, V = 7 };
  sampler s;
  CHECK_MSG(sampler_open(&s, ROWS, V, top_k, top_p, temperature) == RLX_OK, "%s",
            exec_or_graph_error(s.g, s.e));
  float row0[V] = {0.3f, -1.2f, 1.1f, 0.9f, -0.4f, 1.6f, 0.05f};
  for (int64_t r = 0; r < ROWS; r++) memcpy(s.in.data + r * V, row0, sizeof row0);
  int64_t* tok = malloc(ROWS * sizeof *tok);
  CHECK(tok);
  double prob[V], count[V] = {0};
  sample_probs(row0, V, top_k, top_p, temperature, prob);
  CHECK_MSG(sampler_run(&s, 7, tok) == RLX_OK, "%s", rlx_exec_last_error(s.e));
  for (int64_t r = 0; r < ROWS; r++) {
    CHECK_MSG(tok[r] >= 0 && tok[r] < V && prob[tok[r]] > 0, "row %lld: token %lld not allowed",
              (long long)r, (long long)tok[r]);
    count[tok[r]] += 1;
  }
  double chi2 = 0;
  int dof = -1;
  for (int i = 0; i < V; i++)
    if (prob[i] > 0) {
      double expct = prob[i] * ROWS;
      chi2 += (count[i] - expct) * (count[i] - expct) / expct;
      dof++;
    }
  /* With <= 6 degrees of freedom, chi2 > 30 has probability < 1e-4. */
  CHECK_MSG(chi2 < 30.0, "top_k=%d top_p=%g T=%g: chi2 %.2f (dof %d)", top_k, top_p, temperature,
            chi2, dof);
  free(tok);
  sampler_close(&s);
}

/* One row drawn under many seeds: the per-run seed alone must give draws
 * that follow the distribution. */
static void check_distribution_over_seeds(int32_t top_k, float top_p, float temperature) {
  enum { RUNS = 1500, V = 5 };
  sampler s;
  CHECK_MSG(sampler_open(&s, 1, V, top_k, top_p, temperature) == RLX_OK, "%s",
            exec_or_graph_error(s.g, s.e));
  float row0[V] = {0.2f, 1.0f, -0.5f, 0.8f, 0.4f};
  memcpy(s.in.data, row0, sizeof row0);
  double prob[V], count[V] = {0};
  sample_probs(row0, V, top_k, top_p, temperature, prob);
  CHECK(set_input(s.e, &s.in, 0) == RLX_OK);
  for (uint64_t seed = 0; seed < RUNS; seed++) {
    int64_t tok = -1;
    CHECK(rlx_exec_set_seed(s.e, seed * 7919 + 3) == RLX_OK);
    CHECK_MSG(rlx_exec_run(s.e) == RLX_OK, "%s", rlx_exec_last_error(s.e));
    CHECK(rlx_exec_read_output(s.e, 0, RLX_I64, &tok, sizeof tok) == RLX_OK);
    CHECK_MSG(tok >= 0 && tok < V && prob[tok] > 0, "seed %llu: token %lld not allowed",
              (unsigned long long)seed, (long long)tok);
    count[tok] += 1;
  }
  double chi2 = 0;
  for (int i = 0; i < V; i++)
    if (prob[i] > 0) chi2 += (count[i] - prob[i] * RUNS) * (count[i] - prob[i] * RUNS) / (prob[i] * RUNS);
  CHECK_MSG(chi2 < 30.0, "over seeds, top_k=%d top_p=%g T=%g: chi2 %.2f", top_k, top_p,
            temperature, chi2);
  sampler_close(&s);
}

TEST(sample_distribution) {
  test_seed(14);
  check_distribution(0, 1.0f, 1.0f);
  check_distribution(0, 1.0f, 0.7f);
  check_distribution(3, 1.0f, 1.3f);
  check_distribution(0, 0.75f, 1.0f);
  check_distribution(4, 0.8f, 2.0f);
  check_distribution_over_seeds(0, 1.0f, 1.0f);
  check_distribution_over_seeds(3, 0.9f, 0.8f);
}

/* Rank-1 logits give a rank-0 token. */
TEST(sample_single_row) {
  test_seed(16);
  rlx_graph* g = NULL;
  rlx_exec* e = NULL;
  CHECK_OK_G(g, rlx_graph_create(&g));
  int64_t v = 23;
  feed_in in = make_in("logits", RLX_F32, 1, &v);
  rlx_tensor x, y;
  CHECK_OK_G(g, add_input(g, &in, &x));
  CHECK_OK_G(g, rlx_graph_add_sample(g, x, 0, 1.0f, 0.0f, &y));
  CHECK_OK_G(g, rlx_graph_set_outputs(g, &y, 1));
  CHECK_MSG(compile_and_run(g, &in, 1, &e) == RLX_OK, "%s", exec_or_graph_error(g, e));
  int64_t tok = -1;
  CHECK_OK_E(e, rlx_exec_read_output(e, 0, RLX_I64, &tok, sizeof tok));
  CHECK(tok == argmax_ref(in.data, v));
  free(in.data);
  rlx_exec_destroy(e);
  rlx_graph_destroy(g);
}

int main(void) {
  RUN(matmul_plain_and_transposed);
  RUN(matmul_broadcast_batch);
  RUN(matmul_bias_every_activation);
  RUN(matmul_half_dtypes);
  RUN(layer_norm_axes_and_affine);
  RUN(rms_norm);
  RUN(fused_residual_norms);
  RUN(fused_residual_norm_normalises_stored_sum);
  RUN(attention_layouts_and_gqa);
  RUN(attention_masks);
  RUN(attention_scale_and_softcap);
  RUN(rope_styles_partial_per_token);
  RUN(sample_greedy_paths);
  RUN(sample_seeds);
  RUN(sample_distribution);
  RUN(sample_single_row);
  return test_summary();
}
