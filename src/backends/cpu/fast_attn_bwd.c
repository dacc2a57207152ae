/* CPU fast path of AttentionBackward (RLX_K_ATTENTION_BWD) in f32: the
 * reference's phases (ref_attn_bwd.c has the math) over raw float pointers,
 * threaded over the phase's work items (query rows for STATS and DQ, key
 * rows for DV and DK). Each item owns its output row and sums in a fixed
 * order, so results do not depend on the thread count. The inner loops are
 * contiguous dot products and axpys over the head dim, which the compiler
 * vectorises. Other dtypes and the FULL phase decline to the reference. */
#include <math.h>

#include "backends/cpu/cpu.h"

typedef struct ab_job {
  const rlx_step* s;
  const rlx_attention_bwd_params* p;
  const float *q, *k, *v, *mask, *x, *d_out; /* x: out (STATS, DQ) or the stats */
  float* g;                                  /* the phase's output */
} ab_job;

static float dotf(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t d = 0; d < n; d++) s += a[d] * b[d];
  return s;
}

static void axpyf(float w, const float* x, float* y, int64_t n) {
  for (int64_t d = 0; d < n; d++) y[d] += w * x[d];
}

/* Score as the forward, -INFINITY where masked; *dsc = d score / d dot. */
static float score(const ab_job* J, float dot, int64_t b, int64_t h, int64_t i, int64_t j,
                   float* dsc) {
  const rlx_attention_params* a = &J->p->a;
  int64_t last = i + a->Sk - a->Sq;
  if ((a->mask == RLX_MASK_CAUSAL || a->mask == RLX_MASK_SLIDING) && j > last) return -INFINITY;
  if (a->mask == RLX_MASK_SLIDING && j <= last - a->window) return -INFINITY;
  int64_t m_at = b * a->m_sb + h * a->m_sh + i * a->m_sq + j * a->m_sk;
  if (a->mask == RLX_MASK_CUSTOM && !(J->mask[m_at] > 0.5f)) return -INFINITY;
  float s = dot * a->scale;
  *dsc = a->scale;
  if (a->softcap > 0.0f) {
    float t = tanhf(s / a->softcap);
    s = a->softcap * t;
    *dsc = a->scale * (1.0f - t * t);
  }
  if (a->mask == RLX_MASK_BIAS) s += J->mask[m_at];
  return s;
}

/* Keys [*lo, *hi) query row i can see under a causal or sliding mask, and
 * query rows [*lo, *hi) that can see key j (the same bounds as the CUDA
 * kernels, attention_bwd.cu); everything otherwise. */
static void key_range(const rlx_attention_params* a, int64_t i, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = a->Sk;
  if (a->mask != RLX_MASK_CAUSAL && a->mask != RLX_MASK_SLIDING) return;
  int64_t last = i + a->Sk - a->Sq;
  *hi = last + 1 < a->Sk ? last + 1 : a->Sk;
  if (*hi < 0) *hi = 0;
  if (a->mask == RLX_MASK_SLIDING && last - a->window + 1 > 0) *lo = last - a->window + 1;
  if (*lo > *hi) *lo = *hi;
}

static void query_range(const rlx_attention_params* a, int64_t j, int64_t* lo, int64_t* hi) {
  *lo = 0;
  *hi = a->Sq;
  if (a->mask != RLX_MASK_CAUSAL && a->mask != RLX_MASK_SLIDING) return;
  int64_t first = j - (a->Sk - a->Sq);
  *lo = first > 0 ? first : 0;
  if (a->mask == RLX_MASK_SLIDING && first + a->window < *hi) *hi = first + a->window;
  if (*hi < *lo) *hi = *lo;
}

static const float* q_row(const ab_job* J, int64_t b, int64_t h, int64_t i) {
  const rlx_attention_params* a = &J->p->a;
  return J->q + b * a->q_sb + i * a->q_ss + h * a->q_sh;
}
static const float* k_row(const ab_job* J, int64_t b, int64_t g, int64_t j) {
  const rlx_attention_params* a = &J->p->a;
  return J->k + b * a->k_sb + j * a->k_ss + g * a->k_sh;
}
static const float* v_row(const ab_job* J, int64_t b, int64_t g, int64_t j) {
  const rlx_attention_params* a = &J->p->a;
  return J->v + b * a->v_sb + j * a->v_ss + g * a->v_sh;
}
static const float* do_row(const ab_job* J, int64_t b, int64_t h, int64_t i) {
  return J->d_out + b * J->p->do_sb + i * J->p->do_ss + h * J->p->do_sh;
}

/* lse (double accumulation of the sum) and D of query row (b, h, i). */
static void row_stats(const ab_job* J, int64_t b, int64_t h, int64_t i, float* lse, float* D) {
  const rlx_attention_params* a = &J->p->a;
  int64_t kvh = h / (a->H / a->Hkv);
  const float* q = q_row(J, b, h, i);
  float m = -INFINITY, dsc = 0.0f;
  double l = 0.0;
  int64_t lo, hi;
  key_range(a, i, &lo, &hi);
  for (int64_t j = lo; j < hi; j++) {
    float s = score(J, dotf(q, k_row(J, b, kvh, j), a->D), b, h, i, j, &dsc);
    if (s == -INFINITY) continue;
    if (s > m) {
      l = l * exp((double)m - (double)s) + 1.0;
      m = s;
    } else {
      l += exp((double)s - (double)m);
    }
  }
  *lse = m == -INFINITY ? -INFINITY : (float)((double)m + log(l));
  const float* o = J->x + b * a->o_sb + i * a->o_ss + h * a->o_sh;
  *D = dotf(do_row(J, b, h, i), o, a->Dv);
}

