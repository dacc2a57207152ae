#version 450
// Exact f32 tiled matmul: C = act(A.B + bias) over a (broadcast) batch.
// One 16x16 output tile per workgroup, K swept in 16-wide slabs through
// shared memory; accumulation in f32, any operand dtype (loaded as f32).
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;

shared float As[16][17];
shared float Bs[16][17];

void main() {
  const int A = RLXVK_SLOT_IN0, B = RLXVK_SLOT_IN0 + 1, BIAS = RLXVK_SLOT_IN0 + 2, C = RLXVK_SLOT_OUT0;
  int M = PX(MM_M), N = PX(MM_N), K = PX(MM_K);
  int tiles_n = (N + 15) / 16, tiles_m = (M + 15) / 16;
  uint g = group_linear();
  if (g >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  int tile = int(g % uint(tiles_m * tiles_n));
  int bi = int(g / uint(tiles_m * tiles_n));
  int tm = tile / tiles_n, tn = tile - tm * tiles_n;
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
  int lx = int(gl_LocalInvocationID.x), ly = int(gl_LocalInvocationID.y);
  int m = tm * 16 + ly, n = tn * 16 + lx;
  float acc = 0.0;
  for (int k0 = 0; k0 < K; k0 += 16) {
    int am = tm * 16 + ly, ak = k0 + lx;
    As[ly][lx] = (am < M && ak < K) ? ld_f(adt, aoff, ao + am * a_rs + ak * a_cs) : 0.0;
    int bk = k0 + ly, bn = tn * 16 + lx;
    Bs[ly][lx] = (bk < K && bn < N) ? ld_f(bdt, boff, bo + bk * b_rs + bn * b_cs) : 0.0;
    barrier();
    for (int k = 0; k < 16; k++) acc = fma(As[ly][k], Bs[k][lx], acc);
    barrier();
  }
  if (m < M && n < N) {
    if (PX(MM_HAS_BIAS) != 0) acc += ld_f(v_dt(BIAS), v_off(BIAS), n);
    int act = PX(MM_ACT);
    if (act != 0) acc = activation(act, acc);
    st_f(v_dt(C), v_off(C), co + m * PX(MM_CRS) + n, acc);
  }
}
