/* Kernel lab: exact f32 flash-attention forward on CUDA (kernels/attention_f32.cu).
 *
 *   0  production SIMT FMA kernel (rlx_attn_f32_d64 / _d128r8), as cuda_launch.c
 *      launched it before the tensor-core kernel;
 *   1  3xTF32 tensor-core kernel (rlx_attn_f32tc_*): split-precision TF32 on
 *      mma.sync m16n8k8, f32 accumulation;
 *   2  the same kernel with split_tf32_fast (integer-rounded hi, raw lo the
 *      tensor core truncates: no cvt instructions), as the backward's.
 *
 * Causal, q / k / v [B, S, H, D] f32 in one arena, scale 1/sqrt(D). The
 * double reference covers a few (b, h) heads (all their rows): max_rel_err
 * (lab.h) and the relative L2 error over those heads, printed per variant
 * so the split-precision kernel's accuracy is compared with the SIMT one's
 * on the same data. Exit 1 when an error passes 1e-5.
 *
 *   lab_attention_f32            the bench shapes (B8 H16 S1024 D64, B4 H32 S4096 D128)
 *   lab_attention_f32 B H S D    one shape
 *   lab_attention_f32 --check    small odd shapes (ctest; 77 without a GPU) */
#include <cuda_runtime.h>
#include <vector>

#include "backends/cuda/kernels/attention_f32.cu" /* the production file (same name as this one) */
#include "lab.h"

#define CK(x)                                                                       \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(2);                                                                      \
    }                                                                               \
  } while (0)

typedef void (*attn_kernel)(char*, rlxk_attn, rlxk_state*);

extern "C" __global__ void __launch_bounds__(32 * kTcWarps, 2) lab_attn_f32tc_fast_d64(char* a, rlxk_attn p,
                                                                                      rlxk_state*) {
  flash_f32_tc<64, true>(a, p);
}
extern "C" __global__ void __launch_bounds__(32 * kTcWarps, 1) lab_attn_f32tc_fast_d128(char* a, rlxk_attn p,
                                                                                       rlxk_state*) {
  flash_f32_tc<128, true>(a, p);
}

/* Reference output rows of head (b, h), double. */
static void reference_head(const float* q, const float* k, const float* v, const rlxk_attn& p, int64_t b,
                           int64_t h, double* out) {
  std::vector<double> w(p.Sk);
  for (int64_t i = 0; i < p.Sq; i++) {
    const float* qi = q + b * p.q_sb + i * p.q_ss + h * p.q_sh;
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j <= i; j++) {
      const float* kj = k + b * p.k_sb + j * p.k_ss + h * p.k_sh;
      double d = 0.0;
      for (int64_t c = 0; c < p.D; c++) d += (double)qi[c] * kj[c];
      w[j] = d * p.scale;
      if (w[j] > mx) mx = w[j];
    }
    for (int64_t j = 0; j <= i; j++) sum += (w[j] = exp(w[j] - mx));
    for (int64_t c = 0; c < p.D; c++) {
      double acc = 0.0;
      for (int64_t j = 0; j <= i; j++) acc += w[j] * v[b * p.v_sb + j * p.v_ss + h * p.v_sh + c];
      out[i * p.D + c] = acc / sum;
    }
  }
}

