/* Kernel lab: CUDA DequantMatMul decode GEMV, y[m][n] = x[m] . W[n] with W
 * [N, K] stored in a GGUF scheme (src/ir/quant.h), bandwidth bound: W is
 * read once.
 *
 * Variants, per scheme:
 *   0 production: rlx_dqmm_gemv_<scheme>_m1 from src/backends/cuda/kernels/
 *     quant.cu (included below unchanged), x f32, M = 1, launched as
 *     build_dequant_matmul does (cuda_launch.c, repeated in launch_xs);
 *   1 the same with x f16 (the reference uses the rounded x);
 *   2 the same over 8 copies of W in turn (more bytes than the 60 MB L2
 *     holds: every run reads W from HBM; 0 re-reads one W, like ggml's
 *     test-backend-ops perf does);
 *   3 rlx_dqmm_gemv_<scheme>_m8 with M = 8 (several sequences decoding);
 *   4 rlx_dqmm_tiled (the prefill / fallback kernel) at M = 1: what the
 *     GEMV is worth (--check only: it is slow at full size);
 *   5 the first _m1: one W row per warp, so every warp re-reads all of x
 *     (x moved 7x the bytes of a 4-bit W through the caches: ~80 us on
 *     the H200 for every scheme, 5x ggml);
 *   6 prefill, M = 512, x f16: production rlx_dqmm_mma_f16 (tensor cores,
 *     W tiles dequantized into shared memory); rate in GFLOP/s;
 *   7 prefill, M = 512, x f32: production rlx_dqmm_tiled; GFLOP/s.
 *   8 / 9 candidate (lab only; written without a GPU run, session 19):
 *     block-shared x (8 warps x 4 W rows in lockstep, each chunk's x slice
 *     copied once per block by cp.async), M = 1 / M = 8.
 *   10 the previous _m1 (session 19, helper cuq): 4 W rows per warp, x
 *     from global memory per chunk (37-47 us on the H200);
 *   11-13 the production _m1 (x whole in shared memory, dqmm_gemv_xs) with
 *     other rows per warp / stages: (1, 4), (4, 2), (2, 2);
 *   14 / 15 diagnostics (no result): the production _m1 without its W
 *     loads / without its decode.
 *   16 / 17 _l1 (session 21's production): x as 24-bit block fixed point in
 *     three int8 limbs, W's integer codes dotted by dp4a; x f32 / f16.
 *   18 _l1 at up to 4 blocks per SM (launch bounds (256, 4): <= 64
 *     registers), where shared memory allows.
 *   19 / 20 production _s1 (session 22): rlx_dqmm_xlimbs writes x as limbs
 *     once, then blocks of 4 W rows split K among their warps (all of a
 *     warp's chunks in flight); x f32 / f16. Timed as the pair of launches.
 *   21 / 22 _s1 with 2 / 8 W rows a block.
 *   0, 16, 18, 19 and 21 also print the mean of 20 launches back to back
 *   between one event pair (ggml's test-backend-ops times that way).
 *   LAB_VARIANTS=0,16,18 runs only the listed variants.
 * Prefill variants check the first 8 rows of y (the host reference of all
 * 512 would take minutes).
 *
 *   lab_dequant_gemv [--check] [--reps R] [K N]
 *
 * Default: K = 14336, N = 4096 (issue 17's 4096 x 14336), 50 timed runs
 * (CUDA events, median). --check: small odd shapes, one run each. Every
 * variant is compared with a double-precision host loop over the blocks
 * dequantized by quant.h; the exit status is 1 when one exceeds 1e-5
 * (2e-2 for variant 6, whose W tiles are f16).
 * GB/s: bytes of W (+ x, y) per run. us: median microseconds. */
#include <cuda_runtime.h>

#include "lab.h"
#include "quant.cu" /* the production kernels (-I src/backends/cuda/kernels) */

#define TOL 1e-5

#define CUDA_OK(call)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(2);                                                                         \
    }                                                                                  \
  } while (0)

typedef void (*kern)(char*, rlxk_dqmm, rlxk_state*);

/* variant 5: one W row per warp (the first _m1; x re-read per row) */
#define LAB_PF2(S, U, name)                                                               \
  __global__ void __launch_bounds__(128, 8) name(char* arena, rlxk_dqmm p, rlxk_state* st) { \
    dqmm_gemv<S, U, 1, 1>(arena, p);                                                      \
  }
LAB_PF2(RLX_QUANT_Q4_0, 2, lab_pf2_q4_0)
LAB_PF2(RLX_QUANT_Q4_1, 2, lab_pf2_q4_1)
LAB_PF2(RLX_QUANT_Q5_0, 2, lab_pf2_q5_0)
LAB_PF2(RLX_QUANT_Q5_1, 2, lab_pf2_q5_1)
LAB_PF2(RLX_QUANT_Q8_0, 3, lab_pf2_q8_0)
LAB_PF2(RLX_QUANT_Q2_K, 1, lab_pf2_q2_k)
LAB_PF2(RLX_QUANT_Q3_K, 1, lab_pf2_q3_k)
LAB_PF2(RLX_QUANT_Q4_K, 2, lab_pf2_q4_k)
LAB_PF2(RLX_QUANT_Q5_K, 2, lab_pf2_q5_k)
LAB_PF2(RLX_QUANT_Q6_K, 2, lab_pf2_q6_k)

/* ------------------------------------------------ variant 10: the session-19 (helper
 * cuq) _m1, kept for comparison: 4 W rows per warp, 4 warps a block, x
 * loaded from global memory by every warp after its chunk of W arrived. */
#define OLD_R1 4 /* W rows a warp of the variant-10 kernel takes at once */

RLXK_DEV void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

/* M == 1: each warp takes R W rows at once, so a lane's 32 x values (one
 * sub-block) are loaded once per chunk and serve R rows: x is read N / R
 * times instead of N (it was the bottleneck: the one-row kernel moved 7x
 * more x than W bytes through the caches). The rows' chunk bytes go from
 * global straight into shared memory with cp.async, double buffered (two
 * chunks of R rows per warp in flight). wpr warps share a row group. */
