#version 450
// Exact f32 tiled matmul: C = act(A.B + bias) over a (broadcast) batch.
//
// A 128x128 output tile per workgroup of 16x16 invocations; each invocation
// computes an 8x8 block made of four 4x4 quads: rows 4*ty + {0..3} and
// 64 + 4*ty + {0..3}, the same for columns with tx. The quads are read from
// shared memory as vec4s (one 128-bit load each), so every k step costs 4
// shared loads for 64 fmas. K is swept in 8-deep slabs; shared memory is
// double-buffered and the next slab is fetched from global memory into
// registers while the current one is multiplied, so one barrier per slab.
//
// Accumulation is f32 fma in K order (each output's sum runs k = 0, 1, ...),
// the order the CPU reference uses; operands of any dtype are loaded as f32.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;

#define TM 128
#define TN 128
#define TK 8
// Row length in vec4s: 32 + 1 of padding so that stores of consecutive k
// (transposed A tiles) land in different banks.
#define TROW 33
shared vec4 As[2][TK][TROW];
shared vec4 Bs[2][TK][TROW];

// Slab loads: 1024 elements of A (128 m x 8 k) and of B (8 k x 128 n) per
// slab, 4 of each per invocation. Which index runs fastest across invocations
// follows the operand's unit stride, so global reads are coalesced for both
// plain and transposed operands.
int M, N, K, ao, bo, a_rs, a_cs, b_rs, b_cs, m0, n0, t;
uint adt, bdt, aoff, boff;
bool a_m_fast, b_n_fast;

void a_coord(int q, out int am, out int ak) {
  int e = t + 256 * q;
  if (a_m_fast) { am = e % TM; ak = e / TM; }
  else { am = e / TK; ak = e % TK; }
}
void b_coord(int q, out int bk, out int bn) {
  int e = t + 256 * q;
  if (b_n_fast) { bn = e % TN; bk = e / TN; }
  else { bn = e / TK; bk = e % TK; }
}

void fetch(int k0, out float ra[4], out float rb[4]) {
  [[unroll]] for (int q = 0; q < 4; q++) {
    int am, ak, bk, bn;
    a_coord(q, am, ak);
    int gm = m0 + am, gk = k0 + ak;
    ra[q] = (gm < M && gk < K) ? ld_f(adt, aoff, ao + gm * a_rs + gk * a_cs) : 0.0;
    b_coord(q, bk, bn);
    int hk = k0 + bk, hn = n0 + bn;
    rb[q] = (hk < K && hn < N) ? ld_f(bdt, boff, bo + hk * b_rs + hn * b_cs) : 0.0;
  }
}

void stash(int buf, float ra[4], float rb[4]) {
  [[unroll]] for (int q = 0; q < 4; q++) {
    int am, ak, bk, bn;
    a_coord(q, am, ak);
    As[buf][ak][am >> 2][am & 3] = ra[q];
    b_coord(q, bk, bn);
    Bs[buf][bk][bn >> 2][bn & 3] = rb[q];
  }
}

// Row r (0..7) of an invocation's block: columns quad v0 at 4*tx, v1 at 64 + 4*tx.
void store_row(int co, int r, int ty, int tx, vec4 v0, vec4 v1) {
  const int BIAS = RLXVK_SLOT_IN0 + 2, C = RLXVK_SLOT_OUT0;
  int m = m0 + 64 * (r >> 2) + 4 * ty + (r & 3);
  if (m >= M) return;
  bool has_bias = PX(MM_HAS_BIAS) != 0;
  int act = PX(MM_ACT), c_rs = PX(MM_CRS);
  uint cdt = v_dt(C), coff = v_off(C);
  for (int j = 0; j < 8; j++) {
    int n = n0 + 64 * (j >> 2) + 4 * tx + (j & 3);
    if (n >= N) continue;
    float v = (j < 4 ? v0 : v1)[j & 3];
    if (has_bias) v += ld_f(v_dt(BIAS), v_off(BIAS), n);
    if (act != 0) v = activation(act, v);
    st_f(cdt, coff, co + m * c_rs + n, v);
  }
}

