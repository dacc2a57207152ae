#version 450
// Matrix-vector products (decode): C[M, N] = act(A[M, K] . B + bias) for
// M <= GEMV_MAXM rows, f32 operands, no batch. Bandwidth bound: every weight
// element is read once, as part of a 16-byte load, and used for all M rows.
// Two weight layouts (the host picks the kernel only when one of them loads
// as vec4: aligned offset, the other stride a multiple of 4):
//
//  - B[K, N] (n contiguous): a workgroup owns 16 columns; its 256
//    invocations are 4 column quads x 64 k lanes; lane l sums k = l, l + 64,
//    ... and the 64 partial sums of a quad are added in shared memory.
//  - B[N, K] (k contiguous, a transposed weight): a workgroup owns 8
//    columns, 32 lanes each; lane l sums the vec4s k = 4l, 4l + 128, ... and
//    the 32 partials are added in shared memory.
//
// f32 accumulation; the order differs from the reference's (split over
// lanes), within the f32 parity tolerance.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) buffer ArenaV4 { vec4 av4[]; };

#define GEMV_MAXM 4
shared vec4 red[GEMV_MAXM][256];

int M, N, K, a_base, a_rs, a_cs;

float a_at(int m, int k) { return uintBitsToFloat(a32[a_base + m * a_rs + k * a_cs]); }

// Adds red[m][t + s*stride] into red[m][t] for halving s: the sum of the
// `lanes` partials spaced `stride` apart lands in red[m][t % stride].
void reduce_lanes(int t, int lanes, int stride) {
  for (int s = lanes / 2; s > 0; s >>= 1) {
    if (t < s * stride)
      [[unroll]] for (int m = 0; m < GEMV_MAXM; m++)
        if (m < M) red[m][t] += red[m][t + s * stride];
    barrier();
  }
}

void finish(int c_elem, int m, int n, float v) {
  const int BIAS = RLXVK_SLOT_IN0 + 2, C = RLXVK_SLOT_OUT0;
  if (m >= M || n >= N) return;
  if (PX(MM_HAS_BIAS) != 0) v += ld_f(v_dt(BIAS), v_off(BIAS), n);
  int act = PX(MM_ACT);
  if (act != 0) v = activation(act, v);
  st_f(v_dt(C), v_off(C), c_elem + m * PX(MM_CRS) + n, v);
}

// B[K, N]: 4 column quads x 64 k lanes.
void gemv_kn(int b_base, int b_rs, int t) {
  int q = t & 3, lane = t >> 2;
  int n = int(group_linear()) * 16 + 4 * q;
  vec4 acc[GEMV_MAXM];
  [[unroll]] for (int m = 0; m < GEMV_MAXM; m++) acc[m] = vec4(0.0);
  if (n < N) {
    for (int k = lane; k < K; k += 64) {
      vec4 w = av4[(b_base + k * b_rs + n) >> 2];
      [[unroll]] for (int m = 0; m < GEMV_MAXM; m++)
        if (m < M) acc[m] = fma(vec4(a_at(m, k)), w, acc[m]);
    }
  }
  [[unroll]] for (int m = 0; m < GEMV_MAXM; m++) red[m][t] = acc[m];
  barrier();
  reduce_lanes(t, 64, 4);
  if (t < 4)
    for (int m = 0; m < M; m++)
      [[unroll]] for (int j = 0; j < 4; j++) finish(0, m, n + j, red[m][t][j]);
}

// B[N, K]: 8 columns x 32 lanes over k.
void gemv_nk(int b_base, int b_cs, int t) {
  int col = t >> 5, lane = t & 31;
  int n = int(group_linear()) * 8 + col;
  vec4 acc[GEMV_MAXM];
  [[unroll]] for (int m = 0; m < GEMV_MAXM; m++) acc[m] = vec4(0.0);
  if (n < N) {
    for (int k = 4 * lane; k < K; k += 128) {
      vec4 w = av4[(b_base + n * b_cs + k) >> 2];
      [[unroll]] for (int m = 0; m < GEMV_MAXM; m++)
        if (m < M) acc[m] = fma(vec4(a_at(m, k), a_at(m, k + 1), a_at(m, k + 2), a_at(m, k + 3)),
                                w, acc[m]);
    }
  }
  [[unroll]] for (int m = 0; m < GEMV_MAXM; m++) red[m][t] = acc[m];
  barrier();
  // Lanes of a column are consecutive: reduce over offsets 16, 8, .. 1.
  for (int s = 16; s > 0; s >>= 1) {
    if (lane < s)
      [[unroll]] for (int m = 0; m < GEMV_MAXM; m++)
        if (m < M) red[m][t] += red[m][t + s];
    barrier();
  }
  if (lane == 0)
    for (int m = 0; m < M; m++) {
      vec4 v = red[m][t];
      finish(0, m, n, (v.x + v.y) + (v.z + v.w));
    }
}

void main() {
  const int A = RLXVK_SLOT_IN0, B = RLXVK_SLOT_IN0 + 1;
  if (group_linear() >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  M = PX(MM_M);
  N = PX(MM_N);
  K = PX(MM_K);
  a_base = int(v_off(A) >> 2);
  a_rs = PX(MM_ARS);
  a_cs = PX(MM_ACS);
  int b_base = int(v_off(B) >> 2), t = int(gl_LocalInvocationID.x);
  // The output offset is added by finish() through the view (c_elem 0).
  if (PX(MM_BCS) == 1) gemv_kn(b_base, PX(MM_BRS), t);
  else gemv_nk(b_base, PX(MM_BCS), t);
}
