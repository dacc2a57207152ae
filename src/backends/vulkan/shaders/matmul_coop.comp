#version 450
// f16 x f16 matmul on 16x16x16 cooperative matrices with f32 accumulation:
// C = act(A.B + bias) over a (broadcast) batch, C of any float dtype.
//
// Written against GL_NV_cooperative_matrix (what Debian's glslc knows); the
// build turns the SPIR-V into VK_KHR_cooperative_matrix form with
// scripts/spirv_coopmat_khr.py, and both modules are embedded (the device
// decides which one runs). The KHR form needs a Use (A, B, accumulator)
// on each matrix type, and A and B types must differ: A's K dimension is
// the specialization constant KA and B's is KB (both 16), which keeps the
// two types apart and tells the rewrite which is which. Built with
// spirv-opt (-O), so that the unrolled loops index the fragment and register
// arrays by constants and they stay in registers.
//
// A 128x128 output tile per workgroup of 4 x 2 subgroups of 32, each owning
// a 32x64 block of 16x16 accumulators. K runs in 32-deep slabs through two
// shared-memory buffers: while slab s is multiplied out of one, slab s+1 is
// fetched from global memory into registers and then stored into the other,
// so one barrier per slab suffices. Operands land in shared memory in their
// own layout when they can be moved as 16-byte words (A rows k-contiguous; B
// k-major or n-major), otherwise element by element into the canonical
// A[m][k] / B[k][n] layouts; tails of M, N and K are zero-filled. A tile
// that lies inside an f16 C with 16-byte aligned rows and no bias or
// activation is stored straight from the accumulators (converted to f16);
// other tiles go through a per-subgroup shared f32 staging tile for the
// bias / activation epilogue.
//
// H100 (NVIDIA Vulkan 1.4, KHR module), 4096^3 f16 -> f16: 0.93 ms, 147
// TFLOP/s, 169 registers (cuBLAS: 0.21 ms). Measured there while tuning:
// without the global loads of slabs 2.. (wrong results, timing only) the
// same kernel takes 0.57 ms, so the global -> register -> shared path is
// what is not hidden; 64x64 per subgroup (4 subgroups, 217 registers: 1.52
// ms), a 256x128 tile (0.95 ms), fetching two slabs ahead (1.09 ms), 64-deep
// single-buffered slabs (1.05 ms) and 16-deep slabs (1.36 ms) were all
// slower or no better; the earlier single-buffered kernel took 1.11 ms.
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#define SG_M 4 // subgroups along M
#define SG_N 2 // and along N
#define TK 32  // k depth of a slab
#define NSG (SG_M * SG_N)
#define NT (NSG * 32)
layout(local_size_x = NT) in;

layout(std430, set = 0, binding = 0) buffer ArenaU4 { uvec4 au4[]; };
layout(std430, set = 0, binding = 0) buffer ArenaF16 { float16_t af16[]; };

layout(constant_id = 90) const int KA = 16;
layout(constant_id = 91) const int KB = 16;
#define MAT_A fcoopmatNV<16, 3, 16, KA>
#define MAT_B fcoopmatNV<16, 3, KB, 16>
#define MAT_C fcoopmatNV<32, 3, 16, 16>
#define MAT_H fcoopmatNV<16, 3, 16, 16>

#define TM 128
#define TN 128
#define BM (TM / SG_M) // this subgroup's block
#define BN (TN / SG_N)
#define FM (BM / 16)   // its accumulators along M and N
#define FN (BN / 16)
#define WPR (TK / 8)   // 16-byte words per k-row of a slab
#define LOADS_A (TM * WPR / NT) // 16-byte words each invocation moves per slab
#define LOADS_B (TN * WPR / NT)

// The accumulators are named variables c<i><j> (FOR_I / FOR_J spell out the
// loops over them), not an array: an array of matrices stays in memory
// unless every loop around its uses unrolls, and the epilogue's loops do not.
#if FM == 2
#define FOR_I(X, a) X(0, a) X(1, a)
#elif FM == 4
#define FOR_I(X, a) X(0, a) X(1, a) X(2, a) X(3, a)
#endif
#if FN == 2
#define FOR_J(X, i) X(i, 0) X(i, 1)
#elif FN == 4
#define FOR_J(X, i) X(i, 0) X(i, 1) X(i, 2) X(i, 3)
#endif
#define FOR_IJ(X) FOR_I(FOR_J_OF, X)
#define FOR_J_OF(i, X) FOR_J(X, i)
// Shared rows in 16-byte words (8 halfs), padded by one word: rows stay
// 16-byte aligned and 8 consecutive rows start in 8 different bank groups.
#define AROW (WPR + 1)     // A[m][k]: TK k + 8
#define BROW_KN (TN / 8 + 1) // B[k][n]: 128 n + 8
#define BROW_NK (WPR + 1)  // B[n][k]: TK k + 8
#define A_BUF (TM * AROW)
#define B_BUF (TN * BROW_NK > TK * BROW_KN ? TN * BROW_NK : TK * BROW_KN)
shared uvec4 As[2 * A_BUF];
shared uvec4 Bs[2 * B_BUF];
shared float stage[NSG * 256];

