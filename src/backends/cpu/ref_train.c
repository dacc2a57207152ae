/* CPU reference of the training kernels (RLX_K_XENT, RLX_K_GATHER_BACKWARD,
 * RLX_K_OPT_UPDATE): double math, every sum in position order, the
 * semantics of PyTorch's F.cross_entropy, torch.optim.SGD and Adam / AdamW
 * (include/rlx.h says which). Indices are all checked before anything is
 * written, so a bad index leaves the outputs untouched. */
#include "backends/cpu/cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/dtype.h"

static uint8_t* base_of(uint8_t* arena, const rlx_view* v) { return arena + v->offset; }

static const char* node_name(const rlx_step* s, const rlx_run_ctx* ctx, char* buf, size_t cap) {
  if (ctx && ctx->graph && s->node >= 0 && s->node < ctx->graph->n_nodes)
    return rlx_node_str(ctx->graph, s->node, buf, cap);
  snprintf(buf, cap, "node %d", s->node);
  return buf;
}

static rlx_status index_error(const rlx_step* s, const rlx_run_ctx* ctx, rlx_error* err,
                              const char* what, int64_t raw, int64_t len) {
  char buf[128];
  return rlx_fail(err, RLX_OUT_OF_RANGE, "%s: %s %s %lld out of range for an axis of size %lld",
                  node_name(s, ctx, buf, sizeof buf), rlx_kernel_name(s->kernel), what,
                  (long long)raw, (long long)len);
}

/* ------------------------------------------------------------------ cross-entropy */

/* Counted rows; fails on a target outside [0, vocab) that is not ignored. */
static rlx_status count_targets(const uint8_t* t, rlx_dtype tt, const rlx_xent_params* p,
                                const rlx_step* s, const rlx_run_ctx* ctx, rlx_error* err,
                                int64_t* count) {
  *count = 0;
  for (int64_t r = 0; r < p->rows; r++) {
    int64_t v = rlx_load_i64(t, tt, r);
    if (v == p->ignore_index) continue;
    if (v < 0 || v >= p->vocab) return index_error(s, ctx, err, "target", v, p->vocab);
    (*count)++;
  }
  return RLX_OK;
}

/* log(sum(exp(x))) of row r, and the row's mean. */
static double row_lse(const uint8_t* x, rlx_dtype xt, int64_t r, int64_t V, double* mean) {
  double mx = -INFINITY, sum = 0.0, total = 0.0;
  for (int64_t j = 0; j < V; j++) {
    double v = rlx_load_f64(x, xt, r * V + j);
    if (v > mx || isnan(v)) mx = v;
    total += v;
  }
  for (int64_t j = 0; j < V; j++) sum += exp(rlx_load_f64(x, xt, r * V + j) - mx);
  *mean = total / (double)V;
  return mx + log(sum);
}

static rlx_status run_xent_rows(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                rlx_error* err) {
  const rlx_xent_params* p = &s->p.xent;
  const uint8_t *x = base_of(arena, &s->in[0]), *t = base_of(arena, &s->in[1]);
  uint8_t* o = base_of(arena, &s->out[0]);
  int64_t count;
  RLX_RETURN_IF_ERROR(count_targets(t, s->in[1].dtype, p, s, ctx, err, &count));
  double ls = p->label_smoothing;
  for (int64_t r = 0; r < p->rows; r++) {
    int64_t v = rlx_load_i64(t, s->in[1].dtype, r);
    double loss = 0.0, counted = 0.0;
    if (v != p->ignore_index) {
      double mean, lse = row_lse(x, s->in[0].dtype, r, p->vocab, &mean);
      double picked = rlx_load_f64(x, s->in[0].dtype, r * p->vocab + v);
      loss = (1.0 - ls) * (lse - picked) + (ls != 0.0 ? ls * (lse - mean) : 0.0);
      counted = 1.0;
    }
    rlx_store_f64(o, s->out[0].dtype, 2 * r, loss);
    rlx_store_f64(o, s->out[0].dtype, 2 * r + 1, counted);
  }
  return RLX_OK;
}

static void run_xent_mean(uint8_t* arena, const rlx_step* s) {
  const uint8_t* part = base_of(arena, &s->in[0]);
  double loss = 0.0, count = 0.0;
  for (int64_t r = 0; r < s->p.xent.rows; r++) {
    loss += rlx_load_f64(part, s->in[0].dtype, 2 * r);
    count += rlx_load_f64(part, s->in[0].dtype, 2 * r + 1);
  }
  rlx_store_f64(base_of(arena, &s->out[0]), s->out[0].dtype, 0, loss / count); /* 0/0: NaN */
}

