/* LayerNorm / RmsNorm, with the fused residual (+ bias) forms that also write
 * the pre-norm sum. As in ref_nn.c, the sum is rounded to the output dtype
 * before it is normalised, so every backend normalises the value it stored;
 * LayerNorm uses the biased variance about the mean, RmsNorm the mean square. */
#include "common.cuh"
#include "vec16.cuh"

enum { N_X, N_RES, N_BIAS, N_GAMMA, N_BETA };

RLXK_DEV float round_to(int dt, float v) {
  switch (dt) {
    case RLX_F16: return __half2float(__float2half_rn(v));
    case RLX_BF16: return __bfloat162float(__float2bfloat16_rn(v));
    default: return v;
  }
}

/* Pre-norm value of (row, c); writes the sum output on the first pass. */
RLXK_DEV float norm_value(char* arena, const rlxk_norm& p, int64_t row, int64_t c, bool write_sum) {
  int64_t e = row * p.cols + c;
  float v = ld_f32(at(arena, p.off[N_X]), p.dt[N_X], e);
  if (p.dt[N_RES] >= 0) {
    v += ld_f32(at(arena, p.off[N_RES]), p.dt[N_RES], e);
    if (p.dt[N_BIAS] >= 0) v += ld_f32(at(arena, p.off[N_BIAS]), p.dt[N_BIAS], c);
    v = round_to(p.odt, v);
    if (write_sum && p.writes_sum) st_f32(atw(arena, p.ooff2), p.odt2, e, v);
  }
  return v;
}

RLXK_DEV float norm_affine(char* arena, const rlxk_norm& p, int64_t c, float y) {
  if (p.dt[N_GAMMA] >= 0) y *= ld_f32(at(arena, p.off[N_GAMMA]), p.dt[N_GAMMA], c);
  if (p.dt[N_BETA] >= 0) y += ld_f32(at(arena, p.off[N_BETA]), p.dt[N_BETA], c);
  return y;
}

/* Any dtypes and widths: one block per row, three passes. */
extern "C" __global__ void rlx_norm_generic(char* arena, rlxk_norm p, rlxk_state* st) {
  __shared__ double red[32];
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    double s = 0.0;
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) s += norm_value(arena, p, row, c, true);
    double mean = p.rms ? 0.0 : block_sum(s, red) / (double)p.cols;
    double q = 0.0;
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      double d = (double)norm_value(arena, p, row, c, false) - mean;
      q += d * d;
    }
    q = block_sum(q, red) / (double)p.cols;
    float inv = (float)(1.0 / sqrt(q + (double)p.eps)), fmean = (float)mean;
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      float y = (norm_value(arena, p, row, c, false) - fmean) * inv;
      st_f32(atw(arena, p.ooff), p.odt, row * p.cols + c, norm_affine(arena, p, c, y));
    }
  }
}

RLXK_DEV float4 ld4(const char* base, int64_t i) { return ((const float4*)base)[i]; }
RLXK_DEV float4 add4(float4 a, float4 b) { return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w); }

/* All f32, cols % 4 == 0, 16-byte aligned: the row stays in registers, so
 * each element is read once and written once (twice with the sum). */
template <int VPT>
__device__ void norm_f32_reg(char* arena, const rlxk_norm& p) {
  __shared__ float red[32];
  int64_t n4 = p.cols / 4;
  bool res = p.dt[N_RES] >= 0, bias = p.dt[N_BIAS] >= 0, gamma = p.dt[N_GAMMA] >= 0,
       beta = p.dt[N_BETA] >= 0;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    float4 v[VPT];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
      v[k] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (i >= n4) continue;
      v[k] = ld4(at(arena, p.off[N_X]), row * n4 + i);
      if (res) {
        v[k] = add4(v[k], ld4(at(arena, p.off[N_RES]), row * n4 + i));
        if (bias) v[k] = add4(v[k], ld4(at(arena, p.off[N_BIAS]), i));
        if (p.writes_sum) ((float4*)atw(arena, p.ooff2))[row * n4 + i] = v[k];
      }
      s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    float mean = p.rms ? 0.0f : block_sum(s, red) / (float)p.cols;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
      if (i >= n4) continue;
      float a = v[k].x - mean, b = v[k].y - mean, c = v[k].z - mean, d = v[k].w - mean;
      q += (a * a + b * b) + (c * c + d * d);
    }
    q = block_sum(q, red) / (float)p.cols;
    float inv = 1.0f / sqrtf(q + p.eps);
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
      if (i >= n4) continue;
      float4 y = make_float4((v[k].x - mean) * inv, (v[k].y - mean) * inv, (v[k].z - mean) * inv,
                             (v[k].w - mean) * inv);
      if (gamma) {
        float4 g = ld4(at(arena, p.off[N_GAMMA]), i);
        y = make_float4(y.x * g.x, y.y * g.y, y.z * g.z, y.w * g.w);
      }
      if (beta) y = add4(y, ld4(at(arena, p.off[N_BETA]), i));
      ((float4*)atw(arena, p.ooff))[row * n4 + i] = y;
    }
  }
}