static int run_shape(int64_t B, int64_t H, int64_t S, int64_t D, int n_heads_ref, int runs) {
  rlxk_attn p;
  memset(&p, 0, sizeof p);
  p.B = B, p.H = H, p.Hkv = H, p.Sq = S, p.Sk = S, p.D = D, p.Dv = D;
  p.q_sb = p.k_sb = p.v_sb = p.o_sb = S * H * D;
  p.q_ss = p.k_ss = p.v_ss = p.o_ss = H * D;
  p.q_sh = p.k_sh = p.v_sh = p.o_sh = D;
  p.qdt = p.kdt = p.vdt = p.odt = RLX_F32;
  p.mask = RLX_MASK_CAUSAL;
  p.scale = 1.0f / sqrtf((float)D);
  p.k_split = 1;
  const int64_t n = B * S * H * D;
  p.qoff = 0, p.koff = 4 * n, p.voff = 8 * n, p.ooff = 12 * n;
  std::vector<float> host(3 * n), out(n);
  lab_fill(host.data(), n, 1), lab_fill(host.data() + n, n, 2), lab_fill(host.data() + 2 * n, n, 3);
  char* arena;
  CK(cudaMalloc(&arena, 16 * n));
  CK(cudaMemcpy(arena, host.data(), 12 * n, cudaMemcpyHostToDevice));

  /* Reference heads: first, last, and evenly between. */
  std::vector<int64_t> heads;
  for (int r = 0; r < n_heads_ref; r++) heads.push_back(r * (B * H - 1) / (n_heads_ref > 1 ? n_heads_ref - 1 : 1));
  std::vector<double> ref(heads.size() * S * D);
  for (size_t r = 0; r < heads.size(); r++)
    reference_head(host.data(), host.data() + n, host.data() + 2 * n, p, heads[r] / H, heads[r] % H,
                   ref.data() + r * S * D);

  const double flops = 4.0 * B * H * D * (double)S * (S + 1) / 2.0; /* QK^T and PV over the causal half */
  printf("causal f32 B%lld H%lld S%lld D%lld, reference over %zu heads\n", (long long)B, (long long)H,
         (long long)S, (long long)D, heads.size());
  lab_header("GFLOP/s");
  struct variant {
    const char* what;
    attn_kernel fn;
    int rows, threads;
    size_t smem;
  } vars[3] = {
      {"production SIMT FMA (128 rows, 256 threads)", D == 64 ? rlx_attn_f32_d64 : rlx_attn_f32_d128r8, 128, 256,
       (size_t)((256 * (D + 4) + 128 * 80) * 4)},
      {"3xTF32 mma.sync m16n8k8 (128 rows, 8 warps, 2 stages)", D == 64 ? rlx_attn_f32tc_d64 : rlx_attn_f32tc_d128,
       128, 256, (size_t)((128 + 4 * 64) * (D + 4) * 4)},
      {"3xTF32 fast split (integer round, raw lo)", D == 64 ? lab_attn_f32tc_fast_d64 : lab_attn_f32tc_fast_d128,
       128, 256, (size_t)((128 + 4 * 64) * (D + 4) * 4)},
  };
  int bad = 0;
  for (int vi = 0; vi < 3; vi++) {
    const variant& x = vars[vi];
    CK(cudaFuncSetAttribute(x.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)x.smem));
    p.q_tiles = (int32_t)((S + x.rows - 1) / x.rows);
    unsigned grid = (unsigned)(B * H * p.q_tiles);
    CK(cudaMemset(arena + 12 * n, 0xff, 4 * n)); /* NaN poison */
    x.fn<<<grid, x.threads, x.smem>>>(arena, p, nullptr);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out.data(), arena + 12 * n, 4 * n, cudaMemcpyDeviceToHost));
    double err = 0.0, num = 0.0, den = 0.0;
    std::vector<float> got(S * D);
    for (size_t r = 0; r < heads.size(); r++) {
      int64_t b = heads[r] / H, h = heads[r] % H;
      for (int64_t i = 0; i < S; i++)
        for (int64_t c = 0; c < D; c++) got[i * D + c] = out[b * p.o_sb + i * p.o_ss + h * p.o_sh + c];
      const double* rr = ref.data() + r * S * D;
      double e = lab_max_rel_err(got.data(), rr, S * D);
      if (!(e <= err)) err = e;
      for (int64_t i = 0; i < S * D; i++) num += (got[i] - rr[i]) * (got[i] - rr[i]), den += rr[i] * rr[i];
    }
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<double> ms(runs);
    for (int r = 0; r < runs; r++) {
      CK(cudaEventRecord(e0));
      x.fn<<<grid, x.threads, x.smem>>>(arena, p, nullptr);
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float t;
      CK(cudaEventElapsedTime(&t, e0, e1));
      ms[r] = t;
    }
    lab_report(vi, x.what, err, lab_median(ms.data(), runs), flops);
    printf("    rel_l2 %.3e\n", sqrt(num / den));
    if (!(err <= 1e-5)) bad = 1;
  }
  CK(cudaFree(arena));
  return bad;
}

int main(int argc, char** argv) {
  if (argc == 2 && !strcmp(argv[1], "--check")) { /* small odd shapes, one timed run (ctest) */
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 77;
    return run_shape(1, 2, 77, 64, 2, 1) | run_shape(2, 1, 150, 128, 2, 1);
  }
  if (argc == 5)
    return run_shape(atoll(argv[1]), atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), 2, 20);
  int bad = run_shape(8, 16, 1024, 64, 4, 30);
  bad |= run_shape(4, 32, 4096, 128, 1, 5);
  bad |= run_shape(2, 4, 333, 128, 8, 10); /* partial tiles at the end */
  return bad;
}
