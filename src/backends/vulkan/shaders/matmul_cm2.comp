#version 450
// f16 x f16 matmul on workgroup-scope cooperative matrices
// (VK_NV_cooperative_matrix2): the whole workgroup owns one TM x TN f32
// accumulator, and every K slab is one TM x TK A matrix and one TK x TN B
// matrix loaded straight from the arena. The driver distributes the
// matrices over the workgroup's subgroups and stages the operands through
// shared memory itself (the extension's "compiler-managed staging"), which
// the subgroup kernel (matmul_coop.comp) has to do by hand and could not
// hide on the H100.
//
// Only whole tiles: the host picks this kernel when M, N and K are
// multiples of the tile, every operand moves as 16-byte rows (unit stride
// on one axis, the other stride, batch strides and offsets multiples of 8
// halfs), C is f16 (dense rows, 16-byte aligned), and there is no bias or
// activation; everything else runs matmul_coop.comp.
//
// Written against GL_NV_cooperative_matrix with gl_ScopeWorkgroup, the
// only cooperative-matrix GLSL Debian's glslc knows; the build re-encodes
// the SPIR-V to VK_KHR_cooperative_matrix (scripts/spirv_coopmat_khr.py),
// where a scope of Workgroup is what VK_NV_cooperative_matrix2's
// cooperativeMatrixWorkgroupScope feature allows. The workgroup size is
// the device's (VkCooperativeMatrixFlexibleDimensionsPropertiesNV::
// workgroupInvocations), given as specialization constant 0.
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#ifndef TM
#define TM 128
#endif
#ifndef TN
#define TN 128
#endif
#ifndef TK
#define TK 32
#endif
layout(local_size_x_id = 0) in;

layout(std430, set = 0, binding = 0) buffer ArenaF16 { float16_t af16[]; };

// A's K and B's K as specialization constants 90 and 91 (both TK): they keep
// the A and B types distinct and tell the KHR re-encoding which is which.
layout(constant_id = 90) const int KA = TK;
layout(constant_id = 91) const int KB = TK;
#define MAT_A fcoopmatNV<16, gl_ScopeWorkgroup, TM, KA>
#define MAT_B fcoopmatNV<16, gl_ScopeWorkgroup, KB, TN>
#define MAT_C fcoopmatNV<32, gl_ScopeWorkgroup, TM, TN>
#define MAT_H fcoopmatNV<16, gl_ScopeWorkgroup, TM, TN>

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
  int bi = int(g / uint(tiles_m * tiles_n));
  // f16 element indices of each operand's (0, 0) in this batch.
  uint a_at = v_off(A) / 2u, b_at = v_off(B) / 2u, c_at = 0u;
  int rem = bi;
  for (int d = PX(MM_BRANK) - 1; d >= 0; d--) {
    int n = PX(MM_BSHAPE + d);
    int idx = rem % n;
    rem /= n;
    a_at += uint(idx * PX(MM_ABS + d));
    b_at += uint(idx * PX(MM_BBS + d));
    c_at += uint(idx * PX(MM_CBS + d));
  }
  int a_rs = PX(MM_ARS), a_cs = PX(MM_ACS), b_rs = PX(MM_BRS), b_cs = PX(MM_BCS);
  // Row-major operands step along k by 1 element and a row is the other
  // stride; column-major ones the other way round.
  bool a_rows = a_cs == 1, b_rows = b_cs == 1;
  uint a_ld = uint(a_rows ? a_rs : a_cs), b_ld = uint(b_rows ? b_rs : b_cs);
  uint a_k = a_rows ? 1u : a_ld, b_k = b_rows ? b_ld : 1u;
  a_at += uint(origin.x) * (a_rows ? a_ld : 1u);
  b_at += uint(origin.y) * (b_rows ? 1u : b_ld);

  // A load's layout must be a constant: one copy of the loop per pair.
#define K_LOOP(A_COLS, B_COLS)                                        \
  [[dont_unroll]] for (int k0 = 0; k0 < K; k0 += TK) {               \
    MAT_A a;                                                          \
    MAT_B b;                                                          \
    coopMatLoadNV(a, af16, a_at + uint(k0) * a_k, a_ld, A_COLS);      \
    coopMatLoadNV(b, af16, b_at + uint(k0) * b_k, b_ld, B_COLS);      \
    acc = coopMatMulAddNV(a, b, acc);                                 \
  }
  MAT_C acc = MAT_C(0.0);
  if (a_rows && b_rows) K_LOOP(false, false)
  else if (a_rows) K_LOOP(false, true)
  else if (b_rows) K_LOOP(true, false)
  else K_LOOP(true, true)

  int c_rs = PX(MM_CRS);
  c_at += v_off(C) / 2u + uint(origin.x * c_rs + origin.y);
  coopMatStoreNV(MAT_H(acc), af16, c_at, uint(c_rs), false);
}
