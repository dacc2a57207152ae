#version 450
// f16 x f16 matmul on 16x16x16 cooperative matrices with f32 accumulation:
// C = act(A.B + bias) over a (broadcast) batch, C of any float dtype.
//
// Written against GL_NV_cooperative_matrix (what Debian's glslc knows); the
// build turns the SPIR-V into VK_KHR_cooperative_matrix form with
// tools/spirv_coopmat_khr.py, and both modules are embedded (the device
// decides which one runs). The KHR form needs a Use (A, B, accumulator)
// on each matrix type, and A and B types must differ: A's K dimension is
// the specialization constant KA and B's is KB (both 16), which keeps the
// two types apart and tells the rewrite which is which.
//
// A 128x128 output tile per workgroup of 256 invocations (8 subgroups of
// 32, 2 x 4 of them, each owning a 64x32 block = 4x2 accumulators). K runs
// in 32-deep slabs through shared memory: the next slab is fetched from
// global memory into registers while the current one is multiplied. The
// operands land in shared memory in their own layout when they can be moved
// as 16-byte words (A rows k-contiguous; B k-major or n-major), otherwise
// element by element into the canonical A[m][k] / B[k][n] layouts; tails
// of M, N and K are zero-filled. Results go through a per-subgroup shared
// f32 staging tile for the bias / activation epilogue and the store.
//
// H100 (NVIDIA Vulkan 1.4), 4096^3 f16: 1.11 ms through the KHR module,
// 1.27 ms through the NV one. Named accumulator / fragment variables
// instead of arrays took it from 1.53 ms (see main()).
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
layout(local_size_x = 256) in;

layout(std430, set = 0, binding = 0) buffer ArenaU4 { uvec4 au4[]; };

layout(constant_id = 90) const int KA = 16;
layout(constant_id = 91) const int KB = 16;
#define MAT_A fcoopmatNV<16, 3, 16, KA>
#define MAT_B fcoopmatNV<16, 3, KB, 16>
#define MAT_C fcoopmatNV<32, 3, 16, 16>

#define TM 128
#define TN 128
// 32-deep slabs: a 64-deep build (4 words of each operand in flight per
// invocation) measured slower on the H100 (1.19 vs 1.11 ms at 4096^3).
#define TK 32
#define WPR (TK / 8) // 16-byte words per k-row of a slab
// Shared rows in 16-byte words (8 halfs), padded by one word: rows stay
// 16-byte aligned and consecutive rows start in different banks.
#define AROW (WPR + 1)    // A[m][k]: TK k + 8
#define BROW_KN 17        // B[k][n]: 128 n + 8
#define BROW_NK (WPR + 1) // B[n][k]: TK k + 8
#define BS_WORDS (TN * BROW_NK > TK * BROW_KN ? TN * BROW_NK : TK * BROW_KN)
shared uvec4 As[TM * AROW];
shared uvec4 Bs[BS_WORDS];
shared float stage[8 * 256];

int M, N, K, m0, n0, t;
int a_base, b_base, a_rs, a_cs, b_rs, b_cs; // f16 element units, bases include the view offsets
bool a_vec;
int b_mode; // 0: element-wise into B[k][n]; 1: 16-byte words of B[k][n]; 2: of B[n][k]

uint ld_h(int idx) { return uint(a16[idx]); }

