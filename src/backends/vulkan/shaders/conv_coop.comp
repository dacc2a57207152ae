#version 450
// f16 convolution as an implicit GEMM (conv.glsl's view) on 16x16x16
// cooperative matrices, f16 x f16 -> f32: x and w are f16, y, bias and
// residual any float dtype. The same NV-source / KHR-rewrite build as
// matmul_coop.comp (see there): A's K dimension is the specialization
// constant KA and B's KB, which keeps the two matrix types apart for
// scripts/spirv_coopmat_khr.py.
//
// A 64x64 output tile per workgroup of 2 x 2 subgroups of 32, each owning a
// 32x32 block of 2x2 accumulators. K runs in 32-deep slabs: each invocation
// gathers 8 consecutive depths of one A row (zero outside the input; one
// 16-byte load where they are 8 channels of one pixel) and of one B
// column, packs them into a 16-byte word and stores it in shared memory,
// A as [m][k] and B as [n][k].
// The epilogue goes through a per-subgroup f32 staging tile.
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "conv.glsl"

#define SG_M 2
#define SG_N 2
#define NT (SG_M * SG_N * 32)
layout(local_size_x = NT) in;

layout(std430, set = 0, binding = 0) buffer ArenaU4 { uvec4 au4[]; };

layout(constant_id = 90) const int KA = 16;
layout(constant_id = 91) const int KB = 16;
#define MAT_A fcoopmatNV<16, 3, 16, KA>
#define MAT_B fcoopmatNV<16, 3, KB, 16>
#define MAT_C fcoopmatNV<32, 3, 16, 16>

#define TM 64
#define TN 64
#define TK 32
#define WPR (TK / 8)      // 16-byte words per row of a slab
#define ROW (WPR + 1)     // padded: consecutive rows start in different banks
#define LOADS (TM * WPR / NT) // words each invocation gathers per operand and slab
shared uvec4 As[TM * ROW];
shared uvec4 Bs[TN * ROW];
shared float stage[SG_M * SG_N * 256];

int M, K, ocg, cg, taps, g, m0, n0;
uint xoff, woff;

uint ld_h(uint off, int idx) { return ld_u16(off + uint(idx) * 2u); }

uvec4 pack8(uint h[8]) {
  return uvec4(h[0] | h[1] << 16, h[2] | h[3] << 16, h[4] | h[5] << 16, h[6] | h[7] << 16);
}

// 8 depths k..k+7 of GEMM row gm (image img, output pixel pix). With
// a_vec (channels last, CG, C and x's offset multiples of 8 halfs) the 8
// depths are 8 channels of one tap, one 16-byte word of x.
bool a_vec;

uvec4 gather_a(bool row_ok, int img, ivec3 pix, int k) {
  if (!row_ok || k >= K) return uvec4(0u);
  if (a_vec) {
    int c, tap;
    cv_split(k, c, tap);
    int s = cv_tap_source(pix, tap);
    return s < 0 ? uvec4(0u) : au4[(xoff / 2u + uint(cv_act_index(img, g * cg + c, s, cv_c, cv_in_area))) / 8u];
  }
  uint h[8];
  [[unroll]] for (int e = 0; e < 8; e++) {
    h[e] = 0u;
    int kk = k + e, c, tap;
    cv_split(kk, c, tap);
    if (kk < K) {
      int s = cv_tap_source(pix, tap);
      if (s >= 0) h[e] = ld_h(xoff, cv_act_index(img, g * cg + c, s, cv_c, cv_in_area));
    }
  }
  return pack8(h);
}

// 8 depths k..k+7 of output channel j of the group. With b_vec (forward,
// channels first: k runs along a weight row; K and w's offset multiples of
// 8 halfs) one 16-byte word of w.
bool b_vec;

uvec4 gather_b(int j, int k) {
  if (b_vec) return j < ocg && k < K ? au4[(woff / 2u + uint((g * ocg + j) * K + k)) / 8u] : uvec4(0u);
  uint h[8];
  [[unroll]] for (int e = 0; e < 8; e++) {
    int kk = k + e, c, tap;
    cv_split(kk, c, tap);
    h[e] = j < ocg && kk < K ? ld_h(woff, cv_w_index(g, j, c, tap)) : 0u;
  }
  return pack8(h);
}

