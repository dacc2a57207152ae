/* ElementwiseRegion interpreter (RLX_K_REGION; program format: rlxk_region
 * in params.h, compiled from the step's rlx_region_program by
 * cuda_launch.c). Each thread owns V consecutive output elements along the
 * inner dim (V == 4: the host checked the inner extent, the 4-element
 * alignment of the output and of every input stepping 1 along it; the other
 * inputs step 0 there). Inputs are read once each, through their own
 * (broadcast) strides, into a small register file; every instruction runs
 * in f32 with the same scalar functions as the unfused kernels
 * (rlx_binary_f32, rlx_act_f32) and rounds its result to the region's dtype,
 * as the unfused chain's stores do. The register file is indexed only by
 * unrolled compile-time indices (selects), so it stays in registers. */
#include "common.cuh"

template <int V>
struct rg_val {
  float v[V];
};

/* v as the region dtype stores it. */
RLXK_DEV float rg_round(int t, float v) {
  if (t == RLX_BF16) return __bfloat162float(__float2bfloat16_rn(v));
  if (t == RLX_F16) return __half2float(__float2half_rn(v));
  return v;
}

template <int V>
RLXK_DEV rg_val<V> rg_get(const rg_val<V> (&reg)[RLXK_RG_REGS], const rlxk_region& p, int a) {
  rg_val<V> out;
  if (a >= RLXK_RG_IMM) {
    float c = p.imm[a - RLXK_RG_IMM];
#pragma unroll
    for (int l = 0; l < V; l++) out.v[l] = c;
    return out;
  }
#pragma unroll
  for (int l = 0; l < V; l++) out.v[l] = 0.0f;
#pragma unroll
  for (int r = 0; r < RLXK_RG_REGS; r++)
    if (r == a) out = reg[r];
  return out;
}

template <int V>
RLXK_DEV void rg_set(rg_val<V> (&reg)[RLXK_RG_REGS], int d, const rg_val<V>& x) {
#pragma unroll
  for (int r = 0; r < RLXK_RG_REGS; r++)
    if (r == d) reg[r] = x;
}

/* Input k at the thread's element: V lanes, or one value broadcast. */
template <int V>
RLXK_DEV rg_val<V> rg_load(const char* arena, const rlxk_region& p, int k, const int32_t* idx) {
  int32_t ii = 0;
#pragma unroll
  for (int d = 0; d < RLXK_MAX_RANK; d++)
    if (d < p.rank) ii += idx[d] * p.istride[k][d];
  const char* base = at(arena, p.ioff[k]);
  rg_val<V> out;
  if (V == 4) {
    float4 x = ld4_f32(base, p.idt[k], ii, p.istride[k][p.rank - 1] != 0);
    out.v[0] = x.x;
    out.v[V > 1 ? 1 : 0] = x.y;
    out.v[V > 2 ? 2 : 0] = x.z;
    out.v[V > 3 ? 3 : 0] = x.w;
  } else {
    float x = ld_f32(base, p.idt[k], ii);
#pragma unroll
    for (int l = 0; l < V; l++) out.v[l] = x;
  }
  return out;
}

/* One instruction; returns its result. */
template <int V>
RLXK_DEV rg_val<V> rg_step(const char* arena, const rlxk_region& p, uint32_t w,
                           const rg_val<V> (&reg)[RLXK_RG_REGS], const int32_t* idx) {
  int kind = (int)(w & 15u), op = (int)((w >> 4) & 31u);
  int a = (int)((w >> 15) & 127u), b = (int)((w >> 22) & 127u);
  rg_val<V> x;
  if (kind == RLXK_RG_LOAD || kind == RLXK_RG_CAST) {
    x = rg_load<V>(arena, p, a, idx);
    if (kind == RLXK_RG_LOAD) return x;
  } else {
    x = rg_get<V>(reg, p, a);
  }
  if (kind == RLXK_RG_BINARY) {
    rg_val<V> y = rg_get<V>(reg, p, b);
#pragma unroll
    for (int l = 0; l < V; l++) x.v[l] = rlx_binary_f32(op, x.v[l], y.v[l]);
  } else if (kind == RLXK_RG_UNARY) {
#pragma unroll
    for (int l = 0; l < V; l++) x.v[l] = rlx_act_f32(op, x.v[l]);
  }
#pragma unroll
  for (int l = 0; l < V; l++) x.v[l] = rg_round(p.rdt, x.v[l]);
  return x;
}

template <int V>
__device__ void region_run(char* arena, const rlxk_region& p) {
  const int last = p.rank - 1;
  const int32_t per_row = p.shape[last] / V;
  const int64_t total = p.n / V;
  char* o = atw(arena, p.ooff);
  for (int64_t t = grid_index(); t < total; t += grid_stride()) {
    int32_t idx[RLXK_MAX_RANK];
    int32_t row = (int32_t)(t / per_row), oi = 0;
#pragma unroll
    for (int d = RLXK_MAX_RANK - 1; d >= 0; d--) {
      if (d > last) continue;
      if (d == last) {
        idx[d] = (int32_t)(t % per_row) * V;
      } else {
        idx[d] = row % p.shape[d];
        row /= p.shape[d];
      }
      oi += idx[d] * p.ostride[d];
    }
    rg_val<V> reg[RLXK_RG_REGS];
    for (int i = 0; i < p.n_ops; i++) {
      uint32_t w = p.code[i];
      rg_set<V>(reg, (int)((w >> 9) & 63u), rg_step<V>(arena, p, w, reg, idx));
    }
    rg_val<V> y = rg_get<V>(reg, p, p.out_reg);
    if (V == 4) {
      st4_f32(o, p.odt, oi, make_float4(y.v[0], y.v[V > 1 ? 1 : 0], y.v[V > 2 ? 2 : 0], y.v[V > 3 ? 3 : 0]));
    } else {
      st_f32(o, p.odt, oi, y.v[0]);
    }
  }
}

extern "C" __global__ void rlx_region4(char* arena, rlxk_region p, rlxk_state* st) { region_run<4>(arena, p); }
extern "C" __global__ void rlx_region1(char* arena, rlxk_region p, rlxk_state* st) { region_run<1>(arena, p); }
