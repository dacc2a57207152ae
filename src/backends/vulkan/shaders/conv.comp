#version 450
// Convolution as an implicit GEMM (conv.glsl's view): per group, rows m =
// (image, output pixel), columns = the group's output channels, depth k =
// (input channel, tap). A's elements are gathered from x on the fly (zero
// outside the input, or off the stride grid for ConvTranspose), so no
// im2col matrix is ever written; B is the weight.
//
// A 64x64 output tile per workgroup of 16x16 invocations; each invocation
// owns rows ty + 16*i and columns tx + 16*j (i, j < 4). K runs in 16-deep
// slabs through shared memory; the accumulators are f32 and the epilogue
// (bias, residual, activation) is applied at the store. Workgroup w takes
// tile (w % tiles) of group (w / tiles).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "conv.glsl"
layout(local_size_x = 16, local_size_y = 16) in;

#define TM 64
#define TN 64
#define TK 16
shared float As[TK][TM + 1];
shared float Bs[TK][TN + 1];

void main() {
  uint wg = group_linear();
  if (wg >= PU(RLXVK_COUNT)) return; // uniform per workgroup
  int tiles_m = PX(CV_TILES_M), tiles_n = PX(CV_TILES_N), tiles = tiles_m * tiles_n;
  int g = int(wg) / tiles, tile = int(wg) % tiles;
  int m0 = (tile / tiles_n) * TM, n0 = (tile % tiles_n) * TN;
  int M = PX(CV_M), K = PX(CV_K), ocg = PX(CV_OCG), cg = PX(CV_CG), taps = PX(CV_TAPS);
  int area = cv_out_area(), in_area = cv_in_area(), c_n = PX(CV_C);
  bool tr = cv_transpose();
  uint xdt = v_dt(CV_X), xoff = v_off(CV_X), wdt = v_dt(CV_W), woff = v_off(CV_W);
  int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y), t = ty * 16 + tx;

  // This invocation loads A row a_m (fixed across slabs) at depths a_k + 4q,
  // and B column b_n + 16q at depth b_k.
  int a_m = t % TM, a_k = t / TM, b_k = t % TK, b_n = t / TK;
  int gm = m0 + a_m;
  bool row_ok = gm < M;
  int img = row_ok ? gm / area : 0;
  ivec3 pix = cv_pixel(row_ok ? gm % area : 0);

  float acc[4][4];
  [[unroll]] for (int i = 0; i < 4; i++)
    [[unroll]] for (int j = 0; j < 4; j++) acc[i][j] = 0.0;

  for (int k0 = 0; k0 < K; k0 += TK) {
    [[unroll]] for (int q = 0; q < 4; q++) {
      int k = k0 + a_k + 4 * q;
      float v = 0.0;
      if (row_ok && k < K) {
        int c = k / taps, s = cv_tap_source(tr, pix, k % taps);
        if (s >= 0) v = ld_f(xdt, xoff, cv_act_index(img, g * cg + c, s, c_n, in_area));
      }
      As[a_k + 4 * q][a_m] = v;
      int kb = k0 + b_k, jb = n0 + b_n + 16 * q;
      float w = 0.0;
      if (kb < K && jb < ocg) w = ld_f(wdt, woff, cv_w_index(tr, g, jb, kb / taps, kb % taps));
      Bs[b_k][b_n + 16 * q] = w;
    }
    barrier();
    [[unroll]] for (int k = 0; k < TK; k++) {
      vec4 a = vec4(As[k][ty], As[k][ty + 16], As[k][ty + 32], As[k][ty + 48]);
      vec4 b = vec4(Bs[k][tx], Bs[k][tx + 16], Bs[k][tx + 32], Bs[k][tx + 48]);
      [[unroll]] for (int i = 0; i < 4; i++)
        [[unroll]] for (int j = 0; j < 4; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    barrier(); // the slab is consumed: the next one may overwrite it
  }

  [[unroll]] for (int i = 0; i < 4; i++) {
    int m = m0 + ty + 16 * i;
    if (m >= M) continue;
    int n = m / area, p = m % area;
    [[unroll]] for (int j = 0; j < 4; j++) {
      int oc = n0 + tx + 16 * j;
      if (oc < ocg) cv_store(n, g * ocg + oc, p, acc[i][j]);
    }
  }
}
