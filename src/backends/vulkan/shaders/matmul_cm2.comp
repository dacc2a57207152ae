#version 450
// f16 x f16 matmul on workgroup-scope cooperative matrices
// (VK_NV_cooperative_matrix2): the whole workgroup owns one TM x TN f32
// accumulator and multiplies one TM x TK A matrix by one TK x TN B matrix
// per K slab; the driver spreads the matrices over the subgroups. The slabs
// reach shared memory our way (as in matmul_coop.comp): two buffers, the
// next slab fetched into registers while the current one is multiplied, one
// barrier per slab; A rows and B rows (or B columns, for a transposed B)
// are stored as 16-byte words with one word of padding per row.
//
// Whole tiles only: the host picks this kernel when M, N and K are
// multiples of the tile, A is row-major and B row- or column-major with
// 16-byte rows (strides, batch strides and offsets multiples of 8 halfs), C
// is f16 with dense 16-byte aligned rows, and there is no bias or
// activation; everything else runs matmul_coop.comp.
//
// Written against GL_NV_cooperative_matrix with gl_ScopeWorkgroup (the
// cooperative-matrix GLSL Debian's glslc knows); the build re-encodes the
// SPIR-V to VK_KHR_cooperative_matrix (scripts/spirv_coopmat_khr.py), where
// a Workgroup scope is what VK_NV_cooperative_matrix2's
// cooperativeMatrixWorkgroupScope feature allows. Built for SPIR-V 1.6: the
// NVIDIA driver (580) gave no usable pipeline for a 1.5 module. The
// workgroup size must be one the device lists for these types
// (VkCooperativeMatrixFlexibleDimensionsPropertiesNV::workgroupInvocations):
// NT, given as specialization constant 0.
//
// H100, 4096^3 f16 (2026-11-23): 0.83 ms, 166 TFLOP/s (matmul_coop.comp:
// 0.93 ms; cuBLAS 0.19 ms). Measured there while choosing: the same kernel
// without the global loads of slabs 2.. (timing only) 0.49 ms, so the
// driver's workgroup-scope multiply alone sits above 0.5x cuBLAS; 128x256x16
// tiles 0.81 ms; 16-deep slabs of 128x128 1.34 ms; workgroup-scope matrices
// loaded straight from the arena (plain or tensor-addressing loads, no
// staging of ours) 2.1 ms at best (the driver staged nothing).
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#define TM 128
#define TN 128
#define TK 32
#define NT 256
layout(local_size_x_id = 0) in; // NT (the host checks the device lists it)

layout(std430, set = 0, binding = 0) buffer ArenaF16 { float16_t af16[]; };
layout(std430, set = 0, binding = 0) buffer ArenaU4 { uvec4 au4[]; };

// A's K and B's K as specialization constants 90 and 91 (both TK): they keep
// the A and B types distinct and tell the KHR re-encoding which is which.
layout(constant_id = 90) const int KA = TK;
layout(constant_id = 91) const int KB = TK;
#define MAT_A fcoopmatNV<16, gl_ScopeWorkgroup, TM, KA>
#define MAT_B fcoopmatNV<16, gl_ScopeWorkgroup, KB, TN>
#define MAT_C fcoopmatNV<32, gl_ScopeWorkgroup, TM, TN>
#define MAT_H fcoopmatNV<16, gl_ScopeWorkgroup, TM, TN>

// Shared rows in 16-byte words, padded by one: A[m][k]; B[k][n] (row-major
// B) or B[n][k] (column-major B).
#define AROW (TK / 8 + 1)
#define BROW_KN (TN / 8 + 1)
#define BROW_NK (TK / 8 + 1)
#define A_BUF (TM * AROW)
#define B_BUF (TN * BROW_NK > TK * BROW_KN ? TN * BROW_NK : TK * BROW_KN)
shared uvec4 As[2 * A_BUF];
shared uvec4 Bs[2 * B_BUF];
#define LOADS_A (TM * TK / 8 / NT) // 16-byte words each invocation moves per slab
#define LOADS_B (TK * TN / 8 / NT)
uvec4 ra[LOADS_A], rb[LOADS_B];

uint a_at, b_at, a_ld, b_ld; // f16 element index of the tile's (0, 0); row strides
bool b_rows;                 // B row-major (k rows of n) or column-major (n rows of k)

