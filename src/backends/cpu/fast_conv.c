/* CPU fast path of Conv (RLX_K_CONV, forward, f32): per image and group,
 * the windows are unfolded into a column scratch (im2col) and multiplied
 * with the group's weights by the threaded GEMM (gemm.c, or OpenBLAS when
 * chosen); bias, residual and activation follow in one pass over the
 * output. ConvTranspose and half-precision steps are declined and run on
 * the reference (ref_nn.c).
 *
 * The column order is (channel, tap) in both layouts, so the weights
 * [OC, C/g, k...] are used as stored:
 *   channels first: col [Cg*K, L],  y_g [OCg, L] = W_g . col
 *   channels last:  col [L, Cg*K],  y_g [L, OCg] = col . W_g^T (ldc = OC)
 * A 1x1 window with stride 1 and no padding needs no columns: x is already
 * one (with its channel stride as leading dimension). */
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
  int64_t c0;      /* first channel of the group */
  int64_t cg, taps, L;
  float* y;        /* for the epilogue: the whole output */
  const float *bias, *res;
} conv_job;

/* Value of x (image base J->x) at channel c, tap t, output position l, or
 * 0 in the padding. */
static float conv_tap(const conv_job* J, int64_t c, int64_t t, int64_t l) {
  const rlx_conv_params* p = J->p;
  int64_t k1 = p->kernel[1], k2 = p->kernel[2], o1 = p->out[1], o2 = p->out[2];
  int64_t tk[3] = {t / (k1 * k2), t / k2 % k1, t % k2};
  int64_t ol[3] = {l / (o1 * o2), l / o2 % o1, l % o2};
  int64_t at = 0;
  for (int d = 0; d < 3; d++) {
    int64_t i = ol[d] * p->stride[d] - p->pad[d] + tk[d] * p->dilation[d];
    if (i < 0 || i >= p->in[d]) return 0.0f;
    at = at * p->in[d] + i;
  }
  if (p->layout == RLX_CONV_CHANNELS_LAST) return J->x[at * p->C + c];
  return J->x[c * p->in[0] * p->in[1] * p->in[2] + at];
}

/* Channels first: rows (c, t) of col [cg*taps, L]. */
static void col_rows_first(void* ctx, int64_t begin, int64_t end) {
  const conv_job* J = ctx;
  for (int64_t r = begin; r < end; r++) {
    float* row = J->col + r * J->L;
    for (int64_t l = 0; l < J->L; l++) row[l] = conv_tap(J, J->c0 + r / J->taps, r % J->taps, l);
  }
}

/* Channels last: rows l of col [L, cg*taps]. */
static void col_rows_last(void* ctx, int64_t begin, int64_t end) {
  const conv_job* J = ctx;
  int64_t width = J->cg * J->taps;
  for (int64_t l = begin; l < end; l++) {
    float* row = J->col + l * width;
    for (int64_t j = 0; j < width; j++) row[j] = conv_tap(J, J->c0 + j / J->taps, j % J->taps, l);
  }
}

/* y = act(y + bias + residual) over rows of the output: a row is one
 * (n, oc) plane (channels first) or one (n, position) (channels last). */
static void conv_epilogue(void* ctx, int64_t begin, int64_t end) {
  const conv_job* J = ctx;
  const rlx_conv_params* p = J->p;
  int last = p->layout == RLX_CONV_CHANNELS_LAST;
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
  int last = p->layout == RLX_CONV_CHANNELS_LAST;
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
  } else {
    rlx_cpu_parallel_for(f->pool, depth, 1, col_rows_first, J);
  }
  if (last) /* y_g [L, OCg] at (n, 0, g*OCg), ldc OC */
    conv_gemm(f, 0, 1, J->L, ocg, depth, col, ld_col, wg, depth, y + n * J->L * p->OC + g * ocg, p->OC);
  else /* y_g [OCg, L] at (n, g*OCg, 0) */
    conv_gemm(f, 0, 0, ocg, J->L, depth, wg, depth, col, ld_col, y + (n * p->OC + g * ocg) * J->L, J->L);
}

int rlx_cpu_fast_conv(rlx_cpu_fast* f, uint8_t* arena, const rlx_step* s) {
  const rlx_conv_params* p = &s->p.conv;
  if (s->op != RLX_CONV_FORWARD || s->in[0].dtype != RLX_F32 || s->in[1].dtype != RLX_F32 ||
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
  int64_t bytes = J.cg * J.taps * J.L * (int64_t)sizeof(float);
  if (bytes > CONV_MAX_SCRATCH_BYTES) return 0;
  float* scratch = is_pointwise(p) ? NULL : malloc((size_t)bytes + 1);
  if (!is_pointwise(p) && !scratch) return 0;
  J.col = scratch;
  const float* x = (const float*)(arena + s->in[0].offset);
  const float* w = (const float*)(arena + s->in[1].offset);
  float* y = (float*)(arena + s->out[0].offset);
  int64_t image = p->C * p->in[0] * p->in[1] * p->in[2];
  for (int64_t n = 0; n < p->N; n++) {
    J.x = x + n * image;
    for (int64_t g = 0; g < p->groups; g++) conv_image_group(f, &J, w, y, n, g);
  }
  free(scratch);
  if (p->has_bias || p->has_residual || p->act != RLX_ACT_NONE) {
    J.y = y;
    J.bias = p->has_bias ? (const float*)(arena + s->in[2].offset) : NULL;
    J.res = p->has_residual ? (const float*)(arena + s->in[3].offset) : NULL;
    int last = p->layout == RLX_CONV_CHANNELS_LAST;
    rlx_cpu_parallel_for(f->pool, last ? p->N * J.L : p->N * p->OC, 1, conv_epilogue, &J);
  }
  return 1;
}
