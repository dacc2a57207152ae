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

/* Whether every input offset, coordinate (padding and dilation included)
 * and output index of the step fits in int32_t. */
RLXK_DEV bool pool_fits_32(const rlxk_pool& p) {
  const int64_t lim = 0x3fffffff; /* headroom for the sums below */
  int64_t extent = 1;
  if (p.n > lim) return false;
  for (int d = 0; d < p.rank; d++) {
    int64_t reach = p.out_shape[d] * p.stride[d] + p.kernel[d] * p.dilation[d] + p.pad_end[d];
    if (p.in_shape[d] > lim || reach > lim || p.pad[d] > lim) return false;
    extent += (p.in_shape[d] - 1) * p.in_stride[d];
  }
  return extent <= lim;
}

/* The max / average of the window; *at receives the input index of the
 * first maximum (-1 if no tap is inside). Taps run in the reference's order
 * (last dim fastest) as an odometer over the dims whose kernel is wider
 * than 1: a pool lowers every dim as a window dim (N and C with kernel 1),
 * and re-deriving each tap's coordinates by 64-bit division made ResNet-50's
 * two pools cost 1.3 ms of a 6 ms forward on an H200. Kernel-1 dims add a
 * fixed offset and fixed inside / padding flags. */
template <typename I>
RLXK_DEV float pool_window(const rlxk_pool& p, const char* x, const int64_t* oc, int64_t* at) {
  float acc = p.mode == RLXK_WIN_MAX ? -INFINITY : 0.0f;
  int64_t inside = 0, padded = 0;
  I base = 0, start[RLXK_MAX_RANK], k[RLXK_MAX_RANK];
  int wd[RLXK_MAX_RANK], nw = 0;
  bool fixed_in_x = true, fixed_in_pad = true;
  for (int d = 0; d < p.rank; d++) {
    I s = (I)oc[d] * (I)p.stride[d] - (I)p.pad[d];
    if (p.kernel[d] != 1) {
      wd[nw] = d;
      start[nw] = s;
      k[nw++] = 0;
      continue;
    }
    if (s < 0 || s >= (I)p.in_shape[d]) fixed_in_x = false;
    if (s < -(I)p.pad[d] || s >= (I)(p.in_shape[d] + p.pad_end[d])) fixed_in_pad = false;
    if (fixed_in_x) base += s * (I)p.in_stride[d]; /* in range: no overflow in I */
  }
  *at = -1;
  for (int64_t t = 0; t < p.taps; t++) {
    I off = base;
    bool in_x = fixed_in_x, in_pad = fixed_in_pad;
    for (int j = 0; j < nw; j++) {
      int d = wd[j];
      I i = start[j] + k[j] * (I)p.dilation[d];
      if (i < 0 || i >= (I)p.in_shape[d]) in_x = false;
      if (i < -(I)p.pad[d] || i >= (I)(p.in_shape[d] + p.pad_end[d])) in_pad = false;
      if (in_x) off += i * (I)p.in_stride[d];
    }
    for (int j = nw - 1; j >= 0; j--) { /* next tap: last window dim fastest */
      if (++k[j] < (I)p.kernel[wd[j]]) break;
      k[j] = 0;
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
  const bool small = pool_fits_32(p);
  for (int64_t t = grid_index(); t < p.n; t += grid_stride()) {
    int64_t oc[RLXK_MAX_RANK];
    if (p.n <= 0xffffffffLL) { /* 32-bit division where the count allows: several times cheaper */
      uint32_t rem = (uint32_t)t;
      for (int d = p.rank - 1; d >= 0; d--) {
        uint32_t n = (uint32_t)p.out_shape[d];
        oc[d] = rem % n;
        rem /= n;
      }
    } else {
      int64_t rem = t;
      for (int d = p.rank - 1; d >= 0; d--) {
        oc[d] = rem % p.out_shape[d];
        rem /= p.out_shape[d];
      }
    }
    if (p.mode >= RLXK_WIN_PAD_CONSTANT) {
      int64_t src = pool_pad_source(p, oc);
      if (src < 0) st_f32(o, p.odt, t, p.value);
      else copy_elem(o, p.odt, t, x, p.xdt, src);
    } else {
      int64_t at;
      float v = small ? pool_window<int32_t>(p, x, oc, &at) : pool_window<int64_t>(p, x, oc, &at);
      if (p.index_out) st_i64(o, p.odt, t, at);
      else st_f32(o, p.odt, t, v);
    }
  }
}