template <int S, int R>
__device__ void dqmm_gemv_rows(char* arena, const rlxk_dqmm& p) {
  constexpr int E = gguf<S>::E, B = gguf<S>::B, SPB = E / 32;
  constexpr int CB = DQ_CHUNK / E * B;       /* bytes of a full chunk */
  constexpr int SROW = (CB + 15) / 16 * 16 + 32; /* + alignment slack + sm_u32's overread */
  __shared__ __align__(16) uint8_t stage[4][2][R][SROW];
  __shared__ float part[4][R];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wpr = p.wpr, groups_per_block = 4 / wpr;
  const int64_t n0 = ((int64_t)blockIdx.x * groups_per_block + warp / wpr) * R;
  const int slot = warp % wpr;
  const int64_t chunks = (p.K + DQ_CHUNK - 1) / DQ_CHUNK, subs = p.K / 32;
  const uint8_t* W = (const uint8_t*)at(arena, p.woff);
  const char* X = at(arena, p.xoff);
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = 0.0f;
  /* chunk c of the R rows into buffer b (rows past N: nothing) */
  auto issue = [&](int b, int64_t c) {
    int64_t b0 = c * CB, b1 = b0 + CB < p.row_bytes ? b0 + CB : p.row_bytes;
#pragma unroll
    for (int r = 0; r < R; r++) {
      if (n0 + r >= p.N) break;
      const uint8_t* row = W + (n0 + r) * p.row_bytes;
      uintptr_t a0 = (uintptr_t)(row + b0) & ~(uintptr_t)15;
      int units = (int)(((uintptr_t)(row + b1) - a0 + 15) / 16);
      for (int k = lane; k < units; k += 32)
        cp_async16(&stage[warp][b][r][16 * k], (const uint4*)a0 + k, true);
    }
    cp_async_commit();
  };
  if (n0 < p.N && slot < chunks) {
    issue(0, slot);
    int b = 0;
    for (int64_t c = slot; c < chunks; c += wpr, b ^= 1) {
      if (c + wpr < chunks) {
        issue(b ^ 1, c + wpr);
        cp_async_wait_1();
      } else {
        cp_async_wait_all();
      }
      __syncwarp();
      int64_t sub = c * 32 + lane;
      if (sub < subs) {
        float xv[32];
#pragma unroll
        for (int g = 0; g < 4; g++) load_x8(X, p.xdt, sub * 32 + 8 * g, xv + 8 * g);
        float xs[2] = {0.0f, 0.0f};
        if (gguf<S>::MIN)
#pragma unroll
          for (int j = 0; j < 32; j++) xs[j / 16] += xv[j];
#pragma unroll
        for (int r = 0; r < R; r++) {
          if (n0 + r >= p.N) break;
          int off = (int)((uintptr_t)(W + (n0 + r) * p.row_bytes + c * CB) & 15);
          float q[32], a[2], bb[2];
          decode_sub<S>(&stage[warp][b][r][off + lane / SPB * B], lane % SPB, q, a, bb);
          float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
          for (int j = 0; j < 16; j++) s0 = fmaf(xv[j], q[j], s0);
#pragma unroll
          for (int j = 16; j < 32; j++) s1 = fmaf(xv[j], q[j], s1);
          float t = fmaf(a[0], s0, a[1] * s1);
          if (gguf<S>::MIN) t = fmaf(bb[0], xs[0], fmaf(bb[1], xs[1], t));
          acc[r] += t;
        }
      }
      __syncwarp(); /* the buffer is refilled by the next issue */
    }
  }
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = warp_sum(acc[r]);
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < R; r++) part[warp][r] = acc[r];
  __syncthreads();
  if (slot != 0 || lane >= R || n0 + lane >= p.N) return;
  float v = 0.0f;
  for (int w = 0; w < wpr; w++) v += part[warp + w][lane];
  st_f32(atw(arena, p.ooff), p.odt, n0 + lane, v);
}

#define LAB_OLD(S, name) \
  __global__ void __launch_bounds__(128, 4) name(char* arena, rlxk_dqmm p, rlxk_state* st) { \
    dqmm_gemv_rows<S, OLD_R1>(arena, p); \
  }
LAB_OLD(RLX_QUANT_Q4_0, lab_old_q4_0)
LAB_OLD(RLX_QUANT_Q4_1, lab_old_q4_1)
LAB_OLD(RLX_QUANT_Q5_0, lab_old_q5_0)
LAB_OLD(RLX_QUANT_Q5_1, lab_old_q5_1)
LAB_OLD(RLX_QUANT_Q8_0, lab_old_q8_0)
LAB_OLD(RLX_QUANT_Q2_K, lab_old_q2_k)
LAB_OLD(RLX_QUANT_Q3_K, lab_old_q3_k)
LAB_OLD(RLX_QUANT_Q4_K, lab_old_q4_k)
LAB_OLD(RLX_QUANT_Q5_K, lab_old_q5_k)
LAB_OLD(RLX_QUANT_Q6_K, lab_old_q6_k)

/* variants 11-13: the production _m1 structure (dqmm_gemv_xs) with other
 * rows per warp R / stages ST */
template <int S, int R, int ST>
__global__ void __launch_bounds__(32 * DQ_WARPS, 2) lab_xs(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_gemv_xs<S, R, ST, false>(arena, p);
}
/* variants 16 / 17: _l1, the session-21 M = 1 default (x staged whole in
 * shared memory as limbs per block, a warp per 2-row group over all of K);
 * replaced by _s1 in session 22 */
template <int S>
__global__ void __launch_bounds__(32 * DQ_WARPS, 2) lab_l1(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_gemv_xs<S, DQ_R1, dq_stages<S>(), true>(arena, p);
}
/* variant 18: the production _l1 compiled for 4 blocks per SM (at most
 * 64 registers a thread) and launched with up to 4 per SM where shared
 * memory allows (K <= ~4096): more W chunks in flight per SM */
