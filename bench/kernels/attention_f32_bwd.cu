/* Kernel lab: f32 attention backward on CUDA (STATS, DV + DK fused, DQ).
 *
 *   0  SIMT tiled kernels (kernels/attention_bwd_tiled.cu: rlx_attn_bwd_q* /
 *      _k*), production before the tensor-core ones and with
 *      RLX_CUDA_NO_F32_TC_ATTN_BWD;
 *   1  3xTF32 tensor-core kernels (kernels/attention_f32.cu:
 *      rlx_attn_bwd_f32tc_*), operands split by integer rounding (hi) and a
 *      raw f32 lo the tensor core truncates (production from sm_80);
 *   2  the same kernels with both halves rounded by cvt.rna.tf32 (as the
 *      forward's split_tf32).
 *
 * Causal, q / k / v / d_out [B, S, H, D] f32 in one arena, scale 1/sqrt(D);
 * out from the production 3xTF32 forward. The double reference (forward
 * and backward, exact out) covers a few (b, h) heads: max_rel_err (lab.h)
 * over dq, dk, dv and the relative L2 error of each, printed per variant
 * so the tensor-core kernels' accuracy is compared with the SIMT ones' on
 * the same data. ms: STATS + fused DV/DK + DQ (the per-phase medians on
 * the next line). Exit 1 when an error passes 1e-5.
 *
 *   lab_attention_f32_bwd            the bench shapes
 *   lab_attention_f32_bwd B H S D    one shape
 *   lab_attention_f32_bwd --check    small odd shapes (ctest; 77 without a GPU) */
#include <cuda_runtime.h>
#include <vector>

#include "backends/cuda/kernels/attention_f32.cu"
namespace simt { /* its own anonymous namespace: helper names may repeat */
#include "backends/cuda/kernels/attention_bwd_tiled.cu"
}
#include "lab.h"

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(2);                                                                           \
    }                                                                                    \
  } while (0)

/* Variant 2: the tensor-core kernels with the cvt.rna split. */
extern "C" __global__ void __launch_bounds__(kBwThreads, 2) lab_bwd_rna_q64(char* a, rlxk_attn_bwd p, rlxk_state*) {
  bw_queries<64, false>(a, p);
}
extern "C" __global__ void __launch_bounds__(kBwThreads, 1) lab_bwd_rna_q128(char* a, rlxk_attn_bwd p, rlxk_state*) {
  bw_queries<128, false>(a, p);
}
extern "C" __global__ void __launch_bounds__(kBwThreads, 2) lab_bwd_rna_k64(char* a, rlxk_attn_bwd p, rlxk_state*) {
  bw_keys<64, false>(a, p);
}
extern "C" __global__ void __launch_bounds__(kBwThreads, 1) lab_bwd_rna_k128(char* a, rlxk_attn_bwd p, rlxk_state*) {
  bw_keys<128, false>(a, p);
}

typedef void (*bwd_kernel)(char*, rlxk_attn_bwd, rlxk_state*);

