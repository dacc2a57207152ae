#version 450
// Exact f32 matmul for f32 operands whose views allow 16-byte loads (the
// host checks: 16-byte aligned offsets, every non-unit stride a multiple of 4,
// the unit-stride extent a multiple of 4). C = act(A.B + bias), C f32 dense.
//
// A 128x128 output tile per workgroup of 256 invocations; each invocation
// owns an 8x8 block made of four 4x4 quads (rows 4*ty + {0..3} and
// 64 + 4*ty + {0..3}, columns likewise with tx), read from shared memory as
// vec4s, so a k step costs 4 shared loads for 64 fmas. K is swept in 16-deep
// slabs through double-buffered shared memory: the next slab is fetched from
// global memory (two vec4 loads per operand per invocation) while the
// current one is multiplied, one barrier per slab. Either operand may be
// transposed: the vec4 runs along whichever axis has unit stride.
//
// Accumulation is f32 fma in K order, as the generic kernel (matmul.comp).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 256) in;

// The arena seen as 16-byte words (same binding as common.glsl's views).
layout(std430, set = 0, binding = 0) buffer ArenaV4 { vec4 av4[]; };

#define TM 128
#define TN 128
#define TK 16
// Rows of 32 vec4s, unpadded (32 KiB in all: lavapipe's limit). The vec4
// holding m (or n) of row k sits at (m / 4) ^ SW(k): a k-fast operand's
// scalar stores (4 consecutive k of one m per invocation) then hit 32
// different banks, and a row is still read as one permutation of itself.
#define TROW 32
#define SW(k) (((k) >> 2) << 1)
shared vec4 As[2][TK][TROW]; // As[k][(m / 4) ^ SW(k)][m % 4]
shared vec4 Bs[2][TK][TROW]; // Bs[k][(n / 4) ^ SW(k)][n % 4]

int M, N, K, m0, n0, t;
int a_base, b_base, a_rs, a_cs, b_rs, b_cs; // element units, a_base/b_base include the view offset
bool a_k_fast, b_k_fast;

// Slab element e (0..511) of an operand: (row, k) for a k-fast operand, 4
// consecutive k per vec4; (k, quad) for a row-fast one.
vec4 fetch_a(int k0, int e) {
  int m, k;
  if (a_k_fast) { m = e >> 2; k = 4 * (e & 3); }
  else { m = 4 * (e & 31); k = e >> 5; }
  int gm = m0 + m, gk = k0 + k;
  if (gm >= M || gk >= K) return vec4(0.0);
  return av4[(a_base + gm * a_rs + gk * a_cs) >> 2];
}

vec4 fetch_b(int k0, int e) {
  int n, k;
  if (b_k_fast) { n = e >> 2; k = 4 * (e & 3); }
  else { n = 4 * (e & 31); k = e >> 5; }
  int gn = n0 + n, gk = k0 + k;
  if (gn >= N || gk >= K) return vec4(0.0);
  return av4[(b_base + gk * b_rs + gn * b_cs) >> 2];
}

void stash_a(int buf, int e, vec4 v) {
  if (a_k_fast) {
    int m = e >> 2, k = 4 * (e & 3);
    [[unroll]] for (int j = 0; j < 4; j++) As[buf][k + j][(m >> 2) ^ SW(k + j)][m & 3] = v[j];
  } else {
    As[buf][e >> 5][(e & 31) ^ SW(e >> 5)] = v;
  }
}

void stash_b(int buf, int e, vec4 v) {
  if (b_k_fast) {
    int n = e >> 2, k = 4 * (e & 3);
    [[unroll]] for (int j = 0; j < 4; j++) Bs[buf][k + j][(n >> 2) ^ SW(k + j)][n & 3] = v[j];
  } else {
    Bs[buf][e >> 5][(e & 31) ^ SW(e >> 5)] = v;
  }
}

// Column quad at n (a multiple of 4, N is too): bias, activation, one store.
void store_quad(int c_elem, int m, int n, vec4 v) {
  const int BIAS = RLXVK_SLOT_IN0 + 2;
  if (m >= M || n >= N) return;
  if (PX(MM_HAS_BIAS) != 0) {
    uint bdt = v_dt(BIAS), boff = v_off(BIAS);
    v += vec4(ld_f(bdt, boff, n), ld_f(bdt, boff, n + 1), ld_f(bdt, boff, n + 2),
              ld_f(bdt, boff, n + 3));
  }
  int act = PX(MM_ACT);
  if (act != 0) v = vec4(activation(act, v.x), activation(act, v.y), activation(act, v.z),
                         activation(act, v.w));
  av4[(c_elem + m * N + n) >> 2] = v;
}

// Tile order: groups of 8 tile rows, walked down the rows first, so the
// workgroups in flight share A and B panels in L2.
void tile_origin(int tile, int tiles_m, int tiles_n) {
  int per_group = 8 * tiles_n;
  int first = (tile / per_group) * 8;
  int rows = min(tiles_m - first, 8);
  int r = tile % per_group;
  m0 = (first + r % rows) * TM;
  n0 = (r / rows) * TN;
}

