// Convolution indexing shared by conv_direct.comp (one invocation per output
// element), conv.comp (tiled implicit GEMM) and conv_coop.comp (the same on
// f16 cooperative matrices). Include after common.glsl. The geometry is
// rlx_conv_params (src/passes/lower.h) in the CV_* words of layout.h.
//
// GEMM view, per group g: row m = (n, output pixel p), column j = output
// channel g * OCG + j, depth k = (c, tap t). Channels first, k = c * TAPS +
// t (a forward weight row w[oc] is contiguous in k); channels last, k = t *
// CG + c (consecutive k are consecutive channels of one input pixel).

const int CV_Y = RLXVK_SLOT_OUT0, CV_X = RLXVK_SLOT_IN0, CV_W = RLXVK_SLOT_IN0 + 1,
          CV_BIAS = RLXVK_SLOT_IN0 + 2, CV_RES = RLXVK_SLOT_IN0 + 3;

// The geometry, read once from the record (cv_init) into registers: the
// gathers below run per element, and re-reading the parameter buffer
// there costs a load per use.
bool cv_tr, cv_last;
int cv_cg, cv_ocg, cv_taps, cv_c, cv_oc, cv_in_area, cv_out_area;
ivec3 cv_in, cv_out, cv_ker, cv_stride, cv_pad, cv_dil;

void cv_init() {
  cv_tr = P(RLXVK_OP) == CV_TRANSPOSE;
  cv_last = PX(CV_LAST) != 0;
  cv_cg = PX(CV_CG); cv_ocg = PX(CV_OCG); cv_taps = PX(CV_TAPS);
  cv_c = PX(CV_C); cv_oc = PX(CV_OC);
  for (int d = 0; d < 3; d++) {
    cv_in[d] = PX(CV_IN + d); cv_out[d] = PX(CV_OUT + d); cv_ker[d] = PX(CV_KER + d);
    cv_stride[d] = PX(CV_STRIDE + d); cv_pad[d] = PX(CV_PAD + d); cv_dil[d] = PX(CV_DIL + d);
  }
  cv_in_area = cv_in.x * cv_in.y * cv_in.z;
  cv_out_area = cv_out.x * cv_out.y * cv_out.z;
}

// Depth k as (input channel of the group, tap).
void cv_split(int k, out int c, out int t) {
  if (cv_last) { t = k / cv_cg; c = k - t * cv_cg; }
  else { c = k / cv_taps; t = k - c * cv_taps; }
}

// Dense index of (image n, channel c, spatial linear index s) in an
// activation with `ch` channels and `area` pixels, in the step's layout.
int cv_act_index(int n, int c, int s, int ch, int area) {
  return cv_last ? (n * area + s) * ch + c : (n * ch + c) * area + s;
}

// Input coordinate that output coordinate o reads through tap k of dim d,
// or -1: outside the input, or (transpose) off the stride grid. GLSL's / and
// % are only used on non-negative operands here.
int cv_source(int d, int o, int k) {
  if (!cv_tr) {
    int i = o * cv_stride[d] - cv_pad[d] + k * cv_dil[d];
    return i >= 0 && i < cv_in[d] ? i : -1;
  }
  int num = o + cv_pad[d] - k * cv_dil[d];
  if (num < 0 || num % cv_stride[d] != 0) return -1;
  int i = num / cv_stride[d];
  return i < cv_in[d] ? i : -1;
}

// Spatial linear input index that output pixel o reads through tap t, or -1.
int cv_tap_source(ivec3 o, int t) {
  int i0 = cv_source(0, o.x, t / (cv_ker.y * cv_ker.z));
  int i1 = cv_source(1, o.y, (t / cv_ker.z) % cv_ker.y);
  int i2 = cv_source(2, o.z, t % cv_ker.z);
  return i0 < 0 || i1 < 0 || i2 < 0 ? -1 : (i0 * cv_in.y + i1) * cv_in.z + i2;
}

// Output pixel p (spatial linear index) as coordinates.
ivec3 cv_pixel(int p) {
  return ivec3(p / (cv_out.y * cv_out.z), (p / cv_out.z) % cv_out.y, p % cv_out.z);
}

// Weight element for group g, output channel j of the group, input channel
// c of the group, tap t: w [OC, C/g, k...] forward, [C, OC/g, k...] transpose.
int cv_w_index(int g, int j, int c, int t) {
  return cv_tr ? ((g * cv_cg + c) * cv_ocg + j) * cv_taps + t : ((g * cv_ocg + j) * cv_cg + c) * cv_taps + t;
}

// y[n, oc, p] = act(acc + bias[oc] + residual[n, oc, p]) (the fused epilogue).
void cv_store(int n, int oc, int p, float acc) {
  int yi = cv_act_index(n, oc, p, cv_oc, cv_out_area);
  if (PX(CV_HAS_BIAS) != 0) acc += ld_f(v_dt(CV_BIAS), v_off(CV_BIAS), oc);
  if (PX(CV_HAS_RES) != 0) acc += ld_f(v_dt(CV_RES), v_off(CV_RES), yi);
  int act = PX(CV_ACT);
  if (act != RLX_ACT_NONE) acc = activation(act, acc);
  st_f(v_dt(CV_Y), v_off(CV_Y), yi, acc);
}
