// Convolution indexing shared by conv_direct.comp (one invocation per output
// element), conv.comp (tiled implicit GEMM) and conv_coop.comp (the same on
// f16 cooperative matrices). Include after common.glsl. The geometry is
// rlx_conv_params (src/passes/lower.h) in the CV_* words of layout.h.
//
// GEMM view, per group g: row m = (n, output pixel p), column j = output
// channel g * OCG + j, depth k = (c, tap t) with k = c * TAPS + t, so that
// a forward weight row w[oc] is contiguous in k.

const int CV_Y = RLXVK_SLOT_OUT0, CV_X = RLXVK_SLOT_IN0, CV_W = RLXVK_SLOT_IN0 + 1,
          CV_BIAS = RLXVK_SLOT_IN0 + 2, CV_RES = RLXVK_SLOT_IN0 + 3;

bool cv_transpose() { return P(RLXVK_OP) == CV_TRANSPOSE; }
int cv_out_area() { return PX(CV_OUT) * PX(CV_OUT + 1) * PX(CV_OUT + 2); }
int cv_in_area() { return PX(CV_IN) * PX(CV_IN + 1) * PX(CV_IN + 2); }

// Dense index of (image n, channel c, spatial linear index s) in an
// activation with `ch` channels and `area` pixels, in the step's layout.
int cv_act_index(int n, int c, int s, int ch, int area) {
  return PX(CV_LAST) != 0 ? (n * area + s) * ch + c : (n * ch + c) * area + s;
}

// Input coordinate that output coordinate o reads through tap k of dim d,
// or -1: outside the input, or (transpose) off the stride grid. GLSL's / and
// % are only used on non-negative operands here.
int cv_source(bool tr, int d, int o, int k) {
  int stride = PX(CV_STRIDE + d), n = PX(CV_IN + d);
  if (!tr) {
    int i = o * stride - PX(CV_PAD + d) + k * PX(CV_DIL + d);
    return i >= 0 && i < n ? i : -1;
  }
  int num = o + PX(CV_PAD + d) - k * PX(CV_DIL + d);
  if (num < 0 || num % stride != 0) return -1;
  int i = num / stride;
  return i < n ? i : -1;
}

// Spatial linear input index that output pixel o[3] reads through tap t, or -1.
int cv_tap_source(bool tr, ivec3 o, int t) {
  int k1 = PX(CV_KER + 1), k2 = PX(CV_KER + 2);
  ivec3 k = ivec3(t / (k1 * k2), (t / k2) % k1, t % k2);
  int s = 0;
  for (int d = 0; d < 3; d++) {
    int i = cv_source(tr, d, o[d], k[d]);
    if (i < 0) return -1;
    s = s * PX(CV_IN + d) + i;
  }
  return s;
}

// Output pixel p (spatial linear index) as coordinates.
ivec3 cv_pixel(int p) {
  int o1 = PX(CV_OUT + 1), o2 = PX(CV_OUT + 2);
  return ivec3(p / (o1 * o2), (p / o2) % o1, p % o2);
}

// Weight element for group g, output channel j of the group, input channel
// c of the group, tap t: w [OC, C/g, k...] forward, [C, OC/g, k...] transpose.
int cv_w_index(bool tr, int g, int j, int c, int t) {
  int cg = PX(CV_CG), ocg = PX(CV_OCG), taps = PX(CV_TAPS);
  return tr ? ((g * cg + c) * ocg + j) * taps + t : ((g * ocg + j) * cg + c) * taps + t;
}

// y[n, oc, p] = act(acc + bias[oc] + residual[n, oc, p]) (the fused epilogue).
void cv_store(int n, int oc, int p, float acc) {
  int yi = cv_act_index(n, oc, p, PX(CV_OC), cv_out_area());
  if (PX(CV_HAS_BIAS) != 0) acc += ld_f(v_dt(CV_BIAS), v_off(CV_BIAS), oc);
  if (PX(CV_HAS_RES) != 0) acc += ld_f(v_dt(CV_RES), v_off(CV_RES), yi);
  int act = PX(CV_ACT);
  if (act != RLX_ACT_NONE) acc = activation(act, acc);
  st_f(v_dt(CV_Y), v_off(CV_Y), yi, acc);
}