template <int S>
__global__ void __launch_bounds__(32 * DQ_WARPS, 4) lab_l1_occ4(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_gemv_xs<S, DQ_R1, dq_stages<S>(), true>(arena, p);
}
/* A lab kernel template's instances in SCHEMES' order. */
#define PER_SCHEME(k)                                                                    \
  {k<RLX_QUANT_Q4_0>, k<RLX_QUANT_Q4_1>, k<RLX_QUANT_Q5_0>, k<RLX_QUANT_Q5_1>, k<RLX_QUANT_Q8_0>, \
   k<RLX_QUANT_Q2_K>, k<RLX_QUANT_Q3_K>, k<RLX_QUANT_Q4_K>, k<RLX_QUANT_Q5_K>, k<RLX_QUANT_Q6_K>}
static const kern OCC4[] = PER_SCHEME(lab_l1_occ4);
/* its dynamic shared memory (cuda_launch.c dqmm_m1_smem for R = DQ_R1 and
 * the production stages) */
static int xs_smem(int E, int B, int64_t K, int R, int ST, int limbs = 0) {
  int cb = DQ_CHUNK / E * B, srow = (cb + 15) / 16 * 16 + 32;
  return (int)((K + DQ_CHUNK - 1) / DQ_CHUNK * (limbs ? DQ_LIMB_CHUNK : DQ_CHUNK * 4)) +
         DQ_WARPS * ST * R * srow;
}
/* variant 21: _s1 with 2 W rows a block */
template <int S>
__global__ void __launch_bounds__(256) lab_s1_r2(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_gemv_split<S, 2>(arena, p);
}
static const kern S1R2[] = PER_SCHEME(lab_s1_r2);
/* variant 22: _s1 with 8 W rows a block (x reused by twice the rows) */
template <int S>
__global__ void __launch_bounds__(256) lab_s1_r8(char* arena, rlxk_dqmm p, rlxk_state* st) {
  dqmm_gemv_split<S, 8>(arena, p);
}
static const kern S1R8[] = PER_SCHEME(lab_s1_r8);
/* The _s1 launch (cuda_launch.c build_dequant_matmul): x to limbs in the
 * buffer at p.panel, then ceil(N / rows) blocks of rlx_dqmm_s1_warps(K)
 * warps. */
