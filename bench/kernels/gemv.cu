/* Kernel lab: CUDA f32 GEMV, y[N] = act(x[K]·B[K,N] + bias) for M == 1
 * (decode), bandwidth bound: B is read once.
 *
 * Variants (same split-K geometry as build_gemv in src/backends/cuda/
 * cuda_launch.c: column blocks of 32 lanes x VEC columns, K split so that
 * ~4 blocks per SM run, at most K/64 and 64 slices):
 *   0 production: rlx_gemv_fused_v4/_v1 from src/backends/cuda/kernels/
 *     matmul.cu, included below unchanged: one launch; the last block of a
 *     column block to finish sums the K slices;
 *   1 split: the same loop writing K-slice partials, then a second kernel
 *     sums them (was RLX_CUDA_GEMV_SPLIT; lost to 0 on the H100);
 *   2 production kernel without split-K (one block per column block);
 *   3 production kernel with scalar loads (VEC = 1) where float4 would do.
 *
 *   lab_gemv [--check] [--reps R] [K N]
 *
 * Default: a few decode shapes (4096x4096, 4096x11008, 11008x4096,
 * 768x50257), 50 timed runs each (CUDA events). --check: small odd shapes,
 * one run each. Every variant is compared with a double-precision host loop;
 * the exit status is 1 when any exceeds the tolerance. Rates are GB/s of B
 * read. Needs a CUDA GPU (sm_80 or newer); nothing here asserts a time. */
#include <cuda_runtime.h>

#include "lab.h"
#include "matmul.cu" /* the production kernels (-I src/backends/cuda/kernels) */

#define TOL 1e-5

/* ------------------------------------------------ variant 1: split GEMV */

/* y[n] partial sums over a K chunk: grid (column blocks, ksplit), 256
 * threads = 32 column lanes x 8 row lanes; VEC columns per lane. Partial
 * sums go to p.partial[ks][N]. */
template <int VEC>
__global__ void __launch_bounds__(256) lab_gemv_partial(char* arena, rlxk_mm p) {
  __shared__ float red[8][32 * VEC];
  int lane = threadIdx.x % 32, rl = threadIdx.x / 32;
  int64_t n = ((int64_t)blockIdx.x * 32 + lane) * VEC;
  int64_t chunk = (p.K + p.ksplit - 1) / p.ksplit;
  int64_t kb = (int64_t)blockIdx.y * chunk, ke = kb + chunk < p.K ? kb + chunk : p.K;
  const float* A = (const float*)at(arena, p.aoff);
  const float* B = (const float*)at(arena, p.boff);
  float acc[VEC];
#pragma unroll
  for (int v = 0; v < VEC; v++) acc[v] = 0.0f;
  if (n < p.N) {
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
  if (rl == 0 && n < p.N) {
    float* out = (float*)(uintptr_t)p.partial + (int64_t)blockIdx.y * p.N;
#pragma unroll
    for (int v = 0; v < VEC; v++) {
      float s = 0.0f;
#pragma unroll
      for (int r = 0; r < 8; r++) s += red[r][lane * VEC + v];
      if (n + v < p.N) out[n + v] = s;
    }
  }
}

/* y[n] = act(sum over ksplit partials + bias). */
__global__ void lab_gemv_finish(char* arena, rlxk_mm p) {
  const float* part = (const float*)(uintptr_t)p.partial;
  char* C = atw(arena, p.coff);
  for (int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; n < p.N;
       n += (int64_t)gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int k = 0; k < p.ksplit; k++) s += part[(int64_t)k * p.N + n];
    if (p.has_bias) s += ld_f32(at(arena, p.biasoff), p.biasdt, n);
    st_f32(C, p.cdt, n, rlx_act_f32(p.act, s));
  }
}

/* ------------------------------------------------ harness */

#define CUDA_OK(call)                                                                  \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(2);                                                                         \
    }                                                                                  \
  } while (0)

typedef struct problem {
  int64_t K, N;
  char* arena;           /* x, B, bias, y as in the backend's arena */
  float *partial, *host_y;
  unsigned* counters;
  double* ref;
  rlxk_mm p;
  int sm_count;
} problem;