#define DECL_C(i, j) MAT_C c##i##j;
FOR_IJ(DECL_C)
#define ZERO_C(i, j) c##i##j = MAT_C(0.0);
#define MMA_C(i, j) c##i##j = coopMatMulAddNV(fa[i], fb[j], c##i##j);

int M, N, K, m0, n0, t;
int a_base, b_base, a_rs, a_cs, b_rs, b_cs; // f16 element units, bases include the view offsets
bool a_vec;
int b_mode; // 0: element-wise into B[k][n]; 1: 16-byte words of B[k][n]; 2: of B[n][k]

uint ld_h(int idx) { return uint(a16[idx]); }

uvec4 pack8(uint h[8]) {
  return uvec4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

// Slot e (0..TM*WPR-1 for A, TN*WPR-1 for B) of a slab is 8 consecutive
// halfs of one shared row. One return per fetch: an early return becomes a
// loop once inlined, and a loop inside the unrolled loops keeps them rolled.
uvec4 fetch_a(int k0, int e) {
  int m = e / WPR, k = 8 * (e % WPR);
  int gm = m0 + m, gk = k0 + k;
  uvec4 w = uvec4(0u);
  if (gm < M && a_vec) {
    if (gk < K) w = au4[(a_base + gm * a_rs + gk) >> 3];
  } else if (gm < M) {
    uint h[8];
    [[unroll]] for (int j = 0; j < 8; j++) h[j] = gk + j < K ? ld_h(a_base + gm * a_rs + (gk + j) * a_cs) : 0u;
    w = pack8(h);
  }
  return w;
}

uvec4 fetch_b(int k0, int e) {
  uvec4 w = uvec4(0u);
  if (b_mode == 2) { // B[n][k]: TN rows of TK k
    int n = e / WPR, k = 8 * (e % WPR);
    int gn = n0 + n, gk = k0 + k;
    if (gn < N && gk < K) w = au4[(b_base + gn * b_cs + gk) >> 3];
  } else { // B[k][n]: TK rows of TN n
    int k = e / (TN / 8), n = 8 * (e % (TN / 8));
    int gk = k0 + k, gn = n0 + n;
    if (gk < K && b_mode == 1) {
      if (gn < N) w = au4[(b_base + gk * b_rs + gn) >> 3];
    } else if (gk < K) {
      uint h[8];
      [[unroll]] for (int j = 0; j < 8; j++) h[j] = gn + j < N ? ld_h(b_base + gk * b_rs + (gn + j) * b_cs) : 0u;
      w = pack8(h);
    }
  }
  return w;
}

void stash_a(int buf, int e, uvec4 v) { As[buf * A_BUF + (e / WPR) * AROW + (e % WPR)] = v; }

void stash_b(int buf, int e, uvec4 v) {
  int at = b_mode == 2 ? (e / WPR) * BROW_NK + (e % WPR) : (e / (TN / 8)) * BROW_KN + (e % (TN / 8));
  Bs[buf * B_BUF + at] = v;
}

// Whether an operand's views allow 16-byte words: aligned start, the
// other stride and every batch stride multiples of 8 elements.
bool batch_strides_ok(int first) {
  for (int d = 0; d < PX(MM_BRANK); d++)
    if (PX(first + d) % 8 != 0) return false;
  return true;
}

// Tiles are walked in bands of 8 tile rows, so the workgroups in flight
// share A rows and B columns in L2.
void tile_origin(int tile, int tiles_m, int tiles_n) {
  int per_group = 8 * tiles_n;
  int first = (tile / per_group) * 8;
  int rows = min(tiles_m - first, 8);
  int r = tile % per_group;
  m0 = (first + r % rows) * TM;
  n0 = (r / rows) * TN;
}

void epilogue(int c_elem, int sg, int lane, int mb, int nb) {
  const int BIAS = RLXVK_SLOT_IN0 + 2, C = RLXVK_SLOT_OUT0;
  bool has_bias = PX(MM_HAS_BIAS) != 0;
  int act = PX(MM_ACT), c_rs = PX(MM_CRS);
  uint cdt = v_dt(C), coff = v_off(C);
  [[dont_unroll]] for (int e = lane; e < 256; e += 32) {
    int m = mb + (e >> 4), n = nb + (e & 15);
    if (m >= M || n >= N) continue;
    float v = stage[sg * 256 + e];
    if (has_bias) v += ld_f(v_dt(BIAS), v_off(BIAS), n);
    if (act != 0) v = activation(act, v);
    st_f(cdt, coff, c_elem + m * c_rs + n, v);
  }
}

// Whether this tile goes straight from the accumulators to an f16 C.
bool direct_store(int c_elem) {
  const int C = RLXVK_SLOT_OUT0;
  if (PX(MM_HAS_BIAS) != 0 || PX(MM_ACT) != RLX_ACT_NONE || m0 + TM > M || n0 + TN > N) return false;
  if (v_dt(C) != RLXVK_F16 || PX(MM_CRS) % 8 != 0) return false;
  return (v_off(C) + uint(c_elem * 2)) % 16u == 0u && batch_strides_ok(MM_CBS);
}

// c += this subgroup's rows of the A slab at a_at x its columns of the B
// slab at b_at (shared-memory word indices).
void multiply_slab(int a_at, int b_at, int wn) {
  [[unroll]] for (int kk = 0; kk < TK; kk += 16) {
    MAT_A fa[FM];
    MAT_B fb[FN];
    [[unroll]] for (int i = 0; i < FM; i++)
      coopMatLoadNV(fa[i], As, a_at + 16 * i * AROW + kk / 8, AROW, false);
    [[unroll]] for (int j = 0; j < FN; j++) {
      if (b_mode == 2) coopMatLoadNV(fb[j], Bs, b_at + (wn + 16 * j) * BROW_NK + kk / 8, BROW_NK, true);
      else coopMatLoadNV(fb[j], Bs, b_at + kk * BROW_KN + (wn + 16 * j) / 8, BROW_KN, false);
    }
    FOR_IJ(MMA_C)
  }
}

// The next slab, in registers between its fetch and its store.
uvec4 ra[LOADS_A], rb[LOADS_B];

void fetch_slab(int k0) {
  [[unroll]] for (int i = 0; i < LOADS_A; i++) ra[i] = fetch_a(k0, t + i * NT);
  [[unroll]] for (int i = 0; i < LOADS_B; i++) rb[i] = fetch_b(k0, t + i * NT);
}

void stash_slab(int buf) {
  [[unroll]] for (int i = 0; i < LOADS_A; i++) stash_a(buf, t + i * NT, ra[i]);
  [[unroll]] for (int i = 0; i < LOADS_B; i++) stash_b(buf, t + i * NT, rb[i]);
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
  a_base = int(v_off(A) >> 1);
  b_base = int(v_off(B) >> 1);
  int c_elem = 0, rem = bi;
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
  a_vec = a_cs == 1 && (M == 1 || a_rs % 8 == 0) && K % 8 == 0 && v_off(A) % 16u == 0u &&
          batch_strides_ok(MM_ABS);
  bool b_words = v_off(B) % 16u == 0u && batch_strides_ok(MM_BBS);
  b_mode = 0;
  if (b_words && b_cs == 1 && (K == 1 || b_rs % 8 == 0) && N % 8 == 0) b_mode = 1;
  else if (b_words && b_rs == 1 && b_cs != 1 && b_cs % 8 == 0 && K % 8 == 0) b_mode = 2;
  t = int(gl_LocalInvocationID.x);
  int sg = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
  int wm = (sg / SG_N) * BM, wn = (sg % SG_N) * BN; // this subgroup's block in the tile

  FOR_IJ(ZERO_C)
  int slabs = (K + TK - 1) / TK;
  fetch_slab(0);
  stash_slab(0);
  barrier();
  [[dont_unroll]] for (int q = 0; q < slabs; q++) {
    bool more = q + 1 < slabs;
    if (more) fetch_slab((q + 1) * TK); // in flight while slab q is multiplied
    multiply_slab((q & 1) * A_BUF + wm * AROW, (q & 1) * B_BUF, wn);
    if (more) stash_slab((q + 1) & 1);
    barrier(); // slab q + 1 is in shared memory; slab q's buffer may be overwritten
  }

  if (direct_store(c_elem)) {
    uint c_first = v_off(C) / 2u + uint(c_elem); // C's f16 index of element (0, 0)
    int c_rs = PX(MM_CRS);
#define STORE_C(i, j) \
    coopMatStoreNV(MAT_H(c##i##j), af16, c_first + uint((m0 + wm + 16 * i) * c_rs + n0 + wn + 16 * j), c_rs, false);
    FOR_IJ(STORE_C)
  } else {
    // One block at a time through the staging tile; a loop (not unrolled)
    // keeps one copy of the epilogue code.
#define STAGE_C(i, j) if (b == i * FN + j) coopMatStoreNV(c##i##j, stage, sg * 256, 16, false);
    [[dont_unroll]] for (int b = 0; b < FM * FN; b++) {
      FOR_IJ(STAGE_C)
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      epilogue(c_elem, sg, lane, m0 + wm + 16 * (b / FN), n0 + wn + 16 * (b % FN));
      subgroupBarrier(); // the staging tile is rewritten next
    }
  }
}
