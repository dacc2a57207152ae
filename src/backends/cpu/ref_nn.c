/* CPU reference kernels for matmul, norms, attention, RoPE and sampling.
 *
 * These are the oracle the other backends are tested against: plain loops,
 * double accumulation, every element read and written through
 * rlx_load_f64 / rlx_store_f64 so every float dtype takes the same path.
 * All geometry comes from the lowered step (lower_nn.c); nothing here looks
 * at the IR. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "base/scalar_math.h"
#include "ir/dtype.h"

/* Element i (relative to the view's element [0,...,0]) of a view. */
static double ld(uint8_t* arena, const rlx_view* v, int64_t i) {
  return rlx_load_f64(arena + v->offset, v->dtype, i);
}
static void st(uint8_t* arena, const rlx_view* v, int64_t i, double x) {
  rlx_store_f64(arena + v->offset, v->dtype, i, x);
}

/* x as it would read back after being stored in dtype t. */
static double round_to(rlx_dtype t, double x) {
  union { double d; float f; uint16_t h; int64_t i; uint8_t b; } slot;
  slot.i = 0;
  rlx_store_f64(&slot, t, 0, x);
  return rlx_load_f64(&slot, t, 0);
}

static rlx_status no_memory(const rlx_step* s, rlx_error* err) {
  return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory running node %d", s->node);
}

/* ------------------------------------------------------------------ matmul */

