/* CPU reference of AttentionBackward (RLX_K_ATTENTION_BWD), flash style.
 *
 * For a query row i with scores s_ij (scale, softcap, mask as the forward):
 *   P_ij = exp(s_ij - lse_i),  dP_ij = d_out_i . v_j,  D_i = d_out_i . out_i,
 *   dS_ij = P_ij (dP_ij - D_i) * ds_ij/d(q_i . k_j)
 * (ds/d dot = scale, times 1 - tanh^2 under a softcap), then
 *   dq_i = sum_j dS_ij k_j,  dk_j = sum_i dS_ij q_i,  dv_j = sum_i P_ij d_out_i,
 * the key sums running over every query head of the key's kv head (GQA).
 * Nothing of size Sq x Sk is kept: each phase recomputes the scores of the
 * row it owns. Double accumulation; every element goes through
 * rlx_load_f64 / rlx_store_f64, so f32, f16, bf16 and f64 share one path.
 * The mask gets no gradient (a keep-mask is not differentiable and a bias's
 * gradient would be dS itself, which the op does not output). */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu.h"
#include "base/scalar_math.h"
#include "ir/dtype.h"

typedef struct bwd {
  uint8_t* arena;
  const rlx_step* s;
  const rlx_attention_bwd_params* p;
  const rlx_view *q, *k, *v, *mask, *out, *d_out;
  double* stats; /* host stats (FULL), else NULL: read from in4 */
} bwd;

static double ld(const bwd* c, const rlx_view* v, int64_t i) {
  return rlx_load_f64(c->arena + v->offset, v->dtype, i);
}
static void st(const bwd* c, const rlx_view* v, int64_t i, double x) {
  rlx_store_f64(c->arena + v->offset, v->dtype, i, x);
}

static int64_t q_at(const bwd* c, int64_t b, int64_t h, int64_t i) {
  const rlx_attention_params* a = &c->p->a;
  return b * a->q_sb + i * a->q_ss + h * a->q_sh;
}
static int64_t k_at(const bwd* c, int64_t b, int64_t kvh, int64_t j) {
  const rlx_attention_params* a = &c->p->a;
  return b * a->k_sb + j * a->k_ss + kvh * a->k_sh;
}
static int64_t v_at(const bwd* c, int64_t b, int64_t kvh, int64_t j) {
  const rlx_attention_params* a = &c->p->a;
  return b * a->v_sb + j * a->v_ss + kvh * a->v_sh;
}
static int64_t do_at(const bwd* c, int64_t b, int64_t h, int64_t i) {
  return b * c->p->do_sb + i * c->p->do_ss + h * c->p->do_sh;
}

/* Score of (b, h, i) against key j of kv head kvh, as the forward computes
 * it, and its derivative with respect to q_i . k_j. Returns 0 when masked. */
static int score(const bwd* c, int64_t b, int64_t h, int64_t i, int64_t kvh, int64_t j,
                 double* sc, double* dsc) {
  const rlx_attention_params* a = &c->p->a;
  int64_t last_visible = i + a->Sk - a->Sq; /* bottom-right aligned causal edge */
  if ((a->mask == RLX_MASK_CAUSAL || a->mask == RLX_MASK_SLIDING) && j > last_visible) return 0;
  if (a->mask == RLX_MASK_SLIDING && j <= last_visible - a->window) return 0;
  int64_t m_at = b * a->m_sb + h * a->m_sh + i * a->m_sq + j * a->m_sk;
  if (a->mask == RLX_MASK_CUSTOM && !(ld(c, c->mask, m_at) > 0.5)) return 0;
  int64_t qo = q_at(c, b, h, i), ko = k_at(c, b, kvh, j);
  double dot = 0.0;
  for (int64_t d = 0; d < a->D; d++) dot += ld(c, c->q, qo + d) * ld(c, c->k, ko + d);
  double raw = dot * (double)a->scale;
  *sc = raw;
  *dsc = (double)a->scale;
  if (a->softcap > 0.0f) {
    double cap = (double)a->softcap, t = tanh(raw / cap);
    *sc = cap * t;
    *dsc = (double)a->scale * (1.0 - t * t);
  }
  if (a->mask == RLX_MASK_BIAS) *sc += ld(c, c->mask, m_at);
  return 1;
}

