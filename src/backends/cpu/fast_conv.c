/* CPU fast path of Conv (RLX_K_CONV, forward, f32): per image and group,
 * the windows are unfolded into a column scratch (im2col) and multiplied
 * with the group's weights by the threaded GEMM (gemm.c, or OpenBLAS when
 * chosen); bias, residual and activation follow in one pass over the
 * output. Half-precision steps are declined and run on the reference
 * (ref_nn.c).
 *
 * Channels first, the columns are in (channel, tap) order, so the weights
 * [OC, C/g, k...] are used as stored: col [Cg*K, L], y_g [OCg, L] = W_g .
 * col, each column row filled along the innermost output dim. Channels
 * last, a column row is (tap, channel) so each tap copies Cg contiguous
 * channels; the group's weights are reordered to match (a small scratch):
 * col [L, K*Cg], y_g [L, OCg] = col . W'_g^T (ldc = OC).
 * A 1x1 window with stride 1 and no padding needs no columns: x is already
 * one (with its channel stride as leading dimension).
 *
 * Depthwise convs (one input channel per group) skip the GEMM: a group's
 * product would be a single row, so the taps are summed directly, along
 * the innermost output dim (channels first) or across the channels, with
 * the weights reordered tap-major (channels last).
 *
 * ConvTranspose runs the other way round (GEMM, then col2im): per image
 * and group, cols [OCg*K, L_in] = W_g^T . x_g with W_g the group's rows
 * [Cg, OCg*K] of w [C, OCg, k...] as stored, then every column entry is
 * added into the output position its tap reaches (zeroed first). */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "base/scalar_math.h"

/* Larger column scratches go to the reference rather than risk the host. */
#define CONV_MAX_SCRATCH_BYTES ((int64_t)1 << 30)

typedef struct conv_job {
  const rlx_conv_params* p;
  const float* x;  /* image n */
  float* col;
  float* wt;       /* channels last: one group's weights in (tap, channel) order */
  int64_t c0;      /* first channel of the group */
  int64_t cg, taps, L;
  float* y;        /* for the epilogue: the whole output */
  const float *bias, *res;
} conv_job;

/* Taps of flat tap index t, and output coordinates of flat position l. */
static void unravel3(int64_t i, int64_t d1, int64_t d2, int64_t* out) {
  out[0] = i / (d1 * d2);
  out[1] = i / d2 % d1;
  out[2] = i % d2;
}

/* Channels first: rows (c, t) of col [cg*taps, L], one run per (o0, o1). */
static void col_rows_first(void* ctx, int64_t begin, int64_t end) {
  const conv_job* J = ctx;
  const rlx_conv_params* p = J->p;
  int64_t area = p->in[0] * p->in[1] * p->in[2];
  for (int64_t r = begin; r < end; r++) {
    int64_t tk[3];
    unravel3(r % J->taps, p->kernel[1], p->kernel[2], tk);
    const float* xc = J->x + (J->c0 + r / J->taps) * area;
    float* out = J->col + r * J->L;
    for (int64_t o0 = 0; o0 < p->out[0]; o0++) {
      int64_t i0 = o0 * p->stride[0] - p->pad[0] + tk[0] * p->dilation[0];
      for (int64_t o1 = 0; o1 < p->out[1]; o1++, out += p->out[2]) {
        int64_t i1 = o1 * p->stride[1] - p->pad[1] + tk[1] * p->dilation[1];
        if (i0 < 0 || i0 >= p->in[0] || i1 < 0 || i1 >= p->in[1]) {
          memset(out, 0, sizeof(float) * (size_t)p->out[2]);
          continue;
        }
        const float* src = xc + (i0 * p->in[1] + i1) * p->in[2];
        int64_t i2 = -p->pad[2] + tk[2] * p->dilation[2];
        for (int64_t o2 = 0; o2 < p->out[2]; o2++, i2 += p->stride[2])
          out[o2] = i2 >= 0 && i2 < p->in[2] ? src[i2] : 0.0f;
      }
    }
  }
}