static rlx_status ref_matmul(uint8_t* arena, const rlx_step* s) {
  const rlx_matmul_params* p = &s->p.mm;
  const rlx_view *A = &s->in[0], *B = &s->in[1], *bias = &s->in[2], *C = &s->out[0];
  for (int64_t bi = 0; bi < p->batch; bi++) {
    /* Unravel the batch index (last batch dim fastest) into operand offsets. */
    int64_t rem = bi, ao = 0, bo = 0, co = 0;
    for (int32_t d = p->batch_rank - 1; d >= 0; d--) {
      int64_t idx = rem % p->batch_shape[d];
      rem /= p->batch_shape[d];
      ao += idx * p->a_bstride[d];
      bo += idx * p->b_bstride[d];
      co += idx * p->c_bstride[d];
    }
    for (int64_t m = 0; m < p->M; m++) {
      for (int64_t n = 0; n < p->N; n++) {
        double acc = 0.0;
        for (int64_t k = 0; k < p->K; k++)
          acc += ld(arena, A, ao + m * p->a_rs + k * p->a_cs) *
                 ld(arena, B, bo + k * p->b_rs + n * p->b_cs);
        if (p->has_bias) acc += ld(arena, bias, n);
        if (p->act != RLX_ACT_NONE) acc = rlx_ref_activation(p->act, acc);
        st(arena, C, co + m * p->c_rs + n, acc);
      }
    }
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ norms */

enum { NORM_X, NORM_RESIDUAL, NORM_BIAS, NORM_GAMMA, NORM_BETA };

/* Loads row r of the pre-norm value into v: x, or x + residual (+ bias)
 * rounded to the output dtype (and written to the sum output when asked),
 * so that every backend normalises the very value it stored. */
static void load_norm_row(uint8_t* arena, const rlx_step* s, int64_t r, double* v) {
  const rlx_norm_params* p = &s->p.norm;
  int64_t base = r * p->cols;
  for (int64_t c = 0; c < p->cols; c++) {
    double x = ld(arena, &s->in[NORM_X], base + c);
    if (p->has_residual) {
      x += ld(arena, &s->in[NORM_RESIDUAL], base + c);
      if (p->has_bias) x += ld(arena, &s->in[NORM_BIAS], c);
      x = round_to(s->out[0].dtype, x);
      if (p->writes_sum) st(arena, &s->out[1], base + c, x);
    }
    v[c] = x;
  }
}

static rlx_status ref_norm(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  const rlx_norm_params* p = &s->p.norm;
  if (p->rows == 0 || p->cols == 0) return RLX_OK;
  double* v = malloc((size_t)p->cols * sizeof *v);
  if (!v) return no_memory(s, err);
  for (int64_t r = 0; r < p->rows; r++) {
    load_norm_row(arena, s, r, v);
    double mean = 0.0, ms = 0.0;
    if (!p->rms) {
      for (int64_t c = 0; c < p->cols; c++) mean += v[c];
      mean /= (double)p->cols;
    }
    /* LayerNorm: biased variance about the mean; RMS: mean square about 0. */
    for (int64_t c = 0; c < p->cols; c++) ms += (v[c] - mean) * (v[c] - mean);
    ms /= (double)p->cols;
    double inv = 1.0 / sqrt(ms + (double)p->eps);
    for (int64_t c = 0; c < p->cols; c++) {
      double y = (v[c] - mean) * inv;
      if (p->has_gamma) y *= ld(arena, &s->in[NORM_GAMMA], c);
      if (p->has_beta) y += ld(arena, &s->in[NORM_BETA], c);
      st(arena, &s->out[0], r * p->cols + c, y);
    }
  }
  free(v);
  return RLX_OK;
}

/* ------------------------------------------------------------------ channel norms */

/* Mean and biased variance of group (o, i) of a RLX_K_GROUP_NORM step (or
 * the given statistics), accumulated in double. */
static void gnorm_stats(uint8_t* arena, const rlx_step* s, int64_t o, int64_t i, double* mean,
                        double* var) {
  const rlx_gnorm_params* p = &s->p.gnorm;
  if (p->has_stats) {
    *mean = ld(arena, &s->in[RLX_GN_MEAN], o % p->groups);
    *var = ld(arena, &s->in[RLX_GN_VAR], o % p->groups);
    return;
  }
  int64_t base = o * p->n * p->inner + i;
  double sum = 0.0, ss = 0.0;
  for (int64_t j = 0; j < p->n; j++) sum += ld(arena, &s->in[RLX_GN_X], base + j * p->inner);
  *mean = sum / (double)p->n;
  for (int64_t j = 0; j < p->n; j++) {
    double d = ld(arena, &s->in[RLX_GN_X], base + j * p->inner) - *mean;
    ss += d * d;
  }
  *var = ss / (double)p->n;
}

static rlx_status ref_group_norm(uint8_t* arena, const rlx_step* s) {
  const rlx_gnorm_params* p = &s->p.gnorm;
  if (p->n == 0) return RLX_OK;
  for (int64_t o = 0; o < p->outer; o++)
    for (int64_t i = 0; i < p->inner; i++) {
      double mean, var;
      gnorm_stats(arena, s, o, i, &mean, &var);
      double inv = 1.0 / sqrt(var + (double)p->eps);
      int64_t base = o * p->n * p->inner + i;
      for (int64_t j = 0; j < p->n; j++) {
        int64_t e = base + j * p->inner, c = ((o % p->groups) * p->n + j) / p->cdiv;
        double y = (ld(arena, &s->in[RLX_GN_X], e) - mean) * inv;
        if (p->has_gamma) y *= ld(arena, &s->in[RLX_GN_GAMMA], c);
        if (p->has_beta) y += ld(arena, &s->in[RLX_GN_BETA], c);
        st(arena, &s->out[0], e, y);
      }
    }
  return RLX_OK;
}

/* ------------------------------------------------------------------ attention */

/* Score of query i against key j after scaling, softcap and mask; -INFINITY
 * when masked out. */
static double masked_score(uint8_t* arena, const rlx_step* s, double dot, int64_t b, int64_t h,
                           int64_t i, int64_t j) {
  const rlx_attention_params* p = &s->p.attn;
  double sc = dot * (double)p->scale;
  if (p->softcap > 0.0f) sc = (double)p->softcap * tanh(sc / (double)p->softcap);
  int64_t last_visible = i + p->Sk - p->Sq; /* bottom-right aligned causal edge */
  int64_t m_at = b * p->m_sb + h * p->m_sh + i * p->m_sq + j * p->m_sk;
  switch (p->mask) {
    case RLX_MASK_CAUSAL:
      if (j > last_visible) return -INFINITY;
      break;
    case RLX_MASK_SLIDING:
      if (j > last_visible || j <= last_visible - p->window) return -INFINITY;
      break;
    case RLX_MASK_CUSTOM:
      if (!(ld(arena, &s->in[3], m_at) > 0.5)) return -INFINITY;
      break;
    case RLX_MASK_BIAS:
      sc += ld(arena, &s->in[3], m_at);
      break;
    default:
      break;
  }
  return sc;
}

/* One query row (b, h, i): softmax over keys, then the weighted sum of v.
 * A row with every key masked has no distribution; it outputs zeros (as
 * flash-attention style kernels do) rather than NaN. */
static void attention_row(uint8_t* arena, const rlx_step* s, int64_t b, int64_t h, int64_t i,
                          double* scores, double* acc) {
  const rlx_attention_params* p = &s->p.attn;
  const rlx_view *Q = &s->in[0], *K = &s->in[1], *V = &s->in[2], *O = &s->out[0];
  int64_t kvh = h / (p->H / p->Hkv);
  int64_t qo = b * p->q_sb + i * p->q_ss + h * p->q_sh;
  double mx = -INFINITY;
  for (int64_t j = 0; j < p->Sk; j++) {
    int64_t ko = b * p->k_sb + j * p->k_ss + kvh * p->k_sh;
    double dot = 0.0;
    for (int64_t d = 0; d < p->D; d++) dot += ld(arena, Q, qo + d) * ld(arena, K, ko + d);
    scores[j] = masked_score(arena, s, dot, b, h, i, j);
    if (scores[j] > mx) mx = scores[j];
  }
  for (int64_t d = 0; d < p->Dv; d++) acc[d] = 0.0;
  double total = 0.0;
  if (mx > -INFINITY) {
    for (int64_t j = 0; j < p->Sk; j++) {
      double w = exp(scores[j] - mx);
      if (w == 0.0) continue;
      total += w;
      int64_t vo = b * p->v_sb + j * p->v_ss + kvh * p->v_sh;
      for (int64_t d = 0; d < p->Dv; d++) acc[d] += w * ld(arena, V, vo + d);
    }
  }
  int64_t oo = b * p->o_sb + i * p->o_ss + h * p->o_sh;
  for (int64_t d = 0; d < p->Dv; d++) st(arena, O, oo + d, total > 0.0 ? acc[d] / total : 0.0);
}

static rlx_status ref_attention(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  const rlx_attention_params* p = &s->p.attn;
  if (p->Hkv <= 0 || p->H % p->Hkv != 0)
    return rlx_fail(err, RLX_INTERNAL, "attention node %d: bad head counts", s->node);
  double* scores = malloc((size_t)(p->Sk > 0 ? p->Sk : 1) * sizeof *scores);
  double* acc = malloc((size_t)(p->Dv > 0 ? p->Dv : 1) * sizeof *acc);
  if (!scores || !acc) {
    free(scores);
    free(acc);
    return no_memory(s, err);
  }
  for (int64_t b = 0; b < p->B; b++)
    for (int64_t h = 0; h < p->H; h++)
      for (int64_t i = 0; i < p->Sq; i++) attention_row(arena, s, b, h, i, scores, acc);
  free(scores);
  free(acc);
  return RLX_OK;
}

/* ------------------------------------------------------------------ rope */

static void rope_head(uint8_t* arena, const rlx_step* s, int64_t xo, int64_t oo, int64_t row) {
  const rlx_rope_params* p = &s->p.rope;
  const rlx_view *X = &s->in[0], *COS = &s->in[1], *SIN = &s->in[2], *O = &s->out[0];
  int64_t half = p->n_rot / 2;
  /* Both halves of each pair are read before either is written, so the
   * kernel is also correct in place. */
  for (int64_t i = 0; i < half; i++) {
    int64_t i1 = p->style == RLX_ROPE_GPTJ ? 2 * i : i;
    int64_t i2 = p->style == RLX_ROPE_GPTJ ? 2 * i + 1 : i + half;
    double c = ld(arena, COS, row * half + i), sn = ld(arena, SIN, row * half + i);
    if (p->inverse) sn = -sn; /* RopeBackward: the transpose of a rotation */
    double x1 = ld(arena, X, xo + i1), x2 = ld(arena, X, xo + i2);
    st(arena, O, oo + i1, x1 * c - x2 * sn);
    st(arena, O, oo + i2, x2 * c + x1 * sn);
  }
  for (int64_t d = p->n_rot; d < p->D; d++) st(arena, O, oo + d, ld(arena, X, xo + d));
}

static rlx_status ref_rope(uint8_t* arena, const rlx_step* s) {
  const rlx_rope_params* p = &s->p.rope;
  for (int64_t b = 0; b < p->B; b++)
    for (int64_t t = 0; t < p->S; t++) {
      int64_t row = p->per_token ? b * p->S + t : t;
      for (int64_t h = 0; h < p->H; h++)
        rope_head(arena, s, b * p->x_sb + t * p->x_ss + h * p->x_sh,
                  b * p->o_sb + t * p->o_ss + h * p->o_sh, row);
    }
  return RLX_OK;
}

/* ------------------------------------------------------------------ sample */

typedef struct cand {
  double p;
  int64_t idx;
} cand;

/* Descending probability; equal probabilities keep the lower index first. */
static int cand_cmp(const void* a, const void* b) {
  const cand *x = a, *y = b;
  if (x->p > y->p) return -1;
  if (x->p < y->p) return 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static int64_t argmax_row(uint8_t* arena, const rlx_view* L, int64_t base, int64_t vocab) {
  int64_t best = 0;
  double bv = ld(arena, L, base);
  for (int64_t j = 1; j < vocab; j++) {
    double x = ld(arena, L, base + j);
    if (x > bv || (isnan(bv) && !isnan(x))) bv = x, best = j;
  }
  return best;
}

/* softmax(logits / T) -> keep the top_k most likely -> keep the smallest
 * prefix whose (renormalised) mass reaches top_p -> draw u in [0, 1) and
 * pick by cumulative probability. top_p is measured on the distribution left
 * after top_k, as Hugging Face and llama.cpp chain their samplers. */
static int64_t sample_row(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx, int64_t row,
                          cand* c) {
  const rlx_sample_params* p = &s->p.sample;
  const rlx_view* L = &s->in[0];
  int64_t base = row * p->vocab;
  if (!(p->temperature > 0.0f)) return argmax_row(arena, L, base, p->vocab);
  double mx = -INFINITY;
  for (int64_t j = 0; j < p->vocab; j++) {
    c[j].idx = j;
    double x = ld(arena, L, base + j);
    c[j].p = isnan(x) ? -INFINITY : x / (double)p->temperature; /* NaN never wins */
    if (c[j].p > mx) mx = c[j].p;
  }
  if (!(mx > -INFINITY) || isinf(mx)) return argmax_row(arena, L, base, p->vocab);
  for (int64_t j = 0; j < p->vocab; j++) c[j].p = exp(c[j].p - mx);
  qsort(c, (size_t)p->vocab, sizeof *c, cand_cmp);
  int64_t keep = (p->top_k > 0 && p->top_k < p->vocab) ? p->top_k : p->vocab;
  double mass = 0.0;
  for (int64_t j = 0; j < keep; j++) mass += c[j].p;
  double target = (double)p->top_p * mass, cum = 0.0;
  int64_t n = 0;
  while (n < keep) {
    cum += c[n++].p;
    if (cum >= target) break;
  }
  double u = rlx_rand_uniform(ctx ? ctx->seed : 0, (uint64_t)row) * cum, run = 0.0;
  for (int64_t j = 0; j < n; j++) {
    run += c[j].p;
    if (u < run) return c[j].idx;
  }
  return c[n - 1].idx;
}

static rlx_status ref_sample(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                             rlx_error* err) {
  const rlx_sample_params* p = &s->p.sample;
  if (p->vocab < 1) return rlx_fail(err, RLX_INTERNAL, "sample node %d: empty vocab", s->node);
  cand* c = malloc((size_t)p->vocab * sizeof *c);
  if (!c) return no_memory(s, err);
  for (int64_t r = 0; r < p->rows; r++) {
    int64_t tok = sample_row(arena, s, ctx, r, c);
    rlx_store_i64(arena + s->out[0].offset, s->out[0].dtype, r, tok);
  }
  free(c);
  return RLX_OK;
}

/* ------------------------------------------------------------------ pool, pad */

/* Pad: the one source element of output element o, or -1 for the fill. */
static int64_t pad_source(const rlx_step* s, const int64_t* oc) {
  const rlx_pool_params* p = &s->p.pool;
  const rlx_view* x = &s->in[0];
  int64_t off = 0;
  for (int32_t d = 0; d < p->rank; d++) {
    int64_t n = x->shape[d], i = oc[d] - p->pad[d];
    if (i < 0 || i >= n) {
      if (s->op == RLX_WIN_PAD_CONSTANT) return -1;
      i = rlx_pad_fold(s->op - RLX_WIN_PAD_CONSTANT, i, n); /* RLX_WIN_PAD_x = RLX_PAD_x + 2 */
    }
    off += i * x->stride[d];
  }
  return off;
}

/* Pool: max or average over the window of output element o; *at receives
 * the input index of the first maximum (-1 if no tap is inside). */
static double pool_window(uint8_t* arena, const rlx_step* s, const int64_t* oc, int64_t* at) {
  const rlx_pool_params* p = &s->p.pool;
  const rlx_view* x = &s->in[0];
  double acc = s->op == RLX_WIN_MAX ? -INFINITY : 0.0;
  int64_t inside = 0, padded = 0;
  *at = -1;
  for (int64_t t = 0; t < p->taps; t++) {
    int64_t rem = t, off = 0;
    int in_x = 1, in_pad = 1;
    for (int32_t d = p->rank - 1; d >= 0; d--) {
      int64_t k = rem % p->kernel[d];
      rem /= p->kernel[d];
      int64_t i = oc[d] * p->stride[d] - p->pad[d] + k * p->dilation[d];
      if (i < 0 || i >= x->shape[d]) in_x = 0;
      if (i < -p->pad[d] || i >= x->shape[d] + p->pad_end[d]) in_pad = 0;
      off += i * x->stride[d];
    }
    padded += in_pad;
    if (!in_x) continue;
    inside++;
    double v = ld(arena, x, off);
    if (s->op != RLX_WIN_MAX) acc += v;
    else if (*at < 0 || ((v > acc || isnan(v)) && !isnan(acc))) acc = v, *at = off;
  }
  if (s->op == RLX_WIN_MAX) return acc;
  int64_t count = p->count_include_pad ? padded : inside;
  return count ? acc / (double)count : NAN;
}

static rlx_status ref_pool(uint8_t* arena, const rlx_step* s) {
  const rlx_view* y = &s->out[0];
  int64_t n = rlx_view_numel(y);
  int64_t oc[RLX_MAX_RANK];
  for (int64_t o = 0; o < n; o++) {
    int64_t rem = o;
    for (int32_t d = y->rank - 1; d >= 0; d--) {
      oc[d] = rem % y->shape[d];
      rem /= y->shape[d];
    }
    if (s->op >= RLX_WIN_PAD_CONSTANT) {
      int64_t src = pad_source(s, oc);
      if (src < 0) st(arena, y, o, s->p.pool.value);
      else { /* a raw element copy: exact for every dtype */
        size_t es = rlx_dtype_size(y->dtype);
        rlx_convert(arena + y->offset + (size_t)o * es, y->dtype,
                    arena + s->in[0].offset + (size_t)src * es, s->in[0].dtype, 1);
      }
    } else {
      int64_t at;
      double v = pool_window(arena, s, oc, &at);
      if (s->p.pool.index_out) rlx_store_i64(arena + y->offset, y->dtype, o, at);
      else st(arena, y, o, v);
    }
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ resize */

/* The taps of one resized dim for output coordinate o: 0 when
 * tf_crop_and_resize falls outside the input (extrapolate). */
static int resize_dim_taps(const rlx_step* s, int32_t i, int64_t o, int64_t* idx, double* w) {
  const rlx_resize_params* p = &s->p.resize;
  double scale = p->scale[i] > 0.0f ? (double)p->scale[i]
                                     : (double)p->out_size[i] / (double)p->in_size[i];
  double x = rlx_resize_source(p->coord, o, scale, p->in_size[i], p->out_size[i],
                              p->roi_start[i], p->roi_end[i]);
  if (p->coord == RLX_COORD_TF_CROP_AND_RESIZE && (x < 0.0 || x > (double)(p->in_size[i] - 1)))
    return 0;
  return rlx_resize_taps(s->op, p->nearest, p->cubic_a, p->exclude_outside, x, p->in_size[i],
                         idx, w);
}

/* Output element o (coordinates oc): the weighted sum over the product of
 * the resized dims' taps; nearest copies its one source element raw, so
 * every dtype is exact. */
static void resize_element(uint8_t* arena, const rlx_step* s, int64_t o, const int64_t* oc) {
  const rlx_resize_params* p = &s->p.resize;
  const rlx_view *x = &s->in[0], *y = &s->out[0];
  int64_t idx[RLX_RESIZE_MAX_DIMS][4], base = 0, total = 1;
  double w[RLX_RESIZE_MAX_DIMS][4];
  int n[RLX_RESIZE_MAX_DIMS];
  int moving[RLX_MAX_RANK] = {0};
  for (int32_t i = 0; i < p->n_dims; i++) {
    moving[p->dim[i]] = 1;
    n[i] = resize_dim_taps(s, i, oc[p->dim[i]], idx[i], w[i]);
    if (!n[i]) { st(arena, y, o, p->extrapolation); return; }
    total *= n[i];
  }
  for (int32_t d = 0; d < p->rank; d++)
    if (!moving[d]) base += oc[d] * x->stride[d];
  if (s->op == RLX_RESIZE_NEAREST) {
    for (int32_t i = 0; i < p->n_dims; i++) base += idx[i][0] * x->stride[p->dim[i]];
    size_t es = rlx_dtype_size(y->dtype);
    rlx_convert(arena + y->offset + (size_t)o * es, y->dtype,
                arena + x->offset + (size_t)base * es, x->dtype, 1);
    return;
  }
  double acc = 0.0;
  for (int64_t t = 0; t < total; t++) {
    int64_t rem = t, off = base;
    double wt = 1.0;
    for (int32_t i = p->n_dims - 1; i >= 0; i--) {
      int k = (int)(rem % n[i]);
      rem /= n[i];
      off += idx[i][k] * x->stride[p->dim[i]];
      wt *= w[i][k];
    }
    acc += wt * ld(arena, x, off);
  }
  st(arena, y, o, acc);
}

static rlx_status ref_resize(uint8_t* arena, const rlx_step* s) {
  const rlx_view* y = &s->out[0];
  int64_t n = rlx_view_numel(y);
  int64_t oc[RLX_MAX_RANK];
  for (int64_t o = 0; o < n; o++) {
    int64_t rem = o;
    for (int32_t d = y->rank - 1; d >= 0; d--) {
      oc[d] = rem % y->shape[d];
      rem /= y->shape[d];
    }
    resize_element(arena, s, o, oc);
  }
  return RLX_OK;
}

/* ------------------------------------------------------------------ grid sample, roi align */

/* x[plane][iy][ix], 0 outside the input. */
static double grid_tap(uint8_t* arena, const rlx_view* x, int64_t plane, int64_t iy, int64_t ix) {
  int64_t H = x->shape[2], W = x->shape[3];
  if (iy < 0 || iy >= H || ix < 0 || ix >= W) return 0.0;
  return ld(arena, x, (plane * H + iy) * W + ix);
}

/* One GridSample output: x plane `plane` sampled at grid point (gx, gy). */
static double grid_sample_at(uint8_t* arena, const rlx_step* s, int64_t plane, double gx, double gy) {
  const rlx_sampler_params* p = &s->p.sampler;
  const rlx_view* x = &s->in[0];
  int64_t H = x->shape[2], W = x->shape[3];
  double ix = rlx_grid_unnormalize(gx, W, p->align_corners), iy = rlx_grid_unnormalize(gy, H, p->align_corners);
  if (p->mode == RLX_RESIZE_CUBIC) { /* padding per tap, on the raw coordinate's taps */
    double fx = floor(ix), fy = floor(iy), acc = 0.0;
    for (int j = 0; j < 4; j++) {
      double ty = fy - 1.0 + j, wy = rlx_cubic_weight(-0.75, iy - ty);
      double py = rlx_grid_pad_coord(ty, H, p->padding, p->align_corners);
      for (int i = 0; i < 4; i++) {
        double tx = fx - 1.0 + i, wx = rlx_cubic_weight(-0.75, ix - tx);
        double px = rlx_grid_pad_coord(tx, W, p->padding, p->align_corners);
        acc += wy * wx * grid_tap(arena, x, plane, (int64_t)py, (int64_t)px);
      }
    }
    return acc;
  }
  ix = rlx_grid_pad_coord(ix, W, p->padding, p->align_corners);
  iy = rlx_grid_pad_coord(iy, H, p->padding, p->align_corners);
  if (p->mode == RLX_RESIZE_NEAREST)
    return grid_tap(arena, x, plane, (int64_t)rlx_round_half_even(iy), (int64_t)rlx_round_half_even(ix));
  double x0 = floor(ix), y0 = floor(iy), lx = ix - x0, ly = iy - y0;
  int64_t a = (int64_t)x0, b = (int64_t)y0;
  return (1 - ly) * ((1 - lx) * grid_tap(arena, x, plane, b, a) + lx * grid_tap(arena, x, plane, b, a + 1)) +
         ly * ((1 - lx) * grid_tap(arena, x, plane, b + 1, a) + lx * grid_tap(arena, x, plane, b + 1, a + 1));
}

static void ref_grid_sample(uint8_t* arena, const rlx_step* s) {
  const rlx_view *y = &s->out[0], *grid = &s->in[1];
  int64_t C = y->shape[1], Ho = y->shape[2], Wo = y->shape[3], n = rlx_view_numel(y);
  for (int64_t o = 0; o < n; o++) {
    int64_t w = o % Wo, h = (o / Wo) % Ho, nc = o / (Wo * Ho), b = nc / C;
    int64_t gi = ((b * Ho + h) * Wo + w) * 2;
    st(arena, y, o, grid_sample_at(arena, s, nc, ld(arena, grid, gi), ld(arena, grid, gi + 1)));
  }
}

/* RoiAlign's bilinear sample at (yy, xx) of plane `plane` (the ONNX /
 * Caffe2 rule: outside [-1, n] it is 0; coordinates clamp to the last
 * pixel). Returns the four weighted corners in v[4]. */
static void roi_sample(uint8_t* arena, const rlx_view* x, int64_t plane, double yy, double xx,
                       double v[4]) {
  int64_t H = x->shape[2], W = x->shape[3], at[4];
  double w[4];
  v[0] = v[1] = v[2] = v[3] = 0.0;
  if (!rlx_roi_corners(yy, xx, H, W, at, w)) return;
  for (int k = 0; k < 4; k++) v[k] = w[k] * ld(arena, x, plane * H * W + at[k]);
}

/* One RoiAlign output bin (r, c, ph, pw). */
static double roi_bin(uint8_t* arena, const rlx_step* s, int64_t r, int64_t c, int64_t ph, int64_t pw) {
  const rlx_sampler_params* p = &s->p.sampler;
  const rlx_view *x = &s->in[0], *rois = &s->in[1], *bi = &s->in[2], *y = &s->out[0];
  double off = p->align_corners ? 0.5 : 0.0, sc = (double)p->spatial_scale;
  double x1 = ld(arena, rois, r * 4) * sc - off, y1 = ld(arena, rois, r * 4 + 1) * sc - off;
  double rw = ld(arena, rois, r * 4 + 2) * sc - off - x1, rh = ld(arena, rois, r * 4 + 3) * sc - off - y1;
  if (!p->align_corners) {
    rw = rw > 1.0 ? rw : 1.0;
    rh = rh > 1.0 ? rh : 1.0;
  }
  int64_t oh = y->shape[2], ow = y->shape[3];
  double bh = rh / (double)oh, bw = rw / (double)ow;
  int64_t gh = p->sampling_ratio > 0 ? p->sampling_ratio : (int64_t)ceil(rh / (double)oh);
  int64_t gw = p->sampling_ratio > 0 ? p->sampling_ratio : (int64_t)ceil(rw / (double)ow);
  int64_t count = gh * gw > 1 ? gh * gw : 1;
  int64_t plane = rlx_load_i64(arena + bi->offset, bi->dtype, r) * x->shape[1] + c;
  double acc = p->mode == RLX_POOL_MAX ? -INFINITY : 0.0;
  for (int64_t iy = 0; iy < gh; iy++) {
    double yy = y1 + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
    for (int64_t ix = 0; ix < gw; ix++) {
      double xx = x1 + (double)pw * bw + ((double)ix + 0.5) * bw / (double)gw, v[4];
      roi_sample(arena, x, plane, yy, xx, v);
      if (p->mode == RLX_POOL_MAX) {
        double m = fmax(fmax(v[0], v[1]), fmax(v[2], v[3]));
        acc = m > acc ? m : acc;
      } else {
        acc += v[0] + v[1] + v[2] + v[3];
      }
    }
  }
  if (p->mode == RLX_POOL_MAX) return gh * gw > 0 ? acc : 0.0;
  return acc / (double)count;
}

static rlx_status ref_roi_align(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  const rlx_view *y = &s->out[0], *bi = &s->in[2];
  int64_t C = y->shape[1], oh = y->shape[2], ow = y->shape[3], n = rlx_view_numel(y);
  int64_t N = s->in[0].shape[0];
  for (int64_t r = 0; r < y->shape[0]; r++) {
    int64_t b = rlx_load_i64(arena + bi->offset, bi->dtype, r);
    if (b < 0 || b >= N)
      return rlx_fail(err, RLX_INVALID_ARGUMENT, "node %d: roi %lld has batch index %lld outside [0, %lld)",
                      s->node, (long long)r, (long long)b, (long long)N);
  }
  for (int64_t o = 0; o < n; o++) {
    int64_t pw = o % ow, ph = (o / ow) % oh, c = (o / (ow * oh)) % C, r = o / (ow * oh * C);
    st(arena, y, o, roi_bin(arena, s, r, c, ph, pw));
  }
  return RLX_OK;
}

static rlx_status ref_sampler(uint8_t* arena, const rlx_step* s, rlx_error* err) {
  if (s->op == RLX_SAMPLER_ROI_ALIGN) return ref_roi_align(arena, s, err);
  ref_grid_sample(arena, s);
  return RLX_OK;
}

/* ------------------------------------------------------------------ conv */

/* Dense element index of (n, c, spatial i[3]) in a conv activation with
 * `ch` channels and spatial sizes sp[3] (unused dims are 1). */
static int64_t conv_index(const rlx_conv_params* p, int64_t ch, const int64_t* sp, int64_t n,
                          int64_t c, const int64_t* i) {
  int64_t s = (i[0] * sp[1] + i[1]) * sp[2] + i[2], area = sp[0] * sp[1] * sp[2];
  if (rlx_conv_layout_is_last(p->layout)) return (n * area + s) * ch + c;
  return (n * ch + c) * area + s;
}

/* Input coordinate feeding output coordinate o through tap t of spatial
 * dim d, or -1 if none does (outside the input, or for the transpose not
 * on the stride grid). */
static int64_t conv_source(const rlx_conv_params* p, int transpose, int d, int64_t o, int64_t t) {
  if (!transpose) {
    int64_t i = o * p->stride[d] - p->pad[d] + t * p->dilation[d];
    return i >= 0 && i < p->in[d] ? i : -1;
  }
  int64_t num = o + p->pad[d] - t * p->dilation[d];
  if (num < 0 || num % p->stride[d]) return -1;
  int64_t i = num / p->stride[d];
  return i < p->in[d] ? i : -1;
}

/* The sum over the taps of one output element (n, oc, o) of a Conv
 * (w [OC, C/g, k...], or [OC, k..., C/g] for OHWI) or ConvTranspose (w [C, OC/g, k...]). */
static double conv_sum(uint8_t* arena, const rlx_step* s, int64_t n, int64_t oc, const int64_t* o) {
  const rlx_conv_params* p = &s->p.conv;
  int transpose = s->op == RLX_CONV_TRANSPOSE, ohwi = p->layout == RLX_CONV_CHANNELS_LAST_OHWI;
  int64_t cg = p->C / p->groups, ocg = p->OC / p->groups, g = oc / ocg;
  int64_t taps = p->kernel[0] * p->kernel[1] * p->kernel[2];
  double acc = 0.0;
  for (int64_t t = 0; t < taps; t++) {
    int64_t tk[3] = {t / (p->kernel[1] * p->kernel[2]), t / p->kernel[2] % p->kernel[1], t % p->kernel[2]};
    int64_t i[3];
    int inside = 1;
    for (int d = 0; d < 3 && inside; d++) inside = (i[d] = conv_source(p, transpose, d, o[d], tk[d])) >= 0;
    if (!inside) continue;
    for (int64_t c = 0; c < cg; c++) {
      int64_t wi = transpose ? ((g * cg + c) * ocg + oc % ocg) * taps + t
                   : ohwi    ? (oc * taps + t) * cg + c
                             : (oc * cg + c) * taps + t;
      acc += ld(arena, &s->in[0], conv_index(p, p->C, p->in, n, g * cg + c, i)) * ld(arena, &s->in[1], wi);
    }
  }
  return acc;
}

static rlx_status ref_conv(uint8_t* arena, const rlx_step* s) {
  const rlx_conv_params* p = &s->p.conv;
  for (int64_t n = 0; n < p->N; n++)
    for (int64_t oc = 0; oc < p->OC; oc++)
      for (int64_t o0 = 0; o0 < p->out[0]; o0++)
        for (int64_t o1 = 0; o1 < p->out[1]; o1++)
          for (int64_t o2 = 0; o2 < p->out[2]; o2++) {
            int64_t o[3] = {o0, o1, o2};
            int64_t yi = conv_index(p, p->OC, p->out, n, oc, o);
            double acc = conv_sum(arena, s, n, oc, o);
            if (p->has_bias) acc += ld(arena, &s->in[2], oc);
            if (p->has_residual) acc += ld(arena, &s->in[3], yi);
            if (p->act != RLX_ACT_NONE) acc = rlx_ref_activation(p->act, acc);
            st(arena, &s->out[0], yi, acc);
          }
  return RLX_OK;
}

rlx_status rlx_ref_nn(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                      rlx_error* err) {
  switch (s->kernel) {
    case RLX_K_MATMUL: return ref_matmul(arena, s);
    case RLX_K_NORM: return ref_norm(arena, s, err);
    case RLX_K_ATTENTION: return ref_attention(arena, s, err);
    case RLX_K_ROPE: return ref_rope(arena, s);
    case RLX_K_SAMPLE: return ref_sample(arena, s, ctx, err);
    case RLX_K_POOL: return ref_pool(arena, s);
    case RLX_K_RESIZE: return ref_resize(arena, s);
    case RLX_K_SAMPLER: return ref_sampler(arena, s, err);
    case RLX_K_CONV: return ref_conv(arena, s);
    case RLX_K_GROUP_NORM: return ref_group_norm(arena, s);
    default:
      return rlx_fail(err, RLX_INTERNAL, "node %d: kernel %d is not an nn kernel", s->node,
                      (int)s->kernel);
  }
}
