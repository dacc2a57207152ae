/* CPU fast path of the optimizer updates: f32 operands (the gradient may
 * also be bf16 / f16: mixed precision reads it unconverted), the elements
 * split across the thread pool. Each element is computed with the
 * reference's double formulas in the same order (ref_train.c), so the
 * result is the reference's, only sooner; other dtypes decline (0) and run
 * on the reference. */
#include "backends/cpu/cpu.h"
#include "ir/dtype.h"

#include <math.h>

typedef struct opt_job {
  const rlx_step* s;
  const float* in[RLX_STEP_MAX_IN]; /* the gradient's is NULL when it is a half */
  const uint16_t* half_grad;        /* else the bf16 / f16 gradient */
  rlx_dtype grad_dtype;
  float* out[RLX_STEP_MAX_OUT];
  float h[RLX_HYPER_COUNT];
} opt_job;

/* Gradient element e; widening a half is exact, so the reference's value. */
static double grad_at(const opt_job* j, int64_t e) {
  if (j->in[1]) return j->in[1][e];
  uint16_t h = j->half_grad[e];
  return j->grad_dtype == RLX_BF16 ? rlx_bf16_to_f32(h) : rlx_f16_to_f32(h);
}

static void sgd_range(const opt_job* j, int64_t begin, int64_t end) {
  const rlx_opt_params* p = &j->s->p.opt;
  const float* h = j->h;
  for (int64_t e = begin; e < end; e++) {
    double w = j->in[0][e], g = grad_at(j, e) * h[RLX_HYPER_GRAD_SCALE];
    double buf = p->has_buf ? j->in[2][e] : 0.0;
    if (p->weight_decay != 0.0f) g += (double)p->weight_decay * w;
    if (p->momentum != 0.0f) {
      buf = h[RLX_HYPER_STEP] <= 1.0f ? g : p->momentum * buf + (1.0 - p->dampening) * g;
      g = p->nesterov ? g + (double)p->momentum * buf : buf;
    }
    j->out[0][e] = (float)(w - (double)h[RLX_HYPER_LR] * g);
    if (p->has_buf) j->out[1][e] = (float)buf;
  }
}

static void adam_range(const opt_job* j, int64_t begin, int64_t end) {
  const rlx_opt_params* p = &j->s->p.opt;
  const float* h = j->h;
  double lr = h[RLX_HYPER_LR], b1 = p->beta1, b2 = p->beta2, t = h[RLX_HYPER_STEP];
  double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
  for (int64_t e = begin; e < end; e++) {
    double w = j->in[0][e], g = grad_at(j, e) * h[RLX_HYPER_GRAD_SCALE];
    double m = j->in[2][e], v = j->in[3][e];
    if (p->decoupled) w *= 1.0 - lr * p->weight_decay;
    else g += (double)p->weight_decay * w;
    m = b1 * m + (1.0 - b1) * g;
    v = b2 * v + (1.0 - b2) * g * g;
    j->out[0][e] = (float)(w - lr * (m / bc1) / (sqrt(v / bc2) + p->eps));
    j->out[1][e] = (float)m;
    j->out[2][e] = (float)v;
  }
}

/* APPLY 0: outputs are their inputs (the buffer / m / v from in2, in3). */
static void keep_range(const opt_job* j, int64_t begin, int64_t end) {
  for (int64_t e = begin; e < end; e++)
    for (int32_t k = 0; k < j->s->n_out; k++) j->out[k][e] = j->in[k == 0 ? 0 : k + 1][e];
}

static void opt_chunk(void* ctx, int64_t begin, int64_t end) {
  const opt_job* j = ctx;
  if (j->h[RLX_HYPER_APPLY] == 0.0f) keep_range(j, begin, end);
  else if (j->s->op == RLX_OPT_SGD) sgd_range(j, begin, end);
  else adam_range(j, begin, end);
}

int rlx_cpu_fast_opt_update(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  opt_job j;
  j.s = s;
  j.half_grad = NULL;
  j.grad_dtype = s->in[1].dtype;
  for (int32_t i = 0; i < s->n_in; i++) {
    j.in[i] = NULL;
    if (s->in[i].rank < 0) continue;
    if (i == 1 && (j.grad_dtype == RLX_BF16 || j.grad_dtype == RLX_F16)) {
      j.half_grad = (const uint16_t*)(arena + s->in[i].offset);
      continue;
    }
    if (s->in[i].dtype != RLX_F32) return 0;
    j.in[i] = (const float*)(arena + s->in[i].offset);
  }
  for (int32_t i = 0; i < s->n_out; i++) {
    if (s->out[i].dtype != RLX_F32) return 0;
    j.out[i] = (float*)(arena + s->out[i].offset);
  }
  const float* hyper = j.in[s->op == RLX_OPT_SGD ? 3 : 4];
  for (int32_t k = 0; k < RLX_HYPER_COUNT; k++) j.h[k] = hyper[k];
  rlx_cpu_parallel_for(f->pool, s->p.opt.n, 1 << 14, opt_chunk, &j);
  return 1;
}
