/* PoolBackward (max / average): one thread per dx (input) element,
 * grid-strided. Each thread sums, in tap order, dy of every window that
 * reads its element (max: only where it is the window's first maximum, as
 * the forward's argmax picks it; average: divided by the window's count),
 * so no atomics and the same bits on every run. The geometry is the shared
 * lowering's rlx_pool_params (src/passes/lower.h), copied into
 * rlxk_pool_bwd. */
#include "common.cuh"

/* x offset of the first maximum of window oc (-1: no tap inside x). */
RLXK_DEV int64_t pbw_argmax(const rlxk_pool_bwd& p, const char* x, const int64_t* oc) {
  float best = -INFINITY;
  int64_t at = -1;
  for (int64_t t = 0; t < p.taps; t++) {
    int64_t rem = t, off = 0;
    bool in_x = true;
    for (int d = p.rank - 1; d >= 0; d--) {
      int64_t k = rem % p.kernel[d];
      rem /= p.kernel[d];
      int64_t i = oc[d] * p.stride[d] - p.pad[d] + k * p.dilation[d];
      if (i < 0 || i >= p.x_shape[d]) in_x = false;
      off += i * p.x_stride[d];
    }
    if (!in_x) continue;
    float v = ld_f32(x, p.xdt, off);
    if (at < 0 || ((v > best || isnan(v)) && !isnan(best))) {
      best = v;
      at = off;
    }
  }
  return at;
}

/* The taps an average window divided by (inside x, or inside x + pads). */
RLXK_DEV int64_t pbw_count(const rlxk_pool_bwd& p, const int64_t* oc) {
  int64_t count = 1;
  for (int d = 0; d < p.rank; d++) {
    int64_t lo = p.count_include_pad ? -p.pad[d] : 0;
    int64_t hi = p.x_shape[d] + (p.count_include_pad ? p.pad_end[d] : 0), c = 0;
    for (int64_t k = 0; k < p.kernel[d]; k++) {
      int64_t i = oc[d] * p.stride[d] - p.pad[d] + k * p.dilation[d];
      c += i >= lo && i < hi;
    }
    count *= c;
  }
  return count;
}

extern "C" __global__ void rlx_pool_bwd(char* arena, rlxk_pool_bwd p, rlxk_state* st) {
  const char* x = at(arena, p.xoff);
  const char* dy = at(arena, p.dyoff);
  char* o = atw(arena, p.ooff);
  for (int64_t e = grid_index(); e < p.n; e += grid_stride()) {
    int64_t ic[RLXK_MAX_RANK], rem = e, self = 0;
    for (int d = p.rank - 1; d >= 0; d--) {
      ic[d] = rem % p.x_shape[d];
      rem /= p.x_shape[d];
      self += ic[d] * p.x_stride[d];
    }
    float acc = 0.0f;
    for (int64_t t = 0; t < p.taps; t++) {
      int64_t r = t, oc[RLXK_MAX_RANK], g_off = 0;
      bool hit = true;
      for (int d = p.rank - 1; d >= 0 && hit; d--) {
        int64_t k = r % p.kernel[d];
        r /= p.kernel[d];
        int64_t num = ic[d] + p.pad[d] - k * p.dilation[d];
        hit = num >= 0 && num % p.stride[d] == 0 && num / p.stride[d] < p.dy_shape[d];
        oc[d] = hit ? num / p.stride[d] : 0;
        g_off += oc[d] * p.dy_stride[d];
      }
      if (!hit) continue;
      float g = ld_f32(dy, p.dydt, g_off);
      if (p.mode == RLXK_WIN_MAX) {
        if (pbw_argmax(p, x, oc) == self) acc += g;
      } else {
        acc += g / (float)pbw_count(p, oc);
      }
    }
    st_f32(o, p.odt, e, acc);
  }
}
