/* PoolBackward (max / average): one thread per dx (input) element,
 * grid-strided. Each thread sums, in tap order, dy of every window that
 * reads its element (max: only where it is the window's first maximum, as
 * the forward's argmax picks it; average: divided by the window's count),
 * so no atomics and the same bits on every run. The geometry is the shared
 * lowering's rlx_pool_params (src/passes/lower.h).
 *
 * Two kernels: rlx_pool_bwd_2d (rlxk_pool_bwd2d) for windows along at most
 * two adjacent dims, every offset in 32 bits -- ResNet's stem and every
 * 2-D pool -- with the element's coordinates from three 32-bit divisions
 * and the window loops unrolled for 3x3 (rlx_pool_bwd_2d_k3); the general
 * rlx_pool_bwd (rlxk_pool_bwd) for any rank, 64-bit. The first recomputed
 * each covering window's argmax with 64-bit divisions per tap and per dim,
 * 18.8 ms for ResNet's 3x3/2 stem pool at B32 (bench/vision_backward.c):
 * the divisions, not the bytes, were the cost. */
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

/* ------------------------------------------------------------------ 2-D windows */

/* Loads for the 2-D kernels: f32 / bf16 / f16 inline, every other dtype
 * through a call, so the unrolled 3x3 loops (81 loads) stay small. */
__device__ __noinline__ float pbw2_ld_other(const char* b, int t, int32_t i) {
  return ld_f32(b, t, i);
}

RLXK_DEV float pbw2_ld(const char* b, int t, int32_t i) {
  if (t == RLX_F32) return ((const float*)b)[i];
  if (t == RLX_BF16) return __bfloat162float(((const __nv_bfloat16*)b)[i]);
  if (t == RLX_F16) return __half2float(((const __half*)b)[i]);
  return pbw2_ld_other(b, t, i);
}

/* x offset (relative to the element's [a, i] base) of the first maximum of
 * window (oh, ow), taps in the reference's order (kh outer); false when no
 * tap lies inside x. K > 0: a K x K window known at compile time. */
template <int K>
RLXK_DEV bool pbw2_argmax(const rlxk_pool_bwd2d& p, const char* x, int32_t base, int32_t oh,
                          int32_t ow, int32_t* at) {
  const int32_t kh_n = K ? K : p.kh, kw_n = K ? K : p.kw;
  float best = -INFINITY;
  bool found = false;
#pragma unroll
  for (int32_t kh = 0; kh < kh_n; kh++) {
    int32_t ih = oh * p.sh - p.ph + kh * p.dh;
    if ((uint32_t)ih >= (uint32_t)p.H) continue;
#pragma unroll
    for (int32_t kw = 0; kw < kw_n; kw++) {
      int32_t iw = ow * p.sw - p.pw + kw * p.dw;
      if ((uint32_t)iw >= (uint32_t)p.W) continue;
      int32_t off = ih * p.xh + iw * p.xw;
      float v = pbw2_ld(x, p.xdt, base + off);
      if (!found || ((v > best || isnan(v)) && !isnan(best))) {
        best = v;
        *at = off;
        found = true;
      }
    }
  }
  return found;
}

/* Taps k < k_n of window o along one dim inside [lo, hi) (avg's divisor). */
RLXK_DEV int32_t pbw2_count(int32_t o, int32_t s, int32_t pad, int32_t dil, int32_t k_n,
                            int32_t lo, int32_t hi) {
  int32_t c = 0;
  for (int32_t k = 0; k < k_n; k++) {
    int32_t i = o * s - pad + k * dil;
    c += i >= lo && i < hi;
  }
  return c;
}

/* The window index o (along one dim) whose tap k reads input coordinate
 * i, or -1: i + pad - k * dil must be a non-negative multiple of the
 * stride below the output size. */
RLXK_DEV int32_t pbw2_window(int32_t i, int32_t k, int32_t s, int32_t pad, int32_t dil,
                             int32_t out) {
  int32_t num = i + pad - k * dil;
  if (num < 0 || num % s != 0) return -1;
  int32_t o = num / s;
  return o < out ? o : -1;
}

template <int K>
RLXK_DEV void pool_bwd_2d(char* arena, const rlxk_pool_bwd2d& p) {
  const char* x = at(arena, p.xoff);
  const char* dy = at(arena, p.dyoff);
  char* o = atw(arena, p.ooff);
  const int32_t kh_n = K ? K : p.kh, kw_n = K ? K : p.kw;
  for (int64_t e = grid_index(); e < p.n; e += grid_stride()) {
    uint32_t r = (uint32_t)e;
    int32_t i = (int32_t)(r % (uint32_t)p.I);
    r /= (uint32_t)p.I;
    int32_t w = (int32_t)(r % (uint32_t)p.W);
    r /= (uint32_t)p.W;
    int32_t h = (int32_t)(r % (uint32_t)p.H), a = (int32_t)(r / (uint32_t)p.H);
    int32_t xbase = a * p.xa + i * p.xi, self = h * p.xh + w * p.xw;
    int32_t gbase = a * p.ga + i * p.gi;
    float acc = 0.0f;
#pragma unroll
    for (int32_t kh = 0; kh < kh_n; kh++) {
      int32_t oh = pbw2_window(h, kh, p.sh, p.ph, p.dh, p.OH);
      if (oh < 0) continue;
#pragma unroll
      for (int32_t kw = 0; kw < kw_n; kw++) {
        int32_t ow = pbw2_window(w, kw, p.sw, p.pw, p.dw, p.OW);
        if (ow < 0) continue;
        float g = pbw2_ld(dy, p.dydt, gbase + oh * p.gh + ow * p.gw);
        if (p.mode == RLXK_WIN_MAX) {
          int32_t best_at;
          if (pbw2_argmax<K>(p, x, xbase, oh, ow, &best_at) && best_at == self) acc += g;
        } else {
          int32_t count = pbw2_count(oh, p.sh, p.ph, p.dh, kh_n, p.h_lo, p.h_hi) *
                          pbw2_count(ow, p.sw, p.pw, p.dw, kw_n, p.w_lo, p.w_hi);
          acc += g / (float)count;
        }
      }
    }
    st_f32(o, p.odt, e, acc);
  }
}

extern "C" __global__ void rlx_pool_bwd_2d(char* arena, rlxk_pool_bwd2d p, rlxk_state* st) {
  pool_bwd_2d<0>(arena, p);
}

/* 3x3 windows (ResNet's stem): the tap loops unrolled. */
extern "C" __global__ void rlx_pool_bwd_2d_k3(char* arena, rlxk_pool_bwd2d p, rlxk_state* st) {
  pool_bwd_2d<3>(arena, p);
}
