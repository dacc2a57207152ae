#version 450
// GroupedMatMul with float experts (RLX_K_GROUPED_MATMUL): one invocation
// per output element y[r, n] = sum_k x[r / x_rep, k] * W[e](k, n), e =
// idx[r]; W[e] stored [N, K] (GM_WT) or [K, N]. Products summed in f32 in
// k order. A bad expert index is reported to the host (the run fails
// naming the node) and its row is left unwritten.
#include "common.glsl"
layout(local_size_x = 64) in;

void main() {
  const int O = RLXVK_SLOT_OUT0, X = RLXVK_SLOT_IN0, W = RLXVK_SLOT_IN0 + 1,
            I = RLXVK_SLOT_IN0 + 2;
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int N = PX(GM_N), K = PX(GM_K), E = PX(GM_E), xrep = PX(GM_XREP), wt = PX(GM_WT);
  int n = int(gid % uint(N)), r = int(gid / uint(N));
  int64_t e = ld_i(v_dt(I), v_off(I), r);
  if (e < 0L || e >= int64_t(E)) { report_bad_index(e, int64_t(E)); return; }
  int xb = (r / xrep) * K, wb = int(e) * N * K;
  // element (k, n) of W[e]: [N, K] steps by 1 along k, [K, N] by N
  int w0 = wt != 0 ? wb + n * K : wb + n, ws = wt != 0 ? 1 : N;
  uint xdt = v_dt(X), xoff = v_off(X), wdt = v_dt(W), woff = v_off(W);
  float acc = 0.0;
  for (int k = 0; k < K; k++) acc += ld_f(xdt, xoff, xb + k) * ld_f(wdt, woff, w0 + k * ws);
  st_f(v_dt(O), v_off(O), int(gid), acc);
}
