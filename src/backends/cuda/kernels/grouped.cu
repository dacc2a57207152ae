/* GroupedMatMul (RLX_K_GROUPED_MATMUL): y[r, n] = sum_k x[r / x_rep, k] *
 * W[e](k, n), e = idx[r]. Kept simple and correct (the CPU reference is
 * the oracle); the MoE decode path's speed comes later.
 *
 * rlx_gmm_f: float experts stored [K, N], a thread per output element
 *   (neighbouring threads read neighbouring n), f32 products in k order.
 * rlx_gmm_f_rows: float experts stored [N, K] (the HF / GGUF layout), a
 *   warp per output element, lanes along K (coalesced reads of W's row),
 *   partial sums added by a shuffle tree.
 * rlx_gmm_q: quantized experts (rows along K), a warp per output element:
 *   lane j dequantizes groups j, j + 32, ... of W[e]'s row n with
 *   src/ir/quant.h (the one definition of every scheme, shared with the
 *   CPU) into registers / local memory and dots them with x; the 32
 *   partial sums are added by a shuffle tree.
 * An expert index outside [0, E) is recorded (the run fails naming the
 * node, as for Gather) and its row is left unwritten. */
#include "common.cuh"
#include "ir/quant.h"

RLXK_DEV int64_t gmm_expert(const char* arena, const rlxk_gmm& p, int64_t r, rlxk_state* st) {
  int64_t e = ld_i64(at(arena, p.ioff), p.idt, r);
  if (e < 0 || e >= p.E) {
    report_error(st, p.step, RLXK_ERR_EXPERT, e, p.E);
    return -1;
  }
  return e;
}

extern "C" __global__ void rlx_gmm_f(char* arena, rlxk_gmm p, rlxk_state* st) {
  const char* x = at(arena, p.xoff);
  const char* w = at(arena, p.woff);
  char* y = atw(arena, p.ooff);
  for (int64_t t = grid_index(); t < p.M * p.N; t += grid_stride()) {
    int64_t n = t % p.N, r = t / p.N;
    int64_t e = gmm_expert(arena, p, r, st);
    if (e < 0) continue;
    int64_t xb = r / p.x_rep * p.K, wb = e * p.N * p.K;
    int64_t w0 = p.wt ? wb + n * p.K : wb + n, ws = p.wt ? 1 : p.N;
    float acc = 0.0f;
    for (int64_t k = 0; k < p.K; k++)
      acc += ld_f32(x, p.xdt, xb + k) * ld_f32(w, p.wdt, w0 + k * ws);
    st_f32(y, p.odt, t, acc);
  }
}

extern "C" __global__ void rlx_gmm_f_rows(char* arena, rlxk_gmm p, rlxk_state* st) {
  const char* x = at(arena, p.xoff);
  const char* w = at(arena, p.woff);
  char* y = atw(arena, p.ooff);
  int lane = threadIdx.x & 31;
  for (int64_t t = grid_index() >> 5; t < p.M * p.N; t += grid_stride() >> 5) {
    int64_t n = t % p.N, r = t / p.N;
    int64_t e = gmm_expert(arena, p, r, st); /* the same for every lane of the warp */
    if (e < 0) continue;
    int64_t xb = r / p.x_rep * p.K, wb = (e * p.N + n) * p.K;
    float acc = 0.0f;
    for (int64_t k = lane; k < p.K; k += 32)
      acc += ld_f32(x, p.xdt, xb + k) * ld_f32(w, p.wdt, wb + k);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) st_f32(y, p.odt, t, acc);
  }
}

/* Group g of stored row (e, n): its effective scale and zero point. */
RLXK_DEV void gmm_group_scale(const char* arena, const rlxk_gmm& p, int64_t at_, float* scale,
                              int32_t* zero) {
  *scale = 1.0f;
  *zero = 0;
  if (!p.has_scale) return;
  if (p.scheme == RLX_QUANT_NVFP4) {
    float global = p.has_aux ? ld_f32(at(arena, p.aoff), p.adt, 0) : 1.0f;
    *scale = rlx_quant_nvfp4_scale(((const uint8_t*)at(arena, p.soff))[at_], global);
    return;
  }
  *scale = ld_f32(at(arena, p.soff), p.sdt, at_);
  if (p.has_aux) *zero = (int32_t)ld_i64(at(arena, p.aoff), p.adt, at_);
}

extern "C" __global__ void rlx_gmm_q(char* arena, rlxk_gmm p, rlxk_state* st) {
  const char* x = at(arena, p.xoff);
  char* y = atw(arena, p.ooff);
  int lane = threadIdx.x & 31;
  int64_t warp = grid_index() >> 5, warps = grid_stride() >> 5, groups = p.K / p.group;
  float buf[RLXK_GMM_MAX_GROUP];
  for (int64_t t = warp; t < p.M * p.N; t += warps) {
    int64_t n = t % p.N, r = t / p.N;
    int64_t e = gmm_expert(arena, p, r, st); /* the same for every lane of the warp */
    if (e < 0) continue;
    int64_t row = e * p.N + n, xb = r / p.x_rep * p.K;
    const uint8_t* wrow = (const uint8_t*)at(arena, p.woff) + row * p.row_bytes;
    float acc = 0.0f;
    for (int64_t g = lane; g < groups; g += 32) {
      float scale;
      int32_t zero;
      gmm_group_scale(arena, p, row * groups + g, &scale, &zero);
      rlx_dequant_group(p.scheme, wrow + g * p.group_bytes, p.group, scale, zero, buf);
      for (int32_t i = 0; i < p.group; i++) acc += buf[i] * ld_f32(x, p.xdt, xb + g * p.group + i);
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) st_f32(y, p.odt, t, acc);
  }
}
