/* CPU reference of the vision backward kernels: RLX_K_CONV_WGRAD (the
 * weight gradient of Conv) and RLX_K_POOL_BACKWARD (max / average pooling).
 * Plain loops in double over every float dtype (rlx_load_f64 /
 * rlx_store_f64), one output element at a time and its sum in a fixed
 * order, so the result does not depend on threads or atomics. */
#include <math.h>

#include "backends/cpu/cpu.h"
#include "ir/dtype.h"

static double ld(uint8_t* arena, const rlx_view* v, int64_t i) {
  return rlx_load_f64(arena + v->offset, v->dtype, i);
}
static void st(uint8_t* arena, const rlx_view* v, int64_t i, double x) {
  rlx_store_f64(arena + v->offset, v->dtype, i, x);
}

/* ------------------------------------------------------------------ conv weight gradient */

/* Dense index of (n, c, spatial i[3]) in an activation of `ch` channels and
 * spatial sizes sp[3] in the step's layout. */
static int64_t act_index(const rlx_conv_params* p, int64_t ch, const int64_t* sp, int64_t n,
                         int64_t c, const int64_t* i) {
  int64_t s = (i[0] * sp[1] + i[1]) * sp[2] + i[2], area = sp[0] * sp[1] * sp[2];
  if (rlx_conv_layout_is_last(p->layout)) return (n * area + s) * ch + c;
  return (n * ch + c) * area + s;
}

/* d_w[oc, c, tap t] = sum over n and output positions o of
 * x[n, g*Cg + c, o * stride - pad + t * dilation] * dy[n, oc, o]. */
static double wgrad_sum(uint8_t* arena, const rlx_step* s, int64_t oc, int64_t c,
                        const int64_t* tk) {
  const rlx_conv_params* p = &s->p.conv;
  int64_t cg = p->C / p->groups, ocg = p->OC / p->groups, ch = oc / ocg * cg + c;
  double acc = 0.0;
  for (int64_t n = 0; n < p->N; n++)
    for (int64_t o0 = 0; o0 < p->out[0]; o0++)
      for (int64_t o1 = 0; o1 < p->out[1]; o1++)
        for (int64_t o2 = 0; o2 < p->out[2]; o2++) {
          int64_t o[3] = {o0, o1, o2}, i[3];
          int inside = 1;
          for (int d = 0; d < 3 && inside; d++) {
            i[d] = o[d] * p->stride[d] - p->pad[d] + tk[d] * p->dilation[d];
            inside = i[d] >= 0 && i[d] < p->in[d];
          }
          if (!inside) continue;
          acc += ld(arena, &s->in[0], act_index(p, p->C, p->in, n, ch, i)) *
                 ld(arena, &s->in[1], act_index(p, p->OC, p->out, n, oc, o));
        }
  return acc;
}

static rlx_status ref_conv_wgrad(uint8_t* arena, const rlx_step* s) {
  const rlx_conv_params* p = &s->p.conv;
  int ohwi = p->layout == RLX_CONV_CHANNELS_LAST_OHWI;
  int64_t cg = p->C / p->groups, taps = p->kernel[0] * p->kernel[1] * p->kernel[2];
  for (int64_t oc = 0; oc < p->OC; oc++)
    for (int64_t c = 0; c < cg; c++)
      for (int64_t t = 0; t < taps; t++) {
        int64_t tk[3] = {t / (p->kernel[1] * p->kernel[2]), t / p->kernel[2] % p->kernel[1],
                         t % p->kernel[2]};
        int64_t wi = ohwi ? (oc * taps + t) * cg + c : (oc * cg + c) * taps + t;
        st(arena, &s->out[0], wi, wgrad_sum(arena, s, oc, c, tk));
      }
  return RLX_OK;
}

/* ------------------------------------------------------------------ pool backward */

/* Offset in x of the first maximum of output window oc (-1: no tap inside
 * the input), as the forward's argmax picks it: a NaN wins and the first
 * of equal values is kept. */