static uint64_t align256(uint64_t v) { return (v + 255) / 256 * 256; }

static void problem_init(problem* q, int64_t K, int64_t N, int sm_count) {
  memset(q, 0, sizeof *q);
  q->K = K, q->N = N, q->sm_count = sm_count;
  rlxk_mm* p = &q->p;
  p->M = 1, p->N = N, p->K = K, p->batch = 1;
  p->a_rs = K, p->a_cs = 1, p->b_rs = N, p->b_cs = 1, p->c_rs = N;
  p->adt = p->bdt = p->cdt = p->biasdt = RLX_F32;
  p->has_bias = 1;
  p->act = RLX_ACT_NONE;
  p->aoff = 0;
  p->boff = align256((uint64_t)K * 4);
  p->biasoff = p->boff + align256((uint64_t)(K * N) * 4);
  p->coff = p->biasoff + align256((uint64_t)N * 4);
  uint64_t bytes = p->coff + align256((uint64_t)N * 4);
  float* x = (float*)malloc(sizeof(float) * (size_t)K);
  float* B = (float*)malloc(sizeof(float) * (size_t)(K * N));
  float* bias = (float*)malloc(sizeof(float) * (size_t)N);
  q->ref = (double*)malloc(sizeof(double) * (size_t)N);
  q->host_y = (float*)malloc(sizeof(float) * (size_t)N);
  if (!x || !B || !bias || !q->ref || !q->host_y) {
    fprintf(stderr, "out of host memory\n");
    exit(2);
  }
  lab_fill(x, K, 1);
  lab_fill(B, K * N, 2);
  lab_fill(bias, N, 3);
  for (int64_t n = 0; n < N; n++) {
    double s = bias[n];
    for (int64_t k = 0; k < K; k++) s += (double)x[k] * (double)B[k * N + n];
    q->ref[n] = s;
  }
  CUDA_OK(cudaMalloc(&q->arena, bytes));
  CUDA_OK(cudaMemcpy(q->arena + p->aoff, x, sizeof(float) * (size_t)K, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(q->arena + p->boff, B, sizeof(float) * (size_t)(K * N), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(q->arena + p->biasoff, bias, sizeof(float) * (size_t)N, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMalloc(&q->partial, sizeof(float) * 64 * (size_t)N));
  CUDA_OK(cudaMalloc(&q->counters, sizeof(unsigned) * (size_t)(N + 1)));
  CUDA_OK(cudaMemset(q->counters, 0, sizeof(unsigned) * (size_t)(N + 1)));
  p->partial = (uint64_t)(uintptr_t)q->partial;
  p->counters = (uint64_t)(uintptr_t)q->counters;
  free(x);
  free(B);
  free(bias);
}

static void problem_free(problem* q) {
  cudaFree(q->arena);
  cudaFree(q->partial);
  cudaFree(q->counters);
  free(q->ref);
  free(q->host_y);
}

/* The production geometry (build_gemv): VEC 4 when B's rows allow float4
 * loads, K slices to give ~4 blocks per SM. */
static int64_t col_blocks_for(const problem* q, int vec) {
  int64_t cols = vec == 4 ? 128 : 32;
  return (q->N + cols - 1) / cols;
}

static int32_t ksplit_for(const problem* q, int64_t col_blocks) {
  int64_t want = (int64_t)q->sm_count * 4, ks = (want + col_blocks - 1) / col_blocks;
  int64_t max_ks = q->K / 64 > 1 ? q->K / 64 : 1;
  if (ks > max_ks) ks = max_ks;
  if (ks > 64) ks = 64;
  return (int32_t)ks;
}

static int vec_ok(const problem* q) { return q->N % 4 == 0 && q->p.boff % 16 == 0; }

/* Launches variant v once; returns 0 if it does not apply to the shape. */
static int launch(problem* q, int v) {
  rlxk_mm p = q->p;
  int vec = v == 3 ? 1 : vec_ok(q) ? 4 : 1;
  if (v == 3 && !vec_ok(q)) return 0; /* already the production choice */
  int64_t cb = col_blocks_for(q, vec);
  p.ksplit = v == 2 ? 1 : ksplit_for(q, cb);
  dim3 grid((unsigned)cb, (unsigned)p.ksplit);
  if (v == 1) {
    if (vec == 4) lab_gemv_partial<4><<<grid, 256>>>(q->arena, p);
    else lab_gemv_partial<1><<<grid, 256>>>(q->arena, p);
    int64_t blocks = (q->N + 255) / 256, cap = (int64_t)q->sm_count * 32;
    lab_gemv_finish<<<(unsigned)(blocks < cap ? blocks : cap), 256>>>(q->arena, p);
  } else if (vec == 4) {
    rlx_gemv_fused_v4<<<grid, 256>>>(q->arena, p, NULL);
  } else {
    rlx_gemv_fused_v1<<<grid, 256>>>(q->arena, p, NULL);
  }
  CUDA_OK(cudaGetLastError());
  return 1;
}

static const char* const names[] = {"production fused (one launch)", "split (partial + finish)",
                                    "fused, no split-K", "fused, scalar loads (VEC 1)"};
enum { N_VARIANTS = 4 };

/* Validates the first run of variant v, then times `reps` more. Returns 0
 * when it was wrong. */
static int measure(problem* q, int v, int reps) {
  char what[96];
  snprintf(what, sizeof what, "%s %lldx%lld", names[v], (long long)q->K, (long long)q->N);
  CUDA_OK(cudaMemset(q->arena + q->p.coff, 0xff, sizeof(float) * (size_t)q->N)); /* NaN */
  if (!launch(q, v)) {
    lab_skip(v, what, "the shape takes the production form");
    return 1;
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(q->host_y, q->arena + q->p.coff, sizeof(float) * (size_t)q->N,
                     cudaMemcpyDeviceToHost));
  double err = lab_max_rel_err(q->host_y, q->ref, q->N);
  double ms[256];
  int n = reps < 1 ? 1 : reps > 256 ? 256 : reps;
  cudaEvent_t t0, t1;
  CUDA_OK(cudaEventCreate(&t0));
  CUDA_OK(cudaEventCreate(&t1));
  for (int r = 0; r < n; r++) {
    CUDA_OK(cudaEventRecord(t0));
    launch(q, v);
    CUDA_OK(cudaEventRecord(t1));
    CUDA_OK(cudaEventSynchronize(t1));
    float f = 0;
    CUDA_OK(cudaEventElapsedTime(&f, t0, t1));
    ms[r] = f;
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  lab_report(v, what, err, lab_median(ms, n), 4.0 * (double)q->K * (double)q->N);
  return err <= TOL;
}

int main(int argc, char** argv) {
  int check = 0, reps = 50;
  int64_t dims[2] = {0, 0};
  int nd = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--check") == 0) check = 1;
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    else if (nd < 2 && atoll(argv[i]) > 0) dims[nd++] = atoll(argv[i]);
    else {
      fprintf(stderr, "usage: %s [--check] [--reps R] [K N]\n", argv[0]);
      return 2;
    }
  }
  int dev = 0, sm_count = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    printf("SKIP lab gemv: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, dev));
  printf("lab gemv: f32 + bias, %s (%d SMs), tolerance %.0e\n", prop.name, sm_count, TOL);
  lab_header("GB/s");
  static const int64_t timed[][2] = {{4096, 4096}, {4096, 11008}, {11008, 4096}, {768, 50257}};
  static const int64_t small[][2] = {{64, 4}, {300, 257}, {1000, 1024}, {4099, 129}};
  const int64_t(*shapes)[2] = check ? small : timed;
  int n_shapes = 4, ok = 1;
  if (nd == 2) n_shapes = 1;
  for (int s = 0; s < n_shapes; s++) {
    problem q;
    problem_init(&q, nd == 2 ? dims[0] : shapes[s][0], nd == 2 ? dims[1] : shapes[s][1], sm_count);
    for (int v = 0; v < N_VARIANTS; v++) ok &= measure(&q, v, check ? 1 : reps);
    problem_free(&q);
  }
  if (!ok) printf("FAIL: a variant exceeded the tolerance\n");
  return !ok;
}