/* Channels last: rows l of col [L, taps*cg], Cg channels copied per tap. */
static void col_rows_last(void* ctx, int64_t begin, int64_t end) {
  const conv_job* J = ctx;
  const rlx_conv_params* p = J->p;
  size_t run = sizeof(float) * (size_t)J->cg;
  for (int64_t l = begin; l < end; l++) {
    int64_t ol[3];
    unravel3(l, p->out[1], p->out[2], ol);
    float* out = J->col + l * J->taps * J->cg;
    for (int64_t t = 0; t < J->taps; t++, out += J->cg) {
      int64_t tk[3], at = 0;
      unravel3(t, p->kernel[1], p->kernel[2], tk);
      int inside = 1;
      for (int d = 0; d < 3 && inside; d++) {
        int64_t i = ol[d] * p->stride[d] - p->pad[d] + tk[d] * p->dilation[d];
        inside = i >= 0 && i < p->in[d];
        at = at * p->in[d] + i;
      }
      if (inside) memcpy(out, J->x + at * p->C + J->c0, run);
      else memset(out, 0, run);
    }
  }
}

/* Group weights [OCg, Cg, K] reordered to [OCg, K, Cg] (channels last). */
static void weights_tap_major(const float* wg, int64_t ocg, int64_t cg, int64_t taps, float* out) {
  for (int64_t o = 0; o < ocg; o++)
    for (int64_t c = 0; c < cg; c++)
      for (int64_t t = 0; t < taps; t++) out[(o * taps + t) * cg + c] = wg[(o * cg + c) * taps + t];
}

/* y = act(y + bias + residual) over rows of the output: a row is one
 * (n, oc) plane (channels first) or one (n, position) (channels last). */
static void conv_epilogue(void* ctx, int64_t begin, int64_t end) {
  const conv_job* J = ctx;
  const rlx_conv_params* p = J->p;
  int last = rlx_conv_layout_is_last(p->layout);
  int64_t len = last ? p->OC : J->L;
  for (int64_t r = begin; r < end; r++) {
    float* row = J->y + r * len;
    const float* res = J->res ? J->res + r * len : NULL;
    for (int64_t i = 0; i < len; i++) {
      float v = row[i];
      if (J->bias) v += J->bias[last ? i : r % p->OC];
      if (res) v += res[i];
      row[i] = p->act != RLX_ACT_NONE ? rlx_act_f32(p->act, v) : v;
    }
  }
}

