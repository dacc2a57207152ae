/* CPU fast path of PoolBackward (RLX_K_POOL_BACKWARD, f32, channels first):
 * each (n, c) plane is one task that zeroes its dx plane and scatters dy
 * of every window in output order: max into the window's first maximum
 * (the forward's argmax, NaN winning), average over the taps it divided
 * by. Work is outputs x taps instead of the reference's inputs x taps x
 * argmax taps, and a plane belongs to one thread, so every run adds in the
 * same order (the reference sums per input element in tap order: the two
 * differ by float rounding only). Other layouts and dtypes decline to the
 * reference (ref_vision_bwd.c). */
#include <math.h>
#include <string.h>

#include "backends/cpu/cpu.h"

typedef struct pool_bwd_job {
  const rlx_pool_params* p;
  const float *x, *dy;
  float* dx;
  int64_t in[3], out[3], k[3], st[3], dil[3], pad[3], pad_end[3];
  int64_t in_area, out_area;
  int max;
} pool_bwd_job;

/* Taps of a window along one dim inside [lo, hi). */
static int64_t taps_inside(const pool_bwd_job* J, int d, int64_t start, int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t k = 0; k < J->k[d]; k++) {
    int64_t i = start + k * J->dil[d];
    n += i >= lo && i < hi;
  }
  return n;
}

/* The average's divisor for the window starting at s[3]. */
static int64_t window_count(const pool_bwd_job* J, const int64_t* s) {
  int64_t count = 1;
  for (int d = 0; d < 3; d++) {
    int cip = J->p->count_include_pad;
    count *= taps_inside(J, d, s[d], cip ? -J->pad[d] : 0, J->in[d] + (cip ? J->pad_end[d] : 0));
  }
  return count;
}

/* One output window: its gradient g scattered into the plane dx. */
static void scatter_window(const pool_bwd_job* J, const float* x, float* dx, const int64_t* s,
                           float g) {
  int64_t at = -1;
  float best = -INFINITY, share = 0.0f;
  if (!J->max) {
    int64_t count = window_count(J, s);
    if (count == 0) return;
    share = g / (float)count;
  }
  for (int64_t k0 = 0; k0 < J->k[0]; k0++) {
    int64_t i0 = s[0] + k0 * J->dil[0];
    if (i0 < 0 || i0 >= J->in[0]) continue;
    for (int64_t k1 = 0; k1 < J->k[1]; k1++) {
      int64_t i1 = s[1] + k1 * J->dil[1];
      if (i1 < 0 || i1 >= J->in[1]) continue;
      for (int64_t k2 = 0; k2 < J->k[2]; k2++) {
        int64_t i2 = s[2] + k2 * J->dil[2];
        if (i2 < 0 || i2 >= J->in[2]) continue;
        int64_t off = (i0 * J->in[1] + i1) * J->in[2] + i2;
        if (!J->max) {
          dx[off] += share;
          continue;
        }
        float v = x[off];
        if (at < 0 || ((v > best || isnan(v)) && !isnan(best))) best = v, at = off;
      }
    }
  }
  if (J->max && at >= 0) dx[at] += g;
}

static void pool_bwd_planes(void* ctx, int64_t begin, int64_t end) {
  const pool_bwd_job* J = ctx;
  for (int64_t plane = begin; plane < end; plane++) {
    const float* x = J->x + plane * J->in_area;
    const float* dy = J->dy + plane * J->out_area;
    float* dx = J->dx + plane * J->in_area;
    memset(dx, 0, sizeof(float) * (size_t)J->in_area);
    int64_t o = 0;
    for (int64_t o0 = 0; o0 < J->out[0]; o0++)
      for (int64_t o1 = 0; o1 < J->out[1]; o1++)
        for (int64_t o2 = 0; o2 < J->out[2]; o2++, o++) {
          int64_t s[3] = {o0 * J->st[0] - J->pad[0], o1 * J->st[1] - J->pad[1],
                          o2 * J->st[2] - J->pad[2]};
          scatter_window(J, x, dx, s, dy[o]);
        }
  }
}

static int dense(const rlx_view* v) {
  int64_t run = 1;
  for (int32_t d = v->rank - 1; d >= 0; d--) {
    if (v->shape[d] != 1 && v->stride[d] != run) return 0;
    run *= v->shape[d];
  }
  return 1;
}

/* Channels first: dims 0 and 1 carry no window, the rest (1-3) do. */
static int fill_job(const rlx_step* s, pool_bwd_job* J) {
  const rlx_pool_params* p = &s->p.pool;
  const rlx_view *x = &s->in[0], *dy = &s->in[1];
  int32_t r = p->rank, ns = r - 2;
  if (ns < 1 || ns > 3 || x->rank != r || dy->rank != r) return 0;
  for (int d = 0; d < 2; d++)
    if (p->kernel[d] != 1 || p->stride[d] != 1 || p->pad[d] || p->pad_end[d] ||
        x->shape[d] != dy->shape[d])
      return 0;
  J->p = p;
  J->max = s->op == RLX_WIN_MAX;
  J->in_area = J->out_area = 1;
  for (int i = 0; i < 3; i++) { /* the spatial dims right-aligned, leading ones of size 1 */
    int d = i - (3 - ns) + 2, inside = i >= 3 - ns;
    J->in[i] = inside ? x->shape[d] : 1;
    J->out[i] = inside ? dy->shape[d] : 1;
    J->k[i] = inside ? p->kernel[d] : 1;
    J->st[i] = inside ? p->stride[d] : 1;
    J->dil[i] = inside ? p->dilation[d] : 1;
    J->pad[i] = inside ? p->pad[d] : 0;
    J->pad_end[i] = inside ? p->pad_end[d] : 0;
    J->in_area *= J->in[i];
    J->out_area *= J->out[i];
  }
  return 1;
}

int rlx_cpu_fast_pool_backward(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  if (s->in[0].dtype != RLX_F32 || s->in[1].dtype != RLX_F32 || s->out[0].dtype != RLX_F32)
    return 0;
  if (!dense(&s->in[0]) || !dense(&s->in[1]) || !dense(&s->out[0])) return 0;
  rlx_range out = rlx_view_range(&s->out[0]);
  for (int32_t i = 0; i < 2; i++) { /* dx is zeroed while x and dy are still read */
    rlx_range r = rlx_view_range(&s->in[i]);
    if (r.begin < out.end && out.begin < r.end) return 0;
  }
  pool_bwd_job J;
  memset(&J, 0, sizeof J);
  if (!fill_job(s, &J)) return 0;
  J.x = (const float*)(arena + s->in[0].offset);
  J.dy = (const float*)(arena + s->in[1].offset);
  J.dx = (float*)(arena + s->out[0].offset);
  int64_t planes = s->in[0].shape[0] * s->in[0].shape[1];
  rlx_cpu_parallel_for(f->pool, planes, 1, pool_bwd_planes, &J);
  return 1;
}