// Word e of a slab: row e / words-per-row, 8 halfs at 8 * (e % words-per-row).
void fetch_slab(uint k0) {
  uint t = gl_LocalInvocationID.x;
  [[unroll]] for (int i = 0; i < LOADS_A; i++) {
    uint e = t + uint(i * NT);
    ra[i] = au4[(a_at + (e / (TK / 8)) * a_ld + k0 + 8u * (e % (TK / 8))) >> 3];
  }
  [[unroll]] for (int i = 0; i < LOADS_B; i++) {
    uint e = t + uint(i * NT);
    uint at = b_rows ? b_at + (k0 + e / (TN / 8)) * b_ld + 8u * (e % (TN / 8))
                     : b_at + (e / (TK / 8)) * b_ld + k0 + 8u * (e % (TK / 8));
    rb[i] = au4[at >> 3];
  }
}

void stash_slab(int buf) {
  uint t = gl_LocalInvocationID.x;
  [[unroll]] for (int i = 0; i < LOADS_A; i++) {
    uint e = t + uint(i * NT);
    As[buf * A_BUF + (e / (TK / 8)) * AROW + e % (TK / 8)] = ra[i];
  }
  [[unroll]] for (int i = 0; i < LOADS_B; i++) {
    uint e = t + uint(i * NT);
    uint at = b_rows ? (e / (TN / 8)) * BROW_KN + e % (TN / 8) : (e / (TK / 8)) * BROW_NK + e % (TK / 8);
    Bs[buf * B_BUF + at] = rb[i];
  }
}

// Tiles are walked in bands of 8 tile rows, so the workgroups in flight
// share A rows and B columns in L2.
ivec2 tile_origin(int tile, int tiles_m, int tiles_n) {
  int per_group = 8 * tiles_n;
  int first = (tile / per_group) * 8;
  int rows = min(tiles_m - first, 8);
  int r = tile % per_group;
  return ivec2((first + r % rows) * TM, (r / rows) * TN);
}

void main() {
  const int A = RLXVK_SLOT_IN0, B = RLXVK_SLOT_IN0 + 1, C = RLXVK_SLOT_OUT0;
  int M = PX(MM_M), N = PX(MM_N), K = PX(MM_K);
  int tiles_m = M / TM, tiles_n = N / TN;
  uint g = group_linear();
  if (g >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  ivec2 origin = tile_origin(int(g % uint(tiles_m * tiles_n)), tiles_m, tiles_n);
  int rem = int(g / uint(tiles_m * tiles_n)); // batch index
  a_at = v_off(A) / 2u;
  b_at = v_off(B) / 2u;
  uint c_at = v_off(C) / 2u;
  for (int d = PX(MM_BRANK) - 1; d >= 0; d--) {
    int n = PX(MM_BSHAPE + d);
    int idx = rem % n;
    rem /= n;
    a_at += uint(idx * PX(MM_ABS + d));
    b_at += uint(idx * PX(MM_BBS + d));
    c_at += uint(idx * PX(MM_CBS + d));
  }
  b_rows = PX(MM_BCS) == 1;
  a_ld = uint(PX(MM_ARS));
  b_ld = uint(b_rows ? PX(MM_BRS) : PX(MM_BCS));
  a_at += uint(origin.x) * a_ld;
  b_at += uint(origin.y) * (b_rows ? 1u : b_ld);

  MAT_C acc = MAT_C(0.0);
  int slabs = K / TK;
  fetch_slab(0u);
  stash_slab(0);
  barrier();
  // A load's layout must be a constant: one copy of the loop per B layout.
#define SLAB_LOOP(B_COLS, B_ROW)                                                   \
  [[dont_unroll]] for (int q = 0; q < slabs; q++) {                                \
    bool more = q + 1 < slabs;                                                     \
    if (more) fetch_slab(uint((q + 1) * TK)); /* in flight during the multiply */ \
    MAT_A a;                                                                       \
    MAT_B b;                                                                       \
    coopMatLoadNV(a, As, (q & 1) * A_BUF, AROW, false);                            \
    coopMatLoadNV(b, Bs, (q & 1) * B_BUF, B_ROW, B_COLS);                          \
    acc = coopMatMulAddNV(a, b, acc);                                              \
    if (more) stash_slab((q + 1) & 1);                                             \
    barrier(); /* slab q + 1 is in; slab q's buffer may be overwritten */          \
  }
  if (b_rows) SLAB_LOOP(false, BROW_KN)
  else SLAB_LOOP(true, BROW_NK)

  int c_rs = PX(MM_CRS);
  c_at += uint(origin.x * c_rs + origin.y);
  coopMatStoreNV(MAT_H(acc), af16, c_at, uint(c_rs), false);
}
