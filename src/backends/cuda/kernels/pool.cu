/* Pool (max / average windows) and Pad (constant, reflect, edge): one
 * thread per output element, grid-strided. The geometry is the shared
 * lowering's rlx_pool_params (src/passes/lower.h), copied into rlxk_pool. */
#include "common.cuh"

/* Source element of a padded output element, or -1 for the fill value. */
RLXK_DEV int64_t pool_pad_source(const rlxk_pool& p, const int64_t* oc) {
  int64_t off = 0;
  for (int d = 0; d < p.rank; d++) {
    int64_t n = p.in_shape[d], i = oc[d] - p.pad[d];
    if (i < 0 || i >= n) {
      if (p.mode == RLXK_WIN_PAD_CONSTANT) return -1;
      i = rlx_pad_fold(p.mode - RLXK_WIN_PAD_CONSTANT, i, n); /* the reference's fold */
    }
    off += i * p.in_stride[d];
  }
  return off;
}

/* The max / average of the window; *at receives the input index of the
 * first maximum (-1 if no tap is inside). */
RLXK_DEV float pool_window(const rlxk_pool& p, const char* x, const int64_t* oc, int64_t* at) {
  float acc = p.mode == RLXK_WIN_MAX ? -INFINITY : 0.0f;
  int64_t inside = 0, padded = 0;
  *at = -1;
  for (int64_t t = 0; t < p.taps; t++) {
    int64_t rem = t, off = 0;
    bool in_x = true, in_pad = true;
    for (int d = p.rank - 1; d >= 0; d--) {
      int64_t k = rem % p.kernel[d];
      rem /= p.kernel[d];
      int64_t i = oc[d] * p.stride[d] - p.pad[d] + k * p.dilation[d];
      if (i < 0 || i >= p.in_shape[d]) in_x = false;
      if (i < -p.pad[d] || i >= p.in_shape[d] + p.pad_end[d]) in_pad = false;
      off += i * p.in_stride[d];
    }
    padded += in_pad;
    if (!in_x) continue;
    inside++;
    float v = ld_f32(x, p.xdt, off);
    if (p.mode != RLXK_WIN_MAX) {
      acc += v;
    } else if (*at < 0 || ((v > acc || isnan(v)) && !isnan(acc))) {
      acc = v;
      *at = off;
    }
  }
  if (p.mode == RLXK_WIN_MAX) return acc;
  int64_t count = p.count_include_pad ? padded : inside;
  return count ? acc / (float)count : NAN;
}

extern "C" __global__ void rlx_pool(char* arena, rlxk_pool p, rlxk_state* st) {
  const char* x = at(arena, p.xoff);
  char* o = atw(arena, p.ooff);
  for (int64_t t = grid_index(); t < p.n; t += grid_stride()) {
    int64_t oc[RLXK_MAX_RANK], rem = t;
    for (int d = p.rank - 1; d >= 0; d--) {
      oc[d] = rem % p.out_shape[d];
      rem /= p.out_shape[d];
    }
    if (p.mode >= RLXK_WIN_PAD_CONSTANT) {
      int64_t src = pool_pad_source(p, oc);
      if (src < 0) st_f32(o, p.odt, t, p.value);
      else copy_elem(o, p.odt, t, x, p.xdt, src);
    } else {
      int64_t at;
      float v = pool_window(p, x, oc, &at);
      if (p.index_out) st_i64(o, p.odt, t, at);
      else st_f32(o, p.odt, t, v);
    }
  }
}