static void query_items(void* ctx, int64_t begin, int64_t end) {
  const ab_job* J = ctx;
  const rlx_attention_bwd_params* p = J->p;
  const rlx_attention_params* a = &p->a;
  for (int64_t r = begin; r < end; r++) {
    int64_t i = r % a->Sq, h = (r / a->Sq) % a->H, b = r / (a->Sq * a->H);
    int64_t kvh = h / (a->H / a->Hkv);
    float lse, D, dsc = 0.0f;
    row_stats(J, b, h, i, &lse, &D);
    if (J->s->op == RLX_ATTN_BWD_STATS) {
      J->g[2 * r] = lse;
      J->g[2 * r + 1] = D;
      continue;
    }
    float* dq = J->g + b * p->dq_sb + i * p->dq_ss + h * p->dq_sh;
    for (int64_t d = 0; d < a->D; d++) dq[d] = 0.0f;
    if (lse == -INFINITY) continue;
    const float *q = q_row(J, b, h, i), *dout = do_row(J, b, h, i);
    int64_t lo, hi;
    key_range(a, i, &lo, &hi);
    for (int64_t j = lo; j < hi; j++) {
      const float* kj = k_row(J, b, kvh, j);
      float s = score(J, dotf(q, kj, a->D), b, h, i, j, &dsc);
      if (s == -INFINITY) continue;
      float pr = expf(s - lse);
      if (pr == 0.0f) continue;
      float ds = pr * (dotf(dout, v_row(J, b, kvh, j), a->Dv) - D) * dsc;
      axpyf(ds, kj, dq, a->D);
    }
  }
}

static void key_items(void* ctx, int64_t begin, int64_t end) {
  const ab_job* J = ctx;
  const rlx_attention_bwd_params* p = J->p;
  const rlx_attention_params* a = &p->a;
  int dk = J->s->op == RLX_ATTN_BWD_DK;
  int64_t group = a->H / a->Hkv, width = dk ? a->D : a->Dv;
  for (int64_t r = begin; r < end; r++) {
    int64_t j = r % a->Sk, kvh = (r / a->Sk) % a->Hkv, b = r / (a->Sk * a->Hkv);
    float* out = dk ? J->g + b * p->dk_sb + j * p->dk_ss + kvh * p->dk_sh
                    : J->g + b * p->dv_sb + j * p->dv_ss + kvh * p->dv_sh;
    for (int64_t d = 0; d < width; d++) out[d] = 0.0f;
    const float *kj = k_row(J, b, kvh, j), *vj = dk ? v_row(J, b, kvh, j) : NULL;
    int64_t lo, hi;
    query_range(a, j, &lo, &hi);
    for (int64_t h = kvh * group; h < (kvh + 1) * group; h++)
      for (int64_t i = lo; i < hi; i++) {
        const float* st = J->x + 2 * ((b * a->H + h) * a->Sq + i);
        if (st[0] == -INFINITY) continue;
        const float* q = q_row(J, b, h, i);
        float dsc = 0.0f, s = score(J, dotf(q, kj, a->D), b, h, i, j, &dsc);
        if (s == -INFINITY) continue;
        float pr = expf(s - st[0]);
        if (pr == 0.0f) continue;
        const float* dout = do_row(J, b, h, i);
        if (dk)
          axpyf(pr * (dotf(dout, vj, a->Dv) - st[1]) * dsc, q, out, a->D);
        else
          axpyf(pr, dout, out, a->Dv);
      }
  }
}

static const float* fview(uint8_t* arena, const rlx_view* v) {
  return v->rank >= 0 ? (const float*)(arena + v->offset) : NULL;
}

int rlx_cpu_fast_attention_bwd(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_attention_bwd_params* p = &s->p.attn_bwd;
  if (s->op == RLX_ATTN_BWD_FULL || s->n_out != 1 || s->out[0].dtype != RLX_F32) return 0;
  if (p->a.Hkv <= 0 || p->a.H % p->a.Hkv != 0) return 0;
  for (int32_t i = 0; i < s->n_in; i++)
    if (s->in[i].rank >= 0 && s->in[i].dtype != RLX_F32) return 0;
  ab_job J = {s, p, fview(arena, &s->in[0]), fview(arena, &s->in[1]), fview(arena, &s->in[2]),
              fview(arena, &s->in[3]), fview(arena, &s->in[4]), fview(arena, &s->in[5]),
              (float*)(arena + s->out[0].offset)};
  int keys = s->op == RLX_ATTN_BWD_DV || s->op == RLX_ATTN_BWD_DK;
  rlx_cpu_parallel_for(f->pool, s->work.items, 1, keys ? key_items : query_items, &J);
  return 1;
}