/* lse and D of query row (b, h, i); lse = -inf when every key is masked. */
static void row_stats(const bwd* c, int64_t b, int64_t h, int64_t i, double* lse, double* D) {
  const rlx_attention_params* a = &c->p->a;
  int64_t kvh = h / (a->H / a->Hkv);
  double m = -INFINITY, l = 0.0, sc, dsc;
  for (int64_t j = 0; j < a->Sk; j++) {
    if (!score(c, b, h, i, kvh, j, &sc, &dsc) || sc == -INFINITY) continue;
    if (sc > m) {
      l = l * exp(m - sc) + 1.0;
      m = sc;
    } else {
      l += exp(sc - m);
    }
  }
  *lse = m == -INFINITY ? -INFINITY : m + log(l);
  int64_t oo = b * a->o_sb + i * a->o_ss + h * a->o_sh, go = do_at(c, b, h, i);
  double dd = 0.0;
  for (int64_t d = 0; d < a->Dv; d++) dd += ld(c, c->d_out, go + d) * ld(c, c->out, oo + d);
  *D = dd;
}

static int64_t row_index(const rlx_attention_params* a, int64_t b, int64_t h, int64_t i) {
  return (b * a->H + h) * a->Sq + i;
}

static void get_stats(const bwd* c, int64_t r, double* lse, double* D) {
  if (c->stats) {
    *lse = c->stats[2 * r];
    *D = c->stats[2 * r + 1];
  } else {
    *lse = ld(c, &c->s->in[4], 2 * r);
    *D = ld(c, &c->s->in[4], 2 * r + 1);
  }
}

/* P and dS of (b, h, i) against key j; 0 when masked or the row is empty. */
static int prob_grad(const bwd* c, int64_t b, int64_t h, int64_t i, int64_t kvh, int64_t j,
                     double lse, double D, int want_ds, double* P, double* dS) {
  double sc, dsc;
  if (lse == -INFINITY || !score(c, b, h, i, kvh, j, &sc, &dsc)) return 0;
  *P = exp(sc - lse);
  if (*P == 0.0) return 0;
  if (!want_ds) return 1;
  const rlx_attention_params* a = &c->p->a;
  int64_t go = do_at(c, b, h, i), vo = v_at(c, b, kvh, j);
  double dp = 0.0;
  for (int64_t d = 0; d < a->Dv; d++) dp += ld(c, c->d_out, go + d) * ld(c, c->v, vo + d);
  *dS = *P * (dp - D) * dsc;
  return 1;
}

/* dv (want_dk 0) or dk (want_dk 1) of key j of kv head kvh: sums over the
 * kv head's query heads and their rows. */
static void key_row(const bwd* c, int64_t b, int64_t kvh, int64_t j, int want_dk, double* acc) {
  const rlx_attention_params* a = &c->p->a;
  int64_t group = a->H / a->Hkv, width = want_dk ? a->D : a->Dv;
  for (int64_t d = 0; d < width; d++) acc[d] = 0.0;
  for (int64_t h = kvh * group; h < (kvh + 1) * group; h++)
    for (int64_t i = 0; i < a->Sq; i++) {
      double lse, D, P, dS = 0.0;
      get_stats(c, row_index(a, b, h, i), &lse, &D);
      if (!prob_grad(c, b, h, i, kvh, j, lse, D, want_dk, &P, &dS)) continue;
      if (want_dk) {
        int64_t qo = q_at(c, b, h, i);
        for (int64_t d = 0; d < a->D; d++) acc[d] += dS * ld(c, c->q, qo + d);
      } else {
        int64_t go = do_at(c, b, h, i);
        for (int64_t d = 0; d < a->Dv; d++) acc[d] += P * ld(c, c->d_out, go + d);
      }
    }
}

static void write_row(const bwd* c, const rlx_view* v, int64_t at, const double* acc, int64_t n) {
  for (int64_t d = 0; d < n; d++) st(c, v, at + d, acc[d]);
}

static void phase_stats(const bwd* c, const rlx_view* stats_out) {
  const rlx_attention_params* a = &c->p->a;
  for (int64_t b = 0; b < a->B; b++)
    for (int64_t h = 0; h < a->H; h++)
      for (int64_t i = 0; i < a->Sq; i++) {
        double lse, D;
        row_stats(c, b, h, i, &lse, &D);
        int64_t r = row_index(a, b, h, i);
        if (c->stats) {
          c->stats[2 * r] = lse;
          c->stats[2 * r + 1] = D;
        } else {
          st(c, stats_out, 2 * r, lse);
          st(c, stats_out, 2 * r + 1, D);
        }
      }
}

