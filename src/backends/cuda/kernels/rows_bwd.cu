/* Row-wise backward kinds (kernels.def NORM_BWD, SOFTMAX_BWD): one block per
 * row, grid-strided, f32 accumulation through common.cuh's block sums
 * (a fixed combining order, so repeated runs give the same bits). */
#include "common.cuh"

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