void main() {
  const int A = RLXVK_SLOT_IN0, B = RLXVK_SLOT_IN0 + 1;
  M = PX(MM_M);
  N = PX(MM_N);
  K = PX(MM_K);
  int tiles_n = (N + TN - 1) / TN, tiles_m = (M + TM - 1) / TM;
  uint g = group_linear();
  if (g >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  int tile = int(g % uint(tiles_m * tiles_n));
  int bi = int(g / uint(tiles_m * tiles_n));
  m0 = (tile / tiles_n) * TM;
  n0 = (tile % tiles_n) * TN;
  // Unravel the batch index into per-operand element offsets.
  ao = 0;
  bo = 0;
  int co = 0, rem = bi;
  for (int d = PX(MM_BRANK) - 1; d >= 0; d--) {
    int n = PX(MM_BSHAPE + d);
    int idx = rem % n;
    rem /= n;
    ao += idx * PX(MM_ABS + d);
    bo += idx * PX(MM_BBS + d);
    co += idx * PX(MM_CBS + d);
  }
  a_rs = PX(MM_ARS);
  a_cs = PX(MM_ACS);
  b_rs = PX(MM_BRS);
  b_cs = PX(MM_BCS);
  a_m_fast = a_rs == 1 && a_cs != 1;
  b_n_fast = b_cs == 1 || b_rs != 1;
  adt = v_dt(A);
  bdt = v_dt(B);
  aoff = v_off(A);
  boff = v_off(B);
  int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  t = ty * 16 + tx;

  // 16 named vec4 accumulators (row r, column quad h): no arrays, so no
  // driver compiler can put them in local memory. c<r><h>.
  vec4 c00 = vec4(0.0), c01 = vec4(0.0), c10 = vec4(0.0), c11 = vec4(0.0), c20 = vec4(0.0),
       c21 = vec4(0.0), c30 = vec4(0.0), c31 = vec4(0.0), c40 = vec4(0.0), c41 = vec4(0.0),
       c50 = vec4(0.0), c51 = vec4(0.0), c60 = vec4(0.0), c61 = vec4(0.0), c70 = vec4(0.0),
       c71 = vec4(0.0);
  float ra[4], rb[4];
  fetch(0, ra, rb);
  stash(0, ra, rb);
  barrier();
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += TK) {
    bool more = k0 + TK < K;
    if (more) fetch(k0 + TK, ra, rb); // in flight while this slab is multiplied
    [[unroll]] for (int k = 0; k < TK; k++) {
      vec4 a0 = As[buf][k][ty], a1 = As[buf][k][ty + 16];
      vec4 b0 = Bs[buf][k][tx], b1 = Bs[buf][k][tx + 16];
#define RLX_MM_ROW(r0, r1, a) r0 = fma(vec4(a), b0, r0); r1 = fma(vec4(a), b1, r1);
      RLX_MM_ROW(c00, c01, a0.x) RLX_MM_ROW(c10, c11, a0.y) RLX_MM_ROW(c20, c21, a0.z)
      RLX_MM_ROW(c30, c31, a0.w) RLX_MM_ROW(c40, c41, a1.x) RLX_MM_ROW(c50, c51, a1.y)
      RLX_MM_ROW(c60, c61, a1.z) RLX_MM_ROW(c70, c71, a1.w)
    }
    // The other buffer was last read before the previous barrier: safe to fill.
    if (more) stash(buf ^ 1, ra, rb);
    barrier();
    buf ^= 1;
  }

  store_row(co, 0, ty, tx, c00, c01);
  store_row(co, 1, ty, tx, c10, c11);
  store_row(co, 2, ty, tx, c20, c21);
  store_row(co, 3, ty, tx, c30, c31);
  store_row(co, 4, ty, tx, c40, c41);
  store_row(co, 5, ty, tx, c50, c51);
  store_row(co, 6, ty, tx, c60, c61);
  store_row(co, 7, ty, tx, c70, c71);
}
