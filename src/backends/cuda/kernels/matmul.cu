/* Own matmul kernels: a tiled fallback for what cuBLASLt does not take (or
 * when it is not installed), any strides and float dtypes, bias + activation
 * fused; and a split-K GEMV for M == 1 (decode), which is bandwidth bound:
 * the weight matrix is read exactly once with 16-byte loads. */
#include "common.cuh"

#define TM 64
#define TN 64
#define TK 16

RLXK_DEV void batch_offsets(const rlxk_mm& p, int64_t bi, int64_t* ao, int64_t* bo, int64_t* co) {
  int64_t rem = bi, a = 0, b = 0, c = 0;
  for (int d = p.batch_rank - 1; d >= 0; d--) {
    int64_t idx = rem % p.batch_shape[d];
    rem /= p.batch_shape[d];
    a += idx * p.a_bs[d];
    b += idx * p.b_bs[d];
    c += idx * p.c_bs[d];
  }
  *ao = a;
  *bo = b;
  *co = c;
}

/* grid: (ceil(N/64), ceil(M/64), batch); 256 threads, 4x4 outputs each. */
extern "C" __global__ void __launch_bounds__(256) rlx_mm_tiled(char* arena, rlxk_mm p, rlxk_state* st) {
  __shared__ float As[TK][TM + 4];
  __shared__ float Bs[TK][TN + 4];
  int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  int64_t m0 = (int64_t)blockIdx.y * TM, n0 = (int64_t)blockIdx.x * TN;
  int64_t ao, bo, co;
  batch_offsets(p, blockIdx.z, &ao, &bo, &co);
  const char* A = at(arena, p.aoff);
  const char* B = at(arena, p.boff);
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  for (int64_t k0 = 0; k0 < p.K; k0 += TK) {
    for (int idx = threadIdx.x; idx < TM * TK; idx += 256) {
      int r = idx / TK, kk = idx % TK; /* A: consecutive threads walk k */
      int64_t m = m0 + r, k = k0 + kk;
      As[kk][r] = (m < p.M && k < p.K) ? ld_f32(A, p.adt, ao + m * p.a_rs + k * p.a_cs) : 0.0f;
      int kb = idx / TN, c = idx % TN; /* B: consecutive threads walk n */
      int64_t kq = k0 + kb, n = n0 + c;
      Bs[kb][c] = (kq < p.K && n < p.N) ? ld_f32(B, p.bdt, bo + kq * p.b_rs + n * p.b_cs) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < TK; kk++) {
      float4 a4 = *(const float4*)&As[kk][ty * 4];
      float4 b4 = *(const float4*)&Bs[kk][tx * 4];
      float av[4] = {a4.x, a4.y, a4.z, a4.w}, bv[4] = {b4.x, b4.y, b4.z, b4.w};
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  char* C = atw(arena, p.coff);
  const char* bias = at(arena, p.biasoff);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    int64_t m = m0 + ty * 4 + i;
    if (m >= p.M) continue;
#pragma unroll
    for (int j = 0; j < 4; j++) {
      int64_t n = n0 + tx * 4 + j;
      if (n >= p.N) continue;
      float x = acc[i][j];
      if (p.has_bias) x += ld_f32(bias, p.biasdt, n);
      st_f32(C, p.cdt, co + m * p.c_rs + n, rlx_act_f32(p.act, x));
    }
  }
}

/* f64 operands: the same walk in double, one output per thread. */
extern "C" __global__ void rlx_mm_f64(char* arena, rlxk_mm p, rlxk_state* st) {
  const char* A = at(arena, p.aoff);
  const char* B = at(arena, p.boff);
  char* C = atw(arena, p.coff);
  int64_t total = p.batch * p.M * p.N;
  for (int64_t t = grid_index(); t < total; t += grid_stride()) {
    int64_t n = t % p.N, m = (t / p.N) % p.M, bi = t / (p.N * p.M);
    int64_t ao, bo, co;
    batch_offsets(p, bi, &ao, &bo, &co);
    double acc = 0.0;
    for (int64_t k = 0; k < p.K; k++)
      acc += ld_f64(A, p.adt, ao + m * p.a_rs + k * p.a_cs) * ld_f64(B, p.bdt, bo + k * p.b_rs + n * p.b_cs);
    if (p.has_bias) acc += ld_f64(at(arena, p.biasoff), p.biasdt, n);
    st_f64(C, p.cdt, co + m * p.c_rs + n, rlx_act_f64(p.act, acc));
  }
}

/* ---------------------------------------------------------------- GEMV */

/* y = act(x·B + bias) for M == 1: grid (column blocks, ksplit), 256 threads
 * = 32 column lanes x 8 row lanes, VEC columns per lane; B is row-major
 * [K, N] (b_cs == 1). One launch instead of partial + finish (the split
 * variant lives in bench/kernels/gemv.cu): every block of a column block
 * stores its K-chunk partial, and the last to arrive (an atomic count per
 * column block, reset by that block so a graph replays clean) sums the
 * partials, adds bias, applies the activation and writes C. (A variant that
 * issued 8 predicated loads per thread before its FMAs ran 27% slower on the
 * H100 than this loop.) */
template <int VEC>
__device__ void gemv_fused(char* arena, const rlxk_mm& p) {
  __shared__ float red[8][32 * VEC];
  __shared__ bool last;
  const int lane = threadIdx.x % 32, rl = threadIdx.x / 32;
  const int64_t n = ((int64_t)blockIdx.x * 32 + lane) * VEC;
  const int64_t chunk = (p.K + p.ksplit - 1) / p.ksplit;
  const int64_t kb = (int64_t)blockIdx.y * chunk, ke = kb + chunk < p.K ? kb + chunk : p.K;
  const float* A = (const float*)at(arena, p.aoff);
  const float* B = (const float*)at(arena, p.boff);
  float acc[VEC];
#pragma unroll
  for (int v = 0; v < VEC; v++) acc[v] = 0.0f;
  if (n < p.N) { /* measured faster than 8 predicated loads per thread */
#pragma unroll 4
    for (int64_t k = kb + rl; k < ke; k += 8) {
      float a = A[k * p.a_cs];
      if constexpr (VEC == 4) {
        float4 b4 = *(const float4*)&B[k * p.b_rs + n];
        acc[0] = fmaf(a, b4.x, acc[0]);
        acc[1] = fmaf(a, b4.y, acc[1]);
        acc[2] = fmaf(a, b4.z, acc[2]);
        acc[3] = fmaf(a, b4.w, acc[3]);
      } else {
        acc[0] = fmaf(a, B[k * p.b_rs + n], acc[0]);
      }
    }
  }
#pragma unroll
  for (int v = 0; v < VEC; v++) red[rl][lane * VEC + v] = acc[v];
  __syncthreads();
  char* C = atw(arena, p.coff);
  const char* bias = at(arena, p.biasoff);
  if (p.ksplit == 1) { /* no other block to wait for */
    if (rl == 0 && n < p.N)
#pragma unroll
      for (int v = 0; v < VEC; v++) {
        float s = 0.0f;
#pragma unroll
        for (int r = 0; r < 8; r++) s += red[r][lane * VEC + v];
        if (n + v < p.N) {
          if (p.has_bias) s += ld_f32(bias, p.biasdt, n + v);
          st_f32(C, p.cdt, n + v, rlx_act_f32(p.act, s));
        }
      }
    return;
  }
  float* part = (float*)(uintptr_t)p.partial;
  if (rl == 0 && n < p.N)
#pragma unroll
    for (int v = 0; v < VEC; v++) {
      float s = 0.0f;
#pragma unroll
      for (int r = 0; r < 8; r++) s += red[r][lane * VEC + v];
      if (n + v < p.N) part[(int64_t)blockIdx.y * p.N + n + v] = s;
    }
  __threadfence(); /* partials visible device-wide before the count */
  __syncthreads();
  unsigned* count = (unsigned*)(uintptr_t)p.counters + blockIdx.x;
  if (threadIdx.x == 0) last = atomicAdd(count, 1u) == (unsigned)p.ksplit - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  /* 8 row lanes split the ksplit partials of this block's columns. */
  float s[VEC];
#pragma unroll
  for (int v = 0; v < VEC; v++) s[v] = 0.0f;
  if (n < p.N)
    for (int ks = rl; ks < p.ksplit; ks += 8)
#pragma unroll
      for (int v = 0; v < VEC; v++)
        if (n + v < p.N) s[v] += __ldcg(&part[(int64_t)ks * p.N + n + v]);
#pragma unroll
  for (int v = 0; v < VEC; v++) red[rl][lane * VEC + v] = s[v];
  __syncthreads();
  if (rl == 0 && n < p.N)
#pragma unroll
    for (int v = 0; v < VEC; v++) {
      float t = 0.0f;
#pragma unroll
      for (int r = 0; r < 8; r++) t += red[r][lane * VEC + v];
      if (n + v < p.N) {
        if (p.has_bias) t += ld_f32(bias, p.biasdt, n + v);
        st_f32(C, p.cdt, n + v, rlx_act_f32(p.act, t));
      }
    }
  if (threadIdx.x == 0) *count = 0u;
}

extern "C" __global__ void __launch_bounds__(256) rlx_gemv_fused_v1(char* a, rlxk_mm p, rlxk_state* s) { gemv_fused<1>(a, p); }
extern "C" __global__ void __launch_bounds__(256) rlx_gemv_fused_v4(char* a, rlxk_mm p, rlxk_state* s) { gemv_fused<4>(a, p); }