void main() {
  const int A = RLXVK_SLOT_IN0, B = RLXVK_SLOT_IN0 + 1, C = RLXVK_SLOT_OUT0;
  M = PX(MM_M);
  N = PX(MM_N);
  K = PX(MM_K);
  int tiles_n = (N + TN - 1) / TN, tiles_m = (M + TM - 1) / TM;
  uint g = group_linear();
  if (g >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  tile_origin(int(g % uint(tiles_m * tiles_n)), tiles_m, tiles_n);
  int bi = int(g / uint(tiles_m * tiles_n));
  // Batch index -> per-operand element offsets.
  a_base = int(v_off(A) >> 2);
  b_base = int(v_off(B) >> 2);
  int c_elem = int(v_off(C) >> 2), rem = bi;
  for (int d = PX(MM_BRANK) - 1; d >= 0; d--) {
    int n = PX(MM_BSHAPE + d);
    int idx = rem % n;
    rem /= n;
    a_base += idx * PX(MM_ABS + d);
    b_base += idx * PX(MM_BBS + d);
    c_elem += idx * PX(MM_CBS + d);
  }
  a_rs = PX(MM_ARS);
  a_cs = PX(MM_ACS);
  b_rs = PX(MM_BRS);
  b_cs = PX(MM_BCS);
  a_k_fast = a_cs == 1; // the host picked this kernel only if that layout loads as vec4
  b_k_fast = b_cs != 1;
  int tx = int(gl_LocalInvocationID.x) & 15, ty = int(gl_LocalInvocationID.x) >> 4;
  t = int(gl_LocalInvocationID.x);

  // 16 named vec4 accumulators c<row><column quad>: no arrays, so no driver
  // compiler is tempted to put them in local memory.
  vec4 c00 = vec4(0.0), c01 = vec4(0.0), c10 = vec4(0.0), c11 = vec4(0.0), c20 = vec4(0.0),
       c21 = vec4(0.0), c30 = vec4(0.0), c31 = vec4(0.0), c40 = vec4(0.0), c41 = vec4(0.0),
       c50 = vec4(0.0), c51 = vec4(0.0), c60 = vec4(0.0), c61 = vec4(0.0), c70 = vec4(0.0),
       c71 = vec4(0.0);
  vec4 ra0 = fetch_a(0, t), ra1 = fetch_a(0, t + 256);
  vec4 rb0 = fetch_b(0, t), rb1 = fetch_b(0, t + 256);
  stash_a(0, t, ra0);
  stash_a(0, t + 256, ra1);
  stash_b(0, t, rb0);
  stash_b(0, t + 256, rb1);
  barrier();
  int buf = 0;
  for (int k0 = 0; k0 < K; k0 += TK) {
    bool more = k0 + TK < K;
    if (more) { // in flight while this slab is multiplied
      ra0 = fetch_a(k0 + TK, t);
      ra1 = fetch_a(k0 + TK, t + 256);
      rb0 = fetch_b(k0 + TK, t);
      rb1 = fetch_b(k0 + TK, t + 256);
    }
    [[unroll]] for (int k = 0; k < TK; k++) {
      vec4 a0 = As[buf][k][ty ^ SW(k)], a1 = As[buf][k][(ty + 16) ^ SW(k)];
      vec4 b0 = Bs[buf][k][tx ^ SW(k)], b1 = Bs[buf][k][(tx + 16) ^ SW(k)];
#define RLX_MM_ROW(r0, r1, a) r0 = fma(vec4(a), b0, r0); r1 = fma(vec4(a), b1, r1);
      RLX_MM_ROW(c00, c01, a0.x) RLX_MM_ROW(c10, c11, a0.y) RLX_MM_ROW(c20, c21, a0.z)
      RLX_MM_ROW(c30, c31, a0.w) RLX_MM_ROW(c40, c41, a1.x) RLX_MM_ROW(c50, c51, a1.y)
      RLX_MM_ROW(c60, c61, a1.z) RLX_MM_ROW(c70, c71, a1.w)
    }
    // The other buffer was last read before the previous barrier: safe to fill.
    if (more) {
      stash_a(buf ^ 1, t, ra0);
      stash_a(buf ^ 1, t + 256, ra1);
      stash_b(buf ^ 1, t, rb0);
      stash_b(buf ^ 1, t + 256, rb1);
    }
    barrier();
    buf ^= 1;
  }

  int r0 = m0 + 4 * ty, q0 = n0 + 4 * tx, q1 = q0 + 64;
  store_quad(c_elem, r0, q0, c00); store_quad(c_elem, r0, q1, c01);
  store_quad(c_elem, r0 + 1, q0, c10); store_quad(c_elem, r0 + 1, q1, c11);
  store_quad(c_elem, r0 + 2, q0, c20); store_quad(c_elem, r0 + 2, q1, c21);
  store_quad(c_elem, r0 + 3, q0, c30); store_quad(c_elem, r0 + 3, q1, c31);
  store_quad(c_elem, r0 + 64, q0, c40); store_quad(c_elem, r0 + 64, q1, c41);
  store_quad(c_elem, r0 + 65, q0, c50); store_quad(c_elem, r0 + 65, q1, c51);
  store_quad(c_elem, r0 + 66, q0, c60); store_quad(c_elem, r0 + 66, q1, c61);
  store_quad(c_elem, r0 + 67, q0, c70); store_quad(c_elem, r0 + 67, q1, c71);
}
