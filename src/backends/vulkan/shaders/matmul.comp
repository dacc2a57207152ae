#version 450
// Exact f32 tiled matmul: C = act(A.B + bias) over a (broadcast) batch.
// A 64x64 output tile per workgroup of 16x16 invocations, each computing a
// 4x4 block (rows ty + 16i, cols tx + 16j: conflict-free shared reads); K is
// swept in 16-deep slabs staged through shared memory. Accumulation is f32
// fma in K order; operands of any dtype are loaded as f32.
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;

#define TM 64
#define TN 64
#define TK 16
shared float As[TK][TM + 1];
shared float Bs[TK][TN + 1];

void main() {
  const int A = RLXVK_SLOT_IN0, B = RLXVK_SLOT_IN0 + 1, BIAS = RLXVK_SLOT_IN0 + 2, C = RLXVK_SLOT_OUT0;
  int M = PX(MM_M), N = PX(MM_N), K = PX(MM_K);
  int tiles_n = (N + TN - 1) / TN, tiles_m = (M + TM - 1) / TM;
  uint g = group_linear();
  if (g >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  int tile = int(g % uint(tiles_m * tiles_n));
  int bi = int(g / uint(tiles_m * tiles_n));
  int m0 = (tile / tiles_n) * TM, n0 = (tile % tiles_n) * TN;
  // Unravel the batch index into per-operand element offsets.
  int ao = 0, bo = 0, co = 0, rem = bi;
  for (int d = PX(MM_BRANK) - 1; d >= 0; d--) {
    int n = PX(MM_BSHAPE + d);
    int idx = rem % n;
    rem /= n;
    ao += idx * PX(MM_ABS + d);
    bo += idx * PX(MM_BBS + d);
    co += idx * PX(MM_CBS + d);
  }
  int a_rs = PX(MM_ARS), a_cs = PX(MM_ACS), b_rs = PX(MM_BRS), b_cs = PX(MM_BCS);
  uint adt = v_dt(A), bdt = v_dt(B), aoff = v_off(A), boff = v_off(B);
  int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  int t = ty * 16 + tx;
  float acc[4][4];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0;
  for (int k0 = 0; k0 < K; k0 += TK) {
    for (int q = 0; q < 4; q++) {
      int e = t + 256 * q;
      int am = e / TK, ak = e % TK; // A tile: 64 rows x 16 k, k fastest
      int gm = m0 + am, gk = k0 + ak;
      As[ak][am] = (gm < M && gk < K) ? ld_f(adt, aoff, ao + gm * a_rs + gk * a_cs) : 0.0;
      int bk = e / TN, bn = e % TN; // B tile: 16 k x 64 cols, n fastest
      int hk = k0 + bk, hn = n0 + bn;
      Bs[bk][bn] = (hk < K && hn < N) ? ld_f(bdt, boff, bo + hk * b_rs + hn * b_cs) : 0.0;
    }
    barrier();
    for (int k = 0; k < TK; k++) {
      float a[4], b[4];
      for (int i = 0; i < 4; i++) a[i] = As[k][ty + 16 * i];
      for (int j = 0; j < 4; j++) b[j] = Bs[k][tx + 16 * j];
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier();
  }
  bool has_bias = PX(MM_HAS_BIAS) != 0;
  int act = PX(MM_ACT), c_rs = PX(MM_CRS);
  uint cdt = v_dt(C), coff = v_off(C);
  for (int j = 0; j < 4; j++) {
    int n = n0 + tx + 16 * j;
    if (n >= N) continue;
    float bias = has_bias ? ld_f(v_dt(BIAS), v_off(BIAS), n) : 0.0;
    for (int i = 0; i < 4; i++) {
      int m = m0 + ty + 16 * i;
      if (m >= M) continue;
      float v = acc[i][j] + bias;
      if (act != 0) v = activation(act, v);
      st_f(cdt, coff, co + m * c_rs + n, v);
    }
  }
}
