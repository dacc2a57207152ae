#version 450
// Resize (nearest / linear / cubic): one invocation per output element
// (rlx_resize_params in src/passes/lower.h). Slots: 0 out (dense), 2 x
// (dense, same rank). Mode = RLXVK_OP. Coordinates are the step's affine
// coefficients in f32; the host sends steps whose nearest rounding f32
// could change to the fallback (rlx_resize_params.f32_exact).
#include "common.glsl"
layout(local_size_x = 64) in;

const int O = RLXVK_SLOT_OUT0, X = RLXVK_SLOT_IN0;

// Nearest rounding of x (rlx_resize_round in src/base/scalar_math.h).
float round_nearest(int how, float x) {
  float f = floor(x);
  if (how == RZ_ROUND_PREFER_CEIL) return floor(x + 0.5);
  if (how == RZ_FLOOR) return f;
  if (how == RZ_ROUND_PREFER_FLOOR) return x - f == 0.5 ? f : floor(x + 0.5);
  return ceil(x);
}

// Keys cubic weight at distance t (rlx_cubic_weight).
float cubic_weight(float a, float t) {
  t = abs(t);
  if (t <= 1.0) return ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0;
  if (t < 2.0) return ((a * t - 5.0 * a) * t + 8.0 * a) * t - 4.0 * a;
  return 0.0;
}

// Taps of coordinate x along a dim of n elements (rlx_resize_taps):
// clamped indices and weights; returns how many.
int taps(int mode, float x, int n, out int idx[4], out float w[4]) {
  float f = floor(x);
  int base = int(f), cnt;
  if (mode == RZ_MODE_NEAREST) {
    idx[0] = int(round_nearest(PX(RZ_NEAREST), x));
    w[0] = 1.0;
    cnt = 1;
  } else if (mode == RZ_MODE_LINEAR) {
    idx[0] = base;
    idx[1] = base + 1;
    w[0] = 1.0 - (x - f);
    w[1] = x - f;
    cnt = 2;
  } else {
    float a = PF(RLXVK_X + RZ_CUBIC_A), sum = 0.0;
    bool excl = PX(RZ_EXCL) != 0;
    for (int k = 0; k < 4; k++) {
      idx[k] = base - 1 + k;
      w[k] = cubic_weight(a, x - float(idx[k]));
      if (excl && (idx[k] < 0 || idx[k] >= n)) w[k] = 0.0;
      sum += w[k];
    }
    if (excl && sum != 0.0)
      for (int k = 0; k < 4; k++) w[k] /= sum;
    cnt = 4;
  }
  for (int k = 0; k < cnt; k++) idx[k] = clamp(idx[k], 0, n - 1);
  return cnt;
}

void main() {
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int rank = PX(RZ_RANK), nd = PX(RZ_NDIMS), mode = P(RLXVK_OP);
  int oc[8];
  uint rem = gid;
  for (int d = rank - 1; d >= 0; d--) {
    uint n = uint(v_shape(O, d));
    oc[d] = int(rem % n);
    rem /= n;
  }
  uint odt = v_dt(O), ooff = v_off(O);
  int idx[3][4], cnt[3];
  float w[3][4];
  bool moving[8] = bool[8](false, false, false, false, false, false, false, false);
  int total = 1;
  for (int i = 0; i < nd; i++) {
    int d = PX(RZ_DIM + i), n = PX(RZ_IN + i);
    moving[d] = true;
    float x = float(oc[d]) * PF(RLXVK_X + RZ_COEF_A + i) + PF(RLXVK_X + RZ_COEF_B + i);
    if (PX(RZ_CROP) != 0 && (x < 0.0 || x > float(n - 1))) {
      st_f(odt, ooff, int(gid), PF(RLXVK_X + RZ_EXTRAP));
      return;
    }
    int ti[4];
    float tw[4];
    cnt[i] = taps(mode, x, n, ti, tw);
    for (int k = 0; k < 4; k++) { idx[i][k] = ti[k]; w[i][k] = tw[k]; }
    total *= cnt[i];
  }
  int base = 0;
  for (int d = 0; d < rank; d++)
    if (!moving[d]) base += oc[d] * v_stride(X, d);
  if (mode == RZ_MODE_NEAREST) {
    for (int i = 0; i < nd; i++) base += idx[i][0] * v_stride(X, PX(RZ_DIM + i));
    copy_elem(odt, ooff, int(gid), v_dt(X), v_off(X), base);
    return;
  }
  uint xdt = v_dt(X), xoff = v_off(X);
  float acc = 0.0;
  for (int t = 0; t < total; t++) {
    int r = t, off = base;
    float wt = 1.0;
    for (int i = nd - 1; i >= 0; i--) {
      int k = r % cnt[i];
      r /= cnt[i];
      off += idx[i][k] * v_stride(X, PX(RZ_DIM + i));
      wt *= w[i][k];
    }
    acc += wt * ld_f(xdt, xoff, off);
  }
  st_f(odt, ooff, int(gid), acc);
}
