#version 450
// Convolution, one invocation per output element (RLX_K_CONV's portable
// geometry): the sum over the group's input channels and the taps, then
// the fused epilogue. The kernel for depthwise convolutions (one input
// channel per group: a GEMM of depth TAPS only wastes conv.comp's tiles)
// and the fallback for any geometry. f32 accumulation in (tap, channel)
// order; x and w of any float dtype.
#include "common.glsl"
#include "conv.glsl"
layout(local_size_x = 64) in;

void main() {
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  cv_init();
  int area = cv_out_area, e = int(gid);
  // y's element e as (n, oc, p) in either layout
  int n, oc, p;
  if (cv_last) { oc = e % cv_oc; p = (e / cv_oc) % area; n = e / (cv_oc * area); }
  else { p = e % area; oc = (e / area) % cv_oc; n = e / (area * cv_oc); }
  int cg = cv_cg, g = oc / cv_ocg, j = oc % cv_ocg;
  uint xdt = v_dt(CV_X), xoff = v_off(CV_X), wdt = v_dt(CV_W), woff = v_off(CV_W);
  ivec3 o = cv_pixel(p);
  float acc = 0.0;
  for (int t = 0; t < cv_taps; t++) {
    int s = cv_tap_source(o, t);
    if (s < 0) continue;
    for (int c = 0; c < cg; c++) {
      float xv = ld_f(xdt, xoff, cv_act_index(n, g * cg + c, s, cv_c, cv_in_area));
      acc = fma(xv, ld_f(wdt, woff, cv_w_index(g, j, c, t)), acc);
    }
  }
  cv_store(n, oc, p, acc);
}