/* Reference gradients of head (b, h) in double: dq, dk, dv [S][D]. */
static void reference_head(const float* q, const float* k, const float* v, const float* dout, const rlxk_attn& p,
                           int64_t b, int64_t h, double* dq, double* dk, double* dv) {
  const int64_t S = p.Sq, D = p.D;
  auto row = [&](const float* x, int64_t i) { return x + b * p.q_sb + i * p.q_ss + h * p.q_sh; };
  std::vector<double> P(S), out(D);
  for (int64_t i = 0; i < S * D; i++) dq[i] = dk[i] = dv[i] = 0.0;
  for (int64_t i = 0; i < S; i++) {
    const float *qi = row(q, i), *gi = row(dout, i);
    double mx = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j <= i; j++) {
      const float* kj = row(k, j);
      double d = 0.0;
      for (int64_t c = 0; c < D; c++) d += (double)qi[c] * kj[c];
      P[j] = d * p.scale;
      if (P[j] > mx) mx = P[j];
    }
    for (int64_t j = 0; j <= i; j++) sum += (P[j] = exp(P[j] - mx));
    for (int64_t c = 0; c < D; c++) out[c] = 0.0;
    for (int64_t j = 0; j <= i; j++) {
      P[j] /= sum;
      const float* vj = row(v, j);
      for (int64_t c = 0; c < D; c++) out[c] += P[j] * vj[c];
    }
    double del = 0.0;
    for (int64_t c = 0; c < D; c++) del += (double)gi[c] * out[c];
    for (int64_t j = 0; j <= i; j++) {
      const float *vj = row(v, j), *kj = row(k, j);
      double dp = 0.0;
      for (int64_t c = 0; c < D; c++) dp += (double)gi[c] * vj[c];
      const double ds = P[j] * (dp - del) * p.scale;
      for (int64_t c = 0; c < D; c++) {
        dq[i * D + c] += ds * kj[c];
        dk[j * D + c] += ds * qi[c];
        dv[j * D + c] += P[j] * gi[c];
      }
    }
  }
}

struct variant {
  const char* what;
  bwd_kernel q64, q128, k64, k128;
  int threads;
  bool tc;
};

static size_t smem_q(const variant& x, int64_t D) {
  return x.tc ? (size_t)(6 * 64 * (D + 4) * 4) : (size_t)((4 * 64 * (D + 4) + 64 * 68 + 128) * 4);
}
static size_t smem_k(const variant& x, int64_t D) {
  return x.tc ? (size_t)(6 * 64 * (D + 4) * 4 + 1024) : (size_t)((4 * 64 * (D + 4) + 2 * 64 * 68 + 128) * 4);
}

