#version 450
// DequantMatMul (RLX_K_DEQUANT_MATMUL): y = x . W^T with W [N, K] stored
// quantized row by row (quant.glsl decodes runs of 16 elements), or, in
// the gradient's role, y [M, K] = x [M, N] . W. Three builds of this file
// (vk_params.c picks one per step):
//
//  - DQ_GEMV (decode, M <= DQ_GEMV_MAXM): a workgroup of 64 per W row n; lane
//    l decodes runs l, l + 64, ... once, each element used for all M rows;
//    the 64 partial sums are added in shared memory.
//  - DQ_TILE (prefill, larger M): a 64 x 64 tile of y per workgroup of 256;
//    each step dequantizes a 64-row x 32-k slice of W into shared memory
//    (never more of W than that) beside the matching x slice, and each
//    invocation accumulates a 4 x 4 block.
//  - DQ_T (the transposed role): an invocation per 4 rows of x and one
//    column k of y; it walks W's N rows, decoding element k of each.
//
// x and y are dense (kernels.def); any float dtype through ld_f / st_f.
// f32 accumulation, in an order that differs from the reference's (which
// sums in double): within the f32 parity tolerance.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "quant.glsl"

const int DQ_X = RLXVK_SLOT_IN0, DQ_Y = RLXVK_SLOT_OUT0;
#define DQ_GEMV_MAXM 4

uint dq_xdt, dq_xoff;

float dq_x(int i) {
  if (dq_xdt == RLXVK_F32) return uintBitsToFloat(a32[(dq_xoff >> 2) + uint(i)]);
  return ld_f(dq_xdt, dq_xoff, i);
}

void dq_store(int i, float v) { st_f(v_dt(DQ_Y), v_off(DQ_Y), i, v); }

#if defined(DQ_GEMV)
layout(local_size_x = 64) in;
shared float red[DQ_GEMV_MAXM][64];

void main() {
  uint n = group_linear();
  if (n >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  dq_init();
  dq_xdt = v_dt(DQ_X);
  dq_xoff = v_off(DQ_X);
  int M = PX(DQ_M), N = PX(DQ_N), runs = PX(DQ_RUNS), t = int(gl_LocalInvocationID.x);
  float acc[DQ_GEMV_MAXM];
  [[unroll]] for (int m = 0; m < DQ_GEMV_MAXM; m++) acc[m] = 0.0;
  for (int r = t; r < runs; r += 64) {
    int k0 = 16 * r, len = min(16, dq_K - k0);
    DqRun run = dq_setup(n, k0);
    for (int j = 0; j < len; j++) {
      float w = dq_elem(run, uint(j));
      [[unroll]] for (int m = 0; m < DQ_GEMV_MAXM; m++)
        if (m < M) acc[m] += dq_x(m * dq_K + k0 + j) * w;
    }
  }
  [[unroll]] for (int m = 0; m < DQ_GEMV_MAXM; m++) red[m][t] = acc[m];
  barrier();
  for (int s = 32; s > 0; s >>= 1) {
    if (t < s)
      [[unroll]] for (int m = 0; m < DQ_GEMV_MAXM; m++) red[m][t] += red[m][t + s];
    barrier();
  }
  if (t < M) dq_store(t * N + int(n), red[t][0]);
}

#elif defined(DQ_TILE)
layout(local_size_x = 256) in;
shared float xs[32][65]; // [k][m] of the tile's x slice (padded rows)
shared float ws[32][65]; // [k][n] of the dequantized W slice

void main() {
  uint tile = group_linear();
  if (tile >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  dq_init();
  dq_xdt = v_dt(DQ_X);
  dq_xoff = v_off(DQ_X);
  int M = PX(DQ_M), N = PX(DQ_N), tiles_n = PX(DQ_TILES_N), t = int(gl_LocalInvocationID.x);
  int m0 = int(tile) / tiles_n * 64, n0 = int(tile) % tiles_n * 64;
  int tx = t % 16, ty = t / 16;
  vec4 acc[4]; // acc[i][j]: row m0 + 4 ty + i, column n0 + 4 tx + j
  [[unroll]] for (int i = 0; i < 4; i++) acc[i] = vec4(0.0);
  for (int k0 = 0; k0 < dq_K; k0 += 32) {
    // 64 W rows x 32 k: invocation t decodes 8 elements of one run
    int nn = t / 4, kk = 8 * (t % 4);
    bool live = n0 + nn < N && k0 + kk < dq_K;
    DqRun run;
    if (live) run = dq_setup(uint(n0 + nn), k0 + (kk & ~15));
    for (int j = 0; j < 8; j++) ws[kk + j][nn] = live ? dq_elem(run, uint((kk & 15) + j)) : 0.0;
    [[unroll]] for (int q = 0; q < 8; q++) { // 64 x rows x 32 k
      int i = t + 256 * q, mm = i / 32, kx = i % 32;
      int m = m0 + mm, k = k0 + kx;
      xs[kx][mm] = m < M && k < dq_K ? dq_x(m * dq_K + k) : 0.0;
    }
    barrier();
    for (int k = 0; k < 32; k++) {
      vec4 b = vec4(ws[k][4 * tx], ws[k][4 * tx + 1], ws[k][4 * tx + 2], ws[k][4 * tx + 3]);
      [[unroll]] for (int i = 0; i < 4; i++) acc[i] += xs[k][4 * ty + i] * b;
    }
    barrier();
  }
  [[unroll]] for (int i = 0; i < 4; i++)
    [[unroll]] for (int j = 0; j < 4; j++) {
      int m = m0 + 4 * ty + i, n = n0 + 4 * tx + j;
      if (m < M && n < N) dq_store(m * N + n, acc[i][j]);
    }
}

#else // DQ_T: y [M, K] = x [M, N] . W
layout(local_size_x = 64) in;

// An invocation per 4 rows of x and one column k of y, walking W's rows.
void main() {
  uint item = group_linear() * 64u + gl_LocalInvocationID.x;
  if (item >= PU(RLXVK_COUNT)) return;
  dq_init();
  dq_xdt = v_dt(DQ_X);
  dq_xoff = v_off(DQ_X);
  int M = PX(DQ_M), N = PX(DQ_N);
  int m0 = 4 * (int(item) / dq_K), k = int(item) % dq_K;
  vec4 acc = vec4(0.0);
  for (int n = 0; n < N; n++) {
    float w = dq_elem(dq_setup(uint(n), k & ~15), uint(k & 15));
    [[unroll]] for (int i = 0; i < 4; i++)
      if (m0 + i < M) acc[i] += dq_x((m0 + i) * N + n) * w;
  }
  [[unroll]] for (int i = 0; i < 4; i++)
    if (m0 + i < M) dq_store((m0 + i) * dq_K + k, acc[i]);
}
#endif
