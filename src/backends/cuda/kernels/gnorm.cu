/* Channel-wise norms (GroupNorm, InstanceNorm, LayerNorm2d, BatchNorm):
 * one block per group (o, i) of n elements, inner apart, grid-strided over
 * the groups. Two passes (mean, then the biased variance about it)
 * accumulated in double like the reference; BatchNorm (has_stats) reads the
 * group's mean and var instead. Geometry: rlx_gnorm_params
 * (src/passes/lower.h), copied into rlxk_gnorm. */
#include "common.cuh"

enum { G_X, G_GAMMA, G_BETA, G_MEAN, G_VAR };

RLXK_DEV float gn_in(const char* arena, const rlxk_gnorm& p, int slot, int64_t i) {
  return ld_f32(at(arena, p.off[slot]), p.dt[slot], i);
}

extern "C" __global__ void rlx_gnorm(char* arena, rlxk_gnorm p, rlxk_state* st) {
  __shared__ double red[32];
  int64_t items = p.outer * p.inner;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    int64_t o = item / p.inner, base = o * p.n * p.inner + item % p.inner;
    double mean, var;
    if (p.has_stats) {
      mean = gn_in(arena, p, G_MEAN, o % p.groups);
      var = gn_in(arena, p, G_VAR, o % p.groups);
    } else {
      double s = 0.0;
      for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x)
        s += gn_in(arena, p, G_X, base + j * p.inner);
      mean = block_sum(s, red) / (double)p.n;
      double q = 0.0;
      for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) {
        double d = (double)gn_in(arena, p, G_X, base + j * p.inner) - mean;
        q += d * d;
      }
      var = block_sum(q, red) / (double)p.n;
    }
    float inv = (float)(1.0 / sqrt(var + (double)p.eps)), fmean = (float)mean;
    int64_t cbase = (o % p.groups) * p.n;
    for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) {
      int64_t e = base + j * p.inner, c = (cbase + j) / p.cdiv;
      float y = (gn_in(arena, p, G_X, e) - fmean) * inv;
      if (p.dt[G_GAMMA] >= 0) y *= gn_in(arena, p, G_GAMMA, c);
      if (p.dt[G_BETA] >= 0) y += gn_in(arena, p, G_BETA, c);
      st_f32(atw(arena, p.ooff), p.odt, e, y);
    }
    __syncthreads(); /* red is reused by the next group */
  }
}