static void conv_gemm(rlx_cpu_fast* f, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                      int64_t ldc) {
  if (f->use_blas) rlx_cpu_blas_sgemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
  else rlx_cpu_sgemm(f->pool, ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
}

static int is_pointwise(const rlx_conv_params* p) {
  for (int d = 0; d < 3; d++)
    if (p->kernel[d] != 1 || p->stride[d] != 1 || p->pad[d] || p->pad_end[d]) return 0;
  return 1;
}

/* One image n, group g: columns (unless pointwise), then the GEMM into y. */
static void conv_image_group(rlx_cpu_fast* f, conv_job* J, const float* w, float* y, int64_t n,
                             int64_t g) {
  const rlx_conv_params* p = J->p;
  int last = rlx_conv_layout_is_last(p->layout);
  int64_t area_in = p->in[0] * p->in[1] * p->in[2], ocg = p->OC / p->groups;
  int64_t depth = J->cg * J->taps;
  J->c0 = g * J->cg;
  const float* wg = w + g * ocg * depth;
  const float* col = J->col;
  int64_t ld_col = last ? depth : J->L;
  if (is_pointwise(p)) { /* x itself: [Cg, L] rows of the plane, or [L, C] with offset c0 */
    col = last ? J->x + J->c0 : J->x + J->c0 * area_in;
    ld_col = last ? p->C : area_in;
  } else if (last) {
    rlx_cpu_parallel_for(f->pool, J->L, 16, col_rows_last, J);
    if (p->layout != RLX_CONV_CHANNELS_LAST_OHWI) { /* OHWI weights are tap-major already */
      weights_tap_major(wg, ocg, J->cg, J->taps, J->wt);
      wg = J->wt;
    }
  } else {
    rlx_cpu_parallel_for(f->pool, depth, 1, col_rows_first, J);
  }
  if (last) /* y_g [L, OCg] at (n, 0, g*OCg), ldc OC */
    conv_gemm(f, 0, 1, J->L, ocg, depth, col, ld_col, wg, depth, y + n * J->L * p->OC + g * ocg, p->OC);
  else /* y_g [OCg, L] at (n, g*OCg, 0) */
    conv_gemm(f, 0, 0, ocg, J->L, depth, wg, depth, col, ld_col, y + (n * p->OC + g * ocg) * J->L, J->L);
}

/* ---- depthwise */

typedef struct dw_job {
  const rlx_conv_params* p;
  const float *x, *w; /* w: [OC, taps] (channels first) or [taps, OC] (last) */
  float* y;
  int64_t taps, mult; /* output channels per input channel */
} dw_job;

/* The outputs o in [*lo, *hi) whose input o * s + base lies in [0, in). */
static void valid_run(int64_t n_out, int64_t s, int64_t base, int64_t in, int64_t* lo, int64_t* hi) {
  *lo = base >= 0 ? 0 : (-base + s - 1) / s;
  *hi = base > in - 1 ? 0 : (in - 1 - base) / s + 1;
  if (*hi > n_out) *hi = n_out;
  if (*lo > *hi) *lo = *hi;
}

/* out[o] += w * src[o * s + base] over a valid run (no bounds checks left,
 * so the unit-stride case vectorises). */
static void axpy_run(float* restrict out, const float* restrict src, float w, int64_t s,
                     int64_t base, int64_t lo, int64_t hi) {
  if (s == 1)
    for (int64_t o = lo; o < hi; o++) out[o] += w * src[o + base];
  else
    for (int64_t o = lo; o < hi; o++) out[o] += w * src[o * s + base];
}

/* Channels first: planes (n, oc) of y. */
static void dw_planes(void* ctx, int64_t begin, int64_t end) {
  const dw_job* J = ctx;
  const rlx_conv_params* p = J->p;
  int64_t in_area = p->in[0] * p->in[1] * p->in[2], out_area = p->out[0] * p->out[1] * p->out[2];
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / p->OC, oc = r % p->OC;
    const float* xc = J->x + (n * p->C + oc / J->mult) * in_area;
    float* yp = J->y + r * out_area;
    memset(yp, 0, sizeof(float) * (size_t)out_area);
    for (int64_t t = 0; t < J->taps; t++) {
      int64_t tk[3];
      unravel3(t, p->kernel[1], p->kernel[2], tk);
      float wv = J->w[oc * J->taps + t];
      float* out = yp;
      for (int64_t o0 = 0; o0 < p->out[0]; o0++) {
        int64_t i0 = o0 * p->stride[0] - p->pad[0] + tk[0] * p->dilation[0];
        for (int64_t o1 = 0; o1 < p->out[1]; o1++, out += p->out[2]) {
          int64_t i1 = o1 * p->stride[1] - p->pad[1] + tk[1] * p->dilation[1];
          if (i0 < 0 || i0 >= p->in[0] || i1 < 0 || i1 >= p->in[1]) continue;
          const float* src = xc + (i0 * p->in[1] + i1) * p->in[2];
          int64_t base = -p->pad[2] + tk[2] * p->dilation[2], lo, hi;
          valid_run(p->out[2], p->stride[2], base, p->in[2], &lo, &hi);
          axpy_run(out, src, wv, p->stride[2], base, lo, hi);
        }
      }
    }
  }
}

/* Channels last: output rows (n, position) of OC channels. */
static void dw_rows(void* ctx, int64_t begin, int64_t end) {
  const dw_job* J = ctx;
  const rlx_conv_params* p = J->p;
  int64_t in_area = p->in[0] * p->in[1] * p->in[2], out_area = p->out[0] * p->out[1] * p->out[2];
  for (int64_t r = begin; r < end; r++) {
    int64_t n = r / out_area, ol[3];
    unravel3(r % out_area, p->out[1], p->out[2], ol);
    float* yr = J->y + r * p->OC;
    memset(yr, 0, sizeof(float) * (size_t)p->OC);
    for (int64_t t = 0; t < J->taps; t++) {
      int64_t tk[3], at = 0;
      unravel3(t, p->kernel[1], p->kernel[2], tk);
      int inside = 1;
      for (int d = 0; d < 3 && inside; d++) {
        int64_t i = ol[d] * p->stride[d] - p->pad[d] + tk[d] * p->dilation[d];
        inside = i >= 0 && i < p->in[d];
        at = at * p->in[d] + i;
      }
      if (!inside) continue;
      const float* xr = J->x + (n * in_area + at) * p->C;
      const float* wt = J->w + t * p->OC;
      if (J->mult == 1)
        for (int64_t oc = 0; oc < p->OC; oc++) yr[oc] += xr[oc] * wt[oc];
      else
        for (int64_t oc = 0; oc < p->OC; oc++) yr[oc] += xr[oc / J->mult] * wt[oc];
    }
  }
}

