/* CPU reference of the row-wise backward kinds (kernels.def: NORM_BWD,
 * SOFTMAX_BWD). Like the rest of the oracle: plain loops, every element
 * through rlx_load_f64 / rlx_store_f64, double accumulation, so f32, f16,
 * bf16 and f64 take one path (the gradient checks run it in f64). The
 * parameter gradients of the norms and the Rope / Cumsum backward reuse
 * the forward kinds (see lower_nn.c and lower.c). */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu.h"
#include "ir/dtype.h"

static double ld(const uint8_t* arena, const rlx_view* v, int64_t i) {
  return rlx_load_f64(arena + v->offset, v->dtype, i);
}
static void st(uint8_t* arena, const rlx_view* v, int64_t i, double x) {
  rlx_store_f64(arena + v->offset, v->dtype, i, x);
}

static rlx_status no_memory(const rlx_step* s, rlx_error* err) {
  return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "%s step of node %d: out of host memory",
                  rlx_kernel_name(s->kernel), s->node);
}

/* ------------------------------------------------------------------ norms */

enum { NB_X, NB_GAMMA, NB_DY };

/* Row r's mean (0 for RMS) and 1 / sqrt(variance or mean square + eps),
 * exactly as the forward computes them. */
static void norm_row_stats(const uint8_t* arena, const rlx_step* s, int64_t r, double* mean,
                           double* rstd) {
  const rlx_norm_params* p = &s->p.norm;
  double m = 0.0, ms = 0.0;
  if (!p->rms) {
    for (int64_t c = 0; c < p->cols; c++) m += ld(arena, &s->in[NB_X], r * p->cols + c);
    m /= (double)p->cols;
  }
  for (int64_t c = 0; c < p->cols; c++) {
    double d = ld(arena, &s->in[NB_X], r * p->cols + c) - m;
    ms += d * d;
  }
  *mean = m;
  *rstd = 1.0 / sqrt(ms / (double)p->cols + (double)p->eps);
}

/* dx = rstd * (g*dy - mean(g*dy) - xhat * mean(g*dy*xhat)); RMS drops the
 * mean(g*dy) term (no mean was subtracted in the forward). */
static void norm_bwd_row(uint8_t* arena, const rlx_step* s, int64_t r, double* xhat,
                         double* gdy) {
  const rlx_norm_params* p = &s->p.norm;
  double mean, rstd, sum_gdy = 0.0, sum_gdy_xhat = 0.0;
  norm_row_stats(arena, s, r, &mean, &rstd);
  for (int64_t c = 0; c < p->cols; c++) {
    int64_t i = r * p->cols + c;
    double g = p->has_gamma ? ld(arena, &s->in[NB_GAMMA], c) : 1.0;
    xhat[c] = (ld(arena, &s->in[NB_X], i) - mean) * rstd;
    gdy[c] = g * ld(arena, &s->in[NB_DY], i);
    sum_gdy += gdy[c];
    sum_gdy_xhat += gdy[c] * xhat[c];
  }
  double a = p->rms ? 0.0 : sum_gdy / (double)p->cols, b = sum_gdy_xhat / (double)p->cols;
  for (int64_t c = 0; c < p->cols; c++)
    st(arena, &s->out[0], r * p->cols + c, rstd * (gdy[c] - a - xhat[c] * b));
}

static rlx_status ref_norm_bwd(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  const rlx_norm_params* p = &s->p.norm;
  if (p->rows == 0 || p->cols == 0) return RLX_OK;
  double* buf = malloc((size_t)p->cols * 2 * sizeof *buf);
  if (!buf) return no_memory(s, err);
  for (int64_t r = 0; r < p->rows; r++) norm_bwd_row(arena, s, r, buf, buf + p->cols);
  free(buf);
  return RLX_OK;
}

/* ------------------------------------------------------------------ softmax */

static int64_t row_elem(const rlx_row_params* r, int64_t o, int64_t i, int64_t j) {
  return (o * r->n + i) * r->inner + j;
}

/* One row: softmax dx = y * (dy - sum(dy * y)); log-softmax dx = dy -
 * exp(y) * sum(dy). */
static void softmax_bwd_row(uint8_t* arena, const rlx_step* s, int64_t o, int64_t j) {
  const rlx_row_params* r = &s->p.rowop.row;
  const rlx_view *Y = &s->in[0], *DY = &s->in[1], *DX = &s->out[0];
  int log_softmax = s->op == 1;
  double acc = 0.0;
  for (int64_t i = 0; i < r->n; i++) {
    int64_t e = row_elem(r, o, i, j);
    double dy = ld(arena, DY, e);
    acc += log_softmax ? dy : dy * ld(arena, Y, e);
  }
  for (int64_t i = 0; i < r->n; i++) {
    int64_t e = row_elem(r, o, i, j);
    double y = ld(arena, Y, e), dy = ld(arena, DY, e);
    st(arena, DX, e, log_softmax ? dy - exp(y) * acc : y * (dy - acc));
  }
}

static rlx_status ref_softmax_bwd(uint8_t* arena, const rlx_step* s) {
  const rlx_row_params* r = &s->p.rowop.row;
  for (int64_t o = 0; o < r->outer; o++)
    for (int64_t j = 0; j < r->inner; j++) softmax_bwd_row(arena, s, o, j);
  return RLX_OK;
}

rlx_status rlx_ref_rows_backward(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                 rlx_error* err) {
  (void)ctx;
  switch (s->kernel) {
    case RLX_K_NORM_BWD: return ref_norm_bwd(arena, s, err);
    case RLX_K_SOFTMAX_BWD: return ref_softmax_bwd(arena, s);
    default:
      return rlx_fail(err, RLX_INTERNAL, "node %d: kernel %d is not a row backward kernel",
                      s->node, (int)s->kernel);
  }
}