extern "C" __global__ void rlx_norm_f32_v1(char* a, rlxk_norm p, rlxk_state* s) { norm_f32_reg<1>(a, p); }
extern "C" __global__ void rlx_norm_f32_v2(char* a, rlxk_norm p, rlxk_state* s) { norm_f32_reg<2>(a, p); }
extern "C" __global__ void rlx_norm_f32_v4(char* a, rlxk_norm p, rlxk_state* s) { norm_f32_reg<4>(a, p); }
extern "C" __global__ void rlx_norm_f32_v8(char* a, rlxk_norm p, rlxk_state* s) { norm_f32_reg<8>(a, p); }

/* f16 / bf16 storage (every slot and output the one dtype), cols % 8 == 0,
 * 16-byte aligned: as norm_f32_reg, eight halves per 16-byte load, f32
 * math. The residual sum is rounded to the dtype before the statistics, as
 * norm_value does. */
template <int VPT>
__device__ void norm_h16_reg(char* arena, const rlxk_norm& p) {
  __shared__ float red[32];
  const int dt = p.odt;
  int64_t n8 = p.cols / 8;
  bool res = p.dt[N_RES] >= 0, bias = p.dt[N_BIAS] >= 0, gamma = p.dt[N_GAMMA] >= 0,
       beta = p.dt[N_BETA] >= 0;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    float v[VPT][8];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
#pragma unroll
      for (int j = 0; j < 8; j++) v[k][j] = 0.0f;
      if (i >= n8) continue;
      ldv<8>(at(arena, p.off[N_X]), row * n8 + i, dt, v[k]);
      if (res) {
        float r[8], b[8];
        ldv<8>(at(arena, p.off[N_RES]), row * n8 + i, dt, r);
        if (bias) ldv<8>(at(arena, p.off[N_BIAS]), i, dt, b);
#pragma unroll
        for (int j = 0; j < 8; j++) v[k][j] = bias ? (v[k][j] + r[j]) + b[j] : v[k][j] + r[j];
        roundv<8>(v[k], dt);
        if (p.writes_sum) stv<8>(atw(arena, p.ooff2), row * n8 + i, dt, v[k]);
      }
#pragma unroll
      for (int j = 0; j < 8; j += 2) s += v[k][j] + v[k][j + 1];
    }
    float mean = p.rms ? 0.0f : block_sum(s, red) / (float)p.cols;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
      if (i >= n8) continue;
#pragma unroll
      for (int j = 0; j < 8; j++) q += (v[k][j] - mean) * (v[k][j] - mean);
    }
    q = block_sum(q, red) / (float)p.cols;
    float inv = 1.0f / sqrtf(q + p.eps);
#pragma unroll
    for (int k = 0; k < VPT; k++) {
      int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
      if (i >= n8) continue;
      float g[8], b[8], y[8];
      if (gamma) ldv<8>(at(arena, p.off[N_GAMMA]), i, dt, g);
      if (beta) ldv<8>(at(arena, p.off[N_BETA]), i, dt, b);
#pragma unroll
      for (int j = 0; j < 8; j++) {
        y[j] = (v[k][j] - mean) * inv;
        if (gamma) y[j] *= g[j];
        if (beta) y[j] += b[j];
      }
      stv<8>(atw(arena, p.ooff), row * n8 + i, dt, y);
    }
  }
}

extern "C" __global__ void rlx_norm_h16_v1(char* a, rlxk_norm p, rlxk_state* s) { norm_h16_reg<1>(a, p); }
extern "C" __global__ void rlx_norm_h16_v2(char* a, rlxk_norm p, rlxk_state* s) { norm_h16_reg<2>(a, p); }
extern "C" __global__ void rlx_norm_h16_v4(char* a, rlxk_norm p, rlxk_state* s) { norm_h16_reg<4>(a, p); }
extern "C" __global__ void rlx_norm_h16_v8(char* a, rlxk_norm p, rlxk_state* s) { norm_h16_reg<8>(a, p); }
