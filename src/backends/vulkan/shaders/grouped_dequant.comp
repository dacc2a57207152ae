#version 450
// DequantGroupedMatMul (RLX_K_GROUPED_MATMUL with a quant scheme): y[r, n] =
// sum_k x[r / x_rep, k] * W[e](k, n), e = idx[r]. Expert e's W is stored
// quantized row by row and decoded by quant.glsl (the decoders DequantMatMul
// uses), its stored rows numbered across experts (row i of expert e is
// e * rows + i): with GQ_WT W[e] is [N, K] (row n holds k), else [K, N]
// (row k holds n; the gradient's role). Two builds (vk_params.c picks one
// per step):
//
//  - GQ_GEMV (decode, M <= 4): a workgroup of 64 per output element; the
//    lanes split the dot (runs of 16 along row n with GQ_WT, one element of
//    each row k otherwise) and add their partials in shared memory.
//  - GQ_TILE (prefill): a 64 x 64 tile of y over rows in idx order per
//    workgroup of 256. For each distinct expert among the tile's rows, in
//    increasing order, W[e] is dequantized a 64-n x 32-k slice at a time
//    into shared memory beside x's slice, where rows of other experts are
//    0, and that expert's rows are stored after its pass: W is decoded once
//    per tile and expert, never per row.
//
// A bad expert index is reported to the host (the run fails naming the
// node) and its row is left unwritten, as grouped_matmul.comp does. x and
// y are dense, any float dtype; f32 accumulation (the reference sums in
// double).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#define DQ_SLOT_SCALE (RLXVK_SLOT_IN0 + 3)
#define DQ_SLOT_AUX (RLXVK_SLOT_IN0 + 4)
#include "quant.glsl"

const int GQ_X = RLXVK_SLOT_IN0, GQ_IDX = RLXVK_SLOT_IN0 + 2, GQ_Y = RLXVK_SLOT_OUT0;

uint gq_xdt, gq_xoff;

float gq_x(int i) {
  if (gq_xdt == RLXVK_F32) return uintBitsToFloat(a32[(gq_xoff >> 2) + uint(i)]);
  return ld_f(gq_xdt, gq_xoff, i);
}

void gq_store(int i, float v) { st_f(v_dt(GQ_Y), v_off(GQ_Y), i, v); }

// Row r's expert, or -1 (reported) when outside [0, E).
int gq_expert(int r, int E) {
  int64_t e = ld_i(v_dt(GQ_IDX), v_off(GQ_IDX), r);
  if (e >= 0L && e < int64_t(E)) return int(e);
  report_bad_index(e, int64_t(E));
  return -1;
}

#if defined(GQ_GEMV)
layout(local_size_x = 64) in;
shared float red[64];