void main() {
  uint wg = group_linear();
  if (wg >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  // the host's grid: groups x ceil(M / TM) x ceil(OCG / TN) workgroups
  int tiles_m = (PX(CV_M) + TM - 1) / TM, tiles_n = (PX(CV_OCG) + TN - 1) / TN;
  int tiles = tiles_m * tiles_n;
  g = int(wg) / tiles;
  int tile = int(wg) % tiles;
  m0 = (tile / tiles_n) * TM;
  n0 = (tile % tiles_n) * TN;
  cv_init();
  M = PX(CV_M); K = PX(CV_K); ocg = cv_ocg; cg = cv_cg; taps = cv_taps;
  int area = cv_out_area;
  xoff = v_off(CV_X);
  woff = v_off(CV_W);
  a_vec = cv_last && cg % 8 == 0 && cv_c % 8 == 0 && xoff % 16u == 0u;
  b_vec = !cv_last && !cv_tr && K % 8 == 0 && woff % 16u == 0u;
  int t = int(gl_LocalInvocationID.x);
  int sg = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
  int wm = (sg / SG_N) * 32, wn = (sg % SG_N) * 32;

  // Word e = t + NT * q of a slab is row e / WPR, depths 8 * (e % WPR)..+7;
  // the rows an invocation gathers are fixed, so their pixels are decoded once.
  bool row_ok[LOADS];
  int img[LOADS];
  ivec3 pix[LOADS];
  [[unroll]] for (int q = 0; q < LOADS; q++) {
    int gm = m0 + (t + NT * q) / WPR;
    row_ok[q] = gm < M;
    img[q] = row_ok[q] ? gm / area : 0;
    pix[q] = cv_pixel(row_ok[q] ? gm % area : 0);
  }

  MAT_C c00 = MAT_C(0.0), c01 = MAT_C(0.0), c10 = MAT_C(0.0), c11 = MAT_C(0.0);
  for (int k0 = 0; k0 < K; k0 += TK) {
    [[unroll]] for (int q = 0; q < LOADS; q++) {
      int e = t + NT * q, r = e / WPR, k = k0 + 8 * (e % WPR);
      As[r * ROW + e % WPR] = gather_a(row_ok[q], img[q], pix[q], k);
      Bs[r * ROW + e % WPR] = gather_b(n0 + r, k);
    }
    barrier();
    [[unroll]] for (int kk = 0; kk < TK; kk += 16) {
      MAT_A a0, a1;
      MAT_B b0, b1;
      coopMatLoadNV(a0, As, (wm + 0) * ROW + kk / 8, ROW, false);
      coopMatLoadNV(a1, As, (wm + 16) * ROW + kk / 8, ROW, false);
      coopMatLoadNV(b0, Bs, (wn + 0) * ROW + kk / 8, ROW, true);
      coopMatLoadNV(b1, Bs, (wn + 16) * ROW + kk / 8, ROW, true);
      c00 = coopMatMulAddNV(a0, b0, c00);
      c01 = coopMatMulAddNV(a0, b1, c01);
      c10 = coopMatMulAddNV(a1, b0, c10);
      c11 = coopMatMulAddNV(a1, b1, c11);
    }
    barrier(); // the slab is consumed: the next one may overwrite it
  }

  // One 16x16 block at a time through this subgroup's staging tile.
  [[dont_unroll]] for (int b = 0; b < 4; b++) {
    if (b == 0) coopMatStoreNV(c00, stage, sg * 256, 16, false);
    if (b == 1) coopMatStoreNV(c01, stage, sg * 256, 16, false);
    if (b == 2) coopMatStoreNV(c10, stage, sg * 256, 16, false);
    if (b == 3) coopMatStoreNV(c11, stage, sg * 256, 16, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    int mb = m0 + wm + 16 * (b >> 1), nb = n0 + wn + 16 * (b & 1);
    for (int e = lane; e < 256; e += 32) {
      int m = mb + (e >> 4), j = nb + (e & 15);
      if (m < M && j < ocg) cv_store(m / area, g * ocg + j, m % area, stage[sg * 256 + e]);
    }
    subgroupBarrier(); // the staging tile is rewritten next
  }
}
