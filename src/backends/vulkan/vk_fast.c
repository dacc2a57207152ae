/* Vectorised kernels for bandwidth-bound steps, chosen at encode time from
 * the views the step list already holds (no strides are re-derived here):
 *  - eltwise_vec.comp: BINARY / UNARY / float casts / same-dtype copies with
 *    a dense output and inputs that are dense, one scalar, or broadcast over
 *    leading (i % period) or trailing (i / period) dims;
 *  - rows.comp: softmax over the last axis and LayerNorm / RmsNorm, for rows
 *    of at least RLX_VK_ROWS_MIN elements (default 1024; tests lower it to
 *    run the whole parity suite through this kernel).
 * Both move 4 elements per access, so views must be 4-element aligned and
 * periods / row lengths multiples of 4. Anything else keeps the generic
 * kernels. RLX_VK_NO_FAST=1 turns both off (bisecting). */
#ifdef RLX_HAVE_VULKAN
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "backends/vulkan/shaders/layout.h"
#include "backends/vulkan/vk_internal.h"
#include "ir/dtype.h"

enum { QUADS_PER_GROUP = 256 * 4 }; /* eltwise_vec.comp: 256 lanes x 4 quads */

static int is_half_or_f32(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16; }

/* The view's first byte allows 4-element accesses (16 bytes for f32, 8 for
 * 16-bit types). */
static int quad_aligned(const rlx_view* v) {
  return v->offset % (4 * rlx_dtype_size(v->dtype)) == 0;
}

/* Row-major strides of shape (the output's, after coalescing). */
static void dense_strides(const rlx_view* o, int64_t* ds) {
  int64_t st = 1;
  for (int32_t d = o->rank - 1; d >= 0; d--) {
    ds[d] = st;
    st *= o->shape[d];
  }
}

/* How input v (aligned to out o) is indexed by the output's linear index:
 * EV_DENSE, EV_SCALAR, EV_MOD / EV_DIV with *period, or -1 for anything else. */
static int classify(const rlx_view* o, const rlx_view* v, int64_t* period) {
  int64_t ds[RLX_MAX_RANK];
  dense_strides(o, ds);
  int dense = 1, zero = 1;
  for (int32_t d = 0; d < o->rank; d++) {
    dense &= v->stride[d] == ds[d];
    zero &= v->stride[d] == 0;
  }
  *period = 1;
  if (dense) return EV_DENSE;
  if (zero) return EV_SCALAR;
  for (int32_t k = 1; k < o->rank; k++) {
    int64_t tail = ds[k - 1]; /* elements of dims [k, rank) */
    int mod = 1, div = 1;
    for (int32_t d = 0; d < o->rank; d++) {
      mod &= d < k ? v->stride[d] == 0 : v->stride[d] == ds[d];
      div &= d < k ? v->stride[d] == ds[d] / tail : v->stride[d] == 0;
    }
    *period = tail;
    if (mod) return EV_MOD;
    if (div) return EV_DIV;
  }
  return -1;
}

/* Same-dtype copy moved as 32-bit words: the byte counts must split into
 * words, and broadcast patterns must repeat in whole 16-byte units (or, for
 * 4-byte elements, hold each value over whole quads). Fills mode / period in words. */
static int raw_copy_fits(const rlx_view* views, int64_t n, int* mode, int64_t* period,
                         int64_t* words) {
  uint64_t es = rlx_dtype_size(views[0].dtype);
  if (views[1].dtype != views[0].dtype || (n * (int64_t)es) % 4 != 0) return 0;
  if (views[0].offset % 16 || views[1].offset % 16) return 0;
  if (mode[0] == EV_SCALAR) {
    if (es != 4) return 0;
  } else if (mode[0] == EV_DIV) { /* one value per quad: a quad must not straddle two periods */
    if (es != 4 || period[0] % 4 != 0) return 0;
  } else if (mode[0] == EV_MOD) {
    if ((period[0] * (int64_t)es) % 16 != 0) return 0;
    period[0] = period[0] * (int64_t)es / 4;
  }
  *words = n * (int64_t)es / 4;
  return 1;
}

