#version 450
// Pool (max / average windows) and Pad (constant, reflect, edge): one
// invocation per output element (rlx_pool_params in src/passes/lower.h).
// Slots: 0 out (dense), 2 x (dense, same rank). Mode = RLXVK_OP.
#include "common.glsl"
layout(local_size_x = 64) in;

const int O = RLXVK_SLOT_OUT0, X = RLXVK_SLOT_IN0;

// GLSL leaves % undefined for a negative operand (NVIDIA's driver and
// lavapipe disagree), so both folds below take the remainder of i >= 0 only.
// Reflection is symmetric about 0 (reflect(-i) == reflect(i)).
int reflect_index(int i, int n) {
  if (n == 1) return 0;
  int period = 2 * (n - 1);
  int m = (i < 0 ? -i : i) % period;
  return m < n ? m : period - m;
}

// Periodic continuation: -1 -> n-1, -n -> 0.
int wrap_index(int i, int n) {
  return i >= 0 ? i % n : n - 1 - (-i - 1) % n;
}

// Source element of a padded output element, or -1 for the fill value.
int pad_source(int mode, int oc[8], int rank) {
  int off = 0;
  for (int d = 0; d < rank; d++) {
    int n = v_shape(X, d), i = oc[d] - PX(PL_PAD + d);
    if (i < 0 || i >= n) {
      if (mode == PL_PAD_CONSTANT) return -1;
      if (mode == PL_PAD_EDGE) i = i < 0 ? 0 : n - 1;
      else if (mode == PL_PAD_WRAP) i = wrap_index(i, n);
      else i = reflect_index(i, n);
    }
    off += i * v_stride(X, d);
  }
  return off;
}

// The max / average of the window; `at` receives the input index of the
// first maximum (-1 if no tap is inside).
float pool_window(int mode, int oc[8], int rank, out int at) {
  uint xdt = v_dt(X), xoff = v_off(X);
  float acc = mode == PL_MAX ? -INF_F : 0.0;
  int inside = 0, padded = 0;
  at = -1;
  int taps = PX(PL_TAPS);
  for (int t = 0; t < taps; t++) {
    int rem = t, off = 0;
    bool in_x = true, in_pad = true;
    for (int d = rank - 1; d >= 0; d--) {
      int kd = PX(PL_KERNEL + d);
      int k = rem % kd;
      rem /= kd;
      int pad = PX(PL_PAD + d), n = v_shape(X, d);
      int i = oc[d] * PX(PL_STRIDE + d) - pad + k * PX(PL_DIL + d);
      if (i < 0 || i >= n) in_x = false;
      if (i < -pad || i >= n + PX(PL_PAD_END + d)) in_pad = false;
      off += i * v_stride(X, d);
    }
    if (in_pad) padded++;
    if (!in_x) continue;
    inside++;
    float v = ld_f(xdt, xoff, off);
    if (mode != PL_MAX) acc += v;
    else if (at < 0 || ((v > acc || isnan(v)) && !isnan(acc))) { acc = v; at = off; }
  }
  if (mode == PL_MAX) return acc;
  int count = PX(PL_CIP) != 0 ? padded : inside;
  return count > 0 ? acc / float(count) : NAN_F;
}

void main() {
  uint gid = group_linear() * 64u + gl_LocalInvocationID.x;
  if (gid >= PU(RLXVK_COUNT)) return;
  int rank = PX(PL_RANK), mode = P(RLXVK_OP);
  int oc[8];
  uint rem = gid;
  for (int d = rank - 1; d >= 0; d--) {
    uint n = uint(v_shape(O, d));
    oc[d] = int(rem % n);
    rem /= n;
  }
  uint odt = v_dt(O), ooff = v_off(O);
  if (mode >= PL_PAD_CONSTANT) {
    int src = pad_source(mode, oc, rank);
    if (src < 0) st_f(odt, ooff, int(gid), PF(RLXVK_X + PL_VALUE));
    else copy_elem(odt, ooff, int(gid), v_dt(X), v_off(X), src);
    return;
  }
  int at;
  float v = pool_window(mode, oc, rank, at);
  if (PX(PL_INDEX_OUT) != 0) st_i(odt, ooff, int(gid), int64_t(at));
  else st_f(odt, ooff, int(gid), v);
}