static rlx_status run_xent_backward(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                    rlx_error* err) {
  const rlx_xent_params* p = &s->p.xent;
  const uint8_t *x = base_of(arena, &s->in[0]), *t = base_of(arena, &s->in[1]);
  uint8_t* o = base_of(arena, &s->out[0]);
  rlx_dtype xt = s->in[0].dtype, ot = s->out[0].dtype;
  int64_t count, V = p->vocab;
  RLX_RETURN_IF_ERROR(count_targets(t, s->in[1].dtype, p, s, ctx, err, &count));
  double scale = rlx_load_f64(base_of(arena, &s->in[2]), s->in[2].dtype, 0) / (double)count;
  double ls = p->label_smoothing;
  for (int64_t r = 0; r < p->rows; r++) {
    int64_t v = rlx_load_i64(t, s->in[1].dtype, r);
    if (v == p->ignore_index) {
      for (int64_t j = 0; j < V; j++) rlx_store_f64(o, ot, r * V + j, 0.0);
      continue;
    }
    double mean, lse = row_lse(x, xt, r, V, &mean);
    for (int64_t j = 0; j < V; j++) {
      double soft = exp(rlx_load_f64(x, xt, r * V + j) - lse);
      double target = ls / (double)V + (j == v ? 1.0 - ls : 0.0);
      rlx_store_f64(o, ot, r * V + j, scale * (soft - target));
    }
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ gather backward */

/* Positions grouped by the row they gathered, in position order (a
 * counting sort): first[a] .. first[a + 1] index into order[]. */
static rlx_status bucket_indices(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                 rlx_error* err, int64_t* first, int64_t* order) {
  const rlx_gather_params* p = &s->p.gather;
  const uint8_t* idx = base_of(arena, &s->in[1]);
  for (int64_t a = 0; a <= p->axis_len; a++) first[a] = 0;
  for (int64_t q = 0; q < p->n_idx; q++) {
    int64_t raw = rlx_load_i64(idx, s->in[1].dtype, q);
    int64_t v = raw < 0 ? raw + p->axis_len : raw;
    if (v < 0 || v >= p->axis_len) return index_error(s, ctx, err, "index", raw, p->axis_len);
    first[v + 1]++;
  }
  for (int64_t a = 0; a < p->axis_len; a++) first[a + 1] += first[a];
  int64_t* fill = order + p->n_idx; /* scratch: next free slot per row */
  for (int64_t a = 0; a < p->axis_len; a++) fill[a] = first[a];
  for (int64_t q = 0; q < p->n_idx; q++) {
    int64_t raw = rlx_load_i64(idx, s->in[1].dtype, q);
    int64_t v = raw < 0 ? raw + p->axis_len : raw;
    order[fill[v]++] = q;
  }
  return RLX_OK;
}

static rlx_status run_gather_backward(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                      rlx_error* err) {
  const rlx_gather_params* p = &s->p.gather;
  int64_t* first = malloc(sizeof(int64_t) * (size_t)(p->axis_len + 1));
  int64_t* order = malloc(sizeof(int64_t) * (size_t)(p->n_idx + p->axis_len + 1));
  double* acc = malloc(sizeof(double) * (size_t)(p->inner > 0 ? p->inner : 1));
  rlx_status st = first && order && acc ? bucket_indices(arena, s, ctx, err, first, order)
                                        : rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory");
  const uint8_t* dy = base_of(arena, &s->in[0]);
  uint8_t* dx = base_of(arena, &s->out[0]);
  for (int64_t o = 0; st == RLX_OK && o < p->outer; o++) {
    for (int64_t a = 0; a < p->axis_len; a++) {
      for (int64_t i = 0; i < p->inner; i++) acc[i] = 0.0;
      for (int64_t k = first[a]; k < first[a + 1]; k++)
        for (int64_t i = 0; i < p->inner; i++)
          acc[i] += rlx_load_f64(dy, s->in[0].dtype, (o * p->n_idx + order[k]) * p->inner + i);
      for (int64_t i = 0; i < p->inner; i++)
        rlx_store_f64(dx, s->out[0].dtype, (o * p->axis_len + a) * p->inner + i, acc[i]);
    }
  }
  free(first);
  free(order);
  free(acc);
  return st;
}

/* ------------------------------------------------------------------ optimizer updates */

typedef struct update_io {
  const uint8_t* in[RLX_STEP_MAX_IN];
  uint8_t* out[RLX_STEP_MAX_OUT];
} update_io;

static double load(const update_io* io, const rlx_step* s, int32_t i, int64_t e) {
  return rlx_load_f64(io->in[i], s->in[i].dtype, e);
}

static void store(const update_io* io, const rlx_step* s, int32_t i, int64_t e, double v) {
  rlx_store_f64(io->out[i], s->out[i].dtype, e, v);
}

/* PyTorch's SGD for element e (buf = g at step 1). */
static void sgd_element(const update_io* io, const rlx_step* s, const float* h, int64_t e) {
  const rlx_opt_params* p = &s->p.opt;
  double w = load(io, s, 0, e), g = load(io, s, 1, e) * h[RLX_HYPER_GRAD_SCALE];
  double buf = p->has_buf ? load(io, s, 2, e) : 0.0;
  if (p->weight_decay != 0.0f) g += (double)p->weight_decay * w;
  if (p->momentum != 0.0f) {
    buf = h[RLX_HYPER_STEP] <= 1.0f ? g : p->momentum * buf + (1.0 - p->dampening) * g;
    g = p->nesterov ? g + (double)p->momentum * buf : buf;
  }
  store(io, s, 0, e, w - (double)h[RLX_HYPER_LR] * g);
  if (p->has_buf) store(io, s, 1, e, buf);
}

/* PyTorch's Adam / AdamW for element e, bias correction from hyper[STEP]. */
static void adam_element(const update_io* io, const rlx_step* s, const float* h, int64_t e) {
  const rlx_opt_params* p = &s->p.opt;
  double w = load(io, s, 0, e), g = load(io, s, 1, e) * h[RLX_HYPER_GRAD_SCALE];
  double m = load(io, s, 2, e), v = load(io, s, 3, e), lr = h[RLX_HYPER_LR];
  double b1 = p->beta1, b2 = p->beta2, t = h[RLX_HYPER_STEP];
  if (p->decoupled) w *= 1.0 - lr * p->weight_decay;
  else g += (double)p->weight_decay * w;
  m = b1 * m + (1.0 - b1) * g;
  v = b2 * v + (1.0 - b2) * g * g;
  double m_hat = m / (1.0 - pow(b1, t)), v_hat = v / (1.0 - pow(b2, t));
  store(io, s, 0, e, w - lr * m_hat / (sqrt(v_hat) + p->eps));
  store(io, s, 1, e, m);
  store(io, s, 2, e, v);
}

/* APPLY == 0: every output is its input (for SGD the buffer is in2). */
static void pass_through(const update_io* io, const rlx_step* s, int64_t e) {
  for (int32_t k = 0; k < s->n_out; k++) store(io, s, k, e, load(io, s, k == 0 ? 0 : k + 1, e));
}

static void run_update(uint8_t* arena, const rlx_step* s) {
  update_io io;
  for (int32_t i = 0; i < s->n_in; i++)
    io.in[i] = s->in[i].rank >= 0 ? base_of(arena, &s->in[i]) : NULL;
  for (int32_t i = 0; i < s->n_out; i++) io.out[i] = base_of(arena, &s->out[i]);
  int32_t hyper_slot = s->op == RLX_OPT_SGD ? 3 : 4;
  float h[RLX_HYPER_COUNT];
  for (int32_t k = 0; k < RLX_HYPER_COUNT; k++)
    h[k] = (float)rlx_load_f64(io.in[hyper_slot], RLX_F32, k);
  for (int64_t e = 0; e < s->p.opt.n; e++) {
    if (h[RLX_HYPER_APPLY] == 0.0f) pass_through(&io, s, e);
    else if (s->op == RLX_OPT_SGD) sgd_element(&io, s, h, e);
    else adam_element(&io, s, h, e);
  }
}

/* ------------------------------------------------------------------ dispatch */

rlx_status rlx_ref_train(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                         rlx_error* err) {
  switch (s->kernel) {
    case RLX_K_XENT:
      if (s->op == RLX_XENT_ROWS) return run_xent_rows(arena, s, ctx, err);
      if (s->op == RLX_XENT_BACKWARD) return run_xent_backward(arena, s, ctx, err);
      run_xent_mean(arena, s);
      return RLX_OK;
    case RLX_K_GATHER_BACKWARD: return run_gather_backward(arena, s, ctx, err);
    case RLX_K_OPT_UPDATE: run_update(arena, s); return RLX_OK;
    default:
      return rlx_fail(err, RLX_INTERNAL, "reference: step kind %s (node %d) is not a training kernel",
                      rlx_kernel_name(s->kernel), s->node);
  }
}