/* Float path: every operand f32/f16/bf16 and quad aligned, periods whole quads. */
static int float_path_fits(const rlx_view* views, int n_views, const int* mode,
                           const int64_t* period) {
  for (int k = 0; k < n_views; k++)
    if (!is_half_or_f32(views[k].dtype) || !quad_aligned(&views[k])) return 0;
  for (int k = 0; k + 1 < n_views; k++)
    if ((mode[k] == EV_MOD || mode[k] == EV_DIV) && period[k] % 4 != 0) return 0;
  return 1;
}

static int pick_eltwise(const rlx_step* s, const rlx_view* views, int n_views, int32_t* words,
                        int64_t* groups) {
  if (s->kernel != RLX_K_BINARY && s->kernel != RLX_K_UNARY && s->kernel != RLX_K_COPY) return 0;
  if (n_views < 2 || n_views > 4) return 0;
  if (rlx_view_numel(&views[0]) == 0) return 0; /* empty output: classify would divide by a zero extent */
  int64_t ds[RLX_MAX_RANK], p;
  dense_strides(&views[0], ds);
  if (classify(&views[0], &views[0], &p) != EV_DENSE) return 0; /* strided output */
  int mode[3] = {EV_DENSE, EV_DENSE, EV_DENSE};
  int64_t period[3] = {1, 1, 1};
  for (int k = 1; k < n_views; k++)
    if ((mode[k - 1] = classify(&views[0], &views[k], &period[k - 1])) < 0) return 0;
  int64_t n = rlx_view_numel(&views[0]), count = n;
  int raw = 0;
  if (s->kernel == RLX_K_COPY && views[1].dtype == views[0].dtype) {
    if (!raw_copy_fits(views, n, mode, period, &count)) return 0;
    raw = 1;
  } else if (!float_path_fits(views, n_views, mode, period)) {
    return 0;
  }
  if (count > INT32_MAX) return 0;
  int32_t* x = words + RLXVK_X;
  x[EV_N] = (int32_t)count;
  x[EV_RAW] = raw;
  for (int k = 0; k < 3; k++) {
    if (period[k] > INT32_MAX) return 0;
    x[EV_MODE + k] = mode[k];
    x[EV_PERIOD + k] = (int32_t)period[k];
  }
  int64_t quads = (count + 3) / 4;
  *groups = (quads + QUADS_PER_GROUP - 1) / QUADS_PER_GROUP;
  return 1;
}

static int64_t rows_min(void) {
  int64_t m = rlx_env_int(RLX_ENV_VK_ROWS_MIN);
  return m < 4 ? 4 : m;
}

/* A present view rows.comp can read or write 4 elements at a time. */
static int row_view_ok(const rlx_view* v) {
  return v->rank < 0 || (is_half_or_f32(v->dtype) && quad_aligned(v));
}

static int pick_rows(const rlx_step* s) {
  int64_t len;
  if (s->kernel == RLX_K_SOFTMAX) {
    if (s->p.rowop.row.inner != 1) return 0;
    len = s->p.rowop.row.n;
  } else if (s->kernel == RLX_K_NORM) {
    len = s->p.norm.cols;
  } else {
    return 0;
  }
  if (len < rows_min() || len % 4 != 0) return 0;
  for (int32_t i = 0; i < s->n_in; i++)
    if (!row_view_ok(&s->in[i])) return 0;
  for (int32_t i = 0; i < s->n_out; i++)
    if (!row_view_ok(&s->out[i])) return 0;
  return 1;
}

int rlx_vk_pick_fast(const rlx_step* s, const rlx_view* views, int n_views, int32_t* words,
                     int64_t* items, int* per_group, rlx_vk_pipe* pipe) {
  if (rlx_env_flag(RLX_ENV_VK_NO_FAST)) return 0;
  int64_t groups = 0;
  if (pick_eltwise(s, views, n_views, words, &groups)) {
    *pipe = RLX_VK_PIPE_ELTWISE_VEC;
    *per_group = 1;
    *items = groups;
    return 1;
  }
  if (pick_rows(s)) {
    *pipe = RLX_VK_PIPE_ROWS; /* one workgroup per row, as the generic kernels */
    return 1;
  }
  return 0;
}
#else
typedef int rlx_vk_fast_unused;
#endif