static int fast_depthwise(rlx_cpu_fast* f, const rlx_conv_params* p, int64_t taps, const float* x,
                          const float* w, float* y) {
  int last = rlx_conv_layout_is_last(p->layout);
  dw_job J = {p, x, w, y, taps, p->OC / p->C};
  float* wt = NULL;
  if (last) { /* [OC, taps] -> [taps, OC] */
    wt = malloc(sizeof(float) * (size_t)(p->OC * taps) + 1);
    if (!wt) return 0;
    for (int64_t oc = 0; oc < p->OC; oc++)
      for (int64_t t = 0; t < taps; t++) wt[t * p->OC + oc] = w[oc * taps + t];
    J.w = wt;
  }
  int64_t out_area = p->out[0] * p->out[1] * p->out[2];
  if (last) rlx_cpu_parallel_for(f->pool, p->N * out_area, 16, dw_rows, &J);
  else rlx_cpu_parallel_for(f->pool, p->N * p->OC, 1, dw_planes, &J);
  free(wt);
  return 1;
}

/* ---- transpose */

/* Adds cols [OCg*K, L_in] of image n, group g into y: entry (ocg, t, l)
 * lands at output o = i * stride - pad + t * dilation per dim, if inside.
 * Threaded over ocg, so no two threads add into the same output. */
typedef struct col2im_job {
  const rlx_conv_params* p;
  const float* cols;
  float* y;
  int64_t n, oc0, taps, L_in;
} col2im_job;

static void col2im_rows(void* ctx, int64_t begin, int64_t end) {
  const col2im_job* J = ctx;
  const rlx_conv_params* p = J->p;
  int last = rlx_conv_layout_is_last(p->layout);
  int64_t area = p->out[0] * p->out[1] * p->out[2];
  /* element (n, oc, at) of y, at the flat output position */
  int64_t step = last ? p->OC : 1;
  for (int64_t ocg = begin; ocg < end; ocg++) {
    int64_t oc = J->oc0 + ocg;
    float* yb = last ? J->y + J->n * area * p->OC + oc : J->y + (J->n * p->OC + oc) * area;
    for (int64_t t = 0; t < J->taps; t++) {
      int64_t tk[3];
      unravel3(t, p->kernel[1], p->kernel[2], tk);
      const float* row = J->cols + (ocg * J->taps + t) * J->L_in;
      for (int64_t i0 = 0; i0 < p->in[0]; i0++) {
        int64_t o0 = i0 * p->stride[0] - p->pad[0] + tk[0] * p->dilation[0];
        for (int64_t i1 = 0; i1 < p->in[1]; i1++, row += p->in[2]) {
          int64_t o1 = i1 * p->stride[1] - p->pad[1] + tk[1] * p->dilation[1];
          if (o0 < 0 || o0 >= p->out[0] || o1 < 0 || o1 >= p->out[1]) continue;
          float* dst = yb + (o0 * p->out[1] + o1) * p->out[2] * step;
          int64_t o2 = -p->pad[2] + tk[2] * p->dilation[2];
          for (int64_t i2 = 0; i2 < p->in[2]; i2++, o2 += p->stride[2])
            if (o2 >= 0 && o2 < p->out[2]) dst[o2 * step] += row[i2];
        }
      }
    }
  }
}

