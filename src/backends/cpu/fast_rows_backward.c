/* CPU fast paths of the row-wise backward kinds (NORM_BWD, SOFTMAX_BWD) in
 * f32: rows spread over the thread pool, double sums per row (each row is
 * one task's, so the result does not depend on the thread count). The
 * reference (ref_rows_backward.c) is the oracle these are tested against
 * (test_parity's "cpu" device). Other dtypes decline. */
#include <math.h>

#include "backends/cpu/cpu.h"

typedef struct rows_bwd_job {
  const rlx_step* s;
  uint8_t* arena;
} rows_bwd_job;

static const float* in_f32(const rows_bwd_job* j, int32_t slot) {
  return (const float*)(j->arena + j->s->in[slot].offset);
}

/* dx of one LayerNorm / RmsNorm row (the formula of kernels.def). */
static void norm_bwd_row(const rlx_norm_params* p, const float* x, const float* gamma,
                         const float* dy, float* dx) {
  int64_t n = p->cols;
  double mean = 0.0, ss = 0.0;
  if (!p->rms) {
    for (int64_t c = 0; c < n; c++) mean += x[c];
    mean /= (double)n;
  }
  for (int64_t c = 0; c < n; c++) ss += ((double)x[c] - mean) * ((double)x[c] - mean);
  float rstd = (float)(1.0 / sqrt(ss / (double)n + (double)p->eps)), m = (float)mean;
  double sum_gdy = 0.0, sum_gdy_xhat = 0.0;
  for (int64_t c = 0; c < n; c++) {
    float gdy = (gamma ? gamma[c] : 1.0f) * dy[c];
    sum_gdy += gdy;
    sum_gdy_xhat += (double)gdy * (double)((x[c] - m) * rstd);
  }
  float a = p->rms ? 0.0f : (float)(sum_gdy / (double)n), b = (float)(sum_gdy_xhat / (double)n);
  for (int64_t c = 0; c < n; c++) {
    float gdy = (gamma ? gamma[c] : 1.0f) * dy[c];
    dx[c] = rstd * (gdy - a - (x[c] - m) * rstd * b);
  }
}

static void norm_bwd_range(void* ctx, int64_t begin, int64_t end) {
  const rows_bwd_job* j = ctx;
  const rlx_norm_params* p = &j->s->p.norm;
  const float *x = in_f32(j, 0), *dy = in_f32(j, 2);
  const float* gamma = p->has_gamma ? in_f32(j, 1) : NULL;
  float* dx = (float*)(j->arena + j->s->out[0].offset);
  for (int64_t r = begin; r < end; r++)
    norm_bwd_row(p, x + r * p->cols, gamma, dy + r * p->cols, dx + r * p->cols);
}

/* One (outer, inner) row of the softmax backward: elements `inner` apart. */
static void softmax_bwd_row(int op, const float* y, const float* dy, float* dx, int64_t n,
                            int64_t inner) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; i++)
    acc += op == 1 ? (double)dy[i * inner] : (double)dy[i * inner] * (double)y[i * inner];
  float a = (float)acc;
  for (int64_t i = 0; i < n; i++) {
    int64_t e = i * inner;
    dx[e] = op == 1 ? dy[e] - expf(y[e]) * a : y[e] * (dy[e] - a);
  }
}

static void softmax_bwd_range(void* ctx, int64_t begin, int64_t end) {
  const rows_bwd_job* j = ctx;
  const rlx_row_params* r = &j->s->p.rowop.row;
  const float *y = in_f32(j, 0), *dy = in_f32(j, 1);
  float* dx = (float*)(j->arena + j->s->out[0].offset);
  for (int64_t row = begin; row < end; row++) {
    int64_t o = row / r->inner, k = row % r->inner, base = o * r->n * r->inner + k;
    softmax_bwd_row(j->s->op, y + base, dy + base, dx + base, r->n, r->inner);
  }
}

/* Every present view f32, and the output apart from every input (rows are
 * written while other rows' inputs are still read). */
static int f32_and_apart(const rlx_step* s) {
  if (s->out[0].dtype != RLX_F32) return 0;
  rlx_range o = rlx_view_range(&s->out[0]);
  for (int32_t i = 0; i < s->n_in; i++) {
    if (s->in[i].rank < 0) continue;
    if (s->in[i].dtype != RLX_F32) return 0;
    rlx_range r = rlx_view_range(&s->in[i]);
    if (r.begin < o.end && o.begin < r.end) return 0;
  }
  return 1;
}

static int64_t grain_for(int64_t cols) {
  int64_t g = 16384 / (cols > 0 ? cols : 1);
  return g > 0 ? g : 1;
}

int rlx_cpu_fast_rows_backward(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  if (!f32_and_apart(s)) return 0;
  rows_bwd_job j = {s, arena};
  if (s->kernel == RLX_K_NORM_BWD) {
    const rlx_norm_params* p = &s->p.norm;
    if (p->rows < 0 || p->cols < 1) return 0;
    rlx_cpu_parallel_for(f->pool, p->rows, grain_for(p->cols), norm_bwd_range, &j);
    return 1;
  }
  if (s->kernel == RLX_K_SOFTMAX_BWD) {
    const rlx_row_params* r = &s->p.rowop.row;
    if ((s->op != 0 && s->op != 1) || r->n < 1 || r->inner < 1) return 0;
    rlx_cpu_parallel_for(f->pool, r->outer * r->inner, grain_for(r->n), softmax_bwd_range, &j);
    return 1;
  }
  return 0;
}