void main() {
  uint item = group_linear();
  if (item >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  dq_init();
  gq_xdt = v_dt(GQ_X);
  gq_xoff = v_off(GQ_X);
  int N = PX(GQ_N), K = PX(GQ_K), t = int(gl_LocalInvocationID.x);
  int n = int(item % uint(N)), r = int(item / uint(N));
  int e = gq_expert(r, PX(GQ_E));
  if (e < 0) return; // uniform: every lane read the same index
  int xb = (r / PX(GQ_XREP)) * K;
  float acc = 0.0;
  if (PX(GQ_WT) != 0) { // row e * N + n holds the dot's K weights
    uint row = uint(e) * uint(N) + uint(n);
    for (int k0 = 16 * t; k0 < K; k0 += 16 * 64) {
      DqRun run = dq_setup(row, k0);
      int len = min(16, K - k0);
      for (int j = 0; j < len; j++) acc += gq_x(xb + k0 + j) * dq_elem(run, uint(j));
    }
  } else { // weight k is element n of row e * K + k
    uint row0 = uint(e) * uint(K);
    for (int k = t; k < K; k += 64)
      acc += gq_x(xb + k) * dq_elem(dq_setup(row0 + uint(k), n & ~15), uint(n & 15));
  }
  red[t] = acc;
  barrier();
  for (int s = 32; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    barrier();
  }
  if (t == 0) gq_store(int(item), red[0]);
}

#else // GQ_TILE
layout(local_size_x = 256) in;
shared float xs[32][65]; // [k][m] of the tile's x slice, current expert's rows only
shared float ws[32][65]; // [k][n] of the current expert's dequantized W slice
shared int row_e[64];    // expert of each tile row (-1: past M or a bad index)
shared int cur_e;        // the expert of this pass (E: none left)

// The W slice of expert e at (k0, n0) into ws: 8 elements of one run per
// invocation. Elements past the stored row are 0 (quant.glsl), rows past
// the expert's are skipped.
void fill_w(int e, int k0, int n0, int N, int K, bool wt, int t) {
  if (wt) { // 64 rows n x 32 k
    int nn = t / 4, kk = 8 * (t % 4);
    bool live = n0 + nn < N && k0 + kk < K;
    DqRun run;
    if (live) run = dq_setup(uint(e) * uint(N) + uint(n0 + nn), k0 + (kk & ~15));
    for (int j = 0; j < 8; j++) ws[kk + j][nn] = live ? dq_elem(run, uint((kk & 15) + j)) : 0.0;
  } else { // 32 rows k x 64 n
    int kk = t / 8, nn = 8 * (t % 8);
    bool live = k0 + kk < K && n0 + nn < N;
    DqRun run;
    if (live) run = dq_setup(uint(e) * uint(K) + uint(k0 + kk), n0 + (nn & ~15));
    for (int j = 0; j < 8; j++) ws[kk][nn + j] = live ? dq_elem(run, uint((nn & 15) + j)) : 0.0;
  }
}

void main() {
  uint tile = group_linear();
  if (tile >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  dq_init();
  gq_xdt = v_dt(GQ_X);
  gq_xoff = v_off(GQ_X);
  int M = PX(GQ_M), N = PX(GQ_N), K = PX(GQ_K), E = PX(GQ_E), xrep = PX(GQ_XREP);
  bool wt = PX(GQ_WT) != 0;
  int tiles_n = PX(GQ_TILES_N), t = int(gl_LocalInvocationID.x);
  int m0 = int(tile) / tiles_n * 64, n0 = int(tile) % tiles_n * 64;
  int tx = t % 16, ty = t / 16;
  if (t < 64) row_e[t] = m0 + t < M ? gq_expert(m0 + t, E) : -1;
  int done = -1; // experts up to this one have been stored
  for (;;) {
    barrier();
    if (t == 0) { // the smallest expert above `done` among the rows
      int next = E;
      for (int i = 0; i < 64; i++)
        if (row_e[i] > done && row_e[i] < next) next = row_e[i];
      cur_e = next;
    }
    barrier();
    int e = cur_e; // uniform
    if (e >= E) break;
    vec4 acc[4]; // acc[i][j]: row m0 + 4 ty + i, column n0 + 4 tx + j
    [[unroll]] for (int i = 0; i < 4; i++) acc[i] = vec4(0.0);
    for (int k0 = 0; k0 < K; k0 += 32) {
      fill_w(e, k0, n0, N, K, wt, t);
      [[unroll]] for (int q = 0; q < 8; q++) { // 64 x rows x 32 k
        int i = t + 256 * q, mm = i / 32, kx = i % 32;
        int m = m0 + mm, k = k0 + kx;
        xs[kx][mm] = row_e[mm] == e && k < K ? gq_x((m / xrep) * K + k) : 0.0;
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
        int mm = 4 * ty + i, n = n0 + 4 * tx + j;
        if (row_e[mm] == e && n < N) gq_store((m0 + mm) * N + n, acc[i][j]);
      }
    done = e;
  }
}
#endif