static void launch_s1(kern k, int E, int B, int rows, const rlxk_dqmm& p, char* arena) {
  rlx_dqmm_xlimbs<<<(unsigned)(rlx_dqmm_chunks(p.K) * 2), 128>>>(arena, p, NULL);
  int smem = (int)(rlx_dqmm_s1_smem(E, B, p.K) / RLX_DQMM_S1_ROWS(DQ_CHUNK / E * B) * rows);
  cudaFuncSetAttribute((const void*)k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  k<<<(unsigned)((p.N + rows - 1) / rows), 32 * rlx_dqmm_s1_warps(p.K), smem>>>(arena, p, NULL);
}

/* variants 14 / 15 (diagnostics, results meaningless): the production _m1
 * without its W loads (decode + FMAs on stale shared memory) / without its
 * decode (W streamed, one byte a lane summed): which half sets the time. */
template <int S, int MODE>
__global__ void __launch_bounds__(32 * DQ_WARPS, 2) lab_diag_xs(char* arena, rlxk_dqmm p, rlxk_state* st_) {
  constexpr int R = DQ_R1, ST = dq_stages<S>();
  constexpr int E = gguf<S>::E, B = gguf<S>::B, SPB = E / 32, CB = DQ_CHUNK / E * B;
  constexpr int SROW = dq_srow<S>();
  extern __shared__ __align__(16) uint8_t dq_dsm[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t chunks = (p.K + DQ_CHUNK - 1) / DQ_CHUNK, subs = p.K / 32;
  const int64_t groups = (p.N + R - 1) / R, gstride = (int64_t)gridDim.x * DQ_WARPS;
  const int64_t g0 = (int64_t)blockIdx.x * DQ_WARPS + warp;
  const int64_t items = g0 < groups ? (groups - 1 - g0) / gstride + 1 : 0; /* row groups */
  const int total = (int)(items * chunks), nc = (int)chunks;
  const uint8_t* W = (const uint8_t*)at(arena, p.woff);
  float4* xs = (float4*)dq_dsm;
  uint8_t* ring = dq_dsm + chunks * DQ_CHUNK * 4 + (size_t)warp * ST * R * SROW;
  /* item t (row group g0 + (t / chunks) * gstride, chunk t % chunks) into
   * ring slot t % ST; one commit group per call, empty past the end */
  auto issue = [&](int t) {
    if (t < total) {
      int64_t n0 = (g0 + t / nc * gstride) * R, c = t % nc;
      int64_t b0 = c * CB, b1 = b0 + CB < p.row_bytes ? b0 + CB : p.row_bytes;
      uint8_t* dst = ring + (int)(t % ST) * R * SROW;
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (n0 + r >= p.N) break;
        const uint8_t* row = W + (n0 + r) * p.row_bytes;
        uintptr_t a0 = (uintptr_t)(row + b0) & ~(uintptr_t)15;
        int units = (int)(((uintptr_t)(row + b1) - a0 + 15) / 16);
        if (MODE != 1)
          for (int k = lane; k < units; k += 32) cp_async16(dst + r * SROW + 16 * k, (const uint4*)a0 + k, true);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int t = 0; t < ST - 1; t++) issue(t); /* W in flight while x is staged */
  {
    const char* X = at(arena, p.xoff);
    for (int64_t u = threadIdx.x; u < chunks * (DQ_CHUNK / 4); u += blockDim.x) {
      int64_t c = u / (DQ_CHUNK / 4), q = u % (DQ_CHUNK / 4), k = 4 * u;
      xs[c * (DQ_CHUNK / 4) + (q % 8) * 32 + q / 8] = k < p.K ? load_x4(X, p.xdt, k) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  __syncthreads();
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = 0.0f;
  for (int t = 0; t < total; t++) {
    issue(t + ST - 1);
    cp_async_wait<ST - 1>(); /* item t's group is complete */
    __syncwarp();
    const int64_t n0 = (g0 + t / nc * gstride) * R, c = t % nc, sub = c * 32 + lane;
    const uint8_t* st = ring + (int)(t % ST) * R * SROW;
    if (sub < subs) {
      float xv[32];
#pragma unroll
      for (int g = 0; g < 8; g++) {
        float4 v = xs[c * (DQ_CHUNK / 4) + g * 32 + lane];
        xv[4 * g] = v.x, xv[4 * g + 1] = v.y, xv[4 * g + 2] = v.z, xv[4 * g + 3] = v.w;
      }
      float xsum[2] = {0.0f, 0.0f};
      if (gguf<S>::MIN)
#pragma unroll
        for (int j = 0; j < 32; j++) xsum[j / 16] += xv[j];
#pragma unroll
      for (int r = 0; r < R; r++) {
        if (n0 + r >= p.N) break;
        int off = (int)((uintptr_t)(W + (n0 + r) * p.row_bytes + c * CB) & 15);
        if (MODE == 2) { /* W bytes only */
          acc[r] += (float)st[r * SROW + lane];
          continue;
        }
        float q[32], a[2], bb[2];
        decode_sub<S>(st + r * SROW + off + lane / SPB * B, lane % SPB, q, a, bb);
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int j = 0; j < 16; j++) s0 = fmaf(xv[j], q[j], s0);
#pragma unroll
        for (int j = 16; j < 32; j++) s1 = fmaf(xv[j], q[j], s1);
        float v = fmaf(a[0], s0, a[1] * s1);
        if (gguf<S>::MIN) v = fmaf(bb[0], xsum[0], fmaf(bb[1], xsum[1], v));
        acc[r] += v;
      }
    }
    __syncwarp(); /* slot t % ST is refilled by the next issue */
    if (c == chunks - 1) {
#pragma unroll
      for (int r = 0; r < R; r++) {
        float v = warp_sum(acc[r]);
        if (lane == 0 && n0 + r < p.N) st_f32(atw(arena, p.ooff), p.odt, n0 + r, v);
        acc[r] = 0.0f;
      }
    }
  }
  cp_async_wait<0>();
}

typedef struct xs_row {
  void (*k[5])(char*, rlxk_dqmm, rlxk_state*);
} xs_row;
#define XSV(S) {{lab_xs<S, 1, 4>, lab_xs<S, 4, 2>, lab_xs<S, 2, 2>, lab_diag_xs<S, 1>, lab_diag_xs<S, 2>}}
static const int XS_R[5] = {1, 4, 2, DQ_R1, DQ_R1}, XS_ST[5] = {4, 2, 2, 0, 0}; /* 0: dq_stages */
static const xs_row XSS[] = {XSV(RLX_QUANT_Q4_0), XSV(RLX_QUANT_Q4_1), XSV(RLX_QUANT_Q5_0),
                             XSV(RLX_QUANT_Q5_1), XSV(RLX_QUANT_Q8_0), XSV(RLX_QUANT_Q2_K),
                             XSV(RLX_QUANT_Q3_K), XSV(RLX_QUANT_Q4_K), XSV(RLX_QUANT_Q5_K),
                             XSV(RLX_QUANT_Q6_K)};

typedef struct scheme_row {
  int scheme;
  const char* name;
  int E, B;     /* block elements, bytes */
  int f16[2];   /* offsets of the block's f16 fields, -1 none */
  kern m1, m8, pf2, old, l1, s1;
} scheme_row;

static const scheme_row SCHEMES[] = {
    {RLX_QUANT_Q4_0, "q4_0", 32, 18, {0, -1}, rlx_dqmm_gemv_q4_0_m1, rlx_dqmm_gemv_q4_0_m8,
     lab_pf2_q4_0, lab_old_q4_0, lab_l1<RLX_QUANT_Q4_0>,
     rlx_dqmm_gemv_q4_0_s1},
    {RLX_QUANT_Q4_1, "q4_1", 32, 20, {0, 2}, rlx_dqmm_gemv_q4_1_m1, rlx_dqmm_gemv_q4_1_m8,
     lab_pf2_q4_1, lab_old_q4_1, lab_l1<RLX_QUANT_Q4_1>,
     rlx_dqmm_gemv_q4_1_s1},
    {RLX_QUANT_Q5_0, "q5_0", 32, 22, {0, -1}, rlx_dqmm_gemv_q5_0_m1, rlx_dqmm_gemv_q5_0_m8,
     lab_pf2_q5_0, lab_old_q5_0, lab_l1<RLX_QUANT_Q5_0>,
     rlx_dqmm_gemv_q5_0_s1},
    {RLX_QUANT_Q5_1, "q5_1", 32, 24, {0, 2}, rlx_dqmm_gemv_q5_1_m1, rlx_dqmm_gemv_q5_1_m8,
     lab_pf2_q5_1, lab_old_q5_1, lab_l1<RLX_QUANT_Q5_1>,
     rlx_dqmm_gemv_q5_1_s1},
    {RLX_QUANT_Q8_0, "q8_0", 32, 34, {0, -1}, rlx_dqmm_gemv_q8_0_m1, rlx_dqmm_gemv_q8_0_m8,
     lab_pf2_q8_0, lab_old_q8_0, lab_l1<RLX_QUANT_Q8_0>,
     rlx_dqmm_gemv_q8_0_s1},
    {RLX_QUANT_Q2_K, "q2_k", 256, 84, {80, 82}, rlx_dqmm_gemv_q2_k_m1, rlx_dqmm_gemv_q2_k_m8,
     lab_pf2_q2_k, lab_old_q2_k, lab_l1<RLX_QUANT_Q2_K>,
     rlx_dqmm_gemv_q2_k_s1},
    {RLX_QUANT_Q3_K, "q3_k", 256, 110, {108, -1}, rlx_dqmm_gemv_q3_k_m1, rlx_dqmm_gemv_q3_k_m8,
     lab_pf2_q3_k, lab_old_q3_k, lab_l1<RLX_QUANT_Q3_K>,
     rlx_dqmm_gemv_q3_k_s1},
    {RLX_QUANT_Q4_K, "q4_k", 256, 144, {0, 2}, rlx_dqmm_gemv_q4_k_m1, rlx_dqmm_gemv_q4_k_m8,
     lab_pf2_q4_k, lab_old_q4_k, lab_l1<RLX_QUANT_Q4_K>,
     rlx_dqmm_gemv_q4_k_s1},
    {RLX_QUANT_Q5_K, "q5_k", 256, 176, {0, 2}, rlx_dqmm_gemv_q5_k_m1, rlx_dqmm_gemv_q5_k_m8,
     lab_pf2_q5_k, lab_old_q5_k, lab_l1<RLX_QUANT_Q5_K>,
     rlx_dqmm_gemv_q5_k_s1},
    {RLX_QUANT_Q6_K, "q6_k", 256, 210, {208, -1}, rlx_dqmm_gemv_q6_k_m1, rlx_dqmm_gemv_q6_k_m8,
     lab_pf2_q6_k, lab_old_q6_k, lab_l1<RLX_QUANT_Q6_K>,
     rlx_dqmm_gemv_q6_k_s1},
};
#define N_SCHEMES (int)(sizeof SCHEMES / sizeof SCHEMES[0])
#define COPIES 8
#define XR 512 /* rows of x held (the prefill variants) */

/* ------------------------------------------------ variants 8 / 9: x shared by the block
 * (candidate, not yet run on a GPU when written): 8 warps x 4 W rows walk
 * the chunks in lockstep; each chunk's x slice (MR rows x 1024 floats) is
 * copied once per block by cp.async beside the W bytes, stored transposed
 * (float4 q of sub-block l at slot q * 32 + l) so a warp's 16-byte reads
 * are conflict free. x then crosses L2 N / 32 times instead of N / 4, and
 * its loads are in flight with W's (double buffered). Dynamic shared
 * memory: 2 x (MR x 4 KB + 8 x 4 x SROW). */
#define BX_WARPS 8
#define BX_R 4
template <int S>
__host__ __device__ constexpr int bx_srow() {
  return (DQ_CHUNK / gguf<S>::E * gguf<S>::B + 15) / 16 * 16 + 32;
}
template <int S, int MR>
__host__ __device__ constexpr int bx_smem() {
  return 2 * (MR * DQ_CHUNK * 4 + BX_WARPS * BX_R * bx_srow<S>());
}

template <int S, int MR>
__global__ void __launch_bounds__(256) lab_gemv_bx(char* arena, rlxk_dqmm p, rlxk_state* st) {
  constexpr int E = gguf<S>::E, B = gguf<S>::B, SPB = E / 32, CB = DQ_CHUNK / E * B;
  constexpr int SROW = bx_srow<S>(), XB = MR * DQ_CHUNK * 4, WB = BX_WARPS * BX_R * SROW;
  extern __shared__ __align__(16) uint8_t dsm[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n0 = ((int64_t)blockIdx.x * BX_WARPS + warp) * BX_R;
  const int64_t chunks = (p.K + DQ_CHUNK - 1) / DQ_CHUNK, subs = p.K / 32;
  const uint8_t* W = (const uint8_t*)at(arena, p.woff);
  const float* X = (const float*)at(arena, p.xoff);
  auto xbuf = [&](int b) { return (float4*)(dsm + b * (XB + WB)); };
  auto wrow = [&](int b, int r) { return dsm + b * (XB + WB) + XB + (warp * BX_R + r) * SROW; };
  float acc[BX_R][MR];
#pragma unroll
  for (int r = 0; r < BX_R; r++)
#pragma unroll
    for (int m = 0; m < MR; m++) acc[r][m] = 0.0f;
  auto issue = [&](int b, int64_t c) {
    int64_t b0 = c * CB, b1 = b0 + CB < p.row_bytes ? b0 + CB : p.row_bytes;
#pragma unroll
    for (int r = 0; r < BX_R; r++) {
      if (n0 + r >= p.N) break;
      const uint8_t* row = W + (n0 + r) * p.row_bytes;
      uintptr_t a0 = (uintptr_t)(row + b0) & ~(uintptr_t)15;
      int units = (int)(((uintptr_t)(row + b1) - a0 + 15) / 16);
      for (int k = lane; k < units; k += 32) cp_async16(wrow(b, r) + 16 * k, (const uint4*)a0 + k, true);
    }
    /* x: float4 u of row m (k = c * 1024 + 4u) -> slot (u % 8) * 32 + u / 8 */
    for (int t = threadIdx.x; t < MR * DQ_CHUNK / 4; t += 256) {
      int m = t / (DQ_CHUNK / 4), u = t % (DQ_CHUNK / 4);
      int64_t k = c * DQ_CHUNK + 4 * u;
      bool ok = m < p.M && k < p.K;
      cp_async16(xbuf(b) + m * (DQ_CHUNK / 4) + (u % 8) * 32 + u / 8,
                 ok ? (const void*)(X + m * p.K + k) : (const void*)X, ok);
    }
    cp_async_commit();
  };
  issue(0, 0);
  int b = 0;
  for (int64_t c = 0; c < chunks; c++, b ^= 1) {
    if (c + 1 < chunks) {
      issue(b ^ 1, c + 1);
      cp_async_wait_1();
    } else {
      cp_async_wait_all();
    }
    __syncthreads();
    int64_t sub = c * 32 + lane;
    if (sub < subs && n0 < p.N) {
#pragma unroll
      for (int r = 0; r < BX_R; r++) {
        if (n0 + r >= p.N) break;
        int off = (int)((uintptr_t)(W + (n0 + r) * p.row_bytes + c * CB) & 15);
        float q[32], a[2], bb[2];
        decode_sub<S>(wrow(b, r) + off + lane / SPB * B, lane % SPB, q, a, bb);
#pragma unroll
        for (int m = 0; m < MR; m++) {
          if (m >= p.M) break;
          const float4* xs = xbuf(b) + m * (DQ_CHUNK / 4);
          float s0 = 0.0f, s1 = 0.0f, x0 = 0.0f, x1 = 0.0f;
#pragma unroll
          for (int g = 0; g < 8; g++) {
            float4 v = xs[g * 32 + lane];
            float xv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
              if (g < 4) s0 = fmaf(xv[j], q[4 * g + j], s0), x0 += xv[j];
              else s1 = fmaf(xv[j], q[4 * g + j], s1), x1 += xv[j];
            }
          }
          float t = fmaf(a[0], s0, a[1] * s1);
          if (gguf<S>::MIN) t = fmaf(bb[0], x0, fmaf(bb[1], x1, t));
          acc[r][m] += t;
        }
      }
    }
    __syncthreads(); /* buffer b is refilled by the next issue */
  }
#pragma unroll
  for (int r = 0; r < BX_R; r++)
#pragma unroll
    for (int m = 0; m < MR; m++) {
      float v = warp_sum(acc[r][m]);
      if (lane == 0 && n0 + r < p.N && m < p.M) st_f32(atw(arena, p.ooff), p.odt, m * p.N + n0 + r, v);
    }
}

typedef struct bx_row {
  kern m1, m8;
  int smem1, smem8;
} bx_row;
#define BX(S) {lab_gemv_bx<S, 1>, lab_gemv_bx<S, 8>, bx_smem<S, 1>(), bx_smem<S, 8>()}
static const bx_row BXS[] = {BX(RLX_QUANT_Q4_0), BX(RLX_QUANT_Q4_1), BX(RLX_QUANT_Q5_0),
                             BX(RLX_QUANT_Q5_1), BX(RLX_QUANT_Q8_0), BX(RLX_QUANT_Q2_K),
                             BX(RLX_QUANT_Q3_K), BX(RLX_QUANT_Q4_K), BX(RLX_QUANT_Q5_K),
                             BX(RLX_QUANT_Q6_K)};

static uint64_t align256(uint64_t v) { return (v + 255) / 256 * 256; }

/* build_dequant_matmul's warps per row group (cuda_launch.c). */
static int warps_per_row(int sm_count, int64_t groups, int64_t K) {
  int64_t chunks = (K + 1023) / 1024;
  int wpr = 1;
  while (wpr < 4 && groups * wpr < (int64_t)sm_count * 16 && chunks >= 2 * wpr) wpr *= 2;
  return wpr;
}
/* W rows a warp takes with 4-warp blocks: OLD_R1 for variant 10, else 1 */
static int rows_per_warp(int v, int M) { return v == 10 ? OLD_R1 : 1; }

/* The _m1 launch (cuda_launch.c build_dequant_matmul): DQ_WARPS warps a
 * block, one row group of R rows per warp while two blocks per SM hold
 * them all, else a grid of 1-2 blocks per SM striding over the groups. */
static void launch_xs(kern k, int smem, int R, const rlxk_dqmm& p, char* arena, int sm_count,
                      int max_per_sm = 2) {
  static int optin = 0;
  if (!optin) cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  cudaFuncSetAttribute((const void*)k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  int64_t groups = (p.N + R - 1) / R, blocks = (groups + DQ_WARPS - 1) / DQ_WARPS;
  int64_t per_sm = (optin + 1024) / (smem + 1024);
  per_sm = per_sm < 1 ? 1 : per_sm > max_per_sm ? max_per_sm : per_sm;
  if (blocks > per_sm * sm_count) blocks = per_sm * sm_count;
  k<<<(unsigned)blocks, 32 * DQ_WARPS, smem>>>(arena, p, NULL);
}

static uint16_t f16_bits(float f) {
  __half h = __float2half(f);
  return *(uint16_t*)&h;
}

typedef struct problem {
  const scheme_row* s;
  int64_t K, N, row_bytes;
  uint8_t* w;      /* host W */
  float* x;        /* host x [8][K] */
  char* arena;     /* x f32 [8][K] | x f16 [8][K] | y [8][N] | W x COPIES */
  uint64_t x32, x16, y, xl, w0, wstride; /* xl: x as limbs (_s1) */
  int sm_count;
} problem;

static void problem_init(problem* q, const scheme_row* s, int64_t K, int64_t N, int sm_count,
                         int copies) {
  memset(q, 0, sizeof *q);
  q->s = s, q->K = K, q->N = N, q->sm_count = sm_count;
  q->row_bytes = K / s->E * s->B;
  size_t wb = (size_t)(q->row_bytes * N);
  q->w = (uint8_t*)malloc(wb);
  q->x = (float*)malloc(sizeof(float) * XR * (size_t)K);
  float* tmp = (float*)malloc(sizeof(float) * wb);
  if (!q->w || !q->x || !tmp) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  lab_fill(q->x, XR * K, 1);
  lab_fill(tmp, (int64_t)wb, 2);
  for (size_t i = 0; i < wb; i++) q->w[i] = (uint8_t)(int)((tmp[i] + 1.0f) * 127.99f);
  /* block scales: small normal f16 values (random bytes make NaN / inf) */
  for (size_t b = 0; b < wb; b += (size_t)s->B)
    for (int f = 0; f < 2; f++)
      if (s->f16[f] >= 0) {
        uint16_t h = f16_bits(0.01f + 0.05f * fabsf(tmp[b + (size_t)f]));
        q->w[b + (size_t)s->f16[f]] = (uint8_t)h, q->w[b + (size_t)s->f16[f] + 1] = (uint8_t)(h >> 8);
      }
  free(tmp);
  q->x32 = 0;
  q->x16 = align256(sizeof(float) * XR * (uint64_t)K);
  q->y = q->x16 + align256(2 * XR * (uint64_t)K);
  q->xl = q->y + align256(sizeof(float) * XR * (uint64_t)N);
  q->w0 = q->xl + align256((uint64_t)(rlx_dqmm_chunks(K) * RLX_DQMM_LIMB_CHUNK));
  q->wstride = align256(wb);
  CUDA_OK(cudaMalloc(&q->arena, q->w0 + q->wstride * (uint64_t)copies));
  __half* xh = (__half*)malloc(2 * XR * (size_t)K);
  for (int64_t i = 0; i < XR * K; i++) xh[i] = __float2half(q->x[i]);
  CUDA_OK(cudaMemcpy(q->arena + q->x32, q->x, sizeof(float) * XR * (size_t)K, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(q->arena + q->x16, xh, 2 * XR * (size_t)K, cudaMemcpyHostToDevice));
  free(xh);
  for (int c = 0; c < copies; c++)
    CUDA_OK(cudaMemcpy(q->arena + q->w0 + q->wstride * (uint64_t)c, q->w, wb, cudaMemcpyHostToDevice));
}

static void problem_free(problem* q) {
  cudaFree(q->arena);
  free(q->w);
  free(q->x);
}

/* ref[m][n] in double over quant.h's dequantized rows; x rounded to f16 when half. */
static void reference(const problem* q, int M, int half, double* ref) {
  float* row = (float*)malloc(sizeof(float) * (size_t)q->K);
  for (int64_t n = 0; n < q->N; n++) {
    for (int64_t b = 0; b < q->K / q->s->E; b++)
      rlx_dequant_group(q->s->scheme, q->w + n * q->row_bytes + b * q->s->B, q->s->E, 1.0f, 0,
                        row + b * q->s->E);
    for (int m = 0; m < M; m++) {
      double a = 0.0;
      for (int64_t k = 0; k < q->K; k++) {
        float xv = q->x[m * q->K + k];
        if (half) xv = __half2float(__float2half(xv));
        a += (double)xv * (double)row[k];
      }
      ref[m * q->N + n] = a;
    }
  }
  free(row);
}

static rlxk_dqmm params(const problem* q, int M, int half, int copy, int rows) {
  rlxk_dqmm p;
  memset(&p, 0, sizeof p);
  p.M = M, p.N = q->N, p.K = q->K, p.row_bytes = q->row_bytes;
  p.xoff = half ? q->x16 : q->x32;
  p.woff = q->w0 + q->wstride * (uint64_t)copy;
  p.ooff = q->y;
  p.scheme = q->s->scheme, p.group = q->s->E;
  p.xdt = half ? RLX_F16 : RLX_F32, p.sdt = RLX_F32, p.odt = RLX_F32;
  p.wpr = warps_per_row(q->sm_count, (q->N + rows - 1) / rows, q->K);
  return p;
}

static void launch(const problem* q, int v, int M, int copy) {
  int rows = rows_per_warp(v, M);
  rlxk_dqmm p = params(q, M, v == 1 || v == 6 || v == 17 || v == 20, copy, rows);
  if (v == 6) {
    dim3 grid((unsigned)((q->N + 63) / 64), (unsigned)((M + 63) / 64));
    rlx_dqmm_mma_f16<<<grid, 128>>>(q->arena, p, NULL);
    return;
  }
  if (v == 4 || v == 7) {
    dim3 grid((unsigned)((q->N + 63) / 64), (unsigned)((M + 63) / 64));
    rlx_dqmm_tiled<<<grid, 256>>>(q->arena, p, NULL);
    return;
  }
  if (v == 8 || v == 9) {
    const bx_row* x = &BXS[q->s - SCHEMES];
    kern k = v == 8 ? x->m1 : x->m8;
    int smem = v == 8 ? x->smem1 : x->smem8;
    cudaFuncSetAttribute((const void*)k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    int per = BX_WARPS * BX_R;
    k<<<(unsigned)((q->N + per - 1) / per), 256, smem>>>(q->arena, p, NULL);
    return;
  }
  int si = (int)(q->s - SCHEMES);
  if (v == 18) {
    int st = DQ_CHUNK / q->s->E * q->s->B > 1024 ? 3 : 4;
    launch_xs(OCC4[si], xs_smem(q->s->E, q->s->B, q->K, DQ_R1, st, 1), DQ_R1, p, q->arena, q->sm_count, 4);
    return;
  }
  if (v >= 19 && v <= 22) { /* production _s1 (x as limbs by rlx_dqmm_xlimbs first) */
    p.panel = (uint64_t)(uintptr_t)(q->arena + q->xl);
    int rows = v == 21 ? 2 : v == 22 ? 8 : RLX_DQMM_S1_ROWS(DQ_CHUNK / q->s->E * q->s->B);
    launch_s1(v == 21 ? S1R2[si] : v == 22 ? S1R8[si] : q->s->s1, q->s->E, q->s->B, rows, p, q->arena);
    return;
  }
  if (v == 16 || v == 17) { /* session 21's _l1 (x in three int8 limbs, dp4a) */
    int st = DQ_CHUNK / q->s->E * q->s->B > 1024 ? 3 : 4;
    launch_xs(q->s->l1, xs_smem(q->s->E, q->s->B, q->K, DQ_R1, st, 1), DQ_R1, p, q->arena, q->sm_count);
    return;
  }
  if (v <= 2) { /* production _m1 */
    int st = DQ_CHUNK / q->s->E * q->s->B > 1024 ? 3 : 4; /* quant.cu dq_stages */
    launch_xs(q->s->m1, xs_smem(q->s->E, q->s->B, q->K, DQ_R1, st), DQ_R1, p, q->arena, q->sm_count);
    return;
  }
  if (v >= 11 && v <= 13) {
    int j = v - 11, st = XS_ST[j] ? XS_ST[j] : DQ_CHUNK / q->s->E * q->s->B > 1024 ? 3 : 4;
    launch_xs(XSS[si].k[j], xs_smem(q->s->E, q->s->B, q->K, XS_R[j], st), XS_R[j], p, q->arena,
              q->sm_count);
    return;
  }
  int per_block = 4 / p.wpr * rows;
  unsigned blocks = (unsigned)((q->N + per_block - 1) / per_block);
  kern k = v == 5 ? q->s->pf2 : v == 10 ? q->s->old : q->s->m8;
  k<<<blocks, 128>>>(q->arena, p, NULL);
}

static const char* const names[] = {"production gemv m1, x f32", "production gemv m1, x f16",
                                    "gemv m1, x f32, W from HBM (8 copies)",
                                    "production gemv m8, M = 8, x f32", "tiled kernel, M = 1",
                                    "one W row per warp (the first m1), x f32",
                                    "prefill M = 512 mma f16 (GFLOP/s)",
                                    "prefill M = 512 tiled f32 (GFLOP/s)",
                                    "candidate: block-shared x, M = 1, x f32",
                                    "candidate: block-shared x, M = 8, x f32",
                                    "previous m1 (cuq: 4 rows/warp, x from global)",
                                    "x in smem, R = 1, 4 stages", "x in smem, R = 4, 2 stages",
                                    "x in smem, R = 2, 2 stages",
                                    "diagnostic: production m1 without W loads",
                                    "diagnostic: production m1 without decode",
                                    "gemv l1 (x limbs in smem per block, dp4a), x f32",
                                    "gemv l1 (x limbs in smem per block, dp4a), x f16",
                                    "l1 at up to 4 blocks per SM (64 registers)",
                                    "production gemv s1 (split K, limbs), x f32",
                                    "production gemv s1 (split K, limbs), x f16",
                                    "s1 with 2 W rows a block, x f32",
                                    "s1 with 8 W rows a block, x f32"};

/* Runs variant v of one problem; returns 1 when its error is over TOL. */
static int run_variant(const problem* q, int v, int reps, const double* ref, const double* ref16,
                       const double* ref8, const double* ref8h) {
  int M = v == 3 || v == 9 ? 8 : v == 6 || v == 7 ? XR : 1, checked = M > 8 ? 8 : M;
  const double* r = v == 1 || v == 17 || v == 20 ? ref16 : v == 3 || v == 7 || v == 9 ? ref8 : v == 6 ? ref8h : ref;
  size_t ybytes = sizeof(float) * (size_t)(M * q->N);
  CUDA_OK(cudaMemset(q->arena + q->y, 0xFF, ybytes)); /* NaN: an unwritten y fails */
  launch(q, v, M, 0);
  CUDA_OK(cudaDeviceSynchronize());
  float* y = (float*)malloc(ybytes);
  CUDA_OK(cudaMemcpy(y, q->arena + q->y, ybytes, cudaMemcpyDeviceToHost));
  double err = lab_max_rel_err(y, r, checked * q->N);
  free(y);
  char what[96];
  snprintf(what, sizeof what, "%s %s", q->s->name, names[v]);
  double ms = 0.0;
  if (reps > 0) {
    double* t = (double*)malloc(sizeof(double) * (size_t)reps);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int w = 0; w < 10; w++) launch(q, v, M, v == 2 ? w % COPIES : 0);
    for (int i = 0; i < reps; i++) {
      cudaEventRecord(e0);
      launch(q, v, M, v == 2 ? i % COPIES : 0);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float f = 0.0f;
      cudaEventElapsedTime(&f, e0, e1);
      t[i] = f;
    }
    ms = lab_median(t, reps);
    free(t);
    if (v == 0 || v == 16 || v >= 18) { /* back to back between one event pair, as ggml times */
      float f = 0.0f;
      cudaEventRecord(e0);
      for (int i = 0; i < 20; i++) launch(q, v, M, 0);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      cudaEventElapsedTime(&f, e0, e1);
      printf("    %s x%d back to back: %.2f us\n", q->s->name, v, f * 1e3 / 20);
    }
  }
  double bytes = v == 6 || v == 7 ? 2.0 * M * (double)q->N * (double)q->K
                        : (double)(q->row_bytes * q->N) + 4.0 * (double)(M * (q->K + q->N));
  lab_report(v, what, err, ms, reps > 0 ? bytes : 0.0);
  if (reps > 0) printf("    %s x%d: %.2f us\n", q->s->name, v, ms * 1e3);
  if (v == 14 || v == 15) return 0; /* diagnostics compute nothing meaningful */
  /* the tensor-core variant rounds W to f16 (the parity suite's half tolerance) */
  return !(err <= (v == 6 ? 2e-2 : TOL));
}

/* LAB_VARIANTS="0,16,18": only the listed variants (all when unset). */
static int variant_wanted(int v) {
  const char* only = getenv("LAB_VARIANTS");
  if (!only || !*only) return 1;
  for (const char* t = only; *t;) {
    char* end = NULL;
    long x = strtol(t, &end, 10);
    if (end == t) return 0;
    if (x == v) return 1;
    t = *end == ',' ? end + 1 : end;
  }
  return 0;
}

int main(int argc, char** argv) {
  int check = 0, reps = 50, nd = 0;
  int64_t dims[2] = {14336, 4096};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--check")) check = 1;
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (nd < 2) dims[nd++] = atoll(argv[i]);
  }
  int dev = 0, sm_count = 0, count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("lab dequant_gemv: no CUDA device (skipped)\n");
    return 77;
  }
  CUDA_OK(cudaGetDevice(&dev));
  CUDA_OK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  printf("lab dequant_gemv: %s (%d SMs), tolerance %.0e\n", prop.name, sm_count, TOL);
  /* check shapes: K with a partial last chunk, N not a multiple of 4, few rows (wpr > 1) */
  static const int64_t checks[][2] = {{1280, 37}, {768, 5}, {4352, 130}};
  int n_shapes = check ? 3 : 1, bad = 0;
  for (int sh = 0; sh < n_shapes; sh++) {
    int64_t K = check ? checks[sh][0] : dims[0], N = check ? checks[sh][1] : dims[1];
    printf("\nK = %lld (row length), N = %lld (rows)\n", (long long)K, (long long)N);
    lab_header("GB/s");
    for (int si = 0; si < N_SCHEMES; si++) {
      const scheme_row* s = &SCHEMES[si];
      if (K % s->E) continue;
      problem q;
      problem_init(&q, s, K, N, sm_count, check ? 1 : COPIES);
      double* ref = (double*)malloc(sizeof(double) * (size_t)N);
      double* ref16 = (double*)malloc(sizeof(double) * (size_t)N);
      double* ref8 = (double*)malloc(sizeof(double) * 8 * (size_t)N);
      double* ref8h = (double*)malloc(sizeof(double) * 8 * (size_t)N);
      reference(&q, 1, 0, ref);
      reference(&q, 1, 1, ref16);
      reference(&q, 8, 0, ref8);
      reference(&q, 8, 1, ref8h);
      for (int v = 0; v < 23; v++) {
        if (!variant_wanted(v)) continue;
        if (v == 2 && check) continue;
        if (v == 4 && !check) continue;
        /* prefill timings: the K-quants and the issue's types only (each takes ms) */
        int prefill_row = s->scheme == RLX_QUANT_Q8_0 || s->scheme == RLX_QUANT_Q4_0 ||
                          s->scheme == RLX_QUANT_Q4_K || s->scheme == RLX_QUANT_Q6_K;
        bad |= run_variant(&q, v, check ? 0 : v == 6 || v == 7 ? (prefill_row ? 10 : 0) : reps, ref, ref16,
                           ref8, ref8h);
      }
      free(ref), free(ref16), free(ref8), free(ref8h);
      problem_free(&q);
    }
  }
  printf(bad ? "\nFAILED: a variant is over tolerance\n" : "\nall variants within tolerance\n");
  return bad;
}