static void phase_keys(const bwd* c, const rlx_view* grad, int want_dk, double* acc) {
  const rlx_attention_bwd_params* p = c->p;
  for (int64_t b = 0; b < p->a.B; b++)
    for (int64_t kvh = 0; kvh < p->a.Hkv; kvh++)
      for (int64_t j = 0; j < p->a.Sk; j++) {
        key_row(c, b, kvh, j, want_dk, acc);
        int64_t at = want_dk ? b * p->dk_sb + j * p->dk_ss + kvh * p->dk_sh
                             : b * p->dv_sb + j * p->dv_ss + kvh * p->dv_sh;
        write_row(c, grad, at, acc, want_dk ? p->a.D : p->a.Dv);
      }
}

/* dq of every query row; each row recomputes its stats. */
static void phase_dq(const bwd* c, const rlx_view* dq, double* acc) {
  const rlx_attention_bwd_params* p = c->p;
  const rlx_attention_params* a = &p->a;
  for (int64_t b = 0; b < a->B; b++)
    for (int64_t h = 0; h < a->H; h++)
      for (int64_t i = 0; i < a->Sq; i++) {
        int64_t kvh = h / (a->H / a->Hkv);
        double lse, D;
        row_stats(c, b, h, i, &lse, &D);
        for (int64_t d = 0; d < a->D; d++) acc[d] = 0.0;
        for (int64_t j = 0; j < a->Sk; j++) {
          double P, dS;
          if (!prob_grad(c, b, h, i, kvh, j, lse, D, 1, &P, &dS)) continue;
          int64_t ko = k_at(c, b, kvh, j);
          for (int64_t d = 0; d < a->D; d++) acc[d] += dS * ld(c, c->k, ko + d);
        }
        write_row(c, dq, b * p->dq_sb + i * p->dq_ss + h * p->dq_sh, acc, a->D);
      }
}

rlx_status rlx_ref_attention_bwd(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                                 rlx_error* err) {
  (void)ctx;
  const rlx_attention_bwd_params* p = &s->p.attn_bwd;
  const rlx_attention_params* a = &p->a;
  if (a->Hkv <= 0 || a->H % a->Hkv != 0)
    return rlx_fail(err, RLX_INTERNAL, "attention backward node %d: bad head counts", s->node);
  bwd c = {arena, s, p, &s->in[0], &s->in[1], &s->in[2], &s->in[3], &s->in[4], &s->in[5], NULL};
  int64_t width = a->D > a->Dv ? a->D : a->Dv;
  double* acc = malloc((size_t)(width > 0 ? width : 1) * sizeof *acc);
  int full = s->op == RLX_ATTN_BWD_FULL;
  if (full) c.stats = malloc((size_t)(a->B * a->H * a->Sq * 2 + 1) * sizeof *c.stats);
  if (!acc || (full && !c.stats)) {
    free(acc);
    free(c.stats);
    return rlx_fail(err, RLX_RESOURCE_EXHAUSTED, "out of host memory running node %d", s->node);
  }
  switch (s->op) {
    case RLX_ATTN_BWD_STATS: phase_stats(&c, &s->out[0]); break;
    case RLX_ATTN_BWD_DV: phase_keys(&c, &s->out[0], 0, acc); break;
    case RLX_ATTN_BWD_DK: phase_keys(&c, &s->out[0], 1, acc); break;
    case RLX_ATTN_BWD_DQ: phase_dq(&c, &s->out[0], acc); break;
    case RLX_ATTN_BWD_FULL:
      phase_stats(&c, NULL);
      phase_keys(&c, &s->out[2], 0, acc);
      phase_keys(&c, &s->out[1], 1, acc);
      phase_dq(&c, &s->out[0], acc);
      break;
    default:
      free(acc);
      free(c.stats);
      return rlx_fail(err, RLX_INTERNAL, "attention backward node %d: unknown phase %d", s->node,
                      (int)s->op);
  }
  free(acc);
  free(c.stats);
  return RLX_OK;
}
