/* Row-wise backward kinds (kernels.def NORM_BWD, SOFTMAX_BWD): one block per
 * row, grid-strided, f32 accumulation through common.cuh's block sums
 * (a fixed combining order, so repeated runs give the same bits). */
#include "common.cuh"
#include "vec16.cuh"

enum { NB_X, NB_GAMMA, NB_DY };

RLXK_DEV float nb_load(const char* arena, const rlxk_norm& p, int slot, int64_t e) {
  return ld_f32(at(arena, p.off[slot]), p.dt[slot], e);
}

RLXK_DEV float nb_gamma(const char* arena, const rlxk_norm& p, int64_t c) {
  return p.dt[NB_GAMMA] >= 0 ? nb_load(arena, p, NB_GAMMA, c) : 1.0f;
}

/* dx of LayerNorm / RmsNorm rows of `cols` contiguous elements (slots of
 * off / dt: x, gamma (dt -1: absent), dy): the row's statistics are
 * recomputed as the forward computes them, then
 * dx = rstd * (g*dy - mean(g*dy) - xhat * mean(g*dy*xhat)); RmsNorm has
 * no mean(g*dy) term. */
extern "C" __global__ void rlx_norm_bwd(char* arena, rlxk_norm p, rlxk_state* st) {
  __shared__ float red[32];
  char* o = atw(arena, p.ooff);
  float inv_cols = 1.0f / (float)p.cols;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    int64_t base = row * p.cols;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) s += nb_load(arena, p, NB_X, base + c);
    float mean = p.rms ? 0.0f : block_sum(s, red) * inv_cols; /* p.rms is uniform */
    float ss = 0.0f;
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      float d = nb_load(arena, p, NB_X, base + c) - mean;
      ss += d * d;
    }
    float rstd = 1.0f / sqrtf(block_sum(ss, red) * inv_cols + p.eps);
    float sum_gdy = 0.0f, sum_gdy_xhat = 0.0f;
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      float gdy = nb_gamma(arena, p, c) * nb_load(arena, p, NB_DY, base + c);
      float xhat = (nb_load(arena, p, NB_X, base + c) - mean) * rstd;
      sum_gdy += gdy;
      sum_gdy_xhat += gdy * xhat;
    }
    float a = p.rms ? 0.0f : block_sum(sum_gdy, red) * inv_cols;
    float b = block_sum(sum_gdy_xhat, red) * inv_cols;
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      float gdy = nb_gamma(arena, p, c) * nb_load(arena, p, NB_DY, base + c);
      float xhat = (nb_load(arena, p, NB_X, base + c) - mean) * rstd;
      st_f32(o, p.odt, base + c, rstd * (gdy - a - xhat * b));
    }
  }
}

/* The same dx with one warp per row held in registers (rows of at most
 * 32 * VPT vectors of W elements: 1024 columns), for x, dy, dx (and gamma)
 * of one dtype, 16-byte aligned: x and dy are read once, the sums are
 * warp shuffles in a fixed order (no block barriers). */
template <int W, int VPT>
__device__ void norm_bwd_warp(char* arena, const rlxk_norm& p) {
  const int lane = threadIdx.x & 31, dt = p.odt;
  const int64_t nv = p.cols / W, warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  const bool has_gamma = p.dt[NB_GAMMA] >= 0;
  const float inv_cols = 1.0f / (float)p.cols;
  char* o = atw(arena, p.ooff);
  for (int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); row < p.rows;
       row += warps) {
    float x[VPT][W], gdy[VPT][W];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = lane + (int64_t)k * 32;
      if (i >= nv) continue;
      ldv<W>(at(arena, p.off[NB_X]), row * nv + i, dt, x[k]);
      ldv<W>(at(arena, p.off[NB_DY]), row * nv + i, dt, gdy[k]);
      if (has_gamma) {
        float g[W];
        ldv<W>(at(arena, p.off[NB_GAMMA]), i, dt, g);
#pragma unroll
        for (int j = 0; j < W; j++) gdy[k][j] = g[j] * gdy[k][j];
      }
#pragma unroll
      for (int j = 0; j < W; j++) s += x[k][j];
    }
    float mean = p.rms ? 0.0f : warp_sum(s) * inv_cols;
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      if (lane + (int64_t)k * 32 >= nv) continue;
#pragma unroll
      for (int j = 0; j < W; j++) ss += (x[k][j] - mean) * (x[k][j] - mean);
    }
    float rstd = 1.0f / sqrtf(warp_sum(ss) * inv_cols + p.eps);
    float sum_gdy = 0.0f, sum_gdy_xhat = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      if (lane + (int64_t)k * 32 >= nv) continue;
#pragma unroll
      for (int j = 0; j < W; j++) {
        x[k][j] = (x[k][j] - mean) * rstd; /* xhat from here on */
        sum_gdy += gdy[k][j];
        sum_gdy_xhat += gdy[k][j] * x[k][j];
      }
    }
    float a = p.rms ? 0.0f : warp_sum(sum_gdy) * inv_cols;
    float b = warp_sum(sum_gdy_xhat) * inv_cols;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = lane + (int64_t)k * 32;
      if (i >= nv) continue;
      float d[W];
#pragma unroll
      for (int j = 0; j < W; j++) d[j] = rstd * (gdy[k][j] - a - x[k][j] * b);
      stv<W>(o, row * nv + i, dt, d);
    }
  }
}

extern "C" __global__ void rlx_norm_bwd_w4(char* a, rlxk_norm p, rlxk_state* s) { norm_bwd_warp<4, 8>(a, p); }
extern "C" __global__ void rlx_norm_bwd_w8(char* a, rlxk_norm p, rlxk_state* s) { norm_bwd_warp<8, 4>(a, p); }

/* Softmax (op 0: dx = y * (dy - sum(dy*y))) and log-softmax (op 1:
 * dx = dy - exp(y) * sum(dy)) backward over rows of a dense [outer, n,
 * inner] tensor: one block per (outer, inner) row. */
extern "C" __global__ void rlx_softmax_bwd(char* arena, rlxk_softmax_bwd p, rlxk_state* st) {
  __shared__ float red[32];
  const char* y = at(arena, p.yoff);
  const char* dy = at(arena, p.dyoff);
  char* o = atw(arena, p.ooff);
  for (int64_t row = blockIdx.x; row < p.outer * p.inner; row += gridDim.x) {
    int64_t oi = row / p.inner, j = row % p.inner, base = oi * p.n * p.inner + j;
    float acc = 0.0f;
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
      int64_t e = base + i * p.inner;
      float g = ld_f32(dy, p.dydt, e);
      acc += p.op == 1 ? g : g * ld_f32(y, p.ydt, e);
    }
    acc = block_sum(acc, red);
    for (int64_t i = threadIdx.x; i < p.n; i += blockDim.x) {
      int64_t e = base + i * p.inner;
      float yv = ld_f32(y, p.ydt, e), g = ld_f32(dy, p.dydt, e);
      st_f32(o, p.odt, e, p.op == 1 ? g - expf(yv) * acc : yv * (g - acc));
    }
  }
}