static int fast_conv_transpose(rlx_cpu_fast* f, conv_job* J, const float* x, const float* w,
                               float* y) {
  const rlx_conv_params* p = J->p;
  int last = rlx_conv_layout_is_last(p->layout);
  int64_t ocg = p->OC / p->groups, L_in = p->in[0] * p->in[1] * p->in[2];
  int64_t rows = ocg * J->taps, bytes = rows * L_in * (int64_t)sizeof(float);
  if (bytes > CONV_MAX_SCRATCH_BYTES) return 0;
  float* cols = malloc((size_t)bytes + 1);
  if (!cols) return 0;
  memset(y, 0, (size_t)(p->N * p->OC * J->L) * sizeof(float));
  for (int64_t n = 0; n < p->N; n++)
    for (int64_t g = 0; g < p->groups; g++) {
      const float* wg = w + g * J->cg * rows;  /* [Cg, OCg*K] */
      const float* xg = last ? x + n * L_in * p->C + g * J->cg : x + (n * p->C + g * J->cg) * L_in;
      /* cols [OCg*K, L_in] = wg^T [OCg*K, Cg] . x_g [Cg, L_in] */
      if (last) conv_gemm(f, 1, 1, rows, L_in, J->cg, wg, rows, xg, p->C, cols, L_in);
      else conv_gemm(f, 1, 0, rows, L_in, J->cg, wg, rows, xg, L_in, cols, L_in);
      col2im_job C = {p, cols, y, n, g * ocg, J->taps, L_in};
      rlx_cpu_parallel_for(f->pool, ocg, 1, col2im_rows, &C);
    }
  free(cols);
  return 1;
}

int rlx_cpu_fast_conv(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_conv_params* p = &s->p.conv;
  if (s->in[0].dtype != RLX_F32 || s->in[1].dtype != RLX_F32 ||
      s->out[0].dtype != RLX_F32)
    return 0;
  if ((p->has_bias && s->in[2].dtype != RLX_F32) || (p->has_residual && s->in[3].dtype != RLX_F32))
    return 0;
  rlx_range out = rlx_view_range(&s->out[0]);
  for (int32_t i = 0; i < s->n_in; i++) { /* the GEMM writes y while columns still read x */
    if (s->in[i].rank < 0) continue;
    rlx_range r = rlx_view_range(&s->in[i]);
    if (r.begin < out.end && out.begin < r.end) return 0;
  }
  conv_job J;
  memset(&J, 0, sizeof J);
  J.p = p;
  J.cg = p->C / p->groups;
  J.taps = p->kernel[0] * p->kernel[1] * p->kernel[2];
  J.L = p->out[0] * p->out[1] * p->out[2];
  const float* x = (const float*)(arena + s->in[0].offset);
  const float* w = (const float*)(arena + s->in[1].offset);
  float* y = (float*)(arena + s->out[0].offset);
  if (s->op == RLX_CONV_TRANSPOSE) {
    if (!fast_conv_transpose(f, &J, x, w, y)) return 0;
  } else if (J.cg == 1 && p->groups == p->C && p->groups > 1) {
    if (!fast_depthwise(f, p, J.taps, x, w, y)) return 0;
  } else {
    int64_t bytes = J.cg * J.taps * J.L * (int64_t)sizeof(float);
    if (bytes > CONV_MAX_SCRATCH_BYTES) return 0;
    int64_t wbytes = p->OC / p->groups * J.cg * J.taps * (int64_t)sizeof(float);
    float* scratch = is_pointwise(p) ? NULL : malloc((size_t)(bytes + wbytes) + 1);
    if (!is_pointwise(p) && !scratch) return 0;
    J.col = scratch;
    J.wt = scratch ? scratch + bytes / (int64_t)sizeof(float) : NULL;
    int64_t image = p->C * p->in[0] * p->in[1] * p->in[2];
    for (int64_t n = 0; n < p->N; n++) {
      J.x = x + n * image;
      for (int64_t g = 0; g < p->groups; g++) conv_image_group(f, &J, w, y, n, g);
    }
    free(scratch);
  }
  if (p->has_bias || p->has_residual || p->act != RLX_ACT_NONE) {
    J.y = y;
    J.bias = p->has_bias ? (const float*)(arena + s->in[2].offset) : NULL;
    J.res = p->has_residual ? (const float*)(arena + s->in[3].offset) : NULL;
    int last = rlx_conv_layout_is_last(p->layout);
    rlx_cpu_parallel_for(f->pool, last ? p->N * J.L : p->N * p->OC, 1, conv_epilogue, &J);
  }
  return 1;
}