// Slot e (0..TM*WPR-1) of a slab is 8 consecutive halfs of one shared row.
uvec4 fetch_a(int k0, int e) {
  int m = e / WPR, k = 8 * (e % WPR);
  int gm = m0 + m, gk = k0 + k;
  if (gm >= M) return uvec4(0u);
  if (a_vec) return gk < K ? au4[(a_base + gm * a_rs + gk) >> 3] : uvec4(0u);
  uint h[8];
  [[unroll]] for (int j = 0; j < 8; j++) h[j] = gk + j < K ? ld_h(a_base + gm * a_rs + (gk + j) * a_cs) : 0u;
  return uvec4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

uvec4 fetch_b(int k0, int e) {
  if (b_mode == 2) { // B[n][k]: 128 rows of TK k
    int n = e / WPR, k = 8 * (e % WPR);
    int gn = n0 + n, gk = k0 + k;
    return gn < N && gk < K ? au4[(b_base + gn * b_cs + gk) >> 3] : uvec4(0u);
  }
  int k = e >> 4, n = 8 * (e & 15); // B[k][n]: TK rows of 128 n
  int gk = k0 + k, gn = n0 + n;
  if (gk >= K) return uvec4(0u);
  if (b_mode == 1) return gn < N ? au4[(b_base + gk * b_rs + gn) >> 3] : uvec4(0u);
  uint h[8];
  [[unroll]] for (int j = 0; j < 8; j++) h[j] = gn + j < N ? ld_h(b_base + gk * b_rs + (gn + j) * b_cs) : 0u;
  return uvec4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

void stash(int e, uvec4 va, uvec4 vb) {
  As[(e / WPR) * AROW + (e % WPR)] = va;
  Bs[b_mode == 2 ? (e / WPR) * BROW_NK + (e % WPR) : (e >> 4) * BROW_KN + (e & 15)] = vb;
}

// Whether an operand's views allow 16-byte words: aligned start, the
// other stride and every batch stride multiples of 8 elements.
bool batch_strides_ok(int first) {
  for (int d = 0; d < PX(MM_BRANK); d++)
    if (PX(first + d) % 8 != 0) return false;
  return true;
}

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
  for (int e = lane; e < 256; e += 32) {
    int m = mb + (e >> 4), n = nb + (e & 15);
    if (m >= M || n >= N) continue;
    float v = stage[sg * 256 + e];
    if (has_bias) v += ld_f(v_dt(BIAS), v_off(BIAS), n);
    if (act != 0) v = activation(act, v);
    st_f(cdt, coff, c_elem + m * c_rs + n, v);
  }
}

// One 16x16 accumulator through this subgroup's staging tile to C.
void store_block(MAT_C acc, int c_elem, int sg, int lane, int mb, int nb) {
  coopMatStoreNV(acc, stage, sg * 256, 16, false);
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  epilogue(c_elem, sg, lane, m0 + mb, n0 + nb);
  subgroupBarrier(); // the staging tile is rewritten next
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
  int wm = (sg >> 2) * 64, wn = (sg & 3) * 32; // this subgroup's block in the tile

  // Accumulators and fragments are separate variables, not arrays: the
  // shader is built without spirv-opt, and an array of matrices indexed in
  // a loop may be kept in memory by the driver instead of registers.
  MAT_C c00 = MAT_C(0.0), c01 = MAT_C(0.0), c10 = MAT_C(0.0), c11 = MAT_C(0.0);
  MAT_C c20 = MAT_C(0.0), c21 = MAT_C(0.0), c30 = MAT_C(0.0), c31 = MAT_C(0.0);
  uvec4 ra0 = fetch_a(0, t), ra1 = fetch_a(0, t + 256);
  uvec4 rb0 = fetch_b(0, t), rb1 = fetch_b(0, t + 256);
  int a_at = wm * AROW, b_at = b_mode == 2 ? wn * BROW_NK : wn / 8;
  for (int k0 = 0; k0 < K; k0 += TK) {
    barrier(); // the previous slab has been read
    stash(t, ra0, rb0);
    stash(t + 256, ra1, rb1);
    barrier();
    if (k0 + TK < K) { // in flight while this slab is multiplied
      ra0 = fetch_a(k0 + TK, t);
      ra1 = fetch_a(k0 + TK, t + 256);
      rb0 = fetch_b(k0 + TK, t);
      rb1 = fetch_b(k0 + TK, t + 256);
    }
    [[unroll]] for (int kk = 0; kk < TK; kk += 16) {
      MAT_A a0, a1, a2, a3;
      MAT_B b0, b1;
      coopMatLoadNV(a0, As, a_at + kk / 8, AROW, false);
      coopMatLoadNV(a1, As, a_at + 16 * AROW + kk / 8, AROW, false);
      coopMatLoadNV(a2, As, a_at + 32 * AROW + kk / 8, AROW, false);
      coopMatLoadNV(a3, As, a_at + 48 * AROW + kk / 8, AROW, false);
      if (b_mode == 2) {
        coopMatLoadNV(b0, Bs, b_at + kk / 8, BROW_NK, true);
        coopMatLoadNV(b1, Bs, b_at + 16 * BROW_NK + kk / 8, BROW_NK, true);
      } else {
        coopMatLoadNV(b0, Bs, b_at + kk * BROW_KN, BROW_KN, false);
        coopMatLoadNV(b1, Bs, b_at + kk * BROW_KN + 2, BROW_KN, false);
      }
      c00 = coopMatMulAddNV(a0, b0, c00);
      c01 = coopMatMulAddNV(a0, b1, c01);
      c10 = coopMatMulAddNV(a1, b0, c10);
      c11 = coopMatMulAddNV(a1, b1, c11);
      c20 = coopMatMulAddNV(a2, b0, c20);
      c21 = coopMatMulAddNV(a2, b1, c21);
      c30 = coopMatMulAddNV(a3, b0, c30);
      c31 = coopMatMulAddNV(a3, b1, c31);
    }
  }

  store_block(c00, c_elem, sg, lane, wm, wn);
  store_block(c01, c_elem, sg, lane, wm, wn + 16);
  store_block(c10, c_elem, sg, lane, wm + 16, wn);
  store_block(c11, c_elem, sg, lane, wm + 16, wn + 16);
  store_block(c20, c_elem, sg, lane, wm + 32, wn);
  store_block(c21, c_elem, sg, lane, wm + 32, wn + 16);
  store_block(c30, c_elem, sg, lane, wm + 48, wn);
  store_block(c31, c_elem, sg, lane, wm + 48, wn + 16);
}
