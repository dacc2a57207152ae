#version 450
// Convolution as an implicit GEMM (conv.glsl's view): per group, rows m =
// (image, output pixel), columns = the group's output channels, depth k =
// (input channel, tap). A's elements are gathered from x on the fly (zero
// outside the input, or off the stride grid for ConvTranspose), so no
// im2col matrix is ever written; B is the weight. x and w of any float
// dtype; f32 accumulation; the epilogue (bias, residual, activation) is
// applied at the store.
//
// The tiling is matmul.comp's: a 128x128 output tile per workgroup of 16x16
// invocations, each owning an 8x8 block of four 4x4 quads (rows 4*ty +
// {0..3} and 64 + 4*ty + {0..3}, columns likewise with tx) read from shared
// memory as vec4s; K in 8-deep slabs through double-buffered shared memory,
// the next slab gathered into registers while the current one is
// multiplied. A is gathered along pixels (channels first) or channels
// (channels last), whichever is contiguous in x; the pixels an invocation
// gathers are decoded once.
// Workgroup w takes tile (w % tiles) of group (w / tiles).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "conv.glsl"
layout(local_size_x = 16, local_size_y = 16) in;

#define TM 128
#define TN 128
#define TK 8
#define TROW 33 // vec4s per shared row: 32 + 1 of padding
shared vec4 As[2][TK][TROW];
shared vec4 Bs[2][TK][TROW];

int M, K, ocg, cg, taps, g, m0, n0, t;
uint xdt, xoff, wdt, woff;

// Slot q (0..3) of this invocation's share of a slab. A: channels first,
// row t % TM (fixed: its pixel is decoded once) at depth t / TM + 2q, so
// consecutive invocations read consecutive pixels; channels last, row
// t / TK + 32q at depth t % TK, consecutive invocations reading consecutive
// channels. B: column t / TK + 32q at depth t % TK.
int a_row(int q) { return cv_last ? t / TK + 32 * q : t % TM; }
int a_depth(int q) { return cv_last ? t % TK : t / TM + 2 * q; }

// The image and pixel of each A row this invocation gathers.
int img[4];
ivec3 pix[4];
bool row_ok[4];

float gather_a(int q, int k) {
  int c, tap;
  if (!row_ok[q] || k >= K) return 0.0;
  cv_split(k, c, tap);
  int s = cv_tap_source(pix[q], tap);
  return s < 0 ? 0.0 : ld_f(xdt, xoff, cv_act_index(img[q], g * cg + c, s, cv_c, cv_in_area));
}

void fetch(int k0, out float ra[4], out float rb[4]) {
  [[unroll]] for (int q = 0; q < 4; q++) {
    ra[q] = gather_a(q, k0 + a_depth(q)); // channels first: the same row for every q
    int kb = k0 + t % TK, j = n0 + t / TK + 32 * q, c, tap;
    cv_split(kb, c, tap);
    rb[q] = kb < K && j < ocg ? ld_f(wdt, woff, cv_w_index(g, j, c, tap)) : 0.0;
  }
}

void stash(int buf, float ra[4], float rb[4]) {
  [[unroll]] for (int q = 0; q < 4; q++) {
    int am = a_row(q), ak = a_depth(q);
    As[buf][ak][am >> 2][am & 3] = ra[q];
    int bk = t % TK, bn = t / TK + 32 * q;
    Bs[buf][bk][bn >> 2][bn & 3] = rb[q];
  }
}

// Row r (0..7) of an invocation's block: column quads v0 at 4*tx, v1 at 64 + 4*tx.
void store_row(int r, int ty, int tx, vec4 v0, vec4 v1) {
  int m = m0 + 64 * (r >> 2) + 4 * ty + (r & 3);
  if (m >= M) return;
  int n = m / cv_out_area, p = m % cv_out_area;
  for (int j = 0; j < 8; j++) {
    int oc = n0 + 64 * (j >> 2) + 4 * tx + (j & 3);
    if (oc < ocg) cv_store(n, g * ocg + oc, p, (j < 4 ? v0 : v1)[j & 3]);
  }
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
  xdt = v_dt(CV_X); xoff = v_off(CV_X); wdt = v_dt(CV_W); woff = v_off(CV_W);
  int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  t = ty * 16 + tx;
  [[unroll]] for (int q = 0; q < 4; q++) {
    int gm = m0 + a_row(q);
    row_ok[q] = gm < M;
    img[q] = row_ok[q] ? gm / cv_out_area : 0;
    pix[q] = cv_pixel(row_ok[q] ? gm % cv_out_area : 0);
  }

  // 16 named vec4 accumulators, as matmul.comp (no arrays: no local memory).
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
#define RLX_CV_ROW(r0, r1, a) r0 = fma(vec4(a), b0, r0); r1 = fma(vec4(a), b1, r1);
      RLX_CV_ROW(c00, c01, a0.x) RLX_CV_ROW(c10, c11, a0.y) RLX_CV_ROW(c20, c21, a0.z)
      RLX_CV_ROW(c30, c31, a0.w) RLX_CV_ROW(c40, c41, a1.x) RLX_CV_ROW(c50, c51, a1.y)
      RLX_CV_ROW(c60, c61, a1.z) RLX_CV_ROW(c70, c71, a1.w)
    }
    // The other buffer was last read before the previous barrier: safe to fill.
    if (more) stash(buf ^ 1, ra, rb);
    barrier();
    buf ^= 1;
  }

  store_row(0, ty, tx, c00, c01);
  store_row(1, ty, tx, c10, c11);
  store_row(2, ty, tx, c20, c21);
  store_row(3, ty, tx, c30, c31);
  store_row(4, ty, tx, c40, c41);
  store_row(5, ty, tx, c50, c51);
  store_row(6, ty, tx, c60, c61);
  store_row(7, ty, tx, c70, c71);
}