static int run_shape(int64_t B, int64_t H, int64_t S, int64_t D, int n_heads_ref, int runs) {
  rlxk_attn a;
  memset(&a, 0, sizeof a);
  a.B = B, a.H = H, a.Hkv = H, a.Sq = S, a.Sk = S, a.D = D, a.Dv = D;
  a.q_sb = a.k_sb = a.v_sb = a.o_sb = S * H * D;
  a.q_ss = a.k_ss = a.v_ss = a.o_ss = H * D;
  a.q_sh = a.k_sh = a.v_sh = a.o_sh = D;
  a.qdt = a.kdt = a.vdt = a.odt = RLX_F32;
  a.mask = RLX_MASK_CAUSAL;
  a.scale = 1.0f / sqrtf((float)D);
  a.k_split = 1;
  const int64_t n = B * S * H * D, rows = B * H * S;
  /* Arena: q, k, v, d_out, out, dq, dk, dv (n floats each), stats (2 per row). */
  a.qoff = 0, a.koff = 4 * n, a.voff = 8 * n, a.ooff = 16 * n;
  const uint64_t dooff = 12 * n, dqoff = 20 * n, dkoff = 24 * n, dvoff = 28 * n, stoff = 32 * n;
  std::vector<float> host(4 * n), got(3 * n);
  for (int t = 0; t < 4; t++) lab_fill(host.data() + t * n, n, t + 1);
  char* arena;
  float2* copy;
  CK(cudaMalloc(&arena, 32 * n + 8 * rows));
  CK(cudaMalloc(&copy, 8 * rows));
  CK(cudaMemcpy(arena, host.data(), 16 * n, cudaMemcpyHostToDevice));
  /* out = the production forward's */
  a.q_tiles = (int32_t)((S + 127) / 128);
  const size_t fsmem = (size_t)((128 + 4 * 64) * (D + 4) * 4);
  {
    auto fwd = D == 64 ? rlx_attn_f32tc_d64 : rlx_attn_f32tc_d128;
    CK(cudaFuncSetAttribute(fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsmem));
    fwd<<<(unsigned)(B * H * a.q_tiles), 256, fsmem>>>(arena, a, nullptr);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
  }

  std::vector<int64_t> heads;
  for (int r = 0; r < n_heads_ref; r++) heads.push_back(r * (B * H - 1) / (n_heads_ref > 1 ? n_heads_ref - 1 : 1));
  std::vector<double> ref(heads.size() * 3 * S * D);
  for (size_t r = 0; r < heads.size(); r++) {
    double* base = ref.data() + r * 3 * S * D;
    reference_head(host.data(), host.data() + n, host.data() + 2 * n, host.data() + 3 * n, a, heads[r] / H,
                   heads[r] % H, base, base + S * D, base + 2 * S * D);
  }

  rlxk_attn_bwd p;
  memset(&p, 0, sizeof p);
  p.a = a;
  p.do_sb = a.q_sb, p.do_ss = a.q_ss, p.do_sh = a.q_sh;
  p.dooff = dooff, p.dodt = RLX_F32;
  rlxk_attn_bwd st = p, kv = p, dq = p;
  st.op = RLXK_ATTN_BWD_STATS, st.xoff = a.ooff, st.xdt = RLX_F32, st.goff = stoff, st.gdt = RLX_F32;
  st.stats_copy = 1, st.a.partial = (uint64_t)(uintptr_t)copy;
  kv.op = RLXK_ATTN_BWD_DV, kv.fused = 1, kv.xoff = stoff, kv.xdt = RLX_F32;
  kv.goff = dvoff, kv.gdt = RLX_F32, kv.g_sb = a.k_sb, kv.g_ss = a.k_ss, kv.g_sh = a.k_sh;
  kv.g2off = dkoff, kv.g2dt = RLX_F32, kv.g2_sb = a.k_sb, kv.g2_ss = a.k_ss, kv.g2_sh = a.k_sh;
  dq.op = RLXK_ATTN_BWD_DQ, dq.xoff = a.ooff, dq.xdt = RLX_F32, dq.goff = dqoff, dq.gdt = RLX_F32;
  dq.g_sb = a.q_sb, dq.g_ss = a.q_ss, dq.g_sh = a.q_sh, dq.stats_copy = 1, dq.a.partial = st.a.partial;

  /* S^2 D per product over the causal half: S, dP, dV, dK, dQ and S again in STATS. */
  const double flops = 6.0 * 2.0 * B * H * D * (double)S * (S + 1) / 2.0;
  printf("causal f32 backward B%lld H%lld S%lld D%lld, reference over %zu heads\n", (long long)B, (long long)H,
         (long long)S, (long long)D, heads.size());
  lab_header("GFLOP/s");
  const variant vars[3] = {
      {"SIMT tiled (64-row tiles, 256 threads)", simt::rlx_attn_bwd_q64, simt::rlx_attn_bwd_q128,
       simt::rlx_attn_bwd_k64, simt::rlx_attn_bwd_k128, 256, false},
      {"3xTF32 mma.sync, fast split (4 warps, 2 stages)", rlx_attn_bwd_f32tc_q64, rlx_attn_bwd_f32tc_q128,
       rlx_attn_bwd_f32tc_k64, rlx_attn_bwd_f32tc_k128, 128, true},
      {"3xTF32 mma.sync, cvt.rna split", lab_bwd_rna_q64, lab_bwd_rna_q128, lab_bwd_rna_k64, lab_bwd_rna_k128, 128,
       true},
  };
  const unsigned qblocks = (unsigned)(B * H * ((S + 63) / 64)), kblocks = (unsigned)(B * H * ((S + 63) / 64));
  int bad = 0;
  for (int vi = 0; vi < 3; vi++) {
    const variant& x = vars[vi];
    bwd_kernel qk = D == 64 ? x.q64 : x.q128, kk = D == 64 ? x.k64 : x.k128;
    const size_t sq = smem_q(x, D), sk = smem_k(x, D);
    CK(cudaFuncSetAttribute(qk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sq));
    CK(cudaFuncSetAttribute(kk, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sk));
    cudaEvent_t ev[4];
    for (int e = 0; e < 4; e++) CK(cudaEventCreate(&ev[e]));
    auto launch = [&]() {
      CK(cudaEventRecord(ev[0]));
      qk<<<qblocks, x.threads, sq>>>(arena, st, nullptr);
      CK(cudaEventRecord(ev[1]));
      kk<<<kblocks, x.threads, sk>>>(arena, kv, nullptr);
      CK(cudaEventRecord(ev[2]));
      qk<<<qblocks, x.threads, sq>>>(arena, dq, nullptr);
      CK(cudaEventRecord(ev[3]));
      CK(cudaGetLastError());
      CK(cudaEventSynchronize(ev[3]));
    };
    CK(cudaMemset(arena + dqoff, 0xff, 12 * n)); /* NaN poison over dq, dk, dv */
    launch();
    CK(cudaMemcpy(got.data(), arena + dqoff, 12 * n, cudaMemcpyDeviceToHost));
    double err = 0.0, num[3] = {0, 0, 0}, den[3] = {0, 0, 0};
    std::vector<float> mine(S * D);
    for (size_t r = 0; r < heads.size(); r++) {
      int64_t b = heads[r] / H, h = heads[r] % H;
      for (int o = 0; o < 3; o++) {
        const float* g = got.data() + o * n;
        for (int64_t i = 0; i < S; i++)
          for (int64_t c = 0; c < D; c++) mine[i * D + c] = g[b * a.q_sb + i * a.q_ss + h * a.q_sh + c];
        const double* rr = ref.data() + r * 3 * S * D + o * S * D;
        double e = lab_max_rel_err(mine.data(), rr, S * D);
        if (!(e <= err)) err = e;
        for (int64_t i = 0; i < S * D; i++) num[o] += (mine[i] - rr[i]) * (mine[i] - rr[i]), den[o] += rr[i] * rr[i];
      }
    }
    std::vector<double> ms(runs), ph[3] = {std::vector<double>(runs), std::vector<double>(runs),
                                           std::vector<double>(runs)};
    for (int r = 0; r < runs; r++) {
      launch();
      float t;
      CK(cudaEventElapsedTime(&t, ev[0], ev[3]));
      ms[r] = t;
      for (int e = 0; e < 3; e++) {
        CK(cudaEventElapsedTime(&t, ev[e], ev[e + 1]));
        ph[e][r] = t;
      }
    }
    lab_report(vi, x.what, err, lab_median(ms.data(), runs), flops);
    printf("    rel_l2 dq %.3e dk %.3e dv %.3e   ms STATS %.4f DV+DK %.4f DQ %.4f\n", sqrt(num[0] / den[0]),
           sqrt(num[1] / den[1]), sqrt(num[2] / den[2]), lab_median(ph[0].data(), runs),
           lab_median(ph[1].data(), runs), lab_median(ph[2].data(), runs));
    if (!(err <= 1e-5)) bad = 1;
    for (int e = 0; e < 4; e++) CK(cudaEventDestroy(ev[e]));
  }
  CK(cudaFree(arena));
  CK(cudaFree(copy));
  return bad;
}

int main(int argc, char** argv) {
  if (argc == 2 && !strcmp(argv[1], "--check")) { /* small odd shapes, one timed run (ctest) */
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return 77;
    return run_shape(1, 2, 77, 64, 2, 1) | run_shape(2, 1, 150, 128, 2, 1);
  }
  if (argc == 5) return run_shape(atoll(argv[1]), atoll(argv[2]), atoll(argv[3]), atoll(argv[4]), 2, 20);
  int bad = run_shape(8, 16, 1024, 64, 2, 20);
  bad |= run_shape(2, 16, 2048, 128, 1, 5);
  bad |= run_shape(2, 3, 333, 128, 4, 5); /* partial tiles at the end */
  bad |= run_shape(1, 3, 200, 64, 3, 5);
  return bad;
}