/* ---- weight gradient */

/* d_w of one group: per image n the columns of x (as the forward builds
 * them) times dy, [OCg, Cg*K] = dy_g [OCg, L] . col^T (channels first) or
 * [OCg, K*Cg] = dy_g^T . col [L, K*Cg] (channels last, tap-major: OHWI
 * order, reordered at the end for OIHW weights). Images are summed in
 * order through `part`, so the result does not depend on threads. */
static void wgrad_group(rlx_cpu_fast* f, conv_job* J, const float* x, const float* dy,
                        float* acc, float* part, int64_t g) {
  const rlx_conv_params* p = J->p;
  int last = rlx_conv_layout_is_last(p->layout);
  int64_t ocg = p->OC / p->groups, depth = J->cg * J->taps;
  int64_t image = p->C * p->in[0] * p->in[1] * p->in[2];
  J->c0 = g * J->cg;
  if (p->N == 0) memset(acc, 0, sizeof(float) * (size_t)(ocg * depth)); /* an empty sum */
  for (int64_t n = 0; n < p->N; n++) {
    J->x = x + n * image;
    float* dst = n == 0 ? acc : part;
    if (last) {
      rlx_cpu_parallel_for(f->pool, J->L, 16, col_rows_last, J);
      const float* dyg = dy + n * J->L * p->OC + g * ocg; /* [L, OCg], ld OC */
      conv_gemm(f, 1, 0, ocg, depth, J->L, dyg, p->OC, J->col, depth, dst, depth);
    } else {
      rlx_cpu_parallel_for(f->pool, depth, 1, col_rows_first, J);
      const float* dyg = dy + (n * p->OC + g * ocg) * J->L; /* [OCg, L] */
      conv_gemm(f, 0, 1, ocg, depth, J->L, dyg, J->L, J->col, J->L, dst, depth);
    }
    if (n > 0)
      for (int64_t i = 0; i < ocg * depth; i++) acc[i] += part[i];
  }
}

int rlx_cpu_fast_conv_wgrad(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_conv_params* p = &s->p.conv;
  if (s->in[0].dtype != RLX_F32 || s->in[1].dtype != RLX_F32 || s->out[0].dtype != RLX_F32)
    return 0;
  conv_job J;
  memset(&J, 0, sizeof J);
  J.p = p;
  J.cg = p->C / p->groups;
  J.taps = p->kernel[0] * p->kernel[1] * p->kernel[2];
  J.L = p->out[0] * p->out[1] * p->out[2];
  int64_t ocg = p->OC / p->groups, depth = J.cg * J.taps;
  int64_t col = depth * J.L, w_group = ocg * depth;
  int64_t bytes = (col + 2 * w_group) * (int64_t)sizeof(float);
  if (bytes > CONV_MAX_SCRATCH_BYTES) return 0;
  float* scratch = malloc((size_t)bytes + 1);
  if (!scratch) return 0;
  J.col = scratch;
  float *acc = scratch + col, *part = acc + w_group;
  const float* x = (const float*)(arena + s->in[0].offset);
  const float* dy = (const float*)(arena + s->in[1].offset);
  float* dw = (float*)(arena + s->out[0].offset);
  int tap_major = rlx_conv_layout_is_last(p->layout);
  for (int64_t g = 0; g < p->groups; g++) {
    wgrad_group(f, &J, x, dy, acc, part, g);
    float* dst = dw + g * w_group;
    if (!tap_major || p->layout == RLX_CONV_CHANNELS_LAST_OHWI) {
      memcpy(dst, acc, sizeof(float) * (size_t)w_group);
      continue;
    }
    for (int64_t o = 0; o < ocg; o++) /* [OCg, K, Cg] -> [OCg, Cg, K] */
      for (int64_t t = 0; t < J.taps; t++)
        for (int64_t c = 0; c < J.cg; c++)
          dst[(o * J.cg + c) * J.taps + t] = acc[(o * J.taps + t) * J.cg + c];
  }
  free(scratch);
  return 1;
}