static int64_t window_argmax(uint8_t* arena, const rlx_step* s, const int64_t* oc) {
  const rlx_pool_params* p = &s->p.pool;
  const rlx_view* x = &s->in[0];
  double best = -INFINITY;
  int64_t at = -1;
  for (int64_t t = 0; t < p->taps; t++) {
    int64_t rem = t, off = 0;
    int in_x = 1;
    for (int32_t d = p->rank - 1; d >= 0; d--) {
      int64_t k = rem % p->kernel[d];
      rem /= p->kernel[d];
      int64_t i = oc[d] * p->stride[d] - p->pad[d] + k * p->dilation[d];
      if (i < 0 || i >= x->shape[d]) in_x = 0;
      off += i * x->stride[d];
    }
    if (!in_x) continue;
    double v = ld(arena, x, off);
    if (at < 0 || ((v > best || isnan(v)) && !isnan(best))) best = v, at = off;
  }
  return at;
}

/* The taps an average window divided by (the forward's count). */
static int64_t window_count(const rlx_step* s, const int64_t* oc) {
  const rlx_pool_params* p = &s->p.pool;
  const rlx_view* x = &s->in[0];
  int64_t count = 1;
  for (int32_t d = 0; d < p->rank; d++) { /* per dim: the window's taps inside the range */
    int64_t lo = p->count_include_pad ? -p->pad[d] : 0;
    int64_t hi = x->shape[d] + (p->count_include_pad ? p->pad_end[d] : 0);
    int64_t n = 0;
    for (int64_t k = 0; k < p->kernel[d]; k++) {
      int64_t i = oc[d] * p->stride[d] - p->pad[d] + k * p->dilation[d];
      n += i >= lo && i < hi;
    }
    count *= n;
  }
  return count;
}

/* dx[i] = the sum, over taps t in order, of the window o that reads i
 * through t (i = o * stride - pad + t * dilation per dim, o inside dy). */
static double pool_grad_at(uint8_t* arena, const rlx_step* s, const int64_t* ic, int64_t i_off) {
  const rlx_pool_params* p = &s->p.pool;
  const rlx_view* dy = &s->in[1];
  double acc = 0.0;
  for (int64_t t = 0; t < p->taps; t++) {
    int64_t rem = t, oc[RLX_MAX_RANK], dy_off = 0;
    int hit = 1;
    for (int32_t d = p->rank - 1; d >= 0 && hit; d--) {
      int64_t k = rem % p->kernel[d];
      rem /= p->kernel[d];
      int64_t num = ic[d] + p->pad[d] - k * p->dilation[d];
      hit = num >= 0 && num % p->stride[d] == 0 && num / p->stride[d] < dy->shape[d];
      oc[d] = hit ? num / p->stride[d] : 0;
      dy_off += oc[d] * dy->stride[d];
    }
    if (!hit) continue;
    double g = ld(arena, dy, dy_off);
    if (s->op == RLX_WIN_MAX) {
      if (window_argmax(arena, s, oc) == i_off) acc += g;
    } else {
      acc += g / (double)window_count(s, oc);
    }
  }
  return acc;
}

static rlx_status ref_pool_backward(uint8_t* arena, const rlx_step* s) {
  const rlx_view *x = &s->in[0], *dx = &s->out[0];
  int64_t n = rlx_view_numel(dx), ic[RLX_MAX_RANK];
  for (int64_t e = 0; e < n; e++) {
    int64_t rem = e, off = 0;
    for (int32_t d = dx->rank - 1; d >= 0; d--) {
      ic[d] = rem % dx->shape[d];
      rem /= dx->shape[d];
      off += ic[d] * x->stride[d];
    }
    st(arena, dx, e, pool_grad_at(arena, s, ic, off));
  }
  return RLX_OK;
}

rlx_status rlx_ref_vision_bwd(uint8_t* arena, const rlx_step* s, const rlx_run_ctx* ctx,
                              rlx_error* err) {
  (void)ctx;
  switch (s->kernel) {
    case RLX_K_CONV_WGRAD: return ref_conv_wgrad(arena, s);
    case RLX_K_POOL_BACKWARD: return ref_pool_backward(arena, s);
    default:
      return rlx_fail(err, RLX_INTERNAL, "node %d: kernel %d is not a vision backward kernel",
                      s->node, (int)s->kernel);
  }
}
